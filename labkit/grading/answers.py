"""What an answer is once it leaves a notebook: plain data, checked for type and shape, judged into a verdict.

Both sides use this module: the lab's `check()` (the student's feedback while working) and the grader.
An answer is turned into plain JSON data (numbers, strings, lists, dicts; numpy and pandas values
become the same) under a size limit, so the grader never runs or unpickles anything a student made.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

MIME = "application/vnd.labkit.answer+json"
"""The output a graded run's check cell displays: {"qid", "value"} or {"qid", "unanswered"} or {"qid", "unsendable"}."""
MAX_ANSWER_BYTES = 64 * 1024
_MAX_DEPTH = 8

OK, NOT_ANSWERED = "正确", "未作答"


class Unusable(ValueError):
    """An answer of the wrong type or shape; the message (Chinese) says what was expected."""


def answered(value: Any) -> bool:
    """False while the placeholder `...` is (part of) the answer."""
    if value is Ellipsis:
        return False
    if isinstance(value, dict):
        return all(answered(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(answered(v) for v in value)
    return True


def to_plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON data: bool/int/float/str/None, lists (from list, tuple, set, numpy arrays, pandas
    Series/Index), dicts with string keys. Raises `Unusable` for anything else (a function, a DataFrame...)."""
    if depth > _MAX_DEPTH:
        raise Unusable("答案嵌套太深")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    kind = type(value).__name__
    if hasattr(value, "dtype") and getattr(value, "ndim", None) == 0:  # a numpy scalar
        return to_plain(value.item(), depth)
    if kind in ("ndarray", "Series", "Index") and hasattr(value, "tolist"):
        return [to_plain(v, depth + 1) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((to_plain(v, depth + 1) for v in value), key=repr)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Unusable("字典的键应为字符串")
        return {k: to_plain(v, depth + 1) for k, v in value.items()}
    raise Unusable(f"答案应为数、字符串、列表或字典，而不是 {kind}")


def encode(value: Any) -> str:
    """The plain answer as JSON text, refused beyond `MAX_ANSWER_BYTES`."""
    text = json.dumps(to_plain(value), ensure_ascii=False, allow_nan=True)
    if len(text.encode("utf-8")) > MAX_ANSWER_BYTES:
        raise Unusable(f"答案太大（超过 {MAX_ANSWER_BYTES // 1024} KB）")
    return text


# ------------------------------------------------ type and shape; integers compared exactly, never truncated


def integer(value: Any, what: str = "一个整数") -> int:
    """An integer answer: an int, or a float with no fractional part (24.0). 24.9 is refused, never truncated."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Unusable(f"应为{what}")
    if value != int(value):
        raise Unusable(f"应为{what}，而不是 {value:g}")
    return int(value)


@dataclass(frozen=True)
class Decimal:
    """A decimal answer (a wait in minutes, a share) judged within ± `tolerance`, the margin the exercise
    states (`stated`, e.g. "±0.1 分钟"): a value read off a table rounded to one decimal passes, and a
    nearby wrong number fails, where truncating to an integer would blur both."""

    tolerance: float
    unit: str = ""
    what: str = "一个数"

    @property
    def stated(self) -> str:
        """The tolerance as the exercise text and the verdict give it: "±0.1 分钟"."""
        return f"±{self.tolerance:g}" + (f" {self.unit}" if self.unit else "")

    def read(self, value: Any) -> float:
        """The answer as a float: an int or a finite float; a bool, a string or None is refused."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise Unusable(f"应为{self.what}（允许误差 {self.stated}）")
        return float(value)

    def judge(self, value: Any, expected: float) -> tuple[bool, str]:
        """(passed, reason): passed when |value − expected| <= tolerance (up to float rounding)."""
        got = self.read(value)
        ok = abs(got - expected) <= self.tolerance * (1 + 1e-9)
        return ok, f"{got:g} 与标准答案相差超过允许误差 {self.stated}"


def names(value: Any, what: str = "作业名列表") -> list[str]:
    """A list of names (a list, tuple or set of strings)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Unusable(f"应为{what}（字符串列表）")
    return value


def integers(value: Any, length: int, what: str) -> list[int]:
    """A list of `length` integers."""
    if not isinstance(value, list) or len(value) != length:
        raise Unusable(f"应为{what}（{length} 个整数的列表或元组）")
    return [integer(v, what) for v in value]


def text(value: Any, options: tuple[str, ...] | None = None, what: str = "一个字符串") -> str:
    """A string answer, one of `options` when given."""
    if not isinstance(value, str):
        raise Unusable(f"应为{what}")
    if options is not None and value not in options:
        raise Unusable(f"应为 {', '.join(options)} 之一，而不是 {value!r}")
    return value


@dataclass(frozen=True)
class Verdict:
    """One check's verdict: passed, the reason (Chinese) and an English code for scripts."""

    qid: str
    passed: bool
    reason: str = ""
    code: str = "ok"

    def line(self) -> str:
        """The one line a check prints: `ch04.q1: 正确`, `ch04.q1: 未作答` or `ch04.q1: 错误（…）`."""
        if self.passed:
            return f"{self.qid}: {OK}"
        if self.code == "not-answered":
            return f"{self.qid}: {NOT_ANSWERED}"
        return f"{self.qid}: 错误（{self.reason}）"
