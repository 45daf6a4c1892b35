"""One session opened up: for every pod the allocate action tries, the filter verdict and score of
each node at that moment, then the node the session bound it to."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics
from ..engine.problem import GPU, Action
from ..engine.reference import ACTIONS, allocate_predicate, close_session, open_session
from ..engine.simulate import cycle
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


# ch. 6: head-of-line blocking


def head_of_line(result, head: str) -> pd.DataFrame:
    """The jobs queued behind `head` (submitted after it), one row each: submit, start, wait (censored
    at the run's end when it never started) and whether it started before the head (`overtook`).
    Under StrictFIFO their waits are what a blocked head costs them; under BestEffortFIFO
    `overtook` says who passed it."""
    jobs = result.jobs.assign(waited=metrics.waited(result)).set_index("name")
    if head not in jobs.index:
        raise KeyError(f"no job named {head!r}")
    first = jobs.loc[head]
    head_start = first.start if pd.notna(first.start) else metrics.window_end(result)
    behind = jobs[jobs.submit > first.submit]
    table = behind[["submit", "start", "waited"]].rename(columns={"waited": "wait"})
    table["overtook"] = behind.start.lt(head_start).to_numpy()
    return table


def idle_while_head_waits(result, head: str, resource: str = GPU) -> float:
    """Resource-hours (GPU-hours by default) left idle while `head` waited: capacity times its wait,
    minus what the pods held, from its submit to its start (or the run's end when it never started)."""
    jobs = result.jobs.set_index("name")
    if head not in jobs.index:
        raise KeyError(f"no job named {head!r}")
    begin = float(jobs.submit[head])
    end = float(jobs.start[head]) if pd.notna(jobs.start[head]) else metrics.window_end(result)
    level = metrics.usage(result, resource)
    edges = np.clip(np.r_[level.time.to_numpy(float), end], begin, end)
    held = float((level.used.to_numpy(float) * np.diff(edges)).sum())
    return (metrics.capacity(result, resource) * (end - begin) - held) / 3600
