"""The progress bar of a long run: jobs done out of jobs, with the simulated time; and the line
that says what a wait is for.

`progress_bar(progress, jobs)` turns `simulate`'s `progress` argument into the callback the
engines call: nothing for False, a tqdm bar for True (``tqdm.auto``: a widget in a notebook, text
on a terminal) that appears only once the run has taken a second, or the caller's own callable.
`waiting(what)` shows ``what`` with the time spent once a wait has taken :data:`DELAY` seconds
(a first run compiling the numba core), whatever `progress` says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[int, int, float], None]
"""(jobs done, jobs, simulated seconds)."""


DELAY = 2.0
"""Seconds a wait goes unannounced."""
JOIN_S = 1.0
"""Seconds the end of a wait gives its line to close."""


@contextmanager
def progress_bar(progress: bool | Progress, jobs: int, desc: str = "simulating",
                 delay: float = 1.0) -> Iterator[Progress | None]:
    """The callback for `progress` (see the module), closed when the run ends or is interrupted;
    the bar reads ``desc`` and appears after ``delay`` seconds."""
    if callable(progress):
        yield progress
        return
    if not progress:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=jobs, unit="job", delay=delay, desc=desc)

    def tell(done: int, total: int, now: float) -> None:
        bar.update(done - bar.n)
        bar.set_postfix_str(f"t={now / 3600:.1f}h", refresh=False)

    try:
        yield tell
    finally:
        bar.close()


@contextmanager
def waiting(what: str, delay: float | None = None) -> Iterator[None]:
    """While the body runs: once it has taken ``delay`` seconds (:data:`DELAY`), a line (a tqdm widget in a
    notebook) reading ``what`` and the time spent, updated every second from a thread (the body
    may hold the interpreter in long calls, such as numba compiling), closed when the body ends."""
    from tqdm.auto import tqdm

    over = threading.Event()

    def show() -> None:
        if over.wait(DELAY if delay is None else delay):
            return
        bar = tqdm(total=None, desc=what, bar_format="{desc}: {elapsed}", leave=False)
        try:
            while not over.wait(1.0):
                bar.refresh()
        finally:
            bar.close()

    thread = threading.Thread(target=show, name="labkit-waiting", daemon=True)
    thread.start()
    try:
        yield
    finally:
        over.set()
        thread.join(JOIN_S)  # the line is a courtesy: a display that does not answer never holds the run
