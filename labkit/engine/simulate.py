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
from ..progress import Progress, progress_bar
from ..results import Result
from ..spec import Scenario, honoured
from .clock import Session, Simulation, record_of
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
    """
    from ..errors import LabkitError
    from . import core, families

    if engine not in ("auto", "numba", "reference"):
        raise LabkitError(f"engine {engine!r}: expected auto, numba or reference")
    if session is not None and engine == "numba":
        raise LabkitError("engine numba: a custom session function runs on the reference engine")
    if policy is not None:
        scenario = with_policy(scenario, policy)
    ran, compiled = "reference", None
    family = honour(scenario)
    if session is None and engine != "reference":
        compiled, static, missing = families.prepare(scenario)  # cached by content
        if missing is None:
            with core.paused_gc(), progress_bar(progress, compiled.problem.n_jobs) as tell:
                record = families.run(compiled, static, progress=tell)
                if record is not None:
                    result = result_of(compiled, record)
                    result.info["engine"] = "numba"
                    return family.label(result) if family.label is not None else result
            missing = core.QUOTA_REFUSED
        if engine == "numba":
            raise LabkitError(f"engine numba: the numba core does not simulate {missing}")
        ran = f"reference (the numba core does not simulate {missing})"
        warnings.warn(f"the numba core does not simulate {missing}: the reference engine runs this scenario "
                      "(often 60-400x slower)", LabkitWarning, stacklevel=2)
    if session is None and family.reference is not None:
        compiled = compiled or family.compile(scenario, None)
        with progress_bar(progress, compiled.problem.n_jobs) as tell:
            result = family.reference(scenario, compiled, tell)
        result.info["engine"] = ran
        return result
    if compiled is None:
        compiled = family.compile(scenario, None)
    sim = Simulation(compiled, session or families.run_session, family.usage)
    with progress_bar(progress, compiled.problem.n_jobs) as tell:
        sim.run(tell)
    result = result_of(compiled, record_of(sim))
    result.info["engine"] = ran
    return result


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
