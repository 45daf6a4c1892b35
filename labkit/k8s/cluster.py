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

from ..errors import LabkitError, SpecError
from ..results import Result
from ..spec import Scenario, policy, scheduler_of
from ..spec.quantity import parse_duration, parse_quantity
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
    """The cluster behind a kubeconfig context, reached with short timeouts (one-line errors otherwise).

    `kubeconfig`: the file (default $KUBECONFIG, else ~/.kube/config); `context`: one of its contexts
    (default its current one). `context_name` and `host` say which cluster it is.
    """

    def __init__(self, context: str | None = None, kubeconfig: str | None = None):
        configuration = client.Configuration()
        path = kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config")
        try:  # KUBECONFIG read now: the client library reads it once, at import
            config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
            self.context_name = context or config.list_kube_config_contexts(config_file=path)[1]["name"]
        except (ConfigException, OSError, TypeError, KeyError) as err:
            where = f"context {context!r}" if context else "the current context"
            raise LabkitError(f"no cluster configured ({where} of {path}: {err}); run `labkit cluster up`, "
                              "or give --kubeconfig FILE --context NAME") from None
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

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """One object as the API serves it; None when it does not exist."""
        try:
            return self.resource(api_version, kind).get(name=name, namespace=namespace,
                                                        _request_timeout=API_TIMEOUT).to_dict()
        except ApiException as err:
            if err.status == 404:
                return None
            raise LabkitError(f"{kind} {name}: {_api_message(err)}") from None

    def replace(self, obj: dict) -> None:
        """Put back an object's recorded content (PUT over whatever is there now, or create it again)."""
        resource = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        try:
            current = self.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            if current is None:
                resource.create(body=obj, namespace=meta.get("namespace"), _request_timeout=API_TIMEOUT * 4)
            else:
                body = {**obj, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
                resource.replace(body=body, namespace=meta.get("namespace"), _request_timeout=API_TIMEOUT * 4)
        except ApiException as err:
            raise LabkitError(f"{obj['kind']} {meta['name']} could not be restored: {_api_message(err)}") from None

    def can(self, verb: str, api_version: str, kind: str, namespace: str | None = None) -> bool:
        """Whether RBAC lets us `verb` objects of `kind` (in `namespace`, or cluster-wide)."""
        resource = self.resource(api_version, kind)
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": verb, "group": resource.group or "",
                                                  "resource": resource.name, "namespace": namespace or ""}}}
        try:
            answer = client.AuthorizationV1Api(self.client).create_self_subject_access_review(
                body=review, _request_timeout=API_TIMEOUT)
        except ApiException as err:
            raise LabkitError(f"cannot ask the cluster what we may do: {_api_message(err)}") from None
        return bool(answer.status.allowed)

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


def volcano_lab(scenario: Scenario) -> Scenario:
    """The scenario, when it is a lab `labkit cluster` can run (a Volcano one); a Kueue lab is a one-line
    SpecError saying how to run it instead."""
    if scheduler_of(scenario).kueue is not None:
        raise SpecError("scheduler", "a Kueue lab: `labkit cluster` runs Volcano labs; write this one with "
                        "`labkit export k8s SCENARIO -o DIR` and `kubectl apply -f DIR` on a cluster with Kueue (and "
                        "JobSet, for jobs of several tasks) installed")
    return scenario


API_VERSIONS = {"Node": "v1", "HyperNode": "topology.volcano.sh/v1alpha1", "ConfigMap": "v1", "Namespace": "v1",
                "ResourceQuota": "v1", "LimitRange": "v1", "PriorityClass": "scheduling.k8s.io/v1",
                "Queue": "scheduling.volcano.sh/v1beta1", "Job": "batch.volcano.sh/v1alpha1"}
RECORD = "labkit.io/record"
"""Label of the ConfigMaps (in volcano-system) where apply keeps what existed before it: the objects
the lab changed but labkit did not create, restored by `down` exactly as they were."""
NEVER_TAKEN = ("Node", "HyperNode")
"""Kinds labkit refuses to change when it did not create the object (a real node's capacity)."""


def apply(api: Api, scenario: Scenario, time_scale: float, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Create the lab's objects; each vcjob at its (scaled) submit time. Returns the number of jobs created.

    An object that exists and that labkit did not create (a namespace, a PriorityClass, a Queue, the
    scheduler's ConfigMap) is first recorded as it is, then changed without labkit's labels: `down`
    puts it back and never deletes it. A Node or HyperNode labkit did not create is refused.
    """
    objects = manifests(scenario, time_scale)
    jobs = [obj for obj in objects if obj["kind"] == "Job"]
    lab = lab_labels(scenario.name)[LAB]
    recorded = {_key(o) for record in _records(api) for o in _recorded_objects(record)}
    before, theirs = [], set()
    for obj in objects:
        if obj["kind"] == "Job":
            continue
        meta = obj["metadata"]
        existing = api.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        if existing is None or _created_by_labkit(existing):
            continue
        if obj["kind"] in NEVER_TAKEN:
            raise LabkitError(f"{obj['kind']} {meta['name']} exists and labkit did not create it; labkit will not "
                              "change it (rename the scenario's node pool)")
        theirs.add(_key(obj))
        if _key(obj) not in recorded:
            before.append(_content(existing))
    if before:
        _record(api, lab, before)
        names = ", ".join(" ".join(_key(o)[::2]) for o in before)
        _say(f"recorded {len(before)} existing object(s) labkit did not create, for `labkit cluster down` to "
             f"restore: {names}")
    for obj in objects:
        if obj["kind"] == "Job":
            continue
        if _key(obj) in theirs:
            labels = {k: v for k, v in obj["metadata"].get("labels", {}).items() if k not in (MANAGED_BY, LAB)}
            obj = {**obj, "metadata": {**obj["metadata"], "labels": labels}}
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


VOLCANO_CRDS = (("batch.volcano.sh/v1alpha1", "Job"), ("scheduling.volcano.sh/v1beta1", "Queue"),
                ("scheduling.volcano.sh/v1beta1", "PodGroup"))
KWOK_DEPLOYMENT = ("kube-system", "kwok-controller")
WATCHED_VERBS = ("list", "watch")


def preflight(api: Api, scenario: Scenario | None, action: str) -> None:
    """Check, before changing anything, what `action` (apply, observe, down) needs of the cluster;
    the first missing piece is a one-line LabkitError: Volcano's CRDs, a scheduler (and for apply
    KWOK) answering, RBAC allowing each verb, for observe nodes that can run the lab's pods."""
    for api_version, kind in VOLCANO_CRDS:
        try:
            api.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise LabkitError(f"{api.context_name}: Volcano's CRDs are missing (no {kind} in {api_version}); install "
                              "Volcano (helm chart volcano-sh/volcano), or make a kind cluster with `labkit cluster up`"
                              ) from None
    for verb, api_version, kind, namespace in _needed(scenario, action):
        if not api.can(verb, api_version, kind, namespace):
            where = f"in namespace {namespace}" if namespace else "cluster-wide"
            raise LabkitError(f"{api.context_name}: RBAC does not let you {verb} {kind} objects ({api_version}) "
                              f"{where}, which `labkit cluster {action}` needs")
    if action == "down":
        return
    _answering(api, SCHEDULER_NAMESPACE, SCHEDULER_DEPLOYMENT, "no Volcano scheduler answering")
    if action == "apply":
        _answering(api, *KWOK_DEPLOYMENT, "no KWOK controller answering (labkit's fake nodes would never be Ready)")
    else:
        _nodes_fit(api, scenario)


def _needed(scenario: Scenario | None, action: str) -> list[tuple[str, str, str, str | None]]:
    """(verb, apiVersion, kind, namespace or None for cluster-wide) that `action` uses."""
    if action == "observe":
        return [(verb, v, kind, None) for v, kind, _ in WATCHED for verb in WATCHED_VERBS]
    if action == "down":
        return [(verb, API_VERSIONS[kind], kind, None) for kind in KINDS for verb in ("list", "delete")] + [
            ("update", "v1", "ConfigMap", SCHEDULER_NAMESPACE)]
    needed = []
    for obj in manifests(scenario):
        for verb in ("get", "create", "patch"):
            item = (verb, obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"))
            if item not in needed:
                needed.append(item)
    return needed + [("patch", "apps/v1", "Deployment", SCHEDULER_NAMESPACE)]


def _answering(api: Api, namespace: str, name: str, what: str) -> None:
    """The Deployment has a replica available, else `what` as a one-line error."""
    found = api.get("apps/v1", "Deployment", name, namespace)
    if found is None:
        raise LabkitError(f"{api.context_name}: {what}: no Deployment {namespace}/{name}")
    status = found.get("status") or {}
    if not status.get("availableReplicas"):
        raise LabkitError(f"{api.context_name}: {what}: Deployment {namespace}/{name} has 0 of "
                          f"{found['spec'].get('replicas', 1)} replicas available")


def _nodes_fit(api: Api, scenario: Scenario) -> None:
    """Every pod of the lab fits the allocatable of some KWOK node of the cluster."""
    nodes = [n["status"].get("allocatable") or {} for n in api.labelled("v1", "Node", "type=kwok")]
    for i, job in enumerate(scenario.jobs):
        for k, task in enumerate(job.tasks):
            need = {name: parse_quantity(v) for name, v in task.resources.items()}
            if not any(all(parse_quantity(node.get(name, 0)) >= amount for name, amount in need.items()) for node in nodes):
                shape = ", ".join(f"{name}={v}" for name, v in task.resources.items())
                raise LabkitError(f"{api.context_name}: no node has the resources of jobs[{i}].tasks[{k}] ({shape}) "
                                  f"among {len(nodes)} KWOK node(s); apply the lab (`labkit cluster apply`) first")


def _key(obj: dict) -> tuple[str, str | None, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace"), meta["name"]


def _created_by_labkit(obj: dict) -> bool:
    return (obj["metadata"].get("labels") or {}).get(MANAGED_BY) == "labkit"


def _content(obj: dict) -> dict:
    """What to put back: the object without its status and the fields the API server sets."""
    meta = obj["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k)}
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": kept}


def _record_name(lab: str) -> str:
    return f"labkit-existing-{hashlib.sha256(lab.encode()).hexdigest()[:12]}"


def _records(api: Api, lab: str | None = None) -> list[dict]:
    selector = f"{MANAGED_BY}=labkit,{RECORD}=existing" + (f",{LAB}={lab}" if lab else "")
    return api.labelled("v1", "ConfigMap", selector)


def _recorded_objects(record: dict) -> list[dict]:
    return json.loads((record.get("data") or {}).get("objects", "[]"))


def _record(api: Api, lab: str, before: list[dict]) -> None:
    """Keep `before` in the lab's record ConfigMap (added to what an earlier apply of the lab kept)."""
    name = _record_name(lab)
    current = api.get("v1", "ConfigMap", name, SCHEDULER_NAMESPACE)
    kept = _recorded_objects(current) if current else []
    api.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": SCHEDULER_NAMESPACE,
                            "labels": {MANAGED_BY: "labkit", LAB: lab, RECORD: "existing"}},
               "data": {"objects": json.dumps(kept + before, sort_keys=True)}})


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
    """Delete what labkit created (of one lab, or all), jobs first; put back what it changed.

    Returns how many objects were deleted. Objects `apply` recorded as existing before it are
    restored exactly as they were (the scheduler's ConfigMap included, and the scheduler reloaded),
    never deleted. Queues go only once their pods are gone (Volcano refuses to delete a queue that
    still has allocated pods), children before parents.
    """
    selector = f"{MANAGED_BY}=labkit" + (f",{LAB}={lab}" if lab else "")
    records = _records(api, lab)
    restore = [o for record in records for o in _recorded_objects(record)]
    kept = {_key(o) for o in restore}
    deleted = 0
    for kind in reversed(KINDS):
        items = [i for i in api.labelled(API_VERSIONS[kind], kind, selector) if _key({"kind": kind, **i}) not in kept]
        if kind == "ConfigMap":
            items = [i for i in items if RECORD not in (i["metadata"].get("labels") or {})]
            if not restore and any(i["metadata"]["name"] == SCHEDULER_CONFIGMAP for i in items):
                # labelled by a labkit that kept no record: give the scheduler the shipped conf
                shipped = scheduler_configmap(policy("volcano-shipped"), lab_labels("volcano-shipped"))
                api.apply(shipped)
                _reload_scheduler(api, shipped["data"]["volcano-scheduler.conf"])
            continue
        keep = VOLCANO_OWNED.get(kind, set())
        pending = [i for i in items if i["metadata"]["name"] not in keep]
        deleted += _delete_all(api, API_VERSIONS[kind], kind, pending, wait)
        if kind == "Job":
            _wait_gone(api, "v1", "Pod", selector, wait)
    for obj in sorted(restore, key=lambda o: KINDS.index(o["kind"])):
        api.replace(obj)
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == SCHEDULER_CONFIGMAP:
            _reload_scheduler(api, obj["data"]["volcano-scheduler.conf"])
    if restore:
        _say(f"restored {len(restore)} object(s) as they were before `labkit cluster apply`")
    for record in records:
        api.delete("v1", "ConfigMap", record["metadata"]["name"], record["metadata"].get("namespace"))
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
