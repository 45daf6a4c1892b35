"""labkit: scheduler simulator and lab kit for multi-tenant AI training.

    import labkit
    scenario = labkit.load("my-lab.yaml")          # or labkit.preset("case-study")
    result = labkit.simulate(scenario)             # Result: jobs / tasks / events DataFrames
    decisions = labkit.cycle(scenario)             # one scheduling session on a snapshot

`simulate`, `cycle` and `load` take a Scenario, a dict, a YAML file path or YAML text. The names
are imported when first used, so `labkit` itself (and the `labkit` command) starts at once.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Result", "Scenario", "cycle", "dump", "load", "preset", "simulate"]

_WHERE = {"Result": "results", "Scenario": "spec", "dump": "spec", "load": "spec", "preset": "spec",
          "simulate": "api", "cycle": "api"}


def __getattr__(name: str) -> Any:
    """The API names, and the subpackages (`labkit.spec`, `labkit.workloads`, ...), on first use."""
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'labkit' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
