"""Chapter 3's checks: pods refused by the quota, the smallest GPU quota (variant: the burst's jobs and
GPUs per job), LimitRange defaults, the longest run time that still lets a refused job in before the
vcjob controller gives up."""

from __future__ import annotations

from ...course import cases
from ...engine.simulate import simulate
from ..answers import integer, names
from .base import register


def _forbidden(scenario) -> list[str]:
    """The pods the API server refused when the vcjob controller created them (the run's FailedCreate)."""
    events = simulate(scenario).events
    return list(dict.fromkeys(events[events.kind == "Rejected"].task.str.split("/").str[-1]))


@register("ch03.q1", points=1)
def _forbidden_pods(answer: list[str]) -> tuple[bool, str]:
    answer = names(answer, "Pod 名列表")
    expected = _forbidden(cases.quota_burst())
    if len(answer) != len(expected):
        return False, f"被拒绝的 Pod 有 {len(expected)} 个，不是这 {len(answer)} 个"
    return sorted(answer) == sorted(expected), "个数对了，名字不对：要的是 Pod 名（<作业>-<任务>-<序号>，如 c-eval-0-worker-0），不是作业名"


@register("ch03.q2", points=2)
def _min_gpu_quota(answer: int, v: dict) -> tuple[bool, str]:
    quota = integer(answer, "一个整数（GPU 张数）")
    if quota < 1:
        return False, "配额至少 1 张卡"
    if _forbidden(cases.quota_burst(gpu_quota=quota, jobs=v["jobs"], gpus=v["gpus"])):
        return False, f"配额 {quota} 仍会拒绝 Pod"
    return (bool(_forbidden(cases.quota_burst(gpu_quota=quota - 1, jobs=v["jobs"], gpus=v["gpus"]))),
            "更小的配额也能全部接纳")


@register("ch03.q3", points=1)
def _clean_admitted(answer: int) -> tuple[bool, str]:
    expected = 2 - sum(pod.startswith("c-clean") for pod in _forbidden(cases.quota_burst(cpu_quota=36)))
    count = integer(answer, "一个整数（Pod 个数）")
    return count == expected, "把 LimitRange 的默认值算进已用的 CPU 再数一遍"


def _eval_4_runs(duration: int) -> bool:
    """Whether c-eval-4 of the default burst, every job running `duration` seconds, ever starts."""
    jobs = simulate(cases.quota_burst(duration=duration)).jobs.set_index("name")
    return bool(jobs.start.notna()["c-eval-4"])


@register("ch03.q4", points=2)
def _longest_duration(answer: int) -> tuple[bool, str]:
    duration = integer(answer, "一个整数（秒）")
    if not 1 <= duration <= 36_000:
        return False, "运行时间应在 1 到 36000 秒之间"
    if not _eval_4_runs(duration):
        return False, f"作业跑 {duration} 秒时，c-eval-4 在配额腾出之前就被终止了"
    return not _eval_4_runs(duration + 1), "再长一点，c-eval-4 也还赶得上控制器的某一次重试"
