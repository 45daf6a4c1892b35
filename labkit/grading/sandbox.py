"""Run a student's notebook in a bubblewrap sandbox, as an unprivileged user, with limits.

The sandbox sees the system read-only (/usr, the Python installation, the labkit package without its
answer key), a private work folder (the student's copy, the only writable place, also its /tmp),
no network (own network namespace: loopback only), its own PID/IPC/UTS namespaces, and nothing
of the host's home, the submissions, the solutions or the grader's output. Run by root, bwrap sets
up the mounts and `setpriv` drops to a user id of the student's own (so process limits count that
student alone); run by a normal user, bwrap's user namespace keeps that user's rights. Limits: per
cell and per notebook time (the notebook's is enforced from outside too, by killing the sandbox),
writable memory, processes, file size.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ..course import cases
from ..errors import LabkitError

BWRAP, SETPRIV = "bwrap", "setpriv"
HOME = "/home/student"
UID_BASE = 600_000
STARTUP = 60.0
"""Seconds beyond the notebook's limit for the kernel to start (its imports) and the sandbox to close."""
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Limits:
    cell: float = 60.0
    notebook: float = 300.0
    memory: int = 2 * 1024**3
    nproc: int = 256


def parse_size(text: str) -> int:
    """'2G', '512M', '1.5G', '4096' -> bytes (binary units)."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        value = float(raw[:-1]) * units[raw[-1]] if raw and raw[-1] in units else float(raw)
    except ValueError:
        raise LabkitError(f"--memory: {text!r} is not a size like 2G or 512M") from None
    if value < 64 * 1024**2:
        raise LabkitError(f"--memory: {text!r} is below 64M; a kernel cannot start in that")
    return int(value)


def available() -> bool:
    return shutil.which(BWRAP) is not None and (os.geteuid() != 0 or shutil.which(SETPRIV) is not None)


def require() -> None:
    """Refuse, in one line, where bubblewrap is missing or cannot make its namespaces (e.g. a locked-down container)."""
    if not available():
        raise LabkitError("bubblewrap (bwrap) is not installed, so student code cannot be confined: install it "
                          "(Debian/Ubuntu: apt-get install bubblewrap) or pass --no-sandbox to run it with your own rights")
    user = ["--unshare-user"] if os.geteuid() != 0 else []
    probe = subprocess.run([BWRAP, *user, "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise LabkitError(f"bubblewrap cannot make a sandbox here ({why}); allow user namespaces, or pass "
                          "--no-sandbox to run student code with your own rights")


def _package_root() -> Path:
    """The labkit package folder this grader runs from (the sandbox gets the same code)."""
    return Path(__file__).resolve().parents[1]


def _parents(targets: list[str]) -> list[str]:
    """`--dir` for every folder above a bind target, readable by all (bwrap would make them 0700)."""
    made: list[str] = []
    for target in targets:
        for parent in reversed(Path(target).parents[:-1]):
            if str(parent) not in made:
                made.append(str(parent))
    return [arg for d in made for arg in ("--perms", "0755", "--dir", d)]


def _bindings() -> list[str]:
    """Read-only binds: the system, the interpreter, labkit with its key hidden."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for item in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "ssl", "nsswitch.conf",
                 "hosts", "mime.types"):
        args += ["--ro-bind-try", f"/etc/{item}", f"/etc/{item}"]
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    own = [str(p) for p in sorted(prefixes) if not str(p).startswith(("/usr/", "/bin/", "/lib")) and p != Path("/usr")]
    package = str(_package_root())
    if cases.EXAMPLES.is_dir() and not cases.EXAMPLES.resolve().is_relative_to(package):
        own.append(str(cases.EXAMPLES.resolve()))
    args += _parents([*own, package, HOME])
    for path in own:
        args += ["--ro-bind", path, path]
    return args + ["--ro-bind", package, package, "--tmpfs", f"{package}/grading/keys"]


def _numba_cache(target: Path) -> None:
    """A private, writable copy of the grader's compiled numba cache for labkit (else every kernel compiles cold)."""
    from numba.core.caching import _CacheLocator

    package = _package_root()
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    for folder in [package, *[p for p in package.rglob("*") if p.is_dir() and p.name != "__pycache__"]]:
        sub = _CacheLocator.get_suitable_cache_subpath(str(folder / "x.py"))
        source = Path(user_dir) / sub if user_dir else folder / "__pycache__"
        files = [f for f in source.glob("*.nb[ic]") if f.is_file()] if source.is_dir() else []
        if files:
            (target / sub).mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, target / sub / f.name)


@dataclasses.dataclass
class Run:
    """What came back from one sandboxed run: the executed notebook (untrusted data) and how it ended."""

    notebook: dict | None
    stopped: str | None
    cell: int
    detail: str


def prepare(work: Path, uid: int | None) -> None:
    """The work folder's private parts (numba cache, tmp), owned by the sandbox user."""
    _numba_cache(work / ".numba")
    (work / "tmp").mkdir(exist_ok=True)
    if uid is not None:
        for path in [work, *work.rglob("*")]:
            os.lchown(path, uid, uid)
        work.chmod(0o700)


def command(work: Path, notebook: str, student: str, limits: Limits, uid: int | None, sandbox: bool) -> list[str]:
    """The argv that runs `notebook` (a file in `work`) under the runner, in the sandbox or not."""
    home = HOME if sandbox else str(work)
    runner = [sys.executable, "-P", str(Path(__file__).with_name("runner.py")), f"{home}/{notebook}", f"{home}/{notebook}.run",
              "--cell-timeout", str(limits.cell), "--notebook-timeout", str(limits.notebook),
              "--memory", str(limits.memory), "--nproc", str(limits.nproc)]
    env = {"HOME": home, "TMPDIR": f"{home}/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "PYTHONPATH": str(_package_root().parent), "NUMBA_CACHE_DIR": f"{home}/.numba",
           "JUPYTER_PLATFORM_DIRS": "1", "JUPYTER_RUNTIME_DIR": f"{home}/.jupyter/runtime",
           "JUPYTER_DATA_DIR": f"{home}/.jupyter/data", "IPYTHONDIR": f"{home}/.ipython",
           "MPLCONFIGDIR": f"{home}/.config/matplotlib", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "NUMBA_NUM_THREADS": "1", "LABKIT_GRADING": "1", "LABKIT_STUDENT": student, "USER": "student"}
    if not sandbox:
        return ["env", "-i", *[f"{k}={v}" for k, v in env.items()], *runner]
    argv = [BWRAP, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv",
            # the private /tmp first: a later mount inside it (labkit or Python installed under /tmp)
            # stays visible, where one made before it would be covered
            "--bind", str(work / "tmp"), "/tmp",
            *_bindings(), "--proc", "/proc", "--dev", "/dev", "--bind", str(work), HOME, "--chdir", HOME]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    if uid is None:
        argv += ["--unshare-user", "--"]
    else:
        argv += ["--", SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv + runner


def _drain(stream, keep: list[bytes], limit: int = 16 * 1024) -> None:
    """Read a pipe to its end, keeping only its first `limit` bytes (a student may print without end)."""
    size = 0
    for chunk in iter(lambda: stream.read(65536), b""):
        if size < limit:
            keep.append(chunk[: limit - size])
            size += len(chunk)


def read_untrusted(path: Path, limit: int = MAX_NOTEBOOK_BYTES) -> bytes | None:
    """A file the sandbox wrote, read without following a symlink, refused beyond `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not os.path.isfile(f"/proc/self/fd/{fd}") or os.fstat(fd).st_size > limit:
            return None
        return f.read(limit + 1)[:limit]


def run(work: Path, notebook: str, student: str, limits: Limits, uid: int | None, sandbox: bool) -> Run:
    """Run `work/notebook` to its end or its limits; never longer than the notebook limit plus `STARTUP`."""
    argv = command(work, notebook, student, limits, uid, sandbox)
    kept: list[bytes] = []
    proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, umask=0o022)
    reader = threading.Thread(target=_drain, args=(proc.stdout, kept), daemon=True)
    reader.start()
    killed = False
    try:
        proc.wait(timeout=limits.notebook + STARTUP)
    except subprocess.TimeoutExpired:
        killed = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join(timeout=5)
    raw = read_untrusted(work / f"{notebook}.run")
    nb, status = None, {}
    if raw is not None:
        try:
            nb = json.loads(raw)
            status = nb.get("metadata", {}).get("labkit_run", {}) if isinstance(nb, dict) else {}
        except ValueError:
            nb = None
    if not isinstance(status, dict):
        status = {}
    stopped = status.get("stopped") if isinstance(status.get("stopped"), str) else None
    cell = status.get("cell") if isinstance(status.get("cell"), int) else -1
    detail = str(status.get("detail", ""))[:300]
    if killed:
        stopped, detail = "notebook-timeout", f"killed after {limits.notebook + STARTUP:.0f} s"
    elif nb is None or (stopped is None and proc.returncode != 0):
        stopped = stopped or "sandbox-error"
        detail = detail or b"".join(kept).decode("utf-8", "replace").strip()[-300:] or f"exit {proc.returncode}"
    return Run(nb if isinstance(nb, dict) else None, stopped, cell, detail)
