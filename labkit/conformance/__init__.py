"""Conformance of the engines with Volcano: golden cases transcribed from Volcano's unit tests
(``volcano-cases.yaml``, the oracle, and ``volcano-extra-cases.yaml``), a loader for their
neutral format and a runner that reports which cases the reference engine reproduces."""

from labkit.conformance.cases import load_case
from labkit.conformance.runner import (
    DEFAULT_CASES,
    EXTRA_CASES,
    CaseResult,
    format_report,
    run_case,
    run_cases,
)

__all__ = ["DEFAULT_CASES", "EXTRA_CASES", "CaseResult", "format_report", "load_case", "run_case", "run_cases"]
