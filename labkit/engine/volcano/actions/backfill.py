"""backfill (pkg/scheduler/actions/backfill): best-effort tasks placed where they fit."""

from __future__ import annotations

from labkit.engine.framework import (
    PriorityQueue,
    Session,
    TaskInfo,
)
from labkit.engine.problem import (
    TaskStatus,
)
from labkit.engine.volcano.actions.util import NodeScan, reason


def backfill(ssn: Session) -> None:
    """Place BestEffort pending tasks (empty requests); BestEffort Pipelined tasks are
    un-pipelined and placed again. Order: queue, then job, then task."""
    for task in _backfill_tasks(ssn):
        ssn.attempt("backfill", task)
        nodes, failures = NodeScan(ssn).feasible(task, ssn.nodes, ssn.predicate)
        if not nodes:
            ssn.jobs[task.job].record_fit_error(
                task, {n for n, why in failures.items() if why.startswith("unresolvable")})
            continue
        node = nodes[0] if len(nodes) == 1 else ssn.best_node(task, nodes)
        ssn.allocate(task, node, "backfill", reason(task, f"best-effort task placed on {node.name}"))


def _backfill_tasks(ssn: Session) -> list[TaskInfo]:
    """pickUpPendingTasks."""
    queues = PriorityQueue(ssn.queue_order)
    jobs_by_queue: dict[int, PriorityQueue] = {}
    tasks_by_job: dict[int, PriorityQueue] = {}
    for job in ssn.jobs:
        if job.is_pending() or ssn.job_valid(job):
            continue
        for task in job.with_status(TaskStatus.PENDING):
            if task.best_effort:
                tasks_by_job.setdefault(job.index, PriorityQueue(ssn.task_order)).push(task)
        for task in job.with_status(TaskStatus.PIPELINED):
            if task.best_effort:
                ssn.un_pipeline(task)
                tasks_by_job.setdefault(job.index, PriorityQueue(ssn.task_order)).push(task)
        if job.index not in tasks_by_job:
            continue
        if job.queue not in jobs_by_queue:
            queues.push(ssn.queues[job.queue])
            jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order)
        jobs_by_queue[job.queue].push(job)
    ordered = []
    while not queues.empty():
        jobs = jobs_by_queue[queues.pop().index]
        while not jobs.empty():
            tasks = tasks_by_job[jobs.pop().index]
            while not tasks.empty():
                ordered.append(tasks.pop())
    return ordered
