"""The local Slurm's lifecycle without starting it: missing packages, ports, pids, a cluster that is not up."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
from labkit.cli import main
from labkit.errors import LabkitError
from labkit.slurm import cluster as slurm_cluster
from labkit.slurm.cluster import Cluster, Ports, check_ports, down, free_ports, port_in_use
from labkit.slurm.conf import render, slurm_scenario

ROOT = Path(__file__).resolve().parents[1]


def _one_line(capsys, argv: list[str], text: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("labkit: error: ") and text in err, err


def test_missing_packages_name_the_apt_command(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(slurm_cluster, "program", lambda name: None if name in ("slurmctld", "munged") else name)
    _one_line(capsys, ["slurm", "up", "--state-dir", str(tmp_path)],
              "Slurm is not installed (no munged, slurmctld): apt-get install -y --no-install-recommends "
              "slurmctld slurmd munge slurm-client")
    _one_line(capsys, ["slurm", "run", str(ROOT / "examples" / "slurm-backfill.yaml"), "--state-dir", str(tmp_path)],
              "apt-get install -y --no-install-recommends slurmctld slurmd munge slurm-client")


def test_a_port_in_use_is_named():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert port_in_use(port)
        ports = Ports(port - 1, (port,))
        with pytest.raises(LabkitError, match=f"^port {port} \\(slurmd n-0\\) is in use on 127.0.0.1"):
            check_ports(ports, ["n-0"])
        block = free_ports(["n-0", "n-1"], first=port - 1)
        assert port not in (block.slurmctld, *block.slurmd) and block.slurmctld > port


def test_ports_are_read_back_from_the_state_dirs_slurm_conf(tmp_path):
    scenario, conf = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-backfill.yaml"))
    (tmp_path / "slurm.conf").write_text(render(scenario, conf, tmp_path, Ports.block(7100, 4))["slurm.conf"])
    assert Cluster(tmp_path).ports() == Ports(7100, (7101, 7102, 7103, 7104))
    assert Cluster(tmp_path / "none").ports() is None


def test_down_stops_only_the_recorded_processes(tmp_path):
    state = Cluster(tmp_path)
    (tmp_path / "run").mkdir()
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(61)"])
    try:
        cmd = Path(f"/proc/{ours.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        pids = {"munged": [ours.pid, cmd, slurm_cluster._start_time(ours.pid)],
                "slurmd n-0": [other.pid, "slurmd -N n-0", slurm_cluster._start_time(other.pid)]}  # other: not ours
        (tmp_path / "run" / "labkit.pids").write_text(json.dumps(pids))
        assert state.alive() == {"munged": ours.pid} and not state.running()
        assert down(state) == f"stopped 1 processes (pids {ours.pid})"
        assert ours.wait(timeout=10) is not None and other.poll() is None
        assert down(state) == f"nothing running in {tmp_path}"
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


def test_run_needs_a_running_cluster(tmp_path, capsys):
    if slurm_cluster.missing_programs():
        pytest.skip("Slurm is not installed: the missing-package message comes first")
    _one_line(capsys, ["slurm", "run", str(ROOT / "examples" / "slurm-backfill.yaml"), "--state-dir", str(tmp_path)],
              f"the local Slurm is not running in {tmp_path}: labkit slurm up --state-dir {tmp_path}")


def test_up_refuses_nodes_with_a_scenario_and_qos(tmp_path, capsys):
    _one_line(capsys, ["slurm", "up", str(ROOT / "examples" / "slurm-backfill.yaml"), "--nodes", "2",
                       "--state-dir", str(tmp_path)], "give --nodes or a scenario")
    _one_line(capsys, ["slurm", "up", "--nodes", "0", "--state-dir", str(tmp_path)], "--nodes must be >= 1")


def test_run_refuses_an_unknown_stop_condition(tmp_path):
    from labkit.slurm import run

    scenario, conf = slurm_scenario(labkit.load(ROOT / "examples" / "slurm-backfill.yaml"))
    with pytest.raises(LabkitError, match="^until: must be 'finished' or 'started', got 'ended'$"):
        run(scenario, conf, Cluster(tmp_path), until="ended")
