"""The messages labkit quotes are Volcano's own: each formatter pinned to the upstream format string
(Volcano v1.15.1, path and function named in each test; Go's ``%v`` of a string or int prints it as
``%s`` does), and the recorded runs of a real Volcano (``../shared/oracles/volcano-real``) replayed
where the simulator meets the same situation."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

import labkit
from labkit import diagnose, spec
from labkit.course import cases

REAL = Path(__file__).resolve().parents[2] / "shared" / "oracles" / "volcano-real"


def go(format_string: str, *args) -> str:
    """``fmt.Sprintf`` for the verbs these formats use (%v, %s, %d of strings and ints)."""
    return re.sub(r"%[vsd]", "%s", format_string) % args


def test_fit_errors_error():
    """pkg/scheduler/api/unschedule_info.go FitErrors.Error: ``fmt.Sprintf("0/%v", len(f.nodes)) + " nodes are
    unavailable"``, then ``fmt.Sprintf(f.err+": %v.", strings.Join(sortReasonsHistogram(), ", "))`` with
    ``fmt.Sprintf("%v %v", v, k)`` per reason, sorted as strings."""
    reasons = {"Insufficient nvidia.com/gpu": 1, "Insufficient cpu": 3}
    histogram = sorted(go("%v %v", v, k) for k, v in reasons.items())
    expected = go("0/%v", 4) + " nodes are unavailable" + go(": %v.", ", ".join(histogram))
    assert diagnose.fit_errors_message(reasons, 4) == expected == (
        "0/4 nodes are unavailable: 1 Insufficient nvidia.com/gpu, 3 Insufficient cpu.")
    assert diagnose.fit_errors_message({}, 0) == "0/0 nodes are unavailable"  # no nodes: f.err alone


def test_job_fit_error():
    """pkg/scheduler/api/job_info.go JobInfo.FitError: ``fmt.Sprintf("%v, %v", podGroupStatus, ...)``
    (PodGroupNotReady "pod group is not ready", PodGroupReady "pod group is ready"), ``"; " +
    fmt.Sprintf("%s: %s", Pending.String(), ...)`` and ``fmt.Sprintf(". Origin reason is %v: %v", taskInfo.Name,
    fitError.Error())``."""
    statuses = sorted(go("%v %v", v, k) for k, v in {"Pending": 2, "minAvailable": 1}.items())
    expected = (go("%v, %v", "pod group is not ready", ", ".join(statuses)) + "; " + go("%s: %s", "Pending", "2 Unschedulable")
                + go(". Origin reason is %v: %v", "low12-worker-0", "0/4 nodes are unavailable: 4 Insufficient cpu."))
    got = diagnose.fit_error(False, {"Pending": 2}, 1, {"Unschedulable": 2},
                             "low12-worker-0: 0/4 nodes are unavailable: 4 Insufficient cpu.")
    assert got == expected
    assert diagnose.fit_error(True, {"Binding": 3}, 2) == "pod group is ready, 2 minAvailable, 3 Binding"


def test_gang_condition_and_event():
    """pkg/scheduler/plugins/gang/gang.go OnSessionClose and pkg/scheduler/cache/cache.go RecordJobStatusEvent:
    ``fmt.Sprintf("%v/%v tasks in gang unschedulable: %v", ...)`` (minAvailable - schedulable, resp. the
    Pending pods, over len(job.Tasks))."""
    fit = "pod group is not ready, 1 Pipelined, 1 minAvailable"
    assert diagnose.gang_condition(1, 1, fit) == go("%v/%v tasks in gang unschedulable: %v", 1, 1, fit)
    assert diagnose.gang_event(0, 1, fit) == go("%v/%v tasks in gang unschedulable: %v", 0, 1, fit)


def test_pipelined_task_reason():
    """pkg/scheduler/api/job_info.go TaskSchedulingReason, Pipelined: ``fmt.Sprintf("Pod %s/%s can possibly be
    assigned to %s, once resource is released and minAvailable is satisfied", ...)``."""
    assert diagnose.pipelined_message("ml/high-small-worker-0", "gpu-1") == go(
        "Pod %s/%s can possibly be assigned to %s, once resource is released and minAvailable is satisfied",
        "ml", "high-small-worker-0", "gpu-1")


def test_enqueue_vote_events():
    """pkg/scheduler/plugins/util/util.go FormatResourceNames: ``fmt.Sprintf("%s %s", verb, name)`` joined,
    ``fmt.Sprintf("%s: %s", prefix, ...)``; proportion.go/capacity.go "queue resource quota insufficient",
    "insufficient"; overcommit.go "resource in cluster is overused", "overused"."""
    parts = ", ".join(go("%s %s", "insufficient", n) for n in ("cpu", "nvidia.com/gpu"))
    assert diagnose.format_resource_names("queue resource quota insufficient", "insufficient",
                                          ["cpu", "nvidia.com/gpu"]) == go("%s: %s", "queue resource quota insufficient", parts)
    assert diagnose.format_resource_names("resource in cluster is overused", "overused", []) == (
        "resource in cluster is overused")


def test_event_view_wording():
    """cache.go Bind ``"Successfully assigned %v/%v to %v"``; defaultEvictor.Evict ``"Pod is evicted, because of
    %v"`` (pod, Warning) and cache.Evict (PodGroup, Normal, the reason); RecordJobStatusEvent
    ``string(scheduling.PodGroupReady)`` "pod group is ready"; the vcjob controller's ExecuteAction
    ``"Start to execute action %s "``; a refused pod: the API server's 403 text."""
    result = labkit.simulate(cases.quota_burst())
    events = diagnose.get_events(result)
    assert (events.OBJECT + " " + events.MESSAGE).str.contains(
        "pod/c-eval-0-worker-0 " + go("Successfully assigned %v/%v to %v", "team-c", "c-eval-0-worker-0", "a100-0"),
        regex=False).any()
    refused = events[events.REASON == "FailedCreate"]
    assert refused.OBJECT.tolist() == ["job/c-eval-4", "job/c-eval-5"]
    assert refused.MESSAGE.iloc[0] == ('pods "c-eval-4-worker-0" is forbidden: exceeded quota: team-c, requested: '
                                       "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=16, "
                                       "limited: requests.nvidia.com/gpu=16")


def test_resourcequota_plugin_refused_by_name():
    """Volcano's resourcequota plugin (pkg/scheduler/plugins/resourcequota) is not simulated: the conf is
    refused with the plugin's name, never run without it."""
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["scheduler"] = {"conf": {"actions": "enqueue, allocate", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "resourcequota"}]}]}}
    with pytest.raises(labkit.errors.SpecError, match="plugin 'resourcequota' is not simulated"):
        labkit.simulate(spec.validate(data))


# ------------------------------------------------------------------------------------ recorded runs


def recorded(folder: str) -> list[dict]:
    path = REAL / folder / "events.tsv"
    if not path.exists():
        pytest.skip(f"{path} is absent: the recorded real runs live in ../shared, outside this repository")
    with path.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def shape(text: str) -> str:
    """A message with node names made generic (Volcano picks among equal nodes at random)."""
    return re.sub(r"\bgpu-\d+\b", "gpu-N", text)


def simulated(folder: str) -> labkit.Result:
    recorded(folder)
    return labkit.simulate(spec.load(REAL / folder / "scenario.yaml"))


def agreeing(folder: str, result: labkit.Result) -> set[str]:
    """The jobs the simulator started when the real Volcano did, within two sessions of latency at the run's
    time scale: the others were placed differently (the recordings' README: node scores of the Kubernetes
    Volcano master vendors, ties), so what is recorded while they wait differs with the placement."""
    data = json.loads((REAL / folder / "real.json").read_text())
    started = result.jobs.set_index("name").start
    return {j["name"] for j in data["jobs"] if j["name"] in started.index
            and abs(started[j["name"]] - j["start"]) <= 2 * data["time_scale"] + 1}


def job_of(obj: str) -> str:
    """The job a view row is about: ``job/<job>``, ``podgroup/<job>``, ``pod/<job>-<task>-<index>``."""
    kind, name = obj.split("/", 1)
    return name.rsplit("-", 2)[0] if kind == "pod" else name


@pytest.mark.parametrize("folder", ["ch02", "fragmentation-ts600", "gang-minavailable", "placement-binpack",
                                    "placement-shipped", "queues-reclaim", "priority-preempt"])
def test_event_view_says_what_volcano_said(folder):
    """Every event the simulator's view lists for an object is one the real Volcano recorded for that object
    with the same reason, word for word (nodes made generic) — where the real run has such events, for the
    jobs both started alike (`agreeing`)."""
    real: dict[tuple, set[str]] = {}
    for e in recorded(folder):
        obj = e["object"].split("/", 1)[1]
        if e["kind"] == "PodGroup":
            obj = obj.rsplit("-", 5)[0]  # <job>-<uid>
        real.setdefault((e["kind"].lower(), obj, e["reason"]), set()).add(shape(e["message"]))
    checked = 0
    result = simulated(folder)
    alike = agreeing(folder, result)
    for row in diagnose.get_events(result).itertuples():
        kind, name = row.OBJECT.split("/", 1)
        if job_of(row.OBJECT) not in alike:
            continue
        said = real.get((kind, name, row.REASON))
        if said is None:
            continue
        assert shape(row.MESSAGE) in said, (row.OBJECT, row.REASON, row.MESSAGE, said)
        checked += 1
    assert checked


def form(text: str) -> str:
    """A message with every number made generic: its format."""
    return re.sub(r"\d+", "N", text)


def test_every_recorded_run_has_the_simulators_message_forms():
    """Over every recorded run (where the simulator may decide differently, e.g. pipeline where Volcano
    found no node): each message form the simulator's view gives for a job both started alike
    (`agreeing`) was recorded for the same reason."""
    if not REAL.exists():
        pytest.skip(f"{REAL} is absent: the recorded real runs live in ../shared, outside this repository")
    for folder in sorted(p.name for p in REAL.iterdir() if (p / "scenario.yaml").exists()):
        real: dict[str, set[str]] = {}
        for e in recorded(folder):
            real.setdefault(e["reason"], set()).add(form(e["message"]))
        result = simulated(folder)
        alike = agreeing(folder, result)
        for row in diagnose.get_events(result).itertuples():
            if row.REASON in real and job_of(row.OBJECT) in alike:
                assert form(row.MESSAGE) in real[row.REASON], (folder, row.OBJECT, row.MESSAGE)


def test_fragmentation_pending_pod_in_volcano_words():
    """ch02: tp8 waits for a node with 8 free GPUs; the real FailedScheduling and PodGroup messages."""
    real = recorded("ch02")
    result = simulated("ch02")
    why = diagnose.explain(result, "tp8", at=result.jobs.set_index("name").submit["tp8"] + 120)
    pod = {e["message"] for e in real if e["object"] == "ml/tp8-worker-0" and e["reason"] == "FailedScheduling"}
    group = {e["message"] for e in real if e["object"].startswith("ml/tp8-") and e["kind"] == "PodGroup"
             and e["message"].startswith("1/1")}
    assert pod == {why.message}
    assert group == {why.event}


def test_overcommit_holds_the_gang_back():
    """gang-minavailable: b is not enqueued while a runs; overcommit's event and the pod-less gang event."""
    real = recorded("gang-minavailable")
    result = simulated("gang-minavailable")
    b = [e["message"] for e in real if e["object"].startswith("ml/b-") and e["kind"] == "PodGroup"
         and e["reason"] == "Unschedulable"]
    why = diagnose.explain(result, "b", at=result.jobs.set_index("name").submit["b"] + 5)
    assert why.reason == "ClusterOverused"
    assert {why.message, why.event} == set(b)


def _view(result: labkit.Result) -> set[tuple[str, str, str, str]]:
    return {(*row.OBJECT.split("/", 1), row.REASON, shape(row.MESSAGE)) for row in diagnose.get_events(result).itertuples()}


def _real(folder: str) -> set[tuple[str, str, str, str]]:
    return {(e["kind"].lower(), e["object"].split("/", 1)[1].rsplit("-", 5)[0] if e["kind"] == "PodGroup"
             else e["object"].split("/", 1)[1], e["reason"], shape(e["message"])) for e in recorded(folder)}


@pytest.mark.parametrize("folder, wanted", [
    # overcommit's vote keeps b and d Pending (a Normal event on the PodGroup, each session)
    ("gang-minavailable", [("podgroup", "b", "Unschedulable", "resource in cluster is overused"),
                           ("podgroup", "d", "Unschedulable", "resource in cluster is overused")]),
    # tp8 is enqueued, its pod fits no node: the pod's FailedScheduling, the PodGroup's Warning with the
    # pod counted, the vcjob controller's PodGroupPending
    ("ch02", [("pod", "tp8-worker-0", "FailedScheduling", ""), ("podgroup", "tp8", "Unschedulable", "1/1 "),
              ("job", "tp8", "PodGroupPending", "")]),
    ("fragmentation-ts600", [("pod", "tp8-worker-0", "FailedScheduling", ""), ("job", "tp8", "PodGroupPending", "")]),
])
def test_event_view_lists_what_volcano_recorded_while_a_gang_waits(folder, wanted):
    """What a learner's `kubectl get events` shows while a gang waits, word for word in the view: the enqueue
    vote's event (overcommit.go ``ssn.RecordPodGroupEvent(job.PodGroup, v1.EventTypeNormal, ...)``), and for an
    enqueued gang that allocate cannot place cache.go RecordJobStatusEvent / taskUnschedulable and
    job_controller_actions.go recordPodGroupEvent (``"PodGroup %s:%s %s, reason: %s"``)."""
    real, view = _real(folder), _view(simulated(folder))
    for kind, name, reason, start in wanted:
        said = {e for e in real if e[:3] == (kind, name, reason) and e[3].startswith(start)}
        assert said, (kind, name, reason, start)
        assert said <= view, (said - view, sorted(e for e in view if e[:2] == (kind, name)))
