"""`solutions/` -> `labs/`: answers replaced by placeholders, outputs cleared, and the staleness check."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import nbformat

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
PLACEHOLDER = "...  # 在此作答"
_ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_]\w*)\s*=(?!=)")
GENERATED = ".labkit-generated.json"
"""In labs/: each lab's SHA-256 as `build` last wrote it, so that a lab edited since is not overwritten."""


def strip_solutions(source: str) -> str:
    """Each BEGIN/END SOLUTION region becomes its top-level assignments with `...` as the value
    (`name = ...  # 在此作答`), or one `...` line when it assigns nothing."""
    out: list[str] = []
    region: list[str] | None = None
    indent = ""
    for line in source.splitlines():
        marker = line.strip()
        if marker == BEGIN:
            region, indent = [], line[: len(line) - len(line.lstrip())]
            continue
        if marker == END and region is not None:
            names = []
            for body in region:
                m = _ASSIGNMENT.match(body)
                if m and m.group(1) == indent and m.group(2) not in names:
                    names.append(m.group(2))
            out += [f"{indent}{name} = {PLACEHOLDER}" for name in names] or [f"{indent}{PLACEHOLDER}"]
            region = None
            continue
        (out if region is None else region).append(line)
    if region is not None:
        raise ValueError(f"{BEGIN} without {END}")
    return "\n".join(out)


def student_version(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The lab: solutions stripped; outputs, execution counts and timings, saved widget state cleared; cell ids kept."""
    lab = nbformat.from_dict(nb)
    lab.metadata.pop("widgets", None)
    for cell in lab.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            cell.outputs, cell.execution_count = [], None
    return lab


def _lab_text(solution: Path) -> str:
    return nbformat.writes(student_version(nbformat.read(solution, as_version=4))) + "\n"


def chapters(solutions: Path) -> list[Path]:
    """The chapter sources, solutions/chNN_slug.ipynb, in chapter order."""
    return sorted(solutions.glob("ch[0-9][0-9]_*.ipynb"))


def build(solutions: Path, labs: Path, force: bool = False) -> list[Path]:
    """Write labs/chNN_slug.ipynb for every chapter whose lab differs; return the files written.

    A lab that differs from what `build` last wrote (a student's or an author's edits, or a lab
    `build` never recorded) is not overwritten: ValueError naming them, before anything is written,
    unless `force`."""
    labs.mkdir(parents=True, exist_ok=True)
    record_path = labs / GENERATED
    try:
        record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.exists() else {}
    except (OSError, ValueError):
        record = {}
    plan, edited = [], []
    for solution in chapters(solutions):
        target, text = labs / solution.name, _lab_text(solution)
        old = target.read_text(encoding="utf-8") if target.exists() else None
        if old != text:
            plan.append((target, text))
            if old is not None and record.get(target.name) != _digest(old):
                edited.append(target.name)
        record[target.name] = _digest(text)
    if edited and not force:
        raise ValueError(f"{', '.join(edited)} in {labs}: changed since labkit course build wrote them; "
                         "not overwritten (move your edits aside, or --force replaces them)")
    for target, text in plan:
        target.write_text(text, encoding="utf-8")
    record_path.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n", encoding="utf-8")
    return [target for target, _ in plan]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stale(solutions: Path, labs: Path) -> list[str]:
    """One line per lab that is missing, out of date, or has no source."""
    problems = []
    sources = {s.name for s in chapters(solutions)}
    for solution in chapters(solutions):
        target = labs / solution.name
        if not target.exists():
            problems.append(f"{target}: missing (run labkit course build)")
        elif target.read_text(encoding="utf-8") != _lab_text(solution):
            problems.append(f"{target}: stale (run labkit course build)")
    problems += [f"{lab}: no source in {solutions}" for lab in sorted(labs.glob("ch[0-9][0-9]_*.ipynb"))
                 if lab.name not in sources]
    return problems
