"""A scenario's jobs as columns: its `jobs` and what its `workloads` generators make, without a
model object or a dict per generated job.

`job_table` reads every job into one `JobTable`, in the order `expand` gives them (the scenario's
jobs, then each generator's, stably sorted by submit time when there are generators), so job j
of the table is job j of `expand(scenario).jobs`. Jobs share their tasks by *shape* (the tuple of
`Task`s, made once per distinct shape): a generator has one shape per GPU count, a trace a
handful, which is what lets the compiler work per shape and broadcast to jobs.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..spec import Scenario
from ..spec.checks import check_fit
from ..spec.model import Job, NetworkTopology, Task
from ..spec.quantity import parse_duration
from .synthetic import check_names, draw, job_names, quantities


@dataclass(frozen=True)
class JobTable:
    """Per job (J,): ``name``, ``namespace``, ``queue``, ``priority_class`` (None = unset) as
    object arrays; ``submit``, ``work`` (seconds at speed 1), ``checkpoint`` (inf = none),
    ``restart_cost``, ``grace`` float; ``uses_speed`` (`work`, not `duration`), ``preemptible``
    bool; ``min_available`` int (-1 = unset); ``shape`` int into ``shapes`` (tuples of Tasks);
    ``spec`` int, the job's index in ``scenario.jobs`` (-1: made by a generator);
    ``topology_tier`` int, networkTopology's highestTierAllowed (-1 = none), ``topology_hard``
    bool, its mode is hard; ``workload_class`` object, its workloadClass (None = none)."""

    name: np.ndarray
    namespace: np.ndarray
    queue: np.ndarray
    priority_class: np.ndarray
    submit: np.ndarray
    work: np.ndarray
    uses_speed: np.ndarray
    checkpoint: np.ndarray
    restart_cost: np.ndarray
    grace: np.ndarray
    preemptible: np.ndarray
    min_available: np.ndarray
    shape: np.ndarray
    shapes: tuple[tuple[Task, ...], ...]
    spec: np.ndarray
    topology_tier: np.ndarray
    topology_hard: np.ndarray
    workload_class: np.ndarray

    def __len__(self) -> int:
        return len(self.name)


_COLUMNS = ("name", "namespace", "queue", "priority_class", "submit", "work", "uses_speed", "checkpoint",
            "restart_cost", "grace", "preemptible", "min_available", "shape", "spec", "topology_tier",
            "topology_hard", "workload_class")
_DTYPES = (object, object, object, object, float, float, bool, float, float, float, bool, np.int64, np.int64,
           np.int64, np.int64, bool, object)


def _task_key(task: Task) -> tuple:
    return (task.name, task.replicas, task.min_available, tuple(task.resources.items()),
            tuple(task.node_selector.items()), tuple(task.tolerations), task.elastic)


def _seconds(value: object) -> float:
    """parse_duration, with the numbers a trace gives read directly."""
    return float(value) if type(value) in (float, int) else parse_duration(value)


def _explicit(jobs: list[Job], shapes: dict) -> list[tuple]:
    """One row per job of the scenario: one pass over the models, each shape kept once (the
    numbers a trace gives are taken as they are)."""
    rows = []
    for i, job in enumerate(jobs):
        tasks = job.tasks
        key = tuple(map(_task_key, tasks))
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = (len(shapes), tuple(tasks))
        work, submit, restart, grace, checkpoint = (job.work, job.submit, job.restart_cost, job.grace_period,
                                                    job.checkpoint_interval)
        run = work if work is not None else job.duration
        rows.append((job.name, job.namespace, job.queue, job.priority_class_name,
                     submit if type(submit) is float else _seconds(submit),
                     run if type(run) is float else _seconds(run), work is not None,
                     _seconds(checkpoint) if checkpoint else math.inf,
                     restart if type(restart) is float else _seconds(restart),
                     grace if type(grace) is float else _seconds(grace), job.preemptible,
                     -1 if job.min_available is None else job.min_available, shape[0], i,
                     *_topology(job.network_topology), job.workload_class))
    return rows


def _topology(spec: NetworkTopology | None) -> tuple[int, bool]:
    """(highestTierAllowed, hard) of a networkTopology; (-1, False) without one."""
    return (-1, False) if spec is None else (spec.highest_tier_allowed, spec.mode == "hard")


def _generated(scenario: Scenario, index: int, shapes: dict) -> dict[str, np.ndarray]:
    """The columns of one generator's jobs; a Task per GPU count, validated once (its pod must fit
    a node pool, as a job's must)."""
    load = scenario.workloads[index]
    drawn = draw(load, [scenario.seed, index])
    n = len(drawn)
    codes, distinct = pd.factorize(drawn.gpus)  # np.unique's inverse sorts; factorize hashes
    order = np.argsort(distinct)
    counts, inverse = distinct[order], np.argsort(order)[codes]
    ids = []
    for gpus in counts.tolist():
        replicas, pod = load.pod_shape(gpus)
        task = Task.model_validate({"name": "worker", "replicas": replicas, "resources": quantities(pod)})
        check_fit(f"workloads[{index}].gpus", task.resources, None, scenario.cluster.pools)
        ids.append(shapes.setdefault(("generated", _task_key(task)), (len(shapes), (task,)))[0])
    checkpoint = parse_duration(load.checkpoint_interval) if load.checkpoint_interval is not None else math.inf
    tier, hard = _topology(load.network_topology)
    constant = {"topology_tier": tier, "topology_hard": hard,"namespace": load.namespace, "queue": load.queue, "priority_class": load.priority_class_name,
                "uses_speed": False, "checkpoint": checkpoint, "restart_cost": parse_duration(load.restart_cost),
                "grace": parse_duration(load.grace_period), "preemptible": load.preemptible, "min_available": -1,
                "spec": -1, "workload_class": load.workload_class}
    columns = {"name": np.array(job_names(load, n), object), "submit": drawn.submit, "work": drawn.duration,
               "shape": np.asarray(ids, np.int64)[inverse.reshape(-1)]}
    for (column, dtype) in zip(_COLUMNS, _DTYPES):
        if column in constant:
            columns[column] = np.empty(n, dtype)
            columns[column].fill(constant[column])  # one shared str in an object column (np.full makes n copies)
    return columns


def job_table(scenario: Scenario) -> JobTable:
    """Every job of the scenario, generated ones included, as columns (the order of `expand`)."""
    shapes: dict = {}
    rows = _explicit(scenario.jobs, shapes)
    columns = zip(*rows) if rows else ((),) * len(_COLUMNS)
    parts = [{c: np.array(column, d).reshape(len(rows)) for c, d, column in zip(_COLUMNS, _DTYPES, columns)}]
    for index in range(len(scenario.workloads)):
        part = _generated(scenario, index, shapes)
        check_names(scenario, index, part["name"].tolist())
        parts.append(part)
    columns = {c: np.concatenate([p[c] for p in parts]).astype(d, copy=False) for c, d in zip(_COLUMNS, _DTYPES)}
    if scenario.workloads:
        order = np.argsort(columns["submit"], kind="stable")
        columns = {c: v[order] for c, v in columns.items()}
    by_id = sorted(shapes.values(), key=lambda entry: entry[0])
    return JobTable(**columns, shapes=tuple(tasks for _, tasks in by_id))


UNTABLED = frozenset(("status", "time_limit", "partition", "qos", "user", "requeue", "placement"))
"""The fields of a Job its table row does not hold (Slurm's, the snapshot)."""


def table_key(scenario: Scenario, table: JobTable) -> str:
    """A digest of everything the compiler reads from the scenario, when it reads the jobs
    through ``table``: the scenario without its jobs, the table's rows of the scenario's own
    jobs (a generator's are fixed by its spec and seed), their shapes, and the untabled fields
    of any job that sets one; with a trace workload, every row's name, submit, run time and shape
    (a trace's jobs, hashed as columns rather than as JSON). Cheaper than serialising thousands
    of job models."""
    traced = any(load.trace is not None for load in scenario.workloads)
    exclude: dict = {"jobs": True, "workloads": {"__all__": {"trace"}}} if traced else {"jobs": True}
    digest = hashlib.blake2b(scenario.model_dump_json(exclude=exclude, exclude_defaults=True).encode(),
                             digest_size=20)
    if traced:  # the rows' own columns; the rest of a trace workload's rows is its spec, in the JSON
        digest.update("\x1f".join(table.name.tolist()).encode())
        for column in (table.submit, table.work, table.shape):
            digest.update(column.tobytes())
    given = table.spec >= 0
    for column in _COLUMNS:
        values = getattr(table, column)[given]
        digest.update("\x1f".join(map(repr, values.tolist())).encode() if values.dtype == object else values.tobytes())
        digest.update(b"\x1e")
    for tasks in table.shapes:
        digest.update("".join(task.model_dump_json() for task in tasks).encode() + b"\x1e")
    for i, job in enumerate(scenario.jobs):
        if not job.model_fields_set.isdisjoint(UNTABLED):
            digest.update(f"{i}:".encode() + job.model_dump_json(include=UNTABLED).encode())
    return digest.hexdigest()
