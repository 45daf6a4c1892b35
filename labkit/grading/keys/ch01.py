"""Chapter 1's checks: the case study's slowest team, queue weights, the five concepts."""

from __future__ import annotations

import functools

from ...course import cases
from ...engine.simulate import simulate
from ..answers import integers, text
from .base import register


@functools.lru_cache(maxsize=16)
def _case_waits(tenancy: bool, weights: tuple[int, int, int] | None, policy: str | None) -> dict[str, float]:
    """Mean wait per team of one run of the chapter-1 slice (cached: checks share runs)."""
    jobs = simulate(cases.case_study(tenancy=tenancy, weights=weights), policy=policy).jobs
    return {team: float(jobs[jobs.namespace == team].wait.mean()) for team in cases.TEAMS}


@register("ch01.q1", points=1)
def _slowest_team(answer: str) -> tuple[bool, str]:
    answer = text(answer, cases.TEAMS, "团队名")
    waits = _case_waits(False, None, None)
    slowest = max(waits, key=waits.get)
    return answer == slowest, f"{answer} 不是平均等待最长的团队"


@register("ch01.q2", points=2)
def _weights(answer: tuple[int, int, int]) -> tuple[bool, str]:
    weights = tuple(integers(answer, 3, "三个队列权重 (A, B, C)"))
    if min(weights) < 1:
        return False, "三个队列权重 (A, B, C) 都应 >= 1"
    policy = "volcano-multitenant"
    tuned = _case_waits(True, weights, policy)
    if tuned["team-c"] >= _case_waits(True, None, policy)["team-c"]:
        return False, "团队 C 的等待没有比权重 5/3/2 时更短"
    return tuned["team-b"] < _case_waits(False, None, None)["team-b"], "团队 B 的等待比朴素 FIFO 时更长"


CONCEPTS = ("多租户", "调度", "资源分配", "优先级与抢占", "公平性")
SYMPTOMS = {
    "团队 C 的一个作业出错占满内存，团队 B 的作业也跟着变慢": "多租户",
    "一个 16 卡作业排队两小时，最后被放到了两台机器上": "调度",
    "团队 A 的 namespace 最多只能申请 192 张 GPU": "资源分配",
    "团队 A 的新作业驱逐了团队 B 正在微调的作业": "优先级与抢占",
    "团队 B 提交得最多，却只拿到了 20% 的 GPU 时间": "公平性",
}


@register("ch01.q3", points=1)
def _concepts(answer: dict) -> tuple[bool, str]:
    if not isinstance(answer, dict):
        return False, "应为字典：现象 -> 概念"
    unknown = [v for v in answer.values() if v not in CONCEPTS]
    if unknown:
        return False, f"不是五个概念之一：{unknown[0]}"
    wrong = sum(answer.get(s) != c for s, c in SYMPTOMS.items())
    return wrong == 0, f"{len(SYMPTOMS)} 个现象中有 {wrong} 个对应的概念不对"
