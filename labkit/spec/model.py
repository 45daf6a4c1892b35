"""The scenario model: what a lab describes, in the scheduler's own words.

A Scenario holds a cluster (node pools, labels, taints, HyperNode-style topology tiers), tenants
(Namespace + ResourceQuota + LimitRange), Volcano Queues, PriorityClasses, jobs (vcjob-like: tasks
with replicas, per-pod requests and minAvailable), workload generators, and the scheduler policy
written as Volcano's own `volcano-scheduler.conf`.

Field names in YAML are those of Kubernetes and Volcano (`priorityClassName`, `minAvailable`,
`nodeSelector`, `enablePreemptable`); Python attributes are their snake_case twins. Quantities and
durations are kept as written, so `dump(load(x))` gives back what the user wrote plus defaults.
Models are immutable; `labkit.spec.checks` adds the rules that span several fields.
"""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_pascal

from ..errors import SpecError
from .base import (
    Duration,
    Model,
    Namespace,
    ObjectName,
    PodResources,
    PositiveDuration,
    Quantity,
    ResourceList,
    Taint,
    non_negative_duration,
    positive_duration,
)
from .kube import KubeSchedulerConfiguration
from .kueue import Kueue, KueueConfiguration
from .quantity import MAX_SECONDS, parse_duration, parse_quantity
from .yamltext import parse_yaml

MAX_NODES = 100_000
"""Most nodes a scenario may have (Kubernetes tests clusters of 5,000; Slurm runs tens of thousands)."""
MAX_PODS = 100_000
"""Most pods one job or one task may have."""
MAX_JOBS = 10_000_000
"""Most jobs a scenario may have, its workloads' included (the 1M-job benchmark is a tenth of it)."""
MAX_SEED = 2**63 - 1
MAX_INT32 = 2**31 - 1
MAX_UINT32 = 2**32 - 1
MIN_SCHEDULE_PERIOD = 0.01
"""Shortest schedulePeriod (10 ms): a session every nanosecond would never finish a day's run."""

# ---------------------------------------------------------------------------------------- cluster


class Toleration(Model):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes toleration matching (empty key with Exists tolerates everything)."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


class Spot(Model):
    """A spot pool's interruptions: a Poisson process of `rate` interruptions per hour, one per node
    (`per: node`, each node reclaimed on its own) or one for the pool (`per: pool`, every node at
    once, as when a zone runs out of spot capacity). Each interruption is an `interrupt` node event
    (the notice drains the node, at the interruption it fails); `replaceAfter` later a replacement
    node of the same name joins (the node recovers, schedulable), or never when it is null. A node
    is interrupted again only once it is back and past a notice. The draws are made when the
    scenario is compiled, from `seed` (default: the scenario's), over [0, `until`) (default: the
    scenario's horizon), so every engine sees the same events."""

    rate: float = Field(gt=0, le=3600)
    """Interruptions per hour, per node or per pool."""
    per: Literal["node", "pool"] = "node"
    notice: Duration = "2m"
    """The interruption notice (EC2's is 2 minutes)."""
    replace_after: Duration | None = "5m"
    """How long after an interruption its replacement joins (an assumption: set your provider's)."""
    until: PositiveDuration | None = None
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)


class NodePool(Model):
    """`count` identical nodes named `<name>-<i>`; `speed` scales job work on them (1 = reference GPU);
    `gpuModel` names their GPU model, the column of the speed matrix (`workloadClasses[].speeds`)
    that the jobs of a workload class read on them."""

    name: Namespace
    count: int = Field(ge=1, le=MAX_NODES)
    resources: PodResources
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    speed: float = Field(default=1.0, gt=0)
    price: float | None = Field(default=None, ge=0)
    """What one GPU-hour on this pool costs (any currency); `labkit.metrics.cost` reads it."""
    spot: Spot | None = None
    """The pool is spot capacity, reclaimed at random (:class:`Spot`)."""
    gpu_model: str | None = Field(default=None, min_length=1)

    @field_validator("resources")
    @classmethod
    def _has_capacity(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("a node pool needs at least one resource (e.g. nvidia.com/gpu, cpu)")
        return value

    def node_names(self) -> list[str]:
        width = len(str(self.count - 1))
        return [f"{self.name}-{i:0{width}d}" for i in range(self.count)]


class TopologyTier(Model):
    """One HyperNode tier: consecutive groups of `size` members of the tier below (tier 1 groups nodes).

    Tiers count from 1, as Volcano's HyperNode tiers do; the scheduler adds a cluster-top HyperNode
    one tier above the last, holding every node.
    """

    name: Namespace
    size: int = Field(ge=1, le=MAX_NODES)


class Topology(Model):
    tiers: list[TopologyTier] = Field(min_length=1)

    def hypernodes(self, nodes: list[str]) -> list[list[tuple[str, list[str]]]]:
        """Tier by tier, tier 1 first: each HyperNode's name (``<tier name>-<j>``) and members, tier 1
        grouping ``size`` consecutive nodes, tier k ``size`` consecutive HyperNodes of tier k-1."""
        below, out = list(nodes), []
        for tier in self.tiers:
            groups = [(f"{tier.name}-{j}", below[i:i + tier.size]) for j, i in enumerate(range(0, len(below), tier.size))]
            out.append(groups)
            below = [name for name, _ in groups]
        return out


class NodeEvent(Model):
    """Something that happens to a node (or to every node of a pool) at time `at`, as an operator
    or the node lifecycle controller does it: `fail` (the node goes NotReady: its pods are lost,
    their jobs restart from their last checkpoint as after an eviction), `recover` (Ready again),
    `cordon` / `uncordon` (`kubectl cordon`: no new pod binds to it / it is schedulable again),
    `drain` (`kubectl drain`: cordon, then evict its pods), `interrupt` (a spot instance reclaimed:
    the interruption notice `notice` before `at` drains the node, at `at` it fails)."""

    at: Duration
    node: str = Field(min_length=1)
    """A node's name (`<pool>-<i>`) or a pool's name (all its nodes)."""
    kind: Literal["fail", "recover", "cordon", "uncordon", "drain", "interrupt"]
    notice: Duration | None = None
    """`interrupt` only: how long before `at` the notice comes (default 2m, EC2's spot interruption notice)."""

    @model_validator(mode="after")
    def _notice(self) -> NodeEvent:
        if self.notice is not None and self.kind != "interrupt":
            raise ValueError(f"notice applies to kind interrupt, not {self.kind}")
        if parse_duration(self.at) < self.notice_seconds:
            raise ValueError(f"the notice ({self.notice or DEFAULT_NOTICE}) would come before time 0 (at {self.at})")
        return self

    @property
    def notice_seconds(self) -> float:
        if self.kind != "interrupt":
            return 0.0
        return parse_duration(self.notice if self.notice is not None else DEFAULT_NOTICE)

    def steps(self) -> list[tuple[float, str]]:
        """(time, kind) of what happens to the node: an interruption is a drain at its notice, then a failure."""
        at = parse_duration(self.at)
        if self.kind == "interrupt":
            return [(at - self.notice_seconds, "drain"), (at, "fail")]
        return [(at, self.kind)]


DEFAULT_NOTICE = "2m"


TOPOLOGY_LABEL = "topology.labkit.io/"
"""Node label prefix of the HyperNode tiers: a node of HyperNode `rack-3` carries `topology.labkit.io/rack: rack-3`."""
HOSTNAME_LABEL = "kubernetes.io/hostname"


class Cluster(Model):
    pools: list[NodePool] = Field(min_length=1)
    topology: Topology | None = None
    events: list[NodeEvent] = []
    """Node failures, recoveries, cordons and drains in time (:class:`NodeEvent`)."""

    def node_labels(self) -> list[dict[str, str]]:
        """Every node's labels, in node order: its pool's `labels`, `kubernetes.io/hostname` (its name),
        `labkit.io/pool` and, per `topology` tier, `topology.labkit.io/<tier>` (the HyperNode holding it),
        as `labkit export k8s` labels the nodes; a Kueue Topology's levels name these labels."""
        names = [name for pool in self.pools for name in pool.node_names()]
        out = [{**pool.labels, HOSTNAME_LABEL: name, "labkit.io/pool": pool.name}
               for pool in self.pools for name in pool.node_names()]
        if self.topology is not None:
            owner = dict(zip(names, names))  # the HyperNode of the tier below holding each node
            for tier, groups in zip(self.topology.tiers, self.topology.hypernodes(names)):
                up = {member: hypernode for hypernode, members in groups for member in members}
                for labels, name in zip(out, names):
                    owner[name] = up[owner[name]]
                    labels[TOPOLOGY_LABEL + tier.name] = owner[name]
        return out


# ---------------------------------------------------------------------------------------- tenants


class ResourceQuota(Model):
    """Kubernetes ResourceQuota `spec.hard` (keys such as `requests.nvidia.com/gpu`, `limits.cpu`, `pods`)."""

    hard: dict[str, Quantity]


class LimitRangeItem(Model):
    type: Literal["Container", "Pod"] = "Container"
    default: ResourceList = {}
    default_request: ResourceList = {}
    max: ResourceList = {}
    min: ResourceList = {}

    @property
    def stored_default(self) -> dict:
        """A Container item's `default` (limits) as the API server stores it: a resource with a `max`
        and no `default` gets the max (``pkg/apis/core/v1/defaults.go: SetDefaults_LimitRangeItem``)."""
        return {**self.max, **self.default} if self.type == "Container" else dict(self.default)

    @property
    def stored_default_request(self) -> dict:
        """A Container item's `defaultRequest` as the API server stores it: else the stored `default`,
        else the `min` (same function): a `max` alone makes the max every container's default request."""
        if self.type != "Container":
            return dict(self.default_request)
        return {**self.min, **self.stored_default, **self.default_request}


class LimitRange(Model):
    limits: list[LimitRangeItem] = Field(min_length=1)


class Tenant(Model):
    """A team: its namespace, with the quota and defaults the namespace admission applies."""

    name: Namespace
    namespace: Namespace | None = None
    resource_quota: ResourceQuota | None = None
    limit_range: LimitRange | None = None

    @property
    def ns(self) -> str:
        return self.namespace or self.name


# ---------------------------------------------------------------------------------------- queues


class Queue(Model):
    """A Volcano Queue (`scheduling.volcano.sh/v1beta1`), spec fields as Volcano names them."""

    name: ObjectName
    weight: int = Field(default=1, ge=1, le=65535)
    capability: ResourceList = {}
    deserved: ResourceList = {}
    guarantee: ResourceList = {}
    reclaimable: bool = True
    priority: int = Field(default=0, ge=0, le=MAX_INT32)
    parent: str = "root"
    state: Literal["Open", "Closed"] = "Open"


class PriorityClass(Model):
    name: ObjectName
    value: int = Field(ge=-2147483648, le=1000000000)
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    global_default: bool = False
    description: str = ""


# ---------------------------------------------------------------------------------------- jobs


class Elastic(Model):
    """Elastic replica bounds of a task role: runs with any count in [min, max]."""

    min: int = Field(ge=1, le=MAX_PODS)
    max: int = Field(ge=1, le=MAX_PODS)

    @model_validator(mode="after")
    def _ordered(self) -> Elastic:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class NetworkTopology(Model):
    """Volcano `networkTopology`. hard: the gang is placed inside one HyperNode of tier <=
    highestTierAllowed, or not at all (tier 0 admits none); soft: the lowest tier that fits, else
    anywhere. Honoured under the network-topology-aware plugin, as Volcano does; ignored (with a
    warning) without it."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int = Field(default=1, ge=0)


class TopologyRequest(Model):
    """Kueue's PodSet `topologyRequest` (the pod template annotations
    `kueue.x-k8s.io/podset-required-topology`, `podset-preferred-topology`,
    `podset-unconstrained-topology`): `required`, all pods inside one domain of that level (a node
    label of the flavor's Topology) or the workload waits; `preferred`, that level, else each level
    above, else spread; `unconstrained`, anywhere with room. Honoured under Kueue."""

    required: str | None = Field(default=None, min_length=1)
    preferred: str | None = Field(default=None, min_length=1)
    unconstrained: bool | None = None

    @model_validator(mode="after")
    def _one(self) -> TopologyRequest:
        given = [key for key, value in (("required", self.required), ("preferred", self.preferred),
                                        ("unconstrained", self.unconstrained)) if value is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of required (a level), preferred (a level) or unconstrained: true"
                             + (f", not {' and '.join(given)}" if given else ""))
        if self.unconstrained is False:
            raise ValueError("unconstrained: false is no request; leave topologyRequest out")
        return self

    @property
    def level(self) -> str | None:
        """The level asked for (None: unconstrained)."""
        return self.required or self.preferred


Factor = Annotated[float, Field(gt=0, le=1000)]
"""A positive rate factor (a speed, a placement slowdown, a throughput)."""


def _count_key(value: Any) -> Any:
    """A pod count written as a mapping key: YAML gives an int, JSON (and `dump`) a string of digits."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


PodCount = Annotated[int, BeforeValidator(_count_key), Field(ge=1, le=MAX_PODS)]


class Scaling(Model):
    """An elastic job's throughput as a function of its running pods n, as a `table` (n -> throughput,
    linear between the points given) or a power law with a scaling `exponent` (throughput = n^exponent:
    1 = linear, 0.8 = each doubling gives 2^0.8 = 1.74x). The job progresses at
    throughput(n) / throughput(replicas): 1 with all its pods, less with fewer."""

    exponent: float | None = Field(default=None, gt=0, le=2)
    table: dict[PodCount, Factor] | None = None

    @model_validator(mode="after")
    def _one(self) -> Scaling:
        if (self.exponent is None) == (self.table is None):
            raise ValueError("give exactly one of exponent (throughput = n^exponent) or table (pods -> throughput)")
        if self.table is not None:
            if not self.table:
                raise ValueError("table is empty: give the throughput at some pod counts, e.g. {1: 1.0, 4: 3.4}")
            counts = sorted(self.table)
            for a, b in itertools.pairwise(counts):
                if self.table[b] < self.table[a]:
                    raise ValueError(f"table is not monotone: throughput {self.table[b]:g} at {b} pods is below "
                                     f"{self.table[a]:g} at {a}")
        return self

    def throughput(self, pods: int) -> float:
        """throughput(pods) (the table's points joined by straight lines; ValueError outside them)."""
        if self.exponent is not None:
            return float(pods) ** self.exponent
        counts = sorted(self.table or {})
        if not counts[0] <= pods <= counts[-1]:
            raise ValueError(f"the table covers {counts[0]} to {counts[-1]} pods, not {pods}")
        hi = next(c for c in counts if c >= pods)
        lo = max(c for c in counts if c <= pods)
        if hi == lo:
            return self.table[lo]
        return self.table[lo] + (self.table[hi] - self.table[lo]) * (pods - lo) / (hi - lo)


class WorkloadClass(Model):
    """A kind of training job (Gavel's job type) and how fast it progresses: `speeds`, its row of the
    speed matrix (GPU model -> throughput relative to 1; a model not given: 1); `placement`, the
    rate factor per topology level its gang spans (`node`: all pods on one node, a
    `cluster.topology` tier's name: inside one HyperNode of that tier, `cluster`: across the top
    tier; a level not given takes the level below's factor, `node` 1); `scaling`, its throughput
    curve over its running pods (none: the same rate with any number of pods)."""

    name: ObjectName
    speeds: dict[str, Factor] = {}
    placement: dict[str, Factor] = {}
    scaling: Scaling | None = None


class Task(Model):
    """A vcjob task (role): `replicas` identical pods with per-pod `resources` requests."""

    name: Namespace = "worker"
    replicas: int | None = Field(default=None, ge=1, le=MAX_PODS)
    min_available: int | None = Field(default=None, ge=0)
    resources: PodResources = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    elastic: Elastic | None = None
    topology_request: TopologyRequest | None = None
    """Kueue Topology Aware Scheduling for this task's pods (:class:`TopologyRequest`)."""

    @model_validator(mode="after")
    def _counts(self) -> Task:
        replicas = self.replicas_resolved
        if self.elastic and self.replicas is not None and self.replicas != self.elastic.max:
            raise ValueError(f"replicas ({self.replicas}) must equal elastic.max ({self.elastic.max}) or be left out")
        if self.min_available is not None and self.min_available > replicas:
            raise ValueError(f"minAvailable ({self.min_available}) must be <= replicas ({replicas})")
        return self

    @property
    def replicas_resolved(self) -> int:
        if self.replicas is not None:
            return self.replicas
        return self.elastic.max if self.elastic else 1

    @property
    def min_available_resolved(self) -> int:
        """Volcano's webhook default: task.minAvailable = replicas (elastic: its min)."""
        if self.min_available is not None:
            return self.min_available
        return self.elastic.min if self.elastic else self.replicas_resolved


class JobStatus(Model):
    """A snapshot of the job at its submit time, for one-session labs (`labkit cycle`):
    the PodGroup phase and, per task, the nodes its first replicas are Running on."""

    phase: Literal["Pending", "Inqueue", "Running"] = "Pending"
    running: dict[str, list[str]] = {}


class Job(Model):
    """A vcjob: tasks, gang minimum, queue, priority and the run-time model used by the simulator.

    Run time is `duration` (seconds on a speed-1 node) or `work` (the same, scaled by the slowest
    pool speed the job lands on). With a `workloadClass` (or a `placement` of its own, which
    overrides its class's), `work` or `duration` is what the job must get done at rate 1, and its
    rate while it runs is its class's GPU-model speed x placement factor x replica scaling
    (`WorkloadClass`), re-planned whenever its running pods change. Eviction loses the work since the last checkpoint; a restart costs
    `restartCost`; an evicted pod holds its resources for `gracePeriod` (terminationGracePeriodSeconds).
    For Slurm: `timeLimit` (sbatch -t, what backfill plans with; distinct from the real run time),
    `partition`, `qos`, `user` (default: the namespace) and `requeue` (sbatch --requeue / --no-requeue;
    default: slurm.conf JobRequeue): whether a node failure or a REQUEUE preemption puts the job
    back in the queue, or ends it.
    """

    name: ObjectName
    namespace: Namespace = "default"
    queue: str = "default"
    priority_class_name: str | None = None
    submit: Duration = 0
    tasks: list[Task] = Field(min_length=1)
    min_available: int | None = Field(default=None, ge=0)
    duration: PositiveDuration | None = None
    work: PositiveDuration | None = None
    checkpoint_interval: PositiveDuration | None = None
    restart_cost: Duration = 0
    grace_period: Duration = 30
    preemptible: bool = True
    network_topology: NetworkTopology | None = None
    workload_class: str | None = None
    placement: dict[str, Factor] = {}
    status: JobStatus | None = None
    time_limit: PositiveDuration | None = None
    partition: str | None = None
    qos: str | None = None
    user: str | None = None
    requeue: bool | None = None

    @model_validator(mode="after")
    def _shape(self) -> Job:
        if (self.duration is None) == (self.work is None):
            raise ValueError("give exactly one of duration (seconds of run time) or work (scaled by node speed)")
        names = [t.name for t in self.tasks]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"task name {name!r} is used twice")
        total = sum(t.replicas_resolved for t in self.tasks)
        if self.min_available is not None and self.min_available > total:
            raise ValueError(f"minAvailable ({self.min_available}) must be <= the job's {total} pods")
        if self.status is not None:
            replicas = {t.name: t.replicas_resolved for t in self.tasks}
            for role, nodes in self.status.running.items():
                if role not in replicas:
                    raise ValueError(f"status.running names task {role!r}, which the job does not have")
                if len(nodes) > replicas[role]:
                    raise ValueError(f"status.running.{role} lists {len(nodes)} nodes for {replicas[role]} replicas")
            if self.status.running and self.status.phase == "Pending":
                raise ValueError("status.phase Pending cannot have running pods (pods exist only after enqueue)")
        return self

    @property
    def min_available_resolved(self) -> int:
        """Volcano's webhook default: job.minAvailable = sum of task minAvailable."""
        if self.min_available is not None:
            return self.min_available
        return sum(t.min_available_resolved for t in self.tasks)


# ---------------------------------------------------------------------------------------- workloads


_DISTRIBUTION_PARAMETERS = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
    "normal": ("mean", "std"),
    "choice": ("choices",),
}


class Distribution(Model):
    """A random quantity: constant, uniform, exponential, lognormal (median, sigma), normal or choice."""

    distribution: Literal["constant", "uniform", "exponential", "lognormal", "normal", "choice"]
    value: Duration | None = None
    low: Duration | None = None
    high: Duration | None = None
    mean: PositiveDuration | None = None
    median: PositiveDuration | None = None
    sigma: float | None = Field(default=None, ge=0, le=10)
    std: Duration | None = None
    choices: list[Duration] | None = None
    weights: list[float] | None = None
    min: Duration | None = None
    max: Duration | None = None

    @model_validator(mode="after")
    def _complete(self) -> Distribution:
        for name in _DISTRIBUTION_PARAMETERS[self.distribution]:
            if getattr(self, name) is None:
                raise ValueError(f"a {self.distribution} distribution needs {name!r}")
        if self.distribution == "uniform" and parse_duration(self.low) > parse_duration(self.high):
            raise ValueError("low must be <= high")
        if self.choices is not None and not self.choices:
            raise ValueError("choices must not be empty")
        if self.weights is not None:
            if self.choices is None or len(self.weights) != len(self.choices):
                raise ValueError("weights needs one weight per choice")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights must be >= 0 and not all 0")
        return self


def _random(value: Any) -> Any:
    """A number/duration, or a mapping read as a Distribution (one clear error either way)."""
    if isinstance(value, (Distribution, dict)):
        if isinstance(value, Distribution):
            return value
        try:
            return Distribution.model_validate(value)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{where}: {first['msg']}" if where else first["msg"]) from None
    parse_duration(value)
    return non_negative_duration(value)


Random = Annotated[Any, PlainValidator(_random)]


class Arrival(Model):
    """Arrival process: `poisson` (exponential gaps of mean `interval`) or `fixed` (every `interval`)."""

    process: Literal["poisson", "fixed"] = "poisson"
    interval: PositiveDuration


class Trace(Model):
    """Recorded jobs as columns, one entry per job: `names`, `submit` (seconds), `gpus` and
    `duration` (seconds of run time). A trace of thousands of jobs is four lists, not thousands
    of job objects: it is read, checked and compiled as arrays."""

    names: list[ObjectName]
    submit: list[Annotated[float, Field(ge=0, le=MAX_SECONDS)]]
    gpus: list[Annotated[int, Field(ge=0, le=MAX_PODS * 1000)]]
    duration: list[Annotated[float, Field(gt=0, le=MAX_SECONDS)]]

    @model_validator(mode="after")
    def _columns(self) -> Trace:
        n = len(self.names)
        for column in ("submit", "gpus", "duration"):
            if len(getattr(self, column)) != n:
                raise ValueError(f"{column} has {len(getattr(self, column))} entries for {n} names")
        seen: set[str] = set()
        for name in self.names:
            if name in seen:
                raise ValueError(f"job name {name!r} is used twice")
            seen.add(name)
        return self


class Workload(Model):
    """A generator of jobs, e.g. "team B submits a fine-tuning job every 5 minutes on average",
    or the jobs of a recorded `trace`.

    Each job asks for `gpus` GPUs (a random quantity), split into pods of at most `gpusPerPod`
    (multi-node jobs become gangs of whole-node pods); each pod requests `resources` plus `perGpu`
    for every GPU it holds. A job with 0 GPUs is one pod with `resources` only (CPU work). With
    `trace`, the jobs' names, submit times, GPUs and run times are the trace's (no `arrival`,
    `start`, `end`, `count`, `gpus`, `duration` or `seed`); pods are shaped the same way. With a
    `workloadClass`, its jobs progress by the job progress model (`Job`, `WorkloadClass`).
    """

    name: Namespace
    namespace: Namespace = "default"
    queue: str = "default"
    priority_class_name: str | None = None
    arrival: Arrival | None = None
    start: Duration = 0
    end: PositiveDuration | None = None
    count: int | None = Field(default=None, ge=1, le=MAX_JOBS)
    gpus: Random = 0
    gpus_per_pod: int = Field(default=8, ge=1, le=MAX_PODS)
    gpu_resource: str = "nvidia.com/gpu"
    resources: PodResources = {}
    per_gpu: ResourceList = {}
    duration: Random | None = None
    trace: Trace | None = None
    checkpoint_interval: PositiveDuration | None = None
    restart_cost: Duration = 0
    grace_period: Duration = 30
    preemptible: bool = True
    network_topology: NetworkTopology | None = None
    workload_class: str | None = None
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)

    @model_validator(mode="after")
    def _bounded(self) -> Workload:
        if self.trace is not None:
            drawn = sorted(self.model_fields_set & {"arrival", "start", "end", "count", "gpus", "duration", "seed"})
            if drawn:
                raise ValueError(f"a trace workload takes its jobs from the trace: drop {', '.join(drawn)}")
            return self
        for needed in ("arrival", "duration"):
            if getattr(self, needed) is None:
                raise ValueError(f"give {needed} (or a trace)")
        if self.end is None and self.count is None:
            raise ValueError("give end (a time) or count (a number of jobs), or both")
        if self.end is not None and parse_duration(self.end) <= parse_duration(self.start):
            raise ValueError("end must be after start")
        return self

    def pod_shape(self, gpus: int) -> tuple[int, dict[str, float]]:
        """(replicas, per-pod requests in base units) for a job of `gpus` GPUs.

        Up to `gpusPerPod` GPUs make one pod; more are split into equal pods, rounded up.
        """
        replicas = max(1, -(-gpus // self.gpus_per_pod))
        per_pod = -(-gpus // replicas)
        pod = {name: parse_quantity(v) for name, v in self.resources.items()}
        for name, amount in self.per_gpu.items():
            pod[name] = pod.get(name, 0.0) + parse_quantity(amount) * per_pod
        if per_pod:
            pod[self.gpu_resource] = pod.get(self.gpu_resource, 0.0) + per_pod
        return replicas, pod


# ---------------------------------------------------------------------------------------- slurm


PreemptMode = Literal["OFF", "CANCEL", "REQUEUE", "SUSPEND"]

SLURM_TRES = ("cpu", "mem", "node", "gres/gpu")
"""The TRES a QOS limit or PriorityWeightTRES may name (mem in MB, as Slurm counts it)."""


def _tres_names(value: dict[str, Any]) -> dict[str, Any]:
    for name in value:
        if name not in SLURM_TRES:
            raise ValueError(f"{name!r} is not a TRES; Slurm names them {', '.join(SLURM_TRES)}")
    return value


TresList = Annotated[dict[str, Quantity], AfterValidator(_tres_names)]


class SlurmPartition(Model):
    """A slurm.conf PartitionName line: its node pools, tier, preemption mode (unset: the cluster's
    PreemptMode), GraceTime and limits."""

    name: Namespace
    pools: list[str] | None = None
    default: bool = False
    priority_tier: int = Field(default=1, ge=0, le=65533)
    priority_job_factor: int = Field(default=1, ge=0, le=65533)
    preempt_mode: PreemptMode | None = None
    grace_time: Duration = 0
    max_time: PositiveDuration | None = None
    max_nodes: int | None = Field(default=None, ge=1)


class SlurmQos(Model):
    """A QOS (sacctmgr): priority, which QOS it may preempt, its PreemptMode (unset: the cluster's),
    GraceTime and TRES limits (`gres/gpu=8,cpu=64`)."""

    name: Namespace
    priority: int = Field(default=0, ge=0, le=MAX_UINT32)
    preempt: list[str] = []
    preempt_mode: PreemptMode | None = None
    grace_time: Duration = 0
    grp_tres: TresList = Field(default={}, alias="grpTRES")
    max_tres_per_user: TresList = Field(default={}, alias="maxTRESPerUser")


class SlurmAccount(Model):
    """An account association (sacctmgr add account): its parent and FairShare (raw shares, or `parent`)."""

    name: Namespace
    parent: str = "root"
    fairshare: int | Literal["parent"] = 1

    @field_validator("fairshare")
    @classmethod
    def _shares(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError("must be >= 0 or 'parent'")
        return value


class SlurmUser(SlurmAccount):
    """A user association (sacctmgr add user): the account it charges (`parent`) and its FairShare."""


class SlurmCluster(Model):
    """The Slurm side of the cluster: partitions over node pools, QOS, and the association tree
    (accounts and users) fair-share ranks. A job's user is `user` (default: its namespace); a user
    not listed is a user of account root with FairShare=1."""

    partitions: list[SlurmPartition] = []
    qos: list[SlurmQos] = []
    accounts: list[SlurmAccount] = []
    users: list[SlurmUser] = []


class SlurmConf(BaseModel):
    """slurm.conf scheduling keys, spelled as slurm.conf spells them (`SchedulerType`, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_pascal,
                              strict=True, allow_inf_nan=False)
    scheduler_type: Literal["sched/backfill", "sched/builtin"] = "sched/backfill"
    scheduler_parameters: str = ""
    priority_type: Literal["priority/basic", "priority/multifactor"] = "priority/multifactor"
    priority_weight_age: int = Field(default=0, ge=0, le=MAX_UINT32)
    priority_weight_fairshare: int = Field(default=0, ge=0, le=MAX_UINT32)
    priority_weight_job_size: int = Field(default=0, ge=0, le=MAX_UINT32)
    priority_weight_partition: int = Field(default=0, ge=0, le=MAX_UINT32)
    priority_weight_q_o_s: int = Field(default=0, ge=0, le=MAX_UINT32, alias="PriorityWeightQOS")
    priority_weight_t_r_e_s: str = Field(default="", alias="PriorityWeightTRES")
    priority_decay_half_life: Duration = "7d"
    priority_max_age: Duration = "7d"
    priority_favor_small: bool = False
    priority_flags: str = ""
    priority_calc_period: PositiveDuration = "5m"
    fair_share_dampening_factor: int = Field(default=1, ge=1)
    preempt_type: Literal["preempt/none", "preempt/partition_prio", "preempt/qos"] = "preempt/none"
    preempt_mode: PreemptMode = "OFF"
    job_requeue: int = Field(default=1, ge=0, le=1)
    accounting_storage_type: Literal["accounting_storage/none", "accounting_storage/slurmdbd"] = \
        "accounting_storage/none"
    accounting_storage_enforce: str = ""

    @field_validator("priority_flags")
    @classmethod
    def _flags(cls, value: str) -> str:
        for flag in _items(value):
            if flag not in PRIORITY_FLAGS:
                raise ValueError(f"{flag!r} is not simulated; PriorityFlags known here: {', '.join(PRIORITY_FLAGS)}")
        return value

    @field_validator("priority_weight_t_r_e_s")
    @classmethod
    def _tres_weights(cls, value: str) -> str:
        for item in _items(value):
            key, _, number = item.partition("=")
            if key.lower() not in SLURM_TRES or not _WHOLE.match(number) or int(number) > MAX_UINT32:
                raise ValueError(f"{item!r}: expected TRES=weight with TRES one of {', '.join(SLURM_TRES)}")
        return value

    @field_validator("accounting_storage_enforce")
    @classmethod
    def _enforce(cls, value: str) -> str:
        for item in _items(value):
            if item not in ("associations", "limits", "qos", "safe", "nojobs", "nosteps", "wckeys"):
                raise ValueError(f"{item!r} is not an AccountingStorageEnforce option")
        return value

    @field_validator("scheduler_parameters")
    @classmethod
    def _parameters(cls, value: str) -> str:
        for item in _items(value):
            key, _, number = item.partition("=")
            if number and not _WHOLE.match(number):
                raise ValueError(f"{key}={number!r}: expected a whole number")
            if key in SCHEDULER_PARAMETER_RANGES and number:
                low, high, *allowed = SCHEDULER_PARAMETER_RANGES[key]
                if not (low <= int(number) <= high or int(number) in allowed):
                    also = f" or {allowed[0]}" if allowed else ""
                    raise ValueError(f"{key}={number}: Slurm accepts {low}..{high}{also} (else it logs "
                                     f"'Invalid SchedulerParameters {key}' and uses its default)")
        return value

    @field_validator("priority_calc_period")
    @classmethod
    def _calc_period(cls, value: str | float) -> str | float:
        if parse_duration(value) < 1:
            raise ValueError("must be at least 1s (slurm.conf gives it in whole minutes; labkit allows "
                             "seconds for fine-grained labs, not a recalculation every nanosecond)")
        return value

    def parameters(self) -> dict[str, int | bool]:
        """SchedulerParameters as a dict: `bf_interval=5,bf_continue` -> {bf_interval: 5, bf_continue: True}."""
        out: dict[str, int | bool] = {}
        for item in _items(self.scheduler_parameters):
            key, _, number = item.partition("=")
            out[key] = int(number) if number else True
        return out

    def flags(self) -> set[str]:
        return set(_items(self.priority_flags))

    def tres_weights(self) -> dict[str, int]:
        """PriorityWeightTRES as {TRES: weight}: `CPU=1000,GRES/gpu=3000` -> {cpu: 1000, gres/gpu: 3000}."""
        return {k.lower(): int(v) for k, _, v in (item.partition("=") for item in _items(self.priority_weight_t_r_e_s))}

    @property
    def slurmdbd(self) -> bool:
        """Age, fair-share, QOS and association limits need slurmdbd ("... can only be used with SlurmDBD")."""
        return self.accounting_storage_type == "accounting_storage/slurmdbd"

    def enforces_limits(self) -> bool:
        return self.slurmdbd and bool({"limits", "qos", "safe"} & set(_items(self.accounting_storage_enforce)))


_WHOLE = re.compile(r"^-?[0-9]{1,10}$")
# SchedulerParameters the simulator reads, with the range Slurm's backfill.c / sched plugin accept
# (`_load_config`: bf_interval -1 or 1..MAX_BACKFILL_INTERVAL (10800), bf_resolution 1..3600,
# bf_window 1..43200 minutes, bf_max_job_test 1..1,000,000); sched_interval is in seconds, >= 1.
SCHEDULER_PARAMETER_RANGES = {
    "bf_interval": (1, 10800, -1), "bf_resolution": (1, 3600), "bf_window": (1, 43200),
    "bf_max_job_test": (1, 1_000_000), "sched_interval": (1, 86400),
}

PRIORITY_FLAGS = ("ACCRUE_ALWAYS", "NO_FAIR_TREE", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES",
                  "SMALL_RELATIVE_TO_TIME")


def _items(text: str) -> list[str]:
    """A slurm.conf comma list, blanks dropped."""
    return [p.strip() for p in text.split(",") if p.strip()]


# ---------------------------------------------------------------------------------------- scheduler

# The YAML switch of each Volcano extension point (`pkg/scheduler/conf/scheduler_conf.go`) and the
# value it takes when a conf file leaves it out (`pkg/scheduler/plugins/defaults.go`).
EXTENSION_POINTS: dict[str, tuple[str, bool]] = {
    "jobOrder": ("enableJobOrder", True),
    "hierarchy": ("enableHierarchy", False),
    "jobReady": ("enableJobReady", True),
    "jobPipelined": ("enableJobPipelined", True),
    "taskOrder": ("enableTaskOrder", True),
    "preemptable": ("enablePreemptable", True),
    "reclaimable": ("enableReclaimable", True),
    "preemptive": ("enablePreemptive", True),
    "queueOrder": ("enableQueueOrder", True),
    "clusterOrder": ("enabledClusterOrder", False),
    "predicate": ("enablePredicate", True),
    "bestNode": ("enableBestNode", True),
    "nodeOrder": ("enableNodeOrder", True),
    "targetJob": ("enableTargetJob", True),
    "reservedNodes": ("enableReservedNodes", True),
    "jobEnqueued": ("enableJobEnqueued", True),
    "victim": ("enabledVictim", True),
    "jobStarving": ("enableJobStarving", True),
    "overused": ("enabledOverused", True),
    "allocatable": ("enabledAllocatable", True),
    "hyperNodeOrder": ("enabledHyperNodeOrder", True),
    "subJobReady": ("enabledSubJobReady", True),
    "subJobPipelined": ("enabledSubJobPipelined", True),
    "subJobOrder": ("enabledSubJobOrder", True),
    "hyperNodeGradient": ("enabledHyperNodeGradient", True),
}

# Plugin and action names registered by Volcano v1.15 (`pkg/scheduler/plugins/factory.go`,
# `pkg/scheduler/actions/factory.go`).
VOLCANO_PLUGINS = (
    "priority", "gang", "conformance", "drf", "proportion", "capacity", "predicates", "nodeorder", "binpack",
    "overcommit", "sla", "network-topology-aware", "task-topology", "tdm", "deviceshare", "numa-aware", "cdp",
    "rescheduling", "usage", "pdb", "nodegroup", "extender", "resourcequota", "resource-strategy-fit",
)
_NUMERIC_ARGUMENTS = {
    "binpack.weight": 0.0, "binpack.cpu": 0.0, "binpack.memory": 0.0, "leastrequested.weight": 0.0,
    "mostrequested.weight": 0.0, "balancedresource.weight": 0.0, "overcommit-factor": 1.0,
    "ancestorReclaimLevel": 0.0,
}
"""Plugin arguments read as numbers, and the least each may be."""
VOLCANO_ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle", "gangpreempt", "gangreclaim")

PluginSwitches = create_model(
    "PluginSwitches",
    __config__=ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False),
    **{switch: (bool | None, None) for switch, _ in EXTENSION_POINTS.values()},
)


class PluginOption(PluginSwitches):  # type: ignore[misc, valid-type]
    """One plugin of a tier, with Volcano's `enable*` switches (unset = Volcano's default) and arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in VOLCANO_PLUGINS:
            raise ValueError(f"unknown plugin {value!r}; Volcano plugins are {', '.join(VOLCANO_PLUGINS)}")
        return value

    @field_validator("arguments")
    @classmethod
    def _numbers(cls, value: dict[str, Any]) -> dict[str, Any]:
        """The arguments the simulator reads as numbers must be finite numbers >= their minimum
        (Volcano's overcommit plugin ignores a factor below 1.0 and falls back to 1.2)."""
        for key, given in value.items():
            low = _NUMERIC_ARGUMENTS.get(key, 0.0 if key.startswith("binpack.resources.") else None)
            if key == "sla-waiting-time":
                positive_duration(given)
            elif low is not None:
                try:
                    number = parse_quantity(given)  # strict: no bool, nan, inf or full-width digits
                except ValueError as err:
                    raise ValueError(f"{key}: {err}") from None
                if number < low:
                    raise ValueError(f"{key}: must be >= {low:g}")
        return value

    def enabled(self) -> frozenset[str]:
        """The extension points this plugin registers, with Volcano's defaults applied."""
        on = set()
        for point, (switch, default) in EXTENSION_POINTS.items():
            value = getattr(self, switch)
            if default if value is None else value:
                on.add(point)
        return frozenset(on)


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    plugins: list[PluginOption] = Field(min_length=1)


class ActionConfiguration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    name: str
    arguments: dict[str, Any] = {}


class SchedulerConf(BaseModel):
    """`volcano-scheduler.conf` as Volcano reads it: `actions` (comma list), `tiers`, `configurations`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    actions: str
    tiers: list[Tier] = Field(min_length=1)
    configurations: list[ActionConfiguration] = []
    metrics: dict[str, Any] = {}

    @field_validator("actions")
    @classmethod
    def _known_actions(cls, value: str) -> str:
        names = [a.strip() for a in value.split(",")]
        for name in names:
            if name not in VOLCANO_ACTIONS:
                raise ValueError(f"unknown action {name!r}; Volcano actions are {', '.join(VOLCANO_ACTIONS)}")
        return value

    @model_validator(mode="after")
    def _volcano_rules(self) -> SchedulerConf:
        for tier in self.tiers:
            names = {p.name for p in tier.plugins}
            hdrf = any(p.name == "drf" and "hierarchy" in p.enabled() for p in tier.plugins)
            if hdrf and "proportion" in names:
                raise ValueError("drf with enableHierarchy and proportion cannot be in the same tier (Volcano rejects it)")
        for conf in self.configurations:
            if conf.name not in self.action_list():
                raise ValueError(f"configurations names action {conf.name!r}, which is not in actions")
        return self

    def action_list(self) -> list[str]:
        return [a.strip() for a in self.actions.split(",")]


def _conf_text(value: Any) -> Any:
    """Accept the conf as the ConfigMap holds it: one YAML string (`volcano-scheduler.conf: |`)."""
    if isinstance(value, str):
        try:
            return parse_yaml(value, "conf")
        except SpecError as err:
            raise ValueError(err.message) from None
    return value


class Scheduler(Model):
    """The policy: a named preset (`labkit presets`), Volcano's own conf, slurm.conf's scheduling
    keys (`slurm`), Kueue's Configuration (`kueue`) or a KubeSchedulerConfiguration (`kube`); an
    explicit section wins over the preset name, which is then a label."""

    policy: str | None = None
    conf: Annotated[SchedulerConf | None, BeforeValidator(_conf_text)] = None
    slurm: SlurmConf | None = None
    kueue: KueueConfiguration | None = None
    kube: KubeSchedulerConfiguration | None = None
    schedule_period: PositiveDuration = 1

    @field_validator("schedule_period")
    @classmethod
    def _period(cls, value: str | float) -> str | float:
        if parse_duration(value) < MIN_SCHEDULE_PERIOD:
            raise ValueError(f"must be at least {MIN_SCHEDULE_PERIOD:g}s")
        return value
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] | None = None
    """How allocate treats a queue's first job that cannot be placed: BestEffortFIFO (Volcano's
    allocate: skip it, try the jobs behind it) or StrictFIFO (the queue stops there for the rest
    of the session: head-of-line blocking, Kueue's name for it). Volcano confs only; None = the
    named policy's, else BestEffortFIFO."""

    @model_validator(mode="after")
    def _one_section(self) -> Scheduler:
        given = [name for name in ("conf", "slurm", "kueue", "kube") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of conf, slurm, kueue or kube, not {' and '.join(given)}")
        if self.queueing_strategy == "StrictFIFO" and given and given[0] != "conf":
            raise ValueError(f"queueingStrategy applies to a Volcano conf, not to {given[0]} "
                             "(Kueue sets it per ClusterQueue; Slurm's sched/builtin is strict already)")
        return self

    @property
    def section(self) -> str | None:
        """Which scheduler section is given (`conf`, `slurm`, `kueue`, `kube`), None for a bare policy name."""
        return next((name for name in ("conf", "slurm", "kueue", "kube") if getattr(self, name) is not None), None)


# ---------------------------------------------------------------------------------------- changes


class QueueChange(Model):
    """The Queue fields a change sets (the others keep their value)."""

    name: ObjectName
    weight: int | None = Field(default=None, ge=1, le=65535)
    capability: ResourceList | None = None
    deserved: ResourceList | None = None
    guarantee: ResourceList | None = None


class PriorityClassChange(Model):
    name: ObjectName
    value: int = Field(ge=-2147483648, le=1000000000)


class Change(Model):
    """A `kubectl apply` at time `at`: one Queue's fields (`queue`), a PriorityClass's value
    (`priorityClass`) or the scheduler's conf (`scheduler`: a Volcano policy name or conf, as the
    ConfigMap's new content). It takes effect at the first session at or after `at` (the events of
    an instant come before its session): Volcano snapshots
    Queues and PriorityClasses from its informers each session, and its file watcher reloads
    volcano-scheduler.conf on a write, each session then running the actions and plugins loaded
    last (pkg/scheduler/scheduler.go: watchSchedulerConf, runOnce). A PriorityClass's new value
    is every PodGroup's priority from then on and the priority of the pods created after it (a
    pod's spec.priority is set once, at its creation)."""

    at: Duration
    queue: QueueChange | None = None
    priority_class: PriorityClassChange | None = None
    scheduler: Scheduler | None = None

    @model_validator(mode="after")
    def _one(self) -> Change:
        given = [name for name in ("queue", "priorityClass", "scheduler")
                 if getattr(self, "priority_class" if name == "priorityClass" else name) is not None]
        if len(given) != 1:
            raise ValueError(f"give one of queue, priorityClass or scheduler, not {' and '.join(given) or 'none'}")
        return self

    @property
    def what(self) -> str:
        return "queue" if self.queue else "priorityClass" if self.priority_class else "scheduler"


# ---------------------------------------------------------------------------------------- scenario


class Scenario(Model):
    """Everything one lab runs: build it in Python or load it with `labkit.load`."""

    name: str = "scenario"
    description: str = ""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    horizon: PositiveDuration | None = None
    cluster: Cluster
    tenants: list[Tenant] = []
    queues: list[Queue] = []
    priority_classes: list[PriorityClass] = []
    workload_classes: list[WorkloadClass] = []
    """The job progress model's classes (`WorkloadClass`), named by `jobs[].workloadClass`."""
    jobs: list[Job] = []
    workloads: list[Workload] = []
    slurm: SlurmCluster | None = None
    kueue: Kueue | None = None
    scheduler: Scheduler = Scheduler(policy="volcano-shipped")
    changes: list[Change] = []
    """Queues, PriorityClasses and the scheduler conf changed in time (:class:`Change`)."""
