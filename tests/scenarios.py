"""Random small scenarios for property tests (hypothesis strategies) and the invariants every run keeps."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from labkit import spec
from labkit.results import Result
from labkit.spec.quantity import parse_duration, parse_quantity

POLICIES = ["volcano-shipped", "volcano-multitenant", "no-overcommit"]


def _conf(policy: str) -> dict:
    if policy != "no-overcommit":
        return {"policy": policy}
    conf = spec.policy("volcano-multitenant").model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "overcommit"]
    return {"policy": policy, "conf": conf}


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
    return spec.validate({"name": "random", "cluster": {"pools": pools}, "queues": queues,
                          "priorityClasses": classes, "jobs": jobs, "scheduler": _conf(draw(st.sampled_from(POLICIES)))})


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
    """(job, time, pods) wherever a job runs some pods but fewer than its minAvailable."""
    minimum = {f"{j.namespace}/{j.name}": j.min_available_resolved for j in result.scenario.jobs}
    bad = []
    for t in instants(result):
        for job, count in _running(result.tasks, t).groupby("job").size().items():
            if count < minimum[job]:
                bad.append((job, t, count))
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
