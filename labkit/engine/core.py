"""The numba core: the whole simulated run (the clock of ``clock.py`` and the session of the
reference engine, same semantics and tie-breaks) jitted over plain arrays.

This module is the driver. It turns a :class:`~labkit.engine.compile.Compiled` scenario into
the arrays the jitted code needs (:func:`core_fields`), runs :func:`core_clock.run` and turns
the coded record back into a :class:`~labkit.engine.records.RunRecord` with the reference
engine's event texts. The jitted parts are

* ``core_state``: the state struct and the codes its arrays hold;
* ``core_account``: resource comparisons, incremental task/job/node bookkeeping;
* ``core_plugins``: plugin callbacks, Volcano's vote rules, heaps, node scores;
* ``core_actions``: session open/close, enqueue, allocate, backfill, preempt, reclaim;
* ``core_clock``: arrivals, sessions on the schedule-period grid, evictions, completions.

The kube-scheduler, Slurm and Kueue policies (``kube/core.py``, ``slurm/core.py``,
``kueue/core.py``) have their own entry points over the same state struct with their own arrays
added; ``families.run`` picks the family's.

What the core does not simulate (hierarchical drf, capacity with a queue hierarchy, a plugin
listed twice, a job status snapshot under Kueue) is reported by :func:`unsupported`; ``labkit.simulate`` then runs the reference
engine and says so in ``Result.info["engine"]``.

A scenario's ``changes`` are clock events of the core (``core_clock.change_event``): a Queue's or a
PriorityClass's new values are rows of the static arrays ``ch_*`` copied in, and a new conf is one
of the run's confs (:func:`change_confs`, the conf arrays of each), whose arrays the driver swaps
in when the core stops at it (``ints[I_CONF]``, :func:`in_slices`).

Compiled scenarios are cached by their content (:func:`prepare`), so re-running an unchanged
scenario skips workload expansion and compilation; any edit, a queue weight included, changes
the key.
"""

from __future__ import annotations

import contextvars
import dataclasses
import gc
import hashlib
import os
import pickle
import subprocess
import sys
import threading
import time
from collections import namedtuple
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from numba import types

from ..errors import LabkitError
from ..progress import Progress, waiting
from .compile import Compiled, first_positions
from .core_state import (
    EV_CHANGE,
    EVENT_KINDS,
    FREED_LOG,
    H_ALLOCATABLE,
    H_BATCH_NODE_ORDER,
    H_JOB_ENQUEUEABLE,
    H_JOB_ENQUEUED,
    H_JOB_ORDER,
    H_JOB_PIPELINED,
    H_JOB_READY,
    H_JOB_STARVING,
    H_JOB_VALID,
    H_NODE_ORDER,
    H_OVERUSED,
    H_PREDICATE,
    H_PREEMPTABLE,
    H_PREEMPTIVE,
    H_QUEUE_ORDER,
    H_RECLAIMABLE,
    H_TASK_ORDER,
    I_CONF,
    I_EVENTS,
    I_FULL_NODES,
    I_GROW,
    I_OVERFLOW,
    I_RUNS,
    I_SESSIONS,
    I_WATER_FILLED,
    MSG_BACKFILL,
    MSG_DRAINED,
    MSG_FITS_FUTURE,
    MSG_FITS_IDLE,
    MSG_NODE_LOST,
    MSG_PHASE,
    MSG_PODS_RUNNING,
    MSG_PREEMPTED_BY,
    MSG_PREEMPTED_ROOM,
    MSG_RECLAIMED_BY,
    MSG_RECLAIMED_ROOM,
    MSG_RESTART,
    MSG_SNAPSHOT,
    N_HOOKS,
    N_INTS,
    N_MEMO,
    N_PLUGINS,
    N_STATUS,
    N_UNITS,
    PENDING,
    PH_PENDING,
    State,
)
from .events import CH_CONF, CH_PRIORITY_CLASS, CH_QUEUE, CHANGE_LOGGED
from .hypernodes import HyperNodes
from .problem import (
    ARG_DEFAULTS,
    CPU,
    GPU,
    MEMORY,
    PODS,
    Action,
    Arg,
    Ext,
    Plugin,
    PodGroupPhase,
    Problem,
)
from .records import CodedEvents, RunRecord

P = Plugin
REGISTERED = {
    H_TASK_ORDER: ({P.PRIORITY}, Ext.TASK_ORDER),
    H_JOB_ORDER: ({P.PRIORITY, P.GANG, P.DRF, P.SLA}, Ext.JOB_ORDER),
    H_QUEUE_ORDER: ({P.PROPORTION, P.CAPACITY}, Ext.QUEUE_ORDER),
    H_PREEMPTABLE: ({P.PRIORITY, P.GANG, P.CONFORMANCE, P.DRF}, Ext.PREEMPTABLE),
    H_RECLAIMABLE: ({P.GANG, P.CONFORMANCE, P.PROPORTION, P.CAPACITY}, Ext.RECLAIMABLE),
    H_OVERUSED: ({P.PROPORTION}, Ext.OVERUSED),
    H_PREEMPTIVE: ({P.PROPORTION, P.CAPACITY}, Ext.PREEMPTIVE),
    H_ALLOCATABLE: ({P.PROPORTION, P.CAPACITY}, Ext.ALLOCATABLE),
    H_JOB_READY: ({P.GANG}, Ext.JOB_READY),
    H_JOB_VALID: ({P.GANG}, None),
    H_JOB_PIPELINED: ({P.GANG, P.SLA}, Ext.JOB_PIPELINED),
    H_JOB_ENQUEUEABLE: ({P.PROPORTION, P.CAPACITY, P.OVERCOMMIT, P.SLA}, Ext.JOB_ENQUEUED),
    H_JOB_ENQUEUED: ({P.PROPORTION, P.CAPACITY, P.OVERCOMMIT}, Ext.JOB_ENQUEUED),
    H_JOB_STARVING: ({P.PRIORITY, P.GANG}, Ext.JOB_STARVING),
    H_PREDICATE: ({P.PREDICATES}, Ext.PREDICATE),
    H_NODE_ORDER: ({P.BINPACK}, Ext.NODE_ORDER),
    H_BATCH_NODE_ORDER: ({P.NODEORDER, P.NETWORK_TOPOLOGY_AWARE}, Ext.NODE_ORDER),
}
"""Which plugins register each callback (their OnSessionOpen) and the switch that gates it."""

STATIC = (
    "node_alloc", "node_sched", "node_speed", "class_ok", "class_clean", "all_nodes",
    "q_weight", "q_rcap", "q_guar", "q_des", "q_named", "q_prio", "q_reclaimable", "q_open", "q_rank",
    "j_queue", "j_prio", "j_min", "j_minres", "j_has_minres", "j_rank", "j_creation", "j_sla", "j_submit",
    "j_work", "j_uses_speed", "j_ckpt", "j_restart", "j_grace", "j_lo", "j_pair", "j_min_total",
    "j_init_phase", "j_alike", "j_kind", "j_prank", "prio_of_rank", "arrivals",
    "pair_min",
    "t_job", "t_pair", "t_req", "t_prio", "t_never", "t_preemptable", "t_be", "t_critical", "t_index",
    "t_rank",
    "t_class", "t_named", "t_shape", "t_init_node",
    "total", "actions", "p_tier", "p_kind", "p_arg", "p_w", "hooks", "hook_len", "of_kind",
    "horizon", "period", "gpu", "has_enqueue", "usage_read",
    "strict_fifo",
    "k_job_quota", "k_usage", "k_hard", "k_tracked", "k_unset",
    "j_worder", "j_mshape", "w_off", "fast_enqueue", "al_off", "attempt_memo",
    "ne_time", "ne_node", "ne_kind",
    "hn_tier", "hn_parent", "hn_bfs", "hn_tiers", "hn_mem_off", "hn_mem", "node_hn", "node_low", "j_topo",
    "topo_gradient", "topo_order",
    "rt_class", "rt_speed", "rt_model", "rt_place", "rt_scale", "rt_hn",
    "ch_time", "ch_kind", "ch_arg", "ch_q_weight", "ch_q_rcap", "ch_q_guar", "ch_q_des", "ch_q_named", "ch_prio",
)
B, I, F, I8, I32 = np.bool_, np.int64, np.float64, np.int8, np.int32
MUTABLE = {
    # the clock (clock.Simulation): per job, per task, the node and job books
    "present": ("J", False, B), "done": ("J", False, B), "phase": ("J", PH_PENDING, I8),
    "created": ("J", False, B), "status": ("T", PENDING, I8), "node": ("T", -1, I),
    "open_run": ("T", -1, I), "pip_on": ("T", -1, I), "pip_action": ("T", -1, I),
    "pip_evicted": ("T", False, B), "nominated": ("T", -1, I), "nominated_in": ("T", -1, I), "one": ("1", 0, I),
    "units": (str(N_UNITS), 0, I),  # the addresses of the family's separately compiled units (in_slices)
    "run_start": ("J", np.nan, F), "work_done": ("J", 0, F), "lost_work": ("J", 0, F),
    "enq_t": ("J", np.nan, F), "start_t": ("J", np.nan, F), "end_t": ("J", np.nan, F),
    "evictions": ("J", 0, I), "restarts": ("J", 0, I), "version": ("J", 0, I),
    "t_rerun": ("T", np.nan, F), "draining": ("J", False, B),
    "rate": ("J", 1.0, F), "rate_since": ("J", np.nan, F),
    "rec_prio": ("J", 0, I),  # the job priority the run's record gives: as it stood when the job started
    "n_used": ("N R", 0, F), "n_rel": ("N R", 0, F), "n_pip": ("N R", 0, F), "pods": ("N 6", 0, F),
    "n_version": ("N", 0, I), "node_first": ("N", -1, I), "node_next": ("T", -1, I),
    "node_prev": ("T", -1, I),
    "j_cnt": ("J S", 0, I32), "j_pbe": ("J", 0, I), "pr_cnt": ("P S", 0, I32),
    "pr_pbe": ("P", 0, I), "j_alloc": ("J R", 0, F), "j_preq": ("J R", 0, F), "q_use": ("4 Q R", 0, F),
    "o_base": ("2 R", 0, F), "q_live": ("Q", 0, I), "q_first": ("Q", -1, I), "live": ("J", -1, I),
    "is_live": ("J", False, B), "close_mark": ("J", False, B), "to_close": ("J", 0, I),
    "start_mark": ("J", False, B), "to_start": ("J", 0, I), "h_time": ("H", 0, F), "h_key": ("H 3", 0, I),
    "ev_time": ("E", 0, F), "ev_int": ("E 7", 0, I32), "runs": ("K 5", np.nan, F), "ints": ("X", 0, I),
    "score_key": ("N 4", -1, I), "score_version": ("N 4", -1, I), "score_value": ("N 4", 0, F),
    "clock": ("5", 0, F), "refused": ("1", False, B),
    # network-topology-aware's HyperNode room (allocatable, used, idle, future idle; kept from session
    # open, used moved by the events), each job's AllocatedHyperNode and each pod's view of it, the
    # session they were set in, and the gradient of a job (core_plugins.hypernode_gradient)
    "hn_room": ("4 Y R", 0, F), "j_ahn": ("J", -1, I), "t_ahn": ("T", -1, I), "t_ahn_in": ("T", -1, I),
    "hn_grad": ("Y", 0, I), "hn_score": ("N", 0, F),
    # the nodes' state under the scenario's node events (core_clock.node_event)
    "node_down": ("N", False, B), "node_cordon": ("N", False, B),
    # one session's scratch (core_actions, core_plugins)
    "s_phase": ("J", 0, I8), "sp_mark": ("J", -1, I), "new_phase": ("J", 0, I8), "closed": ("J", 0, I),
    "candidates": ("J", 0, I), "fit": ("T", False, B), "fit_tasks": ("T", 0, I), "fit_start": ("T", 0, I),
    "fit_len": ("T", 0, I), "fit_pool": ("U", 0, I), "pr_fail": ("P", False, B), "d_alloc": ("J R", 0, F),
    "d_share": ("J", 0, F), "d_mark": ("J", 0, I), "a_has": ("Q", False, B), "a_order": ("Q", 0, I),
    "a_met": ("Q", False, B), "wf_order": ("Q", -1, I), "wf_req": ("Q R", 0, F), "wf_des": ("Q R", 0, F),
    "a_alloc": ("2 Q R", 0, F), "a_inq": ("2 Q R", 0, F), "a_des": ("2 Q R", 0, F), "a_share": ("2 Q", 0, F),
    "o_idle": ("R", 0, F), "o_inq": ("R", 0, F), "q_seen": ("Q", False, B), "q_off": ("Q+1", 0, I),
    "q_order": ("Q", 0, I), "qh": ("Q+J+1", 0, I), "jh": ("J+1", 0, I), "jh_n": ("Q", 0, I),
    "jl": ("J+1", 0, I), "jl_n": ("Q", 0, I), "th": ("T+1", 0, I), "th_n": ("J", 0, I), "th_mark": ("J", 0, I),
    "l_tasks": ("T", 0, I),
    "cand": ("T", 0, I), "vic": ("T", 0, I), "vtmp": ("T", 0, I), "vh": ("T", 0, I), "mark": ("T", 0, I),
    "occ": ("J", 0, I), "occ_mark": ("J", 0, I), "rem": ("J R", 0, F), "rem_mark": ("J", 0, I),
    "qrem": ("Q R", 0, F), "qrem_mark": ("Q", 0, I), "node_mark": ("N", 0, I), "feas": ("N", 0, I),
    "nlist": ("N", 0, I), "unres": ("N", 0, I), "score": ("N", 0, F), "norder": ("N", 0, I),
    "cache": ("M N", 0, I8), "cache_mark": ("M", 0, I), "ops": ("2*T+16 3", 0, I), "binds": ("T+1 5", 0, I),
    "evicts": ("T+1 3", 0, I), "pipelined": ("T+1", 0, I), "pipelined_on": ("T+1", 0, I),
    "vec": ("8 R", 0, F),
    # the Pending PodGroups per queue in enqueue's order (core_actions.update_waiting)
    "w_job": ("J", -1, I), "w_n": ("Q W", 0, I), "w_in": ("J", False, B), "w_impure": ("J", False, B),
    "w_head": ("W", 0, I), "w_shapes": ("W", 0, I),
    "act": ("J", 0, I), "act_in": ("J", False, B),
    # allocate's candidates kept between sessions (core_actions.update_candidates)
    "al_job": ("J", -1, I32), "al_n": ("Q", 0, I), "al_head": ("Q", 0, I), "ac_kind": ("J", 0, I8),
    "ao_job": ("J", 0, I32), "ao_at": ("J", -1, I32),
    # the starving plain candidates per pass kind (s.j_kind): their count, their pods, a list of them
    # (head, next, previous), and the kinds with any, ints[I_KINDS] of them (core_actions.preempt_passes)
    "pk_jobs": ("G", 0, I), "pk_pods": ("G", 0, I), "pk_head": ("G", -1, I32), "jk_next": ("J", -1, I32),
    "jk_prev": ("J", -1, I32), "jk_in": ("J", False, B), "pk_list": ("G", 0, I32), "pk_at": ("G", -1, I32),
    # a job's last allocate attempt that was discarded: the node books and job version after it, +1 (0 = none)
    "jm_nodes": ("J", 0, I), "jm_ver": ("J", 0, I),
    # failed preempt / reclaim attempts per request shape and queue (core_actions.failure_known)
    "m_books": ("F Z Q", -1, I), "m_key": ("F Z Q 4", -1, I),
    # allocate's "fits no node" per request shape: in the session of these books, and across sessions:
    # ints[I_FREED] then, +1 (0 = none), and the nodes whose room may have grown since, a ring of the
    # last FREED_LOG (core_actions.fit_known_to_fail)
    "fit_books": ("Z", -1, I), "m_freed": ("Z", 0, I), "freed": (str(FREED_LOG), -1, I),
    # bounds over the candidate victims per queue, and the books they were made at (core_actions.queue_bounds)
    "nv_bound": ("2 Q 5", 0, F), "nv_books": ("2", -1, I), "vb": ("5", 0, F), "j_ver": ("J", 0, I),
    # what each job brings to those bounds per kind (candidates, gang's flag, drf's share left), the
    # per-queue sums of it (candidates, jobs per priority rank, gang flags, the largest drf share and how
    # many jobs have it, or stale), and the jobs to read again (core_actions.bounds_refresh)
    "qc_count": ("J 2", 0, I32), "qc_gang": ("J 2", False, B), "qc_drf": ("J 2", -np.inf, F),
    "qa_count": ("2 Q", 0, I), "qa_prio": ("2 Q V", 0, I), "qa_gang": ("2 Q", 0, I),
    "qa_drf": ("2 Q", -np.inf, F), "qa_drf_n": ("2 Q", 0, I), "qa_stale": ("2 Q", False, B),
    "bd_job": ("J", 0, I32), "bd_mark": ("J", False, B),
    "jb_count": ("J 2", 0, I32), "jb_drf": ("J 2", 0, F), "jb_ver": ("J", -1, I),
}
"""The run's mutable arrays: shape (in the sizes of :func:`mutable_arrays`), initial value, dtype."""
CoreFields = namedtuple("CoreFields", STATIC + tuple(MUTABLE))


# ---------------------------------------------------------------------------------------- support


def unsupported(compiled: Compiled) -> str | None:
    """What in this compiled Volcano scenario the numba core does not simulate, or None."""
    problem = compiled.problem
    if np.isfinite(problem.job_time_limit).any():
        return "job time limits"
    missing = _conf_unsupported(problem, problem.policy)
    if missing is not None:
        return missing
    for at, patch in zip(compiled.change_time, compiled.change_patch):
        missing = _conf_unsupported(problem, patch["policy"]) if "policy" in patch else None
        if missing is not None:
            return f"{missing} (in the conf a change applies at {at:g}s)"
    return None


def _conf_unsupported(problem: Problem, policy) -> str | None:
    """What of this conf (the scenario's, or one a change applies) the core does not simulate."""
    if policy.action_period is not None or policy.pods_at_submit:
        return "action periods or pods at submit"
    kinds = [Plugin(k) for k in policy.plugin_kind]
    for kind in set(kinds):
        if kinds.count(kind) > 1:
            return f"plugin {kind.name.lower()} listed twice"
    for p, kind in enumerate(kinds):
        if policy.plugin_enabled[p, Ext.HIERARCHY] and kind == Plugin.DRF:
            return "hierarchical drf"
        if policy.plugin_enabled[p, Ext.HIERARCHY] and kind == Plugin.CAPACITY:
            return "capacity with a queue hierarchy"
    return None


# ---------------------------------------------------------------------------------------- arrays


_ARG_DEFAULTS = np.array([ARG_DEFAULTS.get(arg, np.nan) for arg in Arg], float)
"""Volcano's default of each plugin argument (NaN: none), in Arg order."""


def _plugin_arrays(policy) -> dict:
    """The static fields that come from the scheduler conf (what a conf change swaps): plugin kinds,
    tiers, arguments with Volcano's defaults, the callback table, the actions, StrictFIFO and
    network-topology-aware's switches."""
    n = len(policy.plugin_kind)
    given = np.asarray(policy.plugin_args, float).reshape(n, len(Arg))
    args = np.where(np.isnan(given), _ARG_DEFAULTS, given)  # Problem.plugin_arg for every entry
    factor = args[:, Arg.OVERCOMMIT_FACTOR]
    args[:, Arg.OVERCOMMIT_FACTOR] = np.where(factor >= 1.0, factor, ARG_DEFAULTS[Arg.OVERCOMMIT_FACTOR])
    args[~(args[:, Arg.SLA_WAITING_TIME] > 0), Arg.SLA_WAITING_TIME] = np.nan
    hooks = np.full((N_HOOKS, max(n, 1)), -1, np.int64)
    hook_len = np.zeros(N_HOOKS, np.int64)
    kind, enabled = policy.plugin_kind.tolist(), policy.plugin_enabled.tolist()
    scored = [not (kind[p] == Plugin.BINPACK and args[p, Arg.BINPACK_WEIGHT] == 0) for p in range(n)]
    for hook, (kinds, ext) in REGISTERED.items():
        row = [p for p in range(n) if kind[p] in kinds and (ext is None or enabled[p][ext]) and scored[p]]
        hooks[hook, :len(row)] = row
        hook_len[hook] = len(row)
    of_kind = np.full(N_PLUGINS, -1, np.int64)
    for p, k in enumerate(kind):
        of_kind[k] = p
    return {"p_tier": policy.plugin_tier.astype(np.int64), "p_kind": policy.plugin_kind.astype(np.int64),
            "p_arg": args, "p_w": np.ascontiguousarray(policy.plugin_resource_weights, float),
            "hooks": hooks, "hook_len": hook_len, "of_kind": of_kind,
            "actions": policy.actions.astype(np.int64),
            "has_enqueue": bool(np.any(policy.actions == Action.ENQUEUE)),
            "usage_read": bool((of_kind[[P.PROPORTION, P.CAPACITY, P.OVERCOMMIT]] >= 0).any()),
            "strict_fifo": bool(policy.strict_fifo), **_topology_switches(policy)}


def _topology_switches(policy) -> dict:
    """Whether network-topology-aware's hyperNodeGradient and hyperNodeOrder are on."""
    e = [p for p, k in enumerate(policy.plugin_kind.tolist()) if k == Plugin.NETWORK_TOPOLOGY_AWARE]
    enabled = policy.plugin_enabled
    return {"topo_gradient": bool(e and enabled[e[0], Ext.HYPER_NODE_GRADIENT]),
            "topo_order": bool(e and enabled[e[0], Ext.HYPER_NODE_ORDER])}


def change_confs(compiled: Compiled) -> list[dict]:
    """The conf arrays of each conf the scenario's changes apply, in their order (``ch_arg`` of a
    conf change); proportion's, capacity's and overcommit's usage is kept from the start when any
    conf of the run reads it (``usage_read``)."""
    confs = [_plugin_arrays(patch["policy"]) for patch in compiled.change_patch if "policy" in patch]
    if not confs:
        return []
    read = any(conf["usage_read"] for conf in [_plugin_arrays(compiled.problem.policy), *confs])
    return [conf | {"usage_read": read} for conf in confs]


def _hypernode_arrays(problem: Problem) -> dict:
    """The session's HyperNode tree (:class:`~labkit.engine.hypernodes.HyperNodes`, root last) as
    arrays: tiers, parents, the breadth-first order from the root (children by index, as
    hyperNodeGradient walks them), the tiers in use, members (CSR), each node's HyperNode per tier and
    of the lowest tier; each job's networkTopology tier as allocate reads it (soft mode: the root's
    tier, -1: none)."""
    hn = HyperNodes(problem)
    bfs = [hn.root]
    for h in bfs:
        bfs.extend(sorted(hn.children[h]))
    sizes = [len(m) for m in hn.members]
    topo = np.where(problem.job_topology_hard, problem.job_topology_tier, hn.tier[hn.root])
    return {"hn_tier": np.array(hn.tier, np.int64), "hn_parent": np.array(hn.parent, np.int64),
            "hn_bfs": np.array(bfs, np.int64), "hn_tiers": np.array(hn.tiers, np.int64),
            "hn_mem_off": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            "hn_mem": np.array([n for m in hn.members for n in m], np.int64),
            "node_hn": core_view(problem.node_hypernode, I),
            "node_low": np.array([hn.of_node(n) for n in range(problem.n_nodes)], np.int64),
            "j_topo": np.where(problem.job_topology_tier >= 0, topo, -1).astype(np.int64)}


def _queue_arrays(problem: Problem, total: np.ndarray) -> dict:
    """Queue specs as proportion and capacity read them (``_capability``, realCapability)."""
    cap = np.where(np.isnan(problem.queue_capability), np.inf, problem.queue_capability)
    cap[:, [CPU, MEMORY]] = np.where(cap[:, [CPU, MEMORY]] <= 0, np.inf, cap[:, [CPU, MEMORY]])
    guarantee = np.nan_to_num(problem.queue_guarantee, nan=0.0)
    room = np.maximum(total - guarantee.sum(axis=0), 0.0)
    named = ~np.isnan(problem.queue_deserved) | ~np.isnan(problem.queue_guarantee)
    named[:, [CPU, MEMORY]] = True
    return {"q_weight": problem.queue_weight.astype(float), "q_rcap": np.minimum(room + guarantee, cap),
            "q_guar": guarantee, "q_des": np.nan_to_num(problem.queue_deserved, nan=0.0), "q_named": named,
            "q_prio": problem.queue_priority.astype(np.int64),
            "q_reclaimable": problem.queue_reclaimable.astype(bool),
            "q_open": problem.queue_open.astype(bool), "q_rank": problem.queue_rank.astype(np.int64)}


def _role_pairs(problem: Problem) -> dict:
    """(job, role) pairs: each job's roles with tasks or a minimum, for the per-role checks."""
    n_roles = max(len(problem.role_names), 1)
    task_key = problem.task_job * n_roles + problem.task_role
    jobs, roles = np.nonzero(problem.job_min_task_member > 0)
    keys = np.sort(np.concatenate([task_key, jobs * n_roles + roles]), kind="stable")  # two sorted runs: merged
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys
    pair_job, pair_role = keys // n_roles, keys % n_roles
    minima = problem.job_min_task_member
    pair_min = minima[pair_job, pair_role].astype(np.int64) if minima.size else np.zeros(len(keys), np.int64)
    return {"pair_min": pair_min,
            "j_pair": np.searchsorted(pair_job, np.arange(problem.n_jobs + 1)).astype(np.int64),
            "t_pair": np.searchsorted(keys, task_key).astype(np.int64),
            "j_min_total": np.where(minima > 0, minima, 0).sum(axis=1).astype(np.int64)}


def alike_jobs(j_lo: np.ndarray, t_shape: np.ndarray, t_class: np.ndarray, t_never: np.ndarray,
               t_be: np.ndarray) -> np.ndarray:
    """The jobs whose pods the actions cannot tell apart while none is placed: at least one pod, one
    request shape, predicate class and preemption policy, none best-effort
    (core_actions.attempt_fits_nowhere, tries_alike)."""
    differs = t_be.copy()
    differs[1:] |= (t_shape[1:] != t_shape[:-1]) | (t_class[1:] != t_class[:-1]) | (t_never[1:] != t_never[:-1])
    firsts = j_lo[:-1][j_lo[1:] > j_lo[:-1]]
    differs[firsts] = t_be[firsts]
    seen = np.concatenate([[0], np.cumsum(differs)])
    return (j_lo[1:] > j_lo[:-1]) & (seen[j_lo[1:]] == seen[j_lo[:-1]])


def priority_ranks(priorities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each job's rank among the distinct job priorities (ascending), and the priority of each rank."""
    codes, distinct = pd.factorize(priorities)
    order = np.argsort(distinct, kind="stable")
    rank = np.empty(len(distinct), np.int64)
    rank[order] = np.arange(len(distinct))
    return rank[codes].astype(np.int64), np.asarray(distinct, np.float64)[order]


def pass_kinds(arrays: dict, victims: bool, topology: np.ndarray) -> np.ndarray:
    """Each job of alike pods numbered by all that preempt and reclaim read of it while none of
    its pods is placed: its queue and priority, and its pods' request shape, predicate class and
    preemption policy; -1 for the other jobs (core_actions.preempt_passes counts by these kinds),
    among them a job with networkTopology (preempt skips it, ``topology``), and for every job when
    the policy has neither action (``victims`` False)."""
    jobs = np.flatnonzero(arrays["j_alike"] & (topology < 0)) if victims else np.zeros(0, np.int64)
    first = arrays["j_lo"][jobs]
    kinds = np.full(len(arrays["j_alike"]), -1, np.int64)
    if len(jobs):
        kinds[jobs] = row_ids(np.stack([arrays["j_queue"][jobs], arrays["j_prio"][jobs], arrays["t_shape"][first],
                                        arrays["t_class"][first], arrays["t_never"][first].astype(np.int64)], axis=1))
    return kinds


MAX_SHAPE_COUNTS = 4_000_000
"""Most (queue, minResources shape) counters the enqueue shortcut keeps; beyond, enqueue uses heaps."""


def _waiting_arrays(p: Problem, arrays: dict, changes: bool) -> dict:
    """What enqueue needs to take each queue's Pending PodGroups in order without a heap: their
    JobOrderFn order (a Pending PodGroup has no pods, so priority, gang's readiness with no pod
    ready and drf's zero share, then creation and UID, decide it), each job's minResources shape,
    the segment of each (queue, shape) in the waiting lists. ``fast_enqueue``: that order holds (no sla,
    no job starting from a snapshot) and enqueue runs. The same order ranks allocate's plain candidates
    (every pod Pending, not ready: gang and drf tie them as they tie a Pending PodGroup), kept per queue
    in the segments ``al_off``. A run with ``changes`` keeps no such lists: a change may reorder the
    jobs (a PriorityClass's value, the conf's JobOrderFns), and the sessions order them afresh."""
    kinds = [int(arrays["p_kind"][e]) for e in arrays["hooks"][H_JOB_ORDER, :arrays["hook_len"][H_JOB_ORDER]]]
    keys = []
    for kind in kinds:
        if kind == P.PRIORITY:
            keys.append(-p.job_priority.astype(np.int64))
        elif kind == P.GANG:
            keys.append((p.job_min_member <= 0).astype(np.int64))  # a ready job comes after
    keys.append(p.job_rank.astype(np.int64))
    worder = np.empty(p.n_jobs, np.int64)
    worder[np.lexsort(keys[::-1])] = np.arange(p.n_jobs)
    minres = np.column_stack([arrays["j_minres"], arrays["j_has_minres"]])
    shape = row_ids(minres)
    n_queues = len(arrays["q_weight"])
    fast = (not changes and arrays["has_enqueue"] and P.SLA not in arrays["p_kind"]
            and not (arrays["j_init_phase"] >= 0).any()
            and n_queues * (int(shape.max()) + 1 if p.n_jobs else 1) <= MAX_SHAPE_COUNTS)
    if not fast:
        shape = np.zeros(p.n_jobs, np.int64)
    n_shapes = int(shape.max()) + 1 if p.n_jobs else 1
    sizes = np.bincount(p.job_queue.astype(np.int64) * n_shapes + shape, minlength=n_queues * n_shapes)
    per_queue = np.bincount(p.job_queue.astype(np.int64), minlength=n_queues)
    return {"j_worder": worder, "j_mshape": shape,
            "w_off": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), "fast_enqueue": bool(fast),
            "al_off": np.concatenate([[0], np.cumsum(per_queue)]).astype(np.int64),
            "attempt_memo": bool(fast and _attempts_repeat(p, arrays))}


def _attempts_repeat(p: Problem, arrays: dict) -> bool:
    """An allocate attempt that was discarded is the same again while the node books and the job
    stay as they were (``core_actions.attempt_known_to_fail``): no queue gate (proportion's and
    capacity's allocatable), no time in the votes (sla), every scan sees every node from any start
    (at most 100 nodes, so the rotating start comes back where it was), and no preempt or reclaim
    to read the attempt's fit errors."""
    from .volcano.core_actions import MIN_NODES_TO_FIND

    actions = set(arrays["actions"].tolist())
    return (p.n_nodes <= MIN_NODES_TO_FIND and arrays["hook_len"][H_ALLOCATABLE] == 0
            and P.SLA not in arrays["p_kind"] and not actions & {int(Action.PREEMPT), int(Action.RECLAIM)})


def _snapshot_arrays(c: Compiled) -> dict:
    """Jobs that start from a ``status`` snapshot: initial phase and the nodes of running pods."""
    p = c.problem
    phase = np.full(p.n_jobs, -1, np.int64)
    node = np.full(p.n_tasks, -1, np.int64)
    snapshots = [(i, job.status) for i, job in enumerate(c.source.jobs) if job.status is not None]
    if not snapshots:
        return {"j_init_phase": phase, "t_init_node": node}
    node_index = {name: n for n, name in enumerate(p.node_names)}
    given = np.flatnonzero(c.jobs.spec >= 0)
    row_of = dict(zip(c.jobs.spec[given].tolist(), given.tolist()))
    for spec, status in snapshots:
        j = row_of[spec]
        phase[j] = PodGroupPhase[status.phase.upper()]
        for t in range(c.job_pods[j], c.job_pods[j + 1]):
            placed = status.running.get(p.role_names[p.task_role[t]], [])
            if p.task_index[t] < len(placed):
                node[t] = node_index[placed[p.task_index[t]]]
    return {"j_init_phase": phase, "t_init_node": node}


def _quota_arrays(c: Compiled) -> dict:
    """The ResourceQuota admission (``quotas.ResourceQuotas``) in milli-units; no quota: empty."""
    p, quotas = c.problem, c.quotas
    if quotas is None:
        return {"k_job_quota": np.full(p.n_jobs, -1, np.int64), "k_usage": np.zeros((p.n_tasks, 0), np.int64),
                "k_hard": np.zeros((0, 0), np.int64), "k_tracked": np.zeros((0, 0), bool),
                "k_unset": np.zeros(p.n_tasks, bool)}
    return {"k_job_quota": quotas.job_quota.astype(np.int64),
            "k_usage": np.ascontiguousarray(quotas.task_usage, np.int64),
            "k_hard": np.ascontiguousarray(quotas.hard, np.int64),
            "k_tracked": np.ascontiguousarray(quotas.tracked, bool),
            "k_unset": np.array([quotas.job_quota[quotas.task_job[t]] >= 0 and quotas.must_specify(t)
                                 for t in range(p.n_tasks)], bool).reshape(p.n_tasks)}


def core_view(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` as the core reads it (C order, ``dtype``, writeable like every array the jitted
    code was compiled for): the array itself when it already is."""
    view = np.ascontiguousarray(array, dtype)
    return view if view.flags.writeable else view.copy()


def static_arrays(c: Compiled) -> dict:
    """The run's read-only arrays: the Problem, the timing of Compiled, the resolved policy (the
    Problem's own arrays where their dtype is the core's: a million jobs would copy 130 MB)."""
    p = c.problem
    total = p.node_allocatable.sum(axis=0)
    names = p.resource_names
    arrays = {
        "node_alloc": core_view(p.node_allocatable, F), "node_sched": core_view(p.node_schedulable, B),
        "node_speed": core_view(c.node_speed, F), "class_ok": core_view(p.class_node_ok, B),
        "class_clean": np.asarray(p.class_node_ok, bool).all(axis=1) & bool(np.all(p.node_schedulable)),
        "all_nodes": np.arange(p.n_nodes, dtype=np.int64),
        "j_queue": core_view(p.job_queue, I), "j_prio": core_view(p.job_priority, I),
        "j_min": core_view(p.job_min_member, I), "j_minres": core_view(p.job_min_resources, F),
        "j_has_minres": core_view(p.job_has_min_resources, B), "j_rank": core_view(p.job_rank, I),
        "j_creation": core_view(p.job_creation, F), "j_sla": core_view(p.job_sla_waiting, F),
        "j_submit": core_view(c.job_submit, F), "j_work": core_view(c.job_work, F),
        "j_uses_speed": core_view(c.job_uses_speed, B), "j_ckpt": core_view(c.job_checkpoint, F),
        "j_restart": core_view(c.job_restart_cost, F), "j_grace": core_view(c.job_grace, F),
        "j_lo": core_view(c.job_pods, I),
        "arrivals": np.argsort(c.job_submit, kind="stable").astype(np.int64),
        "t_job": core_view(p.task_job, I), "t_req": core_view(p.task_request, F),
        "t_prio": core_view(p.task_priority, I), "t_never": core_view(p.task_preempt_never, B),
        "t_preemptable": core_view(p.task_preemptable, B), "t_be": core_view(p.task_best_effort, B),
        "t_critical": core_view(p.task_critical, B), "t_index": core_view(p.task_index, I),
        "t_rank": core_view(p.task_rank, I), "t_class": core_view(p.task_class, I),
        "t_named": np.array([name != "" for name in p.role_names], bool)[p.task_role] if p.n_tasks
        else np.zeros(0, bool),
        "t_shape": row_ids(p.task_request),
        "total": total, "horizon": float(c.horizon), "period": float(c.schedule_period),
        "gpu": names.index(GPU) if GPU in names else -1,
        "ne_time": core_view(c.event_time, F), "ne_node": core_view(c.event_node, I),
        "ne_kind": core_view(c.event_kind, I),
        # the job progress model (Compiled.job_class and the class tables; clock.Simulation._rate)
        "rt_class": core_view(c.job_class, I), "rt_speed": core_view(c.class_speed, F),
        "rt_model": core_view(c.node_model, I), "rt_place": core_view(c.class_placement, F),
        "rt_scale": core_view(c.class_scaling, F), "rt_hn": core_view(p.node_hypernode, I),
    }
    arrays["j_alike"] = alike_jobs(arrays["j_lo"], arrays["t_shape"], arrays["t_class"], arrays["t_never"],
                                   arrays["t_be"])
    arrays["j_kind"] = pass_kinds(arrays, bool(np.isin(p.policy.actions, [Action.PREEMPT, Action.RECLAIM]).any()),
                                  p.job_topology_tier)
    arrays["j_prank"], arrays["prio_of_rank"] = priority_ranks(arrays["j_prio"])
    arrays.update(_queue_arrays(p, total))
    arrays.update(_role_pairs(p))
    arrays.update(_snapshot_arrays(c))
    arrays.update(_plugin_arrays(p.policy))
    arrays.update(_hypernode_arrays(p))
    arrays.update(_quota_arrays(c))
    arrays.update(_change_arrays(c, arrays))
    arrays.update(_waiting_arrays(p, arrays, bool(len(c.change_time))))
    return arrays


def _change_arrays(c: Compiled, arrays: dict) -> dict:
    """The scenario's changes in time order (``Compiled.change_time``) as the core applies them
    (core_clock.change_event): per change its time, kind (``events.CH_QUEUE`` ...) and argument (a
    PriorityClass change's row of ``ch_prio``, a conf change's index in :func:`change_confs`); the
    queue arrays as each change leaves them (:func:`_queue_arrays`), each PriorityClass change's
    job priorities. The priority ranks (``j_prank``, ``prio_of_rank``) cover every value a job takes
    in the run; a conf change makes ``usage_read`` that of every conf of the run."""
    p, total = c.problem, arrays["total"]
    kinds, args, queues, rows = [], [], [], []
    now, confs = p, 0
    for patch in c.change_patch:
        now = dataclasses.replace(now, **{k: v for k, v in patch.items() if k.startswith("queue_")})
        queues.append(_queue_arrays(now, total))
        if "policy" in patch:
            kinds.append(CH_CONF)
            args.append(confs)
            confs += 1
        elif "job_priority" in patch:
            kinds.append(CH_PRIORITY_CLASS)
            args.append(len(rows))
            rows.append(np.asarray(patch["job_priority"], np.int64))
        else:
            kinds.append(CH_QUEUE)
            args.append(-1)
    n_queues, n_res = arrays["q_rcap"].shape
    out = {"ch_time": core_view(c.change_time, F), "ch_kind": np.array(kinds, np.int64),
           "ch_arg": np.array(args, np.int64),
           "ch_prio": np.array(rows, np.int64).reshape(len(rows), p.n_jobs)}
    for name, shape, dtype in (("q_weight", (n_queues,), F), ("q_rcap", (n_queues, n_res), F),
                               ("q_guar", (n_queues, n_res), F), ("q_des", (n_queues, n_res), F),
                               ("q_named", (n_queues, n_res), B)):
        out[f"ch_{name}"] = np.array([q[name] for q in queues], dtype).reshape(len(queues), *shape)
    if rows:
        out["prio_of_rank"] = np.unique(np.concatenate([arrays["j_prio"], *rows])).astype(np.float64)
        out["j_prank"] = np.searchsorted(out["prio_of_rank"], arrays["j_prio"]).astype(np.int64)
    if confs:
        out["usage_read"] = change_confs(c)[0]["usage_read"]
    return out


def row_ids(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0, return_inverse=True)[1]`` (ids in the rows' sorted order) without
    sorting every row: rows are told apart by hashing column by column, and only the distinct
    ones (a handful of request shapes among a million pods) are sorted."""
    code, width = np.zeros(len(rows), np.int64), 1
    for column in np.asarray(rows).T:
        values, distinct = pd.factorize(column, use_na_sentinel=False)
        if width * len(distinct) >= 2**62:  # renumber before the combined code leaves int64
            code = pd.factorize(code)[0]
            width = int(code.max()) + 1
        code, width = code * len(distinct) + values, width * len(distinct)
    if not len(rows):
        return code
    code = pd.factorize(code)[0]
    first = first_positions(code)
    order = np.lexsort(np.asarray(rows)[first].T[::-1])
    rank = np.empty(len(first), np.int64)
    rank[order] = np.arange(len(first))
    return rank[code]


def _size(dim: str, sizes: dict) -> int:
    """A dimension of :data:`MUTABLE`: a sum of terms ``7``, ``T`` or ``2*T``."""
    total = 0
    for term in dim.split("+"):
        factor, _, name = term.rpartition("*")
        total += (int(factor) if factor else 1) * (sizes[name] if name.isalpha() else int(name))
    return total


def fresh(table: dict, sizes: dict) -> dict:
    """The arrays of a table like :data:`MUTABLE` (shape, initial value, dtype), at these sizes."""
    return {name: _filled(tuple(_size(dim, sizes) for dim in shape.split()), value, dtype)
            for name, (shape, value, dtype) in table.items()}


def _filled(shape: tuple, value, dtype) -> np.ndarray:
    """``np.full``, but zeros from ``np.zeros``: the OS hands those pages over only when written, so
    scratch sized for every pod costs resident memory only for the part a run uses."""
    return np.zeros(shape, dtype) if value == 0 else np.full(shape, value, dtype)


def mutable_arrays(st: dict, scale: float) -> dict:
    """Fresh clock state and session scratch (:data:`MUTABLE`). Sizes: J jobs, T tasks, N nodes,
    Q queues, R resources, P (job, role) pairs, M most pairs of one job, S task statuses, X scalar
    slots, W minResources shapes, Z request shapes, F kinds of remembered failed attempts, G pass kinds, V job priorities; ``scale``
    multiplies the buffers a run cannot bound in advance: E events, H clock events, K pod runs, U fit-error nodes."""
    n_jobs, n_tasks, n_nodes = len(st["j_queue"]), len(st["t_job"]), len(st["node_alloc"])
    sizes = {"J": n_jobs, "T": n_tasks, "N": n_nodes, "Q": len(st["q_weight"]), "R": len(st["total"]),
             "P": len(st["pair_min"]), "M": int(np.diff(st["j_pair"]).max()) if n_jobs else 1,
             "S": N_STATUS, "X": N_INTS, "F": N_MEMO, "W": int(st["j_mshape"].max()) + 1 if n_jobs else 1,
             "Z": int(st["t_shape"].max()) + 1 if n_tasks else 1, "G": max(int(st["j_kind"].max()) + 1, 1) if n_jobs else 1,
             "V": max(len(st["prio_of_rank"]), 1), "Y": len(st["hn_tier"])}
    # pod runs: one per pod, and room for as many more as can run at once, which the clock's check
    # before a session counts again (``core_clock.room_for_session``), so a run without restarts
    # never grows its buffers near its end
    running = int(min(n_tasks, float(st["node_alloc"][:, PODS].sum())))
    grown = (("E", 4 * n_jobs + 4 * n_tasks), ("H", n_jobs + 2 * n_tasks + len(st["ne_time"]) + len(st["ch_time"])), ("K", n_tasks + running), ("U", n_nodes))
    for name, size in grown:
        sizes[name] = max(8, int(scale * (size + 64)))
    arrays = fresh(MUTABLE, sizes)
    arrays["ints"][I_WATER_FILLED] = -1  # no deserved computed yet
    arrays["ints"][I_FULL_NODES] = int((st["node_alloc"][:, PODS] <= 0).sum())  # nodes that take no pod
    arrays["rec_prio"][:] = st["j_prio"]
    return arrays


# ---------------------------------------------------------------------------------------- run


@contextmanager
def paused_gc():
    """Python's cycle collector off while a run's records become tables: they are acyclic,
    and its passes over a notebook's heap cost more than the conversion itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run(compiled: Compiled, static: dict, scale: float = 1.0, progress: Progress | None = None) -> RunRecord | None:
    """Run the compiled Volcano scenario on the numba core (buffers sized by ``scale``, grown on
    need); None if a ResourceQuota refused a pod (:data:`QUOTA_REFUSED`).

    Every family's jitted loop returns to Python every few tenths of a second of work
    (:data:`STEP_SECONDS`, :func:`in_slices`): there ``progress(jobs done, jobs, simulated time)``
    is called and Ctrl-C (KeyboardInterrupt) is raised, which jitted code cannot see."""
    from .core_clock import run as run_core
    from .volcano.core_actions import UNIT_OF_ACTION, UNITS

    confs = change_confs(compiled)
    used = {UNIT_OF_ACTION[a] for conf in [static, *confs] for a in conf.get("actions", ())}
    needed = tuple(k in used for k in range(len(UNITS)))
    mutable, _ = run_grown(in_slices(run_core, progress, confs, UNITS, needed), CoreFields, static, scale)
    return None if mutable["refused"][0] else _record(compiled, mutable)


def in_slices(run_core, progress: Progress | None, confs: list[dict] = (), units=(), needed=()):
    """A family's jitted entry ``run_core(fields, budget)`` (it takes a step budget and goes on
    where the last call stopped, ``core_clock.clock_loop``) run a slice of :data:`STEP_SECONDS`
    at a time, telling ``progress`` between slices. Where the core stopped at a conf change
    (``ints[I_CONF]`` = k + 1), the fields of conf ``confs[k]`` replace the conf's before it goes on
    (the same types: the same compiled code). ``units`` are the family's separately compiled
    units (``core_state.unit``), those ``needed`` by the run compiled with the entry point, their
    addresses in ``fields.units`` (0 for the others, which a fresh install compiles meanwhile,
    at the lowest priority, for the family's next confs)."""

    def entry(fields):
        budget, state = FIRST_STEPS, State(fields)
        key = (run_core, needed, state.numba_type)
        if key not in _READY:  # the first run of this family, conf and types in this process
            own = (state.numba_type, types.float64, types.int64)
            ensure_compiled([(run_core, (state.numba_type, types.int64))] + [(unit, own) for unit, need in zip(units, needed) if need],
                            later=[(unit, own) for unit, need in zip(units, needed) if not need])
            _READY[key] = [address(unit, own) if need else 0 for unit, need in zip(units, needed)]
        fields.units[:len(units)] = _READY[key]
        while True:
            began = time.perf_counter()
            if run_core(state, budget):
                return fields
            if fields.ints[I_GROW]:
                fields = grown(fields)
                state = State(fields)
                continue
            if fields.ints[I_CONF]:
                fields = fields._replace(**confs[fields.ints[I_CONF] - 1])
                fields.ints[I_CONF] = 0
                state = State(fields)
                continue
            took = time.perf_counter() - began
            budget = max(1, int(budget * min(4.0, STEP_SECONDS / max(took, 1e-6))))
            if progress is not None:
                progress(int(fields.done.sum()), len(fields.done), float(fields.clock[0]))

    return entry


PREFETCH_NICE = 19
"""The nice value of a compile started for a later run: it takes no CPU a run waits for."""

_READY: dict[tuple, list[int]] = {}
"""Per family entry point, units and fields' types: the units' addresses, once all are compiled."""


def run_grown(entry, fields, static: dict, scale: float, own=None) -> tuple[dict, dict]:
    """Run the jitted ``entry`` on ``fields(**static, **mutable, **own)``, the buffers four times larger
    while one overflows: the run's mutable arrays and its family's own (``own(static, events, scale)``,
    the size of the event buffer and the scale given)."""
    while True:
        mutable = mutable_arrays(static, scale)
        if len(mutable["ev_time"]) > MAX_EVENTS:
            raise endless()
        family = own(static, len(mutable["ev_time"]), scale) if own else {}
        changed = (NODE_STATE if len(static["ne_time"]) else ()) + (CHANGE_STATE if len(static["ch_time"]) else ())
        ran = entry(fields(**(static | {name: static[name].copy() for name in changed}), **mutable, **family))
        mutable.update((name, getattr(ran, name)) for name in mutable)  # with the buffers it grew on the way
        if not mutable["ints"][I_OVERFLOW]:
            return mutable, family
        scale *= 4


NODE_STATE = ("node_sched", "class_clean")
"""Static arrays the node events change during a run (core_clock.node_event): each run gets its own copy."""
CHANGE_STATE = ("q_weight", "q_rcap", "q_guar", "q_des", "q_named", "j_prio", "j_prank", "t_prio")
"""Static arrays the changes set during a run (core_clock.change_event): each run gets its own copy."""


GROWN = ("ev_time", "ev_int", "runs", "h_time", "h_key")
"""The record buffers the Volcano clock asks to grow before a step they might not hold."""


def grown(fields):
    """``fields`` with the :data:`GROWN` buffers twice as large, their contents kept."""
    larger = {}
    for name in GROWN:
        old = getattr(fields, name)
        if name == "ev_time" and 2 * len(old) > MAX_EVENTS:
            raise endless()
        larger[name] = _filled((2 * len(old),) + old.shape[1:], MUTABLE[name][1], old.dtype)
        larger[name][:len(old)] = old
    fields.ints[I_GROW] = 0
    return fields._replace(**larger)


def endless() -> LabkitError:
    return LabkitError(f"the run logs more than {MAX_EVENTS:,} events without ending (pods evicting "
                       "each other for ever?): give the scenario a horizon")


FIRST_STEPS = 50_000
"""Steps (an instant's events or a session) of the first call: a course scenario ends within it."""
STEP_SECONDS = 0.25
"""Wall time the later calls aim at."""
QUOTA_REFUSED = "pods a ResourceQuota refuses under Volcano: it creates a job's pods all at once"
"""What the core stops at (and the reference engine runs): a pod the quota admission refused."""
MAX_EVENTS = 50_000_000
"""Where a run that never ends (no horizon, a preemption cycle) stops growing its buffers: 50M events
are 1.8 GB of record (Philly on 256 GPUs, 82k jobs, logs 4.2M)."""


# ---------------------------------------------------------------------------------------- cold start


FAMILIES = {"core_clock": "Volcano", "kube": "kube-scheduler", "slurm": "Slurm", "kueue": "Kueue"}
"""The family whose jitted entry point a module of ``labkit.engine`` holds (``core_clock``, or the
family's folder), for the messages."""

WHEN_COLD = contextvars.ContextVar("when_cold", default="wait")
"""What a run does when its family's entry point is neither compiled in this process nor in numba's
cache (a fresh install): "raise" :class:`Cold` (``labkit.simulate`` then lets the reference engine
answer while the core compiles in a background process), "wait" for that background compile,
"compile" in this process, or "start" the background compiles and raise :class:`Cold` (a head
start before the scenario is prepared, ``families.start_compiling``). The environment variable
``LABKIT_COMPILE=foreground`` makes every cold run compile in this process, silently (the setting
of the test suite and of `labkit grade`'s nbval run: no run depends on a race, and no cell shows a
line its stored outputs do not have)."""

FOREGROUND = "LABKIT_COMPILE"
"""The environment variable that, set to "foreground", makes a cold run compile here without a word."""


class Cold(Exception):
    """A family's entry point or units must be compiled before it can run (see :data:`WHEN_COLD`)."""

    def __init__(self, builds: Builds):
        super().__init__(f"the numba core for {builds.family} is not compiled yet")
        self.builds = builds


@contextmanager
def when_cold(mode: str):
    """Run the body with :data:`WHEN_COLD` set to ``mode``."""
    token = WHEN_COLD.set(mode)
    try:
        yield
    finally:
        WHEN_COLD.reset(token)


def ensure_compiled(parts: list[tuple], later: list[tuple] = ()) -> None:
    """Make each jitted dispatcher of ``parts`` ((dispatcher, signature) pairs: a family's entry
    point and its units) ready for its signature: from numba's on-disk cache when it holds it (a
    second or so), else as :data:`WHEN_COLD` says, the missing ones compiled side by side, each in
    a process of its own. Numba would compile silently on the call, for a minute or so on a fresh
    install; here a wait of more than two seconds says so. The family's units a later run may
    need (``later``) then start compiling too, at the lowest priority, and are not waited for."""
    missing = [(dispatcher, sig) for dispatcher, sig in parts if not load_cached(dispatcher, sig)]
    if not missing:
        return
    if os.environ.get(FOREGROUND) == "foreground":
        for dispatcher, sig in missing:
            dispatcher.compile(sig)
        return
    for dispatcher, sig in later:
        if not load_cached(dispatcher, sig):
            Build.of(dispatcher, sig).start(priority=PREFETCH_NICE)
    builds = Builds([Build.of(dispatcher, sig) for dispatcher, sig in missing])
    mode = WHEN_COLD.get()
    if mode == "start" or (mode == "raise" and not builds.failed()):
        raise Cold(builds.start())
    if mode != "compile":
        builds.wait()
        missing = [(dispatcher, sig) for dispatcher, sig in missing if not load_cached(dispatcher, sig)]
    if missing:  # a compile that failed in the background shows its error here
        with waiting(f"compiling the numba core for {builds.family} (first run only; cached afterwards)"):
            for dispatcher, sig in missing:
                dispatcher.compile(sig)


def cold(entry) -> bool:
    """Whether a family's jitted entry point has no code yet, in this process or in numba's cache
    (a fresh install: its cache index is absent, or stale since a core module changed)."""
    return not entry.overloads and not entry._cache._cache_file._load_index()


def address(dispatcher, sig: tuple) -> int:
    """Where the code of a :data:`core_state.unit` compiled for ``sig`` starts (``call_unit`` calls it)."""
    compiled = dispatcher.overloads[sig]
    return compiled.library.get_pointer_to_function(compiled.fndesc.llvm_func_name)


def load_cached(dispatcher, sig: tuple) -> bool:
    """Whether ``dispatcher`` has ``sig`` compiled, loading it from numba's cache if it is there:
    the first step of ``Dispatcher.compile``, without its fall-back to compiling."""
    from numba.core.compiler_lock import global_compiler_lock

    if tuple(sig) in dispatcher.overloads:
        return True
    with global_compiler_lock:
        cres = dispatcher._cache.load_overload(sig, dispatcher.targetctx)
        if cres is None:
            return False
        dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
    return True


BUILD = """import importlib, os, pickle, sys
module, name, sig, mark = pickle.loads(bytes.fromhex(sys.argv[1]))
try:
    getattr(importlib.import_module(module), name).compile(sig)
finally:
    os.unlink(mark)
"""
"""The background compile: the entry point, compiled for the signature, lands in numba's cache; the
mark that says it is running goes when it ends. What to compile comes on the command line, so that
starting it writes to no pipe."""

FRESH_MARK_S = 10.0
"""A mark without a process id yet is taken for a compile being started while this young."""


class Build:
    """One background compile of an entry point for a signature, in its own process (numba holds
    the interpreter while it compiles, and a second core is free for the reference engine). A mark
    file beside numba's cache holds the compiling process's id, so that other processes on the same
    cache (a second ``labkit simulate``, another notebook) wait for it instead of compiling too.

    The process runs in a session of its own, so that interrupting or restarting a notebook's
    kernel (Jupyter signals the kernel's whole process group) does not kill it half-way, and a
    thread collects it the moment it ends, whether or not the run that started it still looks: a
    kernel left idle never holds an ended compile as a zombie, which other processes would take
    for a compile still running."""

    running: ClassVar[dict[str, Build]] = {}

    def __init__(self, dispatcher, sig: tuple):
        self.dispatcher, self.sig = dispatcher, sig
        self.family = FAMILIES.get(dispatcher.py_func.__module__.split(".")[2], dispatcher.__name__)
        digest = hashlib.sha256(f"{dispatcher.py_func.__module__}.{dispatcher.__name__}{sig}".encode()).hexdigest()
        self.mark = Path(dispatcher._cache._cache_path) / f"labkit-compiling-{digest[:16]}.pid"
        self.proc: subprocess.Popen | None = None
        self.other: int | None = None  # another process's compile this one waits for
        self.priority = 0  # the nice value its process was started with

    @classmethod
    def of(cls, dispatcher, sig: tuple) -> Build:
        """The build of this entry point and signature in this process, made once."""
        key = f"{dispatcher.py_func.__module__}.{dispatcher.__name__}{sig}"
        if key not in cls.running:
            cls.running[key] = cls(dispatcher, sig)
        return cls.running[key]

    def start(self, priority: int = 0) -> Build:
        """Start the compile (its process at this nice value), or follow the one another process
        runs, unless either has begun."""
        while self.proc is None and self.other is None:
            self.mark.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                self.other = _compiling(self.mark)
                if self.other is None:  # a compile that died (killed) left its mark
                    self.mark.unlink(missing_ok=True)
                continue
            root = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
            payload = (self.dispatcher.py_func.__module__, self.dispatcher.__name__, self.sig, str(self.mark))
            self.proc = subprocess.Popen([sys.executable, "-c", BUILD, pickle.dumps(payload).hex()],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
            if priority:
                with suppress(OSError):  # it may have ended already; autogroup: Linux schedules its session as a group
                    os.setpriority(os.PRIO_PROCESS, self.proc.pid, priority)
                    Path(f"/proc/{self.proc.pid}/autogroup").write_text(str(priority))
            self.priority = priority
            os.write(fd, str(self.proc.pid).encode())
            os.close(fd)
            threading.Thread(target=self.proc.wait, name="labkit-compile-reaper", daemon=True).start()
        return self

    def ended(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is not None
        return self.other is not None and _compiling(self.mark) is None  # its mark goes when it ends

    def done(self) -> bool:
        """The compile ended well (another process's: it ended; numba's cache tells the rest)."""
        return self.ended() and (self.proc is None or self.proc.returncode == 0)

    def failed(self) -> bool:
        return self.ended() and not self.done()


class Builds:
    """The background compiles one run needs (its family's entry point and units), side by side."""

    def __init__(self, builds: list[Build]):
        self.builds = builds
        self.family = builds[0].family

    def start(self) -> Builds:
        for build in self.builds:
            build.start()
        return self

    def done(self) -> bool:
        return all(build.done() for build in self.builds)

    def failed(self) -> bool:
        return any(build.failed() for build in self.builds)

    def wait(self) -> bool:
        """Wait for the compiles (started if need be), saying so after two seconds; True if all
        ended well (a failed one is compiled again in this process, which shows its error)."""
        self.start()
        with waiting(f"compiling the numba core for {self.family} (first run only; cached afterwards)"):
            while not all(build.ended() for build in self.builds):
                time.sleep(0.1)
        return self.done()


def _compiling(mark: Path) -> int | None:
    """The id of the process compiling under this mark (0 while it is being started), None if none."""
    try:
        text, age = mark.read_text(), time.time() - mark.stat().st_mtime
    except FileNotFoundError:
        return None
    if not text:
        return 0 if age < FRESH_MARK_S else None
    pid = int(text)
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    """Whether the process runs: it exists and is not a zombie (ended, not yet collected by its
    parent; a compile killed before removing its mark is one until then)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: existing is all that can be told
    return stat.rpartition(")")[2].split()[0] != "Z"


def _record(c: Compiled, m: dict) -> RunRecord:
    return record(m, lambda time, coded: _events(c.problem, time, coded, said=c.change_said), priority=m["rec_prio"])


def record(m: dict, events, **extra) -> RunRecord:
    """The RunRecord of a run's mutable arrays; ``events(time, coded)`` turns the coded events into
    the record's events when they are read; ``extra`` are a family's own fields (state, priority).
    The used parts of the record buffers are copied, so the buffers go with the run."""
    ints = m["ints"]
    n = ints[I_EVENTS]
    return RunRecord(
        done=m["done"], running=~np.isnan(m["run_start"]), phase=m["phase"], enqueue_time=m["enq_t"],
        start_time=m["start_t"], end_time=m["end_t"], evictions=m["evictions"], lost_work=m["lost_work"],
        runs=m["runs"][:ints[I_RUNS]].copy(), events=CodedEvents(m["ev_time"][:n].copy(), m["ev_int"][:n].copy(), events),
        sessions=int(ints[I_SESSIONS]), **extra,
    )


_ACTIONS = np.array([a.name.lower() for a in sorted(Action)], object)
NODE_EVICTIONS = {MSG_NODE_LOST: ("TaintManagerEviction", "Marking for deletion Pod "),
                  MSG_DRAINED: ("Drain", "evicting pod ")}
"""A node event's eviction message code: its reason, and its message before the pod's name."""
_PHASE_CHANGES = np.array([[f"PodGroup {x.name.title()} -> {y.name.title()}" for y in sorted(PodGroupPhase)]
                           for x in sorted(PodGroupPhase)], object)
_PLACED = {MSG_FITS_IDLE: "fits Idle on ", MSG_BACKFILL: "best-effort task placed on ",
           MSG_FITS_FUTURE: "fits FutureIdle on ", MSG_PREEMPTED_ROOM: "preempted room on ",
           MSG_RECLAIMED_ROOM: "reclaimed room on "}


def _events(p: Problem, time: np.ndarray, coded: np.ndarray, kinds: tuple[str, ...] = EVENT_KINDS,
            said: tuple[tuple[str, str, str], ...] = ()) -> tuple:
    """The (time, kind, job, task, node, reason, message) columns, with the reference engine's texts
    (``kinds``: the names of the kind codes, the Volcano ones first; ``said``: what each change of
    the scenario logs, ``Compiled.change_said``)."""
    kind, job, task, node, msg, a, b = (coded[:, k].astype(np.int64) for k in range(7))
    nodes, tasks = np.array(p.node_names + ("",), object), np.array(p.task_names + ("",), object)
    reasons = np.full(len(time), "", object)
    messages = np.full(len(time), "", object)
    reasons[kind == EVENT_KINDS.index("Bound")] = "Scheduled"
    reasons[msg == MSG_RESTART] = "PodEvicted"
    messages[msg == MSG_RESTART] = "RestartJob: the gang fell below minAvailable"
    messages[msg == MSG_SNAPSHOT] = "running in the snapshot"
    for code, text in _PLACED.items():
        rows = np.flatnonzero(msg == code)
        if code in (MSG_FITS_IDLE, MSG_BACKFILL):  # a bind names the task that made it, and its node
            messages[rows] = text + nodes[b[rows]] + " for " + tasks[a[rows]]
        else:  # a pipelined pod: its own node and name; the reason is the action
            messages[rows] = text + nodes[node[rows]] + " for " + tasks[task[rows]]
            reasons[rows] = _ACTIONS[a[rows]]
    for code, text, action in ((MSG_PREEMPTED_BY, "preempted by ", "preempt"),
                               (MSG_RECLAIMED_BY, "reclaimed by ", "reclaim")):
        rows = np.flatnonzero(msg == code)
        messages[rows] = text + tasks[a[rows]]
        reasons[rows] = action
    for code, (reason, text) in NODE_EVICTIONS.items():
        rows = np.flatnonzero(msg == code)
        messages[rows] = text + tasks[task[rows]]
        reasons[rows] = reason
    rows = np.flatnonzero(msg == MSG_PHASE)
    messages[rows] = _PHASE_CHANGES[a[rows], b[rows]]
    if said:
        rows = np.flatnonzero((kind >= EV_CHANGE) & (kind < EV_CHANGE + len(CHANGE_LOGGED)))
        reasons[rows] = np.array([reason for _, reason, _ in said], object)[a[rows]]
        messages[rows] = np.array([message for _, _, message in said], object)[a[rows]]
    rows = np.flatnonzero(msg == MSG_PODS_RUNNING)
    if len(rows):
        counts = np.array([f"{x} pods running" for x in range(int(a[rows].max()) + 1)], object)
        messages[rows] = counts[a[rows]]
    names = np.array(kinds, object)[kind]
    return time, names, job, task, node, reasons, messages
