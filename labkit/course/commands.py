"""`labkit course build|check|site` and `labkit grade`."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from ..errors import LabkitError


def cmd_course(args: argparse.Namespace) -> int:
    from . import notebooks

    if args.action == "site":
        return cmd_site(args)
    solutions, labs = Path(args.solutions), Path(args.labs)
    if not notebooks.chapters(solutions):
        raise LabkitError(f"no chapter sources solutions/chNN_*.ipynb in {solutions}")
    if args.action == "build":
        written = notebooks.build(solutions, labs)
        for path in written:
            print(f"wrote {path}")
        print(f"{len(written)} lab(s) written, {len(notebooks.chapters(solutions)) - len(written)} up to date")
        return 0
    problems = notebooks.stale(solutions, labs)
    for line in problems:
        print(line)
    print(f"{len(problems)} lab(s) stale" if problems else "labs up to date")
    return 1 if problems else 0


def cmd_site(args: argparse.Namespace) -> int:
    from . import site

    if args.output is None:
        raise LabkitError("labkit course site: give the site's folder with -o DIR")
    pages = site.build(Path(args.solutions), Path(args.output), args.lab_url)
    print(f"wrote {len(pages)} chapter page(s); open {Path(args.output) / 'index.html'}")
    return 0


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
                                   "check: exit 1 when a lab is missing or stale; "
                                   "site: render the chapters to a static, offline site in -o DIR")
    p.add_argument("action", choices=["build", "check", "site"])
    p.add_argument("--solutions", default="solutions", help="chapter sources (default: solutions)")
    p.add_argument("--labs", default="labs", help="generated labs (default: labs)")
    p.add_argument("-o", "--output", help="site: the folder to write (new, empty, or an earlier site)")
    p.add_argument("--lab-url", help="site: link each chapter to URL/chNN_*.ipynb (e.g. a JupyterLab's "
                                     "http://127.0.0.1:8888/lab/tree/labs) instead of shipping the lab in the site")
    p.set_defaults(func=cmd_course)
    g = sub.add_parser("grade", help="grade a folder of student notebooks with nbval; per-check CSV and junit XML",
                       description="merge each SUBMISSIONS/<student>/chNN_*.ipynb's answer cells into the "
                                   "reference notebook, run it with pytest --nbval-lax, write grades.csv and junit.xml")
    g.add_argument("submissions", help="folder with one sub-folder per student")
    g.add_argument("--solutions", default="solutions", help="reference notebooks (default: solutions)")
    g.add_argument("-o", "--output", default="grades", help="folder for grades.csv, junit.xml, work/ (default: grades)")
    g.set_defaults(func=cmd_grade)
