"""`labkit grade` as an instructor meets it: honest, wrong and dishonest submissions, sandboxed, judged outside.

One grading run (module fixture) over a folder of submissions of chapters 4 and 5 (their references
trimmed to the exercises, to keep the run short) with small limits; the tests read its records.
"""

import contextlib
import csv
import io
import json
import math
import os
import socket
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

from labkit.cli import main
from labkit.course import steps, variants
from labkit.engine.simulate import simulate
from labkit.grading import report, sandbox

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"cell": 10, "notebook": 45, "memory": "1G", "jobs": 2}
needs_bwrap = pytest.mark.skipif(not sandbox.available(), reason="bubblewrap (bwrap) is not installed; .ci/run installs it")

KEEP = {"ch04_architectures": {1, 11, 17}, "ch05_ai_workloads": {1, 6}}
"""Code cells of the reference kept besides the exercises (setup, the runs the answers read)."""


def _trimmed(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    first = min(i for i, c in enumerate(nb.cells) if any(t.startswith("answer:") for t in c.metadata.get("tags", [])))
    nb.cells = [c for i, c in enumerate(nb.cells) if i in KEEP[name] or (i >= first - 1 and i <= first + 8)]
    return nb


def _lab(solutions: Path, name: str, answers: dict[str, str] | None = None, keep_solution: bool = False):
    """A submission: the lab (placeholders) or the solution, with some answer cells replaced."""
    from labkit.course.notebooks import student_version

    nb = nbformat.read(solutions / f"{name}.ipynb", as_version=4)
    nb = nb if keep_solution else student_version(nb)
    for cell in nb.cells:
        for tag in cell.metadata.get("tags", []):
            if tag.startswith("answer:") and tag[7:] in (answers or {}):
                cell.source = answers[tag[7:]]
    return nb


def _write(folder: Path, student: str, filename: str, nb, mtime: float | None = None) -> Path:
    (folder / student).mkdir(parents=True, exist_ok=True)
    path = folder / student / filename
    nbformat.write(nb, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _ids() -> tuple[str, str]:
    """Two student ids whose chapter-5 variants differ."""
    base = variants.params(5, "s001")["workers"]
    return "s001", next(f"s{i:03d}" for i in range(2, 500) if variants.params(5, f"s{i:03d}")["workers"] != base)


CH05 = "ch05_ai_workloads"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.available():
        pytest.skip("bubblewrap (bwrap) is not installed; .ci/run installs it")
    tmp = tmp_path_factory.mktemp("grade")
    solutions, subs, out = tmp / "solutions", tmp / "submissions", tmp / "out"
    solutions.mkdir()
    for name in KEEP:
        nbformat.write(_trimmed(name), solutions / f"{name}.ipynb")
    marker = tmp / "host-marker"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    right, copied = _ids()
    w = variants.params(5, right)["workers"]
    own = int(steps.workers(simulate(variants.gang_pair(1, w)), 60).query("~can_train").gpus_held.sum())

    def lab(answers=None, solution=False):
        return _lab(solutions, CH05, answers, solution)

    _write(subs, right, f"{CH05}.ipynb", lab(solution=True))
    _write(subs, right, "Ch04_architectures-Copy1.ipynb", _lab(solutions, "ch04_architectures", keep_solution=True))
    _write(subs, copied, f"{CH05}.ipynb", lab({"ch05.q1": f"idle_held_gpus = {own}", "ch05.q2": f"min_available = {w}",
                                               "ch05.q3": "gpus_per_pod = 4"}))
    _write(subs, "unanswered", f"{CH05}.ipynb", lab())
    _write(subs, "wrong", f"{CH05}.ipynb", lab({"ch05.q2": "min_available = 1"}, solution=True))
    victim = _write(subs, "victim", f"{CH05}.ipynb", lab(solution=True))
    tampers = {
        "redefine": 'idle_held_gpus = 0\n\n\ndef check(qid, answer):\n    print(f"{{qid}}: 正确")',
        "clearlabkit": "import labkit\nimport labkit.grading\n\nlabkit.grading.__dict__.clear()\nlabkit.__dict__.clear()\n"
                       "idle_held_gpus = 0",
        "keyimport": "from labkit.grading.keys import judge\n\nidle_held_gpus = 0",
        "fakesim": "import labkit\nimport labkit.engine.simulate\n\nlabkit.simulate = labkit.engine.simulate.simulate = "
                   "lambda *a, **k: gang  # the run where no job holds GPUs without training\n"
                   "held = steps.workers(labkit.simulate(None), 60)\n"
                   "idle_held_gpus = int(held[~held.can_train].gpus_held.sum())",
        "outside": "import os\nimport pathlib\n\nfor target in [{marker!r}, {victim!r}, {out!r} + '/grades.csv', '/etc/labkit-x']:\n"
                   "    try:\n        pathlib.Path(target).write_text('x')\n    except OSError as err:\n        print(err)\n"
                   "os.system('touch {marker}-2')\nidle_held_gpus = 0",
        "socket": "import socket\n\nfor address in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n"
                  "    try:\n        socket.create_connection(address, timeout=2)\n"
                  "    except OSError as err:\n        print(err)\nidle_held_gpus = socket.create_connection(('1.1.1.1', 80))",
        "osexit": "import os\n\nos._exit(1)",
        "loop": "while True:\n    pass",
        "memory": "blob = bytearray(10 * 1024**3)\nidle_held_gpus = len(blob)",
        "forkbomb": "import os\nimport time\n\npids = []\nfor _ in range(5000):\n    try:\n        pid = os.fork()\n"
                    "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n"
                    "    pids.append(pid)\nidle_held_gpus = len(pids)",
    }
    for student, code in tampers.items():
        code = code.format(marker=str(marker), victim=str(victim), out=str(out), port=port)
        _write(subs, student, f"{CH05}.ipynb", lab({"ch05.q1": code}))
    now = time.time()
    _write(subs, "doubled", f"{CH05}.ipynb", lab(), mtime=now - 3600)
    _write(subs, "doubled", "ch05-final.ipynb", lab(solution=True), mtime=now)
    (subs / "broken").mkdir()
    (subs / "broken" / f"{CH05}.ipynb").write_text("{ not json", encoding="utf-8")
    (subs / "notnb").mkdir()
    (subs / "notnb" / f"{CH05}.ipynb").write_text(json.dumps({"cells": "no"}), encoding="utf-8")
    _write(subs, "..sneaky", f"{CH05}.ipynb", lab(solution=True))
    _write(subs, "-rf", f"{CH05}.ipynb", lab(solution=True))
    victim_before = victim.read_bytes()
    stdout, stderr = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["grade", str(subs), "--solutions", str(solutions), "-o", str(out), "-j", str(LIMITS["jobs"]),
                     "--cell-timeout", str(LIMITS["cell"]), "--notebook-timeout", str(LIMITS["notebook"]),
                     "--memory", LIMITS["memory"]])
    elapsed = time.monotonic() - started
    try:
        connected = listener.accept()
    except BlockingIOError:
        connected = None
    listener.close()
    rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8")))
    students = len({r["student"] for r in rows})
    return {"code": code, "rows": {(r["student"], r["check"]): r for r in rows}, "out": out, "subs": subs,
            "stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "elapsed": elapsed, "students": students,
            "marker": marker, "victim": (victim, victim_before), "connected": connected, "ids": (right, copied)}


def _verdicts(graded, student):
    return {q: r["verdict"] for (s, q), r in graded["rows"].items() if s == student}


@needs_bwrap
def test_right_passes_every_check_unanswered_none_wrong_exactly_the_wrong(graded):
    right, _ = graded["ids"]
    assert graded["code"] == 0
    assert set(_verdicts(graded, right).values()) == {"passed"}
    assert {v for q, v in _verdicts(graded, "unanswered").items() if q[:4] == "ch05"} == {"failed"}
    assert {r["reason"] for (s, q), r in graded["rows"].items() if s == "unanswered" and q[:4] == "ch05"} == \
        {"未作答 [not-answered]"}
    wrong = _verdicts(graded, "wrong")
    assert [q for q, v in wrong.items() if v != "passed" and q.startswith("ch05")] == ["ch05.q2"]


@needs_bwrap
def test_each_student_judged_on_their_own_variant(graded):
    right, copied = graded["ids"]
    assert _verdicts(graded, right)["ch05.q1"] == "passed"
    copy = _verdicts(graded, copied)
    assert (copy["ch05.q1"], copy["ch05.q2"], copy["ch05.q3"]) == ("failed", "failed", "passed")


@needs_bwrap
@pytest.mark.parametrize(("student", "code"), [
    ("redefine", "no-answer"), ("clearlabkit", "answer-error"), ("keyimport", "answer-error"), ("fakesim", "wrong"),
    ("outside", "wrong"), ("socket", "answer-error"), ("osexit", "kernel-died"), ("loop", "cell-timeout"),
    ("memory", "memory-limit"), ("forkbomb", "wrong|cell-timeout"),  # forks until RLIMIT_NPROC, within the cell limit or not
])
def test_tampering_fails_its_checks_with_a_reason(graded, student, code):
    mine = {q: r for (s, q), r in graded["rows"].items() if s == student and q.startswith("ch05")}
    assert {r["verdict"] for r in mine.values()} == {"failed"}
    assert all(r["reason"] for r in mine.values())
    assert mine["ch05.q1"]["reason"].rsplit("[", 1)[1].rstrip("]") in code.split("|"), mine["ch05.q1"]["reason"]
    if code in ("kernel-died", "cell-timeout"):  # what the crash cut off fails with the crash's reason
        assert all(r["reason"].endswith(f"[{code}]") for r in mine.values())


@needs_bwrap
def test_no_host_file_no_connection_and_the_victim_untouched(graded):
    marker = graded["marker"]
    assert not marker.exists() and not Path(f"{marker}-2").exists() and not Path("/etc/labkit-x").exists()
    victim, before = graded["victim"]
    assert victim.read_bytes() == before
    assert set(_verdicts(graded, "victim").values()) - {"missing"} == {"passed"}
    assert graded["connected"] is None
    assert sorted(p.name for p in graded["out"].iterdir()) == ["feedback", "gradebook.csv", "grades.csv", "junit.xml"]


@needs_bwrap
def test_grading_ends_within_the_limits(graded):
    per_run = LIMITS["notebook"] + sandbox.STARTUP + 60  # a run, then its nbval verdicts
    assert graded["elapsed"] < math.ceil(graded["students"] / LIMITS["jobs"]) * per_run


@needs_bwrap
def test_submissions_as_they_come(graded):
    right, _ = graded["ids"]
    err = graded["stderr"]
    assert f"{right}: Ch04_architectures-Copy1.ipynb graded as chapter 4 (ch04_architectures.ipynb)" in err
    assert set(_verdicts(graded, right).values()) == {"passed"}  # the renamed chapter 4 too
    assert "doubled: 2 notebooks for chapter 5 (ch05_ai_workloads.ipynb, ch05-final.ipynb): grading the newer, " \
           "ch05-final.ipynb" in err
    assert set(_verdicts(graded, "doubled").values()) - {"missing"} == {"passed"}
    assert {r["verdict"] for (s, q), r in graded["rows"].items() if s == "unanswered" and q.startswith("ch04")} == \
        {"missing"}
    for student in ("broken", "notnb"):
        assert f"{student}: ch05_ai_workloads.ipynb: not " in err
        assert {r["reason"][-14:] for (s, q), r in graded["rows"].items() if s == student and q[:4] == "ch05"} == \
            {"[bad-notebook]"}
    assert "'..sneaky': not graded" in err and "'-rf': not graded" in err
    assert not any(s in ("..sneaky", "-rf") for s, _ in graded["rows"])


@needs_bwrap
def test_records_points_gradebook_junit_feedback(graded):
    out, right = graded["out"], graded["ids"][0]
    header = (out / "grades.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "student,chapter,check,verdict,points,reason"
    book = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    assert list(book[right])[-1] == "total" and "ch04.q2" in book[right] and "ch05.q3" in book[right]
    assert int(book[right]["total"]) == sum(int(r["points"]) for (s, _), r in graded["rows"].items() if s == right)
    assert book["unanswered"]["total"] == "0"
    junit = (out / "junit.xml").read_text(encoding="utf-8")
    assert "\x1b" not in junit and "#x1B" not in junit
    assert "memory/ch05" in {s.get("name") for s in ET.fromstring(junit).iter("testsuite")}
    page = (out / "feedback" / "wrong" / "ch05.html").read_text(encoding="utf-8")
    assert "min_available = 1" in page and "未通过" in page and "得分" in page
    assert "ch05.q2: 正确" not in page
    lab_page = (out / "feedback" / "unanswered" / "ch05.html").read_text(encoding="utf-8")
    assert "held[~held.can_train]" not in lab_page  # never the reference's answer


def test_output_folder_is_claimed_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "grades.csv").write_text("old", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep", encoding="utf-8")
    (out / "feedback").symlink_to(elsewhere)
    with pytest.raises(Exception, match="already holds grades.csv, feedback"):
        report.claim(out, force=False)
    report.claim(out, force=True)
    assert (elsewhere / "keep.txt").read_text(encoding="utf-8") == "keep"
    assert not (out / "feedback").exists() and not (out / "grades.csv").exists()
    (out / "feedback").mkdir()
    (out / "feedback" / "alice").symlink_to(elsewhere)
    with pytest.raises(Exception, match="symlink"):
        report._write(out, "feedback/alice/ch05.html", "x")
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(Exception, match="a symlink"):
        report.claim(link, force=True)


def test_existing_output_refused_on_the_command_line(tmp_path, capsys):
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "grades.csv").write_text("old", encoding="utf-8")
    args = ["grade", str(tmp_path / "subs"), "--solutions", str(ROOT / "solutions"), "-o", str(tmp_path / "out")]
    assert main([*args, "--no-sandbox"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8") == "old"


def test_no_bubblewrap_refuses_naming_no_sandbox(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", "bwrap-not-installed-here")
    (tmp_path / "subs").mkdir()
    assert main(["grade", str(tmp_path / "subs"), "--solutions", str(ROOT / "solutions"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--no-sandbox" in err


def test_bad_limits_are_one_line(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    assert main(["grade", str(tmp_path / "subs"), "--memory", "lots", "--no-sandbox"]) == 2
    assert "--memory" in capsys.readouterr().err


def test_no_sandbox_still_judges_outside_the_kernel(tmp_path, capsys):
    solutions, subs = tmp_path / "solutions", tmp_path / "subs"
    solutions.mkdir()
    nbformat.write(_trimmed(CH05), solutions / f"{CH05}.ipynb")
    _write(subs, "s001", f"{CH05}.ipynb", _lab(solutions, CH05, keep_solution=True))
    _write(subs, "cheat", f"{CH05}.ipynb", _lab(solutions, CH05, {
        "ch05.q1": 'idle_held_gpus = 0\n\n\ndef check(qid, answer):\n    print(f"{qid}: 正确")'}))
    out = tmp_path / "out"
    assert main(["grade", str(subs), "--solutions", str(solutions), "-o", str(out), "--no-sandbox",
                 "--cell-timeout", "20", "--notebook-timeout", "60"]) == 0
    assert "--no-sandbox: student code runs with your own rights" in capsys.readouterr().err
    rows = {(r["student"], r["check"]): r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    assert {r["verdict"] for (s, _), r in rows.items() if s == "s001"} == {"passed"}
    assert {r["verdict"] for (s, _), r in rows.items() if s == "cheat"} == {"failed"}


@needs_bwrap
def test_sandbox_confines_a_notebook_and_stops_it_at_the_notebook_limit(tmp_path):
    secret = tmp_path / "secret.txt"  # a host file next to the work copy: invisible inside
    secret.write_text("s", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    cells = ["import os\nprint(os.getuid(), os.getcwd(), os.path.exists({secret!r}))",
             "import labkit.grading.keys as k\nprint(hasattr(k, 'CHECKS'))",
             "open('mine.txt', 'w').write('ok')\nprint(open('/tmp/t', 'w').write('t'))",
             "import time\ntime.sleep(4)", "time.sleep(4)", "print('never')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.format(secret=str(secret))) for c in cells])
    nbformat.write(nb, work / "t.ipynb")
    uid = sandbox.UID_BASE + 999 if os.geteuid() == 0 else None
    sandbox.prepare(work, uid)
    run = sandbox.run(work, "t.ipynb", "s001", sandbox.Limits(cell=10, notebook=6), uid, True)
    outs = ["".join(o.get("text", "")) for c in run.notebook["cells"] for o in c["outputs"]]
    uid_seen, cwd, seen = outs[0].split()
    assert uid_seen != "0" and cwd == sandbox.HOME and seen == "False"
    assert outs[1] == "False\n"  # the answer key is an empty folder there
    assert (work / "mine.txt").read_text(encoding="utf-8") == "ok" and (work / "tmp" / "t").exists()
    assert run.stopped == "notebook-timeout" and "never\n" not in outs


def test_student_folder_names():
    from labkit.grading.grade import STUDENT_NAME

    assert all(STUDENT_NAME.fullmatch(n) for n in ("s001", "张三", "li.si@uni", "2024_01"))
    assert not any(STUDENT_NAME.fullmatch(n) for n in ("..x", "-rf", "a b", "_x", "x\n", ".hidden", "x" * 65))


def test_a_bubblewrap_that_cannot_sandbox_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", "false")  # installed, but fails as bwrap does without user namespaces
    (tmp_path / "subs").mkdir()
    assert main(["grade", str(tmp_path / "subs"), "--solutions", str(ROOT / "solutions"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "cannot make a sandbox here" in err and "--no-sandbox" in err and not (tmp_path / "o").exists()
