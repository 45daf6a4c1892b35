"""Chapter 3's checks: pods refused by the quota, the smallest GPU quota, LimitRange defaults."""

from __future__ import annotations

from ...course import admission, cases
from ..answers import integer, names
from .base import register


def _forbidden(table) -> list[str]:
    return table[table.verdict == "forbidden"].pod.tolist()


@register("ch03.q1", points=1)
def _forbidden_pods(answer: list[str]) -> tuple[bool, str]:
    answer = names(answer, "Pod 名列表")
    expected = _forbidden(admission.admit(cases.quota_burst()))
    return sorted(answer) == sorted(expected), f"被拒绝的 Pod 有 {len(expected)} 个，不是这 {len(answer)} 个"


@register("ch03.q2", points=2)
def _min_gpu_quota(answer: int) -> tuple[bool, str]:
    quota = integer(answer, "一个整数（GPU 张数）")
    if _forbidden(admission.admit(cases.quota_burst(gpu_quota=quota))):
        return False, f"配额 {quota} 仍会拒绝 Pod"
    return bool(_forbidden(admission.admit(cases.quota_burst(gpu_quota=quota - 1)))), "更小的配额也能全部接纳"


@register("ch03.q3", points=1)
def _clean_admitted(answer: int) -> tuple[bool, str]:
    table = admission.admit(cases.quota_burst(cpu_quota=36))
    expected = int((table.pod.str.startswith("c-clean") & (table.verdict == "admitted")).sum())
    count = integer(answer, "一个整数（Pod 个数）")
    return count == expected, "把 LimitRange 的默认值算进已用的 CPU 再数一遍"
