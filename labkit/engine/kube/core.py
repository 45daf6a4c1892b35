"""The default kube-scheduler (``reference.py``) in the numba core, with the clock of ``clock.py`` as
the kube-scheduler policies drive it: pods from submit through the ResourceQuota admission, a
session at the instant of every event (and at least every 300 s while something changed), pods
waiting at Permit and their timeouts, nominations kept between sessions, and the notes
(FailedScheduling, Waiting, Rejected) logged when they change. Same semantics and tie-breaks as
the reference engine.

Like ``slurm/core.py`` it has its own jitted entry point (:func:`run_core`) and shares the clock's
records, event heap, live-job list and task books (``core_clock``, ``core_account``) over a state
struct holding the Volcano arrays plus the kube ones (:data:`KUBE_STATIC`, :data:`KUBE_MUTABLE`).
A session works on its own copy of the pod statuses, nodes and node use (with per-node pod lists),
as the reference's Session does, and hands its binds, evictions and notes to the clock.

A FailedScheduling message is kept as numbers: per-reason node counts of the filters and of
preemption's victim search, the PreFilter's pod count, preemption's outcome and whether the
PodGroup was rejected; :func:`_events` writes the text with ``reference.fit_message``. A quota refusal
keeps the keys over quota and what the namespace used of them.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ...spec.kube import MAX_NODE_SCORE
from ..core import NODE_EVICTIONS, CoreFields, fresh, in_slices, record, run_grown
from ..core_account import copy_row, list_insert, list_remove, set_created, set_status
from ..core_clock import (
    always_room,
    bind,
    clock_event,
    clock_loop,
    evict,
    log,
    maybe_start,
    namespace_used,
    node_event,
    on_grid,
    push_event,
    push_node_events,
    push_row,
    quiet,
    released,
    session_at,
    submit,
    wake_queued,
)
from ..core_state import (
    ALLOCATED,
    BINDING,
    CPU,
    EV_PIPELINED,
    EVENT_KINDS,
    FAILED,
    I_LIVE,
    I_NEXT_NODE,
    I_OVERFLOW,
    I_SESSIONS,
    MEMORY,
    MIN_RESOURCE,
    MSG_PODS_RUNNING,
    MSG_RESTART,
    PENDING,
    PODS,
    RELEASING,
    SUCCEEDED,
    entry,
    jit,
)
from ..events import NODE, TIMER, WAKE
from ..problem import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO
from ..records import RunRecord
from ..volcano.core_actions import sort_prefix
from .reference import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    NO_VICTIMS,
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    NOT_HELPFUL,
    OPTIMISTIC,
    PREEMPTED_WAITING,
    UNREACHABLE_NODE,
    UNRESERVED,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    UNSCHEDULABLE_NODE,
    assigned_message,
    fit_message,
    group_rejected_message,
    num_feasible_nodes_to_find,
    pre_filter_message,
    preempted_message,
    timeout_message,
    waiting_message,
)

# -------------------------------------------------------------------------------- codes

KINDS = EVENT_KINDS + ("FailedScheduling", "Waiting", "Rejected")
EV_FAILED, EV_WAITING, EV_REJECTED = range(len(EVENT_KINDS), len(KINDS))
NOTE_KINDS = (EV_FAILED, EV_WAITING, EV_REJECTED)
"""A pod's notes, each kind logged when it differs from the pod's last one of that kind."""
(MSG_ASSIGNED, MSG_ASSIGNED_GROUP, MSG_PREEMPTED, MSG_NOMINATED, MSG_FIT_ERROR, MSG_TIMEOUT, MSG_UNRESERVED,
 MSG_OPTIMISTIC, MSG_WAITING, MSG_MUST_SPECIFY, MSG_EXCEEDED, MSG_PREEMPTED_WAITING) = range(MSG_RESTART + 1, MSG_RESTART + 13)
ROW_MESSAGES = (MSG_FIT_ERROR, MSG_EXCEEDED)
"""Messages whose values are a row of ``s.kv``: equal when the rows are."""
# preemption's outcome (the 'preemption: ...' part of a FailedScheduling message)
OUT_NONE, OUT_NEVER, OUT_TERMINATING, OUT_NOT_HELPFUL, OUT_PREEMPTED = range(5)
# slots of ``s.k_arg`` (the KubeArgs as numbers)
(A_STRATEGY, A_FIT_WEIGHT, A_BALANCED_WEIGHT, A_PREEMPTION, A_MIN_PERCENTAGE, A_MIN_ABSOLUTE, A_COSCHEDULING,
 A_PERMIT_WAIT, A_WANTED, A_PERIOD, A_REASONS) = range(11)
N_ARGS = 11
# slots of ``s.k_ints``: the session's nominated pods, outputs and note rows, the run's logged rows
K_NOMINATED, K_BINDS, K_EVICTS, K_NOTES, K_ROWS, K_VALUES, K_REJECTED = range(7)
# reasons a node fails a pod (columns of a FailedScheduling row's counts), in the resources R:
# unschedulable node, unreachable (NotReady) node, Too many pods, Insufficient <r>, no victims, not helpful, the class failures
Z_UNSCHEDULABLE, Z_UNREACHABLE, Z_PODS, Z_INSUFFICIENT = 0, 1, 2, 3

KUBE_STATIC = (
    "k_arg", "k_queue", "k_fit_weights", "k_shape", "k_balanced", "k_failure",
)
B, I, F, I8 = np.bool_, np.int64, np.float64, np.int8
KUBE_MUTABLE = {
    # the clock's kube books (clock.Simulation: created, nominated, waiting_since, last_note)
    "k_created": ("T", False, B), "k_nominated": ("T", -1, I), "k_wait": ("T", np.nan, F),
    "ln": ("T 3 3", -1, I), "kv": ("E W", 0, I), "k_ints": ("7", 0, I), "q_used": ("K", 0, I),
    # one session's copies: pod status, node, Permit wait; node use and pod lists; nominations
    "ss_status": ("T", 0, I8), "ss_node": ("T", -1, I), "ss_wait": ("T", np.nan, F), "ss_used": ("N R", 0, F),
    "ss_zero": ("N 2", 0, I), "pod_first": ("N", -1, I), "pod_next": ("T", -1, I), "pod_prev": ("T", -1, I),
    "nom_list": ("T", 0, I), "nom_of": ("T", -1, I), "queued": ("T", -1, I),
    # one session's scratch and outputs
    "code": ("N", 0, I8), "feasible": ("N", 0, I), "extra": ("R", 0, F), "fractions": ("R", 0, F),
    "counts": ("Z", 0, I), "lower": ("T", 0, I), "lower_start": ("T", 0, F), "cand_node": ("N", 0, I),
    "cand_lo": ("N+1", 0, I), "cand_victims": ("T", 0, I), "cand_key": ("N 4", 0, F),
    "kb": ("T+1 4", 0, I), "ke": ("T+1 3", 0, I), "kn": ("4*T+16 5", 0, I), "krow": ("T+1 W", 0, I),
    "kp": ("T", 0, I),
}
"""The kube run's own mutable arrays (shapes in the sizes of :func:`_kube_mutable`)."""
KubeFields = namedtuple("KubeFields", CoreFields._fields + KUBE_STATIC + tuple(KUBE_MUTABLE))
"""The kube run's arrays: the Volcano core's, then the kube ones."""


@jit
def n_reasons(s):
    return s.counts.size


@jit
def z_no_victims(s):
    return Z_INSUFFICIENT + s.total.size


@jit
def z_failure(s, f):
    return Z_INSUFFICIENT + s.total.size + 2 + f


# -------------------------------------------------------------------------------- session books


@jit
def link(s, t, n):
    """The pod joins node ``n``'s pods (NodeInfo.AddTask): its list and its use."""
    list_insert(s.pod_first, s.pod_next, s.pod_prev, t, n)
    req = s.t_req[t]
    for r in range(req.size):
        s.ss_used[n, r] += req[r]
    s.ss_zero[n, 0] += req[CPU] == 0
    s.ss_zero[n, 1] += req[MEMORY] == 0


@jit
def unlink(s, t, n):
    list_remove(s.pod_first, s.pod_next, s.pod_prev, t, n)
    req = s.t_req[t]
    for r in range(req.size):
        s.ss_used[n, r] -= req[r]
    s.ss_zero[n, 0] -= req[CPU] == 0
    s.ss_zero[n, 1] -= req[MEMORY] == 0


@jit
def place(s, t, n):
    """Reserve: the pod is assumed on the node (Allocated)."""
    s.ss_status[t], s.ss_node[t] = ALLOCATED, n
    link(s, t, n)


@jit
def nominate(s, t, n):
    if s.nom_of[t] < 0:
        s.nom_list[s.k_ints[K_NOMINATED]] = t
        s.k_ints[K_NOMINATED] += 1
    s.nom_of[t] = n


@jit
def unnominate(s, t):
    if s.nom_of[t] < 0:
        return
    s.nom_of[t] = -1
    n = s.k_ints[K_NOMINATED]
    for k in range(n):
        if s.nom_list[k] == t:
            s.nom_list[k] = s.nom_list[n - 1]
            break
    s.k_ints[K_NOMINATED] = n - 1


@jit
def add_note(s, kind, t, msg, a, b):
    push_row(s.kn, s.k_ints, K_NOTES, kind, t, msg, a, b)


@jit
def new_row(s):
    """A zeroed row of the session's note values."""
    k = s.k_ints[K_ROWS]
    s.krow[k, :] = 0
    s.k_ints[K_ROWS] = k + 1
    return k


@jit
def group(s, j):
    """The pod belongs to a PodGroup: Coscheduling on and minMember above 1."""
    return s.k_arg[A_COSCHEDULING] > 0 and s.j_min[j] > 1


@jit
def assigned(s, j):
    """The group's pods on a node and not Pending (reserved, binding, bound, terminating)."""
    count = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.k_created[t] and s.ss_node[t] >= 0 and s.ss_status[t] != PENDING:
            count += 1
    return count


@jit
def reject(s, t, msg):
    """A pod waiting at Permit is rejected (Unreserve): Pending again, off its node."""
    unlink(s, t, s.ss_node[t])
    s.ss_status[t], s.ss_node[t], s.ss_wait[t] = PENDING, -1, math.nan
    add_note(s, EV_FAILED, t, msg, 0, 0)


@jit
def dispatch(s, t, msg, a):
    s.ss_status[t] = BINDING
    k = s.k_ints[K_BINDS]
    s.kb[k, 0], s.kb[k, 1], s.kb[k, 2], s.kb[k, 3] = t, s.ss_node[t], msg, a
    s.k_ints[K_BINDS] = k + 1


@jit
def open_session(s):
    """The session's copies of the live pods; node use and pod lists; the Pending pods'
    nominations."""
    s.pod_first[:] = -1
    s.ss_used[:, :] = 0.0
    s.ss_zero[:, :] = 0
    s.k_ints[K_NOMINATED] = s.k_ints[K_BINDS] = s.k_ints[K_EVICTS] = s.k_ints[K_NOTES] = s.k_ints[K_ROWS] = 0
    s.k_ints[K_REJECTED] = 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if not s.k_created[t]:
                continue
            st, n = s.status[t], s.node[t]
            s.ss_status[t], s.ss_node[t], s.ss_wait[t] = st, n, s.k_wait[t]
            s.nom_of[t] = -1
            if n >= 0 and st != PENDING and st != SUCCEEDED and st != FAILED:
                link(s, t, n)
            if st == PENDING and s.k_nominated[t] >= 0:
                nominate(s, t, s.k_nominated[t])


# -------------------------------------------------------------------------------- Filter


@jit
def nominated_on(s, t, n, out):
    """The requests of the pods nominated to node ``n`` with priority >= the pod's, into ``out``."""
    out[:] = 0.0
    for k in range(s.k_ints[K_NOMINATED]):
        u = s.nom_list[k]
        if s.nom_of[u] == n and u != t and s.t_prio[u] >= s.t_prio[t]:
            req = s.t_req[u]
            for r in range(out.size):
                out[r] += req[r]


@jit
def filter_node(s, t, n, extra, counts, record):
    """The filters on one node, ``extra`` added to its use: 0 if the pod passes, else
    UNSCHEDULABLE or UNRESOLVABLE, with the reasons counted in ``counts`` when ``record``."""
    if not s.node_sched[n]:
        if record:
            counts[Z_UNREACHABLE if s.node_down[n] and not s.node_cordon[n] else Z_UNSCHEDULABLE] += 1
        return UNRESOLVABLE
    f = s.k_failure[s.t_class[t], n]
    if f:
        if record:
            counts[z_failure(s, f)] += 1
        return UNRESOLVABLE
    alloc, req = s.node_alloc[n], s.t_req[t]
    code = 0
    if s.ss_used[n, PODS] + extra[PODS] + 1 > alloc[PODS]:
        code = UNSCHEDULABLE
        if record:
            counts[Z_PODS] += 1
    for r in range(req.size):
        if r != PODS and req[r] > 0 and req[r] > alloc[r] - (s.ss_used[n, r] + extra[r]) + MIN_RESOURCE / 10:
            code = UNSCHEDULABLE
            if record:
                counts[Z_INSUFFICIENT + r] += 1
    return code


# -------------------------------------------------------------------------------- Score


@jit
def go_div(a, b):
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@jit
def broken_linear(shape, p):
    for i in range(shape.shape[0]):
        if p <= shape[i, 0]:
            if i == 0:
                return shape[0, 1]
            du, ds = shape[i, 0] - shape[i - 1, 0], shape[i, 1] - shape[i - 1, 1]
            return shape[i - 1, 1] + go_div(ds * (p - shape[i - 1, 0]), du)
    return shape[shape.shape[0] - 1, 1]


@jit
def fit_score(s, t, n):
    """NodeResourcesFit (kube.fit_score) over the node's pods and the pod, NonZeroRequested."""
    strategy = int(s.k_arg[A_STRATEGY])
    req = s.t_req[t]
    score = weight_sum = 0
    for r in range(req.size):
        weight = s.k_fit_weights[r]
        if weight == 0 or (r != CPU and r != MEMORY and req[r] == 0):
            continue
        alloc = int(s.node_alloc[n, r])
        if alloc == 0:
            continue
        total = s.ss_used[n, r] + req[r]
        if r == CPU:
            total += DEFAULT_MILLI_CPU_REQUEST * (s.ss_zero[n, 0] + (req[r] == 0))
        elif r == MEMORY:
            total += DEFAULT_MEMORY_REQUEST * (s.ss_zero[n, 1] + (req[r] == 0))
        used = int(total)
        if strategy == LEAST_ALLOCATED:
            value = 0 if used > alloc else (alloc - used) * MAX_NODE_SCORE // alloc
        elif strategy == MOST_ALLOCATED:
            value = min(used, alloc) * MAX_NODE_SCORE // alloc
        else:
            value = broken_linear(s.k_shape, MAX_NODE_SCORE if used > alloc else used * MAX_NODE_SCORE // alloc)
            if value <= 0:
                continue
        score += value * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        return math.floor(score / weight_sum + 0.5)
    return score // weight_sum


@jit
def balanced_score(s, t, n):
    """NodeResourcesBalancedAllocation (kube.balanced_score); None of its resources requested: 0."""
    req = s.t_req[t]
    asked = False
    count = 0
    for r in range(req.size):
        if not s.k_balanced[r] or not (r == CPU or r == MEMORY or req[r] > 0):
            continue
        asked |= req[r] > 0
        if s.node_alloc[n, r] > 0:
            s.fractions[count] = min((s.ss_used[n, r] + req[r]) / s.node_alloc[n, r], 1.0)
            count += 1
    if not asked:
        return -1
    std = 0.0
    if count == 2:
        std = abs((s.fractions[0] - s.fractions[1]) / 2)
    elif count > 2:
        mean = 0.0
        for i in range(count):
            mean += s.fractions[i]
        mean /= count
        acc = 0.0
        for i in range(count):
            acc += (s.fractions[i] - mean) ** 2
        std = math.sqrt(acc / count)
    return int((1 - std) * MAX_NODE_SCORE)


@jit
def score(s, t, n):
    total = 0
    if s.k_arg[A_FIT_WEIGHT]:
        total += int(s.k_arg[A_FIT_WEIGHT]) * fit_score(s, t, n)
    if s.k_arg[A_BALANCED_WEIGHT]:
        balanced = balanced_score(s, t, n)
        if balanced >= 0:
            total += int(s.k_arg[A_BALANCED_WEIGHT]) * balanced
    return total


@jit
def find_node(s, t):
    """Filter (the nominated node first) and Score: the best node, or -1 with ``s.code`` and
    ``s.counts`` holding the statuses of the nodes filtered."""
    nominated = s.nom_of[t]
    if nominated >= 0:
        nominated_on(s, t, nominated, s.extra)
        if filter_node(s, t, nominated, s.extra, s.counts, False) == 0:
            return nominated
    n_nodes = s.node_alloc.shape[0]
    wanted = s.k_arg[A_WANTED]
    s.code[:] = 0
    s.counts[:] = 0
    start = s.ints[I_NEXT_NODE]
    n_feasible = processed = 0
    for i in range(n_nodes):
        n = (start + i) % n_nodes
        processed += 1
        nominated_on(s, t, n, s.extra)
        code = filter_node(s, t, n, s.extra, s.counts, True)
        if code == 0:
            s.feasible[n_feasible] = n
            n_feasible += 1
            if n_feasible >= wanted:
                break
        else:
            s.code[n] = code
    s.ints[I_NEXT_NODE] = (start + processed) % n_nodes if n_nodes else 0
    best, best_score = -1, -1
    for i in range(n_feasible):
        n = s.feasible[i]
        value = score(s, t, n)
        if value > best_score or (value == best_score and n < best):
            best, best_score = n, value
    return best


# -------------------------------------------------------------------------------- PostFilter


@jit
def start_of(s, t, now):
    """GetPodStartTime: when the pod started; one not started yet counts as now."""
    r = s.open_run[t]
    return s.runs[r, 2] if r >= 0 else now


@jit
def victim_before(s, a, b, start_a, start_b):
    """SelectVictimsOnNode's reprieve order: higher priority, then longer running, then index."""
    if s.t_prio[a] != s.t_prio[b]:
        return s.t_prio[a] > s.t_prio[b]
    if start_a != start_b:
        return start_a < start_b
    return a < b


@jit
def select_victims(s, t, n, now, offset, counts):
    """SelectVictimsOnNode into ``s.cand_victims[offset:]``: every lower-priority pod removed; if
    the pod then fits, they are added back most important first while it still fits. The victim
    count, or -1 with the reasons counted in ``counts``."""
    m = 0
    u = s.pod_first[n]
    while u >= 0:
        if s.t_prio[u] < s.t_prio[t]:
            start = start_of(s, u, now)
            i = m
            while i > 0 and victim_before(s, u, s.lower[i - 1], start, s.lower_start[i - 1]):
                s.lower[i], s.lower_start[i] = s.lower[i - 1], s.lower_start[i - 1]
                i -= 1
            s.lower[i], s.lower_start[i] = u, start
            m += 1
        u = s.pod_next[u]
    if m == 0:
        counts[z_no_victims(s)] += 1
        return -1
    extra = s.extra
    nominated_on(s, t, n, extra)
    for i in range(m):
        req = s.t_req[s.lower[i]]
        for r in range(extra.size):
            extra[r] -= req[r]
    if filter_node(s, t, n, extra, counts, True) != 0:
        return -1
    count = 0
    for i in range(m):
        req = s.t_req[s.lower[i]]
        for r in range(extra.size):
            extra[r] += req[r]
        if filter_node(s, t, n, extra, counts, False) != 0:
            for r in range(extra.size):
                extra[r] -= req[r]
            s.cand_victims[offset + count] = s.lower[i]
            count += 1
    return count


@jit
def candidate_key(s, c, now):
    """pickOneNodeForPreemption's key of candidate ``c`` into ``s.cand_key[c]``: the highest victim
    priority, the sum of priorities (each + MaxInt32 + 1), the victim count, minus the earliest
    start among the highest-priority victims; -inf first when there are no victims."""
    key = s.cand_key[c]
    lo, hi = s.cand_lo[c], s.cand_lo[c + 1]
    if lo == hi:
        key[0], key[1], key[2], key[3] = -math.inf, 0.0, 0.0, 0.0
        return
    top = s.t_prio[s.cand_victims[lo]]
    total = 0
    for k in range(lo, hi):
        top = max(top, s.t_prio[s.cand_victims[k]])
        total += s.t_prio[s.cand_victims[k]] + 2**31
    earliest = math.inf
    for k in range(lo, hi):
        if s.t_prio[s.cand_victims[k]] == top:
            earliest = min(earliest, start_of(s, s.cand_victims[k], now))
    key[0], key[1], key[2], key[3] = top, total, hi - lo, -earliest


@jit
def key_less(a, b):
    for i in range(a.size):
        if a[i] != b[i]:
            return a[i] < b[i]
    return False


@jit
def unreserve(s, first, msg):
    """The waiting pod `first` is rejected with `msg`; Coscheduling's Unreserve rejects every other
    waiting pod of its group."""
    j = s.t_job[first]
    for u in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.k_created[u] and s.ss_status[u] == ALLOCATED:
            reject(s, u, msg if u == first else MSG_UNRESERVED)


@jit
def reject_waiting(s, v):
    """A victim waiting at Permit is rejected, not deleted (frees its node at once)."""
    unreserve(s, v, MSG_PREEMPTED_WAITING)
    s.k_ints[K_REJECTED] = 1


@jit
def preempt(s, t, now, pre_filter, counts):
    """DefaultPreemption: the outcome (OUT_*); the victim search's reasons counted in ``counts``."""
    if s.t_never[t]:
        return OUT_NEVER
    n_nodes = s.node_alloc.shape[0]
    nominated = s.nom_of[t]
    if nominated >= 0 and (pre_filter or s.code[nominated] != UNRESOLVABLE):
        u = s.pod_first[nominated]
        while u >= 0:
            if s.ss_status[u] == RELEASING and s.t_prio[u] < s.t_prio[t]:
                return OUT_TERMINATING
            u = s.pod_next[u]
    potential = 0
    if not pre_filter:
        for n in range(n_nodes):
            potential += s.code[n] == UNSCHEDULABLE
    if potential == 0:
        counts[z_no_victims(s) + 1] += n_nodes
        return OUT_NOT_HELPFUL
    wanted = min(max(potential * int(s.k_arg[A_MIN_PERCENTAGE]) // 100, int(s.k_arg[A_MIN_ABSOLUTE])), potential)
    n_cand = statuses = 0
    s.cand_lo[0] = 0
    for n in range(n_nodes):
        if s.code[n] != UNSCHEDULABLE:
            continue
        count = select_victims(s, t, n, now, s.cand_lo[n_cand], counts)
        if count < 0:
            statuses += 1
            continue
        s.cand_node[n_cand] = n
        s.cand_lo[n_cand + 1] = s.cand_lo[n_cand] + count
        n_cand += 1
        if n_cand >= wanted:
            break
    if n_cand == 0:
        counts[z_no_victims(s) + 1] += n_nodes - statuses
        return OUT_NOT_HELPFUL
    best = 0
    candidate_key(s, 0, now)
    for c in range(1, n_cand):
        candidate_key(s, c, now)
        if key_less(s.cand_key[c], s.cand_key[best]):
            best = c
    n = s.cand_node[best]
    for k in range(s.cand_lo[best], s.cand_lo[best + 1]):
        v = s.cand_victims[k]
        if s.ss_status[v] == ALLOCATED:
            reject_waiting(s, v)
        elif s.ss_status[v] != RELEASING:
            s.ss_status[v] = RELEASING
            e = s.k_ints[K_EVICTS]
            s.ke[e, 0], s.ke[e, 1], s.ke[e, 2] = v, t, n
            s.k_ints[K_EVICTS] = e + 1
    k = 0
    while k < s.k_ints[K_NOMINATED]:
        u = s.nom_list[k]
        if s.nom_of[u] == n and s.t_prio[u] < s.t_prio[t]:
            unnominate(s, u)  # lower-priority nominations on that node are cleared
        else:
            k += 1
    nominate(s, t, n)
    return OUT_PREEMPTED


@jit
def reject_group(s, t):
    """Coscheduling PostFilter: unless the group has minMember assigned or lacks at most 10% of
    it, its waiting pods are rejected. True if they were."""
    j = s.t_job[t]
    have, need = assigned(s, j), s.j_min[j]
    if have >= need or (need - have) / need <= 0.1:
        return False
    for u in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.k_created[u] and s.ss_status[u] == ALLOCATED:
            reject(s, u, MSG_OPTIMISTIC)
    return True


@jit
def failed(s, t, now, alive):
    """The FitError: PostFilter plugins in order (DefaultPreemption, then Coscheduling), then the
    FailedScheduling note. ``alive`` >= 0: the PreFilter failed with that many pods."""
    z = n_reasons(s)
    row = s.krow[new_row(s)]
    pre_filter = alive >= 0
    if not pre_filter:
        copy_row(row[:z], s.counts)
    outcome = OUT_NONE
    if s.k_arg[A_PREEMPTION] > 0:
        outcome = preempt(s, t, now, pre_filter, row[z:2 * z])
        if outcome != OUT_NOT_HELPFUL:
            row[z:2 * z] = 0
    rejected = outcome != OUT_PREEMPTED and group(s, s.t_job[t]) and reject_group(s, t)
    row[2 * z], row[2 * z + 1], row[2 * z + 2] = alive, outcome, rejected
    add_note(s, EV_FAILED, t, MSG_FIT_ERROR, s.k_ints[K_ROWS] - 1, 0)


# -------------------------------------------------------------------------------- the cycle


@jit
def permit(s, t, n, now):
    """Coscheduling's Permit: every reserved pod of the group binds once minMember are assigned,
    else the pod waits; other pods bind at once."""
    j = s.t_job[t]
    if not group(s, j):
        dispatch(s, t, MSG_ASSIGNED, 0)
        return
    have = assigned(s, j)
    if have >= s.j_min[j]:
        for u in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.k_created[u] and s.ss_status[u] == ALLOCATED:
                dispatch(s, u, MSG_ASSIGNED_GROUP, have)
                s.ss_wait[u] = math.nan
        return
    if math.isnan(s.ss_wait[t]):
        s.ss_wait[t] = now
    add_note(s, EV_WAITING, t, MSG_WAITING, n, have)


@jit
def schedule_one(s, t, now):
    j = s.t_job[t]
    if group(s, j):
        alive = 0
        for u in range(s.j_lo[j], s.j_lo[j + 1]):
            alive += s.k_created[u] and s.ss_status[u] != SUCCEEDED and s.ss_status[u] != FAILED
        if alive < s.j_min[j]:
            failed(s, t, now, alive)
            return
    n = find_node(s, t)
    if n < 0:
        failed(s, t, now, -1)
        return
    unnominate(s, t)
    place(s, t, n)
    permit(s, t, n, now)


@jit
def expire_waiting(s, now):
    """A pod that waited permitWaitingTimeSeconds is rejected; Unreserve rejects its siblings."""
    wait = s.k_arg[A_PERMIT_WAIT]
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        first = -1
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.k_created[t] and s.ss_status[t] == ALLOCATED and s.ss_wait[t] + wait <= now:
                first = t
                break
        if first >= 0:
            unreserve(s, first, MSG_TIMEOUT)


@jit
def run_session(s, now):
    """One kube-scheduler session (kube.Scheduler.run): every Pending pod once, in queue order."""
    open_session(s)
    expire_waiting(s, now)
    stamp = s.ints[I_SESSIONS]
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.k_created[t] and s.ss_status[t] == PENDING:
                s.queued[t] = stamp
    for t in s.k_queue:
        if s.queued[t] == stamp and s.ss_status[t] == PENDING:  # a sibling's Permit may have placed it
            schedule_one(s, t, now)


# -------------------------------------------------------------------------------- the clock


@jit
def same_row(s, a, row):
    for k in range(row.size):
        if s.kv[a, k] != row[k]:
            return False
    return True


@jit
def note(s, now, kind, t, msg, a, b, row):
    """Log a pod's note when it differs from its last one of that kind; ``row`` holds the values of
    a row message (``a`` is then ignored)."""
    last = s.ln[t, kind - EV_FAILED]
    rows = msg == MSG_FIT_ERROR or msg == MSG_EXCEEDED
    if last[0] == msg and (same_row(s, last[1], row) if rows else last[1] == a and last[2] == b):
        return
    if rows:
        a = s.k_ints[K_VALUES]
        if a >= s.kv.shape[0]:
            s.ints[I_OVERFLOW] = 1
            return
        copy_row(s.kv[a], row)
        s.k_ints[K_VALUES] = a + 1
    last[0], last[1], last[2] = msg, a, b
    log(s, now, kind, s.t_job[t], t, -1, msg, a, b)


@jit
def create_pods(s, now, j):
    """The Job controller creates the job's missing pods through the ResourceQuota admission; a
    refused one gets a Rejected note and is retried later."""
    q = s.k_job_quota[j]
    n_keys = s.q_used.size
    row = s.krow[s.krow.shape[0] - 1]
    counted = False
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.k_created[t]:
            continue
        if q >= 0:
            if s.k_unset[t]:
                note(s, now, EV_REJECTED, t, MSG_MUST_SPECIFY, 0, 0, row)
                continue
            if not counted:
                counted = True
                namespace_used(s, q, s.k_created, s.q_used)
            row[:] = 0
            over = False
            for k in range(n_keys):
                if s.k_tracked[q, k] and s.q_used[k] + s.k_usage[t, k] > s.k_hard[q, k]:
                    row[k], row[n_keys + k] = 1, s.q_used[k]
                    over = True
            if over:
                note(s, now, EV_REJECTED, t, MSG_EXCEEDED, 0, 0, row)
                continue
            for k in range(n_keys):
                s.q_used[k] += s.k_usage[t, k]
        s.k_created[t] = True


@jit
def keep_waiting(s):
    """Pods reserved at Permit stay Allocated on their node, waiting since the session says; ones
    it no longer keeps are Pending again. True if that changed anything."""
    changed = False
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if not s.k_created[t]:
                continue
            if s.ss_status[t] == ALLOCATED:
                changed |= s.status[t] != ALLOCATED or s.k_wait[t] != s.ss_wait[t]
                set_status(s, t, ALLOCATED, s.ss_node[t])
                s.k_wait[t] = s.ss_wait[t]
            elif s.status[t] == ALLOCATED:
                set_status(s, t, PENDING, -1)
                changed = True
    for t in range(s.status.size):
        if s.status[t] != ALLOCATED:
            s.k_wait[t] = math.nan
    return changed


@jit
def session_once(s, now):
    """One session on the live pods, its decisions applied (clock.Simulation.session_once);
    True if it changed anything."""
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if not s.done[j]:
            create_pods(s, now, j)
    if s.ints[I_LIVE] == 0:
        return False
    s.ints[I_SESSIONS] += 1
    run_session(s, now)
    changed = s.k_ints[K_BINDS] > 0 or s.k_ints[K_EVICTS] > 0
    for k in range(s.k_ints[K_BINDS]):
        t = s.kb[k, 0]
        bind(s, now, t, s.kb[k, 1], s.kb[k, 2], s.kb[k, 3], 0)
    for k in range(s.k_ints[K_EVICTS]):
        evict(s, now, s.ke[k, 0], MSG_PREEMPTED, s.ke[k, 1], s.ke[k, 2])
    changed |= keep_waiting(s)
    n_pipelined = 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.k_created[t]:
                s.k_nominated[t] = -1
    for k in range(s.k_ints[K_NOMINATED]):
        t = s.nom_list[k]
        if s.ss_status[t] == PENDING:
            s.k_nominated[t] = s.nom_of[t]
            s.kp[n_pipelined] = t
            n_pipelined += 1
    for k in range(s.k_ints[K_NOTES]):
        kind, t, msg, a, b = s.kn[k, 0], s.kn[k, 1], s.kn[k, 2], s.kn[k, 3], s.kn[k, 4]
        note(s, now, kind, t, msg, a, b, s.krow[a if msg == MSG_FIT_ERROR else 0])
    wake = math.inf
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.k_created[t] and s.ss_status[t] == ALLOCATED:
                wake = min(wake, s.ss_wait[t] + s.k_arg[A_PERMIT_WAIT])
    if now < wake < math.inf and not wake_queued(s, wake):
        push_event(s, wake, WAKE, -1, 0)
    if s.k_ints[K_REJECTED]:
        push_event(s, now, TIMER, -1, 0)
    sort_prefix(s.kp, n_pipelined)
    for k in range(n_pipelined):
        t = s.kp[k]
        n = s.k_nominated[t]
        if s.pip_on[t] != n:
            s.pip_on[t] = n
            log(s, now, EV_PIPELINED, s.t_job[t], t, n, MSG_NOMINATED, 0, 0)
    for i in range(s.ints[I_LIVE]):
        maybe_start(s, now, s.live[i])
    return changed


@jit
def arrive(s, now, j):
    """The job is submitted: its pods are created from now, through the quota admission."""
    submit(s, now, j)
    create_pods(s, now, j)


@jit
def release(s, now, t):
    """A pod's grace period ended (``core_clock.released``); a restarted job's pods come back at once."""
    released(s, now, t)
    j = s.t_job[t]
    if not s.done[j] and not s.created[j]:
        set_created(s, j, True)
        for u in range(s.j_lo[j], s.j_lo[j + 1]):
            s.k_created[u] = False
        create_pods(s, now, j)


@jit
def apply_event(s, now, slot):
    if s.h_key[slot, 0] == NODE:
        node_event(s, now, s.h_key[slot, 1])
        return True
    return clock_event(s, now, slot, arrive, release)


@jit
def next_session(s, now):
    """Once something changed: a session at the instant of an event, else on the 300 s grid one
    period after the last."""
    if s.clock[2] == 0.0:
        return math.inf
    return now if s.clock[4] != 0.0 else on_grid(now, s.clock[1], s.k_arg[A_PERIOD])


@jit
def settled(s, now):
    return quiet(s)


@jit
def changed(s):
    s.clock[2], s.clock[4] = 1.0, 1.0


@jit
def session(s, now):
    session_at(s, now, session_once(s, now))
    s.clock[4] = 0.0


@entry
def run_core(s, budget):
    """The run of a kube-scheduler scenario (Simulation.run: :func:`core_clock.clock_loop` with
    kube's events and sessions, stopping once :func:`core_clock.quiet`), at most ``budget`` steps of
    it; True when it is over."""
    push_node_events(s)
    return clock_loop(s, budget, next_session, settled, apply_event, changed, session, always_room, always_room)


# -------------------------------------------------------------------------------- driver


def unsupported(compiled) -> str | None:
    """What of a kube-scheduler scenario the core does not simulate, or None."""
    if any(job.status is not None for job in compiled.source.jobs):
        return "job status snapshots under kube-scheduler"
    return None


def reason_names(p) -> list[str]:
    """The reasons a node fails a pod, in the order of a FailedScheduling row's counts."""
    return ([UNSCHEDULABLE_NODE, UNREACHABLE_NODE, "Too many pods"] + [f"Insufficient {r}" for r in p.resource_names]
            + [NO_VICTIMS, NOT_HELPFUL] + list(p.failure_reasons))


def kube_arrays(c) -> dict:
    """The kube static arrays of a compiled scenario (:data:`KUBE_STATIC`)."""
    p = c.problem
    args = p.policy.kube
    arg = np.zeros(N_ARGS)
    arg[[A_STRATEGY, A_FIT_WEIGHT, A_BALANCED_WEIGHT]] = args.strategy, args.fit_score_weight, args.balanced_score_weight
    arg[[A_PREEMPTION, A_MIN_PERCENTAGE, A_MIN_ABSOLUTE]] = (args.preemption, args.min_candidate_percentage,
                                                            args.min_candidate_absolute)
    arg[[A_COSCHEDULING, A_PERMIT_WAIT]] = args.coscheduling, args.permit_wait
    arg[A_WANTED] = num_feasible_nodes_to_find(args.percentage_of_nodes_to_score, p.n_nodes)
    arg[A_PERIOD] = p.policy.action_period[0]
    arg[A_REASONS] = len(p.failure_reasons)
    if args.coscheduling:  # Coscheduling's Less: priority, PodGroup creation, namespace/name
        order = sorted(range(p.n_tasks), key=lambda t: (-p.task_priority[t], p.job_creation[p.task_job[t]],
                                                        p.task_names[t]))
    else:  # PrioritySort: priority, then queue time
        order = np.lexsort((p.task_rank, -p.task_priority))
    return {"k_arg": arg, "k_queue": np.asarray(order, np.int64).reshape(p.n_tasks),
            "k_fit_weights": args.fit_weights.astype(np.int64), "k_shape": np.ascontiguousarray(args.shape, np.int64),
            "k_balanced": args.balanced.astype(bool),
            "k_failure": np.ascontiguousarray(p.class_node_failure, np.int64)}


def _kube_mutable(static: dict, events: int, scale: float) -> dict:
    """Fresh kube books and scratch; ``events`` is the size of the event buffer (E), which ``scale``
    sets (the others have the run's sizes)."""
    n_res = len(static["total"])
    n_keys = static["k_usage"].shape[1]
    z = Z_INSUFFICIENT + n_res + 2 + int(static["k_arg"][A_REASONS])
    sizes = {"T": len(static["t_job"]), "N": len(static["node_alloc"]), "R": n_res, "K": n_keys, "Z": z,
             "W": max(2 * z + 3, 2 * n_keys), "E": events}
    return fresh(KUBE_MUTABLE, sizes)


def run(compiled, static: dict, scale: float = 1.0, progress=None) -> RunRecord:
    """Run a compiled kube-scheduler scenario on the core (buffers sized by ``scale``, grown on need;
    ``progress`` told between slices, ``core.in_slices``)."""
    mutable, kube = run_grown(in_slices(run_core, progress), KubeFields, static, scale, _kube_mutable)
    return _record(compiled, mutable, kube)


def _record(c, m: dict, k: dict) -> RunRecord:
    return record(m, lambda time, coded: _events(c, time, coded, k["kv"]))


def _events(c, time: np.ndarray, coded: np.ndarray, values: np.ndarray) -> list[tuple]:
    """(time, kind, job, task, node, reason, message) tuples, with the reference engine's texts."""
    p = c.problem
    kind, job, task, node, msg, a, b = (coded[:, k].astype(np.int64).tolist() for k in range(7))
    jobs, tasks, nodes, mins = p.job_names, p.task_names, p.node_names, p.job_min_member
    names = reason_names(p)
    z = len(names)
    wait = p.policy.kube.permit_wait
    simple = {MSG_TIMEOUT: timeout_message(wait), MSG_UNRESERVED: UNRESERVED, MSG_OPTIMISTIC: OPTIMISTIC,
              MSG_PREEMPTED_WAITING: PREEMPTED_WAITING, MSG_RESTART: "RestartJob: the gang fell below minAvailable"}
    reasons = {EV_FAILED: "Unschedulable", EV_WAITING: "Coscheduling", EV_REJECTED: "FailedCreate"}

    def pod(t: int) -> str:
        return tasks[t].split("/", 1)[-1]

    def fit_error(t: int, row: np.ndarray) -> str:
        counts, victims = row[:z], row[z:2 * z]
        alive, outcome, rejected = (int(v) for v in row[2 * z:2 * z + 3])
        post = []
        if outcome == OUT_NEVER:
            post.append(NOT_ELIGIBLE_NEVER)
        elif outcome == OUT_TERMINATING:
            post.append(NOT_ELIGIBLE_TERMINATING)
        elif outcome == OUT_NOT_HELPFUL:
            post.append("preemption: " + fit_message(p.n_nodes, dict(zip(names, victims.tolist()))))
        j = int(p.task_job[t])
        if rejected:
            post.append(group_rejected_message(jobs[j], pod(t)))
        pre = pre_filter_message(pod(t), alive, int(mins[j])) if alive >= 0 else ""
        return fit_message(p.n_nodes, dict(zip(names, counts.tolist())), pre, ", ".join(post))

    out = []
    for k in range(len(time)):
        code, reason, message, t = msg[k], "", "", task[k]
        if kind[k] in reasons:
            reason = reasons[kind[k]]
        if code in simple:
            message = simple[code]
            reason = "PodEvicted" if code == MSG_RESTART else reason
        elif code == MSG_ASSIGNED:
            reason, message = "Scheduled", assigned_message(tasks[t], nodes[node[k]])
        elif code == MSG_ASSIGNED_GROUP:
            j = job[k]
            reason, message = "Scheduled", assigned_message(tasks[t], nodes[node[k]], jobs[j], a[k], int(mins[j]))
        elif code == MSG_PREEMPTED:
            reason, message = "Preempted", preempted_message(tasks[a[k]], nodes[b[k]])
        elif code == MSG_NOMINATED:
            reason, message = "DefaultPreemption", f"nominatedNodeName={nodes[node[k]]}"
        elif code == MSG_FIT_ERROR:
            message = fit_error(t, values[a[k]])
        elif code == MSG_WAITING:
            message = waiting_message(nodes[a[k]], b[k], int(mins[job[k]]), jobs[job[k]])
        elif code in (MSG_MUST_SPECIFY, MSG_EXCEEDED):
            n_keys = len(c.quotas.keys)
            used = values[a[k]][n_keys:2 * n_keys] if code == MSG_EXCEEDED else np.zeros(n_keys, np.int64)
            message = c.quotas.refusal(t, used)
        elif code == MSG_PODS_RUNNING:
            message = f"{a[k]} pods running"
        elif code in NODE_EVICTIONS:
            reason, message = NODE_EVICTIONS[code][0], NODE_EVICTIONS[code][1] + tasks[t]
        out.append((time[k].item(), KINDS[kind[k]], job[k], t, node[k], reason, message))
    return out

