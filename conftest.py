"""Every cold numba core compiles in the process that needs it (``labkit.engine.core.WHEN_COLD``),
in the tests and in the kernels nbval starts for the notebooks (they inherit this environment): no
test and no stored notebook output depends on whether a background compile or the reference engine
finishes first. The tests of that race (tests/test_cold.py) run it in subprocesses of their own.

Under pytest-xdist (``-n 2``; pyproject's addopts choose ``--dist loadgroup``, which the workers read
too) each file runs whole on one worker, as ``--dist loadfile`` would have it (a notebook's cells share
one kernel, a module's fixtures one process), and everything that starts the real local Slurm runs on
one and the same worker, one after another (`pytest_collection_modifyitems`). A serial run is untouched."""

import os
from pathlib import Path

import pytest

os.environ["LABKIT_COMPILE"] = "foreground"

REAL_SLURM = "real-slurm"
"""The xdist group of every test that starts the real local Slurm: the `slurm` mark, or a notebook
that calls ``require_slurm()`` before it brings up daemons (ch11's last section). Two at once on a
2-CPU machine share its CPUs with time-scaled jobs on real daemons, and were seen to fail."""


def _starts_slurm(path: Path, seen: dict[Path, bool]) -> bool:
    if path not in seen:
        seen[path] = path.suffix == ".ipynb" and "require_slurm()" in path.read_text(encoding="utf-8")
    return seen[path]


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the marks (it appends the group to the node id)
def pytest_collection_modifyitems(items):
    """Each item's ``xdist_group``: `REAL_SLURM`, else its file. The mark does nothing in a serial run."""
    seen: dict[Path, bool] = {}
    for item in items:
        real = item.get_closest_marker("slurm") is not None or _starts_slurm(Path(item.path), seen)
        item.add_marker(pytest.mark.xdist_group(REAL_SLURM if real else item.nodeid.split("::", 1)[0]))
