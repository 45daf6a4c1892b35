"""A Kueue scenario exports Kueue's objects (kueue.x-k8s.io/v1beta2) and its jobs as Kueue-managed
`batch/v1` Jobs or JobSets, the way Kueue reads them: the LocalQueue in the `kueue.x-k8s.io/queue-name`
label, `suspend: true` until admission, a ClusterQueue open to every namespace, Kueue's Configuration
only when the lab changes it. `labkit cluster` (a Volcano path) refuses a Kueue lab in one line."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from labkit import spec
from labkit.cli import main
from labkit.errors import SpecError
from labkit.k8s.export import render
from labkit.k8s.manifests import (
    DURATION,
    JOBSET_API,
    KUEUE_API,
    KUEUE_CONFIG_KEY,
    MIN_PARALLELISM,
    QUEUE_NAME,
    SUBMIT,
    manifests,
)
from labkit.spec.kueue import local_queue

KUBERNETES_VERSION = "1.35"
COHORT = Path(spec.__file__).resolve().parents[1] / "examples" / "kueue-cohort.yaml"


def _data() -> dict:
    return yaml.safe_load(COHORT.read_text(encoding="utf-8"))


def _objects(data: dict) -> list[dict]:
    return manifests(spec.validate(data))


def _of(objects: list[dict], api_version: str, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if (o["apiVersion"], o["kind"]) == (api_version, kind)}


def test_the_scenario_s_kueue_objects_are_exported_and_no_volcano_ones():
    scenario = spec.load(COHORT)
    objects = manifests(scenario)
    kinds = {(o["apiVersion"], o["kind"]) for o in objects}
    assert not any(v.startswith(("batch.volcano.sh", "scheduling.volcano.sh", "topology.volcano.sh")) for v, _ in kinds)
    assert set(_of(objects, KUEUE_API, "ResourceFlavor")) == {f.name for f in scenario.kueue.resource_flavors}
    assert set(_of(objects, KUEUE_API, "ClusterQueue")) == {q.name for q in scenario.kueue.cluster_queues}
    local = [(o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["clusterQueue"])
             for o in objects if o["kind"] == "LocalQueue"]
    assert local == [(lq.namespace, lq.name, lq.cluster_queue) for lq in scenario.kueue.local_queues]
    files = render(objects, "test")
    assert "11-clusterqueues.yaml" in files and "13-jobs.yaml" in files and not any("vcjobs" in f for f in files)


def test_cluster_queue_fields_as_kueue_writes_them():
    """v1beta2 names (`cohortName`, `nominalQuota`), quantities as quantities, unset limits left out, and
    `namespaceSelector: {}`: Kueue's default (null) lets no namespace submit."""
    b = _of(_objects(_data()), KUEUE_API, "ClusterQueue")["team-b"]["spec"]
    assert b["namespaceSelector"] == {} and b["cohortName"] == "research"
    a100, h100 = b["resourceGroups"][0]["flavors"]
    assert a100["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 8}]
    assert h100["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 4}]
    assert "borrowWithinCohort" not in b["preemption"]


def test_each_job_is_a_suspended_batch_job_labelled_with_its_local_queue():
    scenario = spec.load(COHORT)
    jobs = _of(manifests(scenario), "batch/v1", "Job")
    for job in scenario.jobs:
        obj = jobs[job.name]
        assert obj["metadata"]["namespace"] == job.namespace
        assert obj["metadata"]["labels"][SUBMIT] == obj["metadata"]["annotations"][SUBMIT] == f"{float(job.submit):g}s"
        assert obj["metadata"]["labels"][QUEUE_NAME] == local_queue(scenario.kueue.local_queues, job.namespace,
                                                                    job.queue).name
        replicas = job.tasks[0].replicas_resolved
        assert obj["spec"]["suspend"] is True and obj["spec"]["parallelism"] == replicas == obj["spec"]["completions"]
        pod = obj["spec"]["template"]
        assert pod["metadata"]["annotations"][DURATION].endswith("s")
        assert pod["spec"].get("priorityClassName") == job.priority_class_name
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_kueue_s_configuration_only_when_the_lab_changes_it():
    """The `kueue` policy turns waitForPodsReady on: v1beta2 enables it by its presence (no `enable` field).
    With Kueue's defaults nothing is written, so the installed configuration is left alone."""
    objects = _objects(_data())
    config = yaml.safe_load(_of(objects, "v1", "ConfigMap")["kueue-manager-config"]["data"][KUEUE_CONFIG_KEY])
    assert config["kind"] == "Configuration" and config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["waitForPodsReady"]["timeout"] == "1800s" and "enable" not in config["waitForPodsReady"]
    assert "fairSharing" not in config
    data = _data()
    data["scheduler"] = {"kueue": {}}
    assert not _of(_objects(data), "v1", "ConfigMap")
    data["scheduler"] = {"kueue": {"fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]}}}
    config = yaml.safe_load(_of(_objects(data), "v1", "ConfigMap")["kueue-manager-config"]["data"][KUEUE_CONFIG_KEY])
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanInitialShare"]} and "waitForPodsReady" not in config


def test_elastic_job_uses_partial_admission_and_several_tasks_make_a_jobset():
    data = _data()
    data["jobs"][0]["tasks"] = [{"name": "worker", "elastic": {"min": 1, "max": 2}, "resources": {"nvidia.com/gpu": 8}}]
    data["jobs"][1]["tasks"] = [{"name": "launcher", "resources": {"cpu": 1}},
                                {"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 4}}]
    objects = _objects(data)
    elastic = _of(objects, "batch/v1", "Job")["b-big"]
    assert elastic["metadata"]["annotations"][MIN_PARALLELISM] == "1" and elastic["spec"]["parallelism"] == 2
    jobset = _of(objects, JOBSET_API, "JobSet")["a-train"]
    assert jobset["spec"]["suspend"] is True and jobset["metadata"]["labels"][QUEUE_NAME] == "main"
    replicated = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    assert list(replicated) == ["launcher", "worker"]
    assert replicated["worker"]["template"]["spec"]["parallelism"] == 2
    for r in replicated.values():
        kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": r["name"]},
                                      "spec": r["template"]["spec"]}, KUBERNETES_VERSION, strict=True)
    data["jobs"][1]["tasks"][1]["elastic"] = {"min": 1, "max": 2}
    with pytest.raises(SpecError, match=r"^jobs\[1\]\.tasks\[1\]\.elastic: Kueue admits a JobSet"):
        _objects(data)


def test_a_job_no_local_queue_takes_is_left_to_kube_scheduler():
    data = _data()
    data["tenants"].append({"name": "team-c"})
    data["jobs"].append({"name": "c-free", "namespace": "team-c", "submit": 0, "duration": "10m",
                         "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 1}}]})
    job = _of(_objects(data), "batch/v1", "Job")["c-free"]
    assert QUEUE_NAME not in job["metadata"]["labels"] and "suspend" not in job["spec"]


def test_labkit_cluster_refuses_a_kueue_lab_in_one_line(capsys):
    assert main(["cluster", "apply", str(COHORT)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("labkit: error: scheduler: a Kueue lab: `labkit cluster` runs")


def test_export_writes_a_kueue_lab(tmp_path, capsys):
    assert main(["export", "k8s", str(COHORT), "-o", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["00-nodes.yaml", "02-scheduler-configmap.yaml", "03-namespaces.yaml", "06-priorityclasses.yaml",
                     "09-resourceflavors.yaml", "11-clusterqueues.yaml", "12-localqueues.yaml", "13-jobs.yaml"]
    docs = list(yaml.safe_load_all((tmp_path / "out" / "13-jobs.yaml").read_text(encoding="utf-8")))
    assert [d["metadata"]["name"] for d in docs] == [j.name for j in spec.load(COHORT).jobs]
    assert capsys.readouterr().out.startswith(f"wrote {len(names)} files to ")
