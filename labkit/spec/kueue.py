"""Kueue's objects in a scenario (``kueue:``) and Kueue's configuration in a policy (``scheduler.kueue``).

Field names are those of Kueue's API (``apis/kueue/v1beta2``: ResourceFlavor, ClusterQueue,
Cohort, LocalQueue; ``apis/config/v1beta2``: fairSharing, waitForPodsReady). A job is admitted
through the LocalQueue of its namespace (the one named by the job's ``queue``, else the only one).
:func:`check` adds the rules of Kueue's validating webhooks that span several objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..errors import SpecError
from .base import Duration, Model, ObjectName, Quantity, Taint
from .quantity import parse_quantity

PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]


class ResourceFlavor(Model):
    """``ResourceFlavor``: the nodes of a kind of hardware, selected by their labels; ``topologyName``
    makes it a Topology Aware Scheduling flavor over those of its nodes that carry every level's label."""

    name: ObjectName
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    topology_name: ObjectName | None = None


class TopologyLevel(Model):
    node_label: str = Field(min_length=1, max_length=316)


HOSTNAME = "kubernetes.io/hostname"


class Topology(Model):
    """``Topology`` (``kueue.x-k8s.io/v1beta2``): levels of node labels, the largest domain first
    (e.g. ``topology.labkit.io/block``, ``topology.labkit.io/rack``, ``kubernetes.io/hostname``)."""

    name: ObjectName
    levels: list[TopologyLevel] = Field(min_length=1, max_length=16)

    @property
    def keys(self) -> list[str]:
        return [level.node_label for level in self.levels]


class ResourceQuota(Model):
    """One resource of a flavor: ``nominalQuota``, ``borrowingLimit``, ``lendingLimit``."""

    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(Model):
    name: ObjectName
    resources: list[ResourceQuota] = Field(min_length=1)


class ResourceGroup(Model):
    covered_resources: list[str] = Field(min_length=1)
    flavors: list[FlavorQuotas] = Field(min_length=1)


class BorrowWithinCohort(Model):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(Model):
    within_cluster_queue: PreemptionPolicy = "Never"
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(Model):
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = "MayStopSearch"
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = "TryNextFlavor"


class FairSharing(Model):
    weight: float = Field(default=1.0, ge=0)


class ClusterQueue(Model):
    """``ClusterQueue`` (``cohortName`` as in v1beta2)."""

    name: ObjectName
    cohort_name: str | None = None
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_sharing: FairSharing = FairSharing()


class Cohort(Model):
    """``Cohort``: hierarchical through ``parentName``, with optional shared quota of its own."""

    name: ObjectName
    parent_name: str | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing = FairSharing()


class LocalQueue(Model):
    name: ObjectName
    namespace: str = "default"
    cluster_queue: str


class Kueue(Model):
    """The Kueue objects of a scenario."""

    resource_flavors: list[ResourceFlavor] = Field(default_factory=list)
    cluster_queues: list[ClusterQueue] = Field(min_length=1)
    cohorts: list[Cohort] = Field(default_factory=list)
    local_queues: list[LocalQueue] = Field(default_factory=list)
    topologies: list[Topology] = Field(default_factory=list)


def local_queue(local_queues: list[LocalQueue], namespace: str, queue: str) -> LocalQueue | None:
    """The LocalQueue a job goes to: the one of its namespace named by its ``queue``, else the only one
    (None: no LocalQueue takes the job, so Kueue does not manage it)."""
    mine = [lq for lq in local_queues if lq.namespace == namespace]
    named = [lq for lq in mine if lq.name == queue]
    return named[0] if named else (mine[0] if len(mine) == 1 else None)


class FairSharingConfig(Model):
    enable: bool = False
    preemption_strategies: list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]] = Field(
        default_factory=list)


class RequeuingStrategy(Model):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_limit_count: int | None = Field(default=None, ge=0)
    backoff_base_seconds: int = Field(default=60, ge=0)
    backoff_max_seconds: int = Field(default=3600, ge=0)


class WaitForPodsReady(Model):
    """``waitForPodsReady``: evict and requeue an admitted workload whose pods are not ready in time."""

    enable: bool = False
    timeout: Duration = "30m"
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()


class KueueConfiguration(Model):
    """The scheduling part of Kueue's ``Configuration``."""

    fair_sharing: FairSharingConfig = FairSharingConfig()
    wait_for_pods_ready: WaitForPodsReady = WaitForPodsReady()


_STRATEGY_LISTS = ([], ["LessThanOrEqualToFinalShare"], ["LessThanInitialShare"],
                   ["LessThanOrEqualToFinalShare", "LessThanInitialShare"])


def check_configuration(conf: KueueConfiguration, where: str) -> None:
    if conf.fair_sharing.preemption_strategies not in _STRATEGY_LISTS:
        raise SpecError(f"{where}.fairSharing.preemptionStrategies", "use [LessThanOrEqualToFinalShare], "
                        "[LessThanInitialShare] or both in that order")


def check(k: Kueue | None, configuration: KueueConfiguration | None, namespaces: set[str], pools: list) -> None:
    """Raise SpecError for the first Kueue rule a scenario's `kueue` objects, its
    `scheduler.kueue` configuration, its LocalQueues' `namespaces` or its node `pools` (the
    scenario's `cluster.pools`) break."""
    if configuration is not None:
        check_configuration(configuration, "scheduler.kueue")
    if k is None:
        return
    _unique("kueue.resourceFlavors", [f.name for f in k.resource_flavors], "ResourceFlavor")
    _unique("kueue.clusterQueues", [q.name for q in k.cluster_queues], "ClusterQueue")
    _unique("kueue.cohorts", [c.name for c in k.cohorts], "Cohort")
    _unique("kueue.localQueues", [f"{q.namespace}/{q.name}" for q in k.local_queues], "LocalQueue")
    flavors = {f.name for f in k.resource_flavors}
    used: set[str] = set()
    for i, cq in enumerate(k.cluster_queues):
        borrow = cq.preemption.borrow_within_cohort
        if cq.preemption.reclaim_within_cohort == "Never" and borrow is not None and borrow.policy != "Never":
            # the CRD's CEL rule on ClusterQueuePreemption (apis/kueue/v1beta2/clusterqueue_types.go)
            raise SpecError(f"kueue.clusterQueues[{i}].preemption.borrowWithinCohort.policy",
                            "must be Never while reclaimWithinCohort is Never (Kueue: "
                            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never)")
        used |= _check_groups(f"kueue.clusterQueues[{i}]", cq.resource_groups, flavors, cq.cohort_name is not None)
    for i, cohort in enumerate(k.cohorts):
        used |= _check_groups(f"kueue.cohorts[{i}]", cohort.resource_groups, flavors, cohort.parent_name is not None)
    for i, f in enumerate(k.resource_flavors):
        if f.name not in used:
            raise SpecError(f"kueue.resourceFlavors[{i}]", f"ResourceFlavor {f.name!r} is in no resourceGroup")
    _check_cycles(k.cohorts)
    _check_flavor_nodes(k, pools)
    cqs = {q.name for q in k.cluster_queues}
    for i, lq in enumerate(k.local_queues):
        if lq.cluster_queue not in cqs:
            raise SpecError(f"kueue.localQueues[{i}].clusterQueue", f"no ClusterQueue named {lq.cluster_queue!r}")
        if lq.namespace not in namespaces:
            raise SpecError(f"kueue.localQueues[{i}].namespace", f"no namespace {lq.namespace!r}")


def _unique(path: str, names: list[str], what: str) -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise SpecError(f"{path}[{i}].name", f"{what} {name!r} is already {path}[{seen[name]}]")
        seen[name] = i


def _check_groups(path: str, groups: list[ResourceGroup], flavors: set[str], has_parent: bool) -> set[str]:
    """Kueue's ClusterQueue validation: known flavors, resources as covered, each in one group only."""
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in enumerate(groups):
        where = f"{path}.resourceGroups[{g}]"
        for r in group.covered_resources:
            if r in seen_resources:
                raise SpecError(f"{where}.coveredResources", f"resource {r!r} is already in another resourceGroup")
            seen_resources.add(r)
        for f, flavor in enumerate(group.flavors):
            at = f"{where}.flavors[{f}]"
            if flavor.name not in flavors:
                raise SpecError(f"{at}.name", f"no ResourceFlavor named {flavor.name!r}")
            if flavor.name in seen_flavors:
                raise SpecError(f"{at}.name", f"flavor {flavor.name!r} is already in a resourceGroup")
            seen_flavors.add(flavor.name)
            if [r.name for r in flavor.resources] != group.covered_resources:
                raise SpecError(f"{at}.resources", "must list the coveredResources of the group, in order ("
                                + ", ".join(group.covered_resources) + ")")
            for q, quota in enumerate(flavor.resources):
                for key, limit in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
                    if limit is not None and not has_parent:
                        raise SpecError(f"{at}.resources[{q}].{key}", "must be unset without a cohort")
                if quota.lending_limit is not None and (
                        parse_quantity(quota.lending_limit) > parse_quantity(quota.nominal_quota)):
                    raise SpecError(f"{at}.resources[{q}].lendingLimit", "must be <= nominalQuota")
    return seen_flavors


def _check_flavor_nodes(k: Kueue, node_pools: list) -> None:
    """A flavor's quota of a resource its nodes do not have admits workloads whose pods can never
    run (Kueue accepts such a ClusterQueue; its workloads then wait forever, and a run without a
    horizon never ends): refused, as a pod that fits no node pool is."""
    pools = {f.name: [p for p in node_pools if all(p.labels.get(key) == value
                                                   for key, value in f.node_labels.items())]
             for f in k.resource_flavors}
    for i, f in enumerate(k.resource_flavors):
        if not pools[f.name]:
            labels = ", ".join(f"{key}={value}" for key, value in f.node_labels.items())
            raise SpecError(f"kueue.resourceFlavors[{i}].nodeLabels", f"no node pool has the labels {labels}")
    owners = [("clusterQueues", q.resource_groups) for q in k.cluster_queues] + \
             [("cohorts", c.resource_groups) for c in k.cohorts]
    counts: dict[str, int] = {}
    for kind, groups in owners:
        n = counts[kind] = counts.get(kind, -1) + 1
        for g, group in enumerate(groups):
            for fi, flavor in enumerate(group.flavors):
                for q, quota in enumerate(flavor.resources):
                    offered = max(parse_quantity(p.resources.get(quota.name, 0)) for p in pools[flavor.name])
                    if parse_quantity(quota.nominal_quota) > 0 and offered <= 0 and quota.name != "pods":
                        raise SpecError(f"kueue.{kind}[{n}].resourceGroups[{g}].flavors[{fi}].resources[{q}]",
                                        f"quota of {quota.name} in flavor {flavor.name!r}, whose nodes have none: "
                                        "a workload admitted to it could never run")


def _check_cycles(cohorts: list[Cohort]) -> None:
    parent = {c.name: c.parent_name for c in cohorts}
    for i, c in enumerate(cohorts):
        path, node = [c.name], c.parent_name
        while node is not None:
            path.append(node)
            if node == c.name:
                raise SpecError(f"kueue.cohorts[{i}].parentName", "cohort cycle " + " -> ".join(path))
            node = parent.get(node)
            if len(path) > len(cohorts) + 1:
                break


def check_topology(k: Kueue | None, node_labels: list[dict[str, str]], jobs: list) -> None:
    """Raise SpecError for the first Topology Aware Scheduling rule broken: Topology levels unique,
    ``kubernetes.io/hostname`` only as the lowest (the Topology CRD's CEL rules), each a label some
    node carries (``node_labels``: the scenario's ``cluster.node_labels()``); a flavor's
    ``topologyName`` naming a Topology; a ClusterQueue with a TAS flavor preempting nothing (TAS-aware
    preemption is not simulated); a ``topologyRequest`` (on a task of ``jobs``) naming a level of the
    Topology of some TAS flavor its ClusterQueue has (Kueue would leave it pending forever)."""
    if k is None:
        return  # a topologyRequest without Kueue's objects: another family warns, Kueue refuses the scenario
    topologies = {t.name: t for t in k.topologies}
    _unique("kueue.topologies", [t.name for t in k.topologies], "Topology")
    present = set().union(*node_labels) if node_labels else set()
    for i, t in enumerate(k.topologies):
        keys = t.keys
        for n, key in enumerate(keys):
            where = f"kueue.topologies[{i}].levels[{n}].nodeLabel"
            if key in keys[:n]:
                raise SpecError(where, f"{key} is already a level (levels must be unique)")
            if key == HOSTNAME and n != len(keys) - 1:
                raise SpecError(where, "the kubernetes.io/hostname label can only be used at the lowest level of topology")
            if key not in present:
                raise SpecError(where, f"no node has the label {key} (a node carries its pool's labels, "
                                "kubernetes.io/hostname, labkit.io/pool and topology.labkit.io/<tier> per cluster.topology tier)")
    tas, owner = {}, {}
    for i, f in enumerate(k.resource_flavors):
        if f.topology_name is None:
            continue
        where = f"kueue.resourceFlavors[{i}].topologyName"
        if f.topology_name not in topologies:
            raise SpecError(where, f"no Topology named {f.topology_name!r}")
        tas[f.name] = topologies[f.topology_name]
        for labels in node_labels:
            if all(labels.get(key) == value for key, value in f.node_labels.items()) and \
                    all(key in labels for key in tas[f.name].keys):
                node = labels[HOSTNAME]
                if node in owner:
                    raise SpecError(where, f"flavors {owner[node]} and {f.name} share the node {node}: Topology "
                                    "Aware Scheduling over overlapping flavors is not simulated")
                owner[node] = f.name
    levels_of: dict[str, set[str]] = {}
    for i, cq in enumerate(k.cluster_queues):
        flavors = [f.name for g in cq.resource_groups for f in g.flavors if f.name in tas]
        levels_of[cq.name] = {key for f in flavors for key in tas[f].keys}
        groups = [g for g in cq.resource_groups if any(f.name in tas for f in g.flavors)]
        if len(groups) > 1:
            raise SpecError(f"kueue.clusterQueues[{i}].resourceGroups", f"ClusterQueue {cq.name} has Topology Aware "
                            "Scheduling flavors in two resource groups: a podset could get two of them, which Kueue "
                            "refuses (multiple TAS flavors assigned)")
        p = cq.preemption
        if flavors and (p.within_cluster_queue != "Never" or p.reclaim_within_cohort != "Never"):
            raise SpecError(f"kueue.clusterQueues[{i}].preemption", f"ClusterQueue {cq.name} has the Topology Aware "
                            "Scheduling flavor " + flavors[0] + ": TAS-aware preemption is not simulated (use Never)")
    for i, job in enumerate(jobs):
        lq = local_queue(k.local_queues, job.namespace, job.queue)
        for n, task in enumerate(job.tasks):
            request = task.topology_request
            if request is None:
                continue
            where = f"jobs[{i}].tasks[{n}].topologyRequest"
            if lq is None:
                raise SpecError(where, f"job {job.name} goes through no LocalQueue, so Kueue does not manage it")
            levels = levels_of.get(lq.cluster_queue, set())
            if not levels:
                raise SpecError(where, f"ClusterQueue {lq.cluster_queue} has no flavor with a topologyName")
            if request.level is not None and request.level not in levels:
                raise SpecError(f"{where}.{'required' if request.required else 'preferred'}",
                                f"{request.level} is a level of no Topology of ClusterQueue {lq.cluster_queue}'s "
                                "flavors (" + ", ".join(sorted(levels)) + ")")
            if task.node_selector:
                raise SpecError(f"jobs[{i}].tasks[{n}].nodeSelector", "a nodeSelector with a topologyRequest: "
                                "Topology Aware Scheduling on top of a node selector is not simulated")
