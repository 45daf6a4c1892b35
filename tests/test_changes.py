"""Changes in time (`changes`: a Queue's fields, a PriorityClass's value, the scheduler conf), each
taking effect at the first session after its time, as a `kubectl apply` does on Volcano."""

import re
import warnings
from pathlib import Path

import pytest
import yaml
from scenarios import assert_same
from test_spec import run_cli

import labkit
from labkit import diagnose, metrics, spec
from labkit.errors import LabkitError, SpecError


def _data(changes, jobs, queues=None, classes=None, policy="volcano-shipped", nodes=1):
    return {"name": "changes", "cluster": {"pools": [{"name": "a", "count": nodes, "resources": {"nvidia.com/gpu": 8}}]},
            "queues": queues or [{"name": "a"}],
            "priorityClasses": classes or [],
            "jobs": jobs, "scheduler": {"policy": policy}, "changes": changes}


def _job(name, submit=0, queue="a", gpus=8, duration="1h", **extra):
    return {"name": name, "queue": queue, "submit": submit, "duration": duration,
            "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": gpus}}], **extra}


def _run(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", labkit.errors.LabkitWarning)
        return labkit.simulate(spec.validate(data))


def _start(result, name):
    return float(result.jobs.set_index("name").start[name])


def test_a_queue_capability_raised_lets_its_next_job_start_at_the_next_session():
    """Queue a is capped at 8 GPUs on a 16-GPU cluster: its jobs run one at a time. Raised to 16 at
    30 min, its second job is bound by the session at 30 min, not when the first ends."""
    jobs = [_job("j0"), _job("j1")]
    queues = [{"name": "a", "capability": {"nvidia.com/gpu": 8}}]
    plain = _run(_data([], jobs, queues, nodes=2))
    changed = _run(_data([{"at": "30m", "queue": {"name": "a", "capability": {"nvidia.com/gpu": 16}}}],
                         jobs, queues, nodes=2))
    assert _start(plain, "j1") >= _start(plain, "j0") + 3600
    assert 1800 < _start(changed, "j1") <= 1800 + 1
    logged = changed.events[changed.events.kind == "QueueUpdated"]
    assert logged.time.tolist() == [1800.0] and logged.message.tolist() == ["queue a: capability={'nvidia.com/gpu': 16}"]


def test_a_priority_class_value_changed_reorders_the_pending_podgroups():
    """Two jobs wait behind a running one; lowering the first's PriorityClass below the second's
    at 30 min makes the second run next; the run records the new priority for the jobs not started."""
    classes = [{"name": "first", "value": 100}, {"name": "second", "value": 10}]
    jobs = [_job("running"), _job("p1", submit=60, priorityClassName="first"),
            _job("p2", submit=60, priorityClassName="second")]
    plain = _run(_data([], jobs, classes=classes))
    changed = _run(_data([{"at": "30m", "priorityClass": {"name": "first", "value": 1}}], jobs, classes=classes))
    assert _start(plain, "p1") < _start(plain, "p2")
    assert _start(changed, "p2") < _start(changed, "p1")
    assert changed.jobs.set_index("name").priority["p1"] == 1
    assert changed.events[changed.events.kind == "PriorityClassUpdated"].message.tolist() == [
        "priorityclass first: value=1"]


def test_switching_preempt_on_lets_a_waiting_high_priority_job_preempt_at_the_next_session():
    """The preemption case study under the shipped conf (no preempt): the first hotfix (1.3 h) waits
    for the pre-training gang. The conf with preempt applied at 2 h: the session at 2 h evicts."""
    data = spec.preset("preemption-checkpoint").model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["scheduler"] = {"policy": "volcano-shipped"}
    plain = _run(data)
    changed = _run({**data, "changes": [{"at": "2h", "scheduler": {"policy": "volcano-multitenant"}}]})
    assert not (plain.events.kind == "Evicted").any()
    evicted = changed.events[changed.events.kind == "Evicted"]
    assert evicted.time.min() == 7200 and set(evicted.reason) == {"preempt"}  # that instant's session
    first = plain.jobs[plain.jobs.name.str.startswith("hotfix")].sort_values("submit").name.iloc[0]
    assert _start(changed, first) < _start(plain, first)
    reloaded = changed.events[changed.events.kind == "SchedulerConfReloaded"]
    assert reloaded.time.tolist() == [7200.0] and reloaded.message.iloc[0].startswith(
        "actions: enqueue, allocate, backfill, reclaim, preempt; plugins: priority, gang")


def test_explain_and_snapshots_read_the_cluster_as_the_changes_left_it():
    jobs = [_job("j0"), _job("j1")]
    queues = [{"name": "a", "capability": {"nvidia.com/gpu": 8}}]
    result = _run(_data([{"at": "30m", "queue": {"name": "a", "capability": {"nvidia.com/gpu": 16}}}],
                        jobs, queues, nodes=2))
    before, after = metrics.snapshot(result, 600), metrics.snapshot(result, 1900)
    gpu = before.problem.resource_names.index("nvidia.com/gpu")
    assert before.problem.queue_capability[0, gpu] != after.problem.queue_capability[0, gpu]
    assert "queue capability: nvidia.com/gpu=8" in str(diagnose.explain(result, "j1", 600))
    after_change = diagnose.explain(result, "j1", 1800.5)
    assert after_change.phase == "Inqueue" and "capability" not in str(after_change)


def _preemption_case(changes: list[dict]) -> dict:
    data = spec.preset("preemption-checkpoint").model_dump(mode="json", by_alias=True, exclude_unset=True)
    return {**data, "scheduler": {"policy": "volcano-shipped"}, "changes": changes}


CORE_CASES = {
    "capability": _data([{"at": "30m", "queue": {"name": "a", "capability": {"nvidia.com/gpu": 16}}}],
                        [_job("j0"), _job("j1")], [{"name": "a", "capability": {"nvidia.com/gpu": 8}}], nodes=2),
    "weight and deserved": _data(
        [{"at": "20m", "queue": {"name": "b", "weight": 3}},
         {"at": "20m", "queue": {"name": "a", "deserved": {"nvidia.com/gpu": 4}, "guarantee": {"nvidia.com/gpu": 2}}}],
        [_job(f"a{i}", submit=60 * i, gpus=4, duration="2h") for i in range(4)]
        + [_job(f"b{i}", submit=60 * i, queue="b", gpus=4, duration="1h") for i in range(4)],
        [{"name": "a"}, {"name": "b"}], nodes=2, policy="volcano-multitenant"),
    "priority class": _data([{"at": "30m", "priorityClass": {"name": "first", "value": 1}}],
                            [_job("running"), _job("p1", submit=60, priorityClassName="first"),
                             _job("p2", submit=60, priorityClassName="second")],
                            classes=[{"name": "first", "value": 100}, {"name": "second", "value": 10}]),
    "conf with preempt": _preemption_case([{"at": "2h", "scheduler": {"policy": "volcano-multitenant"}}]),
    "conf and back": _preemption_case([{"at": "2h", "scheduler": {"policy": "volcano-multitenant"}},
                                       {"at": "2h30m", "scheduler": {"policy": "volcano-shipped",
                                                                     "queueingStrategy": "StrictFIFO"}},
                                       {"at": "2h30m", "priorityClass": {"name": "high", "value": 5}}]),
}


@pytest.mark.parametrize("case", CORE_CASES)
def test_the_numba_core_runs_changes_as_the_reference_engine_does(case):
    """Queue, PriorityClass and conf changes (two at one instant, a conf and back) run on the numba
    core, with the reference engine's jobs, tasks and events (the changes' own lines included)."""
    scenario = spec.validate(CORE_CASES[case])
    fast, _ = assert_same(scenario)
    assert _run(CORE_CASES[case]).info["engine"] == "numba"
    logged = fast.events[fast.events.kind.isin(["QueueUpdated", "PriorityClassUpdated", "SchedulerConfReloaded"])]
    assert len(logged) == len(scenario.changes) and set(logged.reason) == {"Applied"}


def test_a_change_to_volcanos_own_default_queue_caps_its_jobs():
    """The `default` queue the scenario does not declare (Volcano creates it) takes a change too:
    capped at 8 GPUs from 30 s, its second job waits for the first."""
    jobs = [_job("j0", queue="default"), _job("j1", submit=60, queue="default")]
    fast, _ = assert_same(spec.validate(_data([{"at": "30s", "queue": {"name": "default",
                                                                        "capability": {"nvidia.com/gpu": 8}}}],
                                              jobs, nodes=2)))
    assert _start(fast, "j1") >= _start(fast, "j0") + 3600


def test_a_conf_the_core_does_not_simulate_hands_the_run_to_the_reference_engine():
    """A change to a conf with hierarchical drf: the reference engine runs the scenario, saying
    which change's conf the numba core does not simulate."""
    conf = spec.policy("volcano-multitenant").model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        for plugin in tier["plugins"]:
            if plugin["name"] == "drf":
                plugin["enableHierarchy"] = True
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "proportion"]
    data = _data([{"at": "30m", "scheduler": {"conf": conf}}], [_job("j0")])
    why = "hierarchical drf (in the conf a change applies at 1800s)"
    with pytest.raises(LabkitError, match=re.escape(f"does not simulate {why}")):
        labkit.simulate(spec.validate(data), engine="numba")
    with pytest.warns(labkit.errors.LabkitWarning, match="reference engine runs this scenario"):
        assert labkit.simulate(spec.validate(data)).info["engine"] == f"reference (the numba core does not simulate {why})"


@pytest.mark.parametrize("change, path, message", [
    ({"at": "1h", "queue": {"name": "nope", "weight": 2}}, "changes[0].queue.name", "no queue named 'nope'"),
    ({"at": "1h", "priorityClass": {"name": "nope", "value": 2}}, "changes[0].priorityClass.name",
     "no PriorityClass named 'nope'"),
    ({"at": "1h", "queue": {"name": "a", "weight": 0}}, "changes[0].queue.weight", "greater than or equal to 1"),
    ({"at": "1h", "queue": {"name": "a"}, "scheduler": {"policy": "volcano-multitenant"}}, "changes[0]",
     "give one of queue, priorityClass or scheduler, not queue and scheduler"),
    ({"at": "1h", "scheduler": {"policy": "volcano-multitenant", "schedulePeriod": 5}},
     "changes[0].scheduler.schedulePeriod", "command-line flag"),
    ({"at": "-1h", "queue": {"name": "a", "weight": 2}}, "changes[0].at", "not a duration"),
])
def test_bad_changes_name_the_field(change, path, message):
    with pytest.raises(SpecError) as err:
        spec.validate(_data([change], [_job("j0")]))
    assert str(err.value).startswith(path) and message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("change, path, message", [
    ({"at": "1h", "scheduler": {"policy": "kube-default"}}, "changes[0].scheduler", "not a kube"),
    ({"at": "1h", "scheduler": {"policy": "nope"}}, "changes[0].scheduler", "unknown policy 'nope'"),
])
def test_a_scheduler_change_keeps_the_family(change, path, message):
    with pytest.raises(SpecError) as err:
        labkit.simulate(spec.validate(_data([change], [_job("j0")])), engine="reference")
    assert str(err.value).startswith(path) and message in str(err.value)


@pytest.mark.parametrize("policy", ["kube-default", "slurm-backfill"])
def test_other_families_refuse_changes(policy):
    data = _data([{"at": "1h", "queue": {"name": "a", "weight": 2}}], [_job("j0")], policy=policy)
    with pytest.raises(SpecError, match=r"^changes(\[0\])?: changes in time: "):
        labkit.simulate(spec.validate(data))


def test_kueue_refuses_changes():
    """A PriorityClass value changed under Kueue: refused in one line, as kube-scheduler and Slurm do."""
    data = yaml.safe_load((Path(__file__).parents[1] / "examples" / "kueue-cohort.yaml").read_text())
    data["changes"] = [{"at": "1h", "priorityClass": {"name": "high", "value": 1}}]
    with pytest.raises(SpecError, match=r"^changes(\[0\])?: changes in time: ") as err:
        labkit.simulate(spec.validate(data))
    assert "\n" not in str(err.value)


def test_cli_bad_change_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ncluster:\n  pools:\n  - {name: a, count: 1, resources: {nvidia.com/gpu: 8}}\n"
                    "changes:\n- {at: 1h, queue: {name: team-x, weight: 2}}\n")
    run = run_cli("validate", str(path))
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0 and "changes[0].queue.name" in run.stderr
