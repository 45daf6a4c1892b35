"""Scenario -> the Kubernetes and Volcano (or Kueue) objects that run the same lab on a real cluster.

`manifests(scenario)` returns plain dicts in apply order (see `APPLY_ORDER`): the fake GPU nodes
KWOK animates and the HyperNodes over them, the scheduler conf, the tenants' Namespaces with their
ResourceQuota and LimitRange, PriorityClasses, Volcano Queues, and one vcjob per scenario job. A
scenario under Kueue (`scheduler.kueue` or a Kueue policy) gets Kueue's objects instead of the
Volcano ones (`kueue_objects`): ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, and one
`batch/v1` Job (one task) or JobSet (several) per job, which Kueue admits by unsuspending it.
Every object carries `app.kubernetes.io/managed-by: labkit` and `labkit.io/lab: <scenario name>`,
so `labkit cluster down` can remove exactly what a lab created.

A pod's run time is the `labkit.io/duration` annotation, which labkit's KWOK Stage
(`clusters/kwok/stages.yaml`) waits before it marks the pod Succeeded. `time_scale` divides run
times and submit offsets, so a simulated week runs in minutes on a laptop.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import yaml

from ..errors import LabkitWarning, SpecError
from ..spec import Scenario, conf_of, scheduler_of
from ..spec.base import DEFAULT_MAX_PODS
from ..spec.checks import simulated_only
from ..spec.kueue import KueueConfiguration, local_queue
from ..spec.model import TOPOLOGY_LABEL, Job, NodePool, PriorityClass, Queue, SchedulerConf, Task, Toleration
from ..spec.quantity import parse_duration
from ..workloads import expand

MANAGED_BY = "app.kubernetes.io/managed-by"
LAB = "labkit.io/lab"
DURATION = "labkit.io/duration"
"""Pod annotation: how long the pod runs once Running (a Go duration), read by labkit's KWOK Stage."""
SUBMIT = "labkit.io/submit"
"""vcjob annotation: how long after the run starts `labkit cluster apply` creates the job (a Go duration)."""
TIME_SCALE = "labkit.io/time-scale"
"""vcjob annotation: the factor run times and submit offsets were divided by."""
TOPOLOGY = TOPOLOGY_LABEL
"""Node label prefix: one label per HyperNode tier, e.g. `topology.labkit.io/rack: rack-3`."""
PREEMPTABLE = "volcano.sh/preemptable"

KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_SELECTOR = {"type": "kwok"}
SCHEDULER_NAMESPACE, SCHEDULER_CONFIGMAP = "volcano-system", "volcano-scheduler-configmap"
"""Where the Volcano helm chart (release `volcano`) keeps `volcano-scheduler.conf`."""
POD_IMAGE = "registry.k8s.io/pause:3.10"
"""KWOK never pulls it; it only has to be a valid image reference."""
UNRESTRICTED_RETRIES = 2**31 - 1
"""vcjob maxRetry: the simulator restarts an evicted gang without limit, Volcano's default is 3."""
EXISTING_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", SCHEDULER_NAMESPACE})

KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
APPLY_ORDER = (("v1", "Node"), ("topology.volcano.sh/v1alpha1", "HyperNode"), ("v1", "ConfigMap"), ("v1", "Namespace"),
               ("v1", "ResourceQuota"), ("v1", "LimitRange"), ("scheduling.k8s.io/v1", "PriorityClass"),
               ("scheduling.volcano.sh/v1beta1", "Queue"), ("batch.volcano.sh/v1alpha1", "Job"),
               (KUEUE_API, "ResourceFlavor"), (KUEUE_API, "Cohort"), (KUEUE_API, "ClusterQueue"),
               (KUEUE_API, "LocalQueue"), ("batch/v1", "Job"), (JOBSET_API, "JobSet"), (KUEUE_API, "Topology"))
"""(apiVersion, kind) in apply order: nodes before anything lands on them, the policy before jobs, tenants,
queues, then jobs; a Kueue lab's flavors and queues before the LocalQueues its jobs name. A Kueue
Topology comes last (its file number is new, the others keep theirs): until it exists a ClusterQueue
with a flavor naming it is inactive (TopologyNotFound), and the suspended Jobs wait for it."""
KINDS = tuple(kind for _, kind in APPLY_ORDER[:9])
"""The kinds of a Volcano lab, in apply order (what `labkit cluster` creates and removes)."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def manifests(scenario: Scenario, time_scale: float = 1.0) -> list[dict]:
    """Every object of the lab, in apply order; workload generators are expanded first."""
    if not time_scale > 0:
        raise SpecError("--time-scale", f"must be > 0, got {time_scale}")
    simulated_only(scenario)
    scenario = expand(scenario)
    labels = lab_labels(scenario.name)
    scheduler = scheduler_of(scenario)
    if scheduler.kueue is not None:
        objects = kueue_objects(scenario, scheduler.kueue, labels, time_scale)
    else:
        if scheduler.queueing_strategy == "StrictFIFO":
            warnings.warn(LabkitWarning(STRICT_FIFO_NOTE), stacklevel=2)
        objects = hypernodes(scenario, labels) + [scheduler_configmap(conf_of(scenario), labels)]
        objects += [_queue(q, labels) for q in scenario.queues]
        objects += [vcjob(job, labels, time_scale) for job in scenario.jobs]
    objects += nodes(scenario, labels) + _tenancy(scenario, labels)
    objects += [_priority_class(p, labels) for p in scenario.priority_classes]
    return sorted(objects, key=lambda obj: APPLY_ORDER.index((obj["apiVersion"], obj["kind"])))


STRICT_FIFO_NOTE = ("scheduler.queueingStrategy StrictFIFO is not exported: Volcano's scheduler has no such switch "
                    "(a Queue's dequeueStrategy is read nowhere in it), so the real run is BestEffortFIFO")
"""Said when a StrictFIFO scenario is exported: the simulated run and the real one will differ."""


def lab_labels(name: str) -> dict[str, str]:
    """The two labels every object of the lab `name` (a scenario name) carries."""
    if len(name) > 63 or not _LABEL_VALUE.match(name):
        raise SpecError("name", f"{name!r} must be a Kubernetes label value (letters, digits, '-', '_', '.'; "
                                "at most 63) because it labels every object of the lab")
    return {MANAGED_BY: "labkit", LAB: name}


def _meta(name: str, labels: dict[str, str], namespace: str | None = None, **extra: Any) -> dict:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def quantity(value: str | float) -> str | int:
    """A scenario quantity as the API accepts it: kept as written, numbers as integers or strings."""
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return int(value)
    return repr(float(value))


def _quantities(resources: dict[str, Any]) -> dict[str, str | int]:
    return {name: quantity(v) for name, v in resources.items()}


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string (`time.ParseDuration`), millisecond precision: `5400s`, `0.6s`."""
    text = f"{round(seconds, 3):.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


# ---------------------------------------------------------------------------------------- nodes


def nodes(scenario: Scenario, labels: dict[str, str]) -> list[dict]:
    """KWOK fake nodes (as Volcano's own e2e and benchmarks make them), with GPUs as a plain scalar."""
    tiers = _tier_of_nodes(scenario)
    out = []
    for pool in scenario.cluster.pools:
        for name in pool.node_names():
            out.append(_node(pool, name, labels, tiers.get(name, {})))
    return out


def _node(pool: NodePool, name: str, labels: dict[str, str], topology: dict[str, str]) -> dict:
    node_labels = {**pool.labels, **KWOK_SELECTOR, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", "labkit.io/pool": pool.name, **topology, **labels}
    capacity = {"pods": DEFAULT_MAX_PODS, **_quantities(pool.resources)}
    taints = [KWOK_TAINT] + [{k: v for k, v in t.model_dump().items() if v} for t in pool.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, node_labels, annotations={"kwok.x-k8s.io/node": "fake",
                                                          "node.alpha.kubernetes.io/ttl": "0"}),
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def _tiers(scenario: Scenario) -> list[list[list[str]]]:
    """Members of every HyperNode, tier by tier: tier 1 groups node names, tier k groups tier k-1 HyperNodes."""
    topology = scenario.cluster.topology
    if topology is None:
        return []
    nodes = [name for pool in scenario.cluster.pools for name in pool.node_names()]
    return [[members for _, members in tier] for tier in topology.hypernodes(nodes)]


def _tier_of_nodes(scenario: Scenario) -> dict[str, dict[str, str]]:
    """node name -> {topology label: HyperNode name} for every tier above it."""
    topology = scenario.cluster.topology
    if topology is None:
        return {}
    out: dict[str, dict[str, str]] = {}
    members = {n: [n] for pool in scenario.cluster.pools for n in pool.node_names()}
    for tier, groups in zip(topology.tiers, _tiers(scenario)):
        grouped = {}
        for j, group in enumerate(groups):
            hypernode = f"{tier.name}-{j}"
            grouped[hypernode] = [n for member in group for n in members[member]]
            for n in grouped[hypernode]:
                out.setdefault(n, {})[TOPOLOGY + tier.name] = hypernode
        members = grouped
    return out


def hypernodes(scenario: Scenario, labels: dict[str, str]) -> list[dict]:
    """One HyperNode per group of every tier: tier 1 selects its nodes by label, higher tiers name HyperNodes."""
    topology = scenario.cluster.topology
    out = []
    for level, (tier, groups) in enumerate(zip(topology.tiers if topology else [], _tiers(scenario)), start=1):
        for j, group in enumerate(groups):
            name = f"{tier.name}-{j}"
            if level == 1:
                members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {TOPOLOGY + tier.name: name}}}}]
            else:
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": m}}} for m in group]
            out.append({
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": _meta(name, labels),
                "spec": {"tier": level, "tierName": tier.name, "members": members},
            })
    return out


# ---------------------------------------------------------------------------------------- policy, tenants, queues


def scheduler_configmap(conf: SchedulerConf, labels: dict[str, str]) -> dict:
    """Volcano's scheduler ConfigMap holding `conf` as `volcano-scheduler.conf` (hot-reloaded by the scheduler)."""
    data = conf.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in data["tiers"]:
        tier["plugins"] = [{"name": p["name"], **p} for p in tier["plugins"]]  # as Volcano's docs write it
    text = yaml.safe_dump(data, sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(SCHEDULER_CONFIGMAP, labels, SCHEDULER_NAMESPACE),
        "data": {"volcano-scheduler.conf": text},
    }


def _tenancy(scenario: Scenario, labels: dict[str, str]) -> list[dict]:
    """Namespaces the lab uses (not the cluster's own), and each tenant's ResourceQuota and LimitRange."""
    names = [t.ns for t in scenario.tenants] + [j.namespace for j in scenario.jobs]
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, labels)}
           for ns in dict.fromkeys(names) if ns not in EXISTING_NAMESPACES]
    for tenant in scenario.tenants:
        if tenant.resource_quota is not None:
            out.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta(tenant.name, labels, tenant.ns),
                        "spec": {"hard": _quantities(tenant.resource_quota.hard)}})
        if tenant.limit_range is not None:
            limits = []
            for item in tenant.limit_range.limits:
                given = {"default": item.default, "defaultRequest": item.default_request, "max": item.max,
                         "min": item.min}
                limits.append({"type": item.type, **{k: _quantities(v) for k, v in given.items() if v}})
            out.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": _meta(tenant.name, labels, tenant.ns),
                        "spec": {"limits": limits}})
    return out


def _priority_class(pclass: PriorityClass, labels: dict[str, str]) -> dict:
    obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": _meta(pclass.name, labels),
           "value": pclass.value, "preemptionPolicy": pclass.preemption_policy, "globalDefault": pclass.global_default}
    if pclass.description:
        obj["description"] = pclass.description
    return obj


def _queue(queue: Queue, labels: dict[str, str]) -> dict:
    """A Volcano Queue; `guarantee` is `{resource: ...}` in the CRD, the other lists are plain ResourceLists."""
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable}
    if queue.capability:
        spec["capability"] = _quantities(queue.capability)
    if queue.deserved:
        spec["deserved"] = _quantities(queue.deserved)
    if queue.guarantee:
        spec["guarantee"] = {"resource": _quantities(queue.guarantee)}
    if queue.priority:
        spec["priority"] = queue.priority
    if queue.parent != "root":
        spec["parent"] = queue.parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": _meta(queue.name, labels),
            "spec": spec}


# ---------------------------------------------------------------------------------------- jobs


def vcjob(job: Job, labels: dict[str, str], time_scale: float = 1.0) -> dict:
    """A Volcano Job: its tasks as pod templates that KWOK runs for the job's (scaled) duration.

    A gang that needs all its pods restarts as a whole when one is evicted (`PodEvicted ->
    RestartJob`), as the simulator does; a job with surplus pods (minAvailable below its pod count)
    keeps Volcano's default, which recreates just the evicted pod.
    """
    run_time = parse_duration(job.work if job.work is not None else job.duration) / time_scale
    annotations = {SUBMIT: go_duration(parse_duration(job.submit) / time_scale), TIME_SCALE: f"{time_scale:g}"}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": job.queue,
        "minAvailable": job.min_available_resolved,
        "maxRetry": UNRESTRICTED_RETRIES,
    }
    if job.priority_class_name:
        spec["priorityClassName"] = job.priority_class_name
    if restarts_on_eviction(job):
        spec["policies"] = [{"event": "PodEvicted", "action": "RestartJob"}]
    if job.network_topology is not None:
        spec["networkTopology"] = {"mode": job.network_topology.mode,
                                   "highestTierAllowed": job.network_topology.highest_tier_allowed}
    grace = round(parse_duration(job.grace_period) / time_scale)
    spec["tasks"] = [_task(task, labels, job, run_time, grace) for task in job.tasks]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": _meta(job.name, labels, job.namespace, annotations=annotations),
        "spec": spec,
    }


def restarts_on_eviction(job: Job) -> bool:
    """Whether losing any pod takes the job below minAvailable, so an eviction restarts the whole job."""
    return job.min_available_resolved >= sum(t.replicas_resolved for t in job.tasks)


def _task(task: Task, labels: dict[str, str], job: Job, run_time: float, grace: int) -> dict:
    template = _pod_template(task, labels, run_time, grace)
    template["metadata"]["annotations"][PREEMPTABLE] = "true" if job.preemptible else "false"
    return {
        "name": task.name,
        "replicas": task.replicas_resolved,
        "minAvailable": task.min_available_resolved,
        "template": template,
    }


def _pod_template(task: Task, labels: dict[str, str], run_time: float, grace: int,
                  priority_class: str | None = None) -> dict:
    """A task's pods: its requests (extended resources also as limits), selectors and tolerations, on a
    KWOK node, running `run_time` seconds (the `labkit.io/duration` annotation)."""
    requests = {name: quantity(v) for name, v in task.resources.items() if name != "pods"}
    limits = {name: v for name, v in requests.items() if name not in _BASE_RESOURCES
              and not name.startswith("hugepages-")}  # extended resources: requests must equal limits
    container: dict[str, Any] = {"name": task.name, "image": POD_IMAGE}
    if requests:
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace,
        "nodeSelector": {**task.node_selector, **KWOK_SELECTOR},
        "tolerations": [{"key": KWOK_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
                       + [_toleration(t) for t in task.tolerations],
    }
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return {"metadata": {"labels": dict(labels), "annotations": {DURATION: go_duration(run_time)}}, "spec": pod_spec}


def _toleration(toleration: Toleration) -> dict:
    given = toleration.model_dump()
    return {"operator": given.pop("operator"), **{k: v for k, v in given.items() if v}}


# ---------------------------------------------------------------------------------------- Kueue

KUEUE_NAMESPACE, KUEUE_CONFIGMAP, KUEUE_CONFIG_KEY = "kueue-system", "kueue-manager-config", "controller_manager_config.yaml"
"""Where Kueue's manifests and helm chart keep the controller's Configuration (read at start: restart
`deployment/kueue-controller-manager` after changing it)."""
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""Job label naming the LocalQueue (`pkg/controller/constants: QueueLabel`)."""
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
"""Job annotation: the fewest pods Kueue may admit the Job with (partial admission)."""
TOPOLOGY_ANNOTATIONS = {"required": "kueue.x-k8s.io/podset-required-topology",
                        "preferred": "kueue.x-k8s.io/podset-preferred-topology",
                        "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology"}
"""Pod template annotations of a podset's Topology Aware Scheduling request (`topologyRequest`)."""
_QUANTITY_KEYS = ("nominalQuota", "borrowingLimit", "lendingLimit", "weight")


def kueue_objects(scenario: Scenario, configuration: KueueConfiguration, labels: dict[str, str],
                  time_scale: float) -> list[dict]:
    """The Kueue part of a Kueue lab: its Configuration when it differs from Kueue's defaults, the
    scenario's `kueue` objects, and its jobs as Kueue-managed Jobs (JobSets for several tasks)."""
    objects = [] if configuration == KueueConfiguration() else [kueue_configmap(configuration, labels)]
    kueue = scenario.kueue
    for kind, items in (("Topology", kueue.topologies), ("ResourceFlavor", kueue.resource_flavors),
                        ("Cohort", kueue.cohorts), ("ClusterQueue", kueue.cluster_queues)):
        for item in items:
            spec = _api_fields(item)
            if kind == "ClusterQueue":
                spec["namespaceSelector"] = {}  # Kueue's default (null) admits no namespace at all
            objects.append({"apiVersion": KUEUE_API, "kind": kind, "metadata": _meta(item.name, labels), "spec": spec})
    for lq in kueue.local_queues:
        objects.append({"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": _meta(lq.name, labels, lq.namespace),
                        "spec": {"clusterQueue": lq.cluster_queue}})
    for i, job in enumerate(scenario.jobs):
        lq = local_queue(kueue.local_queues, job.namespace, job.queue)
        objects.append(kueue_job(job, labels, lq.name if lq else None, time_scale, f"jobs[{i}]"))
    return objects


def _api_fields(item: Any) -> dict:
    """A Kueue object's fields as its API writes them: camelCase, unset ones left out, quantities as quantities."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: quantity(v) if k in _QUANTITY_KEYS else clean(v) for k, v in value.items()}
        return [clean(v) for v in value] if isinstance(value, list) else value
    return clean(item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"name"}))


def kueue_configmap(configuration: KueueConfiguration, labels: dict[str, str]) -> dict:
    """Kueue's Configuration (`config.kueue.x-k8s.io/v1beta2`) with the lab's fairSharing and
    waitForPodsReady; v1beta2 turns each on by its presence (no `enable` field). Fields left out take
    Kueue's defaults (`apis/config/v1beta2/defaults.go`); JobSet is integrated for jobs of several tasks."""
    config: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                              "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}
    if configuration.fair_sharing.enable:
        config["fairSharing"] = {"preemptionStrategies": list(configuration.fair_sharing.preemption_strategies)}
    ready = configuration.wait_for_pods_ready
    if ready.enable:
        strategy = ready.requeuing_strategy.model_dump(mode="json", by_alias=True, exclude_none=True)
        config["waitForPodsReady"] = {"timeout": go_duration(parse_duration(ready.timeout)),
                                      "blockAdmission": ready.block_admission, "requeuingStrategy": strategy}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(KUEUE_CONFIGMAP, labels, KUEUE_NAMESPACE),
            "data": {KUEUE_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)}}


def kueue_job(job: Job, labels: dict[str, str], local_queue_name: str | None, time_scale: float, where: str) -> dict:
    """A job as Kueue sees it: a suspended `batch/v1` Job labelled with its LocalQueue (one task; an elastic
    task's `min` as Kueue's partial admission), or a JobSet with one replicated Job per task. A job no
    LocalQueue takes is created without the label and unsuspended, as Kueue leaves it to kube-scheduler.
    Its (scaled) submit offset is also a label, so `kubectl create -l` can submit the jobs wave by wave."""
    run_time = parse_duration(job.work if job.work is not None else job.duration) / time_scale
    grace = round(parse_duration(job.grace_period) / time_scale)
    submit = go_duration(parse_duration(job.submit) / time_scale)
    annotations = {SUBMIT: submit, TIME_SCALE: f"{time_scale:g}"}
    job_labels = {**labels, SUBMIT: submit}  # kubectl create -f FILE -l labkit.io/submit=45s: one wave of jobs
    if local_queue_name:
        job_labels[QUEUE_NAME] = local_queue_name

    def job_spec(task: Task) -> dict:
        n = task.replicas_resolved
        template = _pod_template(task, labels, run_time, grace, job.priority_class_name)
        request = task.topology_request
        if request is not None:
            key = "required" if request.required else "preferred" if request.preferred else "unconstrained"
            template["metadata"]["annotations"][TOPOLOGY_ANNOTATIONS[key]] = request.level or "true"
        return {"parallelism": n, "completions": n, "template": template}

    managed = {"suspend": True} if local_queue_name else {}
    if len(job.tasks) == 1:
        task = job.tasks[0]
        if task.elastic is not None and task.elastic.min < task.replicas_resolved:
            annotations[MIN_PARALLELISM] = str(task.elastic.min)
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": _meta(job.name, job_labels, job.namespace, annotations=annotations),
                "spec": {**managed, **job_spec(task)}}
    for k, task in enumerate(job.tasks):
        if task.elastic is not None and task.elastic.min < task.replicas_resolved:
            raise SpecError(f"{where}.tasks[{k}].elastic", "Kueue admits a JobSet (a job of several tasks) whole: "
                            "partial admission is for a batch/v1 Job, a job of one task")
    replicated = [{"name": task.name, "replicas": 1, "template": {"spec": job_spec(task)}} for task in job.tasks]
    return {"apiVersion": JOBSET_API, "kind": "JobSet",
            "metadata": _meta(job.name, job_labels, job.namespace, annotations=annotations),
            "spec": {**managed, "replicatedJobs": replicated}}
