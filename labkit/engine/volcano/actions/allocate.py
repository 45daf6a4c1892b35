"""allocate (pkg/scheduler/actions/allocate): pending tasks placed on nodes, gang-wise."""

from __future__ import annotations

from labkit.engine.framework import (
    JobInfo,
    NodeInfo,
    PriorityQueue,
    Session,
    Statement,
    TaskInfo,
    fits,
)
from labkit.engine.problem import (
    Action,
    PodGroupPhase,
    TaskStatus,
)
from labkit.engine.volcano.actions.util import NodeScan, allocate_predicate, reason, task_queue


def allocate(ssn: Session) -> None:
    """Place pending tasks, one job per turn, round robin over queues.

    Each turn pops the first queue (an Overused queue is dropped for the rest of the action)
    and its first job, then tries the job's pending tasks in task order inside one statement.
    The statement is committed only if the job is ready (gang); a job that is only pipelined
    keeps its tentative placements for the rest of the cycle; otherwise it is discarded.
    After a commit the job goes back into its queue if it has tasks left, and the queue goes
    back into the queue heap after every turn, re-sorted by the live shares; under StrictFIFO a
    queue whose job did not become ready leaves the heap (head-of-line blocking)."""
    queues = PriorityQueue(ssn.queue_order)
    jobs_by_queue: dict[int, PriorityQueue] = {}
    worksheets: dict[int, PriorityQueue] = {}
    for job in ssn.jobs:
        if job.is_pending():
            if Action.ENQUEUE in ssn.actions:
                continue
            job.phase = PodGroupPhase.INQUEUE
        if ssn.job_valid(job):
            continue
        pending = [t for t in job.with_status(TaskStatus.PENDING) if not t.best_effort]
        if not pending:
            continue
        if job.queue not in jobs_by_queue:
            jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order)
            queues.push(ssn.queues[job.queue])
        jobs_by_queue[job.queue].push(job)
        worksheets[job.index] = task_queue(ssn, pending)

    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = jobs_by_queue[queue.index]
        if jobs.empty():
            continue
        job = jobs.pop()
        tasks = worksheets[job.index]
        stmt = _allocate_tasks(ssn, job, tasks)
        if stmt is not None and ssn.job_ready(job):
            stmt.commit()
            if len(tasks):
                jobs.push(job)
        elif ssn.strict_fifo:
            continue  # StrictFIFO: the queue's head did not fit, so the queue stops for this session
        queues.push(queue)


def _allocate_tasks(ssn: Session, job: JobInfo, tasks: PriorityQueue) -> Statement | None:
    """allocateResourcesForTasks: try tasks until the job is ready; keep the statement if the
    job ends ready or pipelined, else discard it."""
    queue = ssn.queues[job.queue]
    stmt = Statement(ssn, "allocate")
    scan = NodeScan(ssn)
    while not tasks.empty():
        task = tasks.pop()
        ssn.attempt("allocate", task)
        if not ssn.allocatable(queue, task):
            continue
        if job.task_has_fit_errors(task):
            job.record_fit_error(task)
            continue
        nodes, failures = _nominated(ssn, scan, task)
        if not nodes:
            nodes, failures = scan.feasible(task, ssn.nodes, lambda t, n: allocate_predicate(ssn, t, n))
        if not nodes:
            job.record_fit_error(task, {n for n, why in failures.items() if why.startswith("unresolvable")})
            if job.need_continue_allocating():
                continue
            break
        node = _prioritize_nodes(ssn, task, nodes)
        if fits(task.request, node.idle):
            stmt.allocate(task, node, reason(task, f"fits Idle on {node.name}"))
        else:
            stmt.pipeline(task, node, reason(task, f"fits FutureIdle on {node.name}"))
        if ssn.job_ready(job):
            break
    if ssn.job_ready(job) or ssn.job_pipelined(job):
        return stmt
    stmt.discard()
    return None


def _nominated(ssn: Session, scan: NodeScan, task: TaskInfo) -> tuple[list[NodeInfo], dict[int, str]]:
    """allocate.go: a pod nominated to a node by an earlier preemption (nominatedNodeName) tries
    that node first, alone, when its FutureIdle holds the request; ([], {}) otherwise."""
    n = -1 if ssn.nominated is None else int(ssn.nominated[task.index])
    if n < 0 or not fits(task.request, ssn.nodes[n].future_idle()):
        return [], {}
    return scan.feasible(task, [ssn.nodes[n]], lambda t, m: allocate_predicate(ssn, t, m))


def _prioritize_nodes(ssn: Session, task: TaskInfo, nodes: list[NodeInfo]) -> NodeInfo:
    """allocate prioritizeNodes: nodes where the task fits Idle beat nodes where it fits only
    FutureIdle (Idle + Releasing - Pipelined); within a group the best score wins."""
    idle = [n for n in nodes if fits(task.request, n.idle)]
    group = idle or [n for n in nodes if fits(task.request, n.future_idle())]
    return group[0] if len(group) == 1 else ssn.best_node(task, group)
