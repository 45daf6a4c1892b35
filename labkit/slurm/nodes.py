"""A scenario's node events on the local Slurm, as an operator applies them: `scontrol update
nodename=<nodes> state=...` at each event's scaled time (what the simulator does with each:
engine/slurm/reference.py). `cordon` and `drain` are DRAIN and `uncordon` UNDRAIN; an `interrupt`
is a DRAIN at its notice and a failure at its time.

A `fail` is DOWN, which makes slurmctld kill the jobs there (requeueing those that may be), but on
this cluster the node's slurmd still answers, and with ReturnToService=2 slurmctld puts a DOWN
node that answers back to service at once (node_mgr.c `_node_did_resp`: "returned to service"),
so the node is drained first: it comes back IDLE+DRAIN, taking no job, which is what the
simulator's DOWN node is to the scheduler. `recover` undrains it (unless an operator's drain
still holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..spec import Scenario
from ..spec.timeline import node_events

WORDS = {"fail": "NodeDown", "recover": "NodeUp", "cordon": "NodeDrain", "drain": "NodeDrain",
         "uncordon": "NodeUndrain"}
"""What the run's events table calls each step: the simulator's words (engine/slurm/reference.py
NODE_WORDS, which the adapter may not import; tests/test_slurm_node_events.py checks they agree)."""


@dataclass(frozen=True)
class NodeAction:
    """One step of a node event: at `at` scenario seconds, `kind` on `nodes`."""

    at: float
    kind: str
    nodes: tuple[str, ...]

    @property
    def word(self) -> str:
        return WORDS[self.kind]


def node_actions(scenario: Scenario) -> list[NodeAction]:
    """The scenario's node events as steps in time order (ties as written), a pool's on its nodes."""
    pools = {pool.name: tuple(pool.node_names()) for pool in scenario.cluster.pools}
    steps = sorted((at, i, k, kind, event.node) for i, (_, event) in enumerate(node_events(scenario))
                   for k, (at, kind) in enumerate(event.steps()))
    return [NodeAction(at, kind, pools.get(node, (node,))) for at, _, _, kind, node in steps]


@dataclass
class NodeFlags:
    """The nodes failed and the nodes drained by an operator so far (each keeps a node drained)."""

    down: set[str] = field(default_factory=set)
    drained: set[str] = field(default_factory=set)


def scontrol_updates(action: NodeAction, flags: NodeFlags) -> list[list[str]]:
    """The `scontrol update` argument lists of one step, `flags` kept up to date. A DOWN or DRAIN
    needs a reason (scontrol refuses it without one)."""
    reason = f"reason=labkit {action.kind} at {action.at:g}s"
    nodes = set(action.nodes)
    if action.kind == "fail":
        flags.down |= nodes
        return [["update", f"nodename={','.join(action.nodes)}", state, reason] for state in ("state=DRAIN",
                                                                                               "state=DOWN")]
    if action.kind in ("cordon", "drain"):
        flags.drained |= nodes
        return [["update", f"nodename={','.join(action.nodes)}", "state=DRAIN", reason]]
    if action.kind == "recover":
        flags.down -= nodes
    else:
        flags.drained -= nodes
    free = [n for n in action.nodes if n not in flags.down | flags.drained]
    return [["update", f"nodename={','.join(free)}", "state=UNDRAIN"]] if free else []


def script(actions: list[NodeAction], time_scale: float) -> str:
    """A shell script that replays the node events (real seconds after the first submission), for
    `labkit export slurm`."""
    header = (f"# labkit: the scenario's node events as `labkit slurm run` applies them, in real seconds after "
              f"the first submission (time scale {time_scale:g}); SLURM_CONF names the slurm.conf")
    lines = ["#!/bin/sh", header]
    now, flags = 0.0, NodeFlags()
    for action in actions:
        at = action.at / time_scale
        if at > now:
            lines.append(f"sleep {at - now:g}")
            now = at
        lines += [" ".join(["scontrol", *(_quoted(arg) for arg in update)])
                  for update in scontrol_updates(action, flags)]
    return "\n".join(lines) + "\n"


def _quoted(arg: str) -> str:
    return f"'{arg}'" if " " in arg else arg
