"""clusters/: the generated sets are fresh, and the hand-written kind/Volcano/KWOK set-up fits labkit's manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labkit.k8s import sets
from labkit.k8s.export import MARKER, write
from labkit.k8s.manifests import DURATION, KWOK_SELECTOR, KWOK_TAINT, SCHEDULER_CONFIGMAP, SCHEDULER_NAMESPACE

CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"
SHIPPED = Path(__file__).resolve().parents[2] / "shared" / "upstream" / "volcano-v1.15.1-crds" / "volcano-scheduler.conf.shipped"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The generated sets, written anew into a temporary clusters/ folder."""
    root = tmp_path_factory.mktemp("clusters")
    for folder, files in sets.generated().items():
        write(files, root / folder)
    return root


@pytest.mark.parametrize("folder", [*sets.CHAPTERS, "volcano"])
def test_generated_sets_are_not_stale(folder, fresh):
    made = {p.name: p.read_text() for p in (fresh / folder).iterdir()}
    kept = {p.name: p.read_text() for p in (CLUSTERS / folder).iterdir() if p.read_text().startswith(MARKER)}
    stale = sorted(name for name in made.keys() | kept.keys() if made.get(name) != kept.get(name))
    assert not stale, f"clusters/{folder}: {stale} are stale; run `{sets.REGENERATE}`"


def test_every_chapter_set_is_a_preset_export():
    assert sets.CHAPTERS == {"ch01": ("case-study", 1008.0), "ch02": ("fragmentation", 60.0),
                             "ch08": ("preemption-checkpoint", 60.0)}
    for chapter, (preset, scale) in sets.CHAPTERS.items():
        first = (CLUSTERS / chapter / "00-nodes.yaml").read_text().splitlines()[0]
        assert f"--preset {preset} --time-scale {scale:g}" in first


@pytest.mark.skipif(not SHIPPED.exists(), reason=f"Volcano's shipped conf not found at {SHIPPED}")
def test_the_shipped_configmap_is_volcanos_own_conf():
    cm = yaml.safe_load((CLUSTERS / "volcano" / "scheduler-shipped.yaml").read_text())
    assert yaml.safe_load(cm["data"]["volcano-scheduler.conf"]) == yaml.safe_load(SHIPPED.read_text())


def test_the_multitenant_configmap_adds_reclaim_and_preempt():
    cm = yaml.safe_load((CLUSTERS / "volcano" / "scheduler-multitenant.yaml").read_text())
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == (SCHEDULER_NAMESPACE, SCHEDULER_CONFIGMAP)
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    assert [a.strip() for a in conf["actions"].split(",")] == ["enqueue", "allocate", "backfill", "reclaim", "preempt"]


def test_volcano_is_pinned_to_the_control_plane_at_v1_15_1():
    values = yaml.safe_load((CLUSTERS / "volcano" / "values.yaml").read_text())
    assert values["basic"]["image_tag_version"] == "v1.15.1"
    assert values["custom"]["default_ns"] == {"node-role.kubernetes.io/control-plane": ""}
    for component in ("admission", "controller", "scheduler"):
        assert values["custom"][f"{component}_tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"


def test_the_kind_cluster_is_one_labelled_control_plane():
    config = yaml.safe_load((CLUSTERS / "kind" / "kind-config.yaml").read_text())
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [n["role"] for n in config["nodes"]] == ["control-plane"]
    assert config["nodes"][0]["labels"] == {"app.kubernetes.io/managed-by": "labkit"}


def test_the_kwok_stage_completes_pods_after_their_duration_annotation():
    stage = yaml.safe_load((CLUSTERS / "kwok" / "stages.yaml").read_text())
    assert (stage["apiVersion"], stage["kind"]) == ("kwok.x-k8s.io/v1alpha1", "Stage")
    assert stage["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    selectors = [e["jq"] for e in stage["spec"]["selector"]["matchExpressions"]]
    annotation = f'.metadata.annotations["{DURATION}"]'
    assert {"key": annotation, "operator": "Exists"} in selectors
    assert {"key": ".status.phase", "operator": "In", "values": ["Running"]} in selectors
    assert stage["spec"]["delay"]["durationFrom"] == {"jq": {"expression": annotation}}
    assert "phase: Succeeded" in stage["spec"]["next"]["statusTemplate"]


def test_fake_nodes_are_kwok_nodes_the_lab_pods_tolerate():
    nodes = list(yaml.safe_load_all((CLUSTERS / "ch02" / "00-nodes.yaml").read_text()))
    jobs = list(yaml.safe_load_all((CLUSTERS / "ch02" / "08-vcjobs.yaml").read_text()))
    for node in nodes:
        assert KWOK_TAINT in node["spec"]["taints"]
        assert node["metadata"]["labels"].items() >= KWOK_SELECTOR.items()
    for job in jobs:
        pod = job["spec"]["tasks"][0]["template"]["spec"]
        assert pod["nodeSelector"].items() >= KWOK_SELECTOR.items()
        assert any(t["key"] == KWOK_TAINT["key"] for t in pod["tolerations"])
