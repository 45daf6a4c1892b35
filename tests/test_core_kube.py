"""The numba core decides what the reference engine decides under the kube-scheduler policies:
identical `jobs`, `tasks` and `events` tables (FailedScheduling, Waiting and Rejected messages
too) on random kube scenarios, the examples under the kube presets and the case-study week."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import assert_same, kube_scenarios

import labkit
from labkit import spec
from labkit.engine import families
from labkit.engine.simulate import with_policy
from labkit.errors import LabkitError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
KUBE_PRESETS = ["kube-default", "kube-coscheduling"]


@settings(max_examples=150, deadline=None, suppress_health_check=QUIET)
@given(kube_scenarios())
def test_random_kube_scenarios_decide_the_same(scenario):
    assert_same(scenario)


def _strategy(draw) -> dict:
    kind = draw(st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
    names = draw(st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), min_size=1, max_size=3, unique=True))
    strategy = {"type": kind, "resources": [{"name": n, "weight": draw(st.integers(1, 5))} for n in names]}
    if kind == "RequestedToCapacityRatio":
        points = draw(st.lists(st.integers(0, 100), min_size=1, max_size=3, unique=True))
        strategy["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": draw(st.integers(0, 10))} for u in sorted(points)]}
    return strategy


@st.composite
def kube_profiles(draw, max_jobs: int = 8) -> spec.Scenario:
    """What `kube_scenarios` does not reach: the three NodeResourcesFit strategies over random
    resources and weights, BalancedAllocation resources, Score weights, DefaultPreemption's
    candidate counts, Permit waits of 0-60 s, nodes that take few pods, node selectors, memory
    requests, a quota on pods and memory without a LimitRange (pods refused for an unset request),
    and a 105-node pool (numFeasibleNodesToFind and the rotating start node)."""
    big = draw(st.integers(0, 9)) == 0
    pools = [{"name": f"p{i}", "count": 105 if big and i == 0 else draw(st.integers(1, 3)), "labels": {"zone": f"z{i}"},
              "resources": {"nvidia.com/gpu": draw(st.sampled_from([4, 8])), "cpu": draw(st.sampled_from([8, 32])),
                            "memory": "64Gi", "pods": draw(st.sampled_from([2, 3, 110]))}}
             for i in range(draw(st.integers(1, 2)))]
    if len(pools) > 1 and draw(st.booleans()):
        pools[1]["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    quota = {"pods": draw(st.integers(2, 8)), "requests.nvidia.com/gpu": 16}
    if draw(st.booleans()):
        quota["requests.memory"] = "96Gi"
    tenants = [{"name": "team-a", "resourceQuota": {"hard": quota}}]
    classes = [{"name": "low", "value": 10}, {"name": "mid", "value": 100}, {"name": "high", "value": 1000},
               {"name": "never", "value": 1000, "preemptionPolicy": "Never"}]
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        replicas = draw(st.integers(1, 3))
        resources = {"nvidia.com/gpu": draw(st.integers(0, 4))}
        for name, amounts in (("cpu", [1, 4, 8]), ("memory", ["4Gi", "16Gi"])):
            if draw(st.booleans()):
                resources[name] = draw(st.sampled_from(amounts))
        task = {"name": "worker", "replicas": replicas, "minAvailable": draw(st.integers(1, replicas)),
                "resources": resources}
        if draw(st.booleans()):
            task["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        if draw(st.integers(0, 3)) == 0:
            task["nodeSelector"] = {"zone": "z0"}
        jobs.append({"name": f"j{j}", "namespace": draw(st.sampled_from(["default", "team-a"])),
                     "priorityClassName": draw(st.sampled_from(["low", "mid", "high", "never"])),
                     "submit": draw(st.integers(0, 900)), "duration": draw(st.integers(60, 2400)),
                     "gracePeriod": draw(st.sampled_from([0, 30])), "tasks": [task]})
    config = [{"name": "NodeResourcesFit", "args": {"scoringStrategy": _strategy(draw)}},
              {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
                  {"name": n} for n in draw(st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                                                     min_size=1, max_size=3, unique=True))]}},
              {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": draw(st.sampled_from([0, 10, 100])),
                                                     "minCandidateNodesAbsolute": draw(st.sampled_from([0, 1, 100]))}}]
    plugins = {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": draw(st.integers(1, 3))},
                                     {"name": "NodeResourcesBalancedAllocation", "weight": draw(st.integers(1, 3))}]}}
    if draw(st.booleans()):
        plugins["multiPoint"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}
        config.append({"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": draw(st.sampled_from([0, 30, 60]))}})
    kube = {"percentageOfNodesToScore": draw(st.sampled_from([0, 10, 50])),
            "profiles": [{"plugins": plugins, "pluginConfig": config}]}
    return spec.validate({"name": "kube-profiles", "horizon": "8h", "cluster": {"pools": pools}, "tenants": tenants,
                          "priorityClasses": classes, "jobs": jobs, "scheduler": {"policy": "custom", "kube": kube}})


@settings(max_examples=150, deadline=None, suppress_health_check=QUIET)
@given(kube_profiles())
def test_score_strategies_preemption_args_and_quotas_decide_the_same(scenario):
    assert_same(scenario)


@pytest.mark.parametrize("policy", KUBE_PRESETS)
@pytest.mark.parametrize("name", ["slurm-backfill.yaml", "slurm-preempt.yaml", "kueue-cohort.yaml"])
def test_examples_under_kube_presets_are_identical(name, policy):
    fast, _ = assert_same(labkit.load(EXAMPLES / name), policy)
    assert len(fast.events)


def test_case_study_week_under_kube_default_is_identical():
    fast, _ = assert_same(labkit.preset("case-study"), "kube-default")
    assert {"FailedScheduling", "Evicted", "Pipelined"} <= set(fast.events.kind)


def test_small_buffers_grow_and_give_the_same_run():
    compiled, static, missing = families.prepare(with_policy(labkit.load(EXAMPLES / "slurm-preempt.yaml"), "kube-default"))
    assert missing is None
    whole, grown = families.run(compiled, static), families.run(compiled, static, scale=0.01)
    assert grown.events == whole.events and np.array_equal(grown.runs, whole.runs, equal_nan=True)


def test_auto_runs_kube_on_the_core_and_falls_back_for_snapshots():
    example = with_policy(labkit.load(EXAMPLES / "slurm-backfill.yaml"), "kube-default")
    assert labkit.simulate(example).info["engine"] == "numba"
    data = example.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["jobs"][0]["status"] = {"phase": "Running", "running": {"node": ["n-0", "n-1", "n-2"]}}
    result = labkit.simulate(spec.validate(data))
    assert result.info["engine"] == ("reference (the numba core does not simulate job status snapshots under "
                                     "kube-scheduler)")
    with pytest.raises(LabkitError, match="job status snapshots under kube-scheduler"):
        labkit.simulate(spec.validate(data), engine="numba")
