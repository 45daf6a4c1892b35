"""Result: what a simulated (or real) run produced, as pandas DataFrames with documented columns.

* ``jobs``: one row per job — name, namespace, queue, priority, gpus (requested in total), submit,
  enqueue (first time its PodGroup left Pending), start (first time minAvailable pods ran), end,
  state (Completed, Running, Inqueue, Pending), evictions (pods evicted), lost_work (seconds of
  work thrown away by evictions, back to the last checkpoint), wait (start - submit),
  jct (end - submit).
* ``tasks``: one row per pod run — job, role, index, node, start, end (the pod released its
  resources: completion, or deletion after the grace period of an eviction), evicted (when it was
  evicted, NaN if not), and one column per resource
  in the scenario's units (cpu cores, memory bytes, GPUs, pods), e.g. ``nvidia.com/gpu``.
* ``events``: time, kind (Submitted, Enqueued, Bound, Pipelined, Started, Evicted, Restarting,
  Deleted, Completed), job, task, node, reason, message.

Times are seconds on the simulated clock; NaN means "did not happen (yet)".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .spec import Scenario
from .spec.base import DEFAULT_MAX_PODS
from .spec.quantity import parse_quantity

JOB_COLUMNS = ["name", "namespace", "queue", "priority", "gpus", "submit", "enqueue", "start", "end", "state",
               "evictions", "lost_work", "wait", "jct"]
TASK_COLUMNS = ["job", "role", "index", "node", "start", "end", "evicted"]
EVENT_COLUMNS = ["time", "kind", "job", "task", "node", "reason", "message"]


class Result:
    """The tables of one run, the scenario it came from, and a few run facts (`info`).

    `scenario`, `tasks` and `events` may be given as functions of no argument: each is then made
    on first use and kept (a million-job run has tens of millions of event texts nobody may read).
    """

    def __init__(self, scenario: Scenario | Callable[[], Scenario], jobs: pd.DataFrame,
                 tasks: pd.DataFrame | Callable[[], pd.DataFrame], events: pd.DataFrame | Callable[[], pd.DataFrame],
                 info: dict[str, Any] | None = None):
        self._made = {"scenario": scenario, "tasks": tasks, "events": events}
        self.jobs = jobs
        self.info = {} if info is None else info

    def _get(self, name: str) -> Any:
        value = self._made[name]
        if callable(value):
            value = self._made[name] = value()
        return value

    @property
    def scenario(self) -> Scenario:
        return self._get("scenario")

    @property
    def tasks(self) -> pd.DataFrame:
        return self._get("tasks")

    @property
    def events(self) -> pd.DataFrame:
        return self._get("events")

    def __repr__(self) -> str:
        return f"Result({len(self.jobs)} jobs, info={self.info})"

    def summary(self) -> dict[str, Any]:
        """Headline numbers (`summary`): jobs done, mean/p95 wait (jobs not started counted to the
        horizon), makespan, GPU utilisation, evictions."""
        return summary(self)

    def to_json(self) -> dict[str, Any]:
        """What `--json` prints for a run, simulated or real: scenario, engine, time scale, summary, jobs.

        NaN becomes null, so the text is strict JSON that `labkit compare` and other tools read.
        """
        jobs = json.loads(self.jobs.to_json(orient="records"))
        summary = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.summary().items()}
        return {"scenario": self.scenario.name, "engine": self.info.get("engine", "simulator"),
                "time_scale": self.info.get("time_scale", 1.0), "summary": summary, "jobs": jobs}

    def per_queue(self) -> pd.DataFrame:
        """Jobs, completed, not started, mean wait (unstarted counted to the horizon), evictions and GPU-hours per
        queue (`per_queue`)."""
        return per_queue(self)


# ------------------------------------------------------------------- the headline figures of a run
# (`labkit.metrics` has these and the rest; here because `Result.summary` and `per_queue` use them)

GPU = "nvidia.com/gpu"


def window_end(result: Result) -> float:
    """T = the horizon if the scenario sets one, else the last job end or pod release."""
    horizon = result.info.get("horizon", math.inf)
    if math.isfinite(horizon):
        return float(horizon)
    ends = np.concatenate([result.jobs.end.to_numpy(float), result.tasks.end.to_numpy(float)])
    return float(np.nanmax(ends, initial=0.0))


def job_keys(result: Result) -> pd.Series:
    """The jobs table's `<namespace>/<name>`, the form `tasks.job` and `events.job` use."""
    return result.jobs.namespace + "/" + result.jobs.name


def queue_of(result: Result) -> dict[str, str]:
    """`<namespace>/<name>` -> queue, for the jobs of the run."""
    return dict(zip(job_keys(result), result.jobs.queue))


def _queue_of_tasks(result: Result) -> pd.Series:
    return result.tasks.job.map(queue_of(result))


def _run_ends(result: Result) -> pd.Series:
    """Each pod run's release time, clipped to the window (a pod still holding at the end ends at T)."""
    end = window_end(result)
    return result.tasks.end.fillna(end).clip(upper=end)


def _group(result: Result, by: str) -> pd.Series:
    """The pod runs' group: queue, namespace (tenant), or a tasks column (node, job, role)."""
    if by == "queue":
        return _queue_of_tasks(result)
    if by == "namespace":
        return result.tasks.job.str.split("/").str[0]
    return result.tasks[by]


def waited(result: Result) -> pd.Series:
    """waited = start - submit, or T - submit for a job not started by T (censored at the horizon).

    A job that never starts has waited at least until the end of the window; leaving it out would
    make a policy that starves jobs look fast. `started` says which waits are complete.
    """
    jobs = result.jobs
    return jobs.wait.where(jobs.start.notna(), window_end(result) - jobs.submit).rename("waited")


def summary(result: Result) -> dict:
    """Headline numbers: jobs done, mean/p95 waited (unstarted jobs counted to T), mean JCT, T, GPU use, evictions.

    `not_started` is how many jobs had not started by T: their waits are counted until T
    (censored), so mean and p95 wait are lower bounds whenever it is not 0.
    """
    jobs = result.jobs
    done = jobs[jobs.state == "Completed"]
    counted = ["Completed", "Running", "Pending", "Inqueue"]
    others = jobs.state[~jobs.state.isin(counted)].value_counts().sort_index()
    waits = waited(result)
    return {
        "jobs": len(jobs),
        "completed": len(done),
        "running": int((jobs.state == "Running").sum()),
        "waiting": int(jobs.state.isin(["Pending", "Inqueue"]).sum()),
        # jobs in any other state (Slurm's Timeout, Preempted, Suspended), so that the counts add up
        **{str(state).lower(): int(n) for state, n in others.items()},
        "not_started": int(jobs.start.isna().sum()),
        "mean_wait_s": _round(waits.mean()),
        "p95_wait_s": _round(waits.quantile(0.95)) if len(waits) else math.nan,
        "mean_jct_s": _round(done.jct.mean()),
        "makespan_s": _round(window_end(result)),
        "gpu_utilisation": round(utilisation(result), 4),
        "evictions": int(jobs.evictions.sum()),
        "lost_work_s": _round(jobs.lost_work.sum()),
        "sessions": int(result.info.get("sessions", 0)),
    }


def per_queue(result: Result, by: str = "queue") -> pd.DataFrame:
    """Per queue: jobs, completed, not started by T, mean waited (unstarted counted to T), evictions, GPU-hours held.

    `by` names another jobs column to group by, e.g. ``priority``: jobs of one queue told apart by
    their PriorityClass value (rows highest first).
    """
    jobs = result.jobs.assign(waited=waited(result))
    table = jobs.groupby(by).agg(jobs=("name", "size"),
                                 completed=("state", lambda s: int((s == "Completed").sum())),
                                 not_started=("start", lambda s: int(s.isna().sum())),
                                 mean_wait_s=("waited", "mean"), evictions=("evictions", "sum"))
    held = gpu_seconds(result, by="job")
    held = held.groupby(held.index.map(dict(zip(job_keys(result), result.jobs[by])))).sum()
    table["gpu_hours"] = held.reindex(table.index, fill_value=0.0) / 3600
    return table.sort_index(ascending=by != "priority").round(1)


def _round(x: float) -> float:
    return math.nan if math.isnan(x) else round(float(x), 1)


def capacity(result: Result, resource: str = GPU) -> float:
    """C = sum over the run's nodes of their allocatable `resource` (see `allocatable`)."""
    return allocatable(result.scenario, resource)


def allocatable(scenario: Scenario, resource: str = GPU) -> float:
    """sum over nodes of the node's allocatable `resource` (kubelet's default 110 for pods)."""
    total = 0.0
    for pool in scenario.cluster.pools:
        amount = pool.resources.get(resource, DEFAULT_MAX_PODS if resource == "pods" else 0)
        total += pool.count * parse_quantity(amount)
    return total


def gpu_seconds(result: Result, resource: str = GPU, by: str | None = None) -> float | pd.Series:
    """sum over pod runs of request x (min(end, T) - start): resource-seconds held, in total or per `by`."""
    if resource not in result.tasks:
        return 0.0 if by is None else pd.Series(dtype=float)
    held = (_run_ends(result) - result.tasks.start).clip(lower=0) * result.tasks[resource]
    if by is None:
        return float(held.sum())
    return held.groupby(_group(result, by)).sum()


def utilisation(result: Result, resource: str = GPU) -> float:
    """U = resource-seconds held / (C x T)."""
    denominator = capacity(result, resource) * window_end(result)
    return gpu_seconds(result, resource) / denominator if denominator else math.nan
