"""What a run leaves behind (`RunRecord`, both engines make one) and the Result tables made from it."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import EVENT_COLUMNS, JOB_COLUMNS, TASK_COLUMNS, Result
from .compile import Compiled
from .problem import PodGroupPhase, Problem


@dataclass(frozen=True, eq=False)
class CodedEvents:
    """The numba core's events as it logged them: times and rows of codes (kind, job, task, node,
    message and its two arguments), turned into the seven columns by ``columns(time, coded)``
    only when the events table is read. A million-job run keeps 36 bytes an event instead of
    its texts. Equal when the logged events are."""

    time: np.ndarray
    coded: np.ndarray
    columns: Callable[[np.ndarray, np.ndarray], tuple]

    def __len__(self) -> int:
        return len(self.time)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CodedEvents) and np.array_equal(self.time, other.time)
                and np.array_equal(self.coded, other.coded))

    __hash__ = None


@dataclass(frozen=True)
class RunRecord:
    """What an engine's run leaves behind, indexed like the Problem; both engines produce one.

    Per job (J,): ``done`` bool, ``running`` bool (its work is running at the end), ``phase``
    (PodGroupPhase), ``enqueue_time``/``start_time``/``end_time`` (NaN = not yet), ``evictions``
    (pods evicted), ``lost_work`` (seconds). ``runs`` (K, 5): task, node, start, end, evicted per
    pod run (end/evicted NaN = not yet). ``events``: (time, kind, job, task, node, reason, message)
    tuples with -1 for no task/node, or those seven columns, or the numba core's coded events that
    turn into them when read (:class:`CodedEvents`). ``sessions``: sessions run. ``state`` (J,) optional, a job
    state that overrides the derived one ("Timeout", "Preempted", "Suspended"; "" = none);
    ``priority`` (J,) optional, the scheduler's job priority when it is computed (else the
    PriorityClass value of the Problem).
    """

    done: np.ndarray
    running: np.ndarray
    phase: np.ndarray
    enqueue_time: np.ndarray
    start_time: np.ndarray
    end_time: np.ndarray
    evictions: np.ndarray
    lost_work: np.ndarray
    runs: np.ndarray
    events: list[tuple] | tuple | CodedEvents
    sessions: int
    state: np.ndarray | None = None
    priority: np.ndarray | None = None


def result_of(c: Compiled, sim: RunRecord) -> Result:
    """The run's DataFrames (columns documented in `labkit.results`); the tasks and events tables
    and the expanded scenario are made when first read."""
    p = c.problem
    gpu = [r for r, name in enumerate(p.resource_names) if name.endswith("/gpu")]
    per_pod_gpus = p.task_request[:, gpu].sum(axis=1) / 1000.0 if gpu else np.zeros(p.n_tasks)
    job_gpus = np.bincount(p.task_job, weights=per_pod_gpus, minlength=p.n_jobs)
    pending = sim.phase == PodGroupPhase.PENDING
    state = _STATES[np.where(sim.done, 0, np.where(sim.running, 1, np.where(pending, 2, 3)))]
    if sim.state is not None:
        given = sim.state != ""
        state[given] = sim.state[given]
    start, end, submit = (np.asarray(a, float) for a in (sim.start_time, sim.end_time, c.job_submit))
    columns = {
        "name": c.jobs.name,
        "namespace": c.jobs.namespace,
        "queue": np.array(p.queue_names, object)[p.job_queue],
        "priority": p.job_priority if sim.priority is None else sim.priority,
        "gpus": job_gpus,
        "submit": submit,
        "enqueue": sim.enqueue_time,
        "start": start,
        "end": end,
        "state": state,
        "evictions": sim.evictions,
        "lost_work": sim.lost_work,
        "wait": start - submit,
        "jct": end - submit,
    }
    jobs = pd.DataFrame({name: columns[name] for name in JOB_COLUMNS})
    info = {"sessions": sim.sessions, "horizon": c.horizon, "gpus": float(p.node_allocatable[:, gpu].sum() / 1000.0)
            if gpu else 0.0, "nodes": p.n_nodes, "events": _event_count(sim.events)}
    return Result(scenario=lambda: c.scenario, jobs=jobs, tasks=lambda: _tasks_table(p, sim.runs),
                  events=lambda: _events_table(p, sim.events), info=info)


_STATES = np.array(["Completed", "Running", "Pending", "Inqueue"], object)
"""A job's state when the run record gives none: done, its work running, its PodGroup Pending, else Inqueue."""


def _tasks_table(p: Problem, runs: np.ndarray) -> pd.DataFrame:
    task_ids = runs[:, 0].astype(np.int64)
    tasks = pd.DataFrame({
        "job": _named(p.job_names, p.task_job[task_ids]),
        "role": _named(p.role_names, p.task_role[task_ids]),
        "index": p.task_index[task_ids],
        "node": _named(p.node_names, runs[:, 1].astype(np.int64)),
        "start": runs[:, 2],
        "end": runs[:, 3],
        "evicted": runs[:, 4],
    })
    for r, name in enumerate(p.resource_names):
        tasks[name] = p.task_request[task_ids, r] / _UNIT.get(name, 1000.0)
    return tasks[TASK_COLUMNS + list(p.resource_names)]


def _events_table(p: Problem, events: list[tuple] | tuple | CodedEvents) -> pd.DataFrame:
    time, kind, job, task, node, reason, message = _event_columns(events)
    return pd.DataFrame({
        "time": time, "kind": kind, "job": _named(p.job_names, job), "task": _named(p.task_names, task),
        "node": _named(p.node_names, node), "reason": reason, "message": message,
    })[EVENT_COLUMNS]


def _event_count(events: list[tuple] | tuple | CodedEvents) -> int:
    """Rows of the events table (`Result.info["events"]`), without making it."""
    return len(events) if isinstance(events, (list, CodedEvents)) or not len(events) else len(events[0])


def _event_columns(events: list[tuple] | tuple | CodedEvents) -> tuple:
    """RunRecord.events as seven columns: the rows a Simulation logs are turned around; the
    numba core's coded events are decoded (time and index columns as arrays)."""
    if isinstance(events, CodedEvents):
        events = events.columns(events.time, events.coded)
    if not len(events) or not len(events[0]):
        return ([],) * 7
    if not isinstance(events, list):
        return events
    columns = [list(column) for column in zip(*events)]
    for k in (2, 3, 4):
        columns[k] = np.asarray(columns[k], np.int64)
    return tuple(columns)


def _named(names: tuple[str, ...], index: np.ndarray | list) -> np.ndarray | list:
    """Object names for indices, "" for -1 (no task, no node)."""
    if not len(index):
        return []
    return np.array(names + ("",), object)[np.asarray(index, np.int64)]


_UNIT = {"memory": 1.0, "pods": 1.0}
"""Problem units -> scenario units: cpu and extended scalars are milli in the Problem."""
