"""Metrics of a run: what students compare between policies, read from a `labkit.Result` only.

Every function states its formula in the first line of its docstring. Times are seconds on the
run's clock; the observed window is [0, `window_end(result)`]. Resources are in scenario units
(GPUs, cpu cores, memory bytes), as in `Result.tasks`.

The cluster at an instant (`snapshot`) is rebuilt from the tasks and events tables into the
engine's own `Problem`/`State`, so queue deserved shares and plugin verdicts come from the
engine's plugins (`labkit.engine.volcano.plugins`), never from a second implementation of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .engine.clock import subproblem
from .engine.compile import Compiled
from .engine.families import compile_scenario
from .engine.framework import Session
from .engine.problem import PODS, PodGroupPhase, Problem, State, TaskStatus
from .engine.volcano.plugins import Capacity, Proportion, QueueAttr
from .engine.volcano.reference import open_session
from .results import (  # noqa: F401 (the headline figures are labkit.metrics' too)
    GPU,
    Result,
    _group,
    _queue_of_tasks,
    _run_ends,
    allocatable,
    capacity,
    gpu_seconds,
    job_keys,
    per_queue,
    queue_of,
    summary,
    utilisation,
    waited,
    window_end,
)
from .spec.quantity import parse_duration

_UNIT = {"memory": 1.0, "pods": 1.0}
"""Problem units per scenario unit: cpu and extended resources are milli in the Problem."""


def units(problem: Problem) -> np.ndarray:
    """Problem units per scenario unit for each of the problem's resources (divide to get scenario units)."""
    return np.array([_UNIT.get(name, 1000.0) for name in problem.resource_names])


# ------------------------------------------------------------------------------------ the window


_COMPILED: dict[int, tuple[object, Compiled]] = {}


def compiled_of(result: Result) -> Compiled:
    """The run's scenario compiled to the engine's Problem (kept for the last few scenarios)."""
    key = id(result.scenario)
    if key not in _COMPILED:
        if len(_COMPILED) >= 8:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = (result.scenario, compile_scenario(result.scenario))  # the scenario pins its id
    return _COMPILED[key][1]


def holding(result: Result, at: float) -> pd.DataFrame:
    """Pod runs holding node resources at `at` (start <= at < end), with status Running or Releasing."""
    tasks = result.tasks
    end = tasks.end.fillna(math.inf)
    held = tasks[(tasks.start <= at) & (end > at)]
    releasing = held.evicted.notna() & (held.evicted <= at)
    return held.assign(status=np.where(releasing, "Releasing", "Running"))


# ------------------------------------------------------------------------------------ per job


def job_times(result: Result) -> pd.DataFrame:
    """Per job: wait = start - submit, jct = end - submit, slowdown = jct / duration, plus lost work."""
    jobs = result.jobs
    duration = [parse_duration(j.duration if j.duration is not None else j.work) for j in result.scenario.jobs]
    table = jobs[["name", "namespace", "queue", "priority", "gpus", "submit", "start", "end", "state",
                  "evictions", "lost_work", "wait", "jct"]].copy()
    table["duration"] = duration
    table["slowdown"] = table.jct / table.duration
    return table


# ------------------------------------------------------------------------------------ utilisation


def usage(result: Result, resource: str = GPU, by: str | list[str] | None = None,
          bins: int | None = None) -> pd.DataFrame:
    """used(t) = sum of requests of pods holding at t; per `by` group(s); with `bins`, the time-weighted mean per bin.

    Without bins: one row per change point (time, [groups], used), a step function that holds until
    the next row. With bins: rows (time, time_end, [groups], used) over equal bins of [0, T], each the
    exact integral of the step function over the bin divided by its width.
    """
    names = [by] if isinstance(by, str) else list(by or [])
    end = window_end(result)
    tasks = result.tasks
    stops = _run_ends(result)
    keys = [_group(result, b) for b in names] or [pd.Series("all", index=tasks.index)]
    frames = []
    for group, runs in tasks.groupby(keys):
        amount = runs[resource].to_numpy(float) if resource in runs else np.zeros(len(runs))
        times, level = _step(runs.start.to_numpy(float), stops[runs.index].to_numpy(float), amount)
        frame = pd.DataFrame({"time": times, "used": level})
        if bins:
            frame = binned(times, level, end, bins).rename(columns={"value": "used"})
        for i, name in enumerate(names):
            frame.insert(1 + i, name, group[i])
        frames.append(frame)
    if not frames:  # no pod ever ran: nothing used, and no group to name
        if names:
            return pd.DataFrame(columns=["time", *names, *(["time_end"] if bins else []), "used"])
        edges = np.linspace(0.0, end, (bins or 1) + 1)
        return pd.DataFrame({"time": edges[:-1], "used": 0.0})
    return pd.concat(frames, ignore_index=True)


def binned(times: np.ndarray, level: np.ndarray, end: float, bins: int) -> pd.DataFrame:
    """The time-weighted mean of a step function (level from each of `times` on, times[0] = 0) over equal bins of [0, end]."""
    edges = np.linspace(0.0, end, bins + 1)
    return pd.DataFrame({"time": edges[:-1], "time_end": edges[1:],
                         "value": np.diff(_integral(times, level, edges)) / np.diff(edges)})


def _step(start: np.ndarray, stop: np.ndarray, amount: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(change times, level from each time on) of the sum of intervals [start, stop) x amount, from t = 0."""
    times = np.concatenate([[0.0], start, stop])
    delta = np.concatenate([[0.0], amount, -amount])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(delta[order])
    last = np.r_[times[1:] != times[:-1], True]  # keep the level after every change at an instant
    return times[last], np.clip(level[last], 0.0, None)


def _integral(times: np.ndarray, level: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Integral from 0 to each of `at` (>= 0) of the step function (times, level), times[0] == 0."""
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    k = np.searchsorted(times, at, side="right") - 1
    return area[k] + level[k] * (at - times[k])


def utilisation_timeline(result: Result, resource: str = GPU, bins: int = 200) -> pd.DataFrame:
    """U(bin) = mean used over the bin / C, for the cluster GPU (or `resource`) utilisation chart."""
    table = usage(result, resource, bins=bins)
    cap = capacity(result, resource)
    return table.assign(utilisation=table.used / cap if cap else math.nan)


# ------------------------------------------------------------------------------------ the cluster at an instant


@dataclass(frozen=True)
class Snapshot:
    """The live PodGroups and pods at an instant, in the engine's own form.

    ``problem`` is the sub-Problem of the jobs present at `at` (submitted and not finished, or
    still holding terminating pods) and the pods that exist (PodGroups past Pending);
    ``state`` their statuses and nodes; ``jobs``/``tasks`` map back to the compiled Problem.
    """

    at: float
    compiled: Compiled
    problem: Problem
    state: State
    jobs: np.ndarray
    tasks: np.ndarray

    def session(self) -> Session:
        """A reference-engine session opened on this snapshot: plugins have registered their callbacks."""
        return open_session(self.problem, self.state)

    def local_job(self, name: str) -> int | None:
        """The snapshot's index of job `<namespace>/<name>`, None if it is not live."""
        names = self.problem.job_names
        return names.index(name) if name in names else None


def snapshot(result: Result, at: float) -> Snapshot:
    """The cluster right after everything that happened at `at`, as Volcano's cache would hand it to a session.

    Pod status: Running if a run covers `at` and is not evicted yet, Releasing between eviction and
    release, Pending otherwise (pods exist once the PodGroup left Pending). PodGroup phase:
    Completed after the job ended, Running with minAvailable pods running, Inqueue after its last
    Enqueued event (unless a restart since then has released every pod), else Pending.
    """
    compiled = compiled_of(result)
    p = compiled.problem_at(at)
    keys = job_keys(result).to_numpy()
    task_of = {name: t for t, name in enumerate(p.task_names)}
    status = np.full(p.n_tasks, TaskStatus.PENDING, np.int8)
    node = np.full(p.n_tasks, -1, np.int64)
    held = holding(result, at)
    if len(held):
        ids = (held.job + "-" + held.role + "-" + held["index"].astype(str)).map(task_of).to_numpy(np.int64)
        node_of = {n: i for i, n in enumerate(p.node_names)}
        status[ids] = np.where(held.status == "Releasing", TaskStatus.RELEASING, TaskStatus.RUNNING)
        node[ids] = held.node.map(node_of).to_numpy(np.int64)
    holds = np.bincount(p.task_job[node >= 0], minlength=p.n_jobs) > 0
    running = np.bincount(p.task_job[status == TaskStatus.RUNNING], minlength=p.n_jobs)
    ended = result.jobs.end.to_numpy(float) <= at
    present = (compiled.job_submit <= at) & (~ended | holds)

    events = result.events[result.events.time <= at]
    last = events[events.kind.isin(["Enqueued", "Restarting"])].groupby(["job", "kind"]).time.max().unstack()
    enqueued_at = last.get("Enqueued", pd.Series(dtype=float)).reindex(keys).to_numpy(float)
    restarted_at = last.get("Restarting", pd.Series(dtype=float)).reindex(keys).to_numpy(float)
    reset = (restarted_at > enqueued_at) & ~holds  # restarted, every pod released, not enqueued again
    inqueue = ~np.isnan(enqueued_at) & ~reset
    phase = np.where(ended, PodGroupPhase.COMPLETED,
                     np.where((running > 0) & (running >= p.job_min_member), PodGroupPhase.RUNNING,
                              np.where(inqueue, PodGroupPhase.INQUEUE, PodGroupPhase.PENDING))).astype(np.int8)
    finished = ended[p.task_job] & (status == TaskStatus.PENDING)
    status[finished] = TaskStatus.SUCCEEDED

    jobs = np.flatnonzero(present)
    created = present[p.task_job] & (phase[p.task_job] != PodGroupPhase.PENDING)
    tasks = np.flatnonzero(created).astype(np.int64)
    sub = subproblem(p, jobs, tasks)
    state = State.from_tasks(sub, status[tasks], node[tasks], phase[jobs], now=at)
    return Snapshot(at, compiled, sub, state, jobs, tasks)


def to_units(problem: Problem, vector: np.ndarray) -> dict[str, float]:
    """A Problem resource vector in scenario units, by resource name (pods left out)."""
    scaled = vector / units(problem)
    return {name: float(scaled[r]) for r, name in enumerate(problem.resource_names) if r != PODS}


def node_free(result: Result, at: float) -> pd.DataFrame:
    """free(n) = allocatable(n) - requests of the pods holding n at `at` (Releasing pods still hold), one row per node."""
    compiled = compiled_of(result)
    p = compiled.problem
    alloc = pd.DataFrame(p.node_allocatable / units(p), index=list(p.node_names), columns=list(p.resource_names))
    held = holding(result, at)
    used = held.groupby("node")[[c for c in p.resource_names if c in held]].sum()
    return alloc.sub(used.reindex(alloc.index).reindex(columns=alloc.columns).fillna(0.0))


# ------------------------------------------------------------------------------------ shares


def queue_attrs(session: Session) -> dict[int, QueueAttr]:
    """The queue accounting (allocated, deserved, realCapability, ...) of the session's proportion or capacity plugin."""
    for tier in session.tiers:
        for entry in tier:
            if isinstance(entry.plugin, (Proportion, Capacity)):
                return entry.plugin.attrs
    return {}


def deserved(session: Session) -> dict[int, np.ndarray]:
    """Each queue's deserved vector as the session's proportion or capacity plugin computed it (Problem units)."""
    return {q: attr.deserved.copy() for q, attr in queue_attrs(session).items()}


def queue_shares(result: Result, times: np.ndarray | None = None, samples: int = 48,
                 resource: str = GPU) -> pd.DataFrame:
    """share(q, t) = allocated_q / C; deserved(q, t) from the engine's proportion/capacity; dominant = max_r alloc_r / C_r.

    One row per (time, queue) at `times` (default: `samples` points evenly over [0, T]); allocated
    counts the pods in Volcano's allocated statuses (Running, not Releasing). Without proportion or
    capacity in the policy there is no deserved in the engine: it is then C x weight_q / sum of
    weights over the queues with jobs, the weight fraction proportion would start its water-filling from.
    """
    if times is None:
        times = np.linspace(0.0, window_end(result), samples)
    rows = []
    for t in times:
        snap = snapshot(result, float(t))
        p = snap.problem
        r = p.resource_names.index(resource) if resource in p.resource_names else None
        total = p.node_allocatable.sum(axis=0)
        allocated = np.zeros((p.n_queues, p.n_resources))
        on = snap.state.task_status == TaskStatus.RUNNING
        np.add.at(allocated, p.job_queue[p.task_job[on]], p.task_request[on])
        with_jobs = np.unique(p.job_queue)
        fair = deserved(snap.session()) if len(p.job_names) else {}
        weights = p.queue_weight[with_jobs].sum()
        for q, name in enumerate(p.queue_names):
            if name == "default" and q not in with_jobs and not allocated[q].any():
                continue
            if fair:
                want = fair.get(q, np.zeros(p.n_resources))
            else:
                want = total * (p.queue_weight[q] / weights if q in with_jobs else 0.0)
            dims = [i for i in range(p.n_resources) if i != PODS and total[i] > 0]
            rows.append({
                "time": float(t), "queue": name,
                "allocated": allocated[q, r] / 1000.0 if r is not None else 0.0,
                "deserved": want[r] / 1000.0 if r is not None else 0.0,
                "guarantee": np.nan_to_num(p.queue_guarantee[q, r]) / 1000.0 if r is not None else 0.0,
                "share": allocated[q, r] / total[r] if r is not None and total[r] else 0.0,
                "deserved_share": want[r] / total[r] if r is not None and total[r] else 0.0,
                "dominant_share": float(max((allocated[q, i] / total[i] for i in dims), default=0.0)),
            })
    return pd.DataFrame(rows)


def jain(values) -> float:
    """J = (sum x)^2 / (n x sum x^2): 1 when all x are equal, 1/n when one tenant gets everything."""
    x = np.asarray(list(values), float)
    denominator = len(x) * float((x ** 2).sum())
    return float(x.sum() ** 2 / denominator) if denominator else math.nan


def fairness(result: Result, resource: str = GPU) -> float:
    """Jain's index over queues with jobs of x_q = resource-seconds_q / weight_q (weighted fair share)."""
    weight = {q.name: q.weight for q in result.scenario.queues}
    held = gpu_seconds(result, resource, by="queue")
    queues = result.jobs.queue.unique()
    return jain(float(held.get(q, 0.0)) / weight.get(q, 1) for q in queues)


# ------------------------------------------------------------------------------------ fragmentation


def _shapes(compiled: Compiled, tasks: np.ndarray) -> pd.DataFrame:
    """Distinct pod shapes (request vector + feasibility class) among `tasks`, with their counts."""
    p = compiled.problem
    frame = pd.DataFrame(p.task_request[tasks], columns=list(p.resource_names))
    frame["class"] = p.task_class[tasks]
    return frame.value_counts().rename("count").reset_index()


def _fits(compiled: Compiled, shapes: pd.DataFrame, free: pd.DataFrame) -> np.ndarray:
    """(shapes x nodes) bool: the shape's request fits the node's free resources and its selector/taints."""
    p = compiled.problem
    request = shapes[list(p.resource_names)].to_numpy(float) / units(p)
    room = free[list(p.resource_names)].to_numpy(float)
    fits = (request[:, None, :] <= room[None, :, :] + 1e-9).all(axis=2)
    return fits & p.class_node_ok[shapes["class"].to_numpy(np.int64)]


def pending_tasks(result: Result, compiled: Compiled, at: float) -> np.ndarray:
    """Problem indices of the pods of jobs submitted and unfinished at `at` that hold no node."""
    p = compiled.problem
    held = holding(result, at)
    names = set(held.job + "-" + held.role + "-" + held["index"].astype(str))
    live = (compiled.job_submit <= at) & ~(result.jobs.end.to_numpy(float) <= at)
    return np.array([t for t in range(p.n_tasks) if live[p.task_job[t]] and p.task_names[t] not in names], np.int64)


def fragmentation(result: Result, at: float) -> dict:
    """stranded = free GPUs on nodes where no pending GPU pod fits; FGD rate = sum_m p_m sum_n free_n [m misfits n] / free.

    Stranded GPUs are counted only while some GPU pod is pending: idle GPUs nobody asks for are not stranded.

    `p_m` is the share of pod shape m among all GPU pods of the workload (FGD's target workload,
    Weng et al., ATC'23, whole GPUs): the expected fraction of free GPUs a random pod of the
    workload could not use. CPU-only pods ask no GPU and are left out of both.
    """
    compiled = compiled_of(result)
    p = compiled.problem
    free = node_free(result, at)
    free_gpu = free[GPU].to_numpy(float) if GPU in free else np.zeros(p.n_nodes)
    total_free = float(free_gpu.sum())
    gpu = p.resource_names.index(GPU) if GPU in p.resource_names else None
    if gpu is None or total_free == 0:
        return {"free_gpus": total_free, "stranded_gpus": 0.0, "fgd_rate": 0.0}
    pending = _shapes(compiled, pending_tasks(result, compiled, at))
    pending = pending[pending[GPU] > 0]
    usable = _fits(compiled, pending, free).any(axis=0) if len(pending) else np.ones(p.n_nodes, bool)
    workload = _shapes(compiled, np.flatnonzero(p.task_request[:, gpu] > 0))
    weight = workload["count"].to_numpy(float) / workload["count"].sum()
    misfit = ~_fits(compiled, workload, free)
    return {"free_gpus": total_free,
            "stranded_gpus": float(free_gpu[~usable].sum()),
            "fgd_rate": float(weight @ (misfit * free_gpu[None, :]).sum(axis=1)) / total_free}


def fragmentation_timeline(result: Result, samples: int = 48) -> pd.DataFrame:
    """`fragmentation` at `samples` instants evenly over [0, T], one row each."""
    times = np.linspace(0.0, window_end(result), samples)
    return pd.DataFrame([{"time": t, **fragmentation(result, t)} for t in times])


# ------------------------------------------------------------------------------------ waiting, evictions, cost, SLA


def starvation(result: Result, threshold: float) -> pd.DataFrame:
    """Jobs with `waited` (unstarted jobs counted to T) >= threshold, longest first."""
    jobs = result.jobs
    table = jobs[["name", "namespace", "queue", "priority", "gpus", "submit", "state"]].assign(
        waited=waited(result), still_waiting=jobs.start.isna())
    return table[table.waited >= threshold].sort_values("waited", ascending=False, kind="stable")


def longest_wait(result: Result) -> float:
    """max over jobs of `waited`."""
    table = starvation(result, -math.inf)
    return float(table.waited.max()) if len(table) else 0.0


def preemptions(result: Result) -> pd.DataFrame:
    """Per victim queue and action (preempt, reclaim): pods evicted, job restarts, lost work (from the events)."""
    events = result.events.assign(queue=result.events.job.map(queue_of(result)))
    evicted = events[events.kind == "Evicted"].rename(columns={"reason": "action"})
    table = evicted.groupby(["queue", "action"]).size().rename("evicted").reset_index()
    restarts = events[events.kind == "Restarting"].groupby("queue").size()
    table["restarts"] = table.queue.map(restarts).fillna(0).astype(int)
    table["lost_work_s"] = table.queue.map(result.jobs.groupby("queue").lost_work.sum()).fillna(0.0)
    return table


def _prices(result: Result, price: dict[str, float] | float | None) -> dict[str, float]:
    """Price per GPU-hour of each pool: as given (one for all, or per pool), else the pools' own
    `price`; ValueError naming the pools without one."""
    pools = result.scenario.cluster.pools
    if isinstance(price, dict):
        return price
    if price is not None:
        return {pool.name: float(price) for pool in pools}
    missing = [pool.name for pool in pools if pool.price is None]
    if missing:
        raise ValueError(f"cluster.pools[].price: pool(s) {', '.join(missing)} have no price per GPU-hour "
                         "(set it, 0 for hardware already paid for, or pass price=)")
    return {pool.name: pool.price for pool in pools}


def _pod_run_cost(result: Result, price: dict[str, float] | float | None, resource: str) -> pd.DataFrame:
    """Per pod run: its job, queue, pool, GPU-hours held (start to release, clipped to the window,
    a run cut short by an eviction or a node failure included) and their cost."""
    pool_of = {n: pool.name for pool in result.scenario.cluster.pools for n in pool.node_names()}
    tasks = result.tasks
    hours = (_run_ends(result) - tasks.start).clip(lower=0) * tasks.get(resource, 0.0) / 3600
    frame = pd.DataFrame({"job": tasks.job, "queue": _queue_of_tasks(result), "pool": tasks.node.map(pool_of),
                          "gpu_hours": hours})
    frame["price"] = frame.pool.map(_prices(result, price)).astype(float)
    frame["cost"] = frame.gpu_hours * frame.price
    return frame


def cost(result: Result, price: dict[str, float] | float | None = None, resource: str = GPU) -> pd.DataFrame:
    """cost(q, pool) = GPU-hours held by queue q on the pool's nodes x price per GPU-hour of the pool.

    `price`: one for every pool, or per pool name; by default each pool's `price`."""
    frame = _pod_run_cost(result, price, resource)
    table = frame.groupby(["queue", "pool"], as_index=False).agg(gpu_hours=("gpu_hours", "sum"), price=("price", "first"))
    table["cost"] = table.gpu_hours * table.price
    return table


def job_cost(result: Result, price: dict[str, float] | float | None = None, resource: str = GPU) -> pd.DataFrame:
    """cost(j) = sum over job j's pod runs of GPU-hours held x its pool's price; with jct, the pods
    evicted by node events (`interrupted`: a failure, a drain, a spot interruption; under Slurm a job's
    nodes killed with a DOWN node, NodeFail), the lost work
    and lost GPU-hours = lost work x the job's GPUs.

    What a job pays includes the runs whose work was lost: a spot pool is cheaper per GPU-hour,
    and a job on it pays again for the work an interruption takes away."""
    frame = _pod_run_cost(result, price, resource)
    jobs = result.jobs
    keys = job_keys(result)
    events = result.events
    by_node = events[(events.kind == "Evicted") & events.reason.isin(["TaintManagerEviction", "Drain", "NodeFail"])]
    paid = frame.groupby("job")[["gpu_hours", "cost"]].sum()
    table = jobs[["name", "namespace", "queue", "gpus", "jct", "lost_work"]].copy()
    table["gpu_hours"] = keys.map(paid.gpu_hours).fillna(0.0).to_numpy()
    table["cost"] = keys.map(paid.cost).fillna(0.0).to_numpy()
    table["interrupted"] = keys.map(by_node.groupby("job").size()).fillna(0).astype(int).to_numpy()
    table["lost_gpu_hours"] = table.lost_work * table.gpus / 3600
    return table


def total_cost(result: Result, price: dict[str, float] | float | None = None, resource: str = GPU) -> float:
    """cost = sum of every pod run's GPU-hours x its pool's price per GPU-hour."""
    return float(_pod_run_cost(result, price, resource).cost.sum())


def sla_hit_rate(result: Result, max_wait: float | dict[str, float]) -> pd.Series:
    """hit rate(q) = jobs that started within max_wait of submit / jobs decided (started, or waited past max_wait by T)."""
    jobs = result.jobs
    target = jobs.queue.map(max_wait) if isinstance(max_wait, dict) else pd.Series(float(max_wait), index=jobs.index)
    hit = jobs.start.notna() & (jobs.wait <= target)
    decided = hit | (waited(result) > target)
    return hit[decided].groupby(jobs.queue[decided]).mean().rename("sla_hit_rate")


def queue_length(result: Result, bins: int | None = None) -> pd.DataFrame:
    """waiting(q, t) = jobs submitted (or restarted) and not started again by t; per change, or the mean per bin.

    Rows (time, queue, waiting); with `bins`, (time, time_end, queue, waiting) over equal bins of [0, T].
    """
    events = result.events
    delta = events.kind.map({"Submitted": 1, "Restarting": 1, "Started": -1})
    frame = pd.DataFrame({"time": events.time, "queue": events.job.map(queue_of(result)), "delta": delta}).dropna()
    frame = frame.groupby(["queue", "time"], as_index=False).delta.sum()
    frame["waiting"] = frame.groupby("queue").delta.cumsum()
    frame = frame.drop(columns="delta")
    if not bins:
        return frame.astype({"waiting": int})
    frames = []
    for queue, steps in frame.groupby("queue"):
        times = np.r_[0.0, steps.time.to_numpy(float)]
        level = np.r_[0.0, steps.waiting.to_numpy(float)]
        frames.append(binned(times, level, window_end(result), bins).rename(columns={"value": "waiting"})
                      .assign(queue=queue))
    return pd.concat(frames, ignore_index=True)[["time", "time_end", "queue", "waiting"]]


# ------------------------------------------------------------------------------------ job progress


def goodput(result: Result, by: str = "job", resource: str = GPU) -> pd.DataFrame:
    """How much of the GPU time held was useful work, per job (``by="job"``) or per queue.

    Per job: ``work`` (seconds of work it must get done at rate 1: its `work` or `duration`),
    ``gpus`` (its pods' GPUs when all run), ``gpu_seconds`` (GPU-seconds its pods held, evicted
    ones until deleted), ``useful_gpu_seconds`` (work x gpus for a completed job: what its work
    costs on reference GPUs in an ideal placement; 0 otherwise), ``effective_gpu_hours``
    (useful / 3600), ``goodput`` (useful / held: 1 when every held GPU-second advanced the job at
    rate 1; less for slower GPUs, spread gangs, lost work and restarts; more than 1 on GPUs faster
    than the reference, or with fewer pods than its replicas on a concave scaling curve (an elastic
    job that scaled in, a partial admission under Kueue), each GPU then doing more of the work than
    at full scale), ``work_time`` (seconds its work ran: from each Started to the restart or completion
    that ended the run, a restart's setup left out) and ``slowdown`` (work_time / (work + lost
    work): 1 / its mean rate, the slowdown vs an ideal placement on reference GPUs; completed jobs).
    For a job without a workloadClass whose recreated pods ran their whole duration after its work
    was done, work_time runs until its last pod ended.

    Per queue: the sums, goodput = useful / held, and slowdown = sum of work_time x gpus / sum of
    (work + lost work) x gpus over its completed jobs.
    """
    jobs = result.jobs
    compiled = compiled_of(result)
    keys = job_keys(result)
    work = pd.Series(compiled.job_work, index=jobs.index)
    done = jobs.state == "Completed"
    held = gpu_seconds(result, resource, by="job").reindex(keys).fillna(0.0).to_numpy() if len(jobs) else []
    events = result.events
    events = events[events.kind.isin(["Started", "Restarting", "Completed", "Terminated"])]
    setup = dict(zip(keys, compiled.job_restart_cost))
    ran: dict[str, float] = {}
    for job, rows in events.groupby("job", sort=False):
        since, runs = math.nan, 0
        for time, kind in zip(rows.time.to_numpy(float), rows.kind):
            if kind == "Started":
                since = time + (setup[job] if runs else 0.0)
                runs += 1
            elif not math.isnan(since):
                ran[job] = ran.get(job, 0.0) + max(0.0, time - since)
                since = math.nan
    table = pd.DataFrame({
        "name": jobs.name, "namespace": jobs.namespace, "queue": jobs.queue, "state": jobs.state,
        "gpus": jobs.gpus, "work": work, "lost_work": jobs.lost_work, "gpu_seconds": held,
        "useful_gpu_seconds": np.where(done, work * jobs.gpus, 0.0),
        "work_time": keys.map(ran).fillna(0.0).where(done, np.nan),
    })
    table["effective_gpu_hours"] = table.useful_gpu_seconds / 3600.0
    table["goodput"] = table.useful_gpu_seconds / table.gpu_seconds.where(table.gpu_seconds > 0)
    table["slowdown"] = table.work_time / (table.work + table.lost_work)
    if by == "job":
        return table
    if by != "queue":
        raise ValueError(f"by must be 'job' or 'queue', not {by!r}")
    finished = table[table.state == "Completed"]
    grouped = table.groupby("queue")
    out = grouped[["gpu_seconds", "useful_gpu_seconds", "effective_gpu_hours"]].sum()
    out["goodput"] = out.useful_gpu_seconds / out.gpu_seconds.where(out.gpu_seconds > 0)
    weighted = finished.assign(ran=finished.work_time * finished.gpus,
                               ideal=(finished.work + finished.lost_work) * finished.gpus).groupby("queue")
    out["slowdown"] = weighted.ran.sum() / weighted.ideal.sum().where(weighted.ideal.sum() > 0)
    return out.reset_index()
