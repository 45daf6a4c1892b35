"""preempt (pkg/scheduler/actions/preempt): room made by evicting lower tasks, within a queue."""

from __future__ import annotations

from labkit.engine.framework import (
    PREEMPTABLE_STATUSES,
    JobInfo,
    NodeInfo,
    PriorityQueue,
    Session,
    Statement,
    TaskInfo,
    fits,
)
from labkit.engine.problem import (
    TaskStatus,
)
from labkit.engine.volcano.actions.util import preempt_candidates, reason, task_queue, victims_can_make_room


def preempt(ssn: Session) -> None:
    """Intra-queue preemption. For each queue, each starving job (JobOrderFn) pops pending
    tasks while it is starving and evicts lower-ranked running tasks of *other jobs in the same
    queue* (see :func:`_preempt_task`). The job's statement is committed if the job is then
    pipelined, else discarded. Then, within each of those jobs, pending tasks may evict
    lower-priority running tasks of the same job. A job with networkTopology never preempts
    (v1.15.1 skips it: "jobs containing networkTopology do not support preemption", issue 4374)."""
    preemptors: dict[int, PriorityQueue] = {}
    pending: dict[int, PriorityQueue] = {}
    starving: dict[int, list[JobInfo]] = {}
    for job in ssn.jobs:
        if job.is_pending() or ssn.job_valid(job) or not ssn.job_starving(job) or job.topology_tier >= 0:
            continue
        preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        starving.setdefault(job.queue, []).append(job)
        pending[job.index] = task_queue(ssn, job.with_status(TaskStatus.PENDING))
    queues = PriorityQueue(ssn.queue_order)
    for q in preemptors:
        queues.push(ssn.queues[q])

    while not queues.empty():
        queue = queues.pop()
        jobs = preemptors[queue.index]
        while not jobs.empty():
            job = jobs.pop()
            stmt = Statement(ssn, "preempt")
            while ssn.job_starving(job) and not pending[job.index].empty():
                preemptor = pending[job.index].pop()
                ssn.attempt("preempt", preemptor)
                _preempt_task(ssn, stmt, preemptor, lambda t, p=preemptor, j=job: (
                    ssn.jobs[t.job].queue == j.queue and t.job != p.job))
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
        for job in starving[queue.index]:
            tasks = task_queue(ssn, job.with_status(TaskStatus.PENDING))
            while not tasks.empty():
                preemptor = tasks.pop()
                stmt = Statement(ssn, "preempt")
                if not _preempt_task(ssn, stmt, preemptor, lambda t, p=preemptor: t.job == p.job):
                    stmt.discard()
                    break
                stmt.commit()


def _preempt_task(ssn: Session, stmt: Statement, preemptor: TaskInfo, same_scope) -> bool:
    """preempt.go normalPreempt: visit feasible nodes in descending score; on each, ask the
    Preemptable vote for victims among the node's Running/Bound preemptable tasks in scope,
    evict them in victim order until the preemptor fits (Allocatable, FutureIdle, predicates)
    and pipeline it there. A node that never fits is rolled back."""
    if preemptor.preempt_never:
        return False
    job = ssn.jobs[preemptor.job]
    queue = ssn.queues[job.queue]

    def eligible(t: TaskInfo) -> bool:
        return (t.status in PREEMPTABLE_STATUSES and t.preemptable
                and (not preemptor.best_effort or t.best_effort) and same_scope(t))

    for node in ssn.sorted_nodes(preemptor, preempt_candidates(ssn, preemptor)):
        candidates = [t for t in ssn.node_tasks(node) if eligible(t)]
        victims = ssn.preemptable(preemptor, candidates) or []
        if not victims_can_make_room(preemptor, node, victims):
            continue
        node_stmt = Statement(ssn, "preempt")
        ordered = ssn.victims_queue(victims, preemptor)
        preemptor_fits = _fits_on_node(ssn, queue, preemptor, node)
        while not ordered.empty() and not preemptor_fits:
            victim = ordered.pop()
            node_stmt.evict(victim, f"preempted by {preemptor.name}")
            preemptor_fits = _fits_on_node(ssn, queue, preemptor, node)
        if preemptor_fits:
            node_stmt.pipeline(preemptor, node, reason(preemptor, f"preempted room on {node.name}"))
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


def _fits_on_node(ssn: Session, queue, task: TaskInfo, node: NodeInfo) -> bool:
    """preemptorFitsOnNode: the queue allows it, FutureIdle holds it, predicates pass."""
    return (ssn.allocatable(queue, task) and fits(task.request, node.future_idle())
            and ssn.predicate(task, node) is None)
