"""Under pytest-xdist (`-n 2`; `--dist loadgroup` from pyproject's addopts) each file runs whole on one
worker, and every test that starts the real local Slurm on one and the same worker (root conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = '''
def pytest_collection_finish(session):
    for item in session.items:
        mark = item.get_closest_marker("xdist_group")
        print("GROUP", item.nodeid, mark.args[0] if mark else "-", sep="\t")
'''


def groups(tmp_path: Path, *paths: str) -> dict[str, str]:
    """node id -> xdist group, as a serial collection (the worker's) marks them."""
    (tmp_path / "groupdump.py").write_text(DUMP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "groupdump", *paths],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("\t")[1:] for line in done.stdout.splitlines() if line.startswith("GROUP\t"))


def test_real_slurm_tests_share_one_group_and_every_other_file_is_its_own(tmp_path):
    marked = groups(tmp_path, "tests/test_slurm_real.py", "tests/test_ch06.py", "tests/test_slurm_cluster.py",
                    "solutions/ch11_backfill.ipynb", "labs/ch11_backfill.ipynb", "solutions/ch03_isolation.ipynb")
    slurm = {node for node, group in marked.items() if group == "real-slurm"}
    assert {node for node in marked if node.startswith("tests/test_slurm_real.py::")} <= slurm
    assert "tests/test_ch06.py::test_the_real_slurm_builtin_keeps_the_small_jobs_behind_big" in slurm
    assert {node for node in marked if "ch11_backfill.ipynb" in node} <= slurm  # its last section runs Slurm
    for node, group in marked.items():
        if node not in slurm:
            assert group == node.split("::", 1)[0], node  # the rest: one group per file
    assert any(node.startswith("solutions/ch03_isolation.ipynb::") for node in marked)
    assert not any(node.startswith(("tests/test_slurm_cluster.py", "solutions/ch03")) for node in slurm)


def test_a_bare_n_2_runs_the_real_slurm_tests_on_one_worker():
    """Two real-Slurm tests and one other under `-n 2`: the workers read `--dist loadgroup` from addopts,
    the real-Slurm tests go to the same worker (their node ids carry the group)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-v",
                           "tests/test_slurm_cluster.py::test_a_port_in_use_is_named",
                           "tests/test_slurm_real.py::test_up_twice_then_down_twice_stops_exactly_its_daemons",
                           "tests/test_slurm_real.py::test_a_port_in_use_is_one_line_naming_it"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    ran = {m[2]: m[1] for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|SKIPPED) (\S+)", done.stdout, re.MULTILINE)}
    slurm = {node: worker for node, worker in ran.items() if node.endswith("@real-slurm")}
    assert len(slurm) == 2 and len(set(slurm.values())) == 1, ran
    assert "tests/test_slurm_cluster.py::test_a_port_in_use_is_named@tests/test_slurm_cluster.py" in ran


def test_addopts_choose_loadgroup_and_ci_runs_serially():
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "--dist loadgroup" in addopts and "-n" not in addopts.split()  # a plain `pytest` (CI's) is serial
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("python3 -m pytest")
