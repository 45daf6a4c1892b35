"""Kueue: the oracle cases, the scenario objects and their errors, diagnosis strings, the clock."""

import json
from pathlib import Path

import pytest
import yaml
from test_spec import run_cli

import labkit
from labkit import spec
from labkit.conformance import format_report, run_cases
from labkit.engine.kueue import reference as k
from labkit.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "labkit" / "conformance" / "kueue-cases.yaml"
EXTRA_CASES = ROOT / "labkit" / "conformance" / "kueue-extra-cases.yaml"
EXAMPLE = ROOT / "examples" / "kueue-cohort.yaml"


@pytest.mark.parametrize("result", run_cases(CASES) + run_cases(EXTRA_CASES), ids=lambda r: r.id)
def test_oracle_case(result):
    assert result.passed, result.reason


def test_conformance_cli_reads_the_kueue_format():
    out = run_cli("conformance", str(CASES))
    assert out.returncode == 0, out.stdout
    n = len(yaml.safe_load(CASES.read_text())["cases"])
    assert out.stdout.splitlines()[-1] == f"{n} passed, 0 failed"
    assert format_report(run_cases(CASES)).splitlines()[-1] == f"{n} passed, 0 failed"


def example(**changes) -> dict:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(changes)
    return data


@pytest.mark.parametrize("edit, where, message", [
    (lambda d: d["kueue"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"][0].update(
        nominalQuota=-1), "kueue.clusterQueues[0].resourceGroups[0].flavors[0].resources[0].nominalQuota",
     "must be >= 0"),
    (lambda d: d["kueue"]["resourceFlavors"].append({"name": "spare"}), "kueue.resourceFlavors[2]",
     "ResourceFlavor 'spare' is in no resourceGroup"),
    (lambda d: d["kueue"].update(cohorts=[{"name": "research", "parentName": "org"},
                                          {"name": "org", "parentName": "research"}]),
     "kueue.cohorts[0].parentName", "cohort cycle research -> org -> research"),
    (lambda d: d["kueue"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0].update(name="v100"),
     "kueue.clusterQueues[0].resourceGroups[0].flavors[0].name", "no ResourceFlavor named 'v100'"),
    (lambda d: d["kueue"]["localQueues"][0].update(clusterQueue="nosuch"), "kueue.localQueues[0].clusterQueue",
     "no ClusterQueue named 'nosuch'"),
    (lambda d: d["kueue"]["clusterQueues"][1].pop("cohortName"),
     "kueue.clusterQueues[1].resourceGroups[0].flavors[0].resources[0].borrowingLimit",
     "must be unset without a cohort"),
])
def test_bad_kueue_objects_are_one_line_exit_2(tmp_path, edit, where, message):
    data = example()
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out = run_cli("validate", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == f"labkit: error: {where}: {message}"


def test_kueue_objects_round_trip():
    scenario = spec.load(EXAMPLE)
    assert spec.loads(spec.dump(scenario)) == scenario
    assert spec.scheduler_of(scenario).kueue.wait_for_pods_ready.enable


def _tree(groups_quota: dict, cohort: str | None = None) -> k.Tree:
    cq = k.ClusterQueue("cq", [k.ResourceGroup(("cpu", "memory"), tuple(groups_quota))],
                        {(f, r): k.Quota(v) for f, res in groups_quota.items() for r, v in res.items()})
    return k.Tree([cq], [], {"cq": cohort})


def test_diagnosis_strings_as_kueue_writes_them():
    tree = _tree({"default": {"cpu": 6, "memory": 3 * 2**30}})
    wl = k.Workload("w", "cq", [k.PodSet("main", 4, {"cpu": 2, "memory": 2**30})])
    [entry] = k.schedule(tree, [wl])
    assert entry.status == "pending" and entry.reason == "WaitingForQuota"
    assert entry.message == ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
                             "previously considered podsets requests (0) + current podset request (8) > maximum "
                             "capacity (6), insufficient quota for memory in flavor default, previously considered "
                             "podsets requests (0) + current podset request (4Gi) > maximum capacity (3Gi)")
    other = k.Workload("o", "cq", [k.PodSet("main", 1, {"cpu": 5})])
    assert k.schedule(tree, [other])[0].message == "Quota reserved in ClusterQueue cq"
    [entry] = k.schedule(tree, [k.Workload("late", "cq", [k.PodSet("main", 1, {"cpu": 2})])])
    assert entry.message == ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                             "default, 1 more needed")


def test_flavors_are_tried_in_order_and_partial_admission_shrinks_the_count():
    tree = _tree({"a100": {"cpu": 4}, "h100": {"cpu": 8}})
    wl = k.Workload("w", "cq", [k.PodSet("main", 6, {"cpu": 1})])
    [entry] = k.schedule(tree, [wl])
    assert entry.workload.flavors == [{"cpu": "h100"}]
    partial = k.Workload("p", "cq", [k.PodSet("main", 10, {"cpu": 1}, min_count=2)])
    [entry] = k.schedule(tree, [partial])
    assert entry.status == "admitted" and entry.workload.counts == [4]  # 4 of a100 left; h100 has 2


def test_simulated_reclaim_preempts_the_borrower():
    result = labkit.simulate(spec.load(EXAMPLE))
    jobs = result.jobs.set_index("name")
    assert (result.jobs.state == "Completed").all()
    assert jobs.loc["b-big", "evictions"] == 2 and jobs.loc["a-train", "wait"] < 60
    preempted = result.events[result.events.kind == "Preempted"]
    assert list(preempted.reason) == ["InCohortReclamation"]
    assert preempted.message.iloc[0] == (
        "Preempted to accommodate a workload (UID: team-a/a-train) due to reclamation within the cohort; "
        "preemptor path: /research/team-a; preemptee path: /research/team-b")


def test_policy_flag_selects_kueue():
    data = example(scheduler={"policy": "volcano-shipped"})
    result = labkit.simulate(spec.validate(data), policy="kueue")
    assert "QuotaReserved" in set(result.events.kind)


def _unplaceable(**ready) -> dict:
    """Quota for 24 GPUs on two 8-GPU a100 nodes and three 6-GPU pods: admitted, never all running."""
    data = example(jobs=[{"name": "huge", "namespace": "team-a", "duration": "1h",
                          "tasks": [{"replicas": 3, "resources": {"nvidia.com/gpu": 6}}]}], horizon="3h")
    data["kueue"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 24
    data["scheduler"] = {"kueue": {"waitForPodsReady": {"enable": True, "timeout": "10m", **ready}}}
    return data


def test_wait_for_pods_ready_evicts_and_requeues_with_backoff():
    ev = labkit.simulate(spec.validate(_unplaceable())).events
    evicted = ev[(ev.kind == "Evicted") & (ev.reason == "PodsReadyTimeout")]
    admitted = list(ev[ev.kind == "QuotaReserved"].time)
    requeued = list(ev[ev.kind == "Requeued"].time)
    assert evicted.message.iloc[0] == "Exceeded the PodsReady timeout team-a/huge"
    assert evicted.time.iloc[0] == admitted[0] + 600
    assert [a - r for r, a in zip(requeued, admitted[1:4])] == [60, 120, 240]


def test_backoff_limit_deactivates():
    data = _unplaceable(requeuingStrategy={"backoffLimitCount": 1})
    ev = labkit.simulate(spec.validate(data)).events
    assert list(ev[ev.kind == "Deactivated"].reason) == ["RequeuingLimitExceeded"]
    assert len(ev[ev.kind == "QuotaReserved"]) == 2


def test_strict_fifo_head_blocks_best_effort_does_not():
    def run(strategy: str):
        data = example(jobs=[
            {"name": "big", "namespace": "team-b", "tasks": [{"resources": {"nvidia.com/gpu": 8}, "replicas": 3}],
             "duration": "1h"},
            {"name": "small", "namespace": "team-b", "submit": 1, "tasks": [{"resources": {"nvidia.com/gpu": 4}}],
             "duration": "1h"}])
        data["kueue"]["clusterQueues"][1]["queueingStrategy"] = strategy
        data["kueue"]["clusterQueues"][1]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 0
        return labkit.simulate(spec.validate(data)).jobs.set_index("name")

    assert run("BestEffortFIFO").loc["small", "state"] == "Completed"
    assert run("StrictFIFO").loc["small", "state"] == "Pending"


def test_hierarchical_cohort_quota_and_lending():
    """resource_node.go on a two-level tree: a sub-cohort lends only above its lendingLimit's kept part."""
    fr = ("default", "cpu")

    def cq(name: str, nominal: float) -> k.ClusterQueue:
        return k.ClusterQueue(name, [k.ResourceGroup(("cpu",), ("default",))], {fr: k.Quota(nominal)})

    right = k.Cohort("right", {fr: k.Quota(0, lending_limit=2)})
    tree = k.Tree([cq("cq1", 4), cq("cq2", 0), cq("cq3", 6)], [k.Cohort("left"), right, k.Cohort("org")],
                  {"cq1": "left", "cq2": "left", "cq3": "right", "left": "org", "right": "org"})
    assert tree.cohorts["org"].subtree_quota(fr) == 6  # left lends 4, right only 2 of its 6
    assert tree.cqs["cq2"].available(fr) == tree.cqs["cq2"].potential_available(fr) == 6
    assert tree.cqs["cq3"].available(fr) == 10
    tree.add(k.Workload("w", "cq3", [k.PodSet("main", 1, {"cpu": 5})], usage={fr: 5.0}))
    assert tree.cqs["cq2"].available(fr) == 5  # cq3's 5 take 1 of the 2 right lends
    assert tree.cqs["cq3"].path() == "/org/right/cq3"


def _cohort(*members: tuple[str, float, float], **fungibility) -> k.Tree:
    """ClusterQueues ``(name, a100 nominal, h100 nominal)`` in one cohort, flavors tried a100 first."""
    cqs = [k.ClusterQueue(name, [k.ResourceGroup(("cpu",), ("a100", "h100"))],
                          {("a100", "cpu"): k.Quota(a100), ("h100", "cpu"): k.Quota(h100)},
                          fungibility=k.FlavorFungibility(**fungibility)) for name, a100, h100 in members]
    return k.Tree(cqs, [], {name: "all" for name, *_ in members})


def _one(cq: str, cpu: float, priority: int = 0, name: str = "") -> k.Workload:
    return k.Workload(name or f"{cq}-{cpu}", cq, [k.PodSet("main", 1, {"cpu": cpu})], priority)


@pytest.mark.parametrize("when_can_borrow, flavor", [("MayStopSearch", "a100"), ("TryNextFlavor", "h100")])
def test_flavor_fungibility_when_can_borrow(when_can_borrow, flavor):
    tree = _cohort(("cq", 4, 8), ("lender", 4, 0), when_can_borrow=when_can_borrow)
    [entry] = k.schedule(tree, [_one("cq", 6)])
    assert entry.status == "admitted" and entry.workload.flavors == [{"cpu": flavor}]


@pytest.mark.parametrize("fair, admitted", [(False, "a-new"), (True, "b-new")])
def test_fair_sharing_admits_the_lower_share_first(fair, admitted):
    tree = k.Tree([k.ClusterQueue(n, [k.ResourceGroup(("cpu",), ("default",))], {("default", "cpu"): k.Quota(3)})
                   for n in "abc"], [], dict.fromkeys("abc", "all"))
    for i, (cq, cpu) in enumerate([("a", 4), ("b", 3)]):
        wl = _one(cq, cpu, name=f"old{i}")
        wl.usage = {("default", "cpu"): float(cpu)}
        tree.add(wl)
    entries = k.schedule(tree, [_one("a", 2, priority=1, name="a-new"), _one("b", 2, name="b-new")], fair=fair)
    assert [e.workload.name for e in entries if e.status == "admitted"] == [admitted]
    assert [e.message for e in entries if e.status != "admitted"] == [k.NO_LONGER_FITS]


def test_kueue_policy_needs_kueue_objects():
    out = run_cli("simulate", "--preset", "case-study", "--policy", "kueue")
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("labkit: error:")]
    assert errors == ["labkit: error: kueue: a Kueue policy needs the scenario's kueue objects (clusterQueues, localQueues)"]
    assert out.stderr.strip().splitlines()[-1] == errors[0]  # notes on ignored fields may come first


def test_job_without_local_queue_is_not_managed():
    data = example()
    data["tenants"].append({"name": "ops"})
    data["jobs"].append({"name": "ops-tool", "namespace": "ops", "submit": 0, "duration": "10m",
                         "tasks": [{"resources": {"nvidia.com/gpu": 8}}]})
    result = labkit.simulate(spec.validate(data))
    ops = result.events[result.events.job == "ops/ops-tool"]
    assert "QuotaReserved" not in set(ops.kind) and "Completed" in set(ops.kind)


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_partial_admission_of_an_elastic_job(engine):
    """An elastic task is a podset with minCount = elastic.min: admitted with the pods the quota holds
    (the 8 a100 GPUs team-b leaves hold 2 of its 4 pods of 4 GPUs). Kueue sets the Job's parallelism
    to the admitted count and leaves its completions as they are (docs, tasks/run/jobs: "The Job's
    completions count will not be changed"; job_controller.go RunWithPodSetsInfo syncs completions
    only under kueue.x-k8s.io/job-completions-equal-parallelism, which labkit's Job does not carry):
    the Job runs its 4 pods 2 at a time. PodsReady counts succeeded pods (Succeeded + Ready >=
    parallelism), so the workload is not evicted when the first two complete."""
    data = example(jobs=[
        {"name": "b", "namespace": "team-b", "duration": "2h", "tasks": [{"resources": {"nvidia.com/gpu": 8}}]},
        {"name": "elastic", "namespace": "team-a", "submit": 10, "duration": "1h",
         "tasks": [{"elastic": {"min": 1, "max": 4}, "resources": {"nvidia.com/gpu": 4}}]}])
    assert spec.scheduler_of(spec.validate(data)).kueue.wait_for_pods_ready.enable  # the kueue policy: on
    result = labkit.simulate(spec.validate(data), engine=engine)
    assert result.info["engine"] == engine
    assert (result.jobs.state == "Completed").all()
    runs = result.tasks[result.tasks.job == "team-a/elastic"].sort_values(["start", "index"])
    assert len(runs) == 4 and runs.evicted.isna().all()
    first, second = runs.iloc[:2], runs.iloc[2:]
    assert (first.start == first.start.iloc[0]).all() and (second.start == first.end.iloc[0]).all()
    assert ((runs.end - runs.start) == 3600).all()
    events = result.events[result.events.job == "team-a/elastic"]
    assert not events.kind.isin(["Evicted", "Requeued"]).any(), events
    assert (events.kind == "QuotaReserved").sum() == 1


@pytest.mark.parametrize("block, admitted_at", [(False, 1.0), (True, 600.0)])
def test_block_admission_waits_for_pods_ready(block, admitted_at):
    data = _unplaceable(blockAdmission=block)
    data["jobs"].append({"name": "small", "namespace": "team-b", "submit": 1, "duration": "10m",
                         "tasks": [{"resources": {"nvidia.com/gpu": 2}}]})
    ev = labkit.simulate(spec.validate(data)).events
    assert ev[(ev.kind == "QuotaReserved") & (ev.job == "team-b/small")].time.iloc[0] == admitted_at


def test_conformance_json():
    out = run_cli("conformance", str(CASES), "--json")
    assert out.returncode == 0
    assert {"id": "preempt-lowest-priority", "passed": True, "skipped": False, "reason": ""} in json.loads(out.stdout)


READER_CASES = """
shared_cluster_queues:
  standalone:
    resource_groups:
    - covered: [cpu, memory]
      flavors:
        default: {cpu: {nominal: 6}, memory: {nominal: 6}}
    preemption: {withinClusterQueue: LowerPriority}
  two-flavors:
    resource_groups:
    - covered: [cpu]
      flavors:
        on-demand: {cpu: {nominal: 2}}
        spot: {cpu: {nominal: 2}}
cases:
- id: admitted-without-flavor-incoming-with-more-resources
  level: preemption
  mode: classic
  cluster_queues: [standalone]
  admitted:
  - {name: low, cq: standalone, priority: -1, requests: {cpu: 4}}
  - {name: mid, cq: standalone, priority: 0, requests: {cpu: 2}}
  incoming: {cq: standalone, priority: 1, requests: {cpu: 2, memory: 1}, preempt_on: {cpu: default}}
  expect:
    preempted: {low: InClusterQueue}
- id: admitted-with-kueue-s-message
  level: scheduler
  mode: classic
  cluster_queues: [standalone]
  pending:
  - {name: a, cq: standalone, podsets: [{name: main, count: 1, per_pod: {cpu: 1}}]}
  expect:
    admitted:
      a: {cq: standalone, flavor: {cpu: default}, count: 1, message: MESSAGE}
"""


@pytest.mark.parametrize("message, passed", [("Quota reserved in ClusterQueue standalone", True),
                                             ("Quota reserved in ClusterQueue other", False)])
def test_the_kueue_reader_takes_sole_flavors_extra_resources_and_messages(tmp_path, message, passed):
    path = tmp_path / "cases.yaml"
    path.write_text(READER_CASES.replace("MESSAGE", message))
    results = run_cases(path)
    assert results[0].passed, results[0].reason
    assert results[1].passed == passed, results[1].reason
    if not passed:
        assert "'message': 'Quota reserved in ClusterQueue standalone'" in results[1].reason


def test_an_admitted_workload_must_name_its_flavor_when_there_are_several(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text(READER_CASES.replace("cq: standalone, priority: -1", "cq: two-flavors, priority: -1").replace(
        "cluster_queues: [standalone]", "cluster_queues: [standalone, two-flavors]", 1))
    with pytest.raises(SpecError, match=r"cases\[0\].admitted\[0\].flavor: ClusterQueue two-flavors has 2 flavors for cpu"):
        run_cases(path)


def test_kueue_quantities_print_as_resource_quantity_does():
    """Kueue's ``resources.ResourceQuantityString`` is ``resource.Quantity.String()``: memory is BinarySI, and an
    amount no binary suffix divides prints whole (1500000000, not 1.5e+09) — the formatter the API server's
    quota messages use (``labkit.engine.quotas.format_quantity``)."""
    tree = _tree({"default": {"cpu": 8, "memory": 10**9}})
    [entry] = k.schedule(tree, [k.Workload("w", "cq", [k.PodSet("main", 1, {"cpu": 1, "memory": 15 * 10**8})])])
    assert entry.message == ("couldn't assign flavors to pod set main: insufficient quota for memory in flavor default, "
                             "previously considered podsets requests (0) + current podset request (1500000000) > "
                             "maximum capacity (1000000000)")
