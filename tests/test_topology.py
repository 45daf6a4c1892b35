"""Volcano network topology: HyperNode tiers and a job's networkTopology (hard, soft) in allocate."""

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from scenarios import TOPOLOGY_CONF, assert_same, hypernode_of, topology_scenarios, topology_violations

import labkit
from labkit import spec
from labkit.errors import LabkitWarning

NODE = {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}
POD = {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}


def _racks(gang_topology: dict | None, residents: list[tuple[str, dict]], plugin: bool = True) -> spec.Scenario:
    """Two racks of two 8-GPU nodes (x-0, x-1 | y-0, y-1) under one spine; `residents` (row, resources)
    start at 0, one on each row given, the 2-pod gang at 60 s."""
    tier2 = [{"name": "predicates"}, {"name": "nodeorder"}] + ([{"name": "network-topology-aware"}] if plugin else [])
    jobs = [{"name": f"r{i}", "submit": 0, "duration": f"{30 * (i + 1)}m",
             "tasks": [{"name": "worker", "nodeSelector": {"row": row}, "resources": resources}]}
            for i, (row, resources) in enumerate(residents)]
    gang = {"name": "gang", "submit": 60, "duration": "60m",
            "tasks": [{"name": "worker", "replicas": 2, "resources": POD}]}
    if gang_topology is not None:
        gang["networkTopology"] = gang_topology
    return spec.validate({
        "name": "racks",
        "cluster": {"pools": [{"name": row, "count": 2, "labels": {"row": row}, "resources": NODE} for row in "xy"],
                    "topology": {"tiers": [{"name": "rack", "size": 2}, {"name": "spine", "size": 2}]}},
        "queues": [{"name": "default"}],
        "jobs": jobs + [gang],
        "scheduler": {"conf": {"actions": "enqueue, allocate",
                               "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": tier2}]}},
    })


def _run(scenario: spec.Scenario):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabkitWarning)
        return labkit.simulate(scenario)


def _pods(result, job: str):
    return result.tasks[result.tasks.job == f"default/{job}"]


def _racks_of(scenario, nodes) -> set[str]:
    return {hypernode_of(scenario)[n][0] for n in nodes}


def test_hard_tier1_gang_waits_until_one_rack_has_room():
    """The issue's case: a resident on each rack leaves one free node per rack; a hard tier-1 gang of
    2 x 8 GPUs stays pending until the first resident ends, then runs inside that rack."""
    residents = [("x", POD), ("y", POD)]
    scenario = _racks({"mode": "hard", "highestTierAllowed": 1}, residents)
    result = _run(scenario)
    gang, first = _pods(result, "gang"), _pods(result, "r0")
    assert (gang.start == first.end.iloc[0]).all()
    assert _racks_of(scenario, gang.node) == {"rack-0"}
    # the same gang without networkTopology starts at once, across the racks
    free = _run(_racks(None, residents))
    assert _pods(free, "gang").start.max() < first.end.iloc[0]
    assert len(_racks_of(scenario, _pods(free, "gang").node)) == 2


def test_soft_gang_is_bound_across_racks_when_no_rack_has_room():
    residents = [("x", POD), ("y", POD)]
    scenario = _racks({"mode": "soft", "highestTierAllowed": 1}, residents)
    result = _run(scenario)
    gang = _pods(result, "gang")
    assert gang.start.max() < _pods(result, "r0").end.iloc[0]
    assert len(_racks_of(scenario, gang.node)) == 2


def test_soft_gang_prefers_one_rack():
    """Half-full nodes x-0 and y-0: nodeorder alone spreads a 2 x 4-GPU gang over the two emptiest
    nodes, one per rack; with soft networkTopology the gang lands inside one rack."""
    half = {"nvidia.com/gpu": 4, "cpu": 16, "memory": "128Gi"}
    soft = _with_gang_resources(_racks({"mode": "soft", "highestTierAllowed": 2}, [("x", half), ("y", half)]), half)
    plain = _with_gang_resources(_racks(None, [("x", half), ("y", half)], plugin=False), half)
    assert len(_racks_of(plain, _pods(_run(plain), "gang").node)) == 2
    assert len(_racks_of(soft, _pods(_run(soft), "gang").node)) == 1


def _with_gang_resources(scenario: spec.Scenario, resources: dict) -> spec.Scenario:
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["jobs"][-1]["tasks"][0]["resources"] = resources
    return spec.validate(data)


def test_network_topology_without_the_plugin_is_ignored_with_a_warning():
    residents = [("x", POD), ("y", POD)]
    scenario = _racks({"mode": "hard", "highestTierAllowed": 1}, residents, plugin=False)
    labkit.engine.families.forget_compiled()
    with pytest.warns(LabkitWarning, match=r"jobs\[2\].networkTopology is ignored, as Volcano ignores it"):
        result = labkit.simulate(scenario)
    assert len(_racks_of(scenario, _pods(result, "gang").node)) == 2


def test_hard_tier_0_warns_that_the_job_never_runs():
    scenario = _racks({"mode": "hard", "highestTierAllowed": 0}, [])
    labkit.engine.families.forget_compiled()
    with pytest.warns(LabkitWarning, match="highestTierAllowed is 0 in hard mode"):
        result = labkit.simulate(scenario)
    assert _pods(result, "gang").start.isna().all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_scenarios())
def test_hard_gangs_stay_inside_one_allowed_hypernode(scenario):
    result = _run(scenario)
    assert topology_violations(result) == []


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_scenarios())
def test_engines_agree_when_the_conf_drops_the_plugin(scenario):
    """Without network-topology-aware both engines place networkTopology jobs like any other."""
    conf = {**TOPOLOGY_CONF, "tiers": [TOPOLOGY_CONF["tiers"][0], {"plugins": TOPOLOGY_CONF["tiers"][1]["plugins"][:-1]}]}
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["scheduler"]["conf"] = conf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabkitWarning)
        assert_same(spec.validate(data))


def test_explain_names_the_hypernode_the_gang_was_tried_in():
    """Each rack has 8 GPUs idle, 4 on each node: enough for an 8-GPU pod's minResources, so both racks
    are tried, and the pod fits no node of either. The pod's FailedScheduling, as FitErrors.Error()
    forms it for a HyperNode, names the last rack tried."""
    pools = [{"name": name, "count": 1, "labels": {"host": name}, "resources": NODE} for name in ("x0", "x1", "y0", "y1")]
    half = {"nvidia.com/gpu": 4, "cpu": 16, "memory": "128Gi"}
    residents = [{"name": f"r-{name}", "submit": 0, "duration": "2h",
                  "tasks": [{"name": "worker", "nodeSelector": {"host": name}, "resources": half}]} for name in ("x0", "x1", "y0", "y1")]
    gang = {"name": "gang", "submit": 60, "duration": "1h", "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "tasks": [{"name": "worker", "resources": POD}]}
    scenario = spec.validate({
        "name": "half-racks", "cluster": {"pools": pools, "topology": {"tiers": [{"name": "rack", "size": 2}]}},
        "queues": [{"name": "default"}], "jobs": residents + [gang],
        "scheduler": {"conf": {"actions": "enqueue, allocate", "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}]},
            {"plugins": [{"name": "predicates"}, {"name": "nodeorder"}, {"name": "network-topology-aware"}]}]}}})
    result = _run(scenario)
    why = labkit.diagnose.explain(result, "gang", 600)
    assert why.reason == "Unschedulable"
    assert why.message == "In hyperNode rack-1: 0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
    assert _pods(result, "gang").start.min() >= _pods(result, "r-x0").end.min()


def test_explain_says_no_hypernode_has_room():
    result = _run(_racks({"mode": "hard", "highestTierAllowed": 1}, [("x", POD), ("y", POD)]))
    why = labkit.diagnose.explain(result, "gang", 600)
    assert why.reason == "NetworkTopology"
    assert why.details == ["hyperNode rack-0 (tier 1): nvidia.com/gpu: idle 8, future idle 8 < minResources 16",
                           "hyperNode rack-1 (tier 1): nvidia.com/gpu: idle 8, future idle 8 < minResources 16"]


@pytest.mark.parametrize("topology", [None, {"mode": "soft", "highestTierAllowed": 1}])
def test_a_job_with_network_topology_never_preempts(topology):
    """preempt skips a starving job with networkTopology (v1.15.1: "jobs containing networkTopology do
    not support preemption"), even where the plugin is off and networkTopology places nothing; the
    same job without it evicts the low job's pod above its minAvailable."""
    half = {"nvidia.com/gpu": 4, "cpu": 16, "memory": "128Gi"}
    high = {"name": "high", "submit": 60, "duration": "1h", "priorityClassName": "high",
            "tasks": [{"name": "worker", "resources": half}]}
    if topology is not None:
        high["networkTopology"] = topology
    scenario = spec.validate({
        "name": "preempt", "cluster": {"pools": [{"name": "x", "count": 1, "resources": NODE}],
                                       "topology": {"tiers": [{"name": "rack", "size": 1}]}},
        "queues": [{"name": "default"}], "priorityClasses": [{"name": "low", "value": 10}, {"name": "high", "value": 1000}],
        "jobs": [{"name": "low", "submit": 0, "duration": "2h", "priorityClassName": "low",
                  "tasks": [{"name": "worker", "replicas": 2, "minAvailable": 1, "resources": half}]}, high],
        "scheduler": {"conf": {"actions": "enqueue, allocate, preempt", "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {"plugins": [{"name": "predicates"}, {"name": "nodeorder"}]}]}}})
    result = _run(scenario)
    evicted = _pods(result, "low").evicted.notna().any()
    assert evicted == (topology is None)
