"""The grader's records: grades.csv, gradebook.csv, junit.xml, and a feedback page per student and chapter.

The output folder is written by the grader alone (no sandbox sees it), never through a symlink, and
an earlier run's records are not replaced without ``--force``.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from ..course import variants
from ..errors import LabkitError
from .keys import CHECKS

COLUMNS = ["student", "chapter", "check", "verdict", "points", "reason"]
OUTPUTS = ("grades.csv", "gradebook.csv", "junit.xml", "feedback")
VERDICT_ZH = {"passed": "通过", "failed": "未通过", "missing": "未提交"}
_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*[A-Za-z]")


def claim(out: Path, force: bool) -> None:
    """Make `out` ours: not a symlink; an earlier run's records only replaced with `force` (then removed first)."""
    if out.is_symlink():
        raise LabkitError(f"-o {out}: a symlink; give a real folder")
    if out.exists() and not out.is_dir():
        raise LabkitError(f"-o {out}: not a folder")
    present = [name for name in OUTPUTS if os.path.lexists(out / name)]
    if present and not force:
        raise LabkitError(f"-o {out} already holds {', '.join(present)} from an earlier run: pass --force to "
                          "replace them, or choose a new folder")
    for name in present:
        target = out / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _write(out: Path, relative: str, text: str) -> None:
    """Write out/relative, creating folders, refusing any symlink on the way (O_NOFOLLOW on the file)."""
    path = out
    for part in Path(relative).parts[:-1]:
        path = path / part
        if path.is_symlink():
            raise LabkitError(f"{path}: a symlink inside the output folder; not written through")
        path.mkdir(exist_ok=True)
    fd = os.open(out / relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def row(student: str, chapter: int, qid: str, verdict: str, points: int, reason: str, code: str) -> dict[str, str]:
    """One grades.csv row; the reason is Chinese, with the English code in brackets."""
    return {"student": student, "chapter": f"ch{chapter:02d}", "check": qid, "verdict": verdict,
            "points": str(points), "reason": f"{reason} [{code}]" if reason else ""}


def junit_outcomes(path: Path) -> dict[int, tuple[bool, str]]:
    """nbval's verdict per code cell ("Cell N"): (passed, message without ANSI codes)."""
    if not path.exists():
        return {}
    result = {}
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("Cell "):
            continue
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        message = "" if bad is None else _ANSI.sub("", bad.get("message", "") or bad.text or "")
        result[int(name.split()[1])] = (bad is None and case.find("skipped") is None, message)
    return result


def _csv(rows: list[dict], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _junit(rows: list[dict[str, str]]) -> str:
    suites = ET.Element("testsuites")
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["student"], r["chapter"]), []).append(r)
    for (student, chapter), group in groups.items():
        failed = sum(r["verdict"] != "passed" for r in group)
        suite = ET.SubElement(suites, "testsuite", name=f"{student}/{chapter}", tests=str(len(group)),
                              failures=str(failed), errors="0", skipped="0")
        for r in group:
            case = ET.SubElement(suite, "testcase", classname=f"{student}.{chapter}", name=r["check"])
            if r["verdict"] != "passed":
                ET.SubElement(case, "failure", type=r["verdict"], message=_ANSI.sub("", r["reason"]))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _feedback(student, chapter: int, ref, rows: list[dict[str, str]]) -> str:
    """The student's page: their answer code and the value handed out, verdict, points, reason. No reference output."""
    sub = student.chapters.get(chapter)
    title = ref.nb.metadata.get("labkit", {}).get("title", "")
    earned = sum(int(r["points"]) for r in rows)
    total = sum(CHECKS[r["check"]].points for r in rows)
    items = []
    for r in rows:
        qid = r["check"]
        code = sub.answers_code.get(qid, "") if sub else ""
        entry = sub.entries.get(qid, {}) if sub else {}
        value = json.dumps(entry["value"], ensure_ascii=False) if "value" in entry else "（没有交出答案）"
        items.append(
            f'<tr class="{r["verdict"]}"><td>{html.escape(qid)}</td>'
            f"<td><pre>{html.escape(code) or '（未提交）'}</pre></td><td><code>{html.escape(value[:2000])}</code></td>"
            f"<td>{VERDICT_ZH[r['verdict']]}</td><td>{r['points']} / {CHECKS[qid].points}</td>"
            f"<td>{html.escape(r['reason'])}</td></tr>")
    source = f"（提交的文件：{html.escape(sub.source)}）" if sub and sub.source else ""
    params = variants.params(chapter, student.name)
    if params:
        source += "　你的练习参数（由学号决定）：" + html.escape(", ".join(f"{k} = {v}" for k, v in params.items()))
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{html.escape(student.name)} · 第 {chapter} 章 评分反馈</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:.4em;vertical-align:top}}tr.passed td:nth-child(4){{color:#17692a}}tr.failed td:nth-child(4),
tr.missing td:nth-child(4){{color:#a11}}pre{{margin:0;white-space:pre-wrap}}</style></head><body>
<h1>第 {chapter} 章 {html.escape(title)}：评分反馈</h1>
<p>学号：{html.escape(student.name)}　得分：{earned} / {total}{source}</p>
<table><tr><th>练习</th><th>你的答案（代码）</th><th>交出的值</th><th>结果</th><th>得分</th><th>说明</th></tr>
{chr(10).join(items)}
</table></body></html>
"""


def write(out: Path, rows: list[dict[str, str]], students, refs, wanted: list[int]) -> None:
    """grades.csv, gradebook.csv (one row per student, a column per check, the total), junit.xml, feedback/."""
    _write(out, "grades.csv", _csv(rows, COLUMNS))
    checks = [qid for c in wanted for qid in refs[c].checks]
    book = []
    for student in students:
        mine = {r["check"]: int(r["points"]) for r in rows if r["student"] == student.name}
        book.append({"student": student.name, **{q: str(mine.get(q, 0)) for q in checks},
                     "total": str(sum(mine.values()))})
    _write(out, "gradebook.csv", _csv(book, ["student", *checks, "total"]))
    _write(out, "junit.xml", _junit(rows))
    for student in students:
        for chapter in wanted:
            mine = [r for r in rows if r["student"] == student.name and r["chapter"] == f"ch{chapter:02d}"]
            _write(out, f"feedback/{student.name}/ch{chapter:02d}.html", _feedback(student, chapter, refs[chapter], mine))
