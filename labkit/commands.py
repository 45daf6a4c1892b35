"""What labkit's subcommands share (`labkit.cli` and the k8s, slurm and course commands it
registers): the exit codes and the scenario argument."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .errors import LabkitError

if TYPE_CHECKING:
    from . import spec

EXIT_OK, EXIT_FAILED = 0, 1
"""Exit codes of a command that ran (bad input, 2, and the rest are `labkit.errors`'s)."""


def add_source(parser: argparse.ArgumentParser) -> None:
    """The scenario to read: a file (or - for stdin) or --preset NAME."""
    parser.add_argument("scenario", nargs="?", help="scenario YAML file, or - for standard input")
    parser.add_argument("--preset", metavar="NAME", help="a scenario shipped with labkit (see `labkit presets`)")


def read_scenario(args: argparse.Namespace) -> spec.Scenario:
    """The scenario `add_source`'s arguments name (exactly one of them); standard input is read up to
    the size a scenario file may have."""
    from . import spec

    if (args.scenario is None) == (args.preset is None):
        raise LabkitError("give a SCENARIO file (or - for stdin) or --preset NAME, not both")
    if args.preset is not None:
        return spec.preset(args.preset)
    if args.scenario == "-":
        from .spec.io import MAX_FILE_BYTES

        text = sys.stdin.read(MAX_FILE_BYTES + 1)
        if len(text) > MAX_FILE_BYTES:
            raise LabkitError(f"<stdin>: scenarios up to {MAX_FILE_BYTES:,} bytes are read")
        return spec.loads(text, source="<stdin>")
    return spec.load(args.scenario)
