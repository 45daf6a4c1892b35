"""Chapter 6's checks: the mean wait of the jobs behind the blocked head under StrictFIFO and the head's
delay under BestEffortFIFO (variant: run-2's run time), the queue order policy that meets two goals."""

from __future__ import annotations

from ...course import cases, steps
from ...engine.simulate import simulate
from ..answers import integer, text
from .base import register

URGENT_MAX_WAIT = 300
"""Exercise 6.3: the urgent job must start within this many seconds of its submission."""


def _run(order: str, resident_minutes: int):
    return simulate(cases.queue_order(order, resident_minutes=resident_minutes))


def _head_start(order: str, resident_minutes: int) -> float:
    return float(_run(order, resident_minutes).jobs.set_index("name").start[cases.HEAD])


def behind_head_wait(resident_minutes: int) -> int:
    """Mean wait (s, rounded) of the jobs submitted after the head under fifo-strict."""
    return round(float(steps.head_of_line(_run("fifo-strict", resident_minutes), cases.HEAD).wait.mean()))


def head_delay(resident_minutes: int) -> int:
    """How much later (s) the head starts under fifo-besteffort than under fifo-strict."""
    return round(_head_start("fifo-besteffort", resident_minutes) - _head_start("fifo-strict", resident_minutes))


def meets_goals(order: str, resident_minutes: int) -> tuple[bool, str]:
    """Does `order` start the urgent job within URGENT_MAX_WAIT and let no other job start before the head?"""
    table = steps.head_of_line(_run(order, resident_minutes), cases.HEAD)
    urgent = float(table.wait[cases.URGENT])
    passed = sorted(n for n in table.index[table.overtook] if n != cases.URGENT)
    if urgent > URGENT_MAX_WAIT:
        return False, f"紧急作业 {cases.URGENT} 等了 {urgent:g} 秒，超过 {URGENT_MAX_WAIT} 秒"
    if passed:
        return False, f"{', '.join(passed)} 在 {cases.HEAD} 之前启动了"
    return True, ""


@register("ch06.q1", points=1)
def _behind_head(answer: int, v: dict) -> tuple[bool, str]:
    mean = integer(answer, "一个整数（秒）")
    return abs(mean - behind_head_wait(v["resident_minutes"])) <= 1, "对 big 之后提交的每个作业取 start - submit 再求平均"


@register("ch06.q2", points=1)
def _head_delay(answer: int, v: dict) -> tuple[bool, str]:
    delay = integer(answer, "一个整数（秒）")
    return abs(delay - head_delay(v["resident_minutes"])) <= 1, "比较两种策略下 big 的启动时间"


@register("ch06.q3", points=2)
def _order(answer: str, v: dict) -> tuple[bool, str]:
    order = text(answer, tuple(cases.QUEUE_ORDERS), "队列顺序策略的名字")
    return meets_goals(order, v["resident_minutes"])
