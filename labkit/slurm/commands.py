"""`labkit slurm up|run|down` and `labkit compare` (registered into the main CLI)."""

from __future__ import annotations

import argparse
import json
import sys

from .. import compare
from ..commands import EXIT_FAILED, EXIT_OK, add_source, read_scenario
from ..errors import LabkitError
from ..spec import Scenario, validate
from .cluster import DEFAULT_STATE_DIR, Cluster, down, up
from .conf import slurm_scenario


def local_scenario(nodes: int) -> Scenario:
    """The course's local cluster when no scenario is given: `nodes` x (8 CPUs, 8 GPUs), partition gpu."""
    if nodes < 1:
        raise LabkitError(f"--nodes must be >= 1, got {nodes}")
    return validate({"name": "slurm-local", "cluster": {"pools": [{"name": "n", "count": nodes, "resources": {
        "nvidia.com/gpu": 8, "cpu": 8, "memory": "8000Mi"}}]}, "scheduler": {"policy": "slurm-backfill"}})


def cmd_up(args: argparse.Namespace) -> int:
    if args.scenario is None and args.preset is None:
        scenario = local_scenario(4 if args.nodes is None else args.nodes)
    elif args.nodes is not None:
        raise LabkitError("give --nodes or a scenario (its node pools are the nodes), not both")
    else:
        scenario = read_scenario(args)
    scenario, conf = slurm_scenario(scenario, args.policy)
    print(up(scenario, conf, Cluster(args.state_dir), args.time_scale, args.port))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from .observe import run

    scenario, conf = slurm_scenario(read_scenario(args), args.policy)
    result = run(scenario, conf, Cluster(args.state_dir), args.time_scale, args.timeout,
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    unfinished = int((~result.jobs.state.isin(["Completed", "Rejected"])).sum())
    if args.json:
        print(json.dumps(compare.to_json(result)))
    else:
        columns = ["name", "queue", "priority", "submit", "start", "end", "state", "evictions"]
        print(result.jobs[columns].rename(columns={"queue": "partition"}).to_string(index=False))
        print(" ".join(f"{k}={v}" for k, v in result.summary().items()))
    if unfinished:
        print(f"labkit: {unfinished} job(s) not completed within the run; cancelled", file=sys.stderr)
    return EXIT_FAILED if unfinished else EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    print(down(Cluster(args.state_dir)))
    return EXIT_OK


def register(sub) -> None:
    """Add `slurm` and `compare` to the `labkit` parser."""
    text = "a real Slurm on 127.0.0.1 (munged, slurmctld, one slurmd per node, fake GPUs): up, run a lab, down"
    slurm = sub.add_parser("slurm", help=text, description=text)
    actions = slurm.add_subparsers(dest="action", required=True, parser_class=type(slurm))
    p_up = actions.add_parser("up", help="start the local Slurm with the scenario's nodes and slurm.conf "
                                         "(default: --nodes 4 x 8 GPUs, slurm-backfill); wait until the nodes are idle")
    add_source(p_up)
    p_up.add_argument("--nodes", type=int, metavar="N", help="N nodes of 8 CPUs and 8 GPUs (without a scenario)")
    p_up.add_argument("--port", type=int, metavar="P", help="slurmctld port; the slurmd ports follow it "
                                                            "(default: the first free block from 6817)")
    p_run = actions.add_parser("run", help="submit the scenario's jobs at their scaled times, follow them "
                                           "until done and print the Result of the real run")
    add_source(p_run)
    p_run.add_argument("--timeout", type=float, default=3600, metavar="SECONDS",
                       help="stop (and scancel what is left) after this many real seconds")
    p_run.add_argument("--json", action="store_true", help="the run as JSON, for labkit compare")
    p_down = actions.add_parser("down", help="cancel the jobs and stop exactly the daemons `up` started")
    for action, func in ((p_up, cmd_up), (p_run, cmd_run), (p_down, cmd_down)):
        action.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR), metavar="D",
                            help=f"where Slurm's files, logs and pids live (default {DEFAULT_STATE_DIR})")
        action.set_defaults(func=func)
    for action in (p_up, p_run):
        action.add_argument("--policy", metavar="NAME", help="run under this Slurm policy instead of the scenario's")
        action.add_argument("--time-scale", type=float, default=1.0, metavar="S",
                            help="divide submit offsets, run times and time limits by S (limits stay whole minutes)")
    compare.register(sub)
