"""The job progress model (issue 27 point 2): a job's rate is its GPU model's speed x the placement
factor of the topology level its gang spans x its replica scaling, re-planned when its pods change.
Every expected time is computed from the scenario's own speeds, factors and curves."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import (
    assert_same,
    engine_scenarios,
    kube_scenarios,
    node_events,
    slurm_scenarios,
    unconserved_progress,
)
from test_core_kueue import kueue_scenarios

import labkit
from labkit import metrics, spec
from labkit.cli import main
from labkit.errors import SpecError
from labkit.spec.model import Scaling

ENGINES = ["reference", "numba"]
FAMILIES = ["volcano", "kube", "kueue"]
WORK = 3600.0
GPU8 = {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}
EXAMPLES = Path(labkit.__file__).parent / "examples"


def _scenario(pools, jobs, classes, topology=None, events=None, horizon=None, queues=None,
              family="volcano") -> spec.Scenario:
    cluster = {"pools": pools, **({"topology": topology} if topology else {}), **({"events": events} if events else {})}
    data = {"name": "progress", "cluster": cluster, "workloadClasses": classes, "jobs": jobs,
            **({"horizon": horizon} if horizon else {}), **({"queues": queues} if queues else {}),
            "scheduler": {"policy": "volcano-shipped"}}
    return spec.validate(_under(data, family))


def _under(data: dict, family: str) -> dict:
    """The scenario under `family`: kube-default; slurm-backfill with one partition; or Kueue with
    a ResourceFlavor per pool (a label `pool: <name>` on its nodes) in one ClusterQueue whose GPU
    quota is the pool's GPUs, so only the nodes limit what runs (waitForPodsReady off when nodes
    fail, which it refuses)."""
    if family == "kube":
        data["scheduler"] = {"policy": "kube-default"}
    elif family == "slurm":
        data["slurm"] = {"partitions": [{"name": "gpu", "default": True}]}
        data["scheduler"] = {"policy": "slurm-backfill"}
    elif family == "kueue":
        pools = data["cluster"]["pools"]
        for pool in pools:
            pool["labels"] = {**pool.get("labels", {}), "pool": pool["name"]}
        quota = [{"name": pool["name"], "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": pool["count"] * pool["resources"]["nvidia.com/gpu"]}]}
            for pool in pools]
        data["kueue"] = {"resourceFlavors": [{"name": pool["name"], "nodeLabels": {"pool": pool["name"]}}
                                             for pool in pools],
                         "clusterQueues": [{"name": "cq", "resourceGroups": [
                             {"coveredResources": ["nvidia.com/gpu"], "flavors": quota}]}],
                         "localQueues": [{"name": "main", "namespace": "default", "clusterQueue": "cq"}]}
        data["scheduler"] = {"kueue": {"waitForPodsReady": {"enable": not data["cluster"].get("events")}}}
    return data


def _elastic(name="train", pods=4, min_pods=1, work=WORK, cls="llm", submit=0, **extra) -> dict:
    return {"name": name, "workloadClass": cls, "work": work, "submit": submit, **extra,
            "tasks": [{"name": "worker", "elastic": {"min": min_pods, "max": pods}, "resources": {"nvidia.com/gpu": 8}}]}


def _run(s: spec.Scenario, engine: str, **kwargs) -> labkit.Result:
    """The run on `engine`, which must be the engine that ran it (the core does not fall back)."""
    result = labkit.simulate(s, engine=engine, **kwargs)
    assert result.info["engine"] == engine
    return result


def _row(result, name="train"):
    return result.jobs.set_index("name").loc[name]


def _times(result, kind, job="default/train"):
    events = result.events
    return events[(events.kind == kind) & (events.job == job)].time.to_numpy(float)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("scaling", [{"table": {1: 1.0, 2: 1.8, 4: 3.2}}, {"exponent": 0.75}])
def test_an_elastic_job_finishes_sooner_with_more_replicas_by_its_curve(engine, family, scaling):
    """Volcano allocates the pods that fit (above minAvailable), the kube-scheduler binds each pod
    that fits, Kueue admits the count its quota holds (partial admission: here the cluster's GPUs):
    with 1, 2 or 4 nodes the job runs 1, 2 or 4 of its 4 pods, at its curve's rate."""
    curve = Scaling.model_validate(scaling)
    ends = {}
    for nodes in (1, 2, 4):
        s = _scenario([{"name": "a", "count": nodes, "resources": GPU8}], [_elastic()],
                      [{"name": "llm", "scaling": scaling}], family=family)
        r = _run(s, engine)
        row = _row(r)
        rate = curve.throughput(nodes) / curve.throughput(4)
        assert row.end - row.start == pytest.approx(WORK / rate)
        ends[nodes] = row.end
    assert ends[4] < ends[2] < ends[1]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", [*FAMILIES, "slurm"])
def test_a_gang_split_across_racks_runs_slower_by_its_tier_factor(engine, family):
    placement = {"node": 1.0, "rack": 0.85, "cluster": 0.6}
    job = {"name": "train", "workloadClass": "llm", "work": WORK,
           "tasks": [{"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 8}}]}
    for size, level in ((2, "rack"), (1, "cluster")):  # racks of 2 nodes hold the gang; racks of 1 split it
        s = _scenario([{"name": "a", "count": 2, "resources": GPU8}], [job], [{"name": "llm", "placement": placement}],
                      topology={"tiers": [{"name": "rack", "size": size}]}, family=family)
        row = _row(_run(s, engine))
        assert row.end - row.start == pytest.approx(WORK / placement[level])
    if family == "slurm":
        return  # a replica is a node of its own (sbatch -N): a gang never shares one
    # one node holding the whole gang: the node level's factor
    s = _scenario([{"name": "a", "count": 1, "resources": {"nvidia.com/gpu": 16, "cpu": 64, "memory": "512Gi"}}],
                  [job], [{"name": "llm", "placement": {"node": 0.95, "cluster": 0.6}}], family=family)
    row = _row(_run(s, engine))
    assert row.end - row.start == pytest.approx(WORK / 0.95)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", ["volcano", "kube", "slurm"])
def test_a_job_on_a_slower_gpu_model_runs_slower_by_the_matrix(engine, family):
    speeds = {"A100": 1.0, "V100": 0.4}
    pools = [{"name": "a100", "count": 1, "gpuModel": "A100", "labels": {"gpu": "a100"}, "resources": GPU8},
             {"name": "v100", "count": 1, "gpuModel": "V100", "labels": {"gpu": "v100"}, "resources": GPU8, "speed": 0.5}]
    for model, label in (("A100", "a100"), ("V100", "v100")):
        for field in ("work", "duration"):
            job = {"name": "train", "workloadClass": "resnet", field: WORK,
                   "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 8}, "nodeSelector": {"gpu": label}}]}
            s = _scenario(pools, [job], [{"name": "resnet", "speeds": speeds}], family=family)
            row = _row(_run(s, engine))
            pool_speed = 0.5 if (field == "work" and model == "V100") else 1.0  # `work` also scales by the pool's speed
            assert row.end - row.start == pytest.approx(WORK / (speeds[model] * pool_speed))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
def test_scale_in_mid_run_replans_the_finish(engine, family):
    """A drained node evicts one pod of a 4-pod elastic job: the work so far counts at the full
    rate, the rest runs at throughput(3) / throughput(4) (its recreated pod finds no node: the
    drained one stays cordoned)."""
    curve = {"table": {1: 1.0, 2: 1.8, 3: 2.5, 4: 3.2}}
    s = _scenario([{"name": "a", "count": 4, "resources": GPU8}], [_elastic()], [{"name": "llm", "scaling": curve}],
                  events=[{"at": "20m", "node": "a-3", "kind": "drain"}], family=family)
    r = _run(s, engine)
    row = _row(r)
    [evicted] = _times(r, "Evicted")
    scaling = Scaling.model_validate(curve)
    done = (evicted - row.start) * 1.0
    expected = evicted + (WORK - done) / (scaling.throughput(3) / scaling.throughput(4))
    assert row.end == pytest.approx(expected)
    assert row.lost_work == 0 and row.state == "Completed"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", ["volcano", "kube"])
def test_scale_out_when_room_appears_replans_the_finish(engine, family):
    """The elastic job starts on the one free node; when the blocker ends, its other pods bind and
    the rest of its work runs at the full rate (Volcano allocates pods above minAvailable whenever
    they fit; the kube-scheduler binds any pending pod that fits)."""
    curve = {"exponent": 0.8}
    blocker = {"name": "blocker", "duration": 600, "tasks": [{"name": "worker", "replicas": 3,
                                                              "resources": {"nvidia.com/gpu": 8}}]}
    s = _scenario([{"name": "a", "count": 4, "resources": GPU8}], [blocker, _elastic(submit=1)],
                  [{"name": "llm", "scaling": curve}], family=family)
    r = _run(s, engine)
    row = _row(r)
    bound = _times(r, "Bound")
    assert len(bound) == 4 and bound[1] > row.start  # three pods joined later, in one session
    joined = bound[1]
    assert (bound[1:] == joined).all()
    slow = Scaling.model_validate(curve).throughput(1) / Scaling.model_validate(curve).throughput(4)
    expected = joined + (WORK - (joined - row.start) * slow)
    assert row.end == pytest.approx(expected)


@pytest.mark.parametrize("engine", ENGINES)
def test_kube_scoring_decides_the_placement_factor(engine):
    """The kube-scheduler knows no topology: LeastAllocated spreads a job's two pods over two nodes
    (the cluster level's factor), MostAllocated packs them on one (the node level's)."""
    placement = {"node": 1.0, "cluster": 0.6}
    job = {"name": "train", "workloadClass": "llm", "work": WORK,
           "tasks": [{"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 4, "cpu": 16}}]}
    fit = {"scoringStrategy": {"type": "MostAllocated",
                               "resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 3}]}}
    packed = {"policy": "kube-default", "kube": {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit",
                                                                                 "args": fit}]}]}}
    for scheduler, level in (({"policy": "kube-default"}, "cluster"), (packed, "node")):
        data = {"cluster": {"pools": [{"name": "a", "count": 2, "resources": GPU8}]},
                "workloadClasses": [{"name": "llm", "placement": placement}], "jobs": [job], "scheduler": scheduler}
        r = _run(spec.validate(data), engine)
        assert r.tasks.node.nunique() == (2 if level == "cluster" else 1)
        row = _row(r)
        assert row.end - row.start == pytest.approx(WORK / placement[level])


@pytest.mark.parametrize("engine", ENGINES)
def test_kueue_partial_admission_runs_its_admitted_count_to_the_end(engine):
    """Kueue admits the elastic job with the one pod its ClusterQueue's quota still holds (partial
    admission sets the job's parallelism once): it runs on one pod at throughput(1) /
    throughput(4) to the end, though the blocker's nodes free up after 10 minutes. Its goodput
    row is its ClusterQueue's."""
    curve = Scaling.model_validate({"exponent": 0.8})
    blocker = {"name": "blocker", "duration": 600, "tasks": [{"name": "worker", "replicas": 3,
                                                              "resources": {"nvidia.com/gpu": 8}}]}
    s = _scenario([{"name": "a", "count": 4, "resources": GPU8}], [blocker, _elastic(submit=1)],
                  [{"name": "llm", "scaling": {"exponent": 0.8}}], family="kueue")
    r = _run(s, engine)
    row = _row(r)
    slow = curve.throughput(1) / curve.throughput(4)
    assert len(_times(r, "Bound")) == 1 and _times(r, "Bound")[0] == row.start
    assert row.state == "Completed" and row.end - row.start == pytest.approx(WORK / slow)
    table = metrics.goodput(r).set_index("name").loc["train"]
    assert table.slowdown == pytest.approx(1 / slow)
    assert table.gpu_seconds == pytest.approx(8 * WORK / slow)
    queue = metrics.goodput(r, by="queue").set_index("queue")
    assert list(queue.index) == ["cq"]


@pytest.mark.parametrize("engine", ENGINES)
def test_kueue_flavors_carry_their_pools_gpu_models(engine):
    """Two ResourceFlavors, h100 first: the first job is admitted on h100 and runs at the class's
    H100 speed; the second finds h100's quota used, is admitted on a100 and runs at the A100 speed."""
    speeds = {"A100": 1.0, "H100": 2.0}
    pools = [{"name": "h100", "count": 1, "gpuModel": "H100", "resources": GPU8},
             {"name": "a100", "count": 1, "gpuModel": "A100", "resources": GPU8}]
    jobs = [{"name": name, "workloadClass": "llm", "work": WORK, "submit": submit,
             "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 8}}]}
            for name, submit in (("first", 0), ("second", 1))]
    r = _run(_scenario(pools, jobs, [{"name": "llm", "speeds": speeds}], family="kueue"), engine)
    reserved = r.events[r.events.kind == "QuotaReserved"].set_index("job").message
    for name, model in (("first", "H100"), ("second", "A100")):
        row = _row(r, name)
        assert reserved[f"default/{name}"].endswith(f"flavors {model.lower()}")
        assert row.end - row.start == pytest.approx(WORK / speeds[model])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_suspended_slurm_job_resumes_with_the_work_its_rate_did(engine):
    """PreemptMode=SUSPEND: a high-tier job suspends the running one, which resumes when it ends;
    the work done before the suspension is what its rate (its class's H100 speed) did, not the
    time it ran."""
    rate = 2.0
    cpu = [{"name": "node", "resources": {"cpu": 8}}]
    data = {"cluster": {"pools": [{"name": "n", "count": 1, "gpuModel": "H100", "resources": {"cpu": 8}}]},
            "workloadClasses": [{"name": "llm", "speeds": {"H100": rate}}],
            "slurm": {"partitions": [{"name": "low", "default": True}, {"name": "high", "priorityTier": 10}]},
            "jobs": [{"name": "train", "workloadClass": "llm", "work": WORK, "tasks": cpu},
                     {"name": "urgent", "partition": "high", "submit": 600, "duration": 600, "tasks": cpu}],
            "scheduler": {"policy": "custom", "slurm": {"PreemptType": "preempt/partition_prio",
                                                         "PreemptMode": "SUSPEND"}}}
    r = _run(spec.validate(data), engine)
    [suspended] = _times(r, "Suspended")
    started = _times(r, "Started")
    assert len(started) == 2 and started[1] > suspended
    done = (suspended - started[0]) * rate
    row = _row(r)
    assert row.state == "Completed" and row.end == pytest.approx(started[1] + (WORK - done) / rate)
    assert not unconserved_progress(r)


def test_goodput_metrics_per_job_and_queue():
    placement = {"cluster": 0.5}
    jobs = [{"name": "split", "workloadClass": "llm", "work": WORK, "queue": "q",
             "tasks": [{"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 8}}]},
            {"name": "plain", "duration": WORK, "queue": "q",
             "tasks": [{"name": "worker", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}]}]
    s = _scenario([{"name": "a", "count": 3, "resources": GPU8}], jobs, [{"name": "llm", "placement": placement}],
                  queues=[{"name": "q"}])
    r = labkit.simulate(s)
    table = metrics.goodput(r).set_index("name")
    split, plain = table.loc["split"], table.loc["plain"]
    assert split.slowdown == pytest.approx(1 / placement["cluster"]) and plain.slowdown == pytest.approx(1.0)
    assert split.goodput == pytest.approx(placement["cluster"]) and plain.goodput == pytest.approx(1.0)
    assert split.effective_gpu_hours == pytest.approx(WORK * 16 / 3600)
    # GPU-seconds conserved: the per-job and per-queue figures add up to what the pods held
    assert table.gpu_seconds.sum() == pytest.approx(metrics.gpu_seconds(r))
    queue = metrics.goodput(r, by="queue").set_index("queue").loc["q"]
    assert queue.gpu_seconds == pytest.approx(table.gpu_seconds.sum())
    assert queue.goodput == pytest.approx(table.useful_gpu_seconds.sum() / table.gpu_seconds.sum())
    assert queue.slowdown == pytest.approx((split.work_time * 16 + plain.work_time * 8) / (WORK * 24))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
def test_work_is_conserved_through_restarts_and_rescales(engine, family):
    """A node failure restarts a rigid job from its checkpoint while an elastic job shrinks:
    work done + work lost = the integral of each job's rate over the time its work ran."""
    curve = {"exponent": 0.9}
    rigid = {"name": "rigid", "workloadClass": "llm", "work": WORK, "checkpointInterval": "10m", "restartCost": 60,
             "tasks": [{"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 8}}]}
    s = _scenario([{"name": "a", "count": 6, "resources": GPU8}], [rigid, _elastic()],
                  [{"name": "llm", "scaling": curve, "placement": {"rack": 0.9, "cluster": 0.7}}],
                  topology={"tiers": [{"name": "rack", "size": 3}]},
                  events=[{"at": "25m", "node": "a-0", "kind": "fail"}, {"at": "35m", "node": "a-5", "kind": "fail"},
                          {"at": "50m", "node": "a-0", "kind": "recover"}], family=family)
    r = _run(s, engine)
    assert (r.jobs.state == "Completed").all()
    assert r.jobs.lost_work.sum() > 0 or (r.events.kind == "Restarting").any()
    assert not unconserved_progress(r)


@st.composite
def with_progress(draw, scenarios, more_events: bool = False):
    """`scenarios` with the progress model: GPU models on the pools, workload classes with speeds,
    placement factors and scaling curves, jobs of those classes, a topology; `more_events`: node
    failures or drains in one scenario of two (the jobs' rates change as they lose pods)."""
    base = draw(scenarios)
    data = base.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if more_events and not data["cluster"].get("events") and draw(st.booleans()):
        data["cluster"]["events"] = draw(node_events(data["cluster"]["pools"], 3 * 3600).filter(bool))
    for pool in data["cluster"]["pools"]:
        if draw(st.booleans()):
            pool["gpuModel"] = draw(st.sampled_from(["A100", "H100"]))
    models = sorted({pool["gpuModel"] for pool in data["cluster"]["pools"] if "gpuModel" in pool})
    nodes = sum(pool["count"] for pool in data["cluster"]["pools"])
    data["cluster"]["topology"] = {"tiers": [{"name": "rack", "size": draw(st.integers(1, max(1, nodes)))}]}
    factor = st.sampled_from([0.5, 0.8, 1.0, 1.25])
    classes = []
    for k in range(draw(st.integers(1, 2))):
        cls = {"name": f"c{k}", "speeds": {m: draw(factor) for m in models if draw(st.booleans())},
               "placement": {lvl: draw(factor) for lvl in ("node", "rack", "cluster") if draw(st.booleans())}}
        if draw(st.booleans()):
            cls["scaling"] = draw(st.sampled_from([{"exponent": 0.7}, {"exponent": 1.0},
                                                   {"table": {1: 1.0, 2: 1.5, 3: 1.9, 4: 2.2, 8: 3.0, 64: 10.0}}]))
        classes.append(cls)
    data["workloadClasses"] = classes
    for job in data["jobs"]:
        if draw(st.booleans()):
            job["workloadClass"] = draw(st.sampled_from([c["name"] for c in classes]))
        if draw(st.integers(0, 4)) == 0:
            job["placement"] = {"cluster": draw(factor)}
    return spec.validate(data)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_progress(engine_scenarios(max_jobs=8), more_events=True))
def test_numba_matches_reference_with_the_progress_model(scenario):
    fast, _ = assert_same(scenario)
    assert not unconserved_progress(fast)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_progress(kube_scenarios()))
def test_numba_matches_reference_with_the_progress_model_under_kube(scenario):
    """kube_scenarios (the three kube profiles, quotas, taints, node events and spot pools) with
    the progress model."""
    fast, _ = assert_same(scenario)
    assert not unconserved_progress(fast)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_progress(slurm_scenarios()))
def test_numba_matches_reference_with_the_progress_model_under_slurm(scenario):
    """slurm_scenarios (partitions, QOS limits, time limits, backfill or builtin, REQUEUE, CANCEL
    or SUSPEND preemption) with the progress model."""
    fast, _ = assert_same(scenario)
    assert not unconserved_progress(fast)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_progress(kueue_scenarios(preemption=True, pods_ready=True)))
def test_numba_matches_reference_with_the_progress_model_under_kueue(scenario):
    """The Kueue engines' random scenarios (cohorts, two flavors, partial admission, preemption,
    waitForPodsReady, node events) with the progress model."""
    fast, _ = assert_same(scenario)
    assert not unconserved_progress(fast)


# ------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("change, field", [
    (lambda d: d["workloadClasses"][0].update(speeds={"TPU": 1.0}), "workloadClasses[0].speeds.TPU"),
    (lambda d: d["workloadClasses"][0].update(scaling={"table": {1: 1.0, 2: 0.9}}), "workloadClasses[0].scaling"),
    (lambda d: d["workloadClasses"][0].update(scaling={"table": {}}), "workloadClasses[0].scaling"),
    (lambda d: d["workloadClasses"][0].update(scaling={"table": {1: 1.0, 2: 1.5}}),
     "workloadClasses[0].scaling.table"),  # the job runs with up to 4 pods
    (lambda d: d["workloadClasses"][0].update(placement={"rack": 0}), "workloadClasses[0].placement.rack"),
    (lambda d: d["workloadClasses"][0].update(placement={"zone": 0.5}), "workloadClasses[0].placement.zone"),
    (lambda d: d["jobs"][0].update(placement={"cluster": -1}), "jobs[0].placement.cluster"),
    (lambda d: d["jobs"][0].update(workloadClass="nope"), "jobs[0].workloadClass"),
    (lambda d: d["workloadClasses"][0].update(scaling={"exponent": 0}), "workloadClasses[0].scaling.exponent"),
])
def test_bad_input_is_one_line_naming_the_field_and_exit_2(tmp_path, capsys, change, field):
    import yaml

    data = {"name": "bad", "cluster": {"pools": [{"name": "a", "count": 4, "gpuModel": "A100", "resources": GPU8}],
                                        "topology": {"tiers": [{"name": "rack", "size": 2}]}},
            "workloadClasses": [{"name": "llm", "speeds": {"A100": 1.0}, "scaling": {"exponent": 0.9}}],
            "jobs": [_elastic()]}
    change(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err, err
    with pytest.raises(SpecError):
        labkit.simulate(labkit.load(str(path)) if field != "workloadClasses[0].scaling.table" else
                        spec.validate(data))


@pytest.mark.parametrize("name", ["progress-model", "progress-kube", "progress-kueue"])
def test_the_examples_run_the_same_on_both_engines(name):
    r, _ = assert_same(labkit.load(str(EXAMPLES / f"{name}.yaml")))
    assert (r.jobs.state == "Completed").all()
    assert not unconserved_progress(r)
    table = metrics.goodput(r)
    assert np.isfinite(table.slowdown).all() and (table.slowdown > 0).all()  # < 1 on GPUs faster than the reference
    assert math.isfinite(metrics.goodput(r, by="queue").goodput.iloc[0])
