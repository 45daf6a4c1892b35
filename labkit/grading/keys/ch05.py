"""Chapter 5's checks: GPUs held by jobs that cannot train, the minAvailable that prevents it (variant:
workers per job), the pod shape that fits the fragmentation snapshot."""

from __future__ import annotations

from ...course import cases, steps, variants
from ...engine.simulate import cycle, simulate
from ..answers import integer
from .base import register


def _stalled_gpus(min_available: int | None, workers: int, at: float = 60.0) -> float:
    """GPUs held at `at` by jobs with a worker missing (data-parallel workers that cannot train)."""
    table = steps.workers(simulate(variants.gang_pair(min_available, workers)), at)
    return float(table[~table.can_train].gpus_held.sum())


@register("ch05.q1", points=1)
def _idle_held(answer: int, v: dict) -> tuple[bool, str]:
    held = integer(answer, "一个整数（GPU 张数）")
    return held == _stalled_gpus(1, v["workers"]), "把所有 worker 没到齐的作业占着的卡都算上"


@register("ch05.q2", points=2)
def _min_available(answer: int, v: dict) -> tuple[bool, str]:
    value = integer(answer, "一个整数（minAvailable）")
    if not 1 <= value <= v["workers"]:
        return False, f"minAvailable 应在 1 到每个作业的 worker 数 {v['workers']} 之间"
    stalled = _stalled_gpus(value, v["workers"])
    return stalled == 0, f"仍有 {stalled:g} 张卡被不能训练的作业占着"


@register("ch05.q3", points=1)
def _gpus_per_pod(answer: int) -> tuple[bool, str]:
    per_pod = integer(answer, "一个整数（每个 Pod 的卡数：8、4 或 2）")
    feasible = [16 // r for r in (2, 4, 8) if cycle(cases.shape_snapshot(r)).binds()]
    if per_pod not in feasible:
        return False, f"每 Pod {per_pod} 卡的 16 卡作业这一轮放不下"
    return per_pod == max(feasible), "更少、更大的 Pod 也放得下"
