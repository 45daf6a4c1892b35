"""One session opened up: for every pod the allocate action tries, the filter verdict and score of
each node at that moment, then the node the session bound it to."""

from __future__ import annotations

import pandas as pd

from ..engine.problem import GPU, Action
from ..engine.simulate import cycle
from ..engine.volcano.actions import ACTIONS
from ..engine.volcano.actions.util import allocate_predicate
from ..engine.volcano.reference import close_session, open_session
from ..spec import Scenario

COLUMNS = ["task", "node", "free_gpus", "filter", "score", "bound"]


def placement(scenario: Scenario) -> pd.DataFrame:
    """filter -> score -> bind of one `labkit.cycle` on the snapshot, one row per (tried pod, node).

    Rows are taken when `allocate` picks the pod up, so earlier placements of the same session
    count. ``filter`` is "pass" or the predicate's reason, ``score`` the node-order total of the
    nodes that pass (NaN for the others), ``bound`` True on the node the pod was bound to.
    """
    rows: list[list] = []

    def session(problem, state):
        ssn = open_session(problem, state)
        gpu = problem.resource_names.index(GPU) if GPU in problem.resource_names else None
        attempt = ssn.attempt

        def observed(action, task):
            if action == "allocate":
                verdicts = [(node, allocate_predicate(ssn, task, node)) for node in ssn.nodes]
                passing = [node for node, why in verdicts if why is None]
                scores = dict(zip((n.index for n in passing), ssn.node_score(task, passing)))
                for node, why in verdicts:
                    free = node.idle[gpu] / 1000.0 if gpu is not None else 0.0
                    rows.append([task.name, node.name, free, why or "pass", scores.get(node.index, float("nan"))])
            attempt(action, task)

        ssn.attempt = observed
        for action in ssn.actions:
            ACTIONS[Action(action)](ssn)
        return close_session(ssn)

    binds = cycle(scenario, session=session).binds()
    table = pd.DataFrame([r + [binds.get(r[0]) == r[1]] for r in rows], columns=COLUMNS)
    table["score"] = table.score.round(1)
    return table


def workers(result, at: float) -> pd.DataFrame:
    """Per job at time `at`: pods it needs (all replicas), pods running, GPUs held, and whether all
    workers are there (`can_train`: a data-parallel job with a worker missing holds GPUs and waits)."""
    tasks = result.tasks
    live = tasks[(tasks.start <= at) & ~(tasks.end <= at)]
    needed = {f"{j.namespace}/{j.name}": sum(t.replicas_resolved for t in j.tasks) for j in result.scenario.jobs}
    table = pd.DataFrame({"needed": needed})
    table["running"] = live.groupby("job").size().reindex(table.index, fill_value=0)
    table["gpus_held"] = live.groupby("job")[GPU].sum().reindex(table.index, fill_value=0)
    table["can_train"] = table.running == table.needed
    return table
