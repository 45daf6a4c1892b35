"""`labkit bench [--json] [--quick] [--repeat N] [--cold]`: the engines' speed on the case-study week,
measured side by side in one run (see benchmarks/README.md, "How to reproduce each").

Three figures, each printed as ``  target <what>: <value> (target <target>) ok|MISSED``:

* reference / numba: one reference run of the week against the numba median (>= 100x);
* re-simulation: the median of ``labkit.simulate(scenario)`` on a second and later call, all
  of it (the compiled-scenario cache lookup, the core, the Result tables). Its target (<= 35 ms)
  was set on the week as it was before issue 22 re-tuned it (3,727 jobs; 5,041 now), so it is
  checked on that input, ``benchmarks/case-study-3727.yaml`` (from a source checkout): the same
  work timed again is what shows the engine has not slowed down. Today's week is timed beside it;
* fresh process: ``import labkit`` plus the first simulate in a new interpreter with a warm
  numba cache (< 2 s).

``--quick`` runs the first six hours of the week instead (seconds, for the tests).

``--cold`` prints instead what a fresh install meets (issue 22): each figure in its own process with
an empty ``NUMBA_CACHE_DIR``, so every numba core it needs is compiled (or answered for by the
reference engine while it compiles): the first ``labkit simulate --preset fragmentation`` (<= 10 s),
``labkit.simulate`` of the case-study week (<= 30 s) and each lab of ``labs/`` run top to bottom
(<= 60 s; from a source checkout). Minutes; the background compiles a figure leaves running are
ended before the next.

``--scale`` and ``--peer`` run the issue-10 figures instead, from a source checkout: Philly and 1M
synthetic jobs (``benchmarks/bench_scale.py``), cluster03 against Helios
(``benchmarks/bench_peer.py``), each script in a subprocess that prints its figure lines, a
progress bar (tqdm on a terminal, plain lines otherwise) and stops cleanly on Ctrl-C (exit 130). They read the traces of
``../shared/traces``, which the wheel does not ship, so they are not package code.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 100.0
TARGET_RESIMULATE_S = 0.035
TARGET_FRESH_S = 2.0
TARGET_COLD_FIRST_S = 10.0
TARGET_COLD_WEEK_S = 30.0
TARGET_COLD_LAB_S = 60.0

FRESH = """
import time
t0 = time.perf_counter()
import labkit
t1 = time.perf_counter()
scenario = labkit.preset("case-study")
{limit}
result = labkit.simulate(scenario)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, result.info["engine"])
"""


def _scenario(quick: bool):
    from . import spec

    scenario = spec.preset("case-study")
    if quick:
        scenario = scenario.model_copy(update={"horizon": "6h"})
    return scenario


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
TARGET_WEEK = BENCHMARKS / "case-study-3727.yaml"
"""The input the re-simulation target was set on (a source checkout has it)."""


def _resimulate(scenario, repeat: int) -> tuple[object, list[float]]:
    """A first numba run (it compiles the core once, cached on disk, and the scenario), then
    ``repeat`` timed re-simulations."""
    from .engine.simulate import simulate

    first = simulate(scenario, engine="numba")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        simulate(scenario, engine="numba")
        times.append(time.perf_counter() - t0)
    return first, times


def measure(quick: bool = False, repeat: int = 20) -> dict:
    """The figures (seconds), the engine that ran and the runs' sizes."""
    from . import spec
    from .engine.simulate import simulate

    scenario = _scenario(quick)
    target_times = None
    if TARGET_WEEK.exists():
        target_week = spec.load(TARGET_WEEK)
        if quick:
            target_week = target_week.model_copy(update={"horizon": "6h"})
        target_first, target_times = _resimulate(target_week, repeat)
    warm, times = _resimulate(scenario, repeat)
    t0 = time.perf_counter()
    simulate(scenario, engine="reference")
    reference = time.perf_counter() - t0
    limit = 'scenario = scenario.model_copy(update={"horizon": "6h"})' if quick else ""
    out = subprocess.run(
        [sys.executable, "-c", FRESH.format(limit=limit)], capture_output=True, text=True, check=True
    ).stdout.split()
    numba = statistics.median(times)
    return {
        "scenario": scenario.name + (" (first 6 h)" if quick else ""),
        "jobs": len(warm.jobs),
        "sessions": warm.info["sessions"],
        "reference_s": reference,
        "numba_median_s": numba,
        "numba_min_s": min(times),
        "ratio": reference / numba,
        "fresh_import_s": float(out[0]),
        "fresh_first_simulate_s": float(out[1]),
        "fresh_engine": out[2],
        "target_week": None if target_times is None else {
            "jobs": len(target_first.jobs), "sessions": target_first.info["sessions"],
            "numba_median_s": statistics.median(target_times), "numba_min_s": min(target_times)},
    }


def _line(what: str, value: str, target: str, met: bool) -> str:
    return f"  target {what}: {value} (target {target}) {'ok' if met else 'MISSED'}"


def report(fig: dict) -> list[str]:
    fresh = fig["fresh_import_s"] + fig["fresh_first_simulate_s"]
    numba_ms, min_ms = fig["numba_median_s"] * 1e3, fig["numba_min_s"] * 1e3
    head = (f"{fig['scenario']}: {fig['jobs']:,} jobs, {fig['sessions']:,} sessions; "
            f"reference {fig['reference_s']:.1f} s, numba median {numba_ms:.1f} ms (min {min_ms:.1f} ms)")
    started = (f"{fresh:.2f} s (import {fig['fresh_import_s']:.2f} s, "
               f"simulate {fig['fresh_first_simulate_s']:.2f} s, engine {fig['fresh_engine']})")
    target = fig["target_week"]
    if target is None:
        resimulation = (f"  re-simulation: its target (<= {TARGET_RESIMULATE_S * 1e3:.0f} ms) is timed on "
                        f"{TARGET_WEEK.name}, which is not here (a source checkout has it)")
    else:
        resimulation = _line(
            f"re-simulation median, the week before its re-tune ({target['jobs']:,} jobs, {target['sessions']:,} sessions)",
            f"{target['numba_median_s'] * 1e3:.1f} ms (min {target['numba_min_s'] * 1e3:.1f} ms)",
            f"<= {TARGET_RESIMULATE_S * 1e3:.0f} ms", target["numba_median_s"] <= TARGET_RESIMULATE_S)
    return [
        head,
        _line("reference/numba", f"{fig['ratio']:,.0f}x", f">= {TARGET_RATIO:.0f}x",
              fig["ratio"] >= TARGET_RATIO),
        resimulation,
        _line("fresh process, import + first simulate", started, f"< {TARGET_FRESH_S:.0f} s",
              fresh < TARGET_FRESH_S),
    ]


WEEK = """
import labkit
result = labkit.simulate(labkit.preset("case-study"){limit})
print(result.info["engine"])
"""

LAB = """
import sys
import nbclient, nbformat
notebook = nbformat.read(sys.argv[1], as_version=4)
nbclient.NotebookClient(notebook, timeout=1800, kernel_name="python3",
                        resources={"metadata": {"path": sys.argv[2]}}).execute()
"""


def cold_run(what: str, argv: list[str], cwd: str | None = None) -> tuple[float, float, str]:
    """Wall seconds of ``python argv`` (``what``, for the progress line) with an empty numba cache, the CPU seconds of it and the
    processes it waited for (on a busy machine the wall time is mostly waiting for a core), and
    the last line it printed. The processes left running in its cache (background compiles) are
    ended afterwards, so that the next figure starts on an idle machine."""
    package_root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="labkit-cold-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "LABKIT_COMPILE"}
        env.update(NUMBA_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")])))
        t0, cpu0 = time.perf_counter(), _children_cpu()
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, check=False)
        took, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        _end_processes_using(cache)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    print(f"  measured {what}: {took:.1f} s (cpu {cpu:.1f} s)", file=sys.stderr, flush=True)
    return took, cpu, lines[-1] if lines else ""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _end_processes_using(cache: str) -> None:
    """SIGTERM to this user's processes whose environment names this numba cache: the background
    compiles the benchmark's own runs started (a fresh temporary directory names no other)."""
    mark = f"NUMBA_CACHE_DIR={cache}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGTERM)
        except (OSError, ValueError):
            continue


def measure_cold(quick: bool = False) -> dict:
    """The cold figures (seconds): the first simulate of fragmentation, the case-study week and
    each lab (None when labs/ is absent); with ``quick`` the week's first six hours and no labs."""
    first, first_cpu, _ = cold_run("first simulate", ["-m", "labkit", "simulate", "--preset", "fragmentation"])
    limit = '.model_copy(update={"horizon": "6h"})' if quick else ""
    week, week_cpu, week_engine = cold_run("the week", ["-c", WEEK.format(limit=limit)])
    labs_dir = Path(__file__).resolve().parents[1] / "labs"
    labs = None
    if not quick and labs_dir.is_dir():
        labs = {path.stem: cold_run(path.stem, ["-c", LAB, str(path), str(labs_dir)])[:2] for path in sorted(labs_dir.glob("ch*.ipynb"))}
    return {"first_fragmentation_s": first, "first_fragmentation_cpu_s": first_cpu, "week_s": week,
            "week_cpu_s": week_cpu, "week_engine": week_engine,
            "week": "case-study" + (" (first 6 h)" if quick else ""), "labs_s": labs}


def report_cold(fig: dict) -> list[str]:
    lines = [
        "cold start (each in a new process with an empty NUMBA_CACHE_DIR):",
        _line("first labkit simulate --preset fragmentation",
              f"{fig['first_fragmentation_s']:.1f} s (cpu {fig['first_fragmentation_cpu_s']:.1f} s)",
              f"<= {TARGET_COLD_FIRST_S:.0f} s", fig["first_fragmentation_s"] <= TARGET_COLD_FIRST_S),
        _line(f"labkit.simulate {fig['week']}",
              f"{fig['week_s']:.1f} s (cpu {fig['week_cpu_s']:.1f} s, engine {fig['week_engine']})",
              f"<= {TARGET_COLD_WEEK_S:.0f} s", fig["week_s"] <= TARGET_COLD_WEEK_S),
    ]
    if fig["labs_s"] is None:
        lines.append("  labs: not measured (--quick, or no labs/ beside the package: a source checkout has them)")
        return lines
    for lab, (took, cpu) in fig["labs_s"].items():
        lines.append(_line(f"lab {lab} top to bottom", f"{took:.1f} s (cpu {cpu:.1f} s)",
                           f"<= {TARGET_COLD_LAB_S:.0f} s", took <= TARGET_COLD_LAB_S))
    return lines


def run_script(name: str, args: list[str]) -> int:
    """One benchmark script in a subprocess running this labkit; its exit code (130 on Ctrl-C:
    the script gets the same SIGINT, prints the figures it finished and exits)."""
    script = BENCHMARKS / name
    if not script.exists():
        print(f"{script}: absent; the scale and peer benchmarks run from a source checkout of labkit",
              file=sys.stderr)
        return 2
    package_root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(script), *args], env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return proc.wait()


def script_args(args: argparse.Namespace) -> list[str]:
    """The options shared with the scripts."""
    return (["--quick"] if args.quick else []) + (["--json"] if args.json else []) + ["--engine", args.engine]


def cmd_bench(args: argparse.Namespace) -> int:
    if args.scale or args.peer:
        code = 0
        if args.scale:
            extra = [a for case in args.case or [] for a in ("--case", case)]
            extra += ["--timeout", str(args.timeout)] if args.timeout else []
            code = run_script("bench_scale.py", script_args(args) + extra)
        if args.peer and code != 130:
            extra = ["--peer-helios", args.peer_helios] if args.peer_helios else []
            code = run_script("bench_peer.py", script_args(args) + extra) or code
        return code
    figures, lines = ((measure_cold(args.quick), report_cold) if args.cold else (measure(args.quick, args.repeat), report))
    if args.json:
        print(json.dumps(figures))
    else:
        print("\n".join(lines(figures)))
    return 0


def register(sub) -> None:
    """Add `labkit bench` to the CLI."""
    p = sub.add_parser(
        "bench",
        help="engine speed on the case-study week: reference/numba, re-simulation, fresh start "
             "(--scale, --peer: the scale and peer figures; --cold: a fresh install's first runs)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--quick", action="store_true", help="the first six hours only (seconds)")
    p.add_argument("--repeat", type=int, default=20, metavar="N", help="re-simulations timed (default 20)")
    p.add_argument("--json", action="store_true", help="the figures as one JSON line")
    p.add_argument("--cold", action="store_true", help="instead: a fresh install's first runs, each with an empty "
                   "numba cache (fragmentation, the case-study week, each lab; minutes)")
    p.add_argument("--scale", action="store_true", help="instead: Philly on 256 and 2,048 GPUs, 1M synthetic "
                   "jobs on 4,096 GPUs (benchmarks/bench_scale.py; minutes)")
    p.add_argument("--peer", action="store_true", help="instead: ElasticFlow cluster03 under helios-fifo against "
                   "Helios (benchmarks/bench_peer.py)")
    p.add_argument("--case", action="append", metavar="C", help="--scale: only this case (repeatable)")
    p.add_argument("--timeout", type=float, metavar="S", help="--scale: seconds per case before it is MISSED")
    p.add_argument("--peer-helios", metavar="DIR", help="--peer: a HeliosArtifact checkout to run Helios from")
    p.add_argument("--engine", default="auto", help="--scale/--peer: auto, numba or reference")
    p.set_defaults(func=cmd_bench)


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/bench_engine.py`: the same command."""
    parser = argparse.ArgumentParser(prog="bench_engine.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)
