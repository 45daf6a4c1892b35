"""Chapter 8's checks: which jobs the preempt action evicts a pod from (variant: the preemptor's GPUs,
ft's priority), the longest checkpoint interval within a lost-work budget (variant: the budget), the
action that lets a higher-priority job of another queue in."""

from __future__ import annotations

from ...course import cases
from ...engine.simulate import cycle, simulate
from ..answers import integer, names, text
from .base import register

CHECKPOINT_CHOICES_MIN = (5, 10, 15, 20, 30, 45, 60, 90, 120)
"""The checkpoint intervals (minutes) exercise 8.2 chooses from."""

SHIPPED_ACTIONS = "enqueue, allocate, backfill"


def evicted_jobs(urgent_gpus: int, ft_priority: int) -> list[str]:
    """The jobs (names, in eviction order) that lose a pod in the victims snapshot's session."""
    session = cycle(cases.victims_snapshot(urgent_gpus, ft_priority))
    jobs = (session.problem.job_names[session.problem.task_job[e.task]] for e in session.decisions.evictions)
    return list(dict.fromkeys(job.split("/", 1)[1] for job in jobs))


def lost_work_min(interval_min: int) -> float:
    """pretrain's lost work (minutes) in the checkpoint case with that checkpoint interval."""
    jobs = simulate(cases.checkpoint_case(interval_min * 60)).jobs.set_index("name")
    return float(jobs.loc["pretrain", "lost_work"]) / 60


@register("ch08.q1", points=2)
def _victims(answer: list[str], v: dict) -> tuple[bool, str]:
    given = names(answer, "作业名列表（按驱逐顺序；没有被驱逐的就写 []）")
    if len(set(given)) != len(given):
        return False, "每个作业只写一次（按它第一次被驱逐的顺序），不是每个被驱逐的 Pod 写一次"
    expected = evicted_jobs(v["urgent_gpus"], v["ft_priority"])
    if set(given) != set(expected):
        return False, "逐个插件看投票：哪些 Pod 在第一层同时被 priority、gang、conformance 选中，腾出的卡够不够"
    return given == expected, "作业对了，顺序不对：受害者队列先驱逐作业顺序排在最后的（优先级最低的）"


@register("ch08.q2", points=2)
def _checkpoint(answer: int, v: dict) -> tuple[bool, str]:
    chosen = integer(answer, f"一个整数（分钟，取自 {list(CHECKPOINT_CHOICES_MIN)}）")
    if chosen not in CHECKPOINT_CHOICES_MIN:
        return False, f"请从 {list(CHECKPOINT_CHOICES_MIN)} 中选"
    budget = v["lost_budget_min"]
    lost = lost_work_min(chosen)
    if lost > budget:
        return False, f"间隔 {chosen} 分钟时 pretrain 丢失 {lost:g} 分钟的工作，超过预算 {budget} 分钟"
    best = max(c for c in CHECKPOINT_CHOICES_MIN if lost_work_min(c) <= budget)
    return chosen == best, "在预算内，但还有更长的间隔也满足预算（检查点写得越少，开销越小）"


@register("ch08.q3", points=1)
def _action(answer: str) -> tuple[bool, str]:
    chosen = text(answer, ("preempt", "reclaim"), "preempt 或 reclaim")
    run = simulate(cases.reclaim_case(f"{SHIPPED_ACTIONS}, {chosen}", a1_priority=1000)).jobs.set_index("name")
    first_b_end = run.loc[[n for n in run.index if n.startswith("b")], "end"].min()
    started = run.loc["a1", "start"]
    return bool(started < first_b_end), f"只加 {chosen} 时，a1 在 {started:g} s 才启动，要等到 team-b 的作业自己结束"
