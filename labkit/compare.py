"""`labkit compare A.json B.json`: do two runs of one scenario agree (the simulator and a real engine)?

A run is the JSON that `labkit simulate --json`, `labkit slurm run --json` and `labkit cluster observe
--json` print::

    {"engine": "slurm", "scenario": "slurm-backfill", "time_scale": 1, "interval": 5,
     "summary": {...}, "jobs": [{"name": "a", "namespace": "default", "priority": 1421,
                                 "submit": 0, "start": 0, "evictions": 0, ...}, ...]}

`scenario` and `jobs` (each with name, submit, start; start null when the job never started) are
required. `engine`, `time_scale` and `interval` are given by real runs: a real clock has one-second
resolution, i.e. `time_scale` scenario seconds (a run without `time_scale` is exact), and `interval`
is how long, in scenario seconds, a startable job may wait for the scheduler's next pass.

The runs agree when
1. the same jobs started;
2. no two jobs started in one order in A and in the other in B, by more than the rounding;
3. the same jobs were backfilled: started while a job ahead of them (higher priority, or the same
   priority and submitted earlier) had been submitted and was still waiting, as far as the clock's
   rounding can tell;
4. each job's start times differ by at most the tolerance: the larger interval plus both roundings;
5. the same jobs were evicted (evictions > 0), when both runs count evictions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import LabkitError
from .results import Result


def to_json(result: Result) -> dict:
    """A Result as a run JSON (NaN as null); real runs carry their engine, time scale and interval."""
    jobs = json.loads(result.jobs.to_json(orient="records"))
    summary = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in result.summary().items()}
    out = {"engine": result.info.get("engine", "labkit"), "scenario": result.scenario.name}
    out |= {key: result.info[key] for key in ("time_scale", "interval") if key in result.info}
    return out | {"summary": summary, "jobs": jobs}


def load_run(path: str) -> dict:
    """Read and check a run JSON file (`-` for standard input); bad input is a LabkitError."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as err:
        raise LabkitError(f"{path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise LabkitError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or "scenario" not in data:
        raise LabkitError(f"{path}: not a run (expected an object with scenario and jobs, "
                          "as labkit simulate --json prints)")
    for i, job in enumerate(data["jobs"]):
        missing = [k for k in ("name", "submit", "start") if not isinstance(job, dict) or k not in job]
        if missing:
            raise LabkitError(f"{path}: jobs[{i}] has no {', '.join(missing)}")
    for key in ("time_scale", "interval"):
        if key in data and not (isinstance(data[key], (int, float)) and data[key] >= 0):
            raise LabkitError(f"{path}: {key} must be a number >= 0, got {data[key]!r}")
    return data


def _table(run: dict) -> pd.DataFrame:
    """One row per job, indexed by namespace/name: submit, start, priority, evictions."""
    rows = {f"{j.get('namespace') or 'default'}/{j['name']}": {
        "submit": _number(j["submit"]), "start": _number(j["start"]), "priority": _number(j.get("priority")),
        "evictions": _number(j.get("evictions"))} for j in run["jobs"]}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["submit", "start", "priority", "evictions"])


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def backfilled(jobs: pd.DataFrame, rounding: float = 0.0) -> set[str]:
    """Jobs that started while a job ahead of them had been submitted and was still waiting.

    Ahead: higher priority, or the same priority and submitted earlier (no priority counts as 0).
    Waiting: submitted at least `rounding` before the job started (a clock of whole seconds cannot tell
    the order of a submit and a start within one second) and not started within `rounding` after it.
    """
    prio = jobs.priority.fillna(0.0)
    out = set()
    for key, job in jobs[jobs.start.notna()].iterrows():
        ahead = (prio > prio[key]) | ((prio == prio[key]) & (jobs.submit < job.submit))
        waiting = (jobs.submit + rounding <= job.start) & ~(jobs.start <= job.start + rounding)
        if (ahead & waiting).any():
            out.add(key)
    return out


@dataclass(frozen=True)
class Comparison:
    """The per-job table, the disagreements found (none: the runs agree) and how they were judged."""

    scenario: str
    labels: tuple[str, str]
    table: pd.DataFrame
    problems: list[str]
    tolerance: float
    why: str

    @property
    def agree(self) -> bool:
        return not self.problems

    def report(self) -> str:
        a, b = self.labels
        lines = [f"compare {self.scenario}: A = {a}, B = {b}", f"tolerance {self.tolerance:g} s ({self.why})", "",
                 _format(self.table), ""]
        if self.agree:
            started = int(self.table["start A"].notna().sum())
            filled = ", ".join(self.table.index[self.table["backfilled A"] == "yes"]) or "none"
            lines.append(f"agree: {started} of {len(self.table)} jobs started in both, in the same order; "
                         f"backfilled: {filled}")
        else:
            lines += [f"disagree: {len(self.problems)} problem(s)"] + [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def _format(table: pd.DataFrame) -> str:
    shown = table.copy()
    for column in ("start A", "start B", "delta"):
        shown[column] = [("-" if math.isnan(v) else f"{v:g}") for v in table[column]]
    for column in ("order A", "order B"):
        shown[column] = [("-" if math.isnan(v) else str(int(v))) for v in table[column]]
    return shown.rename_axis("job").reset_index().to_string(index=False)


def _rounding(run: dict) -> float:
    return float(run.get("time_scale", 0.0))


def compare(a: dict, b: dict, tolerance: float | None = None, labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Judge run `b` against run `a` (both as `load_run` returns them) by the five rules above."""
    if a["scenario"] != b["scenario"]:
        raise LabkitError(f"the runs are of different scenarios: {a['scenario']!r} and {b['scenario']!r}")
    ta, tb = _table(a), _table(b)
    ra, rb = _rounding(a), _rounding(b)
    interval = max(float(a.get("interval", 0.0)), float(b.get("interval", 0.0)))
    if tolerance is None:
        tolerance = interval + ra + rb
        why = f"scheduling interval {interval:g} s + rounding {ra:g} s (A) + {rb:g} s (B)"
    else:
        why = "given"
    keys = list(dict.fromkeys([*ta.index, *tb.index]))
    sa = ta.start.reindex(keys)
    sb = tb.start.reindex(keys)
    filled_a, filled_b = backfilled(ta, ra), backfilled(tb, rb)
    evictions = ta.evictions.notna().any() and tb.evictions.notna().any()
    problems: dict[str, list[str]] = {k: [] for k in keys}
    for key in keys:
        if key not in ta.index or key not in tb.index:
            problems[key].append(f"only in {'A' if key in ta.index else 'B'}")
            continue
        started_a, started_b = not math.isnan(sa[key]), not math.isnan(sb[key])
        if started_a != started_b:
            problems[key].append(f"started only in {'A' if started_a else 'B'}")
        elif started_a and abs(sa[key] - sb[key]) > tolerance:
            problems[key].append(f"start differs by {abs(sa[key] - sb[key]):g} s")
        if (key in filled_a) != (key in filled_b):
            problems[key].append(f"backfilled only in {'A' if key in filled_a else 'B'}")
        if evictions and (ta.evictions[key] > 0) != (tb.evictions[key] > 0):
            problems[key].append(f"evicted only in {'A' if ta.evictions[key] > 0 else 'B'}")
    both = [k for k in keys if not (math.isnan(sa[k]) or math.isnan(sb[k]))]
    for i, x in enumerate(both):
        for y in both[i + 1:]:
            da, db = sa[x] - sa[y], sb[x] - sb[y]
            if da * db < 0 and abs(da) > ra + rb and abs(db) > ra + rb:
                first_a, first_b = (x, y) if da < 0 else (y, x), (x, y) if db < 0 else (y, x)
                problems[x].append(f"order: A starts {first_a[0]} before {first_a[1]}, B {first_b[0]} before {first_b[1]}")
    table = pd.DataFrame({
        "start A": sa, "start B": sb, "delta": sb - sa,
        "order A": sa.rank(method="min"), "order B": sb.rank(method="min"),
        "backfilled A": ["yes" if k in filled_a else "no" for k in keys],
        "backfilled B": ["yes" if k in filled_b else "no" for k in keys],
        "evicted A": [_evicted(ta, k) for k in keys], "evicted B": [_evicted(tb, k) for k in keys],
        "verdict": ["; ".join(problems[k]) or "ok" for k in keys]}, index=keys)
    found = [f"{k}: {p}" for k in keys for p in problems[k]]
    return Comparison(a["scenario"], labels, table, found, tolerance, why)


def _evicted(table: pd.DataFrame, key: str) -> str:
    if key not in table.index or math.isnan(table.evictions[key]):
        return "-"
    return str(int(table.evictions[key]))


def _label(path: str, run: dict) -> str:
    scale = f", time scale {run['time_scale']:g}" if "time_scale" in run else ""
    return f"{path} ({run.get('engine', 'labkit')}{scale})"


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = load_run(args.a), load_run(args.b)
    result = compare(a, b, args.tolerance, (_label(args.a, a), _label(args.b, b)))
    print(result.report())
    return 0 if result.agree else 1


def register(sub) -> None:
    """Add `labkit compare` to the `labkit` parser."""
    text = "do two runs of one scenario agree? (simulate/slurm run/cluster observe --json); exit 1 if not"
    p = sub.add_parser("compare", help=text, description=text)
    p.add_argument("a", metavar="A.json", help="a run as JSON (e.g. labkit simulate --json), - for stdin")
    p.add_argument("b", metavar="B.json", help="the run to judge against A (e.g. labkit slurm run --json)")
    p.add_argument("--tolerance", type=float, metavar="SECONDS",
                   help="largest start-time difference allowed (default: scheduling interval + clock rounding)")
    p.set_defaults(func=cmd_compare)
