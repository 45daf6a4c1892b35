"""`labkit cluster up|apply|observe|down`: bad input is one line and exit 2, with no hang; apply and down
against a recording stand-in for the API; the live path (marker `kind`) only when KUBECONFIG reaches a cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

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
    """Stands in for `cluster.Api`: records what is applied and deleted; `live` holds labelled objects."""

    def __init__(self, live: dict[str, list[dict]] | None = None, refusals: int = 0):
        self.applied: list[dict] = []
        self.deleted: list[tuple[str, str]] = []
        self.live = live or {}
        self.refusals = refusals

    def apply(self, obj: dict) -> None:
        self.applied.append(obj)

    def labelled(self, api_version: str, kind: str, selector: str) -> list[dict]:
        assert selector.startswith(f"{MANAGED_BY}=labkit")
        return [] if kind == "Pod" else self.live.get(kind, [])

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
    api = RecordingApi(live={"Queue": [{"metadata": {"name": "a"}}]}, refusals=10**6)
    with pytest.raises(LabkitError, match="Queue a was not deleted: queue a cannot be deleted"):
        cluster.down(api, None, wait=0)


# ---------------------------------------------------------------------------------------- live (kind)


@pytest.fixture
def live_api():
    try:
        api = cluster.Api()
        api.resource("batch.volcano.sh/v1alpha1", "Job")
    except LabkitError as err:
        pytest.skip(f"no kind cluster with Volcano: {err}")
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
    scenario = spec.validate(LIVE_LAB)
    try:
        assert cluster.apply(live_api, scenario, 60.0) == 3
        result = cluster.observe(live_api, scenario, timeout=180)
        jobs = result.jobs
        assert jobs.state.tolist() == ["Completed"] * 3
        assert (jobs.jct >= 600).all() and (jobs.submit.diff().dropna() > 0).all()
        assert set(result.tasks.node) <= {"livetest-0", "livetest-1"}
    finally:
        cluster.down(live_api, scenario.name)
