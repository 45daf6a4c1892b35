"""Chapter 10's checks: a queue's deserved GPUs from proportion's water-filling (variant: weights and
requests), the GPUs left idle by proportion's deserved caps (variant), and when a job of the reclaiming
queue starts once the other queue is `reclaimable: false`."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from ... import metrics
from ...course import cases
from ...engine.simulate import simulate
from ..answers import Unusable, integer
from .base import register

TOTAL_GPUS = 32
"""queue_trio's cluster: 4 nodes x 8 GPUs."""


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise Unusable(f"应为{what}")
    return float(value)


def first_session(weights, gpus) -> dict:
    """queue -> {deserved, allocated} in GPUs as proportion set them in the trio's first sessions."""
    result = simulate(cases.queue_trio(tuple(weights), tuple(gpus)))
    table = metrics.queue_shares(result, times=np.array([0.0, 1.0]))
    deserved = table[table.time == 0.0].set_index("queue").deserved
    allocated = table[table.time == 1.0].set_index("queue").allocated
    return {q: {"deserved": float(deserved[q]), "allocated": float(allocated[q])} for q in cases.TEAMS}


@register("ch10.q1", points=2)
def _deserved_b(answer: float, v: dict) -> tuple[bool, str]:
    value = _number(answer, "一个数（GPU 张数，可以带小数）")
    want = first_session(v["weights"], v["gpus"])["team-b"]["deserved"]
    return abs(value - want) < 0.01, "按轮次注水：每轮按未满足队列的权重分剩余量，再用请求量封顶"


@register("ch10.q2", points=1)
def _idle(answer: int, v: dict) -> tuple[bool, str]:
    value = integer(answer, "一个整数（GPU 张数）")
    held = sum(q["allocated"] for q in first_session(v["weights"], v["gpus"]).values())
    return value == TOTAL_GPUS - held, "每个队列只能放到 allocated + 请求 <= deserved 为止，按作业大小取整"


@register("ch10.q3", points=1)
def _a1_start(answer: int) -> tuple[bool, str]:
    value = integer(answer, "一个整数（秒）")
    jobs = simulate(cases.reclaim_pair(False)).jobs.set_index("name")
    return value == int(jobs.start["a1"]), "team-b 不可回收时，a1 只能等 team-b 的作业自己结束"
