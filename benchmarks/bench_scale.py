"""Scale benchmark: Philly (82k jobs) on 256 and 2,048 GPUs, 1M synthetic jobs on 4,096 GPUs, and churn.

    python benchmarks/bench_scale.py [--engine auto|numba|reference] [--timeout S] [--quick] [--json]

Every case runs in its own subprocess (`--child CASE`), so its peak RSS (`resource.getrusage`,
`ru_maxrss`) is its own; the wall time covers `labkit.simulate` (compile, workload expansion and the
run), not building the scenario nor a warm-up run on a 20-job slice (loading numba's cache), which
is printed apart. Numba compiles, when its cache is cold, in a warm-up process of its own before
the case (`--warm-up CASE`), so LLVM's memory is not in the case's peak RSS. The 1M case's figures are printed with their targets
(< 60 s, peak RSS < 2 GB) and `ok` or `MISSED`; every case prints its evictions and events per
job, and the Philly cases their rate against Helios's on cluster03 (the peer target itself is
bench_peer.py's, on the same trace). `synthetic-16k-churn` is the 1M case's workload, 16,000 jobs,
with the gangs preemptible: Volcano's drf preemption churns (docs/benchmark-history.md, "Lessons kept"). A case that
exceeds `--timeout` is killed and printed as MISSED. Ctrl-C stops cleanly (exit 130) after
printing the cases already done. `--quick` runs tiny versions of the same cases (tests use it).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import labkit
from labkit import spec
from labkit.workloads import multi_tenant, traces

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
HELIOS_JOBS_PER_S = 244.0
"""Helios FIFO on ElasticFlow cluster03 (3,011 jobs, 32 x 8 GPUs): 12.3 s on a 2-vCPU Xeon."""
PEER_FACTOR = 1000.0
CASES = ("philly-256", "philly-2048", "synthetic-1m-4096", "synthetic-16k-churn")
POLICY = "volcano-multitenant"


# ---------------------------------------------------------------------------------------- shared


def simulate(scenario: spec.Scenario, engine: str, progress=None) -> tuple[labkit.Result, str]:
    """`labkit.simulate` with `engine` (and a `progress` callable) when this labkit takes them;
    (result, engine that ran)."""
    if "engine" in inspect.signature(labkit.simulate).parameters:
        result = labkit.simulate(scenario, engine=engine, progress=progress or False)
        return result, str(result.info.get("engine", engine))
    return labkit.simulate(scenario), "reference"


def warm_up(scenario: spec.Scenario, engine: str) -> float:
    """Run the engine on a 20-job slice of the scenario, so that numba compiling (or loading its
    cache) is not in the timed run; returns the seconds it took."""
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["jobs"] = data.get("jobs", [])[:20]
    for load in data.get("workloads", []):
        if "trace" in load:
            load["trace"] = {column: values[:5] for column, values in load["trace"].items()}
        else:
            load["count"] = 5
    t0 = time.perf_counter()
    simulate(spec.validate(data), engine)
    return time.perf_counter() - t0


def peak_rss_mb() -> float:
    """This process's peak resident set in MB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_rss_of(pid: int) -> float | None:
    """Peak RSS in MB of a running process (Linux /proc VmHWM), for a case killed at its timeout."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")]
    return kib[0] / 1024.0 if kib else None


def verdict(met: bool) -> str:
    return "ok" if met else "MISSED"


def target_line(what: str, value: str, target: str, met: bool) -> str:
    """The figure line every benchmark prints: `  target <what>: <value> (target <target>) ok|MISSED`."""
    return f"  target {what}: {value} (target {target}) {verdict(met)}"


class Progress:
    """A progress bar over cases: tqdm on a terminal, else one plain line per step (a log, a pipe)."""

    def __init__(self, total: int, label: str):
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=label, unit="case", file=sys.stderr)
        self.total, self.done, self.label = total, 0, label

    def start(self, name: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(name)
        else:
            print(f"[{self.done + 1}/{self.total}] {self.label}: {name} ...", file=sys.stderr, flush=True)

    def step(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def interrupted(done: list[str]) -> None:
    """Ctrl-C: say what was finished and exit 130."""
    print(f"interrupted: {len(done)} case(s) done{': ' + ', '.join(done) if done else ''}", flush=True)
    sys.exit(130)


# ---------------------------------------------------------------------------------------- cases


def synthetic(jobs: int, gpus: int, tenants: int = 4, load: float = 0.8,
              gangs_preemptible: bool = False) -> spec.Scenario:
    """`jobs` Philly-like jobs (`labkit.workloads.multi_tenant`: 1-32 GPUs, lognormal run times)
    from `tenants` equal queues at `load` on `traces.cluster(gpus)`. The gangs (16, 32 GPUs) carry
    `volcano.sh/preemptable: false` unless `gangs_preemptible`, as the case study's pre-training
    does: with every job of one priority, drf lets a pending job preempt a pod of a larger job in
    its queue, the gang restarts below minAvailable, and the run churns (docs/benchmark-history.md, "Lessons kept")."""
    return spec.validate({
        "name": f"synthetic-{jobs}",
        "cluster": traces.cluster(gpus),
        **multi_tenant(jobs, gpus, tenants, load, gangs_preemptible=gangs_preemptible),
        "scheduler": {"policy": POLICY},
    })


def philly_scenario(gpus: int, quick: bool) -> spec.Scenario:
    """The whole Pollux Philly trace (`--quick`: 150 jobs) on `gpus` GPUs, one queue per VC."""
    path = TRACES / "philly-pollux.csv"
    if not path.exists():
        if not quick:
            raise SystemExit(f"{path} is absent: the Philly cases need it (see README.md, Traces)")
        return synthetic(150, gpus)
    fragment = traces.philly(path, n=150 if quick else None, seed=0, gpus=gpus)
    return spec.validate({**fragment, "name": f"philly-{gpus}", "scheduler": {"policy": POLICY}})


def build(case: str, quick: bool) -> spec.Scenario:
    if case == "philly-256":
        return philly_scenario(64 if quick else 256, quick)
    if case == "philly-2048":
        return philly_scenario(128 if quick else 2048, quick)
    if case == "synthetic-1m-4096":
        return synthetic(200, 64) if quick else synthetic(1_000_000, 4096)
    if case == "synthetic-16k-churn":
        return synthetic(200, 64, gangs_preemptible=True) if quick else synthetic(16_000, 4096, gangs_preemptible=True)
    raise SystemExit(f"unknown case {case!r}; cases: {', '.join(CASES)}")


def child(case: str, engine: str, quick: bool) -> None:
    """Run one case in this process and print its figures as one JSON line."""
    t0 = time.perf_counter()
    scenario = build(case, quick)
    built = time.perf_counter() - t0
    warm = warm_up(scenario, engine)
    t0 = time.perf_counter()
    result, ran = simulate(scenario, engine, progress=Reached(t0))
    wall = time.perf_counter() - t0
    done = int((result.jobs.state == "Completed").sum())
    events = result.info["events"] if "events" in result.info else len(result.events)  # the table is made when read
    evictions = int(result.jobs["evictions"].sum()) if "evictions" in result.jobs else None
    print(json.dumps({"case": case, "engine": ran, "jobs": len(result.jobs), "completed": done,
                      "events": events, "evictions": evictions, "build_s": built, "warm_s": warm, "wall_s": wall,
                      "rss_mb": peak_rss_mb()}))


class Reached:
    """The run's progress callable: every 5 s of wall time one `reached {json}` line on stderr
    (jobs done, jobs, simulated seconds, wall seconds), which the parent reads if it kills the run."""

    def __init__(self, t0: float, every: float = 5.0):
        self.t0, self.every, self.last = t0, every, t0

    def __call__(self, done: int, jobs: int, simulated: float) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            print("reached " + json.dumps({"done": done, "jobs": jobs, "simulated_s": simulated,
                                           "wall_s": now - self.t0}), file=sys.stderr, flush=True)


def last_reached(err: str) -> dict | None:
    """The last `reached` line a killed child wrote."""
    lines = [line for line in err.splitlines() if line.startswith("reached ")]
    return json.loads(lines[-1][len("reached "):]) if lines else None


def report(fig: dict, quick: bool) -> list[str]:
    """The figure lines of one case, targets included."""
    if "error" in fig:
        lines = [f"{fig['case']}: {fig['error']}", target_line("run", "did not finish", "finishes", False)]
        if fig.get("reached"):
            r = fig["reached"]
            lines.append(f"  reached: {r['done']:,} of {r['jobs']:,} jobs done, {r['simulated_s'] / 3600:,.1f} simulated "
                         f"hours, after {r['wall_s']:,.0f} s of the run")
        if fig.get("rss_mb") is not None:
            lines.append(target_line("peak RSS", f"{fig['rss_mb']:,.0f} MB when killed", "< 2,048 MB",
                                     fig["rss_mb"] < 2048))
        return lines
    rate, jobs_rate = fig["events"] / fig["wall_s"], fig["jobs"] / fig["wall_s"]
    head = (f"{fig['case']} [engine={fig['engine']}]: {fig['jobs']:,} jobs ({fig['completed']:,} completed), "
            f"{fig['events']:,} events in {fig['wall_s']:.2f} s (scenario built in {fig['build_s']:.2f} s, "
            f"warm-up {fig['warm_s']:.2f} s): "
            f"{rate:,.0f} events/s, {jobs_rate:,.0f} jobs/s, peak RSS {fig['rss_mb']:,.0f} MB")
    lines = [head]
    if fig.get("evictions") is not None:
        lines.append(f"  evictions: {fig['evictions']:,} pods evicted by preempt and reclaim "
                     f"({fig['evictions'] / max(fig['jobs'], 1):.2f} per job; {fig['events'] / max(fig['jobs'], 1):,.1f} "
                     "events per job)")
    if fig["case"].startswith("philly"):
        lines.append(f"  rate: {jobs_rate / HELIOS_JOBS_PER_S:,.1f}x the jobs/s of Helios on cluster03 (not a target: "
                     "bench_peer.py compares with the peer on the same trace)")
    if fig["case"] == "synthetic-1m-4096":
        limit = 60.0 * (fig["jobs"] / 1_000_000 if quick else 1.0)
        lines.append(target_line("wall", f"{fig['wall_s']:.2f} s", f"< {limit:.3g} s for {fig['jobs']:,} jobs",
                                 fig["wall_s"] < limit))
        lines.append(target_line("peak RSS", f"{fig['rss_mb']:,.0f} MB", "< 2,048 MB", fig["rss_mb"] < 2048))
    return lines


def run_case(case: str, engine: str, quick: bool, timeout: float) -> dict:
    """One case in a subprocess, after a warm-up subprocess that fills numba's cache; its JSON
    figures, or {'error': ...}."""
    base = [sys.executable, os.path.abspath(__file__), "--engine", engine] + (["--quick"] if quick else [])
    try:
        subprocess.run(base + ["--warm-up", case], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"case": case, "error": f"the warm-up took more than the {timeout:g} s timeout"}
    proc = subprocess.Popen(base + ["--child", case], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        rss = peak_rss_of(proc.pid)
        proc.kill()
        _, err = proc.communicate()
        return {"case": case, "error": f"killed after the {timeout:g} s timeout", "rss_mb": rss,
                "reached": last_reached(err)}
    except KeyboardInterrupt:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return {"case": case, "error": f"exit {proc.returncode}: {last}"}
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="auto", help="auto, numba or reference (when labkit has engines)")
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per case before it is MISSED")
    parser.add_argument("--quick", action="store_true", help="tiny inputs (seconds), for tests")
    parser.add_argument("--json", action="store_true", help="also print all figures as one JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--warm-up", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.warm_up:
        warm_up(build(args.warm_up, True), args.engine)
        return 0
    if args.child:
        try:
            child(args.child, args.engine, args.quick)
        except KeyboardInterrupt:
            return 130
        return 0
    cases = args.case or list(CASES)
    figures, done = [], []
    progress = Progress(len(cases), "bench_scale")
    try:
        for case in cases:
            progress.start(case)
            fig = run_case(case, args.engine, args.quick, args.timeout)
            progress.step()
            figures.append(fig)
            done.append(case)
            print("\n".join(report(fig, args.quick)), flush=True)
    except KeyboardInterrupt:
        progress.close()
        interrupted(done)
    progress.close()
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
