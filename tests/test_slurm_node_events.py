"""Node events under the Slurm family, in both engines (engine/slurm/reference.py's docstring): a
failed node is DOWN and kills its jobs whole, each requeued (NODE_FAIL, then PENDING until its
BeginTime) or, with --no-requeue or JobRequeue=0, ended NodeFail; cordon and drain are Slurm's
DRAIN (running jobs run on, no new one starts); the main scheduler and backfill plan on nodes
neither DOWN nor DRAIN."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scenarios import assert_same, over_committed_nodes, pods_on_unavailable_nodes

import labkit
from labkit import spec
from labkit.engine.slurm.reference import CRED_EXPIRE
from labkit.results import summary
from labkit.spec import honoured

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NODE = {"nvidia.com/gpu": 8, "cpu": 8, "memory": "8000Mi"}
HOLD = CRED_EXPIRE + 1
"""A requeued job's BeginTime is now + cred_expire + 1 (job_mgr.c batch_requeue_fini)."""


def nodes(n: int, cpu: int = 1, gpu: int = 8) -> list[dict]:
    return [{"name": "node", "replicas": n, "resources": {"nvidia.com/gpu": gpu, "cpu": cpu}}]


def scenario(jobs: list[dict], events: list[dict], conf: dict | None = None, slurm: dict | None = None,
             count: int = 3) -> spec.Scenario:
    sched = {"policy": "custom", "slurm": conf} if conf is not None else {"policy": "slurm-backfill"}
    return spec.validate({"name": "slurm-nodes", "cluster": {"pools": [{"name": "n", "count": count, "resources": NODE}],
                                                              "events": events},
                          "slurm": slurm or {"partitions": [{"name": "gpu", "default": True}]},
                          "jobs": jobs, "scheduler": sched})


TRAIN = [{"name": "big", "tasks": nodes(2), "duration": "5h", "checkpointInterval": "1h"},
         {"name": "solo", "tasks": nodes(1), "duration": "5h"}]


def by_name(result):
    return result.jobs.set_index("name")


def of(result, kind: str, job: str | None = None):
    events = result.events
    chosen = events[events.kind == kind]
    return chosen if job is None else chosen[chosen.job == f"default/{job}"]


def test_a_down_node_requeues_its_jobs_whole_from_their_last_checkpoint():
    """`fail` sets the node DOWN: the 2-node job with a node there is killed on both nodes at once
    and requeued (BeginTime now + 121 s); it starts again when two nodes are up (the failed one
    recovers later than its BeginTime); the job on the third node runs on; the lost work is the
    time since the last checkpoint."""
    plain = labkit.simulate(scenario(TRAIN, []))
    start = by_name(plain).start
    node = plain.tasks[plain.tasks.job == "default/big"].node.iloc[0]
    fail, recover = 2.5 * 3600, 3 * 3600
    result, _ = assert_same(scenario(TRAIN, [{"at": fail, "node": node, "kind": "fail"},
                                             {"at": recover, "node": node, "kind": "recover"}]))
    said = f"requeue JobId=default/big due to failure of node {node}"
    evicted = of(result, "Evicted", "big")
    assert len(evicted) == 2 and (evicted.time == fail).all() and set(evicted.reason) == {"NodeFail"}
    assert set(evicted.message) == {said}
    assert of(result, "Restarting", "big").message.tolist() == [f"BeginTime={fail + HOLD:g} ({said})"]
    kinds = result.events[result.events.node == node].kind.tolist()
    assert "NodeDown" in kinds and "NodeUp" in kinds and "NodeNotReady" not in kinds
    jobs = by_name(result)
    ran = fail - start["big"]
    assert jobs.lost_work["big"] == pytest.approx(ran - math.floor(ran / 3600) * 3600)
    again = result.tasks[(result.tasks.job == "default/big") & (result.tasks.start > fail)]
    assert len(again) == 2 and (again.start == max(recover, fail + HOLD)).all()
    assert jobs.state["big"] == "Completed" and jobs.evictions["solo"] == 0 and jobs.lost_work["solo"] == 0
    assert jobs.end["solo"] == by_name(plain).end["solo"]
    assert not pods_on_unavailable_nodes(result) and not over_committed_nodes(result)


@pytest.mark.parametrize("job_requeue, requeue, ends", [
    (1, False, True),    # sbatch --no-requeue
    (0, None, True),     # JobRequeue=0
    (0, True, False),    # sbatch --requeue overrides JobRequeue=0
])
def test_a_job_that_may_not_be_requeued_ends_node_fail(job_requeue, requeue, ends):
    jobs = [dict(TRAIN[0], **({} if requeue is None else {"requeue": requeue})), TRAIN[1]]
    conf = {"SchedulerType": "sched/backfill", "JobRequeue": job_requeue}
    plain = labkit.simulate(scenario(jobs, [], conf))
    node = plain.tasks[plain.tasks.job == "default/big"].node.iloc[0]
    at = 7000.0
    result, _ = assert_same(scenario(jobs, [{"at": at, "node": node, "kind": "fail"}], conf))
    big = by_name(result).loc["big"]
    if ends:
        assert big.state == "NodeFail" and big.end == at
        ended = of(result, "NodeFail", "big")
        assert ended.reason.tolist() == ["NodeDown"]
        assert ended.message.tolist() == [f"Killing JobId=default/big on failed node {node}"]
        assert of(result, "Restarting", "big").empty
        assert summary(result)["nodefail"] == 1
    else:
        assert big.state == "Completed" and len(of(result, "Restarting", "big")) == 1
    assert not pods_on_unavailable_nodes(result)


@pytest.mark.parametrize("kind", ["cordon", "drain"])
def test_drain_keeps_the_running_job_and_starts_no_new_one(kind):
    """Slurm's DRAIN (cordon and drain alike): the job on the node runs to its end (no eviction,
    nothing lost); a 3-node job submitted meanwhile waits for the undrain."""
    jobs = [{"name": "a", "tasks": nodes(1), "duration": "2h"},
            {"name": "wide", "submit": "3h", "tasks": nodes(3), "duration": "1h"}]
    plain = labkit.simulate(scenario(jobs, []))
    node = plain.tasks[plain.tasks.job == "default/a"].node.iloc[0]
    undrain = 5 * 3600
    result, _ = assert_same(scenario(jobs, [{"at": "1h", "node": node, "kind": kind},
                                            {"at": undrain, "node": node, "kind": "uncordon"}]))
    jobs_now, before = by_name(result), by_name(plain)
    assert jobs_now.end["a"] == before.end["a"] and (result.jobs.evictions == 0).all()
    assert (result.jobs.lost_work == 0).all()
    assert before.start["wide"] == 3 * 3600 and jobs_now.start["wide"] == undrain
    kinds = result.events[result.events.node == node].kind.tolist()
    assert kinds.count("NodeDrain") == 1 and kinds.count("NodeUndrain") == 1
    assert not pods_on_unavailable_nodes(result)


def test_backfill_plans_without_the_down_node_and_follows_it_back():
    """A DOWN node is not in the plan: the 2-node job reserves the running job's node and the free
    one from its end (SchedNodeList without the down node), a short job is backfilled before that;
    once the node is up again the 2-node job starts at once."""
    jobs = [{"name": "a", "tasks": nodes(1), "timeLimit": "10m", "duration": 600},
            {"name": "b", "submit": 1, "tasks": nodes(2), "timeLimit": "10m", "duration": 300},
            {"name": "c", "submit": 2, "tasks": nodes(1), "timeLimit": "5m", "duration": 200}]
    plain = labkit.simulate(scenario(jobs, []))
    assert by_name(plain).start["b"] == 1  # on the two idle nodes
    down = [{"at": 0, "node": "n-2", "kind": "fail"}]
    result, _ = assert_same(scenario(jobs, down))
    jobs_now = by_name(result)
    planned = of(result, "StartTime", "b")
    assert len(planned) and not planned.message.str.contains("n-2").any()
    assert planned.message.iloc[0] == f"StartTime={jobs_now.end['a']:g} SchedNodeList=n-0,n-1"
    assert jobs_now.start["b"] == jobs_now.end["a"]
    assert jobs_now.start["c"] < jobs_now.end["a"]  # backfilled into the gap
    assert not pods_on_unavailable_nodes(result)
    back, _ = assert_same(scenario(jobs, down + [{"at": 3, "node": "n-2", "kind": "recover"}]))
    assert by_name(back).start["b"] == 3  # the main scheduler runs at the event (before backfill starts c)


def test_a_spot_interruption_drains_at_its_notice_and_requeues_at_its_time():
    """Under Slurm the notice drains the node (the job runs on: nothing is evicted then) and the
    node goes DOWN at the interruption, which requeues the job from its last checkpoint."""
    jobs = [{"name": "train", "tasks": nodes(1), "duration": "5h", "checkpointInterval": "1h"}]
    plain = labkit.simulate(scenario(jobs, []))
    node = plain.tasks.node.iloc[0]
    at = 3 * 3600
    result, _ = assert_same(scenario(jobs, [{"at": at, "node": node, "kind": "interrupt", "notice": "10m"}]))
    events = result.events[result.events.node == node]
    assert events[events.kind != "Bound"].kind.tolist() == ["NodeDrain", "NodeDown", "Evicted", "Deleted"]
    assert of(result, "NodeDrain").time.tolist() == [at - 600] and of(result, "Evicted").time.tolist() == [at]
    ran = at - plain.jobs.start.iloc[0]
    assert result.jobs.lost_work.iloc[0] == pytest.approx(ran - math.floor(ran / 3600) * 3600)
    assert labkit.metrics.job_cost(result, price=1.0).interrupted.iloc[0] == 1
    later = result.tasks[result.tasks.start > at]
    assert len(later) == 1 and later.node.iloc[0] != node and later.start.iloc[0] == at + HOLD


def test_a_suspended_job_on_a_down_node_is_requeued_and_loses_its_work_since_its_checkpoint():
    """PreemptMode=SUSPEND: the low job is suspended on its node for the high one; the node goes
    DOWN: both are killed and requeued; the suspended one loses its work since its last checkpoint
    (here all of it: it has none), the running one too."""
    cpu = [{"name": "node", "resources": {"cpu": 8}}]
    jobs = [{"name": "v", "duration": 1000, "tasks": cpu},
            {"name": "h", "submit": 10, "duration": 1000, "partition": "high", "tasks": cpu}]
    slurm = {"partitions": [{"name": "low", "default": True}, {"name": "high", "priorityTier": 10}]}
    conf = {"SchedulerType": "sched/backfill", "SchedulerParameters": "bf_interval=10",
            "PreemptType": "preempt/partition_prio", "PreemptMode": "SUSPEND"}
    at = 50.0
    result, _ = assert_same(scenario(jobs, [{"at": at, "node": "n-0", "kind": "fail"},
                                            {"at": 600, "node": "n-0", "kind": "recover"}], conf, slurm, count=1))
    assert len(of(result, "Suspended", "v")) == 1
    restarted = result.events[(result.events.kind == "Restarting") & (result.events.time == at)]
    assert set(restarted.job) == {"default/v", "default/h"}
    jobs_now = by_name(result)
    assert jobs_now.lost_work["v"] == pytest.approx(10) and jobs_now.lost_work["h"] == pytest.approx(at - 10)
    assert (result.jobs.state == "Completed").all() and not over_committed_nodes(result)


@pytest.mark.parametrize("policy, noted", [("slurm-backfill", []), ("volcano-shipped", ["jobs[0].requeue"])])
def test_node_events_and_requeue_are_honoured_under_slurm_and_requeue_noted_elsewhere(policy, noted):
    data = {"cluster": {"pools": [{"name": "n", "count": 2, "resources": NODE}],
                        "events": [{"at": 60, "node": "n-0", "kind": "fail"}]},
            "jobs": [{"name": "a", "requeue": False, "tasks": nodes(1), "duration": 100}],
            "scheduler": {"policy": policy}}
    family = "slurm" if policy.startswith("slurm") else "volcano"
    assert [path for path, _, _ in honoured.findings(spec.validate(data), family)] == noted


def test_the_sbatch_script_says_requeue_or_no_requeue(tmp_path):
    from labkit.slurm.conf import sbatch_script, slurm_jobs

    data = {"cluster": {"pools": [{"name": "n", "count": 1, "resources": NODE}]},
            "jobs": [{"name": f"j{i}", "tasks": nodes(1), "duration": 10, **extra}
                     for i, extra in enumerate([{}, {"requeue": True}, {"requeue": False}])],
            "scheduler": {"policy": "slurm-backfill"}}
    scripts = [sbatch_script(job, tmp_path) for job in slurm_jobs(spec.validate(data))]
    assert ["#SBATCH --requeue" in s for s in scripts] == [False, True, False]
    assert ["#SBATCH --no-requeue" in s for s in scripts] == [False, False, True]


def test_the_example_drains_one_node_ends_a_no_requeue_job_and_requeues_a_gang():
    scenario = labkit.load(EXAMPLES / "slurm-node-failure.yaml")
    at = {(e.node, e.kind): spec.quantity.parse_duration(e.at) for e in scenario.cluster.events}
    result, _ = assert_same(scenario)
    jobs = by_name(result)
    tasks = result.tasks
    assert tasks[tasks.job == "default/finetune"].node.tolist() == ["n-2"]  # ran on through the drain
    assert jobs.state.finetune == "Completed" and jobs.evictions.finetune == 0
    assert jobs.state.eval == "NodeFail" and jobs.end.eval == at["n-3", "fail"]
    assert jobs.start.sweep == at["n-3", "recover"]  # no idle node before n-3 is back (n-2 drained)
    fail = at["n-0", "fail"]
    assert jobs.lost_work.pretrain == fail - math.floor(fail / 60) * 60  # checkpointed each minute
    again = tasks[(tasks.job == "default/pretrain") & (tasks.start > fail)]
    assert len(again) == 2 and (again.start == fail + HOLD).all() and set(again.node) == {"n-0", "n-1"}
    assert jobs.state.pretrain == "Running"  # at the horizon
    assert "n-2" not in set(tasks[tasks.start > at["n-2", "drain"]].node)
    assert not pods_on_unavailable_nodes(result) and not over_committed_nodes(result)


def test_the_local_slurm_adapter_applies_node_events_with_scontrol(tmp_path):
    """`labkit slurm run` replays each event at its scaled time in Slurm's words; a failed node is
    drained before it is set DOWN (its slurmd still answers: ReturnToService=2 puts it back at once)
    and undrained when it recovers, unless an operator's drain holds; `labkit export slurm` writes
    them as a script."""
    from labkit.engine.events import NODE_KINDS
    from labkit.engine.slurm.reference import NODE_WORDS
    from labkit.slurm.conf import export, slurm_scenario
    from labkit.slurm.nodes import WORDS, NodeFlags, node_actions, scontrol_updates

    assert [WORDS[kind] for kind in NODE_KINDS] == list(NODE_WORDS)
    events = [{"at": 60, "node": "n-1", "kind": "cordon"}, {"at": 90, "node": "n", "kind": "fail"},
              {"at": 120, "node": "n", "kind": "recover"}, {"at": 300, "node": "n-0", "kind": "interrupt"}]
    given = scenario(TRAIN, events)
    expanded, _ = slurm_scenario(given)
    flags = NodeFlags()
    updates = [(action.at, update) for action in node_actions(expanded) for update in scontrol_updates(action, flags)]
    pool = "nodename=n-0,n-1,n-2"
    assert updates == [
        (60, ["update", "nodename=n-1", "state=DRAIN", "reason=labkit cordon at 60s"]),
        (90, ["update", pool, "state=DRAIN", "reason=labkit fail at 90s"]),
        (90, ["update", pool, "state=DOWN", "reason=labkit fail at 90s"]),
        (120, ["update", "nodename=n-0,n-2", "state=UNDRAIN"]),  # n-1 stays cordoned
        (180, ["update", "nodename=n-0", "state=DRAIN", "reason=labkit drain at 180s"]),  # the 2m notice
        (300, ["update", "nodename=n-0", "state=DRAIN", "reason=labkit fail at 300s"]),
        (300, ["update", "nodename=n-0", "state=DOWN", "reason=labkit fail at 300s"])]
    written = export(given, tmp_path, 2.0, "labkit export slurm")
    script = (tmp_path / "node-events.sh").read_text()
    assert tmp_path / "node-events.sh" in written
    assert script.splitlines()[2:5] == ["sleep 30", "scontrol update nodename=n-1 state=DRAIN 'reason=labkit cordon at 60s'",
                                        "sleep 15"]
