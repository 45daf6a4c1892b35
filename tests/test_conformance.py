"""Every verified Volcano golden case reproduces with the reference engine."""

import pytest

from labkit.conformance import DEFAULT_CASES, EXTRA_CASES, format_report, run_case, run_cases
from labkit.conformance.runner import read_cases, skip_reason
from labkit.errors import SpecError

CASES = [(i, case) for path in (DEFAULT_CASES, EXTRA_CASES) for i, case in enumerate(read_cases(path))]


@pytest.mark.parametrize("index, case", CASES, ids=[c["id"] for _, c in CASES])
def test_case(index, case):
    reason = skip_reason(case)
    if reason:
        pytest.skip(reason)
    result = run_case(case, f"cases[{index}]")
    assert result.passed, result.reason


def test_report_ends_with_counts():
    results = run_cases()
    last = format_report(results).splitlines()[-1]
    passed = sum(r.passed for r in results)
    skipped = sum(r.skipped for r in results)
    assert last == f"{passed} passed, {len(results) - passed - skipped} failed, {skipped} skipped"


def test_bad_case_names_the_field(tmp_path):
    bad = tmp_path / "cases.yaml"
    bad.write_text("cases:\n- id: x\n  config: {actions: [allocate], tiers: [[{name: nosuch}]]}\n"
                   "  expect: {bindCount: 0}\n")
    with pytest.raises(SpecError, match=r"cases\[0\].config.tiers\[0\]\[0\].name"):
        run_cases(bad)


def test_missing_field_names_the_path(tmp_path):
    bad = tmp_path / "cases.yaml"
    bad.write_text("cases:\n- id: x\n  config: {actions: [allocate], tiers: []}\n"
                   "  queues: [{name: q}]\n  podgroups: [{name: pg, ns: n, queue: q}]\n"
                   "  expect: {bindCount: 0}\n")
    with pytest.raises(SpecError, match=r"cases\[0\].podgroups\[0\].minMember"):
        run_cases(bad)
