"""Chapter 12's checks (variant: how many 8-GPU jobs team-a submits): which workloads team-a's reclaim
preempts, the largest lendingLimit that lets team-a's jobs within its nominal quota start without
preempting anyone, and team-c's preemption fields that let its high-priority evaluation job borrow at once."""

from __future__ import annotations

import math

from ...course import cases
from ...engine.simulate import simulate
from ..answers import Unusable, integer, names
from .base import register

POLICIES = {"reclaimWithinCohort": ("Never", "LowerPriority", "Any"), "borrowWithinCohort": ("Never", "LowerPriority")}


def preempted_by(result, team: str) -> list[str]:
    """`<namespace>/<name>` of the workloads whose Preempted condition names a workload of `team` as preemptor."""
    events = result.events
    preempted = events[(events.kind == "Preempted") & events.message.str.contains(f"(UID: {team}/", regex=False)]
    return sorted(set(preempted.job))


def starts_without_preempting(result, job: str) -> bool:
    """The workload `job` started, and no workload was preempted to make room for it."""
    events = result.events
    started = job in set(events[events.kind == "Started"].job)
    return started and not events[(events.kind == "Preempted")
                                  & events.message.str.contains(f"(UID: {job})", regex=False)].shape[0]


@register("ch12.q1", points=1)
def _reclaimed(answer: list[str], v: dict) -> tuple[bool, str]:
    answer = names(answer)
    expected = preempted_by(simulate(cases.cohort_borrowing(v["a_jobs"])), "team-a")
    return sorted(answer) == expected, "看 Preempted 事件里 preemptor path 为 /research/team-a 的那几条"


def within_nominal(a_jobs: int) -> list[str]:
    """team-a's jobs that fit in its nominalQuota together (each asks 8 GPUs), in submission order."""
    scenario = cases.cohort_borrowing(a_jobs)
    team_a = next(q for q in scenario.kueue.cluster_queues if q.name == "team-a")
    nominal = float(team_a.resource_groups[0].flavors[0].resources[0].nominal_quota)
    return [f"team-a/train-{i}" for i in range(min(a_jobs, int(nominal // 8)))]


def lender_jobs_free(lending_limit: int, a_jobs: int) -> bool:
    """Each of team-a's jobs within its nominal quota starts without preempting anyone."""
    result = simulate(cases.cohort_borrowing(a_jobs, a_lending_limit=lending_limit))
    return all(starts_without_preempting(result, job) for job in within_nominal(a_jobs))


@register("ch12.q2", points=2)
def _lending_limit(answer: int, v: dict) -> tuple[bool, str]:
    value = integer(answer, "一个整数（GPU 张数，8 的倍数）")
    if value not in (0, 8, 16):
        return False, "lendingLimit 取 0、8 或 16（team-a 的作业每个 8 卡，nominalQuota 16）"
    if not lender_jobs_free(value, v["a_jobs"]):
        return False, f"lendingLimit={value} 时 team-a 仍有配额内的作业要抢占别人才能启动"
    return value == 16 or not lender_jobs_free(value + 8, v["a_jobs"]), "还可以多借出一些：再借出 8 卡也不需要抢占"


@register("ch12.q3", points=1)
def _eval_borrows(answer: dict) -> tuple[bool, str]:
    if not isinstance(answer, dict) or set(answer) != set(POLICIES):
        raise Unusable("一个字典：{\"reclaimWithinCohort\": ..., \"borrowWithinCohort\": ...}")
    for field, allowed in POLICIES.items():
        if answer[field] not in allowed:
            raise Unusable(f"{field} 应为 {', '.join(allowed)} 之一")
    scenario = cases.cohort_borrowing(c_reclaim=answer["reclaimWithinCohort"], c_borrow=answer["borrowWithinCohort"])
    jobs = simulate(scenario).jobs.set_index("name")
    waited = jobs.start["eval-0"] - jobs.submit["eval-0"]
    if math.isnan(waited):
        return False, "eval-0 到模拟结束都没有启动"
    return waited <= 60, f"eval-0 等了 {waited:g} 秒才启动（要求提交后 60 秒内）"
