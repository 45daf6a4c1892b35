"""The reference engine: one Volcano scheduling session in plain Python, written to be read.

``run_session(problem, state)`` does what ``scheduler.runOnce`` does (pkg/scheduler/scheduler.go):

1. :func:`open_session` takes the snapshot (arrays -> NodeInfo/JobInfo/TaskInfo/QueueInfo) and
   calls every plugin's ``on_session_open`` in tier order, so they register their callbacks;
2. runs the configured actions in conf order (:data:`ACTIONS`);
3. :func:`close_session` lets plugins close (gang marks unready jobs unschedulable) and
   rewrites each PodGroup phase.

It returns :class:`~labkit.engine.problem.Decisions`: what was bound, pipelined and evicted, in
order, each with a reason, plus the state the cluster is in afterwards.

Determinism: where Volcano picks at random among equally scored nodes, or walks a Go map, we
take snapshot order (lowest node / task / job index first).
"""

from __future__ import annotations

from labkit.engine.framework import (
    COMPLETED_STATUSES,
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
    Action,
    Decisions,
    Placement,
    PodGroupPhase,
    Problem,
    State,
    TaskStatus,
)
from labkit.engine.resources import less_equal
from labkit.engine.volcano.plugins import PLUGINS

# --------------------------------------------------------------------------------------------
# Session open / close
# --------------------------------------------------------------------------------------------

def open_session(problem: Problem, state: State) -> Session:
    """framework.OpenSession: snapshot, then every plugin's OnSessionOpen in tier order."""
    ssn = Session(problem, state)
    for tier in ssn.tiers:
        for entry in tier:
            entry.plugin = PLUGINS[entry.kind]()
            entry.plugin.on_session_open(ssn, entry)
    return ssn


def close_session(ssn: Session) -> Decisions:
    """framework.CloseSession: plugins' OnSessionClose, then the PodGroup phase of every job
    (session.go getPodGroupPhase), then the resulting state."""
    for tier in ssn.tiers:
        for entry in tier:
            close = getattr(entry.plugin, "on_session_close", None)
            if close is not None:
                close(ssn)
    for job in ssn.jobs:
        job.phase = podgroup_phase(job)
    decisions = ssn.decisions
    decisions.pipelined = [Placement(t.index, t.node, *ssn.pipelined_by.get(t.index, ("", "")))
                           for t in ssn.tasks if t.status == TaskStatus.PIPELINED]
    decisions.state = _next_state(ssn)
    return decisions


def podgroup_phase(job: JobInfo) -> PodGroupPhase:
    """getPodGroupPhase: Unknown when running tasks coexist with an unschedulable gang; Running
    (or Completed) once Running/Bound/Succeeded/Failed + releasing tasks reach minMember;
    otherwise Inqueue stays Inqueue and anything else is Pending. Allocated and Binding tasks
    do not count yet."""
    if job.with_status(TaskStatus.RUNNING) and job.unschedulable:
        return PodGroupPhase.UNKNOWN
    scheduled = job.scheduled_task_num() + job.releasing_scheduled_task_num()
    if scheduled >= job.min_available:
        completed = job.count(COMPLETED_STATUSES)
        return PodGroupPhase.COMPLETED if scheduled == completed else PodGroupPhase.RUNNING
    return PodGroupPhase.INQUEUE if job.phase == PodGroupPhase.INQUEUE else PodGroupPhase.PENDING


def _next_state(ssn: Session) -> State:
    """The cluster after the session: dispatched tasks are Binding, evicted ones Releasing;
    everything the session only tentatively placed (Allocated without commit, Pipelined)
    is Pending again, because Volcano keeps no session state between cycles."""
    status, node = [], []
    for t in ssn.tasks:
        s, n = t.status, t.node
        if s in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            s, n = TaskStatus.PENDING, -1
        status.append(s)
        node.append(n)
    return State.from_tasks(ssn.problem, status, node, [j.phase for j in ssn.jobs],
                            now=ssn.now, cycle=ssn.cycle + 1, next_node=ssn.next_node)


def run_session(problem: Problem, state: State) -> Decisions:
    """One scheduling cycle: open, actions in conf order, close. (A kube-scheduler or Slurm policy
    runs its own actions on the same session objects: `families.run_session`.)"""
    ssn = open_session(problem, state)
    for action in ssn.actions:
        ACTIONS[Action(action)](ssn)
    return close_session(ssn)


# --------------------------------------------------------------------------------------------
# Shared pieces of the actions
# --------------------------------------------------------------------------------------------

MIN_NODES_TO_FIND = 100
MIN_PERCENTAGE_OF_NODES_TO_FIND = 5


def nodes_to_find(n_nodes: int) -> int:
    """CalculateNumOfFeasibleNodesToFind with the default options: every node up to 100
    nodes, else an adaptive 50% - n/125 (at least 5%, at least 100 nodes)."""
    if n_nodes <= MIN_NODES_TO_FIND:
        return n_nodes
    percentage = max(50 - n_nodes // 125, MIN_PERCENTAGE_OF_NODES_TO_FIND)
    return max(n_nodes * percentage // 100, MIN_NODES_TO_FIND)


class NodeScan:
    """util.PredicateHelper: finds feasible nodes for a task, remembering, per job and task
    role, the nodes that already failed a task of that role (the predicate error cache)."""

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.failed: dict[tuple[int, str], dict[int, str]] = {}

    def feasible(self, task: TaskInfo, nodes: list[NodeInfo], predicate) -> tuple[list[NodeInfo], dict[int, str]]:
        """PredicateNodes: scan ``nodes`` circularly from the session's rotating start, stop
        once more than enough feasible nodes were seen, and return (feasible, failures by
        node index). Volcano scans with 16 workers; we scan in order."""
        feasible: list[NodeInfo] = []
        failures: dict[int, str] = {}
        if not nodes:
            return feasible, failures
        wanted = nodes_to_find(len(nodes))
        cache = self.failed.setdefault((task.job, task.role), {}) if task.role else None
        start = self.ssn.next_node
        processed = 0
        for i in range(len(nodes)):
            node = nodes[(start + i) % len(nodes)]
            processed += 1
            failure = cache.get(node.index) if cache else None
            if failure is None:
                failure = predicate(task, node)
                if failure and cache is not None:
                    cache[node.index] = failure
            if failure:
                failures[node.index] = failure
                continue
            if len(feasible) == wanted:
                break
            feasible.append(node)
        self.ssn.next_node = (start + processed) % len(nodes)
        return feasible, failures


def allocate_predicate(ssn: Session, task: TaskInfo, node: NodeInfo) -> str | None:
    """allocate's predicate: the request fits FutureIdle, then PredicateForAllocateAction."""
    if not fits(task.request, node.future_idle()):
        return "unschedulable: insufficient resources"
    return ssn.predicate(task, node)


def preempt_predicate(ssn: Session, task: TaskInfo, node: NodeInfo) -> str | None:
    """PredicateForPreemptAction: only an UnschedulableAndUnresolvable failure drops a node;
    room is what the eviction loop makes."""
    failure = ssn.predicate(task, node)
    return failure if failure and failure.startswith("unresolvable") else None


def preempt_candidates(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """FilterOutUnschedulableAndUnresolvableNodesForTask, then the preempt predicate."""
    skip = ssn.jobs[task.job].fit_errors.get(task.index, set())
    nodes = [n for n in ssn.nodes if n.index not in skip]
    return NodeScan(ssn).feasible(task, nodes, lambda t, n: preempt_predicate(ssn, t, n))[0]


def _task_queue(ssn: Session, tasks) -> PriorityQueue:
    pq = PriorityQueue(ssn.task_order)
    for t in tasks:
        pq.push(t)
    return pq


def _reason(task: TaskInfo, what: str) -> str:
    return f"{what} for {task.name}"


# --------------------------------------------------------------------------------------------
# enqueue (actions/enqueue/enqueue.go)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# allocate (actions/allocate/allocate.go)
# --------------------------------------------------------------------------------------------

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
        worksheets[job.index] = _task_queue(ssn, pending)

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
        nodes, failures = scan.feasible(task, ssn.nodes, lambda t, n: allocate_predicate(ssn, t, n))
        if not nodes:
            job.record_fit_error(task, {n for n, why in failures.items() if why.startswith("unresolvable")})
            if job.need_continue_allocating():
                continue
            break
        node = _prioritize_nodes(ssn, task, nodes)
        if fits(task.request, node.idle):
            stmt.allocate(task, node, _reason(task, f"fits Idle on {node.name}"))
        else:
            stmt.pipeline(task, node, _reason(task, f"fits FutureIdle on {node.name}"))
        if ssn.job_ready(job):
            break
    if ssn.job_ready(job) or ssn.job_pipelined(job):
        return stmt
    stmt.discard()
    return None


def _prioritize_nodes(ssn: Session, task: TaskInfo, nodes: list[NodeInfo]) -> NodeInfo:
    """allocate prioritizeNodes: nodes where the task fits Idle beat nodes where it fits only
    FutureIdle (Idle + Releasing - Pipelined); within a group the best score wins."""
    idle = [n for n in nodes if fits(task.request, n.idle)]
    group = idle or [n for n in nodes if fits(task.request, n.future_idle())]
    return group[0] if len(group) == 1 else ssn.best_node(task, group)


# --------------------------------------------------------------------------------------------
# backfill (actions/backfill/backfill.go)
# --------------------------------------------------------------------------------------------

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
        ssn.allocate(task, node, "backfill", _reason(task, f"best-effort task placed on {node.name}"))


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


# --------------------------------------------------------------------------------------------
# preempt (actions/preempt/preempt.go)
# --------------------------------------------------------------------------------------------

def preempt(ssn: Session) -> None:
    """Intra-queue preemption. For each queue, each starving job (JobOrderFn) pops pending
    tasks while it is starving and evicts lower-ranked running tasks of *other jobs in the same
    queue* (see :func:`_preempt_task`). The job's statement is committed if the job is then
    pipelined, else discarded. Then, within each of those jobs, pending tasks may evict
    lower-priority running tasks of the same job."""
    preemptors: dict[int, PriorityQueue] = {}
    pending: dict[int, PriorityQueue] = {}
    starving: dict[int, list[JobInfo]] = {}
    for job in ssn.jobs:
        if job.is_pending() or ssn.job_valid(job) or not ssn.job_starving(job):
            continue
        preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        starving.setdefault(job.queue, []).append(job)
        pending[job.index] = _task_queue(ssn, job.with_status(TaskStatus.PENDING))
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
            tasks = _task_queue(ssn, job.with_status(TaskStatus.PENDING))
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
        candidates = [t for _, t in sorted(node.tasks.items()) if eligible(t)]
        victims = ssn.preemptable(preemptor, candidates) or []
        if not _victims_can_make_room(preemptor, node, victims):
            continue
        node_stmt = Statement(ssn, "preempt")
        ordered = ssn.victims_queue(victims, preemptor)
        preemptor_fits = _fits_on_node(ssn, queue, preemptor, node)
        while not ordered.empty() and not preemptor_fits:
            victim = ordered.pop()
            node_stmt.evict(victim, f"preempted by {preemptor.name}")
            preemptor_fits = _fits_on_node(ssn, queue, preemptor, node)
        if preemptor_fits:
            node_stmt.pipeline(preemptor, node, _reason(preemptor, f"preempted room on {node.name}"))
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


def _victims_can_make_room(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """util.ValidateVictims: FutureIdle plus everything the victims hold fits the task."""
    room = node.future_idle() + sum((v.request for v in victims), 0 * task.request)
    return fits(task.request, room)


def _fits_on_node(ssn: Session, queue, task: TaskInfo, node: NodeInfo) -> bool:
    """preemptorFitsOnNode: the queue allows it, FutureIdle holds it, predicates pass."""
    return (ssn.allocatable(queue, task) and fits(task.request, node.future_idle())
            and ssn.predicate(task, node) is None)


# --------------------------------------------------------------------------------------------
# reclaim (actions/reclaim/reclaim.go)
# --------------------------------------------------------------------------------------------

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
            pending[job.index] = _task_queue(ssn, job.with_status(TaskStatus.PENDING))

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
        reclaimees = [t for _, t in sorted(node.tasks.items())
                      if t.status == TaskStatus.RUNNING and t.preemptable
                      and ssn.jobs[t.job].queue != job.queue
                      and ssn.queues[ssn.jobs[t.job].queue].reclaimable]
        if not reclaimees:
            continue
        victims = ssn.reclaimable(task, reclaimees) or []
        if not _victims_can_make_room(task, node, victims):
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
        node_stmt.pipeline(task, node, _reason(task, f"reclaimed room on {node.name}"))
        stmt.merge(node_stmt)
        return


ACTIONS = {
    Action.ENQUEUE: enqueue,
    Action.ALLOCATE: allocate,
    Action.BACKFILL: backfill,
    Action.PREEMPT: preempt,
    Action.RECLAIM: reclaim,
}
"""Action implementations by kind (actions/factory.go)."""
