"""Slurm's slurmctld (``reference.py``) in the numba core, with the clock of ``clock.py`` as the
Slurm policies drive it: each action on its own cadence (the main scheduler on events and every
sched_interval, backfill every bf_interval), pods from submit, time limits that kill jobs,
requeued jobs held until their BeginTime, suspended jobs, wake-ups, and the notes (sprio
priorities, pending reasons, backfill start times) logged when they change. Same semantics and
tie-breaks as the reference engine.

It has its own jitted entry point (:func:`run`), so the Volcano one does not grow; it shares the
clock's records, event heap, live-job list and task books (``core_clock``, ``core_account``) over
a state struct that holds the Volcano arrays plus the Slurm ones (:data:`SLURM_STATIC`,
:data:`SLURM_MUTABLE`). A session works on its own copy of the task statuses and node use, as the
reference's Session does, and hands its binds, evictions and notes to the clock.

Python side: :func:`slurm_arrays` (the Slurm tables, the static parts of each job's priority),
:func:`run` (buffers, the run, the record) and :func:`_events` (the reference engine's texts).
"""

from __future__ import annotations

import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

from ..core import CoreFields, fresh, in_slices, record, run_grown
from ..core_account import copy_row, copy_rows, set_created, set_job_phase
from ..core_clock import (
    always_room,
    bind,
    clock_event,
    clock_loop,
    close_run,
    ended,
    finish_as,
    log,
    on_grid,
    progress,
    push_event,
    push_node_events,
    push_row,
    quiet,
    rate_of,
    released,
    stop_work,
    submit,
    terminate_in,
    wake_queued,
)
from ..core_state import (
    BINDING,
    BOUND,
    CPU,
    EV_BOUND,
    EV_EVICTED,
    EV_NODE,
    EV_RESTARTING,
    EV_STARTED,
    EVENT_KINDS,
    I_LIVE,
    I_OVERFLOW,
    I_RUNS,
    I_SESSIONS,
    I_TO_START,
    MSG_NONE,
    MSG_PODS_RUNNING,
    MSG_RESTART,
    PENDING,
    PH_COMPLETED,
    PODS,
    RELEASING,
    RUNNING,
    entry,
    jit,
)
from ..events import CORDON, DRAIN, FAIL, FINISH, NODE, RECOVER, TIMEOUT, WAKE
from ..problem import PreemptMode, SlurmAction
from ..records import RunRecord
from ..volcano.core_actions import sort_prefix
from .reference import (
    GRP_REASON,
    SLURM_TRES,
    USER_REASON,
    YEAR_SECONDS,
    Factors,
    decay_factor,
    job_tres,
    priority_factors,
)

# -------------------------------------------------------------------------------- codes

SCHED = int(SlurmAction.SCHED)
OFF, CANCEL, REQUEUE, SUSPEND = (int(m) for m in (PreemptMode.OFF, PreemptMode.CANCEL, PreemptMode.REQUEUE,
                                                  PreemptMode.SUSPEND))
HOW_REQUEUE, HOW_CANCEL, HOW_SUSPEND = range(3)
HOW = ("requeue", "cancel", "suspend")
VERB = ("has been requeued", "has been cancelled", "has been suspended")

KINDS = EVENT_KINDS + ("Timeout", "Suspended", "Cancelled", "Priority", "Pending", "StartTime", "NodeFail")
(EV_TIMEOUT, EV_SUSPENDED, EV_CANCELLED, EV_PRIORITY, EV_PENDING, EV_START_TIME,
 EV_NODE_FAIL) = range(len(EVENT_KINDS), len(KINDS))
(MSG_ALLOCATE, MSG_RESUMED, MSG_PREEMPTED, MSG_REQUEUED, MSG_TIME_LIMIT, MSG_PRIORITY, MSG_PENDING,
 MSG_START_TIME, MSG_NODE_FAIL, MSG_NODE_REQUEUED) = range(MSG_RESTART + 1, MSG_RESTART + 11)
FINAL_STATES = ("", "Timeout", "Preempted", "NodeFail")
FINAL_TIMEOUT, FINAL_PREEMPTED, FINAL_NODE_FAIL = 1, 2, 3
"""``s.final``'s codes into FINAL_STATES: the state a job ended in, when its end gives it one."""

REASONS = (("BeginTime", "PartitionNodeLimit") + tuple(GRP_REASON[t] for t in SLURM_TRES)
           + tuple(USER_REASON[t] for t in SLURM_TRES) + ("Priority", "Resources"))
R_BEGIN_TIME, R_PARTITION_NODES, R_GRP = 0, 1, 2
R_USER = R_GRP + len(SLURM_TRES)
R_PRIORITY, R_RESOURCES = R_USER + len(SLURM_TRES), R_USER + len(SLURM_TRES) + 1
NOTE_PRIORITY, NOTE_PENDING, NOTE_START_TIME = range(3)

# slots of ``s.sl_arg`` (the SlurmArgs as numbers)
(A_RESOLUTION, A_WINDOW, A_MAX_JOB_TEST, A_WEIGHT_AGE, A_WEIGHT_FAIRSHARE, A_MAX_AGE, A_CALC_PERIOD, A_DECAY,
 A_DAMPENING, A_SLURMDBD, A_ENFORCE, A_PREEMPT_TYPE, A_REQUEUE_HOLD, A_ACCRUE_ALWAYS, A_FAIR_TREE,
 A_FAIR_SHARE, A_TIME_DEPENDENT, A_USERS) = range(18)
N_ARGS = 18
# slots of ``s.sl_ints``: note values and node lists kept for the record, the session's outputs, stamps
S_VALUES, S_NODE_LISTS, S_BINDS, S_EVICTS, S_NOTES, S_STAMP, S_FAIR_TICK = range(7)

SLURM_STATIC = (
    "sl_actions", "sl_period", "sl_on_event", "sl_arg", "j_part", "j_qos", "j_assoc", "j_limit", "j_limit_bf", "j_requeue",
    "j_tier", "j_mode", "j_pprio", "j_tres", "j_base", "t_order", "part_nodes", "part_count", "part_max",
    "qos_preempt", "qos_grp", "qos_user", "a_shares", "a_level", "a_user", "a_parent", "a_kid_lo", "a_kids",
    "a_post", "a_pre",
)
B, I, F, I8 = np.bool_, np.int64, np.float64, np.int8
SLURM_MUTABLE = {
    # the clock's Slurm books (clock.Simulation: eligible, suspended, limit_used, final_state, priority)
    "eligible": ("J", -np.inf, F), "suspended": ("J", False, B), "limit_used": ("J", 0, F),
    "final": ("J", 0, I8), "prio": ("J", 0, I), "stopped": ("J", -1, I),
    # the last note of each kind per job, and the values of the logged ones
    "ln_prio": ("J 7", np.nan, F), "ln_pend": ("J", -1, I), "ln_at": ("J", np.nan, F), "ln_count": ("J", -1, I),
    "ln_nodes": ("T", -1, I), "nv": ("E 6", 0, F), "nl": ("E", 0, I), "sl_ints": ("7", 0, I),
    # one session's scratch
    "ss_status": ("T", 0, I8), "ss_node": ("T", -1, I), "ss_susp": ("J", False, B), "ss_used": ("N R", 0, F),
    "ss_start": ("J", np.nan, F), "ss_has": ("J", False, B), "ss_prio": ("J", 0, I), "ss_age": ("J", 0, F),
    "ss_fs": ("J", 0, F), "ss_queue": ("J", 0, I), "fr": ("6 N R", 0, F), "avail": ("N", False, B),
    "allowed": ("N", False, B), "failed": ("Pn", False, B), "place": ("T", -1, I), "taken": ("M N", 0, I),
    "started": ("J", 0, I), "candidate": ("J", 0, I), "order": ("J", 0, I), "victims": ("J", 0, I),
    "chosen": ("N", 0, I), "need": ("N", 0, F), "sb": ("T 5", 0, I), "se": ("T 3", 0, I),
    "sn": ("3*J+1 3", 0, I), "sn_at": ("3*J+1", 0, F), "rs_start": ("J", 0, F), "rs_end": ("J", 0, F),
    "rs_lo": ("J+1", 0, I), "rs_nodes": ("T", 0, I), "ends_t": ("J", 0, F), "ends_j": ("J", 0, I),
    "times": ("2*J+1", 0, F), "usage": ("As", 0, F), "raw": ("As", 0, F), "lf": ("As", 0, F),
    "fsf": ("As", 0, F), "norm": ("As", 1, F), "efctv": ("As", 0, F), "ft_order": ("As", 0, I),
    "stk_par": ("As", 0, I), "stk_i": ("As", 0, I), "stk_tied": ("As", False, B), "stk_prev": ("As", 0, F),
    "tres_sum": ("2 4", 0, F),
    # the clock of each action (sched, backfill): its last run, whether something changed since,
    # whether an event did, when it is due next
    "sl_last": ("A", -np.inf, F), "sl_dirty": ("A", False, B), "sl_evented": ("A", False, B),
    "sl_due": ("A", np.inf, F),
}
"""The Slurm run's own mutable arrays (shapes in the sizes of :func:`_slurm_mutable`)."""
SlurmFields = namedtuple("SlurmFields", CoreFields._fields + SLURM_STATIC + tuple(SLURM_MUTABLE))
"""The Slurm run's arrays: the Volcano core's, then the Slurm ones."""


# -------------------------------------------------------------------------------- job states


@jit
def holding(status):
    """slurm.HOLDING: the pod holds its node's resources."""
    return status == RUNNING or status == BINDING or status == BOUND or status == RELEASING


@jit
def running(s, j):
    """The job holds nodes and is not suspended (the session's view)."""
    if s.ss_susp[j]:
        return False
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if holding(s.ss_status[t]) and s.ss_node[t] >= 0:
            return True
    return False


@jit
def pending(s, j):
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.ss_status[t] != PENDING:
            return False
    return s.j_lo[j + 1] > s.j_lo[j]


@jit
def new_stamp(s):
    s.sl_ints[S_STAMP] += 1
    return s.sl_ints[S_STAMP]


# -------------------------------------------------------------------------------- fair share


@jit
def decayed_usage(s, now):
    """slurm.decayed_usage into ``s.usage``: each user association's decayed CPU-seconds at the last
    PriorityCalcPeriod tick, from the pod runs so far (the same terms, in the same order)."""
    usage = s.usage
    usage[:] = 0.0
    period, d = s.sl_arg[A_CALC_PERIOD], s.sl_arg[A_DECAY]
    g = d**period
    last = float(math.floor(now / period))
    for k in range(s.ints[I_RUNS]):
        task, start = int(s.runs[k, 0]), s.runs[k, 2]
        stop = s.runs[k, 4]
        if math.isnan(stop):
            stop = s.runs[k, 3]
        if math.isnan(stop):
            stop = math.inf
        first = math.floor(start / period) + 1.0
        final = math.inf if math.isinf(stop) else math.ceil(stop / period) - 1.0
        upto = min(final, last)
        total = 0.0
        if first <= upto:
            delta0 = first * period - start
            total += delta0 * d**delta0 * g ** (last - first)
            count = upto - first
            geometric = count if g == 1 else g ** (last - upto) * (1 - g**count) / (1 - g)
            total += period * g * geometric
        if stop <= last * period:
            begin = final * period if final >= first else start
            delta = stop - begin
            total += delta * d**delta * g ** (last - final)
        usage[s.j_assoc[s.t_job[task]]] += s.t_req[task, CPU] / 1000.0 * total


@jit
def tree_usage(s):
    """usage_raw of every association into ``s.raw``: accounts sum their children."""
    for a in s.a_post:
        acc = 0.0
        for k in range(s.a_kid_lo[a], s.a_kid_lo[a + 1]):
            acc += s.raw[s.a_kids[k]]
        s.raw[a] = s.usage[a] + acc


@jit
def level_fs(s, a):
    """Fair Tree's Level FS = S / U of association ``a`` (slurm.fair_tree)."""
    if s.a_shares[a] < 0:
        return math.inf
    level = s.a_level[a]
    share = s.a_shares[a] / level if level else 0.0
    parent_usage = s.raw[s.a_parent[a]]
    u = s.raw[a] / parent_usage if parent_usage else 0.0
    if share == 0:
        return 0.0
    return math.inf if u == 0 else share / u


@jit
def kid_after(s, x, y):
    """Fair Tree's sibling order: Level FS descending, users before accounts on ties."""
    if s.lf[x] != s.lf[y]:
        return -s.lf[x] > -s.lf[y]
    return (not s.a_user[x]) > (not s.a_user[y])


@jit
def sort_kids(s, a):
    """``s.ft_order`` over ``a``'s children range: the children in Fair Tree order (stable)."""
    lo, hi = s.a_kid_lo[a], s.a_kid_lo[a + 1]
    for k in range(lo, hi):
        v = s.a_kids[k]
        i = k
        while i > lo and kid_after(s, s.ft_order[i - 1], v):
            s.ft_order[i] = s.ft_order[i - 1]
            i -= 1
        s.ft_order[i] = v


@jit
def fair_tree(s):
    """slurm.fair_tree into ``s.fsf``: users ranked depth first over the sorted tree, tied users
    sharing a rank; fs_factor = rank / user count. The walk keeps its own stack."""
    n_users = int(s.sl_arg[A_USERS])
    s.fsf[:] = 0.0
    if n_users == 0:
        return
    for a in range(1, s.a_shares.size):
        s.lf[a] = level_fs(s, a)
    rank = rnt = n_users
    sort_kids(s, 0)
    depth = 0
    s.stk_par[0], s.stk_i[0], s.stk_tied[0] = 0, 0, False
    while depth >= 0:
        parent, i = s.stk_par[depth], s.stk_i[depth]
        lo = s.a_kid_lo[parent]
        if lo + i >= s.a_kid_lo[parent + 1]:
            depth -= 1
            continue
        a = s.ft_order[lo + i]
        tied = s.stk_tied[depth] if i == 0 else s.stk_prev[depth] == s.lf[a]
        s.stk_prev[depth], s.stk_i[depth] = s.lf[a], i + 1
        if s.a_user[a]:
            if not tied:
                rank = rnt
            s.fsf[a] = rank / n_users
            rnt -= 1
        else:
            sort_kids(s, a)
            depth += 1
            s.stk_par[depth], s.stk_i[depth], s.stk_tied[depth] = a, 0, tied


@jit
def classic_fair_share(s):
    """slurm.classic_fair_share into ``s.fsf``, parents before children (static preorder)."""
    root_usage = s.raw[0]
    dampening = s.sl_arg[A_DAMPENING]
    s.norm[0], s.efctv[0] = 1.0, 0.0
    for c in s.a_pre:
        a = s.a_parent[c]
        own = c if s.a_shares[c] >= 0 else a
        level = s.a_level[c]
        if s.a_shares[c] < 0:
            s.norm[c], s.efctv[c] = s.norm[a], s.efctv[a]
        else:
            s.norm[c] = s.norm[a] * (s.a_shares[c] / level if level else 0.0)
            ua = s.raw[c] / root_usage if root_usage else 0.0
            if a == 0:
                s.efctv[c] = ua
            elif not level:
                s.efctv[c] = s.efctv[a]
            else:
                s.efctv[c] = ua + (s.efctv[a] - ua) * s.a_shares[c] / level
        s.fsf[c] = 2.0 ** (-s.efctv[own] / s.norm[own] / dampening) if s.norm[own] > 0 else 0.0


# -------------------------------------------------------------------------------- session open


@jit
def open_session(s, now):
    """The session's copies of the live jobs' statuses, nodes, suspension and node use; each running
    job's start; each pending job's priority factors (Slurmctld.__init__)."""
    copy_rows(s.ss_used, s.n_used)
    s.sl_ints[S_BINDS] = s.sl_ints[S_EVICTS] = s.sl_ints[S_NOTES] = 0
    fair = s.sl_arg[A_FAIR_SHARE] > 0
    period = s.sl_arg[A_CALC_PERIOD]
    tick = math.floor(now / period) * period
    if fair and s.sl_ints[S_FAIR_TICK] != math.floor(now / period):
        # the usage changes only at a tick: a run started since adds 0, one ended since adds what
        # it would running; kept unless computed at the tick itself (a run may end then)
        decayed_usage(s, now)
        tree_usage(s)
        if s.sl_arg[A_FAIR_TREE] > 0:
            fair_tree(s)
        else:
            classic_fair_share(s)
        s.sl_ints[S_FAIR_TICK] = math.floor(now / period) if now > tick else -1
    dbd = s.sl_arg[A_SLURMDBD] > 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        s.ss_susp[j] = s.suspended[j]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            s.ss_status[t], s.ss_node[t] = s.status[t], s.node[t]
        s.ss_start[j] = math.nan
        if running(s, j):  # the earliest start of its open pod runs (nanmin)
            for t in range(s.j_lo[j], s.j_lo[j + 1]):
                r = s.open_run[t]
                if r >= 0 and not s.runs[r, 2] >= s.ss_start[j]:
                    s.ss_start[j] = s.runs[r, 2]
        s.ss_has[j] = pending(s, j)
        if not s.ss_has[j]:
            continue
        creation = s.j_creation[j]
        accrue = creation if s.sl_arg[A_ACCRUE_ALWAYS] > 0 else max(creation, s.eligible[j])
        at = max(tick, accrue)
        age = 0.0
        if dbd and s.sl_arg[A_WEIGHT_AGE]:
            max_age = s.sl_arg[A_MAX_AGE]
            age = min(1.0, max(0.0, at - accrue) / max_age) if max_age > 0 else 1.0
        fs = s.fsf[s.j_assoc[j]] if dbd and fair else 0.0
        s.ss_age[j] = s.sl_arg[A_WEIGHT_AGE] * age
        s.ss_fs[j] = s.sl_arg[A_WEIGHT_FAIRSHARE] * fs
        base = s.j_base[j]
        total = s.ss_age[j] + s.ss_fs[j] + base[0] + base[1] + base[2] + base[3]
        s.ss_prio[j] = max(1, int(total))


@jit
def build_queue(s):
    """build_job_queue + sort_job_queue2 into ``s.ss_queue``: pending jobs with factors by partition
    PriorityTier, priority, then submit time and job id (the rank); their count."""
    n = 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if s.ss_has[j] and pending(s, j):
            s.ss_queue[n] = j
            n += 1
    jobs = s.ss_queue[:n].copy()
    jobs = jobs[np.argsort(s.j_rank[jobs], kind="mergesort")]
    jobs = jobs[np.argsort(-s.ss_prio[jobs], kind="mergesort")]
    jobs = jobs[np.argsort(-s.j_tier[jobs], kind="mergesort")]
    copy_row(s.ss_queue[:n], jobs)
    return n


# -------------------------------------------------------------------------------- nodes


@jit
def free_now(s, out):
    """Idle resources per node into ``out``; a suspended job's CPUs count as free."""
    n_nodes, n_res = out.shape
    for n in range(n_nodes):
        for r in range(n_res):
            out[n, r] = s.node_alloc[n, r] - s.ss_used[n, r]
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if s.ss_susp[j]:
            for t in range(s.j_lo[j], s.j_lo[j + 1]):
                if s.ss_node[t] >= 0:
                    out[s.ss_node[t], CPU] += s.t_req[t, CPU]


@jit
def add_held(s, j, out, releasing_only):
    """``out`` plus what job ``j`` holds per node (only its terminating pods' share)."""
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        st, n = s.ss_status[t], s.ss_node[t]
        if holding(st) and n >= 0 and (not releasing_only or st == RELEASING):
            for r in range(out.shape[1]):
                out[n, r] += s.t_req[t, r]


@jit
def add_freed(s, v, out):
    """``out`` plus what a victim gives back: everything, or only its CPUs when it is suspended."""
    suspend = s.j_mode[v] == SUSPEND
    for t in range(s.j_lo[v], s.j_lo[v + 1]):
        st, n = s.ss_status[t], s.ss_node[t]
        if holding(st) and n >= 0 and st != RELEASING:
            if suspend:
                out[n, CPU] += s.t_req[t, CPU]
            else:
                for r in range(out.shape[1]):
                    out[n, r] += s.t_req[t, r]


@jit
def take(s, j, free):
    """``free`` less what the placement in ``s.place`` takes."""
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        n = s.place[t]
        for r in range(free.shape[1]):
            free[n, r] -= s.t_req[t, r]


@jit
def select_nodes(s, j, free, allowed):
    """select/cons_tres: each pod, in rank order, on the lowest-index allowed node with its request
    free and no other pod of its role; ``s.place`` per task. False if the job does not fit."""
    work = s.fr[5]
    copy_rows(work, free)
    stamp = new_stamp(s)
    n_nodes, n_res = work.shape
    for k in range(s.j_lo[j], s.j_lo[j + 1]):
        t = s.t_order[k]
        m, c, req = s.t_pair[t] - s.j_pair[j], s.t_class[t], s.t_req[t]
        choice = -1
        for n in range(n_nodes):
            if not (allowed[n] and s.class_ok[c, n] and s.node_sched[n]) or s.taken[m, n] == stamp:
                continue
            fits = True
            for r in range(n_res):
                if r != PODS and not work[n, r] - req[r] >= -1e-9:
                    fits = False
                    break
            if fits:
                choice = n
                break
        if choice < 0:
            return False
        s.place[t] = choice
        s.taken[m, choice] = stamp
        for r in range(n_res):
            work[choice, r] -= req[r]
    return True


@jit
def placement_nodes(s, j, out, offset):
    """The placement's nodes, sorted and distinct, into ``out[offset:]``; their count."""
    count = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if offset + count >= out.size:
            s.ints[I_OVERFLOW] = 1
            return 0
        out[offset + count] = s.place[t]
        count += 1
    sort_prefix(out[offset:], count)
    kept = 0
    for i in range(count):
        if kept == 0 or out[offset + i] != out[offset + kept - 1]:
            out[offset + kept] = out[offset + i]
            kept += 1
    return kept


# -------------------------------------------------------------------------------- decisions


@jit
def add_note(s, kind, j, code, at):
    k = s.sl_ints[S_NOTES]
    s.sn[k, 0], s.sn[k, 1], s.sn[k, 2] = kind, j, code
    s.sn_at[k] = at
    s.sl_ints[S_NOTES] = k + 1


@jit
def add_bind(s, t, n, msg, a, b):
    push_row(s.sb, s.sl_ints, S_BINDS, t, n, msg, a, b)


@jit
def start_job(s, now, j):
    """Place the job's pods as ``s.place`` says and send them to the binder (Binding)."""
    offset = s.sl_ints[S_NODE_LISTS]
    count = placement_nodes(s, j, s.nl, offset)
    s.sl_ints[S_NODE_LISTS] = offset + count
    for k in range(s.j_lo[j], s.j_lo[j + 1]):
        t = s.t_order[k]
        n = s.place[t]
        s.ss_node[t], s.ss_status[t] = n, BINDING
        for r in range(s.ss_used.shape[1]):
            s.ss_used[n, r] += s.t_req[t, r]
        add_bind(s, t, n, MSG_ALLOCATE, offset, count)
    s.ss_start[j] = now


@jit
def resume(s, now, free):
    """The gang scheduler resumes a suspended job once its CPUs are free again on its nodes; from
    then on the session sees it running."""
    n_live = s.ints[I_LIVE]
    jobs = s.live[:n_live].copy()
    jobs = jobs[np.argsort(s.j_rank[jobs], kind="mergesort")]
    for j in jobs:
        if not s.ss_susp[j]:
            continue
        s.need[:] = 0.0
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            s.need[s.ss_node[t]] += s.t_req[t, CPU]
        fits = True
        for n in range(s.need.size):
            if not free[n, CPU] >= s.need[n] - 1e-9:
                fits = False
                break
        if not fits:
            continue
        for n in range(s.need.size):
            free[n, CPU] -= s.need[n]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            s.ss_status[t] = BINDING
            add_bind(s, t, s.ss_node[t], MSG_RESUMED, 0, 0)
        s.ss_susp[j] = False
        s.ss_start[j] = now


@jit
def not_runnable(s, now, j, stamp):
    """The reason code a job may not be considered now (BeginTime, PartitionNodeLimit, the QOS
    limits against the running jobs and those ``stamp`` started), or -1."""
    if s.eligible[j] > now:
        return R_BEGIN_TIME
    p = s.j_part[j]
    n_tasks = s.j_lo[j + 1] - s.j_lo[j]
    if n_tasks > s.part_count[p] or 0 <= s.part_max[p] < n_tasks:
        return R_PARTITION_NODES
    if not s.sl_arg[A_ENFORCE] > 0:
        return -1
    q = s.j_qos[j]
    group, user = s.tres_sum[0], s.tres_sum[1]
    group[:] = 0.0
    user[:] = 0.0
    for i in range(s.ints[I_LIVE]):
        other = s.live[i]
        if s.j_qos[other] != q or not (running(s, other) or s.started[other] == stamp):
            continue
        for k in range(4):
            group[k] += s.j_tres[other, k]
        if s.j_assoc[other] == s.j_assoc[j]:
            for k in range(4):
                user[k] += s.j_tres[other, k]
    for k in range(4):
        limit = s.qos_grp[q, k]
        if not math.isnan(limit) and group[k] + s.j_tres[j, k] > limit + 1e-9:
            return R_GRP + k
    for k in range(4):
        limit = s.qos_user[q, k]
        if not math.isnan(limit) and user[k] + s.j_tres[j, k] > limit + 1e-9:
            return R_USER + k
    return -1


# -------------------------------------------------------------------------------- preemption


@jit
def can_preempt(s, j, v):
    """preempt_p_preemptable: a lower PriorityTier (partition_prio) or a QOS in the preemptor's
    Preempt list (qos, with slurmdbd); and a victim PreemptMode that is not OFF."""
    if s.j_mode[v] == OFF:
        return False
    if s.sl_arg[A_PREEMPT_TYPE] == 1:
        return s.j_tier[v] < s.j_tier[j]
    return s.sl_arg[A_SLURMDBD] > 0 and s.qos_preempt[s.j_qos[j], s.j_qos[v]]


@jit
def fill(s, j, base, allowed, order, n):
    """Victims of ``order[:n]`` removed one by one until the job fits; how many it took (0: never)."""
    room = s.fr[3]
    copy_rows(room, base)
    for i in range(n):
        add_freed(s, order[i], room)
        if select_nodes(s, j, room, allowed):
            return i + 1
    return 0


@jit
def mark_chosen(s, j, fitted):
    """The placement's nodes marked in ``s.chosen`` under a fresh stamp (none when not ``fitted``)."""
    stamp = new_stamp(s)
    if fitted:
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            s.chosen[s.place[t]] = stamp
    return stamp


@jit
def on_chosen(s, v, stamp):
    """How many of the victim's pods are on the chosen nodes."""
    count = 0
    for t in range(s.j_lo[v], s.j_lo[v + 1]):
        if s.ss_node[t] >= 0 and s.chosen[s.ss_node[t]] == stamp:
            count += 1
    return count


@jit
def preemptees(s, j, free, allowed):
    """Slurmctld.preemptees into ``s.victims``: candidates in preemption order removed until the
    job fits; then the one that completed the fit first, the others by how many of the chosen
    nodes they hold, and the same pass again. The victim count."""
    base = s.fr[2]
    copy_rows(base, free)
    n_cand = 0
    for i in range(s.ints[I_LIVE]):
        other = s.live[i]
        add_held(s, other, base, True)
        if other == j or not running(s, other) or not can_preempt(s, j, other):
            continue
        for t in range(s.j_lo[other], s.j_lo[other + 1]):
            n = s.ss_node[t]
            if n >= 0 and allowed[n] and s.ss_status[t] != RELEASING:
                s.candidate[n_cand] = other
                n_cand += 1
                break
    cand = s.candidate[:n_cand].copy()
    cand = cand[np.argsort(s.j_rank[cand], kind="mergesort")]
    cand = cand[np.argsort(s.j_pprio[cand], kind="mergesort")]
    if select_nodes(s, j, base, allowed):
        return 0
    k = fill(s, j, base, allowed, cand, n_cand)
    if k == 0:
        return 0
    stamp = mark_chosen(s, j, True)
    rest = cand[:k - 1].copy()
    counts = np.zeros(k - 1, np.int64)
    for i in range(k - 1):
        counts[i] = -on_chosen(s, rest[i], stamp)
    rest = rest[np.argsort(counts, kind="mergesort")]
    order = s.order
    order[0] = cand[k - 1]
    copy_row(order[1:k], rest)
    copy_row(order[k:n_cand], cand[k:])
    k2 = fill(s, j, base, allowed, order, n_cand)
    stamp = mark_chosen(s, j, k2 > 0)
    n_victims = 0
    for i in range(k2):
        if on_chosen(s, order[i], stamp) > 0:
            s.victims[n_victims] = order[i]
            n_victims += 1
    return n_victims


@jit
def how_stopped(s, v):
    """REQUEUE (when the job's --requeue or JobRequeue allows it, else cancel), CANCEL or SUSPEND."""
    mode = s.j_mode[v]
    if mode == SUSPEND:
        return HOW_SUSPEND
    if mode == REQUEUE and s.j_requeue[v]:
        return HOW_REQUEUE
    return HOW_CANCEL


@jit
def preempt(s, j, n_victims):
    """Stop the victims (their running pods Releasing unless suspended); True if all suspend."""
    all_suspend = True
    for i in range(n_victims):
        v = s.victims[i]
        how = how_stopped(s, v)
        all_suspend &= s.j_mode[v] == SUSPEND
        for t in range(s.j_lo[v], s.j_lo[v + 1]):
            if holding(s.ss_status[t]) and s.ss_status[t] != RELEASING:
                if how != HOW_SUSPEND:
                    s.ss_status[t] = RELEASING
                k = s.sl_ints[S_EVICTS]
                s.se[k, 0], s.se[k, 1], s.se[k, 2] = t, j, how
                s.sl_ints[S_EVICTS] = k + 1
    return all_suspend


# -------------------------------------------------------------------------------- the two passes


@jit
def schedule(s, now):
    """Slurmctld.schedule: jobs in strict order; one that cannot start gets Resources, blocks its
    partition (later jobs there get Priority) and takes its nodes from the rest of the pass."""
    free = s.fr[0]
    free_now(s, free)
    resume(s, now, free)
    copy_row(s.avail, s.node_sched)
    s.failed[:] = False
    stamp = new_stamp(s)
    for i in range(build_queue(s)):
        j = s.ss_queue[i]
        p = s.j_part[j]
        add_note(s, NOTE_PRIORITY, j, 0, 0.0)
        reason = not_runnable(s, now, j, stamp)
        if reason >= 0:
            add_note(s, NOTE_PENDING, j, reason, 0.0)
            continue
        if s.failed[p]:
            add_note(s, NOTE_PENDING, j, R_PRIORITY, 0.0)
            continue
        count = 0
        for n in range(s.avail.size):
            s.allowed[n] = s.part_nodes[p, n] and s.avail[n]
            count += s.allowed[n]
        if count >= s.j_lo[j + 1] - s.j_lo[j] and select_nodes(s, j, free, s.allowed):
            start_job(s, now, j)
            take(s, j, free)
            s.started[j] = stamp
            continue
        n_victims = preemptees(s, j, free, s.allowed) if s.sl_arg[A_PREEMPT_TYPE] > 0 else 0
        if n_victims:
            room = s.fr[1]
            copy_rows(room, free)
            for k in range(n_victims):
                add_freed(s, s.victims[k], room)
            if preempt(s, j, n_victims):
                # the gang scheduler suspends them and the job runs on their CPUs at once
                for k in range(n_victims):
                    s.ss_susp[s.victims[k]] = True
                select_nodes(s, j, room, s.allowed)
                start_job(s, now, j)
                take(s, j, room)
                copy_rows(free, room)
                s.started[j] = stamp
                continue
        add_note(s, NOTE_PENDING, j, R_RESOURCES, 0.0)
        s.failed[p] = True
        for n in range(s.avail.size):
            s.avail[n] &= not s.part_nodes[p, n]


@jit
def expected_ends(s):
    """Running jobs and when they must end (start + time limit), soonest first; their count."""
    n = 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if running(s, j):
            s.ends_j[n], s.ends_t[n] = j, s.ss_start[j] + s.j_limit_bf[j]
            n += 1
    order = np.argsort(s.ends_t[:n], kind="mergesort")
    copy_row(s.ends_j[:n], s.ends_j[:n][order])
    copy_row(s.ends_t[:n], s.ends_t[:n][order])
    return n


@jit
def backfill(s, now):
    """Slurmctld.backfill: jobs in priority order (at most bf_max_job_test), each at its earliest
    start given the running jobs' expected ends and the reservations so far; started if that is
    now, else its nodes reserved from then for its time limit (bf_resolution, bf_window)."""
    resolution, window = s.sl_arg[A_RESOLUTION], s.sl_arg[A_WINDOW]
    n_res = 0
    s.rs_lo[0] = 0
    stamp = new_stamp(s)
    tested = 0
    free = s.fr[4]
    for i in range(build_queue(s)):
        j = s.ss_queue[i]
        if tested >= s.sl_arg[A_MAX_JOB_TEST]:
            break
        if not_runnable(s, now, j, stamp) >= 0:
            continue
        tested += 1
        limit, p = s.j_limit_bf[j], s.j_part[j]
        n_ends = expected_ends(s)
        n_times = 0
        s.times[n_times] = now
        n_times += 1
        for e in range(n_ends):
            if s.ends_t[e] > now:
                s.times[n_times] = s.ends_t[e]
                n_times += 1
        for r in range(n_res):
            s.times[n_times] = s.rs_end[r]
            n_times += 1
        for at in np.unique(s.times[:n_times]):
            if at > now + window:
                break
            end = at + limit
            for n in range(s.allowed.size):
                s.allowed[n] = s.part_nodes[p, n] and s.node_sched[n]
            for r in range(n_res):
                if s.rs_start[r] <= end and s.rs_end[r] > at:
                    for k in range(s.rs_lo[r], s.rs_lo[r + 1]):
                        s.allowed[s.rs_nodes[k]] = False
            free_now(s, free)
            for e in range(n_ends):
                if s.ends_t[e] <= at:
                    add_held(s, s.ends_j[e], free, False)
            if not select_nodes(s, j, free, s.allowed):
                continue
            if at <= now:
                start_job(s, now, j)
                s.started[j] = stamp
            else:
                count = placement_nodes(s, j, s.rs_nodes, s.rs_lo[n_res])
                start = math.floor(at / resolution) * resolution
                stop = math.floor(end / resolution) * resolution
                s.rs_start[n_res], s.rs_end[n_res] = start, max(stop, start + resolution)
                s.rs_lo[n_res + 1] = s.rs_lo[n_res] + count
                add_note(s, NOTE_START_TIME, j, n_res, at)
                n_res += 1
            break


@jit
def wake_at(s, now):
    """The earliest BeginTime of a waiting job, or the next PriorityCalcPeriod tick when priorities
    change with time; inf = none."""
    wake, waiting = math.inf, False
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if pending(s, j):
            waiting = True
            if s.eligible[j] > now:
                wake = min(wake, s.eligible[j])
    if s.sl_arg[A_TIME_DEPENDENT] > 0 and waiting:
        period = s.sl_arg[A_CALC_PERIOD]
        wake = min(wake, (math.floor(now / period) + 1) * period)
    return wake


# -------------------------------------------------------------------------------- the clock


@jit
def round_even(x):
    """``%.0f``'s value: x rounded to an integer, half to even (exact for doubles)."""
    low = math.floor(x)
    frac = x - low
    if frac > 0.5 or (frac == 0.5 and low % 2 != 0):
        return low + 1.0
    return low


@jit
def g_key(x):
    """``%g``'s value: x at 6 significant digits (as exponent, mantissa), to tell two texts apart."""
    if x == 0 or not math.isfinite(x):
        return 0.0, x
    e = math.floor(math.log10(abs(x)))
    mantissa = round_even(x / 10.0 ** (e - 5))
    if abs(mantissa) >= 1e6:
        e, mantissa = e + 1, round_even(mantissa / 10.0)
    return float(e), mantissa


@jit
def new_value_row(s):
    k = s.sl_ints[S_VALUES]
    if k >= s.nv.shape[0]:
        s.ints[I_OVERFLOW] = 1
        return -1
    s.sl_ints[S_VALUES] = k + 1
    return k


@jit
def log_notes(s, now):
    """The session's notes, each logged when it differs from the job's last one of its kind."""
    for k in range(s.sl_ints[S_NOTES]):
        kind, j, code = s.sn[k, 0], s.sn[k, 1], s.sn[k, 2]
        if kind == NOTE_PENDING:
            if s.ln_pend[j] != code:
                s.ln_pend[j] = code
                log(s, now, EV_PENDING, j, -1, -1, MSG_PENDING, code, 0)
        elif kind == NOTE_PRIORITY:
            base, last = s.j_base[j], s.ln_prio[j]
            values = (s.ss_age[j], s.ss_fs[j], base[0], base[1], base[2], base[3])
            same = last[0] == s.ss_prio[j]
            for i in range(6):
                same &= last[i + 1] == round_even(values[i])
            if same:
                continue
            row = new_value_row(s)
            if row < 0:
                return
            last[0] = s.ss_prio[j]
            for i in range(6):
                last[i + 1] = round_even(values[i])
                s.nv[row, i] = values[i]
            log(s, now, EV_PRIORITY, j, -1, -1, MSG_PRIORITY, row, 0)
        else:
            at, lo, hi = s.sn_at[k], s.rs_lo[code], s.rs_lo[code + 1]
            same = s.ln_count[j] == hi - lo and (s.ln_at[j] == at or g_key(s.ln_at[j]) == g_key(at))
            for i in range(hi - lo):
                same = same and s.ln_nodes[s.j_lo[j] + i] == s.rs_nodes[lo + i]
            if same:
                continue
            row = new_value_row(s)
            offset = s.sl_ints[S_NODE_LISTS]
            if row < 0 or offset + hi - lo > s.nl.size:
                s.ints[I_OVERFLOW] = 1
                return
            s.ln_at[j], s.ln_count[j] = at, hi - lo
            for i in range(hi - lo):
                s.ln_nodes[s.j_lo[j] + i] = s.nl[offset + i] = s.rs_nodes[lo + i]
            s.sl_ints[S_NODE_LISTS] = offset + hi - lo
            s.nv[row, 0], s.nv[row, 1], s.nv[row, 2] = at, offset, hi - lo
            log(s, now, EV_START_TIME, j, -1, -1, MSG_START_TIME, row, 0)


@jit
def maybe_start(s, now, j):
    """The job's work runs once its pods run (not while suspended); its completion, and its time
    limit's end when that comes first, are scheduled."""
    if not math.isnan(s.run_start[j]) or s.suspended[j]:
        return
    n_running, speed = 0, math.inf
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING:
            n_running += 1
            speed = min(speed, s.node_speed[s.node[t]])
    if n_running < max(1, s.j_min[j]):
        return
    s.run_start[j] = now
    if math.isnan(s.start_t[j]):
        s.start_t[j] = now
    if not s.j_uses_speed[j]:
        speed = 1.0
    setup = s.j_restart[j] if s.restarts[j] else 0.0
    if s.rt_class[j] >= 0:  # the job progress model (core_clock.maybe_start)
        speed = s.rate[j] = rate_of(s, j)
        s.rate_since[j] = now + setup
    remaining = (s.j_work[j] - s.work_done[j]) / speed
    s.version[j] += 1
    push_event(s, now + setup + remaining, FINISH, j, s.version[j])
    limit = s.j_limit[j] - s.limit_used[j]
    if setup + remaining > limit:
        push_event(s, now + limit, TIMEOUT, j, s.version[j])
    log(s, now, EV_STARTED, j, -1, -1, MSG_PODS_RUNNING, n_running, 0)


@jit
def time_out(s, now, j):
    """The job reached its time limit: killed (state Timeout); the work so far is not finished."""
    done = s.work_done[j] + max(0.0, now - s.run_start[j])
    s.version[j] += 1
    finish_as(s, now, j, EV_TIMEOUT, MSG_TIME_LIMIT)
    s.work_done[j] = min(done, s.j_work[j])
    s.final[j] = FINAL_TIMEOUT


@jit
def preempt_job(s, now, j, by, how, lost):
    """A whole job stopped (clock.Simulation._preempt_job): preempted by job ``by`` (``lost`` < 0)
    or killed by the failure of node ``lost`` (clock.Simulation._node_failed: no grace period, ended
    as NodeFail); requeued (pods deleted, pending again from now + requeue_hold), cancelled (the
    job ends) or suspended (pods keep their nodes, work and time limit pause). A suspended job
    requeued or cancelled loses its work since its last checkpoint."""
    msg, a = MSG_PREEMPTED, by
    if lost >= 0:
        msg, a = MSG_NODE_FAIL, lost
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING:
            s.evictions[j] += 1
            log(s, now, EV_EVICTED, j, t, s.node[t], msg, a, how)
    if not math.isnan(s.run_start[j]):
        s.limit_used[j] += now - s.run_start[j]
        if how == HOW_SUSPEND:
            if s.rt_class[j] >= 0:
                s.work_done[j] = progress(s, now, j)
            else:
                s.work_done[j] += now - s.run_start[j] - (s.j_restart[j] if s.restarts[j] else 0.0)
            s.run_start[j] = math.nan
            s.version[j] += 1
        else:
            stop_work(s, now, j)
    elif s.suspended[j] and how != HOW_SUSPEND:
        interval = s.j_ckpt[j]
        kept = math.floor(s.work_done[j] / interval) * interval if math.isfinite(interval) else 0.0
        s.lost_work[j] += s.work_done[j] - kept
        s.work_done[j] = kept
    if how == HOW_SUSPEND:
        s.suspended[j] = True
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.status[t] == RUNNING:
                close_run(s, t, now)
        log(s, now, EV_SUSPENDED, j, -1, -1, MSG_PREEMPTED, by, how)
        return
    s.suspended[j] = False
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING:
            terminate_in(s, now, t, 0.0 if lost >= 0 else s.j_grace[j])
    if how == HOW_REQUEUE:
        s.restarts[j] += 1
        s.limit_used[j] = 0.0
        s.eligible[j] = now + s.sl_arg[A_REQUEUE_HOLD]
        log(s, now, EV_RESTARTING, j, -1, -1, MSG_NODE_REQUEUED if lost >= 0 else MSG_REQUEUED, a, how)
        return
    s.done[j] = True
    set_job_phase(s, j, PH_COMPLETED)
    s.end_t[j] = now
    s.final[j] = FINAL_NODE_FAIL if lost >= 0 else FINAL_PREEMPTED
    log(s, now, EV_NODE_FAIL if lost >= 0 else EV_CANCELLED, j, -1, -1, msg, a, how)


@jit
def node_event(s, now, e):
    """Node event ``e`` (clock.Simulation._node_event under Slurm): the node's DOWN and DRAIN
    flags and whether it takes jobs; a failed node kills every job with a node there
    (:func:`preempt_job`: requeued when ``j_requeue`` allows it, else NodeFail), in task order;
    a drained one keeps its jobs."""
    n, what = s.ne_node[e], s.ne_kind[e]
    if what == FAIL or what == RECOVER:
        s.node_down[n] = what == FAIL
    else:
        s.node_cordon[n] = what == CORDON or what == DRAIN
    s.node_sched[n] = not (s.node_down[n] or s.node_cordon[n])
    log(s, now, EV_NODE + what, -1, -1, n, MSG_NONE, 0, 0)
    if what != FAIL:
        return
    for t in range(s.status.size):
        if s.node[t] == n and s.status[t] == RUNNING:
            j = s.t_job[t]
            preempt_job(s, now, j, -1, HOW_REQUEUE if s.j_requeue[j] else HOW_CANCEL, n)


@jit
def session_once(s, now, sched, backfill_due):
    """One slurmctld session on the live jobs (the actions due), its decisions applied; True if
    it changed anything (clock.Simulation.session_once)."""
    if s.ints[I_LIVE] == 0:
        return False
    s.ints[I_SESSIONS] += 1
    open_session(s, now)
    if sched:
        schedule(s, now)
    if backfill_due:
        backfill(s, now)
    wake = wake_at(s, now)
    changed = False
    for k in range(s.sl_ints[S_BINDS]):
        t = s.sb[k, 0]
        s.suspended[s.t_job[t]] = False  # binding a suspended job's pods resumes it
        bind(s, now, t, s.sb[k, 1], s.sb[k, 2], s.sb[k, 3], s.sb[k, 4])
        changed = True
    session = s.ints[I_SESSIONS]
    for k in range(s.sl_ints[S_EVICTS]):
        j = s.t_job[s.se[k, 0]]
        if s.stopped[j] != session:
            s.stopped[j] = session
            preempt_job(s, now, j, s.se[k, 1], s.se[k, 2], -1)
        changed = True
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if s.ss_has[j] and math.isnan(s.start_t[j]):
            s.prio[j] = s.ss_prio[j]  # as it stood until the job started
    log_notes(s, now)
    if now < wake < math.inf and not wake_queued(s, wake):
        push_event(s, wake, WAKE, -1, 0)
    n = s.ints[I_TO_START]
    sort_prefix(s.to_start, n)
    for i in range(n):
        j = s.to_start[i]
        s.start_mark[j] = False
        maybe_start(s, now, j)
    s.ints[I_TO_START] = 0
    return changed


@jit
def release(s, now, t):
    """A pod's grace period ended (``core_clock.released``); a requeued batch job's pods come back
    at once."""
    released(s, now, t)
    j = s.t_job[t]
    if not s.done[j]:
        set_created(s, j, True)


@jit
def apply_event(s, now, slot):
    """A clock event (``core_clock.clock_event``), a job reaching its time limit (TIMEOUT) or a
    node event (NODE)."""
    if s.h_key[slot, 0] == TIMEOUT:
        return ended(s, now, slot, time_out)
    if s.h_key[slot, 0] == NODE:
        node_event(s, now, s.h_key[slot, 1])
        return True
    return clock_event(s, now, slot, submit, release)


@jit
def settled(s, now):
    """:func:`core_clock.quiet` and no job waits for its BeginTime (clock.Simulation._settled)."""
    if not quiet(s):
        return False
    for j in range(s.done.size):
        if s.eligible[j] > now:
            return False
    return True


@jit
def next_session(s, now):
    """When the next action is due (each one's time in ``s.sl_due``): once something changed, at
    the instant of an event if it runs on events, else on its period's grid one period after its
    last run."""
    first = math.inf
    for a in range(s.sl_actions.size):
        s.sl_due[a] = math.inf
        if s.sl_dirty[a]:
            grid = on_grid(now, s.sl_last[a], s.sl_period[a])
            s.sl_due[a] = now if s.sl_on_event[a] and s.sl_evented[a] else grid
        first = min(first, s.sl_due[a])
    return first


@jit
def changed(s):
    s.sl_dirty[:] = True
    s.sl_evented[:] = True


@jit
def session(s, now):
    """One session of the actions due now; each runs again once something changes."""
    sched = backfill_due = False
    for a in range(s.sl_actions.size):
        if s.sl_due[a] == now:
            if s.sl_actions[a] == SCHED:
                sched = True
            else:
                backfill_due = True
    touched = session_once(s, now, sched, backfill_due)
    for a in range(s.sl_actions.size):
        if s.sl_due[a] == now:
            s.sl_last[a], s.sl_dirty[a], s.sl_evented[a] = now, False, False
    if touched:
        s.sl_dirty[:] = True


@entry
def run_core(s, budget):
    """The run of a Slurm scenario (Simulation.run: :func:`core_clock.clock_loop` with each action
    on its own clock, stopping once :func:`settled`), at most ``budget`` steps of it; True when it
    is over."""
    push_node_events(s)
    return clock_loop(s, budget, next_session, settled, apply_event, changed, session, always_room, always_room)


# -------------------------------------------------------------------------------- driver


def unsupported(compiled) -> str | None:
    """What of a Slurm scenario the core does not simulate, or None."""
    if compiled.quotas is not None:
        return "ResourceQuota admission under Slurm"
    if any(job.status is not None for job in compiled.source.jobs):
        return "job status snapshots under Slurm"
    return None


def _tree(problem) -> dict:
    """The association tree: children (CSR, in index order), post- and preorder, level shares."""
    parent = problem.assoc_parent
    n = len(parent)
    kids = [[] for _ in range(n)]
    for a in range(n):
        if parent[a] >= 0:
            kids[parent[a]].append(a)
    post, pre, stack = [], [], [(0, False)]
    while stack:
        a, expanded = stack.pop()
        if expanded:
            post.append(a)
            continue
        pre.append(a)
        stack.append((a, True))
        stack.extend((c, False) for c in reversed(kids[a]))
    shares = problem.assoc_shares
    level = np.array([float(sum(shares[c] for c in kids[parent[a]] if shares[c] >= 0)) if a else 0.0
                      for a in range(n)])
    return {"a_shares": shares.astype(float), "a_level": level, "a_user": problem.assoc_is_user.astype(bool),
            "a_parent": parent.astype(np.int64),
            "a_kid_lo": np.concatenate([[0], np.cumsum([len(k) for k in kids])]).astype(np.int64),
            "a_kids": np.array([c for k in kids for c in k], np.int64), "a_post": np.array(post, np.int64),
            "a_pre": np.array(pre[1:], np.int64)}


def slurm_arrays(c) -> dict:
    """The Slurm static arrays of a compiled scenario (:data:`SLURM_STATIC`)."""
    p = c.problem
    policy, args = p.policy, p.policy.slurm
    lo = c.job_pods.astype(np.int64)
    tasks = [[SimpleNamespace(request=p.task_request[t]) for t in range(lo[j], lo[j + 1])] for j in range(p.n_jobs)]
    base = np.zeros((p.n_jobs, 4))
    for j in range(p.n_jobs):
        f = priority_factors(p, SimpleNamespace(tasks=tasks[j], index=j), 0.0, 0.0, 0.0)
        base[j] = f.job_size, f.partition, f.qos, f.tres
    part_mode = p.partition_preempt_mode[p.job_partition]
    qos_mode = p.qos_preempt_mode[p.job_qos]
    mode = part_mode if args.preempt_type == 1 else qos_mode
    mode = np.where(mode == PreemptMode.UNSET, args.preempt_mode, mode).astype(np.int64)
    high = p.partition_tier[p.job_partition] if args.preempt_type == 1 else p.qos_priority[p.job_qos]
    n_tasks = np.diff(lo)
    flags = args.flags
    arg = np.zeros(N_ARGS)
    arg[[A_RESOLUTION, A_WINDOW, A_MAX_JOB_TEST]] = args.bf_resolution, args.bf_window, args.bf_max_job_test
    arg[[A_WEIGHT_AGE, A_WEIGHT_FAIRSHARE, A_MAX_AGE]] = args.weight_age, args.weight_fairshare, args.max_age
    arg[[A_CALC_PERIOD, A_DECAY, A_DAMPENING]] = args.calc_period, decay_factor(args.decay_half_life), args.dampening
    arg[[A_SLURMDBD, A_ENFORCE]] = args.slurmdbd, args.enforce_limits
    arg[[A_PREEMPT_TYPE, A_REQUEUE_HOLD]] = args.preempt_type, policy.requeue_hold
    arg[[A_ACCRUE_ALWAYS, A_FAIR_TREE]] = "ACCRUE_ALWAYS" in flags, "NO_FAIR_TREE" not in flags
    arg[A_FAIR_SHARE] = args.slurmdbd and bool(args.weight_fairshare)
    arg[A_TIME_DEPENDENT] = args.slurmdbd and bool(args.weight_age or args.weight_fairshare)
    arg[A_USERS] = int(p.assoc_is_user.sum())
    limit = p.job_time_limit.astype(float)
    return {
        "sl_actions": policy.actions.astype(np.int64), "sl_period": policy.action_period.astype(float),
        "sl_on_event": policy.action_on_event.astype(bool), "sl_arg": arg,
        "j_part": p.job_partition.astype(np.int64), "j_qos": p.job_qos.astype(np.int64),
        "j_assoc": p.job_assoc.astype(np.int64), "j_limit": limit,
        "j_limit_bf": np.where(np.isfinite(limit), limit, YEAR_SECONDS), "j_requeue": p.job_requeue.astype(bool),
        "j_tier": p.partition_tier[p.job_partition].astype(np.int64), "j_mode": mode,
        "j_pprio": ((np.minimum(high, 0xFFFF).astype(np.int64) << 16) + np.minimum(n_tasks, 0xFFFF)).astype(np.int64),
        "j_tres": np.array([job_tres(p, tasks[j]) for j in range(p.n_jobs)], float).reshape(p.n_jobs, 4),
        "j_base": base,
        "t_order": np.concatenate([lo[j] + np.argsort(p.task_rank[lo[j]:lo[j + 1]], kind="stable")
                                   for j in range(p.n_jobs)] or [np.zeros(0)]).astype(np.int64),
        "part_nodes": np.ascontiguousarray(p.partition_nodes, bool),
        "part_count": p.partition_nodes.sum(axis=1).astype(np.int64),
        "part_max": p.partition_max_nodes.astype(np.int64),
        "qos_preempt": np.ascontiguousarray(p.qos_preempt, bool).reshape(len(p.qos_names), len(p.qos_names)),
        "qos_grp": np.ascontiguousarray(p.qos_grp_tres, float),
        "qos_user": np.ascontiguousarray(p.qos_max_tres_per_user, float),
        **_tree(p),
    }


def _slurm_mutable(static: dict, events: int, scale: float) -> dict:
    """Fresh Slurm books and scratch; ``events`` is the size of the event buffer (E), which ``scale``
    sets (the others have the run's sizes)."""
    sizes = {"J": len(static["j_queue"]), "T": len(static["t_job"]), "N": len(static["node_alloc"]),
             "R": len(static["total"]), "Pn": len(static["part_count"]), "As": len(static["a_shares"]),
             "M": int(np.diff(static["j_pair"]).max()) if len(static["j_queue"]) else 1, "E": events,
             "A": len(static["sl_actions"])}
    arrays = fresh(SLURM_MUTABLE, sizes)
    arrays["prio"][:] = static["j_prio"]
    arrays["sl_ints"][S_FAIR_TICK] = -1  # no fair share computed yet
    return arrays


def run(compiled, static: dict, scale: float = 1.0, progress=None) -> RunRecord:
    """Run a compiled Slurm scenario on the core (buffers sized by ``scale``, grown on need; ``progress``
    told between slices, ``core.in_slices``)."""
    mutable, slurm = run_grown(in_slices(run_core, progress), SlurmFields, static, scale, _slurm_mutable)
    return _record(compiled, mutable, slurm)


def _record(c, m: dict, sl: dict) -> RunRecord:
    done = m["done"]
    state = np.array(FINAL_STATES, object)[sl["final"]]
    return record(m, lambda time, coded: _events(c, time, coded, sl),
                  state=np.where(sl["suspended"] & ~done, "Suspended", state), priority=sl["prio"])


def _events(c, time: np.ndarray, coded: np.ndarray, sl: dict) -> list[tuple]:
    """(time, kind, job, task, node, reason, message) tuples, with the reference engine's texts."""
    p = c.problem
    kind, job, task, node, msg, a, b = (coded[:, k].astype(np.int64).tolist() for k in range(7))
    times = time.tolist()
    names, nodes, values, lists = p.job_names, p.node_names, sl["nv"], sl["nl"]
    hold = p.policy.requeue_hold

    def node_list(offset: int, count: int) -> str:
        return ",".join(nodes[n] for n in lists[offset:offset + count])

    def preempted(k: int) -> str:
        return (f"preempted JobId={names[job[k]]} {VERB[b[k]]} to reclaim resources for "
                f"JobId={names[a[k]]}")

    def node_failed(k: int) -> str:
        if b[k] == HOW_REQUEUE:
            return f"requeue JobId={names[job[k]]} due to failure of node {nodes[a[k]]}"
        return f"Killing JobId={names[job[k]]} on failed node {nodes[a[k]]}"

    kinds = list(KINDS)
    kinds[EV_NODE:EV_NODE + len(p.policy.node_words)] = p.policy.node_words
    out = []
    for k in range(len(times)):
        code, reason, message = msg[k], "", ""
        if kind[k] == EV_BOUND:
            reason = "Scheduled"
            message = (f"Allocate JobId={names[job[k]]} NodeList={node_list(a[k], b[k])}" if code == MSG_ALLOCATE
                       else f"resumed JobId={names[job[k]]}")
        elif code == MSG_PODS_RUNNING:
            message = f"{a[k]} pods running"
        elif code == MSG_PREEMPTED:
            reason, message = "Preempted", preempted(k)
        elif code == MSG_REQUEUED:
            reason, message = "Requeue", f"BeginTime={times[k] + hold:g} ({preempted(k)})"
        elif code == MSG_NODE_FAIL:
            reason, message = "NodeDown" if kind[k] == EV_NODE_FAIL else "NodeFail", node_failed(k)
        elif code == MSG_NODE_REQUEUED:
            reason, message = "Requeue", f"BeginTime={times[k] + hold:g} ({node_failed(k)})"
        elif code == MSG_TIME_LIMIT:
            reason, message = "TimeLimit", f"CANCELLED DUE TO TIME LIMIT ({p.job_time_limit[job[k]]:g}s)"
        elif code == MSG_PRIORITY:
            reason, message = "multifactor", Factors(*values[a[k]].tolist()).sprio()
        elif code == MSG_PENDING:
            reason = REASONS[a[k]]
        elif code == MSG_START_TIME:
            at, offset, count = values[a[k], :3]
            reason = "Backfill"
            message = f"StartTime={at:g} SchedNodeList={node_list(int(offset), int(count))}"
        out.append((times[k], kinds[kind[k]], job[k], task[k], node[k], reason, message))
    return out
