"""The numba core decides what the reference engine decides under the Slurm policies: identical
`jobs`, `tasks` and `events` tables (reasons and messages too: sprio, pending reasons, backfill
start times) on random Slurm scenarios, the examples and the Slurm presets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import assert_same, node_events, slurm_scenarios

import labkit
from labkit import spec
from labkit.engine import families
from labkit.engine.simulate import with_policy
from labkit.errors import LabkitError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=150, deadline=None, suppress_health_check=QUIET)
@given(slurm_scenarios())
def test_random_slurm_scenarios_decide_the_same(scenario):
    assert_same(scenario)


@st.composite
def slurm_trees(draw, max_jobs: int = 8) -> spec.Scenario:
    """What `slurm_scenarios` rarely reaches: CPU-only jobs (SUSPEND preempts them), GraceTime with
    CANCEL, preempt/qos, partitions of some pools, MaxNodes, accounts and users under them with
    FairShare (some `parent`), classic fair share (NO_FAIR_TREE), ACCRUE_ALWAYS, JobRequeue=0, and
    node events among suspended and terminating jobs."""
    pools = [{"name": f"p{k}", "count": draw(st.integers(1, 2)),
              "resources": {"nvidia.com/gpu": 4, "cpu": 8, "memory": "32Gi"}} for k in range(2)]
    grace = draw(st.sampled_from([0, 30]))
    partitions = [{"name": "low", "default": True, "graceTime": grace},
                  {"name": "high", "priorityTier": 10, "preemptMode": "OFF"}]
    if draw(st.booleans()):
        partitions[1] |= {"pools": ["p1"], "maxNodes": draw(st.integers(1, 3))}
    qos = [{"name": "normal"}, {"name": "boss", "priority": 100, "preempt": ["normal"], "graceTime": grace}]
    accounts = [{"name": "a", "fairshare": draw(st.integers(0, 3))}, {"name": "b", "parent": "a"}]
    users = [{"name": "u1", "parent": "a", "fairshare": draw(st.sampled_from([1, 2, "parent"]))},
             {"name": "u2", "parent": "b", "fairshare": draw(st.integers(0, 4))}]
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        gpu = draw(st.sampled_from([0, 0, 1, 4]))
        job = {"name": f"j{j}", "submit": draw(st.integers(0, 300)), "duration": draw(st.integers(60, 1500)),
               "partition": draw(st.sampled_from(["low", "high"])), "user": draw(st.sampled_from(["u1", "u2", "u3"])),
               "qos": draw(st.sampled_from(["normal", "boss"])),
               "tasks": [{"name": "node", "replicas": draw(st.integers(1, 2)),
                          "resources": {"nvidia.com/gpu": gpu, "cpu": draw(st.sampled_from([2, 6, 8]))}}]}
        if draw(st.booleans()):
            job["timeLimit"] = draw(st.sampled_from([300, 1200]))
        if draw(st.booleans()):
            job["checkpointInterval"] = 120
        jobs.append(job)
    conf = {"SchedulerType": draw(st.sampled_from(["sched/backfill", "sched/builtin"])),
            "SchedulerParameters": f"bf_interval=10,bf_resolution={draw(st.sampled_from([1, 60]))},"
                                   f"bf_max_job_test={draw(st.integers(1, 5))}",
            "AccountingStorageType": "accounting_storage/slurmdbd", "PriorityWeightJobSize": 100,
            "PriorityWeightFairshare": 5000, "PriorityWeightAge": 300, "PriorityWeightQOS": 1000,
            "PriorityMaxAge": "10m", "PriorityDecayHalfLife": draw(st.sampled_from(["0", "30m"])),
            "PriorityCalcPeriod": "1", "JobRequeue": draw(st.sampled_from([0, 1])),
            "PreemptType": draw(st.sampled_from(["preempt/partition_prio", "preempt/qos"])),
            "PreemptMode": draw(st.sampled_from(["REQUEUE", "CANCEL", "SUSPEND"]))}
    flags = [f for f in ("NO_FAIR_TREE", "ACCRUE_ALWAYS") if draw(st.booleans())]
    if flags:
        conf["PriorityFlags"] = ",".join(flags)
    cluster = {"pools": pools, "events": draw(node_events(pools, 1500))}
    return spec.validate({"name": "slurm-tree", "horizon": "6h", "cluster": cluster,
                          "slurm": {"partitions": partitions, "qos": qos, "accounts": accounts, "users": users},
                          "jobs": jobs, "scheduler": {"policy": "custom", "slurm": conf}})


@settings(max_examples=150, deadline=None, suppress_health_check=QUIET)
@given(slurm_trees())
def test_preemption_modes_and_fair_share_trees_decide_the_same(scenario):
    assert_same(scenario)


@pytest.mark.parametrize("name", ["slurm-backfill.yaml", "slurm-preempt.yaml", "slurm-node-failure.yaml"])
def test_examples_are_identical(name):
    fast, _ = assert_same(labkit.load(EXAMPLES / name))
    assert len(fast.events)


@pytest.mark.parametrize("policy", ["slurm-backfill", "slurm-builtin", "slurm-fairshare"])
def test_presets_are_identical(policy):
    """The example's jobs under each Slurm preset, with users for fair share."""
    data = spec.loads(spec.dump(labkit.load(EXAMPLES / "slurm-backfill.yaml"))).model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    for i, job in enumerate(data["jobs"]):
        job["user"] = f"u{i % 2}"
    assert_same(spec.validate(data) if policy == "slurm-backfill" else
                with_policy(spec.validate(data), policy))


def test_small_buffers_grow_and_give_the_same_run():
    compiled, static, missing = families.prepare(labkit.load(EXAMPLES / "slurm-preempt.yaml"))
    assert missing is None
    whole, grown = families.run(compiled, static), families.run(compiled, static, scale=0.01)
    assert grown.events == whole.events and np.array_equal(grown.runs, whole.runs, equal_nan=True)


def test_auto_runs_slurm_on_the_core_and_falls_back_for_snapshots():
    example = labkit.load(EXAMPLES / "slurm-backfill.yaml")
    assert labkit.simulate(example).info["engine"] == "numba"
    data = example.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["jobs"][0]["status"] = {"phase": "Running", "running": {"node": ["n-0", "n-1", "n-2"]}}
    result = labkit.simulate(spec.validate(data))
    assert result.info["engine"] == "reference (the numba core does not simulate job status snapshots under Slurm)"
    with pytest.raises(LabkitError, match="job status snapshots under Slurm"):
        labkit.simulate(spec.validate(data), engine="numba")
