"""slurm.conf, gres.conf and sbatch scripts generated from scenarios (no Slurm needed)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

import labkit
from labkit.cli import main
from labkit.errors import LabkitError, SpecError
from labkit.slurm.conf import (
    Ports,
    backfill_grid,
    needs_slurmdbd,
    render,
    scheduler_parameters,
    scheduling_interval,
    slurm_jobs,
    slurm_scenario,
)

ROOT = Path(__file__).resolve().parents[1]
HOST = socket.gethostname().split(".")[0]


def _files(example: str, state: Path, time_scale: float = 1.0, policy: str | None = None) -> dict[str, str]:
    scenario, conf = slurm_scenario(labkit.load(ROOT / "examples" / example), policy)
    return render(scenario, conf, state, Ports.block(6817, 4), time_scale)


def _keys(conf: str) -> dict[str, str]:
    """The single-valued keys of a slurm.conf (NodeName/PartitionName lines aside); no key twice."""
    lines = [line for line in conf.splitlines() if line and not line.startswith(("#", "NodeName", "PartitionName"))]
    keys = [line.split("=", 1)[0] for line in lines]
    assert len(keys) == len(set(keys)), f"a key given twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    return dict(line.split("=", 1) for line in lines)


def test_backfill_conf_is_the_local_cluster_of_slurm_local_md(tmp_path):
    files = _files("slurm-backfill.yaml", tmp_path)
    assert sorted(files) == ["gres.conf", "jobs/default.a.sbatch", "jobs/default.b.sbatch", "jobs/default.c.sbatch",
                             "jobs/default.d.sbatch", "slurm.conf"]
    conf = files["slurm.conf"]
    keys = _keys(conf)
    assert keys["SlurmctldHost"] == f"{HOST}(127.0.0.1)" and keys["SlurmctldPort"] == "6817"
    assert keys["AuthInfo"] == f"socket={tmp_path}/run/munge.socket"
    assert keys["SchedulerType"] == "sched/backfill"
    assert keys["SchedulerParameters"] == "bf_interval=5,bf_resolution=60,bf_window=1440,bf_continue,bf_max_job_test=100"
    assert keys["SelectType"] == "select/cons_tres" and keys["GresTypes"] == "gpu"
    assert keys["PriorityType"] == "priority/multifactor" and keys["PriorityWeightJobSize"] == "1000"
    assert keys["PriorityMaxAge"] == "1-00:00:00" and keys["PreemptType"] == "preempt/none"
    assert keys["AccountingStorageType"] == "accounting_storage/none"
    paths = [v for k, v in keys.items() if (v.startswith("/") or "=/" in v) and k != "MailProg"]
    assert len(paths) == 7 and all(str(tmp_path) in v for v in paths)  # nothing in /etc, /var or /run
    assert (f"NodeName=n-[0-3] NodeHostname={HOST} NodeAddr=127.0.0.1 Port=[6818-6821] CPUs=8 Boards=1 "
            "SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=8000 Gres=gpu:8 Feature=n State=UNKNOWN"
            ) in conf.splitlines()
    assert conf.splitlines()[-1] == "PartitionName=gpu Nodes=n-[0-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    assert files["gres.conf"].splitlines()[1:] == [
        "AutoDetect=off", f"NodeName=n-[0-3] Name=gpu File={tmp_path}/fakedev/nvidia[0-7]"]


def test_builtin_policy_changes_only_the_scheduler_type(tmp_path):
    backfill = _files("slurm-backfill.yaml", tmp_path)["slurm.conf"].splitlines()
    builtin = _files("slurm-backfill.yaml", tmp_path, policy="slurm-builtin")["slurm.conf"].splitlines()
    assert [(a, b) for a, b in zip(backfill, builtin) if a != b] == [
        ("SchedulerType=sched/backfill", "SchedulerType=sched/builtin")]


def test_preempt_conf_has_the_tiers_and_requeue_of_slurm_local_md(tmp_path):
    conf = _files("slurm-preempt.yaml", tmp_path)["slurm.conf"]
    keys = _keys(conf)
    assert keys["PreemptType"] == "preempt/partition_prio" and keys["PreemptMode"] == "REQUEUE"
    assert keys["JobRequeue"] == "1"
    partitions = [line for line in conf.splitlines() if line.startswith("PartitionName")]
    common = "Nodes=n-[0-3]"
    assert partitions == [
        f"PartitionName=gpu {common} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1",
        f"PartitionName=low {common} MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=REQUEUE",
        f"PartitionName=high {common} MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=10 PreemptMode=OFF"]


def test_sbatch_script_asks_for_the_allocation_and_sleeps_the_run_time(tmp_path):
    files = _files("slurm-preempt.yaml", tmp_path)
    assert files["jobs/default.l2.sbatch"].splitlines() == [
        "#!/bin/sh",
        "# labkit: job default/l2, submitted at +1 s (time scale 1)",
        "#SBATCH -J l2", "#SBATCH -N 2", "#SBATCH --ntasks-per-node=1", "#SBATCH -c 1", "#SBATCH --gres=gpu:4",
        "#SBATCH -t 10", "#SBATCH -p low", f"#SBATCH -D {tmp_path}/out", f"#SBATCH -o {tmp_path}/out/%x-%j.out",
        "# the run time counts from Slurm's StartTime (whole seconds), not from when this script began",
        'start=$(SLURM_TIME_FORMAT=%s squeue -h -j "$SLURM_JOB_ID" -o %S 2>/dev/null)',
        ('exec sleep "$(awk -v start="$start" -v now="$(date +%s.%N)" \'BEGIN { left = (start ~ /^[0-9]+$/) ? '
         'start + 120 - now : 120; printf "%.3f", (left > 0) ? left : 0 }\')"')]


def _slept(script: str, tmp_path: Path, started_ago: int | None) -> float:
    """How long the batch script sleeps when squeue gives a StartTime `started_ago` seconds back (None:
    squeue fails): `squeue` and `sleep` are stubs that print what they were asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    start = "exit 1" if started_ago is None else f'[ "$SLURM_TIME_FORMAT $*" = "%s -h -j 7 -o %S" ] && echo {int(time.time()) - started_ago}'
    for name, body in {"squeue": start, "sleep": 'echo "$1"'}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "7"}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=10, check=True)
    return float(done.stdout)


def test_a_job_sleeps_until_its_start_time_plus_its_run_time(tmp_path):
    """slurmd starts the script a moment after slurmctld's StartTime: the sleep makes up for it, so the job
    ends at StartTime + run time and does not hold its nodes longer than the simulator's job."""
    script = _files("slurm-preempt.yaml", tmp_path)["jobs/default.l2.sbatch"]
    assert 117 - 1 <= _slept(script, tmp_path, 3) <= 117
    assert _slept(script, tmp_path, 200) == 0
    assert _slept(script, tmp_path, None) == 120  # no answer from squeue: the whole run time


def test_time_scale_divides_times_and_rounds_limits_up_to_minutes(tmp_path):
    scenario, conf = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-backfill.yaml"))
    jobs = {j.name: j for j in slurm_jobs(scenario, time_scale=2)}
    # a: 2m/2 = 1 min; d: 5m/2 = 2.5 -> 3 min; c: 1m/2 = 30 s -> 1 min (Slurm's unit is the minute)
    assert {n: j.time_limit_min for n, j in jobs.items()} == {"a": 1, "b": 1, "d": 3, "c": 1}
    assert {n: (j.submit, j.sleep) for n, j in jobs.items()} == {
        "a": (0, 45), "b": (0.5, 5), "d": (1, 5), "c": (1.5, 10)}
    # bf_interval 5/2 = 2.5 -> 3 s, bf_resolution 60/2, bf_window 1440/2 min; Slurm's defaults made explicit
    assert scheduler_parameters(conf, 2) == {"bf_interval": 3, "bf_resolution": 30, "bf_window": 720,
                                             "bf_continue": True, "bf_max_job_test": 100, "batch_sched_delay": 2,
                                             "sched_interval": 30}
    assert scheduler_parameters(conf, 1) == conf.parameters()
    text = render(scenario, conf, tmp_path, Ports.block(6817, 4), 2)["jobs/default.a.sbatch"]
    assert "#SBATCH -t 1" in text and _slept(text, tmp_path, None) == 45


def test_scheduling_interval_is_the_backfill_interval_or_the_batch_delay():
    scenario, backfill = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-backfill.yaml"))
    _, builtin = slurm_scenario(scenario, "slurm-builtin")
    assert scheduling_interval(backfill, 1) == 5      # bf_interval=5 > batch_sched_delay (3)
    assert scheduling_interval(builtin, 1) == 3       # no backfill: the main scheduler's batch_sched_delay
    assert scheduling_interval(backfill, 2) == 3 * 2  # 5/2 -> 3 real seconds = 6 scenario seconds


def test_a_backfill_run_starts_on_the_bf_resolution_grid():
    """Slurm floors reservation times to bf_resolution on the epoch: started at second 56 of a minute,
    A's end (t0 + 120 s) floors to t0 + 64 s, before C's (t0 + 5 + 60 s), and C is never backfilled."""
    scenario, backfill = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-backfill.yaml"))
    _, builtin = slurm_scenario(scenario, "slurm-builtin")
    assert backfill_grid(backfill, 1) == 60 and backfill_grid(backfill, 2) == 30  # bf_resolution 60 s, scaled
    assert backfill_grid(builtin, 1) == 1  # no reservations: any whole second


def _scenario(**extra) -> labkit.Scenario:
    data = {"name": "two-pools", "cluster": {"pools": [
        {"name": "big", "count": 12, "resources": {"nvidia.com/gpu": 4, "cpu": "16", "memory": "64Gi"}},
        {"name": "cpu", "count": 1, "resources": {"cpu": 4}}]},
        "slurm": {"partitions": [{"name": "all", "default": True}, {"name": "gpu", "pools": ["big"], "maxTime": "1h",
                                                                    "maxNodes": 4, "graceTime": 30}]},
        "jobs": [{"name": "j", "partition": "gpu", "tasks": [{"replicas": 2, "resources": {"nvidia.com/gpu": 2}}],
                  "duration": 60}],
        "scheduler": {"policy": "slurm-builtin"}}
    data.update(extra)
    return labkit.spec.validate(data)


def test_pools_become_node_lines_with_their_own_ports_and_partitions_their_pools(tmp_path):
    scenario, conf = slurm_scenario(_scenario())
    files = render(scenario, conf, tmp_path, Ports.block(7000, 13))
    nodes = [line for line in files["slurm.conf"].splitlines() if line.startswith(("NodeName", "PartitionName"))]
    assert nodes[0].startswith("NodeName=big-[00-11] ") and " Port=[7001-7012] CPUs=16 " in nodes[0]
    assert " RealMemory=65536 Gres=gpu:4 Feature=big " in nodes[0]
    assert nodes[1].startswith("NodeName=cpu-0 ") and " Port=7013 CPUs=4 " in nodes[1] and "Gres" not in nodes[1]
    assert nodes[2] == "PartitionName=all Nodes=big-[00-11],cpu-0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    assert nodes[3] == ("PartitionName=gpu Nodes=big-[00-11] MaxTime=60 State=UP OverSubscribe=NO MaxNodes=4 "
                        "GraceTime=30")
    assert files["gres.conf"].splitlines()[2:] == [f"NodeName=big-[00-11] Name=gpu File={tmp_path}/fakedev/nvidia[0-3]"]
    script = files["jobs/default.j.sbatch"]
    assert "#SBATCH -N 2" in script and "#SBATCH --gres=gpu:2" in script and "-c " not in script
    assert "#SBATCH -t" not in script  # no timeLimit: the partition's


def test_refused_scenarios_say_why_in_one_line():
    with pytest.raises(SpecError, match="runs under a Volcano conf"):
        slurm_scenario(_scenario(scheduler={"policy": "volcano-shipped"}))
    with pytest.raises(SpecError, match="not a Slurm policy"):
        slurm_scenario(_scenario(), "volcano-shipped")
    mixed = _scenario(jobs=[{"name": "m", "duration": 5, "tasks": [
        {"name": "ps", "resources": {"cpu": 1}}, {"name": "worker", "resources": {"nvidia.com/gpu": 1}}]}])
    with pytest.raises(LabkitError, match=r"jobs\[0\].tasks: a Slurm job has one shape per node"):
        slurm_jobs(slurm_scenario(mixed)[0])
    speeds = _scenario(cluster={"pools": [{"name": "a", "count": 1, "resources": {"cpu": 1}},
                                          {"name": "b", "count": 1, "resources": {"cpu": 1}, "speed": 2}]},
                       slurm={}, jobs=[{"name": "w", "work": 10, "tasks": [{"resources": {"cpu": 1}}]}])
    with pytest.raises(LabkitError, match=r"jobs\[0\].work: .*node speed"):
        slurm_jobs(slurm_scenario(speeds)[0])
    with pytest.raises(SpecError, match="--time-scale"):
        slurm_jobs(slurm_scenario(_scenario())[0], 0)


def test_qos_and_fair_share_need_slurmdbd():
    qos = _scenario(slurm={"qos": [{"name": "high"}]}, jobs=[
        {"name": "q", "qos": "high", "duration": 5, "tasks": [{"resources": {"cpu": 1}}]}])
    with pytest.raises(LabkitError, match=r"^jobs\[0\].qos: needs slurmdbd"):
        needs_slurmdbd(*slurm_scenario(qos))
    fair = _scenario(scheduler={"policy": "slurm-builtin", "slurm": {"PriorityWeightFairshare": 1000}})
    with pytest.raises(LabkitError, match="PriorityWeightFairshare: needs slurmdbd"):
        needs_slurmdbd(*slurm_scenario(fair))
    needs_slurmdbd(*slurm_scenario(_scenario()))


def test_export_slurm_writes_the_state_dir_files(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["export", "slurm", str(ROOT / "examples" / "slurm-backfill.yaml"), "-o", str(out)]) == 0
    assert "wrote 6 files" in capsys.readouterr().out
    conf = (out / "slurm.conf").read_text()
    assert conf.startswith(f"# labkit export slurm {ROOT / 'examples' / 'slurm-backfill.yaml'}\n")
    assert f"StateSaveLocation={out.resolve()}/state" in conf
    assert sorted(p.name for p in (out / "jobs").iterdir()) == [
        "default.a.sbatch", "default.b.sbatch", "default.c.sbatch", "default.d.sbatch"]
