"""Per-student variants: an exercise's parameters drawn from a seed derived from the student's id.

Neighbours get different numbers, so a copied answer fails; the grader computes each expected value
on the student's own variant. The id comes from ``LABKIT_STUDENT`` (what `labkit grade` sets, from
the submission folder's name) or from the lab's first cell (``STUDENT = variants.student("...")``).
No id: the default variant, the first option of every parameter, which `solutions/` runs.

A chapter adopts variants in three steps: its options in `OPTIONS`, its first code cell
``STUDENT = variants.student("")`` and ``V = variants.params(N)``, and its scenario built from
``V[...]`` (in the notebook and in the chapter's key, which receives the same parameters).
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Any

from .. import spec
from ..spec import Scenario
from . import cases

ENV = "LABKIT_STUDENT"

OPTIONS: dict[int, dict[str, tuple[Any, ...]]] = {
    # ch. 1: ex. 1.1 asks one team's mean wait in one of the two set-ups of 1.4 (six distinct numbers)
    1: {"setup": ("naive", "tenancy"), "team": ("team-a", "team-b", "team-c")},
    # ch. 2: nodes in the fragmentation snapshot of ex. 2.1 (one 4-GPU resident each, tp8 waiting)
    2: {"nodes": (4, 5, 6, 7, 8)},
    # ch. 3: ex. 3.2's burst: evaluation jobs and GPUs per job (at most 28 GPUs, within the 4 x 8 cluster;
    # 7 x 8 CPU + the clean-up pods' 2 x 4 stay within the 64-CPU quota)
    3: {"jobs": (6, 5, 7), "gpus": (4, 2, 3)},
    # ch. 4: job c's run time (s) in the four-job workload; d must leave the free node before a ends
    4: {"c_duration": (20, 12, 14, 16, 18, 22, 24, 26, 28, 30)},
    # ch. 5: workers (one 8-GPU node each) per data-parallel job in the gang pair
    5: {"workers": (2, 3, 4)},
    # ch. 6: run-2's run time (min) in the queue order workload: how long the blocked head `big` waits under StrictFIFO
    6: {"resident_minutes": (60, 45, 50, 55, 65, 70, 75, 80, 90)},
    # ch. 7: the class marked globalDefault in the priority stream; batch jobs queued behind the stream
    7: {"default_class": ("batch", "none", "prod"), "batch_jobs": (6, 3, 4, 5, 7, 8)},
    # ch. 8: the preemptor's GPUs and ft's PriorityClass value in the victims snapshot; the lost-work budget (min)
    8: {"urgent_gpus": (2, 4, 6), "ft_priority": (500, 50), "lost_budget_min": (60, 30, 90, 150)},
    # ch. 9: the evaluation jobs' run time (s) in the three-limit burst, one per retry of the controller's
    # backoff c-eval-4 is created at (11, 21, 41, 82, 164 s: no two options share an answer); the
    # overcommit-factor of the wave
    9: {"duration": (90, 10, 20, 40, 60), "factor": (2.0, 1.25, 1.5, 1.75, 2.5, 3.0)},
    # ch. 10: the three queues' weights (a, b, c) and GPU requests (a, b, c, in 4-GPU jobs)
    10: {"weights": ((5, 3, 2), (4, 3, 1), (3, 2, 1), (6, 3, 1), (4, 2, 2), (5, 4, 1), (3, 3, 2)),
         "gpus": ((24, 16, 4), (20, 20, 4), (28, 12, 8), (16, 24, 4), (24, 20, 8), (20, 16, 8))},
    # ch. 11: job c1's time limit (min) in the backfill workload; c1 runs 35 min and must hold b's
    # reservation (2 + limit) before c2's end by its limit (30 + 60) once a has ended
    11: {"c1_limit": (60, 40, 45, 50, 55, 65, 70, 75, 80)},
    # ch. 12: team-a's 8-GPU training jobs arriving at 30 min in the cohort (`cases.cohort_borrowing`)
    12: {"a_jobs": (2, 1, 3)},
}

_typed = ""


def student(typed: str = "") -> str:
    """The student's id: ``LABKIT_STUDENT`` when set (grading sets it), else `typed`; prints which variant."""
    global _typed
    _typed = str(typed).strip()
    sid = current()
    print(f"学号：{sid}（练习参数由学号决定）" if sid else "学号：未设置（使用默认参数；设置 LABKIT_STUDENT 或在引号里填学号）")
    return sid


def current() -> str:
    """The id `student()` settled on (the environment wins), or "" for the default variant."""
    return os.environ.get(ENV, "").strip() or _typed


def seed(chapter: int, sid: str) -> int:
    """A stable seed for (chapter, student): the same on every machine and Python version."""
    return int.from_bytes(hashlib.sha256(f"labkit:ch{chapter:02d}:{sid}".encode()).digest()[:8], "big")


def params(chapter: int, sid: str | None = None) -> dict[str, Any]:
    """The chapter's parameters for student `sid` (default: `current()`); "" gives the default variant."""
    sid = current() if sid is None else sid
    options = OPTIONS.get(chapter, {})
    if not sid:
        return {name: values[0] for name, values in options.items()}
    rng = random.Random(seed(chapter, sid))
    return {name: rng.choice(values) for name, values in sorted(options.items())}


def _edit(scenario: Scenario, edit) -> Scenario:
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    edit(data)
    return spec.validate(data)


def four_jobs(policy: str = "volcano-shipped", d_duration: int | None = None, c_duration: int = 20) -> Scenario:
    """Chapter 4's workload (`cases.four_jobs`) with job c running `c_duration` seconds (the variant)."""
    def edit(data):
        next(j for j in data["jobs"] if j["name"] == "c")["duration"] = int(c_duration)
    return _edit(cases.four_jobs(policy, d_duration=d_duration), edit)


def gang_pair(min_available: int | None = None, workers: int = 2) -> Scenario:
    """Chapter 5's pair of data-parallel jobs (`cases.gang_pair`) with `workers` 8-GPU workers each, on
    `workers` nodes (the variant); `min_available` as there (default: all workers, Volcano's default)."""
    def edit(data):
        data["cluster"]["pools"][0]["count"] = int(workers)
        for job in data["jobs"]:
            job["tasks"][0]["replicas"] = int(workers)
            if min_available is not None:
                job["tasks"][0]["minAvailable"] = int(min_available)
    return _edit(cases.gang_pair(), edit)
