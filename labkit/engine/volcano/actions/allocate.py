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
from labkit.engine.hypernodes import NONE
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
        gradients = ssn.hyper_node_gradient(job, ssn.hypernodes.root) if job.topology_tier >= 0 else None
        if gradients is None:
            stmt = _allocate_tasks(ssn, job, tasks)
        else:
            stmt, tasks = _allocate_for_job(ssn, job, tasks, gradients)
            worksheets[job.index] = tasks
        if stmt is not None and ssn.job_ready(job):
            stmt.commit()
            if len(tasks):
                jobs.push(job)
        elif ssn.strict_fifo:
            continue  # StrictFIFO: the queue's head did not fit, so the queue stops for this session
        queues.push(queue)


def _allocate_for_job(ssn: Session, job: JobInfo, tasks: PriorityQueue,
                      gradients: list[list[int]]) -> tuple[Statement | None, PriorityQueue]:
    """allocateForJob for a job with networkTopology (hard, or soft made hard up to the cluster
    top): gradient by gradient (lowest tier first), the gang is tried inside each HyperNode on a
    copy of its worksheet and undone; the first gradient with a HyperNode where the job ends ready
    or pipelined wins, the best-scored such HyperNode (hyperNodeOrder; the first on a tie, where
    Volcano picks at random) gets the placements again, and the job's worksheet becomes what
    that try left. No HyperNode: nothing placed, the worksheet unchanged.

    allocateForSubJob runs the same search again inside each HyperNode for the job's one
    subJob; every HyperNode below the one tried failed in an earlier gradient, so it settles on
    the HyperNode itself, scored alone: it is not repeated here."""
    hn = ssn.hypernodes
    for gradient in gradients:
        solutions = []
        for h in gradient:
            job.fit_errors = {}
            left = tasks.clone()
            stmt = _allocate_tasks(ssn, job, left, [ssn.nodes[n] for n in hn.members[h]], h)
            if stmt is None or not stmt.operations:
                continue
            if ssn.job_ready(job) or ssn.job_pipelined(job):
                solutions.append((h, [(op, task, task.node, why) for op, task, why in stmt.operations], left))
            stmt.discard()
        if not solutions:
            continue
        scores = [ssn.hyper_node_score(job, [h])[0] for h, _, _ in solutions]
        h, operations, left = solutions[scores.index(max(scores))]
        stmt = Statement(ssn, "allocate")
        for op, task, node, why in operations:
            (stmt.allocate if op == "allocate" else stmt.pipeline)(task, ssn.nodes[node], why)
        job.allocated_hyper_node = hn.lca(job.allocated_hyper_node, h)
        return stmt, left
    return None, tasks


def _allocate_tasks(ssn: Session, job: JobInfo, tasks: PriorityQueue, nodes: list[NodeInfo] | None = None,
                    hyper_node: int = NONE) -> Statement | None:
    """allocateResourcesForTasks on ``nodes`` (every node by default; the members of
    ``hyper_node`` for a job with networkTopology): try tasks until the job is ready; keep the
    statement if the job ends ready or pipelined, else discard it. A failed pod's fit errors
    name the HyperNode; with networkTopology each pod is scored against the HyperNode the job
    holds so far (JobAllocatedHyperNode)."""
    queue = ssn.queues[job.queue]
    stmt = Statement(ssn, "allocate")
    scan = NodeScan(ssn)
    nodes = ssn.nodes if nodes is None else nodes
    allocated = job.allocated_hyper_node
    while not tasks.empty():
        task = tasks.pop()
        ssn.attempt("allocate", task)
        if not ssn.allocatable(queue, task):
            continue
        if job.task_has_fit_errors(task):
            job.record_fit_error(task)
            continue
        feasible, failures = _nominated(ssn, scan, task, nodes)
        if not feasible:
            feasible, failures = scan.feasible(task, nodes, lambda t, n: allocate_predicate(ssn, t, n))
        if not feasible:
            job.record_fit_error(task, {n for n, why in failures.items() if why.startswith("unresolvable")})
            job.fit_hyper_node = hyper_node if hyper_node != ssn.hypernodes.root else NONE
            if job.need_continue_allocating():
                continue
            break
        if job.topology_tier >= 0:
            task.job_allocated_hyper_node = allocated
        node = _prioritize_nodes(ssn, task, feasible)
        if fits(task.request, node.idle):
            stmt.allocate(task, node, reason(task, f"fits Idle on {node.name}"))
        else:
            stmt.pipeline(task, node, reason(task, f"fits FutureIdle on {node.name}"))
        if job.topology_tier >= 0:
            allocated = ssn.hypernodes.lca(ssn.hypernodes.of_node(node.index), allocated)
        if ssn.job_ready(job):
            break
    if ssn.job_ready(job) or ssn.job_pipelined(job):
        return stmt
    stmt.discard()
    return None


def _nominated(ssn: Session, scan: NodeScan, task: TaskInfo,
               nodes: list[NodeInfo]) -> tuple[list[NodeInfo], dict[int, str]]:
    """allocate.go: a pod nominated to a node by an earlier preemption (nominatedNodeName) tries
    that node first, alone, when its FutureIdle holds the request and it is among ``nodes`` (the
    HyperNode's members for a job with networkTopology); ([], {}) otherwise."""
    n = -1 if ssn.nominated is None else int(ssn.nominated[task.index])
    if n < 0 or not fits(task.request, ssn.nodes[n].future_idle()):
        return [], {}
    if nodes is not ssn.nodes and ssn.nodes[n] not in nodes:
        return [], {}
    return scan.feasible(task, [ssn.nodes[n]], lambda t, m: allocate_predicate(ssn, t, m))


def _prioritize_nodes(ssn: Session, task: TaskInfo, nodes: list[NodeInfo]) -> NodeInfo:
    """allocate prioritizeNodes: nodes where the task fits Idle beat nodes where it fits only
    FutureIdle (Idle + Releasing - Pipelined); within a group the best score wins."""
    idle = [n for n in nodes if fits(task.request, n.idle)]
    group = idle or [n for n in nodes if fits(task.request, n.future_idle())]
    return group[0] if len(group) == 1 else ssn.best_node(task, group)
