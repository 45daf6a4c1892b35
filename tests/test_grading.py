"""Checks compute the expected value with the engine; `labkit grade` merges, runs nbval, reports."""

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit import grading, metrics
from labkit.cli import main
from labkit.course import cases

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("qid", "right", "wrong"), [
    ("ch02.q1", (16, 0), (16, 4)),
    ("ch02.q2", [0, 0, 1, 1], [0, 1, 2, 3]),
    ("ch02.q3", "binpack", "least"),
    ("ch03.q1", ["c-eval-4-worker-0", "c-eval-5-worker-0"], ["c-eval-5-worker-0"]),
    ("ch03.q2", 24, 28),
    ("ch03.q3", 1, 2),
    ("ch04.q1", ["d", "c"], ["d"]),
    ("ch04.q2", 66, 67),
    ("ch04.q3", ["c"], ["d", "c"]),
    ("ch05.q1", 16, 8),
    ("ch05.q2", 2, 1),
    ("ch05.q3", 4, 2),
])
def test_right_passes_wrong_fails(qid, right, wrong, capsys):
    grading.check(qid, right)
    assert capsys.readouterr().out == f"{qid}: ok\n"
    grading.check(qid, wrong)
    assert capsys.readouterr().out.startswith(f"{qid}: wrong (")


@pytest.mark.parametrize("week", [False, True], ids=["slice", "week"])
def test_ch01_q1_follows_the_run_the_student_made(week, capsys):
    """Exercise 1.1 asks for the team with the longest mean wait under naive FIFO, jobs not started by
    the horizon counted as waiting until it: computed here from the engine for the slice or the week."""
    result = labkit.simulate(cases.case_study(tenancy=False, week=week))
    waits = metrics.waited(result).groupby(result.jobs.namespace).mean()
    slowest = waits.idxmax()
    grading.check("ch01.q1", slowest, week=week)
    assert capsys.readouterr().out == "ch01.q1: ok\n"
    grading.check("ch01.q1", next(t for t in cases.TEAMS if t != slowest), week=week)
    assert capsys.readouterr().out.startswith("ch01.q1: wrong (")


def test_ch01_q2_weights(capsys):
    grading.check("ch01.q2", (5, 3, 2))
    assert capsys.readouterr().out.startswith("ch01.q2: wrong (team C does not wait less")


def test_ch01_q3_key_follows_the_chapter_and_the_preset(capsys):
    """A namespace's ResourceQuota is 多租户 (the chapter's table), a Queue's capability 资源分配; the
    numbers in the symptoms are the preset's own."""
    scenario = labkit.preset("case-study")
    key = grading.symptoms()
    (quota,) = [s for s in key if "ResourceQuota" in s]
    (capability,) = [s for s in key if "capability" in s]
    assert key[quota] == "多租户" and key[capability] == "资源分配"
    assert str(int(float(scenario.tenants[2].resource_quota.hard["requests.nvidia.com/gpu"]))) in quota
    assert str(int(float(scenario.queues[0].capability["nvidia.com/gpu"]))) in capability
    grading.check("ch01.q3", key)
    assert capsys.readouterr().out == "ch01.q3: ok\n"
    grading.check("ch01.q3", {**key, quota: "资源分配"})
    assert capsys.readouterr().out.startswith("ch01.q3: wrong (1 of 6")


def test_placeholder_and_unusable_answers(capsys):
    grading.check("ch02.q1", (..., 0))
    grading.check("ch02.q3", "random")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ch02.q1: not answered"
    assert out[1].startswith("ch02.q3: wrong (cannot use this answer")
    with pytest.raises(KeyError):
        grading.check("ch00.q0", 1)


def _submit(folder: Path, student: str, answers: dict[str, str]) -> None:
    lab = nbformat.read(ROOT / "labs" / "ch02_foundations.ipynb", as_version=4)
    for cell in lab.cells:
        for tag in cell.metadata.get("tags", []):
            if tag.startswith("answer:") and tag[7:] in answers:
                cell.source = answers[tag[7:]]
    (folder / student).mkdir(parents=True)
    nbformat.write(lab, folder / student / "ch02_foundations.ipynb")


def test_grade_a_folder(tmp_path, capsys):
    subs = tmp_path / "subs"
    _submit(subs, "alice", {"ch02.q1": "free_and_feasible = (16, 0)", "ch02.q2": "placed = [1, 1, 3, 3]",
                            "ch02.q3": 'strategy = "most"'})
    _submit(subs, "bob", {"ch02.q1": "free_and_feasible = (16, 4)", "ch02.q3": "strategy = undefined_name"})
    out = tmp_path / "grades"
    assert main(["grade", str(subs), "--solutions", str(ROOT / "solutions"), "-o", str(out)]) == 0
    rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8")))
    result = {(r["student"], r["check"]): r["result"] for r in rows}
    assert result == {("alice", "ch02.q1"): "passed", ("alice", "ch02.q2"): "passed", ("alice", "ch02.q3"): "passed",
                      ("bob", "ch02.q1"): "failed", ("bob", "ch02.q2"): "failed", ("bob", "ch02.q3"): "failed"}
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["alice/ch02_foundations", "bob/ch02_foundations"]
    assert "alice: 3/3 checks passed" in capsys.readouterr().out


def test_merge_never_hands_out_the_solution():
    reference = nbformat.read(ROOT / "solutions" / "ch02_foundations.ipynb", as_version=4)
    submission = nbformat.v4.new_notebook()
    merged = grading.merge(reference, submission)
    answers = [c.source for c in merged.cells if any(t.startswith("answer:") for t in c.metadata.get("tags", []))]
    assert answers == ["table = ...  # 在此作答\nfree_and_feasible = ...  # 在此作答", "placed = ...  # 在此作答",
                       "strategy = ...  # 在此作答"]


def test_grade_needs_submissions(tmp_path):
    assert main(["grade", str(tmp_path / "none")]) == 2
    assert main(["grade", str(tmp_path), "--solutions", str(ROOT / "solutions")]) == 2
