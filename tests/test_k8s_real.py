"""What the first run against a real Volcano found: `observe` on the recorded watch stream of
priority-preempt (tests/data/volcano-real), watch errors the apiserver really sends, the scheduler's
period read off its Deployment."""

from __future__ import annotations

import gzip
import json
import queue
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from labkit.conformance.replay import RECORDINGS
from labkit.errors import LabkitError
from labkit.k8s import cluster
from labkit.k8s.observe import Recorder, result_json
from labkit.spec import load

DATA = Path(__file__).with_name("data") / "volcano-real"


def _replayed(name: str) -> dict:
    """The recorded watch events fed to observe's Recorder, as `labkit cluster observe --json` prints."""
    recorder = Recorder(load(RECORDINGS / name / "scenario.yaml"))
    with gzip.open(DATA / name / "watch.jsonl.gz", "rt") as stream:
        for line in stream:
            event = json.loads(line)
            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                recorder.feed({"type": event["type"], "object": {"kind": event["kind"], **event["object"]}})
    return result_json(recorder.result())


def test_an_evicted_surplus_pod_loses_no_work_of_its_job():
    """preempt evicted low-elastic-worker-3 (4 pods, minAvailable 2) at 11 s; the controller recreated
    it and the job ran on: observe once said lost_work 10.0, now 0 as the simulator means it."""
    run = _replayed("priority-preempt")
    recorded = json.loads((RECORDINGS / "priority-preempt" / "real.json").read_text())
    elastic = next(j for j in run["jobs"] if j["name"] == "low-elastic")
    assert elastic["evictions"] == 1 and elastic["lost_work"] == 0.0 and elastic["state"] == "Completed"
    assert next(j for j in recorded["jobs"] if j["name"] == "low-elastic")["lost_work"] == 10.0
    for got, was in zip(run["jobs"], recorded["jobs"]):
        assert {**got, "lost_work": 0.0} == {**was, "lost_work": 0.0}
    assert run["summary"]["lost_work_s"] == 0.0
    assert (run["schedule_period"], run["start_sessions"]) == (1.0, 2)


class WatchingApi:
    """Stands in for `cluster.Api` in `_watch`: each call of dynamic.watch plays the next script,
    a list of events ending, optionally, in an exception."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.calls: list[str | None] = []
        self.host = "https://127.0.0.1:6443"
        self.dynamic = SimpleNamespace(watch=self.watch)
        self.stop = threading.Event()

    def watch(self, resource, label_selector=None, field_selector=None, resource_version=None, timeout=None):
        self.calls.append(resource_version)
        if not self.scripts:
            self.stop.set()
            return
        *events, last = self.scripts.pop(0) or [None]
        for rv in events:
            yield {"type": "MODIFIED", "raw_object": {"kind": "Pod", "metadata": {"resourceVersion": rv}}}
        if isinstance(last, Exception):
            raise last
        if last is not None:
            yield {"type": "MODIFIED", "raw_object": {"kind": "Pod", "metadata": {"resourceVersion": last}}}


def _watched(api: WatchingApi) -> list:
    out: queue.Queue = queue.Queue()
    cluster._watch(api, SimpleNamespace(kind="Pod"), None, None, out, api.stop, sleep=lambda s: None)
    return [out.get() for _ in range(out.qsize())]


def test_a_retryable_watch_error_resumes_from_the_last_resource_version():
    """Seen live: `504 Timeout: Too large resource version` ended observe with `lost the cluster`."""
    too_large = ApiException(status=504, reason="Timeout: Too large resource version: 1523, current: 1522")
    api = WatchingApi([["10", "11", too_large], ["12"]])
    got = _watched(api)
    assert api.calls == [None, "11", "12"]
    assert not any(isinstance(item, LabkitError) for item in got)
    assert [item["object"]["metadata"]["resourceVersion"] for item in got] == ["10", "11", "12"]


def test_a_gone_resource_version_lists_again():
    api = WatchingApi([["10", ApiException(status=410, reason="Expired: too old resource version")], ["20"]])
    _watched(api)
    assert api.calls == [None, None, "20"]


def test_an_error_retrying_cannot_cure_ends_observe_with_the_api_s_words():
    denied = ApiException(status=403, reason="Forbidden")
    denied.body = json.dumps({"message": 'pods is forbidden: User "bob" cannot watch resource "pods"'})
    got = _watched(WatchingApi([[denied]]))
    assert len(got) == 1 and isinstance(got[0], LabkitError)
    assert str(got[0]) == 'watching Pod: pods is forbidden: User "bob" cannot watch resource "pods"'


def test_only_a_connection_that_stays_lost_is_a_lost_cluster():
    lost = ProtocolError("Connection aborted.")
    api = WatchingApi([["1", lost], [lost], ["2"]])
    assert not any(isinstance(item, LabkitError) for item in _watched(api))
    got = _watched(WatchingApi([[lost]] * cluster.WATCH_RECONNECTS))
    assert isinstance(got[-1], LabkitError) and "lost the cluster at https://127.0.0.1:6443" in str(got[-1])


class DeploymentApi:
    def __init__(self, containers=None, status=None):
        self.containers, self.status = containers, status

    def resource(self, api_version, kind):
        assert (api_version, kind) == ("apps/v1", "Deployment")
        return self

    def get(self, name, namespace, _request_timeout):
        if self.status:
            raise ApiException(status=self.status)
        return SimpleNamespace(to_dict=lambda: {"spec": {"template": {"spec": {"containers": self.containers}}}})


@pytest.mark.parametrize("containers, period", [
    ([{"name": "s", "args": ["--logtostderr", "--schedule-period=1s", "-v=3"]}], 1.0),
    ([{"name": "s", "command": ["vc-scheduler", "--schedule-period", "500ms"]}], 0.5),
    ([{"name": "s", "args": ["--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf"]}], 1.0),
])
def test_the_scheduling_period_is_read_off_the_scheduler_deployment(containers, period):
    assert cluster.scheduler_period(DeploymentApi(containers)) == period


def test_no_scheduler_deployment_means_volcano_s_default_period():
    assert cluster.scheduler_period(DeploymentApi(status=404)) == 1.0


def test_the_ch02_readme_says_what_tp8_s_podgroup_really_does():
    """The real tp8 PodGroup is Inqueue while its pod waits (the controller creates pods only for a
    PodGroup out of Pending: `enqueue` is the pod's creation), not Pending as the README once said."""
    readme = (Path(__file__).resolve().parents[1] / "clusters" / "ch02" / "README.md").read_text()
    assert "stays Pending with 16 GPUs free" not in readme
    assert "tp8 is Inqueue" in readme and "0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu." in readme
    tp8 = next(j for j in json.loads((RECORDINGS / "ch02" / "real.json").read_text())["jobs"] if j["name"] == "tp8")
    assert tp8["enqueue"] == tp8["submit"] and tp8["start"] - tp8["enqueue"] > 28_000
