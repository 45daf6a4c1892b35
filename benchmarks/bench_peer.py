"""Peer benchmark: labkit vs Helios's simulator, FIFO + consolidated placement on ElasticFlow cluster03.

    python benchmarks/bench_peer.py [--peer-helios DIR] [--trace CSV] [--engine auto] [--repeat N] [--quick] [--json]

labkit runs the trace (3,011 jobs) on 32 x 8 GPUs under the `helios-fifo` policy. With
`--peer-helios DIR` (a HeliosArtifact checkout, or its `framework/QSSF Service` folder) Helios's
`fifo` policy with the `consolidate` placer runs the same jobs in a subprocess, from a local CSV
this script writes (nothing is downloaded), and the per-job start times are compared. Helios is
given each job's pod-creation time (submit + one schedule period) as its submit time: in Volcano
the vcjob controller creates the pods only after the session that enqueues the PodGroup, so no
job can start before then (benchmarks/README.md, "The peers"). labkit's time is the median of
`--repeat` runs (default 5), each compiling the scenario again as a first run does. Prints both
wall times, the speed-up with its target (>= 1,000x), and how many start times are equal (target:
all).
Without a checkout, Helios's time recorded on this machine class (12.3 s) is the reference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import PEER_FACTOR, TRACES, Progress, interrupted, simulate, target_line, warm_up

from labkit import spec
from labkit.engine.families import forget_compiled
from labkit.workloads import traces

POLICY = "helios-fifo"
HELIOS_RECORDED_S, HELIOS_RECORDED_JOBS = 12.3, 3011
"""Helios FIFO + consolidate on cluster03, 32 x 8 GPUs, 2-vCPU Xeon (../shared/reference/simulators.md)."""

HELIOS_DRIVER = """
import json, logging, sys, time
import pandas as pd
sys.path.insert(0, sys.argv[1])
import cluster, utils
trace_csv, log_dir, nodes = sys.argv[2], sys.argv[3], int(sys.argv[4])
df = pd.read_csv(trace_csv)
df['remain'] = df['duration']
df[['start_time', 'end_time']] = sys.maxsize
df[['ckpt_times', 'queue', 'jct']] = 0
df['status'] = None
logger = logging.getLogger('helios')
logger.addHandler(logging.NullHandler())
logger.propagate = False
trace = utils.trace_parser(df)
vc = cluster.Cluster({'vc0': nodes}, 8, 96).vc_list[0]
t0 = time.perf_counter()
utils.simulate_vc(trace, vc, 'consolidate', log_dir, 'fifo', logger, int(df['submit_time'].min()))
print(json.dumps({'wall_s': time.perf_counter() - t0}))
"""


def helios_dir(path: Path) -> Path:
    """The folder that holds Helios's simulator.py (a checkout root or the folder itself)."""
    for candidate in (path, path / "framework" / "QSSF Service"):
        if (candidate / "simulator.py").exists() and (candidate / "policies" / "fifo.py").exists():
            return candidate
    raise SystemExit(f"{path}: not a HeliosArtifact checkout (no framework/QSSF Service/simulator.py)")


def run_helios(folder: Path, jobs: pd.DataFrame, nodes: int, period: float) -> tuple[float, pd.Series]:
    """Helios fifo/consolidate on `jobs` (name, submit, duration, gpus): (wall s, start by name)."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = pd.DataFrame({"job_id": jobs["name"], "vc": "vc0", "gpu_num": jobs["gpus"].astype(int),
                              "submit_time": (jobs["submit"] + period).astype(int),
                              "duration": jobs["duration"].astype(int)})
        trace.to_csv(Path(tmp) / "trace.csv", index=False)
        out = subprocess.run([sys.executable, "-c", HELIOS_DRIVER, str(folder), str(Path(tmp) / "trace.csv"), tmp,
                              str(nodes)], check=False, capture_output=True, text=True, cwd=folder)
        if out.returncode != 0:
            raise SystemExit(f"Helios failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
        wall = json.loads(out.stdout.strip().splitlines()[-1])["wall_s"]
        log = pd.read_csv(Path(tmp) / "vc0" / "fifo_consolidate_vc0_log.csv")
    return wall, log.set_index("job_id")["start_time"]


def load_trace(path: Path, quick: bool, sizes: list[int] | None = None) -> dict:
    """cluster03 on 32 x 8 GPUs (`--quick`: its first 100 jobs; a synthetic stand-in if absent),
    only its jobs of `sizes` GPUs when given."""
    if path.exists():
        fragment = traces.elasticflow(path, gpus=256)
    elif not quick:
        raise SystemExit(f"{path} is absent: the peer benchmark needs it (see README.md, Traces)")
    else:
        rng = np.random.default_rng(0)
        with tempfile.TemporaryDirectory() as tmp:
            csv = Path(tmp) / "cluster-synthetic.csv"
            pd.DataFrame({"job_id": [f"j{i}" for i in range(100)],
                          "submission_time": np.cumsum(rng.integers(0, 600, 100)),
                          "duration": rng.integers(60, 20_000, 100),
                          "num_gpu": rng.choice([1, 2, 8, 16, 32], 100)}).to_csv(csv, index=False)
            fragment = traces.elasticflow(csv, gpus=256)
    (load,) = fragment["workloads"]  # ElasticFlow has no tenants: one trace workload, in submit order
    jobs = pd.DataFrame(load["trace"])
    if sizes:
        jobs = jobs[jobs["gpus"].isin(sizes)]
    if quick:
        jobs = jobs.head(100)
    load["trace"] = {column: jobs[column].tolist() for column in load["trace"]}
    return fragment


def trace_jobs(fragment: dict) -> pd.DataFrame:
    """The trace's jobs (name, submit, duration, gpus), in submit order."""
    (load,) = fragment["workloads"]
    return pd.DataFrame(load["trace"]).rename(columns={"names": "name"})


def compare(ours: pd.Series, theirs: pd.Series) -> dict:
    """Start-time agreement: equal count and the first jobs (by submit order) that differ."""
    theirs = theirs.reindex(ours.index)
    diff = ours - theirs
    unequal = diff[diff.abs() > 1e-6]
    return {"jobs": len(ours), "equal": int(len(ours) - len(unequal)),
            "first_differences": [(name, float(ours[name]), float(theirs[name])) for name in unequal.index[:5]],
            "mean_abs_difference_s": float(diff.abs().mean())}


def overtakes(jobs: pd.DataFrame, start: np.ndarray) -> tuple[int, str | None]:
    """Jobs that started before a job submitted ahead of them (backfill past the head; strict FIFO
    has none): (count, first such job in submit order). `jobs` is in submit order."""
    before = np.concatenate([[-np.inf], np.maximum.accumulate(start)[:-1]])
    ahead = start < before
    return int(ahead.sum()), (str(jobs["name"].iloc[int(np.argmax(ahead))]) if ahead.any() else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-helios", type=Path, help="a HeliosArtifact checkout (git clone of "
                        "S-Lab-System-Group/HeliosArtifact)")
    parser.add_argument("--trace", type=Path, default=TRACES / "elasticflow-cluster03.csv")
    parser.add_argument("--engine", default="auto", help="auto, numba or reference (when labkit has engines)")
    parser.add_argument("--gpus", type=int, action="append", help="keep only jobs of this many GPUs (repeatable): "
                        "with one size, backfill past the head never happens, so every start time must agree")
    parser.add_argument("--repeat", type=int, default=5, help="labkit runs; its time is their median (default 5)")
    parser.add_argument("--quick", action="store_true", help="100 jobs, for tests")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    folder = helios_dir(args.peer_helios) if args.peer_helios else None
    done: list[str] = []
    progress = Progress(2 if folder else 1, "bench_peer")
    try:
        fragment = load_trace(args.trace, args.quick, args.gpus)
        scenario = spec.validate({**fragment, "name": "elasticflow-cluster03", "scheduler": {"policy": POLICY}})
        period = float(scenario.scheduler.schedule_period)
        progress.start(f"labkit {POLICY}")
        warm = warm_up(scenario, args.engine)
        times = []
        for _ in range(args.repeat):
            forget_compiled()  # every timed run compiles the scenario, as a first run does
            t0 = time.perf_counter()
            result, engine = simulate(scenario, args.engine)
            times.append(time.perf_counter() - t0)
        ours_s = float(np.median(times))
        progress.step()
        done.append("labkit")
        jobs = trace_jobs(fragment)
        count, first = overtakes(jobs, result.jobs.set_index("name")["start"].reindex(jobs["name"]).to_numpy(float))
        figures = {"engine": engine, "jobs": len(jobs), "labkit_s": ours_s, "warm_s": warm, "events": len(result.events),
                   "overtakes": count, "first_overtake": first}
        print(f"labkit [engine={engine}, policy={POLICY}]: {len(jobs):,} jobs on 32 x 8 GPUs in {ours_s:.3f} s "
              f"(median of {len(times)}, each compiling the scenario; min {min(times):.3f} s) "
              f"({len(result.events) / ours_s:,.0f} events/s; warm-up {warm:.2f} s apart); {count:,} jobs started ahead of an earlier-submitted "
              f"job (backfill past the head){', the first ' + first if first else ''}", flush=True)
        if folder is None and len(jobs) != HELIOS_RECORDED_JOBS:
            print("Helios: no --peer-helios and no recorded time for this input; no speed-up figure")
            return finish(figures, args.json)
        if folder is None:
            peer_s, source = HELIOS_RECORDED_S, "recorded on this machine class; give --peer-helios to run it"
        else:
            progress.start("Helios fifo/consolidate")
            peer_s, starts = run_helios(folder, jobs, 32, period)
            progress.step()
            done.append("helios")
            source = f"run from {folder}"
            agreement = compare(result.jobs.set_index("name")["start"], starts)
            figures["start_times"] = agreement
        figures["helios_s"] = peer_s
        speedup = peer_s / ours_s
        print(f"Helios fifo/consolidate: {peer_s:.3f} s ({source})")
        print(target_line("speed-up vs Helios", f"{speedup:,.1f}x", f">= {PEER_FACTOR:,.0f}x", speedup >= PEER_FACTOR))
        if folder is not None:
            a = figures["start_times"]
            print(target_line("equal start times", f"{a['equal']:,} of {a['jobs']:,} (mean |difference| "
                              f"{a['mean_abs_difference_s']:,.0f} s)", "all", a["equal"] == a["jobs"]))
            for name, ours_t, theirs_t in a["first_differences"]:
                print(f"    {name}: labkit starts at {ours_t:,.0f} s, Helios at {theirs_t:,.0f} s")
    except KeyboardInterrupt:
        progress.close()
        interrupted(done)
    finally:
        progress.close()
    return finish(figures, args.json)


def finish(figures: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
