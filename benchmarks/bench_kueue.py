"""Kueue benchmark: the reference Kueue engine against the numba core, side by side in one run.

    python benchmarks/bench_kueue.py [--copies N] [--jobs N] [--json]

The scenario is examples/kueue-cohort.yaml scaled up: ``--copies`` copies of its cohort (two
ClusterQueues lending a100 quota, team-a reclaiming it, team-b also on h100) over as many copies
of its nodes, and ``--jobs`` jobs drawn like the example's (sizes, priorities, durations) with
submit times over a day, under the ``kueue`` policy (waitForPodsReady on). Prints both wall times
(the numba one warm: compiled, and the compiled scenario cached as ``labkit.simulate`` keeps it),
the speed-up, and whether the jobs, tasks and events tables are identical.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

import labkit
from labkit import spec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kueue-cohort.yaml"


def scaled(copies: int, n_jobs: int, seed: int = 0) -> spec.Scenario:
    """The example's cohort ``copies`` times, with ``n_jobs`` jobs like its three."""
    base = yaml.safe_load(EXAMPLE.read_text())
    rng = np.random.default_rng(seed)
    data = {k: v for k, v in base.items() if k not in ("cluster", "tenants", "kueue", "jobs", "name", "description")}
    data["name"] = f"kueue-cohort x{copies}"
    data["cluster"] = {"pools": [{**pool, "name": f"{pool['name']}-{c}", "labels": {**pool["labels"], "copy": str(c)}}
                                 for c in range(copies) for pool in base["cluster"]["pools"]]}
    kueue = base["kueue"]
    flavors, cqs, lqs, tenants = [], [], [], []
    for c in range(copies):
        flavors += [{"name": f"{f['name']}-{c}", "nodeLabels": {**f["nodeLabels"], "copy": str(c)}}
                    for f in kueue["resourceFlavors"]]
        for cq in kueue["clusterQueues"]:
            groups = [{**g, "flavors": [{**f, "name": f"{f['name']}-{c}"} for f in g["flavors"]]}
                      for g in cq["resourceGroups"]]
            cqs.append({**cq, "name": f"{cq['name']}-{c}", "cohortName": f"{cq['cohortName']}-{c}",
                        "resourceGroups": groups})
        for lq in kueue["localQueues"]:
            lqs.append({**lq, "namespace": f"{lq['namespace']}-{c}", "clusterQueue": f"{lq['clusterQueue']}-{c}"})
        tenants += [{"name": f"{t['name']}-{c}"} for t in base["tenants"]]
    data["tenants"] = tenants
    data["kueue"] = {"resourceFlavors": flavors, "clusterQueues": cqs, "localQueues": lqs}
    jobs = []
    for j in range(n_jobs):
        like = base["jobs"][int(rng.integers(len(base["jobs"])))]
        team = "team-a" if like["namespace"] == "team-a" else "team-b"
        job = {**like, "name": f"{like['name']}-{j}", "namespace": f"{team}-{int(rng.integers(copies))}",
               "submit": int(rng.integers(0, 86400)), "duration": int(rng.integers(600, 4 * 3600))}
        jobs.append(job)
    data["jobs"] = jobs
    return spec.validate(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scenario = scaled(args.copies, args.jobs)
    labkit.simulate(scaled(1, 3), engine="numba")  # compile the core once
    t0 = time.perf_counter()
    fast = labkit.simulate(scenario, engine="numba")
    t1 = time.perf_counter()
    fast = labkit.simulate(scenario, engine="numba")
    t2 = time.perf_counter()
    slow = labkit.simulate(scenario, engine="reference")
    t3 = time.perf_counter()
    same = all(getattr(fast, name).equals(getattr(slow, name)) for name in ("jobs", "tasks", "events"))
    figures = {"copies": args.copies, "jobs": args.jobs, "events": len(slow.events), "sessions": slow.info["sessions"],
               "reference_s": t3 - t2, "numba_first_s": t1 - t0, "numba_s": t2 - t1,
               "speedup": (t3 - t2) / (t2 - t1), "identical": same}
    if args.json:
        print(json.dumps(figures))
        return
    print(f"  kueue-cohort x{args.copies}, {args.jobs:,} jobs: {figures['events']:,} events, "
          f"{figures['sessions']:,} sessions")
    print(f"  reference: {figures['reference_s']:.2f} s")
    print(f"  numba: {figures['numba_s']:.3f} s (first call, compiling the scenario: {figures['numba_first_s']:.3f} s)")
    print(f"  speed-up: {figures['speedup']:.0f}x; jobs, tasks and events identical: {same}")
    pd.testing.assert_frame_equal(fast.events, slow.events)


if __name__ == "__main__":
    main()
