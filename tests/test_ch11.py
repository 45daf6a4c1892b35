"""Chapter 11 (backfill): its checks judged right and wrong on the engine's numbers, per-student variants,
the scenario edits, reservation table, chart and panel it uses, and its real-Slurm cell where Slurm is absent."""

import io
import math
from contextlib import redirect_stdout
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import labkit
from labkit import viz, widgets
from labkit.course import cases, steps, variants
from labkit.grading import check
from labkit.grading.keys import ch11, judge
from labkit.slurm import cluster as slurm_cluster
from labkit.slurm.conf import slurm_jobs
from labkit.spec.quantity import parse_duration

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = variants.params(11, "")


def _verdicts(capsys, qid, right, wrong):
    check(qid, right)
    assert capsys.readouterr().out == f"{qid}: 正确\n"
    check(qid, wrong)
    assert capsys.readouterr().out.startswith(f"{qid}: 错误（")


def test_q1_reservation_when_a_ends(capsys):
    """The expected StartTime is the running c1's start plus its time limit, as the scenario gives them."""
    run = labkit.simulate(cases.backfill_mix())
    c1 = next(j for j in run.scenario.jobs if j.name == "c1")
    c1_start = run.jobs.set_index("name").start["c1"]
    expected = (c1_start + parse_duration(c1.time_limit)) / 60
    assert ch11.reserved_when_a_ends(DEFAULT["c1_limit"]) == expected
    _verdicts(capsys, "ch11.q1", int(expected), int(expected) - 2)


def test_q2_smallest_window(capsys):
    smallest = ch11.smallest_window(DEFAULT["c1_limit"])
    starts = {w: labkit.simulate(cases.backfill_mix(bf_window=w)).jobs.set_index("name").start["b"]
              for w in (smallest - 1, smallest, 1440)}
    assert starts[smallest] == starts[1440] < starts[smallest - 1]
    _verdicts(capsys, "ch11.q2", smallest, smallest + 1)   # too large: not the smallest
    _verdicts(capsys, "ch11.q2", smallest, smallest - 1)   # too small: b loses its reservation
    check("ch11.q2", 0)
    assert "bf_window 应在 1 到 1440 分钟之间" in capsys.readouterr().out


def test_q3_first_late_estimate(capsys):
    b = {k: labkit.simulate(cases.backfill_mix(estimate=k)).jobs.set_index("name").start["b"] for k in ch11.ESTIMATES}
    first = ch11.first_late_estimate()
    assert b[first] > b[1] and all(b[k] == b[1] for k in ch11.ESTIMATES if k < first)
    _verdicts(capsys, "ch11.q3", first, ch11.ESTIMATES[ch11.ESTIMATES.index(first) + 1])
    check("ch11.q3", 1.3)
    assert capsys.readouterr().out.startswith("ch11.q3: 错误（应为 1, 1.25, 1.5")


def test_two_students_two_expected_values():
    one = "s001"
    two = next(f"s{i:03d}" for i in range(2, 500)
               if variants.params(11, f"s{i:03d}")["c1_limit"] != variants.params(11, one)["c1_limit"])
    for qid, expected in (("ch11.q1", ch11.reserved_when_a_ends), ("ch11.q2", ch11.smallest_window)):
        a, b = (int(expected(variants.params(11, sid)["c1_limit"])) for sid in (one, two))
        assert a != b
        assert judge(qid, a, one).passed and judge(qid, b, two).passed
        assert not judge(qid, a, two).passed and not judge(qid, b, one).passed


@pytest.mark.parametrize("limit", variants.OPTIONS[11]["c1_limit"])
def test_every_variant_keeps_the_chapter_story(limit):
    """For each option of the variant: c1 is backfilled at once, and b's reservation once a has ended is what
    holds c2..c4 off a's nodes (so exercise 11.2 has a window that matters)."""
    run = labkit.simulate(cases.backfill_mix(limits={"c1": limit}))
    jobs = run.jobs.set_index("name")
    assert jobs.start["c1"] == jobs.submit["c1"]
    assert all(jobs.start[c] >= jobs.end["b"] for c in ("c2", "c3", "c4"))
    assert ch11.smallest_window(limit) > 1


def test_reservations_are_the_startime_notes():
    """b's first reservation: a's start plus a's time limit, on all four nodes."""
    run = labkit.simulate(cases.backfill_mix())
    a = next(j for j in run.scenario.jobs if j.name == "a")
    table = steps.reservations(run)
    first = table[table.job == "team-a/b"].iloc[0]
    assert first.start == run.jobs.set_index("name").start["a"] + parse_duration(a.time_limit)
    assert first.nodes == ",".join(f"n-{i}" for i in range(4))
    assert steps.reservations(labkit.simulate(cases.backfill_mix("slurm-builtin"))).empty


@pytest.mark.parametrize("estimate", [1, 1.25, 3.5])
def test_set_estimate_rounds_up_to_whole_minutes(estimate):
    scenario = cases.backfill_mix(estimate=estimate)
    for job in scenario.jobs:
        limit, run = parse_duration(job.time_limit), parse_duration(job.duration)
        assert limit % 60 == 0 and limit == 60 * math.ceil(estimate * run / 60)


def test_set_bf_window_keeps_the_other_parameters():
    policy = labkit.spec.policy_scheduler("slurm-backfill").slurm.scheduler_parameters.split(",")
    given = cases.backfill_mix(bf_window=30).scheduler.slurm.scheduler_parameters.split(",")
    assert given.count("bf_window=30") == 1 and not any(p.startswith("bf_window=") and p != "bf_window=30" for p in given)
    assert set(policy) - {"bf_window=1440"} == set(given) - {"bf_window=30"}


def test_job_gantt_draws_each_started_pod_in_its_lane():
    run = labkit.simulate(cases.backfill_mix())
    layers = viz.job_gantt(run).to_dict()["layer"]
    data = viz.job_gantt(run).data
    assert len(data) == run.tasks.start.notna().sum()
    assert set(data[data.job == "e"].lane) == {"no GPU"} and set(data[data.job == "a"].lane) == {"GPU"}
    assert len(layers) == 2 and viz.to_svg(viz.job_gantt(run)).startswith("<svg")


def test_panel_knobs_rerun_the_engine():
    panel = widgets.Panel(cases.backfill_mix(estimate=2), [
        widgets.Knob("estimate", "k", "float", 2.0, cases.set_estimate, low=1, high=5, step=0.25),
        widgets.Knob("bf_window", "w", "int", 1440, cases.set_bf_window, low=1, high=1440)],
        charts=("job_gantt",), debounce=0)
    b = panel.result.jobs.set_index("name").start["b"]
    panel.set("estimate", 1.0)
    assert panel.result.jobs.set_index("name").start["b"] < b
    assert panel.svgs and panel.runs == 2


def _cells(*needles: str) -> list[str]:
    nb = nbformat.read(ROOT / "solutions" / "ch11_backfill.ipynb", as_version=4)
    return [next(c.source for c in nb.cells if c.cell_type == "code" and needle in c.source) for needle in needles]


def _run_real_cells() -> tuple[dict, list[str]]:
    """The notebook's real-run and compare cells, run here as a kernel would, and what they printed."""
    namespace = {"cases": cases, "labkit": labkit, "tempfile": __import__("tempfile"), "json": __import__("json"),
                 "Path": Path, "pd": pd, "steps": steps, "parse_duration": parse_duration}
    out = io.StringIO()
    with redirect_stdout(out):
        for source in _cells("TIME_SCALE = ", "require_slurm()", "labkit compare sim.json real.json"):
            exec(compile(source, "ch11", "exec"), namespace)  # noqa: S102 (the notebook's own cells, as a kernel runs them)
    return namespace, out.getvalue().splitlines()


def test_the_real_run_doubles_the_limits_to_whole_minutes_and_no_start_moves(monkeypatch):
    """11.8: at the cell's time scale the whole-hour limits would be rounded up (c1 no longer backfilled); the
    doubled ones are whole minutes, and the simulator starts every job as it does under the whole hours."""
    monkeypatch.setenv("LABKIT_GRADING", "1")
    namespace, lines = _run_real_cells()
    scale, sims = namespace["TIME_SCALE"], namespace["sims"]
    assert scale > 60 and lines[0].startswith("上限加倍时 b 的预留：")
    starts = {label: run.jobs.set_index("name").start for label, run in sims.items()}
    assert starts["上限加倍"].equals(starts["整小时上限"])
    assert starts["120 倍速取整后"]["c1"] > starts["整小时上限"]["b"]  # c1 would wait behind b
    for job in slurm_jobs(namespace["real_scenario"], scale):
        spec_job = next(j for j in namespace["doubled"].jobs if j.name == job.name)
        assert job.time_limit_min * 60 * scale == parse_duration(spec_job.time_limit)


def test_real_slurm_cells_say_why_they_skip(monkeypatch):
    """Without Slurm the real-run cell prints one line naming the apt command and the compare cell says there
    is nothing to compare; neither raises."""
    monkeypatch.delenv("LABKIT_GRADING", raising=False)
    monkeypatch.setattr(slurm_cluster, "program", lambda name: None)
    namespace, lines = _run_real_cells()
    assert namespace["real"] is None
    assert lines[1].startswith("跳过真实 Slurm：Slurm is not installed (no munged, slurmctld,")
    assert slurm_cluster.APT_INSTALL in lines[1]
    assert lines[2:] == ["没有真实运行可比较：见上一单元的原因"]


def test_a_graded_run_starts_no_slurm(monkeypatch):
    """`labkit grade` (LABKIT_GRADING=1, even --no-sandbox as root with Slurm installed) must not spend its cell
    time limit on the real run: one line, no daemon started."""
    monkeypatch.setenv("LABKIT_GRADING", "1")
    monkeypatch.setattr(slurm_cluster, "require_slurm", lambda: pytest.fail("require_slurm was called"))
    namespace, lines = _run_real_cells()
    assert namespace["real"] is None
    assert lines[1:] == ["跳过真实 Slurm：评分运行不启动本机守护进程（真实运行要半分钟，占去评分单元格时限的一半）",
                         "没有真实运行可比较：见上一单元的原因"]
