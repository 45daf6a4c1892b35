"""Load and run the Kueue oracle cases (the neutral format in the header of ``kueue-cases.yaml``).

A case names its level: ``preemption`` runs ``Preemptor.GetTargets`` for the incoming workload with
Preempt forced on the named flavors, ``scheduler`` runs one admission cycle over the pending heads,
``queue`` pops the ClusterQueue heap, ``topology`` runs ``findTopologyAssignment`` for one podset on
the nodes of ``shared_nodes`` (quantities as Kubernetes writes them). Units: cpu in cores, memory in Gi; ``t1 < t2 < t3`` are one
second apart; named priorities are ``low`` < ``high``.

An inline ClusterQueue without ``preemption`` has the preemption the ClusterQueues of the case's source
test file are built with: the base ClusterQueues of ``preemption_fair_test.go`` have withinClusterQueue
LowerPriority, reclaimWithinCohort Any, borrowWithinCohort LowerPriority with maxPriorityThreshold -3;
elsewhere it is Kueue's default, Never everywhere, as an explicit ``preemption: {}``. ``cohorts_inline`` (name, parent, cpu_nominal)
gives the Cohort objects of hierarchical cases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from labkit.conformance.outcome import CaseResult, skip_reason
from labkit.engine.kueue import reference as k
from labkit.engine.kueue import tas
from labkit.errors import SpecError
from labkit.spec.quantity import parse_quantity

GI = 2.0**30
NAMED_PRIORITY = {"low": -1, "high": 1}
BASE_PREEMPTION = {"pkg/scheduler/preemption/preemption_fair_test.go": {
    "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3}}}
"""The preemption of the ClusterQueues a test file builds when a case leaves it out, by source file."""
_RANGE = re.compile(r"^([A-Za-z_-]*?)(\d+)(?:\.\.\1?(\d+))?\s+in\s+(\S+)$")


def is_kueue_file(data: Any) -> bool:
    """A case file in the Kueue format: its cases name a ``level``."""
    return isinstance(data, Mapping) and any(isinstance(c, Mapping) and "level" in c for c in data.get("cases") or [])


def _quantity(resource: str, value: Any) -> float:
    return float(value) * (GI if resource == "memory" else 1.0)


def _quota(resource: str, q: Mapping) -> k.Quota:
    def opt(key: str) -> float | None:
        return None if q.get(key) is None else _quantity(resource, q[key])

    return k.Quota(_quantity(resource, q.get("nominal", 0)), opt("borrowingLimit"), opt("lendingLimit"))


def preemption(p: Mapping | None) -> k.Preemption:
    """``ClusterQueuePreemption`` from its YAML form (Kueue's field names)."""
    p = p or {}
    borrow = p.get("borrowWithinCohort") or {}
    return k.Preemption(p.get("withinClusterQueue", k.NEVER), p.get("reclaimWithinCohort", k.NEVER),
                        borrow.get("policy", k.NEVER), borrow.get("maxPriorityThreshold"))


def _groups(groups: list[Mapping]) -> tuple[list[k.ResourceGroup], dict[k.FR, k.Quota]]:
    out, quotas = [], {}
    for g in groups:
        flavors = g["flavors"]
        covered = tuple(g.get("covered") or dict.fromkeys(r for f in flavors.values() for r in f))
        out.append(k.ResourceGroup(covered, tuple(flavors)))
        for flavor, resources in flavors.items():
            for resource, q in resources.items():
                quotas[(flavor, resource)] = _quota(resource, q)
    return out, quotas


def _cluster_queue(name: str, spec: Mapping, base: Mapping | None = None) -> tuple[k.ClusterQueue, str | None]:
    if "resource_groups" in spec:
        groups, quotas = _groups(spec["resource_groups"])
    elif "flavors_in_order" in spec:
        groups, quotas = _groups([{"flavors": spec["flavors_in_order"]}])
    else:
        groups, quotas = _groups([{"covered": ["cpu"], "flavors": {"default": {"cpu": {
            "nominal": spec.get("cpu_nominal", 0)}}}}])
    p = preemption(spec.get("preemption", base))
    fungibility = spec.get("flavorFungibility") or {}
    cq = k.ClusterQueue(name, groups, quotas, p, spec.get("queueingStrategy", k.BEST_EFFORT_FIFO),
                        float(spec.get("fairSharing_weight", 1)), k.FlavorFungibility(
                            fungibility.get("whenCanBorrow", k.MAY_STOP_SEARCH),
                            fungibility.get("whenCanPreempt", k.TRY_NEXT_FLAVOR)))
    return cq, spec.get("cohort")


def _tree(case: Mapping, shared: Mapping, where: str) -> k.Tree:
    cqs, parents = [], {}
    for name in case.get("cluster_queues") or []:
        if name not in shared:
            raise SpecError(f"{where}.cluster_queues", f"no shared ClusterQueue named {name!r}")
        cq, parents[name] = _cluster_queue(name, shared[name])
        cqs.append(cq)
    base = BASE_PREEMPTION.get((case.get("source") or {}).get("file"))
    for spec in case.get("cluster_queues_inline") or []:
        cq, parents[spec["name"]] = _cluster_queue(spec["name"], spec, base)
        cqs.append(cq)
    cohorts = []
    for spec in case.get("cohorts_inline") or []:
        quotas = {("default", "cpu"): k.Quota(float(spec["cpu_nominal"]))} if "cpu_nominal" in spec else {}
        cohorts.append(k.Cohort(spec["name"], quotas))
        parents[spec["name"]] = spec.get("parent")
    return k.Tree(cqs, cohorts, parents)


def _priority(value: Any) -> int:
    return NAMED_PRIORITY[value] if isinstance(value, str) else int(value or 0)


def _admitted(entries: Any, tree: k.Tree, where: str) -> list[k.Workload]:
    """Admitted workloads: a list of mappings, or the short form ``a1..a3 in a, c1 in c; each 1 cpu``.

    A workload may leave out ``flavor`` when its ClusterQueue has one flavor for each resource it uses.
    """
    if isinstance(entries, str):
        names, _, rest = entries.partition(";")
        cpu = re.search(r"each ([\d.]+) cpu", rest)
        prio = re.search(r"priority (-?\d+)", rest)
        out = []
        for part in names.split(","):
            m = _RANGE.match(part.strip())
            if not m:
                raise SpecError(f"{where}.admitted", f"cannot read {part.strip()!r}")
            prefix, first, last, cq = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2)), m.group(4)
            for i in range(first, last + 1):
                out.append({"name": f"{prefix}{i}", "cq": cq, "priority": int(prio.group(1)) if prio else 0,
                            "requests": {"cpu": float(cpu.group(1)) if cpu else 1}, "flavor": "default"})
        entries = out
    workloads = []
    for i, e in enumerate(entries or []):
        requests = {r: _quantity(r, v) for r, v in e["requests"].items()}
        wl = k.Workload(e["name"], e["cq"], [k.PodSet("main", 1, requests)], _priority(e.get("priority")),
                        float(e.get("created_at", 0)), admitted_at=float(e.get("admitted_at", 0)))
        flavors = {r: e["flavor"] if "flavor" in e else _only_flavor(tree, e["cq"], r, f"{where}.admitted[{i}]")
                   for r in requests}
        wl.usage = {(flavors[r], r): v for r, v in requests.items()}
        wl.flavors, wl.counts = [flavors], [1]
        workloads.append(wl)
    return workloads


def _only_flavor(tree: k.Tree, cq: str, resource: str, where: str) -> str:
    """The one flavor ClusterQueue `cq` has for `resource` (SpecError when it has none or several)."""
    if cq not in tree.cqs:
        raise SpecError(f"{where}.cq", f"no ClusterQueue named {cq!r}")
    flavors = [f for g in tree.cqs[cq].resource_groups if resource in g.covered for f in g.flavors]
    if len(flavors) != 1:
        raise SpecError(f"{where}.flavor", f"ClusterQueue {cq} has {len(flavors)} flavors for {resource}: "
                                           "name the flavor")
    return flavors[0]


def _compare(got: Mapping, want: Mapping, what: str) -> list[str]:
    return [] if dict(got) == dict(want) else [(f"{what} {dict(sorted(got.items()))} != expected "
                                               f"{dict(sorted(want.items()))}")]


def _run_preemption(case: Mapping, tree: k.Tree, fair: bool) -> list[str]:
    """GetTargets for the incoming workload: preemption is needed on the flavors of ``preempt_on``; a
    resource it requests beyond those fits already, on its ClusterQueue's one flavor for it."""
    inc = case["incoming"]
    requests = {r: _quantity(r, v) for r, v in inc["requests"].items()}
    wl = k.Workload("incoming", inc["cq"], [k.PodSet("main", 1, requests)], _priority(inc.get("priority")),
                    float(inc.get("created_at", 0)), uid="wl-in")
    preempt_on = inc.get("preempt_on") or {}
    flavors = {r: preempt_on[r] if r in preempt_on else _only_flavor(tree, inc["cq"], r, "incoming")
               for r in requests}
    usage = {(flavors[r], r): v for r, v in requests.items()}
    need = {(flavors[r], r): v for r, v in requests.items() if r in preempt_on}
    targets = k.get_targets(tree, wl, need, usage, fair, tuple(case.get("strategies") or k.DEFAULT_STRATEGIES))
    got = {t.workload.name: t.reason for t in targets}
    return _compare(got, case["expect"].get("preempted") or {}, "preempted")


def _run_scheduler(case: Mapping, tree: k.Tree, fair: bool) -> list[str]:
    pending = []
    for i, p in enumerate(case.get("pending") or []):
        podsets = [k.PodSet(ps["name"], int(ps["count"]), {r: _quantity(r, v) for r, v in ps["per_pod"].items()},
                            ps.get("min_count")) for ps in p["podsets"]]
        pending.append(k.Workload(p["name"], p["cq"], podsets, _priority(p.get("priority")),
                                  float(p.get("created_at", i))))
    heads: dict[str, k.Workload] = {}
    for wl in sorted(pending, key=k.queue_order_key):
        heads.setdefault(wl.cq, wl)
    entries = k.schedule(tree, list(heads.values()), fair=fair)
    expect = case["expect"]
    want_admitted = expect.get("admitted") or {}
    admitted = {e.workload.name: {"cq": e.workload.cq, "flavor": dict(e.workload.flavors[0]),
                                  "count": sum(e.workload.counts), "message": e.message}
                for e in entries if e.status == "admitted"}
    for name, got in admitted.items():  # Kueue's message, as the engine records it, where the case gives one
        if "message" not in (want_admitted.get(name) or {}):
            del got["message"]
    diffs = _compare(admitted, want_admitted, "admitted")
    if "preempted" in expect:
        got = {t.workload.name: t.reason for e in entries if e.status == "preempting" for t in e.targets}
        diffs += _compare(got, expect["preempted"] or {}, "preempted")
    by_name = {e.workload.name: e for e in entries}
    for name, want in (expect.get("pending") or {}).items():
        e = by_name.get(name)
        if e is None or e.status == "admitted":
            diffs.append(f"pending {name}: not pending")
            continue
        got = {"QuotaReserved": False, "reason": e.reason, "message": e.message}
        diffs += _compare({key: v for key, v in got.items() if key in want}, want, f"pending {name}")
    return diffs


def _run_queue(case: Mapping) -> list[str]:
    diffs = []
    for i, sub in enumerate(case.get("subcases") or []):
        mode = sub.get("ordering_timestamp", "Eviction")
        workloads = []
        for name in ("w1", "w2"):
            w = sub[name]
            wl = k.Workload(name, "cq", [], _priority(w.get("priority")), _time(w.get("created")))
            wl.evicted_by, wl.evicted_at = w.get("evicted_by"), _time(w.get("evicted_at"))
            workloads.append(wl)
        got = min(workloads, key=lambda wl: k.queue_order_key(wl, mode)).name
        if got != sub["expect_pop"]:
            diffs.append(f"subcases[{i}]: pop {got} != expected {sub['expect_pop']}")
    return diffs


def _run_topology(case: Mapping, shared_nodes: Mapping, where: str) -> list[str]:
    """``findTopologyAssignment`` for the case's podset on its node set, as the Topology "default"."""
    if case["nodes"] not in shared_nodes:
        raise SpecError(f"{where}.nodes", f"no shared node set named {case['nodes']!r}")
    nodes = shared_nodes[case["nodes"]]
    podset = case["podset"]
    requests = {r: parse_quantity(v) for r, v in podset["requests"].items()} | {"pods": 1.0}
    names = sorted(set(requests) | {r for n in nodes for r in n["allocatable"]})
    levels = list(case["levels"])
    tree = tas.TopologyTree("default", levels, [(i, tuple(n["labels"][key] for key in levels))
                                                for i, n in enumerate(nodes) if all(key in n["labels"] for key in levels)])
    capacity = np.array([[parse_quantity(n["allocatable"].get(r, 0)) for r in names] for n in nodes])
    free = np.array([capacity[members].sum(axis=0) for members in tree.leaf_nodes])
    request = np.array([requests.get(r, 0.0) for r in names])
    level = podset.get("required") or podset.get("preferred")
    placement, reason = tas.find_assignment(tree, free, request, int(podset["count"]), level,
                                            "required" in podset, names)
    start = len(levels) - 1 if tree.hostname else 0
    got = {"assignment": [{"values": list(tree.leaves[leaf].values[start:]), "count": n} for leaf, n in placement],
           "reason": reason}
    want = case["expect"]
    return [f"{key}: {got[key]!r} != expected {want[key]!r}" for key in ("assignment", "reason")
            if key in want and got[key] != want[key]]


def _time(value: Any) -> float:
    """``t1``, ``t2``, ... are one second apart."""
    return float(str(value)[1:]) if value is not None else 0.0


def run_case(case: Mapping, shared: Mapping, where: str, shared_nodes: Mapping | None = None) -> CaseResult:
    case_id = str(case.get("id") or where)
    reason = skip_reason(case)
    if reason:
        return CaseResult(case_id, passed=False, skipped=True, reason=reason)
    level = case.get("level")
    try:
        if level == "queue":
            diffs = _run_queue(case)
        elif level == "topology":
            diffs = _run_topology(case, shared_nodes or {}, where)
        else:
            tree = _tree(case, shared, where)
            for wl in _admitted(case.get("admitted"), tree, where):
                tree.add(wl)
            fair = case.get("mode") == "fair_sharing"
            if level == "preemption":
                diffs = _run_preemption(case, tree, fair)
            elif level == "scheduler":
                diffs = _run_scheduler(case, tree, fair)
            else:
                raise SpecError(f"{where}.level", f"unknown level {level!r} (preemption, scheduler, queue, topology)")
    except (KeyError, TypeError, ValueError) as err:
        raise SpecError(where, f"malformed case: {err!r}") from None
    return CaseResult(case_id, passed=not diffs, reason="; ".join(diffs))


def run_cases(data: Mapping) -> list[CaseResult]:
    """Run every case of a Kueue case file (its YAML data)."""
    shared = data.get("shared_cluster_queues") or {}
    nodes = data.get("shared_nodes") or {}
    return [run_case(case, shared, f"cases[{i}]", nodes) for i, case in enumerate(data["cases"])]
