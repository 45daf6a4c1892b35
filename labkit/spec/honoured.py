"""What each policy family does with every field of the scenario model: honoured, refused or
warned about. One table (`TABLE`), read beside `model.py`, so that no field the engine does not
honour under the scenario's policy is dropped without a word.

* honoured: the family's engine reads the field as the real scheduler would (or the real
  scheduler does nothing with it either and nothing depends on it, e.g. a Volcano HyperNode tier
  no job asks for);
* warned: the engine ignores the field, as the real scheduler under that policy would (a Slurm
  partition under Volcano, a Volcano Queue under Slurm), or does not simulate it yet where the
  real one would act on it: one `labkit: note:` line per
  reason, naming the first path of each field that sets it
  (`labkit: note: jobs[3].networkTopology: Volcano's; Slurm ignores it`);
* refused: the field cannot take effect under the family at all: a one-line `SpecError` naming
  it. A scheduler section of another family is one (the model refuses two sections, and
  `--policy` replaces the section, so `simulate` meets it only when a caller names the family);
  `queueingStrategy: StrictFIFO` under another family is refused by the model itself.

Paths are YAML paths with `[]` for a list item (`jobs[].tasks[].elastic`). A key ending in
`.**` decides a whole subtree: a scheduler's own configuration and a family's own objects
(top-level `slurm`, `kueue`), which that family reads as a whole (each key checked by its model). A field set to its default is honoured
by every family: nothing was asked of the engine.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ..errors import LabkitWarning, SpecError
from .model import SCHEDULER_PARAMETER_RANGES

FAMILIES = ("volcano", "kube-scheduler", "kueue", "slurm")
"""The policy families, as `labkit.engine.families` names their engines."""


@dataclass(frozen=True)
class Decision:
    kind: Literal["honoured", "warned", "refused"]
    says: str = ""
    """What the user reads after the field's path (warned and refused)."""


H = Decision("honoured")


def W(says: str) -> Decision:
    return Decision("warned", says)


def R(says: str) -> Decision:
    return Decision("refused", says)


def _every(decision: Decision) -> tuple[Decision, ...]:
    return (decision,) * len(FAMILIES)


def _only(family: str, elsewhere: Decision | dict[str, Decision]) -> tuple[Decision, ...]:
    """Honoured by `family`; elsewhere the decision given (or per family, from a dict)."""
    return tuple(H if f == family else (elsewhere[f] if isinstance(elsewhere, dict) else elsewhere)
                 for f in FAMILIES)


def _by(decisions: dict[str, Decision]) -> tuple[Decision, ...]:
    """One decision per family, from a dict (a family it leaves out honours the field)."""
    return tuple(decisions.get(f, H) for f in FAMILIES)


ALL = _every(H)

_NOT_SLURM = {f: W(f"Slurm's (sbatch); {f} has no such notion and ignores it")
              for f in FAMILIES if f != "slurm"}
_VOLCANO_QUEUE = {
    "kube-scheduler": W("Volcano Queues; kube-scheduler has none and ignores them"),
    "kueue": W("Volcano Queues; Kueue admits through its ClusterQueues (kueue.clusterQueues) and ignores them"),
    "slurm": W("Volcano Queues; Slurm has none (its partitions and QOS: slurm.partitions, slurm.qos) and ignores "
               "them"),
}
_JOB_QUEUE = {**_VOLCANO_QUEUE, "kueue": H}  # under Kueue a job's queue is its LocalQueue
_PRIORITY_CLASS = {
    "slurm": W("Kubernetes PriorityClasses; Slurm orders jobs by its multifactor priority (partition, QOS, "
               "fair-share, age) and ignores them"),
}
_GANG = {"slurm": W("Volcano's gang minimum (minAvailable, elastic bounds); Slurm allocates all of a job's nodes "
                    "(its replicas) at once and ignores it")}
_NETWORK_TOPOLOGY = {
    "volcano": H,  # the reference engine keeps a hard gang inside one HyperNode; without the plugin the
    # Volcano family warns, as Volcano ignores it (engine/volcano/reference.py: _topology_notes)
    "kube-scheduler": W("Volcano's; kube-scheduler ignores it"),
    "kueue": W("Volcano's; Kueue ignores it (its Topology Aware Scheduling reads a task's topologyRequest)"),
    "slurm": W("Volcano's; Slurm ignores it"),
}
_TOPOLOGY_REQUEST = {
    "volcano": W("Kueue's (Topology Aware Scheduling); Volcano ignores it (its own is the job's networkTopology)"),
    "kube-scheduler": W("Kueue's (Topology Aware Scheduling); kube-scheduler ignores it"),
    "slurm": W("Kueue's (Topology Aware Scheduling); Slurm ignores it"),
}
_NODE_EVENTS = ALL
"""Node events: `cluster.events` and the interruptions a spot pool draws, each family as its
scheduler meets them (Slurm: DOWN and DRAIN, engine/slurm/reference.py); a Volcano conf without the
predicates plugin, or Kueue with waitForPodsReady, is refused when the scenario is compiled."""
_CHANGES = _only("volcano", R("changes in time: this policy family's engines do not simulate them"))
"""Queues, PriorityClasses and the conf changed in time: both Volcano engines apply them."""
_HYPERNODES = {
    "volcano": H,  # HyperNodes for the network-topology-aware plugin (jobs with networkTopology)
    "kube-scheduler": W("Volcano HyperNodes; kube-scheduler does not place pods by them (the job progress "
                        "model's placement factors still read their tiers)"),
    "kueue": H,  # the tiers label the nodes (topology.labkit.io/<tier>), which a Kueue Topology's levels name
    "slurm": W("not simulated under Slurm (topology/tree placement): nodes are chosen as if there were no "
               "switches (the job progress model's placement factors still read their tiers)"),
}


def _section(family: str) -> tuple[Decision, ...]:
    """A scheduler section is read by its own family; under another it cannot be given (a section
    chooses its family; `--policy` replaces it)."""
    return _only(family, R(f"the {family} configuration; a scenario under another policy cannot use it"))


def _rows(prefix: str, names: str, decisions: tuple[Decision, ...]) -> dict[str, tuple[Decision, ...]]:
    return {f"{prefix}{name}": decisions for name in names.split()}


_DISTRIBUTION = "distribution value low high mean median sigma std choices weights min max"

TABLE: dict[str, tuple[Decision, ...]] = {
    # scenario
    **_rows("", "name description seed horizon cluster tenants jobs workloads scheduler", ALL),
    "changes": _CHANGES,
    **_rows("changes[].", "at queue priorityClass scheduler", _CHANGES),
    **_rows("changes[].queue.", "name weight capability deserved guarantee", _CHANGES),
    **_rows("changes[].priorityClass.", "name value", _CHANGES),
    "changes[].scheduler.**": _CHANGES,
    "workloadClasses": ALL,
    **_rows("workloadClasses[].", "name speeds placement scaling scaling.exponent scaling.table", ALL),
    "queues": _only("volcano", _VOLCANO_QUEUE),
    "priorityClasses": _by(_PRIORITY_CLASS),
    "slurm": _only("slurm", W("Slurm's (partitions, QOS, associations); this policy ignores it")),
    "kueue": _only("kueue", W("Kueue's (ClusterQueues, LocalQueues); this policy ignores it")),
    "slurm.**": _only("slurm", W("Slurm's; this policy ignores it")),
    "kueue.**": _only("kueue", W("Kueue's; this policy ignores it")),
    # cluster
    "cluster.pools": ALL,
    **_rows("cluster.pools[].", "name count resources labels taints speed price", ALL),
    "cluster.pools[].spot": _NODE_EVENTS,
    **_rows("cluster.pools[].spot.", "rate per notice replaceAfter until seed", _NODE_EVENTS),
    **_rows("cluster.pools[].taints[].", "key value effect", ALL),
    "cluster.pools[].gpuModel": ALL,
    "cluster.topology": _by(_HYPERNODES),
    "cluster.topology.tiers": _by(_HYPERNODES),
    **_rows("cluster.topology.tiers[].", "name size", _by(_HYPERNODES)),
    "cluster.events": _NODE_EVENTS,
    **_rows("cluster.events[].", "at node kind notice", _NODE_EVENTS),
    # tenants
    **_rows("tenants[].", "name namespace resourceQuota limitRange", ALL),
    "tenants[].resourceQuota.hard": ALL,
    "tenants[].limitRange.limits": ALL,
    **_rows("tenants[].limitRange.limits[].", "type default defaultRequest max min", ALL),
    # Volcano queues and PriorityClasses
    **_rows("queues[].", "name weight capability deserved guarantee reclaimable priority parent state",
            _only("volcano", _VOLCANO_QUEUE)),
    **_rows("priorityClasses[].", "name value preemptionPolicy globalDefault description",
            _by(_PRIORITY_CLASS)),
    # jobs
    **_rows("jobs[].", "name namespace submit tasks duration work checkpointInterval restartCost gracePeriod "
            "preemptible status", ALL),
    "jobs[].minAvailable": _by(_GANG),
    "jobs[].queue": _by(_JOB_QUEUE),
    "jobs[].priorityClassName": _by(_PRIORITY_CLASS),
    **_rows("jobs[].", "networkTopology networkTopology.mode networkTopology.highestTierAllowed",
            _by(_NETWORK_TOPOLOGY)),
    **_rows("jobs[].", "timeLimit partition qos user requeue", _only("slurm", _NOT_SLURM)),
    **_rows("jobs[].", "workloadClass placement", ALL),
    **_rows("jobs[].tasks[].", "name replicas resources nodeSelector tolerations", ALL),
    **_rows("jobs[].tasks[].", "minAvailable elastic", _by(_GANG)),
    **_rows("jobs[].tasks[].tolerations[].", "key operator value effect", ALL),
    **_rows("jobs[].tasks[].elastic.", "min max", _by(_GANG)),
    "jobs[].tasks[].topologyRequest": _by(_TOPOLOGY_REQUEST),
    **_rows("jobs[].tasks[].topologyRequest.", "required preferred unconstrained", _by(_TOPOLOGY_REQUEST)),
    **_rows("jobs[].status.", "phase running", ALL),
    # workloads
    **_rows("workloads[].", "name namespace arrival start end count gpus gpusPerPod gpuResource resources perGpu "
            "duration trace checkpointInterval restartCost gracePeriod preemptible seed", ALL),
    "workloads[].queue": _by(_JOB_QUEUE),
    "workloads[].workloadClass": ALL,
    "workloads[].priorityClassName": _by(_PRIORITY_CLASS),
    **_rows("workloads[].", "networkTopology networkTopology.mode networkTopology.highestTierAllowed",
            _by(_NETWORK_TOPOLOGY)),
    **_rows("workloads[].arrival.", "process interval", ALL),
    **_rows("workloads[].gpus.", _DISTRIBUTION, ALL),  # a random quantity: a Distribution
    **_rows("workloads[].duration.", _DISTRIBUTION, ALL),
    **_rows("workloads[].trace.", "names submit gpus duration", ALL),
    # scheduler
    **_rows("scheduler.", "policy schedulePeriod", ALL),
    # StrictFIFO under another family is refused by the model (`Scheduler`, `io.scheduler_of`)
    "scheduler.queueingStrategy": _only("volcano", W("applies to a Volcano conf; this policy ignores it (Kueue sets "
                                                     "it per ClusterQueue, Slurm by its SchedulerType)")),
    "scheduler.conf": _section("volcano"),
    "scheduler.conf.**": _section("volcano"),
    "scheduler.slurm": _section("slurm"),
    "scheduler.slurm.**": _section("slurm"),
    "scheduler.kueue": _section("kueue"),
    "scheduler.kueue.**": _section("kueue"),
    "scheduler.kube": _section("kube-scheduler"),
    "scheduler.kube.**": _section("kube-scheduler"),
}
"""Field path -> its decision per family, in the order of `FAMILIES`."""

SLURM_PARAMETERS = set(SCHEDULER_PARAMETER_RANGES) | {
    "bf_continue",  # the simulated backfill never yields its locks: it always continues
}
"""SchedulerParameters keys the Slurm engine reads; any other key is warned about (slurmctld
would act on it, the simulator does not)."""


@cache
def decision(path: str, family: str) -> Decision:
    """The decision for a field path (`jobs[].networkTopology`) under a family; KeyError when the
    table has none (a field added to the model without a decision)."""
    column = FAMILIES.index(family)
    if path in TABLE:
        return TABLE[path][column]
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        key = ".".join(parts[:end]) + ".**"
        if key in TABLE:
            return TABLE[key][column]
    raise KeyError(path)


def findings(scenario: BaseModel, family: str) -> list[tuple[str, Decision, int]]:
    """The fields the scenario sets (to other than their default) that `family` does not honour:
    (first YAML path, decision, how many paths of the same field), in the scenario's order."""
    found: dict[str, list] = {}
    _walk(scenario, "", "", family, found)
    if family == "slurm":
        conf = getattr(getattr(scenario, "scheduler", None), "slurm", None)
        if conf is not None:
            for key in conf.parameters():
                if key not in SLURM_PARAMETERS:
                    path = f"scheduler.slurm.SchedulerParameters.{key}"
                    found[path] = [path, W("not simulated: slurmctld would read it, labkit's Slurm engine "
                                           f"does not (it reads {', '.join(sorted(SLURM_PARAMETERS))})"), 1]
    return [tuple(entry) for entry in found.values()]


def _walk(model: BaseModel, path: str, pattern: str, family: str, found: dict) -> None:
    visit = _to_visit(type(model), pattern, family)
    for name in visit:  # in the model's order, whatever the hash seed
        if name not in model.model_fields_set:
            continue  # a field left out holds its default
        field, value = visit[name], getattr(model, name)
        if _is_default(field, value):
            continue
        key = field.alias or name
        here, where = f"{pattern}{key}", f"{path}{key}"
        rule = decision(here, family)
        if rule.kind != "honoured":
            if here in found:
                found[here][2] += 1
            else:
                found[here] = [where, rule, 1]
            continue
        if _all_honoured_below(here, family):
            continue  # a scheduler section, honoured as a whole, or nothing below to warn of
        for sub, item in _items(value):
            if isinstance(item, BaseModel):
                _walk(item, f"{where}{sub}.", f"{here}{'[]' if sub else ''}.", family, found)


@cache
def _to_visit(model: type[BaseModel], pattern: str, family: str) -> dict[str, Any]:
    """The fields of `model` (at `pattern`) the walk must look at under `family`, by name: those
    not honoured, or with a field below that is not (of a job's 20 fields, Volcano needs 5)."""
    return {name: field for name, field in model.model_fields.items()
            if decision(pattern + (field.alias or name), family).kind != "honoured"
            or not _all_honoured_below(pattern + (field.alias or name), family)}


@cache
def _all_honoured_below(pattern: str, family: str) -> bool:
    """Whether every field below `pattern` is honoured by `family` (the walk need not go there)."""
    if pattern + ".**" in TABLE:
        return TABLE[pattern + ".**"][FAMILIES.index(family)].kind == "honoured"
    below = [key for key in TABLE if key.startswith((pattern + ".", pattern + "[]."))]
    return all(decision(key.removesuffix(".**"), family).kind == "honoured" for key in below)


def _items(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, (list, tuple)):
        return [(f"[{i}]", item) for i, item in enumerate(value)]
    return [("", value)]


def _is_default(field: Any, value: Any) -> bool:
    if field.default is not PydanticUndefined:
        return value == field.default
    if field.default_factory is not None:
        return value == field.default_factory()
    return False


def apply(scenario: BaseModel, family: str) -> None:
    """Refuse (SpecError naming the path) the first field `family` cannot take; warn once about
    each field it ignores (a `labkit: note:` line naming the first path that sets it)."""
    found = findings(scenario, family)
    for where, rule, _ in found:
        if rule.kind == "refused":
            raise SpecError(where, f"{rule.says} (policy family: {family})")
    said: dict[str, list] = {}  # fields that share a reason share a line
    for where, rule, count in found:
        paths, more = said.setdefault(rule.says, [[], 0])
        paths.append(where)
        said[rule.says][1] = more + count - 1
    for says, (paths, more) in said.items():
        also = f" (and {more} more like them)" if more else ""
        warnings.warn(f"{', '.join(paths)}{also}: {says}", LabkitWarning, stacklevel=3)
