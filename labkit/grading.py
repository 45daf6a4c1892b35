"""Graded checks for the chapter notebooks, and `labkit grade`: merge, run with nbval, report.

A check cell calls ``check("ch02.q1", answer)`` and prints one ASCII line: ``ch02.q1: ok``,
``ch02.q1: not answered`` or ``ch02.q1: wrong (...)``. The expected value is computed with the
engine on the chapter's seeded scenario, never typed in. The reference notebook stores the ``ok``
line in a cell tagged ``nbval-check-output``, so nbval passes a check exactly when it prints ``ok``.

Answer cells carry the tag ``answer:<qid>``; `merge` copies their sources from a student's
notebook into the reference, and `grade` runs the merged notebooks with ``pytest --nbval-lax``.
"""

from __future__ import annotations

import csv
import functools
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

from . import metrics
from .course import admission, cases, steps
from .course.notebooks import strip_solutions
from .engine.simulate import cycle, simulate

Check = Callable[[Any], tuple[bool, str]]
CHECKS: dict[str, Check] = {}
ANSWER_TAG, CHECK_TAG = "answer:", "check:"


def _check(qid: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[qid] = fn
        return fn
    return register


def answered(value: Any) -> bool:
    """False while the placeholder `...` is (part of) the answer."""
    if value is Ellipsis:
        return False
    if isinstance(value, dict):
        return all(answered(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(answered(v) for v in value)
    return True


def check(qid: str, answer: Any, **options: Any) -> None:
    """Print the check's one-line verdict; `options` (e.g. ``week=WEEK``) say which run the student made."""
    if qid not in CHECKS:
        raise KeyError(f"no check named {qid!r}; known: {', '.join(sorted(CHECKS))}")
    if not answered(answer):
        print(f"{qid}: not answered")
        return
    try:
        ok, why = CHECKS[qid](answer, **options)
    except (TypeError, ValueError, KeyError) as err:
        ok, why = False, f"cannot use this answer: {err}"
    print(f"{qid}: ok" if ok else f"{qid}: wrong ({why})")


# ------------------------------------------------------------------------------ chapter 1


@functools.lru_cache(maxsize=16)
def _case_waits(tenancy: bool, weights: tuple[int, int, int] | None, policy: str | None,
                week: bool = False) -> dict[str, float]:
    """Mean wait per team (jobs not started by the horizon counted to it) of one run of the chapter-1
    slice, or of the week (cached: checks share runs)."""
    result = simulate(cases.case_study(tenancy=tenancy, weights=weights, week=week), policy=policy)
    waited = metrics.waited(result)
    return {team: float(waited[result.jobs.namespace == team].mean()) for team in cases.TEAMS}


@_check("ch01.q1")
def _slowest_team(answer: str, week: bool = False) -> tuple[bool, str]:
    waits = _case_waits(False, None, None, week)
    slowest = max(waits, key=waits.get)
    return answer == slowest, f"{answer} is not the team with the longest mean wait"


@_check("ch01.q2")
def _weights(answer: tuple[int, int, int], week: bool = False) -> tuple[bool, str]:
    weights = tuple(int(w) for w in answer)
    if len(weights) != 3 or min(weights) < 1:
        return False, "give three queue weights (A, B, C), each >= 1"
    policy = "volcano-multitenant"
    tuned = _case_waits(True, weights, policy, week)
    if tuned["team-c"] >= _case_waits(True, None, policy, week)["team-c"]:
        return False, "team C does not wait less than under the weights 5/3/2"
    return tuned["team-b"] < _case_waits(False, None, None, week)["team-b"], "team B waits longer than under naive FIFO"


CONCEPTS = ("多租户", "调度", "资源分配", "优先级与抢占", "公平性")


def symptoms() -> dict[str, str]:
    """Exercise 1.3: symptom -> concept, in the chapter's terms: a namespace's ResourceQuota is the
    tenant's isolation boundary (多租户), a Volcano Queue's capability its share of the cluster (资源分配).
    The numbers are the case study's own (team A's queue capability, team C's GPU quota)."""
    scenario = cases.case_study(week=True)
    capability = int(float(scenario.queues[0].capability["nvidia.com/gpu"]))
    quota = int(float(scenario.tenants[2].resource_quota.hard["requests.nvidia.com/gpu"]))
    return {
        "团队 C 的一个作业出错占满内存，团队 B 的作业也跟着变慢": "多租户",
        f"团队 C 的 namespace 有 ResourceQuota，已用满 {quota} 张卡后，再创建要 GPU 的 Pod 被直接拒绝": "多租户",
        "一个 16 卡作业排队两小时，最后被放到了两台机器上": "调度",
        f"团队 A 的队列 capability 是 {capability} 张卡，A 再多提交的作业只能留在队列里": "资源分配",
        "团队 A 的新作业驱逐了团队 B 正在微调的作业": "优先级与抢占",
        "团队 B 提交得最多，却只拿到了 20% 的 GPU 时间": "公平性",
    }


@_check("ch01.q3")
def _concepts(answer: dict, week: bool = False) -> tuple[bool, str]:
    unknown = [v for v in answer.values() if v not in CONCEPTS]
    if unknown:
        return False, f"not one of the five concepts: {unknown[0]}"
    key = symptoms()
    wrong = sum(answer.get(s) != c for s, c in key.items())
    return wrong == 0, f"{wrong} of {len(key)} symptoms matched to the wrong concept"


# ------------------------------------------------------------------------------ chapter 2


@_check("ch02.q1")
def _free_vs_feasible(answer: tuple[int, int]) -> tuple[bool, str]:
    table = steps.placement(cases.fragmentation_snapshot())
    tp8 = table[table.task.str.startswith("ml/tp8")]
    expected = (int(tp8.free_gpus.sum()), int((tp8["filter"] == "pass").sum()))
    free, feasible = (int(x) for x in answer)
    if free != expected[0]:
        return False, "the free GPU total is off"
    return feasible == expected[1], "the number of nodes that pass the filter is off"


@_check("ch02.q2")
def _placement(answer: list[int]) -> tuple[bool, str]:
    nodes = 4
    placed = [int(n) for n in answer]
    if len(placed) != nodes or not all(0 <= n < nodes for n in placed):
        return False, f"give {nodes} node numbers in 0..{nodes - 1}, one per resident job"
    if max(placed.count(n) for n in placed) > 2:
        return False, "a node holds at most two 4-GPU jobs"
    binds = cycle(cases.fragmentation_snapshot(placed=placed)).binds()
    return "ml/tp8-worker-0" in binds, "tp8 still finds no node in this session"


@_check("ch02.q3")
def _strategy(answer: str) -> tuple[bool, str]:
    jobs = simulate(cases.fragmentation(answer)).jobs
    wait = float(jobs.set_index("name").wait["tp8"])
    return wait < 60, f"tp8 still waits {wait:.0f} s under {answer}"


# ------------------------------------------------------------------------------ chapter 3


def _forbidden(table) -> list[str]:
    return table[table.verdict == "forbidden"].pod.tolist()


@_check("ch03.q1")
def _forbidden_pods(answer: list[str]) -> tuple[bool, str]:
    expected = _forbidden(admission.admit(cases.quota_burst()))
    return sorted(answer) == sorted(expected), f"{len(expected)} pods are refused, not these {len(answer)}"


@_check("ch03.q2")
def _min_gpu_quota(answer: int) -> tuple[bool, str]:
    quota = int(answer)
    if _forbidden(admission.admit(cases.quota_burst(gpu_quota=quota))):
        return False, f"a quota of {quota} still refuses pods"
    return bool(_forbidden(admission.admit(cases.quota_burst(gpu_quota=quota - 1)))), "a smaller quota also admits all"


@_check("ch03.q3")
def _clean_admitted(answer: int) -> tuple[bool, str]:
    table = admission.admit(cases.quota_burst(cpu_quota=36))
    expected = int((table.pod.str.startswith("c-clean") & (table.verdict == "admitted")).sum())
    return int(answer) == expected, "count the LimitRange defaults against the CPU already used"


# ------------------------------------------------------------------------------ chapter 4


def _four_jobs_starts(d_duration: int | None = None) -> dict[str, float]:
    jobs = simulate(cases.four_jobs(d_duration=d_duration)).jobs
    return dict(zip(jobs.name, jobs.start))


def _overtaking(policy: str) -> list[str]:
    """Jobs of the four-job workload submitted after b that start before it."""
    jobs = simulate(cases.four_jobs(policy)).jobs.set_index("name")
    return [n for n in jobs.index if jobs.submit[n] > jobs.submit["b"] and jobs.start[n] < jobs.start["b"]]


@_check("ch04.q1")
def _overtook(answer: list[str]) -> tuple[bool, str]:
    return sorted(answer) == sorted(_overtaking("volcano-shipped")), "compare submit and start times with b's"


@_check("ch04.q3")
def _backfilled(answer: list[str]) -> tuple[bool, str]:
    return sorted(answer) == sorted(_overtaking("slurm-backfill")), "only a job that ends before b's reservation may go"


@_check("ch04.q2")
def _longest_d(answer: int) -> tuple[bool, str]:
    longest = int(answer)
    if longest < 1:
        return False, "a run time is at least 1 s"
    b_start = _four_jobs_starts()["b"]
    if _four_jobs_starts(longest)["b"] > b_start:
        return False, f"with d running {longest} s, b starts later"
    return _four_jobs_starts(longest + 1)["b"] > b_start, "a longer d still leaves b on time"


# ------------------------------------------------------------------------------ chapter 5


def _stalled_gpus(min_available: int | None, at: float = 60.0) -> float:
    """GPUs held at `at` by jobs with a worker missing (data-parallel workers that cannot train)."""
    table = steps.workers(simulate(cases.gang_pair(min_available)), at)
    return float(table[~table.can_train].gpus_held.sum())


@_check("ch05.q1")
def _idle_held(answer: int) -> tuple[bool, str]:
    return int(answer) == _stalled_gpus(1), "count the GPUs of every job whose workers are not all running"


@_check("ch05.q2")
def _min_available(answer: int) -> tuple[bool, str]:
    stalled = _stalled_gpus(int(answer))
    return stalled == 0, f"{stalled:g} GPUs are held by jobs that cannot train"


@_check("ch05.q3")
def _gpus_per_pod(answer: int) -> tuple[bool, str]:
    feasible = [16 // r for r in (2, 4, 8) if cycle(cases.shape_snapshot(r)).binds()]
    if int(answer) not in feasible:
        return False, f"a 16-GPU job of {answer}-GPU pods cannot be placed in this session"
    return int(answer) == max(feasible), "a shape with fewer, larger pods also fits"


# ------------------------------------------------------------------------------ labkit grade


def _tagged(cell, prefix: str) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith(prefix):
            return tag[len(prefix):]
    return None


def merge(reference: nbformat.NotebookNode, submission: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The reference with each `answer:<qid>` cell's source taken from the submission; an answer cell the
    submission lacks gets the lab's placeholder (never the reference's solution). Only answer cells are taken."""
    answers = {qid: cell.source for cell in submission.cells if (qid := _tagged(cell, ANSWER_TAG))}
    merged = nbformat.from_dict(reference)
    for cell in merged.cells:
        qid = _tagged(cell, ANSWER_TAG)
        if qid is not None:
            cell.source = answers.get(qid, strip_solutions(cell.source))
    return merged


def check_cells(nb: nbformat.NotebookNode) -> dict[int, str]:
    """Code-cell number (as nbval counts) -> check id, for the cells tagged `check:<qid>`."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return {i: qid for i, c in enumerate(code) if (qid := _tagged(c, CHECK_TAG))}


def grade(submissions: Path, solutions: Path, out: Path) -> list[dict[str, str]]:
    """Grade `submissions/<student>/chNN_slug.ipynb` against `solutions/`; write out/grades.csv and
    out/junit.xml; return the rows (student, chapter, check, result)."""
    work = out / "work"
    merged: dict[Path, tuple[str, str, dict[int, str]]] = {}
    for path in sorted(submissions.glob("*/ch[0-9][0-9]_*.ipynb")):
        reference = solutions / path.name
        if not reference.exists():
            continue
        nb = merge(nbformat.read(reference, as_version=4), nbformat.read(path, as_version=4))
        target = work / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        merged[target] = (path.parent.name, path.stem, check_cells(nb))
    if not merged:
        raise ValueError(f"no submissions/<student>/chNN_*.ipynb with a reference in {solutions}")
    (out / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    suites = ET.Element("testsuites")
    rows = []
    for target, (student, chapter, checks) in merged.items():
        junit = target.with_suffix(".xml")
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", str(out / "pytest.ini"), "--rootdir", str(out),
                        "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout", "600",
                        "--junitxml", str(junit),
                        str(target)], capture_output=True, text=True, check=False)
        outcome = _outcomes(junit) if junit.exists() else {}
        for suite in ET.parse(junit).getroot().iter("testsuite") if junit.exists() else []:
            suite.set("name", f"{student}/{chapter}")
            suites.append(suite)
        rows += [{"student": student, "chapter": chapter, "check": qid, "result": outcome.get(num, "error")}
                 for num, qid in checks.items()]
    ET.ElementTree(suites).write(out / "junit.xml", encoding="utf-8", xml_declaration=True)
    with (out / "grades.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "chapter", "check", "result"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _outcomes(junit: Path) -> dict[int, str]:
    """Code-cell number -> passed / failed / skipped, from one notebook's junit XML."""
    result = {}
    for case in ET.parse(junit).iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("Cell "):
            continue
        status = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        result[int(name.split()[1])] = status
    return result
