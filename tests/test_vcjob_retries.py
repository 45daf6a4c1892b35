"""The vcjob controller and the namespace admission under Volcano: a pod the ResourceQuota refuses
fails the job's sync, which the controller requeues rate-limited (5 ms, doubling) at most
--max-requeue-num times before it terminates the job (pkg/controllers/job/job_controller.go
handleJobError); a pod outside the LimitRange's min/max is refused by name (not simulated)."""

from __future__ import annotations

import math

import pytest

import labkit
from labkit import diagnose, spec
from labkit.course import cases
from labkit.engine.clock import MAX_REQUEUE, REQUEUE_DELAY


def retries(refused_at: float) -> list[float]:
    """The instants the controller syncs the job again after a refusal at `refused_at`."""
    return [refused_at + REQUEUE_DELAY * (2 ** k - 1) for k in range(1, MAX_REQUEUE + 1)]


def short_burst(seconds: int) -> spec.Scenario:
    """ch. 3's burst with evaluation jobs of `seconds`."""
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    for job in data["jobs"]:
        job["duration"] = seconds
    return spec.validate(data)


def test_a_refused_job_is_terminated_after_the_retry_limit():
    """The quota frees after an hour: c-eval-4's sync fails 16 times, the last at the 15th requeue."""
    result = labkit.simulate(cases.quota_burst())
    job = result.jobs.set_index("name").loc["c-eval-4"]
    assert job.state == "Terminated" and math.isnan(job.start)
    assert job.end == pytest.approx(retries(job.submit)[-1])
    why = diagnose.explain(result, "c-eval-4", at=job.end + 1)
    assert (why.reason, why.message) == ("Terminated", "Job failed on action SyncJob for retry limit reached")
    events = diagnose.get_events(result, "c-eval-4")
    assert events.REASON.tolist() == ["Unschedulable", "FailedCreate", "ExecuteAction"]


def test_a_refused_job_starts_at_the_first_retry_after_the_quota_frees():
    """Jobs of 60 s: c-eval-0 ends at 61 s and frees 4 GPUs of quota; c-eval-4's pod is created at the
    controller's next retry, not at once, and bound by the session after it."""
    result = labkit.simulate(short_burst(60))
    jobs = result.jobs.set_index("name")
    freed = jobs.end["c-eval-0"]
    created = next(t for t in retries(jobs.submit["c-eval-4"]) if t >= freed)
    assert jobs.state["c-eval-4"] == "Completed"
    assert jobs.start["c-eval-4"] == math.ceil(created)  # sessions every second
    assert created - freed > 20  # the backoff, not the quota, decides when


def test_queue_capability_keeps_the_podgroup_pending_without_pods():
    """The same 16 GPUs as a Queue capability: c-eval-4's PodGroup stays Pending (proportion's vote), no pod
    is created, and it runs once the queue has room: the session that enqueues it, then the next binds."""
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["tenants"][0].pop("resourceQuota")
    data["queues"][0]["capability"] = {"nvidia.com/gpu": 16}
    result = labkit.simulate(spec.validate(data))
    jobs = result.jobs.set_index("name")
    why = diagnose.explain(result, "c-eval-4", at=600)
    assert (why.phase, why.message) == ("Pending", "queue resource quota insufficient: insufficient nvidia.com/gpu")
    assert jobs.enqueue["c-eval-4"] == jobs.end["c-eval-0"] and jobs.start["c-eval-4"] == jobs.enqueue["c-eval-4"] + 1
    assert not (result.events.kind == "Rejected").any()


def test_limit_range_max_is_refused_by_name():
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["jobs"][0]["tasks"][0]["resources"]["nvidia.com/gpu"] = 16
    data["cluster"]["pools"][0]["resources"]["nvidia.com/gpu"] = 16
    with pytest.raises(labkit.errors.SpecError, match=r"jobs\[0\]\.tasks\[0\]\.resources\.nvidia\.com/gpu: .*maximum "
                       r"nvidia\.com/gpu usage per Container is 8, but limit is 16"):
        labkit.simulate(spec.validate(data))
