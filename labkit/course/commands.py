"""`labkit course build|check` and `labkit grade`."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from ..errors import LabkitError


def cmd_course(args: argparse.Namespace) -> int:
    from . import notebooks

    solutions, labs = Path(args.solutions), Path(args.labs)
    if not notebooks.chapters(solutions):
        raise LabkitError(f"no chapter sources solutions/chNN_*.ipynb in {solutions}")
    if args.action == "build":
        try:
            written = notebooks.build(solutions, labs, force=args.force)
        except ValueError as err:
            raise LabkitError(str(err)) from None
        for path in written:
            print(f"wrote {path}")
        print(f"{len(written)} lab(s) written, {len(notebooks.chapters(solutions)) - len(written)} up to date")
        return 0
    problems = notebooks.stale(solutions, labs)
    for line in problems:
        print(line)
    print(f"{len(problems)} lab(s) stale" if problems else "labs up to date")
    return 1 if problems else 0


def cmd_grade(args: argparse.Namespace) -> int:
    from ..grading import grade

    submissions = Path(args.submissions)
    if not submissions.is_dir():
        raise LabkitError(f"{submissions}: not a folder of submissions/<student>/chNN_*.ipynb")
    out = Path(args.output)
    try:
        rows = grade(submissions, Path(args.solutions), out)
    except ValueError as err:
        raise LabkitError(str(err)) from None
    per_student = Counter(r["student"] for r in rows if r["result"] == "passed")
    for student in sorted({r["student"] for r in rows}):
        total = sum(r["student"] == student for r in rows)
        print(f"{student}: {per_student[student]}/{total} checks passed")
    print(f"wrote {out / 'grades.csv'} and {out / 'junit.xml'}")
    return 0


def register(sub) -> None:
    """Add `course` and `grade` to the labkit command."""
    p = sub.add_parser("course", help="build the student labs from solutions/, or check they are current",
                       description="build: write labs/ from solutions/ (answers -> placeholders, no outputs); "
                                   "check: exit 1 when a lab is missing or stale")
    p.add_argument("action", choices=["build", "check"])
    p.add_argument("--solutions", default="solutions", help="chapter sources (default: solutions)")
    p.add_argument("--labs", default="labs", help="generated labs (default: labs)")
    p.add_argument("--force", action="store_true", help="build: overwrite labs edited since they were built")
    p.set_defaults(func=cmd_course)
    g = sub.add_parser("grade", help="grade a folder of student notebooks with nbval; per-check CSV and junit XML",
                       description="merge each SUBMISSIONS/<student>/chNN_*.ipynb's answer cells into the "
                                   "reference notebook, run it with pytest --nbval-lax, write grades.csv and junit.xml")
    g.add_argument("submissions", help="folder with one sub-folder per student")
    g.add_argument("--solutions", default="solutions", help="reference notebooks (default: solutions)")
    g.add_argument("-o", "--output", default="grades", help="folder for grades.csv, junit.xml, work/ (default: grades)")
    g.set_defaults(func=cmd_grade)
