"""The grader's notebook side: verdicts on the answers a sandboxed run handed out.

The grader writes a notebook whose first cell is ``answers, check = load("answers.json")`` and one
cell per student and exercise, ``check("alice", "ch04.q1", answers["alice"]["ch04.q1"])``, with the
reference's ``正确`` line as its stored output; nbval runs it in the grader's own kernel, so its
verdict per cell is the check's verdict. Each call also appends its verdict, points and reason to
``verdicts.jsonl``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .answers import Verdict
from .keys import CHECKS, judge

RECORDS = "verdicts.jsonl"


def verdict(qid: str, entry: dict[str, Any], student: str) -> Verdict:
    """Judge one extracted entry: {"value": ..., "options": {...}}, {"unanswered": true} or {"reason", "code"}
    (no value came out)."""
    if "value" in entry:
        options = entry.get("options", {})
        if not isinstance(options, dict):
            return Verdict(qid, False, "选项应为字典", "wrong-type")
        return judge(qid, entry["value"], student, options)
    if entry.get("unanswered"):
        return Verdict(qid, False, "未作答", "not-answered")
    return Verdict(qid, False, str(entry.get("reason", "没有交出答案")), str(entry.get("code", "no-answer")))


def load(path: str | Path) -> tuple[dict[str, dict[str, dict]], Callable[[str, str, dict], None]]:
    """The answers file (student -> check -> entry) and the `check` the grader's notebook calls."""
    answers, records = json.loads(Path(path).read_text(encoding="utf-8")), Path(path).with_name(RECORDS)

    def check(student: str, qid: str, entry: dict) -> None:
        result = verdict(qid, entry, student)
        record = {"student": student, "qid": qid, "passed": result.passed, "points": CHECKS[qid].points if result.passed else 0,
                  "max": CHECKS[qid].points, "reason": result.reason, "code": result.code}
        with records.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(result.line())

    return answers, check
