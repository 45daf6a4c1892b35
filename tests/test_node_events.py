"""Node events (`cluster.events`): failure and recovery, cordon, uncordon and drain, in both engines."""

import math
from pathlib import Path

import numpy as np
import pytest
from scenarios import assert_same, pods_on_unavailable_nodes, unconserved_work
from test_spec import run_cli

import labkit
from labkit import spec
from labkit.course.cases import case_study
from labkit.errors import SpecError
from labkit.spec.quantity import parse_duration


def _scenario(events, jobs=None, policy="volcano-shipped", horizon=None, **pool):
    data = {"name": "nodes", "cluster": {"pools": [{"name": "a", "count": 3, "resources": {
        "nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}, **pool}], "events": events},
        "jobs": jobs if jobs is not None else [
            {"name": "big", "tasks": [{"name": "w", "replicas": 2, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "5h", "checkpointInterval": "1h", "restartCost": "5m"},
            {"name": "solo", "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "5h"}],
        "scheduler": {"policy": policy}}
    if horizon is not None:
        data["horizon"] = horizon
    return spec.validate(data)


def _restarted(result, at):
    events = result.events
    return set(events[(events.kind == "Restarting") & (events.time == at)].job)


def _running_on(result, node, at):
    tasks = result.tasks
    stop = tasks.evicted.fillna(tasks.end).fillna(np.inf)
    return set(tasks[(tasks.node == node) & (tasks.start <= at) & (stop > at)].job)


def test_a_failed_node_restarts_its_jobs_from_their_last_checkpoint():
    """The gang with a pod on the failed node restarts; its lost work is the time since its last
    checkpoint; the job on another node runs on; the failed node takes no pod until it recovers."""
    fail, recover = 2.5 * 3600, 3 * 3600
    plain = labkit.simulate(_scenario([]))
    node = plain.tasks[plain.tasks.job == "default/big"].node.iloc[0]
    result, _ = assert_same(_scenario([{"at": fail, "node": node, "kind": "fail"},
                                       {"at": recover, "node": node, "kind": "recover"}]))
    assert _restarted(result, fail) == _running_on(plain, node, fail) == {"default/big"}
    jobs = result.jobs.set_index("name")
    ran = fail - plain.jobs.set_index("name").start["big"]
    assert jobs.lost_work["big"] == pytest.approx(ran - math.floor(ran / 3600) * 3600)
    assert jobs.lost_work["solo"] == 0 and jobs.evictions["solo"] == 0
    assert jobs.evictions["big"] == 1  # the pod on the failed node; its sibling is deleted by the restart
    assert jobs.end["big"] > plain.jobs.set_index("name").end["big"]
    assert not pods_on_unavailable_nodes(result)
    assert not unconserved_work(result)
    kinds = result.events[result.events.node == node].kind.tolist()
    assert kinds[kinds.index("NodeNotReady"):][:2] == ["NodeNotReady", "Evicted"] and "NodeReady" in kinds


def test_without_a_checkpoint_the_whole_run_is_lost():
    plain = labkit.simulate(_scenario([]))
    node = plain.tasks[plain.tasks.job == "default/solo"].node.iloc[0]
    at = 4000.0
    result, _ = assert_same(_scenario([{"at": at, "node": node, "kind": "fail"}]))
    start = plain.jobs.set_index("name").start["solo"]
    assert result.jobs.set_index("name").lost_work["solo"] == pytest.approx(at - start)
    assert _restarted(result, at) == {"default/solo"}


def test_cordon_keeps_new_pods_off_and_uncordon_lets_them_back():
    """A node cordoned from the start takes no pod while cordoned; the pods that would have used it
    wait; after uncordon it takes pods again. Running pods are not touched by a cordon."""
    jobs = [{"name": f"j{i}", "submit": 60 * i, "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "2h"} for i in range(6)]
    result, _ = assert_same(_scenario([{"at": 0, "node": "a-0", "kind": "cordon"},
                                       {"at": "3h", "node": "a-0", "kind": "uncordon"}], jobs=jobs))
    on = result.tasks[result.tasks.node == "a-0"]
    assert len(on) and (on.start >= 3 * 3600).all()
    assert (result.jobs.evictions == 0).all() and not pods_on_unavailable_nodes(result)


def test_drain_evicts_the_pods_and_a_pool_event_touches_every_node():
    jobs = [{"name": f"j{i}", "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "2h", "checkpointInterval": "30m"} for i in range(3)]
    at = 3000.0
    result, _ = assert_same(_scenario([{"at": at, "node": "a", "kind": "drain"}], jobs=jobs, horizon="10h"))
    evicted = result.events[(result.events.kind == "Evicted") & (result.events.time == at)]
    assert set(evicted.reason) == {"Drain"} and len(evicted) == 3
    assert evicted.message.str.startswith("evicting pod default/j").all()
    assert (result.jobs.lost_work == at - 1 - 1800).all()  # bound at 1 s, checkpoint at 30 min
    assert (result.jobs.state == "Inqueue").all() and not pods_on_unavailable_nodes(result)  # no node takes them


def test_an_elastic_job_loses_only_its_pod_on_the_failed_node():
    """Above minAvailable the job runs on (no restart, no lost work); its lost pod is recreated."""
    jobs = [{"name": "elastic", "minAvailable": 1, "tasks": [{"name": "w", "replicas": 3, "minAvailable": 1,
                                                                "resources": {"nvidia.com/gpu": 8}}],
             "duration": "2h", "checkpointInterval": "30m"}]
    result, _ = assert_same(_scenario([{"at": 1000, "node": "a-1", "kind": "fail"}], jobs=jobs))
    job = result.jobs.iloc[0]
    assert job.evictions == 1 and job.lost_work == 0 and job.state == "Completed"
    assert not _restarted(result, 1000)


def test_a_node_failure_in_the_case_study_restarts_the_jobs_on_it_from_their_checkpoints():
    """A node that runs a team-a pre-training gang fails: exactly the jobs with a pod on it
    restart, each losing the work since its last checkpoint (its checkpointInterval; all of it for
    a job without one), in both engines."""
    scenario = case_study(nodes=8, hours=72)
    plain = labkit.simulate(scenario)
    tasks = plain.tasks
    gang = tasks[tasks.job.str.startswith("team-a/") & tasks.evicted.isna()].iloc[0]
    at = float(gang.start) + 5.5 * 3600 + 17.0
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["horizon"] = at
    before = labkit.simulate(spec.validate(data))
    data["cluster"]["events"] = [{"at": at, "node": gang.node, "kind": "fail"}]
    failed, _ = assert_same(spec.validate(data))
    on_node = _running_on(before, gang.node, at)
    assert gang.job in on_node
    assert _restarted(failed, at) == on_node
    jobs = failed.scenario.jobs
    checkpoint = {f"{j.namespace}/{j.name}": j.checkpoint_interval for j in jobs}
    lost = failed.jobs.assign(key=failed.jobs.namespace + "/" + failed.jobs.name).set_index("key").lost_work
    had = before.jobs.assign(key=before.jobs.namespace + "/" + before.jobs.name).set_index("key")
    for job in on_node:
        assert had.evictions[job] == 0  # its first run: no restart cost, no earlier checkpoint kept
        ran = at - had.start[job]
        interval = checkpoint[job]
        expected = ran if interval is None else ran - math.floor(ran / parse_duration(interval)) * parse_duration(interval)
        assert lost[job] - had.lost_work[job] == pytest.approx(expected)
    others = [j for j in lost.index if j not in on_node]
    assert (lost[others] == had.lost_work[others]).all()


@pytest.mark.parametrize("events, path, message", [
    ([{"at": "1h", "node": "b-0", "kind": "fail"}], "cluster.events[0].node", "no node or pool named 'b-0'"),
    ([{"at": "1h", "node": "a-0", "kind": "recover"}], "cluster.events[0].kind", "node a-0 is not down"),
    ([{"at": "3h", "node": "a", "kind": "fail"}, {"at": "1h", "node": "a-0", "kind": "fail"}],
     "cluster.events[0].kind", "fail at 3h: node a-0 is already down since 1h"),
    ([{"at": "1h", "node": "a-0", "kind": "fail"}, {"at": "2h", "node": "a-0", "kind": "cordon"},
      {"at": "3h", "node": "a-0", "kind": "uncordon"}, {"at": "4h", "node": "a-0", "kind": "uncordon"}],
     "cluster.events[3].kind", "uncordon at 4h: node a-0 is not cordoned"),
    ([{"at": "1h", "node": "a-2", "kind": "uncordon"}], "cluster.events[0].kind", "node a-2 is not cordoned"),
    ([{"at": "1h", "node": "a", "kind": "cordon"}, {"at": "2h", "node": "a-1", "kind": "cordon"}],
     "cluster.events[1].kind", "already cordoned since 1h"),
    ([{"at": "1h", "node": "a-0", "kind": "reboot"}], "cluster.events[0].kind", "fail"),
    ([{"at": "-1h", "node": "a-0", "kind": "fail"}], "cluster.events[0].at", "not a duration"),
])
def test_bad_node_events_name_the_field(events, path, message):
    with pytest.raises(SpecError) as err:
        _scenario(events)
    assert str(err.value).startswith(path) and message in str(err.value) and "\n" not in str(err.value)


def test_kube_scheduler_filters_a_cordoned_node_and_a_failed_one_by_their_own_reasons():
    """Under kube-scheduler a cordoned node fails NodeUnschedulable and a NotReady one the
    TaintToleration filter (its node.kubernetes.io/unreachable taint); the pod lost on the failed
    node restarts its job from the last checkpoint; numba == reference."""
    jobs = [{"name": f"j{i}", "submit": 60 * i, "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "2h", "checkpointInterval": "30m"} for i in range(4)]
    result, _ = assert_same(_scenario([{"at": 100, "node": "a-2", "kind": "cordon"},
                                       {"at": 4000, "node": "a-0", "kind": "fail"},
                                       {"at": 9000, "node": "a-0", "kind": "recover"},
                                       {"at": 20000, "node": "a-2", "kind": "uncordon"}], jobs=jobs, policy="kube-default"))
    events = result.events
    failed = events[events.kind == "FailedScheduling"]
    before, during = failed[failed.time < 4000], failed[(failed.time >= 4000) & (failed.time < 9000)]
    assert len(before) and before.message.str.startswith(
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.").all()
    assert len(during) and during.message.str.contains(
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable", regex=False).all()
    lost = events[(events.kind == "Evicted") & (events.time == 4000)]
    assert lost.reason.tolist() == ["TaintManagerEviction"] and lost.node.tolist() == ["a-0"]
    job = lost.job.iloc[0]
    jobs_table = result.jobs.assign(key=result.jobs.namespace + "/" + result.jobs.name).set_index("key")
    start = events[(events.kind == "Started") & (events.job == job)].time.iloc[0]
    assert jobs_table.lost_work[job] == pytest.approx((4000 - start) % 1800)
    assert not pods_on_unavailable_nodes(result) and not unconserved_work(result)


def _kueue_with(events, ready=False):
    data = spec.load(Path(labkit.__file__).parent / "examples" / "kueue-cohort.yaml").model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["cluster"]["events"] = events
    data["scheduler"] = {"kueue": {"waitForPodsReady": {"enable": ready}}}
    for job in data["jobs"]:
        job["checkpointInterval"] = "10m"
    return spec.validate(data)


def test_under_kueue_a_workload_that_lost_a_pod_keeps_its_quota_and_runs_again():
    """Kueue: the admitted workload whose pod was on the failed node is not evicted by Kueue (no
    second QuotaReserved); its job restarts from its checkpoint and its pod binds again once a
    node of its flavor has room; numba == reference."""
    result, _ = assert_same(_kueue_with([{"at": 1000, "node": "a100-0", "kind": "fail"},
                                         {"at": 5000, "node": "a100-0", "kind": "recover"}]))
    events = result.events
    lost = events[(events.kind == "Evicted") & (events.reason == "TaintManagerEviction")]
    assert len(lost) == 1
    job = lost.job.iloc[0]
    assert (events[events.job == job].kind == "QuotaReserved").sum() == 1
    rebound = events[(events.kind == "Bound") & (events.job == job) & (events.time > 1000)]
    assert len(rebound) == 1 and (rebound.node.iloc[0] != "a100-0" or rebound.time.iloc[0] >= 5000)
    assert result.jobs.set_index("name").lost_work["a-train"] > 0
    assert (result.jobs.state == "Completed").all() and not pods_on_unavailable_nodes(result)


def test_kueue_with_wait_for_pods_ready_refuses_node_events():
    with pytest.raises(SpecError, match=r"^cluster\.events: node events with waitForPodsReady: .*recoveryTimeout"):
        labkit.simulate(_kueue_with([{"at": 1000, "node": "a100-0", "kind": "fail"}], ready=True))


def test_a_volcano_conf_without_predicates_refuses_node_events():
    conf = spec.policy("volcano-shipped").model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "predicates"]
    data = _scenario([{"at": "1h", "node": "a-0", "kind": "cordon"}]).model_dump(mode="json", by_alias=True,
                                                                                exclude_unset=True)
    data["scheduler"] = {"conf": conf}
    with pytest.raises(SpecError, match=r"^cluster\.events: node events: they need the predicates plugin"):
        labkit.simulate(spec.validate(data))


def test_cli_bad_node_event_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_YAML)
    run = run_cli("validate", str(path))
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "cluster.events[0].kind" in run.stderr


BAD_YAML = """name: bad
cluster:
  pools:
  - {name: a, count: 2, resources: {nvidia.com/gpu: 8}}
  events:
  - {at: 1h, node: a-1, kind: uncordon}
"""


def test_the_real_volcano_adapter_refuses_node_events():
    """(The local Slurm applies them with scontrol: tests/test_slurm_node_events.py.)"""
    from labkit.k8s.manifests import manifests

    scenario = _scenario([{"at": "1h", "node": "a-0", "kind": "drain"}])
    with pytest.raises(SpecError, match=r"^cluster\.events: node events are simulated only"):
        manifests(scenario)


def test_get_events_lists_the_node_events_as_a_cluster_records_them():
    from labkit.diagnose import get_events

    result = labkit.simulate(_scenario([{"at": 4000, "node": "a", "kind": "fail"}]))
    events = get_events(result)
    node = events[events.OBJECT == "node/a-0"]
    assert node.MESSAGE.tolist() == ["Node a-0 status is now: NodeNotReady"]
    lost = events[events.REASON == "TaintManagerEviction"]
    # big-w-1 on a-1 was deleted by its job's restart when a-0 failed, before a-1's turn
    assert len(lost) == 2 and lost.MESSAGE.str.startswith("Marking for deletion Pod default/").all()


def test_a_spot_interruption_drains_at_its_notice_and_fails_the_node():
    """`interrupt`: the notice drains the node (its pods evicted then, losing the work since their
    checkpoint), and the node fails at `at`; the job restarts elsewhere."""
    jobs = [{"name": "train", "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 8}}],
             "duration": "5h", "checkpointInterval": "1h"}]
    plain = labkit.simulate(_scenario([], jobs=jobs))
    node = plain.tasks.node.iloc[0]
    result, _ = assert_same(_scenario([{"at": "3h", "node": node, "kind": "interrupt", "notice": "10m"}], jobs=jobs))
    notice = 3 * 3600 - 600
    events = result.events
    assert events[(events.node == node) & (events.kind != "Bound")].kind.tolist() == [
        "NodeNotSchedulable", "Evicted", "Deleted", "NodeNotReady"]
    assert events[events.kind == "NodeNotReady"].time.tolist() == [3 * 3600]
    assert events[events.kind == "Evicted"].time.tolist() == [notice]
    ran = notice - plain.jobs.start.iloc[0]
    assert result.jobs.lost_work.iloc[0] == pytest.approx(ran - math.floor(ran / 3600) * 3600)
    later = result.tasks[result.tasks.start > notice]
    assert len(later) and (later.node != node).all() and not pods_on_unavailable_nodes(result)


@pytest.mark.parametrize("event, path, message", [
    ({"at": "1h", "node": "a-0", "kind": "fail", "notice": "2m"}, "cluster.events[0]", "notice applies to kind interrupt"),
    ({"at": "1m", "node": "a-0", "kind": "interrupt"}, "cluster.events[0]", "the notice (2m) would come before time 0"),
])
def test_bad_interruptions_name_the_field(event, path, message):
    with pytest.raises(SpecError) as err:
        _scenario([event])
    assert str(err.value).startswith(path) and message in str(err.value)
