"""Slurm as a policy of the engine: priority factors worked by hand, fair-share, the local cluster's
outcomes (slurm_local.md section 6), backfill parameters, time limits, preemption modes, QOS limits
and the pending reasons squeue shows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from scenarios import (
    broken_gangs,
    over_committed_nodes,
    pods_on_unavailable_nodes,
    qos_over_limits,
    slurm_scenarios,
)

import labkit
from labkit import spec
from labkit.engine.families import compile_scenario
from labkit.engine.framework import Session
from labkit.engine.problem import State
from labkit.engine.slurm.reference import classic_fair_share, decayed_usage, fair_tree, priority_factors
from labkit.errors import SpecError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NODE = {"nvidia.com/gpu": 8, "cpu": 8, "memory": "8000Mi"}


def scenario(jobs: list[dict], slurm: dict | None = None, conf: dict | None = None, count: int = 4) -> spec.Scenario:
    """`count` nodes of 8 GPUs and 8 CPUs, partition gpu; `conf` replaces the slurm-backfill policy."""
    sched = {"policy": "custom", "slurm": conf} if conf is not None else {"policy": "slurm-backfill"}
    return spec.validate({"name": "slurm", "cluster": {"pools": [{"name": "n", "count": count, "resources": NODE}]},
                          "slurm": slurm or {"partitions": [{"name": "gpu", "default": True}]},
                          "jobs": jobs, "scheduler": sched})


def nodes(n: int, gpu: int = 8, cpu: int = 1) -> list[dict]:
    """sbatch -N n --gres=gpu:<gpu> with <cpu> CPUs per node."""
    return [{"name": "node", "replicas": n, "resources": {"nvidia.com/gpu": gpu, "cpu": cpu}}]


def by_name(result: labkit.Result):
    return result.jobs.set_index("name")


def reasons(result: labkit.Result, job: str, kind: str = "Pending") -> list[str]:
    events = result.events
    return list(events[(events.kind == kind) & (events.job == f"default/{job}")].reason)


# ------------------------------------------------------------------------ the local cluster (6.1-6.4)


def test_sprio_numbers_of_the_local_cluster():
    # slurm_local.md 6.3, no slurmdbd: only JOBSIZE and PARTITION count (weights 1000 each).
    # 4 nodes x 8 CPUs: N = 4, C = 32; each job asks 1 CPU per node, so cpus = nodes.
    #   B: 4 nodes: js = (4/4 + 4/32) / 2 = (1 + 0.125) / 2 = 0.5625 -> 562.5; + 1000 = 1562.5 -> 1562
    #   A: 3 nodes: js = (3/4 + 3/32) / 2 = 0.421875 -> 421.875; + 1000 -> 1421
    #   C, D: 1 node: js = (1/4 + 1/32) / 2 = 0.140625 -> 140.625; + 1000 -> 1140
    # sprio rounds each factor (%.0f): JOBSIZE 562 (562.5, half to even), 422, 141
    result = labkit.simulate(labkit.load(EXAMPLES / "slurm-backfill.yaml"))
    assert by_name(result).priority.to_dict() == {"a": 1421, "b": 1562, "d": 1140, "c": 1140}
    sprio = dict(zip(result.events[result.events.kind == "Priority"].job,
                     result.events[result.events.kind == "Priority"].message))
    assert sprio["default/b"] == "PRIORITY=1562 AGE=0 FAIRSHARE=0 JOBSIZE=562 PARTITION=1000 QOS=0 TRES=0"
    assert "JOBSIZE=422 " in sprio["default/a"] and "JOBSIZE=141 " in sprio["default/c"]


def test_backfill_starts_c_at_once_and_d_only_after_b():
    # 6.1: A (3 nodes, -t 2) runs; B (4 nodes) is top priority and waits for A's time limit; C (1 node,
    # -t 1) ends before B's reservation, so backfill starts it on the idle node; D (-t 5) would overlap it
    result = labkit.simulate(labkit.load(EXAMPLES / "slurm-backfill.yaml"))
    jobs = by_name(result)
    assert jobs.start.c < jobs.start.b
    assert jobs.start.d >= jobs.end.b
    assert jobs.start.b == jobs.end.a  # the main scheduler starts B when A ends
    assert jobs.start.c - jobs.submit.c <= 5  # at the next backfill pass (bf_interval=5)
    assert reasons(result, "b")[0] == "Resources" and reasons(result, "d")[0] == "Priority"
    assert reasons(result, "c")[0] == "Priority"
    first = result.events[result.events.kind == "StartTime"].groupby("job").message.first()
    planned = first.to_dict()
    # B is planned at A's expected end (start + 2 min); its reservation ends at floor(120 + 120, 60) = 240,
    # which is D's planned start (squeue --start showed 11:07:00 for D, B's end rounded down)
    assert planned["default/b"].startswith(f"StartTime={jobs.start.a + 120:g} ")
    assert planned["default/d"].startswith("StartTime=240 ")


def test_builtin_keeps_c_waiting_behind_b():
    # 6.2: sched/builtin, strict order: the blocked head stops everyone behind it
    result = labkit.simulate(labkit.load(EXAMPLES / "slurm-backfill.yaml"), policy="slurm-builtin")
    jobs = by_name(result)
    assert jobs.start.c >= jobs.end.b and jobs.start.d >= jobs.end.b
    assert not (result.events.kind == "StartTime").any()


def test_partition_preemption_requeues_both_low_jobs():
    # 6.4: H1 (3 nodes, tier 10) needs nodes of both 2-node low-tier jobs: both are requeued and can
    # start again only at BeginTime = now + cred_expire (120 s) + 1
    result = labkit.simulate(labkit.load(EXAMPLES / "slurm-preempt.yaml"))
    jobs = by_name(result)
    evicted = result.events[result.events.kind == "Evicted"]
    assert set(evicted.job) == {"default/l1", "default/l2"}
    assert (evicted.time == jobs.submit.h1).all() and jobs.start.h1 == jobs.submit.h1
    requeued = result.events[result.events.kind == "Restarting"]
    assert list(requeued.reason) == ["Requeue", "Requeue"]
    again = result.tasks[result.tasks.start > jobs.start.h1]
    restarts = again[again.job.isin(["default/l1", "default/l2"])].groupby("job").start.min()
    assert (restarts >= jobs.submit.h1 + 121).all()
    assert set(jobs.state) == {"Completed"}
    assert reasons(result, "l1")[-1] == "BeginTime"


# ------------------------------------------------------------------------ priority factors by hand


def factors_of(s: spec.Scenario, now: float = 0.0, usage: np.ndarray | None = None):
    """(problem, {job name: Factors}) for every job Pending at `now`, accruing from its submit."""
    p = compile_scenario(s).problem
    state = State.from_tasks(p, [0] * p.n_tasks, [-1] * p.n_tasks, [1] * p.n_jobs, now=now, assoc_usage=usage)
    ssn = Session(p, state)
    return p, {job.name.split("/")[1]: priority_factors(p, job, now, job.creation, 0.0) for job in ssn.jobs}


DBD = {"AccountingStorageType": "accounting_storage/slurmdbd"}


def test_age_factor_and_its_weight():
    # age = min(1, (now - accrue) / PriorityMaxAge); PriorityMaxAge 1000 s, weight 1000:
    # a job submitted at 0, evaluated at 250 s: 250/1000 x 1000 = 250; at 5000 s: capped at 1000
    s = scenario([{"name": "j", "tasks": nodes(1), "duration": 10}],
                 conf={**DBD, "PriorityWeightAge": 1000, "PriorityMaxAge": 1000})
    assert factors_of(s, 250)[1]["j"].age == pytest.approx(250)
    assert factors_of(s, 5000)[1]["j"].age == pytest.approx(1000)
    # without slurmdbd the weight is ignored ("PriorityWeightAge can only be used with SlurmDBD")
    s = scenario([{"name": "j", "tasks": nodes(1), "duration": 10}], conf={"PriorityWeightAge": 1000})
    assert factors_of(s, 250)[1]["j"].age == 0


def test_job_size_favor_small_and_relative_to_time():
    jobs = [{"name": "one", "tasks": nodes(1, cpu=2), "duration": 10, "timeLimit": "10m"},
            {"name": "four", "tasks": nodes(4, cpu=2), "duration": 10, "timeLimit": "10m"}]
    # favor small: ((N - nodes)/N + (C - cpus)/C) / 2 with N = 4, C = 32
    #   one:  ((4-1)/4 + (32-2)/32) / 2 = (0.75 + 0.9375) / 2 = 0.84375 -> 843.75
    #   four: ((4-4)/4 + (32-8)/32) / 2 = (0 + 0.75) / 2 = 0.375 -> 375
    _, f = factors_of(scenario(jobs, conf={"PriorityWeightJobSize": 1000, "PriorityFavorSmall": True}))
    assert (f["one"].job_size, f["four"].job_size) == (pytest.approx(843.75), pytest.approx(375))
    # SMALL_RELATIVE_TO_TIME: max(cpus, nodes x C/N) / time limit in minutes / C
    #   one:  max(2, 1 x 8) / 10 / 32 = 0.025 -> 25;  four: max(8, 4 x 8) / 10 / 32 = 0.1 -> 100
    _, f = factors_of(scenario(jobs, conf={"PriorityWeightJobSize": 1000, "PriorityFlags": "SMALL_RELATIVE_TO_TIME"}))
    assert (f["one"].job_size, f["four"].job_size) == (pytest.approx(25), pytest.approx(100))


def test_partition_qos_and_tres_factors():
    slurm = {"partitions": [{"name": "gpu", "default": True, "priorityJobFactor": 1},
                            {"name": "vip", "priorityJobFactor": 4}],
             "qos": [{"name": "normal"}, {"name": "urgent", "priority": 50}, {"name": "top", "priority": 200}]}
    jobs = [{"name": "plain", "tasks": nodes(1, gpu=2), "duration": 10},
            {"name": "urgent", "partition": "vip", "qos": "urgent", "tasks": nodes(2, gpu=8), "duration": 10}]
    conf = {**DBD, "PriorityWeightPartition": 1000, "PriorityWeightQOS": 1000, "PriorityWeightTRES": "GRES/gpu=3200"}
    _, f = factors_of(scenario(jobs, slurm, conf))
    # partition: PriorityJobFactor / the largest one: 1/4 x 1000 = 250, 4/4 x 1000 = 1000
    assert (f["plain"].partition, f["urgent"].partition) == (250, 1000)
    # QOS: priority / the largest QOS priority: 0, 50/200 x 1000 = 250
    assert (f["plain"].qos, f["urgent"].qos) == (0, 250)
    # TRES: GPUs / the partition's GPUs x weight: 2/32 x 3200 = 200; 16/32 x 3200 = 1600
    assert (f["plain"].tres, f["urgent"].tres) == (pytest.approx(200), pytest.approx(1600))


def test_classic_fair_share_by_hand():
    # two users under root, FairShare 1 and 3, usage 30 and 10 (of 40):
    #   S = 1/4, 3/4; U = 30/40 = 0.75, 10/40 = 0.25; under root UE = U
    #   F(a) = 2^(-0.75/0.25) = 2^-3 = 0.125;  F(b) = 2^(-0.25/0.75) = 2^(-1/3) = 0.7937
    slurm = {"partitions": [{"name": "gpu", "default": True}],
             "users": [{"name": "a", "fairshare": 1}, {"name": "b", "fairshare": 3}]}
    p = compile_scenario(scenario([{"name": "j", "user": "a", "tasks": nodes(1), "duration": 10}], slurm,
                                  {**DBD, "PriorityWeightFairshare": 1000, "PriorityFlags": "NO_FAIR_TREE"})).problem
    usage = np.zeros(len(p.assoc_names))
    usage[p.assoc_names.index("user:a")], usage[p.assoc_names.index("user:b")] = 30, 10
    f = classic_fair_share(p, usage, dampening=1)
    assert f[p.assoc_names.index("user:a")] == pytest.approx(0.125)
    assert f[p.assoc_names.index("user:b")] == pytest.approx(2 ** (-1 / 3))
    # FairShareDampeningFactor 3: F(a) = 2^(-3/3) = 0.5
    assert classic_fair_share(p, usage, dampening=3)[p.assoc_names.index("user:a")] == pytest.approx(0.5)


def test_fair_tree_ranks_by_level_fairshare():
    # accounts A and B (FairShare 1 each); users a1, a2 in A, b1 in B; usage a1 10, a2 0, b1 30.
    # Level FS = S / U at each level:
    #   root's children: A: S = 1/2, U = 10/40 -> LF 2;  B: S = 1/2, U = 30/40 -> LF 2/3.  A ranks first
    #   in A: a1: S = 1/2, U = 10/10 -> 0.5;  a2: S = 1/2, U = 0 -> inf.  a2 first
    # depth-first ranking over 3 users: a2 -> 3/3 = 1.0, a1 -> 2/3, b1 -> 1/3
    slurm = {"partitions": [{"name": "gpu", "default": True}],
             "accounts": [{"name": "acct-a"}, {"name": "acct-b"}],
             "users": [{"name": "a1", "parent": "acct-a"}, {"name": "a2", "parent": "acct-a"},
                       {"name": "b1", "parent": "acct-b"}]}
    p = compile_scenario(scenario([{"name": "j", "user": "a1", "tasks": nodes(1), "duration": 10}], slurm,
                                  {**DBD, "PriorityWeightFairshare": 1000})).problem
    usage = np.zeros(len(p.assoc_names))
    for user, used in (("a1", 10), ("a2", 0), ("b1", 30)):
        usage[p.assoc_names.index(f"user:{user}")] = used
    f = fair_tree(p, usage)
    got = {u: f[p.assoc_names.index(f"user:{u}")] for u in ("a1", "a2", "b1")}
    assert got == {"a2": pytest.approx(1.0), "a1": pytest.approx(2 / 3), "b1": pytest.approx(1 / 3)}
    # no usage at all: every LF is inf, everyone ties: all share the top rank
    assert set(np.round(fair_tree(p, np.zeros(len(p.assoc_names)))[p.assoc_is_user], 6)) == {1.0}


def test_decayed_usage_follows_the_decay_thread():
    # PriorityDecayHalfLife 693 s: d = 1 - 0.693/693 = 0.999 per second; PriorityCalcPeriod 300 s.
    # One 2-CPU job runs 0..600. Tick 300: slice 300 x d^300; tick 600: the job ended at 600, so its last
    # slice (300..600) was added at the end, 300 x d^300, and tick 600 decays everything by d^300:
    #   usage(600) = 2 x (300 d^300 x d^300 + 300 d^300 x d^300) = 2 x 600 x d^600
    s = scenario([{"name": "j", "tasks": nodes(1, cpu=2), "duration": 600}],
                 conf={**DBD, "PriorityWeightFairshare": 1000, "PriorityDecayHalfLife": 693})
    p = compile_scenario(s).problem
    runs = np.array([[0, 0, 0.0, 600.0, np.nan]])
    user = p.job_assoc[0]
    assert decayed_usage(p, runs, 600)[user] == pytest.approx(2 * 600 * 0.999**600)
    # at 899 the last tick is still 600; at 900 one more decay: x d^300
    assert decayed_usage(p, runs, 899)[user] == pytest.approx(2 * 600 * 0.999**600)
    assert decayed_usage(p, runs, 900)[user] == pytest.approx(2 * 600 * 0.999**900)
    # still running at 450: only the tick-300 slice counts so far
    assert decayed_usage(p, np.array([[0, 0, 0.0, np.nan, np.nan]]), 450)[user] == pytest.approx(2 * 300 * 0.999**300)


def test_fair_share_reorders_jobs_under_slurmdbd():
    # team x used the cluster first; when both users queue a 4-node job, y's goes first
    slurm = {"partitions": [{"name": "gpu", "default": True}], "users": [{"name": "x"}, {"name": "y"}]}
    jobs = [{"name": "x-first", "user": "x", "tasks": nodes(4), "duration": 3600},
            {"name": "x-again", "user": "x", "submit": 60, "tasks": nodes(4), "duration": 60},
            {"name": "y-job", "user": "y", "submit": 120, "tasks": nodes(4), "duration": 60}]
    result = labkit.simulate(scenario(jobs, slurm, {**DBD, "PriorityWeightFairshare": 10000,
                                                    "PriorityWeightAge": 0, "PriorityDecayHalfLife": "7d"}))
    jobs = by_name(result)
    assert jobs.start["y-job"] < jobs.start["x-again"]
    assert jobs.priority["y-job"] > jobs.priority["x-again"]


# ------------------------------------------------------------------------ backfill parameters


def blocked_head(c_limit: str, params: str, scheduler: str = "sched/backfill") -> labkit.Result:
    """A holds 3 nodes for at most 2 minutes; B wants 4; C wants 1 node for `c_limit`."""
    jobs = [{"name": "a", "tasks": nodes(3), "timeLimit": "2m", "duration": 90},
            {"name": "b", "submit": 1, "tasks": nodes(4), "timeLimit": "2m", "duration": 10},
            {"name": "c", "submit": 2, "tasks": nodes(1), "timeLimit": c_limit, "duration": 20}]
    return labkit.simulate(scenario(jobs, conf={"SchedulerType": scheduler, "SchedulerParameters": params,
                                                "PriorityWeightJobSize": 1000}))


def test_bf_window_limits_the_reservation():
    # B's planned start (120 s) is beyond a 1-minute bf_window: no reservation, so a 5-minute C backfills
    assert by_name(blocked_head("5m", "bf_interval=5,bf_window=1")).start.c < 90
    assert by_name(blocked_head("5m", "bf_interval=5,bf_window=10")).start.c >= 90


def test_bf_max_job_test_stops_the_pass():
    # with bf_max_job_test=1 only B is tested: C is not backfilled
    assert by_name(blocked_head("1m", "bf_interval=5")).start.c < 90
    assert by_name(blocked_head("1m", "bf_interval=5,bf_max_job_test=1")).start.c >= 90


def test_bf_resolution_floors_the_reservation():
    # B's reservation runs [120, 240): floored to 300 s it becomes [0, 0 + 300) ... so a 1-minute C overlaps
    assert by_name(blocked_head("1m", "bf_interval=5,bf_resolution=60")).start.c < 90
    assert by_name(blocked_head("1m", "bf_interval=5,bf_resolution=300")).start.c >= 90


def test_bf_interval_is_the_backfill_cadence():
    # C is backfilled at the first backfill pass at or after its submit (2 s): 30 s with bf_interval=30
    assert by_name(blocked_head("1m", "bf_interval=30")).start.c == 30
    assert by_name(blocked_head("1m", "bf_interval=7")).start.c == 7


# ------------------------------------------------------------------------ time limits, limits, reasons


def test_a_job_past_its_time_limit_is_killed():
    # timeLimit 90 s is kept in whole minutes: 2 min; the job would run 10 min
    result = labkit.simulate(scenario([{"name": "x", "tasks": nodes(1), "timeLimit": "90s", "duration": 600}]))
    jobs = by_name(result)
    assert jobs.state.x == "Timeout" and jobs.end.x - jobs.start.x == 120
    assert "Timeout" in set(result.events.kind)


def test_partition_node_limit_and_max_nodes():
    slurm = {"partitions": [{"name": "gpu", "default": True, "maxNodes": 2}]}
    result = labkit.simulate(scenario([{"name": "wide", "tasks": nodes(3), "duration": 10},
                                       {"name": "huge", "tasks": nodes(5), "duration": 10},
                                       {"name": "ok", "tasks": nodes(2), "duration": 10}], slurm))
    jobs = by_name(result)
    assert jobs.state.wide == "Pending" and jobs.state.huge == "Pending" and jobs.state.ok == "Completed"
    assert reasons(result, "wide") == ["PartitionNodeLimit"] and reasons(result, "huge") == ["PartitionNodeLimit"]


QOS = {"partitions": [{"name": "gpu", "default": True}],
       "qos": [{"name": "small", "grpTRES": {"gres/gpu": 16}, "maxTRESPerUser": {"node": 1}}]}
ENFORCED = {**DBD, "AccountingStorageEnforce": "associations,limits,qos", "PriorityWeightJobSize": 1000}


def test_qos_grp_tres_and_max_tres_per_user():
    jobs = [{"name": "u1-a", "user": "u1", "qos": "small", "tasks": nodes(1), "duration": 100},
            {"name": "u1-b", "user": "u1", "qos": "small", "submit": 1, "tasks": nodes(1), "duration": 100},
            {"name": "u2-a", "user": "u2", "qos": "small", "submit": 2, "tasks": nodes(1), "duration": 100},
            {"name": "u3-a", "user": "u3", "qos": "small", "submit": 3, "tasks": nodes(1), "duration": 100}]
    result = labkit.simulate(scenario(jobs, QOS, ENFORCED))
    jobs = by_name(result)
    # u1 may hold 1 node at a time (MaxTRESPerUser node=1); the QOS 16 GPUs (GrpTRES gres/gpu=16)
    assert reasons(result, "u1-b")[0] == "QOSMaxNodePerUserLimit" and jobs.start["u1-b"] >= jobs.end["u1-a"]
    assert reasons(result, "u3-a")[0] == "QOSGrpGRES" and jobs.start["u3-a"] >= 100
    assert not qos_over_limits(result)
    # without AccountingStorageEnforce=limits the limits do not hold
    loose = labkit.simulate(scenario(jobs_list(), QOS, {**DBD, "PriorityWeightJobSize": 1000}))
    assert by_name(loose).start.max() < 5


def jobs_list() -> list[dict]:
    return [{"name": f"j{i}", "user": "u1", "qos": "small", "submit": i, "tasks": nodes(1), "duration": 100}
            for i in range(4)]


# ------------------------------------------------------------------------ preemption modes


def tiered(mode: str, gpu: int, requeue: int = 1) -> labkit.Result:
    """A 4-node low-tier job, then a 2-node job in a tier-10 partition, under partition_prio and `mode`."""
    slurm = {"partitions": [{"name": "low", "default": True, "graceTime": 30}, {"name": "high", "priorityTier": 10}]}
    conf = {"PreemptType": "preempt/partition_prio", "PreemptMode": mode, "JobRequeue": requeue,
            "PriorityWeightJobSize": 1000}
    cpu = 8 if gpu == 0 else 1
    return labkit.simulate(scenario([{"name": "lo", "tasks": nodes(4, gpu, cpu), "duration": 100},
                                     {"name": "hi", "partition": "high", "submit": 10, "tasks": nodes(2, gpu, cpu),
                                      "duration": 20}], slurm, conf))


def test_cancel_ends_the_victim_after_its_grace_time():
    jobs = by_name(tiered("CANCEL", 8))
    # GraceTime (30 s, honoured with CANCEL) keeps the nodes until 40; the job ends as Preempted
    assert jobs.state.lo == "Preempted" and jobs.end.lo == 10 and jobs.start.hi == 40


def test_requeue_without_job_requeue_cancels():
    assert by_name(tiered("REQUEUE", 8, requeue=0)).state.lo == "Preempted"


def test_suspend_frees_cpus_not_gpus():
    # a suspended job keeps its memory and GRES (gres.shtml): a GPU job cannot take them, it waits
    jobs = by_name(tiered("SUSPEND", 8))
    assert jobs.start.hi >= jobs.end.lo and jobs.evictions.lo == 0
    # a CPU-only preemptor runs at once on the suspended job's CPUs; the victim resumes after it, losing nothing
    result = tiered("SUSPEND", 0)
    jobs = by_name(result)
    assert jobs.start.hi == 10 and "Suspended" in set(result.events.kind)
    assert jobs.end.lo == 100 + (jobs.end.hi - jobs.start.hi) and jobs.lost_work.lo == 0
    assert not over_committed_nodes(result)


def test_a_resumed_job_holds_its_cpus_for_backfill():
    """Regression (Slurmctld.resume): a job the main scheduler resumed stayed suspended for the rest
    of the session, so backfill counted its CPUs free once more and started a job on them."""
    cpu = [{"name": "node", "resources": {"cpu": 8}}]
    jobs = [{"name": "v", "duration": 100, "tasks": cpu},
            {"name": "h", "submit": 10, "duration": 20, "partition": "high", "tasks": cpu},
            {"name": "p", "submit": 15, "duration": 50, "tasks": cpu}]
    slurm = {"partitions": [{"name": "low", "default": True}, {"name": "high", "priorityTier": 10}]}
    conf = {"SchedulerType": "sched/backfill", "SchedulerParameters": "bf_interval=10",
            "PreemptType": "preempt/partition_prio", "PreemptMode": "SUSPEND"}
    for engine in ("reference", "numba"):
        # h ends at 30, on the backfill grid: v resumes in the session that also backfills p
        result = labkit.simulate(scenario(jobs, slurm, conf, count=1), engine=engine)
        assert not over_committed_nodes(result)
        assert by_name(result).start.p == by_name(result).end.v == 120


# ------------------------------------------------------------------------ properties and bad input


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slurm_scenarios())
def test_slurm_invariants(scenario):
    result = labkit.simulate(scenario)
    assert not over_committed_nodes(result)
    assert not broken_gangs(result)
    assert not qos_over_limits(result)
    assert not pods_on_unavailable_nodes(result)  # no job starts on a DOWN or DRAIN node, none outlives a DOWN one
    timed = result.jobs[result.jobs.state == "Timeout"]
    limits = {j.name: spec.quantity.parse_duration(j.time_limit) for j in scenario.jobs if j.time_limit is not None}
    last_start = result.tasks.groupby("job").start.max()  # a requeued job's limit counts from its restart
    for name, row in timed.set_index("name").iterrows():
        assert row.end - last_start[f"default/{name}"] <= math.ceil(limits[name] / 60) * 60 + 1e-6


@pytest.mark.parametrize("changes, message", [
    ({"jobs": [{"name": "x", "partition": "nosuch", "tasks": nodes(1), "duration": 1}]},
     "jobs[0].partition: no partition named 'nosuch'"),
    ({"jobs": [{"name": "x", "timeLimit": 0, "tasks": nodes(1), "duration": 1}]}, "jobs[0].timeLimit: must be > 0"),
    ({"jobs": [{"name": "x", "timeLimit": -300, "tasks": nodes(1), "duration": 1}]}, "jobs[0].timeLimit: must be > 0"),
    ({"slurm": {"partitions": [{"name": "gpu", "default": True}], "qos": [{"name": "q", "grpTRES": {"gpu": 8}}]}},
     "slurm.qos[0].grpTRES: 'gpu' is not a TRES"),
    ({"scheduler": {"slurm": {"PriorityFlags": "DEPTH_OBLIVIOUS"}}}, "scheduler.slurm.PriorityFlags: 'DEPTH_OBLIVIOUS'"),
    ({"scheduler": {"slurm": {"PriorityWeightTRES": "GPU=10"}}}, "scheduler.slurm.PriorityWeightTRES: 'GPU=10'"),
    ({"slurm": {"partitions": [{"name": "gpu", "default": True}], "users": [{"name": "u", "parent": "nope"}]}},
     "slurm.users[0].parent: no account named 'nope'"),
])
def test_bad_slurm_input_is_one_line(changes, message):
    data = {"name": "bad", "cluster": {"pools": [{"name": "n", "count": 1, "resources": NODE}]},
            "slurm": {"partitions": [{"name": "gpu", "default": True}]},
            "jobs": [{"name": "x", "tasks": nodes(1), "duration": 1}], "scheduler": {"policy": "slurm-backfill"}, **changes}
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_preemption_needs_a_preempt_mode():
    s = scenario([{"name": "x", "tasks": nodes(1), "duration": 1}], conf={"PreemptType": "preempt/partition_prio"})
    with pytest.raises(SpecError, match="^scheduler.slurm.PreemptMode: preempt/partition_prio is not compatible"):
        compile_scenario(s)
