"""Volcano's actions (pkg/scheduler/actions), one module each, as `scheduler.runOnce` runs them
in conf order."""

from labkit.engine.problem import Action
from labkit.engine.volcano.actions.allocate import allocate
from labkit.engine.volcano.actions.backfill import backfill
from labkit.engine.volcano.actions.enqueue import enqueue
from labkit.engine.volcano.actions.preempt import preempt
from labkit.engine.volcano.actions.reclaim import reclaim

ACTIONS = {
    Action.ENQUEUE: enqueue,
    Action.ALLOCATE: allocate,
    Action.BACKFILL: backfill,
    Action.PREEMPT: preempt,
    Action.RECLAIM: reclaim,
}
"""Action implementations by kind (actions/factory.go)."""
