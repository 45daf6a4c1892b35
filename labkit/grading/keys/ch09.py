"""Chapter 9's checks: how long a job refused by a ResourceQuota waits (variant: the jobs' run time), how
many PodGroups the first enqueue lets in (variant: overcommit-factor), a Queue capability that keeps
team C inside its namespace quota without starving it."""

from __future__ import annotations

from ... import metrics
from ...course import cases
from ...engine.simulate import simulate
from ..answers import integer
from .base import register

WAVE_QUOTA = 16
"""Team C's namespace ResourceQuota (GPUs) in exercise 9.3."""


def rq_wait(duration: int, job: str = "c-eval-4") -> float:
    """`job`'s wait (s) under the ResourceQuota form of the three-limit burst with jobs of `duration` s."""
    jobs = simulate(cases.quota_limit("resourcequota", duration=duration)).jobs.set_index("name")
    return float(jobs.loc[job, "wait"])


def first_inqueue(factor: float) -> int:
    """PodGroups the wave's first session (t=0) makes Inqueue under `overcommit-factor` `factor`."""
    return int((simulate(cases.overcommit_wave(factor)).jobs.enqueue == 0).sum())


def capability_outcome(capability: int, factor: float) -> tuple[int, float]:
    """(team C's pods the ResourceQuota refuses, team C's peak GPUs running) in the wave with quota 16."""
    result = simulate(cases.overcommit_wave(factor, capability=capability, quota=WAVE_QUOTA))
    refused = int(((result.events.kind == "Rejected") & result.events.job.str.startswith("team-c/")).sum())
    used = metrics.usage(result, by="namespace")
    return refused, float(used[used.namespace == "team-c"].used.max())


@register("ch09.q1", points=1)
def _rq_wait(answer: int, v: dict) -> tuple[bool, str]:
    wait = integer(answer, "一个整数（秒）")
    return abs(wait - rq_wait(v["duration"])) < 0.5, "看 c-eval-4 的 Pod 是在控制器的第几次重试时建成的，而不是配额何时腾出来"


@register("ch09.q2", points=1)
def _first_inqueue(answer: int, v: dict) -> tuple[bool, str]:
    count = integer(answer, "一个整数（PodGroup 个数）")
    return count == first_inqueue(v["factor"]), "overcommit 之外，proportion 也在 enqueue 时投票"


@register("ch09.q3", points=2)
def _capability(answer: int, v: dict) -> tuple[bool, str]:
    capability = integer(answer, "一个整数（GPU 张数）")
    if capability < 0:
        return False, "capability 不能是负数"
    refused, peak = capability_outcome(capability, v["factor"])
    if refused:
        return False, f"仍有 {refused} 次 Pod 创建被 ResourceQuota 拒绝"
    if peak < WAVE_QUOTA:
        return False, f"团队 C 同时最多只跑到 {peak:g} 张卡，用不满自己的 {WAVE_QUOTA} 张配额"
    return True, ""
