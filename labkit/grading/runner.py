"""Inside the sandbox: run one notebook cell by cell in its own kernel, saving it after every cell.

``python runner.py IN OUT --cell-timeout S --notebook-timeout S --memory BYTES --nproc N``
sets hard resource limits (the kernel inherits them, no cell can raise them), executes IN and writes
OUT after each cell with ``metadata.labkit_run`` = {"cell": index reached, "stopped": code or null,
"detail": text}. The grader reads OUT whatever happens: a crash, a timeout or a kill still leaves
the cells before it.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

FILE_SIZE = 256 * 1024 * 1024


def limit(memory: int, nproc: int, cpu: int) -> None:
    """Hard limits for this process and the kernel it starts: writable memory, processes, CPU seconds, file size."""
    for name, value in ((resource.RLIMIT_DATA, memory), (resource.RLIMIT_NPROC, nproc),
                        (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, FILE_SIZE), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(name, (value, value))


def _save(nb, path: str, status: dict) -> None:
    nb.metadata["labkit_run"] = status
    tmp = f"{path}.part"
    with open(tmp, "w", encoding="utf-8") as f:
        nbformat.write(nb, f)
    os.replace(tmp, path)


def run(src: str, dst: str, cell_timeout: float, notebook_timeout: float) -> dict:
    nb = nbformat.read(src, as_version=4)
    status: dict = {"cell": -1, "stopped": None, "detail": ""}
    client = NotebookClient(nb, timeout=math.ceil(cell_timeout), kernel_name="python3", allow_errors=True,
                            startup_timeout=min(60, notebook_timeout), resources={"metadata": {"path": os.getcwd()}})
    _save(nb, dst, status)
    try:
        with client.setup_kernel():
            deadline = time.monotonic() + notebook_timeout  # the student's time starts with a ready kernel
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    status.update(stopped="notebook-timeout", cell=index)
                    break
                by_cell = cell_timeout <= left
                client.timeout = max(1, math.ceil(min(cell_timeout, left)))
                status["cell"] = index
                _save(nb, dst, status)
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    status["stopped"] = "cell-timeout" if by_cell else "notebook-timeout"
                    break
                except DeadKernelError as err:
                    status.update(stopped="kernel-died", detail=str(err)[:200])
                    break
                _save(nb, dst, status)
            else:
                status["cell"] = len(nb.cells)
    except (RuntimeError, OSError, ValueError) as err:  # the kernel would not start: a verdict, not a traceback
        status.update(stopped=status["stopped"] or "sandbox-error", detail=f"{type(err).__name__}: {err}"[:300])
    _save(nb, dst, status)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labkit.grading.runner")
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--cell-timeout", type=float, required=True)
    parser.add_argument("--notebook-timeout", type=float, required=True)
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--nproc", type=int, required=True)
    args = parser.parse_args(argv)
    limit(args.memory, args.nproc, int(args.notebook_timeout) + 5)
    run(args.src, args.dst, args.cell_timeout, args.notebook_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
