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

import pandas as pd

from .spec import Scenario

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
        """Headline numbers (`labkit.metrics.summary`): jobs done, mean/p95 wait (jobs not started counted to the
        horizon), makespan, GPU utilisation, evictions."""
        from .metrics import summary

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
        queue (`labkit.metrics.per_queue`)."""
        from .metrics import per_queue

        return per_queue(self)
