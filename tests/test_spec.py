"""The scenario model: presets, lossless round trip, Volcano conf loading, and every bad input."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labkit import spec
from labkit.errors import SpecError
from labkit.spec.quantity import parse_duration, parse_quantity
from labkit.workloads import expand

SHARED = Path(__file__).resolve().parents[2] / "shared"
SHIPPED_CONF = SHARED / "upstream" / "volcano-v1.15.1-crds" / "volcano-scheduler.conf.shipped"

BASE = {
    "name": "small",
    "cluster": {"pools": [{"name": "a100", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"},
                           "labels": {"gpu": "a100"}}]},
    "tenants": [{"name": "team-a"}],
    "queues": [{"name": "team-a", "weight": 2}, {"name": "team-b", "parent": "team-a"}],
    "priorityClasses": [{"name": "high", "value": 1000}],
    "jobs": [
        {"name": "train", "namespace": "team-a", "queue": "team-b", "priorityClassName": "high", "duration": "2h",
         "tasks": [{"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 32}}]},
    ],
}


def scenario_with(**changes) -> dict:
    """BASE with `path=value` changes, path segments split on '__' (list indices as digits)."""
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = data
        parts = [int(p) if p.isdigit() else p for p in path.split("__")]
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    return data


# ------------------------------------------------------------------------------------ good input


@pytest.mark.parametrize("name", spec.preset_names())
def test_presets_round_trip_losslessly(name):
    scenario = spec.preset(name)
    assert spec.loads(spec.dump(scenario)) == scenario
    resolved = spec.resolve(scenario)
    assert spec.loads(spec.dump(resolved)) == resolved
    assert spec.resolve(resolved) == resolved


def test_dump_keeps_what_the_user_wrote():
    text = spec.dump(spec.validate(BASE))
    assert yaml.safe_load(text) == BASE


def test_resolve_applies_volcano_webhook_defaults():
    resolved = spec.resolve(spec.validate(scenario_with(jobs__0__tasks__0__replicas=3)))
    task = resolved.jobs[0].tasks[0]
    assert (task.replicas, task.min_available, resolved.jobs[0].min_available) == (3, 3, 3)
    assert resolved.scheduler.conf == spec.policy("volcano-shipped")


def test_case_study_matches_the_seed_cluster():
    scenario = spec.preset("case-study")
    (pool,) = scenario.cluster.pools
    assert pool.count == 32 and parse_quantity(pool.resources["nvidia.com/gpu"]) == 8
    assert {q.name for q in scenario.queues} == {"team-a", "team-b", "team-c"}
    jobs = expand(scenario).jobs
    horizon = parse_duration(scenario.horizon)
    assert jobs and all(0 <= parse_duration(j.submit) < horizon for j in jobs)
    per_team = {ns: [j for j in jobs if j.namespace == ns] for ns in ("team-a", "team-b", "team-c")}
    gpus = {ns: [sum(t.replicas_resolved * parse_quantity(t.resources.get("nvidia.com/gpu", 0)) for t in j.tasks)
                 for j in js] for ns, js in per_team.items()}
    assert min(gpus["team-a"]) > 8, "team A runs multi-node jobs"
    assert len(per_team["team-b"]) > 10 * len(per_team["team-a"]), "team B submits many more jobs"
    assert sum(gpus["team-c"]) < sum(gpus["team-b"]), "team C needs few GPUs"


def test_fragmentation_preset_has_enough_gpus_in_total_but_not_on_one_node():
    scenario = spec.preset("fragmentation")
    (pool,) = scenario.cluster.pools
    per_node = parse_quantity(pool.resources["nvidia.com/gpu"])
    residents = [j for j in scenario.jobs if j.name.startswith("resident")]
    used = sum(parse_quantity(j.tasks[0].resources["nvidia.com/gpu"]) for j in residents)
    big = next(j for j in scenario.jobs if not j.name.startswith("resident"))
    want = parse_quantity(big.tasks[0].resources["nvidia.com/gpu"])
    free_total = pool.count * per_node - used
    assert want <= free_total and want > per_node - used / pool.count


def test_generators_are_deterministic_and_independent():
    scenario = spec.preset("case-study")
    assert expand(scenario) == expand(scenario)
    without_c = yaml.safe_load(spec.dump(scenario))
    without_c["workloads"] = [w for w in without_c["workloads"] if w["namespace"] != "team-c"]
    team_a = [j for j in expand(scenario).jobs if j.namespace == "team-a"]
    assert team_a == [j for j in expand(spec.validate(without_c)).jobs if j.namespace == "team-a"]


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_validate_and_round_trip(path):
    scenario = spec.load(path)
    assert spec.loads(spec.dump(spec.resolve(scenario))) == spec.resolve(scenario)


def test_slurm_policies_resolve_to_slurm_conf():
    resolved = spec.resolve(spec.load(EXAMPLES / "slurm-backfill.yaml"))
    assert resolved.scheduler.conf is None
    assert resolved.scheduler.slurm.scheduler_type == "sched/backfill"
    assert resolved.scheduler.slurm.parameters()["bf_interval"] == 5
    assert spec.policy_scheduler("slurm-builtin").slurm.scheduler_type == "sched/builtin"


@pytest.mark.skipif(not SHIPPED_CONF.exists(), reason=f"{SHIPPED_CONF} not present (shared/ is not beside the repo)")
def test_shipped_volcano_conf_loads_unchanged():
    text = SHIPPED_CONF.read_text()
    conf = spec.SchedulerConf.model_validate(yaml.safe_load(text))
    assert conf == spec.policy("volcano-shipped")
    as_configmap = spec.validate(scenario_with(scheduler={"conf": text}))
    assert as_configmap.scheduler.conf == conf
    gang = conf.tiers[0].plugins[1]
    assert gang.name == "gang" and "preemptable" not in gang.enabled() and "jobReady" in gang.enabled()


def test_quantities_and_durations():
    assert parse_quantity("64Gi") == 64 * 2**30
    assert parse_quantity("500m") == 0.5
    assert parse_quantity("1e3") == 1000
    assert parse_duration("1h30m") == 5400
    assert parse_duration(12) == 12
    with pytest.raises(ValueError):
        parse_quantity("8x")
    with pytest.raises(ValueError):
        parse_duration("soon")


# ------------------------------------------------------------------------------------ bad input

BAD = [
    (scenario_with(jobs__0__tasks__0__resources={"nvidia.com/gpu": -1}),
     "jobs[0].tasks[0].resources.nvidia.com/gpu: must be >= 0"),
    (scenario_with(jobs__0__tasks__0__resources={"memory": "12Gb"}),
     "jobs[0].tasks[0].resources.memory: not a quantity"),
    (scenario_with(jobs__0__gpuCount=2), "jobs[0].gpuCount: unknown field"),
    (scenario_with(scheduler={"conf": {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gangg"}]}]}}),
     "scheduler.conf.tiers[0].plugins[0].name: unknown plugin 'gangg'"),
    (scenario_with(scheduler={"conf": {"actions": "enqueue, alocate", "tiers": [{"plugins": [{"name": "gang"}]}]}}),
     "scheduler.conf.actions: unknown action 'alocate'"),
    (scenario_with(scheduler={"conf": {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang",
                                                                                       "enablePreemptible": True}]}]}}),
     "scheduler.conf.tiers[0].plugins[0].enablePreemptible: unknown field"),
    (scenario_with(jobs__0__tasks__0__resources={"nvidia.com/gpu": 16}),
     "jobs[0].tasks[0].resources: a pod requesting nvidia.com/gpu=16 fits no node pool (a100: nvidia.com/gpu=8)"),
    (scenario_with(jobs__0__tasks__0__nodeSelector={"gpu": "h100"}),
     "jobs[0].tasks[0].nodeSelector: no node pool has the labels gpu=h100"),
    (scenario_with(queues__0__parent="team-b"), "queues[0].parent: queue parents form a cycle: team-a -> team-b -> team-a"),
    (scenario_with(queues__1__parent="nope"), "queues[1].parent: no queue named 'nope'"),
    (scenario_with(jobs__0__queue="team-x"), "jobs[0].queue: no queue named 'team-x'"),
    (scenario_with(jobs__0__queue="team-a"), ("jobs[0].queue: Volcano's admission webhook refuses it: can only submit "
                                             "job to leaf queue, queue `team-a` has 1 child queues")),
    (scenario_with(jobs__0__queue="root"),
     "jobs[0].queue: Volcano's admission webhook refuses it: can not submit job to root queue"),
    (scenario_with(jobs__0__priorityClassName="urgent"), "jobs[0].priorityClassName: no PriorityClass named 'urgent'"),
    (scenario_with(jobs__0__namespace="team-z"), "jobs[0].namespace: no tenant has namespace 'team-z'"),
    (scenario_with(queues__0__weight=0), "queues[0].weight: Input should be greater than or equal to 1"),
    (scenario_with(tenants__0__resourceQuota={"hard": {"requests.nvidia.com/gpu": "-4"}}),
     "tenants[0].resourceQuota.hard.requests.nvidia.com/gpu: must be >= 0"),
    (scenario_with(jobs__0__minAvailable=5), "jobs[0]: minAvailable (5) must be <= the job's 2 pods"),
    (scenario_with(scheduler={"policy": "volcano-fast"}), "scheduler.policy: unknown policy 'volcano-fast'"),
    (scenario_with(cluster={"pools": []}), "cluster.pools: List should have at least 1 item"),
    (scenario_with(jobs__0__duration="soon"), "jobs[0].duration: not a duration: 'soon'"),
    (scenario_with(jobs__0__partition="nosuch"), "jobs[0].partition: no partition named 'nosuch'"),
    (scenario_with(jobs__0__timeLimit=0), "jobs[0].timeLimit: must be > 0"),
    (scenario_with(slurm={"partitions": [{"name": "gpu", "pools": ["h100"]}]}),
     "slurm.partitions[0].pools[0]: no node pool named 'h100'"),
    (scenario_with(scheduler={"slurm": {"PreemptType": "preempt/magic"}}), "scheduler.slurm.PreemptType: 'preempt/magic'"),
    (scenario_with(scheduler={"slurm": {"SchedulerParameters": "bf_window=1d"}}),
     "scheduler.slurm.SchedulerParameters: bf_window='1d': expected a whole number"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[m.split(":")[0] + ":" + m.split(":")[1][:24] for _, m in BAD])
def test_bad_input_names_the_field(data, message):
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit.cli", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("data, message", BAD[:4] + BAD[6:9], ids=lambda x: "" if isinstance(x, dict) else x[:30])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, data, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    before = path.read_text()
    done = run_cli("validate", str(path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert path.read_text() == before


@pytest.mark.parametrize("text, message", [
    ("cluster: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "a scenario is a YAML mapping"),
    ("", "a scenario is a YAML mapping"),
])
def test_cli_malformed_yaml(text, message):
    done = run_cli("validate", "-", stdin=text)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1


def test_cli_show_yaml_pipes_into_validate():
    shown = run_cli("show", "--preset", "case-study", "--yaml")
    assert shown.returncode == 0
    checked = run_cli("validate", "-", stdin=shown.stdout)
    assert checked.returncode == 0, checked.stderr
    assert spec.loads(shown.stdout) == spec.resolve(spec.preset("case-study"))


def test_cli_usage_errors_exit_2():
    for args in (("validate",), ("validate", "--preset", "nope"), ("frobnicate",), ("validate", "x.yaml", "--preset", "a")):
        done = run_cli(*args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)


def test_python_dash_m_labkit_is_the_labkit_command():
    via_package = subprocess.run([sys.executable, "-m", "labkit", "presets"], capture_output=True, text=True,
                                 timeout=120, check=False)
    assert via_package.returncode == 0
    assert via_package.stdout == run_cli("presets").stdout
    assert subprocess.run([sys.executable, "-m", "labkit", "validate", "/nonexistent.yaml"], capture_output=True,
                          text=True, timeout=120, check=False).returncode == 2
