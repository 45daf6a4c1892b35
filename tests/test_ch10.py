"""Chapter 10 (Volcano Queue weight / deserved / guarantee): its scenarios and its checks, right and wrong."""

from pathlib import Path

import numpy as np
import pytest

import labkit
from labkit import metrics, widgets
from labkit.course import cases, variants
from labkit.engine.simulate import simulate
from labkit.grading.keys import judge
from labkit.grading.keys.ch10 import TOTAL_GPUS, first_session
from labkit.k8s.export import render
from labkit.k8s.manifests import manifests


def _default():
    return variants.params(10, "")


def _deserved_b(sid: str = "") -> float:
    v = variants.params(10, sid)
    return first_session(v["weights"], v["gpus"])["team-b"]["deserved"]


def _idle(sid: str = "") -> int:
    v = variants.params(10, sid)
    return int(TOTAL_GPUS - sum(q["allocated"] for q in first_session(v["weights"], v["gpus"]).values()))


def _a1_start(reclaimable: bool) -> int:
    return int(simulate(cases.reclaim_pair(reclaimable)).jobs.set_index("name").start["a1"])


def test_q1_deserved_right_and_wrong():
    right = _deserved_b()
    assert judge("ch10.q1", right).passed
    assert judge("ch10.q1", right + 0.005).passed  # within the stated 0.01
    wrong = judge("ch10.q1", right + 1)
    assert not wrong.passed and wrong.code == "wrong"
    # the naive weight split (no water-filling) is a wrong answer on the default variant
    v = _default()
    naive = TOTAL_GPUS * v["weights"][1] / sum(v["weights"])
    assert abs(naive - right) > 0.01 and not judge("ch10.q1", naive).passed


@pytest.mark.parametrize("answer", ["10.5", True, [10.5], float("nan")])
def test_q1_refuses_non_numbers(answer):
    verdict = judge("ch10.q1", answer)
    assert not verdict.passed and verdict.code == "wrong-type"


def test_q2_idle_right_and_wrong():
    right = _idle()
    assert right > 0  # proportion's deserved caps leave GPUs idle on the default variant
    assert judge("ch10.q2", right).passed
    assert not judge("ch10.q2", right + 4).passed
    assert not judge("ch10.q2", 0).passed
    assert judge("ch10.q2", 2.5).code == "wrong-type"


def test_q3_reclaimable_right_and_wrong():
    protected, reclaimed = _a1_start(False), _a1_start(True)
    assert protected > reclaimed
    assert judge("ch10.q3", protected).passed
    assert not judge("ch10.q3", reclaimed).passed


def test_variant_changes_the_expected_deserved():
    first = "s001"
    other = next(f"s{i:03d}" for i in range(2, 500) if abs(_deserved_b(f"s{i:03d}") - _deserved_b(first)) > 0.01)
    assert judge("ch10.q1", _deserved_b(first), student=first).passed
    assert not judge("ch10.q1", _deserved_b(first), student=other).passed


def test_proportion_ignores_spec_deserved_capacity_takes_it():
    """The same Queue spec.deserved: proportion water-fills by weight, capacity uses it as written."""
    written = {"team-a": 12, "team-b": 12, "team-c": 8}
    queues = {q: {"deserved": {"nvidia.com/gpu": g}} for q, g in written.items()}
    for plugin, expect_written in (("proportion", False), ("capacity", True)):
        result = simulate(cases.queue_trio(queues=queues, plugin=plugin))
        table = metrics.queue_shares(result, times=np.array([0.0])).set_index("queue").deserved
        assert (table.to_dict() == {q: float(g) for q, g in written.items()}) is expect_written, plugin


def test_capacity_lends_idle_gpus_proportion_does_not():
    queues = {q: {"deserved": {"nvidia.com/gpu": g}} for q, g in {"team-a": 12, "team-b": 12, "team-c": 8}.items()}
    held = {}
    for plugin in ("proportion", "capacity"):
        table = metrics.queue_shares(simulate(cases.queue_trio(queues=queues, plugin=plugin)), times=np.array([1.0]))
        held[plugin] = table.allocated.sum()
    assert held["capacity"] == TOTAL_GPUS and held["proportion"] < TOTAL_GPUS


def test_guarantee_raises_own_deserved_and_lowers_others():
    plain = first_session((5, 3, 2), cases.QUEUE_TRIO_GPUS)
    result = simulate(cases.queue_trio(queues={"team-c": {"guarantee": {"nvidia.com/gpu": 8}}}))
    guaranteed = metrics.queue_shares(result, times=np.array([0.0])).set_index("queue").deserved
    assert guaranteed["team-c"] == 8 > plain["team-c"]["deserved"]
    assert guaranteed["team-a"] < plain["team-a"]["deserved"] and guaranteed["team-b"] < plain["team-b"]["deserved"]


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_reclaimable_false_is_never_a_reclaim_victim(engine):
    evicted = {r: simulate(cases.reclaim_pair(r), engine=engine).tasks.evicted.notna().sum() for r in (True, False)}
    assert evicted[True] >= 1 and evicted[False] == 0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="multiple of its 4-GPU jobs"):
        cases.queue_trio(gpus=(24, 16, 2))
    with pytest.raises(ValueError, match="proportion or capacity"):
        cases.queue_conf("drf")


def test_queue_conf_swaps_only_the_queue_plugin():
    names = [[p["name"] for p in tier["plugins"]] for tier in cases.queue_conf("capacity")["tiers"]]
    flat = [n for tier in names for n in tier]
    assert "capacity" in flat and "proportion" not in flat
    shipped = [[p["name"] for p in tier["plugins"]] for tier in cases.queue_conf("proportion")["tiers"]]
    assert [[("proportion" if n == "capacity" else n) for n in tier] for tier in names] == shipped


CH10 = Path(__file__).resolve().parents[1] / "clusters" / "ch10"
SETS = {"trio": (lambda: cases.queue_trio(admitted=False), 60.0), "protected": (lambda: cases.reclaim_pair(False), 1.0)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_cluster_sets_are_not_stale(name):
    """clusters/ch10/<name>.yaml is the chapter's scenario as labkit.dump writes it, and <name>/ is its export."""
    build, scale = SETS[name]
    scenario = build()
    assert (CH10 / f"{name}.yaml").read_text() == labkit.dump(scenario), "regenerate: see clusters/ch10/README.md"
    command = f"labkit export k8s clusters/ch10/{name}.yaml" + (f" --time-scale {scale:g}" if scale != 1 else "")
    made = render(manifests(scenario, scale), command)
    kept = {p.name: p.read_text() for p in (CH10 / name).iterdir()}
    assert kept == made, "regenerate: see clusters/ch10/README.md"


def _waits(scenario):
    return metrics.per_queue(simulate(scenario)).mean_wait_s.to_dict()


def test_stream_weights_matter_under_proportion_not_under_capacity():
    """The panel's scenario: with reclaim, proportion's weights move the waits; capacity reads no weight."""
    deserved = {q: {"deserved": {"nvidia.com/gpu": g}} for q, g in {"team-a": 16, "team-b": 8, "team-c": 8}.items()}
    for plugin, moves in (("proportion", True), ("capacity", False)):
        waits = [_waits(cases.queue_stream(w, queues=deserved, plugin=plugin)) for w in ((5, 3, 2), (1, 1, 8))]
        assert (waits[0] != waits[1]) is moves, plugin


def test_panel_plugin_knob_switches_the_queue_plugin():
    base = cases.queue_stream()
    knob = widgets.Knob("queue/plugin", "队列插件", "choice", "proportion",
                        lambda data, v: data["scheduler"].__setitem__("conf", cases.queue_conf(v, "volcano-multitenant")),
                        choices=("proportion", "capacity"))
    panel = widgets.Panel(base, [knob, widgets.queue_deserved(base, "team-a")], charts=("share",), debounce=0)
    proportion = panel.table.copy()
    panel.set("queue/plugin", "capacity")
    plugins = {p.name for tier in panel.scenario().scheduler.conf.tiers for p in tier.plugins}
    assert "capacity" in plugins and "proportion" not in plugins
    assert not panel.table.equals(proportion) and panel.svgs


@pytest.mark.parametrize("build", [lambda: cases.queue_trio(), lambda: cases.queue_trio(admitted=False),
                                   lambda: cases.queue_stream(plugin="capacity")], ids=["trio", "submitted", "stream"])
def test_both_engines_agree_on_the_chapter_scenarios(build):
    scenario = build()
    reference, numba = (simulate(scenario, engine=e).jobs[["name", "start", "end"]] for e in ("reference", "numba"))
    assert reference.equals(numba)


VARIANTS = [(w, g) for w in variants.OPTIONS[10]["weights"] for g in variants.OPTIONS[10]["gpus"]]


@pytest.mark.parametrize(("weights", "gpus"), VARIANTS)
def test_every_variant_is_water_filled_and_solvable_by_hand(weights, gpus):
    """On every variant of exercises 10.1/10.2 the engine's deserved has the water-filling's shape (no queue
    above its request; the cluster poured out unless every request is met; the queues left short share one
    level deserved/weight, above the level of every queue whose request was met), and the idle GPUs are what
    the exercise's hint gives: each queue holds its deserved rounded down to whole 4-GPU jobs."""
    session = first_session(weights, gpus)
    deserved = {q: session[q]["deserved"] for q in cases.TEAMS}
    request = dict(zip(cases.TEAMS, map(float, gpus)))
    weight = dict(zip(cases.TEAMS, weights))
    assert all(deserved[q] <= request[q] + 1e-6 for q in cases.TEAMS)
    assert sum(deserved.values()) == pytest.approx(min(TOTAL_GPUS, sum(request.values())))
    short = [q for q in cases.TEAMS if deserved[q] < request[q] - 1e-6]
    levels = {deserved[q] / weight[q] for q in short}
    assert max(levels, default=0) - min(levels, default=0) < 1e-6
    if short:
        level = deserved[short[0]] / weight[short[0]]
        assert all(request[q] / weight[q] <= level + 1e-6 for q in cases.TEAMS if q not in short)
    by_hand = sum(min(request[q], (deserved[q] + 1e-9) // 4 * 4) for q in cases.TEAMS)
    assert by_hand == sum(session[q]["allocated"] for q in cases.TEAMS)
