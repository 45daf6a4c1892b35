"""Scenario -> Problem: the whole scenario as flat arrays, the way Volcano's objects would look.

`compile_scenario` expands workload generators, applies what the API server and Volcano's
controllers would do to the objects a lab writes, and returns a `Compiled`: the `Problem` (every
PodGroup and pod the scenario will ever create, see `labkit.engine.problem`) plus the timing the
simulator needs (submit times, run times, checkpoints, grace periods, node speeds).

What is applied, as on a real cluster:
* vcjob webhook defaults: task.minAvailable = replicas, job.minAvailable = sum of them;
* vcjob controller: one PodGroup per job (minMember, minTaskMember per task, minResources from
  the first minAvailable pods as `calcPGMinResources` sums them); pods named `<job>-<task>-<i>`
  that inherit the job's priorityClassName;
* PriorityClass admission: pod priority and preemptionPolicy from the class, or from the
  globalDefault class, else 0;
* LimitRange: containers without a cpu/memory request get `defaultRequest` (else `default`);
* the `volcano.sh/preemptable` annotation from `preemptible`;
* Volcano's own `default` queue, created by the scheduler before any user queue.

What differs by policy family comes from the family's own folder as `FamilyRules`
(`families.py` compiles each family's scenarios with its rules): the Policy of its scheduler
section, the pod request as its scheduler allocates it, the Problem fields only it reads, and
whether its jobs live in namespaces, whose ResourceQuotas become the admission the clock applies
when it creates pods (`labkit.engine.quotas`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as default
from functools import cached_property, partial

import numpy as np
import pandas as pd

from ..errors import SpecError
from ..spec import Scenario, scheduler_of
from ..spec.base import DEFAULT_MAX_PODS
from ..spec.checks import placement_levels
from ..spec.model import NodePool, Queue, Task, Tenant, WorkloadClass
from ..spec.quantity import parse_duration
from ..spec.timeline import node_events
from ..workloads import JobTable, expand, job_table
from .events import CH_CONF, CH_PRIORITY_CLASS, CH_QUEUE, CHANGE_LOGGED, NODE_KINDS
from .problem import (
    BASE_RESOURCES,
    PODS,
    LazyNames,
    Policy,
    Problem,
    is_best_effort,
    resource_vector,
)
from .quotas import ResourceQuotas, resource_quotas

CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")


@dataclass(frozen=True)
class FamilyTables:
    """The Problem fields a family adds (see ``labkit.engine.problem.Problem``) plus each job's
    termination grace period, which replaces the pods' own."""

    fields: dict
    job_grace: np.ndarray


@dataclass(frozen=True)
class FamilyRules:
    """What a policy family brings to the shared compile, from its own folder."""

    policy: Callable[[Scenario, list[str]], Policy]
    """The Policy of the scenario's scheduler section over these resource names (SpecError naming
    the field it refuses)."""
    request: Callable[[np.ndarray], np.ndarray] | None = None
    """A pod's request vector (pods = 1) as the family's scheduler allocates it; None: as asked."""
    tables: Callable[[Scenario, list[str]], FamilyTables] | None = None
    """The family's own Problem fields from the scenario and the pool of each node. A family with
    tables reads each job, so its scenario is compiled with its generators expanded."""
    namespaces: bool = True
    """Jobs live in Kubernetes namespaces, whose ResourceQuotas admit the pods they create."""
    node_events: Callable[[Policy], str | None] | None = None
    """Why the family's engines cannot run this policy's node events (``cluster.events``), or None
    when they can; no function: they never can."""
    changes: bool = False
    """The family's reference engine applies ``changes`` (Queues, PriorityClasses, its conf in time)."""


@dataclass(frozen=True)
class Compiled:
    """A Problem plus the timing the simulator needs, all indexed like the Problem.

    * ``job_submit`` (J,) seconds; ``job_work`` (J,) seconds of run time at speed 1;
      ``job_uses_speed`` (J,) bool: run time scales with the slowest node speed (`work`) or not
      (`duration`); ``job_checkpoint`` (J,) seconds between checkpoints, inf = none;
      ``job_restart_cost`` (J,) seconds added to every run after an eviction;
      ``job_grace`` (J,) termination grace period of its pods; ``node_speed`` (N,).
    * ``job_pods`` (J+1,) offsets: the tasks of job j are ``job_pods[j]:job_pods[j+1]``.
    * ``horizon`` seconds, inf when the scenario sets none; ``schedule_period`` seconds.
    * ``quotas``: the ResourceQuota admission of pod creation (Kubernetes policies), or None.
    * ``change_time`` (C,) the times of ``changes`` in time order (ties as written); per change its
      ``change_patch``, the Problem fields it sets (whole arrays, the earlier changes applied), and
      ``change_said``, the (kind, reason, message) it logs.
    * ``event_time``, ``event_node``, ``event_kind`` (E,): the node events (``cluster.events``, a
      pool's expanded to its nodes) in the order they happen (time, then as written), the kind
      coded as in ``events.NODE_KINDS``.
    * the job progress model (``workloadClasses``): ``job_class`` (J,) the row of the class tables
      a job progresses by (-1: none, the run time is as above); ``class_speed`` (C, M) its speed
      per GPU model, ``node_model`` (N,) each node's column (the last: no gpuModel, speed 1);
      ``class_placement`` (C, L) its rate factor per level its gang spans (0: one node, k: inside
      a HyperNode of tier k, the last: the cluster); ``class_scaling`` (C, S) its throughput with
      n running pods (column n; ones without a curve). A job with a ``placement`` of its own has
      a row of its own.
    * ``source``: the scenario as given; ``jobs``: its jobs as columns (generated ones included);
      ``scenario``: the scenario with its generators expanded (made on first use), whose
      ``jobs[j]`` is job j of the Problem.
    """

    problem: Problem
    source: Scenario
    jobs: JobTable
    job_submit: np.ndarray
    job_work: np.ndarray
    job_uses_speed: np.ndarray
    job_checkpoint: np.ndarray
    job_restart_cost: np.ndarray
    job_grace: np.ndarray
    job_pods: np.ndarray
    node_speed: np.ndarray
    horizon: float
    schedule_period: float
    quotas: ResourceQuotas | None = None
    event_time: np.ndarray = default(default_factory=lambda: np.zeros(0))
    event_node: np.ndarray = default(default_factory=lambda: np.zeros(0, np.int64))
    event_kind: np.ndarray = default(default_factory=lambda: np.zeros(0, np.int64))
    change_time: np.ndarray = default(default_factory=lambda: np.zeros(0))
    change_patch: tuple[dict, ...] = ()
    change_said: tuple[tuple[str, str, str], ...] = ()

    def problem_at(self, at: float) -> Problem:
        """The Problem as the changes up to `at` left it (the sessions after `at` read it); the
        pods' priorities stay as compiled (a pod keeps the priority it was created with)."""
        later = int(np.searchsorted(self.change_time, at, side="right"))
        if not later:
            return self.problem
        patch: dict = {}
        for change in self.change_patch[:later]:  # each holds whole arrays: the last one of a field wins
            patch.update(change)
        patch.pop("task_priority", None)
        return dataclasses.replace(self.problem, **patch)
    job_class: np.ndarray = default(default_factory=lambda: np.zeros(0, np.int64))
    class_speed: np.ndarray = default(default_factory=lambda: np.ones((1, 1)))
    node_model: np.ndarray = default(default_factory=lambda: np.zeros(0, np.int64))
    class_placement: np.ndarray = default(default_factory=lambda: np.ones((1, 2)))
    class_scaling: np.ndarray = default(default_factory=lambda: np.ones((1, 1)))

    @cached_property
    def scenario(self) -> Scenario:
        return expand(self.source)


@dataclass(frozen=True)
class _Variant:
    """The pods of one job shape in one namespace (LimitRange defaults differ per namespace): per
    pod its task k, index i, role, request row, best-effort flag and feasibility class; per task
    its raw vector (what calcPGMinResources sums), minimum and replicas."""

    pod_task: np.ndarray
    pod_index: np.ndarray
    pod_role: np.ndarray
    pod_request: np.ndarray
    pod_best_effort: np.ndarray
    pod_class: np.ndarray
    min_task: np.ndarray
    raw: list
    mins: list
    replicas: list


def compile_with(rules: FamilyRules, scenario: Scenario, table: JobTable | None = None) -> Compiled:
    """Compile a (validated) Scenario under its family's rules; bad combinations raise SpecError
    naming the field. (`families.compile_scenario` picks the rules of the scenario's scheduler.)

    Jobs are read as columns (`labkit.workloads.job_table`, or ``table`` when the caller made it
    already): the work per job is array work, the Python work is per job shape (tasks, requests,
    node classes) and per namespace."""
    if rules.tables is not None:
        scenario = expand(scenario)
        table = None
    if table is None:
        table = job_table(scenario)
    n_jobs = len(table)
    tenants = {t.ns: t for t in scenario.tenants}
    ns_code, namespaces = pd.factorize(table.namespace)
    var_code, var_keys = pd.factorize(table.shape * max(len(namespaces), 1) + ns_code)
    first = first_positions(var_code)
    shapes = [table.shapes[int(k) // max(len(namespaces), 1)] for k in var_keys]
    pod_requests = [[_pod_request(task, tenants.get(namespaces[ns_code[j]])) for task in tasks]
                    for tasks, j in zip(shapes, first)]
    resources = _resource_names(scenario, pod_requests)

    nodes = [(pool, name) for pool in scenario.cluster.pools for name in pool.node_names()]
    pools = scenario.cluster.pools
    node_alloc = np.repeat(np.array([
        resource_vector(resources, {"pods": DEFAULT_MAX_PODS, **pool.resources}, f"cluster.pools[{i}].resources")
        for i, pool in enumerate(pools)], float).reshape(len(pools), len(resources)),
        [pool.count for pool in pools], axis=0)

    queues = _queues(scenario)
    queue_index = {q["name"]: i for i, q in enumerate(queues)}
    role_names = sorted({task.name for tasks in table.shapes for task in tasks})
    role_index = {r: i for i, r in enumerate(role_names)}
    feasibility: dict[tuple, int] = {}
    class_rows: list[np.ndarray] = []
    failure_rows: list[list[str]] = []
    vector = _RequestVectors(resources, rules.request)
    variants = [_variant(tasks, requests, f"jobs[{j}]", vector, role_index, nodes, feasibility, class_rows,
                         failure_rows) for tasks, requests, j in zip(shapes, pod_requests, first)]

    priority, never, critical = _priorities(scenario, table)
    n_res = len(resources)
    pods_of = np.array([len(v.pod_task) for v in variants], np.int64)[var_code]
    job_pods = np.concatenate([[0], np.cumsum(pods_of)]).astype(np.int64)
    task_job = np.repeat(np.arange(n_jobs, dtype=np.int64), pods_of)
    n_tasks = len(task_job)
    offsets = np.concatenate([[0], np.cumsum([len(v.pod_task) for v in variants])]).astype(np.int64)
    row = offsets[var_code[task_job]] + np.arange(n_tasks) - job_pods[task_job]

    def pods(field: str, dtype, width: int | None = None) -> np.ndarray:
        empty = np.zeros((0, width) if width is not None else 0, dtype)
        return np.concatenate([getattr(v, field) for v in variants] or [empty]).astype(dtype)[row]

    min_task = (np.array([v.min_task for v in variants], np.int64).reshape(len(variants), len(role_names))[var_code]
                if n_jobs else np.zeros((0, len(role_names)), np.int64))
    need = np.where(table.min_available >= 0, table.min_available,
                    np.array([sum(v.mins) for v in variants], np.int64)[var_code] if n_jobs else 0)
    res_code, res_keys = pd.factorize(var_code.astype(np.int64) * (int(need.max()) + 1 if n_jobs else 1) + need)
    of = first_positions(res_code)
    min_res = np.array([_min_resources(int(n), variants[v].mins, variants[v].replicas, variants[v].raw)
                        for v, n in zip(var_code[of], need[of])], float).reshape(len(res_keys), n_res)[res_code]

    qualified = np.asarray(table.namespace, object) + "/" + np.asarray(table.name, object)
    names = tuple(qualified.tolist())
    task_index = pods("pod_index", np.int64)
    task_role = pods("pod_role", np.int64)
    task_names = LazyNames(partial(_pod_names, qualified, role_names, task_job, task_role, task_index), n_tasks)
    reasons = sorted({r for row_ in failure_rows for r in row_} - {""})
    reason_index = {r: i + 1 for i, r in enumerate(reasons)}
    extra = {"failure_reasons": ("", *reasons), "class_node_failure": np.array(
        [[reason_index.get(r, 0) for r in row_] for row_ in failure_rows], np.int64).reshape(len(class_rows), len(nodes))}
    grace = table.grace
    if rules.tables is not None:
        tables = rules.tables(scenario, [pool.name for pool, _ in nodes])
        extra.update(tables.fields)
        grace = tables.job_grace
    problem = Problem(
        resource_names=tuple(resources),
        node_names=tuple(name for _, name in nodes),
        node_allocatable=node_alloc,
        node_schedulable=np.ones(len(nodes), bool),
        queue_names=tuple(q["name"] for q in queues),
        queue_weight=np.array([q["weight"] for q in queues], float),
        queue_capability=_queue_matrix(queues, "capability", resources),
        queue_deserved=_queue_matrix(queues, "deserved", resources),
        queue_guarantee=_queue_matrix(queues, "guarantee", resources),
        queue_priority=np.array([q["priority"] for q in queues], np.int64),
        queue_parent=np.array([queue_index.get(q["parent"], -1) for q in queues], np.int64),
        queue_reclaimable=np.array([q["reclaimable"] for q in queues], bool),
        queue_open=np.array([q["state"] == "Open" for q in queues], bool),
        queue_rank=np.arange(len(queues), dtype=np.int64),
        role_names=tuple(role_names),
        job_names=names,
        job_queue=_codes(table.queue, queue_index),
        job_priority=priority,
        job_min_member=need.astype(np.int64),
        job_min_task_member=min_task,
        job_min_resources=min_res,
        job_has_min_resources=np.ones(n_jobs, bool),
        job_rank=_rank_by_time_then_name(table.submit, names),
        job_creation=table.submit,
        job_sla_waiting=np.full(n_jobs, np.nan),
        job_preemptable=np.zeros(n_jobs, bool),
        task_names=task_names,
        task_job=task_job,
        task_role=task_role,
        task_request=pods("pod_request", float, n_res).reshape(n_tasks, n_res),
        task_priority=priority[task_job],
        task_preempt_never=never[task_job],
        task_preemptable=table.preemptible[task_job],
        task_best_effort=pods("pod_best_effort", bool),
        task_critical=critical[task_job],
        task_index=task_index,
        task_rank=_rank(np.argsort(table.submit[task_job], kind="stable")),
        task_class=pods("pod_class", np.int64),
        class_node_ok=np.array(class_rows, bool).reshape(len(class_rows), len(nodes)),
        policy=rules.policy(scenario, resources),
        job_topology_tier=table.topology_tier,
        job_topology_hard=table.topology_hard,
        **_hypernodes(scenario, [name for _, name in nodes]),
        **extra,
    )
    event_time, event_node, event_kind = _node_events(scenario, rules, problem)
    change_time, change_patch, change_said = _changes(scenario, rules, problem, table)
    return Compiled(
        problem=problem,
        source=scenario,
        jobs=table,
        job_submit=table.submit,
        job_work=table.work,
        job_uses_speed=table.uses_speed,
        job_checkpoint=table.checkpoint,
        job_restart_cost=table.restart_cost,
        job_grace=grace,
        job_pods=job_pods,
        node_speed=np.array([pool.speed for pool, _ in nodes], float),
        horizon=parse_duration(scenario.horizon) if scenario.horizon is not None else math.inf,
        schedule_period=parse_duration(scenario.scheduler.schedule_period),
        quotas=_quotas(scenario, tenants, table, var_code, pod_requests) if rules.namespaces else None,
        event_time=event_time, event_node=event_node, event_kind=event_kind,
        change_time=change_time, change_patch=change_patch, change_said=change_said,
        **_progress(scenario, table, [pool for pool, _ in nodes], problem.job_min_member, job_pods),
    )


def _progress(scenario: Scenario, table: JobTable, node_pools: list[NodePool], min_member: np.ndarray,
              job_pods: np.ndarray) -> dict:
    """The job progress model's tables (``Compiled.job_class`` and the class tables): one row per
    workload class, then one per job with a placement of its own; SpecError naming the scaling
    table that does not cover a job's pod counts (minAvailable to replicas)."""
    classes = list(scenario.workload_classes)
    index = {c.name: k for k, c in enumerate(classes)}
    job_class = np.array([index[c] if c is not None else -1 for c in table.workload_class], np.int64)
    origin = list(range(len(classes)))  # the scenario's class a row is made from
    for j in np.flatnonzero(table.spec >= 0):
        job = scenario.jobs[int(table.spec[j])]
        if job.placement:
            base = classes[job_class[j]] if job_class[j] >= 0 else WorkloadClass(name="job")
            origin.append(origin[job_class[j]] if job_class[j] >= 0 else -1)
            job_class[j] = len(classes)
            classes.append(base.model_copy(update={"placement": {**base.placement, **job.placement}}))
    models = sorted({pool.gpu_model for pool in node_pools if pool.gpu_model is not None})
    model_index = {m: k for k, m in enumerate(models)}
    node_model = np.array([model_index.get(pool.gpu_model, len(models)) for pool in node_pools], np.int64)
    speed = np.array([[c.speeds.get(m, 1.0) for m in models] + [1.0] for c in classes], float).reshape(
        len(classes), len(models) + 1)
    levels = placement_levels(scenario)
    placement = np.ones((len(classes), len(levels)))
    for k, c in enumerate(classes):
        factor = 1.0
        for level, name in enumerate(levels):
            factor = placement[k, level] = c.placement.get(name, factor)
    rated = job_class >= 0
    pods = np.diff(job_pods)
    width = int(pods[rated].max()) + 1 if rated.any() else 1
    scaling = np.ones((len(classes), width))
    for k, c in enumerate(classes):
        if c.scaling is None:
            continue
        mine = np.flatnonzero(job_class == k)
        if not len(mine):
            continue
        low, high = int(max(1, min_member[mine].min())), int(pods[mine].max())
        where = f"workloadClasses[{origin[k]}].scaling.table"
        try:
            scaling[k, low:high + 1] = [c.scaling.throughput(n) for n in range(low, high + 1)]
        except ValueError as err:
            raise SpecError(where, f"{err}; its jobs run with {low} to {high} pods") from None
    return {"job_class": job_class, "class_speed": speed, "node_model": node_model,
            "class_placement": placement, "class_scaling": scaling}


def _node_events(scenario: Scenario, rules: FamilyRules, problem: Problem) -> tuple[np.ndarray, ...]:
    """The node events as the clock reads them (``Compiled.event_*``): ``cluster.events`` and the
    spot pools' drawn interruptions (``spec.timeline``); SpecError naming the field when the
    family's engines cannot run them."""
    spot = next((f"cluster.pools[{k}].spot" for k, pool in enumerate(scenario.cluster.pools) if pool.spot), None)
    if not scenario.cluster.events and spot is None:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    why = rules.node_events(problem.policy) if rules.node_events else "this policy family's engines do not simulate them"
    if why:
        raise SpecError("cluster.events" if scenario.cluster.events else spot, f"node events: {why}")
    node_index = {name: n for n, name in enumerate(problem.node_names)}
    first = {pool.name: (node_index[pool.node_names()[0]], pool.count) for pool in scenario.cluster.pools}
    rows = []
    for i, (_, event) in enumerate(node_events(scenario)):
        lo, count = first[event.node] if event.node in first else (node_index[event.node], 1)
        rows += [(at, i, k, n, NODE_KINDS.index(kind)) for k, (at, kind) in enumerate(event.steps())
                 for n in range(lo, lo + count)]
    rows.sort(key=lambda row: row[:3])
    table = np.array(rows, float).reshape(len(rows), 5)
    return table[:, 0].copy(), table[:, 3].astype(np.int64), table[:, 4].astype(np.int64)


def _changes(scenario: Scenario, rules: FamilyRules, problem: Problem, table: JobTable) -> tuple:
    """``Compiled.change_*``: each change applied, in time order, to the scenario as the earlier
    ones left it, and the Problem fields it sets computed from that scenario as compile does
    (queue arrays, priorities, the Policy); SpecError naming the change the family cannot run."""
    changes = scenario.changes
    if not changes:
        return np.zeros(0), (), ()
    if not rules.changes:
        raise SpecError("changes", "changes in time: this policy family's engines do not simulate them")
    order = sorted(range(len(changes)), key=lambda i: (parse_duration(changes[i].at), i))
    now, patches, said = scenario, [], []
    resources = list(problem.resource_names)
    for i in order:
        change = changes[i]
        if change.queue is not None:
            new = change.queue.model_dump(exclude_unset=True, exclude={"name"})
            queues = [q.model_copy(update=new) if q.name == change.queue.name else q for q in now.queues]
            if change.queue.name not in {q.name for q in now.queues}:  # Volcano's own default queue, first
                queues.insert(0, Queue(name="default", **new))
            now = now.model_copy(update={"queues": queues})
            rows = _queues(now)
            patch = {"queue_weight": np.array([q["weight"] for q in rows], float)}
            patch.update({f"queue_{field}": _queue_matrix(rows, field, resources)
                          for field in ("capability", "deserved", "guarantee")})
            set_ = ", ".join(f"{k}={v}" for k, v in new.items())
            said.append((CHANGE_LOGGED[CH_QUEUE], "Applied", f"queue {change.queue.name}: {set_}"))
        elif change.priority_class is not None:
            name, value = change.priority_class.name, change.priority_class.value
            classes = [p.model_copy(update={"value": value}) if p.name == name else p for p in now.priority_classes]
            now = now.model_copy(update={"priority_classes": classes})
            priority = _priorities(now, table)[0]
            patch = {"job_priority": priority, "task_priority": priority[problem.task_job]}
            said.append((CHANGE_LOGGED[CH_PRIORITY_CLASS], "Applied", f"priorityclass {name}: value={value}"))
        else:
            now = now.model_copy(update={"scheduler": change.scheduler.model_copy(
                update={"schedule_period": scenario.scheduler.schedule_period})})
            try:
                section = scheduler_of(now).section
                policy = rules.policy(now, resources) if section == "conf" else None
            except SpecError as err:
                raise SpecError(f"changes[{i}].scheduler", err.message) from None
            if policy is None:
                raise SpecError(f"changes[{i}].scheduler", f"a new conf keeps the scheduler: give a Volcano policy or "
                                f"conf, not a {section} one")
            if (scenario.cluster.events or any(pool.spot for pool in scenario.cluster.pools)) and rules.node_events:
                why = rules.node_events(policy)
                if why:
                    raise SpecError(f"changes[{i}].scheduler", f"the scenario has node events: {why}")
            patch = {"policy": policy}
            conf = scheduler_of(now).conf
            said.append((CHANGE_LOGGED[CH_CONF], "Applied",
                         f"actions: {', '.join(conf.action_list())}; plugins: "
                         + ", ".join(plugin.name for tier in conf.tiers for plugin in tier.plugins)))
        patches.append(patch)
    times = np.array([parse_duration(changes[i].at) for i in order], float)
    return times, tuple(patches), tuple(said)


def _hypernodes(scenario: Scenario, nodes: list[str]) -> dict:
    """The Problem's HyperNode fields from ``cluster.topology`` (none without one)."""
    topology = scenario.cluster.topology
    if topology is None:
        return {}
    names: list[str] = []
    tiers: list[int] = []
    columns = np.full((len(nodes), len(topology.tiers)), -1, np.int64)
    holds = [[n] for n in range(len(nodes))]  # the nodes each member of the tier below holds
    for k, groups in enumerate(topology.hypernodes(nodes)):
        grouped, at = [], 0
        for name, members in groups:
            inside = [n for member in holds[at:at + len(members)] for n in member]
            at += len(members)
            columns[inside, k] = len(names)
            names.append(name)
            tiers.append(k + 1)
            grouped.append(inside)
        holds = grouped
    return {"hypernode_names": tuple(names), "hypernode_tier": np.array(tiers, np.int64), "node_hypernode": columns}


def _pod_names(jobs: np.ndarray, roles: list[str], task_job: np.ndarray, task_role: np.ndarray,
               task_index: np.ndarray) -> list[str]:
    """``<ns>/<job>-<role>-<index>`` per pod (``jobs``: the jobs' ``<ns>/<job>``)."""
    if not len(task_job):
        return []
    infix = np.array([f"-{role}-" for role in roles], object)
    index = np.array([str(i) for i in range(int(task_index.max()) + 1)], object)
    return (jobs[task_job] + infix[task_role] + index[task_index]).tolist()


def _variant(tasks: tuple[Task, ...], requests: list[dict], where: str, vector: _RequestVectors,
             role_index: dict[str, int], nodes: list, feasibility: dict, class_rows: list,
             failure_rows: list) -> _Variant:
    """The pods of a job of these tasks (`where` names its first job, for errors)."""
    fields: dict[str, list] = {k: [] for k in ("task", "index", "role", "request", "best_effort", "cls")}
    raw_rows, mins, replicas = [], [], []
    min_task = np.zeros(len(role_index), np.int64)
    for k, (task, pod) in enumerate(zip(tasks, requests)):
        raw, request, best_effort = vector(pod, f"{where}.tasks[{k}].resources")
        n = task.replicas_resolved
        raw_rows.append(raw)
        mins.append(task.min_available_resolved)
        replicas.append(n)
        min_task[role_index[task.name]] = mins[-1]
        cls = _feasibility_class(task, nodes, feasibility, class_rows, failure_rows)
        for field, value in (("task", k), ("role", role_index[task.name]), ("request", request),
                             ("best_effort", best_effort), ("cls", cls)):
            fields[field] += [value] * n
        fields["index"] += range(n)
    return _Variant(pod_task=np.array(fields["task"], np.int64), pod_index=np.array(fields["index"], np.int64),
                    pod_role=np.array(fields["role"], np.int64),
                    pod_request=np.array(fields["request"], float).reshape(len(fields["task"]), len(vector.resources)),
                    pod_best_effort=np.array(fields["best_effort"], bool), pod_class=np.array(fields["cls"], np.int64),
                    min_task=min_task, raw=raw_rows, mins=mins, replicas=replicas)


def _priorities(scenario: Scenario, table: JobTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job: the PriorityClass value (the globalDefault class when unset, else 0), whether its
    preemptionPolicy is Never, and whether the conformance plugin protects it (critical)."""
    classes = {p.name: p for p in scenario.priority_classes}
    default_class = next((p for p in scenario.priority_classes if p.global_default), None)
    code, names = pd.factorize(table.priority_class)  # unset (None) is code -1, the default class
    found = [classes.get(name) for name in names] + [default_class]
    value = np.array([p.value if p else 0 for p in found], np.int64)[code]
    never = np.array([bool(p and p.preemption_policy == "Never") for p in found], bool)[code]
    critical = (np.array([name in CRITICAL_CLASSES for name in names] + [False], bool)[code]
                | (table.namespace == "kube-system"))
    return value, never, critical.astype(bool)


def _codes(values: np.ndarray, index: dict[str, int]) -> np.ndarray:
    """Each value's index in `index`, by its distinct values."""
    code, distinct = pd.factorize(values)
    return np.array([index[v] for v in distinct], np.int64)[code] if len(values) else np.zeros(0, np.int64)


def first_positions(code: np.ndarray) -> np.ndarray:
    """The first position of each code of `pd.factorize` (which numbers them in that order, so a
    code's first position is where the codes seen so far reach a new maximum)."""
    seen = np.maximum.accumulate(np.concatenate([[-1], code[:-1]])) if len(code) else code
    return np.flatnonzero(code > seen).astype(np.int64)


def _rank(order: np.ndarray) -> np.ndarray:
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _rank_by_time_then_name(time: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """`rank_by((time, name))` without a Python sort of every job: by time, and only the jobs
    that share a time sorted by name."""
    order = np.argsort(time, kind="stable")
    same = np.diff(time[order]) == 0
    if same.any():
        tied = np.flatnonzero(np.concatenate([same, [False]]) | np.concatenate([[False], same]))
        jobs = order[tied]
        order[tied] = jobs[np.lexsort((np.array([names[j] for j in jobs.tolist()]), time[jobs]))]
    return _rank(order)


class _RequestVectors:
    """A pod's requests as vectors, computed once per distinct request (a trace has a handful):
    (what calcPGMinResources sums: the requests plus one pod, the pod's request as the scheduler
    sees it (pods = 1; what the family's `FamilyRules.request` makes of it), whether it is
    best-effort)."""

    def __init__(self, resources: list[str], allocated: Callable[[np.ndarray], np.ndarray] | None):
        self.resources, self.allocated, self.seen = resources, allocated, {}

    def __call__(self, pod: dict, where: str) -> tuple[np.ndarray, np.ndarray, bool]:
        key = tuple(sorted((name, str(value)) for name, value in pod.items()))
        if key not in self.seen:
            raw = resource_vector(self.resources, pod, where)
            request = raw.copy()
            request[PODS] = 1.0
            if self.allocated is not None:
                request = self.allocated(request)
            raw[PODS] += 1.0
            self.seen[key] = (raw, request, is_best_effort(request))
        return self.seen[key]


def _pod_request(task: Task, tenant: Tenant | None) -> dict:
    """The pod's requests after LimitRange defaulting (a container's missing request, from the
    LimitRange's defaults as the API server stores them)."""
    request = dict(task.resources)
    if tenant is not None and tenant.limit_range is not None:
        for item in tenant.limit_range.limits:
            if item.type != "Container":
                continue
            for name, amount in item.stored_default_request.items():
                request.setdefault(name, amount)
    return request


def _resource_names(scenario: Scenario, pod_requests: list[list[dict]]) -> list[str]:
    named = {name for pool in scenario.cluster.pools for name in pool.resources}
    named |= {name for job in pod_requests for pod in job for name in pod}
    for q in scenario.queues:
        named |= set(q.capability) | set(q.deserved) | set(q.guarantee)
    return list(BASE_RESOURCES) + sorted(named - set(BASE_RESOURCES))


def _queues(scenario: Scenario) -> list[dict]:
    """Volcano's `default` queue first (the scheduler creates it at start), then the scenario's."""
    given = [q.model_dump() for q in scenario.queues]
    if not any(q["name"] == "default" for q in given):
        default = {"name": "default", "weight": 1, "capability": {}, "deserved": {}, "guarantee": {},
                   "reclaimable": True, "priority": 0, "parent": "root", "state": "Open"}
        given.insert(0, default)
    return given


def _queue_matrix(queues: list[dict], field: str, resources: list[str]) -> np.ndarray:
    rows = [resource_vector(resources, q[field], f"queues.{q['name']}.{field}", missing=np.nan) for q in queues]
    return np.array(rows, float).reshape(len(queues), len(resources))


def _feasibility_class(task: Task, nodes: list, seen: dict[tuple, int], rows: list[np.ndarray],
                       failures: list[list[str]]) -> int:
    """Group tasks by (nodeSelector, tolerations); each class gets its node mask once, and the
    reason kube-scheduler's filters give on each node it fails."""
    key = (tuple(sorted(task.node_selector.items())), tuple(t.model_dump_json() for t in task.tolerations))
    if key not in seen:
        failure = [filter_failure(task, pool) for pool, _ in nodes]
        seen[key] = len(rows)
        rows.append(np.array([not f for f in failure], bool))
        failures.append(failure)
    return seen[key]


def filter_failure(task: Task, pool: NodePool) -> str:
    """The first of TaintToleration and NodeAffinity that rejects the pod on a node of the pool, as
    its status reason ('' when both pass); both are UnschedulableAndUnresolvable."""
    for taint in pool.taints:
        if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in task.tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    if not all(pool.labels.get(k) == v for k, v in task.node_selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    return ""


def _quotas(scenario: Scenario, tenants: dict[str, Tenant], table: JobTable, variant: np.ndarray,
            pod_requests: list[list[dict]]) -> ResourceQuotas | None:
    """The ResourceQuota admission of every pod: its requests, and its limits (a LimitRange
    `default`; an extended resource's limit is its request)."""
    if not any(t.resource_quota is not None for t in scenario.tenants):
        return None
    pods = []
    for j, (name, namespace, v, shape) in enumerate(zip(table.name, table.namespace, variant, table.shape)):
        tenant = tenants.get(namespace)
        defaults = {}
        if tenant is not None and tenant.limit_range is not None:
            for item in tenant.limit_range.limits:
                if item.type == "Container":
                    defaults.update(item.stored_default)
        for task, requests in zip(table.shapes[shape], pod_requests[v]):
            limits = {**defaults, **{r: x for r, x in requests.items() if "/" in r}}
            pods += [(j, f"{name}-{task.name}-{i}", requests, limits) for i in range(task.replicas_resolved)]
    return resource_quotas(scenario.tenants, table.namespace.tolist(), pods)


def _min_resources(need: int, mins: list[int], replicas: list[int], per_task: list[np.ndarray]) -> np.ndarray:
    """PodGroup minResources as the vcjob controller sums them (`calcPGMinResources`) for a job of
    minAvailable `need` whose tasks have these minima, replicas and per-pod vectors.

    Tasks all share the job's priority here, so their conf order is the priority order.
    """
    total = np.zeros_like(per_task[0])
    if need < sum(mins):
        for count, request in zip(replicas, per_task):
            take = min(need, count)
            total += request * take
            need -= take
            if need <= 0:
                break
        return total
    for m, request in zip(mins, per_task):
        total += request * m
    left = need - sum(mins)
    for m, count, request in zip(mins, replicas, per_task):
        if left <= 0:
            break
        take = min(left, count - m)
        total += request * take
        left -= take
    return total
