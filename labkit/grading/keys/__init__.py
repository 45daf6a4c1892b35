"""The answer key: one check function per exercise, computing the expected value with the engine.

Only the grader and the lab's own `check()` (feedback while working) import it; in a sandboxed
graded run this package is hidden from the student's kernel. A check takes the answer as plain
data (see `answers.to_plain`), and the chapter's variant parameters when it declares a second
argument, and returns (passed, reason in Chinese). A type or shape error raises `answers.Unusable`.
"""

from __future__ import annotations

from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12  # noqa: F401  (each registers its checks)
from .base import CHECKS, Check, judge

__all__ = ["CHECKS", "Check", "judge"]
