"""What labkit's subcommands share (`labkit.cli` and the k8s, slurm and course commands it
registers): the exit codes and the scenario argument."""

from __future__ import annotations

import argparse
import sys

from . import spec
from .errors import LabkitError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def add_source(parser: argparse.ArgumentParser) -> None:
    """The scenario to read: a file (or - for stdin) or --preset NAME."""
    parser.add_argument("scenario", nargs="?", help="scenario YAML file, or - for standard input")
    parser.add_argument("--preset", metavar="NAME", help="a scenario shipped with labkit (see `labkit presets`)")


def read_scenario(args: argparse.Namespace) -> spec.Scenario:
    """The scenario `add_source`'s arguments name (exactly one of them)."""
    if (args.scenario is None) == (args.preset is None):
        raise LabkitError("give a SCENARIO file (or - for stdin) or --preset NAME, not both")
    if args.preset is not None:
        return spec.preset(args.preset)
    if args.scenario == "-":
        return spec.loads(sys.stdin.read(), source="<stdin>")
    return spec.load(args.scenario)
