"""The simulated clock around the scheduler (the reference engines' run; the numba cores jit the same): arrivals, sessions, binds, evictions, completions.

Time follows a real Volcano cluster, one step at a time:

* a job's PodGroup appears at its submit time, phase Pending, **without pods**: the vcjob
  controller creates pods only after the PodGroup leaves Pending (enqueue), so a job needs one
  session to be enqueued and a later one to be allocated. Each pod goes through the API server's
  ResourceQuota admission of its namespace: a refused pod is logged (Rejected, FailedCreate) and
  the vcjob controller retries its failed sync with rate-limited requeues (5 ms, doubling), at most
  15 times (`--max-requeue-num`); the next failure terminates the job (state Terminated);
* sessions run on the `schedulePeriod` grid (k x period), as `wait.Until(runOnce, period)` does,
  but only when something changed since the last one (an event, or the last session decided
  something): a session on an unchanged snapshot decides nothing, so skipping it is exact;
* a bound pod starts at the session time; a job runs once `minAvailable` of its pods run, and
  ends after its remaining work (divided by the slowest node speed when it gives `work`; a job
  of the progress model at its rate, `_rate`, re-planned whenever its running pods change),
  plus `restartCost` when it is a restart; a pod bound after that (an elastic job's surplus pod
  that found no room at first) runs its whole duration from its own start, as on KWOK, and the
  vcjob completes only when every pod has (Volcano's running state: Succeeded + Failed ==
  replicas), so the job's other pods succeed and give their resources back meanwhile;
* an evicted pod keeps its resources for its grace period (Releasing), then is deleted. If the
  eviction leaves the job below minAvailable, the job restarts (vcjob policy
  `PodEvicted -> RestartJob`): every pod is terminated, work since the last checkpoint is lost,
  and the PodGroup goes back to Pending. An elastic job that keeps minAvailable loses only the
  surplus pod, which the vcjob controller recreates (Volcano's default action, SyncJob) and which,
  once it runs again, runs its whole duration (as on KWOK): when the job's work is done, its other
  pods succeed and give their resources back, each recreated pod succeeds when its own duration
  ends, and the job completes with the last.

The session itself (a family's reference session (`labkit.engine.families`) or the numba core) sees only the
PodGroups and pods that exist at that moment, re-indexed into a sub-Problem, as Volcano's cache
snapshot holds only live objects.

What the other policy families (`Policy.family`: kube-scheduler, Slurm) add, each read from the
Policy or the Compiled scenario, never from the family's name:

* cadence: each action has its period and may run at the instant of an event
  (`Policy.action_period`, `action_on_event`: Slurm's main scheduler on events and every
  sched_interval, its backfill every bf_interval); a session runs the actions due;
* pods exist from submit (`Policy.pods_at_submit`), each created through the API server's
  ResourceQuota admission when the Compiled scenario has quotas; a refused pod is retried before
  later sessions (the Job controller's retries);
* a job running past its time limit (`Problem.job_time_limit`) is killed: state Timeout;
* an eviction's `mode`: requeue (the job waits `Policy.requeue_hold`, Slurm's BeginTime),
  cancel (the job ends: state Preempted), suspend (the job keeps its nodes, its work pauses,
  until a session binds its pods again);
* between sessions the clock keeps the pods waiting at Permit (`Decisions.waiting`: Allocated,
  with when they began to wait), the nominations (`Decisions.pipelined`), each pod's start, and
  Slurm's decayed fair-share usage; it logs the sessions' notes (pending reasons,
  FailedScheduling) when they change, and runs a session at `Decisions.wake_at`.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..progress import Progress
from .compile import Compiled
from .events import (
    ARRIVAL,
    CHANGE,
    CORDON,
    DRAIN,
    FAIL,
    FINISH,
    NODE,
    NODE_LOGGED,
    RECOVER,
    RELEASED,
    RESYNC,
    TIMEOUT,
    TIMER,
    WAKE,
)
from .hypernodes import span_level
from .problem import Decisions, Eviction, PodGroupPhase, Problem, State, TaskStatus, rank_by
from .records import RunRecord

REQUEUE_DELAY, MAX_REQUEUE = 0.005, 15
"""The vcjob controller's retries of a failed sync (pkg/controllers/job/job_controller.go
``handleJobError``): ``AddRateLimited`` with client-go's default controller rate limiter (5 ms,
doubling per failure), while ``NumRequeues`` < ``--max-requeue-num`` (default 15); the next
failure runs TerminateJobAction."""

Session = Callable[[Problem, State], Decisions]
Usage = Callable[[Problem, np.ndarray, float], np.ndarray]
"""A family's decayed usage per association at `now` from the pod runs so far (Slurm's fair share)."""
PROGRESS_SECONDS = 0.25
"""How often a long reference run reports its progress."""


@dataclass
class Trace:
    """What happened, as plain lists the Result turns into DataFrames."""

    events: list[tuple] = field(default_factory=list)   # (time, kind, job, task, node, reason, message)
    runs: list[list] = field(default_factory=list)      # [task, node, start, end, evicted]
    sessions: int = 0


class Simulation:
    """One run of a compiled scenario under a session function; `run()` returns the Trace."""

    def __init__(self, compiled: Compiled, session: Session, usage: Usage | None = None):
        self.c = compiled
        self.p = compiled.problem
        self.session = session
        self.usage = usage
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
        self.rate = np.ones(n_jobs)
        """A job of the progress model: its rate of progress while it runs (work seconds per second)."""
        self.rate_since = np.full(n_jobs, np.nan)
        """When its work began at that rate (after a restart's setup)."""
        self.work_done = np.zeros(n_jobs)
        self.lost_work = np.zeros(n_jobs)
        self.evictions = np.zeros(n_jobs, np.int64)
        self.restarts = np.zeros(n_jobs, np.int64)
        self.version = np.zeros(n_jobs, np.int64)
        self.rerun = np.full(n_tasks, np.nan)
        """A recreated surplus pod: inf until it runs again, then when that run ends (NaN: not one)."""
        self.draining = np.zeros(n_jobs, bool)
        """The job's work is done; it waits for its recreated pods' runs."""
        self.enqueue_time = np.full(n_jobs, np.nan)
        self.start_time = np.full(n_jobs, np.nan)
        self.end_time = np.full(n_jobs, np.nan)
        self.next_node = 0
        self.heap: list[tuple] = []
        self.trace = Trace()
        # kept between sessions for the other families (see the module docstring)
        self.nominated = np.full(n_tasks, -1, np.int64)
        """A pod's nominatedNodeName, valid while ``nominated_in`` is the last session: set there by a
        pipelining that nominates (kube: any; Volcano: one that evicted), kept by one that does not."""
        self.nominated_in = np.full(n_tasks, -1, np.int64)
        self.waiting_since = np.full(n_tasks, np.nan)
        self.eligible = np.full(n_jobs, -np.inf)
        self.suspended = np.zeros(n_jobs, bool)
        self.limit_used = np.zeros(n_jobs)
        self.final_state = np.full(n_jobs, "", object)
        self.priority = self.p.job_priority.copy()
        self.last_note: dict[tuple, tuple] = {}
        self.wakes: set[float] = set()
        self.requeues = np.zeros(n_jobs, np.int64)
        self.resync_at = np.full(n_jobs, np.nan)
        for j in range(n_jobs):
            heapq.heappush(self.heap, (float(compiled.job_submit[j]), ARRIVAL, j, 0))
        self.down = np.zeros(self.p.n_nodes, bool)
        self.cordoned = self.p.node_cordoned.copy()
        if len(compiled.event_time):  # the sessions read the nodes' schedulable flags as the events set them
            self.p = dataclasses.replace(self.p, node_schedulable=self.p.node_schedulable.copy(),
                                         node_cordoned=self.cordoned)
            for e, at in enumerate(compiled.event_time):
                heapq.heappush(self.heap, (float(at), NODE, e, 0))
        for e, at in enumerate(compiled.change_time):
            heapq.heappush(self.heap, (float(at), CHANGE, e, 0))

    # ---------------------------------------------------------------------------- the loop

    def run(self, progress: Progress | None = None) -> Trace:
        """Advance the clock event by event and session by session until nothing is left to do
        (or the horizon is reached). An action runs after a change: at the instant of an event if
        it runs on events, else on its period's grid, at least one period after its last run
        (Volcano: every action on the schedulePeriod grid). `progress` gets (jobs done, jobs,
        simulated seconds) every few tenths of a second."""
        policy, horizon = self.p.policy, self.c.horizon
        n = len(policy.actions)
        period = np.full(n, self.c.schedule_period) if policy.action_period is None else policy.action_period
        on_event = np.zeros(n, bool) if policy.action_on_event is None else policy.action_on_event
        dirty, evented, last = np.zeros(n, bool), np.zeros(n, bool), np.full(n, -math.inf)
        now, told = 0.0, time.perf_counter()
        while True:
            if progress is not None and time.perf_counter() - told > PROGRESS_SECONDS:
                progress(int(self.done.sum()), len(self.done), now)
                told = time.perf_counter()
            t_event = self.heap[0][0] if self.heap else math.inf
            grid = np.maximum(np.ceil(now / period - 1e-9) * period + 0.0, last + period)  # + 0.0: no -0.0
            due_at = np.where(dirty, np.where(on_event & evented, now, grid), math.inf)
            t_session = float(due_at.min()) if n else math.inf
            if min(t_event, t_session) > horizon or min(t_event, t_session) == math.inf:
                break
            if t_event <= t_session and self._settled(now):
                break
            if t_event <= t_session:
                now = t_event
                while self.heap and self.heap[0][0] == now:
                    _, kind, index, version = heapq.heappop(self.heap)
                    if self._apply_event(now, kind, index, version):
                        dirty[:] = evented[:] = True
            else:
                now = t_session
                due = due_at == t_session
                changed = self._run_session(now, due)
                last[due], dirty[due], evented[due] = now, False, False
                dirty |= changed
        return self.trace

    def _settled(self, now: float) -> bool:
        """Only WAKEs are left, no job's work runs, no pod terminates and no job waits for its
        BeginTime: every later session would repeat the last one (a Permit wait timing out and
        the same pods reserved again, priorities recalculated on an idle cluster)."""
        return (all(kind == WAKE for _, kind, _, _ in self.heap) and bool(np.isnan(self.run_start[~self.done]).all())
                and not (self.status == TaskStatus.RELEASING).any() and not (self.eligible > now).any())

    def _apply_event(self, now: float, kind: int, index: int, version: int) -> bool:
        if kind == ARRIVAL:
            self.arrive(now, index)
        elif kind == RELEASED:
            self._released(now, index)
        elif kind in (FINISH, TIMEOUT):
            if version != self.version[index]:
                return False
            (self._work_done if kind == FINISH else self._time_out)(now, index)
        elif kind == WAKE:
            self.wakes.discard(now)
        elif kind == RESYNC:
            if self.resync_at[index] != now:
                return False
            self.resync_at[index] = math.nan
            if self.done[index] or self.phase[index] == PodGroupPhase.PENDING:
                return False
            self._create_pods(now, index)
        elif kind == NODE:
            self._node_event(now, index)
        elif kind == CHANGE:
            self._change(now, index)
        return True

    def _change(self, now: float, e: int) -> None:
        """Change ``e`` of the scenario: the Problem fields it sets replace the current ones, so the
        next session reads them; a pod already created keeps its priority (spec.priority is set at
        its creation), a PodGroup takes its PriorityClass's new value (the run's record keeps a
        job's priority as it stood when it started)."""
        patch = dict(self.c.change_patch[e])
        if "task_priority" in patch:
            patch["task_priority"] = np.where(self.created, self.p.task_priority, patch["task_priority"])
            self.priority = np.where(np.isnan(self.start_time), patch["job_priority"], self.priority)
        self.p = dataclasses.replace(self.p, **patch)
        kind, reason, message = self.c.change_said[e]
        self._log(now, kind, -1, reason=reason, message=message)

    def _node_event(self, now: float, e: int) -> None:
        """Node event ``e`` of the scenario: a failed node is NotReady and its pods are lost (the
        node lifecycle controller's NoExecute taint evicts them, TaintManagerEviction); a drained
        node is cordoned and its pods evicted (kubectl drain); either way each pod goes the way
        an evicted pod does (`_evict`: below minAvailable its job restarts from its last
        checkpoint). A node takes pods while it is neither down nor cordoned. Under Slurm
        (`Policy.node_fail_ends_job`) a failed node ends its jobs whole (`_node_failed`) and a
        drained one keeps them."""
        n, what = int(self.c.event_node[e]), int(self.c.event_kind[e])
        if what in (FAIL, RECOVER):
            self.down[n] = what == FAIL
        else:
            self.cordoned[n] = what in (CORDON, DRAIN)
        self.p.node_schedulable[n] = not (self.down[n] or self.cordoned[n])
        self._log(now, (self.p.policy.node_words or NODE_LOGGED)[what], -1, -1, n)
        if self.p.policy.node_fail_ends_job:
            if what == FAIL:
                for t in np.flatnonzero((self.node == n) & (self.status == TaskStatus.RUNNING)):
                    if self.status[t] == TaskStatus.RUNNING:  # not killed with an earlier pod of its job
                        self._node_failed(now, int(self.p.task_job[t]), n)
            return
        if what not in (FAIL, DRAIN):
            return
        for t in np.flatnonzero((self.node == n) & (self.status == TaskStatus.RUNNING)):
            if self.status[t] == TaskStatus.RUNNING:  # not deleted by an earlier pod's restart of its job
                pod = self.p.task_names[t]
                self._evict(now, int(t), *(("TaintManagerEviction", f"Marking for deletion Pod {pod}") if what == FAIL
                                           else ("Drain", f"evicting pod {pod}")))

    def timer(self, at: float) -> None:
        """A session's own timed transition at `at` (see TIMER)."""
        heapq.heappush(self.heap, (at, TIMER, -1, 0))

    def arrive(self, now: float, j: int) -> None:
        """The PodGroup appears; a job with a `status` snapshot starts in that state."""
        self.present[j] = True
        self._log(now, "Submitted", j)
        if self.p.policy.pods_at_submit:
            self.enqueue_time[j] = now
            self._create_pods(now, j)
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

    def _run_session(self, now: float, due: np.ndarray | None = None) -> bool:
        """Run one session on the live objects; apply its decisions. True if anything changed."""
        return self.session_once(now, due)[1]

    def session_once(self, now: float, due: np.ndarray | None = None) -> tuple[Decisions | None, bool]:
        """One session at `now` running the actions marked in `due` (default all): its decisions
        (in full-problem indices) and whether it changed anything."""
        if self.c.quotas is not None and self.p.policy.pods_at_submit:  # a Job controller retries what admission refused
            for j in np.flatnonzero(self.present & ~self.done):
                self._create_pods(now, int(j))
        releasing = np.zeros(self.p.n_jobs, bool)
        releasing[self.p.task_job[self.status == TaskStatus.RELEASING]] = True
        jobs = np.flatnonzero(self.present & (~self.done | releasing))  # terminating pods still hold resources
        if not len(jobs):
            return None, False
        tasks = np.concatenate([np.flatnonzero(self.created[self.c.job_pods[j]:self.c.job_pods[j + 1]])
                                + self.c.job_pods[j] for j in jobs]).astype(np.int64)
        policy = self.p.policy
        if due is not None and not due.all():
            policy = dataclasses.replace(policy, actions=policy.actions[due])
        sub = subproblem(self.p, jobs, tasks, policy)
        state = State.from_tasks(sub, self.status[tasks], self.node[tasks], self.phase[jobs],
                                 now=now, cycle=self.trace.sessions, next_node=self.next_node, **self._kept(now, jobs, tasks))
        self.trace.sessions += 1
        decisions = self.session(sub, state)
        changed = False
        for placement in decisions.binds:
            t = int(tasks[placement.task])
            self.suspended[self.p.task_job[t]] = False  # binding a suspended job's pods resumes it
            self._bind(now, t, placement.node, placement.reason)
            changed = True
        stopped: set[int] = set()
        for eviction in decisions.evictions:
            t = int(tasks[eviction.task])
            if eviction.mode == "restart":
                self._evict(now, t, eviction.action, eviction.reason)
            elif self.p.task_job[t] not in stopped:
                stopped.add(int(self.p.task_job[t]))
                self._preempt_job(now, int(self.p.task_job[t]), eviction)
            changed = True
        changed |= self._keep_waiting(now, tasks, decisions)
        for placement in decisions.pipelined:
            t = int(tasks[placement.task])
            if placement.nominate:
                self.nominated[t], self.nominated_in[t] = placement.node, self.trace.sessions
            elif self.nominated_in[t] == self.trace.sessions - 1:
                self.nominated_in[t] = self.trace.sessions  # Volcano never sets nominatedNodeName to none
        for local, priority in decisions.priorities.items():
            if math.isnan(self.start_time[jobs[local]]):
                self.priority[jobs[local]] = priority  # as it stood until the job started
        for note in decisions.notes:
            self._note(now, int(jobs[note.job]), int(tasks[note.task]) if note.task >= 0 else -1, note.kind,
                       note.reason, note.message)
        if now < decisions.wake_at < math.inf and decisions.wake_at not in self.wakes:
            self.wakes.add(decisions.wake_at)
            heapq.heappush(self.heap, (decisions.wake_at, WAKE, -1, 0))
        if decisions.event_now:
            self.timer(now)
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

    def _kept(self, now: float, jobs: np.ndarray, tasks: np.ndarray) -> dict:
        """The between-session arrays of the State, for the session's jobs and pods."""
        start = np.full(len(tasks), np.nan)
        holding = self.open_run[tasks] >= 0
        start[holding] = [self.trace.runs[r][2] for r in self.open_run[tasks][holding]]
        usage = None
        args = self.p.policy.slurm
        if self.usage is not None and args is not None and args.slurmdbd and args.weight_fairshare:
            usage = self.usage(self.p, np.array(self.trace.runs, float).reshape(-1, 5), now)
        nominated = np.where(self.nominated_in[tasks] == self.trace.sessions, self.nominated[tasks], -1)
        return {"task_start": start, "task_nominated": nominated,
                "task_waiting_since": self.waiting_since[tasks], "job_eligible": self.eligible[jobs],
                "job_suspended": self.suspended[jobs], "assoc_usage": usage}

    def _keep_waiting(self, now: float, tasks: np.ndarray, decisions: Decisions) -> bool:
        """Pods reserved at Permit stay Allocated on their node, waiting since the time the session
        says (a pod rejected and reserved again waits anew); ones the session no longer keeps
        (rejected, timed out) are Pending again. True if that changed anything."""
        changed = False
        since = decisions.state.task_waiting_since if decisions.state is not None else None
        waiting = {int(tasks[w.task]): (w.node, now if since is None else float(since[w.task]))
                   for w in decisions.waiting}
        for t in tasks[self.status[tasks] == TaskStatus.ALLOCATED]:
            if int(t) not in waiting:
                self.status[t], self.node[t], self.waiting_since[t] = TaskStatus.PENDING, -1, np.nan
                changed = True
        for t, (node, start) in waiting.items():
            changed |= self.status[t] != TaskStatus.ALLOCATED or self.waiting_since[t] != start
            self.status[t], self.node[t], self.waiting_since[t] = TaskStatus.ALLOCATED, node, start
        self.waiting_since[self.status != TaskStatus.ALLOCATED] = np.nan
        return bool(changed)

    def _note(self, now: float, j: int, t: int, kind: str, reason: str, message: str) -> None:
        """Log a session's note as an event when it differs from the last one of its kind."""
        key = (j, t, kind)
        if self.last_note.get(key) != (reason, message):
            self.last_note[key] = (reason, message)
            self._log(now, kind, j, t, -1, reason, message)

    def _create_pods(self, now: float, j: int) -> None:
        """The workload controller creates the job's missing pods, each through the API server's
        ResourceQuota admission; a refused one is retried later: before the next session (a Job's
        controller), or by the vcjob controller's requeue of the failed sync (:data:`MAX_REQUEUE`)."""
        quotas = self.c.quotas
        failed = False
        for t in range(self.c.job_pods[j], self.c.job_pods[j + 1]):
            if self.created[t]:
                continue
            refused = quotas.admit(t, self.created & (self.status != TaskStatus.SUCCEEDED)) if quotas else None
            if refused:
                self._note(now, j, t, "Rejected", "FailedCreate", refused)
                failed = True
            else:
                self.created[t] = True
        if self.p.policy.pods_at_submit:
            return
        if not failed:
            self.requeues[j] = 0  # queue.Forget
        elif not math.isnan(self.resync_at[j]):
            return  # a requeued sync is already due
        elif self.requeues[j] < MAX_REQUEUE:
            self.resync_at[j] = now + REQUEUE_DELAY * 2.0 ** self.requeues[j]
            heapq.heappush(self.heap, (self.resync_at[j], RESYNC, j, 0))
            self.requeues[j] += 1
        else:
            self._retry_limit(now, j)

    def _retry_limit(self, now: float, j: int) -> None:
        """handleJobError past the retry limit: TerminateJobAction kills the job's pods; the job ends
        Terminated without having run (its PodGroup is Inqueue, never Running)."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        if not math.isnan(self.run_start[j]):
            self._stop_work(now, j)
        for t in range(lo, hi):
            if self.status[t] == TaskStatus.RUNNING:
                self._terminate(now, t)
        self.done[j] = True
        self.phase[j] = PodGroupPhase.COMPLETED
        self.end_time[j] = now
        self.final_state[j] = "Terminated"
        self._log(now, "Terminated", j, reason="ExecuteAction", message="Job failed on action SyncJob for retry limit reached")

    def _set_phase(self, now: float, j: int, phase: int) -> bool:
        old = self.phase[j]
        if phase == old:
            return False
        self.phase[j] = phase
        if old == PodGroupPhase.PENDING and phase != PodGroupPhase.PENDING:
            self._create_pods(now, j)  # the vcjob controller creates the pods now
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
        j = int(self.p.task_job[t])
        self._log(now, "Bound", j, t, node, "Scheduled", reason)
        if self.c.job_class[j] >= 0 and not math.isnan(self.run_start[j]):
            self._replan(now, j)  # scale-out: the job runs on with one more pod
        if self.rerun[t] == math.inf:
            speed = float(self.c.node_speed[node]) if self.c.job_uses_speed[j] else 1.0
            self.rerun[t] = now + self.c.job_work[j] / speed
            if self.draining[j]:
                self._next_pod_done(now, j)

    def _maybe_start(self, now: float, j: int) -> None:
        """The job's work runs once minAvailable pods run (and its time limit counts from then). A pod
        not running yet (an elastic job's surplus pod) runs its whole duration once bound, as on
        KWOK, and the vcjob completes only when every pod has (Succeeded + Failed == replicas).
        A job of the progress model runs at its rate (`_rate`), and its pods end together."""
        if not math.isnan(self.run_start[j]) or self.suspended[j]:
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
        rated = self.c.job_class[j] >= 0
        if rated:
            speed = self.rate[j] = self._rate(j)
            self.rate_since[j] = now + setup
        remaining = (self.c.job_work[j] - self.work_done[j]) / speed
        self.version[j] += 1
        heapq.heappush(self.heap, (now + setup + remaining, FINISH, j, int(self.version[j])))
        if not rated:
            later = ~running & np.isnan(self.rerun[lo:hi])
            self.rerun[lo:hi][later] = math.inf  # each runs its whole duration once bound (KWOK)
        limit = self.p.job_time_limit[j] - self.limit_used[j]
        if setup + remaining > limit:
            heapq.heappush(self.heap, (now + limit, TIMEOUT, j, int(self.version[j])))
        self._log(now, "Started", j, message=f"{int(running.sum())} pods running")

    def _rate(self, j: int) -> float:
        """A job of the progress model: its rate with the pods it runs now, the slowest pod's GPU
        speed (pool speed when it gives `work` x its class's speed on the GPU model) x the placement
        factor of the level its gang spans x throughput(pods running) / throughput(replicas)."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        nodes = self.node[lo:hi][self.status[lo:hi] == TaskStatus.RUNNING]
        k = int(self.c.job_class[j])
        speed = self.c.class_speed[k, self.c.node_model[nodes]]
        if self.c.job_uses_speed[j]:
            speed = speed * self.c.node_speed[nodes]
        placement = self.c.class_placement[k, span_level(nodes, self.p.node_hypernode)]
        return float(speed.min() * placement * self.c.class_scaling[k, len(nodes)] / self.c.class_scaling[k, hi - lo])

    def _progress(self, now: float, j: int) -> float:
        """A job of the progress model: its work done by `now` (the run at its current rate)."""
        return min(self.c.job_work[j], self.work_done[j] + max(0.0, now - self.rate_since[j]) * self.rate[j])

    def _replan(self, now: float, j: int) -> None:
        """A running job of the progress model gained or lost a pod: the work so far is accounted
        at the old rate, the rest runs at the new one (a restart's setup still ends when it did)."""
        self.work_done[j] = self._progress(now, j)
        self.rate_since[j] = max(now, self.rate_since[j])
        self.rate[j] = self._rate(j)
        self.version[j] += 1
        end = self.rate_since[j] + (self.c.job_work[j] - self.work_done[j]) / self.rate[j]
        heapq.heappush(self.heap, (end, FINISH, j, int(self.version[j])))

    def _work_done(self, now: float, j: int) -> None:
        """The job's work is done: it completes, unless pods recreated after an eviction still run
        (or wait to run) their whole duration; its other pods succeed now, each of those when its
        own duration ends, and the job completes with the last."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        later = [t for t in range(lo, hi) if self.rerun[t] > now]
        if not later:
            self._finish(now, j)
            return
        self.draining[j] = True
        self.work_done[j] = self.c.job_work[j]
        for t in range(lo, hi):
            if self.status[t] == TaskStatus.RUNNING and not self.rerun[t] > now:
                self._close_run(t, now)
                self.status[t] = TaskStatus.SUCCEEDED
        self._next_pod_done(now, j)

    def _next_pod_done(self, now: float, j: int) -> None:
        """While a job drains, its next FINISH is when the first of its running recreated pods ends
        its whole duration: that pod succeeds then and gives its resources back (as on KWOK); none
        running: the next bind schedules it."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        ends = [self.rerun[t] for t in range(lo, hi) if now < self.rerun[t] < math.inf]
        if ends:
            self.version[j] += 1
            heapq.heappush(self.heap, (float(min(ends)), FINISH, j, int(self.version[j])))

    def _finish(self, now: float, j: int, kind: str = "Completed", reason: str = "", message: str = "") -> None:
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
        self._log(now, kind, j, reason=reason, message=message)

    def _time_out(self, now: float, j: int) -> None:
        """The job reached its time limit: its processes are killed (Slurm's TIMEOUT state); the work
        done so far is not finished work."""
        done = self.work_done[j] + max(0.0, now - self.run_start[j])
        self.version[j] += 1  # cancels the FINISH event
        self._finish(now, j, "Timeout", "TimeLimit", f"CANCELLED DUE TO TIME LIMIT ({self.p.job_time_limit[j]:g}s)")
        self.work_done[j] = min(done, self.c.job_work[j])
        self.final_state[j] = "Timeout"

    def _node_failed(self, now: float, j: int, n: int) -> None:
        """Slurm's kill_running_job_by_node_name for a job with a node on failed node `n`: the
        whole job is killed at once, without a grace period, and requeued when it may be
        (`Problem.job_requeue`), else it ends: state NodeFail, reason NodeDown; slurmctld's log
        line is the message."""
        name, node = self.p.job_names[j], self.p.node_names[n]
        if self.p.job_requeue[j]:
            eviction = Eviction(-1, "NodeFail", f"requeue JobId={name} due to failure of node {node}", "requeue")
        else:
            eviction = Eviction(-1, "NodeFail", f"Killing JobId={name} on failed node {node}", "cancel")
        self._preempt_job(now, j, eviction, ended=("NodeFail", "NodeDown", "NodeFail"), grace=0.0)

    def _preempt_job(self, now: float, j: int, eviction, ended: tuple[str, str, str] = ("Cancelled", "Preempted",
                     "Preempted"), grace: float | None = None) -> None:
        """A whole job preempted the way its mode says: requeue (pods deleted, the job pending
        again once they are gone, not before now + requeue_hold), cancel (pods deleted, the job
        ends: the kind, reason and state of `ended`), suspend (pods keep their nodes, work and
        time limit pause). A suspended job requeued or cancelled loses its work since its last
        checkpoint as a running one does. The pods terminate in `grace` (default: the job's)."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        holding = [t for t in range(lo, hi) if self.status[t] == TaskStatus.RUNNING]
        for t in holding:
            self.evictions[j] += 1
            self._log(now, "Evicted", j, t, int(self.node[t]), eviction.action, eviction.reason)
        if not math.isnan(self.run_start[j]):
            self.limit_used[j] += now - self.run_start[j]
            if eviction.mode == "suspend":
                setup = self.c.job_restart_cost[j] if self.restarts[j] else 0.0
                self.work_done[j] = (self._progress(now, j) if self.c.job_class[j] >= 0
                                     else self.work_done[j] + now - self.run_start[j] - setup)
                self.run_start[j] = math.nan
                self.version[j] += 1
            else:
                self._stop_work(now, j)
        elif self.suspended[j] and eviction.mode != "suspend":
            interval = self.c.job_checkpoint[j]
            kept = math.floor(self.work_done[j] / interval) * interval if math.isfinite(interval) else 0.0
            self.lost_work[j] += self.work_done[j] - kept
            self.work_done[j] = kept
        if eviction.mode == "suspend":
            self.suspended[j] = True
            for t in holding:
                self._close_run(t, now)
            self._log(now, "Suspended", j, reason="Preempted", message=eviction.reason)
            return
        self.suspended[j] = False
        for t in holding:
            self._terminate(now, t, grace)
        if eviction.mode == "requeue":
            self.restarts[j] += 1
            self.limit_used[j] = 0.0
            self.eligible[j] = now + self.p.policy.requeue_hold
            self._log(now, "Restarting", j, reason="Requeue", message=f"BeginTime={self.eligible[j]:g} ({eviction.reason})")
            return
        kind, reason, state = ended
        self.done[j] = True
        self.phase[j] = PodGroupPhase.COMPLETED
        self.end_time[j] = now
        self.final_state[j] = state
        self._log(now, kind, j, reason=reason, message=eviction.reason)

    # ---------------------------------------------------------------------------- evictions

    def _evict(self, now: float, t: int, action: str, reason: str) -> None:
        j = int(self.p.task_job[t])
        self.evictions[j] += 1
        self._log(now, "Evicted", j, t, int(self.node[t]), action, reason)
        if self.status[t] == TaskStatus.RELEASING:
            return  # its job's restart, for an earlier eviction of this session, already deletes it
        self._terminate(now, t)
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        still = int((self.status[lo:hi] == TaskStatus.RUNNING).sum())
        if still >= max(1, self.p.job_min_member[j]) or self.draining[j]:
            # the job runs on; the controller recreates the pod (SyncJob)
            if self.c.job_class[j] < 0:
                self.rerun[t] = math.inf
            elif not math.isnan(self.run_start[j]):
                self._replan(now, j)  # scale-in
            return
        self.rerun[lo:hi] = math.nan  # the whole job restarts: its pods run as one again
        if not math.isnan(self.run_start[j]):
            self._stop_work(now, j)
        for other in range(lo, hi):
            if self.status[other] == TaskStatus.RUNNING:
                self._terminate(now, other)
        self.restarts[j] += 1
        self._log(now, "Restarting", j, reason="PodEvicted", message="RestartJob: the gang fell below minAvailable")

    def _terminate(self, now: float, t: int, grace: float | None = None) -> None:
        """Graceful pod deletion: resources stay in use (Releasing) until the grace period ends
        (`grace`, default the job's)."""
        self.status[t] = TaskStatus.RELEASING
        if self.open_run[t] >= 0:
            self.trace.runs[self.open_run[t]][4] = now
        grace = float(self.c.job_grace[self.p.task_job[t]]) if grace is None else grace
        heapq.heappush(self.heap, (now + grace, RELEASED, t, 0))

    def _stop_work(self, now: float, j: int) -> None:
        """Account the run that ends now: keep the work up to the last checkpoint, lose the rest."""
        lo, hi = self.c.job_pods[j], self.c.job_pods[j + 1]
        setup = self.c.job_restart_cost[j] if self.restarts[j] else 0.0
        nodes = self.node[lo:hi][self.node[lo:hi] >= 0]
        speed = float(self.c.node_speed[nodes].min()) if self.c.job_uses_speed[j] and len(nodes) else 1.0
        total = (self._progress(now, j) if self.c.job_class[j] >= 0
                 else min(self.c.job_work[j], self.work_done[j] + max(0.0, now - self.run_start[j] - setup) * speed))
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
        if self.p.policy.pods_at_submit:
            self._create_pods(now, j)  # a Job's or a requeued batch job's pods come back at once

    # ---------------------------------------------------------------------------- records

    def _close_run(self, t: int, now: float) -> None:
        if self.open_run[t] >= 0:
            self.trace.runs[self.open_run[t]][3] = now
            self.open_run[t] = -1

    def _log(self, time: float, kind: str, job: int, task: int = -1, node: int = -1, reason: str = "",
             message: str = "") -> None:
        self.trace.events.append((time, kind, job, task, node, reason, message))


def subproblem(problem: Problem, jobs: np.ndarray, tasks: np.ndarray, policy=None) -> Problem:
    """The Problem restricted to the given jobs and tasks (tasks must belong to those jobs), under
    `policy` when given (the same policy with only the actions due)."""
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
    if policy is not None:
        fields["policy"] = policy
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


def record_of(sim: Simulation) -> RunRecord:
    return RunRecord(
        done=sim.done, running=~np.isnan(sim.run_start), phase=sim.phase, enqueue_time=sim.enqueue_time,
        start_time=sim.start_time, end_time=sim.end_time, evictions=sim.evictions, lost_work=sim.lost_work,
        runs=np.array(sim.trace.runs, float).reshape(-1, 5), events=sim.trace.events, sessions=sim.trace.sessions,
        state=np.where(sim.suspended & ~sim.done, "Suspended", sim.final_state), priority=sim.priority,
    )
