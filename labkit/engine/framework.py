"""The scheduling framework of the reference engine: session objects, statements and the rules
that combine plugin votes (pkg/scheduler/framework, pkg/scheduler/api in Volcano).

At session open the flat :class:`~labkit.engine.problem.Problem` arrays are turned into readable
objects, the way Volcano's cache snapshot builds ``JobInfo``/``TaskInfo``/``NodeInfo``/``QueueInfo``.
Plugins register callbacks on the :class:`Session`; actions call the session's combination
functions (``ssn.job_ready(job)``, ``ssn.preemptable(task, candidates)``, ...) which apply
exactly the vote rules of ``framework/session_plugins.go``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from labkit.engine.hypernodes import NONE, HyperNodes
from labkit.engine.problem import (
    ALLOCATED_STATUSES,
    Decisions,
    Eviction,
    Ext,
    Placement,
    PodGroupPhase,
    Problem,
    State,
    TaskStatus,
)
from labkit.engine.resources import less_equal

PERMIT, ABSTAIN, REJECT = 1, 0, -1
"""Plugin votes (plugins/util: Permit, Abstain, Reject)."""

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
"""api.PreemptableStatus: tasks that preempt may evict."""

SCHEDULED_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED})
"""api.ScheduledStatus: what counts towards a PodGroup being Running."""

COMPLETED_STATUSES = frozenset({TaskStatus.FAILED, TaskStatus.SUCCEEDED})
"""api.CompletedStatus."""


# --------------------------------------------------------------------------------------------
# Session objects (api/job_info.go, api/node_info.go, api/queue_info.go)
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class TaskInfo:
    """One pod. ``request`` is Resreq (incl. pods = 1); ``node`` is a node index or -1."""

    index: int
    name: str
    job: int
    role: str
    request: np.ndarray
    priority: int
    preemptable: bool
    preempt_never: bool
    best_effort: bool
    critical: bool
    name_index: int
    rank: int
    node_class: int
    status: TaskStatus
    node: int
    job_allocated_hyper_node: int = NONE
    """JobAllocatedHyperNode: the job's HyperNode so far in the allocate pass placing this task."""


@dataclass(eq=False)
class JobInfo:
    """One PodGroup with its tasks; counters follow api/job_info.go."""

    index: int
    name: str
    queue: int
    priority: int
    min_available: int
    min_task_member: dict[str, int]
    min_resources: np.ndarray | None
    rank: int
    creation: float
    sla_waiting: float | None
    phase: PodGroupPhase
    tasks: list[TaskInfo] = field(default_factory=list)
    allocated: np.ndarray | None = None
    fit_errors: dict[int, set[int]] = field(default_factory=dict)
    unschedulable: bool = False
    topology_tier: int = -1
    """networkTopology's highestTierAllowed after adjustNetworkTopologySpec (soft mode: the
    cluster-top tier); -1 = no networkTopology."""
    allocated_hyper_node: int = NONE
    """AllocatedHyperNode: the lowest HyperNode holding every allocated pod of the job."""
    fit_hyper_node: int = NONE
    """The HyperNode the last failed pod was tried in (FitErrors.SetHyperNode; NONE: the cluster)."""

    @property
    def task_min_available_total(self) -> int:
        return sum(self.min_task_member.values())

    def count(self, statuses) -> int:
        return sum(1 for t in self.tasks if t.status in statuses)

    def with_status(self, status: TaskStatus) -> list[TaskInfo]:
        return [t for t in self.tasks if t.status == status]

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """JobInfo.UpdateTaskStatus: move the task and keep ``allocated`` in step."""
        if task.status in ALLOCATED_STATUSES:
            self.allocated = self.allocated - task.request
        task.status = status
        if status in ALLOCATED_STATUSES:
            self.allocated = self.allocated + task.request

    def is_pending(self) -> bool:
        return self.phase in (PodGroupPhase.PENDING, PodGroupPhase.UNSET)

    def ready_task_num(self) -> int:
        return self.count(ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED})

    def waiting_task_num(self) -> int:
        return self.count({TaskStatus.PIPELINED})

    def pending_best_effort_task_num(self) -> int:
        return sum(1 for t in self.with_status(TaskStatus.PENDING) if t.best_effort)

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort_task_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return (self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort_task_num()
                >= self.min_available)

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def valid_task_num(self) -> int:
        return self.count(ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING})

    def scheduled_task_num(self) -> int:
        return self.count(SCHEDULED_STATUSES)

    def releasing_scheduled_task_num(self) -> int:
        return sum(1 for t in self.with_status(TaskStatus.RELEASING) if t.node >= 0)

    def _roles_meet_minimum(self, counted: Callable[[TaskInfo], bool]) -> bool:
        """Every role with a minimum has at least that many tasks passing ``counted``.
        Skipped (true) when minAvailable < sum of role minima, as Volcano does."""
        if self.min_available < self.task_min_available_total:
            return True
        have: dict[str, int] = {}
        for t in self.tasks:
            if counted(t):
                have[t.role] = have.get(t.role, 0) + 1
        return all(have.get(role, 0) >= n for role, n in self.min_task_member.items() if n > 0)

    def check_task_valid(self) -> bool:
        valid = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING}
        return self._roles_meet_minimum(lambda t: t.status in valid)

    def check_task_ready(self) -> bool:
        return self._roles_meet_minimum(lambda t: t.status in ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED})

    def check_task_pipelined(self) -> bool:
        occupied = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED}
        return self._roles_meet_minimum(
            lambda t: t.status in occupied or (t.status == TaskStatus.PENDING and t.best_effort))

    def record_fit_error(self, task: TaskInfo, unresolvable: set[int] = frozenset()) -> None:
        """NodesFitErrors[task]: the task found no node; ``unresolvable`` are the nodes that
        failed it for good (selector, taints), which preempt and reclaim then skip."""
        self.fit_errors[task.index] = set(unresolvable)

    def fit_failed_roles(self) -> set[str]:
        return {t.role for t in self.tasks if t.index in self.fit_errors}

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        """JobInfo.TaskHasFitErrors: a task of the same (non-empty) role already failed."""
        return bool(task.role) and task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        """JobInfo.NeedContinueAllocating: after a predicate failure, can the job still become
        ready with the remaining tasks?"""
        if self.min_available == len(self.tasks):
            return False
        failed = self.fit_failed_roles()
        if self.min_available < self.task_min_available_total:
            left = sum(1 for t in self.with_status(TaskStatus.PENDING) if t.role not in failed)
            return self.ready_task_num() + left >= self.min_available
        allocated: dict[str, int] = {}
        for t in self.tasks:
            if t.status in ALLOCATED_STATUSES or t.status == TaskStatus.SUCCEEDED:
                allocated[t.role] = allocated.get(t.role, 0) + 1
        return all(allocated.get(role, 0) >= self.min_task_member.get(role, 0)
                   for role in failed if self.min_task_member.get(role, 0) > 0)


@dataclass(eq=False)
class QueueInfo:
    """One queue. Capability/deserved/guarantee keep the Problem's NaN = "not named"."""

    index: int
    name: str
    weight: float
    priority: int
    parent: int
    reclaimable: bool
    open: bool
    rank: int
    capability: np.ndarray
    deserved: np.ndarray
    guarantee: np.ndarray


@dataclass(eq=False)
class NodeInfo:
    """One node's accounting (NodeInfo.AddTask/RemoveTask): Idle = allocatable - used;
    FutureIdle = Idle + Releasing - Pipelined."""

    index: int
    name: str
    allocatable: np.ndarray
    schedulable: bool
    used: np.ndarray
    releasing: np.ndarray
    pipelined: np.ndarray
    tasks: dict[int, TaskInfo] = field(default_factory=dict)
    pods: set[int] = field(default_factory=set)
    """The pods the Kubernetes NodeInfo of the predicates and nodeorder plugins holds: every
    task on the node at open, plus tasks placed in the session, minus tasks evicted or
    un-placed in the session (their Allocate/Deallocate event handlers)."""

    @property
    def idle(self) -> np.ndarray:
        return self.allocatable - self.used

    def future_idle(self) -> np.ndarray:
        return self.idle + self.releasing - self.pipelined

    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.index] = task
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined + task.request
            return
        self.used = self.used + task.request
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing + task.request

    def remove_task(self, task: TaskInfo) -> None:
        """Undo ``add_task`` for the task's current status."""
        del self.tasks[task.index]
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined - task.request
            return
        self.used = self.used - task.request
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing - task.request


# --------------------------------------------------------------------------------------------
# Priority queue with Go's container/heap behaviour (util.PriorityQueue)
# --------------------------------------------------------------------------------------------

class PriorityQueue:
    """A binary heap ordered by ``less(a, b)``, with the exact sift rules of Go's
    container/heap, so pop order matches Volcano even when a comparator's inputs change
    while items sit in the heap."""

    def __init__(self, less: Callable[[object, object], bool]):
        self._less = less
        self._items: list = []

    def __len__(self) -> int:
        return len(self._items)

    def clone(self) -> PriorityQueue:
        """PriorityQueue.Clone: the same items in the same heap order."""
        copy = PriorityQueue(self._less)
        copy._items = list(self._items)
        return copy

    def empty(self) -> bool:
        return not self._items

    def push(self, item) -> None:
        self._items.append(item)
        self._up(len(self._items) - 1)

    def pop(self):
        h = self._items
        n = len(h) - 1
        h[0], h[n] = h[n], h[0]
        self._down(0, n)
        return h.pop()

    def _up(self, j: int) -> None:
        h = self._items
        while j > 0:
            i = (j - 1) // 2
            if not self._less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            j = i

    def _down(self, i: int, n: int) -> None:
        h = self._items
        while True:
            j = 2 * i + 1
            if j >= n:
                break
            if j + 1 < n and self._less(h[j + 1], h[j]):
                j += 1
            if not self._less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            i = j


# --------------------------------------------------------------------------------------------
# Plugin entries and the session
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class PluginEntry:
    """One plugin of one tier: its enabled extension points, arguments and instance."""

    position: int
    tier: int
    kind: int
    enabled: np.ndarray
    args: np.ndarray
    resource_weights: np.ndarray
    plugin: object = None

    def on(self, ext: Ext) -> bool:
        return bool(self.enabled[ext])


Walk = Callable[["Session", "NodeInfo", list["TaskInfo"]], list["TaskInfo"]]
"""An order of walking a node's tasks (``Session.walk``): (session, node, tasks in index order) -> tasks."""


class Session:
    """One scheduling cycle (framework.Session): the snapshot objects, the registered plugin
    callbacks and the combination rules of session_plugins.go."""

    def __init__(self, problem: Problem, state: State, walk: Walk | None = None):
        self.problem = problem
        self.walk = walk
        """How node.Tasks is walked (a Go map: any order, each time); None: task index order."""
        self.cycle = state.cycle
        self.now = state.now
        self.next_node = state.next_node
        self.actions = [int(a) for a in problem.policy.actions]
        self.strict_fifo = problem.policy.strict_fifo
        self.nodes = [_node_info(problem, n) for n in range(problem.n_nodes)]
        self.queues = [_queue_info(problem, q) for q in range(problem.n_queues)]
        self.jobs = [_job_info(problem, state, j) for j in range(problem.n_jobs)]
        self.tasks: list[TaskInfo] = []
        for t in range(problem.n_tasks):
            task = _task_info(problem, state, t)
            self.tasks.append(task)
            job = self.jobs[task.job]
            job.tasks.append(task)
            if task.status in ALLOCATED_STATUSES:
                job.allocated = job.allocated + task.request
            if task.node >= 0 and task.status not in (TaskStatus.PENDING, TaskStatus.SUCCEEDED,
                                                      TaskStatus.FAILED):
                self.nodes[task.node].add_task(task)
                self.nodes[task.node].pods.add(task.index)
        self.total_resource = problem.node_allocatable.sum(axis=0)
        self.hypernodes = HyperNodes(problem)
        for j in np.flatnonzero(problem.job_topology_tier >= 0):
            self._open_topology(self.jobs[j], int(problem.job_topology_tier[j]), bool(problem.job_topology_hard[j]))
        policy = problem.policy
        self.tiers: list[list[PluginEntry]] = [[] for _ in range(policy.n_tiers)]
        for p in range(len(policy.plugin_kind)):
            entry = PluginEntry(p, int(policy.plugin_tier[p]), int(policy.plugin_kind[p]),
                                policy.plugin_enabled[p], policy.plugin_args[p],
                                policy.plugin_resource_weights[p])
            self.tiers[entry.tier].append(entry)
        self._fns: dict[str, dict[int, Callable]] = {}
        self.event_handlers: list[tuple[Callable, Callable]] = []
        self.decisions = Decisions()
        self.pipelined_by: dict[int, tuple[str, str, bool]] = {}
        self.nominated = state.task_nominated
        """Each pod's nominatedNodeName (node index, -1 none), set by a pipelining that evicted."""

    def _open_topology(self, job: JobInfo, tier: int, hard: bool) -> None:
        """adjustNetworkTopologySpec (soft mode becomes hard mode up to the cluster-top tier, so it
        takes the hard path without a limit) and recoverAllocatedHyperNode (the lowest HyperNode
        holding every allocated pod)."""
        hn = self.hypernodes
        job.topology_tier = tier if hard else hn.tier[hn.root]
        common: set[int] | None = None
        for task in job.tasks:
            if task.status in ALLOCATED_STATUSES and task.node >= 0:
                holding = hn.holding(task.node)
                common = holding if common is None else common & holding
        if common:
            job.allocated_hyper_node = min(common, key=lambda h: hn.tier[h])

    def node_tasks(self, node: NodeInfo) -> list[TaskInfo]:
        """The node's tasks in the order `for _, task := range node.Tasks` meets them: Volcano
        walks a Go map, whose walk starts at a random place each time; labkit takes task index
        order, or `walk`'s."""
        tasks = [t for _, t in sorted(node.tasks.items())]
        return tasks if self.walk is None else self.walk(self, node, tasks)

    # -- registration (framework/session_plugins.go Add*Fn) ---------------------------------
    def add_fn(self, hook: str, entry: PluginEntry, fn: Callable) -> None:
        self._fns.setdefault(hook, {})[entry.position] = fn

    def add_event_handler(self, on_allocate: Callable, on_deallocate: Callable) -> None:
        self.event_handlers.append((on_allocate, on_deallocate))

    def _registered(self, hook: str, tier: list[PluginEntry], ext: Ext | None):
        """(entry, fn) of the plugins in ``tier`` that registered ``hook`` and have ``ext`` on."""
        fns = self._fns.get(hook, {})
        for entry in tier:
            if entry.position in fns and (ext is None or entry.on(ext)):
                yield entry, fns[entry.position]

    def _all(self, hook: str, ext: Ext | None):
        for tier in self.tiers:
            yield from self._registered(hook, tier, ext)

    # -- order functions: first plugin with a non-zero answer wins --------------------------
    def _compare(self, hook: str, ext: Ext | None, left, right) -> int:
        for _, fn in self._all(hook, ext):
            result = fn(left, right)
            if result != 0:
                return result
        return 0

    def job_order_compare(self, left: JobInfo, right: JobInfo) -> int:
        return self._compare("jobOrder", Ext.JOB_ORDER, left, right)

    def job_order(self, left: JobInfo, right: JobInfo) -> bool:
        """JobOrderFn; fallback creationTimestamp then UID (the job rank)."""
        result = self.job_order_compare(left, right)
        return result < 0 if result else left.rank < right.rank

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> bool:
        """QueueOrderFn; fallback creationTimestamp then UID (the queue rank)."""
        result = self._compare("queueOrder", Ext.QUEUE_ORDER, left, right)
        return result < 0 if result else left.rank < right.rank

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> bool:
        """VictimQueueOrderFn (no enable switch); default: reverse QueueOrderFn."""
        for _, fn in self._all("victimQueueOrder", None):
            result = fn(left, right, preemptor)
            if result != 0:
                return result < 0
        return not self.queue_order(left, right)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> bool:
        """TaskOrderFn; fallback helpers.CompareTask: pod-name index, then creation, then UID."""
        result = self._compare("taskOrder", Ext.TASK_ORDER, left, right)
        if result:
            return result < 0
        if left.name_index >= 0 and right.name_index >= 0 and left.name_index != right.name_index:
            return left.name_index < right.name_index
        return left.rank < right.rank

    def victims_queue(self, victims: list[TaskInfo], preemptor: TaskInfo) -> PriorityQueue:
        """BuildVictimsPriorityQueue: same job -> reverse task order; other queues ->
        VictimQueueOrderFn; else reverse job order, then reverse task order."""
        preemptor_queue = self.queues[self.jobs[preemptor.job].queue]

        def less(left: TaskInfo, right: TaskInfo) -> bool:
            if left.job == right.job:
                return not self.task_order(left, right)
            lj, rj = self.jobs[left.job], self.jobs[right.job]
            if lj.queue != rj.queue:
                return self.victim_queue_order(self.queues[lj.queue], self.queues[rj.queue], preemptor_queue)
            result = self.job_order_compare(lj, rj)
            if result:
                return result > 0
            return not self.task_order(left, right)

        pq = PriorityQueue(less)
        for victim in victims:
            pq.push(victim)
        return pq

    # -- evictable functions: per tier intersection, first tier with a decision wins --------
    def _evictable(self, hook: str, ext: Ext, evictor: TaskInfo, candidates: list[TaskInfo]):
        victims = None
        for tier in self.tiers:
            for _, fn in self._registered(hook, tier, ext):
                chosen, vote = fn(evictor, candidates)
                if vote == ABSTAIN:
                    continue
                if not chosen:
                    victims = None
                    break
                if victims is None:
                    victims = list(chosen)
                else:
                    keep = {c.index for c in chosen}
                    victims = [v for v in victims if v.index in keep] or None
            if victims is not None:
                return victims
        return victims

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]):
        return self._evictable("preemptable", Ext.PREEMPTABLE, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]):
        return self._evictable("reclaimable", Ext.RECLAIMABLE, reclaimer, candidates)

    # -- AND / OR gates ----------------------------------------------------------------------
    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for _, fn in self._all("overused", Ext.OVERUSED))

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for _, fn in self._all("preemptive", Ext.PREEMPTIVE))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for _, fn in self._all("allocatable", Ext.ALLOCATABLE))

    def job_ready(self, job: JobInfo) -> bool:
        return all(fn(job) for _, fn in self._all("jobReady", Ext.JOB_READY))

    def job_valid(self, job: JobInfo) -> str | None:
        """JobValid (never switched off): the first failure reason, or None."""
        for _, fn in self._all("jobValid", None):
            reason = fn(job)
            if reason:
                return reason
        return None

    # -- HyperNodes (network topology) ------------------------------------------------------
    def hyper_node_gradient(self, job: JobInfo, hyper_node: int) -> list[list[int]] | None:
        """HyperNodeGradientForJobFn: the first plugin with hyperNodeGradient on decides; None
        when no plugin registered one (Volcano then searches ``hyper_node`` alone, the way
        allocate does for a job without topology)."""
        for _, fn in self._all("hyperNodeGradient", Ext.HYPER_NODE_GRADIENT):
            return fn(job, hyper_node)
        return None

    def hyper_node_score(self, job: JobInfo, candidates: list[int]) -> list[float]:
        """PrioritizeHyperNodes: per HyperNode the sum of the HyperNodeOrderFns (0 without any)."""
        scores = [0.0] * len(candidates)
        for _, fn in self._all("hyperNodeOrder", Ext.HYPER_NODE_ORDER):
            for i, score in enumerate(fn(job, candidates)):
                scores[i] += score
        return scores

    # -- votes: any Reject => false; a tier with a Permit decides; default true -------------
    def _vote(self, hook: str, ext: Ext, job: JobInfo) -> bool:
        for tier in self.tiers:
            permitted = False
            for _, fn in self._registered(hook, tier, ext):
                vote = fn(job)
                if vote < 0:
                    return False
                permitted |= vote > 0
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("jobPipelined", Ext.JOB_PIPELINED, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("jobEnqueueable", Ext.JOB_ENQUEUED, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for _, fn in self._all("jobEnqueued", Ext.JOB_ENQUEUED):
            fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        """First tier that registers any starving fn decides (AND inside it); default false."""
        for tier in self.tiers:
            fns = [fn for _, fn in self._registered("jobStarving", tier, Ext.JOB_STARVING)]
            if fns:
                return all(fn(job) for fn in fns)
        return False

    # -- predicates and node scoring --------------------------------------------------------
    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """PredicateFn: the first plugin failure as ``"unresolvable: ..."`` (node selector,
        taints: UnschedulableAndUnresolvable) or ``"unschedulable: ..."``; None if it passes."""
        for _, fn in self._all("predicate", Ext.PREDICATE):
            failure = fn(task, node)
            if failure:
                return failure
        return None

    def node_score(self, task: TaskInfo, nodes: list[NodeInfo]) -> list[float]:
        """PrioritizeNodes: per node the sum of NodeOrderFns plus BatchNodeOrderFns."""
        scores = [0.0] * len(nodes)
        for _, fn in self._all("nodeOrder", Ext.NODE_ORDER):
            for i, node in enumerate(nodes):
                scores[i] += fn(task, node)
        for _, fn in self._all("batchNodeOrder", Ext.NODE_ORDER):
            for i, extra in enumerate(fn(task, nodes)):
                scores[i] += extra
        return scores

    def best_node(self, task: TaskInfo, nodes: list[NodeInfo]) -> NodeInfo:
        """SelectBestNodeAndScore. Volcano breaks equal top scores at random; we take the
        lowest node index among them, so runs are reproducible."""
        scores = self.node_score(task, nodes)
        return max(zip(scores, nodes), key=lambda sn: (sn[0], -sn[1].index))[1]

    def sorted_nodes(self, task: TaskInfo, nodes: list[NodeInfo]) -> list[NodeInfo]:
        """SortNodes: descending score, equal scores in snapshot order."""
        scores = self.node_score(task, nodes)
        order = sorted(range(len(nodes)), key=lambda i: -scores[i])
        return [nodes[i] for i in order]

    # -- state changes (session.go / statement.go) ------------------------------------------
    def _fire(self, allocate: bool, task: TaskInfo) -> None:
        """Allocate/Deallocate events: plugins update their shares, the node its pod view."""
        node = self.nodes[task.node] if task.node >= 0 else None
        if node is not None:
            (node.pods.add if allocate else node.pods.discard)(task.index)
        for on_allocate, on_deallocate in self.event_handlers:
            (on_allocate if allocate else on_deallocate)(task)

    def _place(self, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        self.jobs[task.job].update_task_status(task, status)
        task.node = node.index
        node.add_task(task)
        self._fire(True, task)

    def _unplace(self, task: TaskInfo) -> None:
        node = self.nodes[task.node] if task.node >= 0 else None
        if node is not None and task.index in node.tasks:
            node.remove_task(task)
        self.jobs[task.job].update_task_status(task, TaskStatus.PENDING)
        self._fire(False, task)
        task.node = -1

    def _set_status_on_node(self, task: TaskInfo, status: TaskStatus) -> None:
        """Status change of a task that stays on its node (NodeInfo.UpdateTask)."""
        node = self.nodes[task.node] if task.node >= 0 else None
        if node is not None:
            node.remove_task(task)
        self.jobs[task.job].update_task_status(task, status)
        if node is not None:
            node.add_task(task)

    def dispatch(self, task: TaskInfo, action: str, reason: str) -> None:
        """Send an Allocated task to the binder: it becomes Binding and counts as bound."""
        self.jobs[task.job].update_task_status(task, TaskStatus.BINDING)
        self.decisions.binds.append(Placement(task.index, task.node, action, reason))

    def allocate(self, task: TaskInfo, node: NodeInfo, action: str, reason: str) -> None:
        """Session.Allocate (used by backfill): allocate and dispatch the job's Allocated tasks
        at once if the job is ready."""
        self._place(task, node, TaskStatus.ALLOCATED)
        job = self.jobs[task.job]
        if self.job_ready(job):
            for t in job.with_status(TaskStatus.ALLOCATED):
                self.dispatch(t, action, reason)

    def un_pipeline(self, task: TaskInfo) -> None:
        self._unplace(task)

    def attempt(self, action: str, task: TaskInfo) -> None:
        self.decisions.attempts.append((action, task.index))


class Statement:
    """A transaction over session changes (framework/statement.go): Evict, Pipeline and
    Allocate act on the session at once and are undone in reverse by ``discard``; ``commit``
    sends evictions to the evictor and allocations to the binder."""

    def __init__(self, ssn: Session, action: str):
        self.ssn = ssn
        self.action = action
        self.operations: list[tuple[str, TaskInfo, str]] = []

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.ssn._set_status_on_node(task, TaskStatus.RELEASING)
        self.ssn._fire(False, task)
        self.operations.append(("evict", task, reason))

    def pipeline(self, task: TaskInfo, node: NodeInfo, reason: str) -> None:
        self.ssn._place(task, node, TaskStatus.PIPELINED)
        evicted = any(op == "evict" for op, _, _ in self.operations)  # evictionOccurred
        self.ssn.pipelined_by[task.index] = (self.action, reason, evicted)
        self.operations.append(("pipeline", task, reason))

    def allocate(self, task: TaskInfo, node: NodeInfo, reason: str) -> None:
        self.ssn._place(task, node, TaskStatus.ALLOCATED)
        self.operations.append(("allocate", task, reason))

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations = []

    def discard(self) -> None:
        for op, task, _ in reversed(self.operations):
            if op == "evict":
                self.ssn._set_status_on_node(task, TaskStatus.RUNNING)
                self.ssn._fire(True, task)
            else:
                self.ssn._unplace(task)
        self.operations = []

    def commit(self) -> None:
        for op, task, reason in self.operations:
            if op == "evict":
                self.ssn.decisions.evictions.append(Eviction(task.index, self.action, reason))
            elif op == "allocate":
                self.ssn.dispatch(task, self.action, reason)
        self.operations = []


# --------------------------------------------------------------------------------------------
# Snapshot: arrays -> objects
# --------------------------------------------------------------------------------------------

def _node_info(p: Problem, n: int) -> NodeInfo:
    zero = np.zeros(p.n_resources)
    return NodeInfo(n, p.node_names[n], p.node_allocatable[n].copy(), bool(p.node_schedulable[n]),
                    zero.copy(), zero.copy(), zero.copy())


def _queue_info(p: Problem, q: int) -> QueueInfo:
    return QueueInfo(q, p.queue_names[q], float(p.queue_weight[q]), int(p.queue_priority[q]),
                     int(p.queue_parent[q]), bool(p.queue_reclaimable[q]), bool(p.queue_open[q]),
                     int(p.queue_rank[q]), p.queue_capability[q].copy(), p.queue_deserved[q].copy(),
                     p.queue_guarantee[q].copy())


def _job_info(p: Problem, s: State, j: int) -> JobInfo:
    minima = {p.role_names[k]: int(v) for k, v in enumerate(p.job_min_task_member[j]) if v > 0}
    sla = float(p.job_sla_waiting[j])
    return JobInfo(j, p.job_names[j], int(p.job_queue[j]), int(p.job_priority[j]),
                   int(p.job_min_member[j]), minima,
                   p.job_min_resources[j].copy() if p.job_has_min_resources[j] else None,
                   int(p.job_rank[j]), float(p.job_creation[j]), None if np.isnan(sla) else sla,
                   PodGroupPhase(int(s.job_phase[j])), allocated=np.zeros(p.n_resources))


def _task_info(p: Problem, s: State, t: int) -> TaskInfo:
    return TaskInfo(t, p.task_names[t], int(p.task_job[t]), p.role_names[p.task_role[t]],
                    p.task_request[t].copy(), int(p.task_priority[t]), bool(p.task_preemptable[t]),
                    bool(p.task_preempt_never[t]), bool(p.task_best_effort[t]), bool(p.task_critical[t]),
                    int(p.task_index[t]), int(p.task_rank[t]), int(p.task_class[t]),
                    TaskStatus(int(s.task_status[t])), int(s.task_node[t]))


def fits(request: np.ndarray, available: np.ndarray) -> bool:
    """``InitResreq.LessEqual(available, Zero)``: the node-side resource fit (pods included)."""
    return less_equal(request, available)
