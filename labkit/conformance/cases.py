"""Load a neutral-format Volcano case (see the header of ``volcano-cases.yaml``) into a
:class:`~labkit.engine.problem.Problem` and :class:`~labkit.engine.problem.State`.

The cases come from Volcano's unit tests, so the loader keeps the unit-test conventions:
an extension point is on only if the case lists it in ``enabled:``; tier entries for plugins the
test does not register are dropped; every timestamp is zero, so ties fall to UIDs
(job ``<ns>/<podgroup>``, queue ``<name>``, task ``<ns>-<pod>``) and the session clock is far
in the future (``time.Since`` of a zero timestamp).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from labkit.engine.problem import (
    BASE_RESOURCES,
    GPU,
    PodGroupPhase,
    Problem,
    State,
    TaskStatus,
    hdrf_tree,
    is_best_effort,
    pod_name_index,
    policy_from_conf,
    rank_by,
    resource_vector,
)
from labkit.errors import SpecError

ZERO_TIME_NOW = 1e11
"""Seconds between the zero creation timestamps of the test objects and "now"."""

PREEMPTABLE_KEY = "volcano.sh/preemptable"
HIERARCHY_KEY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_KEY = "volcano.sh/hierarchy-weights"
TASK_SPEC_KEY = "volcano.sh/task-spec"
CRITICAL_CLASSES = {"system-cluster-critical", "system-node-critical"}


def _require(obj: Mapping, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise SpecError(where, "expected a mapping")
    if key not in obj:
        raise SpecError(f"{where}.{key}", "missing field")
    return obj[key]


def _list(obj: Mapping, key: str, where: str) -> list:
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise SpecError(f"{where}.{key}", "expected a list")
    return value


def policy_conf(case: Mapping, where: str):
    """``(actions, tiers)`` in the conf form of policy_from_conf, unit-test conventions."""
    config = _require(case, "config", where)
    actions = _require(config, "actions", f"{where}.config")
    registered = config.get("registered_plugins", case.get("registered_plugins"))
    tiers = []
    for t, tier in enumerate(_require(config, "tiers", f"{where}.config")):
        entries = []
        for j, plugin in enumerate(tier):
            name = _require(plugin, "name", f"{where}.config.tiers[{t}][{j}]")
            if registered is not None and name not in registered:
                continue
            entries.append({"name": name, "enabled": set(plugin.get("enabled") or ()),
                            "arguments": plugin.get("arguments") or {}})
        tiers.append(entries)
    for name, args in (config.get("configurations") or {}).items():
        if name == "preempt" and (args or {}).get("enableTopologyAwarePreemption"):
            raise SpecError(f"{where}.config.configurations.preempt.enableTopologyAwarePreemption",
                            "topology-aware preemption is not supported")
    return actions, tiers


def _resource_names(case: Mapping) -> tuple[str, ...]:
    """Base resources, nvidia.com/gpu if any node has gpus, then every other scalar named."""
    names = list(BASE_RESOURCES)
    seen: list[str] = []

    def note(rl):
        for name in (rl or {}):
            if name not in names and name not in seen:
                seen.append(name)

    for node in case.get("nodes") or []:
        if node.get("gpu"):
            note({GPU: 1})
        note(node.get("scalars"))
    for q in case.get("queues") or []:
        for key in ("capability", "deserved", "guarantee"):
            note(q.get(key))
    for pg in case.get("podgroups") or []:
        note(pg.get("minResources"))
    for pod in _pods(case, "case"):
        note(pod.get("requests"))
    return tuple(names + sorted(seen))


# --------------------------------------------------------------------------------------------
# Pods written as prose in the case file
# --------------------------------------------------------------------------------------------

_FOR_EACH = re.compile(
    r"for each pg in \{(?P<pgs>[^}]*)\} and k in (?P<lo>\d+)\.\.(?P<hi>\d+): (?P<templates>.*?), "
    r"pod priority k; tasks k=(?P<pipelined>[\d,]+) were Pipelined onto (?P<node>\S+) before the call$")
_TEMPLATE = re.compile(r"<pg>(?P<name>[\w.-]*?)-k \((?P<requests>[^)]*)\)")


def _prose_pods(text: str, podgroups: list, where: str) -> list[dict]:
    """Expand the one prose pod family the case file uses ("for each pg in {..} and k in a..b:
    <pg>-name-k (requests) and ..., pod priority k; tasks k=.. were Pipelined onto <node> ...")."""
    m = _FOR_EACH.match(" ".join(text.split()))
    if not m:
        raise SpecError(where, "pods given as text in a form the loader does not know")
    namespaces = {pg.get("name"): pg.get("ns") for pg in podgroups}
    pipelined = {int(k) for k in m["pipelined"].split(",")}
    templates = _TEMPLATE.findall(m["templates"])
    if not templates:
        raise SpecError(where, "no pod template '<pg>-name-k (requests)' found")
    pods = []
    for pg in (p.strip() for p in m["pgs"].split(",")):
        for k in range(int(m["lo"]), int(m["hi"]) + 1):
            for suffix, requests in templates:
                pod = {"name": f"{pg}{suffix}-{k}", "ns": namespaces.get(pg, "default"), "podgroup": pg,
                       "phase": "Pending", "priority": k, "requests": _prose_requests(requests, where)}
                if k in pipelined:
                    pod["pipelined_onto"] = m["node"]
                pods.append(pod)
    return pods


def _prose_requests(text: str, where: str) -> dict:
    if text.strip() == "no requests":
        return {}
    requests = {}
    for part in text.split(","):
        bits = part.split()
        if len(bits) != 2:
            raise SpecError(where, f"cannot read request {part.strip()!r}")
        requests[bits[0]] = bits[1]
    return requests


def _pods(case: Mapping, where: str) -> list[dict]:
    pods = case.get("pods") or []
    if isinstance(pods, str):
        return _prose_pods(pods, case.get("podgroups") or [], f"{where}.pods")
    if not isinstance(pods, list):
        raise SpecError(f"{where}.pods", "expected a list")
    return pods


# --------------------------------------------------------------------------------------------
# Case -> Problem + State
# --------------------------------------------------------------------------------------------

_PHASES = {"": PodGroupPhase.UNSET, "Pending": PodGroupPhase.PENDING, "Inqueue": PodGroupPhase.INQUEUE,
           "Running": PodGroupPhase.RUNNING, "Unknown": PodGroupPhase.UNKNOWN,
           "Completed": PodGroupPhase.COMPLETED}


def load_case(case: Mapping, where: str = "case") -> tuple[Problem, State]:
    """Build the Problem and State of one neutral-format case."""
    names = _resource_names(case)
    actions, tiers = policy_conf(case, where)
    policy = policy_from_conf(actions, tiers, names, where=f"{where}.config.")
    classes = {c["name"]: c for c in _list(case, "priority_classes", where)}

    nodes = _list(case, "nodes", where)
    node_names = tuple(_require(n, "name", f"{where}.nodes[{i}]") for i, n in enumerate(nodes))
    allocatable = np.zeros((len(nodes), len(names)))
    for i, n in enumerate(nodes):
        rl = {"cpu": n.get("cpu", 0), "memory": n.get("memory", 0), "pods": n.get("pods", 0),
              **(n.get("scalars") or {})}
        if n.get("gpu"):
            rl[GPU] = n["gpu"]
        allocatable[i] = resource_vector(names, rl, f"{where}.nodes[{i}]")

    queues = _list(case, "queues", where)
    q_names = tuple(_require(q, "name", f"{where}.queues[{i}]") for i, q in enumerate(queues))
    q_index = {n: i for i, n in enumerate(q_names)}
    nan = float("nan")

    def queue_vec(key):
        return np.array([resource_vector(names, q.get(key), f"{where}.queues[{i}].{key}", missing=nan)
                         for i, q in enumerate(queues)]).reshape(len(queues), len(names))

    def parent(i, q):
        """spec.parent, defaulting to ``root`` when the case has one."""
        name = q.get("parent")
        if name:
            if name not in q_index:
                raise SpecError(f"{where}.queues[{i}].parent", f"unknown queue {name!r}")
            return q_index[name]
        return q_index["root"] if "root" in q_index and q_names[i] != "root" else -1

    pgs = _list(case, "podgroups", where)
    job_names = tuple(f"{_require(pg, 'ns', f'{where}.podgroups[{i}]')}/{_require(pg, 'name', f'{where}.podgroups[{i}]')}"
                      for i, pg in enumerate(pgs))
    job_by_pg = {(pg["ns"], pg["name"]): i for i, pg in enumerate(pgs)}
    pods = _pods(case, where)
    roles = sorted({(p.get("labels") or {}).get(TASK_SPEC_KEY, "") for p in pods}
                   | {r for pg in pgs for r in (pg.get("minTaskMember") or {})})
    role_index = {r: i for i, r in enumerate(roles)}

    job_queue, job_priority, job_min, job_role_min, job_min_res, job_has_min = [], [], [], [], [], []
    phases, job_topology = [], []
    for i, pg in enumerate(pgs):
        at = f"{where}.podgroups[{i}]"
        queue = _require(pg, "queue", at)
        if queue not in q_index:
            raise SpecError(f"{at}.queue", f"unknown queue {queue!r}")
        job_queue.append(q_index[queue])
        job_priority.append(int(classes.get(pg.get("priorityClass"), {}).get("value", 0)))
        job_min.append(int(_require(pg, "minMember", at)))
        minima = np.zeros(len(roles), np.int64)
        for role, n in (pg.get("minTaskMember") or {}).items():
            minima[role_index[role]] = int(n)
        job_role_min.append(minima)
        job_min_res.append(resource_vector(names, pg.get("minResources"), f"{at}.minResources"))
        job_has_min.append(pg.get("minResources") is not None)
        phase = pg.get("phase", "Pending")
        if phase not in _PHASES:
            raise SpecError(f"{at}.phase", f"unknown PodGroup phase {phase!r}")
        phases.append(_PHASES[phase])
        topology = pg.get("networkTopology")
        if topology is not None:
            mode = topology.get("mode")
            if mode not in ("hard", "soft"):
                raise SpecError(f"{at}.networkTopology.mode", f"expected hard or soft, got {mode!r}")
            job_topology.append((int(_require(topology, "highestTierAllowed", f"{at}.networkTopology")),
                                 mode == "hard"))
        else:
            job_topology.append((-1, False))

    t_names, t_job, t_role, t_req, t_prio, t_never, t_preempt, t_crit = [], [], [], [], [], [], [], []
    t_uid, t_class, status, node_of = [], [], [], []
    selectors: list[dict] = []
    node_index = {n: i for i, n in enumerate(node_names)}
    for i, pod in enumerate(pods):
        at = f"{where}.pods[{i}]"
        ns, name = _require(pod, "ns", at), _require(pod, "name", at)
        key = (ns, _require(pod, "podgroup", at))
        if key not in job_by_pg:
            raise SpecError(f"{at}.podgroup", f"unknown podgroup {key[1]!r} in namespace {ns!r}")
        labels = pod.get("labels") or {}
        t_names.append(f"{ns}/{name}")
        t_uid.append(f"{ns}-{name}")
        t_job.append(job_by_pg[key])
        t_role.append(role_index[labels.get(TASK_SPEC_KEY, "")])
        t_req.append(resource_vector(names, {**(pod.get("requests") or {}), "pods": 1}, f"{at}.requests"))
        t_prio.append(int(pod.get("priority", 1)))
        t_never.append(pod.get("preemptionPolicy") == "Never")
        t_preempt.append(str(labels.get(PREEMPTABLE_KEY, "true")).lower() != "false")
        t_crit.append(ns == "kube-system" or pod.get("priorityClassName") in CRITICAL_CLASSES)
        selector = dict(pod.get("nodeSelector") or {})
        if selector not in selectors:
            selectors.append(selector)
        t_class.append(selectors.index(selector))
        s, n = _pod_status(pod, node_index, at)
        status.append(s)
        node_of.append(n)
    class_ok = np.array([[all((nd.get("labels") or {}).get(k) == str(v) for k, v in sel.items()) for nd in nodes]
                         for sel in selectors], bool).reshape(len(selectors), len(nodes))

    n_jobs = len(pgs)
    annotations = [q.get("annotations") or {} for q in queues]
    hdrf_names, hdrf_parent, hdrf_weight, queue_hdrf_node = hdrf_tree(
        [a.get(HIERARCHY_KEY, "") for a in annotations], [a.get(HIERARCHY_WEIGHTS_KEY, "") for a in annotations])
    problem = Problem(
        resource_names=names,
        node_names=node_names,
        node_allocatable=allocatable,
        node_schedulable=np.ones(len(nodes), bool),
        queue_names=q_names,
        queue_weight=np.array([float(q.get("weight", 1)) for q in queues]),
        queue_capability=queue_vec("capability"),
        queue_deserved=queue_vec("deserved"),
        queue_guarantee=queue_vec("guarantee"),
        queue_priority=np.array([int(q.get("priority", 0)) for q in queues], np.int64),
        queue_parent=np.array([parent(i, q) for i, q in enumerate(queues)], np.int64),
        queue_reclaimable=np.array([bool(q.get("reclaimable", True)) for q in queues], bool),
        queue_open=np.array([q.get("state", "Open") == "Open" for q in queues], bool),
        queue_rank=rank_by(list(q_names)),
        role_names=tuple(roles),
        job_names=job_names,
        job_queue=np.array(job_queue, np.int64),
        job_priority=np.array(job_priority, np.int64),
        job_min_member=np.array(job_min, np.int64),
        job_min_task_member=np.array(job_role_min, np.int64).reshape(n_jobs, len(roles)),
        job_min_resources=np.array(job_min_res).reshape(n_jobs, len(names)),
        job_has_min_resources=np.array(job_has_min, bool),
        job_rank=rank_by(list(job_names)),
        job_creation=np.zeros(n_jobs),
        job_sla_waiting=np.full(n_jobs, np.nan),
        job_preemptable=np.zeros(n_jobs, bool),
        task_names=tuple(t_names),
        task_job=np.array(t_job, np.int64),
        task_role=np.array(t_role, np.int64),
        task_request=np.array(t_req).reshape(len(pods), len(names)),
        task_priority=np.array(t_prio, np.int64),
        task_preempt_never=np.array(t_never, bool),
        task_preemptable=np.array(t_preempt, bool),
        task_best_effort=np.array([is_best_effort(r) for r in t_req], bool),
        task_critical=np.array(t_crit, bool),
        task_index=np.array([pod_name_index(n.split("/", 1)[1]) for n in t_names], np.int64),
        task_rank=rank_by(t_uid),
        task_class=np.array(t_class, np.int64),
        class_node_ok=class_ok,
        policy=policy,
        hdrf_names=hdrf_names,
        hdrf_parent=hdrf_parent,
        hdrf_weight=hdrf_weight,
        queue_hdrf_node=queue_hdrf_node,
        job_topology_tier=np.array([t for t, _ in job_topology], np.int64).reshape(n_jobs),
        job_topology_hard=np.array([h for _, h in job_topology], bool).reshape(n_jobs),
        **_hypernodes(case, node_names, where),
    )
    state = State.from_tasks(problem, status, node_of, phases, now=ZERO_TIME_NOW)
    return problem, state


def _hypernodes(case: Mapping, node_names: tuple[str, ...], where: str) -> dict:
    """The Problem's HyperNode fields from ``hypernodes: [{name, tier, members}]``: a member names a
    node or, when a HyperNode has that name, a HyperNode (MemberTypeHyperNode)."""
    specs = _list(case, "hypernodes", where)
    if not specs:
        return {}
    at = [f"{where}.hypernodes[{i}]" for i in range(len(specs))]
    names = tuple(_require(h, "name", a) for h, a in zip(specs, at))
    tiers = [int(_require(h, "tier", a)) for h, a in zip(specs, at)]
    index = {n: i for i, n in enumerate(names)}
    node_index = {n: i for i, n in enumerate(node_names)}

    def nodes_of(h: int, seen: tuple = ()) -> list[int]:
        if h in seen:
            raise SpecError(f"{at[h]}.members", "HyperNodes contain each other")
        out = []
        for member in _require(specs[h], "members", at[h]):
            if member in index:
                out += nodes_of(index[member], (*seen, h))
            elif member in node_index:
                out.append(node_index[member])
            else:
                raise SpecError(f"{at[h]}.members", f"unknown node or HyperNode {member!r}")
        return out

    columns = np.full((len(node_names), max(tiers)), -1, np.int64)
    for h, tier in enumerate(tiers):
        if tier < 1:
            raise SpecError(f"{at[h]}.tier", "tiers start at 1")
        for n in nodes_of(h):
            if columns[n, tier - 1] not in (-1, h):
                raise SpecError(f"{at[h]}.members", f"node {node_names[n]!r} is in two HyperNodes of tier {tier}")
            columns[n, tier - 1] = h
    return {"hypernode_names": names, "hypernode_tier": np.array(tiers, np.int64), "node_hypernode": columns}


def _pod_status(pod: Mapping, node_index: dict, where: str) -> tuple[TaskStatus, int]:
    """Pod phase (+ node) -> task status as the Volcano cache reads it."""
    phase = _require(pod, "phase", where)
    node = pod.get("node")
    if node is not None and node not in node_index:
        raise SpecError(f"{where}.node", f"unknown node {node!r}")
    n = node_index.get(node, -1)
    if "pipelined_onto" in pod:
        return TaskStatus.PIPELINED, node_index.get(pod["pipelined_onto"], -1)
    if phase == "Pending":
        return (TaskStatus.BOUND, n) if n >= 0 else (TaskStatus.PENDING, -1)
    if phase == "Running":
        return TaskStatus.RUNNING, n
    if phase in ("Succeeded", "Failed"):
        return TaskStatus[phase.upper()], n
    raise SpecError(f"{where}.phase", f"unknown pod phase {phase!r}")
