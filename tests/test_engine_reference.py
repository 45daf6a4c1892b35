"""Plugin math and vote rules of the reference engine, checked against hand derivations and
the numbers Volcano's own unit tests publish."""

import numpy as np
import pytest

from labkit.conformance import DEFAULT_CASES
from labkit.conformance.cases import load_case
from labkit.conformance.runner import read_cases
from labkit.engine.framework import ABSTAIN, PERMIT, REJECT, PriorityQueue
from labkit.engine.problem import CPU, MEMORY, PODS, Ext, Plugin, PodGroupPhase, TaskStatus
from labkit.engine.volcano.reference import open_session, podgroup_phase, run_session
from labkit.errors import SpecError

CASES = {c["id"]: c for c in read_cases(DEFAULT_CASES)}
GI = 2.0**30


def entry_of(ssn, kind):
    return next(e for tier in ssn.tiers for e in tier if e.kind == kind)


def case_with(config, **parts):
    return {"config": config, "queues": [{"name": "q1"}],
            "podgroups": [{"name": "pg1", "ns": "c1", "queue": "q1", "minMember": 1, "phase": "Inqueue"}],
            **parts}


# --- proportion ------------------------------------------------------------------------------

def test_proportion_deserved_redistributes_unused_share():
    """alloc-06: 5 cpu / 5G between two weight-1 queues that both want 3 cpu. Each deserves
    half the cpu; q-2 asks only 2G memory, so the memory it leaves flows to q-1, which is
    capped by its own request (1G running + 2G pending)."""
    problem, state = load_case(CASES["alloc-06-queue-order-by-share-allocatable-off"])
    ssn = open_session(problem, state)
    attrs = entry_of(ssn, Plugin.PROPORTION).plugin.attrs
    q1, q2 = problem.queue_names.index("q-1"), problem.queue_names.index("q-2")
    total = ssn.total_resource
    request_q1 = attrs[q1].request
    request_q2 = attrs[q2].request
    assert attrs[q1].deserved[CPU] == pytest.approx(total[CPU] / 2)
    assert attrs[q2].deserved[CPU] == pytest.approx(total[CPU] / 2)
    assert attrs[q2].deserved[MEMORY] == pytest.approx(request_q2[MEMORY])
    assert attrs[q1].deserved[MEMORY] == pytest.approx(min(request_q1[MEMORY], total[MEMORY] - request_q2[MEMORY]))
    # share = max over deserved dims of allocated/deserved; q-1 runs one 1-cpu, 1G pod
    allocated = attrs[q1].allocated
    expect = max(allocated[r] / attrs[q1].deserved[r] for r in (CPU, MEMORY, PODS))
    assert attrs[q1].share == pytest.approx(expect)
    assert attrs[q2].share == 0


def test_proportion_queue_order_prefers_lower_share():
    problem, state = load_case(CASES["alloc-06-queue-order-by-share-allocatable-off"])
    ssn = open_session(problem, state)
    q1, q2 = (ssn.queues[problem.queue_names.index(n)] for n in ("q-1", "q-2"))
    assert ssn.queue_order(q2, q1) and not ssn.queue_order(q1, q2)


# --- drf -------------------------------------------------------------------------------------

def test_drf_share_is_dominant_resource_fraction():
    problem, state = load_case(CASES["alloc-06-queue-order-by-share-allocatable-off"])
    ssn = open_session(problem, state)
    shares = entry_of(ssn, Plugin.DRF).plugin.shares
    small = problem.job_names.index("ns-1/pg-small-1")
    request = problem.task_request[problem.task_names.index("ns-1/pod-small-1")]
    total = problem.node_allocatable.sum(axis=0)
    assert shares[small] == pytest.approx(max(request / total))
    assert all(shares[j] == 0 for j in range(problem.n_jobs) if j != small)


# --- binpack ---------------------------------------------------------------------------------

BINPACK_ARGS = {"binpack.weight": 10, "binpack.cpu": 2, "binpack.memory": 3,
                "binpack.resources": "nvidia.com/gpu, example.com/foo",
                "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": 8}


def binpack_session():
    """binpack_test.go TestNode: p1 runs on n1, p2 on n3; p3 (with 2 gpus) and p4 (with 3 foo)
    are pending; n2 has 4 gpus, n3 has 16 foo."""
    pods = [
        {"name": "p1", "ns": "c1", "podgroup": "pg1", "phase": "Pending", "node": "n1",
         "requests": {"cpu": "1", "memory": "1Gi"}},
        {"name": "p2", "ns": "c1", "podgroup": "pg1", "phase": "Pending", "node": "n3",
         "requests": {"cpu": "1.5", "memory": "0Gi"}},
        {"name": "p3", "ns": "c1", "podgroup": "pg1", "phase": "Pending",
         "requests": {"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "2"}},
        {"name": "p4", "ns": "c1", "podgroup": "pg1", "phase": "Pending",
         "requests": {"cpu": "3", "memory": "4Gi", "example.com/foo": "3"}},
    ]
    nodes = [{"name": "n1", "cpu": "2", "memory": "4Gi", "pods": 10},
             {"name": "n2", "cpu": "4", "memory": "16Gi", "pods": 10, "gpu": 4},
             {"name": "n3", "cpu": "2", "memory": "4Gi", "pods": 10, "scalars": {"example.com/foo": 16}}]
    config = {"actions": ["allocate"],
              "tiers": [[{"name": "binpack", "enabled": ["nodeOrder"], "arguments": BINPACK_ARGS}]]}
    problem, state = load_case(case_with(config, nodes=nodes, pods=pods))
    return problem, open_session(problem, state)


@pytest.mark.parametrize("pod, node, derived, volcano", [
    # 100 * weight * sum(w_r * (req_r + used_r) / alloc_r) / sum(w_r), over requested scored dims
    ("c1/p1", "n1", 10 * 100 * (2 * (1 + 1) / 2 + 3 * (1 + 1) / 4) / (2 + 3), 700),
    ("c1/p1", "n2", 10 * 100 * (2 * 1 / 4 + 3 * 1 / 16) / (2 + 3), 137.5),
    ("c1/p1", "n3", 0.0, 0),  # 1 cpu more than the 0.5 left by p2: the node scores 0
    ("c1/p3", "n2", 10 * 100 * (2 * 2 / 4 + 3 * 10 / 16 + 7 * 2 / 4) / (2 + 3 + 7), 531.25),
    # n2 has no example.com/foo: the dimension scores 0 but keeps its weight 8
    ("c1/p4", "n2", 10 * 100 * (2 * 3 / 4 + 3 * 4 / 16 + 0) / (2 + 3 + 8), 173.076923076),
])
def test_binpack_scores(pod, node, derived, volcano):
    problem, ssn = binpack_session()
    task = ssn.tasks[problem.task_names.index(pod)]
    n = ssn.nodes[problem.node_names.index(node)]
    score = ssn.node_score(task, [n])[0]
    assert score == pytest.approx(derived)
    assert score == pytest.approx(volcano, abs=1e-6)


def nodeorder_session(kubernetes):
    """n1 (4 cpu, 4Gi) is empty; n2 runs a pod of 2Gi and no cpu; p2 asks for 2 cpu and no memory.
    Only nodeorder's BalancedAllocation scores (leastrequested.weight 0)."""
    pods = [{"name": "p1", "ns": "c1", "podgroup": "pg1", "phase": "Running", "node": "n2",
             "requests": {"memory": "2Gi"}},
            {"name": "p2", "ns": "c1", "podgroup": "pg1", "phase": "Pending", "requests": {"cpu": "2"}}]
    nodes = [{"name": n, "cpu": "4", "memory": "4Gi", "pods": 10} for n in ("n1", "n2")]
    arguments = {"leastrequested.weight": 0, "balancedresource.weight": 1}
    if kubernetes:
        arguments["balancedresource.kubernetes"] = kubernetes
    config = {"actions": ["allocate"], "tiers": [[{"name": "nodeorder", "enabled": ["nodeOrder"],
                                                   "arguments": arguments}]]}
    problem, state = load_case(case_with(config, nodes=nodes, pods=pods))
    return problem, open_session(problem, state)


@pytest.mark.parametrize("kubernetes, n1, n2", [
    # (1 - std after) x 100: n1 cpu 0.5, memory 0 -> std 0.25; n2 0.5 and 0.5 -> std 0
    (None, 75, 100), ("1.35", 75, 100),
    # 75 + 50 x (std before - std after): n1 0 -> 0.25 (62.5, truncated); n2 0.25 -> 0
    ("1.36", 62, 87), ("v1.37.0", 62, 87),
])
def test_balanced_allocation_scores_by_kubernetes_version(kubernetes, n1, n2):
    problem, ssn = nodeorder_session(kubernetes)
    task = ssn.tasks[problem.task_names.index("c1/p2")]
    assert ssn.node_score(task, list(ssn.nodes)) == [n1, n2]


@pytest.mark.parametrize("value", [1.36, "1.x", "2.0"])
def test_balanced_allocation_version_must_be_a_quoted_kubernetes_version(value):
    with pytest.raises(SpecError, match="balancedresource.kubernetes"):
        nodeorder_session(value)


# --- vote combination (session_plugins.go) ---------------------------------------------------

def vote_session():
    """A session with two tiers of two plugin entries each, all extension points on."""
    config = {"actions": ["allocate"],
              "tiers": [[{"name": "gang", "enabled": list(_ALL)}, {"name": "priority", "enabled": list(_ALL)}],
                        [{"name": "drf", "enabled": list(_ALL)}, {"name": "proportion", "enabled": list(_ALL)}]]}
    pods = [{"name": f"p{i}", "ns": "c1", "podgroup": "pg1", "phase": "Pending", "requests": {"cpu": "1"}}
            for i in range(3)]
    problem, state = load_case(case_with(config, nodes=[{"name": "n1", "cpu": "4", "memory": "4Gi", "pods": 10}],
                                         pods=pods))
    ssn = open_session(problem, state)
    ssn._fns.clear()
    entries = [e for tier in ssn.tiers for e in tier]
    return ssn, entries


_ALL = ["jobOrder", "queueOrder", "taskOrder", "jobReady", "jobPipelined", "jobStarving", "jobEnqueued",
        "preemptable", "reclaimable", "preemptive", "overused", "allocatable", "predicate", "nodeOrder"]


def victims(*tasks):
    return lambda preemptor, candidates: (list(tasks), PERMIT)


def test_preemptable_intersects_within_a_tier():
    ssn, (a, b, c, _) = vote_session()
    t0, t1, t2 = ssn.tasks
    ssn.add_fn("preemptable", a, victims(t0, t1))
    ssn.add_fn("preemptable", b, victims(t1, t2))
    ssn.add_fn("preemptable", c, victims(t2))
    assert ssn.preemptable(t0, ssn.tasks) == [t1]


def test_preemptable_empty_list_defers_to_next_tier():
    ssn, (a, b, c, _) = vote_session()
    t0, _, t2 = ssn.tasks
    ssn.add_fn("preemptable", a, victims())
    ssn.add_fn("preemptable", b, victims(t0))  # never asked: the tier already ended undecided
    ssn.add_fn("preemptable", c, victims(t2))
    assert ssn.preemptable(t0, ssn.tasks) == [t2]


def test_preemptable_empty_intersection_is_reseeded():
    ssn, (a, b, c, d) = vote_session()
    t0, t1, t2 = ssn.tasks
    ssn.add_fn("preemptable", a, victims(t0))
    ssn.add_fn("preemptable", b, victims(t1))
    ssn.add_fn("preemptable", c, victims(t2))
    ssn.add_fn("preemptable", d, victims(t1, t2))
    # tier 1: {t0} & {t1} is empty, i.e. undecided; tier 2 decides {t2} & {t1, t2}
    assert ssn.preemptable(t0, ssn.tasks) == [t2]


def test_abstain_and_disabled_points_are_ignored():
    ssn, (a, b, c, _) = vote_session()
    t0, t1, _ = ssn.tasks
    ssn.add_fn("preemptable", a, lambda p, cands: ([], ABSTAIN))
    ssn.add_fn("preemptable", b, victims(t1))
    ssn.add_fn("jobReady", c, lambda job: False)
    c.enabled[Ext.JOB_READY] = False
    assert ssn.preemptable(t0, ssn.tasks) == [t1]
    assert ssn.job_ready(ssn.jobs[0])


def test_pipelined_votes():
    ssn, (a, b, c, d) = vote_session()
    job = ssn.jobs[0]
    assert ssn.job_pipelined(job)  # nobody votes: default true
    ssn.add_fn("jobPipelined", a, lambda j: ABSTAIN)
    ssn.add_fn("jobPipelined", c, lambda j: PERMIT)
    ssn.add_fn("jobPipelined", d, lambda j: REJECT)
    assert not ssn.job_pipelined(job)  # a Reject in the deciding tier wins
    ssn.add_fn("jobPipelined", b, lambda j: PERMIT)
    assert ssn.job_pipelined(job)  # tier 1 permits and decides before tier 2 is asked


def test_starving_first_registering_tier_decides():
    ssn, (a, b, c, _) = vote_session()
    job = ssn.jobs[0]
    assert not ssn.job_starving(job)  # default false
    ssn.add_fn("jobStarving", c, lambda j: True)
    assert ssn.job_starving(job)
    ssn.add_fn("jobStarving", a, lambda j: True)
    ssn.add_fn("jobStarving", b, lambda j: False)
    assert not ssn.job_starving(job)  # tier 1 registers, so it decides (AND)


def test_gates():
    ssn, (a, _, c, d) = vote_session()
    job, queue, task = ssn.jobs[0], ssn.queues[0], ssn.tasks[0]
    ssn.add_fn("overused", a, lambda q: False)
    ssn.add_fn("overused", d, lambda q: True)
    ssn.add_fn("allocatable", a, lambda q, t: True)
    ssn.add_fn("allocatable", d, lambda q, t: False)
    assert ssn.overused(queue)  # OR
    assert not ssn.allocatable(queue, task)  # AND
    ssn.add_fn("jobOrder", c, lambda l, r: -1)
    ssn.add_fn("jobOrder", a, lambda l, r: 0)
    assert ssn.job_order(job, job)  # first non-zero answer wins, even from a later tier


# --- framework -------------------------------------------------------------------------------

def test_priority_queue_pops_in_order():
    values = [5, 3, 9, 1, 7, 3, 8]
    pq = PriorityQueue(lambda l, r: l < r)
    for v in values:
        pq.push(v)
    assert [pq.pop() for _ in values] == sorted(values)


def test_task_order_uses_pod_name_index_before_uid():
    config = {"actions": ["allocate"], "tiers": [[{"name": "gang"}]]}
    pods = [{"name": n, "ns": "c1", "podgroup": "pg1", "phase": "Pending", "requests": {"cpu": "1"}}
            for n in ("job-w-10", "job-w-9", "job-w-x")]
    problem, state = load_case(case_with(config, pods=pods))
    ssn = open_session(problem, state)
    w10, w9, wx = ssn.tasks
    assert ssn.task_order(w9, w10)  # 9 < 10 numerically, although "job-w-10" < "job-w-9" as text
    assert ssn.task_order(w10, wx)  # no index on one side: UID order


def test_podgroup_phase_counts_only_scheduled_tasks():
    problem, state = load_case(CASES["alloc-02-role-minmember-continue"])
    decisions = run_session(problem, state)
    assert len(decisions.binds) == problem.job_min_member[0] == 2
    # freshly bound tasks are Binding, which does not count: the PodGroup stays Inqueue
    assert all(PodGroupPhase(p) == PodGroupPhase.INQUEUE for p in decisions.state.job_phase)
    assert all(decisions.state.task_status[b.task] == TaskStatus.BINDING for b in decisions.binds)
    job = open_session(problem, decisions.state).jobs[0]
    for t in job.tasks:
        t.status = TaskStatus.RUNNING
    assert podgroup_phase(job) == PodGroupPhase.RUNNING


def test_pipelined_tasks_return_to_pending_after_the_session():
    problem, state = load_case(CASES["cap-01-reclaim-to-deserved"])
    decisions = run_session(problem, state)
    (p,) = decisions.pipelined
    assert decisions.state.task_status[p.task] == TaskStatus.PENDING
    (e,) = decisions.evictions
    assert decisions.state.task_status[e.task] == TaskStatus.RELEASING
    assert np.array_equal(decisions.state.node_releasing[problem.node_names.index("n2")],
                          problem.task_request[e.task])


# --- hierarchical drf ------------------------------------------------------------------------

def hdrf_session(running: dict[str, int]):
    """Queues root/a, root/b/x and root/b/y (all weights 1) on a 12-cpu node, with ``running``
    1-cpu pods per queue."""
    hierarchy = {"a": ("root/a", "1/1"), "x": ("root/b/x", "1/1/1"), "y": ("root/b/y", "1/1/1")}
    queues = [{"name": q, "annotations": {"volcano.sh/hierarchy": h, "volcano.sh/hierarchy-weights": w}}
              for q, (h, w) in hierarchy.items()]
    podgroups = [{"name": f"pg-{q}", "ns": "ns", "queue": q, "minMember": 0, "phase": "Running"} for q in hierarchy]
    pods = [{"name": f"{q}-{i}", "ns": "ns", "podgroup": f"pg-{q}", "phase": "Running", "node": "n1",
             "requests": {"cpu": "1"}} for q in hierarchy for i in range(running[q])]
    pods += [{"name": f"{q}-pending", "ns": "ns", "podgroup": f"pg-{q}", "phase": "Pending", "requests": {"cpu": "1"}}
             for q in hierarchy]
    config = {"actions": ["allocate"], "tiers": [[{"name": "drf", "enabled": ["hierarchy", "queueOrder", "jobOrder"]}]]}
    problem, state = load_case({"config": config, "queues": queues, "podgroups": podgroups, "pods": pods,
                                "nodes": [{"name": "n1", "cpu": "12", "memory": "12Gi", "pods": 110}]})
    ssn = open_session(problem, state)
    return problem, ssn, entry_of(ssn, Plugin.DRF).plugin.hdrf


def test_hdrf_rescales_children_to_the_smallest_share():
    """b's children x (2 cpu) and y (1 cpu) are scaled to the smaller dominant share (1/12):
    b counts as 2 cpu, not 3, so b (2/12) goes before a (3/12) although it holds as much."""
    problem, ssn, hdrf = hdrf_session({"a": 3, "x": 2, "y": 1})
    node = {name: i for i, name in enumerate(problem.hdrf_names)}
    cpus = ssn.total_resource[CPU] / 1000
    assert hdrf.nodes[node["root/a"]][0] == pytest.approx(3 / cpus)
    assert hdrf.nodes[node["root/b"]][0] == pytest.approx((1 + 1) / cpus)
    a, x, y = (ssn.queues[problem.queue_names.index(q)] for q in "axy")
    assert ssn.queue_order(x, a) and ssn.queue_order(y, a)
    assert ssn.queue_order(y, x)  # inside b, the lower share first


def test_hdrf_saturates_when_the_cluster_is_full():
    _, _, hdrf = hdrf_session({"a": 6, "x": 3, "y": 3})
    assert all(saturated for _, saturated in hdrf.nodes.values())


def test_feasible_node_cap_follows_volcano_defaults():
    from labkit.engine.volcano.actions.util import nodes_to_find
    assert nodes_to_find(100) == 100  # minimum-feasible-nodes: small clusters are scanned whole
    assert nodes_to_find(1000) == 1000 * (50 - 1000 // 125) // 100
    assert nodes_to_find(6000) == 6000 * 5 // 100  # the adaptive percentage bottoms out at 5%
    assert nodes_to_find(150) == 100
