"""`labkit grade`: submissions as they come -> sandboxed runs -> answers as data -> verdicts under nbval -> records.

1. Each student folder (its name is the student id, and picks the variant) is read without following
   symlinks; notebooks are matched to chapters by their metadata or by the chapter number in their
   name, with a warning when renamed or doubled (the newer wins). A bad folder name or file is one
   line on stderr, and that student's other chapters are still graded.
2. Every submission is copied (its answer cells merged into the reference notebook; its other
   plain files beside it) into a private work folder before any student code runs.
3. Each merged notebook runs in the sandbox (`sandbox.run`); each check cell hands its answer out as
   plain data. What did not come out gets its reason: not answered, the cell's error, the kernel's
   crash, a timeout.
4. The grader's notebook (`judge`) runs under nbval in the grader's kernel: one cell per student and
   check, the reference's ``正确`` line stored. nbval's verdict per cell is the check's verdict.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..course.notebooks import chapters as chapter_sources
from ..course.notebooks import strip_solutions
from ..engine.core import FOREGROUND
from ..errors import LabkitError
from . import ANSWER_TAG, CHECK_TAG, report, sandbox, tagged
from .answers import MAX_ANSWER_BYTES, MIME

STUDENT_NAME = re.compile(r"[^\W_][\w.@-]{0,63}")
"""A student folder's name: the student id (letters, digits, . _ @ -; Chinese names too), never .., -x or a path."""
CHAPTER_IN_NAME = re.compile(r"ch(?:apter)?[ _-]?0*(\d{1,2})(?!\d)", re.IGNORECASE)
MAX_FILE_BYTES, MAX_FOLDER_BYTES = 20 * 1024 * 1024, 100 * 1024 * 1024
NBVAL_CELL_TIMEOUT = 900


@dataclass
class Reference:
    chapter: int
    path: Path
    nb: nbformat.NotebookNode
    checks: list[str]

    @property
    def label(self) -> str:
        return f"ch{self.chapter:02d}"


@dataclass
class Submission:
    """One student's chapter: the merged notebook to run, or why there is none."""

    reference: Reference
    source: str = ""
    merged: nbformat.NotebookNode | None = None
    answers_code: dict[str, str] = field(default_factory=dict)
    problem: tuple[str, str] | None = None  # (reason, code) when the notebook could not be used
    entries: dict[str, dict] = field(default_factory=dict)


@dataclass
class Student:
    name: str
    index: int
    chapters: dict[int, Submission] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


def _warn(message: str) -> None:
    print(f"labkit grade: {message}", file=sys.stderr)


def references(solutions: Path) -> dict[int, Reference]:
    """The chapters with graded checks, from solutions/chNN_*.ipynb."""
    found = {}
    for path in chapter_sources(solutions):
        nb = nbformat.read(path, as_version=4)
        checks = [qid for c in nb.cells if (qid := tagged(c, CHECK_TAG))]
        if checks:
            found[int(path.name[2:4])] = Reference(int(path.name[2:4]), path, nb, checks)
    return found


def _read_regular(path: Path, limit: int) -> bytes:
    """A submitted file's bytes: never through a symlink, never a device or fifo, at most `limit`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not (info.st_mode & 0o170000) == 0o100000:
            raise OSError("not a regular file")
        if info.st_size > limit:
            raise OSError(f"larger than {limit // 1024**2} MB")
        return f.read(limit)


def _notebook(data: bytes) -> tuple[nbformat.NotebookNode | None, str | None]:
    """A submitted file as a notebook (sources joined into strings), or why it is not one."""
    try:
        raw = json.loads(data)
    except ValueError as err:
        return None, f"not JSON ({err})"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list) or raw.get("nbformat") != 4:
        return None, "not a notebook (no nbformat 4 cells)"
    try:
        return nbformat.reads(json.dumps(raw), as_version=4), None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        return None, f"not a notebook ({type(err).__name__})"


def _chapter_of(nb: dict | None, name: str) -> int | None:
    meta = (nb or {}).get("metadata", {}).get("labkit", {}) if isinstance(nb, dict) else {}
    if isinstance(meta, dict) and isinstance(meta.get("chapter"), int):
        return meta["chapter"]
    m = CHAPTER_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def merge(reference: nbformat.NotebookNode, submission: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The reference without outputs, each `answer:<qid>` cell's source taken from the submission; an answer
    cell the submission lacks gets the lab's placeholder (never the reference's solution)."""
    answers = {qid: cell.source for cell in submission.cells if (qid := tagged(cell, ANSWER_TAG))}
    merged = nbformat.from_dict(reference)
    for cell in merged.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        qid = tagged(cell, ANSWER_TAG)
        if qid is not None:
            cell.source = answers.get(qid, strip_solutions(cell.source))
    return merged


def collect(folder: Path, index: int, refs: dict[int, Reference]) -> Student:
    """A student's notebooks by chapter and plain files, read once (the copy taken before anything runs)."""
    student = Student(folder.name, index)
    candidates: dict[int, list[tuple[float, str, dict | None, str | None]]] = {}
    total = 0
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            _warn(f"{student.name}: {entry.name}: a symlink, not read")
            continue
        if not entry.is_file():
            continue
        try:
            data = _read_regular(entry, MAX_FILE_BYTES)
        except OSError as err:
            _warn(f"{student.name}: {entry.name}: not read ({err})")
            continue
        if not entry.name.lower().endswith(".ipynb"):
            if entry.name == "tmp" or entry.name.endswith(".run"):
                _warn(f"{student.name}: {entry.name}: a name the grader's run uses, not copied")
                continue
            total += len(data)
            if total <= MAX_FOLDER_BYTES:
                student.files[entry.name] = data
            continue
        nb, problem = _notebook(data)
        chapter = _chapter_of(nb, entry.name)
        if chapter is None or chapter not in refs:
            _warn(f"{student.name}: {entry.name}: " + (problem or "no chapter with graded checks matches it"))
            continue
        if problem:
            _warn(f"{student.name}: {entry.name}: {problem}")
        candidates.setdefault(chapter, []).append((entry.lstat().st_mtime, entry.name, nb, problem))
    for chapter, found in sorted(candidates.items()):
        ref = refs[chapter]
        found.sort(key=lambda c: (c[0], c[1]))
        _, name, nb, problem = found[-1]
        if len(found) > 1:
            _warn(f"{student.name}: {len(found)} notebooks for chapter {chapter} "
                  f"({', '.join(c[1] for c in found)}): grading the newer, {name}")
        elif name != ref.path.name:
            _warn(f"{student.name}: {name} graded as chapter {chapter} ({ref.path.name})")
        sub = Submission(ref, source=name)
        if problem:
            sub.problem = (f"提交的 {name} 无法读取为笔记本", "bad-notebook")
        else:
            try:
                submitted = nb
                sub.merged = merge(ref.nb, submitted)
                sub.answers_code = {qid: c.source for c in submitted.cells if (qid := tagged(c, ANSWER_TAG))}
            except (AttributeError, KeyError, TypeError) as err:
                sub.problem = (f"提交的 {name} 无法读取为笔记本（{type(err).__name__}）", "bad-notebook")
        student.chapters[chapter] = sub
    return student


# ------------------------------------------------------------------------------ answers out of a run


STOPS = {
    "kernel-died": "内核在第 {n} 个代码单元退出（崩溃、被杀死或超出内存）",
    "cell-timeout": "第 {n} 个代码单元超过每单元 {cell:g} 秒的时限，被中止",
    "notebook-timeout": "笔记本超过 {notebook:g} 秒的总时限，在第 {n} 个代码单元被中止",
    "sandbox-error": "沙箱里的运行异常结束（{detail}）",
}


def _code_number(nb: nbformat.NotebookNode, index: int) -> int:
    return sum(c.cell_type == "code" for c in nb.cells[: index + 1])


def _errors(cell: dict) -> str | None:
    for out in cell.get("outputs", []) if isinstance(cell, dict) else []:
        if isinstance(out, dict) and out.get("output_type") == "error":
            return f"{str(out.get('ename', ''))[:80]}: {str(out.get('evalue', ''))[:200]}".rstrip(": ")
    return None


def _handed_out(cell: dict, qid: str) -> dict | None:
    for out in cell.get("outputs", []) if isinstance(cell, dict) else []:
        data = out.get("data", {}) if isinstance(out, dict) else {}
        bundle = data.get(MIME) if isinstance(data, dict) else None
        if isinstance(bundle, dict) and bundle.get("qid") == qid:
            return bundle
    return None


def extract(merged: nbformat.NotebookNode, run: sandbox.Run, limits: sandbox.Limits) -> dict[str, dict]:
    """Per check: {"value", "options"}, {"unanswered"} or {"reason", "code"}, from the run's (untrusted) notebook."""
    cells = (run.notebook or {}).get("cells")
    cells = cells if isinstance(cells, list) and len(cells) == len(merged.cells) else None
    finished = run.stopped is None and run.notebook is not None
    answer_at = {qid: i for i, c in enumerate(merged.cells) if (qid := tagged(c, ANSWER_TAG))}
    entries = {}
    for i, cell in enumerate(merged.cells):
        qid = tagged(cell, CHECK_TAG)
        if qid is None:
            continue
        reached = cells is not None and (finished or i < run.cell)
        if not reached:
            stop = run.stopped or "sandbox-error"
            n = _code_number(merged, run.cell) if 0 <= run.cell < len(merged.cells) else 0
            reason = STOPS.get(stop, STOPS["sandbox-error"]).format(n=n, cell=limits.cell, notebook=limits.notebook,
                                                                    detail=run.detail or "没有结果")
            entries[qid] = {"reason": reason, "code": stop}
            continue
        bundle = _handed_out(cells[i], qid)
        answer_error = _errors(cells[answer_at[qid]]) if qid in answer_at else None
        if bundle is not None and "value" in bundle:
            entry = {"value": bundle["value"], "options": bundle.get("options", {})}
            size = len(json.dumps(entry, ensure_ascii=False).encode("utf-8"))
            entries[qid] = (entry if size <= MAX_ANSWER_BYTES else
                            {"reason": f"答案太大（超过 {MAX_ANSWER_BYTES // 1024} KB）", "code": "too-large"})
        elif bundle is not None and bundle.get("unanswered"):
            entries[qid] = {"unanswered": True}
        elif bundle is not None and "unsendable" in bundle:
            entries[qid] = {"reason": str(bundle["unsendable"])[:200], "code": "wrong-type"}
        elif answer_error and answer_error.startswith("MemoryError"):
            entries[qid] = {"reason": f"答案单元超出内存限制（{limits.memory / 1024**3:g} GB）", "code": "memory-limit"}
        elif answer_error:
            entries[qid] = {"reason": f"答案单元出错：{answer_error}", "code": "answer-error"}
        elif (check_error := _errors(cells[i])) is not None:
            entries[qid] = {"reason": f"检查单元出错：{check_error}", "code": "answer-error"}
        else:
            entries[qid] = {"reason": "检查单元没有交出答案（check 被改写或删除？）", "code": "no-answer"}
    return entries


# ------------------------------------------------------------------------------ the grader's nbval run


def grader_notebook(students: list[Student]) -> tuple[nbformat.NotebookNode, list[tuple[int, str, str]]]:
    """Setup cell, then one cell per student and check, each storing the reference's `正确` line."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell('from labkit.grading.judge import load\n\n'
                                              'answers, check = load("answers.json")'))
    order = []
    for student in students:
        for chapter, sub in sorted(student.chapters.items()):
            for qid in sub.reference.checks:
                source = f"check({json.dumps(student.name)}, {json.dumps(qid)}, answers[{json.dumps(student.name)}][{json.dumps(qid)}])"
                cell = nbformat.v4.new_code_cell(source, execution_count=len(nb.cells) + 1)
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{qid}: 正确\n")]
                order.append((len(nb.cells), student.name, qid))
                nb.cells.append(cell)
    return nb, order


def nbval_verdicts(students: list[Student], folder: Path) -> dict[tuple[str, str], dict]:
    """Run the grader's notebook under nbval; per (student, check): passed (nbval's verdict), points, reason, code."""
    nb, order = grader_notebook(students)
    entries = {s.name: {qid: e for sub in s.chapters.values() for qid, e in sub.entries.items()} for s in students}
    (folder / "answers.json").write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    nbformat.write(nb, folder / "grader.ipynb")
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_GRADING", "LABKIT_STUDENT", "PYTEST_ADDOPTS")}
    env[FOREGROUND] = "foreground"  # a first compile in a check cell says nothing that nbval would compare
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", "pytest.ini", "--rootdir", ".", "-p", "no:cacheprovider",
                    "--nbval", "--nbval-current-env", "--nbval-cell-timeout", str(NBVAL_CELL_TIMEOUT),
                    "--junitxml", "junit.xml", "grader.ipynb"], cwd=folder, env=env, capture_output=True, check=False)
    outcome = report.junit_outcomes(folder / "junit.xml")
    records = {}
    if (folder / "verdicts.jsonl").exists():
        for line in (folder / "verdicts.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            records[record["student"], record["qid"]] = record
    results = {}
    for cell, student, qid in order:
        passed, message = outcome.get(cell, (False, "nbval 没有运行这个单元"))
        record = records.get((student, qid))
        if passed and record and record["passed"]:
            results[student, qid] = {"verdict": "passed", "points": record["points"], "reason": "", "code": "ok"}
        elif record and not record["passed"]:
            results[student, qid] = {"verdict": "failed", "points": 0, "reason": record["reason"],
                                     "code": record["code"]}
        else:
            results[student, qid] = {"verdict": "failed", "points": 0, "reason": f"评分程序出错：{message[:200]}",
                                     "code": "grader-error"}
    return results


# ------------------------------------------------------------------------------ the command


def _uid(student: Student, sandboxed: bool) -> int | None:
    return sandbox.UID_BASE + student.index if sandboxed and os.geteuid() == 0 else None


def _run_student(student: Student, tmp: Path, limits: sandbox.Limits, sandboxed: bool) -> None:
    work = tmp / "work" / str(student.index)
    for chapter, sub in sorted(student.chapters.items()):
        if sub.merged is None:
            sub.entries = {qid: {"reason": sub.problem[0], "code": sub.problem[1]} for qid in sub.reference.checks}
            continue
        run = sandbox.run(work, f"ch{chapter:02d}.ipynb", student.name, limits, _uid(student, sandboxed), sandboxed)
        sub.entries = extract(sub.merged, run, limits)
        if run.notebook is not None:
            ran, _ = _notebook(json.dumps(run.notebook).encode())
            sub.merged = ran or sub.merged


def grade(submissions: Path, solutions: Path, out: Path, limits: sandbox.Limits | None = None, sandboxed: bool = True,
          force: bool = False, jobs: int = 1, only: list[int] | None = None) -> list[dict[str, str]]:
    """Grade SUBMISSIONS/<student>/*.ipynb against SOLUTIONS; write OUT's records; return the grades.csv rows."""
    limits = limits or sandbox.Limits()
    if sandboxed:
        sandbox.require()
    refs = references(solutions)
    if not refs:
        raise LabkitError(f"{solutions}: no chNN_*.ipynb with graded checks")
    report.claim(out, force)
    students = []
    for entry in sorted(submissions.iterdir(), key=lambda p: p.name):
        if not STUDENT_NAME.fullmatch(entry.name) or entry.is_symlink():
            _warn(f"{entry.name!r}: not graded: a student folder is a plain folder named with letters, "
                  "digits and . _ @ - (the name is the student id)")
            continue
        if entry.is_dir():
            students.append(collect(entry, len(students), refs))
    wanted = sorted(set(only) if only else {c for s in students for c in s.chapters})
    unknown = [c for c in wanted if c not in refs]
    if unknown:
        raise LabkitError(f"--chapter {unknown[0]}: no solutions/ch{unknown[0]:02d}_*.ipynb with graded checks")
    if not students or not wanted:
        raise LabkitError(f"{submissions}: no student folder with a notebook of a graded chapter")
    for student in students:
        student.chapters = {c: s for c, s in student.chapters.items() if c in wanted}
    tmp = Path(tempfile.mkdtemp(prefix="labkit-grade-"))
    try:
        for student in students:  # every submission copied before any student code runs
            work = tmp / "work" / str(student.index)
            work.mkdir(parents=True)
            for name, data in student.files.items():
                (work / name).write_bytes(data)
            for chapter, sub in student.chapters.items():
                if sub.merged is not None:
                    nbformat.write(sub.merged, work / f"ch{chapter:02d}.ipynb")
            sandbox.prepare(work, _uid(student, sandboxed))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(lambda s: _run_student(s, tmp, limits, sandboxed), students))
        (tmp / "grader").mkdir()
        results = nbval_verdicts(students, tmp / "grader")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for student in students:
        for chapter in wanted:
            sub = student.chapters.get(chapter)
            for qid in refs[chapter].checks:
                if sub is None:
                    rows.append(report.row(student.name, chapter, qid, "missing", 0, "没有提交这一章的笔记本", "missing"))
                else:
                    r = results[student.name, qid]
                    rows.append(report.row(student.name, chapter, qid, r["verdict"], r["points"], r["reason"], r["code"]))
    report.write(out, rows, students, refs, wanted)
    return rows
