"""labkit.metrics on hand-worked runs: every expected value is derived here from the scenario and the
simulator's documented latencies (sessions on a 1 s grid; a PodGroup is enqueued by the first session
at or after its submit and bound by the next one), plus invariants against the raw tasks table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from scenarios import scenarios
from test_simulate import reclaim_scenario

import labkit
from labkit import metrics, spec
from labkit.engine.problem import PodGroupPhase, TaskStatus
from labkit.spec.quantity import parse_quantity

HOUR = 3600.0
GPU = "nvidia.com/gpu"


def one_node() -> spec.Scenario:
    """One node of 8 GPUs under the shipped policy: j0 (4 GPUs, 1 h) at 0, j1 (8 GPUs, 1 h) at 10 s.

    overcommit keeps j1 Pending while j0 runs: 8 > 8 x 1.2 - 4 = 5.6 GPUs of idle room.
    """
    return spec.validate({
        "name": "one-node",
        "cluster": {"pools": [{"name": "gpu", "count": 1, "resources": {GPU: 8, "cpu": 64, "memory": "512Gi"}}]},
        "queues": [{"name": "a"}],
        "jobs": [{"name": "j0", "queue": "a", "duration": "1h", "tasks": [{"resources": {GPU: 4}}]},
                 {"name": "j1", "queue": "a", "submit": 10, "duration": "1h", "tasks": [{"resources": {GPU: 8}}]}],
    })


@pytest.fixture(scope="module")
def run() -> labkit.Result:
    return labkit.simulate(one_node())


# j0: enqueued at 0, bound at 1, ends at 1 + 1 h. j1: enqueued when j0 has ended, bound one session later.
J0_START, J0_END = 1.0, 1.0 + HOUR
J1_START = J0_END + 1.0
J1_END = J1_START + HOUR


def test_wait_jct_slowdown(run):
    table = metrics.job_times(run).set_index("name")
    assert table.wait.to_dict() == {"j0": J0_START - 0, "j1": J1_START - 10}
    assert table.jct.to_dict() == {"j0": J0_END - 0, "j1": J1_END - 10}
    assert table.slowdown["j1"] == pytest.approx((J1_END - 10) / HOUR)


def test_utilisation_is_gpu_seconds_over_capacity_times_window(run):
    held = 4 * (J0_END - J0_START) + 8 * (J1_END - J1_START)
    assert metrics.window_end(run) == J1_END
    assert metrics.gpu_seconds(run) == pytest.approx(held)
    assert metrics.utilisation(run) == pytest.approx(held / (8 * J1_END))
    assert run.summary()["gpu_utilisation"] == round(held / (8 * J1_END), 4)


def test_usage_bins_are_time_weighted_means(run):
    table = metrics.usage(run, bins=2)
    half = J1_END / 2
    first = 4 * (min(J0_END, half) - J0_START) / half
    second = (4 * max(0.0, J0_END - half) + 8 * (J1_END - J1_START)) / half
    assert table.used.tolist() == pytest.approx([first, second])
    steps = metrics.usage(run)
    assert steps.set_index("time").used.to_dict() == {0.0: 0, J0_START: 4, J0_END: 0, J1_START: 8, J1_END: 0}


def test_queue_length_counts_submitted_not_started(run):
    table = metrics.queue_length(run).set_index("time").waiting
    assert table[10.0] == 1 and table[J1_START] == 0


def test_starvation_sla_cost(run):
    starving = metrics.starvation(run, threshold=600)
    assert starving.name.tolist() == ["j1"] and starving.waited.iloc[0] == J1_START - 10
    assert metrics.longest_wait(run) == J1_START - 10
    assert metrics.sla_hit_rate(run, max_wait=60).to_dict() == {"a": 1 / 2}
    gpu_hours = (4 * (J0_END - J0_START) + 8 * (J1_END - J1_START)) / HOUR
    cost = metrics.cost(run, {"gpu": 2.5})
    assert cost.gpu_hours.sum() == pytest.approx(gpu_hours)
    assert cost.cost.sum() == pytest.approx(2.5 * gpu_hours)


def test_snapshot_rebuilds_phases_and_pods(run):
    snap = metrics.snapshot(run, 100.0)
    assert snap.problem.job_names == ("default/j0", "default/j1")
    assert list(snap.state.job_phase) == [PodGroupPhase.RUNNING, PodGroupPhase.PENDING]
    assert list(snap.state.task_status) == [TaskStatus.RUNNING], "j1's pods do not exist before enqueue"
    later = metrics.snapshot(run, J1_START + 1)
    assert later.problem.job_names == ("default/j1",)


def test_jain_index():
    assert metrics.jain([1, 1, 1, 1]) == 1.0
    assert metrics.jain([1, 0, 0, 0]) == 1 / 4
    assert metrics.jain([1, 2]) == pytest.approx((1 + 2) ** 2 / (2 * (1 + 4)))


def test_fairness_weights_the_usage():
    """Two queues each run one 8-GPU hour side by side; with weights 1 and 3, x = (s, s/3)."""
    job = {"duration": "1h", "tasks": [{"resources": {GPU: 8}}]}
    scenario = spec.validate({
        "cluster": {"pools": [{"name": "gpu", "count": 2, "resources": {GPU: 8, "cpu": 64, "memory": "512Gi"}}]},
        "queues": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3}],
        "jobs": [{**job, "name": "a0", "queue": "a"}, {**job, "name": "b0", "queue": "b"}],
    })
    result = labkit.simulate(scenario)
    assert metrics.fairness(result) == pytest.approx((1 + 1 / 3) ** 2 / (2 * (1 + 1 / 9)))


def test_shares_against_the_engines_deserved():
    """Reclaim scenario: queue a alone deserves all 16 GPUs it asks for; once b asks for 8, water-filling
    gives each weight-1 queue 16 / 2 = 8, and after the reclaim each holds 8."""
    result = labkit.simulate(reclaim_scenario())
    table = metrics.queue_shares(result, times=np.array([HOUR, 3 * HOUR])).set_index(["time", "queue"])
    alone, both = table.loc[HOUR], table.loc[3 * HOUR]
    assert alone.loc["a"].deserved == 16 and alone.loc["a"].share == 1.0
    assert alone.loc["b"].deserved == 0
    # a holds 4 x (4 GPUs, 8 cpu, 64Gi): the GPU share dominates cpu 32/128 and memory 256Gi/1Ti
    assert alone.loc["a"].dominant_share == 1.0
    assert both.deserved.to_dict() == {"a": 8, "b": 8}
    assert both.allocated.to_dict() == {"a": 8, "b": 8}
    assert both.share.to_dict() == {"a": 0.5, "b": 0.5}


def test_preemptions_count_the_reclaim():
    """b0 needs a whole node; each node runs two 4-GPU pods of a, so reclaim evicts both on one node,
    and each single-pod gang restarts."""
    result = labkit.simulate(reclaim_scenario())
    table = metrics.preemptions(result)
    assert table[["queue", "action", "evicted", "restarts"]].values.tolist() == [["a", "reclaim", 2, 2]]
    assert table.lost_work_s.iloc[0] == result.jobs.lost_work.sum()


def test_fragmentation_of_the_preset():
    """Four nodes run one 4-GPU pod each; tp8 (8 GPUs) is pending at 100 s: all 4 x 4 free GPUs are
    stranded. FGD: 4 of the workload's 5 GPU pods ask 4 GPUs (fit anywhere), 1 asks 8 (fits nowhere)."""
    result = labkit.simulate(spec.preset("fragmentation"))
    frag = metrics.fragmentation(result, 100.0)
    free = 4 * (8 - 4)
    assert frag == {"free_gpus": free, "stranded_gpus": free, "fgd_rate": pytest.approx(1 / 5 * free / free)}
    assert metrics.fragmentation(result, 10.0)["stranded_gpus"] == 0, "nothing GPU-shaped is pending yet"
    free_now = metrics.node_free(result, 100.0)
    assert free_now[GPU].tolist() == [4.0] * 4


def test_summary_and_per_queue_agree_with_the_result(run):
    assert run.summary() == metrics.summary(run)
    per_queue = run.per_queue()
    assert per_queue.loc["a", "gpu_hours"] == round((4 + 8) * HOUR / HOUR, 1)


def test_a_job_not_started_by_the_horizon_waits_until_it():
    """Censored waits: j1 cannot start while j0 runs (1 h), so with a 30 min horizon it has waited
    T - 10 s, and leaving it out would report j0's 1 s as the mean."""
    data = one_node().model_dump(mode="json", by_alias=True, exclude_unset=True)
    horizon = 1800.0
    data["horizon"] = horizon
    short = labkit.simulate(spec.validate(data))
    assert short.jobs.set_index("name").start.isna().to_dict() == {"j0": False, "j1": True}
    assert metrics.waited(short).tolist() == [J0_START, horizon - 10]
    summary = metrics.summary(short)
    assert summary["not_started"] == 1
    assert summary["mean_wait_s"] == round((J0_START + horizon - 10) / 2, 1)
    per_queue = metrics.per_queue(short)
    assert per_queue.loc["a", "not_started"] == 1
    assert per_queue.loc["a", "mean_wait_s"] == summary["mean_wait_s"]


# ------------------------------------------------------------------------------------ invariants


@settings(max_examples=12, deadline=None)
@given(scenarios(max_jobs=6))
def test_timeline_integrates_to_the_tasks_table(scenario):
    result = labkit.simulate(scenario)
    end = metrics.window_end(result)
    if end == 0:
        return
    stops = result.tasks.end.fillna(end).clip(upper=end)
    held = float(((stops - result.tasks.start) * result.tasks[GPU]).sum())
    assert metrics.utilisation(result) == pytest.approx(held / (metrics.capacity(result) * end))
    timeline = metrics.utilisation_timeline(result, bins=7)
    assert timeline.utilisation.mean() == pytest.approx(metrics.utilisation(result))
    capacity = {n: parse_quantity(p.resources[GPU]) for p in scenario.cluster.pools for n in p.node_names()}
    per_node = metrics.usage(result, by="node")
    assert all(row.used <= capacity[row.node] + 1e-9 for row in per_node.itertuples()), "no node over capacity"
    assert math.isclose(metrics.gpu_seconds(result), held, rel_tol=1e-9, abs_tol=1e-6)


def test_usage_by_group_when_no_pod_ran():
    # a gang that fits no node never runs a pod: per-node usage is an empty table that still has its columns
    scenario = labkit.spec.validate({"name": "idle", "horizon": "1h",
                                     "cluster": {"pools": [{"name": "g", "count": 1, "resources": {GPU: 4}}]},
                                     "jobs": [{"name": "big", "duration": 60, "tasks": [
                                         {"name": "worker", "replicas": 2, "resources": {GPU: 3}}]}]})
    result = labkit.simulate(scenario)
    assert result.tasks.empty
    per_node = metrics.usage(result, by="node")
    assert per_node.empty and {"time", "node", "used"} <= set(per_node.columns)
    assert list(metrics.usage(result, by="node", bins=3).columns) == ["time", "node", "time_end", "used"]
    assert metrics.usage(result).used.sum() == 0.0
