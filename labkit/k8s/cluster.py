"""A kind cluster with Volcano and KWOK fake GPU nodes, and a lab's run on it.

`up` drives the learner's own tools (docker, kind, kubectl, helm) with the files in `clusters/`;
`apply`, `observe` and `down` talk to the API server with the kubernetes Python client. Every
call has a short timeout: a cluster that is not there is a one-line `LabkitError`, never a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from urllib3.exceptions import HTTPError

from ..errors import LabkitError
from ..results import Result
from ..spec import Scenario, policy
from ..spec.quantity import parse_duration
from .manifests import (
    EXISTING_NAMESPACES,
    KINDS,
    LAB,
    MANAGED_BY,
    SCHEDULER_CONFIGMAP,
    SCHEDULER_NAMESPACE,
    SUBMIT,
    hypernodes,
    lab_labels,
    manifests,
    nodes,
    scheduler_configmap,
)
from .observe import DEFAULT_SCHEDULE_PERIOD, Recorder

CLUSTERS = Path(__file__).resolve().parents[2] / "clusters"
"""The hand-written set-up (kind/, volcano/, kwok/) beside the package in the labkit checkout."""
VOLCANO_CHART = ("volcano-sh", "https://volcano-sh.github.io/helm-charts", "volcano", "1.15.1")
KWOK_RELEASE = "https://github.com/kubernetes-sigs/kwok/releases/download/v0.7.0"
TOOLS = {
    "docker": "install Docker Desktop or docker-ce and start it (https://docs.docker.com/get-docker/)",
    "kind": "go install sigs.k8s.io/kind@v0.31.0, or a release binary (https://kind.sigs.k8s.io/)",
    "kubectl": "see https://kubernetes.io/docs/tasks/tools/",
    "helm": "see https://helm.sh/docs/intro/install/",
}
VOLCANO_OWNED = {"Queue": {"default", "root"}, "Namespace": EXISTING_NAMESPACES}
"""Objects labkit may have labelled but must never delete."""
API_TIMEOUT = 5.0
"""Seconds for one API request: a cluster that does not answer by then is not there."""
CONNECTION_ERRORS = (ApiException, HTTPError, OSError, ValueError)
"""What a request to a cluster that is gone, refuses us or talks nonsense raises."""
SCHEDULER_DEPLOYMENT = "volcano-scheduler"
CONF_HASH = "labkit.io/scheduler-conf"


def _say(text: str) -> None:
    print(f"labkit: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- up (local tools)


def missing_tools() -> list[str]:
    """One message per tool `up` needs that is not usable; docker also needs its engine running."""
    missing = [f"{tool} not found ({hint})" for tool, hint in TOOLS.items() if shutil.which(tool) is None]
    if shutil.which("docker") is not None:
        try:
            subprocess.run(["docker", "info"], capture_output=True, timeout=10, check=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            missing.insert(0, "docker is installed but its engine does not answer (`docker info` fails); start it")
    return missing


def _run(cmd: list[str], timeout: float) -> str:
    """Run one tool; its last error line becomes the LabkitError."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise LabkitError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise LabkitError(f"`{' '.join(cmd)}` failed: {last}")
    return done.stdout


def _setup_file(*parts: str) -> str:
    path = CLUSTERS.joinpath(*parts)
    if not path.exists():
        raise LabkitError(f"{path}: missing; `labkit cluster up` runs from a labkit checkout")
    return str(path)


def up(name: str, scenario: Scenario) -> None:
    """Create the kind cluster (unless it exists), install Volcano and KWOK, create the scenario's nodes."""
    problems = missing_tools()
    if problems:
        raise LabkitError("cannot create the cluster: " + "; ".join(problems))
    context = f"kind-{name}"
    if name not in _run(["kind", "get", "clusters"], 30).split():
        _say(f"creating kind cluster {name!r} (a few minutes the first time)")
        _run(["kind", "create", "cluster", "--name", name, "--config", _setup_file("kind", "kind-config.yaml"),
              "--wait", "180s"], 600)
    repo, url, chart, version = VOLCANO_CHART
    _say(f"installing Volcano {version} (helm waits for the volcano-admission-init job)")
    _run(["helm", "repo", "add", repo, url, "--force-update"], 120)
    _run(["helm", "upgrade", "--install", "volcano", f"{repo}/{chart}", "--version", version, "--kube-context", context,
          "-n", SCHEDULER_NAMESPACE, "--create-namespace", "-f", _setup_file("volcano", "values.yaml"),
          "--wait", "--wait-for-jobs", "--timeout", "10m"], 660)
    kubectl = ["kubectl", "--context", context]
    _run(kubectl + ["-n", SCHEDULER_NAMESPACE, "wait", "--for=condition=Available", "deployment", "--all",
                    "--timeout=300s"], 320)
    _say("installing KWOK and labkit's pod Stages")
    _run(kubectl + ["apply", "-f", f"{KWOK_RELEASE}/kwok.yaml"], 120)
    _run(kubectl + ["apply", "-f", f"{KWOK_RELEASE}/stage-fast.yaml"], 120)
    _run(kubectl + ["delete", "stage", "pod-complete", "--ignore-not-found"], 60)
    _run(kubectl + ["apply", "-f", _setup_file("kwok", "stages.yaml")], 60)
    _run(kubectl + ["-n", "kube-system", "wait", "--for=condition=Available", "deployment/kwok-controller",
                    "--timeout=180s"], 200)
    api = Api(context)
    labels = lab_labels(scenario.name)
    for obj in nodes(scenario, labels) + hypernodes(scenario, labels):
        api.apply(obj)
    _say(f"cluster {name!r} is up with {sum(p.count for p in scenario.cluster.pools)} fake nodes; "
         f"kubectl context {context}")


def delete_cluster(name: str) -> None:
    """Delete the kind cluster `name`, only if labkit created it (its control plane carries labkit's label)."""
    for tool in ("kind", "kubectl"):
        if shutil.which(tool) is None:
            raise LabkitError(f"{tool} not found ({TOOLS[tool]})")
    if name not in _run(["kind", "get", "clusters"], 30).split():
        raise LabkitError(f"no kind cluster named {name!r} (`kind get clusters`)")
    ours = _run(["kubectl", "--context", f"kind-{name}", "get", "nodes", "-l", f"{MANAGED_BY}=labkit", "-o", "name",
                 f"--request-timeout={API_TIMEOUT:.0f}s"], 30)
    if not ours.strip():
        raise LabkitError(f"kind cluster {name!r} was not created by labkit; delete it yourself if you mean to")
    _run(["kind", "delete", "cluster", "--name", name], 300)


# ---------------------------------------------------------------------------------------- the API


class Api:
    """The cluster behind a kubeconfig context, reached with short timeouts (one-line errors otherwise)."""

    def __init__(self, context: str | None = None):
        configuration = client.Configuration()
        try:  # KUBECONFIG read now: the client library reads it once, at import
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG", "~/.kube/config"), context=context,
                                    client_configuration=configuration)
        except (ConfigException, OSError, TypeError) as err:
            where = f"context {context!r}" if context else "the current context"
            raise LabkitError(f"no cluster configured ({where}: {err}); run `labkit cluster up` or set KUBECONFIG") from None
        configuration.retries = 0
        self.host = configuration.host
        self.client = client.ApiClient(configuration)
        try:
            client.VersionApi(self.client).get_code(_request_timeout=API_TIMEOUT)
            self.dynamic = DynamicClient(self.client)
        except CONNECTION_ERRORS as err:
            raise LabkitError(f"cannot reach the cluster at {self.host}: {_reason(err)}") from None

    def resource(self, api_version: str, kind: str):
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise LabkitError(f"the cluster has no {kind} ({api_version}); is Volcano installed? "
                              "(`labkit cluster up`)") from None

    def apply(self, obj: dict, retries: int = 10) -> None:
        """Server-side apply (create or update); Node status too, which is where KWOK nodes keep their GPUs.

        Retries while Volcano's admission webhook is not answering yet (right after install).
        """
        resource = self.resource(obj["apiVersion"], obj["kind"])
        for attempt in range(retries):
            try:
                resource.server_side_apply(body=obj, field_manager="labkit", force_conflicts=True,
                                           _request_timeout=API_TIMEOUT * 4)
                if obj["kind"] == "Node":
                    resource.status.patch(body={"status": obj["status"]}, name=obj["metadata"]["name"],
                                          content_type="application/merge-patch+json", _request_timeout=API_TIMEOUT)
                return
            except ApiException as err:
                webhook_down = err.status >= 500 and "webhook" in str(err.body)
                if not webhook_down or attempt == retries - 1:
                    raise LabkitError(f"{obj['kind']} {obj['metadata']['name']}: {_api_message(err)}") from None
                time.sleep(2)

    def labelled(self, api_version: str, kind: str, selector: str) -> list[dict]:
        return [item.to_dict() for item in self.resource(api_version, kind).get(
            label_selector=selector, _request_timeout=API_TIMEOUT * 4).items]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> str:
        """Delete one object; '' when done (or already gone), else the API's reason."""
        try:
            self.resource(api_version, kind).delete(name=name, namespace=namespace, _request_timeout=API_TIMEOUT * 4)
        except ApiException as err:
            return "" if err.status == 404 else _api_message(err)
        return ""


def _reason(err: Exception) -> str:
    """The end of a connection error's chain, e.g. `[Errno 111] Connection refused`; an API error's status."""
    if isinstance(err, ApiException):
        return f"{err.status} {err.reason}"
    text = " ".join(str(getattr(err, "reason", None) or err).split()) or err.__class__.__name__
    return text.rsplit(": ", 1)[-1] if text.rsplit(": ", 1)[-1] else text


def _api_message(err: ApiException) -> str:
    try:
        return json.loads(err.body)["message"]
    except (TypeError, ValueError, KeyError):
        return f"{err.status} {err.reason}"


# ---------------------------------------------------------------------------------------- apply


def apply(api: Api, scenario: Scenario, time_scale: float, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Create the lab's objects; each vcjob at its (scaled) submit time. Returns the number of jobs created."""
    objects = manifests(scenario, time_scale)
    jobs = [obj for obj in objects if obj["kind"] == "Job"]
    for obj in objects:
        if obj["kind"] != "Job":
            api.apply(obj)
        if obj["kind"] == "ConfigMap":
            _reload_scheduler(api, obj["data"]["volcano-scheduler.conf"])
    _say(f"{len(objects) - len(jobs)} objects applied; submitting {len(jobs)} vcjobs on the scaled clock")
    start = clock()
    for obj in sorted(jobs, key=lambda o: parse_duration(o["metadata"]["annotations"][SUBMIT])):
        delay = start + parse_duration(obj["metadata"]["annotations"][SUBMIT]) - clock()
        if delay > 0:
            sleep(delay)
        api.apply(obj)
    return len(jobs)


def _reload_scheduler(api: Api, conf: str) -> None:
    """Restart the Volcano scheduler when its conf changed, so the lab never runs under the previous policy."""
    digest = hashlib.sha256(conf.encode()).hexdigest()[:16]
    deployments = api.resource("apps/v1", "Deployment")
    current = deployments.get(name=SCHEDULER_DEPLOYMENT, namespace=SCHEDULER_NAMESPACE, _request_timeout=API_TIMEOUT)
    annotations = current.spec.template.metadata.annotations or {}
    if annotations.get(CONF_HASH) == digest:
        return
    _say("scheduler conf changed: restarting volcano-scheduler")
    deployments.patch(name=SCHEDULER_DEPLOYMENT, namespace=SCHEDULER_NAMESPACE,
                      body={"spec": {"template": {"metadata": {"annotations": {CONF_HASH: digest}}}}},
                      content_type="application/strategic-merge-patch+json", _request_timeout=API_TIMEOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        d = deployments.get(name=SCHEDULER_DEPLOYMENT, namespace=SCHEDULER_NAMESPACE, _request_timeout=API_TIMEOUT)
        status = d.status
        if (status.observedGeneration or 0) >= d.metadata.generation and status.updatedReplicas == d.spec.replicas \
                and status.availableReplicas == d.spec.replicas and not status.unavailableReplicas:
            return
        time.sleep(2)
    raise LabkitError("volcano-scheduler did not come back within 180s after the conf change "
                      "(kubectl -n volcano-system get pods)")


# ---------------------------------------------------------------------------------------- observe


WATCHED = (
    ("batch.volcano.sh/v1alpha1", "Job", "label"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup", ""),
    ("v1", "Pod", "label"),
    ("v1", "Event", "reason=Evict"),
)
"""What observe watches: the lab's vcjobs and pods (by label), all PodGroups, the scheduler's Evict events."""


def observe(api: Api, scenario: Scenario, timeout: float, settle: float = 1.0) -> Result:
    """Watch until every job finished or `timeout` seconds passed; the Result of the run so far.

    Each kind has its own watch stream, so the last job's Completed may overtake its pods' last
    events: observe stops only once the streams have been quiet for `settle` seconds.
    """
    recorder = Recorder(scenario, scheduler_period(api))
    selector = f"{MANAGED_BY}=labkit,{LAB}={recorder.lab}"
    events: queue.Queue = queue.Queue()
    stop = threading.Event()
    for api_version, kind, which in WATCHED:
        resource = api.resource(api_version, kind)
        threading.Thread(target=_watch, args=(api, resource, selector if which == "label" else None,
                                              which if "=" in which else None, events, stop), daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                item = events.get(timeout=settle)
            except queue.Empty:
                if recorder.finished():
                    break
                continue
            if isinstance(item, LabkitError):
                raise item
            recorder.feed(item)
    finally:
        stop.set()
    return recorder.result()


def scheduler_period(api: Api) -> float:
    """vc-scheduler's `--schedule-period` in seconds, read off its Deployment (Volcano's 1s default when
    the flag is not given or the Deployment is not where the helm chart puts it)."""
    try:
        deployment = api.resource("apps/v1", "Deployment").get(
            name=SCHEDULER_DEPLOYMENT, namespace=SCHEDULER_NAMESPACE, _request_timeout=API_TIMEOUT).to_dict()
    except ApiException:
        return DEFAULT_SCHEDULE_PERIOD
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        words = [*(container.get("command") or []), *(container.get("args") or [])]
        for i, word in enumerate(words):
            if word.startswith("--schedule-period="):
                return parse_duration(word.split("=", 1)[1])
            if word == "--schedule-period" and i + 1 < len(words):
                return parse_duration(words[i + 1])
    return DEFAULT_SCHEDULE_PERIOD


RETRYABLE_WATCH = frozenset({429, 500, 503, 504})
"""API statuses after which a watch resumes from the last resource version it saw (e.g. 504
`Too large resource version`: the apiserver's cache has not caught up with etcd yet)."""
GONE = 410
"""The resource version is too old to resume from: list again (a watch without one starts with the current state)."""
WATCH_RECONNECTS = 5
"""Connection failures in a row after which observe gives the cluster up."""


def _watch(api: Api, resource, label_selector: str | None, field_selector: str | None, out: queue.Queue,
           stop: threading.Event, sleep: Callable[[float], None] = time.sleep) -> None:
    """Stream one kind's watch events (raw, as the API sends them) into `out` until stopped.

    A watch ends every 30 s and after retryable API errors: it resumes from the last resource
    version seen; on 410 Gone it lists again. Only a connection that stays lost, or an API error
    that retrying cannot cure (e.g. 403), ends observe (one LabkitError put into `out`).
    """
    version: str | None = None
    failures = 0
    while not stop.is_set():
        try:
            for event in api.dynamic.watch(resource, label_selector=label_selector, field_selector=field_selector,
                                           resource_version=version, timeout=30):
                failures = 0
                version = event["raw_object"].get("metadata", {}).get("resourceVersion") or version
                if event["type"] != "BOOKMARK":
                    out.put({"type": event["type"], "object": event["raw_object"]})
                if stop.is_set():
                    return
        except ApiException as err:
            if err.status == GONE:
                version = None
            elif err.status not in RETRYABLE_WATCH:
                out.put(LabkitError(f"watching {resource.kind}: {_api_message(err)}"))
                return
            sleep(0.5)
        except CONNECTION_ERRORS as err:
            failures += 1
            if failures >= WATCH_RECONNECTS:
                out.put(LabkitError(f"watching {resource.kind}: lost the cluster at {api.host} "
                                    f"({err.__class__.__name__}, {failures} times in a row)"))
                return
            sleep(min(2.0**failures, 10.0))


# ---------------------------------------------------------------------------------------- down


def down(api: Api, lab: str | None, wait: float = 120) -> int:
    """Delete labkit-labelled objects (of one lab, or all), jobs first; the scheduler gets the shipped conf back.

    Returns how many objects were deleted. Queues go only once their pods are gone (Volcano refuses
    to delete a queue that still has allocated pods), children before parents.
    """
    selector = f"{MANAGED_BY}=labkit" + (f",{LAB}={lab}" if lab else "")
    api_versions = {"Node": "v1", "HyperNode": "topology.volcano.sh/v1alpha1", "ConfigMap": "v1", "Namespace": "v1",
                    "ResourceQuota": "v1", "LimitRange": "v1", "PriorityClass": "scheduling.k8s.io/v1",
                    "Queue": "scheduling.volcano.sh/v1beta1", "Job": "batch.volcano.sh/v1alpha1"}
    deleted = 0
    for kind in reversed(KINDS):
        items = api.labelled(api_versions[kind], kind, selector)
        if kind == "ConfigMap":
            if any(i["metadata"]["name"] == SCHEDULER_CONFIGMAP for i in items):
                shipped = scheduler_configmap(policy("volcano-shipped"), lab_labels("volcano-shipped"))
                api.apply(shipped)
                _reload_scheduler(api, shipped["data"]["volcano-scheduler.conf"])
            continue
        keep = VOLCANO_OWNED.get(kind, set())
        pending = [i for i in items if i["metadata"]["name"] not in keep]
        deleted += _delete_all(api, api_versions[kind], kind, pending, wait)
        if kind == "Job":
            _wait_gone(api, "v1", "Pod", selector, wait)
    return deleted


def _delete_all(api: Api, api_version: str, kind: str, items: list[dict], wait: float) -> int:
    """Delete, retrying refusals (a queue with pods or child queues) until `wait` seconds passed."""
    deadline = time.monotonic() + wait
    left = list(items)
    while left:
        refused = []
        for item in left:
            reason = api.delete(api_version, kind, item["metadata"]["name"], item["metadata"].get("namespace"))
            if reason:
                refused.append((item, reason))
        if not refused:
            break
        if time.monotonic() > deadline:
            item, reason = refused[0]
            raise LabkitError(f"{kind} {item['metadata']['name']} was not deleted: {reason}")
        left = [item for item, _ in refused]
        time.sleep(2)
    return len(items)


def _wait_gone(api: Api, api_version: str, kind: str, selector: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    while api.labelled(api_version, kind, selector):
        if time.monotonic() > deadline:
            raise LabkitError(f"labkit's {kind}s still exist after {wait:.0f}s")
        time.sleep(2)
