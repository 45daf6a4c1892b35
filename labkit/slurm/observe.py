"""A scenario on the local Slurm: submit each job at its scaled submit time, poll, return the Result.

`Recorder.feed` takes what `scontrol -o show job` printed at one moment and keeps, per job: its
runs (StartTime, EndTime, NodeList and the `Scheduler` that started it: Main or Backfill), its
pending reasons as they change, and its requeues (`Restarts` going up: the run ends then, an
eviction). `Recorder.result()` turns that into the simulator's tables, in scenario seconds:
`(t - t0) * time_scale`, t0 being the whole second the run began at; under sched/backfill the run
waits for the next multiple of the (scaled) bf_resolution, since Slurm floors reservation times on
the epoch's grid and the simulator on the scenario's. Slurm's times have one-second
resolution, so they are exact to `time_scale` scenario seconds; pending reasons and requeues carry
the time they were seen (poll interval 0.5 s). A job is submitted only once the controller has
looked at every job submitted before it (`settle`), so jobs reach the scheduler in the scenario's order
even when slurmctld is slow; the submit time recorded is the one Slurm gives.

Node events (`cluster.events`) are applied at their scaled times, after the submissions of the same
instant, with `scontrol update` (`nodes.py`), logged as the simulator logs them (NodeDown, NodeUp,
NodeDrain, NodeUndrain); a job requeued while a node of its run was DOWN is Evicted with reason
NodeFail (else Preempted). The nodes a run set DOWN or DRAIN are resumed when it ends.

Table notes: `queue` is the partition, `priority` Slurm's job priority (multifactor), `enqueue` the
submit time (Slurm has no admission stage), `evictions` the requeues (a preempted requeued job
restarts its sleep: a sleep has no checkpoint), and a job sbatch refused has state Rejected.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from ..errors import LabkitError
from ..results import EVENT_COLUMNS, JOB_COLUMNS, TASK_COLUMNS, Result
from ..spec import Scenario
from ..spec.model import SlurmConf
from ..spec.quantity import parse_duration, parse_quantity
from . import parse
from .cluster import ALREADY_UP, Cluster, require_slurm, up
from .conf import SlurmJob, backfill_grid, scheduling_interval, slurm_jobs
from .nodes import NodeAction, NodeFlags, node_actions, scontrol_updates

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY"})
"""Job states after which Slurm does nothing more with the job."""
POLL_SECONDS = 0.5
SETTLE_SECONDS, SETTLE_POLL_SECONDS = 15.0, 0.1
"""How long a submission waits for the controller to have looked at the jobs submitted before it."""
SUBMIT_MARGIN = 0.05
"""Jobs are submitted this long after their whole second: Slurm's clock is whole seconds read with time(),
which can lag the precise clock by milliseconds, and should read the second the job was meant for. No
longer: slurmctld's scheduling loops wake about once a second, each at its own phase, and a job that
arrives later in its second is more often started only in the next one (0.2 s here: the whole run
started a second late in 2 of 5 runs of chapter 11 at time scale 120; 0.05 s: in none of 6)."""


@dataclass
class Run:
    """One run of a job: from StartTime until it ended or was requeued (Unix seconds)."""

    start: float
    node_list: str
    scheduler: str
    end: float = math.nan
    evicted: bool = False

    @property
    def nodes(self) -> list[str]:
        return parse.hostnames(self.node_list)


@dataclass
class Track:
    """What has been seen of one job."""

    key: str
    job_id: int | None = None
    submit: float = math.nan
    partition: str = ""
    priority: int = 0
    restarts: int = 0
    reason: str = ""
    state: str = "PENDING"
    end: float = math.nan
    runs: list[Run] = field(default_factory=list)

    @property
    def open_run(self) -> Run | None:
        return self.runs[-1] if self.runs and math.isnan(self.runs[-1].end) else None


def state_word(state: str) -> str:
    """A Slurm job state in the jobs table's words: COMPLETED -> Completed, NODE_FAIL -> NodeFail."""
    return "".join(word.capitalize() for word in state.split("_"))


class Recorder:
    """Polls of the controller -> the Result of one real run."""

    def __init__(self, scenario: Scenario, jobs: list[SlurmJob], t0: float, time_scale: float, interval: float):
        self.scenario, self.jobs, self.t0, self.time_scale, self.interval = scenario, jobs, t0, time_scale, interval
        self.tracks = [Track(job.key, partition=job.partition) for job in jobs]
        self.events: list[tuple] = []
        """(Unix time, kind, job, node, reason, message), as seen."""
        self.down: list[tuple[float, str]] = []
        """(Unix time, node) of each node set DOWN."""
        self._told = 0

    def _event(self, track: Track, *event) -> None:
        self.events.append((event[0], event[1], track.key, *event[2:]))

    def news(self) -> list[str]:
        """The events seen since the last call, one line each (scenario seconds), for progress output."""
        lines = [f"{(t - self.t0) * self.time_scale:8.1f}s  {job:24} {kind:9} {reason} {node}".rstrip()
                 for t, kind, job, node, reason, _ in self.events[self._told:]]
        self._told = len(self.events)
        return lines

    def submitted(self, index: int, job_id: int, now: float) -> None:
        track = self.tracks[index]
        track.job_id, track.submit = job_id, now
        self._event(track, now, "Submitted", "", "", f"JobId={job_id}")

    def node_event(self, action: NodeAction, now: float) -> None:
        """A node event applied at `now` (scontrol update): logged per node, with no job."""
        for node in action.nodes:
            self.events.append((now, action.word, "", node, "", f"labkit {action.kind}"))
            if action.kind == "fail":
                self.down.append((now, node))

    def rejected(self, index: int, message: str, now: float) -> None:
        track = self.tracks[index]
        track.submit, track.state = now, "REJECTED"
        self._event(track, now, "Rejected", "", "sbatch", message)

    def finished(self, started: bool = False) -> bool:
        """Whether every job is done (`started`: has started or is done)."""
        return all(t.state in FINAL_STATES or t.state == "REJECTED" or (started and t.runs) for t in self.tracks)

    def ids(self, unfinished: bool = False) -> list[int]:
        return [t.job_id for t in self.tracks if t.job_id is not None
                and not (unfinished and t.state in FINAL_STATES)]

    def feed(self, now: float, records: dict[int, dict[str, str]]) -> None:
        """One `scontrol -o show job` (parsed by `parse.jobs`), seen at `now`."""
        for track in self.tracks:
            record = records.get(track.job_id) if track.job_id is not None else None
            if record is None or track.state in FINAL_STATES:
                continue
            self._feed(track, record, now)

    def _feed(self, track: Track, r: dict[str, str], now: float) -> None:
        state = r.get("JobState", "PENDING")
        restarts = int(r.get("Restarts", "0"))
        if restarts == 0 and r.get("SubmitTime"):  # a requeue sets SubmitTime anew
            track.submit = parse.timestamp(r["SubmitTime"])
        track.partition = r.get("Partition", track.partition)
        if state == "PENDING" or not track.runs:  # the priority the job was started with, or waits with
            track.priority = int(r.get("Priority", track.priority))
        run = track.open_run
        if restarts > track.restarts:
            if run is not None:
                run.end, run.evicted = now, True
                failed = [node for at, node in self.down if node in run.nodes and run.start <= at <= now]
                why = f"failure of node {failed[0]}" if failed else "preemption"
                self._event(track, now, "Evicted", run.node_list, "NodeFail" if failed else "Preempted",
                            f"requeued after {why} (Restarts={restarts})")
            track.restarts, run = restarts, None
        node_list = r.get("NodeList", "")
        ran = state == "RUNNING" or (state in FINAL_STATES and parse.hostnames(node_list))
        if ran and run is None and len(track.runs) <= track.restarts:
            run = Run(parse.timestamp(r.get("StartTime")), node_list, r.get("Scheduler", ""))
            track.runs.append(run)
            self._event(track, run.start, "Started", node_list, run.scheduler,
                        f"{len(run.nodes)} nodes, started by the {run.scheduler} scheduler")
            track.reason = ""
        if state == "PENDING":
            reason = r.get("Reason", "None")
            if reason not in ("None", track.reason):
                self._event(track, now, "Pending", "", reason, f"{state} ({reason})")
            track.reason = reason
        if state in FINAL_STATES:
            track.end = parse.timestamp(r.get("EndTime"))
            if run is not None:
                run.end, run.evicted = track.end, state in ("PREEMPTED", "NODE_FAIL")
            kind = "Evicted" if state == "PREEMPTED" else state_word(state)
            reason = r.get("Reason", "None")
            self._event(track, track.end, kind, node_list, state_word(state), "" if reason == "None" else reason)
        track.state = state

    def result(self) -> Result:
        """The run so far, in scenario seconds."""
        scale = self.time_scale

        def rel(t: float) -> float:
            return (t - self.t0) * scale

        resources = _resource_columns(self.scenario)
        rows, tasks = [], []
        for job, spec_job, track in zip(self.jobs, self.scenario.jobs, self.tracks):
            roles = [role for role, count in job.roles for _ in range(count)]
            pod = {name: parse_quantity(v) for name, v in spec_job.tasks[0].resources.items()} | {"pods": 1.0}
            for run in track.runs:
                evicted = rel(run.end) if run.evicted else math.nan
                for i, node in enumerate(run.nodes):
                    tasks.append([job.key, roles[min(i, len(roles) - 1)], i, node, rel(run.start), rel(run.end), evicted]
                                 + [pod.get(name, 0.0) for name in resources])
            lost = sum(run.end - run.start for run in track.runs if run.evicted) * scale
            start = rel(track.runs[0].start) if track.runs else math.nan
            rows.append([spec_job.name, spec_job.namespace, track.partition, track.priority, float(job.gpus * job.nodes),
                         rel(track.submit), rel(track.submit), start, rel(track.end), state_word(track.state),
                         track.restarts + (track.state in ("PREEMPTED", "NODE_FAIL")), lost])
        jobs = pd.DataFrame(rows, columns=JOB_COLUMNS[:-2])
        jobs["wait"] = jobs.start - jobs.submit
        jobs["jct"] = jobs.end - jobs.submit
        info = {"engine": "slurm", "time_scale": scale, "interval": self.interval, "run_start": self.t0,
                "sessions": 0, "nodes": sum(p.count for p in self.scenario.cluster.pools),
                "gpus": float(sum(parse_quantity(v) * p.count for p in self.scenario.cluster.pools
                                  for name, v in p.resources.items() if name.endswith("/gpu"))),
                "horizon": parse_duration(self.scenario.horizon) if self.scenario.horizon is not None else math.inf}
        return Result(scenario=self.scenario, jobs=jobs, tasks=pd.DataFrame(tasks, columns=TASK_COLUMNS + resources),
                      events=pd.DataFrame(
                          sorted(((rel(t), kind, job, "", node, reason, message)
                                  for t, kind, job, node, reason, message in self.events), key=lambda e: e[0]),
                          columns=EVENT_COLUMNS), info=info)


def _resource_columns(scenario: Scenario) -> list[str]:
    named = {name for pool in scenario.cluster.pools for name in pool.resources}
    named |= {name for job in scenario.jobs for task in job.tasks for name in task.resources}
    return ["cpu", "memory", "pods"] + sorted(named - {"cpu", "memory", "pods"})


def submit(cluster: Cluster, script: str) -> tuple[int | None, str]:
    """`sbatch --parsable SCRIPT`: (job id, "") or (None, sbatch's error line)."""
    done = cluster.call("sbatch", "--parsable", script)
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"sbatch exit {done.returncode}"
    return int(done.stdout.strip().split(";")[0]), ""


def restore(cluster: Cluster, touched: set[str]) -> None:
    """Resume the nodes a run's node events left DOWN or DRAIN, so that the next run finds them up."""
    states = parse.nodes(cluster.command("sinfo", "-h", "-N", "-o", "%N %T"))
    left = sorted(n for n in touched if any(word in states.get(n, "") for word in ("down", "drain")))
    if left:
        cluster.command("scontrol", "update", f"nodename={','.join(left)}", "state=RESUME")


def settle(cluster: Cluster, ids: list[int], timeout: float) -> None:
    """Wait (up to `timeout` s) until the controller has looked at every job in `ids`: none is still
    PENDING with Reason=None. Slurm schedules a new job in a deferred pass, so a job submitted a
    second later could otherwise be ranked with it in one pass, and the later job's higher priority
    would take the nodes the earlier one would have had: the scenario's submit order would be lost."""
    deadline = time.time() + timeout
    while ids and time.time() < deadline:
        records = parse.jobs(cluster.command("scontrol", "-o", "show", "job", timeout=10))
        if not any(records.get(i, {}).get("JobState") == "PENDING" and records[i].get("Reason") == "None"
                   for i in ids):
            return
        time.sleep(SETTLE_POLL_SECONDS)


def run(scenario: Scenario, conf: SlurmConf, cluster: Cluster, time_scale: float = 1.0, timeout: float = 3600,
        progress: Callable[[str], None] | None = None, until: str = "finished") -> Result:
    """Run the (expanded) scenario on the state dir's running Slurm; restarts it if its slurm.conf differs.

    Stops when every job is done (`until="started"`: once every job has started, enough for the starts
    `labkit compare` reads; evictions and ends after that are not seen), at the scenario's horizon, or
    after `timeout` real seconds; then cancels what is left. The Result is what had happened by then. `progress` gets one line per event as it
    is seen (and the line of a restart).
    """
    if until not in ("finished", "started"):
        raise LabkitError(f"until: must be 'finished' or 'started', got {until!r}")
    require_slurm()
    if not cluster.running():
        raise LabkitError(f"the local Slurm is not running in {cluster.dir}: labkit slurm up --state-dir {cluster.dir}")
    jobs = slurm_jobs(scenario, time_scale)
    tell = progress or (lambda line: None)
    done = up(scenario, conf, cluster, time_scale)
    if not done.startswith(ALREADY_UP):
        tell(done)
    queued = parse.queue(cluster.command("squeue", "-h", "-o", "%i"))
    if queued:
        raise LabkitError(f"{len(queued)} job(s) already in the queue of {cluster.dir}: scancel them first")
    grid = backfill_grid(conf, time_scale)
    t0 = float(math.ceil(time.time() / grid) * grid)
    if t0 - time.time() > 1:
        tell(f"starting in {t0 - time.time():.0f} s, on the {grid} s grid backfill rounds reservations to")
    begin = t0 + SUBMIT_MARGIN
    recorder = Recorder(scenario, jobs, t0, time_scale, scheduling_interval(conf, time_scale))
    horizon = parse_duration(scenario.horizon) / time_scale if scenario.horizon is not None else math.inf
    stop = t0 + min(timeout, horizon)
    waiting = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit, i))
    actions = node_actions(scenario)
    flags = NodeFlags()
    touched: set[str] = set()
    time.sleep(max(0.0, begin - time.time()))
    try:
        while True:
            now = time.time()
            if waiting and begin + jobs[waiting[0]].submit <= now:
                settle(cluster, recorder.ids(unfinished=True), SETTLE_SECONDS)
            due_at = jobs[waiting[0]].submit if waiting else math.nan
            while waiting and jobs[waiting[0]].submit == due_at and begin + due_at <= now:
                index = waiting.pop(0)
                script = cluster.dir / "jobs" / f"{jobs[index].key.replace('/', '.')}.sbatch"
                job_id, error = submit(cluster, str(script))
                if job_id is None:
                    recorder.rejected(index, error, time.time())
                else:
                    recorder.submitted(index, job_id, time.time())
            while actions and begin + actions[0].at / time_scale <= now and not (
                    waiting and jobs[waiting[0]].submit <= actions[0].at / time_scale):  # submissions first
                action = actions.pop(0)
                for update in scontrol_updates(action, flags):
                    cluster.command("scontrol", *update)
                touched.update(action.nodes)
                recorder.node_event(action, time.time())
            seen = time.time()
            recorder.feed(seen, parse.jobs(cluster.command("scontrol", "-o", "show", "job")))
            for line in recorder.news():
                tell(line)
            if (not waiting and not actions and recorder.finished(until == "started")) or now >= stop:
                break
            due = min(begin + jobs[waiting[0]].submit if waiting else math.inf,
                      begin + actions[0].at / time_scale if actions else math.inf)
            time.sleep(max(0.0, min(due, now + POLL_SECONDS, stop) - time.time()))
    finally:
        restore(cluster, touched)
    result = recorder.result()
    left = recorder.ids(unfinished=True)
    if left:
        cluster.command("scancel", *map(str, left))
    return result
