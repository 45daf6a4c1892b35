"""Chapter 6 (queue management): the queue order workload, head-of-line blocking, the chapter's checks."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

import labkit
from labkit import diagnose, viz, widgets
from labkit.compare import compare, to_json
from labkit.course import cases, steps, variants
from labkit.errors import LabkitWarning
from labkit.grading import check
from labkit.grading.keys import judge
from labkit.k8s import sets
from labkit.k8s.manifests import manifests
from labkit.slurm import Cluster, down, missing_programs, run, slurm_scenario, up

ORDERS = list(cases.QUEUE_ORDERS)
CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"


def _starts(scenario, engine: str = "auto") -> pd.Series:
    return labkit.simulate(scenario, engine=engine).jobs.set_index("name").start


@pytest.fixture(scope="module")
def runs():
    return {order: labkit.simulate(cases.queue_order(order)) for order in ORDERS}


def _behind(result) -> pd.DataFrame:
    """The jobs submitted after the head, from the run's own job table (not steps.head_of_line)."""
    jobs = result.jobs.set_index("name")
    return jobs[jobs.submit > jobs.submit[cases.HEAD]]


def test_strict_fifo_blocks_everyone_behind_the_head_best_effort_lets_them_pass(runs):
    for order in ORDERS:
        jobs = runs[order].jobs.set_index("name")
        behind = _behind(runs[order])
        passed = set(behind.index[behind.start < jobs.start[cases.HEAD]])
        if order.endswith("besteffort"):
            assert passed == set(behind.index), order
        elif order == "fifo-strict":
            assert passed == set(), order
        else:  # priority-strict: only the urgent job goes ahead of the head (it is the head when it arrives)
            assert passed == {cases.URGENT}, order
    strict, best = (runs[o].jobs.set_index("name").start[cases.HEAD] for o in ("fifo-strict", "fifo-besteffort"))
    assert strict < best  # the price of best effort: the head waits for a gap the small jobs keep filling


def test_head_of_line_table_matches_the_runs_jobs(runs):
    for order in ORDERS:
        table = steps.head_of_line(runs[order], cases.HEAD)
        behind = _behind(runs[order])
        assert list(table.index) == list(behind.index)
        assert table.wait.tolist() == (behind.start - behind.submit).tolist()
    with pytest.raises(KeyError, match="nope"):
        steps.head_of_line(runs["fifo-strict"], "nope")


def test_head_of_line_counts_a_never_started_job_to_the_end():
    result = labkit.simulate(cases.queue_order("fifo-strict").model_copy(update={"horizon": "30m"}))
    table = steps.head_of_line(result, cases.HEAD)
    assert table.start.isna().all() and not table.overtook.any()
    assert (table.wait == 1800 - table.submit).all()


def test_idle_gpu_hours_while_the_head_waits(runs):
    """Capacity x wait minus the GPU-seconds each pod held inside the head's wait, from the pods' own runs."""
    for order in ORDERS:
        result = runs[order]
        jobs = result.jobs.set_index("name")
        begin, end = jobs.submit[cases.HEAD], jobs.start[cases.HEAD]
        tasks = result.tasks
        overlap = (tasks.end.clip(begin, end) - tasks.start.clip(begin, end)).clip(lower=0)
        expected = (32 * (end - begin) - (overlap * tasks["nvidia.com/gpu"]).sum()) / 3600
        assert steps.idle_while_head_waits(result, cases.HEAD) == pytest.approx(expected), order
    # best effort does not buy utilisation here: the trickle of small jobs keeps the head out longer
    assert (steps.idle_while_head_waits(runs["fifo-besteffort"], cases.HEAD)
            > steps.idle_while_head_waits(runs["fifo-strict"], cases.HEAD))
    with pytest.raises(KeyError, match="nope"):
        steps.idle_while_head_waits(runs["fifo-strict"], "nope")


@pytest.mark.parametrize("order", ORDERS)
def test_both_engines_agree_on_each_order(order):
    scenario = cases.queue_order(order, resident_minutes=75)
    assert _starts(scenario, "numba").equals(_starts(scenario, "reference"))


def test_kueue_strict_fifo_blocks_best_effort_parks_the_head():
    strict = _starts(cases.queue_order("priority-strict", kueue=True))
    best = _starts(cases.queue_order("priority-besteffort", kueue=True))
    smalls = [n for n in strict.index if n.startswith("s-")]
    assert [n for n in smalls if strict[n] < strict[cases.HEAD]] == [cases.URGENT]
    assert all(best[n] < best[cases.HEAD] for n in smalls)
    with pytest.raises(ValueError, match="order must be"):
        cases.queue_order("lifo")


def test_volcanos_overcommit_holds_the_head_before_allocate_sees_it():
    """Under the shipped conf the head is held Pending by enqueue's overcommit vote, so StrictFIFO
    (an allocate rule) changes nothing: the jobs behind it are not blocked."""
    def shipped(strategy):
        data = cases.queue_order().model_dump(mode="json", by_alias=True, exclude_unset=True)
        data["scheduler"] = {"policy": "volcano-shipped", "queueingStrategy": strategy}
        return labkit.spec.validate(data)
    strict = labkit.simulate(shipped("StrictFIFO"))
    assert strict.jobs.set_index("name").start.equals(_starts(shipped("BestEffortFIFO")))
    why = diagnose.explain(strict, cases.HEAD, 1000)
    assert "PodGroup Pending" in str(why) and "overcommit" in str(why)


def test_exporting_a_strict_fifo_scenario_to_volcano_warns():
    with pytest.warns(LabkitWarning, match="StrictFIFO is not exported"):
        manifests(cases.queue_order("fifo-strict"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        manifests(cases.queue_order("fifo-besteffort"))


def test_the_example_is_the_default_order_and_the_ch06_manifests_are_fresh(tmp_path):
    assert cases.queue_order().jobs == labkit.spec.load(cases.EXAMPLES / "queue-order.yaml").jobs
    example, scale = sets.EXAMPLES["ch06"]
    assert example == "queue-order.yaml"
    made = sets.generated()["ch06"]
    kept = {p.name: p.read_text() for p in (CLUSTERS / "ch06").iterdir() if p.name != "README.md"}
    assert made == kept, f"clusters/ch06 is stale; run `{sets.REGENERATE}`"
    assert f"--time-scale {scale:g}" in made["08-vcjobs.yaml"].splitlines()[0]


def test_the_queue_order_knob_rewrites_the_conf_and_strategy():
    base = cases.queue_order("fifo-besteffort")
    knob = widgets.queue_order(base)
    assert knob.value == "fifo-besteffort"
    assert widgets.queue_order(cases.queue_order("priority-strict")).value == "priority-strict"
    panel = widgets.Panel(base, [knob], charts=("jobs",), debounce=0)
    for order in ORDERS:
        panel.set(knob.name, order)
        assert panel.result.jobs.set_index("name").start.equals(_starts(cases.queue_order(order))), order
    assert "<svg" in panel.svgs[0]
    shipped = labkit.spec.validate({**base.model_dump(mode="json", by_alias=True, exclude_unset=True),
                                    "scheduler": {"policy": "volcano-shipped"}})
    knob = widgets.queue_order(shipped)
    assert knob.value == "priority-besteffort"  # the shipped conf has the priority plugin
    panel = widgets.Panel(shipped, [knob], charts=(), debounce=0)
    edited = panel.scenario({knob.name: "fifo-strict"})
    plugins = [p.name for tier in edited.scheduler.conf.tiers for p in tier.plugins]
    assert "priority" not in plugins and "overcommit" in plugins
    assert edited.scheduler.queueing_strategy == "StrictFIFO"


def test_job_timeline_has_a_row_per_job(runs):
    chart = viz.job_timeline(runs["fifo-strict"])
    data = chart.layer[0].data
    assert len(data) == len(runs["fifo-strict"].jobs)
    assert "<svg" in viz.to_svg(chart)


# ------------------------------------------------------------------ the checks


def _expected(resident_minutes: int) -> dict[str, int]:
    """The right answers from the engine's runs (the jobs' own start and submit times)."""
    runs = {o: labkit.simulate(cases.queue_order(o, resident_minutes=resident_minutes)) for o in ORDERS}
    strict = runs["fifo-strict"]
    behind = _behind(strict)
    head = {o: runs[o].jobs.set_index("name").start[cases.HEAD] for o in ORDERS}
    return {"ch06.q1": round(float((behind.start - behind.submit).mean())),
            "ch06.q2": round(float(head["fifo-besteffort"] - head["fifo-strict"]))}


def test_right_passes_wrong_fails(capsys):
    right = _expected(variants.params(6, "")["resident_minutes"])
    for qid, value in right.items():
        check(qid, value)
        assert capsys.readouterr().out == f"{qid}: 正确\n"
        check(qid, value + 60)
        assert capsys.readouterr().out.startswith(f"{qid}: 错误（")
    check("ch06.q3", "priority-strict")
    assert capsys.readouterr().out == "ch06.q3: 正确\n"
    for wrong in ("fifo-strict", "priority-besteffort", "fifo-besteffort"):
        check("ch06.q3", wrong)
        assert capsys.readouterr().out.startswith("ch06.q3: 错误（")
    assert judge("ch06.q3", "fifo-strict").reason.startswith(f"紧急作业 {cases.URGENT} 等了")
    assert cases.HEAD in judge("ch06.q3", "priority-besteffort").reason
    assert judge("ch06.q3", "lifo").code == "wrong-type"
    assert judge("ch06.q1", "many").code == "wrong-type"


def test_the_variant_changes_the_expected_values():
    one = "s001"
    two = next(f"s{i:03d}" for i in range(2, 500)
               if variants.params(6, f"s{i:03d}")["resident_minutes"] != variants.params(6, one)["resident_minutes"])
    first, second = (_expected(variants.params(6, sid)["resident_minutes"]) for sid in (one, two))
    assert first["ch06.q1"] != second["ch06.q1"] and first["ch06.q2"] != second["ch06.q2"]
    for qid in ("ch06.q1", "ch06.q2"):
        assert judge(qid, first[qid], student=one).passed
        assert not judge(qid, first[qid], student=two).passed
        assert judge(qid, second[qid], student=two).passed


# ------------------------------------------------------------------ the real engine (section 6.9)

SLURM_MISSING = missing_programs()


@pytest.mark.slurm
@pytest.mark.skipif(bool(SLURM_MISSING), reason=f"Slurm is not installed (no {', '.join(SLURM_MISSING)})")
@pytest.mark.skipif(os.geteuid() != 0, reason="the local Slurm runs its daemons as root")
def test_the_real_slurm_builtin_keeps_the_small_jobs_behind_big(tmp_path):
    """Section 6.9 on the local Slurm (sched/builtin, time scale 60: about three minutes): big starts
    when run-2 ends and every small job after it, as the simulator says; big waits for Resources,
    the small jobs behind it for Priority."""
    example = cases.EXAMPLES / "queue-order.yaml"
    scenario, conf = slurm_scenario(labkit.load(example), "slurm-builtin")
    cluster = Cluster(tmp_path / "slurm")
    try:
        up(scenario, conf, cluster, 60.0)
        real = run(scenario, conf, cluster, 60.0, timeout=600)
    finally:
        down(cluster)
    simulated = labkit.simulate(labkit.load(example), policy="slurm-builtin")
    verdict = compare(to_json(simulated), to_json(real), labels=("simulator", "real Slurm"))
    assert verdict.agree, verdict.report()
    starts = real.jobs.set_index("name").start
    assert all(starts[f"s-{i}"] >= starts[cases.HEAD] for i in range(1, 9))
    pending = set(zip(real.events.job[real.events.kind == "Pending"], real.events.reason[real.events.kind == "Pending"]))
    assert {("ml/big", "Resources"), ("ml/s-1", "Priority")} <= pending
