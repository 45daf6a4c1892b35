"""`labkit bench [--json] [--quick] [--repeat N]`: the engines' speed on the case-study week,
measured side by side in one run (see benchmarks/README.md, "Engine benchmark").

Three figures, each printed as ``  target <what>: <value> (target <target>) ok|MISSED``:

* reference / numba: one reference run of the week against the numba median (>= 100x);
* re-simulation: the median of ``labkit.simulate(scenario)`` on a second and later call, all
  of it (the compiled-scenario cache lookup, the core, the Result tables) (<= 50 ms);
* fresh process: ``import labkit`` plus the first simulate in a new interpreter with a warm
  numba cache (< 2 s).

``--quick`` runs the first six hours of the week instead (seconds, for the tests).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

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


def cmd_bench(args: argparse.Namespace) -> int:
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
        help="engine speed on the case-study week: reference/numba, re-simulation, fresh start",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--quick", action="store_true", help="the first six hours only (seconds)")
    p.add_argument("--repeat", type=int, default=20, metavar="N", help="re-simulations timed (default 20)")
    p.add_argument("--json", action="store_true", help="the figures as one JSON line")
    p.set_defaults(func=cmd_bench)


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/bench_engine.py`: the same command."""
    parser = argparse.ArgumentParser(prog="bench_engine.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)
