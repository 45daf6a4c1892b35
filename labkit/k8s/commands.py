"""`labkit export k8s` and `labkit cluster ...` (registered into the main CLI).

`export` takes a target from `EXPORT_TARGETS`; another engine adds its writer there (same source
arguments, `-o DIR`, `--time-scale`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from ..commands import EXIT_FAILED, EXIT_OK, add_source, read_scenario
from ..slurm.conf import export as export_slurm
from ..spec import Scenario


def export_k8s(scenario: Scenario, out_dir: Path, time_scale: float, command: str, force: bool = False) -> list[Path]:
    """The lab's Kubernetes/Volcano objects, one file per kind in apply order."""
    from .export import render, write
    from .manifests import manifests

    return write(render(manifests(scenario, time_scale), command), out_dir, force)


EXPORT_TARGETS: dict[str, tuple[str, Callable[[Scenario, Path, float, str, bool], list[Path]]]] = {
    "k8s": ("Kubernetes + KWOK manifests with Volcano's objects, or Kueue's for a Kueue scenario (kubectl apply -f DIR)", export_k8s),
    "slurm": ("slurm.conf, gres.conf and one sbatch script per job (labkit slurm up --state-dir DIR)", export_slurm),
}
"""target -> (help, writer(scenario, out_dir, time_scale, command line for the header, force))."""


def source_words(args: argparse.Namespace) -> str:
    """How the scenario was named on the command line, for a generated file's header."""
    return f"--preset {args.preset}" if args.preset else shlex.quote(args.scenario)


def cmd_export(args: argparse.Namespace) -> int:
    scenario = read_scenario(args)
    command = f"labkit export {args.target} {source_words(args)}"
    if args.time_scale != 1:
        command += f" --time-scale {args.time_scale:g}"
    written = EXPORT_TARGETS[args.target][1](scenario, Path(args.output), args.time_scale, command, args.force)
    print(f"wrote {len(written)} files to {args.output}: {', '.join(p.name for p in written)}")
    return EXIT_OK


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from .cluster import up

    if args.scenario is None and args.preset is None:
        args.preset = "case-study"
    up(args.name, read_scenario(args))
    return EXIT_OK


def _api(args: argparse.Namespace):
    """The cluster of --kubeconfig/--context, named on the first line of output (stderr) before anything is done."""
    from .cluster import Api

    api = Api(args.context, args.kubeconfig)
    print(f"labkit: context {api.context_name} ({api.host})", file=sys.stderr, flush=True)
    return api


def cmd_cluster_apply(args: argparse.Namespace) -> int:
    from .cluster import apply, preflight, volcano_lab

    scenario = volcano_lab(read_scenario(args))
    api = _api(args)
    preflight(api, scenario, "apply")
    created = apply(api, scenario, args.time_scale)
    print(f"applied {scenario.name}: {created} vcjobs submitted (time scale {args.time_scale:g})")
    return EXIT_OK


def cmd_cluster_observe(args: argparse.Namespace) -> int:
    from .cluster import observe, preflight, volcano_lab
    from .observe import result_json

    scenario = volcano_lab(read_scenario(args))
    api = _api(args)
    preflight(api, scenario, "observe")
    result = observe(api, scenario, args.timeout)
    data = result_json(result)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(" ".join(f"{k}={v}" for k, v in data["summary"].items()))
    unfinished = data["summary"]["jobs"] - data["summary"]["completed"]
    if unfinished:
        print(f"labkit: {unfinished} job(s) not finished within {args.timeout:g}s", file=sys.stderr)
    return EXIT_FAILED if unfinished else EXIT_OK


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from .cluster import delete_cluster, down, preflight

    if args.cluster:
        delete_cluster(args.name)
        print(f"deleted kind cluster {args.name}")
        return EXIT_OK
    api = _api(args)
    preflight(api, None, "down")
    count = down(api, args.lab)
    print(f"deleted {count} labkit object(s)" + (f" of lab {args.lab}" if args.lab else ""))
    return EXIT_OK


def register(sub) -> None:
    """Add this subsystem's subcommands to the `labkit` parser."""
    text = "write a scenario as files for a real engine (one file per kind, in apply order)"
    export = sub.add_parser("export", help=text, description=text)
    export.add_argument("target", choices=sorted(EXPORT_TARGETS),
                        help="; ".join(f"{name}: {help_}" for name, (help_, _) in sorted(EXPORT_TARGETS.items())))
    add_source(export)
    export.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write (created if needed)")
    export.add_argument("--force", action="store_true", help="replace files in DIR that labkit did not write")
    _add_time_scale(export)
    export.set_defaults(func=cmd_export)

    text = "a kind cluster with Volcano and KWOK fake GPU nodes: up, apply a lab, observe it, down"
    cluster = sub.add_parser("cluster", help=text, description=text)
    actions = cluster.add_subparsers(dest="action", required=True, parser_class=type(cluster))
    up = actions.add_parser("up", help="create the kind cluster, install Volcano and KWOK, create the fake nodes "
                                       "(of the scenario, default --preset case-study)")
    add_source(up)
    up.set_defaults(func=cmd_cluster_up)
    apply = actions.add_parser("apply", help="create the lab's objects; vcjobs at their (scaled) submit times")
    add_source(apply)
    _add_time_scale(apply)
    apply.set_defaults(func=cmd_cluster_apply)
    observe = actions.add_parser("observe", help="watch the lab's run until every job finished; print its Result")
    add_source(observe)
    observe.add_argument("--timeout", type=float, default=3600, metavar="SECONDS", help="stop watching after this long")
    observe.add_argument("--json", action="store_true", help="the jobs table and summary as JSON")
    observe.set_defaults(func=cmd_cluster_observe)
    down = actions.add_parser("down", help="delete labkit's objects (or, with --cluster, the kind cluster labkit made)")
    down.add_argument("--lab", metavar="NAME", help="only the objects of this lab (scenario name)")
    down.add_argument("--cluster", action="store_true", help="delete the whole kind cluster instead")
    down.set_defaults(func=cmd_cluster_down)
    for action in (up, down):
        action.add_argument("--name", default="labkit", help="kind cluster name (default labkit)")
    for action in (apply, observe, down):
        action.add_argument("--kubeconfig", metavar="FILE",
                            help="the cluster's kubeconfig (default: $KUBECONFIG, else ~/.kube/config); any cluster "
                                 "with Volcano and KWOK installed")
        action.add_argument("--context", help="kubeconfig context (default: the file's current one)")


def _add_time_scale(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--time-scale", type=float, default=1.0, metavar="S",
                        help="divide run times and submit offsets by S (e.g. 1008: a week in 10 minutes)")
