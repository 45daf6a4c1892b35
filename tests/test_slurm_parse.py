"""Readers of Slurm's output and the Recorder, on output recorded from the local Slurm (22.05.8).

FULL is one `scontrol -o show job` exactly as printed during the preemption run (both low jobs just
requeued, h1 running). BACKFILL and PREEMPT are the polls of the two example runs, each poll reduced
to the keys the Recorder reads and kept only when a job's state, reason, restarts or nodes changed;
`@ t` is when the poll was taken, in seconds after the run's t0.
"""

from __future__ import annotations

import math
from pathlib import Path

import labkit
from labkit.slurm import parse
from labkit.slurm.conf import slurm_jobs, slurm_scenario
from labkit.slurm.observe import Recorder, state_word

FULL = """\
JobId=4 JobName=l1 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1281 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:10:00 TimeMin=N/A SubmitTime=2026-12-02T15:43:53 EligibleTime=2026-12-02T15:45:54 AccrueTime=2026-12-02T15:45:54 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-02T15:43:49 Scheduler=Main Partition=low AllocNode:Sid=localhost:24634 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=16000M,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/st2/jobs/default.l1.sbatch WorkDir=/tmp/rec StdErr=/tmp/st2/out/l1-4.out StdIn=/dev/null StdOut=/tmp/st2/out/l1-4.out Power= TresPerNode=gres:gpu:8 
JobId=5 JobName=l2 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1281 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:10:00 TimeMin=N/A SubmitTime=2026-12-02T15:43:53 EligibleTime=2026-12-02T15:45:54 AccrueTime=2026-12-02T15:45:54 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-02T15:43:49 Scheduler=Main Partition=low AllocNode:Sid=localhost:24634 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=16000M,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/st2/jobs/default.l2.sbatch WorkDir=/tmp/rec StdErr=/tmp/st2/out/l2-5.out StdIn=/dev/null StdOut=/tmp/st2/out/l2-5.out Power= TresPerNode=gres:gpu:4 
JobId=6 JobName=h1 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1421 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:04 TimeLimit=00:05:00 TimeMin=N/A SubmitTime=2026-12-02T15:43:52 EligibleTime=2026-12-02T15:43:52 AccrueTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:48:53 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-02T15:43:53 Scheduler=Main Partition=high AllocNode:Sid=localhost:24634 ReqNodeList=(null) ExcNodeList=(null) NodeList=n-[1-3] BatchHost=n-1 NumNodes=3 NumCPUs=3 NumTasks=3 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=3,node=3,billing=3 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/st2/jobs/default.h1.sbatch WorkDir=/tmp/rec StdErr=/tmp/st2/out/h1-6.out StdIn=/dev/null StdOut=/tmp/st2/out/h1-6.out Power= TresPerNode=gres:gpu:8 
"""

BACKFILL = """\
t0 2026-12-02T15:49:44
@ 0.2
JobId=31 JobName=a Priority=1421 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
@ 1.2
JobId=31 JobName=a Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:45 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
@ 2.2
JobId=31 JobName=a Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:45 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
@ 3.2
JobId=31 JobName=a Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:45 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=gpu NodeList=
@ 6.2
JobId=31 JobName=a Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:45 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:45 EndTime=2026-12-02T15:53:45 Scheduler=Backfill:* Partition=gpu NodeList=
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:53:00 EndTime=2026-12-02T15:58:00 Scheduler=Backfill:* Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:50 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 26.4
JobId=31 JobName=a Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:45 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:45 EndTime=2026-12-02T15:53:45 Scheduler=Main Partition=gpu NodeList=
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:53:00 EndTime=2026-12-02T15:58:00 Scheduler=Main Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 91.2
JobId=31 JobName=a Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:15 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:45 EndTime=2026-12-02T15:53:45 Scheduler=Backfill:* Partition=gpu NodeList=
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Priority Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:53:00 EndTime=2026-12-02T15:58:00 Scheduler=Backfill:* Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 92.2
JobId=31 JobName=a Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:15 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:15 EndTime=2026-12-02T15:53:15 Scheduler=Main Partition=gpu NodeList=n-[0-3]
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:53:00 EndTime=2026-12-02T15:58:00 Scheduler=Main Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 102.2
JobId=31 JobName=a Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:15 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:15 EndTime=2026-12-02T15:51:25 Scheduler=Main Partition=gpu NodeList=n-[0-3]
JobId=33 JobName=d Priority=1140 JobState=PENDING Reason=Resources Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:53:15 EndTime=2026-12-02T15:58:15 Scheduler=Backfill:* Partition=gpu NodeList=
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 103.2
JobId=31 JobName=a Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:15 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:15 EndTime=2026-12-02T15:51:25 Scheduler=Main Partition=gpu NodeList=n-[0-3]
JobId=33 JobName=d Priority=1140 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:51:26 EndTime=2026-12-02T15:56:26 Scheduler=Main Partition=gpu NodeList=n-0
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
@ 113.2
JobId=31 JobName=a Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:44 StartTime=2026-12-02T15:49:45 EndTime=2026-12-02T15:51:15 Scheduler=Backfill Partition=gpu NodeList=n-[0-2]
JobId=32 JobName=b Priority=1562 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:45 StartTime=2026-12-02T15:51:15 EndTime=2026-12-02T15:51:25 Scheduler=Main Partition=gpu NodeList=n-[0-3]
JobId=33 JobName=d Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:46 StartTime=2026-12-02T15:51:26 EndTime=2026-12-02T15:51:36 Scheduler=Main Partition=gpu NodeList=n-0
JobId=34 JobName=c Priority=1140 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:49:47 StartTime=2026-12-02T15:49:50 EndTime=2026-12-02T15:50:10 Scheduler=Backfill Partition=gpu NodeList=n-3
"""

PREEMPT = """\
t0 2026-12-02T15:43:47
@ 0.2
JobId=4 JobName=l1 Priority=1281 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:47 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=low NodeList=
@ 1.2
JobId=4 JobName=l1 Priority=1281 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:47 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=low NodeList=
JobId=5 JobName=l2 Priority=1281 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:48 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=low NodeList=
@ 2.2
JobId=4 JobName=l1 Priority=1281 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:47 StartTime=2026-12-02T15:43:49 EndTime=2026-12-02T15:53:49 Scheduler=Main Partition=low NodeList=n-[0-1]
JobId=5 JobName=l2 Priority=1281 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:48 StartTime=2026-12-02T15:43:49 EndTime=2026-12-02T15:53:49 Scheduler=Main Partition=low NodeList=n-[2-3]
@ 5.2
JobId=4 JobName=l1 Priority=1281 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:47 StartTime=2026-12-02T15:43:49 EndTime=2026-12-02T15:53:49 Scheduler=Main Partition=low NodeList=n-[0-1]
JobId=5 JobName=l2 Priority=1281 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:48 StartTime=2026-12-02T15:43:49 EndTime=2026-12-02T15:53:49 Scheduler=Main Partition=low NodeList=n-[2-3]
JobId=6 JobName=h1 Priority=1421 JobState=PENDING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=Unknown EndTime=Unknown Scheduler=Main Partition=high NodeList=
@ 6.2
JobId=4 JobName=l1 Priority=1281 JobState=COMPLETING Reason=None Restarts=1 SubmitTime=2026-12-02T15:43:47 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:53:53 Scheduler=Main Partition=low NodeList=n-0
JobId=5 JobName=l2 Priority=1281 JobState=PENDING Reason=BeginTime Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Scheduler=Main Partition=low NodeList=
JobId=6 JobName=h1 Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:48:53 Scheduler=Main Partition=high NodeList=n-[1-3]
@ 6.7
JobId=4 JobName=l1 Priority=1281 JobState=PENDING Reason=BeginTime Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Scheduler=Main Partition=low NodeList=
JobId=5 JobName=l2 Priority=1281 JobState=PENDING Reason=BeginTime Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Scheduler=Main Partition=low NodeList=
JobId=6 JobName=h1 Priority=1421 JobState=RUNNING Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:48:53 Scheduler=Main Partition=high NodeList=n-[1-3]
@ 26.7
JobId=4 JobName=l1 Priority=1281 JobState=PENDING Reason=BeginTime Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Scheduler=Main Partition=low NodeList=
JobId=5 JobName=l2 Priority=1281 JobState=PENDING Reason=BeginTime Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:45:54 EndTime=2026-12-02T15:55:54 Scheduler=Main Partition=low NodeList=
JobId=6 JobName=h1 Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:44:13 Scheduler=Main Partition=high NodeList=n-[1-3]
@ 179.5
JobId=4 JobName=l1 Priority=1281 JobState=RUNNING Reason=None Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:46:46 EndTime=2026-12-02T15:56:46 Scheduler=Main Partition=low NodeList=n-[0-1]
JobId=5 JobName=l2 Priority=1281 JobState=RUNNING Reason=None Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:46:46 EndTime=2026-12-02T15:56:46 Scheduler=Main Partition=low NodeList=n-[2-3]
JobId=6 JobName=h1 Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:44:13 Scheduler=Main Partition=high NodeList=n-[1-3]
@ 299.3
JobId=4 JobName=l1 Priority=1281 JobState=COMPLETED Reason=None Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:46:46 EndTime=2026-12-02T15:48:46 Scheduler=Main Partition=low NodeList=n-[0-1]
JobId=5 JobName=l2 Priority=1281 JobState=COMPLETED Reason=None Restarts=1 SubmitTime=2026-12-02T15:43:53 StartTime=2026-12-02T15:46:46 EndTime=2026-12-02T15:48:46 Scheduler=Main Partition=low NodeList=n-[2-3]
JobId=6 JobName=h1 Priority=1421 JobState=COMPLETED Reason=None Restarts=0 SubmitTime=2026-12-02T15:43:52 StartTime=2026-12-02T15:43:53 EndTime=2026-12-02T15:44:13 Scheduler=Main Partition=high NodeList=n-[1-3]
"""

ROOT = Path(__file__).resolve().parents[1]


def test_scontrol_records_split_at_keys_not_at_equals_signs():
    jobs = parse.jobs(FULL)
    assert sorted(jobs) == [4, 5, 6]
    h1 = jobs[6]
    assert (h1["JobName"], h1["JobState"], h1["Scheduler"], h1["NodeList"]) == ("h1", "RUNNING", "Main", "n-[1-3]")
    assert h1["TRES"] == "cpu=3,node=3,billing=3" and h1["AllocNode:Sid"] == "localhost:24634"
    assert h1["TresPerNode"] == "gres:gpu:8" and h1["Power"] == ""
    l1 = jobs[4]
    assert (l1["JobState"], l1["Reason"], l1["Restarts"], l1["NodeList"]) == ("PENDING", "BeginTime", "1", "")
    # a requeued job waits cred_expire (120 s) + 1 s: BeginTime = requeue + 121 s
    assert parse.timestamp(l1["EligibleTime"]) - parse.timestamp(h1["StartTime"]) == 121
    assert parse.jobs("No jobs in the system\n") == {}


def test_hostlists_sinfo_and_squeue():
    assert parse.hostnames("n-[0-1,3]") == ["n-0", "n-1", "n-3"]
    assert parse.hostnames("big-[08-10],cpu-0") == ["big-08", "big-09", "big-10", "cpu-0"]
    assert parse.hostnames("n-3") == ["n-3"] and parse.hostnames("(null)") == parse.hostnames("") == []
    sinfo = "n-0 idle\nn-1 idle\nn-2 mixed\nn-3 down*\nn-0 idle\n"  # sinfo -h -N -o '%N %T', n-0 in two partitions
    assert parse.nodes(sinfo) == {"n-0": "idle", "n-1": "idle", "n-2": "mixed", "n-3": "down*"}
    assert parse.queue("                27\n28\n29_1\n") == [27, 28, 29]  # squeue -h -o %i
    assert math.isnan(parse.timestamp("Unknown")) and math.isnan(parse.timestamp("None"))


def _replay(example: str, recorded: str) -> labkit.Result:
    """Feed the recorded polls to a Recorder as `run` does (submissions at the SubmitTime seen)."""
    scenario = slurm_scenario(labkit.load(ROOT / "examples" / example))[0]
    jobs = slurm_jobs(scenario)
    lines = recorded.splitlines()
    t0 = parse.timestamp(lines[0].split()[1])
    recorder = Recorder(scenario, jobs, t0, 1.0, 5.0)
    names = [job.name for job in jobs]
    polls: list[tuple[float, list[str]]] = []
    for line in lines[1:]:
        if line.startswith("@"):
            polls.append((float(line[2:]), []))
        else:
            polls[-1][1].append(line)
    for offset, records in polls:
        seen = parse.jobs("\n".join(records))
        for job_id, record in seen.items():
            index = names.index(record["JobName"])
            if recorder.tracks[index].job_id is None:
                recorder.submitted(index, job_id, parse.timestamp(record["SubmitTime"]) + 0.2)
        recorder.feed(t0 + offset, seen)
    assert recorder.finished()
    return recorder.result()


def test_backfill_run_as_slurm_local_md_saw_it():
    result = _replay("slurm-backfill.yaml", BACKFILL)
    jobs = result.jobs.set_index("name")
    assert jobs.start.to_dict() == {"a": 1.0, "b": 91.0, "d": 102.0, "c": 6.0}
    assert jobs.end.to_dict() == {"a": 91.0, "b": 101.0, "d": 112.0, "c": 26.0}
    assert jobs.priority.to_dict() == {"a": 1421, "b": 1562, "d": 1140, "c": 1140}  # sprio: job size + partition
    assert set(jobs.state) == {"Completed"} and jobs.evictions.sum() == 0
    assert list(jobs.queue) == ["gpu"] * 4 and jobs.gpus.to_dict() == {"a": 24, "b": 32, "d": 8, "c": 8}
    started = result.events[result.events.kind == "Started"].set_index("job")
    assert started.reason.to_dict() == {"default/a": "Backfill", "default/c": "Backfill", "default/b": "Main",
                                        "default/d": "Main"}
    assert started.node["default/c"] == "n-3"
    pending = result.events[result.events.kind == "Pending"]
    assert [(j, r) for j, r in zip(pending.job, pending.reason)] == [
        ("default/b", "Resources"), ("default/d", "Priority"), ("default/c", "Priority"), ("default/d", "Resources")]
    tasks = result.tasks
    assert list(tasks[tasks.job == "default/a"].node) == ["n-0", "n-1", "n-2"]
    assert list(tasks.columns[7:]) == ["cpu", "memory", "pods", "nvidia.com/gpu"]
    assert tasks[tasks.job == "default/a"]["nvidia.com/gpu"].tolist() == [8.0] * 3
    assert result.summary()["makespan_s"] == 112.0 and result.info["engine"] == "slurm"


def test_preempt_run_requeues_both_low_jobs():
    result = _replay("slurm-preempt.yaml", PREEMPT)
    jobs = result.jobs.set_index("name")
    assert jobs.start.to_dict() == {"l1": 2.0, "l2": 2.0, "h1": 6.0}  # the first start counts
    assert jobs.submit.to_dict() == {"l1": 0.0, "l2": 1.0, "h1": 5.0}  # not the SubmitTime a requeue sets
    assert jobs.evictions.to_dict() == {"l1": 1, "l2": 1, "h1": 0}
    assert jobs.end.to_dict() == {"l1": 299.0, "l2": 299.0, "h1": 26.0}
    assert jobs.queue.to_dict() == {"l1": "low", "l2": "low", "h1": "high"}
    assert round(jobs.lost_work["l1"], 1) == 4.2  # from the run's StartTime to the poll that saw the requeue
    evicted = result.events[result.events.kind == "Evicted"]
    assert list(evicted.job) == ["default/l1", "default/l2"] and set(evicted.reason) == {"Preempted"}
    assert list(evicted.node) == ["n-[0-1]", "n-[2-3]"]
    tasks = result.tasks[result.tasks.job == "default/l1"]
    assert len(tasks) == 4 and tasks.evicted.notna().sum() == 2  # two runs of two nodes, the first evicted
    begin = result.events[(result.events.kind == "Pending") & (result.events.reason == "BeginTime")]
    assert list(begin.job) == ["default/l2", "default/l1"]
    restarts = result.events[(result.events.kind == "Started") & (result.events.time > 100)]
    assert list(restarts.time) == [179.0, 179.0]  # the first periodic main-scheduler pass after BeginTime


def test_state_words():
    assert [state_word(s) for s in ("COMPLETED", "NODE_FAIL", "OUT_OF_MEMORY")] == ["Completed", "NodeFail",
                                                                                      "OutOfMemory"]


def test_a_job_first_seen_running_and_a_job_sbatch_refused():
    scenario = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-preempt.yaml"))[0]
    h1 = parse.jobs(FULL)[6]
    t0 = parse.timestamp(h1["SubmitTime"]) - 5
    recorder = Recorder(scenario, slurm_jobs(scenario), t0, 1.0, 5.0)
    refused = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    recorder.rejected(0, refused, t0 + 0.2)
    recorder.submitted(2, 6, t0 + 5.2)
    recorder.feed(t0 + 6.5, {6: h1})
    result = recorder.result()
    jobs = result.jobs.set_index("name")
    assert (jobs.state["h1"], jobs.start["h1"], jobs.priority["h1"]) == ("Running", 6.0, 1421)
    assert jobs.state["l1"] == "Rejected" and math.isnan(jobs.start["l1"])
    rejected = result.events[result.events.kind == "Rejected"]
    assert list(rejected.message) == [refused] and not recorder.finished()
    assert recorder.ids(unfinished=True) == [6]
