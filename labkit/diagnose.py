"""Why is it pending? Answers in the scheduler's own words, read from a `Result`.

`explain(result, job, at=t)` rebuilds the cluster at `t` (`labkit.metrics.snapshot`), opens a
session of the reference engine on it and asks the engine's own plugins: the enqueue votes
(proportion, capacity, overcommit), Overused and Allocatable for the queue, the predicates per
node, and one real session to see whether the gang would be bound or pipelined. The messages
follow the real ones: kube-scheduler's ``0/N nodes are available: ...`` histogram, Volcano's PodGroup
``<n>/<m> tasks in gang unschedulable: pod group is not ready, ...`` condition, proportion's
``queue resource quota insufficient`` and overcommit's ``resource in cluster is overused`` events,
and the Kubernetes ResourceQuota admission error.

Also here: a gang-deadlock detector, a starvation report and event views shaped like
``kubectl get events`` and ``kubectl describe podgroup``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import metrics
from .engine.framework import REJECT, JobInfo, QueueInfo, Session, TaskInfo
from .engine.problem import ARG_DEFAULTS, PODS, Arg, Ext, Plugin, PodGroupPhase, TaskStatus
from .engine.volcano.reference import run_session
from .spec.quantity import parse_quantity

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

    @property
    def slurm_reason(self) -> str:
        return SLURM_REASON[self.reason]

    def __str__(self) -> str:
        lines = [f"{self.job} at t={age(self.at)}: PodGroup {self.phase} — {self.reason}", f"  {self.message}"]
        lines += [f"  {line}" for line in self.details]
        if self.condition and self.condition != self.message:
            lines.append(f"  PodGroup condition Unschedulable: {self.condition}")
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
    """Why `job` is not running at `at` (or that it is), from the engine's own verdicts on the snapshot."""
    key = _key(result, job)
    row = result.jobs[metrics.job_keys(result) == key].iloc[0]
    if row.submit > at:
        return Explanation(key, at, "-", "NotSubmitted", f"the vcjob is created at t={age(row.submit)}")
    if row.end <= at:
        return Explanation(key, at, "Completed", "Completed", f"completed at t={age(row.end)}")
    snap = metrics.snapshot(result, at)
    j = snap.local_job(key)
    ssn = snap.session()
    info = ssn.jobs[j]
    phase = PodGroupPhase(int(snap.state.job_phase[j])).name.title()
    queue = ssn.queues[info.queue]
    quota = _quota_exceeded(result, key, at)
    if info.phase == PodGroupPhase.RUNNING:
        running = len(info.with_status(TaskStatus.RUNNING))
        return Explanation(key, at, phase, "Running", f"{running}/{len(info.tasks)} pods running, "
                                                      f"{info.min_available} minAvailable")
    if info.phase == PodGroupPhase.PENDING:
        return _not_enqueued(key, at, phase, ssn, info, queue, quota)
    return _not_allocated(key, at, phase, snap, ssn, info, queue, quota)


def _gang_message(info: JobInfo, pending: dict[str, int] | None = None) -> str:
    """gang OnSessionClose: `<minAvailable - ready>/<#tasks> tasks in gang unschedulable: <JobInfo.FitError()>`."""
    statuses: dict[str, int] = {}
    for t in info.tasks:
        name = TaskStatus(t.status).name.title()
        statuses[name] = statuses.get(name, 0) + 1
    statuses["minAvailable"] = info.min_available
    text = "pod group is not ready, " + ", ".join(sorted(f"{v} {k}" for k, v in statuses.items()))
    if pending:
        text += "; Pending: " + ", ".join(sorted(f"{v} {k}" for k, v in pending.items()))
    unready = max(0, info.min_available - info.ready_task_num())
    return f"{unready}/{len(info.tasks)} tasks in gang unschedulable: {text}"


def _plugin(entry) -> str:
    return Plugin(entry.kind).name.lower()


def _not_enqueued(key, at, phase, ssn: Session, info: JobInfo, queue: QueueInfo, quota: list[str]) -> Explanation:
    """A Pending PodGroup: no pods yet; the enqueue action's JobEnqueueable votes decide."""
    gang = _gang_message(info)
    rejected = [entry for entry, fn in ssn._all("jobEnqueueable", Ext.JOB_ENQUEUED) if fn(info) == REJECT]
    if not queue.open:
        return Explanation(key, at, phase, "QueueClosed", f'queue "{queue.name}" is Closed', quota, gang)
    if not rejected:
        return Explanation(key, at, phase, "WaitingForSession",
                           "every JobEnqueueable vote permits it: the next session's enqueue makes it Inqueue",
                           quota, gang)
    entry = rejected[0]
    name = _plugin(entry)
    if name == "overcommit":
        return Explanation(key, at, phase, "ClusterOverused", "resource in cluster is overused",
                           [f"overcommit: {_overcommit_room(ssn, info, entry)}", *quota], gang)
    attr = entry.plugin.attrs[info.queue]
    need = info.min_resources
    future = need + attr.allocated + attr.inqueue - attr.elastic
    lines = [f"{name}: minResources + allocated + inqueue - elastic > realCapability of queue \"{queue.name}\""]
    lines += [f"  {res}: {v:g} + {a:g} + {i:g} - {e:g} = {f:g} > {c:g}" for res, v, a, i, e, f, c in _dims(
        ssn, need, need, attr.allocated, attr.inqueue, attr.elastic, future, attr.real_capability) if f > c]
    capability = metrics.to_units(ssn.problem, np.nan_to_num(queue.capability, nan=np.inf))
    named = {r: v for r, v in capability.items() if math.isfinite(v)}
    if named:
        lines.append("queue capability: " + ", ".join(f"{r}={v:g}" for r, v in named.items()))
    return Explanation(key, at, phase, "QueueResourceQuotaInsufficient", "queue resource quota insufficient",
                       [*lines, *quota], gang)


def _dims(ssn: Session, mask: np.ndarray, *vectors: np.ndarray):
    """(resource, values...) in scenario units for the dimensions `mask` names (pods left out)."""
    names = ssn.problem.resource_names
    units = [metrics.to_units(ssn.problem, v) for v in vectors]
    for r, name in enumerate(names):
        if r != PODS and mask[r] > 0:
            yield (name, *(u[name] for u in units))


def _overcommit_room(ssn: Session, info: JobInfo, entry) -> str:
    """The numbers overcommit compares, on the dims where the job does not fit: inqueue + minResources > total x factor - used."""
    factor = float(entry.args[Arg.OVERCOMMIT_FACTOR])
    factor = factor if factor >= 1.0 else ARG_DEFAULTS[Arg.OVERCOMMIT_FACTOR]  # NaN (not given) included
    used = sum((n.used for n in ssn.nodes), np.zeros(ssn.problem.n_resources))
    inqueue = sum((j.min_resources for j in ssn.jobs if j.phase == PodGroupPhase.INQUEUE and j.min_resources is not None),
                  np.zeros(ssn.problem.n_resources))
    room = ssn.total_resource * factor - used
    parts = [f"{res}: inqueue {i:g} + job {m:g} > total {t:g} x {factor:g} - used {u:g} = {r:g}"
             for res, m, i, t, u, r in _dims(ssn, info.min_resources, info.min_resources, inqueue, ssn.total_resource,
                                           used, room) if i + m > r]
    return "; ".join(parts) or "idle room exhausted"


def _not_allocated(key, at, phase, snap, ssn: Session, info: JobInfo, queue: QueueInfo, quota: list[str]) -> Explanation:
    """An Inqueue PodGroup with Pending pods: queue checks, then the node predicates, then the gang."""
    pending = info.with_status(TaskStatus.PENDING)
    attr = metrics.queue_attrs(ssn).get(queue.index)
    if ssn.overused(queue) and attr is not None:
        lines = [f"{res}: deserved {d:g} <= allocated {a:g}" for res, d, a in _dims(
            ssn, attr.deserved + attr.allocated, attr.deserved, attr.allocated)]
        return Explanation(key, at, phase, "QueueOverused", f'queue "{queue.name}" is overused: allocate skips it',
                           [*lines, *quota], _gang_message(info))
    for task in _one_per_role(pending):
        refused = [e for e, fn in ssn._all("allocatable", Ext.ALLOCATABLE) if not fn(queue, task)]
        if refused:
            entry = refused[0]
            attr = entry.plugin.attrs[queue.index]
            limit = attr.deserved if _plugin(entry) == "proportion" else attr.real_capability
            word = "deserved" if _plugin(entry) == "proportion" else "realCapability"
            lines = [f"{res}: allocated {a:g} + request {r:g} = {a + r:g} > {word} {d:g}" for res, a, r, d in _dims(
                ssn, task.request, attr.allocated, task.request, limit) if a + r > d + 1e-9]
            return Explanation(key, at, phase, "QueueDeservedExceeded",
                               f'queue "{queue.name}": {task.name} is not allocatable ({_plugin(entry)})',
                               [*lines, *quota], _gang_message(info))
    decisions = run_session(snap.problem, snap.state)
    mine = {t.index for t in info.tasks}
    if any(b.task in mine for b in decisions.binds):
        return Explanation(key, at, phase, "WaitingForSession", "the next session binds the gang", [*quota])
    pipelined = [b for b in decisions.pipelined if b.task in mine]
    fit = {t.index: _node_reasons(snap, ssn, t) for t in pending}
    schedulable = sum(1 for reasons in fit.values() if reasons.unavailable < len(ssn.nodes))
    histogram = {"Schedulable": schedulable, "Unschedulable": len(pending) - schedulable}
    gang = _gang_message(info, {k: v for k, v in histogram.items() if v})
    failing = next((r for r in fit.values() if r.unavailable == len(ssn.nodes)), None)
    if pipelined:
        nodes = sorted({snap.problem.node_names[b.node] for b in pipelined if b.node >= 0})
        return Explanation(key, at, phase, "Pipelined",
                           f"{len(pipelined)} pod(s) pipelined on {', '.join(nodes)}: waiting for Releasing pods",
                           quota, gang)
    if failing is not None:
        return Explanation(key, at, phase, "Unschedulable", failing.message(len(ssn.nodes)), quota, gang)
    return Explanation(key, at, phase, "NotEnoughResources", gang,
                       ["every pod fits some node alone, but not the whole gang at once", *quota], gang)


def _one_per_role(tasks: list[TaskInfo]) -> list[TaskInfo]:
    seen: dict[str, TaskInfo] = {}
    for t in tasks:
        seen.setdefault(t.role, t)
    return list(seen.values())


@dataclass
class NodeReasons:
    """Per-node filter failures of one pod, counted as kube-scheduler counts them."""

    counts: dict[str, int]
    unavailable: int

    def message(self, n_nodes: int) -> str:
        """`0/N nodes are available: <count> <reason>, ...` (reasons sorted as strings, as kube does)."""
        parts = sorted(f"{v} {k}" for k, v in self.counts.items())
        return f"{n_nodes - self.unavailable}/{n_nodes} nodes are available: {', '.join(parts)}."


def _node_reasons(snap: metrics.Snapshot, ssn: Session, task: TaskInfo) -> NodeReasons:
    """Why each node refuses `task` now: selector and taints (from the scenario's pools), max pods, then fit on Idle.

    Scenario checks make sure some pool passes the selector and taints, so a pod always has a
    node it could run on once room is made.
    """
    scenario = snap.compiled.scenario
    pool_of = {name: pool for pool in scenario.cluster.pools for name in pool.node_names()}
    job = scenario.jobs[int(snap.jobs[task.job])]
    spec = next(t for t in job.tasks if t.name == task.role)
    counts: dict[str, int] = {}
    unavailable = 0
    for node in ssn.nodes:
        reasons: list[str] = []
        pool = pool_of[node.name]
        if any(pool.labels.get(k) != v for k, v in spec.node_selector.items()):
            reasons.append("node(s) didn't match Pod's node affinity/selector")
        reasons += [f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}" for taint in pool.taints
                    if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in spec.tolerations)]
        if not reasons:
            if node.allocatable[PODS] <= len(node.pods):
                reasons.append("Too many pods")
            reasons += [f"Insufficient {name}" for r, name in enumerate(ssn.problem.resource_names)
                        if r != PODS and task.request[r] > node.idle[r] + 1e-9]
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        unavailable += bool(reasons)
    return NodeReasons(counts, unavailable)


def _quota_exceeded(result: Result, key: str, at: float) -> list[str]:
    """ResourceQuota admission for the job's pods: the API server's `exceeded quota` error, if the namespace's
    requests at `at` plus the job's would pass `spec.hard` (the refusals the run made are its Rejected events)."""
    namespace = key.split("/")[0]
    tenant = next((t for t in result.scenario.tenants if t.ns == namespace and t.resource_quota), None)
    if tenant is None:
        return []
    held = metrics.holding(result, at)
    held = held[(held.job.map(lambda name: name.split("/")[0]) == namespace) & (held.job != key)]
    job = result.scenario.jobs[int(np.flatnonzero(metrics.job_keys(result) == key)[0])]
    requested = {res: 0.0 for res in held.columns}
    for task in job.tasks:
        for res, amount in task.resources.items():
            requested[res] = requested.get(res, 0.0) + task.replicas_resolved * parse_quantity(amount)
    requested["pods"] = float(sum(t.replicas_resolved for t in job.tasks))
    over = []
    for name, limit in tenant.resource_quota.hard.items():
        res = name.removeprefix("requests.").removeprefix("count/")
        if res not in requested:
            continue
        used = float(held[res].sum()) if res in held else 0.0
        if used + requested[res] > parse_quantity(limit) + 1e-9:
            over.append((name, requested[res], used, parse_quantity(limit)))
    if not over:
        return []
    requested_text = ",".join(f"{n}={r:g}" for n, r, _, _ in over)
    used_text = ",".join(f"{n}={u:g}" for n, _, u, _ in over)
    limited_text = ",".join(f"{n}={lim:g}" for n, _, _, lim in over)
    return [(f'pods "{job.name}-{job.tasks[0].name}-0" is forbidden: exceeded quota: {tenant.name}, '
             f"requested: {requested_text}, used: {used_text}, limited: {limited_text} "
             "(a real API server refuses these pods; the simulator does not model ResourceQuota admission)")]


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


_EVENT_VIEW = {
    # kind: (type, reason, object kind, message format)
    "Submitted": ("Normal", "Created", "podgroup", "PodGroup created in queue {queue}"),
    "Enqueued": ("Normal", "Enqueued", "podgroup", "{message}"),
    "Bound": ("Normal", "Scheduled", "pod", "Successfully assigned {task} to {node}"),
    "Pipelined": ("Normal", "Pipelined", "pod", "{message}"),
    "Started": ("Normal", "Running", "podgroup", "{message}"),
    "Evicted": ("Warning", "Evict", "pod", "{reason}: {message}"),
    "Restarting": ("Warning", "PodEvicted", "podgroup", "{message}"),
    "Deleted": ("Normal", "Killing", "pod", "Stopping container on {node}"),
    "Completed": ("Normal", "Completed", "podgroup", "all tasks completed"),
}


def get_events(result: Result, job: str | None = None, since: float = -math.inf,
               until: float = math.inf) -> pd.DataFrame:
    """The run's events as `kubectl get events` lists them: TIME, TYPE, REASON, OBJECT, MESSAGE."""
    events = result.events[(result.events.time >= since) & (result.events.time <= until)]
    if job is not None:
        events = events[events.job == _key(result, job)]
    queue = metrics.queue_of(result)
    rows = []
    for e in events.itertuples():
        kind, reason, obj, text = _EVENT_VIEW[e.kind]
        name = (e.task if obj == "pod" else e.job).split("/", 1)[1]
        rows.append({"TIME": f"t={age(e.time)}", "TYPE": kind, "REASON": reason, "OBJECT": f"{obj}/{name}",
                     "MESSAGE": text.format(queue=queue.get(e.job, ""), task=e.task, node=e.node, reason=e.reason,
                                            message=e.message)})
    return pd.DataFrame(rows, columns=["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"])


def describe_podgroup(result: Result, job: str, at: float) -> str:
    """`kubectl describe podgroup` at `at`: spec (minMember, minResources, queue), status phase and the
    Unschedulable condition the scheduler would write, then the PodGroup's events so far."""
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
    events = get_events(result, key, until=at)
    events = events[events.OBJECT == f"podgroup/{name}"]
    lines += ["Events:", "  Type     Reason         Age      Message", "  ----     ------         ---      -------"]
    times = result.events[(result.events.job == key) & (result.events.time <= at)]
    for row, t in zip(events.itertuples(), times[times.kind.map(lambda k: _EVENT_VIEW[k][2] == "podgroup")].time):
        lines.append(f"  {row.TYPE:<8} {row.REASON:<14} {age(at - t):<8} {row.MESSAGE}")
    if why.condition:
        lines.append(f"  {'Warning':<8} {'Unschedulable':<14} {'0s':<8} {why.condition}")
    return "\n".join(lines)


def _quantity(resource: str, value: float) -> str:
    """A quantity as kubectl prints it: memory in Gi/Mi when whole, else the plain number."""
    if resource == "memory":
        for suffix, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20)):
            if value >= size and value % size == 0:
                return f"{value / size:g}{suffix}"
    return f"{value:g}"
