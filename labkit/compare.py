"""`labkit compare A.json B.json`: do two runs of one scenario agree (the simulator and a real engine)?

A run is the JSON that `labkit simulate --json`, `labkit slurm run --json` and `labkit cluster observe
--json` print::

    {"engine": "slurm", "scenario": "slurm-backfill", "time_scale": 1, "interval": 5,
     "summary": {...}, "jobs": [{"name": "a", "namespace": "default", "priority": 1421,
                                 "submit": 0, "start": 0, "evictions": 0, ...}, ...]}

`scenario` and `jobs` (each with name, submit, start; start null when the job never started) are
required. `engine`, `time_scale`, `interval`, `schedule_period`, `start_sessions` and `pods` are given by
real runs: a real clock has one-second resolution, i.e. `time_scale` scenario seconds (a run without
`time_scale` is exact); `interval` is how long, in scenario seconds, a startable job may wait for the
scheduler's next pass; a real Volcano gives instead its scheduling period in real seconds
(`schedule_period`) and how many sessions a new job needs to start (`start_sessions`, 2 for a vcjob:
one enqueues its PodGroup, the controller then creates the pods, the next allocates them), which
makes a latency of `start_sessions x schedule_period x time_scale` scenario seconds. `pods` (one
object per run of a pod: job, task, pod, node, start, end in scenario seconds, `first` false for a
pod's later runs) lets placement be judged.

The runs agree when
1. the same jobs started;
2. no two jobs started in one order in A and in the other in B, by more than the rounding;
3. the same jobs were backfilled: started while a job ahead of them (higher priority, or the same
   priority and submitted earlier) had been submitted and was still waiting, as far as the clock's
   rounding can tell;
4. each job's start times differ by at most the tolerance: the larger latency plus both roundings;
5. as many jobs of each class were evicted (evictions > 0), when both runs count evictions: a class
   is a set of jobs alike but for name and submit time (Volcano may pick any of them as victim);
   without classes, every job is its own;
6. when both runs give `pods`: each pod's first run started on a node of the same pool running the
   same pods (by job and task) in both runs (nodes alike at that moment score alike: which of them
   is a tie).

Jobs named `random` (job -> why), where the recorded scheduler broke a tie of node scores at random
and the rest of the run followed, are judged on 1 and 5 and on their pods' pools only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
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
    out |= {key: result.info[key] for key in RUN_TIMING if key in result.info}
    return out | {"summary": summary, "jobs": jobs}


RUN_TIMING = ("time_scale", "interval", "schedule_period", "start_sessions")
"""The keys of a run that say how its clock and its scheduler's passes relate to scenario time."""


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
    for key in RUN_TIMING:
        if key in data and not (isinstance(data[key], (int, float)) and not isinstance(data[key], bool)
                                and data[key] >= 0):
            raise LabkitError(f"{path}: {key} must be a number >= 0, got {data[key]!r}")
    pods = data.get("pods", [])
    fields = {"job", "task", "pod", "node", "start", "end"}
    if not isinstance(pods, list) or not all(isinstance(p, dict) and fields <= p.keys() for p in pods):
        raise LabkitError(f"{path}: pods must be a list of objects with {', '.join(sorted(fields))}")
    return data


def latency(run: dict) -> tuple[float, str]:
    """How long, in scenario seconds, a startable job may wait in this run, and what that is made of."""
    if "schedule_period" in run:
        sessions, period, scale = run.get("start_sessions", 1), run["schedule_period"], run.get("time_scale", 1.0)
        return sessions * period * scale, f"{sessions:g} session(s) x period {period:g} s x time scale {scale:g}"
    interval = float(run.get("interval", 0.0))
    return interval, f"scheduling interval {interval:g} s"


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
    variant: str = ""
    """Which of the runs the scheduler could have made A is, when not its default (`labkit replay`)."""

    @property
    def agree(self) -> bool:
        return not self.problems

    def report(self) -> str:
        a, b = self.labels
        lines = [f"compare {self.scenario}: A = {a}, B = {b}", f"tolerance {self.tolerance:g} s ({self.why})"]
        lines += [f"A's variant: {self.variant}"] if self.variant else []
        lines += ["", _format(self.table), ""]
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


def compare(a: dict, b: dict, tolerance: float | None = None, labels: tuple[str, str] = ("A", "B"),
            classes: dict[str, str] | None = None, random: dict[str, str] | None = None,
            pools: dict[str, str] | None = None) -> Comparison:
    """Judge run `b` against run `a` (both as `load_run` returns them) by the rules above.

    `classes`: job -> class for rule 5; `random`: job -> why its start and node were a random
    tie-break; `pools`: node -> pool for rule 6 (default: the node name without its `-N` suffix).
    """
    if a["scenario"] != b["scenario"]:
        raise LabkitError(f"the runs are of different scenarios: {a['scenario']!r} and {b['scenario']!r}")
    ta, tb = _table(a), _table(b)
    ra, rb = _rounding(a), _rounding(b)
    random = random or {}
    (la, why_a), (lb, why_b) = latency(a), latency(b)
    if tolerance is None:
        tolerance = max(la, lb) + ra + rb
        made = why_a if la >= lb else why_b
        why = f"latency {max(la, lb):g} s ({made}, {'A' if la >= lb else 'B'}) + rounding {ra:g} s (A) + {rb:g} s (B)"
    else:
        why = "given"
    keys = list(dict.fromkeys([*ta.index, *tb.index]))
    sa = ta.start.reindex(keys)
    sb = tb.start.reindex(keys)
    filled_a, filled_b = backfilled(ta, ra), backfilled(tb, rb)
    problems: dict[str, list[str]] = {k: [] for k in keys}
    for key in keys:
        if key not in ta.index or key not in tb.index:
            problems[key].append(f"only in {'A' if key in ta.index else 'B'}")
            continue
        started_a, started_b = not math.isnan(sa[key]), not math.isnan(sb[key])
        if started_a != started_b:
            problems[key].append(f"started only in {'A' if started_a else 'B'}")
        elif started_a and abs(sa[key] - sb[key]) > tolerance and key not in random:
            problems[key].append(f"start differs by {abs(sa[key] - sb[key]):g} s")
        if (key in filled_a) != (key in filled_b) and key not in random:
            problems[key].append(f"backfilled only in {'A' if key in filled_a else 'B'}")
    if ta.evictions.notna().any() and tb.evictions.notna().any():
        _judge_evictions(ta, tb, [k for k in keys if k in ta.index and k in tb.index], classes or {}, problems)
    if a.get("pods") and b.get("pods"):
        _judge_placement(a["pods"], b["pods"], random, pools or {}, classes or {}, ra + rb, problems)
    both = [k for k in keys if not (math.isnan(sa[k]) or math.isnan(sb[k])) and k not in random]
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
        "verdict": ["; ".join(problems[k]) or ("random: not timed" if k in random else "ok") for k in keys]},
        index=keys)
    found = [f"{k}: {p}" for k in keys for p in problems[k]]
    return Comparison(a["scenario"], labels, table, found, tolerance, why)


def _judge_evictions(ta: pd.DataFrame, tb: pd.DataFrame, keys: list[str], classes: dict[str, str],
                     problems: dict[str, list[str]]) -> None:
    """Rule 5: as many evicted jobs in each class (a job without a class is its own)."""
    members: dict[str, list[str]] = {}
    for key in keys:
        members.setdefault(classes.get(key, key), []).append(key)
    for group in members.values():
        hit_a = [k for k in group if ta.evictions[k] > 0]
        hit_b = [k for k in group if tb.evictions[k] > 0]
        if len(group) == 1 and hit_a != hit_b:
            problems[group[0]].append(f"evicted only in {'A' if hit_a else 'B'}")
        elif len(hit_a) != len(hit_b):
            alike = ", ".join(group)
            for key in sorted(set(hit_a) | set(hit_b)):
                problems[key].append(f"evicted: {len(hit_a)} of the alike jobs {alike} in A "
                                     f"({', '.join(hit_a) or 'none'}), {len(hit_b)} in B ({', '.join(hit_b) or 'none'})")


def _pool(node: str, pools: dict[str, str]) -> str:
    return pools.get(node) or node.rsplit("-", 1)[0]


def _judge_placement(pods_a: list[dict], pods_b: list[dict], random: dict[str, str], pools: dict[str, str],
                     classes: dict[str, str], rounding: float, problems: dict[str, list[str]]) -> None:
    """Rule 6: every pod went, in both runs, to a node of the same pool running the same pods (by
    task, alike jobs as one) when it started: nodes alike at that moment tie, so which of them is no
    matter. Pods of its own gang that started with it count, which tells packing from spreading;
    another job's pod that started or ended within `rounding` of it counts in neither run (the
    clocks cannot tell whether it was there)."""
    def task(pod: dict) -> str:
        return f"{classes.get(pod['job'], pod['job'])}/{pod['task']}"

    def placements(pods: list[dict]) -> Counter:
        pods = [{**p, "end": math.inf if p["end"] is None else p["end"]} for p in pods if p["start"] is not None]
        out: Counter = Counter()
        for p in pods:
            if p["node"] and p.get("first", True) and p["job"] not in random:
                beside = sorted(task(q) for q in pods if q is not p and q["node"] == p["node"] and (
                    q["start"] + rounding < p["start"] < q["end"] - rounding
                    or (q["job"] == p["job"] and q["start"] == p["start"])))
                out[(p["job"], task(p), _pool(p["node"], pools), tuple(beside))] += 1
        return out

    pa, pb = placements(pods_a), placements(pods_b)
    for side, mine, other in (("A", pa, pb), ("B", pb, pa)):
        for (job, what, pool, beside), n in sorted((mine - other).items()):
            if job in problems:
                problems[job].append(f"placement: {side} started {n} {what} pod(s) on a {pool} node "
                                     f"running {', '.join(beside) or 'nothing'}, the other run did not")
    for job in random:
        if job in problems:
            ca = Counter(_pool(p["node"], pools) for p in pods_a if p["job"] == job and p["node"] and p.get("first", True))
            cb = Counter(_pool(p["node"], pools) for p in pods_b if p["job"] == job and p["node"] and p.get("first", True))
            if ca != cb:
                problems[job].append(f"placement by pool: A {dict(ca)}, B {dict(cb)}")


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
