"""Watch events of a real run -> the same `Result` tables the simulator produces.

`Recorder.feed` takes watch events exactly as the API server streams them (`{"type": "ADDED" |
"MODIFIED" | "DELETED", "object": {...}}`) for vcjobs, PodGroups, pods and Events, keeps the last
state of every object, and `Recorder.result()` reads the run off those objects:

* times come from the objects themselves (creationTimestamp, pod `status.startTime`, the
  `finishedAt` of the container KWOK terminated, the `DisruptionTarget` condition Volcano's
  evictor writes, the vcjob's phase `lastTransitionTime`), so observing late still gives the right
  times; they have one-second resolution, i.e. `time_scale` seconds of scenario time;
* they are turned back into scenario seconds: `(t - t0) * time_scale`, where t0 is when the run
  began (the earliest vcjob creation minus its `labkit.io/submit` offset);
* a pod gives its resources back when it finishes or is deleted (KWOK removes a deleted pod at
  once, without its grace period);
* an observer started late sees only the objects that still exist: the runs of deleted pods are
  gone, though their evictions are still counted from the scheduler's `Evict` events;
* enqueue is the first pod's creation (the vcjob controller creates pods only once the PodGroup
  leaves Pending); a job starts when `minAvailable` pods of one job version (`volcano.sh/job-version`,
  bumped at every RestartJob) run; an eviction that restarts the job loses the work of that run
  (KWOK pods have no checkpoints); an elastic job's surplus pod, evicted, is recreated by the
  vcjob controller and runs again while the job keeps running: no work of the job is lost;
* the result carries the scheduler's period (`schedule_period`, real seconds) and the sessions a
  new vcjob needs to start (`start_sessions`): `labkit compare` allows for that latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from ..results import EVENT_COLUMNS, JOB_COLUMNS, TASK_COLUMNS, Result
from ..spec import Job, Scenario
from ..spec.quantity import parse_duration, parse_quantity
from ..workloads import expand
from .manifests import LAB, SUBMIT, TIME_SCALE, lab_labels, restarts_on_eviction

JOB_VERSION = "volcano.sh/job-version"
FINISHED_PHASES = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
"""vcjob phases after which nothing more happens to the job."""

VCJOB_START_SESSIONS = 2
"""Sessions a new vcjob needs to run: one enqueues its PodGroup (the controller then creates the
pods), the next allocates them (recorded: 1.10-1.67 s from create to Running at a 1 s period)."""

DEFAULT_SCHEDULE_PERIOD = 1.0
"""vc-scheduler's `--schedule-period` when not given (Volcano's default, 1s)."""


def timestamp(text: str | None) -> float:
    """An RFC 3339 API timestamp as Unix seconds (NaN when absent)."""
    return datetime.fromisoformat(text).timestamp() if text else math.nan


@dataclass(frozen=True)
class PodRun:
    """One pod object (one UID): a single run of one replica of a task."""

    uid: str
    job: int
    role: str
    index: int
    version: int
    created: float
    node: str
    start: float
    finished: float
    evicted: float
    deleted: float
    """When the pod was deleted: KWOK removes a deleted pod at once, without waiting for its grace period."""
    message: str
    requests: dict[str, float]

    @property
    def end(self) -> float:
        """When the pod gave its resources back: it finished, or it was deleted; NaN while it holds them."""
        return self.deleted if math.isnan(self.finished) else self.finished


class Recorder:
    """Folds the watch events of one lab's run into a `Result` (see the module doc)."""

    def __init__(self, scenario: Scenario, schedule_period: float = DEFAULT_SCHEDULE_PERIOD):
        self.scenario = expand(scenario)
        self.schedule_period = schedule_period
        self.lab = lab_labels(self.scenario.name)[LAB]
        self.job_index = {(j.namespace, j.name): i for i, j in enumerate(self.scenario.jobs)}
        self.pod_names = {(j.namespace, f"{j.name}-{t.name}-{k}"): (i, t.name, k)
                          for i, j in enumerate(self.scenario.jobs) for t in j.tasks for k in range(t.replicas_resolved)}
        self.vcjobs: dict[int, dict] = {}
        self.podgroups: dict[int, dict] = {}
        self.pods: dict[str, dict] = {}
        self.evict_events: dict[str, dict] = {}

    def feed(self, event: dict) -> None:
        """Take one watch event (BOOKMARK and ERROR events carry no object state and are skipped)."""
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj = event["object"]
        meta = obj.get("metadata", {})
        kind, key = obj.get("kind"), (meta.get("namespace"), meta.get("name"))
        if kind == "Job" and meta.get("labels", {}).get(LAB) == self.lab and key in self.job_index:
            self.vcjobs[self.job_index[key]] = obj
        elif kind == "PodGroup":
            owners = [(meta.get("namespace"), o["name"]) for o in meta.get("ownerReferences", []) if o.get("kind") == "Job"]
            for owner in owners:
                if owner in self.job_index:
                    self.podgroups[self.job_index[owner]] = obj
        elif kind == "Pod" and key in self.pod_names:
            self.pods[meta["uid"]] = obj
        elif kind == "Event" and obj.get("reason") == "Evict":
            involved = obj.get("involvedObject", {})
            if involved.get("kind") == "Pod" and (involved.get("namespace"), involved.get("name")) in self.pod_names:
                self.evict_events[involved["uid"]] = obj

    def finished(self) -> bool:
        """True once every job of the scenario exists and reached a final phase."""
        return len(self.vcjobs) == len(self.scenario.jobs) and all(
            _phase(obj) in FINISHED_PHASES for obj in self.vcjobs.values())

    # ---------------------------------------------------------------------------- the run's tables

    def clock(self) -> tuple[float, float]:
        """(t0 in Unix seconds, time scale) of the run, from the vcjobs seen so far."""
        if not self.vcjobs:
            return math.nan, 1.0
        starts, scales = [], []
        for obj in self.vcjobs.values():
            notes = obj["metadata"].get("annotations", {})
            starts.append(timestamp(obj["metadata"]["creationTimestamp"]) - parse_duration(notes.get(SUBMIT, 0)))
            scales.append(float(notes.get(TIME_SCALE, 1)))
        return min(starts), scales[0]

    def runs(self) -> list[PodRun]:
        """Every pod seen, with its times in Unix seconds, ordered by creation."""
        out = []
        for uid, pod in self.pods.items():
            meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
            job, role, index = self.pod_names[(meta["namespace"], meta["name"])]
            finished = math.nan
            if status.get("phase") == "Succeeded":
                finished = max((timestamp(c["state"]["terminated"].get("finishedAt"))
                                for c in status.get("containerStatuses", []) if "terminated" in c.get("state", {})),
                               default=math.nan)
            evicted, message = _eviction(status, self.evict_events.get(uid))
            out.append(PodRun(
                uid=uid, job=job, role=role, index=index, version=int(meta.get("annotations", {}).get(JOB_VERSION, 0)),
                created=timestamp(meta.get("creationTimestamp")), node=spec.get("nodeName", ""),
                start=timestamp(status.get("startTime")), finished=finished, evicted=evicted,
                deleted=timestamp(meta.get("deletionTimestamp")) - meta.get("deletionGracePeriodSeconds", 0),
                message=message, requests=_requests(spec)))
        return sorted(out, key=lambda r: (r.created, r.job, r.role, r.index))

    def result(self) -> Result:
        """The run so far as a Result; times are scenario seconds (the time scale undone)."""
        t0, scale = self.clock()
        runs = self.runs()

        def rel(t: float) -> float:
            return (t - t0) * scale

        resources = _resource_columns(self.scenario, runs)
        tasks = pd.DataFrame(
            [[_job_key(self.scenario.jobs[r.job]), r.role, r.index, r.node, rel(r.start), rel(r.end), rel(r.evicted)]
             + [r.requests.get(name, 0.0) for name in resources] for r in runs if not math.isnan(r.start)],
            columns=TASK_COLUMNS + resources)
        rows, events = [], []
        for j, job in enumerate(self.scenario.jobs):
            row, job_events = self._job(j, [r for r in runs if r.job == j], rel)
            rows.append(row)
            events += job_events
        jobs = pd.DataFrame(rows, columns=JOB_COLUMNS[:-2])
        jobs["wait"] = jobs.start - jobs.submit
        jobs["jct"] = jobs.end - jobs.submit
        events_table = pd.DataFrame(sorted(events, key=lambda e: (e[0], _EVENT_ORDER[e[1]])), columns=EVENT_COLUMNS)
        info = {"engine": "volcano", "time_scale": scale, "run_start": t0, "sessions": 0,
                "schedule_period": self.schedule_period, "start_sessions": VCJOB_START_SESSIONS,
                "gpus": _cluster_gpus(self.scenario), "nodes": sum(p.count for p in self.scenario.cluster.pools),
                "horizon": parse_duration(self.scenario.horizon) if self.scenario.horizon is not None else math.inf}
        return Result(scenario=self.scenario, jobs=jobs, tasks=tasks, events=events_table, info=info)

    def _job(self, j: int, runs: list[PodRun], rel) -> tuple[list, list[tuple]]:
        """One row of the jobs table and the job's lifecycle events."""
        job = self.scenario.jobs[j]
        key = _job_key(job)
        vcjob = self.vcjobs.get(j)
        submit = rel(timestamp(vcjob["metadata"]["creationTimestamp"])) if vcjob else math.nan
        phase = _phase(vcjob) if vcjob else ""
        end = rel(timestamp(vcjob["status"]["state"].get("lastTransitionTime"))) if phase == "Completed" else math.nan
        enqueue = min((rel(r.created) for r in runs), default=math.nan)
        need = max(1, job.min_available_resolved)
        events: list[tuple] = []
        if vcjob:
            events.append((submit, "Submitted", key, "", "", "", ""))
        if runs:
            events.append((enqueue, "Enqueued", key, "", "", "", "PodGroup left Pending: the vcjob controller created pods"))
        start, lost, running = math.nan, 0.0, False
        restarts = restarts_on_eviction(job)
        for version in sorted({r.version for r in runs}):
            of_version = [r for r in runs if r.version == version]
            began = sorted(r.start for r in of_version if not math.isnan(r.start))
            evictions = [r.evicted for r in of_version if not math.isnan(r.evicted)]
            if len(began) >= need:
                run_start = rel(began[need - 1])
                start = run_start if math.isnan(start) else start
                events.append((run_start, "Started", key, "", "", "", f"{need} pods running"))
                if evictions and restarts:
                    lost += max(0.0, rel(min(evictions)) - run_start)
                running = not (evictions and restarts)
            if evictions and restarts:
                events.append((rel(min(evictions)), "Restarting", key, "", "", "PodEvicted",
                               "RestartJob: the gang fell below minAvailable"))
        for r in runs:
            pod = f"{job.namespace}/{job.name}-{r.role}-{r.index}"
            if r.node and not math.isnan(r.start):
                events.append((rel(r.start), "Bound", key, pod, r.node, "Scheduled", ""))
            if not math.isnan(r.evicted):
                events.append((rel(r.evicted), "Evicted", key, pod, r.node, "Evict", r.message))
            if not math.isnan(r.deleted):
                events.append((rel(r.deleted), "Deleted", key, pod, r.node, "", ""))
        unseen = [e for uid, e in self.evict_events.items() if uid not in self.pods
                  and self.pod_names[(e["involvedObject"]["namespace"], e["involvedObject"]["name"])][0] == j]
        for e in unseen:  # pods deleted before observe started: only the scheduler's Evict event is left
            events.append((rel(_eviction({}, e)[0]), "Evicted", key, f"{job.namespace}/{e['involvedObject']['name']}",
                           "", "Evict", e.get("message", "")))
        if phase == "Completed":
            events.append((end, "Completed", key, "", "", "", ""))
        if phase in FINISHED_PHASES:
            state = phase
        elif running:
            state = "Running"
        else:
            state = "Inqueue" if runs or _phase(self.podgroups.get(j)) not in ("", "Pending") else "Pending"
        row = [job.name, job.namespace, job.queue, _priority(self.scenario, job), _job_gpus(job), submit, enqueue,
               start, end, state, sum(1 for r in runs if not math.isnan(r.evicted)) + len(unseen), lost]
        return row, events


_EVENT_ORDER = {kind: i for i, kind in enumerate(
    ("Submitted", "Enqueued", "Bound", "Started", "Evicted", "Restarting", "Deleted", "Completed"))}


def _phase(obj: dict | None) -> str:
    """vcjob `status.state.phase` or PodGroup `status.phase` ("" when not set yet)."""
    status = (obj or {}).get("status", {})
    return status.get("state", {}).get("phase", "") if "state" in status else status.get("phase", "")


def _eviction(status: dict, event: dict | None) -> tuple[float, str]:
    """When Volcano evicted the pod and why: its DisruptionTarget condition, else the scheduler's Evict event."""
    for condition in status.get("conditions", []):
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            ready = [c for c in status["conditions"] if c.get("type") == "Ready" and c.get("reason") == "Evict"]
            return timestamp(condition.get("lastTransitionTime")), (ready[0] if ready else condition).get("message", "")
    if event is not None:
        when = event.get("eventTime") or event.get("firstTimestamp") or event["metadata"]["creationTimestamp"]
        return timestamp(when), event.get("message", "")
    return math.nan, ""


def _requests(pod_spec: dict) -> dict[str, float]:
    """The pod's requests in scenario units (cores, bytes, counts), plus the pod itself."""
    total: dict[str, float] = {"pods": 1.0}
    for container in pod_spec.get("containers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            total[name] = total.get(name, 0.0) + parse_quantity(value)
    return total


def _resource_columns(scenario: Scenario, runs: list[PodRun]) -> list[str]:
    named = {name for pool in scenario.cluster.pools for name in pool.resources}
    named |= {name for r in runs for name in r.requests}
    base = ["cpu", "memory", "pods"]
    return base + sorted(named - set(base))


def _job_key(job: Job) -> str:
    return f"{job.namespace}/{job.name}"


def _job_gpus(job: Job) -> float:
    return float(sum(parse_quantity(v) * t.replicas_resolved for t in job.tasks
                     for name, v in t.resources.items() if name.endswith("/gpu")))


def _cluster_gpus(scenario: Scenario) -> float:
    return float(sum(parse_quantity(v) * p.count for p in scenario.cluster.pools
                     for name, v in p.resources.items() if name.endswith("/gpu")))


def _priority(scenario: Scenario, job: Job) -> int:
    """The pod priority PriorityClass admission gives the job's pods (its class, else the global default, else 0)."""
    classes = {p.name: p.value for p in scenario.priority_classes}
    default = next((p.value for p in scenario.priority_classes if p.global_default), 0)
    return classes.get(job.priority_class_name, default) if job.priority_class_name else default


def result_json(result: Result) -> dict:
    """The jobs table (one record per job, NaN as null), the summary and the scheduler's latency
    (`schedule_period`, `start_sessions`: what `labkit compare` allows for), for `--json`."""
    latency = {key: result.info[key] for key in ("schedule_period", "start_sessions") if key in result.info}
    return {**result.to_json(), "engine": "volcano", **latency}
