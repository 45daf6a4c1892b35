"""Kueue's Topology Aware Scheduling (issue 27, point 1, the Kueue half): the Topology, a flavor's
topologyName and a task's topologyRequest in the scenario, their errors, the placement on the
example's racks, the export, the notes of the other families, and random scenarios checked against
what TAS promises (a required podset inside one domain of its level, no node over its capacity)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import assert_same, over_committed_nodes
from test_spec import run_cli

import labkit
from labkit import spec
from labkit.errors import LabkitWarning, SpecError
from labkit.k8s.export import render
from labkit.k8s.manifests import manifests
from labkit.spec import honoured

EXAMPLE = Path(labkit.__file__).parent / "examples" / "kueue-tas.yaml"
RACK = "topology.labkit.io/rack"
HOST = "kubernetes.io/hostname"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def run(data: dict) -> labkit.Result:
    return labkit.simulate(spec.validate(data))


def labels_of(scenario: spec.Scenario) -> dict[str, dict[str, str]]:
    return {labels[HOST]: labels for labels in scenario.cluster.node_labels()}


def test_the_cluster_topology_labels_every_node_as_the_export_does():
    scenario = spec.load(EXAMPLE)
    exported = {n["metadata"]["name"]: n["metadata"]["labels"] for n in manifests(scenario) if n["kind"] == "Node"}
    for node, labels in labels_of(scenario).items():
        assert labels.items() <= exported[node].items()
    assert [labels[RACK] for labels in labels_of(scenario).values()] == ["rack-0", "rack-0", "rack-1", "rack-1"]


def test_a_required_rack_waits_for_one_rack_to_hold_the_whole_podset():
    """finetune's 3 pods need one rack: pretrain holds 3 of rack-0's 4 slots, eval 2 of rack-1's, so
    the 3 free slots (12 GPUs, within quota) are split 1 + 2 and Kueue leaves it pending with its own
    message until eval ends; then all three land in one rack."""
    result = run(example())
    labels = labels_of(result.scenario)
    tasks, events = result.tasks, result.events
    finetune = tasks[tasks.job == "default/finetune"]
    assert len(finetune) == 3 and len({labels[n][RACK] for n in finetune.node}) == 1
    pending = events[(events.job == "default/finetune") & (events.kind == "Pending")]
    assert list(pending.message.unique()) == [
        ('couldn\'t assign flavors to pod set worker: topology "default" allows to fit only 2 out of 3 pod(s). '
        'Total nodes: 4; excluded: resource "nvidia.com/gpu": 2')]  # gpu-0 and gpu-2 are full
    admitted = events[(events.job == "default/finetune") & (events.kind == "QuotaReserved")]
    assert list(admitted.time) == [tasks[tasks.job == "default/eval"].end.max()]
    held = tasks[(tasks.start <= 60) & (tasks.end > 60)]["nvidia.com/gpu"].sum()
    assert held + 3 * 4 <= 32  # the quota was never the reason
    eval_pods = tasks[tasks.job == "default/eval"]
    assert eval_pods.node.nunique() == 1  # required hostname: one node


def test_preferred_spreads_where_required_waits():
    data = example()
    data["jobs"][2]["tasks"][0]["topologyRequest"] = {"preferred": RACK}
    result = run(data)
    labels = labels_of(result.scenario)
    finetune = result.tasks[result.tasks.job == "default/finetune"]
    events = result.events
    assert list(events[(events.job == "default/finetune") & (events.kind == "QuotaReserved")].time) == [60]
    assert len({labels[n][RACK] for n in finetune.node}) == 2


def test_without_a_request_a_tas_only_queue_packs_the_fullest_nodes():
    """A TAS-only ClusterQueue's podsets use TAS unasked, unconstrained: LeastFreeCapacity packs the
    pods onto the node with the least room that holds them, where kube-scheduler's least-allocated
    default would spread them."""
    data = example()
    data["jobs"] = [{"name": f"p{i}", "submit": i, "duration": "1h",
                     "tasks": [{"resources": {"nvidia.com/gpu": 2}}]} for i in range(4)]
    result = run(data)
    assert result.tasks.node.nunique() == 1
    data["kueue"]["resourceFlavors"][0].pop("topologyName")
    plain = run(data)
    assert plain.tasks.node.nunique() == 4


def test_the_example_runs_the_same_on_both_engines():
    assert_same(spec.load(EXAMPLE))


def test_export_writes_the_topology_and_the_podset_annotations():
    objects = manifests(spec.load(EXAMPLE))
    topology = [o for o in objects if o["kind"] == "Topology"]
    assert topology == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": topology[0]["metadata"],
                         "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}}]
    flavor = next(o for o in objects if o["kind"] == "ResourceFlavor")
    assert flavor["spec"]["topologyName"] == "default"
    assert "15-topologies.yaml" in render(objects, "labkit export k8s kueue-tas.yaml")
    jobs = {o["metadata"]["name"]: o["spec"]["template"]["metadata"]["annotations"] for o in objects
            if o["kind"] == "Job"}
    assert jobs["pretrain"]["kueue.x-k8s.io/podset-preferred-topology"] == RACK
    assert jobs["eval"]["kueue.x-k8s.io/podset-required-topology"] == HOST
    assert jobs["finetune"]["kueue.x-k8s.io/podset-required-topology"] == RACK


def test_other_families_warn_that_the_request_is_kueue_s():
    says = honoured.decision("jobs[].tasks[].topologyRequest", "volcano")
    assert says.kind == "warned" and "Kueue's" in says.says
    assert honoured.decision("jobs[].tasks[].topologyRequest.required", "kueue").kind == "honoured"
    assert honoured.decision("cluster.topology", "kueue").kind == "honoured"
    data = example()
    data["scheduler"] = {"policy": "volcano-shipped"}
    data.pop("kueue")
    with pytest.warns(LabkitWarning, match=r"jobs\[0\]\.tasks\[0\]\.topologyRequest.*Kueue's"):
        labkit.simulate(spec.validate(data), engine="reference")


def _edit(path: str, value) -> dict:
    data = example()
    *head, last = path.split(".")
    node = data
    for key in head:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        node.pop(last)
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def _labelled(data: dict) -> dict:
    data["cluster"]["pools"][0]["labels"] = {"gpu": "h100"}
    return data


@pytest.mark.parametrize("data, message", [
    (_edit("jobs.2.tasks.0.topologyRequest", {"required": RACK, "preferred": RACK}),
     ("jobs[2].tasks[0].topologyRequest: give exactly one of required (a level), preferred (a level) or "
     "unconstrained: true, not required and preferred")),
    (_edit("jobs.2.tasks.0.topologyRequest", {"required": "topology.labkit.io/block"}),
     ("jobs[2].tasks[0].topologyRequest.required: topology.labkit.io/block is a level of no Topology of "
     f"ClusterQueue research's flavors ({HOST}, {RACK})")),
    (_edit("kueue.resourceFlavors.0.topologyName", "nosuch"),
     "kueue.resourceFlavors[0].topologyName: no Topology named 'nosuch'"),
    (_edit("kueue.topologies.0.levels", [{"nodeLabel": HOST}, {"nodeLabel": RACK}]),
     ("kueue.topologies[0].levels[0].nodeLabel: the kubernetes.io/hostname label can only be used at the lowest "
     "level of topology")),
    (_edit("kueue.topologies.0.levels", [{"nodeLabel": "zone"}]),
     "kueue.topologies[0].levels[0].nodeLabel: no node has the label zone"),
    (_edit("kueue.clusterQueues.0.preemption", {"withinClusterQueue": "LowerPriority"}),
     ("kueue.clusterQueues[0].preemption: ClusterQueue research has the Topology Aware Scheduling flavor gpu: "
     "TAS-aware preemption is not simulated (use Never)")),
    (_labelled(_edit("jobs.2.tasks.0.nodeSelector", {"gpu": "h100"})),
     "jobs[2].tasks[0].nodeSelector: a nodeSelector with a topologyRequest"),
])
def test_bad_tas_input_is_one_line_naming_the_field(tmp_path, data, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    done = run_cli("validate", str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"labkit: error: {message}"), done.stderr


def test_node_events_with_tas_are_refused():
    data = example()
    data["cluster"]["events"] = [{"at": "30m", "node": "gpu-0", "kind": "cordon"}]
    data["scheduler"] = {"kueue": {}}
    with pytest.raises(SpecError, match=r"cluster\.events: node events with Topology Aware Scheduling"):
        run(data)


def test_two_tas_flavors_on_the_same_nodes_are_refused():
    data = example()
    data["kueue"]["resourceFlavors"].append({"name": "gpu-b", "topologyName": "default"})
    data["kueue"]["clusterQueues"][0]["resourceGroups"][0]["flavors"].append(
        {"name": "gpu-b", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 0}]})
    with pytest.raises(SpecError, match=r"kueue\.resourceFlavors\[1\]\.topologyName: flavors gpu and gpu-b "
                                             "share the node gpu-0"):
        spec.validate(data)


# ----------------------------------------------------------------------------- random scenarios


@st.composite
def tas_scenarios(draw) -> spec.Scenario:
    """2-3 racks of 1-3 nodes (8 GPUs) as one TAS flavor with levels rack (and the hostname, or not);
    a ClusterQueue whose quota is the whole cluster or less; up to 8 jobs of 1-2 tasks of 1-4 pods of
    1-8 GPUs (some elastic: partial admission), each task required, preferred or unconstrained at a
    level, or asking nothing (the queue is TAS-only); some jobs in a namespace no LocalQueue serves
    (kube-scheduler places them, and TAS counts their pods)."""
    racks, size = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    levels = [RACK, HOST] if draw(st.booleans()) else [RACK]
    jobs = []
    for j in range(draw(st.integers(1, 8))):
        tasks = []
        for k in range(draw(st.integers(1, 2))):
            task = {"name": f"t{k}", "resources": {"nvidia.com/gpu": draw(st.integers(1, 8))}}
            if draw(st.integers(0, 3)) == 0:
                task["elastic"] = {"min": 1, "max": draw(st.integers(2, 4))}
            else:
                task["replicas"] = draw(st.integers(1, 4))
            kind = draw(st.sampled_from(["required", "preferred", "unconstrained", None]))
            if kind == "unconstrained":
                task["topologyRequest"] = {"unconstrained": True}
            elif kind is not None:
                task["topologyRequest"] = {kind: draw(st.sampled_from(levels))}
            tasks.append(task)
        unmanaged = draw(st.integers(0, 5)) == 0
        if unmanaged:
            for task in tasks:
                task.pop("topologyRequest", None)
        jobs.append({"name": f"j{j}", "namespace": "ops" if unmanaged else "default",
                     "submit": draw(st.integers(0, 1800)), "duration": draw(st.integers(60, 7200)), "tasks": tasks})
    quota = draw(st.integers(8, racks * size * 8))
    return spec.validate({
        "cluster": {"pools": [{"name": "gpu", "count": racks * size, "resources": {"nvidia.com/gpu": 8}}],
                    "topology": {"tiers": [{"name": "rack", "size": size}]}},
        "tenants": [{"name": "ops"}],
        "kueue": {"topologies": [{"name": "default", "levels": [{"nodeLabel": key} for key in levels]}],
                  "resourceFlavors": [{"name": "gpu", "topologyName": "default"}],
                  "clusterQueues": [{"name": "cq", "queueingStrategy": draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
                                     "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                                         {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}],
                  "localQueues": [{"name": "main", "namespace": "default", "clusterQueue": "cq"}]},
        "jobs": jobs, "horizon": "12h", "scheduler": {"kueue": {}},
    })


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tas_scenarios())
def test_random_tas_scenarios_keep_required_podsets_in_one_domain(scenario):
    result = labkit.simulate(scenario, engine="reference")
    assert over_committed_nodes(result) == []
    labels = labels_of(scenario)
    for job in scenario.jobs:
        for task in job.tasks:
            request = task.topology_request
            pods = result.tasks[(result.tasks.job == f"{job.namespace}/{job.name}") & (result.tasks.role == task.name)]
            if request is not None and request.required is not None:
                for _, together in pods.groupby("start"):  # an elastic podset runs its pods in waves
                    assert len({labels[n][request.required] for n in together.node}) == 1, (job.name, list(pods.node))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tas_scenarios())
def test_random_tas_scenarios_run_the_same_on_both_engines(scenario):
    assert_same(scenario)


def _two_pools(taint: bool) -> dict:
    """Pool a (untainted) and pool b (tainted dedicated=ml when ``taint``), 8 GPUs a node, one rack."""
    pools = [{"name": "a", "count": 1, "resources": {"nvidia.com/gpu": 8}, "labels": {"kind": "a"}},
             {"name": "b", "count": 2, "resources": {"nvidia.com/gpu": 8}, "labels": {"kind": "b"}}]
    if taint:
        pools[1]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    return {"cluster": {"pools": pools, "topology": {"tiers": [{"name": "rack", "size": 3}]}},
            "kueue": {"topologies": [{"name": "default", "levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}],
                      "localQueues": [{"name": "main", "namespace": "default", "clusterQueue": "cq"}]},
            "scheduler": {"kueue": {}}}


def _pending(result: labkit.Result, job: str) -> list[str]:
    events = result.events
    return list(events[(events.job == f"default/{job}") & (events.kind == "Pending")].message.unique())


def test_an_untolerated_taint_excludes_nodes_as_kueue_counts_them():
    data = _two_pools(taint=True)
    data["kueue"]["resourceFlavors"] = [{"name": "gpu", "topologyName": "default"}]
    data["kueue"]["clusterQueues"] = [{"name": "cq", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 24}]}]}]}]
    data["jobs"] = [{"name": "gang", "duration": "1h", "tasks": [
        {"replicas": 2, "resources": {"nvidia.com/gpu": 8}, "topologyRequest": {"required": RACK}}]}]
    fast, _ = assert_same(spec.validate(data))
    assert _pending(fast, "gang") == [('couldn\'t assign flavors to pod set worker: topology "default" allows to fit only '
                                      '1 out of 2 pod(s). Total nodes: 3; excluded: taint "dedicated=ml:NoSchedule": 2')]
    data["jobs"][0]["tasks"][0]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    fast, _ = assert_same(spec.validate(data))
    assert _pending(fast, "gang") == [] and fast.tasks.start.notna().all()


def test_a_flavor_that_does_not_match_the_request_is_skipped_with_kueue_s_reason():
    """A ClusterQueue with a TAS flavor (pool a) before a plain one (pool b): a podset asking for no
    topology skips the TAS flavor, a podset asking for one skips the plain flavor."""
    data = _two_pools(taint=False)
    data["kueue"]["resourceFlavors"] = [{"name": "tas", "nodeLabels": {"kind": "a"}, "topologyName": "default"},
                                        {"name": "plain", "nodeLabels": {"kind": "b"}}]
    data["kueue"]["clusterQueues"] = [{"name": "cq", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "tas", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
        {"name": "plain", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}]
    data["jobs"] = [
        {"name": "plain", "duration": "1h", "tasks": [{"resources": {"nvidia.com/gpu": 8}}]},
        {"name": "placed", "submit": 10, "duration": "1h",
         "tasks": [{"resources": {"nvidia.com/gpu": 8}, "topologyRequest": {"required": HOST}}]},
        {"name": "second", "submit": 20, "duration": "1h",
         "tasks": [{"resources": {"nvidia.com/gpu": 8}, "topologyRequest": {"required": HOST}}]}]
    fast, _ = assert_same(spec.validate(data))
    nodes = fast.tasks.groupby("job").node.first()
    assert nodes["default/plain"].startswith("b-") and nodes["default/placed"] == "a-0"
    assert _pending(fast, "second") == [
        ("couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor tas, 8 more "
        'needed, Flavor "plain" does not support TopologyAwareScheduling')]
