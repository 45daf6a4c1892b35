"""One session opened up: for every pod the allocate action tries, the filter verdict and score of
each node at that moment, then the node the session bound it to; for a preemptor, each plugin's vote
on the victims (`votes`)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .. import metrics
from ..engine.framework import TaskStatus
from ..engine.problem import GPU, Action, Plugin
from ..engine.simulate import cycle
from ..engine.volcano.actions import ACTIONS
from ..engine.volcano.actions.util import allocate_predicate
from ..engine.volcano.reference import close_session, open_session
from ..errors import LabkitError
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
    """Per job at time `at`: the workers its training needs (every replica; an elastic task only its
    `elastic.min`), pods running, GPUs held, and whether training can go on (`can_train`: a job short
    of the workers it needs holds its GPUs and waits in rendezvous)."""
    tasks = result.tasks
    live = tasks[(tasks.start <= at) & ~(tasks.end <= at)]
    needed = {f"{j.namespace}/{j.name}": sum(t.elastic.min if t.elastic else t.replicas_resolved for t in j.tasks)
              for j in result.scenario.jobs}
    table = pd.DataFrame({"needed": needed})
    table["running"] = live.groupby("job").size().reindex(table.index, fill_value=0)
    table["gpus_held"] = live.groupby("job")[GPU].sum().reindex(table.index, fill_value=0)
    table["can_train"] = table.running >= table.needed
    return table


def stalled_gpu_hours(result) -> float:
    """GPU-hours held by jobs while they could not train (`workers`: short of the workers they need),
    over the whole run: what the run's utilisation counts as busy but no training used."""
    tasks = result.tasks
    times = np.unique(np.concatenate([tasks.start.to_numpy(), tasks.end.dropna().to_numpy()]))
    held = 0.0
    for begin, end in itertools.pairwise(times):
        table = workers(result, begin)
        held += table.gpus_held[~table.can_train].sum() * (end - begin)
    return held / 3600.0


# ch. 8: the plugins' votes on victims


def votes(scenario: Scenario, pod: str, node: str, action: str = "preempt") -> pd.DataFrame:
    """Which running pods on `node` each plugin lets `pod` evict in one `labkit.cycle` on the snapshot.

    One row per candidate (the node's Running preemptable pods in the action's scope: other jobs of
    the same queue for preempt, other reclaimable queues for reclaim), one column per plugin that
    registered the action's hook (PreemptableFn or ReclaimableFn), named ``tier<N>:<plugin>``, True
    where it votes the pod a victim; ``victim``: the session's combined answer (per tier the
    intersection, the first tier with victims decides); ``evicted``: what the session then evicted.
    The votes are asked before any action runs, on the snapshot as the session opens.
    """
    if action not in ("preempt", "reclaim"):
        raise LabkitError(f"votes: action must be preempt or reclaim, not {action!r}")
    hook = {"preempt": "preemptable", "reclaim": "reclaimable"}[action]
    table: list[pd.DataFrame] = []

    def session(problem, state):
        ssn = open_session(problem, state)
        if pod not in problem.task_names or node not in problem.node_names:
            raise LabkitError(f"votes: no pod {pod!r} or node {node!r} in scenario {scenario.name!r}")
        task = ssn.tasks[problem.task_names.index(pod)]
        queue = ssn.jobs[task.job].queue

        def in_scope(t) -> bool:
            other = ssn.jobs[t.job].queue
            if action == "preempt":
                return other == queue and t.job != task.job
            return other != queue and ssn.queues[other].reclaimable

        host = ssn.nodes[problem.node_names.index(node)]
        candidates = [t for _, t in sorted(host.tasks.items())
                      if t.status == TaskStatus.RUNNING and t.preemptable and in_scope(t)]
        columns = {}
        for tier in ssn.tiers:
            for entry, fn in ssn._registered(hook, tier, None):
                chosen, _ = fn(task, candidates)
                picked = {t.index for t in chosen or []}
                columns[f"tier{entry.tier + 1}:{Plugin(entry.kind).name.lower()}"] = [t.index in picked for t in candidates]
        combined = {t.index for t in getattr(ssn, hook)(task, candidates) or []}
        table.append(pd.DataFrame({"job": [problem.job_names[t.job] for t in candidates],
                                   "priority": [ssn.jobs[t.job].priority for t in candidates], **columns,
                                   "victim": [t.index in combined for t in candidates]},
                                  index=pd.Index([t.name for t in candidates], name="pod")))
        for act in ssn.actions:
            ACTIONS[Action(act)](ssn)
        return close_session(ssn)

    evicted = set(cycle(scenario, session=session).evicted())
    return table[0].assign(evicted=[name in evicted for name in table[0].index])


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
# ch. 11: Slurm's backfill reservations


def reservations(result) -> pd.DataFrame:
    """The reservations a Slurm run's backfill passes made (its StartTime notes): when the pass ran, the
    job, the start it planned (scenario seconds) and the nodes it set aside; one row per pass and job."""
    events = result.events
    notes = events[(events.kind == "StartTime") & (events.reason == "Backfill")]
    planned = notes.message.str.extract(r"StartTime=(?P<start>\S+) SchedNodeList=(?P<nodes>\S+)")
    return pd.DataFrame({"time": notes.time.to_numpy(), "job": notes.job.to_numpy(),
                         "start": planned.start.astype(float).to_numpy(), "nodes": planned.nodes.to_numpy()})
