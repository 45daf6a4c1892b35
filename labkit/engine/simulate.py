"""The simulated clock around the scheduler: arrivals, sessions, binds, evictions, completions.

Time follows a real Volcano cluster, one step at a time:

* a job's PodGroup appears at its submit time, phase Pending, **without pods**: the vcjob
  controller creates pods only after the PodGroup leaves Pending (enqueue), so a job needs one
  session to be enqueued and a later one to be allocated;
* sessions run on the `schedulePeriod` grid (k x period), as `wait.Until(runOnce, period)` does,
  but only when something changed since the last one (an event, or the last session decided
  something): a session on an unchanged snapshot decides nothing, so skipping it is exact;
* a bound pod starts at the session time; a job runs once `minAvailable` of its pods run, and
  ends after its remaining work (divided by the slowest node speed when it gives `work`),
  plus `restartCost` when it is a restart;
* an evicted pod keeps its resources for its grace period (Releasing), then is deleted. If the
  eviction leaves the job below minAvailable, the job restarts (vcjob policy
  `PodEvicted -> RestartJob`): every pod is terminated, work since the last checkpoint is lost,
  and the PodGroup goes back to Pending. An elastic job that keeps minAvailable loses only the
  surplus pod, which is recreated.

The session itself (`labkit.engine.reference.run_session` or the numba core) sees only the
PodGroups and pods that exist at that moment, re-indexed into a sub-Problem, as Volcano's cache
snapshot holds only live objects.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import spec
from ..results import EVENT_COLUMNS, JOB_COLUMNS, TASK_COLUMNS, Result
from ..spec import Scenario
from .compile import Compiled
from .problem import Decisions, PodGroupPhase, Problem, State, TaskStatus, rank_by

ARRIVAL, RELEASED, FINISH = 0, 1, 2
"""Event kinds, in the order they are applied when they fall on the same instant."""

Session = Callable[[Problem, State], Decisions]


@dataclass
class Trace:
    """What happened, as plain lists the Result turns into DataFrames."""

    events: list[tuple] = field(default_factory=list)   # (time, kind, job, task, node, reason, message)
    runs: list[list] = field(default_factory=list)      # [task, node, start, end, evicted]
    sessions: int = 0


class Simulation:
    """One run of a compiled scenario under a session function; `run()` returns the Trace."""

    def __init__(self, compiled: Compiled, session: Session):
        self.c = compiled
        self.p = compiled.problem
        self.session = session
        n_jobs, n_tasks = self.p.n_jobs, self.p.n_tasks
        self.present = np.zeros(n_jobs, bool)
        self.done = np.zeros(n_jobs, bool)
        self.phase = np.full(n_jobs, PodGroupPhase.PENDING, np.int8)
        self.created = np.zeros(n_tasks, bool)
        self.status = np.full(n_tasks, TaskStatus.PENDING, np.int8)
        self.node = np.full(n_tasks, -1, np.int64)
        self.open_run = np.full(n_tasks, -1, np.int64)
        self.pipelined_on = np.full(n_tasks, -1, np.int64)
        self.run_start = np.full(n_jobs, np.nan)
        self.work_done = np.zeros(n_jobs)
        self.lost_work = np.zeros(n_jobs)
        self.evictions = np.zeros(n_jobs, np.int64)
        self.restarts = np.zeros(n_jobs, np.int64)
        self.version = np.zeros(n_jobs, np.int64)
        self.enqueue_time = np.full(n_jobs, np.nan)
        self.start_time = np.full(n_jobs, np.nan)
        self.end_time = np.full(n_jobs, np.nan)
        self.next_node = 0
        self.heap: list[tuple] = []
        self.trace = Trace()
        for j in range(n_jobs):
            heapq.heappush(self.heap, (float(compiled.job_submit[j]), ARRIVAL, j, 0))

    # ---------------------------------------------------------------------------- the loop

    def run(self) -> Trace:
        """Advance the clock event by event and session by session until nothing is left to do
        (or the horizon is reached); the next session is on the grid, one period after the last."""
        period, horizon = self.c.schedule_period, self.c.horizon
        dirty, now, last_session = False, 0.0, -math.inf
        while True:
            t_event = self.heap[0][0] if self.heap else math.inf
            t_session = max(math.ceil(now / period - 1e-9) * period, last_session + period) if dirty else math.inf
            if min(t_event, t_session) > horizon or min(t_event, t_session) == math.inf:
                break
            if t_event <= t_session:
                now = t_event
                while self.heap and self.heap[0][0] == now:
                    _, kind, index, version = heapq.heappop(self.heap)
                    dirty |= self._apply_event(now, kind, index, version)
            else:
                now = last_session = t_session
                dirty = self._run_session(now)
        return self.trace

    def _apply_event(self, now: float, kind: int, index: int, version: int) -> bool:
        if kind == ARRIVAL:
            self.arrive(now, index)
        elif kind == RELEASED:
            self._released(now, index)
        elif kind == FINISH:
            if version != self.version[index]:
                return False
            self._finish(now, index)
        return True

    def arrive(self, now: float, j: int) -> None:
        """The PodGroup appears; a job with a `status` snapshot starts in that state."""
        self.present[j] = True
        self._log(now, "Submitted", j)
        status = self.c.scenario.jobs[j].status
        if status is None:
            return
        self._set_phase(now, j, PodGroupPhase[status.phase.upper()])
        node_index = {name: n for n, name in enumerate(self.p.node_names)}
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        for t in range(lo, hi):
            placed = status.running.get(self.p.role_names[self.p.task_role[t]], [])
            if self.p.task_index[t] < len(placed):
                self._bind(now, t, node_index[placed[self.p.task_index[t]]], "running in the snapshot")
        self._maybe_start(now, j)

    # ---------------------------------------------------------------------------- sessions

    def _run_session(self, now: float) -> bool:
        """Run one session on the live objects; apply its decisions. True if anything changed."""
        return self.session_once(now)[1]

    def session_once(self, now: float) -> tuple[Decisions | None, bool]:
        """One session at `now`: its decisions (in full-problem indices) and whether it changed anything."""
        releasing = np.zeros(self.p.n_jobs, bool)
        releasing[self.p.task_job[self.status == TaskStatus.RELEASING]] = True
        jobs = np.flatnonzero(self.present & (~self.done | releasing))  # terminating pods still hold resources
        if not len(jobs):
            return None, False
        tasks = np.concatenate([np.flatnonzero(self.created[self.c.job_pods[j]:self.c.job_pods[j + 1]])
                                + self.c.job_pods[j] for j in jobs]).astype(np.int64)
        sub = subproblem(self.p, jobs, tasks)
        state = State.from_tasks(sub, self.status[tasks], self.node[tasks], self.phase[jobs],
                                 now=now, cycle=self.trace.sessions, next_node=self.next_node)
        self.trace.sessions += 1
        decisions = self.session(sub, state)
        changed = False
        for placement in decisions.binds:
            self._bind(now, int(tasks[placement.task]), placement.node, placement.reason)
            changed = True
        for eviction in decisions.evictions:
            self._evict(now, int(tasks[eviction.task]), eviction.action, eviction.reason)
            changed = True
        for placement in decisions.pipelined:
            # Pipelining is not kept between sessions: the same snapshot pipelines the same way,
            # so it is no change; the release it waits for is an event that runs the next session.
            t = int(tasks[placement.task])
            if self.pipelined_on[t] != placement.node:
                self.pipelined_on[t] = placement.node
                self._log(now, "Pipelined", int(self.p.task_job[t]), t, placement.node, placement.action,
                          placement.reason)
        if decisions.state is not None:
            self.next_node = decisions.state.next_node  # the scheduler process keeps it across sessions
            for local, j in enumerate(jobs):
                changed |= self._set_phase(now, int(j), int(decisions.state.job_phase[local]))
        for j in jobs:
            self._maybe_start(now, int(j))
        return _to_full(decisions, jobs, tasks), changed

    def _set_phase(self, now: float, j: int, phase: int) -> bool:
        old = self.phase[j]
        if phase == old:
            return False
        self.phase[j] = phase
        if old == PodGroupPhase.PENDING and phase != PodGroupPhase.PENDING:
            lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
            self.created[lo:hi] = True  # the vcjob controller creates the pods now
            if math.isnan(self.enqueue_time[j]):
                self.enqueue_time[j] = now
            self._log(now, "Enqueued", j, message=f"PodGroup {PodGroupPhase(old).name.title()} -> "
                                                  f"{PodGroupPhase(phase).name.title()}")
        return True

    def _bind(self, now: float, t: int, node: int, reason: str) -> None:
        self.status[t] = TaskStatus.RUNNING
        self.pipelined_on[t] = -1
        self.node[t] = node
        self.open_run[t] = len(self.trace.runs)
        self.trace.runs.append([t, node, now, math.nan, math.nan])
        self._log(now, "Bound", int(self.p.task_job[t]), t, node, "Scheduled", reason)

    def _maybe_start(self, now: float, j: int) -> None:
        """The job's work runs once minAvailable pods run."""
        if not math.isnan(self.run_start[j]):
            return
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        running = self.status[lo:hi] == TaskStatus.RUNNING
        if running.sum() < max(1, self.p.job_min_member[j]):
            return
        self.run_start[j] = now
        if math.isnan(self.start_time[j]):
            self.start_time[j] = now
        nodes = self.node[lo:hi][running]
        speed = float(self.c.node_speed[nodes].min()) if self.c.job_uses_speed[j] else 1.0
        setup = self.c.job_restart_cost[j] if self.restarts[j] else 0.0
        remaining = (self.c.job_work[j] - self.work_done[j]) / speed
        self.version[j] += 1
        heapq.heappush(self.heap, (now + setup + remaining, FINISH, j, int(self.version[j])))
        self._log(now, "Started", j, message=f"{int(running.sum())} pods running")

    def _finish(self, now: float, j: int) -> None:
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        for t in range(lo, hi):
            if self.status[t] == TaskStatus.RELEASING:
                continue  # an evicted surplus pod still terminating; it ends when its grace does
            self._close_run(t, now)
            self.status[t] = TaskStatus.SUCCEEDED
        self.done[j] = True
        self.phase[j] = PodGroupPhase.COMPLETED
        self.end_time[j] = now
        self.work_done[j] = self.c.job_work[j]
        self._log(now, "Completed", j)

    # ---------------------------------------------------------------------------- evictions

    def _evict(self, now: float, t: int, action: str, reason: str) -> None:
        j = int(self.p.task_job[t])
        self.evictions[j] += 1
        self._log(now, "Evicted", j, t, int(self.node[t]), action, reason)
        self._terminate(now, t)
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        still = int((self.status[lo:hi] == TaskStatus.RUNNING).sum())
        if still >= max(1, self.p.job_min_member[j]):
            return  # an elastic job keeps running without its surplus pod
        if not math.isnan(self.run_start[j]):
            self._stop_work(now, j)
        for other in range(lo, hi):
            if self.status[other] == TaskStatus.RUNNING:
                self._terminate(now, other)
        self.restarts[j] += 1
        self._log(now, "Restarting", j, reason="PodEvicted", message="RestartJob: the gang fell below minAvailable")

    def _terminate(self, now: float, t: int) -> None:
        """Graceful pod deletion: resources stay in use (Releasing) until the grace period ends."""
        self.status[t] = TaskStatus.RELEASING
        if self.open_run[t] >= 0:
            self.trace.runs[self.open_run[t]][4] = now
        heapq.heappush(self.heap, (now + float(self.c.job_grace[self.p.task_job[t]]), RELEASED, t, 0))

    def _stop_work(self, now: float, j: int) -> None:
        """Account the run that ends now: keep the work up to the last checkpoint, lose the rest."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        setup = self.c.job_restart_cost[j] if self.restarts[j] else 0.0
        nodes = self.node[lo:hi][self.node[lo:hi] >= 0]
        speed = float(self.c.node_speed[nodes].min()) if self.c.job_uses_speed[j] and len(nodes) else 1.0
        total = min(self.c.job_work[j], self.work_done[j] + max(0.0, now - self.run_start[j] - setup) * speed)
        interval = self.c.job_checkpoint[j]
        kept = math.floor(total / interval) * interval if math.isfinite(interval) else 0.0
        kept = max(kept, self.work_done[j]) if math.isfinite(interval) else 0.0
        self.lost_work[j] += total - kept
        self.work_done[j] = kept
        self.run_start[j] = math.nan
        self.version[j] += 1  # cancels the pending FINISH event

    def _released(self, now: float, t: int) -> None:
        j = int(self.p.task_job[t])
        self._log(now, "Deleted", j, t, int(self.node[t]))
        self._close_run(t, now)
        self.status[t] = TaskStatus.SUCCEEDED if self.done[j] else TaskStatus.PENDING
        self.node[t] = -1
        if self.done[j]:
            return
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        if not math.isnan(self.run_start[j]):
            return  # an elastic surplus pod: recreated, Pending
        if (self.status[lo:hi] == TaskStatus.RELEASING).any():
            return
        # the whole job restarted: pods are recreated only after the PodGroup is enqueued again
        self.created[lo:hi] = False
        self.phase[j] = PodGroupPhase.PENDING

    # ---------------------------------------------------------------------------- records

    def _close_run(self, t: int, now: float) -> None:
        if self.open_run[t] >= 0:
            self.trace.runs[self.open_run[t]][3] = now
            self.open_run[t] = -1

    def _log(self, time: float, kind: str, job: int, task: int = -1, node: int = -1, reason: str = "",
             message: str = "") -> None:
        self.trace.events.append((time, kind, job, task, node, reason, message))


def subproblem(problem: Problem, jobs: np.ndarray, tasks: np.ndarray) -> Problem:
    """The Problem restricted to the given jobs and tasks (tasks must belong to those jobs)."""
    job_map = np.full(problem.n_jobs, -1, np.int64)
    job_map[jobs] = np.arange(len(jobs))
    fields = {}
    for name in problem.__dataclass_fields__:
        value = getattr(problem, name)
        if name.startswith("job_"):
            value = tuple(value[j] for j in jobs) if name == "job_names" else value[jobs]
        elif name.startswith("task_"):
            value = tuple(value[t] for t in tasks) if name == "task_names" else value[tasks]
        fields[name] = value
    fields["task_job"] = job_map[problem.task_job[tasks]]
    fields["job_rank"] = rank_by(list(problem.job_rank[jobs]))
    fields["task_rank"] = rank_by(list(problem.task_rank[tasks]))
    return Problem(**fields)


def _to_full(decisions: Decisions, jobs: np.ndarray, tasks: np.ndarray) -> Decisions:
    """Decisions of a sub-Problem session, re-indexed to the full Problem's tasks."""
    return Decisions(
        binds=[dataclasses.replace(b, task=int(tasks[b.task])) for b in decisions.binds],
        pipelined=[dataclasses.replace(b, task=int(tasks[b.task])) for b in decisions.pipelined],
        evictions=[dataclasses.replace(e, task=int(tasks[e.task])) for e in decisions.evictions],
        attempts=[(a, int(tasks[t])) for a, t in decisions.attempts],
        state=None,
    )


def cycle(scenario: Scenario, policy: str | None = None, session: Session | None = None) -> Cycle:
    """One scheduling session on the scenario as a snapshot: every job present, `status` applied."""
    from .compile import compile_scenario
    from .reference import run_session

    if policy is not None:
        scenario = with_policy(scenario, policy)
    sim = Simulation(compile_scenario(scenario), session or run_session)
    for j in range(sim.p.n_jobs):
        sim.arrive(0.0, j)
    decisions, _ = sim.session_once(0.0)
    return Cycle(sim.p, decisions or Decisions(), sim.phase.copy())


@dataclass(frozen=True)
class Cycle:
    """What one session decided, by name: binds, pipelined and evictions, each with its reason."""

    problem: Problem
    decisions: Decisions
    job_phase: np.ndarray

    def binds(self) -> dict[str, str]:
        return {self.problem.task_names[b.task]: self.problem.node_names[b.node] for b in self.decisions.binds}

    def evicted(self) -> list[str]:
        return [self.problem.task_names[e.task] for e in self.decisions.evictions]

    def table(self) -> pd.DataFrame:
        """One row per decision: kind (bind, pipeline, evict), task, node, action, reason."""
        p, d = self.problem, self.decisions
        rows = [("bind", p.task_names[b.task], p.node_names[b.node], b.action, b.reason) for b in d.binds]
        rows += [("pipeline", p.task_names[b.task], p.node_names[b.node] if b.node >= 0 else "", b.action, b.reason)
                 for b in d.pipelined]
        rows += [("evict", p.task_names[e.task], "", e.action, e.reason) for e in d.evictions]
        return pd.DataFrame(rows, columns=["kind", "task", "node", "action", "reason"])

    def phases(self) -> dict[str, str]:
        return {name: PodGroupPhase(ph).name.title() for name, ph in zip(self.problem.job_names, self.job_phase)}


@dataclass(frozen=True)
class RunRecord:
    """What an engine's run leaves behind, indexed like the Problem; both engines produce one.

    Per job (J,): ``done`` bool, ``running`` bool (its work is running at the end), ``phase``
    (PodGroupPhase), ``enqueue_time``/``start_time``/``end_time`` (NaN = not yet), ``evictions``
    (pods evicted), ``lost_work`` (seconds). ``runs`` (K, 5): task, node, start, end, evicted per
    pod run (end/evicted NaN = not yet). ``events``: (time, kind, job, task, node, reason, message)
    tuples with -1 for no task/node. ``sessions``: sessions run.
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
    events: list[tuple]
    sessions: int


def record_of(sim: Simulation) -> RunRecord:
    return RunRecord(
        done=sim.done, running=~np.isnan(sim.run_start), phase=sim.phase, enqueue_time=sim.enqueue_time,
        start_time=sim.start_time, end_time=sim.end_time, evictions=sim.evictions, lost_work=sim.lost_work,
        runs=np.array(sim.trace.runs, float).reshape(-1, 5), events=sim.trace.events, sessions=sim.trace.sessions,
    )


def result_of(c: Compiled, sim: RunRecord) -> Result:
    """The run's DataFrames (columns documented in `labkit.results`)."""
    p = c.problem
    scenario = c.scenario
    gpu = [r for r, name in enumerate(p.resource_names) if name.endswith("/gpu")]
    per_pod_gpus = p.task_request[:, gpu].sum(axis=1) / 1000.0 if gpu else np.zeros(p.n_tasks)
    job_gpus = np.bincount(p.task_job, weights=per_pod_gpus, minlength=p.n_jobs)
    state = np.where(sim.done, "Completed",
                     np.where(sim.running, "Running",
                              np.where(sim.phase == PodGroupPhase.PENDING, "Pending", "Inqueue")))
    jobs = pd.DataFrame({
        "name": [j.name for j in scenario.jobs],
        "namespace": [j.namespace for j in scenario.jobs],
        "queue": [p.queue_names[q] for q in p.job_queue],
        "priority": p.job_priority,
        "gpus": job_gpus,
        "submit": c.job_submit,
        "enqueue": sim.enqueue_time,
        "start": sim.start_time,
        "end": sim.end_time,
        "state": state,
        "evictions": sim.evictions,
        "lost_work": sim.lost_work,
    })
    jobs["wait"] = jobs.start - jobs.submit
    jobs["jct"] = jobs.end - jobs.submit
    runs = sim.runs
    task_ids = runs[:, 0].astype(np.int64)
    tasks = pd.DataFrame({
        "job": [p.job_names[j] for j in p.task_job[task_ids]],
        "role": [p.role_names[r] for r in p.task_role[task_ids]],
        "index": p.task_index[task_ids],
        "node": [p.node_names[n] for n in runs[:, 1].astype(np.int64)],
        "start": runs[:, 2],
        "end": runs[:, 3],
        "evicted": runs[:, 4],
    })
    for r, name in enumerate(p.resource_names):
        tasks[name] = p.task_request[task_ids, r] / _UNIT.get(name, 1000.0)
    ev = sim.events
    events = pd.DataFrame({
        "time": [e[0] for e in ev],
        "kind": [e[1] for e in ev],
        "job": [p.job_names[e[2]] for e in ev],
        "task": [p.task_names[e[3]] if e[3] >= 0 else "" for e in ev],
        "node": [p.node_names[e[4]] if e[4] >= 0 else "" for e in ev],
        "reason": [e[5] for e in ev],
        "message": [e[6] for e in ev],
    })
    tasks = tasks[TASK_COLUMNS + list(p.resource_names)]
    jobs, events = jobs[JOB_COLUMNS], events[EVENT_COLUMNS]
    info = {"sessions": sim.sessions, "horizon": c.horizon, "gpus": float(p.node_allocatable[:, gpu].sum() / 1000.0)
            if gpu else 0.0, "nodes": p.n_nodes}
    return Result(scenario=scenario, jobs=jobs, tasks=tasks, events=events, info=info)


_UNIT = {"memory": 1.0, "pods": 1.0}
"""Problem units -> scenario units: cpu and extended scalars are milli in the Problem."""


def simulate(scenario: Scenario, policy: str | None = None, session: Session | None = None,
             engine: str = "auto") -> Result:
    """Run a scenario on the simulated clock and return its Result.

    `policy` replaces the scenario's scheduler policy by a named preset (`labkit presets`).
    `engine`: "auto" runs the numba core (`labkit.engine.core`) when it simulates everything the
    scenario uses, else the reference engine; "numba" insists on the core (an error otherwise);
    "reference" runs the reference engine. `session`, a custom one-session function, runs on the
    reference clock. `Result.info["engine"]` says which engine ran (and why, on a fallback).
    """
    from ..errors import LabkitError
    from .compile import compile_scenario
    from .reference import run_session

    if engine not in ("auto", "numba", "reference"):
        raise LabkitError(f"engine {engine!r}: expected auto, numba or reference")
    if policy is not None:
        scenario = with_policy(scenario, policy)
    if session is None and spec.scheduler_of(scenario).kueue is not None:
        from .kueue import simulate_kueue

        return simulate_kueue(scenario)
    ran = "reference"
    if session is not None or engine == "reference":
        if engine == "numba":
            raise LabkitError("engine numba: a custom session function runs on the reference engine")
        compiled = compile_scenario(scenario)
    else:
        from . import core

        compiled, static, missing = core.prepare(scenario)
        if missing is None:
            result = result_of(compiled, core.run(compiled, static))
            result.info["engine"] = "numba"
            return result
        if engine == "numba":
            raise LabkitError(f"engine numba: the numba core does not simulate {missing}")
        ran = f"reference (the numba core does not simulate {missing})"
    sim = Simulation(compiled, session or run_session)
    sim.run()
    result = result_of(compiled, record_of(sim))
    result.info["engine"] = ran
    return result


def with_policy(scenario: Scenario, name: str) -> Scenario:
    """The scenario under the named scheduler policy instead of its own."""
    spec.policy_scheduler(name)  # unknown names fail here, naming --policy
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    sections = ("conf", "slurm", "kueue", "kube")
    data["scheduler"] = {**{k: v for k, v in data.get("scheduler", {}).items() if k not in sections}, "policy": name}
    return spec.validate(data)
