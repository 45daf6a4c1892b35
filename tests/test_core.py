"""The numba core decides what the reference engine decides: identical `jobs` and `tasks` tables
and the same event sequence, on random scenarios and on the shipped presets."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import engine_scenarios, kube_scenarios, scenarios

import labkit
from labkit import spec
from labkit.course import cases
from labkit.engine import core, core_clock, core_state, families
from labkit.engine.records import result_of
from labkit.engine.simulate import with_policy
from labkit.engine.volcano.reference import run_session
from labkit.errors import LabkitError, SpecError
from labkit.workloads import multi_tenant

EVENT_KEY = ["time", "kind", "job", "task", "node"]
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]


def assert_same(scenario: spec.Scenario) -> tuple[labkit.Result, labkit.Result]:
    fast = labkit.simulate(scenario, engine="numba")
    slow = labkit.simulate(scenario, engine="reference")
    assert (fast.info["engine"], slow.info["engine"]) == ("numba", "reference")
    pd.testing.assert_frame_equal(fast.jobs, slow.jobs)
    pd.testing.assert_frame_equal(fast.tasks, slow.tasks)
    pd.testing.assert_frame_equal(fast.events[EVENT_KEY], slow.events[EVENT_KEY])
    assert fast.info["sessions"] == slow.info["sessions"]
    return fast, slow


@settings(max_examples=220, deadline=None, suppress_health_check=QUIET)
@given(engine_scenarios())
def test_random_scenarios_decide_the_same(scenario):
    assert_same(scenario)


@settings(max_examples=80, deadline=None, suppress_health_check=QUIET)
@given(scenarios())
def test_property_scenarios_decide_the_same(scenario):
    assert_same(scenario)


@settings(max_examples=60, deadline=None, suppress_health_check=QUIET)
@given(kube_scenarios(), st.sampled_from(["volcano-shipped", "volcano-multitenant"]))
def test_resource_quota_admission_under_volcano(scenario, policy):
    """A run no quota refuses a pod in is the core's, identical; one with a refusal (the reference
    logs it, Rejected) is handed to the reference engine, which says why."""
    scenario = with_policy(scenario, policy)
    slow = labkit.simulate(scenario, engine="reference")
    auto = labkit.simulate(scenario)
    if (slow.events.kind == "Rejected").any():
        assert auto.info["engine"] == f"reference (the numba core does not simulate {core.QUOTA_REFUSED})"
        pd.testing.assert_frame_equal(auto.events, slow.events)
    else:
        assert_same(scenario)


def large_cluster(nodes: int, jobs: int, load: float, gangs_preemptible: bool, seed: int) -> spec.Scenario:
    """Four tenants on more than 100 nodes of 8 GPUs (beyond 100 nodes Volcano scans a share of
    them from a rotating start, and the core's shortcuts for failed attempts differ): single-pod
    jobs of 1-8 GPUs, preemptible, and as many gangs of 2-4 pods of 8 GPUs, preemptible or not."""
    workload = multi_tenant(jobs, nodes * 8, load=load, weights=(0.2, 0.05, 0.05, 0.2, 0.3, 0.2), cap=20_000,
                            gangs_preemptible=gangs_preemptible)
    return spec.validate({
        "name": "large-cluster", "seed": seed, "horizon": "4h",
        "cluster": {"pools": [{"name": "n", "count": nodes,
                               "resources": {"nvidia.com/gpu": 8, "cpu": 96, "memory": "1024Gi"}}]},
        **workload, "scheduler": {"policy": "volcano-multitenant"}})


@pytest.mark.parametrize(("nodes", "gangs_preemptible", "seed"), [(101, False, 3), (110, True, 5)])
def test_large_clusters_decide_the_same(nodes, gangs_preemptible, seed):
    """130 jobs arriving at five times what the cluster runs: gangs starve (not preemptible) or
    are evicted (preemptible) on more than 100 nodes. Allocate's remembered failed scans, preempt
    and reclaim attempts proved to fail beyond their scan's share of the nodes, and victim votes
    bounded over the live jobs leave every decision as the reference engine makes it."""
    fast, _ = assert_same(large_cluster(nodes, 130, 5.0, gangs_preemptible, seed))
    gangs = fast.jobs[fast.jobs.gpus >= 16]
    assert (gangs.start - gangs.submit > 600).any()  # the case these shortcuts are for
    assert (gangs.evictions.sum() > 0) == gangs_preemptible


def test_a_quota_refusal_falls_back_and_numba_alone_says_why():
    burst = cases.quota_burst()  # team C's 6 jobs of 4 GPUs against a 16-GPU quota: the 5th is refused
    result = labkit.simulate(burst)
    rejected = result.events[result.events.kind == "Rejected"]
    assert set(rejected.job) == {"team-c/c-eval-4", "team-c/c-eval-5"} and set(rejected.reason) == {"FailedCreate"}
    assert rejected.message.iloc[0].endswith("exceeded quota: team-c, requested: requests.nvidia.com/gpu=4, "
                                             "used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16")
    with pytest.raises(LabkitError, match="pods a ResourceQuota refuses"):
        labkit.simulate(burst, engine="numba")
    assert labkit.simulate(cases.quota_burst(gpu_quota=24)).info["engine"] == "numba"  # 24 GPUs admit all six


def test_case_study_week_is_identical():
    fast, slow = assert_same(spec.preset("case-study"))
    pd.testing.assert_frame_equal(fast.events, slow.events)  # the reasons and messages too


def test_a_cluster_that_changes_is_identical():
    """Queue, PriorityClass and conf changes among spot interruptions: the core's own run."""
    fast, _ = assert_same(changing_cluster())
    assert set(fast.events.kind) >= {"QueueUpdated", "PriorityClassUpdated", "SchedulerConfReloaded"}


def test_fragmentation_is_identical():
    fast, slow = assert_same(spec.preset("fragmentation"))
    pd.testing.assert_frame_equal(fast.events, slow.events)


def gang_evicted_twice() -> spec.Scenario:
    """A 4-pod gang fills a node's pod limit; two pending jobs of the same priority each preempt
    one of its pods (drf decides) in the same session."""
    job = {"duration": 60, "gracePeriod": 0, "preemptible": False, "priorityClassName": "low"}
    node = {"name": "p", "count": 1, "resources": {"nvidia.com/gpu": 2, "cpu": 16, "pods": 4}}
    gang = [{"name": "worker", "resources": {"cpu": 1}},
            {"name": "ps", "replicas": 3, "resources": {"cpu": 1}}]
    return spec.validate({
        "name": "gang-evicted-twice",
        "cluster": {"pools": [node]},
        "priorityClasses": [{"name": "low", "value": 10}],
        "jobs": [
            {**job, "name": "gang", "preemptible": True, "status": {"phase": "Inqueue"}, "tasks": gang},
            {**job, "name": "cpu", "tasks": [{"resources": {"cpu": 1}}]},
            {**job, "name": "gpu", "status": {"phase": "Inqueue"},
             "tasks": [{"resources": {"nvidia.com/gpu": 1}}]},
        ],
        "scheduler": {"policy": "volcano-multitenant"},
    })


def test_a_gang_evicted_twice_in_one_session_restarts_once():
    """Regression (clock.py `_evict`): the first eviction restarts the gang and deletes all its
    pods; the second pod is counted as evicted but was deleted twice and the job restarted twice."""
    _, slow = assert_same(gang_evicted_twice())
    events = slow.events
    assert (events.kind == "Evicted").sum() == 2 and (events.kind == "Restarting").sum() == 1
    assert not events[events.kind == "Deleted"].duplicated(["time", "task"]).any()


def hierarchical_drf() -> spec.Scenario:
    data = spec.dump(spec.preset("fragmentation"))
    scenario = spec.loads(data).model_dump(mode="json", by_alias=True, exclude_unset=True)
    for plugin in scenario["scheduler"]["conf"]["tiers"][1]["plugins"]:
        if plugin["name"] == "drf":
            plugin["enableHierarchy"] = True
    scenario["scheduler"]["conf"]["tiers"][1]["plugins"] = [
        p for p in scenario["scheduler"]["conf"]["tiers"][1]["plugins"] if p["name"] != "proportion"
    ]
    return spec.validate(scenario)


def test_what_the_core_does_not_simulate_runs_on_the_reference_and_says_so():
    result = labkit.simulate(hierarchical_drf())
    assert result.info["engine"] == "reference (the numba core does not simulate hierarchical drf)"
    with pytest.raises(LabkitError, match="numba core does not simulate hierarchical drf"):
        labkit.simulate(hierarchical_drf(), engine="numba")


def test_engine_choice():
    scenario = spec.preset("fragmentation")
    assert labkit.simulate(scenario).info["engine"] == "numba"
    assert labkit.simulate(scenario, session=run_session).info["engine"] == "reference"
    with pytest.raises(LabkitError, match="custom session"):
        labkit.simulate(scenario, session=run_session, engine="numba")
    with pytest.raises(LabkitError, match="expected auto, numba or reference"):
        labkit.simulate(scenario, engine="gpu")


def test_a_changed_queue_weight_runs_again():
    scenario = spec.preset("case-study")
    before = labkit.simulate(scenario)
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["queues"][1]["weight"] = 1  # team-b: 3 -> 1
    after = labkit.simulate(spec.validate(data))
    assert not after.jobs.equals(before.jobs)
    pd.testing.assert_frame_equal(labkit.simulate(scenario).jobs, before.jobs)


def test_small_buffers_grow_and_give_the_same_run():
    compiled, static, missing = families.prepare(spec.preset("fragmentation"))
    assert missing is None
    whole, grown = families.run(compiled, static), families.run(compiled, static, scale=0.01)
    assert grown.events == whole.events and len(whole.events) > 0
    assert np.array_equal(grown.runs, whole.runs, equal_nan=True)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def changing_cluster() -> spec.Scenario:
    """The spot example (its Queue and PriorityClass changes), its conf switched to
    volcano-multitenant at 3 h and back at 10 h."""
    data = labkit.load(Path(labkit.__file__).parent / "examples" / "spot-and-changes.yaml").model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    data["changes"] += [{"at": "3h", "scheduler": {"policy": "volcano-multitenant"}},
                        {"at": "10h", "scheduler": {"policy": "volcano-shipped"}}]
    return spec.validate(data)


FAMILIES = {
    "volcano": lambda: cases.case_study(nodes=32, hours=12),
    "volcano with changes": changing_cluster,
    "kueue": lambda: labkit.load(EXAMPLES / "kueue-cohort.yaml"),
    "slurm": lambda: with_policy(cases.case_study(nodes=32, hours=12), "slurm-fairshare"),
    "kube": lambda: with_policy(cases.case_study(nodes=32, hours=12), "kube-coscheduling"),
}
"""A scenario each family's core runs (its own entry point and clock), with many sessions."""


@pytest.mark.parametrize("family", FAMILIES)
def test_a_run_cut_into_single_steps_is_the_same_run(family, monkeypatch):
    """The jitted loop returns to Python between calls (progress, Ctrl-C); cut after every step
    (an instant's events or a session), the run is the one of a single call."""
    compiled, static, missing = families.prepare(FAMILIES[family]())
    assert missing is None
    scale = 16.0  # buffers that need not grow: a grown run starts again, its progress too
    whole = families.run(compiled, static, scale)
    monkeypatch.setattr(core, "FIRST_STEPS", 1)
    monkeypatch.setattr(core, "STEP_SECONDS", 0.0)
    seen = []
    cut = families.run(compiled, static, scale, progress=lambda done, jobs, now: seen.append((done, jobs, now)))
    one, cuts = result_of(compiled, whole), result_of(compiled, cut)
    for table in ("jobs", "tasks", "events"):
        pd.testing.assert_frame_equal(getattr(cuts, table), getattr(one, table))
    assert np.array_equal(cut.runs, whole.runs, equal_nan=True) and cut.sessions == whole.sessions
    assert len(seen) >= whole.sessions  # one call per step, each step told
    done, jobs, now = map(np.array, zip(*seen))
    assert (np.diff(done) >= 0).all() and (np.diff(now) >= 0).all() and set(jobs) == {compiled.problem.n_jobs}
    assert done[-1] <= cut.done.sum() and now[-1] <= cuts.events.time.max()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_state_struct_is_laid_out_as_numba_reads_it(family, monkeypatch):
    """An entry point takes the run's fields as one pointer to a struct the driver lays out
    (core_state.State), not as a tuple of ~290 arrays its wrapper would unbox one by one (with the
    code taking the tuple apart, a third of the Volcano entry point's cold compile): each member where
    LLVM puts it, each array as numba's array model holds it."""
    from numba.core.registry import cpu_target

    made = []

    class Recorded(core_state.State):
        def __init__(self, fields):
            super().__init__(fields)
            made.append(self)

    monkeypatch.setattr(core, "State", Recorded)
    compiled, static, _ = families.prepare(FAMILIES[family]())
    families.run(compiled, static)
    state = made[0]
    context = cpu_target.target_context
    struct = context.data_model_manager[state.numba_type].get_value_type().pointee
    assert struct.get_abi_size(context.target_data) == len(state.buffer)
    for i, (name, value) in enumerate(zip(state.fields._fields, state.fields)):
        offset = struct.get_element_offset(context.target_data, i)
        if isinstance(value, np.ndarray):  # meminfo, parent, size, itemsize, data, shape, strides
            member = np.frombuffer(state.buffer, np.int64, 5 + 2 * value.ndim, offset)
            assert list(member) == [0, 0, value.size, value.itemsize, value.ctypes.data, *value.shape, *value.strides], name
        else:
            assert np.frombuffer(state.buffer, np.asarray(value).dtype, 1, offset)[0] == value, name


def head_of_line(strategy: str | None) -> spec.Scenario:
    """One 8-GPU node: a 6-GPU job runs, an 8-GPU job (the head) waits for it, and a 2-GPU job
    submitted after the head fits beside the running one."""
    gpu = "nvidia.com/gpu"
    scheduler = {"policy": "helios-fifo"} | ({"queueingStrategy": strategy} if strategy else {})
    return spec.validate({
        "cluster": {"pools": [{"name": "n", "count": 1, "resources": {gpu: 8, "cpu": 96}}]},
        "jobs": [{"name": "run", "duration": 100, "tasks": [{"resources": {gpu: 6}}]},
                 {"name": "head", "submit": 10, "duration": 100, "tasks": [{"resources": {gpu: 8}}]},
                 {"name": "small", "submit": 20, "duration": 10, "tasks": [{"resources": {gpu: 2}}]}],
        "scheduler": scheduler,
    })


@pytest.mark.parametrize("strategy", [None, "StrictFIFO", "BestEffortFIFO"])
def test_strict_fifo_blocks_the_queue_at_its_head(strategy):
    fast, _ = assert_same(head_of_line(strategy))
    start = fast.jobs.set_index("name")["start"]
    if strategy == "BestEffortFIFO":  # Volcano's allocate: the small job passes the blocked head
        assert start["small"] < start["head"]
    else:  # helios-fifo is StrictFIFO: nothing passes the head, which starts when `run` ends
        assert start["head"] >= fast.jobs.set_index("name")["end"]["run"]
        assert start["small"] >= start["head"]


@pytest.mark.parametrize("policy, remembered", [("helios-fifo", True), ("volcano-shipped", False),
                                                ("volcano-multitenant", False)])
def test_discarded_attempts_are_remembered_only_where_they_repeat(policy, remembered):
    """helios-fifo has no queue gate, no preempt or reclaim: its blocked head is passed over in the
    sessions arrivals bring (the parity tests above run it); proportion's gate and preempt's use of
    fit errors turn the memo off."""
    _, static, _ = families.prepare(with_policy(head_of_line(None), policy))
    assert static["attempt_memo"] is remembered


@pytest.mark.parametrize("small_jobs", [12, 80])
def test_a_gang_that_fits_nowhere_is_retried_where_room_grew(small_jobs):
    """A gang of two 8-GPU pods fits no node while one-GPU jobs end one by one on its nodes
    (allocate checks only the nodes that lost a pod since its last full scan), or, with 80, more
    of them end between two sessions than the core logs (then it scans every node again); either
    way it starts when the reference engine starts it."""
    gpu = "nvidia.com/gpu"
    jobs = [{"name": f"small-{i}", "submit": 0, "duration": 30 + 7 * i, "tasks": [{"resources": {gpu: 1}}]}
            for i in range(small_jobs)]
    if small_jobs > 64:
        for job in jobs[10:]:
            job["duration"] = 500  # end together: more frees at one instant than the core's log holds
    jobs.append({"name": "gang", "submit": 5, "duration": 100,
                 "tasks": [{"name": "worker", "replicas": 2, "resources": {gpu: 8}}]})
    nodes = -(-small_jobs // 8) + 1
    scenario = spec.validate({
        "name": "gang-waits", "cluster": {"pools": [{"name": "n", "count": nodes, "resources": {gpu: 8, "cpu": 96}}]},
        "jobs": jobs, "scheduler": {"policy": "volcano-shipped"}})
    fast, _ = assert_same(scenario)
    starts = fast.jobs.set_index("name")["start"]
    assert starts["gang"] > 30  # it waited for a second node to empty


def test_queueing_strategy_is_for_volcano_confs():
    cluster = {"pools": [{"name": "n", "count": 1, "resources": {"cpu": 8}}]}
    for scheduler in ({"slurm": {}, "queueingStrategy": "StrictFIFO"},
                      {"policy": "slurm-builtin", "queueingStrategy": "StrictFIFO"}):
        with pytest.raises(SpecError, match="queueingStrategy"):
            labkit.simulate(spec.validate({"cluster": cluster, "scheduler": scheduler}))


def test_a_run_past_the_event_cap_stops_with_a_one_line_error(monkeypatch):
    monkeypatch.setattr(core, "MAX_EVENTS", 2_000)
    with pytest.raises(LabkitError, match="give the scenario a horizon"):
        labkit.simulate(labkit.preset("case-study"), engine="numba")


def test_two_processes_saving_one_core_function_keep_each_signatures_code(tmp_path):
    """Two test workers compiling one core function for two signatures on a cold cache: the first has
    read the index and not yet written it when the second writes its entry, and the second writes its
    data last. Unlocked, both take data file 1 and the first's index entry loads the second's code."""
    files = type(core_clock.run._cache._cache_file)

    class Paused(files):
        def __init__(self, after_index_read: float = 0.0, before_data: float = 0.0):
            super().__init__(cache_path=str(tmp_path), filename_base="run-1.py311", source_stamp="stamp")
            self.after_index_read, self.before_data = after_index_read, before_data

        def _load_index(self):
            overloads = super()._load_index()
            time.sleep(self.after_index_read)
            return overloads

        def _save_data(self, name, data):
            time.sleep(self.before_data)
            super()._save_data(name, data)

    first = threading.Thread(target=Paused(after_index_read=0.4).save, args=("sig-a", "code of a"))
    second = threading.Thread(target=Paused(before_data=0.8).save, args=("sig-b", "code of b"))
    first.start()
    time.sleep(0.1)
    second.start()
    first.join()
    second.join()
    fresh = Paused()
    assert (fresh.load("sig-a"), fresh.load("sig-b")) == ("code of a", "code of b")


def test_a_core_function_becomes_machine_code_only_in_its_entry_point(monkeypatch):
    """numba optimises each jitted function's module with everything it calls linked in and turns it
    into machine code, at every level of the call tree: half of a cold compile of the core, all of it
    thrown away, since only the entry point runs. A core function (core_state.jit) is IR its callers
    link in, optimised and turned into machine code once, in the entry point's module."""
    from numba import njit
    from numba.core.codegen import JITCodeLibrary

    from labkit.engine.core_state import jit

    emitted = []
    finalize_specific = JITCodeLibrary._finalize_specific

    def recorded(library):
        emitted.append(library.name)
        finalize_specific(library)

    monkeypatch.setattr(JITCodeLibrary, "_finalize_specific", recorded)

    @jit
    def leaf(values, k):
        return np.sort(values)[k]

    @jit
    def middle(values):
        return leaf(values, 0) + 10 * leaf(values, values.size - 1)

    @njit
    def top(values):
        return 2 * middle(values)

    assert top(np.array([3.0, 1.0, 2.0])) == 62.0
    ours = [name.rpartition(".")[2] for name in emitted if name.startswith("test_a_core_function_becomes_")]
    assert ours == ["top"], emitted

