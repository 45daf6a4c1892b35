"""Synthetic workloads: turn a Scenario's `workloads` generators into concrete jobs, reproducibly.

Each generator draws from its own random stream, seeded by `workload.seed` or by (scenario seed,
generator index), so adding a generator never changes the jobs of another one. Arrival times,
GPU counts and durations are drawn in that order, one job at a time. A trace workload draws
nothing: its columns are the jobs.

`draw` makes a generator's jobs as columns (submit, GPUs, duration) in one jitted loop over
numpy's own `Generator` (numba implements its methods with numpy's algorithms on the same bit
stream), so the columns are the very numbers per-job draws in Python give; the compiler reads
them straight into arrays (`labkit.workloads.table`). `expand` makes the concrete jobs, for what
needs them (`labkit show --expand`, exports, the reference engine).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numba
import numpy as np

from ..errors import SpecError
from ..spec import Scenario, validate
from ..spec.model import Distribution, Workload
from ..spec.quantity import parse_duration

FIXED, UNIFORM, EXPONENTIAL, LOGNORMAL, NORMAL, CHOICE = range(6)
"""How `_sample` draws a Random field: a fixed number (constant too) or a distribution."""


@dataclass(frozen=True)
class Drawn:
    """One generator's jobs as columns: ``submit`` (seconds, rounded to ms as the jobs say),
    ``gpus`` (int64) and ``duration`` (seconds, >= 1)."""

    submit: np.ndarray
    gpus: np.ndarray
    duration: np.ndarray

    def __len__(self) -> int:
        return len(self.submit)


def _parameters(random: object) -> tuple:
    """A Random field as `_sample`'s arguments: (kind, a, b, min, max, choices, cdf); NaN = no bound.

    The choice cdf is computed as `Generator.choice(p=...)` computes it, so a draw picks the same entry."""
    none = np.zeros(0)
    if not isinstance(random, Distribution):
        return FIXED, parse_duration(random), 0.0, np.nan, np.nan, none, none
    d = random
    low = parse_duration(d.min) if d.min is not None else np.nan
    high = parse_duration(d.max) if d.max is not None else np.nan
    a, b, choices, cdf = 0.0, 0.0, none, none
    if d.distribution == "constant":
        value = parse_duration(d.value)
        value = value if np.isnan(low) else max(value, low)
        value = value if np.isnan(high) else min(value, high)
        return FIXED, max(0.0, value), 0.0, np.nan, np.nan, none, none
    if d.distribution == "uniform":
        kind, a, b = UNIFORM, parse_duration(d.low), parse_duration(d.high)
    elif d.distribution == "exponential":
        kind, a = EXPONENTIAL, parse_duration(d.mean)
    elif d.distribution == "lognormal":
        kind, a, b = LOGNORMAL, parse_duration(d.median), float(d.sigma)
    elif d.distribution == "normal":
        kind, a, b = NORMAL, parse_duration(d.mean), parse_duration(d.std)
    else:
        kind = CHOICE
        choices = np.array([parse_duration(c) for c in d.choices], float)
        weights = np.asarray(d.weights if d.weights is not None else [1.0] * len(choices), dtype=float)
        cdf = (weights / weights.sum()).cumsum()
        cdf /= cdf[-1]
    return kind, a, b, low, high, choices, cdf


@numba.njit(cache=True)
def _sample(rng, kind, a, b, low, high, choices, cdf):  # pragma: no cover - jitted
    if kind == FIXED:
        return a
    if kind == UNIFORM:
        value = rng.uniform(a, b)
    elif kind == EXPONENTIAL:
        value = rng.exponential(a)
    elif kind == LOGNORMAL:
        value = a * math.exp(b * rng.standard_normal())
    elif kind == NORMAL:
        value = rng.normal(a, b)
    else:
        value = choices[np.searchsorted(cdf, rng.random(), side="right")]
    if not np.isnan(low):
        value = max(value, low)
    if not np.isnan(high):
        value = min(value, high)
    return max(0.0, value)


@numba.njit(cache=True)
def _grown(x):  # pragma: no cover - jitted
    return np.concatenate((x, np.empty(max(len(x), 16))))


@numba.njit(cache=True)
def _draw(rng, poisson, interval, start, end, limit, capacity, gpus, duration):  # pragma: no cover - jitted
    """Arrival, GPU count and duration of each job in turn until `limit` jobs (-1: none) or `end`."""
    submit, count, run = np.empty(capacity), np.empty(capacity), np.empty(capacity)
    t, n = start, 0
    while limit < 0 or n < limit:
        if poisson:
            t += rng.exponential(interval)
        elif n:
            t += interval
        if t >= end:
            break
        if n == len(submit):
            submit, count, run = _grown(submit), _grown(count), _grown(run)
        submit[n] = t
        count[n] = _sample(rng, *gpus)
        run[n] = _sample(rng, *duration)
        n += 1
    return submit[:n], count[:n], run[:n]


def draw(load: Workload, seed: int | list[int]) -> Drawn:
    """The jobs of one generator as columns; the same numbers `generate`'s jobs carry (a trace's
    own numbers, as they are)."""
    if load.trace is not None:
        return Drawn(submit=np.array(load.trace.submit, float), gpus=np.array(load.trace.gpus, np.int64),
                     duration=np.array(load.trace.duration, float))
    rng = np.random.default_rng(load.seed if load.seed is not None else seed)
    interval = parse_duration(load.arrival.interval)
    start = parse_duration(load.start)
    end = parse_duration(load.end) if load.end is not None else math.inf
    limit = load.count if load.count is not None else -1
    capacity = limit if limit >= 0 else int(min((end - start) / interval, 1e7) * 1.2) + 16
    submit, gpus, duration = _draw(rng, load.arrival.process == "poisson", interval, start, end, limit,
                                   capacity, _parameters(load.gpus), _parameters(load.duration))
    return Drawn(submit=round_ms(submit), gpus=np.rint(gpus).astype(np.int64),
                 duration=np.maximum(1.0, np.rint(duration)))


def round_ms(seconds: np.ndarray) -> np.ndarray:
    """``round(x, 3)`` of every x, as Python rounds (the double nearest the decimal rounded to the
    ms): ``rint(x * 1000) / 1000`` is that unless x * 1000 lies near a half, where the product's
    own rounding could tip it; those few are rounded by Python."""
    scaled = seconds * 1000.0
    rounded = np.rint(scaled) / 1000.0
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3
    rounded[near] = [round(x, 3) for x in seconds[near].tolist()]
    return rounded


def job_names(load: Workload, n: int) -> list[str]:
    """`<generator>-<k>`, k zero-padded to the digits of the last job of `count` (a trace's: its names)."""
    if load.trace is not None:
        return list(load.trace.names)
    width = len(str(load.count - 1)) if load.count else 5
    return list(_numbered(load.name, width, n))


@functools.lru_cache(maxsize=64)
def _numbered(name: str, width: int, n: int) -> tuple[str, ...]:
    """``<name>-<k>`` for k < n, zero-padded to ``width``: kept, since every run of a scenario keys its
    job table by these names and formatting them took a thirtieth of a warm re-simulation of the week."""
    return tuple(f"{name}-{k:0{width}d}" for k in range(n))


def generate(load: Workload, seed: int | list[int]) -> list[dict]:
    """The jobs of one generator, as plain scenario data (YAML field names)."""
    drawn = draw(load, seed)
    jobs: list[dict] = []
    shapes = {int(g): load.pod_shape(int(g)) for g in np.unique(drawn.gpus)}
    for name, submit, gpus, duration in zip(job_names(load, len(drawn)), drawn.submit.tolist(),
                                            drawn.gpus.tolist(), drawn.duration.tolist()):
        replicas, pod = shapes[gpus]
        job: dict = {
            "name": name,
            "namespace": load.namespace,
            "queue": load.queue,
            "submit": submit,
            "tasks": [{"name": "worker", "replicas": replicas, "resources": quantities(pod)}],
            "duration": duration if load.trace is not None or duration <= 1 else int(duration),
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
        if load.workload_class is not None:
            job["workloadClass"] = load.workload_class
        jobs.append(job)
    return jobs


def quantities(pod: dict[str, float]) -> dict[str, str | int | float]:
    """A pod's requests in base units as a job writes them (`64Gi`, `500m`, whole numbers as int)."""
    out: dict[str, str | int | float] = {}
    for name, value in pod.items():
        if name == "memory" and value % 2**30 == 0:
            out[name] = f"{int(value // 2**30)}Gi"
        elif name == "cpu" and value != int(value):
            out[name] = f"{round(value * 1000)}m"
        else:
            out[name] = int(value) if value == int(value) else value
    return out


def check_names(scenario: Scenario, index: int, names: list[str]) -> None:
    """SpecError when a generated job has the namespace and name of a job in `jobs`."""
    load = scenario.workloads[index]
    taken = {j.name for j in scenario.jobs if j.namespace == load.namespace}
    clash = next((name for name in names if name in taken), None) if taken else None
    if clash is not None:
        raise SpecError(f"workloads[{index}].name", f"generated job {load.namespace}/{clash} is also in jobs")


def expand(scenario: Scenario) -> Scenario:
    """The same scenario with every generator replaced by the jobs it makes, sorted by submit time."""
    if not scenario.workloads:
        return scenario
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    jobs = list(data.get("jobs", []))
    for index, load in enumerate(scenario.workloads):
        made = generate(load, [scenario.seed, index])
        check_names(scenario, index, [job["name"] for job in made])
        jobs.extend(made)
    jobs.sort(key=lambda j: parse_duration(j.get("submit", 0)))
    data["jobs"] = jobs
    data.pop("workloads")
    return validate(data)


def multi_tenant(jobs: int, gpus: int, tenants: int = 4, load: float = 0.8,
                 sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
                 weights: tuple[float, ...] = (0.7, 0.1, 0.08, 0.08, 0.03, 0.01), gang: int = 16,
                 median: float = 1200.0, sigma: float = 1.0, cap: float = 100_000.0,
                 gangs_preemptible: bool = False) -> dict:
    """A multi-tenant training workload as a Scenario fragment (``tenants``, ``queues``,
    ``workloads``): `tenants` equal queues team-0, team-1, ..., each with about `jobs / tenants`
    jobs from two generators of one Poisson arrival process split by size: single-pod jobs (fewer
    than `gang` GPUs, preemptible) and multi-pod gangs (preemptible only with `gangs_preemptible`),
    GPU counts drawn from `sizes` by `weights`, lognormal run times (`median`, `sigma`, at most
    `cap` seconds), arriving at `load` of `gpus` GPUs. The defaults are Philly-like: most jobs one
    GPU, one in 25 a gang of 2-4 pods of 8 GPUs."""
    mean = median * round(math.exp(sigma ** 2 / 2), 4)  # a lognormal's mean, to the 4 places the recorded runs used
    gpu_seconds = sum(s * w for s, w in zip(sizes, weights)) * mean
    interval = gpu_seconds * tenants / (load * gpus)
    names = [f"team-{i}" for i in range(tenants)]
    single = [s < gang for s in sizes]
    share = sum(w for w, one in zip(weights, single) if one) / sum(weights)
    per_tenant = jobs // tenants
    parts = (("single", True, share, round(per_tenant * share)),
             ("gang", False, 1.0 - share, per_tenant - round(per_tenant * share)))
    loads = [{"name": f"{name}-{part}", "namespace": name, "queue": name, "count": count,
              "arrival": {"process": "poisson", "interval": round(interval / fraction, 3)},
              "gpus": {"distribution": "choice", "choices": [s for s, one in zip(sizes, single) if one == one_pod],
                       "weights": [w for w, one in zip(weights, single) if one == one_pod]},
              "duration": {"distribution": "lognormal", "median": median, "sigma": sigma, "max": cap},
              **({} if one_pod else {"preemptible": gangs_preemptible})}
             for name in names for part, one_pod, fraction, count in parts if count]
    return {"tenants": [{"name": n} for n in names], "queues": [{"name": n} for n in names], "workloads": loads}
