"""Graded exercises: the lab's `check()`, and `labkit grade` (`grading.grade`), which judges outside the student's code.

A check cell calls ``check("ch02.q1", answer)``. While a student works, it prints one line from the
answer key: ``ch02.q1: 正确``, ``ch02.q1: 未作答`` or ``ch02.q1: 错误（…）``; the expected value is
computed with the engine on the student's variant (`labkit.course.variants`), never typed in.

In a graded run (``LABKIT_GRADING=1``, set by the sandbox) `check()` judges nothing: it hands the
answer out as plain data (an output of MIME type `answers.MIME`) and the grader judges it in its
own process, where nothing the student's cells define, patch or print can reach. The key
(`labkit.grading.keys`) is hidden from a sandboxed kernel.

Answer cells carry the tag ``answer:<qid>``, check cells ``check:<qid>`` (and
``nbval-check-output``: the reference stores the ``正确`` line, so nbval passes a check exactly
when it is right).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..course import variants
from .answers import MIME, NOT_ANSWERED, Unusable, answered, encode

GRADING_ENV = "LABKIT_GRADING"
ANSWER_TAG, CHECK_TAG = "answer:", "check:"


def check(qid: str, answer: Any, **options: Any) -> None:
    """Print the check's one-line verdict (while working), or hand the answer to the grader (graded run).
    `options` (e.g. ``week=WEEK``) say which run the student made; they travel with the answer."""
    if os.environ.get(GRADING_ENV) == "1":
        _submit(qid, answer, options)
        return
    from .keys import judge

    try:
        value = json.loads(encode(answer)) if answered(answer) else answer
        plain = json.loads(encode(options))
    except Unusable as err:
        print(f"{qid}: 错误（{err}）")
        return
    print(judge(qid, value, variants.current(), plain).line())


def _submit(qid: str, answer: Any, options: dict[str, Any]) -> None:
    """Display the answer (and the run's options) as plain data for the grader, and say so."""
    from IPython.display import display

    if not answered(answer):
        bundle, line = {"qid": qid, "unanswered": True}, f"{qid}: {NOT_ANSWERED}"
    else:
        try:
            bundle = {"qid": qid, "value": json.loads(encode(answer)), "options": json.loads(encode(options))}
            line = f"{qid}: 答案已交给评分程序"
        except Unusable as err:
            bundle, line = {"qid": qid, "unsendable": str(err)}, f"{qid}: 错误（{err}）"
    display({MIME: bundle, "text/plain": line}, raw=True)


def tagged(cell, prefix: str) -> str | None:
    """The id in a cell's `answer:`/`check:` tag."""
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith(prefix):
            return tag[len(prefix):]
    return None


def check_cells(nb) -> dict[int, str]:
    """Code-cell number (as nbval counts) -> check id, for the cells tagged `check:<qid>`."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return {i: qid for i, c in enumerate(code) if (qid := tagged(c, CHECK_TAG))}
