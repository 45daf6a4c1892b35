"""A real Slurm on 127.0.0.1: munged, slurmctld and one slurmd per node, all files in one state dir.

`up` writes the scenario's slurm.conf and gres.conf, makes the fake GPU devices, starts its own
munged (key, socket, pid and log in the state dir: nothing in /etc or /run is touched; `--force`, as
only root talks to it, so the state dir may sit below a private home), slurmctld
(`-c`: an empty queue) and `slurmd -N <node>` for every node, waits until `sinfo` shows every node
idle and records the pids in `run/labkit.pids`. `down` cancels the cluster's jobs and stops exactly
those pids. Both are safe to call twice; `up` with another slurm.conf restarts the daemons.

Layout of the state dir: slurm.conf, gres.conf, munge.key, jobs/ (sbatch scripts), fakedev/, state/
(StateSaveLocation), spool/<node>/, log/ (munged, slurmctld, slurmd-<node>), run/ (pids, munge
socket), out/ (job output).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import LabkitError
from ..spec import Scenario
from ..spec.model import SlurmConf
from . import parse
from .conf import (
    FIRST_PORT,
    SECONDS_PARAMETERS,
    Ports,
    fake_gpus,
    needs_slurmdbd,
    node_names,
    render,
    scheduler_parameters,
)

APT_INSTALL = "apt-get install -y --no-install-recommends slurmctld slurmd munge slurm-client"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel")
DEFAULT_STATE_DIR = Path(".labkit/slurm")
PIDS = "run/labkit.pids"
ALREADY_UP = "already up"
"""How `up`'s message begins when it found the cluster running this slurm.conf."""
_SBIN = os.pathsep.join(("/usr/sbin", "/sbin", "/usr/bin", "/bin"))


def program(name: str) -> str | None:
    """Where a Slurm or munge program is (sbin included, which a user's PATH may lack)."""
    return shutil.which(name) or shutil.which(name, path=_SBIN)


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if program(name) is None]


def require_slurm() -> None:
    """One line naming the apt command when Slurm or munge is missing, or when not root."""
    missing = missing_programs()
    if missing:
        raise LabkitError(f"Slurm is not installed (no {', '.join(missing)}): {APT_INSTALL}")
    if os.geteuid() != 0:
        raise LabkitError("the local Slurm runs its daemons as root (SlurmUser=root, mknod for the fake GPUs): "
                          "run labkit slurm as root")


class Cluster:
    """The local Slurm of one state dir: its files, client commands and recorded daemons."""

    def __init__(self, state_dir: Path | str = DEFAULT_STATE_DIR):
        self.dir = Path(state_dir).resolve()

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}

    def call(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a Slurm or munge program with this cluster's SLURM_CONF; a hang is a one-line error."""
        try:
            return subprocess.run([program(args[0]) or args[0], *args[1:]], check=False, env=self.env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabkitError(f"{args[0]} did not answer within {timeout:g}s (is the local Slurm up?)") from None

    def command(self, *args: str, timeout: float = 30) -> str:
        """A client command's output; its error as one line."""
        done = self.call(*args, timeout=timeout)
        if done.returncode:
            text = (done.stderr or done.stdout).strip().splitlines()
            raise LabkitError(f"{' '.join(args[:2])}: {text[-1] if text else f'exit {done.returncode}'}")
        return done.stdout

    # ------------------------------------------------------------------------------------ daemons

    def pids(self) -> dict[str, tuple[int, str, int | None]]:
        """The daemons `up` recorded: name -> (pid, command line, start time in clock ticks after
        boot; None in a file from before start times were recorded, which then matches nothing)."""
        path = self.dir / PIDS
        if not path.exists():
            return {}
        try:
            entries = json.loads(path.read_text())
            return {str(name): (int(e[0]), str(e[1]), int(e[2]) if len(e) > 2 else None)
                    for name, e in entries.items()}
        except (ValueError, TypeError, IndexError, AttributeError, OSError):
            raise LabkitError(f"{path}: not a pid record written by labkit slurm up") from None

    def alive(self) -> dict[str, int]:
        """The recorded daemons still running: same pid, command line and start time as `up`
        recorded, so a reused pid or an edited record never names another process."""
        return {name: pid for name, (pid, cmd, start) in self.pids().items() if _identity(pid) == (cmd, start)}

    def running(self) -> bool:
        pids = self.pids()
        return bool(pids) and len(self.alive()) == len(pids)

    def ports(self) -> Ports | None:
        """The ports of the slurm.conf in the state dir (None before the first `up`)."""
        path = self.dir / "slurm.conf"
        if not path.exists():
            return None
        keys = [w.split("=", 1) for line in path.read_text().splitlines() for w in line.split() if "=" in w]
        first = next((int(v) for k, v in keys if k == "SlurmctldPort"), None)
        slurmd = tuple(p for k, v in keys if k == "Port" for p in _port_range(v))
        return Ports(first, slurmd) if first else None

    def same_files(self, files: dict[str, str]) -> bool:
        """The state dir holds these files already (comment lines aside)."""
        def body(text: str) -> list[str]:
            return [line for line in text.splitlines() if not line.startswith("#")]

        return all((self.dir / name).exists() and body((self.dir / name).read_text()) == body(text)
                   for name, text in files.items())


def _port_range(value: str) -> range:
    """A NodeName line's `Port=6818` or `Port=[6818-6821]`."""
    low, _, high = value.strip("[]").partition("-")
    return range(int(low), int(high or low) + 1)


def _cmdline(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _start_time(pid: int) -> int | None:
    """The process's start time (proc(5) stat field 22, clock ticks after boot): a pid reused by
    another process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _identity(pid: int) -> tuple[str | None, int | None]:
    return _cmdline(pid), _start_time(pid)


def port_in_use(port: int) -> bool:
    """Whether a daemon could not bind this port (Slurm binds every address, with SO_REUSEADDR)."""
    for address in ("0.0.0.0", "127.0.0.1"):
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError:
                return True
    return False


def free_ports(nodes: list[str], first: int = FIRST_PORT) -> Ports:
    """The first block of len(nodes) + 1 consecutive free ports from `first`."""
    while first + len(nodes) < 65536:
        block = Ports.block(first, len(nodes))
        busy = [p for p in (block.slurmctld, *block.slurmd) if port_in_use(p)]
        if not busy:
            return block
        first = busy[-1] + 1
    raise LabkitError("no free block of ports for slurmctld and the slurmd daemons")


def check_ports(ports: Ports, nodes: list[str]) -> None:
    for port, daemon in ports.named(nodes).items():
        if port_in_use(port):
            raise LabkitError(f"port {port} ({daemon}) is in use on 127.0.0.1; free it or pick another with --port")


def up(scenario: Scenario, conf: SlurmConf, cluster: Cluster, time_scale: float = 1.0, port: int | None = None,
       timeout: float = 60) -> str:
    """Make the state dir's Slurm run this scenario's slurm.conf; returns what was done, as one line."""
    require_slurm()
    needs_slurmdbd(scenario, conf)
    nodes = node_names(scenario)
    with _port_lock():  # another `up` on this host must not pick the same free ports before we bind them
        ports = Ports.block(port, len(nodes)) if port is not None else _ports_for(cluster, nodes)
        files = render(scenario, conf, cluster.dir, ports, time_scale)
        if cluster.running() and cluster.same_files(files):
            return f"{ALREADY_UP}: {len(nodes)} nodes, slurmctld on port {ports.slurmctld} ({cluster.dir})"
        restarted = bool(cluster.alive())
        if restarted:
            down(cluster)
        check_ports(ports, nodes)
        _prepare(cluster, files, fake_gpus(scenario))
        began = time.time()
        _start_all(cluster, nodes, timeout)
    # slurmctld's main scheduler makes its first pass batch_sched_delay after it started: a job submitted
    # before then would wait for it, which no scenario says
    settle = scheduler_parameters(conf, time_scale).get("batch_sched_delay", SECONDS_PARAMETERS["batch_sched_delay"])
    time.sleep(max(0.0, began + int(settle) + 1 - time.time()))
    verb = "restarted with the new slurm.conf" if restarted else "up"
    return f"{verb}: {len(nodes)} nodes idle, slurmctld on port {ports.slurmctld} ({cluster.dir})"


@contextmanager
def _port_lock():
    with open(Path(tempfile.gettempdir()) / "labkit-slurm-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _start_all(cluster: Cluster, nodes: list[str], timeout: float) -> None:
    """munged, slurmctld (-c: an empty queue), one slurmd per node; until every node is idle. On failure
    the ones already started are stopped."""
    d = cluster.dir
    started: dict[str, tuple[int, str, int | None]] = {}
    try:
        started["munged"] = _start(cluster, "munged", [
            "munged", "--force", f"--socket={d}/run/munge.socket", f"--key-file={d}/munge.key",
            f"--pid-file={d}/run/munged.pid", f"--log-file={d}/log/munged.log", f"--seed-file={d}/run/munged.seed"],
            "run/munged.pid", "log/munged.log")
        started["slurmctld"] = _start(cluster, "slurmctld", ["slurmctld", "-c"], "run/slurmctld.pid",
                                      "log/slurmctld.log")
        for node in nodes:
            started[f"slurmd {node}"] = _start(cluster, f"slurmd {node}", ["slurmd", "-N", node],
                                               f"run/slurmd-{node}.pid", f"log/slurmd-{node}.log")
        _write_pids(cluster, started)
        _wait_idle(cluster, nodes, timeout)
    except BaseException:
        _write_pids(cluster, started)
        down(cluster)
        raise


def _ports_for(cluster: Cluster, nodes: list[str]) -> Ports:
    """A running cluster keeps its slurmctld port (so an unchanged slurm.conf is seen as such); else free ones."""
    old = cluster.ports()
    if old is not None and cluster.running():
        return Ports.block(old.slurmctld, len(nodes))
    return free_ports(nodes)


def _prepare(cluster: Cluster, files: dict[str, str], gpus: int) -> None:
    """Write the files; make the directories, the fake GPU devices and munge's key."""
    d = cluster.dir
    for sub in ("jobs", "fakedev", "state", "spool", "log", "run", "out"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    for old in (d / "jobs").glob("*.sbatch"):
        old.unlink()
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    for i in range(gpus):
        device = d / "fakedev" / f"nvidia{i}"
        if not (device.exists() and stat.S_ISCHR(device.stat().st_mode)):
            device.unlink(missing_ok=True)
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    key = d / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o600)


def _start(cluster: Cluster, name: str, argv: list[str], pid_file: str, log: str,
           timeout: float = 15) -> tuple[int, str, int | None]:
    """Start one daemon (it forks into the background) and read its pid file; its last error if it dies."""
    pid_path = cluster.dir / pid_file
    pid_path.unlink(missing_ok=True)
    done = cluster.call(*argv, timeout=timeout)
    deadline = time.monotonic() + timeout
    while done.returncode == 0 and time.monotonic() < deadline:
        text = pid_path.read_text().strip() if pid_path.exists() else ""
        if text.isdigit() and _cmdline(int(text)):
            return int(text), _cmdline(int(text)) or "", _start_time(int(text))
        time.sleep(0.1)
    raise LabkitError(f"{name} did not start: {_last_error(cluster.dir / log, done.stderr)}")


def _last_error(log: Path, stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    if log.exists():
        lines += log.read_text(errors="replace").splitlines()
    errors = [line for line in lines if "error" in line.lower() or "fatal" in line.lower()]
    return (errors or lines or ["no message"])[-1].strip()


def _write_pids(cluster: Cluster, started: dict[str, tuple[int, str, int | None]]) -> None:
    (cluster.dir / PIDS).write_text(json.dumps(started, indent=1))


def _wait_idle(cluster: Cluster, nodes: list[str], timeout: float) -> None:
    deadline, states = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        try:
            states = parse.nodes(cluster.command("sinfo", "-h", "-N", "-o", "%N %T", timeout=10))
        except LabkitError:
            states = {}
        if states and all(states.get(n) == "idle" for n in nodes):
            return
        time.sleep(0.5)
    seen = ", ".join(f"{n} {states.get(n, 'missing')}" for n in nodes)
    raise LabkitError(f"the nodes were not idle within {timeout:g}s ({seen}); see {cluster.dir}/log/")


def down(cluster: Cluster, timeout: float = 20) -> str:
    """Cancel the cluster's jobs, then stop exactly the recorded daemons (slurmd, slurmctld, munged)."""
    alive = cluster.alive()
    if not alive:
        (cluster.dir / PIDS).unlink(missing_ok=True)
        return f"nothing running in {cluster.dir}"
    if "slurmctld" in alive:
        _cancel_all(cluster, timeout)
    order = sorted(alive, key=lambda name: (not name.startswith("slurmd "), name == "munged"))
    recorded = cluster.pids()
    for name in order:
        _stop(alive[name], recorded[name][1:], timeout)
    (cluster.dir / PIDS).unlink()
    return f"stopped {len(order)} processes (pids {' '.join(str(alive[n]) for n in order)})"


def _cancel_all(cluster: Cluster, timeout: float) -> None:
    """scancel every job of this cluster and wait until none is left, so no job step outlives slurmd."""
    try:
        ids = parse.queue(cluster.command("squeue", "-h", "-o", "%i", timeout=10))
        if ids:
            cluster.command("scancel", *map(str, ids), timeout=10)
        deadline = time.monotonic() + timeout
        while ids and time.monotonic() < deadline:
            time.sleep(0.5)
            ids = parse.queue(cluster.command("squeue", "-h", "-o", "%i", timeout=10))
    except LabkitError:
        pass  # slurmctld not answering: stopping the daemons is all that is left to do


def _stop(pid: int, identity: tuple[str, int | None], timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout`; only while the pid is still the recorded process
    (command line and start time)."""
    if _identity(pid) != identity:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _identity(pid) == identity:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.1)
