"""Nothing silently ignored (issue 27, point 4): every field of the scenario model has a decision
per policy family in `labkit.spec.honoured.TABLE` (honoured, warned or refused), and `simulate`
and `labkit validate` act on it: a refusal is one line naming the YAML path (exit 2 from the
CLI), a warning one `labkit: note:` line per reason, an honoured field changes the result."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import types
import typing
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

import labkit
from labkit import spec
from labkit.cli import main
from labkit.engine.simulate import check
from labkit.errors import LabkitWarning, SpecError
from labkit.spec import honoured
from labkit.spec.model import Distribution, Scenario

SLURM = {"slurm": {"SchedulerType": "sched/backfill"}}


def _models(annotation) -> list[tuple[str, type[BaseModel]]]:
    """The models a field's annotation holds, each with the suffix of its path (`[]` for a list item)."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin in (list, tuple):
        return [("[]" + suffix, model) for arg in typing.get_args(annotation) for suffix, model in _models(arg)]
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [found for arg in typing.get_args(annotation) for found in _models(arg)]
    return []


def field_paths(model: type[BaseModel] = Scenario, prefix: str = "") -> list[str]:
    """Every field path of the model, recursively, by YAML key (alias); a workload's random
    `gpus` and `duration` hold a Distribution."""
    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        paths.append(path)
        inner = _models(field.annotation)
        if path in ("workloads[].gpus", "workloads[].duration"):
            inner = [("", Distribution)]
        for suffix, sub in inner:
            paths += field_paths(sub, f"{path}{suffix}.")
    return paths


def test_every_field_has_a_decision_for_every_family():
    paths = field_paths()
    assert len(paths) > 250  # the walk reaches the scheduler sections (Volcano, Slurm, Kueue, kube)
    assert "jobs[].networkTopology.highestTierAllowed" in paths and "scheduler.kube.profiles[].plugins" in paths
    missing = []
    for path in paths:
        for family in honoured.FAMILIES:
            try:
                honoured.decision(path, family)
            except KeyError:
                missing.append((path, family))
    assert not missing, f"fields without a decision: {missing[:10]}"


def test_every_row_of_the_table_is_a_field():
    paths = set(field_paths())
    stale = [key for key in honoured.TABLE if key.removesuffix(".**") not in paths]
    assert not stale


def test_the_decisions_cover_the_three_kinds():
    kinds = {honoured.decision(p, f).kind for p in field_paths() for f in honoured.FAMILIES}
    assert kinds == {"honoured", "warned", "refused"}


def scenario(**extra) -> dict:
    return {"cluster": {"pools": [{"name": "a", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 64}}]},
            "queues": [{"name": "q", "weight": 1}],
            "priorityClasses": [{"name": "high", "value": 1000}, {"name": "low", "value": 10}],
            "jobs": [{"name": f"j{i}", "queue": "q", "priorityClassName": "high" if i % 2 else "low", "submit": i,
                      "tasks": [{"replicas": 2, "resources": {"nvidia.com/gpu": 8}}], "work": 100}
                     for i in range(4)],
            **extra}


def edit(data: dict, path: str, value) -> dict:
    """A copy of data with the field at dotted `path` (list indexes as numbers) set to `value`."""
    out = copy.deepcopy(data)
    *parents, last = path.split(".")
    here = out
    for key in parents:
        here = here[int(key)] if key.isdigit() else here.setdefault(key, {})
    here[int(last) if last.isdigit() else last] = value
    return out


def run(data: dict) -> tuple[labkit.Result, list[str]]:
    """The result and the labkit notes of one run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = labkit.simulate(spec.validate(data))
    return result, [str(w.message) for w in caught if issubclass(w.category, LabkitWarning)]


def same(a: labkit.Result, b: labkit.Result) -> bool:
    return a.jobs.equals(b.jobs) and a.events.equals(b.events)


# A warned field: the run says so, naming it, once, and the result is the run without the field.
WARNED = [
    ("volcano", {}, "jobs.1.networkTopology", {"mode": "hard", "highestTierAllowed": 1}, "jobs[1].networkTopology"),
    ("volcano", {}, "jobs.0.timeLimit", 50, "jobs[0].timeLimit"),
    ("volcano", {}, "jobs.2.user", "alice", "jobs[2].user"),
    ("volcano", {}, "jobs.1.requeue", False, "jobs[1].requeue"),
    ("kube-scheduler", {"scheduler": {"policy": "kube-default"}}, "queues.0.capability", {"nvidia.com/gpu": 16},
     "queues"),
    ("slurm", {"scheduler": SLURM}, "queues.0.capability", {"nvidia.com/gpu": 16}, "queues"),
    ("slurm", {"scheduler": SLURM}, "priorityClasses.1.value", 100000, "priorityClasses"),
    ("slurm", {"scheduler": SLURM}, "cluster.topology", {"tiers": [{"name": "rack", "size": 1}]}, "cluster.topology"),
    ("slurm", {"scheduler": SLURM}, "jobs.3.minAvailable", 1, "jobs[3].minAvailable"),
    ("slurm", {"scheduler": SLURM}, "scheduler.queueingStrategy", "BestEffortFIFO", "scheduler.queueingStrategy"),
    ("slurm", {"scheduler": {"slurm": {"SchedulerParameters": "bf_interval=5,defer"}}}, "jobs.0.submit", 0,
     "scheduler.slurm.SchedulerParameters.defer"),
]


@pytest.mark.parametrize("family, extra, path, value, named", WARNED, ids=[w[2] + "-" + w[0] for w in WARNED])
def test_a_warned_field_is_named_once_and_changes_nothing(family, extra, path, value, named):
    base = scenario(**extra)
    plain, _ = run(base)
    changed, notes = run(edit(base, path, value))
    assert [n for n in notes if n.startswith(named) or f", {named}" in n], notes
    assert sum(named in n for n in notes) == 1, notes
    assert same(plain, changed)  # ignored, as the note says


def test_one_note_per_reason_however_many_jobs_set_it():
    data = scenario()
    for i in range(4):
        data = edit(data, f"jobs.{i}.timeLimit", 60)
    _, notes = run(data)
    assert notes == [notes[0]] and notes[0].startswith("jobs[0].timeLimit (and 3 more like them): Slurm's (sbatch)")


def test_validate_warns_as_simulate_does():
    data = edit(scenario(), "jobs.3.networkTopology", {"mode": "hard"})
    with pytest.warns(LabkitWarning, match=r"jobs\[3\]\.networkTopology"):
        check(spec.validate(data))


# A refused field: one line naming the YAML path, from simulate and validate alike (StrictFIFO
# under another family is refused by the model itself; a scheduler section of another family
# cannot be given beside its own, so the table's refusal is checked on the family directly).
def test_a_refused_field_is_one_line_naming_it(tmp_path, capsys):
    conf = spec.policy("volcano-shipped").model_dump(mode="json", exclude_defaults=True)
    with pytest.raises(SpecError) as err:
        honoured.apply(spec.validate(scenario(scheduler={"conf": conf})), "slurm")
    assert err.value.path == "scheduler.conf" and "\n" not in str(err.value)
    target = tmp_path / "s.yaml"
    target.write_text(json.dumps(scenario(scheduler={**SLURM, "queueingStrategy": "StrictFIFO"})))
    for command in ("validate", "simulate"):
        assert main([command, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("labkit: error: scheduler") and "queueingStrategy" in err and err.count("\n") == 1


# An honoured field: changing it changes the result, with no note.
HONOURED = [
    ({}, "cluster.pools.0.speed", 2.0),
    ({}, "priorityClasses.1.value", 100000),
    ({}, "queues.0.capability", {"nvidia.com/gpu": 8}),
    ({"scheduler": SLURM}, "jobs.0.timeLimit", 50),
    ({"scheduler": {"policy": "kube-default"}}, "priorityClasses.1.value", 100000),
    ({"scheduler": SLURM}, "cluster.pools.0.speed", 2.0),
    ({"scheduler": SLURM}, "cluster.events", [{"at": 50, "node": "a-0", "kind": "fail"}]),
    ({"scheduler": SLURM}, "jobs.3.status", {"phase": "Running", "running": {"worker": ["a-0", "a-1"]}}),
    ({"scheduler": {"policy": "kube-default"}}, "jobs.3.status", {"phase": "Running", "running": {"worker": ["a-0"]}}),
    ({"scheduler": {"policy": "kube-default"}}, "cluster.pools.0.speed", 0.5),
    ({"scheduler": SLURM, "jobs": [
        {"name": name, "submit": submit, "tasks": [{"replicas": pods, "resources": {"nvidia.com/gpu": 8}}],
         "duration": duration, "timeLimit": duration} for name, submit, pods, duration in
        (("running", 0, 1, 100), ("wide", 1, 2, 100), ("small", 2, 1, 50))]},
     "scheduler.slurm.SchedulerParameters", "bf_interval=-1"),  # no backfill: small waits behind wide
    # the job progress model: each job's two pods span the two nodes, at the cluster level's factor
    ({"scheduler": {"policy": "kube-default"}, "workloadClasses": [{"name": "spread", "placement": {"cluster": 0.5}}]},
     "jobs.0.workloadClass", "spread"),
    ({"scheduler": {"policy": "kueue"}, "workloadClasses": [{"name": "spread", "placement": {"cluster": 0.5}}],
      "kueue": {"resourceFlavors": [{"name": "any"}], "clusterQueues": [{"name": "cq", "resourceGroups": [
          {"coveredResources": ["nvidia.com/gpu"],
           "flavors": [{"name": "any", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}],
                "localQueues": [{"name": "q", "namespace": "default", "clusterQueue": "cq"}]}},
     "jobs.0.workloadClass", "spread"),
    ({"scheduler": SLURM, "workloadClasses": [{"name": "spread", "placement": {"cluster": 0.5}}]},
     "jobs.0.workloadClass", "spread"),
]


@pytest.mark.parametrize("extra, path, value", HONOURED, ids=[f"{i}-{h[1]}" for i, h in enumerate(HONOURED)])
def test_an_honoured_field_changes_the_result(extra, path, value):
    base = scenario(**extra)
    plain, notes = run(base)
    changed, more = run(edit(base, path, value))
    named = re.sub(r"\.(\d+)", r"[\1]", path)  # jobs.3.status -> jobs[3].status
    assert not [n for n in more if n not in notes and named in n]  # no note for this field
    assert not same(plain, changed)


@pytest.mark.parametrize("name", spec.preset_names())
def test_presets_under_their_own_policy_use_honoured_fields_only(name):
    found = [(where, rule.kind) for where, rule, _ in honoured.findings(spec.preset(name), "volcano")]
    assert found == []


def test_kueue_warns_of_volcano_fields_and_honours_its_own():
    data = spec.load(Path(labkit.__file__).parent / "examples" / "kueue-cohort.yaml").model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    plain, notes = run(data)
    assert notes == [] and plain.info["engine"] in ("numba", "kueue")
    for path, value, named in (("queues", [{"name": "spare", "weight": 3}], "queues"),
                               ("jobs.0.networkTopology", {"mode": "hard"}, "jobs[0].networkTopology")):
        changed, notes = run(edit(data, path, value))
        assert len(notes) == 1 and notes[0].startswith(named) and same(plain, changed)
    borrowing = "kueue.clusterQueues.1.resourceGroups.0.flavors.0.resources.0.borrowingLimit"
    changed, notes = run(edit(data, borrowing, 0))
    assert notes == [] and not same(plain, changed)


def test_the_cli_prints_each_note_once(tmp_path):
    data = scenario()
    for i in range(4):
        data = edit(data, f"jobs.{i}.timeLimit", 60)
    target = tmp_path / "s.yaml"
    target.write_text(json.dumps(data))
    for command in ("validate", "simulate"):
        done = subprocess.run([sys.executable, "-m", "labkit", command, str(target)], capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        notes = [line for line in done.stderr.splitlines() if "timeLimit" in line]
        says = honoured.decision("jobs[].timeLimit", "volcano").says
        assert notes == [f"labkit: note: jobs[0].timeLimit (and 3 more like them): {says}"]


def test_a_note_names_its_paths_in_the_scenario_s_order_whatever_the_hash_seed(tmp_path):
    """The paths sharing a note are listed in the model's order (`queues` before `jobs`, jobs by
    index), the same in every process: a stored notebook output must not depend on PYTHONHASHSEED
    (walking a set of field names listed `jobs[0].queue, queues` in one run, the reverse in another)."""
    data = edit(edit(scenario(), "queues.0.capability", {"nvidia.com/gpu": 16}), "scheduler", {"policy": "kube-default"})
    target = tmp_path / "s.yaml"
    target.write_text(json.dumps(data))
    notes = set()
    for seed in range(6):
        done = subprocess.run([sys.executable, "-m", "labkit", "validate", str(target)],
                              capture_output=True, text=True, timeout=300, check=False,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)})
        assert done.returncode == 0, done.stderr
        notes.add(next(line for line in done.stderr.splitlines() if "Volcano Queues" in line))
    assert len(notes) == 1, notes
    assert notes.pop().startswith("labkit: note: queues, jobs[0].queue")
