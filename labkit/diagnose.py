"""Why is it pending? Answers in the scheduler's own words, read from a `Result`.

`explain(result, job, at=t)` rebuilds the cluster at `t` (`labkit.metrics.snapshot`), opens a
session of the reference engine on it and asks the engine's own plugins: the enqueue votes
(proportion, capacity, overcommit), Overused and Allocatable for the queue, the predicates per
node, and one real session to see whether the gang would be bound or pipelined. The messages
are Volcano's own, formed as v1.15.1 forms them:

* a pod's FailedScheduling: ``FitErrors.Error()`` (pkg/scheduler/api/unschedule_info.go),
  ``0/N nodes are unavailable: <count> <reason>, ....``, one reason per node, the resource check
  of allocate first (``Insufficient <resource>``); a pipelined pod's ``TaskSchedulingReason``
  (pkg/scheduler/api/job_info.go);
* the PodGroup's Unschedulable condition (gang ``OnSessionClose``:
  ``<minAvailable - schedulable>/<pods> tasks in gang unschedulable: <JobInfo.FitError()>``, not set
  for a PodGroup without pods) and its Warning event (cache ``RecordJobStatusEvent``:
  ``<Pending pods>/<pods> tasks in gang unschedulable: ...``, every session while the PodGroup is
  Pending or Inqueue: ``0/0 ...`` before the vcjob controller has created the pods);
* the enqueue votes' events: proportion's and capacity's ``queue resource quota insufficient:
  insufficient <r>``, overcommit's ``resource in cluster is overused: overused <r>``;
* the API server's ResourceQuota refusal the run logged when the controller created the pods.

Where Volcano says nothing (it only logs, e.g. an overused queue that allocate skips) the message
is labkit's own sentence, not quoted.

A Kueue run is read in Kueue's words (`_kueue_explain`, `_kueue_events`): its Workload's conditions and
the events Kueue's scheduler and job reconciler record.

Also here: a gang-deadlock detector, a starvation report and event views shaped like
``kubectl get events`` and ``kubectl describe podgroup``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import metrics
from .engine.events import NODE_LOGGED
from .engine.framework import REJECT, JobInfo, QueueInfo, Session, TaskInfo
from .engine.hypernodes import NONE
from .engine.problem import ARG_DEFAULTS, PODS, Action, Arg, Ext, Family, Plugin, PodGroupPhase, TaskStatus
from .engine.resources import less_equal
from .engine.volcano.actions import ACTIONS
from .engine.volcano.reference import open_session, podgroup_phase
from .errors import LabkitError
from .spec import scheduler_of

if TYPE_CHECKING:
    from .results import Result

SLURM_REASON = {
    "NotSubmitted": "BeginTime",
    "Completed": "None",
    "Running": "None",
    "WaitingForSession": "None",
    "QueueClosed": "PartitionDown",
    "QueueResourceQuotaInsufficient": "QOSGrpGRES",
    "ClusterOverused": "Resources",
    "QueueOverused": "QOSGrpGRES",
    "QueueDeservedExceeded": "QOSGrpGRES",
    "Unschedulable": "Resources",
    "NotEnoughResources": "Resources",
    "Pipelined": "Resources",
    "FailedCreate": "QOSGrpGRES",
    "Terminated": "None",
    "NetworkTopology": "Resources",
}
"""The squeue REASON a Slurm user would read for the same cause (docs: squeue, JOB REASON CODES)."""


@dataclass(frozen=True)
class Explanation:
    """Why `job` is where it is at `at`: a reason key, the scheduler's message and supporting lines."""

    job: str
    at: float
    phase: str
    reason: str
    message: str
    details: list[str] = field(default_factory=list)
    condition: str = ""
    """The PodGroup's Unschedulable condition message (gang's), empty when there is none."""
    event: str = ""
    """The PodGroup's Warning Unschedulable event of this session (``RecordJobStatusEvent``), if any."""
    object: str = "PodGroup"
    """What `phase` is the phase of: the PodGroup (Volcano, kube-scheduler, Slurm) or Kueue's Workload."""

    @property
    def slurm_reason(self) -> str:
        """The squeue REASON for the same cause (a Slurm run's reason already is one)."""
        return SLURM_REASON.get(self.reason, self.reason)

    def __str__(self) -> str:
        lines = [f"{self.job} at t={age(self.at)}: {self.object} {self.phase} — {self.reason}", f"  {self.message}"]
        lines += [f"  {line}" for line in self.details]
        if self.condition and self.condition != self.message:
            lines.append(f"  PodGroup condition Unschedulable: {self.condition}")
        if self.event and self.event not in (self.condition, self.message):
            lines.append(f"  PodGroup event Unschedulable: {self.event}")
        return "\n".join(lines)


def age(seconds: float) -> str:
    """kubectl's short duration: 45s, 3m20s, 2h5m, 3d4h."""
    if not math.isfinite(seconds):
        return "<unknown>"
    s = round(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    return f"{s}s"


def _kueue(result: Result) -> bool:
    """Whether the run is Kueue's: its Workloads are admitted on Kueue's own clock, in Kueue's words
    (`explain` and `get_events` read them from the run's events; there is no session to open)."""
    return scheduler_of(result.scenario).kueue is not None


def _key(result: Result, job: str) -> str:
    """`<namespace>/<name>` for a job given either way; a bare name must be unique."""
    keys = metrics.job_keys(result)
    if job in set(keys):
        return job
    matches = keys[result.jobs.name == job]
    if len(matches) != 1:
        raise KeyError(f"job {job!r}: {'no such job' if not len(matches) else 'name used in several namespaces'}")
    return matches.iloc[0]


# ------------------------------------------------------------------------------------ explain


def explain(result: Result, job: str, at: float) -> Explanation:
    """Why `job` is not running at `at` (or that it is), from the engine's own verdicts on the snapshot;
    for a Kueue run, its Workload's state and condition as Kueue writes them (`_kueue_explain`)."""
    key = _key(result, job)
    if _kueue(result):
        return _kueue_explain(result, key, at)
    family = metrics.compiled_of(result).problem.policy.family
    if family != Family.VOLCANO:
        return _pending_as_recorded(result, key, at, family)
    row = result.jobs[metrics.job_keys(result) == key].iloc[0]
    if row.submit > at:
        return Explanation(key, at, "-", "NotSubmitted", f"the vcjob is created at t={age(row.submit)}")
    if row.end <= at and row.state == "Terminated":
        events = result.events[(result.events.job == key) & (result.events.kind == "Terminated")]
        return Explanation(key, at, "-", "Terminated", events.message.iloc[-1], [
            (f"the vcjob controller terminated the job at t={age(row.end)}: creating its pods failed "
             "(a ResourceQuota refused them) more often than --max-requeue-num allows")])
    if row.end <= at:
        return Explanation(key, at, "Completed", "Completed", f"completed at t={age(row.end)}")
    snap = metrics.snapshot(result, at)
    j = snap.local_job(key)
    ssn = snap.session()
    info = ssn.jobs[j]
    phase = PodGroupPhase(int(snap.state.job_phase[j])).name.title()
    queue = ssn.queues[info.queue]
    if info.phase == PodGroupPhase.RUNNING:
        running = len(info.with_status(TaskStatus.RUNNING))
        return Explanation(key, at, phase, "Running", f"{running}/{len(info.tasks)} pods running, "
                                                      f"{info.min_available} minAvailable")
    if info.phase == PodGroupPhase.PENDING:
        return _not_enqueued(key, at, phase, ssn, info, queue)
    refused = _refused(result, key, at)
    if refused:
        return Explanation(key, at, phase, "FailedCreate", refused[0], [
            "the vcjob controller retries creating the pods; a ResourceQuota of the namespace refuses them",
            *refused[1:]], "", _podless_event(info.min_available))
    return _not_allocated(key, at, phase, snap, ssn, info, queue)


def _pending_as_recorded(result: Result, key: str, at: float, family: int) -> Explanation:
    """A kube-scheduler or Slurm run explained from what that scheduler recorded, in its own words:
    kube-scheduler's last FailedScheduling (or the Coscheduling Permit wait) of the job's pods, as
    `kubectl describe pod` shows it; Slurm's squeue state and REASON (`Priority`, `Resources`) with the
    backfill scheduler's planned StartTime. Volcano's session, PodGroup and enqueue votes are not theirs."""
    row = result.jobs[metrics.job_keys(result) == key].iloc[0]
    slurm = family == Family.SLURM
    thing = "Job" if slurm else "Pod"
    if row.submit > at:
        return Explanation(key, at, "-", "NotSubmitted", f"submitted at t={age(row.submit)}", object=thing)
    if row.end <= at:
        return Explanation(key, at, "COMPLETED" if slurm else "Succeeded", "Completed",
                           f"completed at t={age(row.end)}", object=thing)
    events = result.events[(result.events.job == key) & (result.events.time <= at)]
    pods = sum(t.replicas_resolved for t in result.scenario.jobs[int(np.flatnonzero(metrics.job_keys(result) == key)[0])].tasks)
    held = metrics.holding(result, at)
    running = int(((held.job == key) & (held.status == "Running")).sum())
    if slurm:
        if running:
            allocated = events[events.kind == "Bound"].message
            return Explanation(key, at, "RUNNING", "None", allocated.iloc[-1] if len(allocated) else "allocated",
                               object="Job")
        pending = events[events.kind == "Pending"]
        reason = pending.reason.iloc[-1] if len(pending) else "None"
        planned = events[events.kind == "StartTime"]
        details = [planned.message.iloc[-1]] if len(planned) else []
        return Explanation(key, at, "PENDING", reason, f"squeue: PENDING ({reason})", details, object="Job")
    if running == pods:
        return Explanation(key, at, "Running", "Running", f"{running}/{pods} pods running", object=thing)
    notes = events[events.kind.isin(["FailedScheduling", "Waiting"])]
    bound = events[events.kind == "Bound"]
    if notes.empty or (len(bound) and bound.time.iloc[-1] > notes.time.iloc[-1] and running):
        return Explanation(key, at, "Pending", "Pending", f"{running}/{pods} pods running; the rest wait for "
                           "their scheduling cycle", object=thing)
    last = notes.iloc[-1]
    pod = _pod_name(last.task) if isinstance(last.task, str) and last.task else _pod_name(key)
    return Explanation(key, at, "Pending", last.reason, last.message,
                       [f"pod {pod}: {last.kind} at t={age(last.time)}; {running}/{pods} pods running"], object=thing)


def fit_errors_message(reasons: dict[str, int], n_nodes: int) -> str:
    """``FitErrors.Error()`` (pkg/scheduler/api/unschedule_info.go): ``0/<nodes> nodes are unavailable``,
    then the per-node reasons counted, as ``<count> <reason>`` strings sorted (``sort.Strings``)."""
    text = f"0/{n_nodes} nodes are unavailable"
    if not n_nodes:
        return text
    return f"{text}: {', '.join(sorted(f'{v} {k}' for k, v in reasons.items()))}."


def fit_error(ready: bool, statuses: dict[str, int], min_available: int, pending: dict[str, int] | None = None,
              origin: str = "") -> str:
    """``JobInfo.FitError()`` (pkg/scheduler/api/job_info.go): ``pod group is [not ]ready``, the pods
    counted by status plus ``minAvailable`` (sorted strings), ``; Pending: `` the Pending pods counted
    by their scheduling reason, and ``. Origin reason is <pod>: <FitErrors>`` for a pod that failed
    the predicates."""
    counts = {**{k: v for k, v in statuses.items() if v}, "minAvailable": min_available}
    text = f"pod group is {'ready' if ready else 'not ready'}, " + ", ".join(sorted(f"{v} {k}" for k, v in counts.items()))
    if pending:
        text += "; Pending: " + ", ".join(sorted(f"{v} {k}" for k, v in pending.items() if v))
    if origin:
        text += f". Origin reason is {origin}"
    return text


def gang_condition(unready: int, n_tasks: int, fit: str) -> str:
    """gang ``OnSessionClose`` (pkg/scheduler/plugins/gang/gang.go), the PodGroup's Unschedulable
    condition: ``%v/%v tasks in gang unschedulable: %v`` with minAvailable - schedulable pods, the pods."""
    return f"{unready}/{n_tasks} tasks in gang unschedulable: {fit}"


def gang_event(pending: int, n_tasks: int, fit: str) -> str:
    """``SchedulerCache.RecordJobStatusEvent`` (pkg/scheduler/cache/cache.go), the PodGroup's Warning
    Unschedulable event: the same format, with the Pending pods first."""
    return f"{pending}/{n_tasks} tasks in gang unschedulable: {fit}"


def pipelined_message(pod: str, node: str) -> str:
    """``JobInfo.TaskSchedulingReason`` for a Pipelined pod: its FailedScheduling message."""
    return f"Pod {pod} can possibly be assigned to {node}, once resource is released and minAvailable is satisfied"


def format_resource_names(prefix: str, verb: str, names: list[str]) -> str:
    """``util.FormatResourceNames`` (pkg/scheduler/plugins/util/util.go): the enqueue votes' event messages."""
    return f"{prefix}: {', '.join(f'{verb} {n}' for n in names)}" if names else prefix


def _podless_event(min_available: int) -> str:
    """The PodGroup's Warning event while the vcjob controller has not created its pods (Pending, or
    Inqueue with the pods refused): ``0/0 tasks in gang unschedulable: pod group is not ready, N minAvailable``."""
    return gang_event(0, 0, fit_error(False, {}, min_available))


def _plugin(entry) -> str:
    return Plugin(entry.kind).name.lower()


def _not_enqueued(key, at, phase, ssn: Session, info: JobInfo, queue: QueueInfo) -> Explanation:
    """A Pending PodGroup: no pods yet; the enqueue action's JobEnqueueable votes decide."""
    event = _podless_event(info.min_available)
    rejected = [entry for entry, fn in ssn._all("jobEnqueueable", Ext.JOB_ENQUEUED) if fn(info) == REJECT]
    if not queue.open:
        return Explanation(key, at, phase, "QueueClosed", f'queue "{queue.name}" is Closed: enqueue skips its jobs',
                           event=event)
    if not rejected:
        return Explanation(key, at, phase, "WaitingForSession",
                           "every JobEnqueueable vote permits it: the next session's enqueue makes it Inqueue",
                           event=event)
    entry = rejected[0]
    name = _plugin(entry)
    if name == "overcommit":
        room, names = _overcommit_room(ssn, info, entry)
        return Explanation(key, at, phase, "ClusterOverused",
                           format_resource_names("resource in cluster is overused", "overused", names),
                           [f"overcommit: {room}"], event=event)
    attr = entry.plugin.attrs[info.queue]
    need = info.min_resources
    future = need + attr.allocated + attr.inqueue - attr.elastic
    over = [(res, v, a, i, e, f, c) for res, v, a, i, e, f, c in _dims(
        ssn, need, need, attr.allocated, attr.inqueue, attr.elastic, future, attr.real_capability) if f > c]
    lines = [f"{name}: minResources + allocated + inqueue - elastic > realCapability of queue \"{queue.name}\""]
    lines += ["  {}: {} + {} + {} - {} = {} > {}".format(res, *(_quantity(res, x) for x in (v, a, i, e, f, c)))
              for res, v, a, i, e, f, c in over]
    capability = metrics.to_units(ssn.problem, np.nan_to_num(queue.capability, nan=np.inf))
    named = {r: v for r, v in capability.items() if math.isfinite(v)}
    if named:
        lines.append("queue capability: " + ", ".join(f"{r}={_quantity(r, v)}" for r, v in named.items()))
    return Explanation(key, at, phase, "QueueResourceQuotaInsufficient",
                       format_resource_names("queue resource quota insufficient", "insufficient", [o[0] for o in over]),
                       lines, event=event)


def _dims(ssn: Session, mask: np.ndarray, *vectors: np.ndarray):
    """(resource, values...) in scenario units for the dimensions `mask` names (pods left out), in
    Volcano's order of a resource comparison: cpu, memory, then the scalar resources."""
    names = ssn.problem.resource_names
    units = [metrics.to_units(ssn.problem, v) for v in vectors]
    for r, name in enumerate(names):
        if r != PODS and mask[r] > 0:
            yield (name, *(u[name] for u in units))


def _overcommit_room(ssn: Session, info: JobInfo, entry) -> tuple[str, list[str]]:
    """The numbers overcommit compares, on the dims where the job does not fit (inqueue + minResources >
    total x factor - used), and those dims' names."""
    factor = float(entry.args[Arg.OVERCOMMIT_FACTOR])
    factor = factor if factor >= 1.0 else ARG_DEFAULTS[Arg.OVERCOMMIT_FACTOR]  # NaN (not given) included
    used = sum((n.used for n in ssn.nodes), np.zeros(ssn.problem.n_resources))
    inqueue = sum((j.min_resources for j in ssn.jobs if j.phase == PodGroupPhase.INQUEUE and j.min_resources is not None),
                  np.zeros(ssn.problem.n_resources))
    room = ssn.total_resource * factor - used
    over = [(res, m, i, t, u, r) for res, m, i, t, u, r in _dims(
        ssn, info.min_resources, info.min_resources, inqueue, ssn.total_resource, used, room) if i + m > r]
    parts = [f"{res}: inqueue {_quantity(res, i)} + job {_quantity(res, m)} > total {_quantity(res, t)} "
             f"x {factor:g} - used {_quantity(res, u)} = {_quantity(res, r)}"
             for res, m, i, t, u, r in over]
    return "; ".join(parts) or "idle room exhausted", [o[0] for o in over]


@dataclass
class Gang:
    """The job at the end of a session on the snapshot: the gang's messages and its failed pod."""

    condition: str
    event: str
    origin: TaskInfo | None
    failed: NodeReasons | None
    pipelined: list[TaskInfo]
    bound: bool
    pending: list[TaskInfo] = field(default_factory=list)
    """The job's Pending pods after the session."""
    schedulable: list[TaskInfo] = field(default_factory=list)
    """Those allocate placed, then discarded with the gang."""


def _gang(snap: metrics.Snapshot, j: int) -> Gang:
    """Run one session of the reference engine on the snapshot (actions, not the close) and read the
    job as gang's OnSessionClose and the cache's RecordJobStatusEvent would.

    A Pending pod is ``Schedulable`` when allocate placed it and then discarded the gang (it was
    tried before the pod that failed), else ``Unschedulable``; the pod that failed is the origin
    (Volcano takes the first pod with fit errors in its map order: here the first that failed)."""
    ssn = open_session(snap.problem, snap.state)
    for action in ssn.actions:
        ACTIONS[Action(action)](ssn)
    job = ssn.jobs[j]
    mine = {t.index: t for t in job.tasks}
    tried = list(dict.fromkeys(t for action, t in ssn.decisions.attempts if action == "allocate" and t in mine))
    failed_at = next((i for i, t in enumerate(tried) if t in job.fit_errors), None)
    schedulable = [mine[t] for t in tried[:failed_at or 0] if t not in job.fit_errors
                   and mine[t].status == TaskStatus.PENDING]
    origin = mine[tried[failed_at]] if failed_at is not None else None
    failed = _node_reasons(snap, ssn, origin, schedulable, job.fit_hyper_node) if origin is not None else None
    statuses: dict[str, int] = {}
    for t in job.tasks:
        statuses[TaskStatus(t.status).name.title()] = statuses.get(TaskStatus(t.status).name.title(), 0) + 1
    pending = job.with_status(TaskStatus.PENDING)
    reasons = {"Schedulable": len(schedulable), "Unschedulable": len(pending) - len(schedulable)}
    where = f"{_pod_name(origin.name)}: {failed.message()}" if failed is not None else ""
    fit = fit_error(job.is_ready(), statuses, job.min_available, reasons if pending else None, where)
    unready = job.min_available - (len(schedulable) + job.ready_task_num())
    condition = gang_condition(unready, len(job.tasks), fit) if job.tasks and not job.is_ready() else ""
    event = gang_event(len(pending), len(job.tasks), fit) if podgroup_phase(job) in (
        PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN) else ""
    bound = any(ssn.tasks[b.task].job == j for b in ssn.decisions.binds)
    return Gang(condition, event, origin, failed, job.with_status(TaskStatus.PIPELINED), bound, pending, schedulable)


def _not_allocated(key, at, phase, snap, ssn: Session, info: JobInfo, queue: QueueInfo) -> Explanation:
    """An Inqueue PodGroup with Pending pods: queue checks, then the node predicates, then the gang."""
    pending = info.with_status(TaskStatus.PENDING)
    gang = _gang(snap, info.index)
    attr = metrics.queue_attrs(ssn).get(queue.index)
    if ssn.overused(queue) and attr is not None:
        lines = [f"{res}: deserved {_quantity(res, d)} <= allocated {_quantity(res, a)}" for res, d, a in _dims(
            ssn, attr.deserved + attr.allocated, attr.deserved, attr.allocated)]
        return Explanation(key, at, phase, "QueueOverused", f'queue "{queue.name}" is overused: allocate skips it',
                           lines, gang.condition, gang.event)
    for task in _one_per_role(pending):
        refused = [e for e, fn in ssn._all("allocatable", Ext.ALLOCATABLE) if not fn(queue, task)]
        if refused:
            entry = refused[0]
            attr = entry.plugin.attrs[queue.index]
            limit = attr.deserved if _plugin(entry) == "proportion" else attr.real_capability
            word = "deserved" if _plugin(entry) == "proportion" else "realCapability"
            lines = [f"{res}: allocated {_quantity(res, a)} + request {_quantity(res, r)} = {_quantity(res, a + r)} "
                     f"> {word} {_quantity(res, d)}"
                     for res, a, r, d in _dims(
                ssn, task.request, attr.allocated, task.request, limit) if a + r > d + 1e-9]
            return Explanation(key, at, phase, "QueueDeservedExceeded",
                               f'queue "{queue.name}": {task.name} is not allocatable ({_plugin(entry)})',
                               lines, gang.condition, gang.event)
    if gang.bound:
        return Explanation(key, at, phase, "WaitingForSession", "the next session binds the gang")
    if gang.pipelined:
        task = gang.pipelined[0]
        node = snap.problem.node_names[task.node]
        return Explanation(key, at, phase, "Pipelined", pipelined_message(task.name, node),
                           [f"{len(gang.pipelined)} pod(s) pipelined: waiting for Releasing pods"],
                           gang.condition, gang.event)
    if gang.failed is None and info.topology_tier >= 0 and ssn.hyper_node_gradient(info, ssn.hypernodes.root) == []:
        return _no_hyper_node(key, at, phase, ssn, info, gang)
    if gang.failed is None:
        return Explanation(key, at, phase, "NotEnoughResources", gang.condition or gang.event,
                           ["allocate did not try the job's pods this session"], gang.condition, gang.event)
    alone = _node_reasons(snap, ssn, gang.origin, [])
    if alone.unavailable == len(ssn.nodes):
        return Explanation(key, at, phase, "Unschedulable", gang.failed.message(), [], gang.condition, gang.event)
    return Explanation(key, at, phase, "NotEnoughResources", gang.failed.message(),
                       ["every pod fits some node alone, but not the whole gang at once"], gang.condition, gang.event)


def _no_hyper_node(key, at, phase, ssn: Session, info: JobInfo, gang: Gang) -> Explanation:
    """A job with networkTopology that network-topology-aware offers no HyperNode to (hyperNodeGradient:
    none of tier <= highestTierAllowed has the job's minResources idle or future idle). Volcano only
    logs this at -v 5, so the message is labkit's own."""
    hn = ssn.hypernodes
    need = info.min_resources if info.min_resources is not None else np.zeros(ssn.problem.n_resources)
    lines = []
    for h, members in enumerate(hn.members):
        if hn.tier[h] > info.topology_tier:
            continue
        idle = sum((ssn.nodes[n].idle for n in members), np.zeros(ssn.problem.n_resources))
        future = sum((ssn.nodes[n].future_idle() for n in members), np.zeros(ssn.problem.n_resources))
        short = [f"{res}: idle {_quantity(res, i)}, future idle {_quantity(res, f)} < minResources {_quantity(res, m)}"
                 for res, m, i, f in _dims(ssn, need, need, idle, future) if i < m and f < m]
        lines.append(f"hyperNode {hn.names[h]} (tier {hn.tier[h]}): " + ("; ".join(short) or "room enough"))
    message = (f"no HyperNode of tier <= {info.topology_tier} has room for the whole gang (minResources): "
               "network-topology-aware gives allocate none to try, so the pods stay Pending")
    return Explanation(key, at, phase, "NetworkTopology", message, lines, gang.condition, gang.event)


def _one_per_role(tasks: list[TaskInfo]) -> list[TaskInfo]:
    seen: dict[str, TaskInfo] = {}
    for t in tasks:
        seen.setdefault(t.role, t)
    return list(seen.values())


@dataclass
class NodeReasons:
    """Per-node predicate failures of one pod, counted as Volcano's FitErrors counts them."""

    counts: dict[str, int]
    unavailable: int
    hyper_node: str = ""

    def message(self) -> str:
        """The pod's FailedScheduling message, :func:`fit_errors_message`, prefixed ``In hyperNode
        <name>: `` when the pod was tried inside one HyperNode (FitErrors.SetHyperNode)."""
        text = fit_errors_message(self.counts, self.unavailable)
        return f"In hyperNode {self.hyper_node}: {text}" if self.hyper_node and self.counts else text


def _node_reasons(snap: metrics.Snapshot, ssn: Session, task: TaskInfo, before: list[TaskInfo],
                  hyper_node: int = NONE) -> NodeReasons:
    """Why each node refuses `task`, as allocate's ``predicate`` finds it: first the resource check on
    FutureIdle (one reason, ``Insufficient <r>`` for the first short resource: cpu, memory, then the
    scalar resources), else the predicates plugin (``node(s) pod number exceeded``, the node's
    unschedulable flag, selector, taints). `before` are the gang's pods allocate placed earlier in the
    session (first fit here) and then discarded: they took room the failed pod did not have.
    """
    scenario = snap.compiled.scenario
    pool_of = {name: pool for pool in scenario.cluster.pools for name in pool.node_names()}
    job = scenario.jobs[int(snap.jobs[task.job])]
    spec = next(t for t in job.tasks if t.name == task.role)
    nodes = ssn.nodes if hyper_node == NONE else [ssn.nodes[n] for n in ssn.hypernodes.members[hyper_node]]
    room = {n.index: n.future_idle().copy() for n in nodes}
    for placed in before:
        node = next((n for n in nodes if less_equal(placed.request, room[n.index])), None)
        if node is not None:
            room[node.index] = room[node.index] - placed.request
    counts: dict[str, int] = {}
    unavailable = 0
    for node in nodes:
        short = [name for r, name in enumerate(ssn.problem.resource_names)
                 if r != PODS and task.request[r] > room[node.index][r] + 1e-9]
        reasons = [f"Insufficient {short[0]}"] if short else []
        if not reasons:
            pool = pool_of[node.name]
            if node.allocatable[PODS] <= len(node.pods):
                reasons.append("node(s) pod number exceeded")
            if not node.schedulable:
                reasons.append("node(s) were unschedulable")
            if any(pool.labels.get(k) != v for k, v in spec.node_selector.items()):
                reasons.append("node(s) didn't match Pod's node affinity/selector")
            reasons += [f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}" for taint in pool.taints
                        if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in spec.tolerations)]
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        unavailable += bool(reasons)
    return NodeReasons(counts, unavailable, ssn.hypernodes.names[hyper_node] if hyper_node != NONE else "")


def _refused(result: Result, key: str, at: float) -> list[str]:
    """The API server's refusals of the job's pods that still stand at `at`: the last ``exceeded quota``
    message of each pod the run logged as Rejected (FailedCreate) and has not bound since."""
    events = result.events[(result.events.job == key) & (result.events.time <= at)]
    last: dict[str, str] = {}
    for e in events[events.kind.isin(["Rejected", "Bound"])].itertuples():
        if e.kind == "Rejected":
            last[e.task] = e.message
        else:
            last.pop(e.task, None)
    return list(last.values())


# ------------------------------------------------------------------------------------ gang deadlock


def partial_gangs(result: Result, at: float) -> pd.DataFrame:
    """Jobs with 0 < Running pods < minAvailable at `at`: gangs holding resources without running."""
    held = metrics.holding(result, at)
    running = held[held.status == "Running"].groupby("job").size()
    minimum = {f"{j.namespace}/{j.name}": j.min_available_resolved for j in result.scenario.jobs}
    rows = [{"job": job, "running": int(n), "min_available": minimum[job]}
            for job, n in running.items() if n < minimum[job]]
    return pd.DataFrame(rows, columns=["job", "running", "min_available"])


def gang_deadlocks(result: Result, at: float) -> pd.DataFrame:
    """Partial gangs at `at`, whether their missing pods fit the free room now, or once the other partial gangs let go.

    `deadlocked` is true for every partial gang when none of them fits now but some would if the
    others released: they hold what each other needs (Volcano issue #3373's two half-placed gangs).
    Fit is first-fit of the missing pods (largest first) onto the nodes' free resources and selectors.
    """
    partial = partial_gangs(result, at)
    if partial.empty:
        return partial.assign(fits_now=[], fits_if_others_release=[], deadlocked=[])
    p = metrics.compiled_of(result).problem
    resources = list(p.resource_names)
    free = metrics.node_free(result, at)
    held = metrics.holding(result, at)
    held_names = set(held.job + "-" + held.role + "-" + held["index"].astype(str))
    fits_now, fits_later = [], []
    for gang in partial.itertuples():
        j = p.job_names.index(gang.job)
        missing = [t for t in np.flatnonzero(p.task_job == j) if p.task_names[t] not in held_names]
        missing = missing[:gang.min_available - gang.running]
        others = held[held.job.isin(set(partial.job) - {gang.job})]
        released = free.add(others.groupby("node")[resources].sum(), fill_value=0.0)
        fits_now.append(_first_fit(p, missing, free))
        fits_later.append(_first_fit(p, missing, released))
    stuck = not any(fits_now) and any(fits_later)
    return partial.assign(fits_now=fits_now, fits_if_others_release=fits_later, deadlocked=stuck)


def _first_fit(p, tasks: list[int], free: pd.DataFrame) -> bool:
    """Place `tasks` largest first, each on the first node it fits (requests, selector and taints)."""
    scale = metrics.units(p)
    room = free.loc[list(p.node_names), list(p.resource_names)].to_numpy(float).copy()
    for t in sorted(tasks, key=lambda t: -p.task_request[t].sum()):
        request = p.task_request[t] / scale
        ok = np.flatnonzero(p.class_node_ok[p.task_class[t]] & (request <= room + 1e-9).all(axis=1))
        if not len(ok):
            return False
        room[ok[0]] -= request
    return True


# ------------------------------------------------------------------------------------ starvation


def starvation_report(result: Result, threshold: float) -> pd.DataFrame:
    """Jobs that waited at least `threshold`, longest first, each explained at the moment it crossed the threshold."""
    table = metrics.starvation(result, threshold)
    reasons = [explain(result, f"{row.namespace}/{row.name}", row.submit + threshold) for row in table.itertuples()]
    return table.assign(reason=[e.reason for e in reasons], message=[e.message for e in reasons])


# ------------------------------------------------------------------------------------ event views


def _event_rows(e, min_available: int, volcano: bool) -> list[tuple[str, str, str, str]]:
    """The events a real cluster records for one event of the run: (type, reason, object, message),
    as Volcano v1.15.1 and its vcjob controller word them, or under another family the scheduler's
    own notes (none for the run's own bookkeeping: completion, a pod's deletion, a phase change)."""
    pod, group = f"pod/{_pod_name(e.task)}", f"podgroup/{_pod_name(e.job)}"
    if e.kind in NODE_LOGGED:  # the node lifecycle controller's and the kubelet's RecordNodeStatusChange
        return [("Normal", e.kind, f"node/{e.node}", f"Node {e.node} status is now: {e.kind}")]
    if e.kind == "Evicted" and e.reason in ("TaintManagerEviction", "Drain"):  # a node's pods, not the scheduler's
        return [("Normal", e.reason, pod, e.message)] if e.reason == "TaintManagerEviction" else []
    if e.kind == "Rejected":  # the API server's 403, which the controller's FailedCreate event carries
        return [("Warning", "FailedCreate", f"job/{_pod_name(e.job)}", e.message)]
    if e.kind in ("FailedScheduling", "Waiting"):  # kube-scheduler's own notes
        return [("Warning", e.kind, pod, e.message)]
    if not volcano:
        return [("Normal", "Scheduled", pod, e.message)] if e.kind == "Bound" else []
    if e.kind == "Submitted":  # the first session's RecordJobStatusEvent: no pods yet, Pending or Inqueue
        return [("Warning", "Unschedulable", group, _podless_event(min_available))]
    if e.kind == "Bound":  # cache.go Bind
        return [("Normal", "Scheduled", pod, f"Successfully assigned {e.task} to {e.node}")]
    if e.kind == "Pipelined":  # RecordJobStatusEvent -> taskUnschedulable
        return [("Warning", "FailedScheduling", pod, pipelined_message(e.task, e.node))]
    if e.kind == "Started":  # RecordJobStatusEvent once the PodGroup status changes to Running
        return [("Normal", "Scheduled", group, "pod group is ready")]
    if e.kind == "Evicted":  # defaultEvictor.Evict and cache.Evict
        return [("Warning", "Evict", pod, f"Pod is evicted, because of {e.reason}"), ("Normal", "Evict", group, e.reason)]
    if e.kind == "Restarting" and e.reason == "PodEvicted":  # the vcjob's PodEvicted -> RestartJob policy
        return [("Normal", "ExecuteAction", f"job/{_pod_name(e.job)}", "Start to execute action RestartJob ")]
    if e.kind == "Terminated":  # the vcjob controller's handleJobError past its retry limit
        return [("Normal", "ExecuteAction", f"job/{_pod_name(e.job)}", e.message)]
    return []


def _pod_name(key: str) -> str:
    """An object's name without its namespace (a pod's as TaskInfo.Name is)."""
    return key.split("/", 1)[-1]


def get_events(result: Result, job: str | None = None, since: float = -math.inf,
               until: float = math.inf) -> pd.DataFrame:
    """The run's events as `kubectl get events` lists them on a real cluster: TIME, TYPE, REASON, OBJECT,
    MESSAGE, in Volcano's words (:func:`_event_rows`), and under Volcano what a waiting gang's first
    sessions record, read from a session on the snapshot as `explain` reads it: the enqueue vote that
    keeps a new job Pending (:func:`_enqueue_vote`), the first allocate that places none of an enqueued
    job's pods (:func:`_first_allocate`). Each is listed once where Volcano repeats it every session.
    The run's own record is `result.events`."""
    rows = [{"TIME": f"t={age(t)}", "TYPE": kind, "REASON": reason, "OBJECT": obj, "MESSAGE": message}
            for t, kind, reason, obj, message in _events(result, job, since, until)]
    return pd.DataFrame(rows, columns=["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"])


def _events(result: Result, job: str | None, since: float, until: float) -> list[tuple]:
    """(time, type, reason, object, message) of every event a real cluster records for the run's events."""
    events = result.events[(result.events.time >= since) & (result.events.time <= until)]
    if job is not None:
        events = events[events.job == _key(result, job)]
    if _kueue(result):
        return _kueue_events(result, events)
    minimum = dict(zip(metrics.job_keys(result), (j.min_available_resolved for j in result.scenario.jobs)))
    compiled = metrics.compiled_of(result)
    volcano = compiled.problem.policy.family == Family.VOLCANO
    enqueued = result.events[result.events.kind == "Enqueued"].groupby("job").time.min().to_dict()
    period = compiled.schedule_period
    binds = result.events[result.events.kind == "Bound"]
    bound = set(zip(binds.job, binds.time.round(6)))
    rows = []
    for e in events.itertuples():
        if volcano and e.kind == "Submitted":
            rows += [(e.time, *row) for row in _enqueue_vote(result, e, enqueued, period)]
        rows += [(e.time, *row) for row in _event_rows(e, minimum.get(e.job, 0), volcano)]
        if volcano and e.kind == "Enqueued":
            at = e.time + period
            if at <= until and (e.job, round(at, 6)) not in bound:
                rows += [(at, *row) for row in _first_allocate(result, e.job, at)]
    return sorted(rows, key=lambda row: row[0])


def _enqueue_vote(result: Result, e, enqueued: dict[str, float], period: float) -> list[tuple[str, str, str, str]]:
    """The PodGroup's Normal Unschedulable event of the enqueue vote that kept a new job Pending in its
    first session: overcommit's ``resource in cluster is overused: ...`` (overcommit.go
    ``ssn.RecordPodGroupEvent(job.PodGroup, v1.EventTypeNormal, ...)``), proportion's and capacity's
    ``queue resource quota insufficient: ...``, as `explain` words them after that session. Volcano records
    it again each session the vote fails (kubectl counts them); it is listed once, with the pod-less event."""
    first = math.ceil(e.time / period - 1e-9) * period
    if enqueued.get(e.job, math.inf) <= first:
        return []
    why = explain(result, e.job, first)
    if why.reason not in ("ClusterOverused", "QueueResourceQuotaInsufficient"):
        return []
    return [("Normal", "Unschedulable", f"podgroup/{_pod_name(e.job)}", why.message)]


def _first_allocate(result: Result, key: str, at: float) -> list[tuple[str, str, str, str]]:
    """What the first allocate after the job is enqueued (the next session: the vcjob controller creates
    the pods in between) records when it binds none of the job's pods, which the caller has checked: the cache's
    RecordJobStatusEvent (the PodGroup's Warning ``<Pending>/<pods> tasks in gang unschedulable: ...`` and
    a Warning FailedScheduling per Pending pod from ``taskUnschedulable``: the pod that failed the
    predicates gets its FitErrors, a pod allocate did not try the job's ``FitError()``; a pod placed and
    then discarded with the gang is left out), and the vcjob controller's ``recordPodGroupEvent`` once it
    syncs the job (``PodGroup <ns>:<name> unschedulable, reason: <the gang's condition>``). A pipelined
    pod's FailedScheduling is the run's own Pipelined event. Real Volcano repeats the PodGroup's event each
    session (kubectl counts them) and a pod's only when its message changes."""
    if _refused(result, key, at):
        return []
    snap = metrics.snapshot(result, math.nextafter(at, -math.inf))  # what that session opened on
    j = snap.local_job(key)
    if j is None:
        return []
    gang = _gang(snap, j)
    if not gang.condition or not gang.event or gang.bound:
        return []
    namespace, name = key.split("/", 1)
    pending = f"PodGroup {namespace}:{name} unschedulable, reason: {gang.condition}"
    rows = [("Warning", "PodGroupPending", f"job/{name}", pending),
            ("Warning", "Unschedulable", f"podgroup/{name}", gang.event)]
    fit = gang.event.split(": ", 1)[1]
    discarded = {t.index for t in gang.schedulable}
    for task in gang.pending:
        if gang.origin is not None and task.index == gang.origin.index:
            rows.append(("Warning", "FailedScheduling", f"pod/{_pod_name(task.name)}", gang.failed.message()))
        elif task.index not in discarded:
            rows.append(("Warning", "FailedScheduling", f"pod/{_pod_name(task.name)}", fit))
    return rows


def describe_podgroup(result: Result, job: str, at: float) -> str:
    """`kubectl describe podgroup` at `at`: spec (minMember, minResources, queue), status phase and the
    Unschedulable condition the scheduler would write, then the PodGroup's events so far."""
    if _kueue(result):
        raise LabkitError("describe_podgroup: a Kueue run has Workloads, not PodGroups: explain(result, job, at) "
                          "gives the Workload's state and condition, get_events(result, job) its events")
    key = _key(result, job)
    namespace, name = key.split("/", 1)
    spec = result.scenario.jobs[int(np.flatnonzero(metrics.job_keys(result) == key)[0])]
    compiled = metrics.compiled_of(result)
    j = compiled.problem.job_names.index(key)
    minimum = metrics.to_units(compiled.problem, compiled.problem.job_min_resources[j])
    why = explain(result, key, at)
    held = metrics.holding(result, at)
    running = int(((held.job == key) & (held.status == "Running")).sum())
    lines = [f"Name:         {name}", f"Namespace:    {namespace}", "Spec:",
             f"  Min Member:           {spec.min_available_resolved}",
             "  Min Resources:        " + ", ".join(f"{r}: {_quantity(r, v)}" for r, v in minimum.items() if v),
             f"  Priority Class Name:  {spec.priority_class_name or ''}", f"  Queue:                {spec.queue}",
             "Status:", f"  Phase:    {why.phase}", f"  Running:  {running}"]
    if why.condition:
        lines += ["  Conditions:", "    Type:     Unschedulable", "    Status:   True",
                  "    Reason:   NotEnoughResources", f"    Message:  {why.condition}"]
    lines += ["Events:", "  Type     Reason         Age      Message", "  ----     ------         ---      -------"]
    now = []  # this session's: the enqueue vote's event, the Warning; kubectl shows a repeated event's last Age
    if why.reason in ("QueueResourceQuotaInsufficient", "ClusterOverused"):
        now.append(("Normal", why.message))
    if why.event:
        now.append(("Warning", why.event))
    for t, kind, reason, obj, message in _events(result, key, -math.inf, at):
        if obj == f"podgroup/{name}" and (kind, message) not in now:
            lines.append(f"  {kind:<8} {reason:<14} {age(at - t):<8} {message}")
    lines += [f"  {kind:<8} {'Unschedulable':<14} {'0s':<8} {message}" for kind, message in now]
    return "\n".join(lines)


def _quantity(resource: str, value: float) -> str:
    """A quantity as kubectl prints it: memory in Gi/Mi when whole; memory of a Gi or more that is not
    whole (a sum times the overcommit factor) in Gi with its fraction, so the sums read as they add up;
    else the plain number."""
    if resource == "memory":
        for suffix, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20)):
            if value >= size and value % size == 0:
                return f"{value / size:g}{suffix}"
        if abs(value) >= 2 ** 30:
            return f"{value / 2 ** 30:.6g}Gi"
    return f"{value:g}"


# ------------------------------------------------------------------------------------ Kueue

KUEUE_STATE_KINDS = ("QuotaReserved", "Pending", "Preempted", "Evicted", "Requeued", "Deactivated")
"""The run's Kueue events that change a Workload's conditions."""


def workload_name(key: str) -> str:
    """A Job's Workload as Kueue names it, `job-<name>-<hash>` (`GetWorkloadNameForOwnerWithGVK`), without
    the hash of the Job's UID that a real cluster appends."""
    return f"job-{_pod_name(key)}"


def _kueue_explain(result: Result, key: str, at: float) -> Explanation:
    """The Workload's state at `at` in Kueue's words: the message of its QuotaReserved=False condition
    while it waits (`scheduler.go: requeueAndUpdate`), of its Preempted or Evicted condition after an
    eviction, `Quota reserved in ClusterQueue <name>` (`workload.go: SetQuotaReservation`) once admitted."""
    row = result.jobs[metrics.job_keys(result) == key].iloc[0]
    if row.submit > at:
        return Explanation(key, at, "-", "NotSubmitted", f"the Job is created at t={age(row.submit)}", object="Workload")
    if row.end <= at:
        return Explanation(key, at, "Finished", "Completed", f"Workload '{_namespaced(key)}' is declared finished",
                           [f"its Job completed at t={age(row.end)}"], object="Workload")
    events = result.events[(result.events.job == key) & (result.events.time <= at)]
    state = events[events.kind.isin(KUEUE_STATE_KINDS)]
    if state.empty:
        return Explanation(key, at, "Pending", "Pending", "the Workload has not been considered by an admission "
                           "cycle yet", object="Workload")
    last = state.iloc[-1]
    if last.kind == "QuotaReserved":
        held = metrics.holding(result, at)
        running = int(((held.job == key) & (held.status == "Running")).sum())
        pods = sum(t.replicas_resolved for t in result.scenario.jobs[_job_index(result, key)].tasks)
        return Explanation(key, at, "Admitted", "QuotaReserved", f"Quota reserved in ClusterQueue {row.queue}",
                           [f"{running}/{pods} pods running"], object="Workload")
    if last.kind in ("Preempted", "Evicted"):
        why = state[state.time == last.time]
        preempted = why[why.kind == "Preempted"]
        first = preempted.iloc[0] if len(preempted) else last
        return Explanation(key, at, "Pending", first.reason, first.message,
                           [f"evicted at t={age(last.time)} and requeued in ClusterQueue {row.queue}"], object="Workload")
    return Explanation(key, at, "Inactive" if last.kind == "Deactivated" else "Pending", last.reason, last.message,
                       object="Workload")


def _namespaced(key: str) -> str:
    namespace = key.split("/", 1)[0]
    return f"{namespace}/{workload_name(key)}"


def _job_index(result: Result, key: str) -> int:
    return int(np.flatnonzero(metrics.job_keys(result) == key)[0])


def _kueue_events(result: Result, events: pd.DataFrame) -> list[tuple]:
    """`kubectl get events` of a Kueue run, as Kueue's scheduler, eviction and job reconciler write them:
    the Job's CreatedWorkload, Started, Stopped and FinishedWorkload (`jobframework/reconciler.go`), the
    Workload's QuotaReserved and Admitted (`scheduler.go: recordWorkloadAdmissionMetrics`), its Warning
    while it waits (`requeueAndUpdate`: the QuotaReserved=False reason and message), EvictedDueTo<reason>
    (`workload/evict/evict.go: reportEvictedWorkload`) and Preempted with both priorities
    (`preemption.go`; no priority boost here). QuotaReserved's wait counts from the Job's creation or its
    last eviction (the Requeued condition's transition, `QueuedWaitTime`). Kueue records no event for a
    requeue's backoff, and the run's deactivation is read with `explain`."""
    keys = metrics.job_keys(result)
    queue, priority = dict(zip(keys, result.jobs.queue)), dict(zip(keys, result.jobs.priority))
    queued: dict[str, float] = {}
    out = []
    for e in events.itertuples():
        wl, job, cq = f"workload/{workload_name(e.job)}", f"job/{_pod_name(e.job)}", queue[e.job]
        if e.kind == "Submitted":
            queued[e.job] = e.time
            out.append((e.time, "Normal", "CreatedWorkload", job, f"Created Workload: {_namespaced(e.job)}"))
        elif e.kind == "QuotaReserved":
            wait = e.time - queued.get(e.job, e.time)
            out += [(e.time, "Normal", "QuotaReserved", wl,
                     f"Quota reserved in ClusterQueue {cq}, wait time since queued was {wait:.0f}s"),
                    (e.time, "Normal", "Admitted", wl, f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
                    (e.time, "Normal", "Started", job, f"Admitted by clusterQueue {cq}")]
        elif e.kind == "Pending":
            out.append((e.time, "Warning", e.reason, wl, e.message))
        elif e.kind == "Preempted" or (e.kind == "Evicted" and e.reason == "PodsReadyTimeout"):
            queued[e.job] = e.time
            cause = "Preempted" if e.kind == "Preempted" else e.reason
            out.append((e.time, "Normal", f"EvictedDueTo{cause}", wl, e.message))
            if e.kind == "Preempted":
                preemptor = _PREEMPTOR.search(e.message)
                mine, theirs = priority[e.job], priority.get(preemptor.group(1), 0) if preemptor else 0
                priorities = (f"; preemptor effective priority: {theirs} (base: {theirs}, boost: 0); "
                              f"preemptee effective priority: {mine} (base: {mine}, boost: 0)")
                out.append((e.time, "Normal", "Preempted", wl, e.message + priorities))
            out.append((e.time, "Normal", "Stopped", job, e.message))
        elif e.kind == "Completed":
            out.append((e.time, "Normal", "FinishedWorkload", job, f"Workload '{_namespaced(e.job)}' is declared finished"))
    return out


_PREEMPTOR = re.compile(r"\(UID: ([^,)]+)")
"""The preemptor in a preemption message: the engine writes the Workload's key where Kueue writes its UID."""
