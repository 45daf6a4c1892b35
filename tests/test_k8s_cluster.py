"""`labkit cluster up|apply|observe|down`: bad input is one line and exit 2, with no hang; apply and down
against a recording stand-in for the API; the live path (marker `kind`) only when KUBECONFIG reaches a cluster."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from labkit import spec
from labkit.cli import main
from labkit.errors import LabkitError
from labkit.k8s import cluster
from labkit.k8s.manifests import LAB, MANAGED_BY, SCHEDULER_CONFIGMAP, SUBMIT


def _fails_with_one_line(capsys, argv: list[str], *texts: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("labkit: error: "), err
    for text in texts:
        assert text in err, err
    return err


def _tool(folder: Path, name: str, exit_code: int = 0) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    path.chmod(0o755)


def test_up_names_every_missing_tool(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    err = _fails_with_one_line(capsys, ["cluster", "up"], "docker not found", "kind not found", "kubectl not found",
                               "helm not found")
    assert err.count("not found") == 4


def test_up_says_when_docker_has_no_engine(tmp_path, monkeypatch, capsys):
    for tool in ("kind", "kubectl", "helm"):
        _tool(tmp_path, tool)
    _tool(tmp_path, "docker", exit_code=1)
    monkeypatch.setenv("PATH", str(tmp_path))
    err = _fails_with_one_line(capsys, ["cluster", "up", "--preset", "fragmentation"], "engine does not answer")
    assert "not found" not in err


def test_up_refuses_a_bad_scenario_before_touching_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    _fails_with_one_line(capsys, ["cluster", "up", "--preset", "nope"], "unknown preset")


def _unreachable_kubeconfig(tmp_path: Path) -> Path:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters:\n- name: gone\n  cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}\n"
        "users:\n- name: gone\n  user: {token: x}\n"
        "contexts:\n- name: gone\n  context: {cluster: gone, user: gone}\n")
    return config


@pytest.mark.parametrize("argv", [
    ["cluster", "apply", "--preset", "fragmentation"],
    ["cluster", "observe", "--preset", "fragmentation", "--timeout", "5"],
    ["cluster", "down"],
])
def test_an_unreachable_cluster_is_one_line_exit_2_and_quick(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(_unreachable_kubeconfig(tmp_path)))
    start = time.monotonic()
    _fails_with_one_line(capsys, argv, "cannot reach the cluster at https://127.0.0.1:9")
    assert time.monotonic() - start < 10


def test_no_kubeconfig_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    _fails_with_one_line(capsys, ["cluster", "apply", "--preset", "fragmentation"], "no cluster configured")


def test_an_unknown_context_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(_unreachable_kubeconfig(tmp_path)))
    _fails_with_one_line(capsys, ["cluster", "down", "--context", "elsewhere"], "context 'elsewhere'")


def test_down_cluster_needs_kind(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    _fails_with_one_line(capsys, ["cluster", "down", "--cluster"], "kind not found")


def test_down_cluster_leaves_a_cluster_labkit_did_not_create(tmp_path, monkeypatch, capsys):
    (tmp_path / "kind").write_text("#!/bin/sh\necho labkit\n")
    (tmp_path / "kubectl").write_text("#!/bin/sh\nexit 0\n")  # no node carries labkit's label
    for tool in ("kind", "kubectl"):
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    _fails_with_one_line(capsys, ["cluster", "down", "--cluster"], "was not created by labkit")


# ---------------------------------------------------------------------------------------- apply and down


class RecordingApi:
    """Stands in for `cluster.Api`: records what is applied, replaced and deleted; `live` holds objects
    by kind (listed by their labels), `existing` objects anyone made, by (kind, namespace, name)."""

    context_name, host = "kind-labkit", "https://127.0.0.1:6443"

    def __init__(self, live: dict[str, list[dict]] | None = None, refusals: int = 0,
                 existing: dict[tuple, dict] | None = None):
        self.applied: list[dict] = []
        self.replaced: list[dict] = []
        self.deleted: list[tuple[str, str]] = []
        self.live = live or {}
        self.refusals = refusals
        self.existing = existing or {}

    def apply(self, obj: dict) -> None:
        self.applied.append(obj)
        meta = obj["metadata"]
        self.existing[(obj["kind"], meta.get("namespace"), meta["name"])] = obj
        if (meta.get("labels") or {}).get(MANAGED_BY) == "labkit":
            self.live.setdefault(obj["kind"], []).append(obj)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        return self.existing.get((kind, namespace, name))

    def replace(self, obj: dict) -> None:
        self.replaced.append(obj)

    def labelled(self, api_version: str, kind: str, selector: str) -> list[dict]:
        assert selector.startswith(f"{MANAGED_BY}=labkit")
        wanted = dict(part.split("=", 1) for part in selector.split(","))
        return [] if kind == "Pod" else [
            i for i in self.live.get(kind, []) if wanted.items() <= (i["metadata"].get("labels") or {}).items()]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> str:
        if kind == "Queue" and self.refusals:
            self.refusals -= 1
            return "queue a cannot be deleted because it has allocated Pods: 1"
        self.deleted.append((kind, name))
        return ""


@pytest.fixture
def no_scheduler_restart(monkeypatch):
    reloads: list[str] = []
    monkeypatch.setattr(cluster, "_reload_scheduler", lambda api, conf: reloads.append(conf))
    monkeypatch.setattr(cluster.time, "sleep", lambda s: None)
    return reloads


def test_apply_creates_the_lab_then_submits_vcjobs_on_the_scaled_clock(no_scheduler_restart):
    api = RecordingApi()
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    created = cluster.apply(api, spec.preset("fragmentation"), 60.0, clock=lambda: now[0], sleep=sleep)
    assert created == 5
    kinds = [o["kind"] for o in api.applied]
    assert kinds == ["Node"] * 4 + ["HyperNode"] * 2 + ["ConfigMap", "Namespace", "Queue"] + ["Job"] * 5
    assert len(no_scheduler_restart) == 1 and "drf" in no_scheduler_restart[0]
    jobs = [o for o in api.applied if o["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in jobs] == ["resident-0", "resident-1", "resident-2", "resident-3", "tp8"]
    assert [j["metadata"]["annotations"][SUBMIT] for j in jobs] == ["0s", "0.017s", "0.033s", "0.05s", "1s"]
    assert sleeps == [0.017, 0.016, 0.017, 0.95]  # tp8 goes in 1 s after the run starts: 60 s / 60


def test_down_deletes_jobs_first_keeps_volcanos_own_objects_and_restores_the_shipped_conf(no_scheduler_restart):
    def item(name: str, namespace: str | None = None) -> dict:
        return {"metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY: "labkit", LAB: "x"}}}

    api = RecordingApi(live={
        "Job": [item("train", "ml")], "Queue": [item("a"), item("default")], "Namespace": [item("ml"), item("default")],
        "ConfigMap": [item(SCHEDULER_CONFIGMAP, "volcano-system")], "Node": [item("gpu-0")],
    }, refusals=2)
    assert cluster.down(api, "x") == 4
    assert api.deleted == [("Job", "train"), ("Queue", "a"), ("Namespace", "ml"), ("Node", "gpu-0")]
    (restored,) = api.applied
    assert restored["metadata"]["labels"][LAB] == "volcano-shipped"
    assert no_scheduler_restart == [restored["data"]["volcano-scheduler.conf"]]


def test_down_gives_up_on_a_queue_that_is_never_freed(no_scheduler_restart):
    api = RecordingApi(live={"Queue": [{"metadata": {"name": "a", "labels": {MANAGED_BY: "labkit"}}}]}, refusals=10**6)
    with pytest.raises(LabkitError, match="Queue a was not deleted: queue a cannot be deleted"):
        cluster.down(api, None, wait=0)


# ---------------------------------------------------------------------------------------- live (kind)


@pytest.fixture
def live_api():
    try:
        api = cluster.Api(os.environ.get("LABKIT_CONTEXT"))
        api.resource("batch.volcano.sh/v1alpha1", "Job")
    except LabkitError as err:
        pytest.skip(f"no cluster with Volcano through KUBECONFIG/LABKIT_CONTEXT: {err}")
    return api


LIVE_LAB = {
    "name": "labkit-live-test",
    "cluster": {"pools": [{"name": "livetest", "count": 2,
                           "resources": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}}]},
    "tenants": [{"name": "livetest"}],
    "queues": [{"name": "livetest"}],
    "jobs": [{"name": f"job-{i}", "namespace": "livetest", "queue": "livetest", "submit": 60 * i, "duration": "10m",
              "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 8, "cpu": 8}}]} for i in range(3)],
}


@pytest.mark.kind
def test_a_small_lab_runs_on_the_cluster_and_is_observed(live_api):
    """Any cluster KUBECONFIG (and LABKIT_CONTEXT) names, with Volcano and KWOK: pre-flight passes, the
    lab runs, and down leaves the namespaces and PriorityClasses that existed as they were."""
    scenario = spec.validate(LIVE_LAB)
    cluster.preflight(live_api, scenario, "apply")
    before = live_api.get("v1", "Namespace", "default")
    try:
        assert cluster.apply(live_api, scenario, 60.0) == 3
        cluster.preflight(live_api, scenario, "observe")
        result = cluster.observe(live_api, scenario, timeout=180)
        jobs = result.jobs
        assert jobs.state.tolist() == ["Completed"] * 3
        assert (jobs.jct >= 600).all() and (jobs.submit.diff().dropna() > 0).all()
        assert set(result.tasks.node) <= {"livetest-0", "livetest-1"}
    finally:
        cluster.down(live_api, scenario.name)
    after = live_api.get("v1", "Namespace", "default")
    assert after["metadata"].get("labels") == before["metadata"].get("labels")


# ---------------------------------------------------------------------------------------- what existed before


def _theirs(kind: str, name: str, namespace: str | None = None, **fields) -> dict:
    """An object someone else made: no labkit labels, the fields the API server adds."""
    meta = {"name": name, "uid": "u-1", "resourceVersion": "7", "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": {"owner": "them"}, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **fields}


def test_apply_records_what_existed_and_changes_it_without_labkit_s_labels(no_scheduler_restart):
    conf = _theirs("ConfigMap", SCHEDULER_CONFIGMAP, "volcano-system", data={"volcano-scheduler.conf": "actions: x"})
    ns = _theirs("Namespace", "ml", status={"phase": "Active"})
    api = RecordingApi(existing={("ConfigMap", "volcano-system", SCHEDULER_CONFIGMAP): conf, ("Namespace", None, "ml"): ns})
    cluster.apply(api, spec.preset("fragmentation"), 60.0, clock=lambda: 0.0, sleep=lambda s: None)
    record = next(o for o in api.applied if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("labkit-existing-"))
    assert api.applied.index(record) == 0  # recorded before anything is changed
    kept = json.loads(record["data"]["objects"])
    assert {(o["kind"], o["metadata"]["name"]) for o in kept} == {("ConfigMap", SCHEDULER_CONFIGMAP), ("Namespace", "ml")}
    assert next(o for o in kept if o["kind"] == "ConfigMap")["data"] == {"volcano-scheduler.conf": "actions: x"}
    assert all("resourceVersion" not in o["metadata"] and "status" not in o for o in kept)
    changed = [o for o in api.applied[1:] if (o["kind"], o["metadata"]["name"]) in {("ConfigMap", SCHEDULER_CONFIGMAP),
                                                                                 ("Namespace", "ml")}]
    assert len(changed) == 2 and all(MANAGED_BY not in o["metadata"].get("labels", {}) for o in changed)
    queue = next(o for o in api.applied if o["kind"] == "Queue")
    assert queue["metadata"]["labels"][MANAGED_BY] == "labkit"  # labkit made it: labelled, deleted by down
    # a second apply keeps the first record: what existed before labkit, not labkit's conf
    cluster.apply(api, spec.preset("fragmentation"), 60.0, clock=lambda: 0.0, sleep=lambda s: None)
    records = [o for o in api.applied if o["metadata"]["name"].startswith("labkit-existing-")]
    assert len(records) == 1


def test_down_restores_what_existed_and_deletes_only_what_labkit_created(no_scheduler_restart):
    conf = _theirs("ConfigMap", SCHEDULER_CONFIGMAP, "volcano-system", data={"volcano-scheduler.conf": "actions: x"})
    ns = _theirs("Namespace", "ml")
    api = RecordingApi(existing={("ConfigMap", "volcano-system", SCHEDULER_CONFIGMAP): conf, ("Namespace", None, "ml"): ns})
    cluster.apply(api, spec.preset("fragmentation"), 60.0, clock=lambda: 0.0, sleep=lambda s: None)
    no_scheduler_restart.clear()
    api.applied.clear()
    cluster.down(api, "fragmentation")
    deleted = {kind for kind, _ in api.deleted}
    assert ("Namespace", "ml") not in api.deleted and ("Queue", "ml") in api.deleted and "Job" in deleted
    assert [(o["kind"], o["metadata"]["name"]) for o in api.replaced] == [("ConfigMap", SCHEDULER_CONFIGMAP),
                                                                         ("Namespace", "ml")]
    assert api.replaced[1]["metadata"]["labels"] == {"owner": "them"}
    assert no_scheduler_restart == ["actions: x"]  # the conf the cluster had, not the shipped one
    assert not api.applied  # nothing re-applied: no shipped conf
    assert ("ConfigMap", next(n for k, n in api.deleted if n.startswith("labkit-existing-"))) in api.deleted


def test_apply_refuses_a_node_it_did_not_create(no_scheduler_restart):
    api = RecordingApi(existing={("Node", None, "gpu-0"): _theirs("Node", "gpu-0")})
    with pytest.raises(LabkitError, match="Node gpu-0 exists and labkit did not create it; labkit will not change it"):
        cluster.apply(api, spec.preset("fragmentation"), 60.0, clock=lambda: 0.0, sleep=lambda s: None)
    assert not api.applied


# ---------------------------------------------------------------------------------------- any cluster: pre-flight


class PreflightApi(RecordingApi):
    """A cluster as pre-flight sees it: which CRDs are served, what RBAC allows, which Deployments run."""

    def __init__(self, crds=True, denied=(), deployments=("volcano-system/volcano-scheduler", "kube-system/kwok-controller"),
                 nodes=()):
        super().__init__(live={"Node": [{"metadata": {"name": f"n{i}", "labels": {MANAGED_BY: "labkit"}},
                                         "status": {"allocatable": a}} for i, a in enumerate(nodes)]})
        self.crds, self.denied = crds, set(denied)
        for name in deployments:
            namespace, short = name.split("/")
            self.existing[("Deployment", namespace, short)] = {"spec": {"replicas": 1}, "status": {"availableReplicas": 1}}
        self.dynamic = SimpleNamespace(resources=SimpleNamespace(get=self._crd))

    def _crd(self, api_version, kind):
        if not self.crds and "volcano" in api_version:
            raise ResourceNotFoundError(f"No matches found for {kind}")

    def can(self, verb, api_version, kind, namespace=None):
        return (verb, kind) not in self.denied

    def labelled(self, api_version, kind, selector):
        return self.live.get(kind, []) if selector == "type=kwok" else super().labelled(api_version, kind, selector)


@pytest.mark.parametrize("api, action, message", [
    (PreflightApi(crds=False), "apply", "kind-labkit: Volcano's CRDs are missing (no Job in batch.volcano.sh/v1alpha1)"),
    (PreflightApi(denied={("patch", "Queue")}), "apply",
     "RBAC does not let you patch Queue objects (scheduling.volcano.sh/v1beta1) cluster-wide"),
    (PreflightApi(denied={("watch", "Pod")}), "observe", "RBAC does not let you watch Pod objects (v1) cluster-wide"),
    (PreflightApi(denied={("delete", "Job")}), "down", "RBAC does not let you delete Job objects"),
    (PreflightApi(deployments=()), "apply", "no Volcano scheduler answering: no Deployment volcano-system/volcano-scheduler"),
    (PreflightApi(deployments=("volcano-system/volcano-scheduler",)), "apply", "no KWOK controller answering"),
    (PreflightApi(nodes=[{"nvidia.com/gpu": "4", "cpu": "64", "memory": "512Gi"}]), "observe",
     "no node has the resources of jobs[4].tasks[0] (nvidia.com/gpu=8, cpu=32, memory=256Gi) among 1 KWOK node(s)"),
])
def test_preflight_says_what_the_cluster_lacks_in_one_line(api, action, message):
    with pytest.raises(LabkitError) as err:
        cluster.preflight(api, spec.preset("fragmentation"), action)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_preflight_passes_on_a_cluster_with_all_it_needs():
    nodes = [{"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"}]
    for action in ("apply", "observe", "down"):
        cluster.preflight(PreflightApi(nodes=nodes), spec.preset("fragmentation"), action)


def test_the_context_is_named_on_the_first_line_before_anything_is_done(monkeypatch, capsys):
    made = []

    def fake_api(context, kubeconfig):
        made.append((context, kubeconfig))
        return PreflightApi(crds=False)

    monkeypatch.setattr(cluster, "Api", fake_api)
    assert main(["cluster", "apply", "--preset", "fragmentation", "--kubeconfig", "/tmp/k", "--context", "c1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "labkit: context kind-labkit (https://127.0.0.1:6443)"
    assert "Volcano's CRDs are missing" in err[1] and made == [("c1", "/tmp/k")]


def test_a_kubeconfig_file_that_is_not_there_is_one_line(tmp_path, capsys):
    _fails_with_one_line(capsys, ["cluster", "observe", "--preset", "fragmentation", "--kubeconfig",
                                  str(tmp_path / "nope"), "--context", "c1"], "context 'c1'", "--kubeconfig FILE")
