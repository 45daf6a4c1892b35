"""Chapter 4's checks: who overtakes b under Volcano and under Slurm backfill; how long d may run (variant: c's run time)."""

from __future__ import annotations

from ...course import variants
from ...engine.simulate import simulate
from ..answers import integer, names
from .base import register


def _starts(c_duration: int, d_duration: int | None = None) -> dict[str, float]:
    jobs = simulate(variants.four_jobs(d_duration=d_duration, c_duration=c_duration)).jobs
    return dict(zip(jobs.name, jobs.start))


def _overtaking(policy: str, c_duration: int) -> list[str]:
    """Jobs of the four-job workload submitted after b that start before it."""
    jobs = simulate(variants.four_jobs(policy, c_duration=c_duration)).jobs.set_index("name")
    return [n for n in jobs.index if jobs.submit[n] > jobs.submit["b"] and jobs.start[n] < jobs.start["b"]]


@register("ch04.q1", points=1)
def _overtook(answer: list[str], v: dict) -> tuple[bool, str]:
    answer = names(answer)
    return sorted(answer) == sorted(_overtaking("volcano-shipped", v["c_duration"])), "对照各作业与 b 的提交、启动时间"


@register("ch04.q3", points=1)
def _backfilled(answer: list[str], v: dict) -> tuple[bool, str]:
    answer = names(answer)
    return (sorted(answer) == sorted(_overtaking("slurm-backfill", v["c_duration"])),
            "只有能在 b 的预留开始前结束的作业才能插队")


def _c_first_b_on_time(c_duration: int, d_duration: int, b_start: float) -> bool:
    starts = _starts(c_duration, d_duration)
    return starts["c"] < starts["b"] and starts["b"] <= b_start


@register("ch04.q2", points=2)
def _longest_d(answer: int, v: dict) -> tuple[bool, str]:
    longest = integer(answer, "一个整数（秒）")
    if longest < 1:
        return False, "运行时间至少 1 秒"
    c, b_start = v["c_duration"], _starts(v["c_duration"])["b"]
    if not _c_first_b_on_time(c, longest, b_start):
        return False, f"d 运行 {longest} 秒时，c 不能在 b 之前启动，或 b 被推迟"
    return not _c_first_b_on_time(c, longest + 1, b_start), "d 再长一些也仍然满足条件"
