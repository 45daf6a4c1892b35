"""Chapter 2's checks: free vs feasible GPUs (variant: the snapshot's nodes), a placement that leaves room for tp8, a scoring strategy."""

from __future__ import annotations

from ...course import cases, steps
from ...engine.simulate import cycle, simulate
from ..answers import integers, text
from .base import register


@register("ch02.q1", points=1)
def _free_vs_feasible(answer: tuple[int, int], v: dict) -> tuple[bool, str]:
    table = steps.placement(cases.fragmentation_snapshot(nodes=v["nodes"]))
    tp8 = table[table.task.str.startswith("ml/tp8")]
    expected = (int(tp8.free_gpus.sum()), int((tp8["filter"] == "pass").sum()))
    free, feasible = integers(answer, 2, "（空闲 GPU 总数, 通过筛选的节点数）")
    if free != expected[0]:
        return False, "空闲 GPU 总数不对"
    return feasible == expected[1], "通过筛选的节点数不对"


@register("ch02.q2", points=2)
def _placement(answer: list[int]) -> tuple[bool, str]:
    nodes = 4
    placed = integers(answer, nodes, f"节点编号（0..{nodes - 1}，每个驻留作业一个）")
    if not all(0 <= n < nodes for n in placed):
        return False, f"节点编号应在 0..{nodes - 1} 之间，每个驻留作业一个"
    if max(placed.count(n) for n in placed) > 2:
        return False, "一个节点最多放两个 4 卡作业"
    binds = cycle(cases.fragmentation_snapshot(placed=placed)).binds()
    return "ml/tp8-worker-0" in binds, "这一轮会话里 tp8 仍然找不到节点"


@register("ch02.q3", points=1)
def _strategy(answer: str) -> tuple[bool, str]:
    strategy = text(answer, ("least", "most", "binpack"), "打分策略名")
    jobs = simulate(cases.fragmentation(strategy)).jobs
    wait = float(jobs.set_index("name").wait["tp8"])
    return wait < 60, f"在 {strategy} 下 tp8 仍要等 {wait:.0f} 秒"
