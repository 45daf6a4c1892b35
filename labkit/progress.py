"""The progress bar of a long run: jobs done out of jobs, with the simulated time.

`progress_bar(progress, jobs)` turns `simulate`'s `progress` argument into the callback the
engines call: nothing for False, a tqdm bar for True (``tqdm.auto``: a widget in a notebook, text
on a terminal) that appears only once the run has taken a second, or the caller's own callable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[int, int, float], None]
"""(jobs done, jobs, simulated seconds)."""


@contextmanager
def progress_bar(progress: bool | Progress, jobs: int) -> Iterator[Progress | None]:
    """The callback for `progress` (see the module), closed when the run ends or is interrupted."""
    if callable(progress):
        yield progress
        return
    if not progress:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=jobs, unit="job", delay=1.0, desc="simulating")

    def tell(done: int, total: int, now: float) -> None:
        bar.update(done - bar.n)
        bar.set_postfix_str(f"t={now / 3600:.1f}h", refresh=False)

    try:
        yield tell
    finally:
        bar.close()
