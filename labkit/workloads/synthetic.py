"""Synthetic workloads: turn a Scenario's `workloads` generators into concrete jobs, reproducibly.

Each generator draws from its own random stream, seeded by `workload.seed` or by (scenario seed,
generator index), so adding a generator never changes the jobs of another one. Arrival times,
GPU counts and durations are drawn in that order, one job at a time.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ..spec import Scenario, validate
from ..spec.model import Distribution, Workload
from ..spec.quantity import parse_duration


def sample(random: object, rng: np.random.Generator) -> float:
    """One draw of a Random field: a fixed number/duration or a Distribution."""
    if not isinstance(random, Distribution):
        return parse_duration(random)
    d = random
    kind = d.distribution
    if kind == "constant":
        value = parse_duration(d.value)
    elif kind == "uniform":
        value = rng.uniform(parse_duration(d.low), parse_duration(d.high))
    elif kind == "exponential":
        value = rng.exponential(parse_duration(d.mean))
    elif kind == "lognormal":
        value = parse_duration(d.median) * math.exp(d.sigma * rng.standard_normal())
    elif kind == "normal":
        value = rng.normal(parse_duration(d.mean), parse_duration(d.std))
    else:
        choices = [parse_duration(c) for c in d.choices]
        weights = np.asarray(d.weights if d.weights is not None else [1.0] * len(choices), dtype=float)
        value = choices[int(rng.choice(len(choices), p=weights / weights.sum()))]
    if d.min is not None:
        value = max(value, parse_duration(d.min))
    if d.max is not None:
        value = min(value, parse_duration(d.max))
    return max(0.0, float(value))


def generate(load: Workload, seed: int | list[int]) -> list[dict]:
    """The jobs of one generator, as plain scenario data (YAML field names)."""
    rng = np.random.default_rng(load.seed if load.seed is not None else seed)
    interval = parse_duration(load.arrival.interval)
    t = parse_duration(load.start)
    end = parse_duration(load.end) if load.end is not None else math.inf
    limit = load.count if load.count is not None else math.inf
    width = len(str(load.count - 1)) if load.count else 5
    jobs: list[dict] = []
    while len(jobs) < limit:
        t += rng.exponential(interval) if load.arrival.process == "poisson" else (interval if jobs else 0.0)
        if t >= end:
            break
        gpus = round(sample(load.gpus, rng))
        duration = max(1.0, round(sample(load.duration, rng)))
        replicas, pod = load.pod_shape(gpus)
        job: dict = {
            "name": f"{load.name}-{len(jobs):0{width}d}",
            "namespace": load.namespace,
            "queue": load.queue,
            "submit": round(t, 3),
            "tasks": [{"name": "worker", "replicas": replicas, "resources": _quantities(pod)}],
            "duration": duration,
            "restartCost": load.restart_cost,
            "gracePeriod": load.grace_period,
            "preemptible": load.preemptible,
        }
        if load.priority_class_name is not None:
            job["priorityClassName"] = load.priority_class_name
        if load.checkpoint_interval is not None:
            job["checkpointInterval"] = load.checkpoint_interval
        if load.network_topology is not None:
            job["networkTopology"] = load.network_topology.model_dump(by_alias=True, exclude_unset=True)
        jobs.append(job)
    return jobs


def _quantities(pod: dict[str, float]) -> dict[str, str | int | float]:
    out: dict[str, str | int | float] = {}
    for name, value in pod.items():
        if name == "memory" and value % 2**30 == 0:
            out[name] = f"{int(value // 2**30)}Gi"
        elif name == "cpu" and value != int(value):
            out[name] = f"{round(value * 1000)}m"
        else:
            out[name] = int(value) if value == int(value) else value
    return out


def expand(scenario: Scenario) -> Scenario:
    """The same scenario with every generator replaced by the jobs it makes, sorted by submit time."""
    if not scenario.workloads:
        return scenario
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    jobs = list(data.get("jobs", []))
    taken = {(j.namespace, j.name) for j in scenario.jobs}
    for index, load in enumerate(scenario.workloads):
        for job in generate(load, [scenario.seed, index]):
            if (job["namespace"], job["name"]) in taken:
                raise SpecError(f"workloads[{index}].name", f"generated job {job['namespace']}/{job['name']} is also in jobs")
            jobs.append(job)
    jobs.sort(key=lambda j: parse_duration(j.get("submit", 0)))
    data["jobs"] = jobs
    data.pop("workloads")
    return validate(data)

