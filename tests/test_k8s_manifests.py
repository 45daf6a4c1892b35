"""Every generated manifest validates: core kinds with kubernetes-validate (strict, bundled schemas, no
network), Volcano kinds against the v1.15.1 CRD openAPIV3Schema in shared/upstream, made strict the way
the API server's strict field validation (kubectl's default) treats unknown fields."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from labkit import spec
from labkit.errors import SpecError
from labkit.k8s.manifests import (
    APPLY_ORDER,
    DURATION,
    KUEUE_API,
    LAB,
    MANAGED_BY,
    PREEMPTABLE,
    SUBMIT,
    TOPOLOGY,
    manifests,
)

KUBERNETES_VERSION = "1.35"
"""The newest Kubernetes Volcano v1.15 supports (1.24-1.35)."""
CRDS = Path(__file__).resolve().parents[2] / "shared" / "upstream" / "volcano-v1.15.1-crds"
CRD_FILES = {
    ("batch.volcano.sh/v1alpha1", "Job"): "batch.volcano.sh_jobs.yaml",
    ("scheduling.volcano.sh/v1beta1", "Queue"): "scheduling.volcano.sh_queues.yaml",
    ("topology.volcano.sh/v1alpha1", "HyperNode"): "topology.volcano.sh_hypernodes.yaml",
}
EXAMPLES = Path(spec.__file__).resolve().parents[1] / "examples"
needs_crds = pytest.mark.skipif(not CRDS.is_dir(), reason=f"Volcano CRDs not found at {CRDS}")

EDGE_CASES = {
    "name": "edge-cases",
    "cluster": {
        "pools": [
            {"name": "h100", "count": 3, "resources": {"nvidia.com/gpu": 8, "cpu": 96, "memory": "2Ti"},
             "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             "taints": [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]},
            {"name": "cpu", "count": 2, "resources": {"cpu": 64, "memory": "256Gi", "pods": 250}},
        ],
        "topology": {"tiers": [{"name": "rack", "size": 2}, {"name": "spine", "size": 2}]},
    },
    "tenants": [{"name": "research", "namespace": "lab-research",
                 "resourceQuota": {"hard": {"requests.nvidia.com/gpu": 16, "pods": 100}},
                 "limitRange": {"limits": [{"type": "Container", "default": {"cpu": 2}, "defaultRequest": {"cpu": 0.5},
                                            "max": {"memory": "1Ti"}}]}}],
    "queues": [{"name": "research", "weight": 4, "capability": {"nvidia.com/gpu": 24}, "deserved": {"nvidia.com/gpu": 16},
                "guarantee": {"nvidia.com/gpu": 8}, "reclaimable": False, "priority": 2},
               {"name": "research-high", "parent": "research"}, {"name": "research-low", "parent": "research"}],
    "priorityClasses": [{"name": "urgent", "value": 100000, "description": "deadline work"},
                        {"name": "batch", "value": 10, "preemptionPolicy": "Never", "globalDefault": True}],
    "jobs": [
        {"name": "elastic", "namespace": "lab-research", "queue": "research-high", "priorityClassName": "urgent",
         "submit": "90m", "duration": "2h", "preemptible": False,
         "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
         "tasks": [{"name": "worker", "elastic": {"min": 2, "max": 3},
                    "resources": {"nvidia.com/gpu": 8, "cpu": 0.25, "memory": "64Gi"},
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]}]},
        {"name": "ps-worker", "queue": "research-low", "work": 3600, "gracePeriod": 90,
         "tasks": [{"name": "ps", "resources": {"cpu": 4}},
                   {"name": "worker", "replicas": 2, "minAvailable": 1, "resources": {"cpu": 8, "pods": 1}}]},
    ],
}


def _scenarios() -> dict[str, spec.Scenario]:
    return {**{name: spec.preset(name) for name in spec.preset_names()}, "edge-cases": spec.validate(EDGE_CASES),
            "kueue-cohort": spec.load(EXAMPLES / "kueue-cohort.yaml")}


@cache
def _objects(name: str, time_scale: float = 1.0) -> list[dict]:
    return manifests(_scenarios()[name], time_scale)


SCENARIOS = sorted(_scenarios())
VOLCANO_LABS = [name for name in SCENARIOS if spec.scheduler_of(_scenarios()[name]).kueue is None]


@cache
def _one_per_shape(name: str) -> list[dict]:
    """One object per shape: the case study has thousands of vcjobs from three generators."""
    seen, out = set(), []
    for obj in _objects(name):
        shape = (obj["kind"], obj["metadata"].get("namespace"), json.dumps(_keys(obj)))
        if shape not in seen:
            seen.add(shape)
            out.append(obj)
    return out


def _keys(value):
    """The object's shape: its keys and the types of its values."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("name", SCENARIOS)
def test_core_kinds_validate_strictly(name):
    core = [o for o in _one_per_shape(name) if (o["apiVersion"], o["kind"]) not in CRD_FILES
            and not o["apiVersion"].startswith((KUEUE_API, "jobset.x-k8s.io/"))]
    assert {o["kind"] for o in core} >= {"Node", "ConfigMap"}
    for obj in core:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("name", SCENARIOS)
def test_vcjob_pod_templates_validate_as_core_pod_templates(name):
    for job in [o for o in _one_per_shape(name) if (o["apiVersion"], o["kind"]) in CRD_FILES and o["kind"] == "Job"]:
        for task in job["spec"]["tasks"]:
            template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": task["name"]},
                        "template": task["template"]}
            kubernetes_validate.validate(template, KUBERNETES_VERSION, strict=True)


def _strict(schema):
    """The CRD schema with unknown fields rejected wherever the API server would reject them."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get(
                "x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def _crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((CRDS / CRD_FILES[(api_version, kind)]).read_text())
    version = api_version.split("/")[1]
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)
    return jsonschema.Draft7Validator(_strict(schema))


@needs_crds
@pytest.mark.parametrize("name", VOLCANO_LABS)
def test_volcano_kinds_validate_against_the_crds(name):
    volcano = [o for o in _one_per_shape(name) if (o["apiVersion"], o["kind"]) in CRD_FILES]
    assert {"Job", "Queue"} <= {o["kind"] for o in volcano}
    for obj in volcano:
        errors = list(_crd_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj))
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: {errors[0].message} at {list(errors[0].path)}"


@needs_crds
def test_the_strict_crd_check_rejects_an_unknown_field():
    queue = copy.deepcopy(next(o for o in _objects("case-study") if o["kind"] == "Queue"))
    queue["spec"]["guarantee"] = {"nvidia.com/gpu": 8}  # the ResourceList must sit under `resource`
    assert list(_crd_validator(queue["apiVersion"], "Queue").iter_errors(queue))


def test_hypernode_members_use_exactly_one_selector():
    for obj in _objects("edge-cases"):
        if obj["kind"] == "HyperNode":
            for member in obj["spec"]["members"]:
                assert len(member["selector"]) == 1  # the CRD's CEL rule: one of exactMatch/regexMatch/labelMatch


_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_object_is_labelled_for_the_lab_with_valid_labels(name):
    for obj in _objects(name):
        labels = obj["metadata"]["labels"]
        assert labels[MANAGED_BY] == "labkit" and labels[LAB] == name
        for key, value in labels.items():
            assert _LABEL_KEY.match(key) and _LABEL_VALUE.match(value), (key, value)


@pytest.mark.parametrize("name", SCENARIOS)
def test_objects_come_in_apply_order(name):
    kinds = [APPLY_ORDER.index((o["apiVersion"], o["kind"])) for o in _objects(name)]
    assert kinds == sorted(kinds)


def test_kwok_nodes_carry_gpus_model_and_topology():
    nodes = [o for o in _objects("edge-cases") if o["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in nodes] == ["h100-0", "h100-1", "h100-2", "cpu-0", "cpu-1"]
    h100 = nodes[0]
    assert h100["status"]["capacity"]["nvidia.com/gpu"] == 8 == h100["status"]["allocatable"]["nvidia.com/gpu"]
    assert h100["status"]["capacity"]["pods"] == 110 and nodes[3]["status"]["capacity"]["pods"] == 250
    assert h100["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert h100["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"} in h100["spec"]["taints"]
    assert {"key": "dedicated", "value": "training", "effect": "NoSchedule"} in h100["spec"]["taints"]
    racks = [n["metadata"]["labels"][TOPOLOGY + "rack"] for n in nodes]
    spines = [n["metadata"]["labels"][TOPOLOGY + "spine"] for n in nodes]
    assert racks == ["rack-0", "rack-0", "rack-1", "rack-1", "rack-2"]
    assert spines == ["spine-0"] * 4 + ["spine-1"]


def test_hypernodes_group_consecutive_members_tier_by_tier():
    hypernodes = {o["metadata"]["name"]: o["spec"] for o in _objects("edge-cases") if o["kind"] == "HyperNode"}
    assert list(hypernodes) == ["rack-0", "rack-1", "rack-2", "spine-0", "spine-1"]
    assert hypernodes["rack-1"] == {"tier": 1, "tierName": "rack", "members": [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {TOPOLOGY + "rack": "rack-1"}}}}]}
    assert hypernodes["spine-0"]["tier"] == 2
    assert [m["selector"]["exactMatch"]["name"] for m in hypernodes["spine-0"]["members"]] == ["rack-0", "rack-1"]
    assert all(m["type"] == "HyperNode" for m in hypernodes["spine-1"]["members"])


def test_queue_fields_follow_the_crd():
    queues = {o["metadata"]["name"]: o["spec"] for o in _objects("edge-cases") if o["kind"] == "Queue"}
    assert queues["research"] == {"weight": 4, "reclaimable": False, "capability": {"nvidia.com/gpu": 24},
                                  "deserved": {"nvidia.com/gpu": 16}, "guarantee": {"resource": {"nvidia.com/gpu": 8}},
                                  "priority": 2}
    assert queues["research-low"] == {"weight": 1, "reclaimable": True, "parent": "research"}


def test_tenants_become_namespace_quota_and_limitrange():
    objs = _objects("edge-cases")
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"] == ["lab-research"]  # not `default`
    quota = next(o for o in objs if o["kind"] == "ResourceQuota")
    assert quota["metadata"]["namespace"] == "lab-research"
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": 16, "pods": 100}}
    limits = next(o for o in objs if o["kind"] == "LimitRange")["spec"]["limits"]
    assert limits == [{"type": "Container", "default": {"cpu": 2}, "defaultRequest": {"cpu": "0.5"},
                       "max": {"memory": "1Ti"}}]
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PriorityClass"}
    assert classes["batch"]["preemptionPolicy"] == "Never" and classes["batch"]["globalDefault"] is True


def test_vcjob_spec_carries_gang_queue_priority_policies_and_topology():
    jobs = {o["metadata"]["name"]: o for o in _objects("edge-cases") if o["kind"] == "Job"}
    elastic = jobs["elastic"]
    assert elastic["metadata"]["namespace"] == "lab-research"
    assert elastic["spec"]["queue"] == "research-high" and elastic["spec"]["priorityClassName"] == "urgent"
    assert elastic["spec"]["schedulerName"] == "volcano"
    assert elastic["spec"]["minAvailable"] == 2 and elastic["spec"]["tasks"][0]["replicas"] == 3
    assert "policies" not in elastic["spec"]  # surplus pods: Volcano recreates just the evicted one
    assert elastic["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    pod = elastic["spec"]["tasks"][0]["template"]
    assert pod["metadata"]["annotations"][PREEMPTABLE] == "false"
    container = pod["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"nvidia.com/gpu": 8, "cpu": "0.25", "memory": "64Gi"},
                                      "limits": {"nvidia.com/gpu": 8}}
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "type": "kwok"}
    assert {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]

    gang = jobs["ps-worker"]
    assert gang["metadata"]["namespace"] == "default" and gang["spec"]["minAvailable"] == 2
    assert "policies" not in gang["spec"]  # minAvailable 2 of 3 pods
    tasks = {t["name"]: t for t in gang["spec"]["tasks"]}
    assert tasks["worker"]["minAvailable"] == 1 and tasks["ps"]["minAvailable"] == 1
    assert tasks["worker"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": 8}}  # no `pods`
    assert tasks["ps"]["template"]["spec"]["terminationGracePeriodSeconds"] == 90
    assert tasks["ps"]["template"]["metadata"]["annotations"][DURATION] == "3600s"


def test_a_rigid_gang_restarts_as_a_whole_on_eviction():
    job = next(o for o in _objects("fragmentation") if o["kind"] == "Job")
    assert job["spec"]["policies"] == [{"event": "PodEvicted", "action": "RestartJob"}]
    assert job["spec"]["maxRetry"] > 1000  # the simulator has no retry limit


def test_time_scale_divides_durations_submit_offsets_and_grace():
    plain = {o["metadata"]["name"]: o for o in _objects("fragmentation") if o["kind"] == "Job"}
    fast = {o["metadata"]["name"]: o for o in _objects("fragmentation", 60.0) if o["kind"] == "Job"}
    assert plain["tp8"]["metadata"]["annotations"][SUBMIT] == "60s"
    assert fast["tp8"]["metadata"]["annotations"][SUBMIT] == "1s"
    assert fast["resident-3"]["metadata"]["annotations"][SUBMIT] == "0.05s"
    template = fast["tp8"]["spec"]["tasks"][0]["template"]
    assert template["metadata"]["annotations"][DURATION] == "120s"  # 2h / 60
    assert template["spec"]["terminationGracePeriodSeconds"] == 0  # 30s / 60, rounded
    assert fast["tp8"]["metadata"]["annotations"]["labkit.io/time-scale"] == "60"


def test_workload_generators_are_expanded_into_vcjobs():
    scenario = spec.preset("case-study")
    jobs = [o for o in _objects("case-study") if o["kind"] == "Job"]
    from labkit.workloads import expand

    assert len(jobs) == len(expand(scenario).jobs) > 1000
    assert {j["metadata"]["namespace"] for j in jobs} == {"team-a", "team-b", "team-c"}
    preemptable = {j["metadata"]["namespace"]: j["spec"]["tasks"][0]["template"]["metadata"]["annotations"][PREEMPTABLE]
                   for j in jobs}
    assert preemptable == {"team-a": "false", "team-b": "true", "team-c": "true"}


def test_the_scheduler_configmap_holds_the_scenario_conf():
    cm = next(o for o in _objects("fragmentation") if o["kind"] == "ConfigMap")
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == ("volcano-system", "volcano-scheduler-configmap")
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    assert conf["actions"] == "enqueue, allocate, backfill"
    assert [p["name"] for p in conf["tiers"][1]["plugins"]] == ["drf", "predicates", "proportion", "nodeorder"]


@pytest.mark.parametrize(("change", "path"), [
    ({"name": "My Lab!"}, "name"),
    ({"name": "x" * 64}, "name"),
])
def test_a_scenario_name_that_cannot_label_objects_is_refused(change, path):
    with pytest.raises(SpecError) as err:
        manifests(spec.validate({**EDGE_CASES, **change}))
    assert err.value.path == path


@pytest.mark.parametrize("scale", [0, -2])
def test_a_time_scale_must_be_positive(scale):
    with pytest.raises(SpecError) as err:
        manifests(spec.preset("fragmentation"), scale)
    assert err.value.path == "--time-scale"
