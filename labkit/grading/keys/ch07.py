"""Chapter 7's checks: the priority a job without priorityClassName gets (variant: which class is
globalDefault), the batch class's mean wait counted to the horizon under the prod stream (variant: how
many batch jobs), and when high-small starts once its class says `preemptionPolicy: Never`."""

from __future__ import annotations

from ...course import cases
from ...engine.simulate import simulate
from ...metrics import waited
from ..answers import integer
from .base import register


def default_priority(default_class: str) -> int:
    """batch-0's resolved priority when `default_class` ("none": no class) is the globalDefault one."""
    result = simulate(cases.priority_stream(global_default=None if default_class == "none" else default_class))
    return int(result.jobs.set_index("name").priority["batch-0"])


def batch_mean_wait(batch_jobs: int) -> float:
    """The batch jobs' mean `waited` (unstarted ones counted to the horizon) in the priority stream."""
    result = simulate(cases.priority_stream(batch_jobs=batch_jobs))
    return float(waited(result)[result.jobs.name.str.startswith("batch-")].mean())


def never_start() -> float:
    """high-small's start in the recorded priority-preempt run with its class set to preemptionPolicy Never."""
    return float(simulate(cases.priority_preempt(never=True)).jobs.set_index("name").start["high-small"])


@register("ch07.q1", points=1)
def _default_priority(answer: int, v: dict) -> tuple[bool, str]:
    value = integer(answer, "一个整数（优先级数值）")
    expected = default_priority(v["default_class"])
    return value == expected, "没有写 priorityClassName 的作业取 globalDefault 类的 value；没有这样的类时取 0"


@register("ch07.q2", points=2)
def _batch_mean_wait(answer: float, v: dict) -> tuple[bool, str]:
    value = integer(answer, "一个整数（秒，四舍五入）")
    expected = batch_mean_wait(v["batch_jobs"])
    return abs(value - expected) <= 1, "到模拟结束还没启动的作业要按等到结束计入（waited），不能丢掉"


@register("ch07.q3", points=1)
def _never_start(answer: float) -> tuple[bool, str]:
    value = integer(answer, "一个整数（秒）")
    return value == never_start(), "preemptionPolicy: Never 的作业不驱逐别人，只能等资源被释放"
