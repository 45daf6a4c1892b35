"""reclaim (pkg/scheduler/actions/reclaim): room taken back from queues above their deserved."""

from __future__ import annotations

from labkit.engine.framework import (
    JobInfo,
    PriorityQueue,
    Session,
    Statement,
    TaskInfo,
)
from labkit.engine.problem import (
    TaskStatus,
)
from labkit.engine.resources import less_equal
from labkit.engine.volcano.actions.util import preempt_candidates, reason, task_queue, victims_can_make_room


def reclaim(ssn: Session) -> None:
    """Cross-queue reclaim. Queues by QueueOrderFn (Overused ones skipped); each starving job
    pops pending tasks while starving; a task whose queue passes the Preemptive gate takes
    Running preemptable tasks from *other, reclaimable queues* (see :func:`_reclaim_task`).
    The job's statement is committed if the job is pipelined, else discarded."""
    queues = PriorityQueue(ssn.queue_order)
    seen: set[int] = set()
    preemptors: dict[int, PriorityQueue] = {}
    pending: dict[int, PriorityQueue] = {}
    for job in ssn.jobs:
        if job.is_pending() or ssn.job_valid(job):
            continue
        if job.queue not in seen:
            seen.add(job.queue)
            queues.push(ssn.queues[job.queue])
        if ssn.job_starving(job):
            preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
            pending[job.index] = task_queue(ssn, job.with_status(TaskStatus.PENDING))

    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = preemptors.get(queue.index)
        while jobs is not None and not jobs.empty():
            job = jobs.pop()
            stmt = Statement(ssn, "reclaim")
            while ssn.job_starving(job) and not pending[job.index].empty():
                task = pending[job.index].pop()
                ssn.attempt("reclaim", task)
                if task.preempt_never or not ssn.preemptive(queue, task):
                    continue
                _reclaim_task(ssn, stmt, task, job)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
            if not jobs.empty():
                queues.push(queue)


def _reclaim_task(ssn: Session, stmt: Statement, task: TaskInfo, job: JobInfo) -> None:
    """reclaimForTask: on the first feasible node (snapshot order) where the Reclaimable vote
    yields victims that make room, evict them in victim order while the request does not fit
    what is available (FutureIdle plus what was evicted), then pipeline the task there."""
    for node in preempt_candidates(ssn, task):
        reclaimees = [t for t in ssn.node_tasks(node)
                      if t.status == TaskStatus.RUNNING and t.preemptable
                      and ssn.jobs[t.job].queue != job.queue
                      and ssn.queues[ssn.jobs[t.job].queue].reclaimable]
        if not reclaimees:
            continue
        victims = ssn.reclaimable(task, reclaimees) or []
        if not victims_can_make_room(task, node, victims):
            continue
        ordered = ssn.victims_queue(victims, task)
        available = node.future_idle()
        node_stmt = Statement(ssn, "reclaim")
        while not ordered.empty() and not less_equal(task.request, available):
            victim = ordered.pop()
            node_stmt.evict(victim, f"reclaimed by {task.name}")
            available = available + victim.request
        if not less_equal(task.request, available):
            node_stmt.discard()
            continue
        node_stmt.pipeline(task, node, reason(task, f"reclaimed room on {node.name}"))
        stmt.merge(node_stmt)
        return
