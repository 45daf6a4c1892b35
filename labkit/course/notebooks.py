"""`solutions/` -> `labs/`: answers replaced by placeholders, outputs cleared, and the staleness check."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
PLACEHOLDER = "...  # 在此作答"
_ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_]\w*)\s*=(?!=)")


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


def build(solutions: Path, labs: Path) -> list[Path]:
    """Write labs/chNN_slug.ipynb for every chapter whose lab differs; return the files written."""
    labs.mkdir(parents=True, exist_ok=True)
    written = []
    for solution in chapters(solutions):
        target, text = labs / solution.name, _lab_text(solution)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


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
