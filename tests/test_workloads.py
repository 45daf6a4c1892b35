"""Workload generators as columns: the same jobs as per-job draws and as `expand`, the same
compiled arrays and the same run; bad generator input is one SpecError naming the field."""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pandas as pd
import pytest

import labkit
from labkit import spec
from labkit.engine import families
from labkit.engine.families import compile_scenario
from labkit.engine.problem import LazyNames
from labkit.errors import SpecError
from labkit.spec.model import Distribution, Job, Workload
from labkit.spec.quantity import parse_duration
from labkit.workloads import draw, expand, job_table, multi_tenant, table_key, traces
from labkit.workloads.table import _COLUMNS, UNTABLED

EVENT_KEY = ["time", "kind", "job", "task", "node", "reason", "message"]


def per_job(load: Workload, seed) -> list[tuple[float, int, float]]:
    """(submit, gpus, duration) drawn one job at a time with numpy's scalar calls, in the
    documented order: arrival, GPU count, duration."""

    def sample(random, rng):
        if not isinstance(random, Distribution):
            return parse_duration(random)
        d, kind = random, random.distribution
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
            weights = np.asarray(d.weights if d.weights is not None else [1.0] * len(d.choices), float)
            value = parse_duration(d.choices[int(rng.choice(len(d.choices), p=weights / weights.sum()))])
        if d.min is not None:
            value = max(value, parse_duration(d.min))
        if d.max is not None:
            value = min(value, parse_duration(d.max))
        return max(0.0, float(value))

    rng = np.random.default_rng(load.seed if load.seed is not None else seed)
    t, end = parse_duration(load.start), parse_duration(load.end) if load.end is not None else math.inf
    jobs: list[tuple[float, int, float]] = []
    while load.count is None or len(jobs) < load.count:
        t += rng.exponential(parse_duration(load.arrival.interval)) if load.arrival.process == "poisson" else (
            parse_duration(load.arrival.interval) if jobs else 0.0)
        if t >= end:
            break
        gpus = round(sample(load.gpus, rng))
        jobs.append((round(t, 3), gpus, float(max(1.0, round(sample(load.duration, rng))))))
    return jobs


GENERATORS = [
    {"arrival": {"interval": "2m"}, "count": 3000, "gpus": {"distribution": "choice", "choices": [1, 2, 4, 8, 16],
                                                          "weights": [5, 2, 1, 1, 1]},
     "duration": {"distribution": "lognormal", "median": "20m", "sigma": 1.5, "max": "6h"}},
    {"arrival": {"process": "fixed", "interval": 30}, "start": "1h", "end": "30h",
     "gpus": {"distribution": "uniform", "low": 0, "high": 12, "min": 1},
     "duration": {"distribution": "normal", "mean": 600, "std": 900, "min": 30}},
    {"arrival": {"interval": 45}, "end": "2d", "gpus": {"distribution": "exponential", "mean": 3, "max": 16},
     "duration": {"distribution": "exponential", "mean": "1h"}, "seed": 11},
    {"arrival": {"interval": 90}, "count": 50, "gpus": 4, "duration": {"distribution": "constant", "value": 0.2}},
    {"arrival": {"interval": 60}, "count": 40, "gpus": {"distribution": "choice", "choices": [2, 8]},
     "duration": {"distribution": "constant", "value": 100, "max": 50}},
]


@pytest.mark.parametrize("given", GENERATORS)
def test_columns_are_the_per_job_draws(given):
    load = Workload.model_validate({"name": "team", **given})
    drawn = draw(load, [3, 1])
    expected = per_job(load, [3, 1])
    assert len(drawn) == len(expected) > 0
    assert drawn.submit.tolist() == [s for s, _, _ in expected]
    assert drawn.gpus.tolist() == [g for _, g, _ in expected]
    assert drawn.duration.tolist() == [d for _, _, d in expected]


TRACE = {"names": ["rec-3", "rec-1", "rec-2", "rec-0"], "submit": [0, 600, 1800.5, 600],
         "gpus": [8, 0, 2, 16], "duration": [120.5, 60, 7200, 900]}
"""A recorded trace: ties with other jobs' submit times, a CPU-only job, a gang, fractional times."""


def scenario_with_generators(policy: str = "volcano-multitenant", **extra) -> spec.Scenario:
    pools = [{"name": "gpu", "count": 6, "resources": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}}]
    tenants = [{"name": "team-a", "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m"}}]}},
               {"name": "team-b"}]
    loads = [{**GENERATORS[0], "name": "a", "namespace": "team-a", "queue": "team-a", "count": 60,
              "perGpu": {"cpu": 4, "memory": "32Gi"}, "priorityClassName": "high"},
             {**GENERATORS[2], "name": "b", "namespace": "team-b", "queue": "team-b", "end": "2h",
              "checkpointInterval": "10m", "restartCost": 30, "preemptible": False},
             {"name": "rec", "namespace": "team-a", "queue": "team-a", "gpusPerPod": 4, "resources": {"cpu": 1},
              "trace": TRACE}]
    jobs = [{"name": "big", "namespace": "team-b", "queue": "team-b", "submit": 600, "duration": 3600,
             "tasks": [{"name": "ps", "replicas": 1, "resources": {"cpu": 2}},
                       {"name": "worker", "replicas": 3, "resources": {"nvidia.com/gpu": 8}}], "minAvailable": 3},
            {"name": "a-07", "namespace": "team-b", "queue": "team-b", "submit": 0, "work": 100,
             "tasks": [{"resources": {"nvidia.com/gpu": 1}}]}]
    return spec.validate({"cluster": {"pools": pools}, "tenants": tenants,
                          "queues": [{"name": "team-a", "weight": 2}, {"name": "team-b"}],
                          "priorityClasses": [{"name": "high", "value": 100}], "jobs": jobs, "workloads": loads,
                          "scheduler": {"policy": policy}, **extra})


def test_job_table_is_expand_in_order():
    scenario = scenario_with_generators()
    table, jobs = job_table(scenario), expand(scenario).jobs
    assert table.name.tolist() == [j.name for j in jobs]
    assert table.namespace.tolist() == [j.namespace for j in jobs]
    assert table.submit.tolist() == [parse_duration(j.submit) for j in jobs]
    assert table.work.tolist() == [parse_duration(j.work or j.duration) for j in jobs]
    assert [table.shapes[s] for s in table.shape] == [tuple(j.tasks) for j in jobs]
    assert table.priority_class.tolist() == [j.priority_class_name for j in jobs]


def test_pod_names_are_the_vcjob_controllers_and_made_when_first_read():
    scenario = scenario_with_generators("volcano-multitenant")
    expected = tuple(f"{job.namespace}/{job.name}-{task.name}-{i}" for job in expand(scenario).jobs
                     for task in job.tasks for i in range(task.replicas_resolved))
    names = compile_scenario(scenario).problem.task_names
    assert len(names) == len(expected) and names == expected and expected == names
    assert names[1:3] == expected[1:3] and names + ("",) == expected + ("",)
    assert pickle.loads(pickle.dumps(names)) == expected
    made = []
    lazy = LazyNames(lambda: made.append(1) or ["a", "b"], 2)
    assert len(lazy) == 2 and made == []
    assert list(lazy) == ["a", "b"] and lazy.index("b") == 1 and made == [1]


@pytest.mark.parametrize("policy", ["volcano-multitenant", "kube-default", "slurm-backfill"])
def test_compiled_arrays_equal_those_of_the_expanded_jobs(policy):
    scenario = scenario_with_generators(policy)
    columns, expanded = compile_scenario(scenario), compile_scenario(expand(scenario))
    for field in dataclasses.fields(columns.problem):
        a, b = getattr(columns.problem, field.name), getattr(expanded.problem, field.name)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=True), field.name
        elif field.name != "policy":
            assert a == b, field.name
    for name in ("job_submit", "job_work", "job_uses_speed", "job_checkpoint", "job_restart_cost", "job_grace",
                 "job_pods", "node_speed"):
        assert np.array_equal(getattr(columns, name), getattr(expanded, name)), name
    assert columns.scenario == expand(scenario)


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_simulate_with_generators_is_simulate_of_the_expanded_jobs(engine):
    scenario = scenario_with_generators(horizon="6h")
    fast, slow = labkit.simulate(scenario, engine=engine), labkit.simulate(expand(scenario), engine=engine)
    pd.testing.assert_frame_equal(fast.jobs, slow.jobs)
    pd.testing.assert_frame_equal(fast.tasks, slow.tasks)
    pd.testing.assert_frame_equal(fast.events[EVENT_KEY], slow.events[EVENT_KEY])
    assert fast.info["events"] == len(fast.events) > 0
    assert fast.scenario == slow.scenario


@pytest.mark.parametrize("change, field", [
    ({"gpus": {"distribution": "choice", "choices": [1, 2], "weights": [1]}}, "workloads[0].gpus"),
    ({"duration": {"distribution": "lognormal", "median": 60}}, "workloads[0].duration"),
    ({"gpus": {"distribution": "exponential", "mean": 4}, "gpusPerPod": 16}, "workloads[0].gpus"),
    ({"name": "a", "namespace": "team-b"}, "workloads[0].name"),
])
def test_bad_generator_input_names_the_field(change, field):
    data = spec.dump(scenario_with_generators())
    scenario = spec.loads(data)
    given = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    given["workloads"][0].update(change)
    with pytest.raises(SpecError) as err:
        compile_scenario(spec.validate(given))
    assert str(err.value).startswith(field) and "\n" not in str(err.value)


@pytest.mark.parametrize("change, message", [
    ({"count": 3}, "workloads[2]: a trace workload takes its jobs from the trace: drop count"),
    ({"trace": {**TRACE, "names": ["rec-3", "rec-1", "rec-3", "rec-0"]}}, "job name 'rec-3' is used twice"),
    ({"trace": {**TRACE, "gpus": [1, 2]}}, "gpus has 2 entries for 4 names"),
    ({"trace": {**TRACE, "duration": [1, 2, 0, 4]}}, "workloads[2].trace.duration[2]: Input should be greater than 0"),
    ({"trace": {**TRACE, "names": ["rec-3", "rec-1", "Rec_2", "rec-0"]}}, "workloads[2].trace.names[2]: 'Rec_2' is not a Kubernetes object name"),
    ({"gpusPerPod": 16}, "workloads[2]: "),  # its 16-GPU job is one pod, bigger than any node
    ({"trace": {**TRACE, "names": ["rec-3", "rec-1", "big", "rec-0"]}, "namespace": "team-b", "queue": "team-b"},
     "workloads[2].name: generated job team-b/big is also in jobs"),
])
def test_bad_trace_workloads_name_the_field(change, message):
    given = scenario_with_generators().model_dump(mode="json", by_alias=True, exclude_unset=True)
    given["workloads"][2].update(change)
    with pytest.raises(SpecError) as err:
        compile_scenario(spec.validate(given))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_row_ids_are_numpy_unique_inverse():
    from labkit.engine.core import row_ids

    rows = np.random.default_rng(0).integers(0, 3, (4000, 4)).astype(float)
    rows[::7, 1] = -0.0
    rows[::11, 2] = np.inf
    assert np.array_equal(row_ids(rows), np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1))
    assert row_ids(np.zeros((0, 3))).shape == (0,)


def test_every_job_field_is_in_the_table_or_untabled():
    """`table_key` hashes the table's columns and the untabled fields: a new Job field must be one."""
    in_table = {"name", "namespace", "queue", "priority_class_name", "submit", "tasks", "min_available", "duration",
                "work", "checkpoint_interval", "restart_cost", "grace_period", "preemptible", "network_topology",
                "workload_class"}
    assert set(Job.model_fields) == in_table | UNTABLED
    assert len(_COLUMNS) == len(dataclasses.fields(job_table(scenario_with_generators()))) - 1  # and shapes


@pytest.mark.parametrize("change", [
    lambda d: d["jobs"][0].update(submit=d["jobs"][0].get("submit", 0) + 1),
    lambda d: d["jobs"][1]["tasks"][0]["resources"].update({"nvidia.com/gpu": 2}),
    lambda d: d["jobs"][0].update(priorityClassName="high"),
    lambda d: d["jobs"][1].update(user="alice"),
    lambda d: d["jobs"][0].update(networkTopology={"mode": "soft", "highestTierAllowed": 2}),
    lambda d: d["workloads"][0].update(networkTopology={"mode": "hard", "highestTierAllowed": 1}),
    lambda d: d["workloads"][0].update(count=d["workloads"][0]["count"] - 1),
    lambda d: d.update(seed=d.get("seed", 0) + 1),
    lambda d: d["workloads"][2]["trace"]["duration"].__setitem__(0, 121),
    lambda d: d["workloads"][2]["trace"]["names"].__setitem__(1, "rec-9"),
])
def test_table_key_changes_with_what_the_compiler_reads(change):
    scenario = scenario_with_generators()
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    same = spec.validate(data)
    assert table_key(same, job_table(same)) == table_key(scenario, job_table(scenario))
    change(data)
    other = spec.validate(data)
    assert table_key(other, job_table(other)) != table_key(scenario, job_table(scenario))


def test_a_cached_compile_comes_back_with_the_callers_scenario():
    scenario = scenario_with_generators()
    families.forget_compiled()
    first = families.prepare(scenario)[0]
    again = spec.validate(scenario.model_dump(mode="json", by_alias=True, exclude_unset=True))
    second = families.prepare(again)[0]
    assert second.problem is first.problem and second.source is again


@pytest.mark.parametrize("preemptible", [False, True])
def test_multi_tenant_offers_its_load_from_each_tenant(preemptible):
    """Each tenant's jobs split into single-pod jobs and gangs of one arrival process; the jobs
    drawn offer about `load` of the cluster's GPUs (GPU-seconds over the arrival span)."""
    load, gpus = 0.6, 512
    fragment = multi_tenant(4000, gpus, load=load, gangs_preemptible=preemptible)
    assert [w["queue"] for w in fragment["workloads"]] == [f"team-{i}" for i in range(4) for _ in range(2)]
    assert sum(w["count"] for w in fragment["workloads"]) == 4000
    gangs = [w for w in fragment["workloads"] if w["name"].endswith("-gang")]
    assert all(min(w["gpus"]["choices"]) >= 16 and w["preemptible"] is preemptible for w in gangs)
    jobs = expand(spec.validate({"cluster": traces.cluster(gpus), **fragment, "seed": 7})).jobs
    submit = np.array([parse_duration(j.submit) for j in jobs])
    gpu_seconds = sum(sum(t.replicas_resolved * float(t.resources.get("nvidia.com/gpu", 0)) for t in j.tasks)
                      * parse_duration(j.duration) for j in jobs)
    offered = gpu_seconds / (submit.max() - submit.min()) / gpus
    assert abs(offered - load) < 0.15 * load
