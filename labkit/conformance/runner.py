"""Run the Volcano golden cases through the reference engine and compare with ``expect``.

Comparison follows Volcano's unit-test harness (uthelper CheckAll): binds and evictions are
checked exactly, so a case that expects none fails on any; ``pipelined`` requires each listed
PodGroup to have pipelined tasks, all on the listed nodes; ``pgPhase`` checks PodGroup phases
after the session; ``order`` checks the order in which the session examined pending tasks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import yaml

from labkit.conformance import kueue
from labkit.conformance.cases import load_case
from labkit.conformance.outcome import CaseResult, skip_reason
from labkit.engine.problem import Decisions, PodGroupPhase, Problem
from labkit.engine.volcano.reference import run_session
from labkit.errors import SpecError

DEFAULT_CASES = Path(__file__).with_name("volcano-cases.yaml")
"""The oracle: cases transcribed from Volcano's unit tests (kept verbatim)."""

EXTRA_CASES = Path(__file__).with_name("volcano-extra-cases.yaml")
"""More cases from the same unit tests, transcribed by the engine team."""

KNOWN_EXPECT = {"bound", "bindCount", "bindsInHyperNode", "evicted", "evictCount", "pipelined", "pgPhase", "order"}


def read_case_file(path: str | Path) -> Mapping:
    """A case file as YAML data (SpecError when it is not YAML or has no list of cases)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise SpecError(str(path), f"not valid YAML: {e}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list):
        raise SpecError(f"{path}: cases", "missing list of cases")
    return data


def read_cases(path: str | Path = DEFAULT_CASES) -> list[Mapping]:
    """The ``cases`` list of a case file."""
    return read_case_file(path)["cases"]


def run_case(case: Mapping, where: str) -> CaseResult:
    case_id = str(case.get("id") or where)
    reason = skip_reason(case)
    if reason:
        return CaseResult(case_id, passed=False, skipped=True, reason=reason)
    expect = case.get("expect")
    if not isinstance(expect, Mapping):
        raise SpecError(f"{where}.expect", "missing mapping of expectations")
    unknown = set(expect) - KNOWN_EXPECT
    if unknown:
        raise SpecError(f"{where}.expect.{min(unknown)}", "unknown expectation")
    problem, state = load_case(case, where)
    diffs = compare(problem, run_session(problem, state), expect)
    return CaseResult(case_id, passed=not diffs, reason="; ".join(diffs))


def compare(problem: Problem, d: Decisions, expect: Mapping) -> list[str]:
    """Differences between the decisions of a session and a case's ``expect``."""
    diffs = []
    bound = {problem.task_names[b.task]: problem.node_names[b.node] for b in d.binds}
    want_bound = dict(expect.get("bound") or {})
    if bound != want_bound and ("bound" in expect or "bindCount" not in expect):
        diffs.append(f"bound {bound} != expected {want_bound}")
    if "bindCount" in expect and len(d.binds) != expect["bindCount"]:
        diffs.append(f"bindCount {len(d.binds)} != expected {expect['bindCount']}")
    if "bindsInHyperNode" in expect:
        # CheckBindInHyperNode: binds per HyperNode of the lowest tier (FindHyperNodeForNode)
        lowest = problem.node_hypernode[:, int(problem.hypernode_tier.min()) - 1]
        got_per = sorted(Counter(int(lowest[b.node]) for b in d.binds).values())
        if got_per != sorted(expect["bindsInHyperNode"]):
            diffs.append(f"binds per HyperNode {got_per} != expected {sorted(expect['bindsInHyperNode'])}")
    evicted = Counter(problem.task_names[e.task] for e in d.evictions)
    want_evicted = Counter(expect.get("evicted") or [])
    if evicted != want_evicted:
        diffs.append(f"evicted {sorted(evicted.elements())} != expected {sorted(want_evicted.elements())}")
    if "evictCount" in expect and len(d.evictions) != expect["evictCount"]:
        diffs.append(f"evictCount {len(d.evictions)} != expected {expect['evictCount']}")
    for job, nodes in (expect.get("pipelined") or {}).items():
        got = [problem.node_names[p.node] if p.node >= 0 else "" for p in d.pipelined
               if problem.job_names[problem.task_job[p.task]] == job]
        if not got or any(n not in nodes for n in got):
            diffs.append(f"pipelined {job} on {got} != expected on {list(nodes)}")
    for job, phase in (expect.get("pgPhase") or {}).items():
        if job not in problem.job_names:
            diffs.append(f"pgPhase: no podgroup {job}")
            continue
        got = PodGroupPhase(int(d.state.job_phase[problem.job_names.index(job)]))
        if _phase_name(got) != phase:
            diffs.append(f"pgPhase {job} {_phase_name(got)} != expected {phase}")
    if "order" in expect:
        got = [_short(problem.task_names[t], expect["order"]) for _, t in d.attempts]
        if got != list(expect["order"]):
            diffs.append(f"order {got} != expected {list(expect['order'])}")
    return diffs


def _phase_name(phase: PodGroupPhase) -> str:
    return "" if phase == PodGroupPhase.UNSET else phase.name.capitalize()


def _short(name: str, expected: list) -> str:
    """Compare by pod name alone when the case lists names without namespace."""
    return name if any("/" in str(e) for e in expected) else name.split("/", 1)[1]


def run_cases(path: str | Path = DEFAULT_CASES) -> list[CaseResult]:
    """Run every case of a case file with the reference engine (Kueue's format goes to its runner)."""
    data = read_case_file(path)
    if kueue.is_kueue_file(data):
        return kueue.run_cases(data)
    return [run_case(case, f"cases[{i}]") for i, case in enumerate(data["cases"])]


def format_report(results: list[CaseResult]) -> str:
    """One line per case, then ``N passed, M failed`` (``, K skipped`` when K > 0)."""
    lines = []
    for r in results:
        status = "SKIP" if r.skipped else ("PASS" if r.passed else "FAIL")
        lines.append(f"{status} {r.id}" + (f": {r.reason}" if r.reason else ""))
    passed = sum(r.passed for r in results)
    skipped = sum(r.skipped for r in results)
    failed = len(results) - passed - skipped
    summary = f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "")
    return "\n".join(lines + [summary])
