"""The default kube-scheduler as a policy family of the engine: one session pops the Pending pods
in queue order and runs a scheduling cycle for each, on the session objects of ``framework.py``.

Each piece follows the kube-scheduler (kubernetes/kubernetes ``pkg/scheduler``) or scheduler-plugins
source it names:

- queue order: ``plugins/queuesort/priority_sort.go`` (higher ``spec.priority``, then earlier), or
  Coscheduling's ``Less`` (priority, PodGroup creation time, namespace/name);
- Filter: NodeUnschedulable, TaintToleration, NodeAffinity (precomputed per feasibility class by
  ``compile.filter_failure``) and ``noderesources/fit.go`` (``Too many pods``, ``Insufficient <r>``),
  with the nominated pods of equal or higher priority counted first
  (``RunFilterPluginsWithNominatedPods``); ``schedule_one.go numFeasibleNodesToFind`` and the
  rotating start node;
- Score: ``noderesources/least_allocated.go``, ``most_allocated.go``,
  ``requested_to_capacity_ratio.go`` with ``helper/shape_score.go`` (:func:`fit_score`) and
  ``balanced_allocation.go`` (:func:`balanced_score`), integer math as in Go; equal top scores go
  to the lowest node index (kube-scheduler picks one of them at random);
- PostFilter: ``framework/preemption/preemption.go`` and ``defaultpreemption/default_preemption.go``
  (:func:`preempt`: eligibility, SelectVictimsOnNode with reprieve, pickOneNodeForPreemption);
  Coscheduling's PostFilter (reject the waiting siblings unless at most 10% of minMember is missing);
- Permit: Coscheduling (``pkg/coscheduling``): wait until minMember pods are reserved, for at most
  permitWaitingTimeSeconds; a timeout rejects the group (Unreserve);
- the ``FailedScheduling`` message of ``framework/types.go FitError.Error``.

The API server's ResourceQuota admission (``labkit.engine.quotas``) runs on the clock when pods are
created, not in the session: a refused pod does not exist for the scheduler. A kube-scheduler
scenario compiles with :data:`KUBE`: its KubeSchedulerConfiguration becomes the Policy.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...errors import SpecError
from ...spec import scheduler_of
from ...spec.kube import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_NODE_SCORE,
    CoschedulingArgs,
    KubeSchedulerConfiguration,
)
from ..compile import FamilyRules
from ..framework import NodeInfo, Session, Statement, TaskInfo
from ..problem import (
    CPU,
    LEAST_ALLOCATED,
    MEMORY,
    MIN_RESOURCE,
    MOST_ALLOCATED,
    PODS,
    REQUESTED_TO_CAPACITY_RATIO,
    Decisions,
    Family,
    KubeAction,
    KubeArgs,
    Note,
    Placement,
    Policy,
    Problem,
    State,
    TaskStatus,
)

DEFAULT_MILLI_CPU_REQUEST = 100.0
"""schedutil.DefaultMilliCPURequest: the cpu a pod without a cpu request counts for scoring."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024.0
"""schedutil.DefaultMemoryRequest (200Mi)."""
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION = 300.0
"""Unschedulable pods are retried at least this often (queue flush) even without cluster events."""
STRATEGIES = {"LeastAllocated": LEAST_ALLOCATED, "MostAllocated": MOST_ALLOCATED,
              "RequestedToCapacityRatio": REQUESTED_TO_CAPACITY_RATIO}

UNSCHEDULABLE, UNRESOLVABLE = 1, 2
"""Filter status codes: Unschedulable (preemption may help), UnschedulableAndUnresolvable."""
NOT_HELPFUL = "Preemption is not helpful for scheduling"
UNSCHEDULABLE_NODE = "node(s) were unschedulable"
"""NodeUnschedulable's reason: the node is cordoned (``spec.unschedulable``)."""
UNREACHABLE_NODE = "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
"""TaintToleration's reason for a node gone NotReady (a failed node stops posting its status, and
the node lifecycle controller taints it ``node.kubernetes.io/unreachable:NoSchedule``; the pods'
default tolerations are for the NoExecute taint only). NodeUnschedulable is filtered first."""
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "preemption: not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."
UNRESERVED = "rejection in Unreserve"
OPTIMISTIC = "optimistic rejection in PostFilter"
PREEMPTED_WAITING = "preempted"


# ------------------------------------------------------------------------------------ compile


def kube_policy(conf: KubeSchedulerConfiguration, resource_names: tuple[str, ...] | list[str]) -> Policy:
    """The Policy of a KubeSchedulerConfiguration (its one profile), resolved as kube-scheduler does."""
    profile = conf.profile
    fit = profile.args("NodeResourcesFit").scoring_strategy
    balanced = profile.args("NodeResourcesBalancedAllocation")
    preemption = profile.args("DefaultPreemption")
    coscheduling: CoschedulingArgs = profile.args("Coscheduling")
    if coscheduling.pod_group_backoff_seconds:
        raise SpecError("scheduler.kube.profiles[0].pluginConfig",
                        "Coscheduling podGroupBackoffSeconds is not simulated (leave it 0)")
    index = {name: r for r, name in enumerate(resource_names)}
    fit_weights = np.zeros(len(resource_names), np.int64)
    for spec in fit.resources:
        if spec.name in index:
            fit_weights[index[spec.name]] = spec.weight
    scored = np.zeros(len(resource_names), bool)
    for spec in balanced.resources:
        if spec.name in index:
            scored[index[spec.name]] = True
    shape = np.zeros((0, 2), np.int64)
    if fit.requested_to_capacity_ratio is not None:
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        shape = np.array([[p.utilization, p.score * scale] for p in fit.requested_to_capacity_ratio.shape], np.int64)
    args = KubeArgs(
        strategy=STRATEGIES[fit.type], fit_weights=fit_weights, shape=shape, balanced=scored,
        fit_score_weight=profile.score_weight("NodeResourcesFit"),
        balanced_score_weight=profile.score_weight("NodeResourcesBalancedAllocation"),
        preemption="DefaultPreemption" in profile.enabled("postFilter"),
        min_candidate_percentage=preemption.min_candidate_nodes_percentage,
        min_candidate_absolute=preemption.min_candidate_nodes_absolute,
        coscheduling="Coscheduling" in profile.enabled("permit"),
        permit_wait=float(coscheduling.permit_waiting_time_seconds),
        percentage_of_nodes_to_score=conf.percentage_of_nodes_to_score,
    )
    empty = np.zeros(0, np.int64)
    return Policy(
        actions=np.array([KubeAction.SCHEDULE], np.int64), plugin_tier=empty, plugin_kind=empty,
        plugin_enabled=np.zeros((0, 0), bool), plugin_args=np.zeros((0, 0)),
        plugin_resource_weights=np.zeros((0, len(resource_names))), family=Family.KUBE,
        action_period=np.array([POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION]), action_on_event=np.array([True]),
        pods_at_submit=True, kube=args)


KUBE = FamilyRules(policy=lambda scenario, resources: kube_policy(scheduler_of(scenario).kube, resources),
                   node_events=lambda policy: None)
"""How a kube-scheduler scenario compiles: its one profile as the Policy; the shared rest as it is."""


# ------------------------------------------------------------------------------------ scores


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: np.ndarray, p: int) -> int:
    """``helper.BuildBrokenLinearFunction``: the shape's score at utilization ``p``."""
    for i in range(len(shape)):
        if p <= shape[i, 0]:
            if i == 0:
                return int(shape[0, 1])
            du, ds = int(shape[i, 0] - shape[i - 1, 0]), int(shape[i, 1] - shape[i - 1, 1])
            return int(shape[i - 1, 1]) + _go_div(ds * (p - int(shape[i - 1, 0])), du)
    return int(shape[-1, 1])


def fit_score(args: KubeArgs, requested: np.ndarray, allocatable: np.ndarray) -> int:
    """NodeResourcesFit's score from the scored resources' (requested incl. the pod, allocatable),
    integers; resources with allocatable 0 drop out of the weighted mean."""
    score = weight_sum = 0
    for r in np.flatnonzero(args.fit_weights):
        alloc, req, weight = int(allocatable[r]), int(requested[r]), int(args.fit_weights[r])
        if alloc == 0:
            continue
        if args.strategy == LEAST_ALLOCATED:
            s = 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
        elif args.strategy == MOST_ALLOCATED:
            s = min(req, alloc) * MAX_NODE_SCORE // alloc
        else:
            s = broken_linear(args.shape, MAX_NODE_SCORE if req > alloc else req * MAX_NODE_SCORE // alloc)
            if s <= 0:
                continue  # RequestedToCapacityRatio counts only resources that score
        score += s * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    if args.strategy == REQUESTED_TO_CAPACITY_RATIO:
        return math.floor(score / weight_sum + 0.5)  # math.Round on positives
    return score // weight_sum


def balanced_score(fractions: list[float]) -> int:
    """NodeResourcesBalancedAllocation: (1 - std of the requested/allocatable fractions) x 100."""
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def num_feasible_nodes_to_find(percentage: int, n_nodes: int) -> int:
    """``schedule_one.go numFeasibleNodesToFind``: every node up to 100 nodes, else the percentage
    (adaptive 50 - n/125, at least 5% when 0), at least 100 nodes."""
    if n_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return n_nodes
    if percentage == 0:
        percentage = max(50 - n_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(n_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error(n_nodes: int, statuses: dict[int, list[str]], absent: str = "", pre_filter: str = "",
              post_filter: str = "") -> str:
    """``FitError.Error``: '0/N nodes are available:' + PreFilter message, or the sorted histogram
    of per-node reasons (nodes without a status count under ``absent``), + PostFilter message."""
    counts: dict[str, int] = {}
    for reasons in statuses.values():
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if absent and len(statuses) < n_nodes:
        counts[absent] = counts.get(absent, 0) + n_nodes - len(statuses)
    return fit_message(n_nodes, counts, pre_filter, post_filter)


def fit_message(n_nodes: int, counts: dict[str, int], pre_filter: str = "", post_filter: str = "") -> str:
    """:func:`fit_error` from the per-reason node counts (the numba core keeps counts, not lists)."""
    message = f"0/{n_nodes} nodes are available:"
    if pre_filter:
        message += f" {pre_filter}."
    elif counts:
        message += " " + ", ".join(sorted(f"{v} {k}" for k, v in counts.items() if v)) + "."
    if post_filter:
        message += f" {post_filter}"
    return message


def pre_filter_message(pod: str, alive: int, min_member: int) -> str:
    """Coscheduling PreFilter: the group has fewer pods than minMember."""
    return f"pre-filter pod {pod} cannot find enough sibling pods, current pods number: {alive}, minMember of group: {min_member}"


def group_rejected_message(group: str, pod: str) -> str:
    """Coscheduling PostFilter: the waiting siblings were rejected."""
    return f"PodGroup {group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"


def timeout_message(permit_wait: float) -> str:
    return f"rejected due to timeout after waiting {go_duration(permit_wait)} at plugin Coscheduling"


def waiting_message(node: str, assigned: int, min_member: int, group: str) -> str:
    return f"Pod is waiting to be scheduled to node {node} ({assigned}/{min_member} of PodGroup {group})"


def assigned_message(pod: str, node: str, group: str = "", assigned: int = 0, min_member: int = 0) -> str:
    """The Bound event's message; a PodGroup's says how many of minMember were assigned."""
    message = f"Successfully assigned {pod} to {node}"
    return message + f" (PodGroup {group}: {assigned}/{min_member})" if group else message


def preempted_message(preemptor: str, node: str) -> str:
    return f"Preempted by pod {preemptor} on node {node}"


def go_duration(seconds: float) -> str:
    """time.Duration.String for whole seconds: 60 -> '1m0s', 90 -> '1m30s', 3600 -> '1h0m0s'."""
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m}m{sec}s" if h else (f"{m}m{sec}s" if m else f"{sec}s")


# ------------------------------------------------------------------------------------ session


class Scheduler:
    """One session of kube-scheduler over the session objects: the queue, then a scheduling cycle
    per pod (:meth:`schedule_one`). ``nominated`` maps Pending pods to their nominatedNodeName."""

    def __init__(self, ssn: Session, state: State):
        self.ssn = ssn
        self.p = ssn.problem
        self.args: KubeArgs = self.p.policy.kube
        self.now = state.now
        self.start = state.task_start
        self.waiting_since = state.task_waiting_since.copy()
        self.nominated = {t: int(n) for t, n in enumerate(state.task_nominated)
                          if n >= 0 and ssn.tasks[t].status == TaskStatus.PENDING}
        self.next_node = state.next_node
        self.notes: list[Note] = []
        self.event_now = False

    # -- queue ------------------------------------------------------------------------------
    def group(self, task: TaskInfo) -> bool:
        """The pod belongs to a PodGroup (Coscheduling on, and the job has a minMember above 1)."""
        return self.args.coscheduling and self.ssn.jobs[task.job].min_available > 1

    def queue(self) -> list[TaskInfo]:
        """The active queue in QueueSort order: PrioritySort (priority desc, then queue time), or
        Coscheduling (priority desc, then PodGroup creation time or the pod's, then namespace/name)."""
        pending = [t for t in self.ssn.tasks if t.status == TaskStatus.PENDING]
        if self.args.coscheduling:
            return sorted(pending, key=lambda t: (-t.priority, self.ssn.jobs[t.job].creation, t.name))
        return sorted(pending, key=lambda t: (-t.priority, t.rank))

    # -- the scheduling cycle -----------------------------------------------------------------
    def run(self) -> None:
        self.expire_waiting()
        for task in self.queue():
            if task.status == TaskStatus.PENDING:  # a sibling's Permit may have placed it already
                self.schedule_one(task)

    def expire_waiting(self) -> None:
        """A pod that waited permitWaitingTimeSeconds at Permit is rejected; Unreserve then rejects
        every waiting sibling."""
        for job in self.ssn.jobs:
            waiting = job.with_status(TaskStatus.ALLOCATED)
            expired = [t for t in waiting if self.waiting_since[t.index] + self.args.permit_wait <= self.now]
            if not expired:
                continue
            self.unreserve(expired[0], timeout_message(self.args.permit_wait))

    def unreserve(self, first: TaskInfo, message: str) -> None:
        """A waiting pod `first` is rejected with `message`; Coscheduling's Unreserve then rejects every
        other waiting pod of its group with its own message."""
        for t in self.ssn.jobs[first.job].with_status(TaskStatus.ALLOCATED):
            self._reject(t, message if t is first else UNRESERVED)

    def schedule_one(self, task: TaskInfo) -> None:
        job = self.ssn.jobs[task.job]
        if self.group(task):
            alive = [t for t in job.tasks if t.status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)]
            if len(alive) < job.min_available:
                self.failed(task, {}, pre_filter=pre_filter_message(_pod(task), len(alive), job.min_available))
                return
        node, statuses = self.find_node(task)
        if node is None:
            self.failed(task, statuses)
            return
        self.nominated.pop(task.index, None)
        self.ssn._place(task, node, TaskStatus.ALLOCATED)  # Reserve: the pod is assumed on the node
        self.permit(task, node)

    def find_node(self, task: TaskInfo) -> tuple[NodeInfo | None, dict[int, tuple[int, list[str]]]]:
        """Filter (the nominated node first) and Score; the best node, or None with the per-node
        statuses (code, reasons) of the nodes filtered."""
        statuses: dict[int, tuple[int, list[str]]] = {}
        nominated = self.nominated.get(task.index)
        if nominated is not None:
            status = self.filter(task, self.ssn.nodes[nominated])
            if status is None:
                return self.ssn.nodes[nominated], statuses
        nodes = self.ssn.nodes
        wanted = num_feasible_nodes_to_find(self.args.percentage_of_nodes_to_score, len(nodes))
        feasible: list[NodeInfo] = []
        processed = 0
        for i in range(len(nodes)):
            node = nodes[(self.next_node + i) % len(nodes)]
            processed += 1
            status = self.filter(task, node)
            if status is None:
                feasible.append(node)
                if len(feasible) >= wanted:
                    break
            else:
                statuses[node.index] = status
        self.next_node = (self.next_node + processed) % len(nodes) if nodes else 0
        if not feasible:
            return None, statuses
        scores = [self.score(task, n) for n in feasible]
        best = max(range(len(feasible)), key=lambda i: (scores[i], -feasible[i].index))
        return feasible[best], statuses

    def filter(self, task: TaskInfo, node: NodeInfo, extra: np.ndarray | None = None) -> tuple[int, list[str]] | None:
        """The filters on one node: None if it passes, else (code, reasons). ``extra`` is what the
        nominated pods of priority >= the pod's add to the node (computed when not given)."""
        if not node.schedulable:
            return UNRESOLVABLE, [UNSCHEDULABLE_NODE if self.p.node_cordoned[node.index] else UNREACHABLE_NODE]
        failure = self.p.class_node_failure[task.node_class, node.index]
        if failure:
            return UNRESOLVABLE, [self.p.failure_reasons[failure]]
        used = node.used + (self.nominated_on(node, task) if extra is None else extra)
        reasons = []
        if used[PODS] + 1 > node.allocatable[PODS]:
            reasons.append("Too many pods")
        request = task.request
        if np.any(np.delete(request, PODS) > 0):
            for r in range(len(request)):
                if r != PODS and request[r] > 0 and request[r] > node.allocatable[r] - used[r] + MIN_RESOURCE / 10:
                    reasons.append(f"Insufficient {self.p.resource_names[r]}")
        return (UNSCHEDULABLE, reasons) if reasons else None

    def nominated_on(self, node: NodeInfo, task: TaskInfo) -> np.ndarray:
        """The requests of the Pending pods nominated to the node with priority >= the pod's."""
        extra = np.zeros(self.p.n_resources)
        for t, n in self.nominated.items():
            other = self.ssn.tasks[t]
            if n == node.index and t != task.index and other.priority >= task.priority:
                extra += other.request
        return extra

    def score(self, task: TaskInfo, node: NodeInfo) -> int:
        """Σ weight x score over NodeResourcesFit and NodeResourcesBalancedAllocation (the other
        default Score plugins give every node the same score for these pods)."""
        pods = [t for t in node.tasks.values() if t.index != task.index] + [task]
        total = 0
        if self.args.fit_score_weight:
            requested = np.zeros(self.p.n_resources)
            allocatable = np.zeros(self.p.n_resources)
            for r in np.flatnonzero(self.args.fit_weights):
                if r not in (CPU, MEMORY) and task.request[r] == 0:
                    continue  # an extended resource the pod does not request is not scored
                requested[r] = sum(_non_zero(p.request, r) for p in pods)
                allocatable[r] = node.allocatable[r]
            total += self.args.fit_score_weight * fit_score(self.args, requested, allocatable)
        if self.args.balanced_score_weight:
            dims = [r for r in np.flatnonzero(self.args.balanced) if r in (CPU, MEMORY) or task.request[r] > 0]
            if any(task.request[r] > 0 for r in dims):  # PreScore skips pods requesting none of them
                fractions = [min(sum(p.request[r] for p in pods) / node.allocatable[r], 1.0)
                             for r in dims if node.allocatable[r] > 0]
                total += self.args.balanced_score_weight * balanced_score(fractions)
        return total

    # -- Permit ---------------------------------------------------------------------------
    def permit(self, task: TaskInfo, node: NodeInfo) -> None:
        """Coscheduling's Permit: Success once the reserved and bound pods of the group reach
        minMember (every waiting sibling is allowed too), else Wait; other pods bind at once."""
        job = self.ssn.jobs[task.job]
        if not self.group(task):
            self.ssn.dispatch(task, "schedule", assigned_message(task.name, node.name))
            return
        assigned = [t for t in job.tasks if t.node >= 0 and t.status != TaskStatus.PENDING]
        if len(assigned) >= job.min_available:
            for t in job.with_status(TaskStatus.ALLOCATED):
                self.ssn.dispatch(t, "schedule", assigned_message(t.name, self.ssn.nodes[t.node].name, job.name,
                                                                  len(assigned), job.min_available))
                self.waiting_since[t.index] = np.nan
            return
        if np.isnan(self.waiting_since[task.index]):
            self.waiting_since[task.index] = self.now
        self.notes.append(Note(task.job, task.index, "Waiting", "Coscheduling",
                               waiting_message(node.name, len(assigned), job.min_available, job.name)))

    def _reject(self, task: TaskInfo, message: str) -> None:
        self.ssn._unplace(task)
        self.waiting_since[task.index] = np.nan
        self.notes.append(Note(task.job, task.index, "FailedScheduling", "Unschedulable", message))

    # -- failure: PostFilter ------------------------------------------------------------------
    def failed(self, task: TaskInfo, statuses: dict, pre_filter: str = "") -> None:
        """The FitError: PostFilter plugins in order (DefaultPreemption, then Coscheduling; the first
        success ends it), then the FailedScheduling event."""
        n = len(self.ssn.nodes)
        reasons = {i: r for i, (_, r) in statuses.items()}
        messages = []
        preempted = False
        if self.args.preemption:
            codes = {i: c for i, (c, _) in statuses.items()} if not pre_filter else {}
            preempted, message = self.preempt(task, codes)
            if message:
                messages.append(message)
        if not preempted and self.group(task):
            message = self.reject_group(task)
            if message:
                messages.append(message)
        text = fit_error(n, reasons, pre_filter=pre_filter, post_filter=", ".join(messages))
        self.notes.append(Note(task.job, task.index, "FailedScheduling", "Unschedulable", text))

    def reject_group(self, task: TaskInfo) -> str:
        """Coscheduling PostFilter: keep waiting if the group has minMember assigned or lacks at most
        10% of it; else reject the waiting siblings ("optimistic rejection in PostFilter")."""
        job = self.ssn.jobs[task.job]
        assigned = sum(1 for t in job.tasks if t.node >= 0 and t.status != TaskStatus.PENDING)
        if assigned >= job.min_available or (job.min_available - assigned) / job.min_available <= 0.1:
            return ""
        for t in job.with_status(TaskStatus.ALLOCATED):
            self._reject(t, OPTIMISTIC)
        return group_rejected_message(job.name, _pod(task))

    def preempt(self, task: TaskInfo, codes: dict[int, int]) -> tuple[bool, str]:
        """DefaultPreemption: (preempted, the 'preemption: ...' message, '' on success)."""
        if task.preempt_never:
            return False, NOT_ELIGIBLE_NEVER
        nominated = self.nominated.get(task.index)
        if nominated is not None and codes.get(nominated) != UNRESOLVABLE:
            node = self.ssn.nodes[nominated]
            if any(t.status == TaskStatus.RELEASING and t.priority < task.priority for t in node.tasks.values()):
                return False, NOT_ELIGIBLE_TERMINATING
        potential = [n for n in self.ssn.nodes if codes.get(n.index) == UNSCHEDULABLE]
        n_nodes = len(self.ssn.nodes)
        if not potential:
            return False, "preemption: " + fit_error(n_nodes, {}, absent=NOT_HELPFUL)
        wanted = min(max(len(potential) * self.args.min_candidate_percentage // 100,
                         self.args.min_candidate_absolute), len(potential))
        candidates: list[tuple[NodeInfo, list[TaskInfo]]] = []
        statuses: dict[int, list[str]] = {}
        for node in potential:
            victims, reasons = self.select_victims(task, node)
            if victims is None:
                statuses[node.index] = reasons
            else:
                candidates.append((node, victims))
                if len(candidates) >= wanted:
                    break
        if not candidates:
            return False, "preemption: " + fit_error(n_nodes, statuses, absent=NOT_HELPFUL)
        node, victims = self.pick_one_node(candidates)
        stmt = Statement(self.ssn, "Preempted")
        for victim in victims:
            if victim.status == TaskStatus.ALLOCATED:
                self.reject_waiting(victim)
            elif victim.status != TaskStatus.RELEASING:
                stmt.evict(victim, preempted_message(task.name, node.name))
        stmt.commit()
        for t, n in list(self.nominated.items()):
            if n == node.index and self.ssn.tasks[t].priority < task.priority:
                del self.nominated[t]  # lower-priority nominations on that node are cleared
        self.nominated[task.index] = node.index
        return True, ""

    def reject_waiting(self, victim: TaskInfo) -> None:
        """A victim waiting at Permit is not deleted but rejected (prepareCandidate: waitingPod.Reject
        "preempted"), so it frees its node at once; Coscheduling's Unreserve then rejects its waiting
        siblings."""
        self.unreserve(victim, PREEMPTED_WAITING)
        self.event_now = True

    def select_victims(self, task: TaskInfo, node: NodeInfo) -> tuple[list[TaskInfo] | None, list[str]]:
        """SelectVictimsOnNode: remove every lower-priority pod; if the preemptor then fits, add them
        back most important first (higher priority, then longer running) while it still fits."""
        lower = [t for t in node.tasks.values() if t.priority < task.priority]
        if not lower:
            return None, [NO_VICTIMS]
        extra = self.nominated_on(node, task)
        removed = sum((t.request for t in lower), np.zeros(self.p.n_resources))
        status = self.filter(task, node, extra - removed)
        if status is not None:
            return None, status[1]
        victims = []
        for t in sorted(lower, key=lambda t: (-t.priority, self._start(t), t.index)):
            removed = removed - t.request
            if self.filter(task, node, extra - removed) is not None:
                removed = removed + t.request
                victims.append(t)
        return victims, []

    def pick_one_node(self, candidates: list[tuple[NodeInfo, list[TaskInfo]]]) -> tuple[NodeInfo, list[TaskInfo]]:
        """pickOneNodeForPreemption: lowest highest-victim priority, then lowest sum of priorities
        (each + MaxInt32 + 1), then fewest victims, then the latest start of the highest-priority
        victims, then the first (no PodDisruptionBudgets here: no violations)."""
        def key(candidate):
            _, victims = candidate
            if not victims:
                return (-math.inf,)
            top = max(v.priority for v in victims)
            earliest = min(self._start(v) for v in victims if v.priority == top)
            return (top, sum(v.priority + 2**31 for v in victims), len(victims), -earliest)
        return min(candidates, key=key)

    def _start(self, task: TaskInfo) -> float:
        """GetPodStartTime: when the pod started; one not started yet counts as now."""
        start = self.start[task.index]
        return self.now if np.isnan(start) else float(start)

    # -- close ----------------------------------------------------------------------------
    def decisions(self, state: State) -> Decisions:
        d = self.ssn.decisions
        d.pipelined = [Placement(t, n, "DefaultPreemption", f"nominatedNodeName={self.ssn.nodes[n].name}")
                       for t, n in sorted(self.nominated.items()) if self.ssn.tasks[t].status == TaskStatus.PENDING]
        waiting = [t for t in self.ssn.tasks if t.status == TaskStatus.ALLOCATED]
        d.waiting = [Placement(t.index, t.node, "Coscheduling", "waiting at Permit") for t in waiting]
        d.wake_at = min((self.waiting_since[t.index] + self.args.permit_wait for t in waiting), default=math.inf)
        d.notes = self.notes
        d.event_now = self.event_now
        d.state = dataclasses.replace(state, next_node=self.next_node, task_waiting_since=self.waiting_since)
        return d


def _non_zero(request: np.ndarray, r: int) -> float:
    """A pod's request of ``r`` as NodeResourcesFit scores it (``NonZeroRequested`` for cpu/memory)."""
    if r == CPU and request[r] == 0:
        return DEFAULT_MILLI_CPU_REQUEST
    if r == MEMORY and request[r] == 0:
        return DEFAULT_MEMORY_REQUEST
    return float(request[r])


def _pod(task: TaskInfo) -> str:
    return task.name.split("/", 1)[-1]


def run_session(problem: Problem, state: State) -> Decisions:
    """One kube-scheduler session: every Pending pod once, in queue order."""
    ssn = Session(problem, state)
    scheduler = Scheduler(ssn, state)
    for action in problem.policy.actions:
        if action == KubeAction.SCHEDULE:
            scheduler.run()
    return scheduler.decisions(state)
