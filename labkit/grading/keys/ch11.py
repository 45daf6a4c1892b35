"""Chapter 11's checks: b's reservation once a has ended (variant: c1's time limit), the smallest
bf_window that keeps it, the time-limit overestimate from which b starts later than with exact limits."""

from __future__ import annotations

from ...course import cases, steps
from ...engine.simulate import simulate
from ..answers import Unusable, integer
from .base import register

BIG = "team-a/b"
ESTIMATES = (1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5)
"""The overestimate factors (time limit / run time) of exercise 11.3, as the chapter's curve samples them."""
MAX_WINDOW = 1440
"""slurm-backfill's bf_window (minutes): the default the smaller windows are compared with."""


def _b_start(c1_limit: int, bf_window: int | None = None, estimate: float | None = None) -> float:
    limits = None if estimate is not None else {"c1": c1_limit}
    jobs = simulate(cases.backfill_mix(limits=limits, bf_window=bf_window, estimate=estimate)).jobs
    return float(jobs.set_index("name").start["b"])


def reserved_when_a_ends(c1_limit: int) -> float:
    """The StartTime (minutes) the backfill pass at a's end plans for b."""
    run = simulate(cases.backfill_mix(limits={"c1": c1_limit}))
    a_end = float(run.jobs.set_index("name").end["a"])
    table = steps.reservations(run)
    return float(table[(table.job == BIG) & (table.time == a_end)].start.iloc[0]) / 60


def smallest_window(c1_limit: int) -> int:
    """The smallest bf_window (minutes) with which b starts as early as with 1440."""
    on_time = _b_start(c1_limit, MAX_WINDOW)
    return next(w for w in range(1, MAX_WINDOW + 1) if _b_start(c1_limit, w) <= on_time)


def first_late_estimate() -> float:
    """The smallest factor in ESTIMATES at which b starts later than with exact time limits."""
    exact = _b_start(0, estimate=1)
    return next(k for k in ESTIMATES if _b_start(0, estimate=k) > exact)


@register("ch11.q1", points=1)
def _reservation(answer: int, v: dict) -> tuple[bool, str]:
    minutes = integer(answer, "一个整数（分钟）")
    return minutes == reserved_when_a_ends(v["c1_limit"]), "b 要等 4 个节点同时空出：看仍在运行的作业按时间上限何时结束"


@register("ch11.q2", points=2)
def _window(answer: int, v: dict) -> tuple[bool, str]:
    window = integer(answer, "一个整数（分钟）")
    if not 1 <= window <= MAX_WINDOW:
        return False, f"bf_window 应在 1 到 {MAX_WINDOW} 分钟之间"
    if _b_start(v["c1_limit"], window) > _b_start(v["c1_limit"], MAX_WINDOW):
        return False, f"bf_window={window} 时 b 没有得到预留，被推迟了"
    return window == smallest_window(v["c1_limit"]), "更小的 bf_window 也能让 b 按时启动"


@register("ch11.q3", points=1)
def _estimate(answer: float) -> tuple[bool, str]:
    if isinstance(answer, bool) or not isinstance(answer, int | float) or answer not in ESTIMATES:
        raise Unusable(f"应为 {', '.join(f'{k:g}' for k in ESTIMATES)} 之一")
    return answer == first_late_estimate(), "对照曲线上 b 的启动时间与 k = 1 时的值"
