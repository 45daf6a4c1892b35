"""`simulate` and `cycle`: a scenario run on the simulated clock (`clock.py`) by the engine its
policy family registers (`families.py`), the numba core when it simulates everything the
scenario uses, else the reference engine.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .. import spec
from ..errors import LabkitWarning, SpecError
from ..progress import DELAY, Progress, progress_bar
from ..results import Result
from ..spec import Scenario, honoured
from .clock import Session, Simulation, record_of
from .compile import Compiled
from .problem import Decisions, PodGroupPhase, Problem
from .records import result_of

if TYPE_CHECKING:
    from .families import FamilyEngine


def cycle(scenario: Scenario, policy: str | None = None, session: Session | None = None) -> Cycle:
    """One scheduling session on the scenario as a snapshot: every job present, `status` applied."""
    from . import families

    if policy is not None:
        scenario = with_policy(scenario, policy)
    family = honour(scenario)
    if family.reference is not None:
        raise SpecError("scheduler", f"{family.name} has no scheduling session of its own: simulate() the scenario")
    sim = Simulation(family.compile(scenario, None), session or families.run_session, family.usage)
    for j in range(sim.p.n_jobs):
        sim.arrive(0.0, j)
    decisions, _ = sim.session_once(0.0)
    return Cycle(sim.p, decisions or Decisions(), sim.phase.copy())


@dataclass(frozen=True)
class Cycle:
    """What one session decided, by name: binds, pipelined and evictions, each with its reason."""

    problem: Problem
    decisions: Decisions
    job_phase: np.ndarray

    def binds(self) -> dict[str, str]:
        return {self.problem.task_names[b.task]: self.problem.node_names[b.node] for b in self.decisions.binds}

    def evicted(self) -> list[str]:
        return [self.problem.task_names[e.task] for e in self.decisions.evictions]

    def table(self) -> pd.DataFrame:
        """One row per decision: kind (bind, pipeline, evict), task, node, action, reason."""
        p, d = self.problem, self.decisions
        rows = [("bind", p.task_names[b.task], p.node_names[b.node], b.action, b.reason) for b in d.binds]
        rows += [("pipeline", p.task_names[b.task], p.node_names[b.node] if b.node >= 0 else "", b.action, b.reason)
                 for b in d.pipelined]
        rows += [("evict", p.task_names[e.task], "", e.action, e.reason) for e in d.evictions]
        return pd.DataFrame(rows, columns=["kind", "task", "node", "action", "reason"])

    def phases(self) -> dict[str, str]:
        return {name: PodGroupPhase(ph).name.title() for name, ph in zip(self.problem.job_names, self.job_phase)}


def simulate(scenario: Scenario, policy: str | None = None, session: Session | None = None,
             engine: str = "auto", progress: bool | Progress = False) -> Result:
    """Run a scenario on the simulated clock and return its Result.

    `policy` replaces the scenario's scheduler policy by a named preset (`labkit presets`).
    `engine`: "auto" runs the numba core (`labkit.engine.core`) when it simulates everything the
    scenario uses, else the reference engine; "numba" insists on the core (an error otherwise);
    "reference" runs the reference engine. `session`, a custom one-session function, runs on the
    reference clock. `Result.info["engine"]` says which engine ran (and why, on a fallback).
    `progress`: True shows a progress bar of jobs done (tqdm; a widget in a notebook) when the run
    takes more than a second; a callable gets (jobs done, jobs, simulated seconds) every few tenths
    of a second. Ctrl-C stops a run of either engine (KeyboardInterrupt).

    The first run of a family on a fresh install finds its numba core not compiled yet (a minute
    or two; numba's cache keeps it afterwards): under "auto" the core compiles in a background
    process while the reference engine answers (same semantics, same tables), and the core takes
    over as soon as its compile ends, this run included; a scenario of more than
    :data:`REFERENCE_WHILE_COMPILING` jobs, or engine "numba", waits for the compile. Either wait
    says what it is doing after two seconds, whatever `progress` says.
    """
    from ..errors import LabkitError
    from . import core, families

    if engine not in ("auto", "numba", "reference"):
        raise LabkitError(f"engine {engine!r}: expected auto, numba or reference")
    if session is not None and engine == "numba":
        raise LabkitError("engine numba: a custom session function runs on the reference engine")
    if policy is not None:
        scenario = with_policy(scenario, policy)
    ran, compiled, builds = "reference", None, None
    family = honour(scenario)
    if session is None and engine != "reference":
        families.start_compiling(scenario)
        compiled, static, missing = families.prepare(scenario)  # cached by content
        if missing is None:
            small = compiled.problem.n_jobs <= REFERENCE_WHILE_COMPILING
            try:
                result = _on_core(compiled, static, progress, "raise" if engine == "auto" and small else "wait", family)
            except core.Cold as cold:
                builds = cold.builds
            else:
                if result is not None:
                    return result
                missing = core.QUOTA_REFUSED
        if builds is None:
            if engine == "numba":
                raise LabkitError(f"engine numba: the numba core does not simulate {missing}")
            ran = _fallback(missing)
        else:
            ran = f"reference (the numba core for {builds.family} was compiling in the background)"
    compiled, result = compiled or family.compile(scenario, None), None
    if builds is not None:  # the first to finish answers: the reference run, or the core once compiled
        desc = f"reference engine (the numba core for {builds.family} compiles meanwhile)"
        with progress_bar(progress or True, compiled.problem.n_jobs, desc, DELAY) as tell:
            try:
                result = _reference(scenario, compiled, session, family, _until_done(builds, tell))
            except _CoreReady:
                pass
        if result is None:
            result = _on_core(compiled, static, progress, "wait", family)
            if result is not None:
                return result
            ran = _fallback(core.QUOTA_REFUSED)
    if result is None:
        with progress_bar(progress, compiled.problem.n_jobs) as tell:
            result = _reference(scenario, compiled, session, family, tell)
    result.info["engine"] = ran
    return result


REFERENCE_WHILE_COMPILING = 500
"""Jobs up to which the reference engine answers while the numba core compiles in the background
(on a fresh install); a larger scenario waits for the compile. The compile takes half a minute on
two cores, its parts side by side; the reference engine needs about as long for ~700 jobs (48 s
for the case study's 2,500-job slice), and a run of it beside the compile takes a core from it."""


def _fallback(missing: str) -> str:
    """The engine line of a run the numba core cannot simulate, warned about (stack: `simulate`'s caller)."""
    warnings.warn(f"the numba core does not simulate {missing}: the reference engine runs this scenario "
                  "(often 60-400x slower)", LabkitWarning, stacklevel=3)
    return f"reference (the numba core does not simulate {missing})"


class _CoreReady(Exception):
    """The background compile ended during a reference run: the core takes over."""


def _until_done(builds, tell: Progress | None) -> Progress:
    """``tell``, raising :class:`_CoreReady` once ``builds`` (``core.Builds``) have ended well."""

    def check(done: int, jobs: int, now: float) -> None:
        if tell is not None:
            tell(done, jobs, now)
        if builds.done():
            raise _CoreReady

    return check


def _on_core(compiled: Compiled, static: dict, progress: bool | Progress, when_cold: str, family) -> Result | None:
    """The run on the family's numba core (``when_cold``: see ``core.WHEN_COLD``), labelled as the family
    labels its results; None if a ResourceQuota refused a pod under a Volcano policy (``core.QUOTA_REFUSED``)."""
    from . import core, families

    with core.when_cold(when_cold), core.paused_gc(), progress_bar(progress, compiled.problem.n_jobs) as tell:
        record = families.run(compiled, static, progress=tell)
        if record is None:
            return None
        result = result_of(compiled, record)
    result.info["engine"] = "numba"
    return family.label(result) if family.label is not None else result


def _reference(scenario: Scenario, compiled: Compiled, session: Session | None, family,
               tell: Progress | None) -> Result:
    """The run on the reference engine (the family's own run, Kueue's, when it has one)."""
    from . import families

    if session is None and family.reference is not None:
        return family.reference(scenario, compiled, tell)
    sim = Simulation(compiled, session or families.run_session, family.usage)
    sim.run(tell)
    return result_of(compiled, record_of(sim))


def check(scenario: Scenario, policy: str | None = None) -> str | None:
    """Refuse, as `simulate` would, what the compiler refuses, without running (`labkit validate`):
    the scenario is compiled as `simulate` compiles it (and cached for the run that follows).
    Returns why the numba core would not run it (None when it would)."""
    from . import families

    if policy is not None:
        scenario = with_policy(scenario, policy)
    honour(scenario)
    return families.prepare(scenario)[2]


def honour(scenario: Scenario) -> FamilyEngine:
    """Refuse what the scenario's policy family cannot take, warn once about each field it ignores
    (`labkit.spec.honoured`), and return the family's engine."""
    from . import families

    family = families.engine_of(scenario)
    honoured.apply(scenario, family.name)
    return family


def with_policy(scenario: Scenario, name: str) -> Scenario:
    """The scenario under the named scheduler policy instead of its own."""
    spec.policy_scheduler(name)  # unknown names fail here, naming --policy
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    sections = ("conf", "slurm", "kueue", "kube")
    data["scheduler"] = {**{k: v for k, v in data.get("scheduler", {}).items() if k not in sections}, "policy": name}
    return spec.validate(data)
