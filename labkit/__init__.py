"""labkit: scheduler simulator and lab kit for multi-tenant AI training.

    import labkit
    scenario = labkit.load("my-lab.yaml")          # or labkit.preset("case-study")
    result = labkit.simulate(scenario)             # Result: jobs / tasks / events DataFrames
    decisions = labkit.cycle(scenario)             # one scheduling session on a snapshot
"""

from .engine.simulate import cycle, simulate
from .results import Result
from .spec import Scenario, dump, load, preset

__all__ = ["Result", "Scenario", "cycle", "dump", "load", "preset", "simulate"]
