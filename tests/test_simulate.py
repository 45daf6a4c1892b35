"""The simulated clock: Volcano's multi-session latencies, grace periods, checkpoints, invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labkit
from labkit import spec
from labkit.errors import SpecError
from labkit.spec.quantity import parse_duration, parse_quantity

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def without_overcommit(policy: str) -> dict:
    """A policy preset's conf with the overcommit plugin taken out (it gates enqueue on idle room)."""
    conf = spec.policy(policy).model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "overcommit"]
    return {"policy": f"{policy} without overcommit", "conf": conf}


def reclaim_scenario(checkpoint: str = "1h", grace: int = 60) -> spec.Scenario:
    """Queue a fills 2 x 8 GPUs with four 4-GPU jobs; queue b (same weight) submits 8 GPUs at 2h."""
    job = {"namespace": "default", "duration": "10h", "checkpointInterval": checkpoint, "gracePeriod": grace,
           "tasks": [{"resources": {"nvidia.com/gpu": 4, "cpu": 8, "memory": "64Gi"}}]}
    return spec.validate({
        "name": "reclaim",
        "cluster": {"pools": [{"name": "gpu", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 64,
                                                                         "memory": "512Gi"}}]},
        "queues": [{"name": "a"}, {"name": "b"}],
        "jobs": [{**job, "name": f"a{i}", "queue": "a", "submit": i} for i in range(4)]
        + [{**job, "name": "b0", "queue": "b", "submit": "2h",
            "tasks": [{"resources": {"nvidia.com/gpu": 8, "cpu": 8, "memory": "64Gi"}}]}],
        "scheduler": without_overcommit("volcano-multitenant"),
    })


def occupancy_never_exceeds_capacity(result: labkit.Result, resource: str = "nvidia.com/gpu") -> bool:
    """At every instant a pod starts, the pods holding resources on its node fit the node."""
    capacity = {name: parse_quantity(pool.resources.get(resource, 0))
                for pool in result.scenario.cluster.pools for name in pool.node_names()}
    tasks = result.tasks.assign(end=result.tasks.end.fillna(np.inf))
    for node, runs in tasks.groupby("node"):
        for start in runs.start:
            held = runs[(runs.start <= start) & (runs.end > start)][resource].sum()
            if held > capacity[node] + 1e-9:
                return False
    return True


def test_fragmentation_job_waits_for_a_whole_free_node():
    result = labkit.simulate(spec.preset("fragmentation"))
    jobs = result.jobs.set_index("name")
    residents = jobs[jobs.index.str.startswith("resident")]
    big = jobs.loc["tp8"]
    free_at_submit = 4 * 8 - residents.gpus.sum()
    assert free_at_submit >= big.gpus, "enough GPUs in total when tp8 arrives"
    assert big.start == pytest.approx(residents.end.min()), "it starts only when a node is whole again"
    assert occupancy_never_exceeds_capacity(result)


def test_enqueue_then_allocate_takes_two_sessions():
    result = labkit.simulate(spec.preset("fragmentation"))
    period = parse_duration(result.scenario.scheduler.schedule_period)
    first = result.jobs.iloc[0]
    assert first.enqueue == first.submit
    assert first.start == first.enqueue + period, "pods exist only after enqueue; allocate is a session later"


def test_reclaim_respects_grace_period_and_checkpoints():
    scenario = reclaim_scenario(checkpoint="1h", grace=60)
    result = labkit.simulate(scenario)
    jobs = result.jobs.set_index("name")
    evicted = result.events[result.events.kind == "Evicted"]
    assert len(evicted) > 0, "queue b reclaims its deserved half"
    assert set(evicted.job) <= {f"default/a{i}" for i in range(4)}
    first = evicted.time.min()
    assert jobs.loc["b0", "start"] >= first + 60, "victims hold their GPUs for the grace period"
    for name, row in jobs.iterrows():
        runs = result.tasks[result.tasks.job == f"default/{name}"]
        if row.evictions:
            done = runs.evicted.min() - runs.start.min()
            assert row.lost_work == pytest.approx(done % 3600), "work since the last checkpoint is lost"
        ran = (runs.evicted.fillna(runs.end) - runs.start).sum()
        assert ran == pytest.approx(parse_duration("10h") + row.lost_work), "GPU-seconds conserved"
    assert occupancy_never_exceeds_capacity(result)


def test_overcommit_keeps_the_reclaimer_out_of_the_queue():
    """Volcano issue #4679: a full cluster fails overcommit's enqueue check, so reclaim never sees the job."""
    result = labkit.simulate(reclaim_scenario(), policy="volcano-multitenant")
    jobs = result.jobs.set_index("name")
    assert jobs.evictions.sum() == 0
    assert jobs.loc["b0", "enqueue"] >= jobs.drop("b0").end.min()


def test_shipped_policy_never_evicts():
    result = labkit.simulate(reclaim_scenario(), policy="volcano-shipped")
    assert result.jobs.evictions.sum() == 0
    assert (result.events.kind == "Evicted").sum() == 0


def test_same_scenario_same_result():
    a = labkit.simulate(reclaim_scenario())
    b = labkit.simulate(reclaim_scenario())
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.tasks, b.tasks)


def test_cycle_on_a_snapshot():
    data = spec.dump(reclaim_scenario())
    scenario = spec.loads(data)
    snap = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for i, job in enumerate(snap["jobs"][:4]):
        job["status"] = {"phase": "Running", "running": {"worker": [f"gpu-{i // 2}"]}}
    snap["jobs"][4]["status"] = {"phase": "Inqueue"}
    decided = labkit.cycle(spec.validate(snap))
    assert len(decided.evicted()) == 2 and not decided.binds()
    assert decided.phases()["default/b0"] == "Inqueue"


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_progress_is_told_and_ctrl_c_stops_the_run(engine, monkeypatch):
    """Both engines tell a progress callback (jobs done, jobs, simulated seconds) as they go, and a
    KeyboardInterrupt raised there (where Ctrl-C lands) stops the run."""
    from labkit.course import cases
    from labkit.engine import clock, core

    monkeypatch.setattr(core, "FIRST_STEPS", 1)
    monkeypatch.setattr(clock, "PROGRESS_SECONDS", 0.0)
    scenario = cases.case_study(nodes=8, hours=24)
    seen = []
    result = labkit.simulate(scenario, engine=engine, progress=lambda *told: seen.append(told))
    assert seen and seen[-1][1] == len(result.jobs) and seen[-1][0] <= (result.jobs.state == "Completed").sum()
    pd.testing.assert_frame_equal(labkit.simulate(scenario, engine=engine, progress=True).jobs, result.jobs)  # tqdm

    def interrupt(done, jobs, now):
        if now > 3600:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        labkit.simulate(scenario, engine=engine, progress=interrupt)


def family_scenarios() -> dict[str, spec.Scenario]:
    """A scenario for each of the numba core's other entry points: Kueue, Slurm, kube-scheduler."""
    from labkit.course import cases
    from labkit.engine.simulate import with_policy

    return {"kueue": labkit.load(EXAMPLES / "kueue-cohort.yaml"),
            "slurm": with_policy(cases.case_study(nodes=8, hours=24), "slurm-backfill"),
            "kube": with_policy(cases.case_study(nodes=8, hours=24), "kube-default")}


@pytest.mark.parametrize("family", ["kueue", "slurm", "kube"])
def test_every_core_tells_progress_and_stops_on_ctrl_c(family, monkeypatch):
    """The Kueue, Slurm and kube-scheduler cores run in slices too: progress told between them,
    the same run as without, and a KeyboardInterrupt there stops it."""
    from labkit.engine import core

    monkeypatch.setattr(core, "FIRST_STEPS", 1)
    scenario = family_scenarios()[family]
    whole = labkit.simulate(scenario, engine="numba")
    seen = []
    result = labkit.simulate(scenario, engine="numba", progress=lambda *told: seen.append(told))
    assert result.info["engine"] == "numba" and len(seen) >= 2
    assert {jobs for _, jobs, _ in seen} == {len(result.jobs)} and seen[-1][0] <= whole.jobs.end.notna().sum()
    for table in ("jobs", "tasks", "events"):
        pd.testing.assert_frame_equal(getattr(result, table), getattr(whole, table))
    pd.testing.assert_frame_equal(labkit.simulate(scenario, engine="numba", progress=True).jobs, whole.jobs)
    told = []

    def interrupt(done, jobs, now):
        told.append(now)
        if len(told) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        labkit.simulate(scenario, engine="numba", progress=interrupt)
    assert len(told) == 2


def test_the_reference_kueue_engine_tells_progress_and_stops_on_ctrl_c(monkeypatch):
    from labkit.engine import clock

    monkeypatch.setattr(clock, "PROGRESS_SECONDS", 0.0)
    scenario = family_scenarios()["kueue"]
    seen = []
    result = labkit.simulate(scenario, engine="reference", progress=lambda *told: seen.append(told))
    assert seen and {jobs for _, jobs, _ in seen} == {len(result.jobs)}

    def interrupt(done, jobs, now):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        labkit.simulate(scenario, engine="reference", progress=interrupt)


@pytest.mark.parametrize("family", ["kueue", "slurm", "kube"])
def test_ctrl_c_during_a_core_run_in_the_cli_is_one_line_and_exit_130(family, monkeypatch, capsys, tmp_path):
    """Ctrl-C between two slices of a Kueue, Slurm or kube-scheduler run: the CLI says so in one
    line and exits 130."""
    from contextlib import contextmanager

    from labkit.cli import main
    from labkit.engine import core
    from labkit.engine import simulate as simulate_module

    @contextmanager
    def ctrl_c(progress, jobs):
        def tell(done, total, now):
            raise KeyboardInterrupt

        yield tell

    monkeypatch.setattr(core, "FIRST_STEPS", 1)
    monkeypatch.setattr(simulate_module, "progress_bar", ctrl_c)
    path = tmp_path / "scenario.yaml"
    path.write_text(spec.dump(family_scenarios()[family]))
    assert main(["simulate", str(path), "--engine", "numba"]) == 130
    assert capsys.readouterr().err == "labkit: interrupted\n"


def test_ctrl_c_in_the_cli_is_one_line_and_exit_130(monkeypatch, capsys):
    from labkit.cli import main
    from labkit.engine import simulate as simulate_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate_module, "simulate", interrupted)
    assert main(["simulate", "--preset", "fragmentation"]) == 130
    assert capsys.readouterr().err == "labkit: interrupted\n"


def test_cycle_refuses_kueue_which_has_no_session_of_its_own():
    """Kueue admits workloads on the clock, not in a scheduling session: cycle() says so instead of
    running a session of the Volcano placeholder Kueue's scenario compiles to."""
    with pytest.raises(SpecError, match="kueue has no scheduling session of its own"):
        labkit.cycle(labkit.load(EXAMPLES / "kueue-cohort.yaml"))


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_preemptor_binds_on_the_node_it_was_nominated_to(engine):
    """preempt evicts low-b's surplus pod on gpu-1 for `high` at 11 s and pipelines it there, which
    nominates the pod to gpu-1 (nominatedNodeName: the pipelining evicted). At 12 s low-a ends and
    gpu-0 is empty, which nodeorder's leastrequested scores higher; Volcano's allocate still tries
    the nominated node first, alone, and binds `high` there (allocate.go: "This node is likely the
    only candidate that will fit the pod, and hence we try it first")."""
    low = {"namespace": "default", "queue": "default", "priorityClassName": "low", "gracePeriod": 0}
    scenario = spec.validate({
        "name": "nominated-node",
        "cluster": {"pools": [{"name": "gpu", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 64,
                                                                         "memory": "512Gi"}}]},
        "queues": [{"name": "default"}],
        "priorityClasses": [{"name": "low", "value": 100}, {"name": "high", "value": 1000}],
        "jobs": [{**low, "name": "low-a", "submit": 0, "duration": 11,
                  "tasks": [{"resources": {"nvidia.com/gpu": 8, "cpu": 8, "memory": "32Gi"}}]},
                 {**low, "name": "low-b", "submit": 1, "duration": 100, "minAvailable": 1,
                  "tasks": [{"replicas": 2, "minAvailable": 1,
                             "resources": {"nvidia.com/gpu": 4, "cpu": 4, "memory": "16Gi"}}]},
                 {**low, "name": "high", "priorityClassName": "high", "submit": 10, "duration": 20,
                  "tasks": [{"resources": {"nvidia.com/gpu": 4, "cpu": 4, "memory": "16Gi"}}]}],
        "scheduler": {"conf": {"actions": "enqueue, allocate, backfill, preempt", "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]}]}},
    })
    result = labkit.simulate(scenario, engine=engine)
    events = result.events
    pipelined = events[(events.kind == "Pipelined") & (events.job == "default/high")]
    assert list(zip(pipelined.time, pipelined.node)) == [(11.0, "gpu-1")]
    assert result.jobs.set_index("name").loc["low-a", "end"] == 12
    bound = events[(events.kind == "Bound") & (events.job == "default/high")]
    assert list(zip(bound.time, bound.node)) == [(12.0, "gpu-1")]
    recreated = events[(events.kind == "Bound") & (events.task == "default/low-b-worker-0")]
    assert list(recreated.node) == ["gpu-1", "gpu-0"]
