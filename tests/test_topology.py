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


def _run(scenario: spec.Scenario, engine: str = "auto"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabkitWarning)
        result = labkit.simulate(scenario, engine=engine)
    assert engine == "auto" or result.info["engine"] == engine
    return result


def _pods(result, job: str):
    return result.tasks[result.tasks.job == f"default/{job}"]


def _racks_of(scenario, nodes) -> set[str]:
    return {hypernode_of(scenario)[n][0] for n in nodes}


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_hard_tier1_gang_waits_until_one_rack_has_room(engine):
    """The issue's case: a resident on each rack leaves one free node per rack; a hard tier-1 gang of
    2 x 8 GPUs stays pending until the first resident ends, then runs inside that rack."""
    residents = [("x", POD), ("y", POD)]
    scenario = _racks({"mode": "hard", "highestTierAllowed": 1}, residents)
    result = _run(scenario, engine)
    gang, first = _pods(result, "gang"), _pods(result, "r0")
    assert (gang.start == first.end.iloc[0]).all()
    assert _racks_of(scenario, gang.node) == {"rack-0"}
    # the same gang without networkTopology starts at once, across the racks
    free = _run(_racks(None, residents))
    assert _pods(free, "gang").start.max() < first.end.iloc[0]
    assert len(_racks_of(scenario, _pods(free, "gang").node)) == 2


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_soft_gang_is_bound_across_racks_when_no_rack_has_room(engine):
    residents = [("x", POD), ("y", POD)]
    scenario = _racks({"mode": "soft", "highestTierAllowed": 1}, residents)
    result = _run(scenario, engine)
    gang = _pods(result, "gang")
    assert gang.start.max() < _pods(result, "r0").end.iloc[0]
    assert len(_racks_of(scenario, gang.node)) == 2


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_soft_gang_prefers_one_rack(engine):
    """Half-full nodes x-0 and y-0: nodeorder alone spreads a 2 x 4-GPU gang over the two emptiest
    nodes, one per rack; with soft networkTopology the gang lands inside one rack."""
    half = {"nvidia.com/gpu": 4, "cpu": 16, "memory": "128Gi"}
    soft = _with_gang_resources(_racks({"mode": "soft", "highestTierAllowed": 2}, [("x", half), ("y", half)]), half)
    plain = _with_gang_resources(_racks(None, [("x", half), ("y", half)], plugin=False), half)
    assert len(_racks_of(plain, _pods(_run(plain, engine), "gang").node)) == 2
    assert len(_racks_of(soft, _pods(_run(soft, engine), "gang").node)) == 1


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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_scenarios(vary_conf=True))
def test_engines_agree_with_network_topology(scenario):
    """The numba core simulates network-topology-aware as the reference engine does: hard and soft
    jobs, the plugin's arguments and extension points, a second queue with reclaim, preempt."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabkitWarning)
        assert_same(scenario)


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


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("topology", [None, {"mode": "soft", "highestTierAllowed": 1}])
def test_a_job_with_network_topology_never_preempts(topology, engine):
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
    result = _run(scenario, engine)
    evicted = _pods(result, "low").evicted.notna().any()
    assert evicted == (topology is None)


def _tree(nodes: dict[str, dict]) -> dict:
    """The HyperNode tree of Volcano's TestHyperNodeOrderFn: s0 (tier 3) over s1, s2 (tier 2) over
    racks s3, s4 | s5, s6 (tier 1) of two nodes each."""
    return {
        "nodes": [{"name": name, **spec_} for name, spec_ in nodes.items()],
        "hypernodes": [{"name": f"s{k}", "tier": 1, "members": [f"s{k}-n1", f"s{k}-n2"]} for k in (3, 4, 5, 6)]
        + [{"name": "s1", "tier": 2, "members": ["s3", "s4"]}, {"name": "s2", "tier": 2, "members": ["s5", "s6"]},
           {"name": "s0", "tier": 3, "members": ["s1", "s2"]}],
        "queues": [{"name": "q1", "weight": 1}],
        "podgroups": [{"name": "pg1", "ns": "ns1", "queue": "q1", "minMember": 2, "phase": "Inqueue",
                       "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}],
    }


@pytest.mark.parametrize("arguments, foo, expected", [
    ({}, None, {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0,
                "<cluster-top-hypernode>": 25.0}),
    ({"weight": 10, "hypernode.binpack.cpu": 3, "hypernode.binpack.memory": 4,
      "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
      "hypernode.binpack.resources.nvidia.com/gpu": 2, "hypernode.binpack.resources.example.com/foo": 3,
      "hypernode.binpack.normal-pod.enable": True, "hypernode.binpack.normal-pod.fading": 0},
     (8, 0, 8, 0, 16, 0, 16, 0),
     {"s0": 266.7, "s1": 700.0, "s2": 450.0, "s3": 0.0, "s4": 0.0, "s5": 0.0, "s6": 800.0,
      "<cluster-top-hypernode>": 266.7}),
], ids=["default-arguments", "customized-arguments"])
def test_hyper_node_order_scores_as_volcano(arguments, foo, expected):
    """Volcano's TestHyperNodeOrderFn (plugins/network-topology-aware, v1.15.1): each HyperNode's
    binpacking score with the job's two 4-cpu 4G pods on it, to within its eps of 0.1."""
    from labkit.conformance import load_case
    from labkit.engine.volcano.reference import open_session

    shapes = [("2", "4G"), ("2", "4G"), ("4", "4G"), ("4", "4G"), ("2", "8G"), ("2", "8G"), ("4", "8G"), ("4", "8G")]
    names = [f"s{k}-n{i}" for k in (3, 4, 5, 6) for i in (1, 2)]
    nodes = {}
    for k, (name, (cpu, memory)) in enumerate(zip(names, shapes)):
        nodes[name] = {"cpu": cpu, "memory": memory, "pods": 10}
        if foo is not None:
            nodes[name]["scalars"] = {"example.com/foo": foo[k]}
    request = {"cpu": "4", "memory": "4G", **({"example.com/foo": "8"} if foo is not None else {})}
    case = {**_tree(nodes),
            "config": {"actions": ["allocate"], "tiers": [[{"name": "network-topology-aware",
                                                            "enabled": ["hyperNodeOrder"], "arguments": arguments}]]},
            "pods": [{"name": p, "ns": "ns1", "podgroup": "pg1", "requests": request, "phase": "Pending",
                      "labels": {"volcano.sh/task-spec": "worker"}} for p in ("p1", "p2")]}
    problem, state = load_case(case)
    ssn = open_session(problem, state)
    hyper_nodes = list(range(len(ssn.hypernodes.names)))
    scores = dict(zip(ssn.hypernodes.names, ssn.hyper_node_score(ssn.jobs[0], hyper_nodes)))
    assert scores == pytest.approx(expected, abs=0.1)
