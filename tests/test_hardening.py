"""Hostile and careless input (issue 24): every refusal one line naming the field (exit 2 from the
CLI), never a traceback, a hang, a negative wait, or a file of the user's overwritten.

The last tests fuzz: hypothesis mutations of valid scenarios (strange values at random fields)
and raw YAML, in-process and bounded; a few cases go through the real `labkit` command."""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import kube_scenarios, scenarios, slurm_scenarios

import labkit
from labkit import spec
from labkit.cli import main
from labkit.engine.simulate import check
from labkit.errors import LabkitError, SpecError

ROOT = Path(__file__).resolve().parents[1]


def base(**extra) -> dict:
    return {"cluster": {"pools": [{"name": "a", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 64}}]},
            "jobs": [{"name": "j", "tasks": [{"replicas": 1, "resources": {"nvidia.com/gpu": 1}}], "duration": 10}],
            **extra}


def with_(path: str, value, **extra) -> dict:
    """base() with the field at dotted `path` (list indexes as numbers) set to `value`."""
    data = base(**extra)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = data
    for part in parents:
        node = node[part]
    node[last] = value
    return data


def _volcano(plugin: dict) -> dict:
    return {"conf": {"actions": "enqueue, allocate", "tiers": [{"plugins": [plugin]}]}}


REFUSED = [
    # numbers read strictly and bounded
    (with_("jobs.0.tasks.0.replicas", True), "jobs[0].tasks[0].replicas", "boolean"),
    (with_("jobs.0.tasks.0.resources", {"nvidia.com/gpu": "１"}), "jobs[0].tasks[0].resources.nvidia.com/gpu",
     "not a quantity"),
    (with_("jobs.0.duration", "１０"), "jobs[0].duration", "not a duration"),
    (with_("jobs.0.tasks.0.resources", {"nvidia.com/gpu": 0.5}), "jobs[0].tasks[0].resources", "whole number"),
    (with_("cluster.pools.0.resources", {"cpu": "1e400"}), "cluster.pools[0].resources.cpu", "out of range"),
    (with_("cluster.pools.0.resources", {"cpu": 10**400}), "cluster.pools[0].resources.cpu", "out of range"),
    (with_("jobs.0.submit", 1e300), "jobs[0].submit", "out of range"),
    (with_("jobs.0.submit", "1e400"), "jobs[0].submit", "out of range"),
    (base(seed=-1), "seed", "greater than or equal to 0"),
    # sizes and counts checked before anything is expanded
    (with_("cluster.pools.0.count", 10**12), "cluster.pools[0].count", "100000"),
    (with_("jobs.0.tasks.0.replicas", 10**9), "jobs[0].tasks[0].replicas", "100000"),
    (base(workloads=[{"name": "w", "arrival": {"interval": 0.001}, "end": "30d", "duration": 60}]),
     "workloads[0].end", "at most"),
    (base(workloads=[{"name": "w", "arrival": {"interval": 1}, "count": 10**9, "duration": 60}]),
     "workloads[0].count", "10000000"),
    # queues: a parent chain that ends at a missing queue
    (base(queues=[{"name": "a", "parent": "b"}, {"name": "b", "parent": "gone"}]), "queues[0].parent", "'gone'"),
    # plugin arguments the engine reads as numbers
    (base(scheduler=_volcano({"name": "binpack", "arguments": {"binpack.weight": float("nan")}})),
     "scheduler.conf.tiers[0].plugins[0].arguments", "binpack.weight"),
    (base(scheduler=_volcano({"name": "binpack", "arguments": {"binpack.cpu": -1}})),
     "scheduler.conf.tiers[0].plugins[0].arguments", ">= 0"),
    (base(scheduler=_volcano({"name": "overcommit", "arguments": {"overcommit-factor": "inf"}})),
     "scheduler.conf.tiers[0].plugins[0].arguments", "overcommit-factor"),
    (base(scheduler=_volcano({"name": "overcommit", "arguments": {"overcommit-factor": True}})),
     "scheduler.conf.tiers[0].plugins[0].arguments", "overcommit-factor"),
    # Slurm: SchedulerParameters within what slurmctld accepts (backfill.c _load_config), sessions bounded
    (base(scheduler={"slurm": {"SchedulerParameters": "bf_interval=0"}}), "scheduler.slurm.SchedulerParameters",
     "1..10800"),
    (base(scheduler={"slurm": {"SchedulerParameters": "bf_interval=-5"}}), "scheduler.slurm.SchedulerParameters",
     "1..10800"),
    (base(scheduler={"slurm": {"SchedulerParameters": "bf_resolution=²"}}), "scheduler.slurm.SchedulerParameters",
     "whole number"),
    (base(scheduler={"slurm": {"PriorityCalcPeriod": 1e-9}}), "scheduler.slurm.PriorityCalcPeriod", "at least 1s"),
    (base(scheduler={"policy": "volcano-shipped", "schedulePeriod": 1e-9}), "scheduler.schedulePeriod", "0.01"),
    # LimitRange: Kubernetes' LimitRanger refuses a pod above max or below min
    (base(tenants=[{"name": "t", "limitRange": {"limits": [{"max": {"nvidia.com/gpu": 4}}]}}],
          jobs=[{"name": "j", "namespace": "t", "duration": 10, "tasks": [{"resources": {"nvidia.com/gpu": 8}}]}]),
     "jobs[0].tasks[0].resources.nvidia.com/gpu", "maximum nvidia.com/gpu usage per Container is 4"),
    (base(tenants=[{"name": "t", "limitRange": {"limits": [{"type": "Pod", "min": {"cpu": 2}}]}}],
          jobs=[{"name": "j", "namespace": "t", "duration": 10, "tasks": [{"resources": {"cpu": 1}}]}]),
     "jobs[0].tasks[0].resources.cpu", "minimum cpu usage per Pod is 2"),
]


@pytest.mark.parametrize("data, path, words", REFUSED, ids=[r[1] + ":" + r[2] for r in REFUSED])
def test_bad_values_are_refused_naming_the_field(data, path, words):
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert err.value.path == path and words in err.value.message and "\n" not in str(err.value)


YAML_REFUSED = [
    ("cluster: {pools: []}\ncluster: {}\n", "line 2", "given twice"),
    ("a: " + "[" * 2000 + "]" * 2000 + "\n", "line 1", "nested deeper"),
    ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi")), "line 1", "aliases expand"),
    ("seed: " + "9" * 5000 + "\ncluster: {}\n", "", "not valid YAML"),
]


@pytest.mark.parametrize("text, where, words", YAML_REFUSED, ids=["duplicate", "deep", "alias-bomb", "long-int"])
def test_hostile_yaml_is_one_line(text, where, words):
    with pytest.raises(SpecError) as err:
        spec.loads(text)
    assert where in str(err.value) and words in str(err.value) and "\n" not in str(err.value)


def test_a_fifo_or_a_folder_is_refused_not_read(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(SpecError, match="not a regular file|Is a directory"):
            spec.load(path)


def test_the_python_api_takes_a_dict_a_path_yaml_text_and_a_scenario(tmp_path):
    data = base()
    path = tmp_path / "s.yaml"
    path.write_text(spec.dump(spec.validate(data)))
    waits = [labkit.simulate(source).jobs.wait.tolist()
             for source in (data, path, str(path), path.read_text(), spec.validate(data))]
    assert all(w == waits[0] for w in waits)
    with pytest.raises(SpecError, match="not NoneType"):
        labkit.load(None)


def test_validate_refuses_what_simulate_refuses(capsys):
    """The compiler's refusals (here an action labkit does not simulate) come from validate too."""
    data = base(scheduler=_volcano({"name": "gang"}) | {})
    data["scheduler"]["conf"]["actions"] = "enqueue, allocate, shuffle"
    scenario = spec.validate(data)
    with pytest.raises(LabkitError) as simulated:
        labkit.simulate(scenario)
    with pytest.raises(LabkitError) as checked:
        check(scenario)
    assert str(checked.value) == str(simulated.value)


def _run(argv: list[str], stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "labkit", *argv], input=stdin, capture_output=True, text=True, check=False,
                          timeout=timeout, env=env, cwd=ROOT)


def _one_line_exit_2(done: subprocess.CompletedProcess, words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert words in lines[0], lines[0]


@pytest.mark.parametrize("text, words", [
    ("a: " + "[" * 2000 + "]" * 2000 + "\n", "nested deeper"),
    (json.dumps(with_("jobs.0.submit", 1e300)), "jobs[0].submit"),
    (json.dumps(base(scheduler={"slurm": {"SchedulerParameters": "bf_interval=0"}})), "bf_interval=0"),
], ids=["deep", "submit-1e300", "bf_interval-0"])
def test_cli_refusals_are_one_line_exit_2(text, words):
    _one_line_exit_2(_run(["validate", "-"], text), words)
    _one_line_exit_2(_run(["simulate", "-"], text), words)


def test_cli_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    _one_line_exit_2(_run(["validate", str(fifo)], timeout=60), "not a regular file")


def test_ctrl_c_while_labkit_starts_is_one_line(monkeypatch, capsys):
    """The `labkit` command imports only the standard library before `main`: what takes time to load
    (pydantic, numpy, numba, pandas) loads inside it, where Ctrl-C becomes `labkit: interrupted`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    heavy = subprocess.run([sys.executable, "-c", ("import sys, labkit.cli; print(sorted({m.split('.')[0] for m in "
                            "sys.modules} & {'numpy', 'pandas', 'pydantic', 'numba', 'yaml', 'altair'}))")],
                           capture_output=True, text=True, env=env, timeout=60, check=False)
    assert heavy.stdout.strip() == "[]", heavy.stdout + heavy.stderr
    from labkit import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["presets"]) == 130 and capsys.readouterr().err == "labkit: interrupted\n"


def test_an_internal_fault_is_one_line_exit_3(monkeypatch, capsys):
    from labkit import cli

    def boom(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(cli, "cmd_presets", boom)
    assert main(["presets"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("labkit: internal error: ZeroDivisionError") and "\n" not in err


def test_export_slurm_keeps_an_existing_slurm_conf(tmp_path, capsys):
    mine = tmp_path / "slurm.conf"
    mine.write_text("# the site's own slurm.conf\n")
    argv = ["export", "slurm", str(ROOT / "examples" / "slurm-backfill.yaml"), "-o", str(tmp_path)]
    assert main(argv) == 2
    assert "slurm.conf: exists with other content" in capsys.readouterr().err
    assert mine.read_text() == "# the site's own slurm.conf\n"
    assert main(argv) == 2 and main([*argv, "--force"]) == 0 and main(argv) == 0  # its own output: rewritten
    assert "SchedulerType" in mine.read_text()


def test_course_build_keeps_a_students_edits(tmp_path, capsys):
    solutions, labs = ROOT / "solutions", tmp_path / "labs"
    argv = ["course", "build", "--solutions", str(solutions), "--labs", str(labs)]
    assert main(argv) == 0
    lab = min(labs.glob("ch*.ipynb"))
    lab.write_text(lab.read_text().replace("在此作答", "my answer", 1))
    edited = lab.read_text()
    record = labs / ".labkit-generated.json"
    record.write_text(record.read_text().replace(json.loads(record.read_text())[lab.name], "0" * 64))
    assert main(argv) == 2 and lab.read_text() == edited
    assert f"{lab.name} in {labs}: changed since" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0 and lab.read_text() != edited


def test_slurm_down_spares_a_process_whose_start_time_differs(tmp_path):
    from labkit.slurm import cluster as slurm_cluster

    (tmp_path / "run").mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cmd = Path(f"/proc/{other.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        start = slurm_cluster._start_time(other.pid)
        for forged in ([other.pid, cmd], [other.pid, cmd, start - 1]):  # an old record; a forged start
            (tmp_path / "run" / "labkit.pids").write_text(json.dumps({"munged": forged}))
            assert slurm_cluster.down(slurm_cluster.Cluster(tmp_path)).startswith("nothing running")
            assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# ------------------------------------------------------------------------------------------ fuzz

HOSTILE = [True, False, None, -1, 0, -5, 0.5, 1e300, -1e300, float("nan"), float("inf"), 10**400, 2**63,
           "1e400", "１２", "nan", "-inf", "", "x" * 300, "0x10", [], {}, [1], {"a": 1}, "1h30m", "500m", "7d",
           1, 2, 3, 7, 60, 3600, 1e6, 0.001, "30s", "1m", "2"]  # and edges that are valid, to reach the engine


def _paths(node, prefix=()):
    """Every (path to a value) in plain scenario data."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


@st.composite
def mutated(draw) -> dict:
    """A valid random scenario (Volcano, kube-scheduler or Slurm) with 1-3 of its fields set to a
    hostile value."""
    scenario = draw(st.one_of(scenarios(max_jobs=5), slurm_scenarios(max_jobs=5), kube_scenarios(max_jobs=5)))
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["horizon"] = "2d"
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in _paths(data) if p]))
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = copy.deepcopy(draw(st.sampled_from(HOSTILE)))
    return data


@contextmanager
def deadline(seconds: int):
    """A hang fails the test (SIGALRM) instead of stalling the suite."""
    def expire(signum, frame):
        raise TimeoutError(f"no answer within {seconds}s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _refused_or_runs(load) -> None:
    """Refused with one line (SpecError/LabkitError), or runs with no negative time."""
    with deadline(120):
        try:
            scenario = load()
            check(scenario)
        except LabkitError as err:
            assert "\n" not in str(err) and str(err).strip()
            return
        result = labkit.simulate(scenario)
    jobs = result.jobs
    for column in ("wait", "jct"):
        values = jobs[column].dropna()
        assert (values >= 0).all(), jobs[["name", "submit", "start", column]]
    assert all(math.isfinite(v) for v in jobs.submit)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_fuzz_mutated_scenarios(data):
    _refused_or_runs(lambda: spec.validate(data))


_YAML_WORDS = ["cluster", "pools", "name", "count", "resources", "jobs", "tasks", "replicas", "duration",
               "nvidia.com/gpu", "cpu", "queues", "scheduler", "policy", "slurm", "seed", "&a", "*a", "<<",
               "- ", ": ", "{", "}", "[", "]", "\n", "  ", "1e400", "-1", "nan", ".inf", "true", "１", "'", '"',
               "!!python/object", "%YAML 1.2", "---", "...", "#", "?", "|", ">"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(_YAML_WORDS) | st.text(max_size=4), max_size=60).map("".join))
def test_fuzz_raw_yaml(text):
    with deadline(30):
        try:
            spec.loads(text)
        except SpecError as err:
            assert "\n" not in str(err)


# ------------------------------------------------------------------------------------------ traces

def _trace_refusal(call, words: str) -> None:
    with pytest.raises(SpecError) as err:
        call()
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_trace_loaders_refuse_bad_files_with_one_line(tmp_path):
    from labkit.workloads import traces

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _trace_refusal(lambda: traces.elasticflow(empty), "empty.csv")
    header = tmp_path / "header.csv"
    header.write_text("job_id,submission_time,duration,num_gpu\n")
    _trace_refusal(lambda: traces.elasticflow(header), "no rows")
    _trace_refusal(lambda: traces.swf(tmp_path / "missing.swf"), "no such file")
    latin = tmp_path / "latin.swf"
    latin.write_bytes(b"; caf\xe9\n")
    _trace_refusal(lambda: traces.swf(latin), "not UTF-8")
    row = " ".join(["1"] * 18)
    nan = tmp_path / "nan.swf"
    nan.write_text(f"{row}\n{row.replace('1', 'nan', 1)}\n")
    _trace_refusal(lambda: traces.swf(nan), "nan.swf line 2")
    infinite = tmp_path / "inf.csv"
    infinite.write_text("job_id,submission_time,duration,num_gpu\n1,0,10,1\n2,inf,10,1\n")
    _trace_refusal(lambda: traces.elasticflow(infinite), "inf.csv line 3, column submission_time")


def test_trace_line_numbers_count_blank_lines(tmp_path):
    from labkit.workloads import traces

    path = tmp_path / "ef.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\n1,0,10,1\n\n2,5,-3,1\n")
    _trace_refusal(lambda: traces.elasticflow(path), "ef.csv line 4, column duration")


@pytest.mark.parametrize("options, field", [({"load": float("nan")}, "load"), ({"n": -1}, "n"),
                                            ({"seed": -1}, "seed"), ({"window": ("2h", "1h")}, "window"),
                                            ({"gpus": 64, "gpus_per_node": 0}, "gpus_per_node")])
def test_trace_options_are_checked(tmp_path, options, field):
    from labkit.workloads import traces

    path = tmp_path / "ef.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\n1,0,10,1\n2,5,3,1\n")
    with pytest.raises(SpecError) as err:
        traces.elasticflow(path, **options)
    assert err.value.path == field


# ------------------------------------------------------------------------------- impossible results

def test_a_kueue_flavor_without_the_resource_is_refused():
    data = base(scheduler={"policy": "kueue"}, kueue={
        "resourceFlavors": [{"name": "cpuonly", "nodeLabels": {"kind": "cpu"}}],
        "clusterQueues": [{"name": "cq", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "cpuonly", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}],
        "localQueues": [{"name": "main", "namespace": "default", "clusterQueue": "cq"}]})
    data["cluster"]["pools"].append({"name": "cpu", "count": 1, "resources": {"cpu": 64}, "labels": {"kind": "cpu"}})
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert err.value.path == "kueue.clusterQueues[0].resourceGroups[0].flavors[0].resources[0]"
    assert "whose nodes have none" in err.value.message


def test_a_status_snapshot_must_fit_its_nodes():
    data = base()
    data["jobs"] = [{"name": f"j{k}", "duration": 10, "status": {"phase": "Running", "running": {"worker": ["a-0"]}},
                     "tasks": [{"resources": {"nvidia.com/gpu": 5}}]} for k in range(2)]
    with pytest.raises(SpecError) as err:
        spec.validate(data)
    assert err.value.path == "jobs[1].status.running.worker[0]" and "request 10" in err.value.message


def test_summary_counts_add_up_with_timed_out_jobs():
    data = base(scheduler={"policy": "slurm-backfill"})
    data["jobs"][0].update(duration=600, timeLimit="5m")  # Slurm cancels it at its time limit
    result = labkit.simulate(data)
    summary = result.summary()
    assert summary["timeout"] == 1
    counted = ("completed", "running", "waiting", "timeout", "preempted", "suspended")
    assert sum(summary.get(k, 0) for k in counted) == summary["jobs"]


def test_the_slower_engine_is_announced_once(capsys):
    data = base(scheduler={"conf": {"actions": "enqueue, allocate", "tiers": [  # gang twice: not in the core
        {"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": [{"name": "gang"}]}]}})
    with pytest.warns(UserWarning, match="the numba core does not simulate plugin gang listed twice"):
        labkit.simulate(data)
    path_text = spec.dump(spec.validate(data))
    for command in ("validate", "simulate"):
        done = _run([command, "-"], path_text)
        notes = [line for line in done.stderr.splitlines() if line.startswith("labkit: note:")]
        assert done.returncode == 0 and len(notes) == 1 and "reference engine" in notes[0], done.stderr
