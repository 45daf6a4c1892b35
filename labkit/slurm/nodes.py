"""A scenario's node events on the local Slurm, as an operator applies them: `scontrol update
nodename=<nodes> state=...` at each event's scaled time, in Slurm's words (what the simulator does
with each, engine/slurm/reference.py): `fail` DOWN (slurmctld kills the jobs there, requeueing
those that may be), `recover` IDLE (the node available at once; RESUME would first wait for it to
register again, node_mgr.c `_require_node_reg`; both clear DRAIN, so a node still drained is
drained again), `cordon` and `drain` DRAIN, `uncordon` UNDRAIN (the DOWN state kept); an
`interrupt` is a DRAIN at its notice and a DOWN at its time.

A node set DOWN by scontrol while its slurmd runs comes back by itself only when it registers again
(ReturnToService=2), which slurmctld asks of a node every few tens of minutes: longer than the
runs this adapter makes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import Scenario
from ..spec.timeline import node_events

STATES = {"fail": "DOWN", "recover": "IDLE", "cordon": "DRAIN", "drain": "DRAIN", "uncordon": "UNDRAIN"}
"""The node state scontrol sets for each node event kind (scontrol(1) `State=`)."""
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


def scontrol_updates(action: NodeAction, drained: set[str]) -> list[list[str]]:
    """The `scontrol update` argument lists of one step; `drained` (the nodes drained so far) is
    kept up to date. A DOWN or DRAIN needs a reason (scontrol refuses it without one)."""
    nodes = ",".join(action.nodes)
    state = STATES[action.kind]
    update = ["update", f"nodename={nodes}", f"state={state}"]
    if state in ("DOWN", "DRAIN"):
        update.append(f"reason=labkit {action.kind} at {action.at:g}s")
    out = [update]
    if action.kind in ("cordon", "drain"):
        drained.update(action.nodes)
    elif action.kind == "uncordon":
        drained.difference_update(action.nodes)
    else:
        still = [n for n in action.nodes if n in drained]
        if action.kind == "recover" and still:
            out.append(["update", f"nodename={','.join(still)}", "state=DRAIN",
                        f"reason=labkit drain kept at {action.at:g}s"])
    return out


def script(actions: list[NodeAction], time_scale: float) -> str:
    """A shell script that replays the node events (real seconds after the first submission), for
    `labkit export slurm`."""
    header = (f"# labkit: the scenario's node events as `labkit slurm run` applies them, in real seconds after "
              f"the first submission (time scale {time_scale:g}); SLURM_CONF names the slurm.conf")
    lines = ["#!/bin/sh", header]
    now, drained = 0.0, set()
    for action in actions:
        at = action.at / time_scale
        if at > now:
            lines.append(f"sleep {at - now:g}")
            now = at
        lines += [" ".join(["scontrol", *(_quoted(arg) for arg in update)])
                  for update in scontrol_updates(action, drained)]
    return "\n".join(lines) + "\n"


def _quoted(arg: str) -> str:
    return f"'{arg}'" if " " in arg else arg
