"""The policy families and their engines, in one table: what `simulate` and `cycle` run for a
scenario's scheduler (Volcano, the default kube-scheduler, Kueue, Slurm), so that nothing above
asks which family it has. Adding a family is one folder under `engine/` and one row here.

Each row gives the family's reference session (one scheduling cycle on a Problem) or, for Kueue,
its own reference run; how its scenario compiles (the shared `compile.compile_with` under the
`FamilyRules` its folder gives: its Policy, request conversion and tables; Kueue compiles a Volcano
placeholder); what its numba core does not simulate; the static arrays and the run of that core;
and the usage the clock keeps for it (Slurm's decayed fair-share usage).
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import cache, partial

from ..errors import LabkitError
from ..progress import Progress
from ..results import Result
from ..spec import Scenario, scheduler_of, validate
from ..workloads import JobTable, job_table, table_key
from .clock import Session, Usage
from .compile import Compiled, compile_with
from .problem import Decisions, Family, Problem, State
from .records import RunRecord


@dataclass(frozen=True)
class FamilyEngine:
    """One family's engines: its reference (`session` on the shared clock, or its own `reference`
    run) and its numba core (`unsupported`, `arrays`, `run`)."""

    name: str
    session: Session
    compile: Callable[[Scenario, JobTable | None], Compiled]
    """The Compiled scenario, from the job table when `keyed_by_table` (else it is None)."""
    keyed_by_table: bool
    """`prepare` keys the scenario by its job table (`workloads.table_key`), else by its JSON
    (a family that reads more of each job than the table holds)."""
    unsupported: Callable[[Compiled], str | None]
    arrays: Callable[[Compiled], dict]
    run: Callable[[Compiled, dict, float, Progress | None], RunRecord | None]
    reference: Callable[[Scenario, Compiled, Progress | None], Result] | None = None
    usage: Usage | None = None
    label: Callable[[Result], Result] | None = None
    """The family's reading of the core's Result, as its `reference` gives it (Kueue: each job's
    `queue` is its ClusterQueue)."""
    entry: object = None
    """The core's jitted entry point, for `start_compiling` (None: no head start; Kueue's jobs must
    name its queues, so a one-pod scenario cannot run under its scheduler)."""


# Each family's modules are imported when its row is first read: a Volcano run does not pay for
# importing the other three cores.


def _volcano() -> FamilyEngine:
    from . import core, core_clock
    from .volcano.reference import VOLCANO, run_session

    return FamilyEngine("volcano", run_session, partial(compile_with, VOLCANO), True, core.unsupported,
                        core.static_arrays, core.run, entry=core_clock.run)


def _kube() -> FamilyEngine:
    from . import core
    from .kube import core as kube_core
    from .kube.reference import KUBE, run_session

    return FamilyEngine("kube-scheduler", run_session, partial(compile_with, KUBE), True, kube_core.unsupported,
                        lambda c: core.static_arrays(c) | kube_core.kube_arrays(c), kube_core.run,
                        entry=kube_core.run_core)


def _slurm() -> FamilyEngine:
    from . import core
    from .slurm import core as slurm_core
    from .slurm.reference import SLURM, decayed_usage, run_session

    return FamilyEngine("slurm", run_session, partial(compile_with, SLURM), False, slurm_core.unsupported,
                        lambda c: core.static_arrays(c) | slurm_core.slurm_arrays(c), slurm_core.run,
                        usage=decayed_usage, entry=slurm_core.run_core)


def _kueue() -> FamilyEngine:
    from . import core
    from .kueue import core as kueue_core
    from .kueue.reference import compile_kueue, label_cluster_queues, simulate_kueue

    return FamilyEngine("kueue", lambda p, s: Decisions(), lambda scenario, table: compile_kueue(scenario), False,
                        kueue_core.unsupported, lambda c: core.static_arrays(c) | kueue_core.kueue_arrays(c),
                        kueue_core.run, reference=simulate_kueue, label=label_cluster_queues)


ROWS: dict[str, Callable[[], FamilyEngine]] = {"volcano": _volcano, "kube": _kube, "slurm": _slurm,
                                                "kueue": _kueue}
"""The registry: a family's name -> its row."""
BY_FAMILY = {Family.VOLCANO: "volcano", Family.KUBE: "kube", Family.SLURM: "slurm"}
"""The family of a Problem's `policy.family` (Kueue's Problem is a Volcano placeholder's)."""
BY_SECTION = {"slurm": "slurm", "kube": "kube", "kueue": "kueue"}
"""The family of a scheduler section (`conf` and a bare policy name are Volcano's)."""


@cache
def family(name: str) -> FamilyEngine:
    """The row of the family `name` (`ROWS`)."""
    return ROWS[name]()


def engine_of(scenario: Scenario) -> FamilyEngine:
    """The engine the scenario's scheduler names: Kueue when it has a Kueue configuration."""
    sched = scheduler_of(scenario)
    return family("kueue" if sched.kueue is not None else BY_SECTION.get(sched.section, "volcano"))


def compile_scenario(scenario: Scenario, table: JobTable | None = None) -> Compiled:
    """The scenario compiled as its family compiles it (`engine_of`; ``table``: its job table,
    when the caller made it already)."""
    return engine_of(scenario).compile(scenario, table)


def engine_of_compiled(compiled: Compiled) -> FamilyEngine:
    if compiled.source.scheduler.kueue is not None:
        return family("kueue")
    return family(BY_FAMILY[compiled.problem.policy.family])


def run_session(problem: Problem, state: State) -> Decisions:
    """One scheduling cycle of the reference engine of the Problem's policy family."""
    return family(BY_FAMILY[problem.policy.family]).session(problem, state)


def run(compiled: Compiled, static: dict, scale: float = 1.0, progress: Progress | None = None) -> RunRecord | None:
    """Run the compiled scenario on its family's numba core (buffers sized by ``scale``, grown on
    need); None if a ResourceQuota refused a pod under a Volcano policy (`core.QUOTA_REFUSED`)."""
    return engine_of_compiled(compiled).run(compiled, static, scale, progress)


_CACHE: OrderedDict[str, tuple[Compiled, dict, str | None]] = OrderedDict()
_CACHE_SIZE = 4


def prepare(scenario: Scenario) -> tuple[Compiled, dict, str | None]:
    """The compiled scenario, its static core arrays and what its family's core cannot simulate
    (None if it can), cached by the scenario's content. Expanding and compiling take longer than a
    run of the core. A Volcano or Kubernetes scenario is keyed by its job table (`table_key`), which
    the compiler then reads, so its thousands of job models are walked once; Kueue and Slurm read
    more of each job and are keyed by the scenario's JSON. A table-keyed entry comes back with
    this scenario as its source (the key leaves out what the compiler does not read, such as a
    job's `duration` beside its `work`)."""
    engine = engine_of(scenario)
    table = None
    if not engine.keyed_by_table:
        key = scenario.model_dump_json(exclude_defaults=True)  # equal content, equal key; a third shorter
    else:
        table = job_table(scenario)
        key = table_key(scenario, table)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        compiled, static, missing = _CACHE[key]
        return (replace(compiled, source=scenario) if table is not None else compiled), static, missing
    entry = _CACHE[key] = _prepared(engine, scenario, table)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return entry


def _prepared(engine: FamilyEngine, scenario: Scenario, table: JobTable | None) -> tuple[Compiled, dict, str | None]:
    compiled = engine.compile(scenario, table)
    missing = engine.unsupported(compiled)
    return compiled, engine.arrays(compiled) if missing is None else {}, missing


ONE_POD = {
    "cluster": {"pools": [{"name": "node", "count": 1, "resources": {"nvidia.com/gpu": 1, "cpu": 1, "memory": "1Gi"}}]},
    "queues": [{"name": "default"}],
    "jobs": [{"name": "job", "duration": 1, "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 1}}]}],
}
"""The scenario whose run under a scheduler starts the compiles of its family's core (`start_compiling`)."""


def start_compiling(scenario: Scenario) -> None:
    """On a fresh install, start the background compiles of the numba core the scenario runs on
    before it is prepared (drawing and compiling the week's workloads takes ~3 s, ~2 of them
    compiling the generator). A family's core has the same types whatever the scenario
    (tests/test_cold.py), so a one-pod scenario under the scenario's scheduler needs the same
    entry point and the units of the same actions; what the scenario needs beyond (a conf
    change's actions) starts with its own run. A family without an `entry` gets no head start."""
    from . import core

    engine = engine_of(scenario)
    if os.environ.get(core.FOREGROUND) == "foreground" or engine.entry is None or not core.cold(engine.entry):
        return
    section = scenario.scheduler.model_dump(mode="json", by_alias=True, exclude_unset=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            one_pod = validate(ONE_POD | {"scheduler": section})
            compiled, static, missing = _prepared(engine, one_pod, job_table(one_pod) if engine.keyed_by_table else None)
        except LabkitError:
            return
    if missing is None:
        with core.when_cold("start"), suppress(core.Cold):
            engine.run(compiled, static, 1.0, None)


def forget_compiled() -> None:
    """Empty :func:`prepare`'s cache, so that the next run of any scenario compiles it again
    (benchmarks time runs of scenarios not seen before)."""
    _CACHE.clear()
