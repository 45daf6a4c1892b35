"""Chapters 1–3 draw one exercise's parameters from the student's id; ex. 1.1 is a decimal judged within
the tolerance its text states. Expected values come from the engine, per variant."""

import contextlib
import csv
import functools
import io
from pathlib import Path

import nbformat
import pytest

from labkit import metrics
from labkit.cli import main
from labkit.course import cases, steps, variants
from labkit.engine.simulate import simulate
from labkit.grading import answers, check, sandbox
from labkit.grading.keys import judge
from labkit.grading.keys.ch01 import MINUTES

ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=4)
def _jobs(tenancy: bool, week: bool):
    result = simulate(cases.case_study(tenancy=tenancy, week=week))
    return result.jobs.assign(waited=metrics.waited(result))


def _team_wait(v: dict, week: bool = False, started_only: bool = False) -> float:
    """Ex. 1.1: the variant's team's mean wait (minutes) in the variant's set-up, unstarted jobs counted to
    the horizon (or, `started_only`, the biased mean the exercise warns about)."""
    jobs = _jobs(v["setup"] == "tenancy", week)
    mine = jobs[jobs.namespace == v["team"]]
    return float((mine.wait.dropna() if started_only else mine.waited).mean() / 60)


def _free_and_feasible(v: dict) -> list[int]:
    table = steps.placement(cases.fragmentation_snapshot(nodes=v["nodes"]))
    tp8 = table[table.task.str.startswith("ml/tp8")]
    return [int(tp8.free_gpus.sum()), int((tp8["filter"] == "pass").sum())]


def _min_gpu_quota(v: dict) -> int:
    """The GPUs the burst's pods request (what every pod needs admitted at once), read off a run under a
    quota that admits them all."""
    run = simulate(cases.quota_burst(gpu_quota=1000, jobs=v["jobs"], gpus=v["gpus"]))
    assert not (run.events.kind == "Rejected").any()
    return int(run.tasks["nvidia.com/gpu"].sum())


EXPECTED = {"ch01.q1": (1, _team_wait), "ch02.q1": (2, _free_and_feasible), "ch03.q2": (3, _min_gpu_quota)}


def _other(chapter: int, expected, than: str = "") -> str:
    """A student id whose variant's expected value differs from `than`'s (default: the default variant)."""
    base = expected(variants.params(chapter, than))
    return next(sid for i in range(1, 500) if expected(variants.params(chapter, sid := f"s{i:03d}")) != base)


@pytest.mark.parametrize("qid", EXPECTED)
def test_the_variant_changes_the_expected_value(qid):
    chapter, expected = EXPECTED[qid]
    sid = _other(chapter, expected)
    own, default = expected(variants.params(chapter, sid)), expected(variants.params(chapter, ""))
    assert judge(qid, own, sid).passed
    assert not judge(qid, default, sid).passed
    assert judge(qid, default, "").passed and not judge(qid, own, "").passed


@pytest.mark.parametrize("qid", EXPECTED)
def test_every_option_gives_a_distinct_answer(qid):
    """Each combination of the chapter's options is a sensible exercise with an answer of its own."""
    chapter, expected = EXPECTED[qid]
    names = sorted(variants.OPTIONS[chapter])
    combos = [{}]
    for name in names:
        combos = [{**c, name: value} for c in combos for value in variants.OPTIONS[chapter][name]]
    values = [expected(v) for v in combos]
    assert len({repr(x) for x in values}) == len(combos), values
    if qid == "ch02.q1":
        assert all(free == 4 * v["nodes"] and feasible == 0 for (free, feasible), v in zip(values, combos))
    if qid == "ch03.q2":
        assert all(0 < q <= 32 for q in values)  # a burst the 4 x 8-GPU cluster could run


@pytest.mark.parametrize("week", [False, True], ids=["slice", "week"])
def test_ch01_q1_follows_the_week_option_on_a_variant(week):
    sid = _other(1, _team_wait)
    v = variants.params(1, sid)
    right = _team_wait(v, week)
    assert judge("ch01.q1", right, sid, {"week": week}).passed
    other = _team_wait(v, not week)
    assert abs(other - right) > MINUTES.tolerance
    assert not judge("ch01.q1", other, sid, {"week": week}).passed


def test_ch01_q1_counts_jobs_never_started():
    """The default variant (team-a under naive FIFO) has jobs that never start: the mean over started jobs
    only is a different number and fails."""
    v = variants.params(1, "")
    biased, right = _team_wait(v, started_only=True), _team_wait(v)
    assert abs(biased - right) > MINUTES.tolerance
    assert judge("ch01.q1", right, "").passed and not judge("ch01.q1", biased, "").passed


def test_decimal_within_the_stated_tolerance(capsys, monkeypatch):
    monkeypatch.delenv(variants.ENV, raising=False)
    monkeypatch.setattr(variants, "_typed", "")  # the default variant, whatever id another test typed
    expected = _team_wait(variants.params(1, ""))
    tol = MINUTES.tolerance
    for inside in (expected + 0.99 * tol, expected - 0.99 * tol, round(expected, 1), expected + tol):
        check("ch01.q1", inside)
        assert capsys.readouterr().out == "ch01.q1: 正确\n", inside
    for outside in (expected + 1.01 * tol, expected - 1.01 * tol, int(expected)):
        check("ch01.q1", outside)
        out = capsys.readouterr().out
        assert out.startswith("ch01.q1: 错误（") and "±0.1 分钟" in out and out.count("\n") == 1, outside
    for bad in (f"{expected:.1f}", None, True, [expected], float("nan")):
        check("ch01.q1", bad)
        out = capsys.readouterr().out
        assert out == "ch01.q1: 错误（应为一个数（允许误差 ±0.1 分钟））\n", (bad, out)


def test_decimal_type():
    share = answers.Decimal(0.01, what="一个比例")
    assert share.stated == "±0.01" and MINUTES.stated == "±0.1 分钟"
    assert share.judge(0.545, 0.5434)[0] and share.judge(0.5334, 0.5434)[0]
    ok, why = share.judge(0.555, 0.5434)
    assert not ok and "±0.01" in why
    with pytest.raises(answers.Unusable, match="应为一个比例"):
        share.read("0.54")


def test_exercise_text_states_the_tolerance():
    nb = nbformat.read(ROOT / "solutions" / "ch01_intro.ipynb", as_version=4)
    (text,) = [c.source for c in nb.cells if c.cell_type == "markdown" and "**练习 1.1**" in c.source]
    assert f"允许误差 {MINUTES.stated}" in text


# ------------------------------------------------------------- end to end: `labkit grade` on chapter 2

CH02 = "ch02_foundations"


def _reference(tmp: Path) -> Path:
    """solutions/ with chapter 2 trimmed to its set-up cell and its exercises (a short graded run)."""
    nb = nbformat.read(ROOT / "solutions" / f"{CH02}.ipynb", as_version=4)
    first = min(i for i, c in enumerate(nb.cells) if any(t.startswith("answer:") for t in c.metadata.get("tags", [])))
    last = max(i for i, c in enumerate(nb.cells) if any(t.startswith("check:") for t in c.metadata.get("tags", [])))
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells = [nb.cells[setup], *nb.cells[first - 1:last + 1]]
    folder = tmp / "solutions"
    folder.mkdir()
    nbformat.write(nb, folder / f"{CH02}.ipynb")
    return folder


def _submit(subs: Path, student: str, nb) -> None:
    (subs / student).mkdir(parents=True)
    nbformat.write(nb, subs / student / f"{CH02}.ipynb")


@pytest.mark.skipif(not sandbox.available(), reason="bubblewrap (bwrap) is not installed; .ci/run installs it")
def test_grade_judges_each_student_on_their_own_chapter_2_variant(tmp_path):
    """Two ids with different snapshots: each one's own computed answer passes; the second id's copy of the
    first one's numbers fails 2.1 (and only 2.1)."""
    one = "s001"
    two = _other(2, _free_and_feasible, than=one)
    solutions, subs, out = _reference(tmp_path), tmp_path / "subs", tmp_path / "out"
    reference = nbformat.read(solutions / f"{CH02}.ipynb", as_version=4)
    _submit(subs, one, reference)
    copied = nbformat.from_dict(reference)
    for cell in copied.cells:
        if "answer:ch02.q1" in cell.metadata.get("tags", []):
            cell.source = f"free_and_feasible = {tuple(_free_and_feasible(variants.params(2, one)))}"
    _submit(subs, two, copied)
    _submit(subs, f"{two}x", reference)  # a third id: computes its own answer
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["grade", str(subs), "--solutions", str(solutions), "-o", str(out), "-j", "2",
                     "--cell-timeout", "30", "--notebook-timeout", "90"])
    assert code == 0, err.getvalue()
    rows = {(r["student"], r["check"]): r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    assert {q: r["verdict"] for (s, q), r in rows.items() if s == one} == \
        {"ch02.q1": "passed", "ch02.q2": "passed", "ch02.q3": "passed"}
    assert {q: r["verdict"] for (s, q), r in rows.items() if s == two} == \
        {"ch02.q1": "failed", "ch02.q2": "passed", "ch02.q3": "passed"}
    assert rows[(two, "ch02.q1")]["reason"] == "空闲 GPU 总数不对 [wrong]"
    assert {r["verdict"] for (s, q), r in rows.items() if s == f"{two}x"} == {"passed"}


def test_ch01_q3_lab_gives_the_symptoms_the_key_judges():
    """Ex. 1.3's answer is keyed by the six symptoms' exact text: the lab must hand them to the student
    (they once lived only inside the stripped solution), and the solution's answer built from them passes."""
    from labkit.grading.keys.ch01 import symptoms

    for folder in ("labs", "solutions"):
        nb = nbformat.read(ROOT / folder / "ch01_intro.ipynb", as_version=4)
        cell = next(c for c in nb.cells if "answer:ch01.q3" in c.metadata.get("tags", []))
        namespace: dict = {}
        exec(cell.source.replace("...  # 在此作答", "None"), namespace)  # noqa: S102 (the course's own lab cell)
        assert namespace["SYMPTOMS"] == list(symptoms()), folder
    assert judge("ch01.q3", dict(zip(namespace["SYMPTOMS"], symptoms().values()))).passed
