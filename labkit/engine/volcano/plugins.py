"""Scheduler plugins of the reference engine (pkg/scheduler/plugins/* in Volcano).

Each plugin's ``on_session_open(ssn, entry)`` registers callbacks on the session, as Volcano's
``OnSessionOpen`` does; ``entry`` carries the tier, the enabled extension points and the
arguments. Whether a callback is consulted is decided by the session (``ssn.job_ready`` & co.)
from the entry's switches, never by the plugin.
"""

from __future__ import annotations

import math

import numpy as np

from labkit.engine.framework import ABSTAIN, PERMIT, REJECT, JobInfo, NodeInfo, QueueInfo, Session, TaskInfo
from labkit.engine.hypernodes import NONE
from labkit.engine.problem import (
    ALLOCATED_STATUSES,
    BALANCED_CHANGE_SINCE,
    CPU,
    GPU,
    MEMORY,
    PODS,
    Arg,
    Ext,
    Plugin,
    PodGroupPhase,
    TaskStatus,
)
from labkit.engine.resources import (
    dominant_share,
    exceeded_part,
    greater_partly_on_relevant,
    intersects,
    is_empty,
    less_equal,
    less_equal_on_requested,
    less_equal_partly_zero_filtered,
    resource_names,
)
from labkit.errors import LabkitError

INF = math.inf


def _arg(entry, arg: Arg, default: float) -> float:
    value = entry.args[arg]
    return default if np.isnan(value) else float(value)


def _named(vec: np.ndarray) -> np.ndarray:
    return ~np.isnan(vec)


def _values(vec: np.ndarray) -> np.ndarray:
    """A NaN-encoded spec vector with unnamed dimensions as 0."""
    return np.nan_to_num(vec, nan=0.0)


def _capability(spec: np.ndarray) -> np.ndarray:
    """A queue's spec.capability as proportion/capacity read it: unnamed dims and cpu/memory
    <= 0 are unlimited (+inf)."""
    cap = np.where(np.isnan(spec), INF, spec)
    for r in (CPU, MEMORY):
        if cap[r] <= 0:
            cap[r] = INF
    return cap


def _inqueue_resource(job: JobInfo) -> np.ndarray:
    """util.GetInqueueResource: minResources still to be allocated, per named dimension."""
    return np.where(job.min_resources > 0, np.maximum(job.min_resources - job.allocated, 0.0), 0.0)


def _elastic(job: JobInfo) -> np.ndarray:
    """JobInfo.GetElasticResources: allocated beyond minResources."""
    minimum = job.min_resources if job.min_resources is not None else np.zeros_like(job.allocated)
    return exceeded_part(job.allocated, minimum)


def _queue_usage(ssn: Session, job: JobInfo, attr) -> None:
    """Add a job's allocated, request, inqueue and elastic to its queue's attributes (the
    loop shared by proportion and capacity OnSessionOpen)."""
    for t in job.tasks:
        if t.status in ALLOCATED_STATUSES:
            attr.allocated += t.request
            attr.request += t.request
        elif t.status == TaskStatus.PENDING:
            attr.request += t.request
    if job.min_resources is not None:
        allocated_tasks = job.count(ALLOCATED_STATUSES)
        if job.phase == PodGroupPhase.INQUEUE or (
                job.phase == PodGroupPhase.RUNNING and allocated_tasks >= job.min_available):
            attr.inqueue += _inqueue_resource(job)
    attr.elastic += _elastic(job)


class QueueAttr:
    """Per-queue accounting of proportion and capacity (their ``queueAttr``)."""

    def __init__(self, queue: QueueInfo, n_res: int):
        self.queue = queue
        zero = np.zeros(n_res)
        self.allocated, self.request, self.inqueue, self.elastic = (zero.copy() for _ in range(4))
        self.deserved = zero.copy()
        self.deserved_named = np.ones(n_res, bool)
        self.guarantee = _values(queue.guarantee)
        self.capability = _capability(queue.capability)
        self.real_capability = zero.copy()
        self.share = 0.0
        self.parent: QueueAttr | None = None
        self.children: list[QueueAttr] = []

    @property
    def ancestors(self) -> list[QueueAttr]:
        """Root first, direct parent last (capacity's ``attr.ancestors``)."""
        chain, node = [], self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain[::-1]


def _queues_with_jobs(ssn: Session) -> dict[int, QueueAttr]:
    """Attributes of every queue that has a job, with usage summed over its jobs and
    realCapability = min(total - sum(all guarantees) + own guarantee, capability)."""
    n_res = ssn.problem.n_resources
    total_guarantee = sum((_values(q.guarantee) for q in ssn.queues), np.zeros(n_res))
    room = exceeded_part(ssn.total_resource, total_guarantee)
    attrs: dict[int, QueueAttr] = {}
    for job in ssn.jobs:
        if job.queue not in attrs:
            attr = QueueAttr(ssn.queues[job.queue], n_res)
            attr.real_capability = np.minimum(room + attr.guarantee, attr.capability)
            attrs[job.queue] = attr
        _queue_usage(ssn, job, attrs[job.queue])
    return attrs


def _on_usage_change(ssn: Session, attrs: dict, update, with_ancestors: bool):
    """Allocate/Deallocate event handlers: keep queue ``allocated`` and share live."""

    def change(task: TaskInfo, sign: float) -> None:
        attr = attrs.get(ssn.jobs[task.job].queue)
        if attr is None:
            return
        chain = [attr] + (attr.ancestors if with_ancestors else [])
        for a in chain:
            a.allocated = a.allocated + sign * task.request
        update(attr)

    ssn.add_event_handler(lambda t: change(t, 1.0), lambda t: change(t, -1.0))


# --------------------------------------------------------------------------------------------

class Priority:
    """priority.go: task and job order by priority; preemptable across jobs by job priority,
    inside a job by task priority; JobStarving = not every task ready or pipelined."""

    def on_session_open(self, ssn: Session, entry) -> None:
        def task_order(l: TaskInfo, r: TaskInfo) -> int:
            return 0 if l.priority == r.priority else (-1 if l.priority > r.priority else 1)

        def job_order(l: JobInfo, r: JobInfo) -> int:
            return 0 if l.priority == r.priority else (-1 if l.priority > r.priority else 1)

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]):
            pjob = ssn.jobs[preemptor.job]
            victims = []
            for t in preemptees:
                if t.job != preemptor.job:
                    if ssn.jobs[t.job].priority < pjob.priority:
                        victims.append(t)
                elif t.priority < preemptor.priority:
                    victims.append(t)
            return victims, PERMIT

        ssn.add_fn("taskOrder", entry, task_order)
        ssn.add_fn("jobOrder", entry, job_order)
        ssn.add_fn("preemptable", entry, preemptable)
        ssn.add_fn("jobStarving", entry,
                   lambda job: job.ready_task_num() + job.waiting_task_num() < len(job.tasks))


class Gang:
    """gang.go: JobValid, JobReady, JobPipelined, JobStarving against minAvailable (and the
    per-role minTaskMember); only surplus tasks above minAvailable are evictable; not-ready
    jobs go first. At close, not-ready jobs get the Unschedulable condition."""

    def on_session_open(self, ssn: Session, entry) -> None:
        def job_valid(job: JobInfo) -> str | None:
            if not job.check_task_valid():
                return "NotEnoughPodsOfTask"
            if job.valid_task_num() < job.min_available:
                return "NotEnoughPods"
            return None

        def evictable(evictor: TaskInfo, candidates: list[TaskInfo]):
            occupied: dict[int, int] = {}
            victims = []
            for t in candidates:
                job = ssn.jobs[t.job]
                occupied.setdefault(job.index, job.ready_task_num())
                if occupied[job.index] > job.min_available:
                    occupied[job.index] -= 1
                    victims.append(t)
            return victims, PERMIT

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lr, rr = l.is_ready(), r.is_ready()
            if lr == rr:
                return 0
            return 1 if lr else -1

        def pipelined(job: JobInfo) -> int:
            return PERMIT if job.check_task_pipelined() and job.is_pipelined() else REJECT

        ssn.add_fn("jobValid", entry, job_valid)
        ssn.add_fn("reclaimable", entry, evictable)
        ssn.add_fn("preemptable", entry, evictable)
        ssn.add_fn("jobOrder", entry, job_order)
        ssn.add_fn("jobReady", entry, lambda job: job.check_task_ready() and job.is_ready())
        ssn.add_fn("jobPipelined", entry, pipelined)
        ssn.add_fn("jobStarving", entry, lambda job: job.is_starving())

    def on_session_close(self, ssn: Session) -> None:
        for job in ssn.jobs:
            if job.tasks and not job.is_ready() and not _releasing_suffices(job):
                job.unschedulable = True


def _releasing_suffices(job: JobInfo) -> bool:
    """gang shouldSkipUnschedulableForReleasing: only releasing tasks keep it from running."""
    releasing = job.releasing_scheduled_task_num()
    if releasing == 0 or job.with_status(TaskStatus.PENDING) or job.with_status(TaskStatus.PIPELINED):
        return False
    return job.scheduled_task_num() + releasing >= job.min_available


class Conformance:
    """conformance.go: never evict system-critical pods or pods in kube-system."""

    def on_session_open(self, ssn: Session, entry) -> None:
        def evictable(evictor: TaskInfo, candidates: list[TaskInfo]):
            return [t for t in candidates if not t.critical], PERMIT

        ssn.add_fn("preemptable", entry, evictable)
        ssn.add_fn("reclaimable", entry, evictable)


class Drf:
    """drf.go: job share = max_r allocated_r / total_r over the cluster's resources (pods and
    gpus included); lower share first; a victim is
    preemptable when the preemptor's share after winning stays below (or within 1e-6 of) the
    victim job's share after losing. With ``hierarchy`` on (hierarchical DRF), queues are also
    ordered and reclaimed by :class:`HierarchicalShares`."""

    SHARE_DELTA = 1e-6

    def on_session_open(self, ssn: Session, entry) -> None:
        total = ssn.total_resource
        allocated = {job.index: job.allocated.copy() for job in ssn.jobs}
        shares = {j: dominant_share(a, total) for j, a in allocated.items()}
        self.shares = shares
        hdrf = HierarchicalShares(ssn, allocated) if entry.on(Ext.HIERARCHY) else None
        self.hdrf = hdrf

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]):
            ls = dominant_share(allocated[preemptor.job] + preemptor.request, total)
            remaining: dict[int, np.ndarray] = {}
            victims = []
            for t in preemptees:
                rest = remaining.setdefault(t.job, allocated[t.job].copy())
                rest -= t.request
                rs = dominant_share(rest, total)
                if ls < rs or abs(ls - rs) <= self.SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        def job_order(l: JobInfo, r: JobInfo) -> int:
            a, b = shares[l.index], shares[r.index]
            return 0 if a == b else (-1 if a < b else 1)

        def change(task: TaskInfo, sign: float) -> None:
            allocated[task.job] = allocated[task.job] + sign * task.request
            shares[task.job] = dominant_share(allocated[task.job], total)
            if hdrf is not None:
                hdrf.total_allocated = hdrf.total_allocated + sign * task.request
                hdrf.nodes = hdrf.compute(allocated, hdrf.total_allocated)

        ssn.add_fn("preemptable", entry, preemptable)
        ssn.add_fn("jobOrder", entry, job_order)
        if hdrf is not None:
            ssn.add_fn("queueOrder", entry, lambda l, r: _sign(hdrf.compare(hdrf.nodes, l, r)))
            ssn.add_fn("reclaimable", entry, hdrf.reclaimable)
        ssn.add_event_handler(lambda t: change(t, 1.0), lambda t: change(t, -1.0))


def _sign(x: float) -> int:
    return -1 if x < 0 else (1 if x > 0 else 0)


class HierarchicalShares:
    """Hierarchical DRF (drf.go buildHierarchy / updateHierarchicalShare / compareQueues;
    docs/design/hdrf.md). The tree is the Problem's hdrf tree with one leaf per job under its
    queue's node. A leaf is *saturated* when it holds all it asked for on some resource, or asks
    for a resource the cluster has fully handed out. An inner node rescales its unsaturated
    children to the smallest dominant share among them, adds its saturated children as they
    are, and is saturated when all its children are."""

    def __init__(self, ssn: Session, allocated: dict[int, np.ndarray]):
        p = ssn.problem
        self.ssn = ssn
        self.allocated = allocated
        self.total = ssn.total_resource
        self.parent = p.hdrf_parent
        self.weight = p.hdrf_weight
        self.children: list[list[int]] = [[] for _ in p.hdrf_names]
        for node, parent in enumerate(p.hdrf_parent):
            if parent >= 0:
                self.children[parent].append(node)
        self.jobs_under: list[list[int]] = [[] for _ in p.hdrf_names]
        for job in ssn.jobs:
            self.jobs_under[p.queue_hdrf_node[job.queue]].append(job.index)
        self.request = {job.index: sum((t.request for t in job.tasks), np.zeros(p.n_resources))
                        for job in ssn.jobs}
        self.total_allocated = sum(allocated.values(), np.zeros(p.n_resources))
        self.nodes = self.compute(allocated, self.total_allocated)

    def compute(self, allocated: dict[int, np.ndarray], total_allocated: np.ndarray):
        """(share, saturated) of every tree node, bottom-up from the jobs' allocations."""
        demanding = (total_allocated < self.total) & resource_names(self.total)
        result: dict[int, tuple[float, bool]] = {}

        def visit(node: int) -> tuple[np.ndarray, float, bool]:
            parts = [visit(c) for c in self.children[node]]
            for j in self.jobs_under[node]:
                a, req = allocated[j], self.request[j]
                held = resource_names(a)
                saturated = bool(np.any(held & (a != 0) & (req != 0) & (a >= req))
                                 or np.any(held & ~demanding & (req != 0)))
                parts.append((a, dominant_share(a, self.total), saturated))
            if not parts:
                result[node] = (0.0, True)
                return np.zeros_like(self.total), 0.0, True
            mdr = min([1.0] + [dominant_share(a, self.total) for a, sh, sat in parts if sh != 0 and not sat])
            total = np.zeros_like(self.total)
            for a, sh, sat in parts:
                if sh != 0:
                    total = total + (a if sat else a * (mdr / sh))
            share, saturated = dominant_share(total, self.total), all(sat for _, _, sat in parts)
            result[node] = (share, saturated)
            return total, share, saturated

        visit(0)
        return result

    def path(self, queue: QueueInfo) -> list[int]:
        node, chain = int(self.ssn.problem.queue_hdrf_node[queue.index]), []
        while node >= 0:
            chain.append(node)
            node = int(self.parent[node])
        return chain[::-1]

    def compare(self, nodes, left: QueueInfo, right: QueueInfo) -> float:
        """compareQueues: walk both paths from the root; unsaturated before saturated, else
        the lower share/weight first; equal nodes descend a level."""
        for ln, rn in zip(self.path(left), self.path(right)):
            (ls, lsat), (rs, rsat) = nodes[ln], nodes[rn]
            if lsat != rsat:
                return 1.0 if lsat else -1.0
            diff = ls / self.weight[ln] - rs / self.weight[rn]
            if diff != 0:
                return diff
        return 0.0

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]):
        """A reclaimee is a victim if the reclaimer's queue, given the task, still compares
        below the reclaimee's queue without it."""
        ssn = self.ssn
        base = dict(self.allocated)
        base[reclaimer.job] = base[reclaimer.job] + reclaimer.request
        total = self.total_allocated + reclaimer.request
        lqueue = ssn.queues[ssn.jobs[reclaimer.job].queue]
        victims = []
        for t in reclaimees:
            trial = dict(base)
            trial[t.job] = trial[t.job] - t.request
            nodes = self.compute(trial, total - t.request)
            if self.compare(nodes, lqueue, ssn.queues[ssn.jobs[t.job].queue]) < 0:
                victims.append(t)
        return victims, PERMIT


class Proportion:
    """proportion.go: weighted fair share. ``deserved`` is water-filled each session from the
    cluster total over the queues that have jobs (see :meth:`water_fill`); queues are ordered
    by priority, then share = max_r allocated/deserved."""

    def on_session_open(self, ssn: Session, entry) -> None:
        attrs = _queues_with_jobs(ssn)
        self.attrs = attrs
        self.water_fill(list(attrs.values()), ssn.total_resource)

        def queue_order(l: QueueInfo, r: QueueInfo) -> int:
            if l.priority != r.priority:
                return r.priority - l.priority
            a, b = attrs[l.index].share, attrs[r.index].share
            return 0 if a == b else (-1 if a < b else 1)

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]):
            remaining: dict[int, np.ndarray] = {}
            victims = []
            for t in reclaimees:
                attr = attrs.get(ssn.jobs[t.job].queue)
                if attr is None:
                    continue
                allocated = remaining.setdefault(attr.queue.index, attr.allocated.copy())
                if not less_equal(allocated, attr.deserved):
                    allocated -= t.request
                    victims.append(t)
            return victims, PERMIT

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            attr = attrs[queue.index]
            return queue.open and less_equal_on_requested(attr.allocated + task.request, attr.deserved,
                                                          task.request)

        def enqueueable(job: JobInfo) -> int:
            attr, queue = attrs[job.queue], ssn.queues[job.queue]
            if not queue.open:
                return REJECT
            if job.min_resources is None:
                return PERMIT
            future = job.min_resources + attr.allocated + attr.inqueue - attr.elastic
            ok = less_equal_on_requested(future, attr.real_capability, job.min_resources)
            return PERMIT if ok else REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                attrs[job.queue].inqueue += job.min_resources

        ssn.add_fn("queueOrder", entry, queue_order)
        ssn.add_fn("reclaimable", entry, reclaimable)
        ssn.add_fn("overused", entry, lambda q: less_equal(attrs[q.index].deserved, attrs[q.index].allocated))
        ssn.add_fn("allocatable", entry, allocatable)
        ssn.add_fn("preemptive", entry, allocatable)
        ssn.add_fn("jobEnqueueable", entry, enqueueable)
        ssn.add_fn("jobEnqueued", entry, enqueued)
        _on_usage_change(ssn, attrs, self._update_share, with_ancestors=False)

    @staticmethod
    def _update_share(attr: QueueAttr) -> None:
        attr.share = dominant_share(attr.allocated, attr.deserved)

    @classmethod
    def water_fill(cls, attrs: list[QueueAttr], total: np.ndarray) -> None:
        """Proportion's deserved loop: hand ``remaining`` out by weight to unmet queues, clip
        each to realCapability and to its request, raise it to its guarantee; a queue is met
        once its request fits or its deserved stops changing; stop when nothing is left
        (pods aside) or nothing changed."""
        remaining = total.copy()
        met: set[int] = set()
        while True:
            total_weight = sum(int(a.queue.weight) for a in attrs if a.queue.index not in met)
            if total_weight == 0:
                break
            old_remaining = remaining.copy()
            increased = np.zeros_like(total)
            decreased = np.zeros_like(total)
            for attr in attrs:
                if attr.queue.index in met:
                    continue
                old = attr.deserved.copy()
                deserved = old + remaining * (float(int(attr.queue.weight)) / float(total_weight))
                deserved = np.minimum(deserved, attr.real_capability)
                deserved = np.minimum(deserved, attr.request)
                attr.deserved = np.maximum(deserved, attr.guarantee)
                cls._update_share(attr)
                if less_equal(attr.request, attr.deserved) or np.array_equal(attr.deserved, old):
                    met.add(attr.queue.index)
                increased += np.maximum(attr.deserved - old, 0.0)
                decreased += np.maximum(old - attr.deserved, 0.0)
            remaining = exceeded_part(remaining + decreased, increased)
            if is_empty(remaining) or np.array_equal(remaining, old_remaining):
                break


class Capacity:
    """capacity.go: ``deserved`` is the queue's spec.deserved (no weights). Queues may borrow
    idle resources up to realCapability (Allocatable) and reclaim back up to deserved. With
    ``hierarchy`` enabled, queues form a tree under ``root`` and jobs live only in leaves."""

    def on_session_open(self, ssn: Session, entry) -> None:
        n_res = ssn.problem.n_resources
        self.hierarchy = entry.on(Ext.HIERARCHY)
        if self.hierarchy and _arg(entry, Arg.ANCESTOR_RECLAIM_LEVEL, 0.0) > 0:
            raise LabkitError("capacity ancestorReclaimLevel > 0 is not simulated by the reference engine")
        attrs: dict[int, QueueAttr] = {}
        ready = self._build_hierarchy(ssn, attrs, n_res) if self.hierarchy else self._build_flat(ssn, attrs, n_res)
        self.attrs = attrs

        def is_leaf(q: int) -> bool:
            return not attrs[q].children

        def queue_order(l: QueueInfo, r: QueueInfo) -> int:
            if l.priority != r.priority:
                return r.priority - l.priority
            la, ra = attrs[l.index], attrs[r.index]
            if self.hierarchy:
                ll, rl = is_leaf(l.index), is_leaf(r.index)
                if ll != rl:
                    return -1 if ll else 1
                if ll:
                    level = _common_level(la, ra)
                    la = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la
                    ra = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra
            return _compare_share_with_deserved(la, ra)

        def victim_queue_order(l: QueueInfo, r: QueueInfo, preemptor: QueueInfo) -> int:
            pa = attrs[preemptor.index]
            ll, rl = _common_level(attrs[l.index], pa), _common_level(attrs[r.index], pa)
            return 0 if ll == rl else (-1 if ll > rl else 1)

        def chain(q: int) -> list[QueueAttr]:
            """The queue and its ancestors, queue first (check order of capacity)."""
            return [attrs[q]] + attrs[q].ancestors[::-1]

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            if not queue.open or not ready or (self.hierarchy and not is_leaf(queue.index)):
                return False
            return all(less_equal_on_requested(a.allocated + task.request, a.real_capability, task.request)
                       for a in chain(queue.index))

        def preemptive(queue: QueueInfo, task: TaskInfo) -> bool:
            if not ready or not queue.open:
                return False
            attr = attrs[queue.index]
            future = attr.allocated + task.request
            if not less_equal_on_requested(future, attr.real_capability, task.request):
                return False
            return less_equal_partly_zero_filtered(future, attr.deserved, task.request)

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]):
            if not ready:
                return [], REJECT
            remaining: dict[int, np.ndarray] = {}
            victims = []
            ordered = ssn.victims_queue(reclaimees, reclaimer)
            while not ordered.empty():
                t = ordered.pop()
                attr = attrs.get(ssn.jobs[t.job].queue)
                if attr is None or not intersects(t.request, reclaimer.request, ignore_pods=True):
                    continue
                allocated = remaining.setdefault(attr.queue.index, attr.allocated.copy())
                if not less_equal(attr.guarantee, allocated - t.request):
                    continue
                deserved_values = np.where(attr.deserved_named, attr.deserved, 0.0)
                immediate = not intersects(t.request, deserved_values)
                if immediate or greater_partly_on_relevant(allocated, deserved_values, attr.deserved_named,
                                                           t.request):
                    allocated -= t.request
                    victims.append(t)
            return victims, PERMIT

        def enqueueable(job: JobInfo) -> int:
            if not ready or (self.hierarchy and not is_leaf(job.queue)):
                return REJECT
            if not ssn.queues[job.queue].open:
                return REJECT
            if job.min_resources is None:
                return PERMIT
            for a in chain(job.queue):
                future = job.min_resources + a.allocated + a.inqueue - a.elastic
                if not less_equal_on_requested(future, a.real_capability, job.min_resources):
                    return REJECT
            return PERMIT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None and job.queue in attrs:
                for a in chain(job.queue):
                    a.inqueue += job.min_resources

        ssn.add_fn("queueOrder", entry, queue_order)
        if self.hierarchy:
            ssn.add_fn("victimQueueOrder", entry, victim_queue_order)
        ssn.add_fn("allocatable", entry, allocatable)
        ssn.add_fn("preemptive", entry, preemptive)
        ssn.add_fn("reclaimable", entry, reclaimable)
        ssn.add_fn("jobEnqueueable", entry, enqueueable)
        ssn.add_fn("jobEnqueued", entry, enqueued)
        _on_usage_change(ssn, attrs, _capacity_share, with_ancestors=self.hierarchy)

    @staticmethod
    def _build_flat(ssn: Session, attrs: dict, n_res: int) -> bool:
        """buildQueueAttrs: queues with jobs; deserved clipped to realCapability, raised to
        guarantee."""
        attrs.update(_queues_with_jobs(ssn))
        for attr in attrs.values():
            _set_deserved(attr, np.minimum(_values(attr.queue.deserved), attr.real_capability))
            _capacity_share(attr)
        return True

    @staticmethod
    def _build_hierarchy(ssn: Session, attrs: dict, n_res: int) -> bool:
        """buildHierarchicalQueueAttrs: every queue joins the tree under ``root``; usage is
        summed up the ancestors; realCapability flows down from root (capability +inf).
        Returns false (nothing schedulable) for a job in a non-leaf queue or a missing root."""
        for q in ssn.queues:
            attrs[q.index] = QueueAttr(q, n_res)
        root = next((a for a in attrs.values() if a.queue.name == "root"), None)
        if root is None:
            return False
        for attr in attrs.values():
            if attr is root:
                continue
            parent = attrs[attr.queue.parent] if attr.queue.parent >= 0 else root
            attr.parent = parent
            parent.children.append(attr)
        for job in ssn.jobs:
            attr = attrs[job.queue]
            if attr.children:
                return False
            before = [attr.allocated.copy(), attr.request.copy(), attr.inqueue.copy(), attr.elastic.copy()]
            _queue_usage(ssn, job, attr)
            for ancestor in attr.ancestors:
                ancestor.allocated += attr.allocated - before[0]
                ancestor.request += attr.request - before[1]
                ancestor.inqueue += attr.inqueue - before[2]
                ancestor.elastic += attr.elastic - before[3]
        spec = root.queue.capability
        if is_empty(_values(spec)):
            root.capability = np.full(n_res, INF)
        else:
            root.capability = np.where(np.isnan(spec), INF, spec)
            root.capability[[CPU, MEMORY]] = _values(spec)[[CPU, MEMORY]]
        root.real_capability = root.capability.copy()
        _check_hierarchical_queue(root, root)
        for attr in attrs.values():
            _capacity_share(attr)
        return True


def _set_deserved(attr: QueueAttr, values: np.ndarray) -> None:
    """deserved = Max(deserved, guarantee); a dimension is named if either names it."""
    spec_named = _named(attr.queue.deserved) | _named(attr.queue.guarantee)
    spec_named[CPU] = spec_named[MEMORY] = True
    attr.deserved = np.maximum(values, attr.guarantee)
    attr.deserved_named = spec_named


def _check_hierarchical_queue(attr: QueueAttr, root: QueueAttr) -> None:
    """capacity checkHierarchicalQueue: children inherit unset capability dims (and cpu or
    memory <= 0) from the parent; realCapability = parent's realCapability - sum(child
    guarantees) + own guarantee, capped by own capability; root's deserved and guarantee are
    the sums of its children's."""
    total_guarantee = np.zeros_like(attr.allocated)
    total_deserved = np.zeros_like(attr.allocated)
    for child in attr.children:
        _set_deserved(child, _values(child.queue.deserved))
        total_deserved += child.deserved
        total_guarantee += child.guarantee
        spec = child.queue.capability
        child.capability = np.where(np.isnan(spec), attr.capability, spec)
        for r in (CPU, MEMORY):
            if child.capability[r] <= 0:
                child.capability[r] = attr.capability[r]
    if attr is root:
        attr.guarantee = total_guarantee
        attr.deserved = total_deserved
    for child in attr.children:
        child.real_capability = np.minimum(exceeded_part(attr.real_capability, total_guarantee) + child.guarantee,
                                           child.capability)
        _check_hierarchical_queue(child, root)


def _capacity_share(attr: QueueAttr) -> None:
    """capacity updateQueueAttrShare: a queue without deserved has share 1 (best effort)."""
    deserved = np.where(attr.deserved_named, attr.deserved, 0.0)
    attr.share = 1.0 if is_empty(deserved) else dominant_share(attr.allocated, deserved)


def _compare_share_with_deserved(l: QueueAttr, r: QueueAttr) -> int:
    """Lower share first; on a tie the queue that has a deserved goes first."""
    if l.share == r.share:
        lh, rh = not is_empty(l.deserved), not is_empty(r.deserved)
        return 0 if lh == rh else (-1 if lh else 1)
    return -1 if l.share < r.share else 1


def _common_level(l: QueueAttr, r: QueueAttr) -> int:
    """capacity getQueueLevel: depth of the deepest common ancestor of two queues."""
    la, ra = l.ancestors, r.ancestors
    level = 0
    for i in range(min(len(la), len(ra))):
        if la[i] is not ra[i]:
            return level
        level = i
    return level


class Predicates:
    """predicates.go, reduced to what the Problem encodes: the node must be schedulable, pass
    the precomputed label-selector/affinity/taint mask (UnschedulableAndUnresolvable) and have
    room for one more pod (Unschedulable). Resource fit itself is checked by the actions."""

    def on_session_open(self, ssn: Session, entry) -> None:
        ok = ssn.problem.class_node_ok

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            if not node.schedulable:
                return "unresolvable: node is unschedulable"
            if not ok[task.node_class, node.index]:
                return "unresolvable: node selector, affinity or taints do not match"
            if node.allocatable[PODS] <= len(node.pods):
                return "unschedulable: node has reached its pod limit"
            return None

        ssn.add_fn("predicate", entry, predicate)


class Binpack:
    """binpack.go: score = 100 * binpack.weight * sum_r w_r (req_r + used_r) / alloc_r / sum_r w_r
    over the scored resources the task requests; a resource that would overflow zeroes the
    node; a resource with allocatable 0 scores 0 but keeps its weight."""

    def on_session_open(self, ssn: Session, entry) -> None:
        weight = _arg(entry, Arg.BINPACK_WEIGHT, 1.0)
        if weight == 0:
            return
        weights = entry.resource_weights
        ssn.add_fn("nodeOrder", entry, lambda task, node: binpack_score(task.request, node, weights, weight))


def binpack_score(request: np.ndarray, node: NodeInfo, weights: np.ndarray, weight: float) -> float:
    """BinPackingScore for one task on one node."""
    score, weight_sum = 0.0, 0.0
    for r in np.flatnonzero(resource_names(request)):
        if request[r] == 0 or np.isnan(weights[r]):
            continue
        capacity, used, w = node.allocatable[r], node.used[r], weights[r]
        if capacity != 0 and w != 0:
            if request[r] + used > capacity:
                return 0.0
            score += (request[r] + used) * w / capacity
        weight_sum += w
    if weight_sum > 0:
        score /= weight_sum
    return score * 100 * weight


class NodeOrder:
    """nodeorder.go: the Kubernetes LeastAllocated (cpu, memory weight 50 each),
    MostAllocated (cpu, memory) and BalancedAllocation (cpu, memory, nvidia.com/gpu) scores,
    each 0..100 in integer math and multiplied by its weight. The other wrapped k8s scorers
    (node affinity, taint toleration, image locality, pod (anti)affinity, topology spread)
    score every node alike for the pods a Problem can express, so they are left out: they
    do not change which node wins."""

    NON_ZERO_CPU = 100.0          # k8s DefaultMilliCPURequest
    NON_ZERO_MEMORY = 200 * 1024 * 1024.0  # k8s DefaultMemoryRequest

    def on_session_open(self, ssn: Session, entry) -> None:
        least = _arg(entry, Arg.LEASTREQUESTED_WEIGHT, 1.0)
        most = _arg(entry, Arg.MOSTREQUESTED_WEIGHT, 0.0)
        balanced = _arg(entry, Arg.BALANCEDRESOURCE_WEIGHT, 1.0)
        minor = _arg(entry, Arg.BALANCEDRESOURCE_KUBERNETES, 35.0)
        names = ssn.problem.resource_names
        gpu = names.index(GPU) if GPU in names else None

        def batch(task: TaskInfo, nodes: list[NodeInfo]) -> list[float]:
            return [least * self.least_allocated(task, n) + most * self.most_allocated(task, n)
                    + balanced * self.balanced_allocation(task, n, gpu, minor) for n in nodes]

        ssn.add_fn("batchNodeOrder", entry, batch)

    def _non_zero(self, node: NodeInfo, task: TaskInfo) -> tuple[list[int], list[int]]:
        """(requested incl. this pod, allocatable) for cpu and memory, counting every pod
        without a request as 100m / 200Mi (k8s NonZeroRequested)."""
        pods = _pods_with(node, task)
        requested = [int(sum(p.request[r] if p.request[r] > 0 else default for p in pods))
                     for r, default in ((CPU, self.NON_ZERO_CPU), (MEMORY, self.NON_ZERO_MEMORY))]
        return requested, [int(node.allocatable[CPU]), int(node.allocatable[MEMORY])]

    def least_allocated(self, task: TaskInfo, node: NodeInfo) -> int:
        requested, alloc = self._non_zero(node, task)
        total = 0
        for req, cap in zip(requested, alloc):
            total += 0 if cap == 0 or req > cap else (cap - req) * 100 // cap * 50
        return total // 100

    def most_allocated(self, task: TaskInfo, node: NodeInfo) -> int:
        requested, alloc = self._non_zero(node, task)
        total = 0
        for req, cap in zip(requested, alloc):
            total += 0 if cap == 0 else min(req, cap) * 100 // cap
        return total // 2

    @staticmethod
    def balanced_allocation(task: TaskInfo, node: NodeInfo, gpu: int | None, minor: float) -> int:
        """(1 - std of the used fractions with the pod) x 100 before Kubernetes 1.36; from 1.36 on
        the change the pod makes: 75 + 50 x (std without the pod - std with it), so 75 means
        no change, 50 balanced to fully unbalanced, 100 the reverse."""
        dims = [CPU, MEMORY] + ([gpu] if gpu is not None and task.request[gpu] > 0 else [])
        pods = _pods_with(node, task)
        after = _balance_std([sum(p.request[r] for p in pods) for r in dims], node, dims)
        if minor < BALANCED_CHANGE_SINCE:
            return int((1 - after) * 100)
        others = [p for p in pods if p is not task]
        before = _balance_std([sum(p.request[r] for p in others) for r in dims], node, dims)
        return int((0.75 + (before - after) / 2) * 100)


def _balance_std(requested: list[float], node: NodeInfo, dims: list[int]) -> float:
    """The standard deviation of requested/allocatable (capped at 1) over the dims the node has."""
    fractions = [min(req / node.allocatable[r], 1.0) for req, r in zip(requested, dims) if node.allocatable[r] != 0]
    if len(fractions) == 2:
        return abs(fractions[0] - fractions[1]) / 2
    if len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        return math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return 0.0


def _pods_with(node: NodeInfo, task: TaskInfo) -> list[TaskInfo]:
    """The pods the k8s NodeInfo holds plus the pod being scored."""
    return [ssn_task for ssn_task in node.tasks.values() if ssn_task.index in node.pods] + (
        [] if task.index in node.pods else [task])


class Overcommit:
    """overcommit.go: enqueue admits a job while the minResources of all inqueue jobs fit in
    ``total * overcommit-factor - used``."""

    def on_session_open(self, ssn: Session, entry) -> None:
        factor = _arg(entry, Arg.OVERCOMMIT_FACTOR, 1.2)
        if factor < 1.0:
            factor = 1.2
        idle = ssn.total_resource * factor - sum((n.used for n in ssn.nodes), np.zeros(ssn.problem.n_resources))
        inqueue = np.zeros(ssn.problem.n_resources)
        for job in ssn.jobs:
            if job.min_resources is None:
                continue
            if job.phase == PodGroupPhase.INQUEUE:
                inqueue += job.min_resources
            elif job.phase == PodGroupPhase.RUNNING and job.count(ALLOCATED_STATUSES) >= job.min_available:
                inqueue += _inqueue_resource(job)

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return PERMIT
            ok = less_equal_on_requested(inqueue + job.min_resources, idle, job.min_resources)
            return PERMIT if ok else REJECT

        def enqueued(job: JobInfo) -> None:
            nonlocal inqueue
            if job.min_resources is not None:
                inqueue = inqueue + job.min_resources

        ssn.add_fn("jobEnqueueable", entry, enqueueable)
        ssn.add_fn("jobEnqueued", entry, enqueued)


class Sla:
    """sla.go: jobs with a waiting-time deadline go first, earliest deadline first; once a
    job has waited that long, enqueue and pipelining vote Permit (else they abstain)."""

    def on_session_open(self, ssn: Session, entry) -> None:
        default = entry.args[Arg.SLA_WAITING_TIME]
        default = None if np.isnan(default) or default <= 0 else float(default)

        def waiting(job: JobInfo) -> float | None:
            return job.sla_waiting if job.sla_waiting is not None else default

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lw, rw = waiting(l), waiting(r)
            if lw is None:
                return 0 if rw is None else 1
            if rw is None:
                return -1
            ld, rd = l.creation + lw, r.creation + rw
            return 0 if ld == rd else (-1 if ld < rd else 1)

        def permit(job: JobInfo) -> int:
            w = waiting(job)
            return ABSTAIN if w is None or ssn.now - job.creation < w else PERMIT

        ssn.add_fn("jobOrder", entry, job_order)
        ssn.add_fn("jobEnqueueable", entry, permit)
        ssn.add_fn("jobPipelined", entry, permit)


class NetworkTopologyAware:
    """network-topology-aware (plugins/network-topology-aware): for a job with networkTopology,
    the HyperNodes allocate may place its gang in, lowest tier first (``hyperNodeGradient``), a
    score for each (``hyperNodeOrder``: how full the HyperNode is with the job on it), and a node
    score preferring nodes whose HyperNode is close to where the job already is; for other pods,
    a node score binpacking HyperNodes, tier by tier (``hypernode.binpack.normal-pod``).

    HyperNode room is kept as the plugin keeps it: allocatable, idle and future idle summed at
    session open, used moved by the Allocate/Deallocate events."""

    def on_session_open(self, ssn: Session, entry) -> None:
        hn = ssn.hypernodes
        self.hn = hn
        self.weight = _arg(entry, Arg.TOPOLOGY_WEIGHT, 1.0)
        self.normal_pods = bool(_arg(entry, Arg.TOPOLOGY_NORMAL_POD_ENABLE, 1.0))
        self.fading = _arg(entry, Arg.TOPOLOGY_NORMAL_POD_FADING, 0.8)
        self.weights = entry.resource_weights
        self.scored = np.flatnonzero(~np.isnan(self.weights))
        self.min_tier, self.max_tier = hn.tiers[0], hn.tiers[-1]
        zero = np.zeros(ssn.problem.n_resources)
        self.allocatable = [sum((ssn.nodes[n].allocatable for n in m), zero) for m in hn.members]
        self.used = [sum((ssn.nodes[n].used for n in m), zero) for m in hn.members]
        self.idle = [sum((ssn.nodes[n].idle for n in m), zero) for m in hn.members]
        self.future_idle = [sum((ssn.nodes[n].future_idle() for n in m), zero) for m in hn.members]
        self.ssn = ssn

        def change(task: TaskInfo, sign: float) -> None:
            for h in hn.holding(task.node):
                self.used[h] = self.used[h] + sign * task.request

        ssn.add_fn("hyperNodeOrder", entry, self.hyper_node_order)
        ssn.add_fn("batchNodeOrder", entry, self.batch_node_order)
        ssn.add_fn("hyperNodeGradient", entry, self.gradient)
        ssn.add_event_handler(lambda t: change(t, 1.0), lambda t: change(t, -1.0))

    # -- hyperNodeGradient ------------------------------------------------------------------
    def gradient(self, job: JobInfo, hyper_node: int) -> list[list[int]]:
        """hyperNodeGradientFn: breadth first from the search root (``hyper_node``, narrowed to the
        highest allowed ancestor of the job's AllocatedHyperNode), the HyperNodes of tier <=
        highestTierAllowed where the job's minResources fit the idle or future idle room (every
        such HyperNode once the job has pods placed), grouped by tier, lowest first. A job whose
        AllocatedHyperNode lies outside ``hyper_node`` or above its tier limit gets none.
        Volcano walks a HyperNode's children in Go map order; we take them by index."""
        hn, highest, allocated = self.hn, job.topology_tier, job.allocated_hyper_node
        root = hyper_node
        if allocated != NONE:
            allowed = NONE
            for a in hn.ancestors(allocated):
                if hn.tier[a] > highest:
                    break
                allowed = a
            if allowed == NONE:
                return []
            lca = hn.lca(hyper_node, allowed)
            if lca == allowed:
                root = hyper_node
            elif lca == hyper_node:
                root = allowed
            else:
                return []
        need = job.min_resources if job.min_resources is not None else 0 * self.idle[0]
        by_tier: dict[int, list[int]] = {}
        queue = [root]
        for h in queue:
            if hn.tier[h] <= highest and (allocated != NONE or less_equal(need, self.idle[h])
                                          or less_equal(need, self.future_idle[h])):
                by_tier.setdefault(hn.tier[h], []).append(h)
            queue.extend(sorted(hn.children[h]))
        return [by_tier[t] for t in sorted(by_tier)]

    # -- hyperNodeOrder ---------------------------------------------------------------------
    def hyper_node_order(self, job: JobInfo, candidates: list[int]) -> list[float]:
        """HyperNodeOrderFn: each HyperNode's binpacking score with all the job's pods on it
        (0 if one resource would overflow); when several share the best score, plus the share
        of the job's pods already inside each of them; times 100 x weight."""
        request = sum((t.request for t in job.tasks), 0 * self.idle[0])
        scores = [self._binpack(request, h) for h in candidates]
        best = max(scores, default=0.0)
        if sum(score == best for score in scores) > 1:
            scores = [score + (self._task_share(job, h) if score == best else 0.0)
                      for score, h in zip(scores, candidates)]
        return [self._scale(score) for score in scores]

    def _binpack(self, request: np.ndarray, h: int) -> float:
        """(used + request) / allocatable averaged over the weighted resources requested."""
        total, weights = 0.0, 0.0
        for r in self.scored:
            if request[r] <= 0:
                continue
            used, capacity, w = self.used[h][r], self.allocatable[h][r], self.weights[r]
            if used + request[r] > capacity:
                return 0.0
            total += w * (used + request[r]) / capacity
            weights += w
        return total / weights if weights > 0 else 0.0

    def _task_share(self, job: JobInfo, h: int) -> float:
        """scoreWithTaskNum: the share of the job's pods placed on nodes of HyperNode ``h``."""
        if h == NONE or not job.tasks:
            return 0.0
        members = set(self.hn.members[h])
        return sum(t.node in members for t in job.tasks) / len(job.tasks)

    def _scale(self, score: float) -> float:
        return 100.0 * self.weight * score

    # -- nodeOrder --------------------------------------------------------------------------
    def batch_node_order(self, task: TaskInfo, nodes: list[NodeInfo]) -> list[float]:
        job = self.ssn.jobs[task.job]
        if job.topology_tier >= 0:
            scores = self._network_aware(task, job, nodes)
        elif self.normal_pods:
            scores = [self._normal_pod(task, node) for node in nodes]
        else:
            scores = [0.0] * len(nodes)
        return [self._scale(score) for score in scores]

    def _network_aware(self, task: TaskInfo, job: JobInfo, nodes: list[NodeInfo]) -> list[float]:
        """batchNodeOrderFnForNetworkAwarePods: by the tier of the lowest common HyperNode of the
        node's and the job's (1 inside it, 0 at the cluster top); nodes sharing the best score get
        the share of the job's pods already in their HyperNode added."""
        allocated = task.job_allocated_hyper_node
        if allocated == NONE:
            return [0.0] * len(nodes)
        hn = self.hn
        scores = [self._tier_score(hn.of_node(n.index), allocated) for n in nodes]
        best = max(scores, default=0.0)
        if sum(score == best for score in scores) > 1:
            scores = [score + (self._task_share(job, hn.of_node(n.index)) if score == best else 0.0)
                      for score, n in zip(scores, nodes)]
        return scores

    def _tier_score(self, h: int, allocated: int) -> float:
        """networkTopologyAwareScore: (maxTier - LCA tier) / (maxTier - minTier)."""
        if h == NONE or allocated == NONE:
            return 0.0
        if h == allocated:
            return 1.0
        lca = self.hn.lca(h, allocated)
        if lca == NONE:
            return 0.0
        if self.min_tier == self.max_tier:
            return 1.0
        tier = self.hn.tier[lca]
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return 0.0

    def _normal_pod(self, task: TaskInfo, node: NodeInfo) -> float:
        """batchNodeOrderFnForNormalPods: per tier the binpacking score of the node's HyperNode
        with this pod in it (1 where no HyperNode of that tier holds the node), weighted by
        fading^(tier - 1)."""
        holding = {self.hn.tier[h]: h for h in self.hn.holding(node.index)}
        total, weights = 0.0, 0.0
        for tier in range(self.min_tier, self.max_tier + 1):
            w = self.fading ** (tier - 1)
            h = holding.get(tier)
            total += w * (1.0 if h is None else self._binpack(task.request, h))
            weights += w
        return total / weights if weights > 0 else 0.0


PLUGINS = {
    Plugin.PRIORITY: Priority, Plugin.GANG: Gang, Plugin.DRF: Drf, Plugin.PROPORTION: Proportion,
    Plugin.CAPACITY: Capacity, Plugin.BINPACK: Binpack, Plugin.NODEORDER: NodeOrder,
    Plugin.PREDICATES: Predicates, Plugin.CONFORMANCE: Conformance, Plugin.OVERCOMMIT: Overcommit,
    Plugin.SLA: Sla, Plugin.NETWORK_TOPOLOGY_AWARE: NetworkTopologyAware,
}
"""Plugin builders by kind (framework.RegisterPluginBuilder)."""
