"""`labkit replay DIR`: run recorded real Volcano runs on the simulator and judge them by `compare`'s rules.

A recording is a folder, as `labkit cluster apply` + `labkit cluster observe --json` leave it:

* `scenario.yaml`: the scenario as `labkit show --yaml` resolved it;
* `real.json`: what `labkit cluster observe --json` printed;
* `pods.tsv`: one row per pod object (a comment line, then a header with at least job, pod, node,
  created): where each pod ran, for judging placement;
* `recording.yaml` (optional): what ran it — `volcano` (the build), `kubernetes` (the version
  Volcano vendors, which decides nodeorder's BalancedAllocation score: "1.36" scores the change
  a pod makes to the node's balance), `schedulePeriod` (vc-scheduler's `--schedule-period`, real
  seconds, default 1s), `random` (job -> why: where Volcano broke a tie of node scores at random
  and the job's start followed the choice) and `victimOrder` (why: preempt and reclaim met the
  node's pods in an order the recording cannot show, as Volcano walks node.Tasks, a Go map, and
  gang's Preemptable keeps the first pods it meets). Without it: Volcano v1.15.1's scoring, a 1 s
  period, labkit's own victim order.

With `victimOrder`, the simulator (the reference engine) walks each node's pods with the pods the
recording evicted within the tolerance of that moment first, and in index order otherwise: the
same votes and victim heap as ever, fed the order the recording points to where Go's walk of a map
starts at a random place each time (labkit's own order is task index), so the run is the variant
closest to the recording. The report says how many walks that changed and how the run with
labkit's own order compares.

DIR is one recording or a folder of them. Each is judged with `labkit.compare.compare`: the
simulated run is A, the recording B, its latency two sessions of the real period (a vcjob starts
in its second session) at the recording's time scale; evictions are compared by class of alike
jobs, placement up to renaming identical nodes. The last line is `N passed, M failed`.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..compare import compare, latency, load_run
from ..engine.problem import kubernetes_minor
from ..engine.simulate import simulate
from ..engine.volcano.reference import run_session
from ..errors import LabkitError
from ..k8s.observe import DEFAULT_SCHEDULE_PERIOD, VCJOB_START_SESSIONS
from ..results import Result
from ..spec import Scenario, loads
from ..spec.quantity import parse_duration

RECORDINGS = Path(__file__).with_name("volcano-real")
"""The recorded real runs shipped with labkit (`labkit replay` without DIR)."""

META_KEYS = {"volcano", "kubernetes", "schedulePeriod", "random", "victimOrder", "notes"}


@dataclass
class Recording:
    """One recorded run: the scenario (with the recording's nodeorder scoring), the real run as
    `compare` reads it (with `pods`, `schedule_period` and `start_sessions`) and what ran it."""

    name: str
    scenario: Scenario
    real: dict
    volcano: str
    kubernetes: str | None
    random: dict[str, str] = field(default_factory=dict)
    victim_order: str | None = None
    """Why the real victim order was one a recording cannot show (`victimOrder`); None: labkit's own."""
    stated: str = "recording.yaml"
    """Where the build was read from (recording.yaml, README.md); "" when v1.15.1 is assumed."""

    def ran(self) -> str:
        """What ran the recording, and where that was read, for the report line."""
        if not self.stated:
            return ("Volcano v1.15.1 assumed: the folder has no recording.yaml and its README.md names no build; "
                    "state it in recording.yaml, e.g. volcano: master ed72c7c8 and kubernetes: \"1.36\"")
        scoring = f", nodeorder scoring Kubernetes {self.kubernetes}" if self.kubernetes else ""
        unknown = "" if self.kubernetes or self.stated != "README.md" else (
            ", which vendors a Kubernetes labkit does not know: v1.15.1's scoring assumed "
            "(state it in recording.yaml as kubernetes: \"1.36\")")
        source = "" if self.stated == "recording.yaml" else f" (from {self.stated}{unknown})"
        return f"Volcano {self.volcano}{scoring}{source}"


def recordings(folder: str | Path) -> list[Path]:
    """The recordings in `folder`: itself when it holds a real.json, else its sub-folders that do."""
    root = Path(folder)
    if not root.is_dir():
        raise LabkitError(f"{folder}: no such folder")
    if (root / "real.json").is_file():
        return [root]
    found = sorted(p.parent for p in root.glob("*/real.json"))
    if not found:
        raise LabkitError(f"{folder}: no recording (a folder with scenario.yaml, real.json and pods.tsv)")
    return found


def load_recording(folder: Path) -> Recording:
    """Read one recording folder (LabkitError naming the file on bad input). Without a
    recording.yaml, a copy of a recording labkit ships (same name, same real.json) takes the shipped
    one's; any other, the build and period the README.md of the recording harness names
    (`readme_meta`); without either, Volcano v1.15.1 is assumed. `stated` says which."""
    meta, stated = _meta(folder / "recording.yaml"), "recording.yaml"
    shipped = RECORDINGS / folder.name
    if not meta and folder.resolve() != shipped.resolve() and _same(folder, shipped, "real.json"):
        meta, stated = _meta(shipped / "recording.yaml"), "labkit's shipped copy of this recording"
    if not meta:
        meta, stated = readme_meta(folder / "README.md"), "README.md"
    if "volcano" not in meta:
        stated = ""
    kubernetes = meta.get("kubernetes")
    scenario_file = folder / "scenario.yaml"
    try:
        data = yaml.safe_load(scenario_file.read_text(encoding="utf-8"))
    except OSError as err:
        raise LabkitError(f"{scenario_file}: {err.strerror}") from None
    if kubernetes is not None:
        _score_as(data, str(kubernetes))
    scenario = loads(yaml.safe_dump(data, sort_keys=False), source=str(scenario_file))
    real = load_run(str(folder / "real.json"))
    period = parse_duration(meta.get("schedulePeriod", DEFAULT_SCHEDULE_PERIOD))
    real.setdefault("schedule_period", period)
    real.setdefault("start_sessions", VCJOB_START_SESSIONS)
    real["pods"] = _recorded_pods(folder / "pods.tsv", float(real.get("time_scale", 1.0)))
    random = meta.get("random") or {}
    if not isinstance(random, dict):
        raise LabkitError(f"{folder / 'recording.yaml'}: random must map job (namespace/name) to why")
    victim_order = meta.get("victimOrder")
    if victim_order is not None and not (isinstance(victim_order, str) and victim_order.strip()):
        raise LabkitError(f"{folder / 'recording.yaml'}: victimOrder must say why the real victim order was random")
    return Recording(folder.name, scenario, real, str(meta.get("volcano", "v1.15.1")),
                     None if kubernetes is None else str(kubernetes), {str(k): str(v) for k, v in random.items()},
                     victim_order, stated)


VENDORED_KUBERNETES = {"ed72c7c815a9fd547a787134676f73d42e9d049c": "1.36"}
"""Volcano builds (commit) -> the Kubernetes they vendor (go.mod: k8s.io/kubernetes v1.36.1), which
decides nodeorder's BalancedAllocation score; a build not here scores as v1.15.1 (Kubernetes 1.35)."""

_README_VOLCANO = re.compile(r"^\* Volcano: volcano-sh/volcano (?P<ref>\S+)(?: (?P<sha>[0-9a-f]{7,40}))?"
                             r"(?: \(git describe v?(?P<describe>[^)]+?)(?:-g[0-9a-f]+)?\))?", re.MULTILINE)
_README_PERIOD = re.compile(r"--schedule-period=(?P<period>[0-9.]+m?s)\b")


def readme_meta(path: Path) -> dict:
    """What a recording's README.md says ran it, as recording.yaml would say it: the line
    `* Volcano: volcano-sh/volcano master ed72c7c8... (git describe v1.16.0-alpha.1-42-g...)` gives
    `volcano` (and `kubernetes` for a build in VENDORED_KUBERNETES), `--schedule-period=1s` gives
    `schedulePeriod`; {} when there is no such line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    found = _README_VOLCANO.search(text)
    if not found:
        return {}
    sha, describe = found["sha"], found["describe"]
    meta = {"volcano": " ".join(filter(None, [found["ref"], sha and sha[:8], describe and f"(v{describe})"]))}
    for commit, kubernetes in VENDORED_KUBERNETES.items():
        if sha and commit.startswith(sha):
            meta["kubernetes"] = kubernetes
    period = _README_PERIOD.search(text)
    if period:
        meta["schedulePeriod"] = period["period"]
    return meta


def _same(folder: Path, other: Path, name: str) -> bool:
    try:
        return (folder / name).read_bytes() == (other / name).read_bytes()
    except OSError:
        return False


def _meta(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise LabkitError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise LabkitError(f"{path}: expected a mapping of {', '.join(sorted(META_KEYS))}")
    unknown = set(meta) - META_KEYS
    if unknown:
        raise LabkitError(f"{path}: unknown key {min(unknown)!r} (known: {', '.join(sorted(META_KEYS))})")
    if "kubernetes" in meta:
        kubernetes_minor(meta["kubernetes"], f"{path}: kubernetes")
    return meta


def _score_as(scenario: dict, kubernetes: str) -> None:
    """Give the scenario's nodeorder entries the recording's BalancedAllocation scoring, unless set."""
    conf = (scenario.get("scheduler") or {}).get("conf")
    if not isinstance(conf, dict):
        raise LabkitError("recording.yaml: kubernetes is given but the scenario has no Volcano conf to score with it")
    for tier in conf.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            if plugin.get("name") == "nodeorder":
                plugin.setdefault("arguments", {}).setdefault("balancedresource.kubernetes", kubernetes)


def _recorded_pods(path: Path, time_scale: float) -> list[dict]:
    """Every pod object of the table (columns job, pod, node, created, start, end, evicted, deleted_w):
    when it ran, in scenario seconds; `first` marks the first object of each pod name."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    except OSError as err:
        raise LabkitError(f"{path}: {err.strerror}") from None
    rows = list(csv.DictReader(lines, delimiter="\t"))
    need = {"job", "pod", "node", "created", "start", "end", "evicted", "deleted_w"}
    if rows and not need <= rows[0].keys():
        raise LabkitError(f"{path}: expected columns {', '.join(sorted(need))}")
    out, seen = [], set()
    for row in sorted(rows, key=lambda r: float(r["created"] or "inf")):
        if not row["node"] or not row["start"]:
            continue
        name = f"{row['job'].split('/', 1)[0]}/{row['pod']}"
        job = row["job"].split("/", 1)[1]
        task = row["pod"][len(job) + 1:].rsplit("-", 1)[0]
        end = row["end"] or row["evicted"] or row["deleted_w"]
        out.append({"job": row["job"], "task": task, "pod": name, "node": row["node"], "first": name not in seen,
                    "start": float(row["start"]) * time_scale, "end": float(end) * time_scale if end else None,
                    "evicted": float(row["evicted"]) * time_scale if row["evicted"] else None})
        seen.add(name)
    return out


def simulated_pods(result: Result) -> list[dict]:
    """Every run of every pod of a simulated run, as `_recorded_pods` gives them for a real one."""
    runs = result.tasks.sort_values("start", kind="stable")
    first = ~runs.duplicated(["job", "role", "index"])
    return [{"job": r.job, "task": r.role, "pod": f"{r.job}-{r.role}-{int(r.index)}", "node": r.node,
             "first": bool(f), "start": float(r.start),
             "end": float(r.evicted) if r.evicted == r.evicted else (None if r.end != r.end else float(r.end))}
            for r, f in zip(runs.itertuples(), first)]


def job_classes(scenario: Scenario) -> dict[str, str]:
    """Jobs alike but for name and submit time share a class (rule 5 of `compare`)."""
    classes: dict[str, str] = {}
    first: dict[str, str] = {}
    for job in scenario.jobs:
        shape = json.dumps(job.model_dump(exclude={"name", "submit"}, mode="json"), sort_keys=True)
        key = f"{job.namespace}/{job.name}"
        classes[key] = first.setdefault(shape, key)
    return classes


@dataclass
class Steer:
    """A walk of node.Tasks (`Session.walk`) that meets first the pods the recording evicted within
    `window` of the session's time; counts the walks it changed."""

    evicted: dict[str, list[float]]
    window: float
    walks: int = 0
    changed: int = 0

    def __call__(self, ssn, node, tasks: list) -> list:
        def other(task) -> bool:
            return not any(abs(t - ssn.now) <= self.window for t in self.evicted.get(task.name, ()))

        ordered = sorted(tasks, key=other)
        self.walks += 1
        self.changed += ordered != tasks
        return ordered


def judge(recording: Recording, engine: str = "auto"):
    """Simulate the recording's scenario and compare it (A) with the recording (B); under
    `victimOrder` the reference engine walks node.Tasks as `Steer` does, and the Comparison's
    `variant` says what that changed."""
    unknown = set(recording.random) - {f"{j.namespace}/{j.name}" for j in recording.scenario.jobs}
    if unknown:
        raise LabkitError(f"{recording.name}/recording.yaml: random names no job of the scenario: {min(unknown)}")
    if recording.victim_order is None:
        return _compare(recording, simulate(recording.scenario, engine=engine))
    real = recording.real
    steer = Steer({}, latency(real)[0] + float(real.get("time_scale", 0.0)))
    for pod in real["pods"]:
        if pod.get("evicted") is not None:
            steer.evicted.setdefault(pod["pod"], []).append(pod["evicted"])
    steered = _compare(recording, simulate(recording.scenario, session=lambda p, s: run_session(p, s, steer)))
    own = simulate(recording.scenario, engine=engine)
    judged = _compare(recording, own)
    return replace(steered, variant=(
        f"victim order steered to the recording's evictions (within {steer.window:g} s) in {steer.changed} of "
        f"{steer.walks} walks of a node's pods, on the reference engine; with labkit's own order "
        f"({own.info.get('engine')}): " + (f"{len(judged.problems)} problem(s)" if judged.problems else "agrees as well")))


def _compare(recording: Recording, result: Result):
    sim = {**json.loads(json.dumps(result.to_json())), "pods": simulated_pods(result)}
    pools = {node: pool.name for pool in recording.scenario.cluster.pools for node in pool.node_names()}
    return compare(sim, recording.real, labels=(f"simulator ({result.info.get('engine')})", f"Volcano {recording.volcano}"),
                   classes=job_classes(recording.scenario), random=recording.random, pools=pools)


def replay(folder: str | Path, engine: str = "auto") -> Iterator[tuple[Recording, object]]:
    """(recording, Comparison) for every recording under `folder`."""
    for path in recordings(folder):
        recording = load_recording(path)
        yield recording, judge(recording, engine)


def cmd_replay(args: argparse.Namespace) -> int:
    passed = failed = 0
    for recording, result in replay(args.dir or RECORDINGS, args.engine):
        status = "PASS" if result.agree else "FAIL"
        print(f"{status} {recording.name} ({recording.ran()}; tolerance {result.tolerance:g} s: {result.why})")
        if args.verbose or not result.agree:
            print("\n".join(f"    {line}" for line in result.report().splitlines()))
        if result.variant:
            print(f"    variant: {result.variant}; why: {recording.victim_order.strip()}")
        for why, jobs in _grouped(recording.random).items():
            print(f"    variant {', '.join(jobs)}: {why}")
        passed += result.agree
        failed += not result.agree
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def _grouped(random: dict[str, str]) -> dict[str, list[str]]:
    """why -> the jobs it explains, in the recording's order."""
    out: dict[str, list[str]] = {}
    for job, why in random.items():
        out.setdefault(why, []).append(job)
    return out


def register(sub) -> None:
    """Add `labkit replay` to the `labkit` parser."""
    text = ("run recorded real Volcano runs on the simulator and judge them by compare's rules; "
            "last line 'N passed, M failed', exit 1 on a failure")
    p = sub.add_parser("replay", help=text, description=text)
    p.add_argument("dir", nargs="?", metavar="DIR",
                   help="a recording folder or a folder of them (default: the recordings shipped with labkit)")
    p.add_argument("--engine", choices=("auto", "numba", "reference"), default="auto",
                   help="auto: the numba core when it simulates the scenario, else the reference engine")
    p.add_argument("-v", "--verbose", action="store_true", help="print every comparison table, not only failures")
    p.set_defaults(func=cmd_replay)
