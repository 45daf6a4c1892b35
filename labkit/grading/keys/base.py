"""The check registry and the judge (the chapters' checks are in chNN.py)."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...course import variants
from ...errors import LabkitError, LabkitWarning
from ..answers import Unusable, Verdict, answered


@dataclass(frozen=True)
class Check:
    qid: str
    points: int
    fn: Callable[..., tuple[bool, str]]

    @property
    def chapter(self) -> int:
        return int(self.qid[2:4])


CHECKS: dict[str, Check] = {}


def register(qid: str, points: int = 1) -> Callable:
    """Declare `fn` as the check of exercise `qid`, worth `points`."""
    def add(fn: Callable[..., tuple[bool, str]]) -> Callable[..., tuple[bool, str]]:
        CHECKS[qid] = Check(qid, points, fn)
        return fn
    return add


def judge(qid: str, value: Any, student: str = "", options: dict[str, Any] | None = None) -> Verdict:
    """The verdict on plain answer `value` for `student`'s variant of the chapter. `options` say which
    run the student made (e.g. ``{"week": True}``: ch. 1 on the whole week), as plain data beside the
    answer; a check takes the variant as its parameter `v`, the options as keywords."""
    if qid not in CHECKS:
        raise KeyError(f"no check named {qid!r}; known: {', '.join(sorted(CHECKS))}")
    check = CHECKS[qid]
    if not answered(value):
        return Verdict(qid, False, "未作答", "not-answered")
    args = [value]
    parameters = inspect.signature(check.fn).parameters
    if "v" in parameters:
        args.append(variants.params(check.chapter, student))
    options = options or {}
    unknown = sorted(set(options) - set(parameters) - {"v"})
    if unknown or not all(isinstance(o, bool | int | float | str) for o in options.values()):
        return Verdict(qid, False, f"这道题不认识选项 {', '.join(unknown) or options}", "wrong-type")
    try:
        with warnings.catch_warnings():  # a verdict is the check cell's only output (the grader compares it)
            warnings.simplefilter("ignore", LabkitWarning)
            ok, why = check.fn(*args, **options)
    except Unusable as err:
        return Verdict(qid, False, str(err), "wrong-type")
    except (TypeError, ValueError, KeyError, IndexError, LabkitError) as err:
        return Verdict(qid, False, f"无法使用这个答案：{err}", "wrong-type")
    return Verdict(qid, True) if ok else Verdict(qid, False, why, "wrong")

