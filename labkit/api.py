"""`labkit.simulate` and `labkit.cycle` for any natural input: a Scenario, a dict, a YAML file
path or YAML text (each read by `labkit.spec.load`, every problem one SpecError naming the field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .engine import simulate as _engine
from .results import Result
from .spec import Scenario, load


def simulate(scenario: Scenario | dict | str | Path, policy: str | None = None, session: Any = None,
             engine: str = "auto", progress: Any = False) -> Result:
    """Run a scenario on the simulated clock and return its Result (`labkit.engine.simulate.simulate`
    says what `policy`, `session`, `engine` and `progress` do)."""
    return _engine.simulate(_scenario(scenario), policy, session, engine, progress)


def cycle(scenario: Scenario | dict | str | Path, policy: str | None = None, session: Any = None) -> _engine.Cycle:
    """One scheduling session on the scenario as a snapshot (`labkit.engine.simulate.cycle`)."""
    return _engine.cycle(_scenario(scenario), policy, session)


def _scenario(source: Scenario | dict | str | Path) -> Scenario:
    return source if isinstance(source, Scenario) else load(source)
