"""`labkit bench [--json] [--quick] [--repeat N]`: the engines' speed on the case-study week,
measured side by side in one run (see benchmarks/README.md, "How to reproduce each").

Three figures, each printed as ``  target <what>: <value> (target <target>) ok|MISSED``:

* reference / numba: one reference run of the week against the numba median (>= 100x);
* re-simulation: the median of ``labkit.simulate(scenario)`` on a second and later call, all
  of it (the compiled-scenario cache lookup, the core, the Result tables) (<= 50 ms);
* fresh process: ``import labkit`` plus the first simulate in a new interpreter with a warm
  numba cache (< 2 s).

``--quick`` runs the first six hours of the week instead (seconds, for the tests).

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
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RATIO = 100.0
TARGET_RESIMULATE_S = 0.050
TARGET_FRESH_S = 2.0

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


def measure(quick: bool = False, repeat: int = 20) -> dict:
    """The three figures (seconds), the engine that ran and the run's size."""
    from .engine.simulate import simulate

    scenario = _scenario(quick)
    warm = simulate(scenario, engine="numba")  # compiles the core once (cached on disk) and the scenario
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        simulate(scenario, engine="numba")
        times.append(time.perf_counter() - t0)
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
    return [
        head,
        _line("reference/numba", f"{fig['ratio']:,.0f}x", f">= {TARGET_RATIO:.0f}x",
              fig["ratio"] >= TARGET_RATIO),
        _line("re-simulation median", f"{numba_ms:.1f} ms", f"<= {TARGET_RESIMULATE_S * 1e3:.0f} ms",
              fig["numba_median_s"] <= TARGET_RESIMULATE_S),
        _line("fresh process, import + first simulate", started, f"< {TARGET_FRESH_S:.0f} s",
              fresh < TARGET_FRESH_S),
    ]


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


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
    figures = measure(args.quick, args.repeat)
    if args.json:
        print(json.dumps(figures))
    else:
        print("\n".join(report(figures)))
    return 0


def register(sub) -> None:
    """Add `labkit bench` to the CLI."""
    p = sub.add_parser(
        "bench",
        help="engine speed on the case-study week: reference/numba, re-simulation, fresh start "
             "(--scale, --peer: the scale and peer figures)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--quick", action="store_true", help="the first six hours only (seconds)")
    p.add_argument("--repeat", type=int, default=20, metavar="N", help="re-simulations timed (default 20)")
    p.add_argument("--json", action="store_true", help="the figures as one JSON line")
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
