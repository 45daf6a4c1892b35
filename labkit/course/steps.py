"""One session opened up: for every pending pod, the filter verdict and score of each node, then the bind."""

from __future__ import annotations

import pandas as pd

from ..engine.problem import GPU, TaskStatus
from ..engine.reference import allocate_predicate, open_session, run_session
from ..engine.simulate import cycle
from ..spec import Scenario

COLUMNS = ["task", "node", "free_gpus", "filter", "score", "bound"]


def placement(scenario: Scenario) -> pd.DataFrame:
    """filter -> score -> bind of one `labkit.cycle` on the snapshot, one row per (pending pod, node).

    ``filter`` is "pass" or the predicate's reason, ``score`` the node-order total of the nodes
    that pass (NaN for the others), ``bound`` True on the node the session bound the pod to.
    """
    rows: list[list] = []

    def session(problem, state):
        ssn = open_session(problem, state)
        gpu = problem.resource_names.index(GPU) if GPU in problem.resource_names else None
        for task in ssn.tasks:
            if task.status != TaskStatus.PENDING:
                continue
            verdicts = [(node, allocate_predicate(ssn, task, node)) for node in ssn.nodes]
            passing = [node for node, why in verdicts if why is None]
            scores = dict(zip((n.index for n in passing), ssn.node_score(task, passing)))
            for node, why in verdicts:
                free = node.idle[gpu] / 1000.0 if gpu is not None else 0.0
                rows.append([task.name, node.name, free, why or "pass", scores.get(node.index, float("nan"))])
        return run_session(problem, state)

    binds = cycle(scenario, session=session).binds()
    table = pd.DataFrame([r + [binds.get(r[0]) == r[1]] for r in rows], columns=COLUMNS)
    table["score"] = table.score.round(1)
    return table
