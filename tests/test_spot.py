"""Spot pools (`cluster.pools[].spot`: a seeded interruption process, drawn at compile time into
node events) and pool prices (`cluster.pools[].price`, read by `labkit.metrics` cost figures)."""


import numpy as np
import pytest
from scenarios import assert_same, pods_on_unavailable_nodes, unconserved_work
from test_spec import run_cli

import labkit
from labkit import metrics, spec
from labkit.errors import SpecError
from labkit.spec.timeline import node_events


def _data(spot=None, jobs=8, horizon="24h", policy="volcano-shipped", seed=0):
    pools = [{"name": "od", "count": 2, "resources": {"nvidia.com/gpu": 8}, "price": 3.0},
             {"name": "sp", "count": 2, "resources": {"nvidia.com/gpu": 8}, "price": 1.0,
              **({"spot": spot} if spot is not None else {})}]
    data = {"name": "spot", "seed": seed, "cluster": {"pools": pools},
            "queues": [{"name": "a"}, {"name": "b"}],
            "jobs": [{"name": f"j{i}", "queue": "ab"[i % 2], "submit": 60 * i, "checkpointInterval": "30m",
                      "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
                      "duration": "3h"} for i in range(jobs)],
            "scheduler": {"policy": policy}}
    if horizon is not None:
        data["horizon"] = horizon
    return data


def _scenario(**kw):
    return spec.validate(_data(**kw))


def _interruptions(scenario):
    return [(e.at, e.node) for _, e in node_events(scenario) if e.kind == "interrupt"]


def test_the_draws_are_seeded_and_follow_the_rate():
    """Same seed, same interruptions; another seed, others; over many nodes the count is near
    rate x up-time (a node is down `replaceAfter` after each, and waits a notice before the next)."""
    spot = {"rate": 0.5, "replaceAfter": "30m"}
    first = _interruptions(_scenario(spot=spot))
    assert first and first == _interruptions(_scenario(spot=spot))
    assert first != _interruptions(_scenario(spot=spot, seed=1))
    assert first != _interruptions(_scenario(spot={**spot, "seed": 7}))
    data = _data(spot=spot, horizon="200h")
    data["cluster"]["pools"][1]["count"] = 100
    drawn = _interruptions(spec.validate(data))
    # per node: up-time between interruptions is an exponential of mean 2 h, plus 30 min down and a 2 min notice
    expected = 100 * 200 / (2 + 0.5 + 2 / 60)
    assert abs(len(drawn) - expected) < 4 * np.sqrt(expected)
    assert all(at < 200 * 3600 for at, _ in drawn)


def test_spot_interruptions_restart_jobs_in_both_engines():
    """Each drawn interruption drains its node at the notice (the job there loses its work since
    the last checkpoint) and fails it; the replacement joins `replaceAfter` later and takes pods."""
    scenario = _scenario(spot={"rate": 0.5, "notice": "2m", "replaceAfter": "20m"})
    result, _ = assert_same(scenario)
    drawn = _interruptions(scenario)
    events = result.events
    drains = events[(events.kind == "Evicted") & (events.reason == "Drain")]
    assert len(drawn) and len(drains)
    for at, node in drawn:
        assert ((events.kind == "NodeNotReady") & (events.node == node) & (events.time == at)).sum() == 1
        assert ((events.kind == "NodeNotSchedulable") & (events.node == node) & (events.time == at - 120)).sum() == 1
        back = ((events.kind == "NodeSchedulable") & (events.node == node) & (events.time == at + 1200)).sum()
        assert back == (at + 1200 < 24 * 3600)
    assert set(drains.node) <= {"sp-0", "sp-1"}
    assert result.jobs.lost_work.sum() > 0 and not pods_on_unavailable_nodes(result)
    assert not unconserved_work(result)
    plain = labkit.simulate(_scenario())
    assert result.jobs.jct.mean() > plain.jobs.jct.mean()


def test_under_slurm_each_interruption_drains_at_its_notice_and_requeues_at_its_time():
    """Slurm: the notice is a DRAIN (the job there runs on), the interruption a DOWN that requeues
    the job from its last checkpoint; the replacement comes back up and undrained."""
    data = _data(spot={"rate": 0.5, "notice": "2m", "replaceAfter": "20m"}, policy="slurm-backfill")
    for pool in data["cluster"]["pools"]:
        pool["resources"]["cpu"] = 8  # a Slurm job takes at least one CPU per node
    scenario = spec.validate(data)
    with pytest.warns(labkit.errors.LabkitWarning, match="Volcano Queues"):
        result, _ = assert_same(scenario)
    drawn = _interruptions(scenario)
    events = result.events
    lost = events[events.kind == "Evicted"]
    assert len(drawn) and len(lost) and set(lost.reason) == {"NodeFail"}
    assert set(zip(lost.time, lost.node)) <= set(drawn)
    for at, node in drawn:
        assert ((events.kind == "NodeDown") & (events.node == node) & (events.time == at)).sum() == 1
        assert ((events.kind == "NodeDrain") & (events.node == node) & (events.time == at - 120)).sum() == 1
    assert result.jobs.lost_work.sum() > 0 and not pods_on_unavailable_nodes(result)
    assert metrics.job_cost(result).interrupted.sum() == len(lost)


def test_a_pool_wide_process_takes_every_node_at_once_and_without_replacement_they_stay_down():
    scenario = _scenario(spot={"rate": 1, "per": "pool", "replaceAfter": None})
    drawn = [(path, e.at, e.node, e.kind) for path, e in node_events(scenario)]
    assert len(drawn) == 1 and drawn[0][0] == "cluster.pools[1].spot" and drawn[0][2:] == ("sp", "interrupt")
    result, _ = assert_same(scenario)
    at = drawn[0][1]
    down = result.events[result.events.kind == "NodeNotReady"]
    assert sorted(down.node) == ["sp-0", "sp-1"] and (down.time == at).all()
    assert (result.tasks[result.tasks.start > at].node.str.startswith("od-")).all()


def test_cost_per_job_queue_and_total_from_the_pool_prices():
    """What runs on spot costs its price; an interrupted job pays again for the work it lost, and
    the three views add up to the same total."""
    result = labkit.simulate(_scenario(spot={"rate": 0.5, "replaceAfter": "20m"}))
    jobs = metrics.job_cost(result)
    queues = metrics.cost(result)
    total = metrics.total_cost(result)
    assert jobs.cost.sum() == pytest.approx(total) == pytest.approx(queues.cost.sum())
    assert set(queues.queue) == {"a", "b"} and dict(zip(queues.pool, queues.price)) == {"od": 3.0, "sp": 1.0}
    tasks = result.tasks
    held = (tasks.end - tasks.start) * 8 / 3600
    on_spot = held[tasks.node.str.startswith("sp-")].sum()
    assert total == pytest.approx(3.0 * held.sum() - 2.0 * on_spot)
    hit = jobs[jobs.interrupted > 0]
    assert len(hit) and (hit.lost_work > 0).all()
    assert (hit.gpu_hours > 8 * 3 - 1e-9).all()  # 3 h of work on 8 GPUs, plus the lost runs
    assert (hit.lost_gpu_hours == hit.lost_work * 8 / 3600).all()
    assert metrics.total_cost(result, 2.0) == pytest.approx(2.0 * held.sum())


def test_cost_needs_every_pool_priced():
    data = _data()
    del data["cluster"]["pools"][0]["price"]
    result = labkit.simulate(spec.validate(data))
    with pytest.raises(ValueError, match=r"^cluster\.pools\[\]\.price: pool\(s\) od have no price"):
        metrics.total_cost(result)


@pytest.mark.parametrize("change, path, message", [
    ({"spot": {"rate": -1}}, "cluster.pools[1].spot.rate", "greater than 0"),
    ({"spot": {"rate": 1, "per": "zone"}}, "cluster.pools[1].spot.per", "'node' or 'pool'"),
    ({"price": -2}, "cluster.pools[1].price", "greater than or equal to 0"),
    ({"spot": {"rate": 1, "notice": "-1m"}}, "cluster.pools[1].spot.notice", "not a duration"),
])
def test_bad_spot_fields_name_the_field(change, path, message):
    data = _data()
    data["cluster"]["pools"][1].update(change)
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert str(err.value).startswith(path) and message in str(err.value) and "\n" not in str(err.value)


def test_a_spot_pool_needs_a_span_to_draw_over():
    with pytest.raises(SpecError, match=r"^cluster\.pools\[1\]\.spot\.until: .*horizon"):
        _scenario(spot={"rate": 1}, horizon=None)
    assert _interruptions(_scenario(spot={"rate": 1, "until": "10h"}, horizon=None))


def test_a_drawn_interruption_meeting_an_explicit_failure_names_both():
    data = _data(spot={"rate": 1, "per": "pool", "replaceAfter": None})
    at = _interruptions(spec.validate(data))[0][0]
    data["cluster"]["events"] = [{"at": at - 1, "node": "sp-0", "kind": "fail"}]
    with pytest.raises(SpecError, match=r"^cluster\.pools\[1\]\.spot: a drawn interrupt .*node sp-0 is already down"):
        spec.validate(data)


def test_cli_negative_rate_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ncluster:\n  pools:\n  - {name: a, count: 1, resources: {nvidia.com/gpu: 8}, "
                    "spot: {rate: -0.5}}\n")
    run = run_cli("validate", str(path))
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0 and "spot.rate" in run.stderr


def test_the_real_cluster_adapters_refuse_spot_pools():
    from labkit.k8s.manifests import manifests
    from labkit.slurm.conf import slurm_scenario

    with pytest.raises(SpecError, match=r"^cluster\.pools\[1\]\.spot: spot interruptions are simulated only"):
        manifests(_scenario(spot={"rate": 1}))
    with pytest.raises(SpecError, match=r"^cluster\.pools\[1\]\.spot: spot interruptions are simulated only"):
        slurm_scenario(_scenario(spot={"rate": 1}), "slurm-backfill")


def test_the_example_prices_its_spot_and_on_demand_pools_and_applies_its_changes():
    from pathlib import Path

    scenario = labkit.load(Path(labkit.__file__).parent / "examples" / "spot-and-changes.yaml")
    result = labkit.simulate(scenario)
    assert result.info["engine"] == "numba"
    queues = metrics.cost(result)
    assert set(queues.pool) == {"ondemand", "spot"} and (queues.cost > 0).all()
    jobs = metrics.job_cost(result)
    assert jobs.interrupted.sum() > 0 and jobs.lost_gpu_hours.sum() > 0
    said = result.events[result.events.kind.isin(["QueueUpdated", "PriorityClassUpdated"])]
    assert said.time.tolist() == [6 * 3600.0, 8 * 3600.0, 12 * 3600.0]
