"""A non-editable install works: the wheel built from the sources, installed in a fresh virtual environment,
runs chapter 4's lab (the one that reads examples/) from a folder outside the repository, so everything a
notebook reads must ship in the package. The venv reuses the installed dependencies (--system-site-packages)
and gets only the labkit wheel; the kernel must import that wheel's labkit, not the working tree's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "ch04_architectures.ipynb"
TIMEOUT = 1800


def _run(args: list, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=TIMEOUT, check=False, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_lab_runs_on_the_installed_wheel(tmp_path):
    source = tmp_path / "source"  # a copy, so that the build leaves no build/ or egg-info in the repository
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "labkit", source / "labkit", ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp_path / "dist", source])
    wheel = next((tmp_path / "dist").glob("labkit-*.whl"))

    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-installed", wheel])

    work = tmp_path / "student"  # no ../examples, no repository around it
    work.mkdir()
    nb = nbformat.read(LAB, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import labkit\nprint(labkit.__file__)"))
    nbformat.write(nb, work / LAB.name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([python, "-m", "nbconvert", "--to", "notebook", "--execute", "--output", "ran.ipynb",
          "--ExecutePreprocessor.timeout=1200", LAB.name], cwd=work, env=env)

    ran = nbformat.read(work / "ran.ipynb", as_version=4)
    errors = [o for c in ran.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    imported = Path(ran.cells[-1].outputs[0].text.strip())
    assert imported.is_relative_to(env_dir), f"the lab imported {imported}, not the wheel installed in {env_dir}"
