"""The default kube-scheduler as a policy of the engine: NodeResourcesFit and BalancedAllocation
score math worked by hand, PriorityClass and queue order, default preemption (victims and node
tie-breaks), Coscheduling (Permit wait, timeout, PostFilter rejection), ResourceQuota admission
and LimitRange defaults, and FailedScheduling messages built from the per-node reasons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from scenarios import broken_gangs, kube_scenarios, over_committed_nodes, quota_exceeded

import labkit
from labkit import spec
from labkit.engine.families import compile_scenario
from labkit.engine.kube.reference import balanced_score, broken_linear, fit_error, fit_score
from labkit.engine.problem import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO, KubeArgs
from labkit.errors import SpecError

GPU8 = {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}


def args(strategy: int, weights=(1, 1), shape=()) -> KubeArgs:
    """KubeArgs over the resources (cpu, memory) with NodeResourcesFit weights `weights`."""
    return KubeArgs(strategy=strategy, fit_weights=np.array(weights, np.int64),
                    shape=np.array(shape, np.int64).reshape(-1, 2), balanced=np.array([True, True]),
                    fit_score_weight=1, balanced_score_weight=1, preemption=True, min_candidate_percentage=10,
                    min_candidate_absolute=100, coscheduling=False, permit_wait=60, percentage_of_nodes_to_score=0)


# ------------------------------------------------------------------------ score formulas by hand

# a node with 4000m cpu and 10000 bytes of memory; with the pod, 3000m and 5000 are requested
REQUESTED, ALLOCATABLE = np.array([3000.0, 5000.0]), np.array([4000.0, 10000.0])


def test_least_allocated():
    # cpu: (4000 - 3000) x 100 / 4000 = 25; memory: (10000 - 5000) x 100 / 10000 = 50
    # weights 1, 1: (25 + 50) / 2 = 37 (integer division)
    assert fit_score(args(LEAST_ALLOCATED), REQUESTED, ALLOCATABLE) == 37
    # weights cpu 3, memory 1: (25 x 3 + 50 x 1) / 4 = 125 / 4 = 31
    assert fit_score(args(LEAST_ALLOCATED, (3, 1)), REQUESTED, ALLOCATABLE) == 31
    # more requested than allocatable scores 0 for that resource: (0 + 50) / 2 = 25
    assert fit_score(args(LEAST_ALLOCATED), np.array([5000.0, 5000.0]), ALLOCATABLE) == 25


def test_most_allocated():
    # cpu: 3000 x 100 / 4000 = 75; memory: 5000 x 100 / 10000 = 50; (75 + 50) / 2 = 62
    assert fit_score(args(MOST_ALLOCATED), REQUESTED, ALLOCATABLE) == 62
    # requested above allocatable counts as full: min(5000, 4000) x 100 / 4000 = 100; (100 + 50) / 2 = 75
    assert fit_score(args(MOST_ALLOCATED), np.array([5000.0, 5000.0]), ALLOCATABLE) == 75


def test_requested_to_capacity_ratio():
    # shape {0: 0, 100: 10}, scores x 10 -> {0: 0, 100: 100}: utilization 75 -> 75, 50 -> 50;
    # mean (75 + 50) / 2 = 62.5, rounded (math.Round) to 63, where MostAllocated truncates to 62
    binpack = args(REQUESTED_TO_CAPACITY_RATIO, shape=[(0, 0), (100, 100)])
    assert fit_score(binpack, REQUESTED, ALLOCATABLE) == 63
    # shape {0: 10, 100: 0} (spread): 75 -> 25, 50 -> 50, round(37.5) = 38
    spread = args(REQUESTED_TO_CAPACITY_RATIO, shape=[(0, 100), (100, 0)])
    assert fit_score(spread, REQUESTED, ALLOCATABLE) == 38
    # resources scoring 0 leave the mean: cpu at 100% utilization scores 0 under the spread shape
    assert fit_score(spread, np.array([4000.0, 5000.0]), ALLOCATABLE) == 50


def test_broken_linear_truncates_like_go():
    # between (0, 100) and (30, 0), at 10: 100 + (0 - 100) x (10 - 0) / 30 = 100 + (-1000 / 30);
    # Go truncates -33.3 to -33 (Python's // would give -34): 67
    shape = np.array([[0, 100], [30, 0]])
    assert broken_linear(shape, 10) == 67
    assert broken_linear(shape, 40) == 0 and broken_linear(np.array([[20, 50], [80, 90]]), 5) == 50


def test_balanced_allocation():
    # fractions cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5: std = |0.75 - 0.5| / 2 = 0.125
    # (1 - 0.125) x 100 = 87.5 -> 87
    assert balanced_score([0.75, 0.5]) == 87
    # three fractions 0.2, 0.5, 0.8: mean 0.5, std = sqrt((0.09 + 0 + 0.09) / 3) = 0.2449: 75.5 -> 75
    assert balanced_score([0.2, 0.5, 0.8]) == 75
    assert balanced_score([0.3]) == 100


def test_fit_error_message():
    # kube-scheduler sorts "<count> <reason>" as strings and joins them with ", "
    statuses = {0: ["Insufficient nvidia.com/gpu"], 1: ["Insufficient cpu", "Insufficient nvidia.com/gpu"],
                2: ["node(s) had untolerated taint {gpu: true}"]}
    assert fit_error(3, statuses) == ("0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated "
                                      "taint {gpu: true}, 2 Insufficient nvidia.com/gpu.")
    assert fit_error(4, {}, absent="Preemption is not helpful for scheduling") == \
        "0/4 nodes are available: 4 Preemption is not helpful for scheduling."


# ------------------------------------------------------------------------ scenarios


def scenario(jobs: list[dict], pools: list[dict] | None = None, policy: str | dict = "kube-default",
             tenants: list[dict] | None = None) -> spec.Scenario:
    sched = {"policy": policy} if isinstance(policy, str) else {"policy": "custom", "kube": policy}
    classes = [{"name": "p10", "value": 10}, {"name": "p20", "value": 20}, {"name": "p100", "value": 100},
               {"name": "never", "value": 100, "preemptionPolicy": "Never"}]
    return spec.validate({"name": "kube", "cluster": {"pools": pools or [{"name": "g", "count": 2, "resources": GPU8}]},
                          "tenants": tenants or [], "priorityClasses": classes, "jobs": jobs, "scheduler": sched})


def job(name: str, gpus: int = 8, replicas: int = 1, submit: float = 0, duration: float = 600, cls: str = "p10",
        **extra) -> dict:
    task = {"name": "worker", "replicas": replicas, "resources": {"nvidia.com/gpu": gpus, "cpu": 1},
            **extra.pop("task", {})}
    return {"name": name, "priorityClassName": cls, "submit": submit, "duration": duration, "gracePeriod": 0,
            "tasks": [task], **extra}


def on(pool: str) -> dict:
    return {"task": {"nodeSelector": {"pool": pool}}}


def pinned_pools(count: int = 2) -> list[dict]:
    return [{"name": f"g{i}", "count": 1, "resources": GPU8, "labels": {"pool": f"g{i}"}} for i in range(count)]


def starts(result: labkit.Result) -> dict:
    return result.jobs.set_index("name").start.to_dict()


def messages(result: labkit.Result, kind: str) -> list[str]:
    return list(result.events[result.events.kind == kind].message)


def test_least_allocated_spreads_and_most_allocated_packs():
    jobs = [job("a", gpus=2, duration=100), job("b", gpus=2, submit=1, duration=100)]
    spread = labkit.simulate(scenario(jobs))
    assert spread.tasks.node.nunique() == 2
    most = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}}]}]}
    packed = labkit.simulate(scenario(jobs, policy=most))
    assert packed.tasks.node.nunique() == 1


def test_queue_order_is_priority_then_time():
    # one 8-GPU node busy until 100; three pods wait; the higher priority goes first, then the earlier
    jobs = [job("busy", duration=100, cls="p100"), job("late-low", submit=10, cls="p10"),
            job("early-low", submit=5, cls="p10"), job("high", submit=20, cls="p20")]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools(1)))
    got = starts(result)
    assert got["high"] == 100 and got["early-low"] == 700 and got["late-low"] == 1300


def test_preemption_picks_the_node_with_the_lowest_highest_victim():
    # g0 holds two priority-10 pods, g1 one priority-20 pod; an 8-GPU priority-100 pod preempts on g0
    # (highest victim 10 < 20) although it must evict two pods there
    jobs = [job("g0-a", gpus=4, **on("g0")), job("g0-b", gpus=4, submit=1, **on("g0")),
            job("g1-a", gpus=8, cls="p20", **on("g1")), job("vip", submit=10, cls="p100")]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools()))
    evicted = set(result.events[result.events.kind == "Evicted"].job)
    assert evicted == {"default/g0-a", "default/g0-b"}
    assert result.tasks.set_index("job").node["default/vip"] == "g0-0"
    assert "Preempted by pod default/vip-worker-0 on node g0-0" in messages(result, "Evicted")


def test_preemption_tie_breaks_fewest_victims_then_latest_start():
    # equal highest priority (10): g0 needs both its pods, g1 one pod: fewer victims (and a smaller sum) wins
    jobs = [job("g0-a", gpus=4, **on("g0")), job("g0-b", gpus=4, **on("g0")),
            job("g1-a", gpus=8, **on("g1")), job("vip", submit=10, cls="p100")]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools()))
    assert set(result.events[result.events.kind == "Evicted"].job) == {"default/g1-a"}
    # one victim each: the node whose victim started latest (g1, at 5 s) is chosen
    jobs = [job("g0-a", gpus=8, **on("g0")), job("g1-a", gpus=8, submit=5, **on("g1")),
            job("vip", submit=10, cls="p100")]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools()))
    assert set(result.events[result.events.kind == "Evicted"].job) == {"default/g1-a"}


def test_reprieve_keeps_the_victims_not_needed():
    # g0: a priority-20 pod (4 GPUs) and two priority-10 pods (2 GPUs each); a 4-GPU preemptor needs
    # 4 GPUs: all three lower pods are removed, then the most important (priority 20) is added back
    # and still fits: only the two priority-10 pods are victims
    jobs = [job("mid", gpus=4, cls="p20", **on("g0")), job("low-a", gpus=2, **on("g0")),
            job("low-b", gpus=2, **on("g0")), job("vip", gpus=4, submit=10, cls="p100", **on("g0"))]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools(1)))
    assert set(result.events[result.events.kind == "Evicted"].job) == {"default/low-a", "default/low-b"}


def test_preemption_policy_never_and_the_terminating_nominated_node():
    jobs = [job("low", duration=1000, gracePeriod=30, **on("g0")), job("nv", submit=1, cls="never", **on("g0")),
            job("vip", submit=2, cls="p100", **on("g0")), job("vip2", submit=10, cls="p100", **on("g0"))]
    for j in jobs:
        j["gracePeriod"] = 30
    result = labkit.simulate(scenario(jobs, pools=pinned_pools(1)))
    failed = dict(zip(result.events[result.events.kind == "FailedScheduling"].task,
                      result.events[result.events.kind == "FailedScheduling"].message))
    assert failed["default/nv-worker-0"] == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
                                             "preemption: not eligible due to preemptionPolicy=Never.")
    # vip preempted low and is nominated to g0-0 while low terminates (30 s)
    nominated = result.events[(result.events.kind == "Pipelined") & (result.events.job == "default/vip")]
    assert list(nominated.message) == ["nominatedNodeName=g0-0"]
    again = result.events[(result.events.job == "default/vip") & (result.events.kind == "FailedScheduling")]
    assert again.message.str.endswith("preemption: not eligible due to a terminating pod on the nominated node.").any()
    got = starts(result)
    assert got["vip"] == 32  # low's grace period ends at 2 + 30
    assert got["nv"] > got["vip"]  # Never pods wait their turn in the queue


def test_failed_scheduling_reasons_per_node():
    pools = [{"name": "small", "count": 1, "resources": {"nvidia.com/gpu": 2, "cpu": 32, "memory": "256Gi"}},
             {"name": "tainted", "count": 1, "resources": GPU8, "taints": [{"key": "gpu", "value": "true",
                                                                             "effect": "NoSchedule"}]},
             {"name": "full", "count": 1, "resources": {**GPU8, "pods": 1}, "labels": {"pool": "full"}}]
    jobs = [job("filler", gpus=1, **on("full")), job("big", gpus=4, submit=5)]
    result = labkit.simulate(scenario(jobs, pools=pools))
    assert messages(result, "FailedScheduling")[0] == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods, 1 node(s) had untolerated taint "
        "{gpu: true}. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.")


# ------------------------------------------------------------------------ Coscheduling


def test_gang_waits_at_permit_and_times_out():
    # one 10-GPU node, a 1-GPU blocker until 200 s; a PodGroup of 10 one-GPU pods: 9 fit and wait at Permit
    # (a 10% gap: PostFilter keeps them waiting); after 60 s (permitWaitingTimeSeconds) the wait times out,
    # Unreserve rejects the 8 other waiting pods, and the group is reserved again, every 60 s; when the
    # blocker ends the 10th fits and all 10 bind at once
    pools = [{"name": "g", "count": 1, "resources": {"nvidia.com/gpu": 10, "cpu": 32, "memory": "256Gi"}}]
    jobs = [job("blocker", gpus=1, duration=200), job("gang", gpus=1, replicas=10, submit=1, duration=50)]
    result = labkit.simulate(scenario(jobs, pools=pools, policy="kube-coscheduling"))
    timeouts = result.events[result.events.message == "rejected due to timeout after waiting 1m0s at plugin Coscheduling"]
    assert list(timeouts.time) == [61.0]  # logged once: a note is logged again only when it changes
    siblings = result.events[result.events.message == "rejection in Unreserve"]
    assert len(siblings) == 8 and set(siblings.time) == {61.0}
    gang = result.tasks[result.tasks.job == "default/gang"]
    assert len(gang) == 10 and set(gang.start) == {200.0}
    assert not broken_gangs(result)


def test_preempting_a_pod_waiting_at_permit_rejects_it():
    # two usable 4-GPU nodes; `big` (high, 2 GPUs) holds one until 511 s; gang `low` (3 x 3 GPUs, minMember 2)
    # keeps one pod reserved at Permit on the free node; when `big` ends, gang `high` (2 x 3 GPUs) takes one
    # node and preempts the waiting pod on the other. A waiting victim is rejected (prepareCandidate:
    # waitingPod.Reject "preempted"), not deleted with a grace period, so `high` binds at that instant and
    # `low`'s reserved pod never runs alone (hypothesis found it bound alone at 540 s, its sibling counted
    # while terminating)
    pools = [{"name": "p0", "count": 2, "resources": {"nvidia.com/gpu": 4, "cpu": 32, "memory": "256Gi"}}]
    jobs = [job("big", gpus=2, duration=511, cls="p100"), job("a", gpus=1, duration=60), job("b", gpus=1, duration=60),
            job("low", gpus=3, replicas=3, duration=60, gracePeriod=30, task={"minAvailable": 2}),
            job("high", gpus=3, replicas=2, duration=60, cls="p100")]
    case = scenario(jobs, pools=pools, policy="kube-coscheduling")
    results = [labkit.simulate(case, engine=engine) for engine in ("numba", "reference")]
    for result in results:
        assert not broken_gangs(result)
        events, tasks = result.events, result.tasks
        rejected = events[events.message == "preempted"]
        assert len(rejected) == 1 and rejected.task.iloc[0].startswith("default/low-")
        assert not (events.kind == "Evicted").any()
        big_end = tasks[tasks.job == "default/big"].end.iloc[0]
        assert set(tasks[tasks.job == "default/high"].start) == {big_end}
    pd.testing.assert_frame_equal(results[0].tasks, results[1].tasks)
    pd.testing.assert_frame_equal(results[0].events, results[1].events)


def test_gang_rejected_in_post_filter_and_partial_pods_without_coscheduling():
    # 2 nodes x 8 GPUs, one busy: a 4 x 4-GPU gang: 2 reserve, the 3rd fails: a 50% gap, the waiting
    # siblings are rejected ("optimistic rejection in PostFilter")
    jobs = [job("busy", gpus=8, duration=300, **on("g1")), job("gang", gpus=4, replicas=4, submit=1, duration=60)]
    result = labkit.simulate(scenario(jobs, pools=pinned_pools(), policy="kube-coscheduling"))
    assert "optimistic rejection in PostFilter" in messages(result, "FailedScheduling")
    assert any(m.endswith("PodGroup default/gang gets rejected due to Pod gang-worker-2 is unschedulable even after "
                          "PostFilter") for m in messages(result, "FailedScheduling"))
    assert starts(result)["gang"] == 300 and not broken_gangs(result)
    # the default scheduler binds pods one by one: half the gang holds g0 doing nothing until busy ends
    partial = labkit.simulate(scenario(jobs, pools=pinned_pools()))
    early = partial.tasks[(partial.tasks.job == "default/gang") & (partial.tasks.start < 300)]
    assert len(early) == 2 and starts(partial)["gang"] == 300


# ------------------------------------------------------------------------ admission: ResourceQuota, LimitRange


def test_resource_quota_rejects_at_pod_creation():
    tenants = [{"name": "team-a", "resourceQuota": {"hard": {"requests.nvidia.com/gpu": 12}}}]
    jobs = [job("first", gpus=8, namespace="team-a", duration=100),
            job("second", gpus=6, namespace="team-a", submit=10, duration=100)]
    result = labkit.simulate(scenario(jobs, tenants=tenants))
    rejected = result.events[result.events.kind == "Rejected"]
    assert list(rejected.reason) == ["FailedCreate"]
    assert rejected.message.iloc[0] == ('pods "second-worker-0" is forbidden: exceeded quota: team-a, requested: '
                                        'requests.nvidia.com/gpu=6, used: requests.nvidia.com/gpu=8, limited: '
                                        'requests.nvidia.com/gpu=12')
    # the Job controller retries: the pod is created once the first job's pod is gone
    assert starts(result)["second"] == 100
    assert not quota_exceeded(result)


def test_limit_range_defaults_count_against_the_quota():
    # pods asking no cpu get LimitRange defaultRequest cpu 4; the quota allows 8 cpus: the third is refused
    tenants = [{"name": "team-a", "resourceQuota": {"hard": {"requests.cpu": 8}},
                "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "4"}}]}}]
    jobs = [{"name": "three", "namespace": "team-a", "duration": 100,
             "tasks": [{"replicas": 3, "minAvailable": 1, "resources": {"nvidia.com/gpu": 1}}]}]
    result = labkit.simulate(scenario(jobs, tenants=tenants))
    assert messages(result, "Rejected") == [('pods "three-worker-2" is forbidden: exceeded quota: team-a, '
                                             'requested: requests.cpu=4, used: requests.cpu=8, limited: requests.cpu=8')]
    assert (result.tasks.cpu == 4).all()
    # without the LimitRange a pod that sets no cpu request is refused outright
    bare = labkit.simulate(scenario(jobs, tenants=[{"name": "team-a", "resourceQuota": {"hard": {"requests.cpu": 8}}}]))
    assert messages(bare, "Rejected")[0] == ('pods "three-worker-0" is forbidden: failed quota: team-a: '
                                             'must specify requests.cpu')


# ------------------------------------------------------------------------ properties and bad input


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kube_scenarios())
def test_kube_invariants(scenario):
    result = labkit.simulate(scenario)
    assert not over_committed_nodes(result)
    assert not quota_exceeded(result)
    if spec.scheduler_of(scenario).kube.profile.enabled("permit"):
        assert not broken_gangs(result)  # Coscheduling binds a group only once minMember are reserved


@pytest.mark.parametrize("args, message", [
    ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}, "Input should be greater than or equal to 1"),
    ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}}, "Input should be less than or equal to 100"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "requestedToCapacityRatio: required"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 5}]}}}, "sorted in increasing order"),
    ({"scoringStrategy": {"type": "Packed"}}, "scoringStrategy.type"),
])
def test_bad_node_resources_fit_args(args, message):
    bad = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]}]}
    with pytest.raises(SpecError) as err:
        scenario([job("a")], policy=bad)
    text = str(err.value)
    assert text.startswith("scheduler.kube.profiles[0].pluginConfig[0]: args.") and message in text and "\n" not in text


@pytest.mark.parametrize("kube, message", [
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "Magic"}]}}}]}, "unknown plugin 'Magic'"),
    ({"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}]},
     "exactly one queueSort plugin"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "PrioritySort"}]}}}]}, "PrioritySort does not extend score"),
    ({"profiles": [{"pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": -1}}]}]},
     "args.permitWaitingTimeSeconds"),
])
def test_bad_kube_profiles(kube, message):
    with pytest.raises(SpecError) as err:
        scenario([job("a")], policy=kube)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_pod_group_backoff_is_refused():
    kube = {"profiles": [{"pluginConfig": [{"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 10}}]}]}
    with pytest.raises(SpecError, match="podGroupBackoffSeconds is not simulated"):
        compile_scenario(scenario([job("a")], policy=kube))
