"""A scenario's node events as the engines run them: `cluster.events` as written, then the
interruptions each spot pool's process draws (`NodePool.spot`), expanded into plain node events
before any engine sees them, so the reference engine and the numba core run the same events."""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from .model import NodeEvent, NodePool, Scenario
from .quantity import parse_duration

MAX_SPOT_EVENTS = 100_000
"""Most interruptions the spot pools of one scenario may expect over their span."""


def node_events(scenario: Scenario) -> list[tuple[str, NodeEvent]]:
    """Every node event with the field it comes from: ``cluster.events[i]`` as written, then per
    spot pool ``cluster.pools[k].spot`` its drawn interruptions, each followed by the recovery and
    uncordon of its replacement."""
    events = [(f"cluster.events[{i}]", event) for i, event in enumerate(scenario.cluster.events)]
    for k, pool in enumerate(scenario.cluster.pools):
        if pool.spot is not None:
            path = f"cluster.pools[{k}].spot"
            events += [(path, event) for event in _interruptions(scenario, k, pool, path)]
    return events


def _interruptions(scenario: Scenario, k: int, pool: NodePool, path: str) -> list[NodeEvent]:
    """Pool ``k``'s drawn interruptions in time order (per node or for the whole pool): waits
    between them are exponential with mean 1/rate hours, counted while the node is up and from a
    notice after time 0 or after its replacement joined."""
    spot = pool.spot
    if spot.until is not None:
        until = parse_duration(spot.until)
    elif scenario.horizon is not None:
        until = parse_duration(scenario.horizon)
    else:
        raise SpecError(f"{path}.until", "a spot pool's interruptions are drawn over [0, until): give spot.until "
                                          "or the scenario's horizon")
    targets = [pool.name] if spot.per == "pool" else pool.node_names()
    expected = spot.rate * until / 3600 * len(targets)
    if expected > MAX_SPOT_EVENTS:
        raise SpecError(f"{path}.rate", f"{expected:.0f} interruptions expected over {until:g} s; at most "
                                        f"{MAX_SPOT_EVENTS} (lower the rate or until)")
    notice = parse_duration(spot.notice)
    back = None if spot.replace_after is None else parse_duration(spot.replace_after)
    rng = np.random.default_rng([scenario.seed if spot.seed is None else spot.seed, k])
    mean = 3600.0 / spot.rate
    out: list[tuple[float, int, NodeEvent]] = []
    for target in targets:
        up = notice  # the earliest an interruption can come: a notice after the node is up
        while True:
            at = round(up + rng.exponential(mean), 3)
            if at >= until:
                break
            out.append((at, len(out), NodeEvent(at=at, node=target, kind="interrupt", notice=spot.notice)))
            if back is None:
                break
            out += [(at + back, len(out), NodeEvent(at=at + back, node=target, kind="recover")),
                    (at + back, len(out) + 1, NodeEvent(at=at + back, node=target, kind="uncordon"))]
            up = at + back + notice
    return [event for _, _, event in sorted(out, key=lambda row: row[:2])]
