"""The contract between the scenario compiler and the scheduling engines.

A :class:`Problem` is one cluster snapshot frozen into flat numpy arrays and small ints, the
same information Volcano's cache hands to ``framework.OpenSession``: nodes, queues, PodGroups
(jobs), pods (tasks) and the scheduler conf (:class:`Policy`). A :class:`State` holds the parts
that a scheduling cycle changes (task status and node, PodGroup phase, node accounting). An
engine takes ``(problem, state)``, runs one session and returns :class:`Decisions`.

Everything an engine's hot loop needs is an array or an int, so a numba ``@njit`` core can take
the very same input; the name tuples are only for humans and reports.

Conventions
-----------
* Resources are a fixed vector per problem, ``problem.resource_names``; index 0, 1, 2 are always
  ``cpu``, ``memory``, ``pods``. Units follow Volcano's ``api.Resource``: cpu in milli-cores,
  memory in bytes, ``pods`` whole pods, every other (extended scalar) resource in milli units
  (``nvidia.com/gpu: 1`` is 1000.0). All float64.
* Every task request carries ``pods = 1`` (Volcano adds it to every pod's request), so a node's
  pod limit is just the ``pods`` dimension of its allocatable.
* Quantities that a ResourceList may leave out use **NaN for "not named"**: queue capability,
  deserved and guarantee. Engines decide what a missing dimension means at each use, the way
  Volcano does (proportion treats a missing capability as +inf, a missing deserved as 0, ...).
  Requests, allocatable and minResources use plain 0 for "not named".
* Orders are precomputed ranks (0 = first): ``*_rank`` sorts by creation time, then UID, the
  fallback every Volcano order function ends with.
* Indices: -1 means "none" (no node, no parent).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from labkit.errors import SpecError
from labkit.spec import quantity

CPU, MEMORY, PODS = 0, 1, 2
BASE_RESOURCES = ("cpu", "memory", "pods")
GPU = "nvidia.com/gpu"

MIN_RESOURCE = 0.1
"""Volcano's ``minResource``: resource comparisons tolerate this much (api/resource_info.go)."""


class TaskStatus(IntEnum):
    """api.TaskStatus (api/types.go)."""

    PENDING = 0
    ALLOCATED = 1
    PIPELINED = 2
    BINDING = 3
    BOUND = 4
    RUNNING = 5
    RELEASING = 6
    SUCCEEDED = 7
    FAILED = 8
    UNKNOWN = 9


ALLOCATED_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED})
"""api.AllocatedStatus: the statuses that count as holding resources for queue/job shares."""


class PodGroupPhase(IntEnum):
    """PodGroup ``status.phase`` (scheduling/v1beta1). UNSET is the empty string phase."""

    UNSET = 0
    PENDING = 1
    INQUEUE = 2
    RUNNING = 3
    UNKNOWN = 4
    COMPLETED = 5


class Action(IntEnum):
    """Scheduler actions, run in conf order each session (pkg/scheduler/actions)."""

    ENQUEUE = 0
    ALLOCATE = 1
    BACKFILL = 2
    PREEMPT = 3
    RECLAIM = 4


class Plugin(IntEnum):
    """Supported scheduler plugins (pkg/scheduler/plugins)."""

    PRIORITY = 0
    GANG = 1
    DRF = 2
    PROPORTION = 3
    CAPACITY = 4
    BINPACK = 5
    NODEORDER = 6
    PREDICATES = 7
    CONFORMANCE = 8
    OVERCOMMIT = 9
    SLA = 10
    NETWORK_TOPOLOGY_AWARE = 11


class Ext(IntEnum):
    """Plugin extension points, the ``enable*`` switches of conf.PluginOption."""

    JOB_ORDER = 0
    QUEUE_ORDER = 1
    TASK_ORDER = 2
    JOB_READY = 3
    JOB_PIPELINED = 4
    JOB_STARVING = 5
    JOB_ENQUEUED = 6  # also gates JobEnqueueable
    PREEMPTABLE = 7
    RECLAIMABLE = 8
    PREEMPTIVE = 9
    OVERUSED = 10
    ALLOCATABLE = 11
    PREDICATE = 12
    NODE_ORDER = 13
    BEST_NODE = 14
    HIERARCHY = 15
    VICTIM = 16
    CLUSTER_ORDER = 17
    TARGET_JOB = 18
    RESERVED_NODES = 19
    HYPER_NODE_ORDER = 20
    HYPER_NODE_GRADIENT = 21


class Family(IntEnum):
    """Which scheduler a :class:`Policy` configures. ``actions`` hold :class:`Action` for Volcano,
    :class:`KubeAction` for kube-scheduler, :class:`SlurmAction` for Slurm. Engines other than the
    reference one run ``VOLCANO`` only; ``families.run_session`` runs the others' own (``kube/``, ``slurm/``)."""

    VOLCANO = 0
    KUBE = 1
    SLURM = 2


class KubeAction(IntEnum):
    """kube-scheduler: the scheduling queue popping pods into scheduling cycles (``scheduleOne``)."""

    SCHEDULE = 0


class SlurmAction(IntEnum):
    """slurmctld: the main scheduling loop (``job_scheduler.c schedule()``) and sched/backfill's pass."""

    SCHED = 0
    BACKFILL = 1


class PreemptMode(IntEnum):
    """Slurm PreemptMode (slurm.conf, partition or QOS); UNSET = take the cluster's."""

    UNSET = -1
    OFF = 0
    CANCEL = 1
    REQUEUE = 2
    SUSPEND = 3


SLURM_TRES = ("cpu", "mem", "node", "gres/gpu")
"""The TRES columns of Slurm's limits and weights: cpu count, memory in MB, node count, GPUs."""

ACTION_NAMES = {a.name.lower(): a for a in Action}
PLUGIN_NAMES = {p.name.lower().replace("_", "-"): p for p in Plugin}
EXT_NAMES = {
    "jobOrder": Ext.JOB_ORDER, "queueOrder": Ext.QUEUE_ORDER, "taskOrder": Ext.TASK_ORDER,
    "jobReady": Ext.JOB_READY, "jobPipelined": Ext.JOB_PIPELINED, "jobStarving": Ext.JOB_STARVING,
    "jobEnqueued": Ext.JOB_ENQUEUED, "preemptable": Ext.PREEMPTABLE, "reclaimable": Ext.RECLAIMABLE,
    "preemptive": Ext.PREEMPTIVE, "overused": Ext.OVERUSED, "allocatable": Ext.ALLOCATABLE,
    "predicate": Ext.PREDICATE, "nodeOrder": Ext.NODE_ORDER, "bestNode": Ext.BEST_NODE,
    "hierarchy": Ext.HIERARCHY, "victim": Ext.VICTIM, "clusterOrder": Ext.CLUSTER_ORDER,
    "targetJob": Ext.TARGET_JOB, "reservedNodes": Ext.RESERVED_NODES,
    "hyperNodeOrder": Ext.HYPER_NODE_ORDER, "hyperNodeGradient": Ext.HYPER_NODE_GRADIENT,
}
"""Extension-point names as the conf form of :func:`policy_from_conf` spells them."""


class Arg(IntEnum):
    """Numeric plugin arguments, slots of ``Policy.plugin_args`` (NaN = not given)."""

    BINPACK_WEIGHT = 0             # binpack.weight (default 1)
    LEASTREQUESTED_WEIGHT = 1      # nodeorder leastrequested.weight (default 1)
    MOSTREQUESTED_WEIGHT = 2       # nodeorder mostrequested.weight (default 0)
    BALANCEDRESOURCE_WEIGHT = 3    # nodeorder balancedresource.weight (default 1)
    OVERCOMMIT_FACTOR = 4          # overcommit overcommit-factor (default 1.2)
    SLA_WAITING_TIME = 5           # sla sla-waiting-time, seconds (default: none)
    ANCESTOR_RECLAIM_LEVEL = 6     # capacity ancestorReclaimLevel (default 0)
    BALANCEDRESOURCE_KUBERNETES = 7  # nodeorder balancedresource.kubernetes, the minor (default 35: "1.35")
    TOPOLOGY_WEIGHT = 8            # network-topology-aware weight (default 1)
    TOPOLOGY_NORMAL_POD_ENABLE = 9  # network-topology-aware hypernode.binpack.normal-pod.enable (default 1: true)
    TOPOLOGY_NORMAL_POD_FADING = 10  # network-topology-aware hypernode.binpack.normal-pod.fading (default 0.8)


N_ARGS = len(Arg)

ARG_DEFAULTS = {
    Arg.BINPACK_WEIGHT: 1.0,
    Arg.LEASTREQUESTED_WEIGHT: 1.0,
    Arg.MOSTREQUESTED_WEIGHT: 0.0,
    Arg.BALANCEDRESOURCE_WEIGHT: 1.0,
    Arg.OVERCOMMIT_FACTOR: 1.2,
    Arg.ANCESTOR_RECLAIM_LEVEL: 0.0,
    Arg.BALANCEDRESOURCE_KUBERNETES: 35.0,
    Arg.TOPOLOGY_WEIGHT: 1.0,
    Arg.TOPOLOGY_NORMAL_POD_ENABLE: 1.0,
    Arg.TOPOLOGY_NORMAL_POD_FADING: 0.8,
}

BALANCED_CHANGE_SINCE = 36
"""The Kubernetes minor from which NodeResourcesBalancedAllocation scores the change a pod makes to
the node's balance (kubernetes PR #135573, vendored by Volcano master) instead of the balance after
it (Kubernetes 1.35 and earlier, vendored by Volcano v1.15.1)."""


# --------------------------------------------------------------------------------------------
# Policy: the normalised scheduler conf
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """The Volcano scheduler conf, normalised to arrays.

    * ``actions``: (A,) int64 of :class:`Action`, in execution order.
    * ``plugin_tier``: (P,) int64, tier index of each plugin entry, entries in conf order.
    * ``plugin_kind``: (P,) int64 of :class:`Plugin`.
    * ``plugin_enabled``: (P, len(Ext)) bool, extension points switched on.
    * ``plugin_args``: (P, len(Arg)) float64, numeric arguments, NaN = not given
      (see :func:`plugin_arg` for the defaults).
    * ``plugin_resource_weights``: (P, R) float64, binpack per-resource weights
      (``binpack.cpu``, ``binpack.memory``, ``binpack.resources.<name>``); NaN = not scored.

    The other families leave the plugin arrays empty and set:

    * ``family``: :class:`Family`.
    * ``action_period`` (A,) float64, seconds between runs of each action, and ``action_on_event``
      (A,) bool, whether it also runs at the instant of a clock event (a submit, a completion);
      None = every action on the ``schedulePeriod`` grid, after a change (Volcano's session loop).
    * ``pods_at_submit``: the workload's pods exist from submit (a batch Job, an sbatch), not from
      enqueue (a vcjob's pods appear after its PodGroup leaves Pending).
    * ``requeue_hold``: seconds a job restarted by eviction waits before it may start again
      (Slurm's requeued BeginTime, now + cred_expire 120 s + 1).
    * ``node_fail_ends_job``: a failed node ends every job with a pod on it as a whole, at once:
      requeued like a preempted job (held for ``requeue_hold``) when ``Problem.job_requeue`` allows
      it, else ended (state NodeFail); a drained node keeps its running jobs (Slurm's DOWN and
      DRAIN). Else each pod on a failed or drained node is evicted on its own (Kubernetes).
    * ``node_words``: the kind a node event logs, per ``events.NODE_KINDS`` (Slurm's node states);
      None: Kubernetes' words (``events.NODE_LOGGED``).
    * ``kube`` (:class:`KubeArgs`), ``slurm`` (:class:`SlurmArgs`): the family's resolved settings.
    * ``strict_fifo``: allocate stops a queue at its first job that it cannot place, for the rest
      of the session (the scenario's ``scheduler.queueingStrategy: StrictFIFO``; Volcano only).
    """

    actions: np.ndarray
    plugin_tier: np.ndarray
    plugin_kind: np.ndarray
    plugin_enabled: np.ndarray
    plugin_args: np.ndarray
    plugin_resource_weights: np.ndarray
    family: int = Family.VOLCANO
    action_period: np.ndarray | None = None
    action_on_event: np.ndarray | None = None
    pods_at_submit: bool = False
    requeue_hold: float = 0.0
    node_fail_ends_job: bool = False
    node_words: tuple[str, ...] | None = None
    kube: KubeArgs | None = None
    slurm: SlurmArgs | None = None
    strict_fifo: bool = False

    @property
    def n_tiers(self) -> int:
        return int(self.plugin_tier.max()) + 1 if len(self.plugin_tier) else 0

    def plugin_arg(self, p: int, arg: Arg) -> float:
        """Argument ``arg`` of plugin entry ``p``, or Volcano's default when not given."""
        value = self.plugin_args[p, arg]
        return ARG_DEFAULTS.get(arg, float("nan")) if np.isnan(value) else float(value)


LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO = 0, 1, 2
"""NodeResourcesFit scoringStrategy.type."""


@dataclass(frozen=True)
class KubeArgs:
    """A kube-scheduler profile resolved to what the scheduling cycle reads.

    * ``strategy``: NodeResourcesFit scoringStrategy.type; ``fit_weights`` (R,) int64 its resource
      weights (0 = not scored); ``shape`` (S, 2) int64 RequestedToCapacityRatio points
      (utilization 0..100, score already scaled x10 to 0..100).
    * ``balanced`` (R,) bool: the resources NodeResourcesBalancedAllocation scores.
    * ``fit_score_weight``, ``balanced_score_weight``: the two Score plugins' weights (0 = off).
    * ``preemption``: DefaultPreemption is a PostFilter; ``min_candidate_percentage`` /
      ``min_candidate_absolute`` its args.
    * ``coscheduling``: the Coscheduling plugin (QueueSort, PreFilter, PostFilter, Permit);
      ``permit_wait`` its permitWaitingTimeSeconds.
    * ``percentage_of_nodes_to_score``: 0 = adaptive (``numFeasibleNodesToFind``).
    """

    strategy: int
    fit_weights: np.ndarray
    shape: np.ndarray
    balanced: np.ndarray
    fit_score_weight: int
    balanced_score_weight: int
    preemption: bool
    min_candidate_percentage: int
    min_candidate_absolute: int
    coscheduling: bool
    permit_wait: float
    percentage_of_nodes_to_score: int


@dataclass(frozen=True)
class SlurmArgs:
    """slurm.conf's scheduling keys resolved to numbers (seconds for times).

    * ``backfill``: SchedulerType=sched/backfill; ``sched_interval``; ``bf_interval``,
      ``bf_resolution``, ``bf_window``, ``bf_max_job_test`` (SchedulerParameters).
    * Priority: ``weight_age``, ``weight_fairshare``, ``weight_job_size``, ``weight_partition``,
      ``weight_qos``; ``weight_tres`` (4,) over :data:`SLURM_TRES`; ``max_age``;
      ``decay_half_life``; ``calc_period`` (PriorityCalcPeriod); ``favor_small``; ``flags``
      (PriorityFlags); ``dampening`` (FairShareDampeningFactor).
    * ``preempt_type`` 0 none, 1 partition_prio, 2 qos; ``preempt_mode`` (:class:`PreemptMode`).
    * ``slurmdbd``: accounting is on (age, fair-share and QOS count); ``enforce_limits``:
      AccountingStorageEnforce has limits (QOS GrpTRES / MaxTRESPerUser hold).
    """

    backfill: bool
    sched_interval: float
    bf_interval: float
    bf_resolution: float
    bf_window: float
    bf_max_job_test: int
    weight_age: int
    weight_fairshare: int
    weight_job_size: int
    weight_partition: int
    weight_qos: int
    weight_tres: np.ndarray
    max_age: float
    decay_half_life: float
    calc_period: float
    favor_small: bool
    flags: frozenset[str]
    dampening: float
    preempt_type: int
    preempt_mode: int
    slurmdbd: bool
    enforce_limits: bool


def policy_from_conf(
    actions: Sequence[str],
    tiers: Sequence[Sequence[Mapping[str, Any]]],
    resource_names: Sequence[str],
    where: str = "",
) -> Policy:
    """Build a :class:`Policy` from the already-defaulted conf form.

    ``actions`` is the list of action names (``["enqueue", "allocate", ...]``). ``tiers`` is a list
    of tiers, each a list of ``{"name": plugin, "enabled": set of extension-point names,
    "arguments": {...}}``; the caller has already turned Volcano's ``enableX`` switches (default
    true in a conf file, off in unit tests) into the ``enabled`` set. ``resource_names`` is the
    problem's resource vector (binpack weights are resolved against it; resources it lacks can
    never be requested, so they are dropped). Raises :class:`SpecError` naming the bad field,
    prefixed with ``where`` (e.g. ``"cases[3].config."``).
    """
    action_ids = []
    for i, name in enumerate(actions):
        key = str(name).strip().lower()
        if key not in ACTION_NAMES:
            raise SpecError(f"{where}actions[{i}]", f"unknown action {name!r} (known: {', '.join(ACTION_NAMES)})")
        action_ids.append(ACTION_NAMES[key])

    entries = [(t, j, e) for t, tier in enumerate(tiers) for j, e in enumerate(tier)]
    n_res = len(resource_names)
    kind = np.zeros(len(entries), np.int64)
    tier_of = np.zeros(len(entries), np.int64)
    enabled = np.zeros((len(entries), len(Ext)), bool)
    args = np.full((len(entries), N_ARGS), np.nan)
    weights = np.full((len(entries), n_res), np.nan)
    for p, (t, j, entry) in enumerate(entries):
        at = f"{where}tiers[{t}][{j}]"
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise SpecError(f"{at}.name", "missing plugin name")
        name = entry["name"]
        if name not in PLUGIN_NAMES:
            raise SpecError(f"{at}.name", f"unknown plugin {name!r} (known: {', '.join(PLUGIN_NAMES)})")
        kind[p], tier_of[p] = PLUGIN_NAMES[name], t
        for ext in entry.get("enabled") or ():
            if ext not in EXT_NAMES:
                raise SpecError(f"{at}.enabled", f"unknown extension point {ext!r}")
            enabled[p, EXT_NAMES[ext]] = True
        _parse_arguments(PLUGIN_NAMES[name], entry.get("arguments") or {}, resource_names,
                         args[p], weights[p], f"{at}.arguments")
    return Policy(np.array(action_ids, np.int64), tier_of, kind, enabled, args, weights)


def _parse_arguments(kind: Plugin, arguments: Mapping[str, Any], resource_names: Sequence[str],
                     args: np.ndarray, weights: np.ndarray, where: str) -> None:
    """Fill one plugin's numeric argument slots; unknown keys are ignored, as Volcano does."""

    def number(key: str) -> float:
        try:
            return float(arguments[key])
        except (TypeError, ValueError):
            raise SpecError(f"{where}.{key}", f"expected a number, got {arguments[key]!r}") from None

    if kind == Plugin.BINPACK:
        if "binpack.weight" in arguments:
            args[Arg.BINPACK_WEIGHT] = number("binpack.weight")
        # binpack.go: cpu and memory are always scored (weight 1 unless given); extra resources
        # only when listed in binpack.resources, each with weight 1 unless given.
        scored = _binpack_weights(arguments, "binpack.", number)
        for r, res in enumerate(resource_names):
            if res in scored:
                weights[r] = scored[res]
    elif kind == Plugin.NODEORDER:
        for key, slot in (("leastrequested.weight", Arg.LEASTREQUESTED_WEIGHT),
                          ("mostrequested.weight", Arg.MOSTREQUESTED_WEIGHT),
                          ("balancedresource.weight", Arg.BALANCEDRESOURCE_WEIGHT)):
            if key in arguments:
                args[slot] = number(key)
        if "balancedresource.kubernetes" in arguments:
            args[Arg.BALANCEDRESOURCE_KUBERNETES] = kubernetes_minor(
                arguments["balancedresource.kubernetes"], f"{where}.balancedresource.kubernetes")
    elif kind == Plugin.OVERCOMMIT and "overcommit-factor" in arguments:
        args[Arg.OVERCOMMIT_FACTOR] = number("overcommit-factor")
    elif kind == Plugin.SLA and "sla-waiting-time" in arguments:
        args[Arg.SLA_WAITING_TIME] = parse_duration(arguments["sla-waiting-time"], f"{where}.sla-waiting-time")
    elif kind == Plugin.CAPACITY and "ancestorReclaimLevel" in arguments:
        args[Arg.ANCESTOR_RECLAIM_LEVEL] = number("ancestorReclaimLevel")
    elif kind == Plugin.NETWORK_TOPOLOGY_AWARE:
        _topology_arguments(arguments, resource_names, args, weights, number, where)


def _binpack_weights(arguments: Mapping[str, Any], prefix: str, number) -> dict[str, float]:
    """resource -> weight as binpack.go reads `<prefix>cpu`, `<prefix>memory` (1 unless given) and the
    resources listed in `<prefix>resources` (`<prefix>resources.<name>`, 1 unless given); shared by
    binpack and network-topology-aware's HyperNode binpacking."""
    scored = {"cpu": 1.0, "memory": 1.0}
    for res in ("cpu", "memory"):
        if f"{prefix}{res}" in arguments:
            scored[res] = number(f"{prefix}{res}")
    listed = [r.strip() for r in str(arguments.get(f"{prefix}resources", "")).split(",") if r.strip()]
    for res in listed:
        key = f"{prefix}resources.{res}"
        scored[res] = number(key) if key in arguments else 1.0
    return scored


def _topology_arguments(arguments: Mapping[str, Any], resource_names: Sequence[str], args: np.ndarray,
                        weights: np.ndarray, number, where: str) -> None:
    """network-topology-aware's arguments (getPriorityWeight, getNormalPodConfig): the plugin weight,
    the HyperNode binpacking weights (cpu and memory 1 unless given, other resources only when listed
    in ``hypernode.binpack.resources``; a negative weight falls back to 1) and the normal-pod switch
    and fading (a negative fading falls back to 0.8)."""
    if "weight" in arguments:
        value = number("weight")
        args[Arg.TOPOLOGY_WEIGHT] = value if value >= 0 else ARG_DEFAULTS[Arg.TOPOLOGY_WEIGHT]
    scored = _binpack_weights(arguments, "hypernode.binpack.", number)
    for r, res in enumerate(resource_names):
        if res in scored:
            weights[r] = scored[res] if scored[res] >= 0 else 1.0
    enable = arguments.get("hypernode.binpack.normal-pod.enable")
    if enable is not None:
        if not isinstance(enable, bool):
            raise SpecError(f"{where}.hypernode.binpack.normal-pod.enable", f"expected true or false, got {enable!r}")
        args[Arg.TOPOLOGY_NORMAL_POD_ENABLE] = float(enable)
    if "hypernode.binpack.normal-pod.fading" in arguments:
        value = number("hypernode.binpack.normal-pod.fading")
        args[Arg.TOPOLOGY_NORMAL_POD_FADING] = value if value >= 0 else ARG_DEFAULTS[Arg.TOPOLOGY_NORMAL_POD_FADING]


def kubernetes_minor(value: Any, where: str) -> float:
    """The minor of a Kubernetes version written ``"1.36"`` (or ``v1.36``, ``1.36.1``): 36."""
    match = re.fullmatch(r"v?1\.(\d+)(\.\d+)?", str(value).strip())
    if not match or isinstance(value, float):
        raise SpecError(where, f"expected a Kubernetes version such as \"1.35\" or \"1.36\" (quoted), got {value!r}")
    return float(match.group(1))


def parse_duration(text: Any, where: str) -> float:
    """A duration such as ``"3m"`` or ``"1h30m"``, in seconds."""
    try:
        return quantity.parse_duration(text)
    except ValueError as e:
        raise SpecError(where, str(e)) from None


# --------------------------------------------------------------------------------------------
# Problem: the immutable snapshot
# --------------------------------------------------------------------------------------------

class LazyNames(Sequence):
    """Names made when first read (``make()``, then kept as a tuple), ``length`` of them: the
    pods' names of a long trace are formatted only if a report reads them, not by every run."""

    __slots__ = ("_length", "_make", "_names")

    def __init__(self, make, length: int) -> None:
        self._make, self._length, self._names = make, length, None

    def names(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(self._make())
            self._make = None
        return self._names

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        return self.names()[index]

    def __iter__(self):
        return iter(self.names())

    def __add__(self, other) -> tuple[str, ...]:
        return self.names() + tuple(other)

    def __eq__(self, other) -> bool:
        return self.names() == (other.names() if isinstance(other, LazyNames) else other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self.names())

    def __reduce__(self):
        return tuple, (self.names(),)


@dataclass(frozen=True)
class Problem:
    """One immutable cluster snapshot (shapes: N nodes, Q queues, J jobs, T tasks, R resources,
    K task roles, C task feasibility classes).

    Nodes
      ``node_names`` (N,); ``node_allocatable`` (N, R) ``status.allocatable`` (pods dim = max pods);
      ``node_schedulable`` (N,) bool, false for ``spec.unschedulable`` nodes and for nodes a node
      event took down (NotReady); ``node_cordoned`` (N,) bool, ``spec.unschedulable`` set by a
      node event (cordon, drain) or given (default: the nodes not schedulable), so kube-scheduler
      can tell its NodeUnschedulable filter from the unreachable taint of a NotReady node.
    Queues
      ``queue_names`` (Q,); ``queue_weight`` (Q,) float64 ``spec.weight``;
      ``queue_capability`` / ``queue_deserved`` / ``queue_guarantee`` (Q, R), NaN = dimension not
      named (a queue without capability is all-NaN); ``queue_priority`` (Q,) int64 ``spec.priority``;
      ``queue_parent`` (Q,) int64, index of ``spec.parent``, -1 for the root (or when no ``root``
      queue is modelled); ``queue_reclaimable`` (Q,) bool (nil => true); ``queue_open`` (Q,) bool
      (state Open); ``queue_rank`` (Q,) int64 order by creationTimestamp, then UID (= name).
    Jobs (PodGroups)
      ``job_names`` (J,) ``"<ns>/<name>"``; ``job_queue`` (J,) int64; ``job_priority`` (J,) int64,
      the resolved PriorityClass value (else the globalDefault class, else 0);
      ``job_min_member`` (J,) int64 ``spec.minMember`` (minAvailable); ``job_min_task_member``
      (J, K) int64 per-role minimum (0 = no minimum for that role); ``job_min_resources`` (J, R)
      ``spec.minResources`` and ``job_has_min_resources`` (J,) bool (false = nil);
      ``job_rank`` (J,) int64 order by creationTimestamp, then UID (``"<ns>/<name>"`` in tests);
      ``job_creation`` (J,) float64 seconds; ``job_sla_waiting`` (J,) float64 seconds from the
      ``volcano.sh/sla-waiting-time`` annotation, NaN = none; ``job_preemptable`` (J,) bool,
      PodGroup-level ``volcano.sh/preemptable`` (default false).
    Tasks (pods)
      ``task_names`` (T,) ``"<ns>/<name>"`` (a :class:`LazyNames` from the compiler); ``task_job`` (T,) int64; ``task_role`` (T,) int64 into
      ``role_names`` (``volcano.sh/task-spec``, ``""`` when absent); ``task_request`` (T, R) incl.
      pods = 1; ``task_priority`` (T,) int64 (pod ``spec.priority``, overridden by annotation
      ``volcano.sh/task-priority``, default 1); ``task_preempt_never`` (T,) bool
      (``preemptionPolicy: Never``); ``task_preemptable`` (T,) bool (``volcano.sh/preemptable``,
      default true); ``task_best_effort`` (T,) bool (empty request apart from pods);
      ``task_critical`` (T,) bool (priorityClassName system-cluster-critical /
      system-node-critical, or namespace kube-system: the conformance plugin protects these);
      ``task_index`` (T,) int64 the numeric suffix of a pod name with >= 3 dash-separated parts
      (-1 when none); ``task_rank`` (T,) int64 order by creationTimestamp, then UID. Together these
      give ``helpers.CompareTask``: lower index first when both have one and they differ, else rank.
    Feasibility
      ``task_class`` (T,) int64 and ``class_node_ok`` (C, N) bool: compile groups tasks with the
      same node selector / affinity / tolerations into a class and precomputes which nodes pass
      the label and taint predicates. Resource fit and max pods are checked by the engine.
    Policy
      ``policy`` (:class:`Policy`).
    HyperNodes (optional; only the network-topology-aware plugin reads them; left out: none)
      ``hypernode_names`` (Hn,) and ``hypernode_tier`` (Hn,) int64 (tier 1 groups nodes);
      ``node_hypernode`` (N, Tn) int64: column ``k`` is the HyperNode of tier ``k + 1`` holding the
      node (-1 = none), so one tier's HyperNodes partition the nodes they hold and each sits in
      one HyperNode of every tier above it; ``job_topology_tier`` (J,) int64 the PodGroup's
      ``networkTopology.highestTierAllowed`` (-1 = no networkTopology) and ``job_topology_hard``
      (J,) bool its ``mode: hard``.
    Hierarchical DRF (optional; only drf with ``hierarchy`` reads it)
      ``hdrf_names`` (H,), ``hdrf_parent`` (H,) int64 (-1 for node 0, the root) and
      ``hdrf_weight`` (H,) float64: the tree spelled by the queues' ``volcano.sh/hierarchy`` /
      ``volcano.sh/hierarchy-weights`` annotations; ``queue_hdrf_node`` (Q,) int64 the tree node
      a queue's jobs hang under (0 = root, for queues without the annotation). Build them with
      :func:`hdrf_tree`; left out, every queue hangs under the root.
    Slurm (optional; only the Slurm session reads them; left out: one partition of every node,
      QOS ``normal``, every job a user of ``root``, no time limits)
      ``job_partition`` (J,) int64 into ``partition_names`` (Pa,); ``job_qos`` (J,) int64 into
      ``qos_names`` (Qs,); ``job_assoc`` (J,) int64, the user association into ``assoc_names``;
      ``job_time_limit`` (J,) float64 seconds, inf = INFINITE; ``job_requeue`` (J,) bool, the job may
      be requeued (sbatch --requeue, default JobRequeue; left out: every job may).
      ``partition_nodes`` (Pa, N) bool; ``partition_tier`` (Pa,) int64 PriorityTier;
      ``partition_job_factor`` (Pa,) int64 PriorityJobFactor; ``partition_preempt_mode`` (Pa,)
      int64 :class:`PreemptMode`; ``partition_max_nodes`` (Pa,) int64, -1 = unlimited.
      ``qos_priority`` (Qs,) int64; ``qos_preempt`` (Qs, Qs) bool, row q lists the QOS q may
      preempt; ``qos_preempt_mode`` (Qs,) int64; ``qos_grp_tres`` / ``qos_max_tres_per_user``
      (Qs, 4) float64 over :data:`SLURM_TRES`, NaN = no limit.
      ``assoc_names`` (As,) (accounts by name, users as ``user:<name>``), ``assoc_parent`` (As,)
      int64 (-1 for root, index 0), ``assoc_shares`` (As,) float64 raw FairShare (-1 = parent),
      ``assoc_is_user`` (As,) bool.
    kube-scheduler filter reasons (optional)
      ``class_node_failure`` (C, N) int64 into ``failure_reasons``: 0 (``""``) where the class
      passes the node's label and taint filters, else the reason kube-scheduler gives
      (``node(s) had untolerated taint {k: v}``, ``node(s) didn't match Pod's node affinity/selector``).
    """

    resource_names: tuple[str, ...]
    node_names: tuple[str, ...]
    node_allocatable: np.ndarray
    node_schedulable: np.ndarray
    queue_names: tuple[str, ...]
    queue_weight: np.ndarray
    queue_capability: np.ndarray
    queue_deserved: np.ndarray
    queue_guarantee: np.ndarray
    queue_priority: np.ndarray
    queue_parent: np.ndarray
    queue_reclaimable: np.ndarray
    queue_open: np.ndarray
    queue_rank: np.ndarray
    role_names: tuple[str, ...]
    job_names: tuple[str, ...]
    job_queue: np.ndarray
    job_priority: np.ndarray
    job_min_member: np.ndarray
    job_min_task_member: np.ndarray
    job_min_resources: np.ndarray
    job_has_min_resources: np.ndarray
    job_rank: np.ndarray
    job_creation: np.ndarray
    job_sla_waiting: np.ndarray
    job_preemptable: np.ndarray
    task_names: tuple[str, ...] | LazyNames
    task_job: np.ndarray
    task_role: np.ndarray
    task_request: np.ndarray
    task_priority: np.ndarray
    task_preempt_never: np.ndarray
    task_preemptable: np.ndarray
    task_best_effort: np.ndarray
    task_critical: np.ndarray
    task_index: np.ndarray
    task_rank: np.ndarray
    task_class: np.ndarray
    class_node_ok: np.ndarray
    policy: Policy
    hdrf_names: tuple[str, ...] = ("root",)
    hdrf_parent: np.ndarray | None = None
    hdrf_weight: np.ndarray | None = None
    queue_hdrf_node: np.ndarray | None = None
    job_partition: np.ndarray | None = None
    job_qos: np.ndarray | None = None
    job_assoc: np.ndarray | None = None
    job_time_limit: np.ndarray | None = None
    job_requeue: np.ndarray | None = None
    partition_names: tuple[str, ...] = ("default",)
    partition_nodes: np.ndarray | None = None
    partition_tier: np.ndarray | None = None
    partition_job_factor: np.ndarray | None = None
    partition_preempt_mode: np.ndarray | None = None
    partition_max_nodes: np.ndarray | None = None
    qos_names: tuple[str, ...] = ("normal",)
    qos_priority: np.ndarray | None = None
    qos_preempt: np.ndarray | None = None
    qos_preempt_mode: np.ndarray | None = None
    qos_grp_tres: np.ndarray | None = None
    qos_max_tres_per_user: np.ndarray | None = None
    assoc_names: tuple[str, ...] = ("root",)
    assoc_parent: np.ndarray | None = None
    assoc_shares: np.ndarray | None = None
    assoc_is_user: np.ndarray | None = None
    class_node_failure: np.ndarray | None = None
    failure_reasons: tuple[str, ...] = ("", "node(s) didn't match Pod's node affinity/selector")
    hypernode_names: tuple[str, ...] = ()
    hypernode_tier: np.ndarray | None = None
    node_hypernode: np.ndarray | None = None
    job_topology_tier: np.ndarray | None = None
    job_topology_hard: np.ndarray | None = None
    node_cordoned: np.ndarray | None = None

    def __post_init__(self) -> None:
        n_part, n_qos, n_assoc = len(self.partition_names), len(self.qos_names), len(self.assoc_names)
        defaults = {
            "hdrf_parent": lambda: np.full(len(self.hdrf_names), -1, np.int64),
            "node_cordoned": lambda: ~self.node_schedulable,
            "hdrf_weight": lambda: np.ones(len(self.hdrf_names)),
            "queue_hdrf_node": lambda: np.zeros(len(self.queue_names), np.int64),
            "job_partition": lambda: np.zeros(self.n_jobs, np.int64),
            "job_qos": lambda: np.zeros(self.n_jobs, np.int64),
            "job_assoc": lambda: np.zeros(self.n_jobs, np.int64),
            "job_time_limit": lambda: np.full(self.n_jobs, np.inf),
            "job_requeue": lambda: np.ones(self.n_jobs, bool),
            "partition_nodes": lambda: np.ones((n_part, self.n_nodes), bool),
            "partition_tier": lambda: np.ones(n_part, np.int64),
            "partition_job_factor": lambda: np.ones(n_part, np.int64),
            "partition_preempt_mode": lambda: np.full(n_part, PreemptMode.UNSET, np.int64),
            "partition_max_nodes": lambda: np.full(n_part, -1, np.int64),
            "qos_priority": lambda: np.zeros(n_qos, np.int64),
            "qos_preempt": lambda: np.zeros((n_qos, n_qos), bool),
            "qos_preempt_mode": lambda: np.full(n_qos, PreemptMode.UNSET, np.int64),
            "qos_grp_tres": lambda: np.full((n_qos, len(SLURM_TRES)), np.nan),
            "qos_max_tres_per_user": lambda: np.full((n_qos, len(SLURM_TRES)), np.nan),
            "assoc_parent": lambda: np.full(n_assoc, -1, np.int64),
            "assoc_shares": lambda: np.ones(n_assoc),
            "assoc_is_user": lambda: np.zeros(n_assoc, bool),
            "class_node_failure": lambda: np.where(self.class_node_ok, 0, len(self.failure_reasons) - 1),
            "hypernode_tier": lambda: np.zeros(len(self.hypernode_names), np.int64),
            "node_hypernode": lambda: np.full((self.n_nodes, 0), -1, np.int64),
            "job_topology_tier": lambda: np.full(self.n_jobs, -1, np.int64),
            "job_topology_hard": lambda: np.zeros(self.n_jobs, bool),
        }
        for name, make in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, make())
        validate_problem(self)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_queues(self) -> int:
        return len(self.queue_names)

    @property
    def n_jobs(self) -> int:
        return len(self.job_names)

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    @property
    def n_resources(self) -> int:
        return len(self.resource_names)


_SHAPES = {
    "node_allocatable": ("N", "R"), "node_schedulable": ("N",),
    "queue_weight": ("Q",), "queue_capability": ("Q", "R"), "queue_deserved": ("Q", "R"),
    "queue_guarantee": ("Q", "R"), "queue_priority": ("Q",), "queue_parent": ("Q",),
    "queue_reclaimable": ("Q",), "queue_open": ("Q",), "queue_rank": ("Q",),
    "job_queue": ("J",), "job_priority": ("J",), "job_min_member": ("J",),
    "job_min_task_member": ("J", "K"), "job_min_resources": ("J", "R"),
    "job_has_min_resources": ("J",), "job_rank": ("J",), "job_creation": ("J",),
    "job_sla_waiting": ("J",), "job_preemptable": ("J",),
    "task_job": ("T",), "task_role": ("T",), "task_request": ("T", "R"), "task_priority": ("T",),
    "task_preempt_never": ("T",), "task_preemptable": ("T",), "task_best_effort": ("T",),
    "task_critical": ("T",), "task_index": ("T",), "task_rank": ("T",), "task_class": ("T",),
    "class_node_ok": ("C", "N"),
    "hdrf_parent": ("H",), "hdrf_weight": ("H",), "queue_hdrf_node": ("Q",),
    "job_partition": ("J",), "job_qos": ("J",), "job_assoc": ("J",), "job_time_limit": ("J",), "job_requeue": ("J",),
    "partition_nodes": ("Pa", "N"), "partition_tier": ("Pa",), "partition_job_factor": ("Pa",),
    "partition_preempt_mode": ("Pa",), "partition_max_nodes": ("Pa",),
    "qos_priority": ("Qs",), "qos_preempt": ("Qs", "Qs"), "qos_preempt_mode": ("Qs",),
    "qos_grp_tres": ("Qs", "TRES"), "qos_max_tres_per_user": ("Qs", "TRES"),
    "assoc_parent": ("As",), "assoc_shares": ("As",), "assoc_is_user": ("As",),
    "class_node_failure": ("C", "N"),
    "hypernode_tier": ("Hn",), "node_hypernode": ("N", "Tn"), "job_topology_tier": ("J",),
    "job_topology_hard": ("J",),
}


def validate_problem(p: Problem) -> None:
    """Check array shapes and index ranges; raise :class:`SpecError` naming the field."""
    if tuple(p.resource_names[:3]) != BASE_RESOURCES:
        raise SpecError("resource_names", f"must start with {BASE_RESOURCES}, got {p.resource_names[:3]}")
    dims = {"N": p.n_nodes, "Q": p.n_queues, "J": p.n_jobs, "T": p.n_tasks,
            "R": p.n_resources, "K": len(p.role_names), "C": p.class_node_ok.shape[0],
            "H": len(p.hdrf_names), "Pa": len(p.partition_names), "Qs": len(p.qos_names),
            "As": len(p.assoc_names), "TRES": len(SLURM_TRES), "Hn": len(p.hypernode_names),
            "Tn": p.node_hypernode.shape[1]}
    for name, shape in _SHAPES.items():
        want = tuple(dims[d] for d in shape)
        got = getattr(p, name).shape
        if got != want:
            raise SpecError(name, f"shape {got}, expected {want} ({'x'.join(shape)})")
    for name, upper in (("job_queue", p.n_queues), ("task_job", p.n_jobs),
                        ("task_role", len(p.role_names)), ("task_class", dims["C"]),
                        ("queue_hdrf_node", dims["H"]), ("job_partition", dims["Pa"]),
                        ("job_qos", dims["Qs"]), ("job_assoc", dims["As"]),
                        ("class_node_failure", len(p.failure_reasons))):
        values = getattr(p, name)
        if values.size and (values.min() < 0 or values.max() >= upper):
            raise SpecError(name, f"index out of range 0..{upper - 1}")
    if len(p.queue_parent) and (p.queue_parent.min() < -1 or p.queue_parent.max() >= p.n_queues):
        raise SpecError("queue_parent", "index out of range")
    if p.node_hypernode.size and (p.node_hypernode.min() < -1 or p.node_hypernode.max() >= dims["Hn"]):
        raise SpecError("node_hypernode", "index out of range")


# --------------------------------------------------------------------------------------------
# State: what a session changes
# --------------------------------------------------------------------------------------------

@dataclass
class State:
    """The mutable part of a snapshot.

    * ``task_status`` (T,) int8 of :class:`TaskStatus`; ``task_node`` (T,) int64, -1 = none.
      A Pipelined task may have node -1 when its node is not in the snapshot.
    * ``job_phase`` (J,) int8 of :class:`PodGroupPhase`.
    * ``node_used``, ``node_releasing``, ``node_pipelined`` (N, R): Volcano's NodeInfo
      accounting, derived from the tasks by :meth:`from_tasks` (Used = every task on the node
      except Pipelined and finished ones; Releasing = Releasing tasks, also in Used;
      Pipelined = Pipelined tasks). ``Idle = allocatable - used``;
      ``FutureIdle = Idle + Releasing - Pipelined``.
    * ``now``: the session clock in seconds (same clock as ``job_creation``); ``cycle``: session
      counter.
    * ``next_node``: where the next node scan starts (util.PredicateHelper's process-wide
      ``lastProcessedNodeIndex``; it only moves on clusters of more than 100 nodes, where
      Volcano stops scanning once it has found enough feasible nodes).

    What the clock keeps between sessions for the other families (:meth:`from_tasks` fills the
    defaults): ``task_start`` (T,) when each holding pod started (NaN = not running);
    ``task_nominated`` (T,) the node a Pending pod is nominated to (``nominatedNodeName``: the last
    session's pipelined placement, for Volcano only one that evicted, else the pod keeps its
    nomination while pipelined; -1 = none); ``task_waiting_since`` (T,) when an
    Allocated pod began waiting at Permit (NaN = not waiting; Allocated pods are kept between
    sessions only while they wait); ``job_eligible`` (J,) the earliest time a job may start
    (Slurm BeginTime after a requeue, -inf = now); ``job_suspended`` (J,) the job was suspended by
    preemption (its pods keep their nodes, Running; binding them again resumes it);
    ``assoc_usage`` (As,) each user association's decayed usage (Slurm ``usage_raw``) at the last
    PriorityCalcPeriod tick.
    """

    task_status: np.ndarray
    task_node: np.ndarray
    job_phase: np.ndarray
    node_used: np.ndarray
    node_releasing: np.ndarray
    node_pipelined: np.ndarray
    now: float = 0.0
    cycle: int = 0
    next_node: int = 0
    task_start: np.ndarray | None = None
    task_nominated: np.ndarray | None = None
    task_waiting_since: np.ndarray | None = None
    job_eligible: np.ndarray | None = None
    job_suspended: np.ndarray | None = None
    assoc_usage: np.ndarray | None = None

    @classmethod
    def from_tasks(cls, problem: Problem, task_status: Iterable[int], task_node: Iterable[int],
                   job_phase: Iterable[int], now: float = 0.0, cycle: int = 0,
                   next_node: int = 0, **kept: np.ndarray | None) -> State:
        """Build a state, computing the node accounting from task status and node; ``kept`` are
        the between-session arrays (defaults where None or left out)."""
        status = np.asarray(list(task_status), np.int8).reshape(problem.n_tasks)
        node = np.asarray(list(task_node), np.int64).reshape(problem.n_tasks)
        phase = np.asarray(list(job_phase), np.int8).reshape(problem.n_jobs)
        used, releasing, pipelined = node_accounting(problem, status, node)
        t, j = problem.n_tasks, problem.n_jobs
        defaults = {"task_start": np.full(t, np.nan), "task_nominated": np.full(t, -1, np.int64),
                    "task_waiting_since": np.full(t, np.nan), "job_eligible": np.full(j, -np.inf),
                    "job_suspended": np.zeros(j, bool), "assoc_usage": np.zeros(len(problem.assoc_names))}
        filled = {name: default if kept.get(name) is None else kept[name] for name, default in defaults.items()}
        return cls(status, node, phase, used, releasing, pipelined, now, cycle, next_node, **filled)

    def copy(self) -> State:
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).copy()
                                            for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), np.ndarray)})


def node_accounting(problem: Problem, status: np.ndarray, node: np.ndarray):
    """(used, releasing, pipelined) per node, as NodeInfo.AddTask accumulates them."""
    shape = (problem.n_nodes, problem.n_resources)
    used, releasing, pipelined = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    placed = (node >= 0) & ~np.isin(status, _NOT_ON_NODE)
    is_pipelined = placed & (status == TaskStatus.PIPELINED)
    holding = placed & ~is_pipelined
    for out, mask in ((pipelined, is_pipelined), (used, holding),
                      (releasing, holding & (status == TaskStatus.RELEASING))):
        np.add.at(out, node[mask], problem.task_request[mask])
    return used, releasing, pipelined


_NOT_ON_NODE = np.array([TaskStatus.PENDING, TaskStatus.SUCCEEDED, TaskStatus.FAILED], np.int8)


# --------------------------------------------------------------------------------------------
# Decisions: what a session decided
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """A task sent to a node: bound (committed Allocate) or pipelined. ``nominate``: a pipelined
    pod is nominated to the node (its nominatedNodeName) for the next session; Volcano nominates
    only when the pipelining evicted pods (TaskSchedulingReason: EvictionOccurred)."""

    task: int
    node: int
    action: str
    reason: str
    nominate: bool = True


@dataclass(frozen=True)
class Eviction:
    """A task evicted by preempt or reclaim, with the task it made room for.

    ``mode`` is what happens to the victim's job (its pods are deleted either way): ``restart``
    (vcjob RestartJob when it falls below minAvailable; a Job's pod recreated), ``requeue`` (Slurm
    REQUEUE: back to pending, held for ``Policy.requeue_hold``), ``cancel`` (Slurm CANCEL, or
    REQUEUE without JobRequeue: the job ends, state Preempted), ``suspend`` (Slurm SUSPEND: the
    job's pods keep their nodes and its work pauses until a session binds them again)."""

    task: int
    action: str
    reason: str
    mode: str = "restart"


@dataclass(frozen=True)
class Note:
    """Something a session says about a job (``task`` -1) or a pod that is not a placement: a
    pending reason (Slurm squeue), a FailedScheduling or Permit message (kube). The clock logs it as
    an event of ``kind`` when it differs from the last note of that kind for that job or pod."""

    job: int
    task: int
    kind: str
    reason: str
    message: str


@dataclass
class Decisions:
    """The outcome of one session.

    * ``binds``: committed allocations, in the order they were dispatched to the binder.
    * ``pipelined``: tasks left Pipelined at session close (waiting for releasing resources).
    * ``evictions``: tasks evicted (committed), in order.
    * ``attempts``: ``(action, task)`` in the order each action examined pending tasks, for
      explaining "who went first".
    * ``state``: the state after the session (bound tasks are Binding, evicted are Releasing,
      PodGroup phases updated by close_session).
    * ``waiting``: pods reserved on a node and waiting at Permit at session close (kube
      Coscheduling); the clock keeps them Allocated until a session binds or drops them.
    * ``notes``: :class:`Note` s, in order.
    * ``wake_at``: the earliest time a decision of this session may change with no other event
      (a Permit timeout, a BeginTime); the clock runs a session then. inf = none.
    * ``event_now``: the session itself made a cluster event the scheduler reacts to at once (kube:
      a pod waiting at Permit rejected by preemption frees its node; AssignedPodDelete moves the
      queue), so the clock runs the next session at this instant.
    * ``priorities``: {job: priority} for schedulers whose job priority is computed (Slurm's
      multifactor), as it stood in this session; the Result reports a job's last one before it started.
    """

    binds: list[Placement] = field(default_factory=list)
    pipelined: list[Placement] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    attempts: list[tuple[str, int]] = field(default_factory=list)
    state: State | None = None
    waiting: list[Placement] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    wake_at: float = math.inf
    event_now: bool = False
    priorities: dict[int, int] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Helpers for compilers
# --------------------------------------------------------------------------------------------

def pod_name_index(name: str) -> int:
    """Numeric pod index as ``helpers.GetPodIndexUnderTask`` reads it: the last dash-separated
    part of a name with at least three parts, if it is an integer; else -1."""
    parts = name.split("-")
    if len(parts) >= 3:
        try:
            return int(parts[-1])
        except ValueError:
            return -1
    return -1


def hdrf_tree(hierarchies: Sequence[str], weights: Sequence[str]):
    """``(hdrf_names, hdrf_parent, hdrf_weight, queue_hdrf_node)`` from each queue's
    ``volcano.sh/hierarchy`` (``"root/eng/dev"``, ``""`` when absent) and
    ``volcano.sh/hierarchy-weights`` (``"100/50/50"``) annotations, as drf buildHierarchy
    reads them: the first component is the root; a node is named by its path and takes the
    weight the first queue that reaches it gives (unparsable or < 1 becomes 1)."""
    names, parent, weight = ["root"], [-1], [1.0]
    index = {"root": 0}
    queue_node = []
    for q, (hierarchy, weight_text) in enumerate(zip(hierarchies, weights)):
        parts, ws = hierarchy.split("/"), weight_text.split("/")
        node, path = 0, "root"
        for i in range(1, len(parts)):
            path = f"{path}/{parts[i]}"
            if path not in index:
                try:
                    w = float(ws[i])
                except (IndexError, ValueError):
                    w = 1.0
                index[path] = len(names)
                names.append(path)
                parent.append(node)
                weight.append(max(w, 1.0))
            node = index[path]
        queue_node.append(node)
    return tuple(names), np.array(parent, np.int64), np.array(weight), np.array(queue_node, np.int64)


def rank_by(keys: Sequence[Any]) -> np.ndarray:
    """Rank (0 = first) of each element under the sort order of ``keys`` (e.g. (creation, uid))."""
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    rank = np.empty(len(keys), np.int64)
    rank[order] = np.arange(len(keys))
    return rank


def is_best_effort(request: np.ndarray) -> bool:
    """api.Resource.IsEmpty ignoring pods: every dimension below minResource."""
    rest = np.delete(np.asarray(request, float), PODS)
    return bool(np.all(rest < MIN_RESOURCE))


def resource_amount(name: str, value: Any, where: str) -> float:
    """A quantity in Volcano units for resource ``name``: cpu and scalars in milli, memory in
    bytes, pods whole (api.NewResource)."""
    try:
        q = quantity.parse_quantity(value)
    except ValueError as e:
        raise SpecError(where, str(e)) from None
    # Quantity.Value() / MilliValue() round up to a whole unit.
    return float(math.ceil((q if name in ("memory", "pods") else q * 1000.0) - 1e-9))


def resource_vector(resource_names: Sequence[str], rl: Mapping[str, Any] | None, where: str,
                    missing: float = 0.0) -> np.ndarray:
    """A ResourceList as a vector over ``resource_names``; unnamed dims get ``missing``
    (0 for requests and allocatable, NaN for capability/deserved/guarantee)."""
    vec = np.full(len(resource_names), missing)
    index = {r: i for i, r in enumerate(resource_names)}
    for name, value in (rl or {}).items():
        if name not in index:
            raise SpecError(f"{where}.{name}", "resource not in the problem's resource vector")
        vec[index[name]] = resource_amount(name, value, f"{where}.{name}")
    return vec
