"""The scale and peer benchmarks run on tiny inputs (`--quick`) and print their figure lines;
the helios-fifo policy keeps Helios's consolidated placement."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import labkit
from labkit import spec
from labkit.workloads import job_table

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
TARGET = re.compile(r"^  target .+: .+ \(target .+\) (ok|MISSED)$", re.MULTILINE)


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), "--quick", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def quick_jobs(case: str) -> int:
    """How many jobs bench_scale's `--quick` `case` runs: Philly's first 150 where ../shared has the
    trace, else the synthetic stand-in's Poisson draw."""
    loader = importlib.util.spec_from_file_location("bench_scale", BENCH / "bench_scale.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return len(job_table(module.build(case, quick=True)).name)


def test_bench_scale_quick_prints_figures_with_targets():
    out = run("bench_scale.py", "--case", "philly-256", "--case", "synthetic-1m-4096")
    assert out.returncode == 0, out.stderr
    head = rf"^philly-256 \[engine=\w+\]: {quick_jobs('philly-256')} jobs .* events/s, .* jobs/s, peak RSS [\d,]+ MB$"
    assert re.search(head, out.stdout, re.MULTILINE)
    assert re.search(r"^synthetic-1m-4096 \[engine=\w+\]: 200 jobs", out.stdout, re.MULTILINE)
    targets = TARGET.findall(out.stdout)
    assert len(targets) == 2, out.stdout  # the 1M case's wall and peak RSS; Philly has no target of its own
    assert re.search(r"^  evictions: [\d,]+ pods evicted .* events per job\)$", out.stdout, re.MULTILINE)


def test_bench_peer_quick_prints_speedup():
    out = run("bench_peer.py")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^labkit \[engine=\w+, policy=helios-fifo\]: 100 jobs on 32 x 8 GPUs", out.stdout, re.MULTILINE)
    assert re.search(r"\d+ jobs started ahead of an earlier-submitted job", out.stdout)
    assert "Helios: no --peer-helios" in out.stdout  # no recorded peer time for a 100-job slice


def test_bench_scale_ctrl_c_exits_130_and_says_what_was_done():
    """Interrupt the full 1M-job case (minutes) once it has started: the parent stops its child.
    The script gets Ctrl-C's default disposition, as at a terminal: a job a shell starts in the
    background without job control (a CI runner may) inherits SIGINT ignored, and Python then
    raises no KeyboardInterrupt."""
    ours = signal.signal(signal.SIGINT, signal.default_int_handler)  # a handled signal is default after exec
    try:
        proc = subprocess.Popen([sys.executable, str(BENCH / "bench_scale.py"), "--case", "synthetic-1m-4096"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, ours)
    assert "[1/1] bench_scale: synthetic-1m-4096" in proc.stderr.readline()
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted: 0 case(s) done" in out


def test_helios_fifo_consolidates_and_gangs_whole_nodes():
    gpu = "nvidia.com/gpu"
    scenario = spec.validate({
        "cluster": {"pools": [{"name": "n", "count": 3, "resources": {gpu: 8, "cpu": 96}}]},
        "jobs": [{"name": "a", "duration": 100, "tasks": [{"resources": {gpu: 4}}]},
                 {"name": "b", "submit": 1, "duration": 100, "tasks": [{"resources": {gpu: 2}}]},
                 {"name": "c", "submit": 2, "duration": 100, "tasks": [{"replicas": 2, "resources": {gpu: 8}}]}],
        "scheduler": {"policy": "helios-fifo"},
    })
    nodes = labkit.simulate(scenario).tasks.groupby("job")["node"].apply(set)
    assert nodes["default/a"] == nodes["default/b"]  # best fit by GPUs: b joins a
    assert nodes["default/c"] == {"n-0", "n-1", "n-2"} - nodes["default/a"]  # two whole nodes


def test_labkit_bench_scale_and_peer_print_the_same_figures():
    out = subprocess.run([sys.executable, "-m", "labkit.cli", "bench", "--scale", "--peer", "--quick",
                          "--case", "synthetic-1m-4096"], capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "PYTHONPATH": str(BENCH.parent)})
    assert out.returncode == 0, out.stderr
    assert re.search(r"^synthetic-1m-4096 \[engine=\w+\]: 200 jobs", out.stdout, re.MULTILINE)
    assert re.search(r"^labkit \[engine=\w+, policy=helios-fifo\]: 100 jobs", out.stdout, re.MULTILINE)
    assert len(TARGET.findall(out.stdout)) == 2, out.stdout  # wall and peak RSS; no peer time for 100 jobs


def test_bench_times_the_re_simulation_target_on_the_week_it_was_set_on():
    """The <= 35 ms target dates from the 3,727-job week; issue 22 re-tuned the preset to 5,041
    jobs, so `labkit bench` times the old week for the target and today's beside it."""
    out = subprocess.run([sys.executable, "-m", "labkit", "bench", "--quick", "--repeat", "2"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    old = spec.load(BENCH / "case-study-3727.yaml")
    jobs = len(job_table(old).name)
    assert jobs != len(job_table(spec.preset("case-study")).name)
    line = next(x for x in out.splitlines() if "re-simulation median" in x)
    assert TARGET.match(line) and f"the week before its re-tune ({jobs:,} jobs" in line, out
