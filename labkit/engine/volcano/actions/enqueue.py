"""enqueue (pkg/scheduler/actions/enqueue): Pending PodGroups admitted to Inqueue."""

from __future__ import annotations

from labkit.engine.framework import (
    PriorityQueue,
    Session,
)
from labkit.engine.problem import (
    PodGroupPhase,
)


def enqueue(ssn: Session) -> None:
    """Admit Pending PodGroups: queues by QueueOrderFn, one job per turn by JobOrderFn; a job
    without minResources, or one every JobEnqueueable vote allows, becomes Inqueue."""
    queues = PriorityQueue(ssn.queue_order)
    jobs_by_queue: dict[int, PriorityQueue] = {}
    for job in ssn.jobs:
        if job.queue not in jobs_by_queue:
            jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order)
            queues.push(ssn.queues[job.queue])
        if job.is_pending():
            jobs_by_queue[job.queue].push(job)
    while not queues.empty():
        queue = queues.pop()
        jobs = jobs_by_queue[queue.index]
        if jobs.empty():
            continue
        job = jobs.pop()
        if job.min_resources is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.phase = PodGroupPhase.INQUEUE
        queues.push(queue)
