"""Kueue's admission engine: quota tree, flavor assignment, preemption, fair sharing, admission cycle.

Each piece follows the Kueue source it names (kubernetes-sigs/kueue, ``pkg/``):

- quota accounting on the cohort tree: ``cache/scheduler/resource_node.go`` (:class:`QuotaNode`);
- flavor assignment: ``scheduler/flavorassigner/flavorassigner.go`` and ``podset_reducer.go``
  (:func:`assign_flavors`, partial admission);
- preemption: ``scheduler/preemption/preemption.go``, ``classical/hierarchical_preemption.go``,
  ``classical/candidate_generator.go``, ``common/ordering.go`` (:func:`get_targets`);
- fair sharing: ``cache/scheduler/fair_sharing.go`` (:meth:`QuotaNode.dominant_resource_share`) and
  ``preemption/fairsharing/strategy.go``;
- the ClusterQueue heap and the admission cycle: ``cache/queue/cluster_queue.go`` and
  ``scheduler/scheduler.go`` (:func:`queue_order_key`, :func:`schedule`).

Quantities are in base units (cores, bytes, counts); a flavor-resource is ``(flavor, resource)``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import LabkitWarning, SpecError
from ...progress import Progress
from ...results import Result
from ...spec import Scenario, scheduler_of
from ...spec.kueue import local_queue
from ...spec.model import Scheduler
from ...spec.quantity import parse_duration, parse_quantity
from ...workloads import expand
from ..clock import Simulation, record_of
from ..compile import Compiled, compile_with
from ..problem import Decisions, Eviction, Placement, PodGroupPhase, Problem, State, TaskStatus
from ..quotas import format_quantity
from ..records import result_of
from ..volcano.reference import VOLCANO
from .tas import Snapshot, TopologyTree, taint_exclusion

FR = tuple[str, str]
"""A flavor-resource: ``(flavor, resource)``."""

NO_FIT, NO_CANDIDATES, PREEMPT, FIT = 0, 1, 2, 3
"""Flavor assignment modes (``flavorassigner`` granularMode), worst first: NO_CANDIDATES is a Preempt
whose preemption simulation found no targets."""

NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL, ANY = "Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"
MAY_STOP_SEARCH, TRY_NEXT_FLAVOR = "MayStopSearch", "TryNextFlavor"
STRICT_FIFO, BEST_EFFORT_FIFO = "StrictFIFO", "BestEffortFIFO"
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE = "LessThanOrEqualToFinalShare", "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
WAITING_FOR_QUOTA = "WaitingForQuota"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


# ------------------------------------------------------------------------------------------ objects


@dataclass(frozen=True)
class Quota:
    """``ResourceQuota``: nominalQuota, borrowingLimit and lendingLimit (None = unset)."""

    nominal: float = 0.0
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True)
class ResourceGroup:
    """``ResourceGroup``: coveredResources and the flavors tried, in order."""

    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True)
class Preemption:
    """``ClusterQueuePreemption``; ``borrow_within_cohort`` is the policy of borrowWithinCohort."""

    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    """``FlavorFungibility``: whether the search over flavors stops at a flavor that fits by borrowing
    (``when_can_borrow``) or needs preemption (``when_can_preempt``)."""

    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR


@dataclass(eq=False)
class PodSet:
    """A podset of a Workload: ``count`` pods of ``requests`` each; ``min_count`` for partial admission;
    ``topology``, its TAS request (level, None when unconstrained; required) and ``vector``, one pod's
    requests in the Problem's units, pods included (what TAS counts with)."""

    name: str
    count: int
    requests: dict[str, float]
    min_count: int | None = None
    topology: tuple[str | None, bool] | None = None
    vector: np.ndarray | None = None


@dataclass(eq=False)
class Workload:
    """A Kueue Workload. ``usage`` and ``flavors`` hold its admission (status.admission) once admitted.

    ``evicted_at`` and ``evicted_by`` record the last eviction (for the queue-order timestamp).
    """

    name: str
    cq: str
    podsets: list[PodSet]
    priority: int = 0
    created: float = 0.0
    uid: str = ""
    admitted_at: float | None = None
    usage: dict[FR, float] = field(default_factory=dict)
    flavors: list[dict[str, str]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    evicted: bool = False
    evicted_at: float | None = None
    evicted_by: str | None = None
    topology: list[TopologyPlacement] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.uid = self.uid or self.name


class QuotaNode:
    """A node of the cohort tree, a ClusterQueue or a Cohort (``resource_node.go``)."""

    def __init__(self, name: str, quotas: dict[FR, Quota] | None = None, weight: float = 1.0):
        self.name = name
        self.quotas: dict[FR, Quota] = dict(quotas or {})
        self.weight = weight
        self.parent: Cohort | None = None

    def path(self) -> str:
        """``/root/.../name``, as in the Preempted condition's preemptor and preemptee paths."""
        return (self.parent.path() if self.parent else "") + "/" + self.name

    def ancestors(self) -> Iterator[Cohort]:
        """``PathParentToRoot``."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        return self if self.parent is None else self.parent.root()

    def usage(self, fr: FR) -> float:
        raise NotImplementedError

    def subtree_quota(self, fr: FR) -> float:
        q = self.quotas.get(fr)
        return q.nominal if q else 0.0

    def local_quota(self, fr: FR) -> float:
        """The part of the subtree quota the parent never sees (``nominal - lendingLimit``)."""
        q = self.quotas.get(fr)
        if q is None or q.lending_limit is None:
            return 0.0
        return max(0.0, self.subtree_quota(fr) - q.lending_limit)

    def local_available(self, fr: FR) -> float:
        return max(0.0, self.local_quota(fr) - self.usage(fr))

    def available(self, fr: FR) -> float:
        """What this node can still use of ``fr``, borrowing from its ancestors within limits."""
        if self.parent is None:
            return max(0.0, self.subtree_quota(fr) - self.usage(fr))
        local = self.local_quota(fr)
        parent_available = self.parent.available(fr)
        q = self.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            stored = self.subtree_quota(fr) - local
            used = max(0.0, self.usage(fr) - local)
            parent_available = max(0.0, min(parent_available, stored - used + q.borrowing_limit))
        return self.local_available(fr) + parent_available

    def potential_available(self, fr: FR) -> float:
        """The capacity of ``fr`` with every usage at zero."""
        if self.parent is None:
            return self.subtree_quota(fr)
        value = self.local_quota(fr) + self.parent.potential_available(fr)
        q = self.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            value = min(value, self.subtree_quota(fr) + q.borrowing_limit)
        return value

    def borrowing_with(self, fr: FR, value: float) -> bool:
        return self.usage(fr) + value > self.subtree_quota(fr)

    def within_nominal(self, frs: Iterable[FR]) -> bool:
        """``IsWithinNominalInResources``."""
        return all(not self.borrowing_with(fr, 0.0) for fr in frs)

    def fits_in_quota(self, requests: dict[FR, float]) -> tuple[bool, dict[FR, float]]:
        """``QuantitiesFitInQuota``: whether the requests fit the unused subtree quota, and the part of
        each request that does not (what the parent has to cover)."""
        unused = {fr: max(0.0, self.subtree_quota(fr) - self.usage(fr)) for fr in requests}
        remaining = {fr: max(0.0, v - unused[fr]) for fr, v in requests.items()}
        return all(v == 0 for v in remaining.values()), remaining

    def dominant_resource_share(self, add: dict[FR, float] | None = None, remove: dict[FR, float] | None = None
                                ) -> float:
        """DRS (``fair_sharing.go``): max over resources of borrowed * 1000 / lendable, over the weight."""
        if self.parent is None:
            return 0.0
        add, remove = add or {}, remove or {}
        borrowed: dict[str, float] = {}
        lendable: dict[str, float] = {}
        for fr in set(self.quotas) | set(add) | set(remove):
            extra = add.get(fr, 0.0) - remove.get(fr, 0.0)
            borrowed[fr[1]] = borrowed.get(fr[1], 0.0) + max(0.0, self.usage(fr) + extra - self.subtree_quota(fr))
            lendable[fr[1]] = lendable.get(fr[1], 0.0) + self.parent.potential_available(fr)
        ratio = max((math.floor(borrowed[r] * 1000 / lendable[r] + 1e-9) for r in borrowed if lendable[r] > 0),
                    default=0)
        if ratio == 0:
            return 0.0
        return math.inf if self.weight == 0 else float(math.floor(ratio / self.weight + 1e-9))


class Cohort(QuotaNode):
    """A Cohort: its own quota (resourceGroups) plus what its children lend to it."""

    def __init__(self, name: str, quotas: dict[FR, Quota] | None = None, weight: float = 1.0):
        super().__init__(name, quotas, weight)
        self.children: list[QuotaNode] = []

    def subtree_quota(self, fr: FR) -> float:
        own = super().subtree_quota(fr)
        return own + sum(c.subtree_quota(fr) - c.local_quota(fr) for c in self.children)

    def usage(self, fr: FR) -> float:
        return sum(max(0.0, c.usage(fr) - c.local_quota(fr)) for c in self.children)

    def cluster_queues(self) -> Iterator[ClusterQueue]:
        for child in self.children:
            if isinstance(child, Cohort):
                yield from child.cluster_queues()
            else:
                yield child  # type: ignore[misc]

    def height(self) -> int:
        """``getNodeHeight``: the distance to the furthest leaf."""
        return max([min(len(self.children), 1)] + [c.height() + 1 for c in self.children if isinstance(c, Cohort)])


class ClusterQueue(QuotaNode):
    """A ClusterQueue with its admitted workloads and their usage."""

    def __init__(self, name: str, resource_groups: list[ResourceGroup], quotas: dict[FR, Quota],
                 preemption: Preemption = Preemption(), queueing_strategy: str = BEST_EFFORT_FIFO,
                 weight: float = 1.0, fungibility: FlavorFungibility = FlavorFungibility()):
        super().__init__(name, quotas, weight)
        self.resource_groups = resource_groups
        self.preemption = preemption
        self.fungibility = fungibility
        self.queueing_strategy = queueing_strategy
        self.workloads: dict[str, Workload] = {}
        self._usage: dict[FR, float] = {}

    def usage(self, fr: FR) -> float:
        return self._usage.get(fr, 0.0)

    def add_workload(self, wl: Workload) -> None:
        self.workloads[wl.uid] = wl
        for fr, v in wl.usage.items():
            self._usage[fr] = self._usage.get(fr, 0.0) + v

    def remove_workload(self, wl: Workload) -> None:
        del self.workloads[wl.uid]
        for fr, v in wl.usage.items():
            self._usage[fr] = self._usage.get(fr, 0.0) - v

    def reserve(self, usage: dict[FR, float], sign: float = 1.0) -> None:
        """``cq.AddUsage`` of a preempting entry (``scheduler.go: processEntry``): the quota it waits for
        stays taken for the rest of the session, so no later entry is admitted into it; -1 gives it back."""
        for fr, v in usage.items():
            self._usage[fr] = self._usage.get(fr, 0.0) + sign * v

    def group_of(self, resource: str) -> ResourceGroup | None:
        return next((g for g in self.resource_groups if resource in g.covered), None)


class Tree:
    """The cache snapshot: ClusterQueues and Cohorts linked by ``cohort`` / ``parent`` names."""

    def __init__(self, cluster_queues: list[ClusterQueue], cohorts: list[Cohort],
                 parents: dict[str, str | None]):
        self.cqs = {cq.name: cq for cq in cluster_queues}
        self.cohorts = {c.name: c for c in cohorts}
        self.tas: TopologyAware | None = None
        for node in [*cluster_queues, *cohorts]:
            parent = parents.get(node.name)
            if parent is not None:
                if parent not in self.cohorts:
                    self.cohorts[parent] = Cohort(parent)
                node.parent = self.cohorts[parent]
                node.parent.children.append(node)

    def add(self, wl: Workload) -> None:
        self.cqs[wl.cq].add_workload(wl)

    def remove(self, wl: Workload) -> None:
        self.cqs[wl.cq].remove_workload(wl)

    def members(self, cq: ClusterQueue) -> list[ClusterQueue]:
        """Every ClusterQueue in the cohort tree of ``cq``."""
        root = cq.root()
        return list(root.cluster_queues()) if isinstance(root, Cohort) else [cq]


@dataclass
class TopologyAware:
    """Topology Aware Scheduling in the cache: the tree of each TAS flavor (a ResourceFlavor with a
    ``topologyName``), the ClusterQueues whose flavors all are TAS flavors (``IsTASOnly``: their podsets
    use TAS unasked, unconstrained), each podset's excluded leaves (``excluded``: workload name and
    podset index -> per leaf of its flavor, an untolerated taint or None) and the cycle's ``snapshot``."""

    trees: dict[str, TopologyTree]
    tas_only: set[str]
    excluded: dict[tuple[str, int, str], list[str | None]] = field(default_factory=dict)
    snapshot: Snapshot | None = None

    def request(self, cq: str, ps: PodSet) -> tuple[str | None, bool] | None:
        """The podset's TAS request in ClusterQueue ``cq``: its own, else the implied one of a TAS-only
        ClusterQueue (the lowest level, unconstrained), else None."""
        return ps.topology if ps.topology is not None else ((None, False) if cq in self.tas_only else None)


def _tas_mismatch(tree: Tree, cq: ClusterQueue, ps: PodSet, flavor: str) -> str:
    """``checkPodSetAndFlavorMatchForTAS``: why the flavor cannot take the podset ("" when it can)."""
    tas = tree.tas
    if tas is None:
        return ""
    request = tas.request(cq.name, ps)
    topology = tas.trees.get(flavor)
    if request is None:
        return f'Flavor "{flavor}" supports only TopologyAwareScheduling' if topology is not None else ""
    if topology is None:
        return f'Flavor "{flavor}" does not support TopologyAwareScheduling'
    if request[0] is not None and request[0] not in topology.levels:
        return f'Flavor "{flavor}" does not contain the requested level'
    return ""


def _assign_topology(tree: Tree, wl: Workload, a: Assignment) -> None:
    """The TAS step of ``FlavorAssigner.Assign``: on a Fit, place each TAS podset on its flavor's
    topology (a podset that does not fit makes the assignment a Preempt, with Kueue's reason); on a
    Preempt, place them as if no TAS workload were admitted (``WithSimulateEmpty``): no fit even then
    is a NoFit (no flavors, no usage, as any NoFit). The podsets of one workload see each other's pods
    (``assumedUsage``). A podset given no TAS flavor (it requests nothing) is not placed."""
    tas = tree.tas
    if tas is None or tas.snapshot is None or a.mode == NO_FIT:
        return
    wanted = []
    for i, ps in enumerate(wl.podsets):
        request = tas.request(wl.cq, ps)
        flavor = next((f for f in a.flavors[i].values() if f in tas.trees), None)
        if request is not None and flavor is not None and a.counts[i] > 0:
            wanted.append((i, ps, request, flavor))
    if not wanted:
        return

    def place(simulate_empty: bool) -> tuple[list[TopologyPlacement], str, str]:
        snapshot, out = tas.snapshot, []
        try:
            for i, ps, (level, required), flavor in wanted:
                placement, reason = snapshot.find(flavor, ps.vector, a.counts[i], level, required,
                                                  tas.excluded.get((wl.name, i, flavor)), simulate_empty)
                if reason:
                    return out, ps.name, reason
                snapshot.add(flavor, placement, ps.vector, assumed=True)
                out.append((i, flavor, placement))
            return out, "", ""
        finally:
            for i, flavor, placement in out:
                snapshot.add(flavor, placement, wl.podsets[i].vector, -1, assumed=True)

    if a.mode == FIT:
        placed, podset, reason = place(False)
        if not reason:
            a.topology = placed
            return
        a.mode = PREEMPT
        a.message = f"couldn't assign flavors to pod set {podset}: {reason}"
    if place(True)[2]:
        a.mode, a.flavors, a.usage = NO_FIT, [], {}


# ------------------------------------------------------------------------------- flavor assignment


TopologyPlacement = tuple[int, str, list[tuple[int, int]]]
"""A podset's TopologyAssignment: (podset index, TAS flavor, [(leaf of the flavor's tree, pods)])."""


@dataclass
class Assignment:
    """The flavor assignment of a workload (``flavorassigner.Assignment``), with the topology
    assignment of its TAS podsets."""

    mode: int
    flavors: list[dict[str, str]]
    counts: list[int]
    usage: dict[FR, float]
    borrowing: int = 0
    message: str = ""
    topology: list[TopologyPlacement] = field(default_factory=list)

    def preempt_frs(self, cq: ClusterQueue) -> dict[FR, float]:
        """The flavor-resources that need preemption, with the workload's request on them."""
        return {fr: v for fr, v in self.usage.items() if v > cq.available(fr)}


def _fits_resource_quota(tree: Tree, wl: Workload, cq: ClusterQueue, fr: FR, value: float, request: float,
                         fair: bool) -> tuple[int, int, str]:
    """``fitsResourceQuota``: (mode, borrowing height, status message); a Preempt is checked by
    simulating the preemption of ``fr`` alone (``SimulatePreemption``)."""
    available, capacity = cq.available(fr), cq.potential_available(fr)
    resource, flavor = fr[1], fr[0]
    if value > capacity:
        return NO_FIT, 0, (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets "
                           f"requests ({format_quantity(resource, value - request)}) + current podset request "
                           f"({format_quantity(resource, request)}) > maximum capacity "
                           f"({format_quantity(resource, capacity)})")
    borrow, may_reclaim = _lowest_subtree_that_fits(cq, fr, value)
    if value <= available:
        return FIT, borrow, ""
    message = (f"insufficient unused quota for {resource} in flavor {flavor}, "
               f"{format_quantity(resource, value - available)} more needed")
    p = cq.preemption
    while_borrowing = p.borrow_within_cohort != NEVER or (fair and p.reclaim_within_cohort != NEVER)
    if value <= cq.subtree_quota(fr) or may_reclaim or while_borrowing:
        found = get_targets(tree, wl, {fr: value}, {fr: value}, fair)
        return (PREEMPT if found else NO_CANDIDATES), borrow, message
    return NO_FIT, borrow, message


def _lowest_subtree_that_fits(cq: ClusterQueue, fr: FR, value: float) -> tuple[int, bool]:
    """``FindHeightOfLowestSubtreeThatFits``: (height, whether the subtree is below the root)."""
    if not (cq.borrowing_with(fr, value) and cq.parent is not None):
        return 0, cq.parent is not None
    remaining = value - cq.local_available(fr)
    node: Cohort | None = None
    for node in cq.ancestors():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
    assert node is not None
    return node.height(), node.parent is not None


def _assign_counts(tree: Tree, wl: Workload, counts: list[int], fair: bool) -> Assignment:
    """Assign a flavor per resource group to each podset with the given pod counts."""
    cq = tree.cqs[wl.cq]
    usage: dict[FR, float] = {}
    flavors: list[dict[str, str]] = []
    worst, borrowing, message = FIT, 0, ""
    for ps, count in zip(wl.podsets, counts):
        chosen: dict[str, str] = {}
        requested = [r for r, v in ps.requests.items() if v > 0]
        for r in requested:
            if cq.group_of(r) is None:
                return Assignment(NO_FIT, [], counts, {}, message=(
                    f"couldn't assign flavors to pod set {ps.name}: resource {r} unavailable in ClusterQueue"))
        groups = []
        for r in requested:
            g = cq.group_of(r)
            if g not in groups:
                groups.append(g)
        for g in groups:
            best: tuple[int, int, str] | None = None
            reasons: list[str] = []
            for flavor in g.flavors:
                mismatch = _tas_mismatch(tree, cq, ps, flavor)
                if mismatch:
                    reasons.append(mismatch)
                    best = best or (NO_FIT, 0, flavor)
                    continue
                mode, borrow, msgs = FIT, 0, []
                for r in (r for r in requested if r in g.covered):
                    request = ps.requests[r] * count
                    fr = (flavor, r)
                    m, b, msg = _fits_resource_quota(tree, wl, cq, fr, usage.get(fr, 0.0) + request, request, fair)
                    mode, borrow = min(mode, m), max(borrow, b)
                    if msg:
                        msgs.append(msg)
                reasons.extend(msgs)
                if best is None or (mode, -borrow) > (best[0], -best[1]):
                    best = (mode, borrow, flavor)
                f = cq.fungibility
                if (mode == FIT and (borrow == 0 or f.when_can_borrow == MAY_STOP_SEARCH)) or (
                        mode == PREEMPT and f.when_can_preempt == MAY_STOP_SEARCH):
                    break
            assert best is not None
            mode, borrow, flavor = best
            if mode == NO_FIT:
                return Assignment(NO_FIT, [], counts, {}, message=(
                    f"couldn't assign flavors to pod set {ps.name}: {', '.join(reasons)}"))
            worst, borrowing = min(worst, mode), max(borrowing, borrow)
            for r in (r for r in requested if r in g.covered):
                chosen[r] = flavor
                usage[(flavor, r)] = usage.get((flavor, r), 0.0) + ps.requests[r] * count
            if mode in (PREEMPT, NO_CANDIDATES):
                message = f"couldn't assign flavors to pod set {ps.name}: {', '.join(reasons)}"
        flavors.append(chosen)
    return Assignment(worst, flavors, counts, usage, borrowing, message if worst < FIT else "")


def assign_flavors(tree: Tree, wl: Workload, fair: bool = False, strategies=DEFAULT_STRATEGIES
                   ) -> tuple[Assignment, list[Target]]:
    """Flavor assignment with the preemption targets it needs; partial admission (``podset_reducer.go``)
    searches smaller counts when the full counts give neither Fit nor Preempt with targets."""
    cq = tree.cqs[wl.cq]

    def attempt(counts: list[int]) -> tuple[Assignment, list[Target]]:
        a = _assign_counts(tree, wl, counts, fair)
        _assign_topology(tree, wl, a)
        targets = get_targets(tree, wl, a.preempt_frs(cq), a.usage, fair, strategies) \
            if a.mode == PREEMPT else []
        return a, targets

    full = [ps.count for ps in wl.podsets]
    first = attempt(full)
    if first[0].mode == FIT or first[1]:
        return first
    deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in wl.podsets]
    total = sum(deltas)
    if total == 0:
        return first
    lo, hi, found = 1, total, None
    while lo <= hi:  # sort.Search over k: the smallest reduction that fits
        k = (lo + hi) // 2
        got = attempt([ps.count - (d * k) // total for ps, d in zip(wl.podsets, deltas)])
        if got[0].mode == FIT or got[1]:
            found, hi = got, k - 1
        else:
            lo = k + 1
    return found or first


# -------------------------------------------------------------------------------------- preemption


@dataclass(frozen=True)
class Target:
    """A workload to preempt and its Preempted condition reason."""

    workload: Workload
    reason: str


def queue_order_timestamp(wl: Workload, requeuing_timestamp: str = "Eviction") -> float:
    """``GetQueueOrderTimestamp``: the eviction time after a PodsReady timeout (timestamp=Eviction)."""
    if wl.evicted_by == "PodsReadyTimeout" and requeuing_timestamp == "Eviction" and wl.evicted_at is not None:
        return wl.evicted_at
    return wl.created


def candidates_ordering(wl: Workload, preemptor_cq: str) -> tuple:
    """``CandidatesOrdering``: evicted first, other CQs first, lower priority, newest admission, UID."""
    admitted = wl.admitted_at if wl.admitted_at is not None else 0.0
    return (not wl.evicted, wl.cq == preemptor_cq, wl.priority, -admitted, wl.uid)


def _policy_allows(policy: str, preemptor: Workload, candidate: Workload) -> bool:
    """``common/preemption_policy.go``."""
    if policy == ANY:
        return True
    if policy == LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == LOWER_OR_NEWER_EQUAL:
        return preemptor.priority > candidate.priority or (
            preemptor.priority == candidate.priority
            and queue_order_timestamp(preemptor) < queue_order_timestamp(candidate))
    return False


def _uses(wl: Workload, frs: Iterable[FR]) -> bool:
    return any(fr in wl.usage for fr in frs)


def workload_fits(cq: ClusterQueue, requests: dict[FR, float], allow_borrowing: bool) -> bool:
    """``workloadFits``."""
    for fr, v in requests.items():
        if not allow_borrowing and cq.borrowing_with(fr, v):
            return False
        if v > cq.available(fr) + 1e-9:
            return False
    return True


WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = range(1, 5)
_VARIANT_REASON = {WITHIN_CQ: IN_CLUSTER_QUEUE, HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
                   RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
                   RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass(frozen=True)
class _Candidate:
    wl: Workload
    lca: Cohort | None
    variant: int


def _classify(cq: ClusterQueue, preemptor: Workload, wl: Workload, frs: set[FR], advantage: bool) -> int:
    """``classifyPreemptionVariant``; 0 means the candidate cannot be preempted."""
    if not _uses(wl, frs):
        return 0
    same = wl.cq == cq.name
    policy = cq.preemption.within_cluster_queue if same else cq.preemption.reclaim_within_cohort
    if not _policy_allows(policy, preemptor, wl):
        return 0
    if same:
        return WITHIN_CQ
    if advantage:
        return HIERARCHICAL_RECLAIM
    p = cq.preemption
    if p.borrow_within_cohort == NEVER:
        return RECLAIM_WITHOUT_BORROWING
    if wl.priority >= preemptor.priority or (
            p.max_priority_threshold is not None and wl.priority > p.max_priority_threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


def _from_cq(other: ClusterQueue, lca: Cohort | None, cq: ClusterQueue, preemptor: Workload, frs: set[FR],
             advantage: bool) -> list[_Candidate]:
    out = []
    for wl in other.workloads.values():
        variant = _classify(cq, preemptor, wl, frs, advantage)
        if variant:
            out.append(_Candidate(wl, lca, variant))
    return out


def _collect_in_subtree(cohort: Cohort, subtree_root: Cohort, skip: QuotaNode | None, cq: ClusterQueue,
                        preemptor: Workload, frs: set[FR], advantage: bool, out: list[_Candidate]) -> None:
    """``collectCandidatesInSubtree``: candidates in the subtrees that exceed their quota."""
    for child in cohort.children:
        if child is skip or child is cq or child.within_nominal(frs):
            continue
        if isinstance(child, Cohort):
            _collect_in_subtree(child, subtree_root, skip, cq, preemptor, frs, advantage, out)
        else:
            out.extend(_from_cq(child, subtree_root, cq, preemptor, frs, advantage))  # type: ignore[arg-type]


def _classical_targets(tree: Tree, wl: Workload, cq: ClusterQueue, frs: set[FR], requests: dict[FR, float]
                       ) -> list[Target]:
    """``classicalPreemptions``: candidates, attempt order, greedy removal then fill-back."""
    same = _from_cq(cq, None, cq, wl, frs, False) if cq.preemption.within_cluster_queue != NEVER else []
    hierarchy: list[_Candidate] = []
    priority: list[_Candidate] = []
    if cq.parent is not None and cq.preemption.reclaim_within_cohort != NEVER:
        wanted = {fr: v for fr, v in requests.items() if fr in frs}
        advantage, remaining = cq.fits_in_quota(wanted)
        previous: QuotaNode | None = None
        for node in cq.ancestors():
            _collect_in_subtree(node, node, previous, cq, wl, frs, advantage,
                                hierarchy if advantage else priority)
            fits, remaining = node.fits_in_quota(remaining)
            advantage = advantage or fits
            previous = node
    lists = [sorted(x, key=lambda c: candidates_ordering(c.wl, cq.name)) for x in (hierarchy, priority, same)]
    ordered = [c for x in lists for c in x if c.wl.evicted] + [c for x in lists for c in x if not c.wl.evicted]
    forbidden = cq.preemption.borrow_within_cohort == NEVER
    under_nominal = all(cq.usage(fr) < cq.subtree_quota(fr) for fr in frs)
    if not (hierarchy or priority) or (forbidden and not under_nominal):
        attempts = [True]
    elif forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        targets = _minimal(tree, cq, frs, requests, ordered, allow_borrowing)
        if targets:
            return targets
    return []


def _valid(c: _Candidate, tree: Tree, cq: ClusterQueue, frs: set[FR], allow_borrowing: bool) -> bool:
    """``candidateIsValid``: a cross-CQ candidate's CQ and its ancestors below the LCA still borrow."""
    if c.wl.cq == cq.name:
        return True
    if allow_borrowing and c.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    other = tree.cqs[c.wl.cq]
    if other.within_nominal(frs):
        return False
    for node in other.ancestors():
        if node is c.lca:
            break
        if node.within_nominal(frs):
            return False
    return True


def _minimal(tree: Tree, cq: ClusterQueue, frs: set[FR], requests: dict[FR, float], candidates: list[_Candidate],
             allow_borrowing: bool) -> list[Target]:
    targets: list[Target] = []
    fits = False
    for c in candidates:
        if not _valid(c, tree, cq, frs, allow_borrowing):
            continue
        tree.remove(c.wl)
        targets.append(Target(c.wl, _VARIANT_REASON[c.variant]))
        if workload_fits(cq, requests, allow_borrowing):
            fits = True
            break
    if fits:
        targets = _fill_back(tree, cq, requests, targets, allow_borrowing)
    for t in targets:
        tree.add(t.workload)
    return targets if fits else []


def _fill_back(tree: Tree, cq: ClusterQueue, requests: dict[FR, float], targets: list[Target],
               allow_borrowing: bool) -> list[Target]:
    """``fillBackWorkloads``: in reverse order, put back every target but the last that is not needed."""
    for i in range(len(targets) - 2, -1, -1):
        tree.add(targets[i].workload)
        if workload_fits(cq, requests, allow_borrowing):
            targets.pop(i)
        else:
            tree.remove(targets[i].workload)
    return targets


def _fair_targets(tree: Tree, wl: Workload, cq: ClusterQueue, frs: set[FR], requests: dict[FR, float],
                  strategies: tuple[str, ...]) -> list[Target]:
    """``fairPreemptionStrategy`` (``fair_strategy.go``): take candidates from the CQ with the highest DRS
    while the first strategy allows it, then one per CQ under the second; the preemptor's own CQ without a
    share check, and every CQ when the preemptor stays within nominal (FairSharingPreemptWithinNominal)."""
    candidates: list[Workload] = []
    if cq.preemption.within_cluster_queue != NEVER:
        candidates += [w for w in cq.workloads.values()
                       if _uses(w, frs) and _policy_allows(cq.preemption.within_cluster_queue, wl, w)]
    if cq.parent is not None and cq.preemption.reclaim_within_cohort != NEVER:
        for other in tree.members(cq):
            if other is cq or other.within_nominal(frs):
                continue
            candidates += [w for w in other.workloads.values()
                           if _uses(w, frs) and _policy_allows(cq.preemption.reclaim_within_cohort, wl, w)]
    candidates.sort(key=lambda w: candidates_ordering(w, cq.name))
    within_nominal = all(not cq.borrowing_with(fr, requests.get(fr, 0.0)) for fr in frs)

    def rule(name: str, preemptor_new: float, target_old: float, target_new: float) -> bool:
        if name == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
            return preemptor_new <= target_new
        return preemptor_new < target_old

    def by_cq(workloads: list[Workload]) -> dict[str, list[Workload]]:
        groups: dict[str, list[Workload]] = {}
        for w in workloads:
            groups.setdefault(w.cq, []).append(w)
        return groups

    def pop_highest(groups: dict[str, list[Workload]]) -> str:
        """The CQ with the highest DRS; on ties, the one whose first candidate orders first."""
        shares = {name: tree.cqs[name].dominant_resource_share() for name in groups}
        top = max(shares.values())
        return min((name for name in groups if shares[name] == top),
                   key=lambda name: candidates_ordering(groups[name][0], cq.name))

    targets: list[Target] = []
    fits = False
    retry: list[Workload] = []
    groups = by_cq(candidates)
    while groups and not fits:
        name = pop_highest(groups)
        queue = groups.pop(name)
        other = tree.cqs[name]
        if other is cq:
            tree.remove(queue[0])
            targets.append(Target(queue[0], IN_CLUSTER_QUEUE))
            fits = workload_fits(cq, requests, True)
            if queue[1:]:
                groups[name] = queue[1:]
            continue
        preemptor_new = cq.dominant_resource_share(add=requests)
        old = other.dominant_resource_share()
        for i, cand in enumerate(queue):
            new = other.dominant_resource_share(remove=cand.usage)
            if within_nominal or rule(strategies[0], preemptor_new, old, new):
                tree.remove(cand)
                targets.append(Target(cand, IN_COHORT_RECLAMATION if within_nominal else IN_COHORT_FAIR_SHARING))
                fits = workload_fits(cq, requests, True)
                if not fits and queue[i + 1:] and not other.within_nominal(frs):
                    groups[name] = queue[i + 1:]
                break
            retry.append(cand)
    if not fits and len(strategies) > 1:
        firsts = {name: ws[:1] for name, ws in by_cq(retry).items()}
        while firsts and not fits:
            name = pop_highest(firsts)
            cand = firsts.pop(name)[0]
            if rule(strategies[1], cq.dominant_resource_share(add=requests),
                    tree.cqs[name].dominant_resource_share(), 0.0):
                tree.remove(cand)
                targets.append(Target(cand, IN_COHORT_FAIR_SHARING))
                fits = workload_fits(cq, requests, True)
    if fits:
        targets = _fill_back(tree, cq, requests, targets, True)
    for t in targets:
        tree.add(t.workload)
    return targets if fits else []


def get_targets(tree: Tree, wl: Workload, need: dict[FR, float], requests: dict[FR, float], fair: bool = False,
                strategies: tuple[str, ...] = DEFAULT_STRATEGIES) -> list[Target]:
    """``Preemptor.GetTargets``: the workloads to preempt so that ``requests`` fits, given the
    flavor-resources in ``need`` that need preemption; empty when no set of candidates suffices."""
    cq = tree.cqs[wl.cq]
    frs = set(need)
    if not frs:
        return []
    if fair:
        return _fair_targets(tree, wl, cq, frs, requests, strategies)
    return _classical_targets(tree, wl, cq, frs, requests)


def preempted_message(preemptor: Workload, target: Target, tree: Tree) -> str:
    """The Preempted condition's message (``preemption.go`` IssuePreemptions)."""
    return (f"Preempted to accommodate a workload (UID: {preemptor.uid}) due to "
            f"{HUMAN_READABLE_REASONS[target.reason]}; preemptor path: {tree.cqs[preemptor.cq].path()}; "
            f"preemptee path: {tree.cqs[target.workload.cq].path()}")


# --------------------------------------------------------------------------------- admission cycle


def queue_order_key(wl: Workload, requeuing_timestamp: str = "Eviction") -> tuple:
    """``baseCompareFunc`` of the ClusterQueue heap: higher priority, earlier timestamp, then UID."""
    return (-wl.priority, queue_order_timestamp(wl, requeuing_timestamp), wl.uid)


@dataclass
class Entry:
    """One nominated head in a cycle; after the cycle, ``status`` is admitted, preempting or pending."""

    workload: Workload
    assignment: Assignment
    targets: list[Target]
    status: str = "pending"
    reason: str = WAITING_FOR_QUOTA
    message: str = ""


def _fair_next(tree: Tree, entries: list[Entry]) -> Entry:
    """The DRS tournament (``fair_sharing_iterator.go``): at every cohort the best entries of its children
    compete; a child that does not borrow from the cohort wins, then the lower DRS after admitting the
    workload, higher priority, FIFO. The winners go up to the root."""

    def key(node: QuotaNode, e: Entry) -> tuple:
        usage = e.assignment.usage
        return (any(node.borrowing_with(fr, v) for fr, v in usage.items()),
                node.dominant_resource_share(add=usage), -e.workload.priority,
                queue_order_timestamp(e.workload), e.workload.uid)

    def winner(node: QuotaNode) -> Entry | None:
        if isinstance(node, ClusterQueue):
            return next((e for e in entries if e.workload.cq == node.name), None)
        contenders = [(c, w) for c in node.children if (w := winner(c)) is not None]  # type: ignore[attr-defined]
        return min(contenders, key=lambda c: key(*c))[1] if contenders else None

    roots = dict.fromkeys(tree.cqs[e.workload.cq].root() for e in entries)
    finalists = [w for root in roots if (w := winner(root)) is not None]
    return min(finalists, key=lambda e: key(tree.cqs[e.workload.cq], e))


def schedule(tree: Tree, heads: list[Workload], now: float = 0.0, fair: bool = False,
             strategies: tuple[str, ...] = DEFAULT_STRATEGIES) -> list[Entry]:
    """One admission cycle (``scheduler.schedule``) over one head per ClusterQueue.

    Admitted workloads are added to the tree with ``admitted_at = now``; preemption targets are marked
    evicted (the caller removes them). A preempting entry's usage is reserved in its ClusterQueue
    for the rest of the cycle (``cq.AddUsage``), so later entries cannot take it; the tree is left
    without these reservations. Entries come back in processing order: classic, non-borrowing
    first, then priority, then FIFO; with fair sharing, the DRS tournament re-run after each entry.
    """
    waiting = []
    for wl in heads:
        a, targets = assign_flavors(tree, wl, fair, strategies)
        waiting.append(Entry(wl, a, targets, message=a.message))
    waiting.sort(key=lambda e: (e.assignment.borrowing > 0, -e.workload.priority,
                                queue_order_timestamp(e.workload), e.workload.uid))
    entries: list[Entry] = []
    preempting: set[str] = set()
    reserved: list[Entry] = []
    while waiting:
        e = _fair_next(tree, waiting) if fair else waiting[0]
        waiting.remove(e)
        entries.append(e)
        cq = tree.cqs[e.workload.cq]
        if e.assignment.mode == FIT:
            if not workload_fits(cq, e.assignment.usage, True):
                e.message = NO_LONGER_FITS
                continue
            if not _topology_fits(tree, e, fair):
                continue
            wl = e.workload
            wl.usage, wl.flavors, wl.counts = e.assignment.usage, e.assignment.flavors, e.assignment.counts
            wl.admitted_at, wl.evicted = now, False
            wl.topology = e.assignment.topology
            tree.add(wl)
            e.status, e.reason = "admitted", "QuotaReserved"
            e.message = f"Quota reserved in ClusterQueue {cq.name}"
        elif e.assignment.mode == PREEMPT and e.targets:
            if any(t.workload.uid in preempting for t in e.targets):
                e.message = NO_LONGER_FITS
                continue
            for t in e.targets:
                t.workload.evicted = True
                preempting.add(t.workload.uid)
            cq.reserve(e.assignment.usage)
            reserved.append(e)
            e.status = "preempting"
            e.message = f"{e.assignment.message}. Pending the preemption of {len(e.targets)} workload(s)"
    for e in reserved:
        tree.cqs[e.workload.cq].reserve(e.assignment.usage, -1)
    return entries


def _topology_fits(tree: Tree, e: Entry, fair: bool = False) -> bool:
    """Whether a Fit entry's topology assignment still fits after the admissions before it in the
    cycle; if not, the assignment is computed again (``updateAssignmentIfNeeded``, FitsCheckNoTAS with
    TASRecomputeAssignmentWithinSchedulingCycle, on by default) and only a Fit again is admitted
    (anything else leaves the entry pending with the new assignment's message). An admitted one
    takes its pods off the TAS flavors' free capacity."""
    tas = tree.tas
    if not e.assignment.topology or tas is None or tas.snapshot is None:
        return True
    wl = e.workload
    if not all(tas.snapshot.fits(flavor, placement, wl.podsets[i].vector)
               for i, flavor, placement in e.assignment.topology):
        e.assignment, e.targets = assign_flavors(tree, wl, fair)
        e.message = e.assignment.message
        if e.assignment.mode != FIT:
            return False
    for i, flavor, placement in e.assignment.topology:
        tas.snapshot.add(flavor, placement, wl.podsets[i].vector)
    return True


# ------------------------------------------------------------------------------------- the clock


def build_tree(kueue_spec: Any) -> Tree:
    """The cohort tree of a scenario's ``kueue`` objects (``labkit.spec.kueue.Kueue``)."""

    def quotas(groups: list) -> tuple[list[ResourceGroup], dict[FR, Quota]]:
        out, q = [], {}
        for g in groups:
            out.append(ResourceGroup(tuple(g.covered_resources), tuple(f.name for f in g.flavors)))
            for f in g.flavors:
                for r in f.resources:
                    q[(f.name, r.name)] = Quota(parse_quantity(r.nominal_quota), _opt(r.borrowing_limit),
                                                _opt(r.lending_limit))
        return out, q

    cqs, cohorts, parents = [], [], {}
    for spec_cq in kueue_spec.cluster_queues:
        groups, q = quotas(spec_cq.resource_groups)
        p = spec_cq.preemption
        bwc = p.borrow_within_cohort
        fungibility = FlavorFungibility(spec_cq.flavor_fungibility.when_can_borrow,
                                        spec_cq.flavor_fungibility.when_can_preempt)
        cqs.append(ClusterQueue(spec_cq.name, groups, q, Preemption(
            p.within_cluster_queue, p.reclaim_within_cohort, bwc.policy if bwc else NEVER,
            bwc.max_priority_threshold if bwc else None), spec_cq.queueing_strategy, spec_cq.fair_sharing.weight,
            fungibility))
        parents[spec_cq.name] = spec_cq.cohort_name
    for spec_cohort in kueue_spec.cohorts:
        cohorts.append(Cohort(spec_cohort.name, quotas(spec_cohort.resource_groups)[1],
                              spec_cohort.fair_sharing.weight))
        parents[spec_cohort.name] = spec_cohort.parent_name
    return Tree(cqs, cohorts, parents)


def topology_aware(scenario: Scenario, workloads: dict[str, Workload]) -> TopologyAware | None:
    """The TAS part of the cache for a scenario (None without a ResourceFlavor with ``topologyName``):
    each TAS flavor's tree over its nodes that carry every level label (``nodesCache.find``), the
    TAS-only ClusterQueues, and for node-level trees the leaves each podset of ``workloads`` cannot
    use for an untolerated NoSchedule/NoExecute taint (the scheduling simulator's first check)."""
    k = scenario.kueue
    flavors = [f for f in k.resource_flavors if f.topology_name is not None]
    if not flavors:
        return None
    topologies = {t.name: t.keys for t in k.topologies}
    labels = scenario.cluster.node_labels()
    trees = {}
    for f in flavors:
        keys = topologies[f.topology_name]
        nodes = [(n, tuple(lab[key] for key in keys)) for n, lab in enumerate(labels)
                 if all(lab.get(key) == value for key, value in f.node_labels.items()) and all(key in lab for key in keys)]
        trees[f.name] = TopologyTree(f.topology_name, keys, nodes)
    tas_only = {cq.name for cq in k.cluster_queues
                if (names := [f.name for g in cq.resource_groups for f in g.flavors]) and all(n in trees for n in names)}
    taints = [pool.taints for pool in scenario.cluster.pools for _ in range(pool.count)]
    tasks = {f"{job.namespace}/{job.name}": job.tasks for job in scenario.jobs}
    excluded: dict[tuple[str, int, str], list[str | None]] = {}
    for name in workloads:
        for i, task in enumerate(tasks[name]):
            for flavor, tree in trees.items():
                if not tree.hostname:
                    continue
                why = [next((taint_exclusion(t.key, t.value, t.effect) for t in taints[nodes[0]]
                             if t.effect in ("NoSchedule", "NoExecute")
                             and not any(tol.tolerates(t) for tol in task.tolerations)), None)
                       for nodes in tree.leaf_nodes]
                if any(w is not None for w in why):
                    excluded[(name, i, flavor)] = why
    return TopologyAware(trees, tas_only, excluded)


def _opt(value: Any) -> float | None:
    return None if value is None else parse_quantity(value)


class KueueSession:
    """Kueue as the session function of the clock: one call runs Kueue's admission cycles until no
    head can move, issues evictions (preemption, waitForPodsReady), and places the pods of admitted
    workloads on the nodes of their ResourceFlavors, as kube-scheduler would (least allocated).

    A job is a Workload with one podset per task; it is admitted through the LocalQueue of its
    namespace. Admission sets its PodGroup Inqueue (the pods appear); requeue sets it back Pending.
    """

    def __init__(self, compiled: Compiled, sim: Simulation):
        scenario = compiled.scenario
        self.sim = sim
        self.full_index = {name: j for j, name in enumerate(compiled.problem.job_names)}
        self.tree = build_tree(scenario.kueue)
        conf = scenario.scheduler.kueue
        self.fair = conf.fair_sharing.enable
        self.strategies = tuple(conf.fair_sharing.preemption_strategies) or DEFAULT_STRATEGIES
        self.ready = conf.wait_for_pods_ready
        self.timeout = parse_duration(self.ready.timeout)
        flavors = {f.name: f.node_labels for f in scenario.kueue.resource_flavors}
        labels = [pool.labels for pool in scenario.cluster.pools for _ in range(pool.count)]
        self.flavor_nodes = {name: np.array([all(lab.get(k) == v for k, v in sel.items()) for lab in labels])
                             for name, sel in flavors.items()}
        self.workloads: dict[str, Workload] = {}
        self.unmanaged: set[str] = set()
        problem = compiled.problem
        priority = dict(zip(problem.job_names, problem.job_priority))
        vectors = {(problem.job_names[problem.task_job[t]], problem.role_names[problem.task_role[t]]):
                   problem.task_request[t] for t in range(len(problem.task_job) - 1, -1, -1)}
        for job, submit in zip(scenario.jobs, compiled.job_submit):
            key = f"{job.namespace}/{job.name}"
            lq = local_queue(scenario.kueue.local_queues, job.namespace, job.queue)
            if lq is None:
                self.unmanaged.add(key)
                continue
            podsets = [PodSet(t.name, t.replicas_resolved, {r: parse_quantity(v) for r, v in t.resources.items()},
                              t.elastic.min if t.elastic else None,
                              None if t.topology_request is None else (t.topology_request.level,
                                                                       t.topology_request.required is not None),
                              vectors.get((key, t.name))) for t in job.tasks]
            self.workloads[key] = Workload(key, lq.cluster_queue, podsets, int(priority[key]), float(submit))
        self.tree.tas = topology_aware(scenario, self.workloads)
        self.admitted: dict[str, Workload] = {}
        self.requeue_at: dict[str, float] = {}
        self.requeues: dict[str, int] = {}
        self.inactive: set[str] = set()
        self.inadmissible: set[str] = set()

    def __call__(self, p: Problem, s: State) -> Decisions:
        now = s.now
        local = {name: j for j, name in enumerate(p.job_names)}
        tasks_of = [np.flatnonzero(p.task_job == j) for j in range(p.n_jobs)]
        decisions = Decisions()
        self._release(s, local, tasks_of, now)
        waiting = self._pods_ready(s, local, tasks_of, now, decisions)
        if self.tree.tas is not None:
            self.tree.tas.snapshot = self._tas_snapshot(p, s, local, tasks_of)
        self._admit(local, now, decisions, tasks_of, s, waiting)
        phase = s.job_phase.copy()
        for name, j in local.items():
            wl = self.workloads.get(name)
            if name in self.unmanaged or (wl is not None and name in self.admitted and not wl.evicted):
                if phase[j] == PodGroupPhase.PENDING:
                    phase[j] = PodGroupPhase.INQUEUE
            elif wl is not None and phase[j] != PodGroupPhase.COMPLETED and name not in self.admitted:
                phase[j] = PodGroupPhase.PENDING
        self._bind(p, s, local, tasks_of, decisions)
        decisions.state = dataclasses.replace(s, job_phase=phase)
        return decisions

    def _log(self, now: float, kind: str, wl: Workload, reason: str, message: str) -> None:
        self.sim._log(now, kind, self.full_index[wl.name], reason=reason, message=message)

    def _release(self, s: State, local: dict, tasks_of: list, now: float) -> None:
        """Finished workloads and evicted ones whose pods are gone give their quota back."""
        for name, wl in list(self.admitted.items()):
            j = local.get(name)
            holding = j is not None and bool(np.isin(s.task_status[tasks_of[j]], _HOLDING).any())
            finished = j is None or s.job_phase[j] == PodGroupPhase.COMPLETED
            if finished or (wl.evicted and not holding):
                self.tree.remove(wl)
                del self.admitted[name]
                self.inadmissible.clear()  # quota was freed: retry the parked heads
                if not finished:
                    self._requeue(wl, now)

    def _requeue(self, wl: Workload, now: float) -> None:
        """``workload.UpdateRequeueState``: back off base * 2^(n-1), capped, after a PodsReady timeout."""
        wl.evicted = False
        if wl.evicted_by != "PodsReadyTimeout":
            return
        strategy = self.ready.requeuing_strategy
        n = self.requeues[wl.name] = self.requeues.get(wl.name, 0) + 1
        if strategy.backoff_limit_count is not None and n > strategy.backoff_limit_count:
            self.inactive.add(wl.name)
            self._log(now, "Deactivated", wl, "RequeuingLimitExceeded",
                      f"exceeding the maximum number of re-queuing retries ({strategy.backoff_limit_count})")
            return
        wait = min(strategy.backoff_base_seconds * 2 ** (n - 1), strategy.backoff_max_seconds)
        self.requeue_at[wl.name] = now + wait
        self.sim.timer(now + wait)
        self._log(now, "Requeued", wl, "PodsReadyTimeout", f"requeue {n}, back in the queue after {wait}s")

    def _pods_ready(self, s: State, local: dict, tasks_of: list, now: float, decisions: Decisions) -> bool:
        """waitForPodsReady: evict an admitted workload whose pods are not all running in time; a pod
        that succeeded counts as ready (job_controller.go PodsReady: Succeeded + Ready >= the admitted
        parallelism), so a partially admitted Job whose first pods completed is not evicted while the
        Job runs its other completions. True when some admitted workload is still waiting for its pods
        (blockAdmission)."""
        if not self.ready.enable:
            return False
        waiting = False
        for name, wl in list(self.admitted.items()):
            j = local.get(name)
            if wl.evicted or j is None:
                continue
            status = s.task_status[tasks_of[j]]
            if np.isin(status, _READY).sum() >= sum(wl.counts):
                continue
            deadline = (wl.admitted_at or 0.0) + self.timeout
            if now < deadline:
                self.sim.timer(deadline)
                waiting = True
                continue
            wl.evicted, wl.evicted_by, wl.evicted_at = True, "PodsReadyTimeout", now
            message = f"Exceeded the PodsReady timeout {name}"
            self._log(now, "Evicted", wl, "PodsReadyTimeout", message)
            running = tasks_of[j][np.isin(status, _RUNNING)]
            for t in running:
                decisions.evictions.append(Eviction(int(t), "kueue", message))
            if not np.isin(status, _HOLDING).any():  # no pod holds resources: the quota goes back now
                self.tree.remove(wl)
                del self.admitted[name]
                self.inadmissible.clear()
                self._requeue(wl, now)
        return waiting

    def _heads(self, present: list[str], now: float, blocked: set[str]) -> list[Workload]:
        """One head per ClusterQueue (``Heads``): the first of its heap among the admissible workloads."""
        pending: dict[str, Workload] = {}
        for name in present:
            wl = self.workloads.get(name)
            if wl is None or name in self.admitted or name in self.inactive or name in self.inadmissible:
                continue
            if wl.cq in blocked or self.requeue_at.get(name, -math.inf) > now:
                continue
            head = pending.get(wl.cq)
            timestamp = self.ready.requeuing_strategy.timestamp
            if head is None or queue_order_key(wl, timestamp) < queue_order_key(head, timestamp):
                pending[wl.cq] = wl
        return list(pending.values())

    def _tas_snapshot(self, p: Problem, s: State, local: dict, tasks_of: list) -> Snapshot:
        """The TAS flavors' capacity this session: each leaf's nodes' allocatable less the pods of
        workloads without a topology assignment (``nonTasUsage``: pods running or terminating), then
        less the assignments of the admitted TAS workloads, placed or not (``tasUsage``)."""
        tas = self.tree.tas
        assert tas is not None
        used = s.node_used.copy()
        for name, wl in self.admitted.items():
            j = local.get(name)
            if wl.topology and j is not None:
                for t in tasks_of[j][np.isin(s.task_status[tasks_of[j]], _HOLDING)]:
                    used[s.task_node[t]] -= p.task_request[t]
        free = p.node_allocatable - used
        empty = {f: np.array([free[nodes].sum(axis=0) for nodes in tree.leaf_nodes]).reshape(len(tree.leaf_nodes), -1)
                 for f, tree in tas.trees.items()}
        snapshot = Snapshot(tas.trees, empty, p.resource_names)
        for wl in self.admitted.values():
            for i, flavor, placement in wl.topology:
                snapshot.add(flavor, placement, wl.podsets[i].vector)
        return snapshot

    def _admit(self, local: dict, now: float, decisions: Decisions, tasks_of: list, s: State,
               waiting: bool) -> None:
        """Admission cycles until every head is admitted, parked (BestEffortFIFO) or blocking its CQ;
        none while an admitted workload waits for its pods under blockAdmission. A preempting head
        keeps its quota reserved until the session's cycles end (Kueue re-nominates it every cycle)."""
        present = [name for name, j in local.items() if s.job_phase[j] != PodGroupPhase.COMPLETED]
        if waiting and self.ready.block_admission:
            return
        blocked: set[str] = set()
        reserved: list[Entry] = []
        while heads := self._heads(present, now, blocked):
            for e in schedule(self.tree, heads, now, self.fair, self.strategies):
                wl, cq = e.workload, self.tree.cqs[e.workload.cq]
                if e.status == "admitted":
                    self.admitted[wl.name] = wl
                    self.requeue_at.pop(wl.name, None)
                    flavors = ", ".join(sorted({f for ps in wl.flavors for f in ps.values()}))
                    self._log(now, "QuotaReserved", wl, "QuotaReserved", f"{e.message}; flavors {flavors}")
                    continue
                if e.status == "preempting":
                    for t in e.targets:
                        self._preempt(t, wl, local, tasks_of, s, now, decisions)
                    blocked.add(wl.cq)
                    cq.reserve(e.assignment.usage)  # it stays nominated: later cycles of the session see it
                    reserved.append(e)
                elif cq.queueing_strategy == STRICT_FIFO:
                    blocked.add(wl.cq)
                else:
                    self.inadmissible.add(wl.name)
                self._log(now, "Pending", wl, e.reason, e.message)
        for e in reserved:
            self.tree.cqs[e.workload.cq].reserve(e.assignment.usage, -1)

    def _preempt(self, target: Target, preemptor: Workload, local: dict, tasks_of: list, s: State, now: float,
                 decisions: Decisions) -> None:
        wl = target.workload
        if wl.evicted_by == "Preempted" and wl.evicted_at is not None and wl.evicted_at >= (wl.admitted_at or 0.0):
            return  # already preempted, its pods are terminating
        wl.evicted_by, wl.evicted_at = "Preempted", now
        message = preempted_message(preemptor, target, self.tree)
        self._log(now, "Preempted", wl, target.reason, message)
        j = local.get(wl.name)
        held = tasks_of[j][np.isin(s.task_status[tasks_of[j]], _RUNNING)] if j is not None else []
        for t in held:
            decisions.evictions.append(Eviction(int(t), "kueue", message))

    def _bind(self, p: Problem, s: State, local: dict, tasks_of: list, decisions: Decisions) -> None:
        """Place the pending pods of admitted workloads (kube-scheduler: feasible node, least allocated)."""
        free = p.node_allocatable - s.node_used
        for name, j in local.items():
            wl = self.workloads.get(name)
            admitted = name in self.unmanaged or (wl is not None and name in self.admitted and not wl.evicted)
            if not admitted:
                continue
            placed = {}  # pods per role that hold a node: a partial admission runs only its admitted count
            for t in tasks_of[j]:
                role = p.role_names[p.task_role[t]]
                placed[role] = placed.get(role, 0) + int(s.task_status[t] in _HOLDING)
            on_leaf = self._on_leaves(wl, p, s, tasks_of[j]) if wl is not None and wl.topology else {}
            for t in tasks_of[j]:
                if s.task_status[t] != TaskStatus.PENDING:
                    continue
                ok = p.class_node_ok[p.task_class[t]] & p.node_schedulable
                if wl is not None:
                    role = p.role_names[p.task_role[t]]
                    index = next(i for i, ps in enumerate(wl.podsets) if ps.name == role)
                    if placed[role] >= wl.counts[index]:
                        continue
                    for flavor in set(wl.flavors[index].values()):
                        ok = ok & self.flavor_nodes[flavor]
                request = p.task_request[t]
                fits = ok & (free >= request - 1e-9).all(axis=1)
                placement = next((pl for pl in wl.topology if pl[0] == index), None) if wl is not None else None
                if placement is not None:
                    fits, leaf = self._topology_nodes(placement, on_leaf, fits)
                if not fits.any():
                    continue
                if placement is not None:
                    on_leaf[(index, leaf)] = on_leaf.get((index, leaf), 0) + 1
                share = np.where(p.node_allocatable > 0, (free - request) / np.maximum(p.node_allocatable, 1e-12), 0)
                score = np.where(fits, share.mean(axis=1), -np.inf)
                node = int(np.argmax(score))
                free[node] -= request
                if wl is not None:
                    placed[role] += 1
                decisions.binds.append(Placement(int(t), node, "kueue", "kube-scheduler: least allocated node"))

    def _on_leaves(self, wl: Workload, p: Problem, s: State, tasks: np.ndarray) -> dict[tuple[int, int], int]:
        """Pods of each TAS podset holding a node, per leaf of its assignment's flavor."""
        tas, out = self.tree.tas, {}
        assert tas is not None
        for i, flavor, _ in wl.topology:
            tree = tas.trees[flavor]
            for t in tasks:
                if s.task_status[t] in _HOLDING and p.role_names[p.task_role[t]] == wl.podsets[i].name:
                    key = (i, tree.node_leaf.get(int(s.task_node[t]), -1))
                    out[key] = out.get(key, 0) + 1
        return out

    def _topology_nodes(self, placement: TopologyPlacement, on_leaf: dict, fits: np.ndarray) -> tuple[np.ndarray, int]:
        """Where a pending pod of a TAS podset may go: the nodes of the first domain of its assignment
        that holds fewer of its pods than assigned (Kueue's ungater gives the pod that domain's node
        selector; kube-scheduler picks among the nodes with room, and the pod waits if none has);
        (the nodes it fits on there, the domain's leaf)."""
        tas = self.tree.tas
        assert tas is not None
        index, flavor, leaves = placement
        for leaf, n in leaves:
            if on_leaf.get((index, leaf), 0) < n:
                mask = np.zeros_like(fits)
                mask[tas.trees[flavor].leaf_nodes[leaf]] = True
                return fits & mask, leaf
        return np.zeros_like(fits), -1


_RUNNING = np.array([TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING], np.int8)
_HOLDING = np.append(_RUNNING, np.int8(TaskStatus.RELEASING))
_READY = np.array([TaskStatus.RUNNING, TaskStatus.SUCCEEDED], np.int8)
"""What PodsReady counts: ready (running) and succeeded pods."""


def label_cluster_queues(result: Result) -> Result:
    """The jobs table's ``queue`` set to each managed job's ClusterQueue (the one its LocalQueue points
    to), so per-queue metrics of a Kueue run are per ClusterQueue; jobs no LocalQueue takes keep theirs."""
    scenario = result.scenario
    cq = {f"{job.namespace}/{job.name}": lq.cluster_queue for job in scenario.jobs
          if (lq := local_queue(scenario.kueue.local_queues, job.namespace, job.queue)) is not None}
    jobs = result.jobs
    keys = jobs.namespace + "/" + jobs.name
    jobs["queue"] = [cq.get(key, queue) for key, queue in zip(keys, jobs.queue)]
    return result


def compile_kueue(scenario: Scenario) -> Compiled:
    """The scenario compiled for a Kueue run: the clock's arrays of a Volcano placeholder (its conf
    is unused: Kueue decides, not a session) and the scenario with its own scheduler section."""
    spot = next((f"cluster.pools[{k}].spot" for k, pool in enumerate(scenario.cluster.pools) if pool.spot), None)
    if (scenario.cluster.events or spot) and scheduler_of(scenario).kueue.wait_for_pods_ready.enable:
        raise SpecError("cluster.events" if scenario.cluster.events else spot,
                        "node events with waitForPodsReady: how an admitted workload that lost pods recovers "
                        "(recoveryTimeout) is not simulated")
    if scenario.changes:
        raise SpecError("changes", "changes in time: the Kueue engines do not simulate them")
    tas = any(f.topology_name for f in (scenario.kueue.resource_flavors if scenario.kueue else []))
    if tas and (scenario.cluster.events or spot):
        raise SpecError("cluster.events" if scenario.cluster.events else spot,
                        "node events with Topology Aware Scheduling: how Kueue replaces a failed node of a "
                        "topology assignment (TASFailedNodeReplacement) is not simulated")
    if scenario.kueue is None:
        raise SpecError("kueue", "a Kueue policy needs the scenario's kueue objects (clusterQueues, localQueues)")
    placeholder = expand(scenario).model_copy(update={"scheduler": Scheduler(policy="volcano-shipped")})
    with warnings.catch_warnings():  # the placeholder's conf is not the scenario's: its notes are not either
        warnings.simplefilter("ignore", LabkitWarning)
        compiled = compile_with(VOLCANO, placeholder)
    return dataclasses.replace(compiled, source=compiled.source.model_copy(
        update={"scheduler": scheduler_of(scenario)}))


def simulate_kueue(scenario: Scenario, compiled: Compiled | None = None, progress: Progress | None = None) -> Result:
    """Run a scenario under Kueue on the simulated clock (``labkit.engine.simulate`` for the clock;
    ``progress`` as ``Simulation.run`` tells it)."""
    compiled = compiled or compile_kueue(scenario)
    sim = Simulation(compiled, lambda p, s: Decisions())
    sim.session = KueueSession(compiled, sim)
    sim.run(progress)
    result = result_of(compiled, record_of(sim))
    result.info["engine"] = "kueue"
    return label_cluster_queues(result)
