"""The `labkit` command. Exit codes: 0 ok, 1 a check failed, 2 bad input (one line on stderr),
3 an internal fault (one line; LABKIT_TRACEBACK=1 for the traceback), 130 interrupted.

Only the standard library is imported before `main` runs, so Ctrl-C while labkit loads is
reported like any other interruption."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from .commands import EXIT_FAILED, EXIT_OK, add_source, read_scenario
from .errors import LabkitError, LabkitWarning, one_line

if TYPE_CHECKING:
    from . import spec


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit 2, like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise LabkitError(f"{self.prog}: {message}")


def cmd_validate(args: argparse.Namespace) -> int:
    from .engine.simulate import check

    scenario = read_scenario(args)
    missing = check(scenario)  # what simulate would refuse, validate refuses
    if missing is not None:
        warnings.warn(f"the numba core does not simulate {missing}: simulate runs this scenario on the "
                      "reference engine (often 60-400x slower)", LabkitWarning, stacklevel=1)
    jobs = len(scenario.jobs)
    made = f" + {_workloads_text(scenario)}" if scenario.workloads else ""
    nodes = sum(p.count for p in scenario.cluster.pools)
    print(f"ok: {scenario.name}: {nodes} nodes, {len(scenario.queues)} queue(s), {jobs} job(s){made}")
    return EXIT_OK


def _workloads_text(scenario: spec.Scenario) -> str:
    """The scenario's workloads: generators, and traces with their jobs."""
    traced = [w for w in scenario.workloads if w.trace is not None]
    drawn = len(scenario.workloads) - len(traced)
    parts = [f"{drawn} workload generator(s)"] if drawn else []
    if traced:
        parts.append(f"{len(traced)} trace workload(s) of {sum(len(w.trace.names) for w in traced):,} jobs")
    return " + ".join(parts)


def cmd_show(args: argparse.Namespace) -> int:
    from . import spec
    from .workloads import expand

    scenario = spec.resolve(read_scenario(args))
    if args.expand:
        scenario = expand(scenario)
    if args.yaml:
        sys.stdout.write(spec.dump(scenario))
        return EXIT_OK
    nodes = sum(p.count for p in scenario.cluster.pools)
    print(f"{scenario.name}: {scenario.description}".rstrip(": "))
    for pool in scenario.cluster.pools:
        res = ", ".join(f"{k}={v}" for k, v in pool.resources.items())
        print(f"  pool {pool.name}: {pool.count} x ({res})")
    print(f"  {nodes} nodes; queues: {', '.join(q.name for q in scenario.queues) or '(default only)'}")
    loads = _workloads_text(scenario) if scenario.workloads else "workload generators: 0"
    print(f"  jobs: {len(scenario.jobs)}; {loads}")
    print(f"  scheduler: {scenario.scheduler.policy or 'custom'}; {_scheduler_line(spec.scheduler_of(scenario))}")
    return EXIT_OK


def _scheduler_line(sched: spec.Scheduler) -> str:
    """One line on what the scheduler section says, in that scheduler's own terms."""
    if sched.conf is not None:
        return f"Volcano actions: {sched.conf.actions}"
    if sched.slurm is not None:
        return f"Slurm SchedulerType={sched.slurm.scheduler_type} PreemptType={sched.slurm.preempt_type}"
    return f"{sched.section} configuration"


def cmd_presets(args: argparse.Namespace) -> int:
    from .spec.io import policy_descriptions, preset_descriptions

    scenarios, policies = preset_descriptions(), policy_descriptions()
    if args.json:
        print(json.dumps({"scenarios": scenarios, "policies": policies}, ensure_ascii=False, indent=2))
        return EXIT_OK
    print("scenarios (--preset):")
    for name, text in scenarios.items():
        print(f"  {name:22} {text}")
    print("policies (--policy, scheduler.policy):")
    for name, text in policies.items():
        print(f"  {name:22} {text}")
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from .engine.simulate import simulate

    result = simulate(read_scenario(args), policy=args.policy, engine=args.engine, progress=sys.stderr.isatty())
    summary = result.summary()
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
        return EXIT_OK
    print(f"{result.scenario.name}: {summary['jobs']} jobs on {result.info['nodes']} nodes, "
          f"policy {result.scenario.scheduler.policy or 'custom conf'}")
    print(result.per_queue().to_string())
    if result.scenario.workload_classes:  # the job progress model: how much of the GPU time held was useful
        from .metrics import goodput

        print(goodput(result, by="queue").round(3).to_string())
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"  {key:{width}} {value}")
    if summary["not_started"]:
        print(f"  (waits of the {summary['not_started']} jobs not started by the horizon are counted until it)")
    return EXIT_OK


def cmd_cycle(args: argparse.Namespace) -> int:
    from .engine.simulate import cycle

    decided = cycle(read_scenario(args), policy=args.policy)
    table = decided.table()
    if args.json:
        print(json.dumps({"decisions": table.to_dict("records"), "podgroups": decided.phases()}, indent=2))
        return EXIT_OK
    print(table.to_string(index=False) if len(table) else "no decisions")
    for name, phase in decided.phases().items():
        print(f"  podgroup {name}: {phase}")
    return EXIT_OK


def cmd_conformance(args: argparse.Namespace) -> int:
    from .conformance import format_report, run_cases

    results = run_cases(args.cases)
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        print(format_report(results))
    failed = sum(1 for r in results if not r.passed and not r.skipped)
    return EXIT_FAILED if failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    commands: list[tuple[str, str, Callable[[argparse.Namespace], int]]] = [
        ("validate", "check a scenario; one line naming the field on error (exit 2)", cmd_validate),
        ("show", "print the resolved scenario", cmd_show),
        ("presets", "list the shipped scenarios and scheduler policies", cmd_presets),
        ("simulate", "run a scenario on the simulated clock and print its summary", cmd_simulate),
        ("cycle", "run one scheduling session on the scenario as a snapshot", cmd_cycle),
        ("conformance", "run oracle cases (neutral YAML format); last line 'N passed, M failed'", cmd_conformance),
    ]
    for name, text, func in commands:
        p = sub.add_parser(name, help=text, description=text)
        p.set_defaults(func=func)
        if name in ("validate", "show", "simulate", "cycle"):
            add_source(p)
        if name in ("simulate", "cycle"):
            p.add_argument("--policy", metavar="NAME", help="run under this policy preset instead of the scenario's")
        if name == "simulate":
            p.add_argument("--engine", choices=("auto", "numba", "reference"), default="auto",
                           help="auto: the numba core when it simulates the scenario, else the reference engine")
        if name == "show":
            p.add_argument("--yaml", action="store_true", help="print YAML that `labkit validate -` accepts")
            p.add_argument("--expand", action="store_true", help="replace workload generators by their jobs")
        if name == "conformance":
            p.add_argument("cases", help="a case file in the neutral oracle format")
        if name in ("presets", "conformance", "simulate", "cycle"):
            p.add_argument("--json", action="store_true", help="machine-readable output")
    _register_plugins(sub)
    return parser


def _register_plugins(sub) -> None:
    """Subcommands that live beside their subsystem (`labkit.k8s.commands.register`)."""
    from . import bench
    from .conformance import replay
    from .course import commands as course_commands
    from .k8s import commands as k8s_commands
    from .slurm import commands as slurm_commands

    k8s_commands.register(sub)
    slurm_commands.register(sub)
    course_commands.register(sub)
    bench.register(sub)
    replay.register(sub)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except BrokenPipeError:
        return EXIT_OK
    except (Exception, KeyboardInterrupt) as err:  # every error ends as one line: errors.one_line
        if os.environ.get("LABKIT_TRACEBACK") == "1":
            raise
        text, code = one_line(err)
        print(f"labkit: {text}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
