"""Chapter 1's checks: a team's mean wait (variant: the team and the set-up), queue weights, the five
concepts. Each follows the run the student made: the slice, or the whole week (``week=True``, the lab's ``WEEK``)."""

from __future__ import annotations

import functools

from ... import metrics
from ...course import cases
from ...engine.simulate import simulate
from ..answers import Decimal, Unusable, integers
from .base import register


@functools.lru_cache(maxsize=16)
def _case_waits(tenancy: bool, weights: tuple[int, int, int] | None, policy: str | None,
                week: bool = False) -> dict[str, float]:
    """Mean wait per team (jobs not started by the horizon counted to it) of one run of the chapter-1
    slice, or of the week (cached: checks share runs)."""
    result = simulate(cases.case_study(tenancy=tenancy, weights=weights, week=week), policy=policy)
    waited = metrics.waited(result)
    return {team: float(waited[result.jobs.namespace == team].mean()) for team in cases.TEAMS}


def _week(week) -> bool:
    if not isinstance(week, bool):
        raise Unusable("WEEK 应为 True 或 False")
    return week


MINUTES = Decimal(0.1, "分钟")
"""Ex. 1.1's tolerance: 1.4's table rounds waits to 0.1 minute."""


@register("ch01.q1", points=1)
def _team_wait(answer: float, v: dict, week: bool = False) -> tuple[bool, str]:
    """The variant's team's mean wait (minutes) in the variant's set-up of 1.4: naive FIFO, or the
    tenancy set-up under the shipped policy."""
    waits = _case_waits(v["setup"] == "tenancy", None, None, _week(week))
    ok, why = MINUTES.judge(answer, waits[v["team"]] / 60)
    return ok, f"{why}（没启动的作业等待算到时间窗结束）"


@register("ch01.q2", points=2)
def _weights(answer: tuple[int, int, int], week: bool = False) -> tuple[bool, str]:
    weights = tuple(integers(answer, 3, "三个队列权重 (A, B, C)"))
    if min(weights) < 1:
        return False, "三个队列权重 (A, B, C) 都应 >= 1"
    week, policy = _week(week), "volcano-multitenant"
    tuned = _case_waits(True, weights, policy, week)
    if tuned["team-c"] >= _case_waits(True, None, policy, week)["team-c"]:
        return False, "团队 C 的等待没有比权重 5/3/2 时更短"
    return tuned["team-b"] < _case_waits(False, None, None, week)["team-b"], "团队 B 的等待比朴素 FIFO 时更长"


CONCEPTS = ("多租户", "调度", "资源分配", "优先级与抢占", "公平性")


def symptoms() -> dict[str, str]:
    """Exercise 1.3: symptom -> concept, in the chapter's terms: a namespace's ResourceQuota is the
    tenant's isolation boundary (多租户), a Volcano Queue's capability its share of the cluster (资源分配).
    The numbers are the case study's own (team A's queue capability, team C's GPU quota)."""
    scenario = cases.case_study(week=True)
    capability = int(float(scenario.queues[0].capability["nvidia.com/gpu"]))
    quota = int(float(scenario.tenants[2].resource_quota.hard["requests.nvidia.com/gpu"]))
    return {
        "团队 C 的一个作业出错占满内存，团队 B 的作业也跟着变慢": "多租户",
        f"团队 C 的 namespace 有 ResourceQuota，已用满 {quota} 张卡后，再创建要 GPU 的 Pod 被直接拒绝": "多租户",
        "一个 16 卡作业排队两小时，最后被放到了两台机器上": "调度",
        f"团队 A 的队列 capability 是 {capability} 张卡，A 再多提交的作业只能留在队列里": "资源分配",
        "团队 A 的新作业驱逐了团队 B 正在微调的作业": "优先级与抢占",
        "团队 B 提交得最多，却只拿到了 20% 的 GPU 时间": "公平性",
    }


@register("ch01.q3", points=1)
def _concepts(answer: dict, week: bool = False) -> tuple[bool, str]:
    if not isinstance(answer, dict):
        return False, "应为字典：现象 -> 概念"
    unknown = [v for v in answer.values() if v not in CONCEPTS]
    if unknown:
        return False, f"不是五个概念之一：{unknown[0]}"
    key = symptoms()
    wrong = sum(answer.get(s) != c for s, c in key.items())
    return wrong == 0, f"{len(key)} 个现象中有 {wrong} 个对应的概念不对"
