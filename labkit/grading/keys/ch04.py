"""Chapter 4's checks: who overtakes b under Volcano and under Slurm backfill; how long d may run (variant: c's run time);
which schedulers keep b on time and the idle node busy when d runs 100 s."""

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


POLICIES = ("volcano-shipped", "kube-default", "kube-coscheduling", "kueue", "slurm-builtin", "slurm-backfill")
"""The six schedulers section 4.4 compares (policy presets)."""


def _meets(policy: str, c_duration: int) -> bool:
    """With d running 100 s: b starts within 2 s of a's end, and some job submitted after b starts before it."""
    jobs = simulate(variants.four_jobs(policy, d_duration=100, c_duration=c_duration)).jobs.set_index("name")
    on_time = jobs.start["b"] <= jobs.end["a"] + 2
    used = any(jobs.submit[n] > jobs.submit["b"] and jobs.start[n] < jobs.start["b"] for n in jobs.index)
    return bool(on_time and used)


@register("ch04.q4", points=2)
def _chosen(answer: list[str], v: dict) -> tuple[bool, str]:
    answer = names(answer, "调度器名列表")
    unknown = sorted(set(answer) - set(POLICIES))
    if unknown:
        return False, f"不是第 4.4 节的调度器：{', '.join(unknown)}"
    expected = [p for p in POLICIES if _meets(p, v["c_duration"])]
    return sorted(answer) == sorted(expected), "d 跑 100 秒时，谁为 b 预留、谁又把空节点给了 d"
