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

Under a Slurm policy a pod's cpu becomes what select/cons_tres allocates (whole CPUs, at least one
per node) and the Problem carries the partitions, QOS, associations and time limits
(`labkit.engine.slurm.slurm_tables`). On Kubernetes (Volcano, kube-scheduler, Kueue) the tenants'
ResourceQuotas become the admission the clock applies when it creates pods
(`labkit.engine.kube.resource_quotas`); Slurm has no namespaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import SpecError
from ..spec import Scenario, conf_of, scheduler_of
from ..spec.model import Task, Tenant
from ..spec.quantity import parse_duration
from ..workloads import expand
from .kube import ResourceQuotas, filter_failure, kube_policy, resource_quotas
from .problem import (
    ACTION_NAMES,
    BASE_RESOURCES,
    EXT_NAMES,
    PLUGIN_NAMES,
    PODS,
    Problem,
    is_best_effort,
    policy_from_conf,
    rank_by,
    resource_vector,
)
from .slurm import slurm_policy, slurm_request, slurm_tables

DEFAULT_MAX_PODS = 110
"""kubelet's default `maxPods`, used when a node pool does not list `pods`."""

CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")


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
    """

    problem: Problem
    scenario: Scenario
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


def compile_scenario(scenario: Scenario) -> Compiled:
    """Compile a (validated) Scenario; bad combinations raise SpecError naming the field."""
    scenario = expand(scenario)
    sched = scheduler_of(scenario)
    tenants = {t.ns: t for t in scenario.tenants}
    pod_requests = [[_pod_request(task, tenants.get(job.namespace)) for task in job.tasks] for job in scenario.jobs]
    resources = _resource_names(scenario, pod_requests)

    nodes = [(pool, name) for pool in scenario.cluster.pools for name in pool.node_names()]
    node_alloc = np.array([
        resource_vector(resources, {"pods": DEFAULT_MAX_PODS, **pool.resources}, f"cluster.pools[{i}].resources")
        for i, pool in enumerate(scenario.cluster.pools) for _ in range(pool.count)
    ]).reshape(len(nodes), len(resources))

    queues = _queues(scenario)
    queue_index = {q["name"]: i for i, q in enumerate(queues)}
    classes = {p.name: p for p in scenario.priority_classes}
    default_class = next((p for p in scenario.priority_classes if p.global_default), None)

    role_names = sorted({task.name for job in scenario.jobs for task in job.tasks})
    role_index = {r: i for i, r in enumerate(role_names)}
    feasibility: dict[tuple, int] = {}
    class_rows: list[np.ndarray] = []
    failure_rows: list[list[str]] = []

    task_fields: dict[str, list] = {k: [] for k in (
        "names", "job", "role", "request", "priority", "never", "preemptable", "best_effort", "critical", "index",
        "key", "cls")}
    job_fields: dict[str, list] = {k: [] for k in ("priority", "min_task", "min_res", "min_member", "submit")}
    job_pods = [0]
    min_resources: dict[tuple, np.ndarray] = {}
    vector = _RequestVectors(resources, sched.section == "slurm")
    for j, job in enumerate(scenario.jobs):
        pclass = classes.get(job.priority_class_name) if job.priority_class_name else default_class
        priority = pclass.value if pclass else 0
        never = bool(pclass and pclass.preemption_policy == "Never")
        critical = job.namespace == "kube-system" or (job.priority_class_name in CRITICAL_CLASSES)
        submit_s = parse_duration(job.submit)
        job_fields["submit"].append(submit_s)
        min_task = np.zeros(len(role_names), np.int64)
        per_task, mins, replicas = [], [], []
        for k, task in enumerate(job.tasks):
            raw, request, best_effort = vector(pod_requests[j][k], f"jobs[{j}].tasks[{k}].resources")
            n = task.replicas_resolved
            per_task.append(raw)
            mins.append(task.min_available_resolved)
            replicas.append(n)
            min_task[role_index[task.name]] = mins[-1]
            cls = _feasibility_class(task, nodes, feasibility, class_rows, failure_rows)
            task_fields["names"] += [f"{job.namespace}/{job.name}-{task.name}-{i}" for i in range(n)]
            task_fields["index"] += range(n)
            task_fields["key"] += [(submit_s, j, k, i) for i in range(n)]
            for field, value in (("job", j), ("role", role_index[task.name]), ("request", request),
                                 ("priority", priority), ("never", never), ("preemptable", job.preemptible),
                                 ("best_effort", best_effort), ("critical", critical), ("cls", cls)):
                task_fields[field] += [value] * n
        job_fields["priority"].append(priority)
        job_fields["min_task"].append(min_task)
        need = job.min_available if job.min_available is not None else sum(mins)
        job_fields["min_member"].append(need)
        key = (need, tuple(mins), tuple(replicas), tuple(id(raw) for raw in per_task))
        if key not in min_resources:  # the vectors are kept by `vector`, so their ids are stable
            min_resources[key] = _min_resources(need, mins, replicas, per_task)
        job_fields["min_res"].append(min_resources[key])
        job_pods.append(len(task_fields["names"]))

    n_jobs, n_res = len(scenario.jobs), len(resources)
    submit = np.array(job_fields["submit"], float)
    reasons = sorted({r for row in failure_rows for r in row} - {""})
    reason_index = {r: i + 1 for i, r in enumerate(reasons)}
    extra = {"failure_reasons": ("", *reasons), "class_node_failure": np.array(
        [[reason_index.get(r, 0) for r in row] for row in failure_rows], np.int64).reshape(len(class_rows), len(nodes))}
    grace = np.array([parse_duration(j.grace_period) for j in scenario.jobs], float)
    if sched.section == "slurm":
        tables = slurm_tables(scenario, sched.slurm, [pool.name for pool, _ in nodes])
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
        job_names=tuple(f"{j.namespace}/{j.name}" for j in scenario.jobs),
        job_queue=np.array([queue_index[j.queue] for j in scenario.jobs], np.int64),
        job_priority=np.array(job_fields["priority"], np.int64),
        job_min_member=np.array(job_fields["min_member"], np.int64),
        job_min_task_member=np.array(job_fields["min_task"], np.int64).reshape(n_jobs, len(role_names)),
        job_min_resources=np.array(job_fields["min_res"], float).reshape(n_jobs, n_res),
        job_has_min_resources=np.ones(n_jobs, bool),
        job_rank=rank_by([(submit[i], f"{j.namespace}/{j.name}") for i, j in enumerate(scenario.jobs)]),
        job_creation=submit,
        job_sla_waiting=np.full(n_jobs, np.nan),
        job_preemptable=np.zeros(n_jobs, bool),
        task_names=tuple(task_fields["names"]),
        task_job=np.array(task_fields["job"], np.int64),
        task_role=np.array(task_fields["role"], np.int64),
        task_request=np.array(task_fields["request"], float).reshape(len(task_fields["names"]), n_res),
        task_priority=np.array(task_fields["priority"], np.int64),
        task_preempt_never=np.array(task_fields["never"], bool),
        task_preemptable=np.array(task_fields["preemptable"], bool),
        task_best_effort=np.array(task_fields["best_effort"], bool),
        task_critical=np.array(task_fields["critical"], bool),
        task_index=np.array(task_fields["index"], np.int64),
        task_rank=rank_by(task_fields["key"]),
        task_class=np.array(task_fields["cls"], np.int64),
        class_node_ok=np.array(class_rows, bool).reshape(len(class_rows), len(nodes)),
        policy=_policy(scenario, resources),
        **extra,
    )
    return Compiled(
        problem=problem,
        scenario=scenario,
        job_submit=submit,
        job_work=np.array([parse_duration(j.work if j.work is not None else j.duration) for j in scenario.jobs], float),
        job_uses_speed=np.array([j.work is not None for j in scenario.jobs], bool),
        job_checkpoint=np.array([parse_duration(j.checkpoint_interval) if j.checkpoint_interval else math.inf
                                 for j in scenario.jobs], float),
        job_restart_cost=np.array([parse_duration(j.restart_cost) for j in scenario.jobs], float),
        job_grace=grace,
        job_pods=np.array(job_pods, np.int64),
        node_speed=np.array([pool.speed for pool, _ in nodes], float),
        horizon=parse_duration(scenario.horizon) if scenario.horizon is not None else math.inf,
        schedule_period=parse_duration(scenario.scheduler.schedule_period),
        quotas=_quotas(scenario, tenants, pod_requests) if sched.section != "slurm" else None,
    )


class _RequestVectors:
    """A pod's requests as vectors, computed once per distinct request (a trace has a handful):
    (what calcPGMinResources sums: the requests plus one pod, the pod's request as the scheduler
    sees it (pods = 1; under Slurm what cons_tres allocates), whether it is best-effort)."""

    def __init__(self, resources: list[str], slurm: bool):
        self.resources, self.slurm, self.seen = resources, slurm, {}

    def __call__(self, pod: dict, where: str) -> tuple[np.ndarray, np.ndarray, bool]:
        key = tuple(sorted((name, str(value)) for name, value in pod.items()))
        if key not in self.seen:
            raw = resource_vector(self.resources, pod, where)
            request = raw.copy()
            request[PODS] = 1.0
            if self.slurm:
                request = slurm_request(request)
            raw[PODS] += 1.0
            self.seen[key] = (raw, request, is_best_effort(request))
        return self.seen[key]


def _pod_request(task: Task, tenant: Tenant | None) -> dict:
    """The pod's requests after LimitRange defaulting (a container's missing cpu/memory request)."""
    request = dict(task.resources)
    if tenant is not None and tenant.limit_range is not None:
        for item in tenant.limit_range.limits:
            if item.type != "Container":
                continue
            for name, amount in {**item.default, **item.default_request}.items():
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


def _quotas(scenario: Scenario, tenants: dict[str, Tenant], pod_requests: list[list[dict]]) -> ResourceQuotas | None:
    """The ResourceQuota admission of every pod: its requests, and its limits (a LimitRange
    `default`; an extended resource's limit is its request)."""
    pods = []
    for j, job in enumerate(scenario.jobs):
        tenant = tenants.get(job.namespace)
        defaults = {}
        if tenant is not None and tenant.limit_range is not None:
            for item in tenant.limit_range.limits:
                if item.type == "Container":
                    defaults.update(item.default)
        for k, task in enumerate(job.tasks):
            requests = pod_requests[j][k]
            limits = {**defaults, **{r: v for r, v in requests.items() if "/" in r}}
            pods += [(j, f"{job.name}-{task.name}-{i}", requests, limits) for i in range(task.replicas_resolved)]
    return resource_quotas(scenario.tenants, [job.namespace for job in scenario.jobs], pods)


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


def _policy(scenario: Scenario, resources: list[str]):
    sched = scheduler_of(scenario)
    if sched.section == "slurm":
        return slurm_policy(sched.slurm)
    if sched.section == "kube":
        return kube_policy(sched.kube, resources)
    conf = conf_of(scenario)
    where = "scheduler.conf"
    for action in conf.action_list():
        if action not in ACTION_NAMES:
            raise SpecError(f"{where}.actions", f"action {action!r} is not simulated by labkit "
                                                f"(simulated: {', '.join(ACTION_NAMES)})")
    tiers = []
    for t, tier in enumerate(conf.tiers):
        entries = []
        for p, plugin in enumerate(tier.plugins):
            if plugin.name not in PLUGIN_NAMES:
                raise SpecError(f"{where}.tiers[{t}].plugins[{p}].name",
                                f"plugin {plugin.name!r} is not simulated by labkit (simulated: {', '.join(PLUGIN_NAMES)})")
            enabled = {point for point in plugin.enabled() if point in EXT_NAMES}
            entries.append({"name": plugin.name, "enabled": enabled, "arguments": dict(plugin.arguments)})
        tiers.append(entries)
    policy = policy_from_conf(conf.action_list(), tiers, resources)
    return replace(policy, strict_fifo=sched.queueing_strategy == "StrictFIFO")
