"""`labkit course build|check|site` and `labkit grade`."""

from __future__ import annotations

import argparse
import sys
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


def cmd_site(args: argparse.Namespace) -> int:
    from . import site

    if args.output is None:
        raise LabkitError("labkit course site: give the site's folder with -o DIR")
    pages = site.build(Path(args.solutions), Path(args.output), args.lab_url)
    print(f"wrote {len(pages)} chapter page(s); open {Path(args.output) / 'index.html'}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from ..grading import grade, sandbox

    submissions = Path(args.submissions)
    if not submissions.is_dir():
        raise LabkitError(f"{submissions}: not a folder of submissions/<student>/chNN_*.ipynb")
    if args.jobs < 1 or min(args.cell_timeout, args.notebook_timeout) <= 0:
        raise LabkitError("-j, --cell-timeout and --notebook-timeout must be positive")
    limits = sandbox.Limits(cell=args.cell_timeout, notebook=args.notebook_timeout,
                            memory=sandbox.parse_size(args.memory))
    if args.no_sandbox:
        print("labkit grade: --no-sandbox: student code runs with your own rights", file=sys.stderr)
    out = Path(args.output)
    rows = grade.grade(submissions, Path(args.solutions), out, limits, sandboxed=not args.no_sandbox,
                       force=args.force, jobs=args.jobs, only=args.chapter)
    for student in dict.fromkeys(r["student"] for r in rows):
        mine = [r for r in rows if r["student"] == student]
        passed = Counter(r["verdict"] for r in mine)["passed"]
        print(f"{student}: {passed}/{len(mine)} checks passed, {sum(int(r['points']) for r in mine)} points")
    print(f"wrote {out / 'grades.csv'}, gradebook.csv, junit.xml and feedback/")
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
    p.add_argument("--force", action="store_true", help="build: overwrite labs edited since they were built")
    p.set_defaults(func=cmd_course)
    g = sub.add_parser("grade", help="grade student notebooks: sandboxed runs, verdicts judged by the grader under nbval",
                       description="run each SUBMISSIONS/<student>/ notebook (its answer cells merged into the "
                                   "reference) in a bubblewrap sandbox, judge the answers it hands out in the "
                                   "grader's own nbval run, write grades.csv, gradebook.csv, junit.xml, feedback/")
    g.add_argument("submissions", help="folder with one sub-folder per student")
    g.add_argument("--solutions", default="solutions", help="reference notebooks (default: solutions)")
    g.add_argument("-o", "--output", default="grades",
                   help="folder for grades.csv, gradebook.csv, junit.xml, feedback/ (default: grades)")
    g.add_argument("--force", action="store_true", help="replace an earlier run's records in the output folder")
    g.add_argument("-j", "--jobs", type=int, default=1, help="grade N submissions at once (default 1)")
    g.add_argument("--chapter", type=int, action="append", metavar="N",
                   help="grade chapter N (repeatable; default: every chapter someone submitted)")
    g.add_argument("--cell-timeout", type=float, default=60, metavar="S", help="seconds per cell (default 60)")
    g.add_argument("--notebook-timeout", type=float, default=300, metavar="S", help="seconds per notebook (default 300)")
    g.add_argument("--memory", default="2G", help="writable memory per notebook, e.g. 2G, 512M (default 2G)")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run student code without bubblewrap, with your own rights (verdicts are still the grader's)")
    g.set_defaults(func=cmd_grade)
