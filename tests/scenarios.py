"""Random small scenarios for property tests (hypothesis strategies) and the invariants every run keeps."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from hypothesis import strategies as st

import labkit
from labkit import spec
from labkit.results import Result
from labkit.spec import timeline
from labkit.spec.checks import placement_levels
from labkit.spec.quantity import parse_duration, parse_quantity

POLICIES = ["volcano-shipped", "volcano-multitenant", "no-overcommit"]


def _conf(policy: str) -> dict:
    if policy != "no-overcommit":
        return {"policy": policy}
    conf = spec.policy("volcano-multitenant").model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "overcommit"]
    return {"policy": policy, "conf": conf}


_NODE_STORIES = [("fail", "recover"), ("fail",), ("cordon", "uncordon"), ("drain", "uncordon"), ("drain",),
                 ("cordon", "drain"), ("fail", "recover", "fail"), ("interrupt",)]
"""Sequences of node events that make sense for one node (or pool) in time order."""


@st.composite
def node_events(draw, pools: list[dict], until: int) -> list[dict]:
    """Sometimes (one scenario in three) a few node failures, recoveries, cordons and drains, each
    story on a node or a whole pool, at random times before `until` seconds; else none."""
    if draw(st.integers(0, 2)) < 2:
        return []
    events = []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 2))):
        pool = draw(st.sampled_from(pools))
        node = pool["name"] if draw(st.integers(0, 3)) == 0 else f"{pool['name']}-{draw(st.integers(0, pool['count'] - 1))}"
        if node in used or pool["name"] in used or any(u.startswith(pool["name"] + "-") for u in used if node == pool["name"]):
            continue
        used.add(node)
        story = draw(st.sampled_from(_NODE_STORIES))
        times = sorted(draw(st.lists(st.integers(300, until), min_size=len(story), max_size=len(story))))
        events += [{"at": at, "node": node, "kind": kind} for at, kind in zip(times, story)]
    return events


@st.composite
def scenarios(draw, max_jobs: int = 10) -> spec.Scenario:
    """2-6 GPU nodes, 1-3 queues, up to `max_jobs` jobs: gangs, priorities, checkpoints, evictions."""
    pools = [{"name": f"p{i}", "count": draw(st.integers(1, 3)),
              "resources": {"nvidia.com/gpu": draw(st.sampled_from([2, 4, 8])), "cpu": 32, "memory": "256Gi"}}
             for i in range(draw(st.integers(1, 2)))]
    max_gpu = max(p["resources"]["nvidia.com/gpu"] for p in pools)
    n_queues = draw(st.integers(1, 3))
    queues = []
    for q in range(n_queues):
        queue = {"name": f"q{q}", "weight": draw(st.integers(1, 4))}
        if draw(st.booleans()) and n_queues > 1:
            queue["capability"] = {"nvidia.com/gpu": draw(st.integers(max_gpu, 3 * max_gpu))}
        queues.append(queue)
    classes = [{"name": "low", "value": 10}, {"name": "high", "value": 1000}]
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        replicas = draw(st.integers(1, 3))
        job = {
            "name": f"j{j}",
            "queue": f"q{draw(st.integers(0, n_queues - 1))}",
            "priorityClassName": draw(st.sampled_from(["low", "high"])),
            "submit": draw(st.integers(0, 3600)),
            "duration": draw(st.integers(60, 4 * 3600)),
            "gracePeriod": draw(st.sampled_from([0, 30, 120])),
            "preemptible": draw(st.booleans()),
            "tasks": [{"name": "worker", "replicas": replicas,
                       "minAvailable": draw(st.integers(1, replicas)),
                       "resources": {"nvidia.com/gpu": draw(st.integers(1, max_gpu)), "cpu": draw(st.integers(1, 16))}}],
        }
        if draw(st.booleans()):
            job["checkpointInterval"] = draw(st.sampled_from([300, 1800]))
            job["restartCost"] = draw(st.sampled_from([0, 60]))
        jobs.append(job)
    # a horizon: pods of equal priority can evict each other for ever (preempt ping-pong), and a run
    # without one only ends at core.MAX_EVENTS
    cluster = {"pools": pools, "events": draw(node_events(pools, 6 * 3600))}
    return spec.validate({"name": "random", "horizon": "48h", "cluster": cluster, "queues": queues,
                          "priorityClasses": classes, "jobs": jobs, "scheduler": _conf(draw(st.sampled_from(POLICIES)))})


def assert_same(scenario: spec.Scenario, policy: str | None = None) -> tuple[Result, Result]:
    """The numba core and the reference engine give identical jobs, tasks and events tables."""
    fast = labkit.simulate(scenario, policy, engine="numba")
    slow = labkit.simulate(scenario, policy, engine="reference")
    assert (fast.info["engine"], slow.info["engine"]) == ("numba", "reference")
    pd.testing.assert_frame_equal(fast.jobs, slow.jobs)
    pd.testing.assert_frame_equal(fast.tasks, slow.tasks)
    pd.testing.assert_frame_equal(fast.events, slow.events)
    assert fast.info["sessions"] == slow.info["sessions"]
    return fast, slow


# ------------------------------------------------------------------------------------------- invariants


def _capacity(result: Result) -> dict[str, dict[str, float]]:
    return {name: {r: parse_quantity(v) for r, v in pool.resources.items()}
            for pool in result.scenario.cluster.pools for name in pool.node_names()}


def instants(result: Result) -> np.ndarray:
    tasks = result.tasks
    return np.unique(np.concatenate([tasks.start, tasks.end.dropna(), tasks.evicted.dropna()]))


def over_committed_nodes(result: Result) -> list[tuple]:
    """(node, time, resource) wherever pods holding resources exceed the node's allocatable."""
    bad = []
    capacity = _capacity(result)
    tasks = result.tasks.assign(end=result.tasks.end.fillna(np.inf))
    for node, runs in tasks.groupby("node"):
        for t in runs.start.unique():
            held = runs[(runs.start <= t) & (runs.end > t)]
            for resource, cap in capacity[node].items():
                if resource in held and held[resource].sum() > cap + 1e-6:
                    bad.append((node, t, resource))
    return bad


def _running(tasks, t: float):
    stop = tasks.evicted.fillna(tasks.end).fillna(np.inf)
    return tasks[(tasks.start <= t) & (stop > t)]


def broken_gangs(result: Result) -> list[tuple]:
    """(job, time, pods) wherever a job runs some pods but fewer than its minAvailable, counting its
    pods that have succeeded by then as Volcano's gang does (`JobInfo.ReadyTaskNum` counts Succeeded):
    a recreated surplus pod may run on alone after the job's other pods completed. Each job is
    checked at its own pods' starts, stops and ends (its counts change nowhere else), by sorted
    arrays: a run with thousands of restarts is checked in milliseconds, not the minutes a scan of
    every instant took."""
    minimum = {f"{j.namespace}/{j.name}": j.min_available_resolved for j in result.scenario.jobs}
    bad = []
    # a job's counts change only at its own pods' starts, stops and ends, so those instants suffice
    for job, pods in result.tasks.groupby("job", sort=False):
        start = np.sort(pods.start.to_numpy(float))
        stop = np.sort(pods.evicted.fillna(pods.end).fillna(np.inf).to_numpy(float))
        done = np.sort(pods.end[pods.evicted.isna()].dropna().to_numpy(float))
        times = np.unique(np.concatenate([start, stop[np.isfinite(stop)], done]))
        running = np.searchsorted(start, times, "right") - np.searchsorted(stop, times, "right")
        succeeded = np.searchsorted(done, times, "right")
        for t, count in zip(times[(running > 0) & (running + succeeded < minimum[job])],
                            running[(running > 0) & (running + succeeded < minimum[job])]):
            bad.append((job, float(t), int(count)))
    return sorted(bad, key=lambda b: (b[1], b[0]))


def node_down_spans(scenario: spec.Scenario) -> dict[str, list[tuple[float, float]]]:
    """Per node, the spans [from, to) in which the node events keep it from taking pods: down
    (fail to recover) or cordoned (cordon or drain to uncordon)."""
    pools = {pool.name: pool.node_names() for pool in scenario.cluster.pools}
    since: dict[tuple[str, str], float] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    steps = sorted((at, i, k, kind, event.node) for i, (_, event) in enumerate(timeline.node_events(scenario))
                   for k, (at, kind) in enumerate(event.steps()))
    for at, _, _, kind, name in steps:
        for node in pools.get(name, [name]):
            flag = "down" if kind in ("fail", "recover") else "cordon"
            if kind in ("fail", "cordon", "drain"):
                since.setdefault((node, flag), at)
            else:
                spans.setdefault(node, []).append((since.pop((node, flag)), at))
    for (node, _), at in since.items():
        spans.setdefault(node, []).append((at, np.inf))
    return spans


def pods_on_unavailable_nodes(result: Result) -> list[tuple]:
    """(pod, node, start) of every pod bound to a node while it is down or cordoned, and of every pod
    still holding a node after that node failed or was drained (it must be evicted then; under Slurm
    only a failure ends them: a DRAIN node keeps its running jobs, and a suspended job resumes on
    its nodes, drained or not)."""
    spans = node_down_spans(result.scenario)
    bad = []
    lost_at = {}
    pools = {pool.name: pool.node_names() for pool in result.scenario.cluster.pools}
    slurm = spec.scheduler_of(result.scenario).slurm is not None
    ending = ("fail",) if slurm else ("fail", "drain")
    for _, event in timeline.node_events(result.scenario):
        for at, kind in event.steps():
            if kind in ending:
                for node in pools.get(event.node, [event.node]):
                    lost_at.setdefault(node, []).append(at)
    tasks = result.tasks
    stop = tasks.evicted.fillna(tasks.end).fillna(np.inf).to_numpy(float)
    pods = [f"{job}-{role}-{index}" for job, role, index in zip(tasks.job, tasks.role, tasks["index"])]
    # (pod, node, end) of the runs that ended without an eviction: suspended, if the pod ran again
    paused = {(pod, node, end) for pod, node, end, kept in zip(pods, tasks.node, stop, tasks.evicted.isna()) if kept}
    for pod, node, start, end in zip(pods, tasks.node, tasks.start.to_numpy(float), stop):
        resumed = slurm and any(p == pod and n == node and e <= start for p, n, e in paused)
        # a pod bound at the instant of a failure was bound after it (node events come before that
        # instant's session), so only a pod already running when the node failed must have left it
        if (any(lo <= start < hi for lo, hi in spans.get(node, [])) and not resumed) or any(
                start < at < end for at in lost_at.get(node, [])):
            bad.append((pod, node, start))
    return bad


def queues_over_capability(result: Result) -> list[tuple]:
    """(queue, time, resource) wherever a queue's running pods exceed its capability."""
    caps = {q.name: {r: parse_quantity(v) for r, v in q.capability.items()} for q in result.scenario.queues}
    queue_of = {f"{j.namespace}/{j.name}": j.queue for j in result.scenario.jobs}
    bad = []
    for t in instants(result):
        running = _running(result.tasks, t)
        for queue, pods in running.groupby(running.job.map(queue_of)):
            for resource, cap in caps.get(queue, {}).items():
                if pods[resource].sum() > cap + 1e-6:
                    bad.append((queue, t, resource))
    return bad


def unconserved_work(result: Result) -> list[tuple]:
    """(job, pod-seconds run, productive, setup) for completed gangs whose pod time is not
    pods x (work + lost work), plus at most the restart costs paid."""
    bad = []
    restarts = result.events[result.events.kind == "Restarting"].groupby("job").size()
    for job in result.scenario.jobs:
        name = f"{job.namespace}/{job.name}"
        row = result.jobs[(result.jobs.name == job.name) & (result.jobs.namespace == job.namespace)].iloc[0]
        pods = sum(t.replicas_resolved for t in job.tasks)
        if row.state != "Completed" or job.min_available_resolved != pods:
            continue
        runs = result.tasks[result.tasks.job == name]
        ran = float((runs.evicted.fillna(runs.end) - runs.start).sum())
        n_restarts = int(restarts.get(name, 0))
        productive = pods * (parse_duration(job.duration) + row.lost_work)
        setup = pods * n_restarts * parse_duration(job.restart_cost)
        if not productive - 1e-6 <= ran <= productive + setup + 1e-6:
            bad.append((name, ran, productive, setup))
    return bad


# ------------------------------------------------------------------------------------------- engine parity


def _volcano_conf(actions: str, tier1: list[dict], tier2: list[dict]) -> dict:
    return {"actions": actions, "tiers": [{"plugins": tier1}, {"plugins": tier2}]}


_TIER1 = [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]
ENGINE_CONFS = {
    "capacity": _volcano_conf("enqueue, allocate, backfill, reclaim, preempt", _TIER1, [
        {"name": "drf"}, {"name": "predicates"}, {"name": "capacity"}, {"name": "nodeorder"}]),
    "sla": _volcano_conf("enqueue, allocate, backfill, preempt, reclaim", _TIER1 + [
        {"name": "sla", "arguments": {"sla-waiting-time": "20m"}}], [
        {"name": "overcommit", "arguments": {"overcommit-factor": 1.5}}, {"name": "drf"}, {"name": "predicates"},
        {"name": "proportion"}, {"name": "nodeorder"}]),
    "binpack-gpu": _volcano_conf("enqueue, allocate, preempt, backfill", [
        {"name": "priority"}, {"name": "gang", "enableJobStarving": False}, {"name": "conformance"}], [
        {"name": "drf", "enableJobOrder": False}, {"name": "predicates"}, {"name": "proportion"},
        {"name": "nodeorder", "arguments": {"leastrequested.weight": 0, "mostrequested.weight": 2,
                                            "balancedresource.weight": 3}},
        {"name": "binpack", "arguments": {"binpack.weight": 5, "binpack.cpu": 1, "binpack.memory": 0,
                                          "binpack.resources": "nvidia.com/gpu",
                                          "binpack.resources.nvidia.com/gpu": 4}}]),
    "balanced-1.36": _volcano_conf("enqueue, allocate, backfill, reclaim, preempt", _TIER1, [
        {"name": "overcommit"}, {"name": "drf"}, {"name": "predicates"}, {"name": "proportion"},
        {"name": "nodeorder", "arguments": {"balancedresource.kubernetes": "1.36", "leastrequested.weight": 0}},
        {"name": "binpack", "arguments": {"binpack.resources": "nvidia.com/gpu"}}]),
    "no-enqueue": _volcano_conf("allocate, backfill, reclaim", _TIER1, [
        {"name": "drf"}, {"name": "predicates"}, {"name": "proportion", "enabledOverused": False},
        {"name": "nodeorder"}]),
    "no-queue-gate": _volcano_conf("enqueue, allocate, backfill", _TIER1, [
        {"name": "overcommit"}, {"name": "drf"}, {"name": "predicates"}, {"name": "nodeorder"}]),
    "one-tier": {"actions": "enqueue, reclaim, allocate, preempt", "tiers": [{"plugins": [
        {"name": "gang", "enablePreemptable": False}, {"name": "priority"}, {"name": "drf"},
        {"name": "conformance"}, {"name": "proportion"}, {"name": "predicates"}, {"name": "binpack"}]}]},
}
"""Scheduler confs beyond the presets, for the engines to agree on: capacity, sla, binpack and
nodeorder weights, Kubernetes 1.36's BalancedAllocation, switches turned off, other action orders, one tier, no queue gate (no
proportion or capacity, no preempt or reclaim: allocate's discarded attempts are remembered)."""


def _scheduler(draw) -> dict:
    """A Volcano scheduler section: a policy of `POLICIES`, helios-fifo or a conf of `ENGINE_CONFS`,
    now and then with a queueingStrategy."""
    name = draw(st.sampled_from(POLICIES + ["helios-fifo"] + list(ENGINE_CONFS)))
    scheduler = {"policy": name, "conf": ENGINE_CONFS[name]} if name in ENGINE_CONFS else _conf(name)
    if draw(st.integers(0, 3)) == 0:
        scheduler["queueingStrategy"] = draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"]))
    return scheduler


def _actions(scheduler: dict) -> list[str]:
    conf = spec.model.SchedulerConf.model_validate(scheduler["conf"]) if "conf" in scheduler else spec.policy(
        scheduler["policy"])
    return conf.action_list()


@st.composite
def changes_in_time(draw, queues: list[str], classes: list[str], until: int) -> list[dict]:
    """None in two scenarios of three; else one to three `changes` at whole seconds up to `until`
    (often the instant of an arrival or a session): a Queue's weight, capability, deserved or
    guarantee (Volcano's own default queue too), a PriorityClass's value, or another scheduler conf
    (`_scheduler`)."""
    if draw(st.integers(0, 2)) < 2:
        return []
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, until))
        what = draw(st.sampled_from(["queue", "priorityClass", "scheduler"]))
        if what == "queue":
            queue = {"name": draw(st.sampled_from([*queues, "default"]))}
            for field in draw(st.lists(st.sampled_from(["weight", "capability", "deserved", "guarantee"]),
                                       min_size=1, max_size=2, unique=True)):
                queue[field] = (draw(st.integers(1, 4)) if field == "weight"
                                else {"nvidia.com/gpu": draw(st.integers(1, 4 if field == "guarantee" else 16))})
            changes.append({"at": at, "queue": queue})
        elif what == "priorityClass":
            changes.append({"at": at, "priorityClass": {"name": draw(st.sampled_from(classes)),
                                                        "value": draw(st.sampled_from([1, 10, 500, 1000, 2000]))}})
        else:
            changes.append({"at": at, "scheduler": _scheduler(draw)})
    return changes


@st.composite
def engine_scenarios(draw, max_jobs: int = 12) -> spec.Scenario:
    """Small scenarios covering what the two engines must agree on: everything `scenarios()`
    draws plus several task roles, a job minAvailable below the task minima (elastic gangs),
    node selectors and taints, node speeds and `work`, best-effort and system-critical pods,
    queue deserved/guarantee/priority/reclaimable, preemptionPolicy Never, job `status`
    snapshots, the confs of `ENGINE_CONFS` and helios-fifo, either queueingStrategy, and changes
    in time (`changes_in_time`). A 6 h horizon ends the runs where pods of equal
    priority preempt each other for ever (drf lets them)."""
    n_pools = draw(st.integers(1, 3))
    pools = []
    for i in range(n_pools):
        pool = {"name": f"p{i}", "count": draw(st.integers(1, 3)), "labels": {"pool": f"p{i}"},
                "resources": {"nvidia.com/gpu": draw(st.sampled_from([2, 4, 8])), "cpu": draw(st.sampled_from([16, 32])),
                              "memory": "256Gi", "pods": draw(st.sampled_from([4, 110]))},
                "speed": draw(st.sampled_from([1.0, 1.0, 0.5, 2.0]))}
        if i > 0 and draw(st.booleans()):
            pool["taints"] = [{"key": "dedicated", "value": f"p{i}", "effect": "NoSchedule"}]
        pools.append(pool)
    n_queues = draw(st.integers(1, 3))
    queues = []
    for q in range(n_queues):
        queue = {"name": f"q{q}", "weight": draw(st.integers(1, 4)), "priority": draw(st.sampled_from([0, 0, 1])),
                 "reclaimable": draw(st.sampled_from([True, True, False]))}
        capability = draw(st.integers(2, 16))
        if draw(st.booleans()):
            queue["capability"] = {"nvidia.com/gpu": capability}
        if draw(st.booleans()):
            queue["deserved"] = {"nvidia.com/gpu": draw(st.integers(1, capability)), "cpu": draw(st.integers(4, 48))}
        if draw(st.integers(0, 3)) == 0:
            queue["guarantee"] = {"nvidia.com/gpu": draw(st.integers(1, 2))}
        queues.append(queue)
    classes = [{"name": "low", "value": 10}, {"name": "high", "value": 1000},
               {"name": "never", "value": 500, "preemptionPolicy": "Never"}]
    jobs = []
    snapshot_use: dict[str, dict[str, int]] = {}
    for j in range(draw(st.integers(1, max_jobs))):
        pool = pools[draw(st.integers(0, n_pools - 1))]
        cap = pool["resources"]
        tasks = []
        for k in range(draw(st.sampled_from([1, 1, 1, 2]))):
            replicas = draw(st.integers(1, 3))
            resources = {}
            gpus = draw(st.integers(0, cap["nvidia.com/gpu"]))
            if gpus:
                resources["nvidia.com/gpu"] = gpus
            if draw(st.integers(0, 5)) > 0:
                resources["cpu"] = draw(st.integers(1, cap["cpu"]))
            task = {"name": ("worker", "ps")[k], "replicas": replicas,
                    "minAvailable": draw(st.integers(0 if k else 1, replicas)), "resources": resources}
            if draw(st.booleans()):
                task["nodeSelector"] = {"pool": pool["name"]}
            if pool.get("taints"):
                task["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
            tasks.append(task)
        job = {
            "name": f"j{j}",
            "namespace": draw(st.sampled_from(["default", "default", "default", "kube-system"])),
            "queue": f"q{draw(st.integers(0, n_queues - 1))}",
            "priorityClassName": draw(st.sampled_from(["low", "high", "never"])),
            "submit": draw(st.integers(0, 3600)),
            draw(st.sampled_from(["duration", "work"])): draw(st.integers(60, 4 * 3600)),
            "gracePeriod": draw(st.sampled_from([0, 30, 120])),
            "preemptible": draw(st.booleans()),
            "tasks": tasks,
        }
        minimum = sum(t["minAvailable"] for t in tasks)
        if minimum > 1 and draw(st.booleans()):
            job["minAvailable"] = draw(st.integers(1, minimum - 1))
        if draw(st.booleans()):
            job["checkpointInterval"] = draw(st.sampled_from([300, 1800]))
            job["restartCost"] = draw(st.sampled_from([0, 60]))
        if draw(st.integers(0, 7)) == 0:
            node = f"{pool['name']}-{draw(st.integers(0, pool['count'] - 1))}"
            worker = tasks[0]["resources"]
            held = snapshot_use.setdefault(node, {})
            fits = all(held.get(r, 0) + amount <= cap[r] for r, amount in worker.items())
            running = {"worker": [node]} if fits and draw(st.booleans()) else {}
            if running:  # a snapshot is a state the cluster could be in: its pods fit their nodes
                for r, amount in worker.items():
                    held[r] = held.get(r, 0) + amount
            job["status"] = {"phase": "Running" if running else "Inqueue", "running": running}
        if draw(st.integers(0, 5)) == 0:  # honoured only under the network-topology-aware plugin
            job["networkTopology"] = {"mode": draw(st.sampled_from(["hard", "soft"])),
                                      "highestTierAllowed": draw(st.integers(0, 2))}
        jobs.append(job)
    cluster: dict = {"pools": pools}
    if draw(st.booleans()):
        cluster["topology"] = {"tiers": [{"name": "rack", "size": draw(st.integers(1, 3))},
                                         {"name": "spine", "size": 2}]}
    scheduler = _scheduler(draw)
    changes = draw(changes_in_time([q["name"] for q in queues], [c["name"] for c in classes], 4 * 3600))
    confs = [scheduler] + [change["scheduler"] for change in changes if "scheduler" in change]
    if any("preempt" in _actions(conf) for conf in confs):
        for job in jobs:  # a job with networkTopology never preempts: the core leaves that to the reference
            job.pop("networkTopology", None)
    scheduler["schedulePeriod"] = draw(st.sampled_from([1, 1, 5]))
    cluster["events"] = draw(node_events(pools, 4 * 3600))
    return spec.validate({"name": "parity", "horizon": "6h", "cluster": cluster, "queues": queues,
                          "tenants": [{"name": "default"}, {"name": "kube-system"}],
                          "priorityClasses": classes, "jobs": jobs, "scheduler": scheduler, "changes": changes})


# ------------------------------------------------------------------------------------------- network topology

TOPOLOGY_CONF = _volcano_conf("enqueue, allocate, backfill", [{"name": "priority"}, {"name": "gang"}], [
    {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}, {"name": "network-topology-aware"}])


@st.composite
def topology_scenarios(draw, max_jobs: int = 6, vary_conf: bool = False) -> spec.Scenario:
    """2-8 nodes of 2-8 GPUs in racks and spines (cluster.topology), gangs of 1-4 pods, some with
    networkTopology hard or soft up to tier 0-3, under a conf with network-topology-aware. With
    ``vary_conf`` also: a second queue and reclaim, the plugin's arguments (weight, HyperNode
    binpacking weights, normal-pod switch and fading), its extension points switched off, binpack,
    preempt with two PriorityClasses (a job with networkTopology never preempts)."""
    gpus = draw(st.sampled_from([2, 4, 8]))
    pools = [{"name": "p", "count": draw(st.integers(2, 8)),
              "resources": {"nvidia.com/gpu": gpus, "cpu": 32, "memory": "256Gi"}}]
    topology = {"tiers": [{"name": "rack", "size": draw(st.integers(1, 3))}, {"name": "spine", "size": 2}]}
    queues = [{"name": "default"}] + ([{"name": "b", "weight": draw(st.integers(1, 3))}]
                                      if vary_conf and draw(st.booleans()) else [])
    preempt = vary_conf and draw(st.booleans())
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        replicas = draw(st.integers(1, 4))
        job = {"name": f"j{j}", "submit": draw(st.integers(0, 1800)), "duration": draw(st.integers(60, 3 * 3600)),
               "tasks": [{"name": "worker", "replicas": replicas, "minAvailable": draw(st.integers(1, replicas)),
                          "resources": {"nvidia.com/gpu": draw(st.integers(1, gpus)),
                                        "cpu": draw(st.sampled_from([4, 4, 12])) if vary_conf else 4}}]}
        if len(queues) > 1:
            job["queue"] = draw(st.sampled_from([q["name"] for q in queues]))
        if preempt:
            job["priorityClassName"] = draw(st.sampled_from(["low", "high"]))
        if draw(st.integers(0, 3)) > 0:
            job["networkTopology"] = {"mode": draw(st.sampled_from(["hard", "soft"])),
                                      "highestTierAllowed": draw(st.integers(1, 3))}
        jobs.append(job)
    conf = TOPOLOGY_CONF
    if vary_conf:
        plugin: dict = {"name": "network-topology-aware", "arguments": {
            "weight": draw(st.sampled_from([0, 1, 3])),
            "hypernode.binpack.normal-pod.enable": draw(st.booleans()),
            "hypernode.binpack.normal-pod.fading": draw(st.sampled_from([0.5, 0.8])),
            "hypernode.binpack.cpu": draw(st.sampled_from([0, 1, 2])),
            "hypernode.binpack.resources": "nvidia.com/gpu",
            "hypernode.binpack.resources.nvidia.com/gpu": draw(st.sampled_from([1, 5]))}}
        for key in ("enabledHyperNodeOrder", "enableNodeOrder", "enabledHyperNodeGradient"):
            if draw(st.integers(0, 4)) == 0:
                plugin[key] = False
        tier2 = [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}, plugin]
        if draw(st.booleans()):
            tier2.insert(3, {"name": "binpack"})
        actions = ("enqueue, allocate, backfill" + (", reclaim" if len(queues) > 1 else "")
                   + (", preempt" if preempt else ""))
        conf = _volcano_conf(actions, [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}], tier2)
    classes = [{"name": "low", "value": 10}, {"name": "high", "value": 1000}] if preempt else []
    return spec.validate({"name": "topology", "horizon": "12h", "cluster": {"pools": pools, "topology": topology},
                          "queues": queues, "priorityClasses": classes, "jobs": jobs,
                          "scheduler": {"policy": "topology", "conf": conf}})


def hypernode_of(scenario: spec.Scenario) -> dict[str, list[str]]:
    """node -> the name of its HyperNode at tier 1, 2, ... (from cluster.topology)."""
    nodes = [n for pool in scenario.cluster.pools for n in pool.node_names()]
    holds = {n: [n] for n in nodes}
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for tier in scenario.cluster.topology.hypernodes(nodes):
        grouped = {}
        for name, members in tier:
            grouped[name] = [n for m in members for n in holds[m]]
            for n in grouped[name]:
                out[n].append(name)
        holds = grouped
    return out


def topology_violations(result: Result) -> list[tuple]:
    """(job, time, nodes) wherever the running pods of a job with hard networkTopology do not lie
    inside one HyperNode of tier <= highestTierAllowed (the cluster-top HyperNode, one tier above the
    highest, holds every node)."""
    scenario = result.scenario
    tiers = hypernode_of(scenario)
    hard = {f"{j.namespace}/{j.name}": j.network_topology.highest_tier_allowed for j in scenario.jobs
            if j.network_topology is not None and j.network_topology.mode == "hard"}
    bad = []
    for job, pods in result.tasks[result.tasks.job.isin(list(hard))].groupby("job"):
        for t in np.unique(pods.start.to_numpy(float)):
            nodes = sorted(set(_running(pods, t).node))
            top = len(tiers[nodes[0]])
            shared = [k for k in range(top) if len({tiers[n][k] for n in nodes}) == 1] + [top]
            if shared[0] + 1 > hard[job]:
                bad.append((job, float(t), nodes))
    return bad


# ------------------------------------------------------------------------------------------- kube-scheduler, Slurm

KUBE_POLICIES = ["kube-default", "kube-coscheduling", "kube-mostallocated"]
"""kube-mostallocated: the default profile with NodeResourcesFit MostAllocated over cpu and GPUs."""


def _kube(policy: str) -> dict:
    if policy != "kube-mostallocated":
        return {"policy": policy}
    fit = {"scoringStrategy": {"type": "MostAllocated",
                               "resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 3}]}}
    return {"policy": policy, "kube": {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": fit}]}]}}


@st.composite
def kube_scenarios(draw, max_jobs: int = 8) -> spec.Scenario:
    """2-6 GPU nodes (one pool maybe tainted), a tenant with a ResourceQuota and a LimitRange, jobs of
    1-3 pods with priorities (one class preemptionPolicy Never), under the kube-scheduler policies."""
    pools = [{"name": f"p{i}", "count": draw(st.integers(1, 3)),
              "resources": {"nvidia.com/gpu": draw(st.sampled_from([4, 8])), "cpu": 32, "memory": "256Gi"}}
             for i in range(draw(st.integers(1, 2)))]
    if len(pools) > 1 and draw(st.booleans()):
        pools[1]["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    max_gpu = min(p["resources"]["nvidia.com/gpu"] for p in pools)  # every pod fits every pool
    quota = {"requests.nvidia.com/gpu": draw(st.integers(max_gpu, 3 * max_gpu)), "requests.cpu": 64}
    tenants = [{"name": "team-a", "resourceQuota": {"hard": quota},
                "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "2"}}]}}]
    classes = [{"name": "low", "value": 10}, {"name": "high", "value": 1000},
               {"name": "never", "value": 1000, "preemptionPolicy": "Never"}]
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        replicas = draw(st.integers(1, 3))
        resources = {"nvidia.com/gpu": draw(st.integers(1, max_gpu))}
        if draw(st.booleans()):
            resources["cpu"] = draw(st.integers(1, 8))
        task = {"name": "worker", "replicas": replicas, "minAvailable": draw(st.integers(1, replicas)),
                "resources": resources}
        if draw(st.booleans()):
            task["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        jobs.append({"name": f"j{j}", "namespace": draw(st.sampled_from(["default", "team-a"])),
                     "priorityClassName": draw(st.sampled_from(["low", "high", "never"])),
                     "submit": draw(st.integers(0, 1800)), "duration": draw(st.integers(60, 3600)),
                     "gracePeriod": draw(st.sampled_from([0, 30])), "tasks": [task]})
    # a horizon: per-pod preemption for a PodGroup that can never fit evicts and re-evicts forever, as
    # it would on a real cluster
    cluster = {"pools": pools, "events": draw(node_events(pools, 4 * 3600))}
    if not cluster["events"] and draw(st.integers(0, 3)) == 0:  # a spot pool's drawn interruptions instead
        pools[0]["spot"] = {"rate": draw(st.sampled_from([0.5, 2.0])), "per": draw(st.sampled_from(["node", "pool"])),
                            "replaceAfter": draw(st.sampled_from(["10m", None])), "until": "4h"}
    return spec.validate({"name": "kube", "horizon": "12h", "cluster": cluster, "tenants": tenants,
                          "priorityClasses": classes, "jobs": jobs, "scheduler": _kube(draw(st.sampled_from(KUBE_POLICIES)))})


@st.composite
def slurm_scenarios(draw, max_jobs: int = 8) -> spec.Scenario:
    """2-6 nodes in one or two partitions (tiers), a QOS with GrpTRES and MaxTRESPerUser, jobs of 1-3
    nodes with time limits (some shorter than their run), checkpoints and --requeue or --no-requeue,
    under backfill or builtin, with or without preemption (REQUEUE, CANCEL, SUSPEND), accounting
    and node events (DOWN, DRAIN, spot interruptions)."""
    count = draw(st.integers(2, 6))
    gpus = draw(st.sampled_from([4, 8]))
    pools = [{"name": "n", "count": count, "resources": {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}}]
    partitions = [{"name": "low", "default": True}]
    if draw(st.booleans()):
        partitions.append({"name": "high", "priorityTier": 10, "preemptMode": "OFF"})
    qos = [{"name": "capped", "grpTRES": {"gres/gpu": draw(st.integers(gpus, 3 * gpus))},
            "maxTRESPerUser": {"node": draw(st.integers(1, 3))}}]
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        duration = draw(st.integers(30, 1200))
        job = {"name": f"j{j}", "submit": draw(st.integers(0, 600)), "duration": duration,
               "partition": draw(st.sampled_from([p["name"] for p in partitions])),
               "user": draw(st.sampled_from(["u1", "u2"])),
               "tasks": [{"name": "node", "replicas": draw(st.integers(1, min(3, count))),
                          "resources": {"nvidia.com/gpu": draw(st.integers(1, gpus)), "cpu": draw(st.integers(0, 8))}}]}
        if draw(st.booleans()):
            job["qos"] = "capped"
        if draw(st.integers(0, 3)):
            job["timeLimit"] = draw(st.sampled_from([60, 300, 900, 1800]))
        if draw(st.booleans()):
            job["checkpointInterval"] = draw(st.sampled_from([60, 300]))
        if not draw(st.integers(0, 3)):
            job["requeue"] = draw(st.booleans())
        jobs.append(job)
    conf = {"SchedulerType": draw(st.sampled_from(["sched/backfill", "sched/builtin"])),
            "SchedulerParameters": f"bf_interval={draw(st.sampled_from([5, 30]))}",
            "PriorityWeightJobSize": 1000, "PriorityWeightPartition": 1000,
            "JobRequeue": draw(st.sampled_from([0, 1, 1]))}
    if draw(st.booleans()):
        conf |= {"AccountingStorageType": "accounting_storage/slurmdbd", "AccountingStorageEnforce": "limits,qos",
                 "PriorityWeightFairshare": 2000, "PriorityWeightAge": 500, "PriorityMaxAge": "1h"}
    mode = draw(st.sampled_from(["OFF", "REQUEUE", "CANCEL", "SUSPEND"]))
    if mode != "OFF" and len(partitions) > 1:
        conf |= {"PreemptType": "preempt/partition_prio", "PreemptMode": mode}
    cluster = {"pools": pools, "events": draw(node_events(pools, 2400))}
    return spec.validate({"name": "slurm", "horizon": "12h", "cluster": cluster,
                          "slurm": {"partitions": partitions, "qos": qos}, "jobs": jobs,
                          "scheduler": {"policy": "random", "slurm": conf}})


def qos_over_limits(result: Result) -> list[tuple]:
    """(qos, user or '', time, TRES) wherever running jobs exceed a QOS's GrpTRES or MaxTRESPerUser,
    when the policy enforces them (AccountingStorageEnforce=limits with slurmdbd)."""
    conf = spec.scheduler_of(result.scenario).slurm
    if conf is None or not conf.enforces_limits() or result.scenario.slurm is None:
        return []
    limits = {q.name: (q.grp_tres, q.max_tres_per_user) for q in result.scenario.slurm.qos}
    jobs = {f"{j.namespace}/{j.name}": (j.qos or "normal", j.user or j.namespace) for j in result.scenario.jobs}
    gpu = [c for c in result.tasks.columns if c.endswith("/gpu")]
    bad = []
    for t in instants(result):
        running = _running(result.tasks, t)
        use = pd.DataFrame({"qos": running.job.map(lambda k: jobs[k][0]), "user": running.job.map(lambda k: jobs[k][1]),
                            "cpu": running.cpu, "gres/gpu": running[gpu].sum(axis=1), "node": 1.0})
        for (qos, user), rows in use.groupby(["qos", "user"]):
            for name, cap in limits.get(qos, ({}, {}))[1].items():
                if rows[name].sum() > parse_quantity(cap) + 1e-6:
                    bad.append((qos, user, t, name))
        for qos, rows in use.groupby("qos"):
            for name, cap in limits.get(qos, ({}, {}))[0].items():
                if rows[name].sum() > parse_quantity(cap) + 1e-6:
                    bad.append((qos, "", t, name))
    return bad


def quota_exceeded(result: Result) -> list[tuple]:
    """(namespace, time, key) wherever a namespace's running pods hold more than its ResourceQuota
    (admission refuses the pods that would exceed it)."""
    bad = []
    for tenant in result.scenario.tenants:
        if tenant.resource_quota is None:
            continue
        runs = result.tasks[[job.startswith(f"{tenant.ns}/") for job in result.tasks.job]]
        for t in instants(result):
            live = _running(runs, t)
            for key, cap in tenant.resource_quota.hard.items():
                column = key.removeprefix("requests.")
                if column in live and live[column].sum() > parse_quantity(cap) + 1e-6:
                    bad.append((tenant.ns, t, key))
    return bad


def _progress_rate(scenario: spec.Scenario, job: spec.Job, nodes: list[str]) -> float:
    """The rate the progress model gives `job` with pods running on `nodes`, recomputed from the
    scenario (speeds, pools' GPU models and speeds, topology levels, the scaling curve)."""
    classes = {c.name: c for c in scenario.workload_classes}
    cls = classes.get(job.workload_class) if job.workload_class else None
    placement = {**(cls.placement if cls else {}), **job.placement}
    pool_of = {name: pool for pool in scenario.cluster.pools for name in pool.node_names()}
    speed = min((cls.speeds.get(pool_of[n].gpu_model, 1.0) if cls and pool_of[n].gpu_model else 1.0)
                * (pool_of[n].speed if job.work is not None else 1.0) for n in nodes)
    levels = placement_levels(scenario)
    level = 0
    if len(set(nodes)) > 1:
        level = len(levels) - 1
        groups = {n: [n] for n in pool_of}
        topology = scenario.cluster.topology
        for k, tier in enumerate(topology.hypernodes(list(pool_of)) if topology else []):
            member = {m: name for name, members in tier for m in members}
            groups = {n: [*chain, member[chain[-1]]] for n, chain in groups.items()}
            if len({groups[n][-1] for n in nodes}) == 1:
                level = k + 1
                break
    factor = 1.0
    for name in levels[:level + 1]:
        factor = placement.get(name, factor)
    total = sum(t.replicas_resolved for t in job.tasks)
    scale = cls.scaling.throughput(len(nodes)) / cls.scaling.throughput(total) if cls and cls.scaling else 1.0
    return speed * factor * scale


def unconserved_progress(result: Result) -> list[tuple]:
    """(job, integral, work + lost work) for completed jobs of the progress model whose rate,
    recomputed here from the pods running at each instant, integrated over the time their work
    ran (each Started, after the setup of a job that restarted before, to the restart, Slurm
    suspension or completion that ended it) is not the work they got done plus the work they lost."""
    scenario = result.scenario
    bad = []
    events = result.events[result.events.kind.isin(["Started", "Restarting", "Suspended", "Completed"])]
    for job in scenario.jobs:
        if job.workload_class is None and not job.placement:
            continue
        name = f"{job.namespace}/{job.name}"
        row = result.jobs[(result.jobs.name == job.name) & (result.jobs.namespace == job.namespace)].iloc[0]
        if row.state != "Completed":
            continue
        runs = result.tasks[result.tasks.job == name]
        starts, stops = runs.start.to_numpy(float), runs.evicted.fillna(runs.end).to_numpy(float)
        integral, since, restarted = 0.0, math.nan, False
        for time, kind in zip(*(events[events.job == name][c] for c in ("time", "kind"))):
            if kind == "Started":
                since = time + (parse_duration(job.restart_cost) if restarted else 0.0)
                continue
            restarted = restarted or kind == "Restarting"
            if not time > since:
                since = math.nan
                continue  # not running, or ended within the restart's setup: no work ran
            cuts = sorted({since, time, *(x for x in np.concatenate([starts, stops]) if since < x < time)})
            for a, b in itertools.pairwise(cuts):
                at = (a + b) / 2
                on = runs.node[(starts <= at) & (stops > at)].tolist()
                integral += (b - a) * _progress_rate(scenario, job, on)
            since = math.nan
        work = parse_duration(job.work if job.work is not None else job.duration)
        if not math.isclose(integral, work + row.lost_work, rel_tol=1e-6, abs_tol=1e-6):
            bad.append((name, integral, work + row.lost_work))
    return bad
