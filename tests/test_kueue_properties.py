"""Kueue quota invariants on random cohorts and workloads (hypothesis): no ClusterQueue above
nominal + borrowingLimit, and no lender's quota used beyond its lendingLimit, after every cycle
of admissions and preemptions, and at every instant of a simulated run."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labkit
from labkit import spec
from labkit.engine.kueue import reference as k

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLAVORS = ("a100", "h100")
POLICIES = st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
RECLAIM = st.sampled_from(["Never", "LowerPriority", "Any"])


@st.composite
def cluster_queues(draw):
    """(name, cohort, {flavor: (nominal, borrowingLimit, lendingLimit)}, Preemption) for 1-4 CQs."""
    out = []
    for i in range(draw(st.integers(1, 4))):
        cohort = draw(st.sampled_from([None, "all", "all"]))
        quotas = {}
        for f in FLAVORS[:draw(st.integers(1, 2))]:
            nominal = draw(st.integers(0, 10))
            borrow = draw(st.one_of(st.none(), st.integers(0, 10))) if cohort else None
            lend = draw(st.one_of(st.none(), st.integers(0, nominal))) if cohort else None
            quotas[f] = (nominal, borrow, lend)
        preemption = k.Preemption(draw(POLICIES), draw(RECLAIM), draw(st.sampled_from(["Never", "LowerPriority"])),
                                  draw(st.one_of(st.none(), st.integers(-1, 2))))
        out.append((f"cq{i}", cohort, quotas, preemption))
    return out


def build(cqs) -> k.Tree:
    made = [k.ClusterQueue(name, [k.ResourceGroup(("cpu",), tuple(quotas))],
                           {(f, "cpu"): k.Quota(*q) for f, q in quotas.items()}, preemption)
            for name, _, quotas, preemption in cqs]
    return k.Tree(made, [], {name: cohort for name, cohort, _, _ in cqs})


def assert_within_limits(cqs, tree: k.Tree) -> None:
    """Stated on the quotas, not through the tree's own accounting."""
    for name, cohort, quotas, _ in cqs:
        for f, (nominal, borrow, _) in quotas.items():
            usage = tree.cqs[name].usage((f, "cpu"))
            if cohort is None:
                assert usage <= nominal + 1e-9
            elif borrow is not None:
                assert usage <= nominal + borrow + 1e-9
    for f in FLAVORS:
        members = [(tree.cqs[name].usage((f, "cpu")), *quotas[f]) for name, cohort, quotas, _ in cqs
                   if cohort == "all" and f in quotas]
        # each member keeps nominal - lendingLimit for itself; the cohort hands out only the lendable rest
        kept = [(n - lend if lend is not None else 0) for _, n, _, lend in members]
        used_from_pool = sum(max(0.0, u - keep) for (u, *_), keep in zip(members, kept))
        assert used_from_pool <= sum(n - keep for (_, n, _, _), keep in zip(members, kept)) + 1e-9


@SETTINGS
@given(cluster_queues(), st.lists(st.tuples(st.integers(0, 3), st.integers(1, 8), st.integers(-1, 2),
                                            st.integers(0, 5)), min_size=1, max_size=14),
       st.booleans(), st.randoms(use_true_random=False))
def test_cycles_stay_within_quota(cqs, arrivals, fair, rnd):
    tree = build(cqs)
    pending: list[k.Workload] = []
    admitted: list[k.Workload] = []
    for step in range(12):
        for i, (cq, cpu, prio, at) in enumerate(arrivals):
            if at == step:
                pending.append(k.Workload(f"w{i}", cqs[cq % len(cqs)][0], [k.PodSet("main", 1, {"cpu": cpu})],
                                          prio, float(step)))
        heads = {}
        for wl in sorted(pending, key=k.queue_order_key):
            heads.setdefault(wl.cq, wl)
        for e in k.schedule(tree, list(heads.values()), float(step), fair):
            if e.status == "admitted":
                pending.remove(e.workload)
                admitted.append(e.workload)
            elif e.status == "preempting":
                for t in e.targets:
                    tree.remove(t.workload)
                    admitted.remove(t.workload)
                    t.workload.evicted = False
                    pending.append(t.workload)
        assert_within_limits(cqs, tree)
        if admitted and rnd.random() < 0.3:
            done = admitted.pop(rnd.randrange(len(admitted)))
            tree.remove(done)


@st.composite
def kueue_scenarios(draw):
    """Two teams in a cohort over one a100 pool; random quotas, limits, jobs and waitForPodsReady."""
    cqs = []
    for team in ("team-a", "team-b"):
        nominal = draw(st.integers(0, 16))
        resource = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
        if draw(st.booleans()):
            resource["borrowingLimit"] = draw(st.integers(0, 16))
        if draw(st.booleans()):
            resource["lendingLimit"] = draw(st.integers(0, nominal))
        cqs.append({"name": team, "cohortName": "research", "queueingStrategy": draw(
            st.sampled_from(["StrictFIFO", "BestEffortFIFO"])), "preemption": {
            "withinClusterQueue": draw(POLICIES), "reclaimWithinCohort": draw(RECLAIM)},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                "flavors": [{"name": "a100", "resources": [resource]}]}]})
    jobs = [{"name": f"j{i}", "namespace": draw(st.sampled_from(["team-a", "team-b"])),
             "priorityClassName": draw(st.sampled_from(["low", "high"])), "submit": draw(st.integers(0, 3600)),
             "duration": draw(st.integers(60, 7200)),
             "tasks": [{"replicas": draw(st.integers(1, 3)), "resources": {"nvidia.com/gpu": draw(st.integers(1, 8))}}]}
            for i in range(draw(st.integers(1, 6)))]
    return spec.validate({
        "cluster": {"pools": [{"name": "a100", "count": 3, "resources": {"nvidia.com/gpu": 8}, "labels": {"gpu": "a100"}}]},
        "tenants": [{"name": "team-a"}, {"name": "team-b"}],
        "priorityClasses": [{"name": "low", "value": 0}, {"name": "high", "value": 100}],
        "kueue": {"resourceFlavors": [{"name": "a100", "nodeLabels": {"gpu": "a100"}}], "clusterQueues": cqs,
                  "localQueues": [{"name": "main", "namespace": t, "clusterQueue": t} for t in ("team-a", "team-b")]},
        "jobs": jobs, "horizon": "6h",
        "scheduler": {"kueue": {"waitForPodsReady": {"enable": draw(st.booleans()), "timeout": "10m"}}},
    })


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kueue_scenarios())
def test_simulated_runs_stay_within_quota(scenario):
    result = labkit.simulate(scenario)
    tasks = result.tasks
    cq_of = {f"{j.namespace}/{j.name}": j.namespace for j in scenario.jobs}
    quotas = {q.name: q.resource_groups[0].flavors[0].resources[0] for q in scenario.kueue.cluster_queues}
    end = tasks.end.fillna(np.inf)
    for t in sorted(set(tasks.start)):
        live = tasks[(tasks.start <= t) & (end > t)]
        used = live.groupby(live.job.map(cq_of))["nvidia.com/gpu"].sum()
        pool_used = pool = 0.0
        for cq, q in quotas.items():
            nominal, usage = float(q.nominal_quota), float(used.get(cq, 0.0))
            if q.borrowing_limit is not None:
                assert usage <= nominal + float(q.borrowing_limit) + 1e-9
            kept = nominal - float(q.lending_limit) if q.lending_limit is not None else 0.0
            pool_used += max(0.0, usage - kept)
            pool += nominal - kept
        assert pool_used <= pool + 1e-9  # nobody runs on quota a team does not lend
