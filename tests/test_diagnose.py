"""labkit.diagnose: one small run per pending cause, and the message the scheduler would give for it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_metrics import J0_END, one_node
from test_simulate import reclaim_scenario, without_overcommit

import labkit
from labkit import diagnose, metrics, spec
from labkit.course import cases
from labkit.errors import LabkitError
from labkit.results import EVENT_COLUMNS, JOB_COLUMNS, TASK_COLUMNS, Result

GPU = "nvidia.com/gpu"
NODE = {GPU: 8, "cpu": 64, "memory": "512Gi"}
CONF_WITHOUT_PROPORTION = {"policy": "gang only", "conf": {
    "actions": "enqueue, allocate",
    "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": [{"name": "predicates"}]}]}}


def cluster(nodes: int = 1, **pool) -> dict:
    return {"pools": [{"name": "gpu", "count": nodes, "resources": NODE, **pool}]}


def job(name: str, gpus: int, queue: str = "a", **extra) -> dict:
    return {"name": name, "queue": queue, "duration": "10h", "tasks": [{"resources": {GPU: gpus}}], **extra}


def run(**data) -> labkit.Result:
    return labkit.simulate(spec.validate({"name": "case", **data}))


@pytest.fixture(scope="module")
def fragmentation():
    return labkit.simulate(spec.preset("fragmentation"))


def test_lifecycle_states(fragmentation):
    assert diagnose.explain(fragmentation, "tp8", at=30).reason == "NotSubmitted"
    running = diagnose.explain(fragmentation, "resident-0", at=100)
    assert (running.reason, running.phase, running.message) == ("Running", "Running", "1/1 pods running, 1 minAvailable")
    assert diagnose.explain(fragmentation, "ml/resident-0", at=30000).reason == "Completed"


def test_insufficient_gpus_in_volcano_words(fragmentation):
    """tp8 asks 8 GPUs; each of the 4 nodes has 4 free: the pod's FailedScheduling (FitErrors) and gang's
    condition, word for word what the recorded real run (oracles/volcano-real/ch02) shows."""
    why = diagnose.explain(fragmentation, "tp8", at=100)
    assert (why.reason, why.phase) == ("Unschedulable", "Inqueue")
    assert why.message == "0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
    assert why.condition == ("1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
                             "Pending: 1 Unschedulable. Origin reason is tp8-worker-0: 0/4 nodes are unavailable: "
                             "4 Insufficient nvidia.com/gpu.")
    assert why.event == why.condition
    assert why.slurm_reason == "Resources"
    assert "tasks in gang unschedulable" in str(why)


def test_enqueue_rejected_by_overcommit():
    """j1 asks 8 GPUs while j0 holds 4 of 8: overcommit's idle room is 8 x 1.2 - 4."""
    result = labkit.simulate(one_node())
    why = diagnose.explain(result, "j1", at=100)
    assert (why.reason, why.phase, why.message) == ("ClusterOverused", "Pending",
                                                    "resource in cluster is overused: overused nvidia.com/gpu")
    assert f"= {8 * 1.2 - 4:g}" in why.details[0]
    assert why.condition == ""  # gang's OnSessionClose skips a PodGroup without pods
    assert why.event == "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"
    assert diagnose.explain(result, "j1", at=J0_END + 1).reason == "Running"


def test_enqueue_rejected_by_queue_capability():
    """Queue a's capability is 4 GPUs: proportion's realCapability refuses an 8-GPU PodGroup for ever."""
    result = run(cluster=cluster(), queues=[{"name": "a", "capability": {GPU: 4}}], jobs=[job("big", 8)])
    why = diagnose.explain(result, "big", at=100)
    assert (why.reason, why.message) == ("QueueResourceQuotaInsufficient",
                                         "queue resource quota insufficient: insufficient nvidia.com/gpu")
    assert any("nvidia.com/gpu: 8 + 0 + 0 - 0 = 8 > 4" in line for line in why.details)
    assert why.slurm_reason == "QOSGrpGRES"


def test_closed_queue():
    result = run(cluster=cluster(), queues=[{"name": "a", "state": "Closed"}], jobs=[job("j", 1)])
    assert diagnose.explain(result, "j", at=10).reason == "QueueClosed"


def test_waiting_for_the_next_session():
    """Sessions every 10 s: a job submitted at 5 s is not enqueued before the session at 10 s."""
    result = run(cluster=cluster(), queues=[{"name": "a"}], jobs=[job("j", 1, submit=5)],
                 scheduler={"policy": "volcano-shipped", "schedulePeriod": 10})
    assert diagnose.explain(result, "j", at=7).reason == "WaitingForSession"


def test_queue_overused():
    """a0 and b0 hold 4 GPUs and 1 pod each; a1 (4) is Inqueue. Water-filling 8 GPUs over requests
    a = 8, b = 4 gives 4 each, and the node's 2 pods 1 each, so deserved <= allocated in every dimension
    (Overused compares them all, pods included): allocate skips queue a."""
    result = run(cluster=cluster(resources={**NODE, "pods": 2}), queues=[{"name": "a"}, {"name": "b"}],
                 jobs=[job("a0", 4), job("b0", 4, queue="b"), job("a1", 4, submit=10)],
                 scheduler=without_overcommit("volcano-shipped"))
    why = diagnose.explain(result, "a1", at=100)
    assert (why.reason, why.phase) == ("QueueOverused", "Inqueue")
    assert "nvidia.com/gpu: deserved 4 <= allocated 4" in why.details


def test_allocate_beyond_deserved():
    """a0 holds 2, b0 holds 4, a1 wants 4: requests a = 6, b = 4 water-fill to 4 each; 2 + 4 > 4."""
    result = run(cluster=cluster(), queues=[{"name": "a"}, {"name": "b"}],
                 jobs=[job("a0", 2), job("b0", 4, queue="b"), job("a1", 4, submit=10)],
                 scheduler=without_overcommit("volcano-shipped"))
    why = diagnose.explain(result, "a1", at=100)
    assert why.reason == "QueueDeservedExceeded"
    assert "nvidia.com/gpu: allocated 2 + request 4 = 6 > deserved 4" in why.details


def test_selector_and_resources_per_node():
    """j needs the "infer" node, which blocker fills: one node is full, the other has the wrong labels."""
    pools = [{"name": "train", "count": 1, "resources": NODE, "labels": {"pool": "train"}},
             {"name": "infer", "count": 1, "resources": NODE, "labels": {"pool": "infer"}}]
    on_infer = {"resources": {GPU: 8}, "nodeSelector": {"pool": "infer"}}
    result = run(cluster={"pools": pools}, queues=[{"name": "a"}], scheduler=CONF_WITHOUT_PROPORTION,
                 jobs=[{**job("blocker", 8), "tasks": [on_infer]}, {**job("j", 8, submit=10), "tasks": [on_infer]}])
    why = diagnose.explain(result, "j", at=100)
    assert why.reason == "Unschedulable"
    assert why.message == ("0/2 nodes are unavailable: 1 Insufficient nvidia.com/gpu, "
                           "1 node(s) didn't match Pod's node affinity/selector.")


def test_untolerated_taint_and_a_full_node():
    pools = [{"name": "infer", "count": 1, "resources": NODE,
              "taints": [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]},
             {"name": "train", "count": 1, "resources": NODE}]
    result = run(cluster={"pools": pools}, queues=[{"name": "a"}], scheduler=CONF_WITHOUT_PROPORTION,
                 jobs=[job("blocker", 8), job("j", 8, submit=10)])
    assert diagnose.explain(result, "j", at=100).message == (
        "0/2 nodes are unavailable: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {dedicated: infer}.")


def test_gang_that_fits_pod_by_pod_but_not_whole():
    """A full node and an empty one: each 8-GPU pod of a 2-pod gang fits the empty node alone, never both."""
    result = run(cluster=cluster(2), queues=[{"name": "a"}], scheduler=CONF_WITHOUT_PROPORTION,
                 jobs=[job("blocker", 8), {**job("gang", 8, submit=10),
                                           "tasks": [{"replicas": 2, "resources": {GPU: 8}}]}])
    why = diagnose.explain(result, "gang", at=100)
    assert why.reason == "NotEnoughResources"
    assert why.message == "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."  # the second pod's
    fit = ("pod group is not ready, 2 Pending, 2 minAvailable; Pending: 1 Schedulable, 1 Unschedulable. "
           "Origin reason is gang-worker-1: 0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.")
    assert why.condition == f"1/2 tasks in gang unschedulable: {fit}"  # minAvailable 2 - 1 schedulable
    assert why.event == f"2/2 tasks in gang unschedulable: {fit}"  # 2 Pending


def test_pipelined_while_victims_terminate():
    """The reclaim evicts two pods of a at 2 h (grace 60 s); b0 is pipelined onto their node meanwhile."""
    result = labkit.simulate(reclaim_scenario())
    evicted = result.tasks.evicted.dropna().min()
    why = diagnose.explain(result, "b0", at=evicted + 30)
    assert why.reason == "Pipelined"
    assert why.message == ("Pod default/b0-worker-0 can possibly be assigned to gpu-0, once resource is released "
                           "and minAvailable is satisfied")
    fit = "pod group is not ready, 1 Pipelined, 1 minAvailable"
    assert (why.condition, why.event) == (f"1/1 tasks in gang unschedulable: {fit}",
                                          f"0/1 tasks in gang unschedulable: {fit}")


def test_resource_quota_refusal_from_the_run():
    """Namespace t's ResourceQuota allows 8 GPUs of requests: the run's own FailedCreate says why j1's pod
    does not exist while j0 holds 8; the PodGroup is Inqueue without pods (gang event 0/0), until the
    vcjob controller stops retrying."""
    result = run(cluster=cluster(2), tenants=[{"name": "t", "resourceQuota": {"hard": {"requests.nvidia.com/gpu": 8}}}],
                 queues=[{"name": "a"}], jobs=[{**job("j0", 8), "namespace": "t"},
                                               {**job("j1", 8, submit=10), "namespace": "t"}])
    why = diagnose.explain(result, "t/j1", at=100)
    assert (why.reason, why.phase) == ("FailedCreate", "Inqueue")
    assert why.message == ('pods "j1-worker-0" is forbidden: exceeded quota: t, requested: requests.nvidia.com/gpu=8, '
                           "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8")
    assert why.event == "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"
    end = result.jobs.set_index("name").end["j1"]  # j0 holds the quota for 10 h: the controller gives up
    assert diagnose.explain(result, "t/j1", at=end).reason == "Terminated"


def test_unknown_job(fragmentation):
    with pytest.raises(KeyError):
        diagnose.explain(fragmentation, "nope", at=0)


# ------------------------------------------------------------------------------------ gang deadlock


def half_placed_gangs() -> Result:
    """Two 2-pod gangs (8 GPUs a pod) on 2 x 8 GPUs, each with one pod bound: a Result written by hand,
    as a real cluster without gang scheduling would leave it (Volcano issue #3373)."""
    scenario = spec.validate({"cluster": cluster(2), "queues": [{"name": "a"}],
                              "jobs": [{**job(f"g{i}", 8), "tasks": [{"replicas": 2, "resources": {GPU: 8}}]}
                                       for i in range(2)]})
    jobs = pd.DataFrame([[f"g{i}", "default", "a", 0, 16.0, 0.0, 0.0, math.nan, math.nan, "Inqueue", 0, 0.0,
                          math.nan, math.nan] for i in range(2)], columns=JOB_COLUMNS)
    tasks = pd.DataFrame([[f"default/g{i}", "worker", 0, f"gpu-{i}", 0.0, math.nan, math.nan] for i in range(2)],
                         columns=TASK_COLUMNS).assign(cpu=0.0, memory=0.0, pods=1.0, **{GPU: 8.0})
    return Result(scenario=scenario, jobs=jobs, tasks=tasks, events=pd.DataFrame(columns=EVENT_COLUMNS),
                  info={"horizon": 3600.0, "gpus": 16.0, "nodes": 2})


def test_gang_deadlock_detected():
    table = diagnose.gang_deadlocks(half_placed_gangs(), at=60)
    assert table.job.tolist() == ["default/g0", "default/g1"]
    assert table[["running", "min_available"]].values.tolist() == [[1, 2], [1, 2]]
    assert not table.fits_now.any() and table.fits_if_others_release.all() and table.deadlocked.all()


def test_no_deadlock_in_a_gang_scheduled_run(fragmentation):
    assert diagnose.gang_deadlocks(fragmentation, at=100).empty


# ------------------------------------------------------------------------------------ reports and views


def test_starvation_report_explains_each_job():
    result = labkit.simulate(one_node())
    report = diagnose.starvation_report(result, threshold=600)
    assert report.name.tolist() == ["j1"] and report.reason.tolist() == ["ClusterOverused"]


def test_events_like_kubectl(fragmentation):
    events = diagnose.get_events(fragmentation, "tp8")
    assert events.columns.tolist() == ["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    bound = events[events.REASON == "Scheduled"].iloc[0]
    assert bound.OBJECT == "pod/tp8-worker-0"
    assert bound.MESSAGE.startswith("Successfully assigned ml/tp8-worker-0 to gpu-")
    assert events.MESSAGE.tolist()[0] == "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"
    assert events.MESSAGE.tolist()[-1] == "pod group is ready"
    assert "Submitted" not in set(diagnose.get_events(fragmentation).REASON)  # no such event on a real cluster


def test_describe_podgroup(fragmentation):
    text = diagnose.describe_podgroup(fragmentation, "tp8", at=100)
    assert "Min Member:           1" in text
    assert "Min Resources:        cpu: 32, memory: 256Gi, nvidia.com/gpu: 8" in text
    assert "Phase:    Inqueue" in text
    assert "Message:  1/1 tasks in gang unschedulable" in text
    assert text.index("Events:") < text.index("Warning  Unschedulable  40s      0/0 tasks in gang unschedulable")
    assert text.endswith("Origin reason is tp8-worker-0: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu.")


def test_age_like_kubectl():
    assert [diagnose.age(s) for s in (45, 200, 7500, 3 * 86400 + 4 * 3600)] == ["45s", "3m20s", "2h5m", "3d4h"]
    assert diagnose.age(np.inf) == "<unknown>"


def test_snapshot_counts_releasing_pods_as_holding():
    result = labkit.simulate(reclaim_scenario())
    evicted = result.tasks.evicted.dropna().min()
    held = metrics.holding(result, evicted + 30)
    assert (held.status == "Releasing").sum() == 2


def _kueue_run():
    return labkit.simulate(cases.cohort_borrowing(a_jobs=4))


def test_explain_reads_a_kueue_workload_in_kueue_s_words():
    """A Kueue run is explained from its Workload's conditions, not compiled as Volcano (which printed
    Volcano's gang messages for it): admitted, preempted (the Preempted condition's reason and message),
    waiting for quota (QuotaReserved=False's message), finished."""
    result = _kueue_run()
    events = result.events
    preempted = events[events.kind == "Preempted"].iloc[0]
    why = diagnose.explain(result, preempted.job, preempted.time)
    assert (why.object, why.phase, why.reason, why.message) == ("Workload", "Pending", preempted.reason, preempted.message)
    assert why.message.startswith("Preempted to accommodate a workload (UID: ")
    assert str(why).startswith(f"{preempted.job} at t={diagnose.age(preempted.time)}: Workload Pending — ")
    waiting = events[(events.kind == "Pending") & events.message.str.startswith("couldn't assign flavors")].iloc[0]
    why = diagnose.explain(result, waiting.job, waiting.time)
    assert (why.reason, why.message) == ("WaitingForQuota", waiting.message)
    row = result.jobs.iloc[0]
    key, name = f"{row.namespace}/{row['name']}", row["name"]
    admitted = diagnose.explain(result, key, row.start + 1)
    assert (admitted.phase, admitted.message) == ("Admitted", f"Quota reserved in ClusterQueue {row.queue}")
    finished = diagnose.explain(result, key, row.end)
    assert finished.message == f"Workload '{row.namespace}/job-{name}' is declared finished"
    assert diagnose.explain(result, key, -1).reason == "NotSubmitted"


def test_get_events_of_a_kueue_run_as_kueue_records_them():
    """The formats of Kueue's own event messages (scheduler.go, preemption.go, evict.go, reconciler.go);
    QuotaReserved's wait counts from the last eviction of a re-admitted Workload."""
    result = _kueue_run()
    preempted = result.events[result.events.kind == "Preempted"].iloc[0]
    table = diagnose.get_events(result, preempted.job)
    name = preempted.job.split("/")[1]
    rows = list(zip(table.REASON, table.OBJECT, table.MESSAGE))
    assert rows[0] == ("CreatedWorkload", f"job/{name}", f"Created Workload: {preempted.job.split('/')[0]}/job-{name}")
    reasons = [r for r, _, _ in rows]
    at = reasons.index("EvictedDueToPreempted")
    assert reasons[at:at + 3] == ["EvictedDueToPreempted", "Preempted", "Stopped"]
    assert rows[at + 1][2].startswith(preempted.message + "; preemptor effective priority: ")
    assert rows[at + 2] == ("Stopped", f"job/{name}", preempted.message)
    again = result.events[(result.events.job == preempted.job) & (result.events.kind == "QuotaReserved")
                          & (result.events.time > preempted.time)].time.iloc[0]
    queue = result.jobs.queue[result.jobs.name == name].iloc[0]
    assert (f"Quota reserved in ClusterQueue {queue}, wait time since queued was {again - preempted.time:.0f}s"
            in list(table.MESSAGE[at + 3:]))
    assert "Admitted" in reasons and "Started" in reasons and not any("RestartJob" in m for m in table.MESSAGE)
    assert set(table.TYPE[table.REASON == "WaitingForQuota"]) <= {"Warning"}


def test_describe_podgroup_refuses_a_kueue_run_in_one_line():
    result = _kueue_run()
    with pytest.raises(LabkitError, match=r"^describe_podgroup: a Kueue run has Workloads, not PodGroups"):
        diagnose.describe_podgroup(result, result.jobs.name.iloc[0], 10.0)



@pytest.mark.parametrize("policy", ["kube-default", "kube-coscheduling"])
def test_explain_a_kube_scheduler_run_in_its_own_words(policy):
    """A kube-scheduler run is explained by its pods' last FailedScheduling as the run recorded it
    ("0/N nodes are available: ..."), not by a Volcano session's PodGroup and enqueue votes."""
    result = labkit.simulate(cases.four_jobs(policy))
    events = result.events
    first = events[events.kind == "FailedScheduling"].iloc[0]
    notes = events[(events.job == first.job) & (events.time <= first.time) & events.kind.isin(["FailedScheduling", "Waiting"])]
    note = notes.iloc[-1]  # the last of its pods' notes at that instant
    why = diagnose.explain(result, note.job, note.time)
    assert (why.object, why.phase, why.reason, why.message) == ("Pod", "Pending", note.reason, note.message)
    assert str(why).startswith(f"{note.job} at t={diagnose.age(note.time)}: Pod Pending — ") and "JobEnqueueable" not in str(why)
    started = result.jobs.iloc[0]
    assert diagnose.explain(result, started["name"], started.start).reason == "Running"


def test_explain_a_slurm_run_with_squeue_s_reason_and_the_planned_start():
    result = labkit.simulate(cases.four_jobs("slurm-backfill"))
    events = result.events
    planned = events[events.kind == "StartTime"].iloc[0]
    pending = events[(events.job == planned.job) & (events.kind == "Pending") & (events.time <= planned.time)].iloc[-1]
    why = diagnose.explain(result, planned.job, planned.time)
    assert (why.object, why.phase, why.reason) == ("Job", "PENDING", pending.reason)
    assert why.message == f"squeue: PENDING ({pending.reason})" and why.details == [planned.message]
    assert why.slurm_reason == pending.reason
    first = events[events.kind == "Bound"].iloc[0]
    assert diagnose.explain(result, first.job, first.time).message == first.message


def test_memory_in_an_overcommit_line_reads_in_gi():
    """A job whose memory does not fit overcommit's idle room: the line gives memory in Gi, so the sum a
    student checks by hand adds up (raw bytes in %g form, 6.04731e+12, did not)."""
    node = {GPU: 8, "cpu": 64, "memory": "100Gi"}
    result = run(cluster={"pools": [{"name": "gpu", "count": 1, "resources": node}]}, queues=[{"name": "a"}],
                 jobs=[{"name": "j0", "queue": "a", "duration": "10h",
                        "tasks": [{"resources": {GPU: 1, "memory": "70Gi"}}]},
                       {"name": "j1", "queue": "a", "duration": "10h",
                        "tasks": [{"resources": {GPU: 1, "memory": "60Gi"}}]}])
    why = diagnose.explain(result, "j1", at=100)
    assert why.reason == "ClusterOverused"
    assert f"memory: inqueue 0 + job 60Gi > total 100Gi x 1.2 - used 70Gi = {100 * 1.2 - 70:g}Gi" in why.details[0]
