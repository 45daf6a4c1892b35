"""The reference engine: one Volcano scheduling session in plain Python, written to be read.

``run_session(problem, state)`` does what ``scheduler.runOnce`` does (pkg/scheduler/scheduler.go):

1. :func:`open_session` takes the snapshot (arrays -> NodeInfo/JobInfo/TaskInfo/QueueInfo) and
   calls every plugin's ``on_session_open`` in tier order, so they register their callbacks;
2. runs the configured actions in conf order (:data:`~labkit.engine.volcano.actions.ACTIONS`,
   one module each under ``actions/``, as in pkg/scheduler/actions);
3. :func:`close_session` lets plugins close (gang marks unready jobs unschedulable) and
   rewrites each PodGroup phase.

It returns :class:`~labkit.engine.problem.Decisions`: what was bound, pipelined and evicted, in
order, each with a reason, plus the state the cluster is in afterwards. A Volcano scenario
compiles with :data:`VOLCANO`: its conf, checked, becomes the Policy (:func:`volcano_policy`).

Determinism: where Volcano picks at random among equally scored nodes, or walks a Go map, we
take snapshot order (lowest node / task / job index first); the walk of node.Tasks that decides
which pods preempt and reclaim may take (gang's Preemptable keeps the first it meets) can be
given instead (`run_session`'s `walk`: `labkit replay` steers it to a recording's victims).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from labkit.engine.compile import FamilyRules
from labkit.engine.framework import (
    COMPLETED_STATUSES,
    JobInfo,
    Session,
    Walk,
)
from labkit.engine.problem import (
    ACTION_NAMES,
    EXT_NAMES,
    PLUGIN_NAMES,
    Action,
    Decisions,
    Ext,
    Placement,
    Plugin,
    PodGroupPhase,
    Policy,
    Problem,
    State,
    TaskStatus,
    policy_from_conf,
)
from labkit.engine.volcano.actions import ACTIONS
from labkit.engine.volcano.plugins import PLUGINS
from labkit.errors import LabkitWarning, SpecError
from labkit.spec import Scenario, conf_of, scheduler_of

# --------------------------------------------------------------------------------------------
# Session open / close
# --------------------------------------------------------------------------------------------

def open_session(problem: Problem, state: State, walk: Walk | None = None) -> Session:
    """framework.OpenSession: snapshot, then every plugin's OnSessionOpen in tier order
    (`walk`: the order node.Tasks is walked in, see `Session.node_tasks`)."""
    ssn = Session(problem, state, walk)
    for tier in ssn.tiers:
        for entry in tier:
            entry.plugin = PLUGINS[entry.kind]()
            entry.plugin.on_session_open(ssn, entry)
    return ssn


def close_session(ssn: Session) -> Decisions:
    """framework.CloseSession: plugins' OnSessionClose, then the PodGroup phase of every job
    (session.go getPodGroupPhase), then the resulting state."""
    for tier in ssn.tiers:
        for entry in tier:
            close = getattr(entry.plugin, "on_session_close", None)
            if close is not None:
                close(ssn)
    for job in ssn.jobs:
        job.phase = podgroup_phase(job)
    decisions = ssn.decisions
    decisions.pipelined = [Placement(t.index, t.node, *ssn.pipelined_by.get(t.index, ("", "", False)))
                           for t in ssn.tasks if t.status == TaskStatus.PIPELINED]
    decisions.state = _next_state(ssn)
    return decisions


def podgroup_phase(job: JobInfo) -> PodGroupPhase:
    """getPodGroupPhase: Unknown when running tasks coexist with an unschedulable gang; Running
    (or Completed) once Running/Bound/Succeeded/Failed + releasing tasks reach minMember;
    otherwise Inqueue stays Inqueue and anything else is Pending. Allocated and Binding tasks
    do not count yet."""
    if job.with_status(TaskStatus.RUNNING) and job.unschedulable:
        return PodGroupPhase.UNKNOWN
    scheduled = job.scheduled_task_num() + job.releasing_scheduled_task_num()
    if scheduled >= job.min_available:
        completed = job.count(COMPLETED_STATUSES)
        return PodGroupPhase.COMPLETED if scheduled == completed else PodGroupPhase.RUNNING
    return PodGroupPhase.INQUEUE if job.phase == PodGroupPhase.INQUEUE else PodGroupPhase.PENDING


def _next_state(ssn: Session) -> State:
    """The cluster after the session: dispatched tasks are Binding, evicted ones Releasing;
    everything the session only tentatively placed (Allocated without commit, Pipelined)
    is Pending again, because Volcano keeps no session state between cycles."""
    status, node = [], []
    for t in ssn.tasks:
        s, n = t.status, t.node
        if s in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            s, n = TaskStatus.PENDING, -1
        status.append(s)
        node.append(n)
    return State.from_tasks(ssn.problem, status, node, [j.phase for j in ssn.jobs],
                            now=ssn.now, cycle=ssn.cycle + 1, next_node=ssn.next_node)


def run_session(problem: Problem, state: State, walk: Walk | None = None) -> Decisions:
    """One scheduling cycle: open, actions in conf order, close. (A kube-scheduler or Slurm policy
    runs its own actions on the same session objects: `families.run_session`.) `walk`: the order
    node.Tasks is walked in, where Volcano walks a Go map (`Session.node_tasks`)."""
    ssn = open_session(problem, state, walk)
    for action in ssn.actions:
        ACTIONS[Action(action)](ssn)
    return close_session(ssn)


# --------------------------------------------------------------------------------------------
# Compile
# --------------------------------------------------------------------------------------------

def volcano_policy(scenario: Scenario, resources: list[str]) -> Policy:
    """The Policy of the scenario's Volcano conf: its actions in order and its plugins by tier,
    each refused by name (the field named) when labkit does not simulate it; StrictFIFO from the
    scheduler's queueingStrategy."""
    sched = scheduler_of(scenario)
    conf = conf_of(scenario)
    where = "scheduler.conf"
    for action in conf.action_list():
        if action not in ACTION_NAMES:
            raise SpecError(f"{where}.actions", f"action {action!r} is not simulated by labkit "
                                                f"(simulated: {', '.join(ACTION_NAMES)})")
    tiers = []
    for t, tier in enumerate(conf.tiers):
        entries = []
        for p, plugin in enumerate(tier.plugins):
            if plugin.name not in PLUGIN_NAMES:
                raise SpecError(f"{where}.tiers[{t}].plugins[{p}].name",
                                f"plugin {plugin.name!r} is not simulated by labkit (simulated: {', '.join(PLUGIN_NAMES)})")
            enabled = {point for point in plugin.enabled() if point in EXT_NAMES}
            entries.append({"name": plugin.name, "enabled": enabled, "arguments": dict(plugin.arguments)})
        tiers.append(entries)
    policy = policy_from_conf(conf.action_list(), tiers, resources)
    _topology_notes(scenario, any(e["name"] == "network-topology-aware" and "hyperNodeGradient" in e["enabled"]
                                  for tier in tiers for e in tier))
    return replace(policy, strict_fifo=sched.queueing_strategy == "StrictFIFO")


def node_events_need(policy: Policy) -> str | None:
    """Node events need the predicates plugin with its predicate enabled: it is what keeps pods off
    an unschedulable node (NodeUnschedulable); without it a cordoned or failed node would take pods."""
    for p, kind in enumerate(policy.plugin_kind):
        if kind == Plugin.PREDICATES and policy.plugin_enabled[p, Ext.PREDICATE]:
            return None
    return "they need the predicates plugin in the scheduler conf (it keeps pods off unschedulable nodes)"


def _topology_notes(scenario: Scenario, gradient: bool) -> None:
    """Warn once where a job's networkTopology does not do what it says: without the
    network-topology-aware plugin (its hyperNodeGradient) Volcano places the job as any other;
    without cluster.topology there is no HyperNode but the cluster-top one; a hard limit of tier 0
    admits no HyperNode at all (every HyperNode has tier >= 1)."""
    specs = [(f"jobs[{i}]", job.network_topology) for i, job in enumerate(scenario.jobs)]
    specs += [(f"workloads[{i}]", load.network_topology) for i, load in enumerate(scenario.workloads)]
    specs = [(where, nt) for where, nt in specs if nt is not None]
    if not specs:
        return
    first = specs[0][0] + ".networkTopology" + (f" (and {len(specs) - 1} more)" if len(specs) > 1 else "")
    if not gradient:
        note = (f"{first} is ignored, as Volcano ignores it: the scheduler conf has no network-topology-aware "
                "plugin with hyperNodeGradient on, so such jobs are placed like any other (but, as in "
                "Volcano, never preempt)")
    elif scenario.cluster.topology is None:
        note = (f"{first}: cluster.topology is unset, so the only HyperNode is the cluster-top one holding "
                "every node and networkTopology confines nothing")
    else:
        zero = [where for where, nt in specs if nt.mode == "hard" and nt.highest_tier_allowed == 0]
        if not zero:
            return
        note = (f"{zero[0]}.networkTopology.highestTierAllowed is 0 in hard mode: no HyperNode has a tier "
                "below 1, so Volcano never places the job")
    warnings.warn(LabkitWarning(note), stacklevel=3)


VOLCANO = FamilyRules(policy=volcano_policy, node_events=node_events_need, changes=True)
"""How a Volcano scenario compiles: its conf as the Policy; the shared rest as it is."""
