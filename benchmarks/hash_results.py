"""Fingerprints of the engine's results, to show a change of code changed no result.

    python benchmarks/hash_results.py [--quick] [--only NAME] [--out FILE] [--check FILE]

Hashes the jobs, tasks and events tables (columns, dtypes and values) of: ElasticFlow cluster03
(3,011 jobs on 32 x 8 GPUs, as benchmarks/bench_peer.py loads it) under `helios-fifo`,
`volcano-multitenant` and `volcano-shipped`; `bench_scale.synthetic`'s workload at 20,000 jobs on
4,096 GPUs and 5,000 jobs on 512 GPUs; the case-study week (its own policy) and a course slice of
it under each family (Volcano, kube-scheduler, Slurm; numba core and reference engine); every
example in examples/ (both engines); and every conformance case (its CaseResult). `--out` writes
the hashes as JSON, `--check` compares against such a file and exits 1 naming each hash that
differs. `--quick` leaves out the two synthetic cases and the week. Only the public API is used,
so the script runs on any commit of the tree it is pointed at (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import labkit
from labkit import spec

TRACES = Path(os.environ.get("LABKIT_TRACES", ROOT.parent / "shared" / "traces"))
"""Where the traces are (../shared/traces beside the checkout; LABKIT_TRACES overrides)."""


def table_hash(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df.astype(object).where(df.notna(), None).astype(str), index=True)
             .to_numpy().tobytes())
    return h.hexdigest()[:16]


def result_hash(result) -> str:
    return "/".join(table_hash(t) for t in (result.jobs, result.tasks, result.events))


def cases(quick: bool):
    """(name, thunk giving a Result or a list of conformance results)."""
    from labkit.course import cases as course
    from labkit.engine.simulate import with_policy

    out = []
    cluster03 = TRACES / "elasticflow-cluster03.csv"
    if cluster03.exists():
        from bench_peer import load_trace
        fragment = load_trace(cluster03, quick=False)
        for policy in ("helios-fifo", "volcano-multitenant", "volcano-shipped"):
            scenario = spec.validate({**fragment, "name": "elasticflow-cluster03", "scheduler": {"policy": policy}})
            out.append((f"cluster03/{policy}", lambda s=scenario: labkit.simulate(s)))
    else:
        print(f"note: {cluster03} absent, cluster03 cases left out", file=sys.stderr)
    if not quick:
        from bench_scale import synthetic
        out.append(("synthetic-20k", lambda: labkit.simulate(synthetic(20_000, 4096))))
        out.append(("synthetic-5k", lambda: labkit.simulate(synthetic(5_000, 512))))
        out.append(("case-study-week", lambda: labkit.simulate(spec.preset("case-study"))))
    slice_ = course.case_study()
    for policy in (None, "kube-default", "slurm-backfill"):
        scenario = slice_ if policy is None else with_policy(slice_, policy)
        for engine in ("auto", "reference"):
            out.append((f"case-study-slice/{policy or 'own'}/{engine}",
                        lambda s=scenario, e=engine: labkit.simulate(s, engine=e)))
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for engine in ("auto", "reference"):
            out.append((f"examples/{path.name}/{engine}", lambda p=path, e=engine: labkit.simulate(labkit.load(p), engine=e)))
    from labkit.conformance import runner
    folder = Path(runner.__file__).parent
    for path in sorted(folder.glob("*-cases.yaml")):
        out.append((f"conformance/{path.name}", lambda p=path: runner.run_cases(p)))
    return out


def fingerprint(value) -> str:
    if isinstance(value, list):
        text = json.dumps([r.as_dict() for r in value], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    return result_hash(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="only the cases whose name contains this")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--check", type=Path)
    args = parser.parse_args(argv)
    hashes = {}
    for name, run in cases(args.quick):
        if args.only and args.only not in name:
            continue
        t0 = time.perf_counter()
        hashes[name] = fingerprint(run())
        print(f"{name}: {hashes[name]} ({time.perf_counter() - t0:.1f} s)", flush=True)
    if args.out:
        args.out.write_text(json.dumps(hashes, indent=1) + "\n")
    if args.check:
        want = json.loads(args.check.read_text())
        differ = [n for n in hashes if n in want and want[n] != hashes[n]]
        missing = [n for n in want if n not in hashes and not (args.only or args.quick)]
        for n in differ:
            print(f"DIFFERS {n}: {want[n]} -> {hashes[n]}")
        for n in missing:
            print(f"MISSING {n}")
        unchecked = [n for n in hashes if n not in want]
        print(f"{len(hashes) - len(unchecked) - len(differ)} of {len(hashes) - len(unchecked)} equal"
              + (f"; {len(unchecked)} not in {args.check.name}, not compared: {', '.join(unchecked)}" if unchecked else ""))
        return 1 if differ or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
