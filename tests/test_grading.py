"""Checks judge plain answers with the engine, on the student's variant; verdicts are Chinese lines, never a traceback."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labkit
from labkit import metrics
from labkit.course import cases, notebooks, steps, variants
from labkit.engine.simulate import simulate
from labkit.grading import answers, check
from labkit.grading.keys import CHECKS, judge
from labkit.grading.keys.ch01 import symptoms

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
    check(qid, right)
    assert capsys.readouterr().out == f"{qid}: 正确\n"
    check(qid, wrong)
    assert capsys.readouterr().out.startswith(f"{qid}: 错误（")


@pytest.mark.parametrize("week", [False, True], ids=["slice", "week"])
def test_ch01_q1_follows_the_run_the_student_made(week, capsys):
    """Exercise 1.1 (default variant: naive FIFO) asks a team's mean wait in minutes, jobs not started by
    the horizon counted as waiting until it: computed here from the engine for the slice or the week."""
    v = variants.params(1, "")
    assert v["setup"] == "naive"
    result = labkit.simulate(cases.case_study(tenancy=False, week=week))
    waits = metrics.waited(result).groupby(result.jobs.namespace).mean() / 60
    check("ch01.q1", float(waits[v["team"]]), week=week)
    assert capsys.readouterr().out == "ch01.q1: 正确\n"
    check("ch01.q1", float(waits.drop(v["team"]).iloc[0]), week=week)
    assert capsys.readouterr().out.startswith("ch01.q1: 错误（")


def test_ch01_q2_weights(capsys):
    check("ch01.q2", (5, 3, 2))
    assert capsys.readouterr().out.startswith("ch01.q2: 错误（团队 C 的等待没有比权重 5/3/2 时更短")


def test_ch01_q3_key_follows_the_chapter_and_the_preset(capsys):
    """A namespace's ResourceQuota is 多租户 (the chapter's table), a Queue's capability 资源分配; the
    numbers in the symptoms are the preset's own."""
    scenario = labkit.preset("case-study")
    key = symptoms()
    (quota,) = [s for s in key if "ResourceQuota" in s]
    (capability,) = [s for s in key if "capability" in s]
    assert key[quota] == "多租户" and key[capability] == "资源分配"
    assert str(int(float(scenario.tenants[2].resource_quota.hard["requests.nvidia.com/gpu"]))) in quota
    assert str(int(float(scenario.queues[0].capability["nvidia.com/gpu"]))) in capability
    check("ch01.q3", key)
    assert capsys.readouterr().out == "ch01.q3: 正确\n"
    check("ch01.q3", {**key, quota: "资源分配"})
    assert capsys.readouterr().out.startswith("ch01.q3: 错误（6 个现象中有 1 个")


@pytest.mark.parametrize(("qid", "answer", "says"), [
    ("ch03.q2", 24.9, "应为一个整数"),     # never truncated to 24
    ("ch04.q2", 66.9, "应为一个整数"),
    ("ch05.q2", 2.7, "应为一个整数"),
    ("ch05.q2", "2", "应为一个整数"),
    ("ch05.q2", True, "应为一个整数"),
    ("ch05.q2", [2], "应为一个整数"),
    ("ch04.q1", "dc", "应为作业名列表"),
    ("ch04.q1", [1, 2], "应为作业名列表"),
    ("ch02.q1", 16, "2 个整数"),
    ("ch02.q2", [0, 0, 1], "4 个整数"),
    ("ch02.q3", "random", "应为 least, most, binpack 之一"),
    ("ch01.q3", ["多租户"], "应为字典"),
    ("ch03.q1", None, "Pod 名列表"),
])
def test_wrong_type_or_shape_is_a_verdict_line(qid, answer, says, capsys):
    check(qid, answer)
    out = capsys.readouterr().out
    assert out.startswith(f"{qid}: 错误（") and says in out and out.count("\n") == 1


def test_integral_floats_and_numpy_values_are_numbers(capsys):
    check("ch03.q2", 24.0)
    check("ch05.q2", np.int64(2))
    check("ch04.q1", pd.Series(["d", "c"]))
    assert capsys.readouterr().out.splitlines() == ["ch03.q2: 正确", "ch05.q2: 正确", "ch04.q1: 正确"]


def test_placeholder_unsendable_and_unknown(capsys):
    check("ch02.q1", (..., 0))
    check("ch05.q1", lambda: 16)
    check("ch05.q1", pd.DataFrame({"a": [1]}))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ch02.q1: 未作答"
    assert out[1].startswith("ch05.q1: 错误（答案应为数、字符串、列表或字典，而不是 function")
    assert out[2].startswith("ch05.q1: 错误（答案应为数、字符串、列表或字典，而不是 DataFrame")
    with pytest.raises(KeyError):
        check("ch00.q0", 1)


def test_answers_are_plain_data_under_a_size_limit():
    assert answers.to_plain({"a": (np.float64(1.5), {np.int32(3)})}) == {"a": [1.5, [3]]}
    assert json.loads(answers.encode(pd.Index(["x"]))) == ["x"]
    with pytest.raises(answers.Unusable, match="太大"):
        answers.encode(list(range(100_000)))
    with pytest.raises(answers.Unusable, match="键应为字符串"):
        answers.to_plain({1: 2})


def test_every_check_declares_points():
    assert all(c.points >= 1 for c in CHECKS.values())
    assert {q[:4] for q in CHECKS} == {path.name[:4] for path in notebooks.chapters(ROOT / "solutions")}


def _ids_with_different(chapter: int, key: str) -> tuple[str, str]:
    first = "s001"
    other = next(f"s{i:03d}" for i in range(2, 500)
                 if variants.params(chapter, f"s{i:03d}")[key] != variants.params(chapter, first)[key])
    return first, other


def test_variants_default_and_per_student(monkeypatch):
    monkeypatch.delenv(variants.ENV, raising=False)
    monkeypatch.setattr(variants, "_typed", "")  # the typed id is restored after the test, not left to others
    assert variants.params(5, "") == {"workers": variants.OPTIONS[5]["workers"][0]}
    assert variants.params(4, "s001") == variants.params(4, "s001")  # stable
    _, two = _ids_with_different(5, "workers")
    monkeypatch.setenv(variants.ENV, two)
    assert variants.student("typed-id") == two  # the grader's id (environment) wins over the typed one
    monkeypatch.delenv(variants.ENV)
    assert variants.current() == "typed-id"


@pytest.mark.parametrize(("chapter", "key", "qid"), [(5, "workers", "ch05.q1"), (5, "workers", "ch05.q2"),
                                                      (4, "c_duration", "ch04.q2")])
def test_two_students_two_expected_values(chapter, key, qid):
    one, two = _ids_with_different(chapter, key)

    def expected(sid):
        v = variants.params(chapter, sid)
        if qid == "ch05.q1":
            table = steps.workers(simulate(variants.gang_pair(1, v["workers"])), 60)
            return int(table[~table.can_train].gpus_held.sum())
        if qid == "ch05.q2":
            return v["workers"]
        b_start = simulate(variants.four_jobs(c_duration=v["c_duration"])).jobs.set_index("name").start["b"]

        def fits(d):
            start = simulate(variants.four_jobs(d_duration=d, c_duration=v["c_duration"])).jobs.set_index("name").start
            return start["c"] < start["b"] and start["b"] <= b_start
        return max(d for d in range(1, 100) if fits(d))

    a, b = expected(one), expected(two)
    assert a != b
    assert judge(qid, a, one).passed and judge(qid, b, two).passed
    assert not judge(qid, a, two).passed and not judge(qid, b, one).passed
