"""Kueue's admission (``reference.py``) in the numba core: the quota tree over cohorts, flavor
assignment with partial admission, and admission cycles with one head per ClusterQueue under
StrictFIFO or BestEffortFIFO; admitted workloads' pods placed on their flavors' nodes, least
allocated first. Same semantics, tie-breaks and float sums as the reference engine.

It has its own jitted entry point (:func:`run`), as the Slurm policies do (``slurm/core.py``); it
shares the clock's records, event heap, live-job list and task books (``core_clock``,
``core_account``) over a state struct holding the Volcano arrays plus the Kueue ones
(:data:`KUEUE_STATIC`, :data:`KUEUE_MUTABLE`).

The cohort tree is flat arrays: nodes are the ClusterQueues (0..C-1) then the Cohorts; a
flavor-resource ``(flavor, resource)`` indexes the last two axes of the quota arrays. The static
quotas (subtree quota, local quota, potential available, height) come from the reference
engine's own tree; usage is summed on demand over each cohort's children, in their order.

Python side: :func:`kueue_arrays` (the tree, the resource groups, the workloads' podsets),
:func:`run` (buffers, the run, the record) and :func:`_events` (the reference engine's texts).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ...spec.kueue import local_queue
from ...spec.quantity import parse_duration, parse_quantity
from ..core import CoreFields, fresh, in_slices, record, run_grown
from ..core import _events as core_events
from ..core_account import copy_row, copy_rows
from ..core_clock import (
    always_room,
    bind,
    changed,
    clock_loop,
    evict,
    log,
    maybe_start,
    never,
    next_session,
    push_event,
    push_node_events,
    session_at,
    set_phase,
)
from ..core_clock import apply_event as clock_apply_event
from ..core_state import (
    BINDING,
    BOUND,
    EV_EVICTED,
    EVENT_KINDS,
    I_LIVE,
    I_OVERFLOW,
    I_SESSIONS,
    MSG_RESTART,
    PENDING,
    PH_COMPLETED,
    PH_INQUEUE,
    PH_PENDING,
    RELEASING,
    RUNNING,
    SUCCEEDED,
    entry,
    jit,
)
from ..events import TIMER
from ..records import RunRecord
from .reference import (
    ANY,
    DEFAULT_STRATEGIES,
    HUMAN_READABLE_REASONS,
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    LOWER_OR_NEWER_EQUAL,
    LOWER_PRIORITY,
    MAY_STOP_SEARCH,
    NEVER,
    NO_LONGER_FITS,
    STRICT_FIFO,
    WAITING_FOR_QUOTA,
    Cohort,
    build_tree,
    format_quantity,
    topology_aware,
)
from .tas import taint_exclusion

# -------------------------------------------------------------------------------- codes

NO_FIT, NO_CANDIDATES, PREEMPT, FIT = 0, 1, 2, 3
"""Flavor assignment modes, worst first (``reference.py``)."""

KINDS = EVENT_KINDS + ("QuotaReserved", "Pending", "Requeued", "Deactivated", "Preempted")
EV_QUOTA_RESERVED, EV_PENDING, EV_REQUEUED, EV_DEACTIVATED, EV_PREEMPTED = range(len(EVENT_KINDS), len(KINDS))
(MSG_BIND, MSG_TIMEOUT, MSG_POD_TIMEOUT, MSG_REQUEUED, MSG_DEACTIVATED, MSG_PREEMPTED, MSG_POD_PREEMPTED,
 MSG_QUOTA_RESERVED, MSG_NO_LONGER_FITS, MSG_UNAVAILABLE, MSG_REASONS, MSG_PREEMPTING) = range(MSG_RESTART + 1,
                                                                                            MSG_RESTART + 13)
"""Message codes after the Volcano ones; from MSG_QUOTA_RESERVED on, a message's arguments are a row
of ``s.km_head``."""
BY_NONE, BY_TIMEOUT, BY_PREEMPTED = range(3)
"""What evicted a workload last (``Workload.evicted_by``)."""
P_NEVER, P_LOWER, P_LOWER_OR_NEWER, P_ANY = range(4)
POLICIES = (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL, ANY)
"""Preemption policies (``_policy_allows``) as codes."""
WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING, FAIR_SHARING = range(1, 6)
"""``classifyPreemptionVariant`` (0: not a candidate), and a fair-sharing target."""
REASON_OF_VARIANT = (IN_CLUSTER_QUEUE, IN_CLUSTER_QUEUE, IN_COHORT_RECLAMATION, IN_COHORT_RECLAMATION,
                     IN_COHORT_RECLAIM_WHILE_BORROWING, IN_COHORT_FAIR_SHARING)
"""A target's Preempted reason, by its variant."""
FINAL_SHARE, INITIAL_SHARE = range(2)
STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
"""Fair-sharing preemption strategies as codes (``s.kr_strategies``, -1 pads)."""
R_ENABLE, R_TIMEOUT, R_BLOCK, R_EVICTION_TIMESTAMP, R_LIMIT, R_BASE, R_MAX = range(7)
"""Slots of ``s.kr_arg``: waitForPodsReady (backoffLimitCount -1 = unset)."""
PART_CAPACITY, PART_UNUSED, PART_TAS, PART_TAS_RESOURCE, PART_TAS_TAINT, PART_TAS_FLAVOR = range(6)
"""Reasons a flavor does not fit (rows of ``s.km_part``): over the maximum capacity, or short of
unused quota; a podset's topology does not hold it (flavor, pods that fit or -2 for no domain at the
level; values: pods asked, leaves, the level), with the leaves excluded for a resource (resource,
count) or a taint (taint, count); a flavor that does not match the podset's TAS request (flavor, what)."""
TAS_SUPPORTS_ONLY, TAS_NOT_SUPPORTED, TAS_NO_LEVEL = range(1, 4)
"""``_tas_mismatch``'s answers (0: the flavor matches)."""
TK_NONE, TK_REQUIRED, TK_PREFERRED, TK_UNCONSTRAINED = range(4)
"""A podset's TAS request (``ps_tkind``); a TAS-only ClusterQueue's podsets without one are unconstrained."""
H_KIND, H_PODSET, H_LO, H_HI, H_X = range(5)
"""Columns of ``s.km_head`` and ``s.e_msg``: message code, podset, reasons range, and a resource
(MSG_UNAVAILABLE) or the admitted flavors as a bit mask (MSG_QUOTA_RESERVED)."""
K_ADMITTED, K_PARTS, K_HEADS, K_EVICTS, K_TARGETS, K_CYCLE = range(6)
"""Slots of ``s.k_ints``: admitted workloads, reasons and message rows used."""

KUEUE_STATIC = (
    "kq_parent", "kq_post_lo", "kq_post", "kq_kid_lo", "kq_kids", "kq_subtree", "kq_local", "kq_potential",
    "kq_has_bl", "kq_bl", "kq_height", "kq_strict", "kq_while_borrowing", "kq_stop_borrow", "kq_stop_preempt",
    "kq_group", "kg_lo", "kg_flavors", "kw_cq", "kw_uid", "kw_ps_lo", "ps_count", "ps_min", "ps_req_lo",
    "ps_req_r", "ps_req_v", "t_podset", "kf_nodes", "kr_arg", "kq_within", "kq_reclaim", "kq_threshold",
    "kq_root", "kq_has_quota", "kq_weight", "kr_fair", "kr_strategies", "kr_default",
    # Topology Aware Scheduling: each TAS flavor's levels (global level numbers), each level's domains
    # in the order of their level values, each domain's children (a range of the level below) and leaf,
    # each leaf's nodes, each flavor's node -> leaf; the podsets' requests, the exclusion of a node
    # for a pod class (an untolerated taint), the resources' alphabetical ranks
    "kr_tas", "tf_lvl_lo", "tf_leaf_lo", "tf_host", "tf_name", "tl_dom_lo", "td_kid_lo", "td_kid_hi", "td_leaf",
    "tv_node_lo", "tv_nodes", "tn_leaf", "ps_tkind", "ps_tlevel", "ps_task", "tx_taint", "r_rank",
)
B, I, F, I8 = np.bool_, np.int64, np.float64, np.int8
KUEUE_MUTABLE = {
    # the quota tree's usage and the admitted workloads (ClusterQueue.workloads, KueueSession.admitted)
    "kq_use": ("C Fl Rk", 0, F), "kw_admitted": ("J", False, B), "kw_use": ("J Fl Rk", 0, F),
    "kw_has": ("J Fl Rk", False, B), "kw_flav": ("Ps Rk", -1, I), "kw_count": ("Ps", 0, I),
    "kw_parked": ("J", False, B), "k_adm": ("J", 0, I), "k_ints": ("6", 0, I), "kw_at": ("J", 0, F),
    # waitForPodsReady: the last eviction, the backoff, the deactivated workloads
    "kw_evicted": ("J", False, B), "kw_by": ("J", BY_NONE, I), "kw_evicted_at": ("J", np.nan, F),
    "kw_requeue_at": ("J", -np.inf, F), "kw_requeues": ("J", 0, I), "kw_inactive": ("J", False, B),
    # preemption: candidates, the targets of a cycle's entries, the workloads a cycle preempts
    "kc_job": ("J", 0, I), "kc_var": ("J", 0, I), "kc_lca": ("J", -1, I), "kc_list": ("J", 0, I),
    "kc_order": ("J", 0, I), "kc_tmp": ("J", 0, I),
    "tg_job": ("Tg", 0, I), "tg_var": ("Tg", 0, I), "e_tg": ("C+2 2", 0, I), "kw_stamp": ("J", -1, I),
    "kt_req": ("Fl Rk", 0, F), "kt_has": ("Fl Rk", False, B), "kt_need": ("Fl Rk", False, B),
    "kt_rem": ("Fl Rk", 0, F), "k_stack": ("Nq", 0, I),
    # fair sharing: no usage, borrowed and lendable per resource, the groups of candidates by
    # ClusterQueue, the tournament's winners
    "kt_zero": ("Fl Rk", 0, F), "kt_none": ("Fl Rk", False, B), "kd_borrowed": ("Rk", 0, F),
    "kd_lendable": ("Rk", 0, F), "kd_seen": ("Rk", False, B), "kg_first": ("C", -1, I), "kg_on": ("C", False, B), "kg_retry": ("C", -1, I),
    "k_winner": ("Nq", -1, I), "e_waiting": ("C", False, B),
    # messages: the reasons of each Pending one, and each logged message's row
    "km_part": ("Mp 3", 0, I), "km_val": ("Mp 3", 0, F), "km_head": ("E 5", 0, I), "kw_last": ("J", -1, I),
    # one session's scratch: tree walks, heads, entries (one per ClusterQueue, then two for the
    # partial-admission search), binds
    "k_u": ("Nq", 0, F), "k_path": ("Nq", 0, I), "k_head": ("C", -1, I), "k_blocked": ("C", False, B),
    "k_reserved": ("C Fl Rk", 0, F),
    "e_job": ("C+2", -1, I), "e_mode": ("C+2", 0, I), "e_borrow": ("C+2", 0, I), "e_use": ("C+2 Fl Rk", 0, F),
    "e_has": ("C+2 Fl Rk", False, B), "e_flav": ("C+2 Mx Rk", -1, I), "e_counts": ("C+2 Mx", 0, I),
    "e_msg": ("C+2 5", 0, I), "e_order": ("C", 0, I), "k_free": ("N R", 0, F), "k_placed": ("Mx", 0, I),
    "k_binds": ("T 2", 0, I), "k_evicts": ("2*T+1 3", 0, I), "k_phase": ("J", 0, I8), "k_live": ("J", 0, I),
    # Topology Aware Scheduling: the domains' counts and three domain lists, the leaves' capacity (free,
    # with no TAS workload, assumed by the workload being placed), the exclusion counts, each entry's
    # and each admitted podset's assignment (pods per leaf, its flavor), a job's pods per leaf
    "td_pods": ("D", 0, I), "td_slices": ("D", 0, I), "k_da": ("D", 0, I), "k_db": ("D", 0, I), "k_dc": ("D", 0, I),
    "tv_free": ("Lv R", 0, F), "tv_empty": ("Lv R", 0, F), "tv_assumed": ("Lv R", 0, F), "tv_cap": ("R", 0, F),
    "ks_res": ("R", 0, I), "ks_taint": ("Xt", 0, I),
    "e_tas": ("C+2 Mx Lv", 0, I), "e_tasf": ("C+2 Mx", -1, I), "kw_tas": ("Ps Lv", 0, I), "kw_tasf": ("Ps", -1, I),
    "k_onleaf": ("Mx Lv", 0, I),
}
"""The Kueue run's own mutable arrays (shapes in the sizes of :func:`_kueue_mutable`)."""
KueueFields = namedtuple("KueueFields", CoreFields._fields + KUEUE_STATIC + tuple(KUEUE_MUTABLE))
"""The Kueue run's arrays: the Volcano core's, then the Kueue ones."""

# -------------------------------------------------------------------------------- the quota tree


@jit
def usage(s, n, f, r):
    """``QuotaNode.usage``: a ClusterQueue's own; a Cohort's, what its children use beyond their
    local quota, summed in their order."""
    n_cqs = s.kq_use.shape[0]
    if n < n_cqs:
        return s.kq_use[n, f, r]
    u = s.k_u
    for k in range(s.kq_post_lo[n], s.kq_post_lo[n + 1]):
        m = s.kq_post[k]
        if m < n_cqs:
            u[m] = s.kq_use[m, f, r]
            continue
        total = 0.0
        for i in range(s.kq_kid_lo[m], s.kq_kid_lo[m + 1]):
            c = s.kq_kids[i]
            total += max(0.0, u[c] - s.kq_local[c, f, r])
        u[m] = total
    return u[n]


@jit
def local_available(s, n, f, r):
    return max(0.0, s.kq_local[n, f, r] - usage(s, n, f, r))


@jit
def borrowing_with(s, n, f, r, value):
    return usage(s, n, f, r) + value > s.kq_subtree[n, f, r]


@jit
def available(s, n, f, r):
    """``QuotaNode.available``: what node ``n`` can still use, borrowing from its ancestors within
    their limits (worked from the root down)."""
    path, k, m = s.k_path, 0, n
    while m >= 0:
        path[k] = m
        k += 1
        m = s.kq_parent[m]
    root = path[k - 1]
    value = max(0.0, s.kq_subtree[root, f, r] - usage(s, root, f, r))
    for i in range(k - 2, -1, -1):
        m = path[i]
        local, used_here = s.kq_local[m, f, r], usage(s, m, f, r)
        parent_available = value
        if s.kq_has_bl[m, f, r]:
            stored = s.kq_subtree[m, f, r] - local
            used = max(0.0, used_here - local)
            parent_available = max(0.0, min(parent_available, stored - used + s.kq_bl[m, f, r]))
        value = max(0.0, local - used_here) + parent_available
    return value


@jit
def lowest_subtree_that_fits(s, cq, f, r, value):
    """``FindHeightOfLowestSubtreeThatFits``: (height, whether that subtree is below the root)."""
    parent = s.kq_parent[cq]
    if not (borrowing_with(s, cq, f, r, value) and parent >= 0):
        return 0, parent >= 0
    remaining = value - local_available(s, cq, f, r)
    node = last = parent
    while node >= 0:
        if not borrowing_with(s, node, f, r, remaining):
            return s.kq_height[node], s.kq_parent[node] >= 0
        remaining -= local_available(s, node, f, r)
        last, node = node, s.kq_parent[node]
    return s.kq_height[last], s.kq_parent[last] >= 0


@jit
def add_usage(s, cq, j, sign):
    """``ClusterQueue.add_workload`` (sign 1) / ``remove_workload`` (-1): the workload's usage."""
    for f in range(s.kq_use.shape[1]):
        for r in range(s.kq_use.shape[2]):
            if s.kw_has[j, f, r]:
                s.kq_use[cq, f, r] += sign * s.kw_use[j, f, r]


@jit
def reserve(s, cq, e):
    """``ClusterQueue.reserve``: a preempting entry's usage held in its ClusterQueue for the session."""
    for f in range(s.kq_use.shape[1]):
        for r in range(s.kq_use.shape[2]):
            if s.e_has[e, f, r]:
                s.kq_use[cq, f, r] += s.e_use[e, f, r]
                s.k_reserved[cq, f, r] += s.e_use[e, f, r]


@jit
def workload_fits(s, cq, use, has, allow_borrowing):
    """``workloadFits`` for the requests ``use`` on the flavor-resources ``has``."""
    for f in range(s.kq_use.shape[1]):
        for r in range(s.kq_use.shape[2]):
            if not has[f, r]:
                continue
            v = use[f, r]
            if not allow_borrowing and borrowing_with(s, cq, f, r, v):
                return False
            if v > available(s, cq, f, r) + 1e-9:
                return False
    return True


# -------------------------------------------------------------------------------- preemption


@jit
def within_nominal(s, n, need):
    """``IsWithinNominalInResources`` over the flavor-resources ``need``."""
    for f in range(need.shape[0]):
        for r in range(need.shape[1]):
            if need[f, r] and borrowing_with(s, n, f, r, 0.0):
                return False
    return True


@jit
def fits_in_quota(s, n, need):
    """``QuantitiesFitInQuota`` on ``s.kt_rem`` (over ``need``): whether it fits node ``n``'s unused
    subtree quota; what does not is left in ``s.kt_rem`` for the parent."""
    fits = True
    for f in range(need.shape[0]):
        for r in range(need.shape[1]):
            if need[f, r]:
                unused = max(0.0, s.kq_subtree[n, f, r] - usage(s, n, f, r))
                s.kt_rem[f, r] = max(0.0, s.kt_rem[f, r] - unused)
                fits = fits and s.kt_rem[f, r] == 0
    return fits


@jit
def policy_allows(s, policy, preemptor, candidate):
    """``_policy_allows``."""
    if policy == P_ANY:
        return True
    if policy == P_LOWER:
        return s.j_prio[preemptor] > s.j_prio[candidate]
    if policy == P_LOWER_OR_NEWER:
        return s.j_prio[preemptor] > s.j_prio[candidate] or (
            s.j_prio[preemptor] == s.j_prio[candidate]
            and queue_timestamp(s, preemptor, True) < queue_timestamp(s, candidate, True))
    return False


@jit
def uses(s, w, need):
    for f in range(need.shape[0]):
        for r in range(need.shape[1]):
            if need[f, r] and s.kw_has[w, f, r]:
                return True
    return False


@jit
def classify(s, cq, preemptor, w, need, advantage):
    """``_classify``: the candidate's preemption variant, 0 when it cannot be preempted."""
    if not uses(s, w, need):
        return 0
    same = s.kw_cq[w] == cq
    if not policy_allows(s, s.kq_within[cq] if same else s.kq_reclaim[cq], preemptor, w):
        return 0
    if same:
        return WITHIN_CQ
    if advantage:
        return HIERARCHICAL_RECLAIM
    if not s.kq_while_borrowing[cq]:
        return RECLAIM_WITHOUT_BORROWING
    threshold = s.kq_threshold[cq]
    if s.j_prio[w] >= s.j_prio[preemptor] or (not math.isnan(threshold) and s.j_prio[w] > threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


@jit
def add_candidates(s, other, lca, cq, preemptor, need, advantage, group, n):
    """``_from_cq``: the admitted workloads of ClusterQueue ``other`` that can be preempted, as
    candidates of list ``group`` (0 hierarchy, 1 priority, 2 same ClusterQueue); the new count."""
    for i in range(s.k_ints[K_ADMITTED]):
        w = s.k_adm[i]
        if s.kw_cq[w] != other:
            continue
        variant = classify(s, cq, preemptor, w, need, advantage)
        if variant:
            s.kc_job[n], s.kc_var[n], s.kc_lca[n], s.kc_list[n] = w, variant, lca, group
            n += 1
    return n


@jit
def collect_in_subtree(s, cohort, skip, cq, preemptor, need, advantage, n):
    """``_collect_in_subtree``: candidates in the subtrees below ``cohort`` that exceed their quota
    (in any order: they are sorted by :func:`candidate_before`)."""
    stack, top = s.k_stack, 0
    for i in range(s.kq_kid_lo[cohort], s.kq_kid_lo[cohort + 1]):
        stack[top] = s.kq_kids[i]
        top += 1
    n_cqs = s.kq_use.shape[0]
    while top > 0:
        top -= 1
        child = stack[top]
        if child == skip or child == cq or within_nominal(s, child, need):
            continue
        if child >= n_cqs:
            for i in range(s.kq_kid_lo[child], s.kq_kid_lo[child + 1]):
                stack[top] = s.kq_kids[i]
                top += 1
        else:
            n = add_candidates(s, child, cohort, cq, preemptor, need, advantage, 0 if advantage else 1, n)
    return n


@jit
def candidate_before(s, a, b, cq):
    """The attempt order: evicted first, then hierarchy, priority, same-ClusterQueue candidates,
    each by ``candidates_ordering`` (other ClusterQueues first, lower priority, newest, UID)."""
    x, y = s.kc_job[a], s.kc_job[b]
    if s.kw_evicted[x] != s.kw_evicted[y]:
        return s.kw_evicted[x]
    if s.kc_list[a] != s.kc_list[b]:
        return s.kc_list[a] < s.kc_list[b]
    if (s.kw_cq[x] == cq) != (s.kw_cq[y] == cq):
        return s.kw_cq[y] == cq
    if s.j_prio[x] != s.j_prio[y]:
        return s.j_prio[x] < s.j_prio[y]
    if s.kw_at[x] != s.kw_at[y]:
        return s.kw_at[x] > s.kw_at[y]
    return s.kw_uid[x] < s.kw_uid[y]


@jit
def sort_candidates(s, n, cq):
    """Merge sort of the candidates 0..n-1 (rows of ``s.kc_*``) into ``s.kc_order``."""
    order, tmp = s.kc_order, s.kc_tmp
    for i in range(n):
        order[i] = i
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            a, b, k = lo, mid, lo
            while a < mid or b < hi:
                if b >= hi or (a < mid and not candidate_before(s, order[b], order[a], cq)):
                    tmp[k] = order[a]
                    a += 1
                else:
                    tmp[k] = order[b]
                    b += 1
                k += 1
        for i in range(n):
            order[i] = tmp[i]
        width *= 2


@jit
def valid(s, c, cq, need, allow_borrowing):
    """``_valid``: a cross-ClusterQueue candidate's queue and its ancestors below the LCA still borrow."""
    w = s.kc_job[c]
    other = s.kw_cq[w]
    if other == cq:
        return True
    if allow_borrowing and s.kc_var[c] == RECLAIM_WITHOUT_BORROWING:
        return False
    if within_nominal(s, other, need):
        return False
    node = s.kq_parent[other]
    while node >= 0 and node != s.kc_lca[c]:
        if within_nominal(s, node, need):
            return False
        node = s.kq_parent[node]
    return True


@jit
def fill_back(s, cq, use, has, base, n, allow_borrowing):
    """``_fill_back``: in reverse order, put back every target but the last that is not needed;
    the count left."""
    for i in range(n - 2, -1, -1):
        w = s.tg_job[base + i]
        add_usage(s, s.kw_cq[w], w, 1)
        if workload_fits(s, cq, use, has, allow_borrowing):
            for k in range(base + i, base + n - 1):
                s.tg_job[k], s.tg_var[k] = s.tg_job[k + 1], s.tg_var[k + 1]
            n -= 1
        else:
            add_usage(s, s.kw_cq[w], w, -1)
    return n


@jit
def minimal(s, cq, use, has, need, n_candidates, allow_borrowing):
    """``_minimal``: remove candidates in order until the requests fit, then fill back; the targets
    at ``s.tg_job[K_TARGETS...]``, their count (0 when no set suffices)."""
    base, n, fits = s.k_ints[K_TARGETS], 0, False
    for i in range(n_candidates):
        c = s.kc_order[i]
        if not valid(s, c, cq, need, allow_borrowing):
            continue
        if base + n >= s.tg_job.size:
            s.ints[I_OVERFLOW] = 1
            break
        w = s.kc_job[c]
        add_usage(s, s.kw_cq[w], w, -1)
        s.tg_job[base + n], s.tg_var[base + n] = w, s.kc_var[c]
        n += 1
        if workload_fits(s, cq, use, has, allow_borrowing):
            fits = True
            break
    return restore(s, cq, use, has, base, n, fits, allow_borrowing)


@jit
def restore(s, cq, use, has, base, n, fits, allow_borrowing):
    """The end of a search for targets: a set that fits filled back (``_fillBackWorkloads``), the
    usage of the ``n`` removed ones put back; the targets' count (0 when no set fits)."""
    if fits:
        n = fill_back(s, cq, use, has, base, n, allow_borrowing)
    for i in range(n):
        w = s.tg_job[base + i]
        add_usage(s, s.kw_cq[w], w, 1)
    return n if fits else 0


@jit
def get_targets(s, j, cq, use, has, need, strategies):
    """``get_targets``: the workloads to preempt so that the requests ``use`` (on ``has``) fit,
    given the flavor-resources ``need`` that need preemption (fair sharing under ``strategies``);
    their count at ``s.tg_job[K_TARGETS...]``, 0 if none suffice."""
    if s.kr_fair:
        return fair_targets(s, j, cq, use, has, need, strategies[0], strategies[1])
    return classical_targets(s, j, cq, use, has, need)


@jit
def classical_targets(s, j, cq, use, has, need):
    """``_classical_targets``: candidates, attempt order, greedy removal then fill-back."""
    n = 0
    if s.kq_within[cq] != P_NEVER:
        n = add_candidates(s, cq, -1, cq, j, need, False, 2, n)
    if s.kq_parent[cq] >= 0 and s.kq_reclaim[cq] != P_NEVER:
        for f in range(need.shape[0]):
            for r in range(need.shape[1]):
                s.kt_rem[f, r] = use[f, r] if need[f, r] and has[f, r] else 0.0
        wanted = need & has
        advantage = fits_in_quota(s, cq, wanted)
        previous, node = -1, s.kq_parent[cq]
        while node >= 0:
            n = collect_in_subtree(s, node, previous, cq, j, need, advantage, n)
            advantage = fits_in_quota(s, node, wanted) or advantage
            previous, node = node, s.kq_parent[node]
    reclaim = False
    hierarchy = False
    for c in range(n):
        reclaim = reclaim or s.kc_list[c] < 2
        hierarchy = hierarchy or s.kc_list[c] == 0
    sort_candidates(s, n, cq)
    forbidden = not s.kq_while_borrowing[cq]
    under_nominal = True
    for f in range(need.shape[0]):
        for r in range(need.shape[1]):
            if need[f, r]:
                under_nominal = under_nominal and usage(s, cq, f, r) < s.kq_subtree[cq, f, r]
    if not reclaim or (forbidden and not under_nominal):
        return minimal(s, cq, use, has, need, n, True)
    first = not (forbidden and not hierarchy)
    found = minimal(s, cq, use, has, need, n, first)
    return found if found else minimal(s, cq, use, has, need, n, not first)


# -------------------------------------------------------------------------------- fair sharing


@jit
def drs(s, n, add, add_has, remove, remove_has):
    """``dominant_resource_share``: max over resources of borrowed * 1000 / lendable, over the
    weight, with ``add`` added to and ``remove`` taken from the node's usage."""
    parent = s.kq_parent[n]
    if parent < 0:
        return 0.0
    borrowed, lendable = s.kd_borrowed, s.kd_lendable
    borrowed[:] = 0.0
    lendable[:] = 0.0
    seen = s.kd_seen
    seen[:] = False
    for f in range(add.shape[0]):
        for r in range(add.shape[1]):
            if not (s.kq_has_quota[n, f, r] or add_has[f, r] or remove_has[f, r]):
                continue
            extra = (add[f, r] if add_has[f, r] else 0.0) - (remove[f, r] if remove_has[f, r] else 0.0)
            borrowed[r] += max(0.0, usage(s, n, f, r) + extra - s.kq_subtree[n, f, r])
            lendable[r] += s.kq_potential[parent, f, r]
            seen[r] = True
    ratio = 0
    for r in range(add.shape[1]):
        if seen[r] and lendable[r] > 0:
            ratio = max(ratio, math.floor(borrowed[r] * 1000 / lendable[r] + 1e-9))
    if ratio == 0:
        return 0.0
    if s.kq_weight[n] == 0:
        return math.inf
    return float(math.floor(ratio / s.kq_weight[n] + 1e-9))


@jit
def share(s, n):
    """The node's DRS as it is."""
    return drs(s, n, s.kt_zero, s.kt_none, s.kt_zero, s.kt_none)


@jit
def strategy_allows(strategy, preemptor_new, target_old, target_new):
    if strategy == FINAL_SHARE:
        return preemptor_new <= target_new
    return preemptor_new < target_old


@jit
def highest(s, first, cq):
    """``pop_highest``: the ClusterQueue with the highest DRS among those with a first candidate
    in ``first``; on ties, the one whose first candidate orders first."""
    best, best_share = -1, -math.inf
    for q in range(first.size):
        if first[q] < 0:
            continue
        value = share(s, q)
        if best < 0 or value > best_share or (
                value == best_share and candidate_before(s, s.kc_order[first[q]], s.kc_order[first[best]], cq)):
            best, best_share = q, value
    return best


@jit
def next_of(s, c, n):
    """The candidate after ``c`` (in the sorted order) of the same ClusterQueue, -1 if none."""
    q = s.kw_cq[s.kc_job[s.kc_order[c]]]
    for k in range(c + 1, n):
        if s.kw_cq[s.kc_job[s.kc_order[k]]] == q:
            return k
    return -1


@jit
def take(s, cq, use, has, position, variant, base, n_targets):
    """A candidate becomes a target: its usage leaves the tree; True if the requests fit now."""
    w = s.kc_job[s.kc_order[position]]
    if base + n_targets >= s.tg_job.size:
        s.ints[I_OVERFLOW] = 1
        return True
    add_usage(s, s.kw_cq[w], w, -1)
    s.tg_job[base + n_targets], s.tg_var[base + n_targets] = w, variant
    return workload_fits(s, cq, use, has, True)


@jit
def fair_targets(s, j, cq, use, has, need, first_strategy, second_strategy):
    """``_fair_targets``: candidates from the ClusterQueue with the highest DRS while the first
    strategy allows it, then one per ClusterQueue under the second; the preemptor's own
    ClusterQueue without a share check, every one when the preemptor stays within nominal."""
    n = 0
    if s.kq_within[cq] != P_NEVER:
        for i in range(s.k_ints[K_ADMITTED]):
            w = s.k_adm[i]
            if s.kw_cq[w] == cq and uses(s, w, need) and policy_allows(s, s.kq_within[cq], j, w):
                s.kc_job[n], s.kc_list[n] = w, 0
                n += 1
    if s.kq_parent[cq] >= 0 and s.kq_reclaim[cq] != P_NEVER:
        for other in range(s.kq_use.shape[0]):
            if other == cq or s.kq_root[other] != s.kq_root[cq] or within_nominal(s, other, need):
                continue
            for i in range(s.k_ints[K_ADMITTED]):
                w = s.k_adm[i]
                if s.kw_cq[w] == other and uses(s, w, need) and policy_allows(s, s.kq_reclaim[cq], j, w):
                    s.kc_job[n], s.kc_list[n] = w, 0
                    n += 1
    sort_candidates(s, n, cq)
    nominal = True
    for f in range(need.shape[0]):
        for r in range(need.shape[1]):
            if need[f, r]:
                nominal = nominal and not borrowing_with(s, cq, f, r, use[f, r] if has[f, r] else 0.0)
    first, retry = s.kg_first, s.kg_retry
    first[:] = -1
    retry[:] = -1
    for c in range(n - 1, -1, -1):
        first[s.kw_cq[s.kc_job[s.kc_order[c]]]] = c
    base, n_targets, fits = s.k_ints[K_TARGETS], 0, False
    while not fits:
        q = highest(s, first, cq)
        if q < 0:
            break
        c = first[q]
        first[q] = -1
        if q == cq:
            fits = take(s, cq, use, has, c, WITHIN_CQ, base, n_targets)
            n_targets += 1
            first[q] = next_of(s, c, n)
            continue
        preemptor_new = drs(s, cq, use, has, s.kt_zero, s.kt_none)
        old = share(s, q)
        while c >= 0:
            w = s.kc_job[s.kc_order[c]]
            new = drs(s, q, s.kt_zero, s.kt_none, s.kw_use[w], s.kw_has[w])
            if nominal or strategy_allows(first_strategy, preemptor_new, old, new):
                fits = take(s, cq, use, has, c, HIERARCHICAL_RECLAIM if nominal else FAIR_SHARING, base, n_targets)
                n_targets += 1
                later = next_of(s, c, n)
                if not fits and later >= 0 and not within_nominal(s, q, need):
                    first[q] = later
                break
            if retry[q] < 0:
                retry[q] = c
            c = next_of(s, c, n)
    while not fits and second_strategy >= 0:
        q = highest(s, retry, cq)
        if q < 0:
            break
        c = retry[q]
        retry[q] = -1
        if strategy_allows(second_strategy, drs(s, cq, use, has, s.kt_zero, s.kt_none), share(s, q), 0.0):
            fits = take(s, cq, use, has, c, FAIR_SHARING, base, n_targets)
            n_targets += 1
    return restore(s, cq, use, has, base, n_targets, fits, True)


# -------------------------------------------------------------------------------- flavor assignment


@jit
def add_part(s, kind, f, r, a, b, c):
    """One reason a flavor does not fit, with its quantities."""
    k = s.k_ints[K_PARTS]
    if k >= s.km_part.shape[0]:
        s.ints[I_OVERFLOW] = 1
        return
    s.km_part[k, 0], s.km_part[k, 1], s.km_part[k, 2] = kind, f, r
    s.km_val[k, 0], s.km_val[k, 1], s.km_val[k, 2] = a, b, c
    s.k_ints[K_PARTS] = k + 1


@jit
def fits_resource_quota(s, j, cq, f, r, value, request):
    """``_fits_resource_quota``: (mode, borrowing height); a reason is added when it does not fit.
    A Preempt is checked by simulating the preemption of this flavor-resource alone."""
    available_now, capacity = available(s, cq, f, r), s.kq_potential[cq, f, r]
    if value > capacity:
        add_part(s, PART_CAPACITY, f, r, value, request, capacity)
        return NO_FIT, 0
    borrow, may_reclaim = lowest_subtree_that_fits(s, cq, f, r, value)
    if value <= available_now:
        return FIT, borrow
    add_part(s, PART_UNUSED, f, r, value, available_now, 0.0)
    if value <= s.kq_subtree[cq, f, r] or may_reclaim or s.kq_while_borrowing[cq]:
        s.kt_req[:, :] = 0.0
        s.kt_has[:, :] = False
        s.kt_req[f, r], s.kt_has[f, r] = value, True
        found = get_targets(s, j, cq, s.kt_req, s.kt_has, s.kt_has, s.kr_default) > 0
        return (PREEMPT if found else NO_CANDIDATES), borrow
    return NO_FIT, borrow


@jit
def set_message(s, slot, kind, podset, lo, hi, x):
    row = s.e_msg[slot]
    row[H_KIND], row[H_PODSET], row[H_LO], row[H_HI], row[H_X] = kind, podset, lo, hi, x


@jit
def assign_counts(s, slot):
    """``_assign_counts``: a flavor per resource group for each podset of the entry's workload,
    with the pod counts in ``s.e_counts[slot]``; the outcome in the entry's arrays."""
    j = s.e_job[slot]
    cq = s.kw_cq[j]
    s.e_use[slot] = 0.0
    s.e_has[slot] = False
    s.e_flav[slot] = -1
    s.e_borrow[slot] = 0  # also for a NO_FIT
    set_message(s, slot, 0, 0, 0, 0, 0)
    worst, borrowing = FIT, 0
    for i in range(s.kw_ps_lo[j + 1] - s.kw_ps_lo[j]):
        ps = s.kw_ps_lo[j] + i
        count = s.e_counts[slot, i]
        lo, hi = s.ps_req_lo[ps], s.ps_req_lo[ps + 1]
        for k in range(lo, hi):
            if s.kq_group[cq, s.ps_req_r[k]] < 0:
                no_fit(s, slot)
                set_message(s, slot, MSG_UNAVAILABLE, ps, 0, 0, s.ps_req_r[k])
                return
        for k in range(lo, hi):
            g = s.kq_group[cq, s.ps_req_r[k]]
            seen = False
            for k0 in range(lo, k):
                seen = seen or s.kq_group[cq, s.ps_req_r[k0]] == g
            if seen:
                continue
            reasons = s.k_ints[K_PARTS]
            best_mode, best_borrow, best_flavor = -1, 0, -1
            for x in range(s.kg_lo[g], s.kg_lo[g + 1]):
                f = s.kg_flavors[x]
                mismatch = tas_mismatch(s, ps, f) if s.kr_tas else 0
                if mismatch:
                    add_part(s, PART_TAS_FLAVOR, f, mismatch, 0.0, 0.0, 0.0)
                    if best_mode < 0:
                        best_mode, best_borrow, best_flavor = NO_FIT, 0, f
                    continue
                mode, borrow = FIT, 0
                for k2 in range(lo, hi):
                    r = s.ps_req_r[k2]
                    if s.kq_group[cq, r] != g:
                        continue
                    request = s.ps_req_v[k2] * count
                    m, b = fits_resource_quota(s, j, cq, f, r, s.e_use[slot, f, r] + request, request)
                    mode, borrow = min(mode, m), max(borrow, b)
                if best_mode < 0 or mode > best_mode or (mode == best_mode and borrow < best_borrow):
                    best_mode, best_borrow, best_flavor = mode, borrow, f
                if (mode == FIT and (borrow == 0 or s.kq_stop_borrow[cq])) or (
                        mode == PREEMPT and s.kq_stop_preempt[cq]):
                    break
            if best_mode == NO_FIT:
                no_fit(s, slot)
                set_message(s, slot, MSG_REASONS, ps, reasons, s.k_ints[K_PARTS], 0)
                return
            worst, borrowing = min(worst, best_mode), max(borrowing, best_borrow)
            for k2 in range(lo, hi):
                r = s.ps_req_r[k2]
                if s.kq_group[cq, r] == g:
                    s.e_flav[slot, i, r] = best_flavor
                    s.e_use[slot, best_flavor, r] += s.ps_req_v[k2] * count
                    s.e_has[slot, best_flavor, r] = True
            if best_mode == PREEMPT or best_mode == NO_CANDIDATES:
                set_message(s, slot, MSG_REASONS, ps, reasons, s.k_ints[K_PARTS], 0)
    s.e_mode[slot], s.e_borrow[slot] = worst, borrowing
    if worst == FIT:
        set_message(s, slot, 0, 0, 0, 0, 0)


@jit
def no_fit(s, slot):
    """The entry's assignment is a NoFit: no flavors and no usage, whatever earlier podsets or
    resource groups had been given (the fair-sharing order reads the usage)."""
    s.e_mode[slot] = NO_FIT
    s.e_use[slot] = 0.0
    s.e_has[slot] = False
    s.e_flav[slot] = -1

# -------------------------------------------------------------------------------- Topology Aware Scheduling


@jit
def tas_mismatch(s, ps, f):
    """``_tas_mismatch``: why flavor ``f`` cannot take podset ``ps`` (0: it can)."""
    tas = s.tf_lvl_lo[f + 1] > s.tf_lvl_lo[f]
    if s.ps_tkind[ps] == TK_NONE:
        return TAS_SUPPORTS_ONLY if tas else 0
    if not tas:
        return TAS_NOT_SUPPORTED
    if s.ps_tlevel[ps, f] < 0:
        return TAS_NO_LEVEL
    return 0


@jit
def tas_count_in(s, req, cap):
    """``tas.count_in``: (pods of ``req`` that fit in ``cap``, the limiting resource or -1)."""
    best, limiting = -1, -1
    for r in range(req.size):
        if req[r] > 0:
            n = max(0, int(cap[r] / req[r] + 1e-9))  # truncation: as floor once clamped at 0
            if best < 0 or n < best or (n == best and s.r_rank[r] < s.r_rank[limiting]):
                best, limiting = n, r
    if best < 0:
        return 0, -1
    return best, limiting


@jit
def tas_fill(s, f, ps, empty):
    """Phase 1 of ``find_assignment``: each leaf's pods (capacity less the assumed usage; an excluded
    node none), summed up the levels; the exclusions counted in ``s.ks_res`` / ``s.ks_taint``."""
    base = s.tv_empty if empty else s.tv_free
    t = s.ps_task[ps]
    req, cls, cap = s.t_req[t], s.t_class[t], s.tv_cap
    s.ks_res[:] = 0
    s.ks_taint[:] = 0
    leaf_level = s.tf_lvl_lo[f + 1] - 1
    for d in range(s.tl_dom_lo[leaf_level], s.tl_dom_lo[leaf_level + 1]):
        v = s.td_leaf[d]
        x = s.tx_taint[cls, s.tv_nodes[s.tv_node_lo[v]]] if s.tf_host[f] else -1
        if x >= 0:
            s.ks_taint[x] += 1
            s.td_pods[d] = 0
            s.td_slices[d] = 0
            continue
        for r in range(cap.size):
            cap[r] = base[v, r] - s.tv_assumed[v, r]
        n, limiting = tas_count_in(s, req, cap)
        s.td_pods[d] = n
        s.td_slices[d] = n
        if n == 0 and limiting >= 0:
            s.ks_res[limiting] += 1
    for g in range(leaf_level - 1, s.tf_lvl_lo[f] - 1, -1):
        for d in range(s.tl_dom_lo[g], s.tl_dom_lo[g + 1]):
            total = 0
            for c in range(s.td_kid_lo[d], s.td_kid_hi[d]):
                total += s.td_pods[c]
            s.td_pods[d] = total
            s.td_slices[d] = total


@jit
def tas_before(s, a, b, unconstrained):
    """``_sorted``'s order: BestFit slices descending (LeastFreeCapacity ascending), pods ascending,
    then level values (the domain numbers follow them)."""
    sa, sb = s.td_slices[a], s.td_slices[b]
    if sa != sb:
        return sa < sb if unconstrained else sa > sb
    if s.td_pods[a] != s.td_pods[b]:
        return s.td_pods[a] < s.td_pods[b]
    return a < b


@jit
def tas_sort(s, buf, n, unconstrained):
    for i in range(1, n):
        d, k = buf[i], i
        while k > 0 and tas_before(s, d, buf[k - 1], unconstrained):
            buf[k] = buf[k - 1]
            k -= 1
        buf[k] = d


@jit
def tas_best_fit(s, buf, lo, n, needed):
    """``_best_fit`` over ``buf[lo:n]``."""
    best, fewest = buf[lo], -1
    for k in range(lo, n):
        d = buf[k]
        if s.td_slices[d] >= needed and (fewest < 0 or s.td_slices[d] < fewest):
            best, fewest = d, s.td_slices[d]
    return best


@jit
def tas_to_minimum(s, src, n, count, unconstrained, dst):
    """``_to_minimum`` of ``src[:n]`` into ``dst``; the domains taken."""
    remaining, m = count, 0
    for i in range(n):
        d = src[i]
        if not unconstrained and s.td_slices[d] >= remaining:
            d = tas_best_fit(s, src, i, n, remaining)
        dst[m] = d
        m += 1
        if s.td_slices[d] >= remaining:
            s.td_pods[d] = remaining
            s.td_slices[d] = remaining
            return m
        s.td_pods[d] = s.td_slices[d]
        remaining -= s.td_slices[d]
    return m


@jit
def tas_find_level(s, f, g, count, required, unconstrained):
    """``find_level`` from global level ``g`` up; the fitting domains in ``s.k_db``: (level, how many,
    -1) or, when the podset does not fit, (level, 0, pods that fit; -2: no domain at the level)."""
    buf, out = s.k_da, s.k_db
    while True:
        lo, hi = s.tl_dom_lo[g], s.tl_dom_lo[g + 1]
        n = hi - lo
        if n == 0:
            return g, 0, -2
        for i in range(n):
            buf[i] = lo + i
        tas_sort(s, buf, n, unconstrained)
        top = buf[0]
        if not unconstrained and s.td_slices[top] >= count:
            top = tas_best_fit(s, buf, 0, n, count)
        if unconstrained:
            for i in range(n):
                if s.td_slices[buf[i]] >= count:
                    out[0] = buf[i]
                    return g, 1, -1
        if s.td_slices[top] >= count:
            out[0] = top
            return g, 1, -1
        if required:
            return g, 0, s.td_slices[top]
        if g > s.tf_lvl_lo[f] and not unconstrained:
            g -= 1
            continue
        m, remaining = 0, count
        for i in range(n):
            if remaining <= 0:
                break
            d = buf[i]
            if not unconstrained and s.td_slices[d] >= remaining:
                d = tas_best_fit(s, buf, i, n, remaining)
            out[m] = d
            m += 1
            remaining -= s.td_slices[d]
        if remaining > 0:
            return g, 0, count - remaining
        return g, m, -1


@jit
def tas_place(s, slot, i, f, ps, count, empty, record):
    """``find_assignment`` for podset ``i`` of the entry on flavor ``f``: its pods per leaf in
    ``s.e_tas[slot, i]``; False when it does not fit (``record``: with Kueue's reason as the entry's
    message)."""
    kind = s.ps_tkind[ps]
    unconstrained = kind == TK_UNCONSTRAINED
    tas_fill(s, f, ps, empty)
    g, m, fit = tas_find_level(s, f, s.ps_tlevel[ps, f], count, kind == TK_REQUIRED, unconstrained)
    if fit != -1:
        if record:
            k0 = s.k_ints[K_PARTS]
            leaves = s.tf_leaf_lo[f + 1] - s.tf_leaf_lo[f]
            add_part(s, PART_TAS, f, fit, float(count), float(leaves), float(g))
            for r in range(s.ks_res.size):
                if s.ks_res[r] > 0:
                    add_part(s, PART_TAS_RESOURCE, r, s.ks_res[r], 0.0, 0.0, 0.0)
            for x in range(s.ks_taint.size):
                if s.ks_taint[x] > 0:
                    add_part(s, PART_TAS_TAINT, x, s.ks_taint[x], 0.0, 0.0, 0.0)
            set_message(s, slot, MSG_REASONS, ps, k0, s.k_ints[K_PARTS], 0)
        return False
    m = tas_to_minimum(s, s.k_db, m, count, unconstrained, s.k_dc)
    while g < s.tf_lvl_lo[f + 1] - 1:
        n = 0
        for k in range(m):
            d = s.k_dc[k]
            for c in range(s.td_kid_lo[d], s.td_kid_hi[d]):
                s.k_da[n] = c
                n += 1
        tas_sort(s, s.k_da, n, unconstrained)
        m = tas_to_minimum(s, s.k_da, n, count, unconstrained, s.k_dc)
        g += 1
    s.e_tas[slot, i, :] = 0
    for k in range(m):
        d = s.k_dc[k]
        if s.td_pods[d] > 0:
            s.e_tas[slot, i, s.td_leaf[d]] = s.td_pods[d]
    s.e_tasf[slot, i] = f
    return True


@jit
def tas_add(s, book, placement, f, req, sign):
    """``Snapshot.add``: ``placement``'s pods of ``req`` off ``book`` (sign -1: back on)."""
    for v in range(s.tf_leaf_lo[f], s.tf_leaf_lo[f + 1]):
        n = placement[v]
        if n > 0:
            for r in range(req.size):
                book[v, r] -= sign * n * req[r]


@jit
def tas_flavor(s, slot, i):
    """The TAS flavor the entry's podset ``i`` was given, or -1."""
    for r in range(s.e_flav.shape[2]):
        f = s.e_flav[slot, i, r]
        if f >= 0 and s.tf_lvl_lo[f + 1] > s.tf_lvl_lo[f]:
            return f
    return -1


@jit
def tas_try(s, slot, empty, record):
    """``_assign_topology``'s ``place``: each TAS podset in turn, each seeing the ones before it
    (assumed usage, taken back after); True if all fit."""
    j = s.e_job[slot]
    lo, n_ps = s.kw_ps_lo[j], s.kw_ps_lo[j + 1] - s.kw_ps_lo[j]
    s.e_tasf[slot, :] = -1
    ok = True
    for i in range(n_ps):
        ps = lo + i
        f = tas_flavor(s, slot, i)
        if s.ps_tkind[ps] == TK_NONE or f < 0 or s.e_counts[slot, i] <= 0:
            continue
        if not tas_place(s, slot, i, f, ps, s.e_counts[slot, i], empty, record):
            ok = False
            break
        tas_add(s, s.tv_assumed, s.e_tas[slot, i], f, s.t_req[s.ps_task[ps]], 1.0)
    for i in range(n_ps):
        f = s.e_tasf[slot, i]
        if f >= 0:
            tas_add(s, s.tv_assumed, s.e_tas[slot, i], f, s.t_req[s.ps_task[lo + i]], -1.0)
    return ok


@jit
def tas_assign(s, slot):
    """``_assign_topology``: a Fit places the TAS podsets or becomes a Preempt with Kueue's reason; a
    Preempt that does not fit on an empty topology either is a NoFit."""
    s.e_tasf[slot, :] = -1
    if s.e_mode[slot] == NO_FIT:
        return
    j = s.e_job[slot]
    wanted = False
    for i in range(s.kw_ps_lo[j + 1] - s.kw_ps_lo[j]):
        ps = s.kw_ps_lo[j] + i
        wanted = wanted or (s.ps_tkind[ps] != TK_NONE and s.e_counts[slot, i] > 0 and tas_flavor(s, slot, i) >= 0)
    if not wanted:
        return
    if s.e_mode[slot] == FIT:
        if tas_try(s, slot, False, True):
            return
        s.e_mode[slot] = PREEMPT
    if not tas_try(s, slot, True, False):
        no_fit(s, slot)
    s.e_tasf[slot, :] = -1


@jit
def tas_fits_again(s, e):
    """``_topology_fits``: the Fit entry's assignment still fits the leaves, else it is computed again
    and only a Fit again goes on (True)."""
    j = s.e_job[e]
    ok = True
    for i in range(s.kw_ps_lo[j + 1] - s.kw_ps_lo[j]):
        f = s.e_tasf[e, i]
        if f < 0:
            continue
        req = s.t_req[s.ps_task[s.kw_ps_lo[j] + i]]
        for v in range(s.tf_leaf_lo[f], s.tf_leaf_lo[f + 1]):
            if s.e_tas[e, i, v] > 0 and tas_count_in(s, req, s.tv_free[v])[0] < s.e_tas[e, i, v]:
                ok = False
    if ok:
        return True
    assign_flavors(s, e)
    return s.e_mode[e] == FIT


@jit
def tas_take(s, slot):
    """An admitted entry's topology assignment becomes its podsets' and leaves the leaves' free capacity."""
    j = s.e_job[slot]
    lo = s.kw_ps_lo[j]
    for i in range(s.kw_ps_lo[j + 1] - lo):
        f = s.e_tasf[slot, i]
        s.kw_tasf[lo + i] = f
        if f >= 0:
            copy_row(s.kw_tas[lo + i], s.e_tas[slot, i])
            tas_add(s, s.tv_free, s.e_tas[slot, i], f, s.t_req[s.ps_task[lo + i]], 1.0)


@jit
def tas_snapshot(s):
    """``KueueSession._tas_snapshot``: each leaf's allocatable less the pods of workloads without a
    topology assignment, then less the admitted TAS workloads' assignments."""
    used = s.k_free
    copy_rows(used, s.n_used)
    n = s.k_ints[K_ADMITTED]
    for a in range(n):
        j = s.k_adm[a]
        if not job_has_tas(s, j):
            continue
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if holds(s.status[t]):
                for r in range(used.shape[1]):
                    used[s.node[t], r] -= s.t_req[t, r]
    for v in range(s.tv_empty.shape[0]):
        for k in range(s.tv_node_lo[v], s.tv_node_lo[v + 1]):
            node = s.tv_nodes[k]
            for r in range(used.shape[1]):
                free = s.node_alloc[node, r] - used[node, r]
                s.tv_empty[v, r] = free if k == s.tv_node_lo[v] else s.tv_empty[v, r] + free
    copy_rows(s.tv_free, s.tv_empty)
    s.tv_assumed[:, :] = 0.0
    for a in range(n):
        j = s.k_adm[a]
        for ps in range(s.kw_ps_lo[j], s.kw_ps_lo[j + 1]):
            if s.kw_tasf[ps] >= 0:
                tas_add(s, s.tv_free, s.kw_tas[ps], s.kw_tasf[ps], s.t_req[s.ps_task[ps]], 1.0)


@jit
def job_has_tas(s, j):
    for ps in range(s.kw_ps_lo[j], s.kw_ps_lo[j + 1]):
        if s.kw_tasf[ps] >= 0:
            return True
    return False


@jit
def tas_on_leaves(s, j):
    """The pods of each TAS podset of the job holding a node, per leaf (``_on_leaves``); False when
    the job has no topology assignment."""
    if not job_has_tas(s, j):
        return False
    lo = s.kw_ps_lo[j]
    for ps in range(lo, s.kw_ps_lo[j + 1]):
        f = s.kw_tasf[ps]
        if f >= 0:
            s.k_onleaf[ps - lo, s.tf_leaf_lo[f]:s.tf_leaf_lo[f + 1]] = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        ps = lo + s.t_podset[t]
        f = s.kw_tasf[ps]
        if f >= 0 and holds(s.status[t]):
            v = s.tn_leaf[f, s.node[t]]
            if v >= 0:
                s.k_onleaf[ps - lo, v] += 1
    return True


@jit
def tas_target(s, ps, i):
    """``_topology_nodes``: the first leaf of the podset's assignment holding fewer of its pods than
    assigned, or -1."""
    f = s.kw_tasf[ps]
    for v in range(s.tf_leaf_lo[f], s.tf_leaf_lo[f + 1]):
        if s.kw_tas[ps, v] > 0 and s.k_onleaf[i, v] < s.kw_tas[ps, v]:
            return v
    return -1


@jit
def copy_entry(s, src, dst):
    s.e_job[dst], s.e_mode[dst], s.e_borrow[dst] = s.e_job[src], s.e_mode[src], s.e_borrow[src]
    copy_rows(s.e_tas[dst], s.e_tas[src])
    copy_row(s.e_tasf[dst], s.e_tasf[src])
    copy_rows(s.e_use[dst], s.e_use[src])
    copy_rows(s.e_has[dst], s.e_has[src])
    copy_rows(s.e_flav[dst], s.e_flav[src])
    copy_row(s.e_counts[dst], s.e_counts[src])
    copy_row(s.e_msg[dst], s.e_msg[src])
    copy_row(s.e_tg[dst], s.e_tg[src])


@jit
def attempt(s, slot):
    """One assignment with the entry's counts and, for a Preempt, its targets (kept in the
    cycle's target buffer); True if it fits or has targets."""
    assign_counts(s, slot)
    if s.kr_tas:
        tas_assign(s, slot)
    s.e_tg[slot, 0], s.e_tg[slot, 1] = s.k_ints[K_TARGETS], 0
    if s.e_mode[slot] != PREEMPT:
        return s.e_mode[slot] == FIT
    j = s.e_job[slot]
    cq = s.kw_cq[j]
    needed = False
    for f in range(s.kt_need.shape[0]):
        for r in range(s.kt_need.shape[1]):
            s.kt_need[f, r] = s.e_has[slot, f, r] and s.e_use[slot, f, r] > available(s, cq, f, r)
            needed = needed or s.kt_need[f, r]
    # a Preempt made by TAS alone needs no quota back: no targets (``get_targets`` of nothing)
    n = get_targets(s, j, cq, s.e_use[slot], s.e_has[slot], s.kt_need, s.kr_strategies) if needed else 0
    s.e_tg[slot, 1] = n
    s.k_ints[K_TARGETS] += n
    return n > 0


@jit
def assign_flavors(s, slot):
    """``assign_flavors``: the full counts, else the smallest reduction toward the podsets' minimum
    counts that fits (``podset_reducer.go``, a binary search)."""
    j = s.e_job[slot]
    lo_ps, n_ps = s.kw_ps_lo[j], s.kw_ps_lo[j + 1] - s.kw_ps_lo[j]
    for i in range(n_ps):
        s.e_counts[slot, i] = s.ps_count[lo_ps + i]
    if attempt(s, slot):
        return
    total = 0
    for i in range(n_ps):
        total += s.ps_count[lo_ps + i] - s.ps_min[lo_ps + i]
    if total == 0:
        return
    trial, found = s.e_job.size - 2, s.e_job.size - 1
    s.e_job[trial] = j
    lo, hi, any_found = 1, total, False
    while lo <= hi:
        k = (lo + hi) // 2
        for i in range(n_ps):
            count, least = s.ps_count[lo_ps + i], s.ps_min[lo_ps + i]
            s.e_counts[trial, i] = count - ((count - least) * k) // total
        if attempt(s, trial):
            copy_entry(s, trial, found)
            any_found, hi = True, k - 1
        else:
            lo = k + 1
    if any_found:
        copy_entry(s, found, slot)


# -------------------------------------------------------------------------------- admission


@jit
def same_message(s, h, slot):
    """Message row ``h`` says what entry ``slot``'s message says."""
    row, msg = s.km_head[h], s.e_msg[slot]
    if row[H_KIND] != msg[H_KIND] or row[H_PODSET] != msg[H_PODSET] or row[H_X] != msg[H_X]:
        return False
    if row[H_HI] - row[H_LO] != msg[H_HI] - msg[H_LO]:
        return False
    for k in range(msg[H_HI] - msg[H_LO]):
        a, b = row[H_LO] + k, msg[H_LO] + k
        for c in range(3):
            if s.km_part[a, c] != s.km_part[b, c] or s.km_val[a, c] != s.km_val[b, c]:
                return False
    return True


@jit
def log_message(s, now, kind, j, slot):
    """An event of ``kind`` for workload ``j`` with the message of entry ``slot``; the workload's
    last message row is reused when it says the same (a pending head repeats it every session)."""
    h = s.kw_last[j]
    if h < 0 or not same_message(s, h, slot):
        h = s.k_ints[K_HEADS]
        if h >= s.km_head.shape[0]:
            s.ints[I_OVERFLOW] = 1
            return
        copy_row(s.km_head[h], s.e_msg[slot])
        s.k_ints[K_HEADS] = h + 1
        s.kw_last[j] = h
    log(s, now, kind, j, -1, -1, s.e_msg[slot, H_KIND], h, 0)


@jit
def queue_timestamp(s, j, eviction):
    """``queue_order_timestamp``: the eviction time after a PodsReady timeout (``eviction``:
    requeuingStrategy timestamp Eviction), else the creation time."""
    if eviction and s.kw_by[j] == BY_TIMEOUT and not math.isnan(s.kw_evicted_at[j]):
        return s.kw_evicted_at[j]
    return s.j_submit[j]


@jit
def order_before(s, a, b, eviction):
    """``queue_order_key``: higher priority, earlier timestamp, then the UID."""
    if s.j_prio[a] != s.j_prio[b]:
        return s.j_prio[a] > s.j_prio[b]
    ta, tb = queue_timestamp(s, a, eviction), queue_timestamp(s, b, eviction)
    if ta != tb:
        return ta < tb
    return s.kw_uid[a] < s.kw_uid[b]


@jit
def heads(s, now, n_live):
    """``_heads``: the first workload of each unblocked ClusterQueue's heap among the admissible
    ones (not deactivated, not backing off); the entries' count."""
    s.k_head[:] = -1
    eviction = s.kr_arg[R_EVICTION_TIMESTAMP] > 0
    for i in range(n_live):
        j = s.k_live[i]
        cq = s.kw_cq[j]
        if cq < 0 or s.k_phase[j] == PH_COMPLETED or s.kw_admitted[j] or s.kw_parked[j] or s.k_blocked[cq]:
            continue
        if s.kw_inactive[j] or s.kw_requeue_at[j] > now:
            continue
        if s.k_head[cq] < 0 or order_before(s, j, s.k_head[cq], eviction):
            s.k_head[cq] = j
    n = 0
    for cq in range(s.k_head.size):
        if s.k_head[cq] >= 0:
            s.e_job[n] = s.k_head[cq]
            n += 1
    return n


@jit
def entry_before(s, a, b):
    """``schedule``'s order: entries that do not borrow first, then priority, FIFO, UID."""
    if (s.e_borrow[a] > 0) != (s.e_borrow[b] > 0):
        return s.e_borrow[b] > 0
    return order_before(s, s.e_job[a], s.e_job[b], True)


@jit
def admit(s, now, slot):
    """The entry's workload takes its quota: it is added to its ClusterQueue."""
    j = s.e_job[slot]
    copy_rows(s.kw_use[j], s.e_use[slot])
    copy_rows(s.kw_has[j], s.e_has[slot])
    lo = s.kw_ps_lo[j]
    mask = 0
    for i in range(s.kw_ps_lo[j + 1] - lo):
        s.kw_count[lo + i] = s.e_counts[slot, i]
        copy_row(s.kw_flav[lo + i], s.e_flav[slot, i])
        for r in range(s.kw_flav.shape[1]):
            if s.e_flav[slot, i, r] >= 0:
                mask |= 1 << s.e_flav[slot, i, r]
    s.kw_admitted[j], s.kw_evicted[j], s.kw_at[j], s.kw_requeue_at[j] = True, False, now, -math.inf
    if s.kr_tas:
        tas_take(s, slot)
    add_usage(s, s.kw_cq[j], j, 1)
    s.k_adm[s.k_ints[K_ADMITTED]] = j
    s.k_ints[K_ADMITTED] += 1
    set_message(s, slot, MSG_QUOTA_RESERVED, 0, 0, 0, mask)
    log_message(s, now, EV_QUOTA_RESERVED, j, slot)


@jit
def borrows(s, node, e):
    """The entry's usage would make ``node`` borrow."""
    for f in range(s.kq_use.shape[1]):
        for r in range(s.kq_use.shape[2]):
            if s.e_has[e, f, r] and borrowing_with(s, node, f, r, s.e_use[e, f, r]):
                return True
    return False


@jit
def fair_less(s, node_a, a, node_b, b):
    """The tournament's key of entry ``a`` at ``node_a`` below that of ``b`` at ``node_b``: not
    borrowing first, then the lower DRS with the entry admitted, higher priority, FIFO, UID."""
    borrows_a, borrows_b = borrows(s, node_a, a), borrows(s, node_b, b)
    if borrows_a != borrows_b:
        return borrows_b
    share_a = drs(s, node_a, s.e_use[a], s.e_has[a], s.kt_zero, s.kt_none)
    share_b = drs(s, node_b, s.e_use[b], s.e_has[b], s.kt_zero, s.kt_none)
    if share_a != share_b:
        return share_a < share_b
    return order_before(s, s.e_job[a], s.e_job[b], True)


@jit
def fair_next(s, n):
    """``_fair_next``: the DRS tournament over the waiting entries: at each cohort the winners of
    its children compete, each keyed at its child; then the roots' winners, each at its own
    ClusterQueue."""
    winner, n_cqs = s.k_winner, s.kq_use.shape[0]
    winner[:] = -1
    for e in range(n):
        if s.e_waiting[e]:
            winner[s.kw_cq[s.e_job[e]]] = e
    best = -1
    for root in range(winner.size):
        if s.kq_parent[root] >= 0:
            continue
        for k in range(s.kq_post_lo[root], s.kq_post_lo[root + 1]):
            m = s.kq_post[k]
            if m < n_cqs:
                continue
            top = -1
            for i in range(s.kq_kid_lo[m], s.kq_kid_lo[m + 1]):
                c = s.kq_kids[i]
                if winner[c] >= 0 and (top < 0 or fair_less(s, c, winner[c], top, winner[top])):
                    top = c
            winner[m] = winner[top] if top >= 0 else -1
        e = winner[root]
        if e >= 0 and (best < 0 or fair_less(s, s.kw_cq[s.e_job[e]], e, s.kw_cq[s.e_job[best]], best)):
            best = e
    return best


@jit
def add_evictions(s, j, msg, ref):
    """The job's running pods are evicted (``s.k_evicts``: task, message code, its argument)."""
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        st = s.status[t]
        if st == RUNNING or st == BOUND or st == BINDING:
            k = s.k_ints[K_EVICTS]
            s.k_evicts[k, 0], s.k_evicts[k, 1], s.k_evicts[k, 2] = t, msg, ref
            s.k_ints[K_EVICTS] = k + 1


@jit
def preempt(s, now, w, preemptor, variant):
    """``_preempt``: the target is evicted, unless already preempted since its admission."""
    if s.kw_by[w] == BY_PREEMPTED and not math.isnan(s.kw_evicted_at[w]) and s.kw_evicted_at[w] >= s.kw_at[w]:
        return
    s.kw_by[w], s.kw_evicted_at[w] = BY_PREEMPTED, now
    log(s, now, EV_PREEMPTED, w, -1, -1, MSG_PREEMPTED, preemptor, variant)
    add_evictions(s, w, MSG_POD_PREEMPTED, preemptor * 8 + variant)


@jit
def process(s, now, e, cycle):
    """The entry's outcome: admitted, preempting its targets, or pending."""
    j = s.e_job[e]
    cq = s.kw_cq[j]
    if s.e_mode[e] == FIT:
        if workload_fits(s, cq, s.e_use[e], s.e_has[e], True):
            if not s.kr_tas or tas_fits_again(s, e):
                admit(s, now, e)
                return
        else:
            set_message(s, e, MSG_NO_LONGER_FITS, 0, 0, 0, 0)
    elif s.e_mode[e] == PREEMPT and s.e_tg[e, 1] > 0:
        lo, hi = s.e_tg[e, 0], s.e_tg[e, 0] + s.e_tg[e, 1]
        taken = False
        for k in range(lo, hi):
            taken = taken or s.kw_stamp[s.tg_job[k]] == cycle
        if not taken:
            for k in range(lo, hi):
                s.kw_evicted[s.tg_job[k]] = True
                s.kw_stamp[s.tg_job[k]] = cycle
            for k in range(lo, hi):
                preempt(s, now, s.tg_job[k], j, s.tg_var[k])
            s.k_blocked[cq] = True
            reserve(s, cq, e)
            s.e_msg[e, H_KIND], s.e_msg[e, H_X] = MSG_PREEMPTING, hi - lo
            log_message(s, now, EV_PENDING, j, e)
            return
        set_message(s, e, MSG_NO_LONGER_FITS, 0, 0, 0, 0)
    if s.kq_strict[cq]:
        s.k_blocked[cq] = True
    else:
        s.kw_parked[j] = True
    log_message(s, now, EV_PENDING, j, e)


@jit
def schedule(s, now, n):
    """One admission cycle (``schedule``) over the ``n`` heads; a head not admitted blocks its
    ClusterQueue for the session (StrictFIFO) or is parked until quota is freed (BestEffortFIFO)."""
    s.k_ints[K_TARGETS] = 0
    s.k_ints[K_CYCLE] += 1
    cycle = s.k_ints[K_CYCLE]
    for e in range(n):
        assign_flavors(s, e)
        s.e_order[e] = e
    for i in range(1, n):
        e, k = s.e_order[i], i
        while k > 0 and entry_before(s, e, s.e_order[k - 1]):
            s.e_order[k] = s.e_order[k - 1]
            k -= 1
        s.e_order[k] = e
    if s.kr_fair:
        s.e_waiting[:n] = True
        for _ in range(n):
            e = fair_next(s, n)
            s.e_waiting[e] = False
            process(s, now, e, cycle)
    else:
        for i in range(n):
            process(s, now, s.e_order[i], cycle)


@jit
def job_holds(s, j):
    """A pod of the job holds its node's resources."""
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if holds(s.status[t]):
            return True
    return False


@jit
def requeue(s, now, j):
    """``_requeue``: after a PodsReady timeout the workload backs off base * 2^(n-1) seconds,
    capped, or is deactivated past backoffLimitCount."""
    s.kw_evicted[j] = False
    if s.kw_by[j] != BY_TIMEOUT:
        return
    n = s.kw_requeues[j] = s.kw_requeues[j] + 1
    limit = s.kr_arg[R_LIMIT]
    if limit >= 0 and n > limit:
        s.kw_inactive[j] = True
        log(s, now, EV_DEACTIVATED, j, -1, -1, MSG_DEACTIVATED, 0, 0)
        return
    base, most = int(s.kr_arg[R_BASE]), int(s.kr_arg[R_MAX])
    wait = base * 2 ** (n - 1) if base * 2.0 ** (n - 1) < most else most
    s.kw_requeue_at[j] = now + wait
    push_event(s, now + wait, TIMER, -1, 0)
    log(s, now, EV_REQUEUED, j, -1, -1, MSG_REQUEUED, n, wait)


@jit
def give_back(s, now, j, finished):
    """The workload's quota goes back; every parked head is retried; an evicted one is requeued."""
    add_usage(s, s.kw_cq[j], j, -1)
    s.kw_admitted[j] = False
    s.kw_parked[:] = False
    if not finished:
        requeue(s, now, j)


@jit
def release(s, now):
    """``_release``: finished workloads and evicted ones whose pods are gone give their quota
    back, in the order they were admitted."""
    n, kept = s.k_ints[K_ADMITTED], 0
    for i in range(n):
        j = s.k_adm[i]
        finished = not s.is_live[j] or s.k_phase[j] == PH_COMPLETED
        if finished or (s.kw_evicted[j] and not job_holds(s, j)):
            give_back(s, now, j, finished)
            continue
        s.k_adm[kept] = j
        kept += 1
    s.k_ints[K_ADMITTED] = kept


@jit
def pods_ready(s, now):
    """``_pods_ready``: evict an admitted workload whose pods do not all run (or have succeeded)
    within the timeout (its running pods listed in ``s.k_evicts``); True when one still waits for
    its pods."""
    if not s.kr_arg[R_ENABLE]:
        return False
    waiting = False
    n, kept = s.k_ints[K_ADMITTED], 0
    for i in range(n):
        j = s.k_adm[i]
        s.k_adm[kept] = j
        kept += 1
        if s.kw_evicted[j] or not s.is_live[j]:
            continue
        running, admitted = 0, 0
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            running += s.status[t] == RUNNING or s.status[t] == SUCCEEDED
        for ps in range(s.kw_ps_lo[j], s.kw_ps_lo[j + 1]):
            admitted += s.kw_count[ps]
        if running >= admitted:
            continue
        deadline = s.kw_at[j] + s.kr_arg[R_TIMEOUT]
        if now < deadline:
            push_event(s, deadline, TIMER, -1, 0)
            waiting = True
            continue
        s.kw_evicted[j], s.kw_by[j], s.kw_evicted_at[j] = True, BY_TIMEOUT, now
        log(s, now, EV_EVICTED, j, -1, -1, MSG_TIMEOUT, 0, 0)
        add_evictions(s, j, MSG_POD_TIMEOUT, 0)
        if not job_holds(s, j):
            kept -= 1
            give_back(s, now, j, False)
    s.k_ints[K_ADMITTED] = kept
    return waiting


# -------------------------------------------------------------------------------- pods on nodes


@jit
def holds(status):
    """kueue._HOLDING: the pod holds its node's resources."""
    return status == RUNNING or status == BOUND or status == BINDING or status == RELEASING


@jit
def row_mean(x):
    """numpy's mean of a row: the first value plus the pairwise sum of the others, over the count."""
    n = x.size
    total = x[0]
    rest = n - 1
    if rest < 8:
        for i in range(1, n):
            total += x[i]
        return total / n
    r = x[1:9].copy()
    i = 9
    while i + 8 <= n:
        for c in range(8):
            r[c] += x[i + c]
        i += 8
    pairs = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for k in range(i, n):
        pairs += x[k]
    return (total + pairs) / n


@jit
def least_allocated(s, t, j, i, leaf):
    """``_bind``'s node for pod ``t`` of podset ``i`` (-1 for a job Kueue does not manage):
    a schedulable node of the podset's flavors where it fits, the most free on average; a pod of a
    TAS podset only on the nodes of its domain ``leaf`` (-1: any)."""
    free, alloc, req = s.k_free, s.node_alloc, s.t_req[t]
    share = s.vec[0]
    best, best_score = -1, -math.inf
    f_tas = s.kw_tasf[s.kw_ps_lo[j] + i] if leaf >= 0 else -1
    for n in range(alloc.shape[0]):
        if not (s.class_ok[s.t_class[t], n] and s.node_sched[n]):
            continue
        if f_tas >= 0 and s.tn_leaf[f_tas, n] != leaf:
            continue
        if i >= 0:
            ok = True
            for r in range(s.kw_flav.shape[1]):
                f = s.kw_flav[s.kw_ps_lo[j] + i, r]
                ok = ok and (f < 0 or s.kf_nodes[f, n])
            if not ok:
                continue
        fits = True
        for r in range(alloc.shape[1]):
            fits = fits and free[n, r] >= req[r] - 1e-9
            share[r] = (free[n, r] - req[r]) / max(alloc[n, r], 1e-12) if alloc[n, r] > 0 else 0.0
        if not fits:
            continue
        score = row_mean(share)
        if score > best_score:
            best, best_score = n, score
    return best


@jit
def place(s, n_live):
    """``_bind``: the pending pods of admitted (and unmanaged) workloads, each podset up to its
    admitted count; the binds' count."""
    copy_rows(s.k_free, s.node_alloc - s.n_used)
    n_binds = 0
    for x in range(n_live):
        j = s.k_live[x]
        managed = s.kw_cq[j] >= 0
        if managed and not (s.kw_admitted[j] and not s.kw_evicted[j]):
            continue
        if not s.created[j]:
            continue
        lo = s.kw_ps_lo[j]
        s.k_placed[:] = 0
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if holds(s.status[t]):
                s.k_placed[s.t_podset[t]] += 1
        tas = managed and s.kr_tas and tas_on_leaves(s, j)
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.status[t] != PENDING:
                continue
            i = s.t_podset[t] if managed else -1
            if managed and s.k_placed[i] >= s.kw_count[lo + i]:
                continue
            leaf = -1
            if tas and s.kw_tasf[lo + i] >= 0:
                leaf = tas_target(s, lo + i, i)
                if leaf < 0:
                    continue
            n = least_allocated(s, t, j, i, leaf)
            if n < 0:
                continue
            for r in range(s.k_free.shape[1]):
                s.k_free[n, r] -= s.t_req[t, r]
            if managed:
                s.k_placed[i] += 1
            if leaf >= 0:
                s.k_onleaf[i, leaf] += 1
            s.k_binds[n_binds, 0], s.k_binds[n_binds, 1] = t, n
            n_binds += 1
    return n_binds


# -------------------------------------------------------------------------------- the clock


@jit
def session_once(s, now):
    """One Kueue session (KueueSession.__call__) on the live jobs and the clock applying it
    (Simulation.session_once): binds, phases, starts. True if it changed anything."""
    n_live = s.ints[I_LIVE]
    if n_live == 0:
        return False
    s.ints[I_SESSIONS] += 1
    for i in range(n_live):
        j = s.live[i]
        s.k_live[i] = j
        s.k_phase[j] = s.phase[j]
    release(s, now)
    s.k_ints[K_EVICTS] = 0
    waiting = pods_ready(s, now)
    if s.kr_tas:
        tas_snapshot(s)
    s.k_blocked[:] = False
    while s.ints[I_OVERFLOW] == 0 and not (waiting and s.kr_arg[R_BLOCK]):
        n = heads(s, now, n_live)
        if n == 0:
            break
        schedule(s, now, n)
    use = s.kq_use
    use -= s.k_reserved  # the preempting entries' reservations end with the session
    s.k_reserved[:] = 0.0
    n_binds = place(s, n_live)
    changed = n_binds > 0 or s.k_ints[K_EVICTS] > 0
    for k in range(n_binds):
        bind(s, now, s.k_binds[k, 0], s.k_binds[k, 1], MSG_BIND, 0, 0)
    for k in range(s.k_ints[K_EVICTS]):
        evict(s, now, s.k_evicts[k, 0], s.k_evicts[k, 1], s.k_evicts[k, 2], 0)
    for i in range(n_live):
        j = s.k_live[i]
        phase = s.k_phase[j]
        if s.kw_cq[j] < 0 or (s.kw_admitted[j] and not s.kw_evicted[j]):
            if phase == PH_PENDING:
                phase = PH_INQUEUE
        elif not s.kw_admitted[j] and phase != PH_COMPLETED:
            phase = PH_PENDING
        if set_phase(s, now, j, phase):
            changed = True
    for i in range(n_live):
        maybe_start(s, now, s.k_live[i])
    return changed


@jit
def apply_event(s, now, slot):
    """A clock event; a TIMER only makes the next session run."""
    if s.h_key[slot, 0] == TIMER:
        return True
    return clock_apply_event(s, now, slot)


@jit
def session(s, now):
    session_at(s, now, session_once(s, now))


@entry
def run_core(s, budget):
    """The run of a Kueue scenario (Simulation.run under KueueSession): the Volcano clock
    (:func:`core_clock.clock_loop`: events in time order, sessions on the schedule-period grid one
    period after the last) with Kueue's sessions and timers, at most ``budget`` steps of it; True
    when it is over."""
    push_node_events(s)
    return clock_loop(s, budget, next_session, never, apply_event, changed, session, always_room, always_room)


# -------------------------------------------------------------------------------- driver


def unsupported(compiled) -> str | None:
    """What of a Kueue scenario the core does not simulate, or None."""
    if compiled.quotas is not None:
        return "ResourceQuota admission under Kueue"
    scenario = compiled.source
    if any(job.status is not None for job in scenario.jobs):
        return "job status snapshots under Kueue"
    if len(_names(scenario)[0]) > 62:
        return "more than 62 ResourceFlavors"
    return None


def _names(scenario) -> tuple[list[str], list[str]]:
    """The flavors and the resources (of quotas, then of podset requests), in the order first named."""
    kueue = scenario.kueue
    flavors = [f.name for f in kueue.resource_flavors]
    resources: list[str] = []
    for node in [*kueue.cluster_queues, *kueue.cohorts]:
        for g in node.resource_groups:
            resources += [r for r in g.covered_resources if r not in resources]
            for f in g.flavors:
                flavors += [] if f.name in flavors else [f.name]
                resources += [q.name for q in f.resources if q.name not in resources]
    for job in scenario.jobs:
        for t in job.tasks:
            resources += [r for r in t.resources if r not in resources]
    return flavors, resources


def kueue_arrays(c) -> dict:
    """The Kueue static arrays of a compiled scenario (:data:`KUEUE_STATIC`)."""
    scenario, p = c.scenario, c.problem
    kueue = scenario.kueue
    tree = build_tree(kueue)
    cqs = list(tree.cqs.values())
    nodes = cqs + list(tree.cohorts.values())
    index = {id(node): k for k, node in enumerate(nodes)}
    flavors, resources = _names(scenario)
    fair = scenario.scheduler.kueue.fair_sharing
    podsets = []  # (job, name, count, min, requests)
    cq_of = np.full(p.n_jobs, -1, np.int64)
    cq_index = {cq.name: k for k, cq in enumerate(cqs)}
    for j, job in enumerate(scenario.jobs):
        lq = local_queue(kueue.local_queues, job.namespace, job.queue)
        if lq is not None:
            cq_of[j] = cq_index[lq.cluster_queue]
        for t in job.tasks:
            requests = {r: parse_quantity(v) for r, v in t.resources.items()}
            podsets.append((j, t.name, t.replicas_resolved, t.elastic.min if t.elastic else t.replicas_resolved,
                            [(r, v) for r, v in requests.items() if v > 0]))
    fl, rk, n_nodes = {f: k for k, f in enumerate(flavors)}, {r: k for k, r in enumerate(resources)}, len(nodes)
    shape = (n_nodes, max(len(flavors), 1), max(len(resources), 1))
    subtree, local, potential, bl = np.zeros(shape), np.zeros(shape), np.zeros(shape), np.zeros(shape)
    has_bl = np.zeros(shape, bool)
    for k, node in enumerate(nodes):
        for f, fi in fl.items():
            for r, ri in rk.items():
                fr = (f, r)
                subtree[k, fi, ri] = node.subtree_quota(fr)
                local[k, fi, ri] = node.local_quota(fr)
                potential[k, fi, ri] = node.potential_available(fr)
                q = node.quotas.get(fr)
                if q is not None and q.borrowing_limit is not None:
                    has_bl[k, fi, ri], bl[k, fi, ri] = True, q.borrowing_limit
    kids = [[index[id(ch)] for ch in getattr(node, "children", [])] for node in nodes]
    post_lo, post = [0], []
    for k in range(n_nodes):
        post += _post_order(k, kids)
        post_lo.append(len(post))
    groups, group_of = [], np.full((len(cqs), shape[2]), -1, np.int64)
    for k, cq in enumerate(cqs):
        for g in cq.resource_groups:  # ClusterQueue.group_of: the first group covering a resource
            group_of[k, [rk[r] for r in g.covered if group_of[k, rk[r]] < 0]] = len(groups)
            groups.append([fl[f] for f in g.flavors])
    labels = [pool.labels for pool in scenario.cluster.pools for _ in range(pool.count)]
    flavor_nodes = np.zeros((shape[1], p.n_nodes), bool)
    for f in kueue.resource_flavors:
        flavor_nodes[fl[f.name]] = [all(lab.get(key) == v for key, v in f.node_labels.items()) for lab in labels]
    names = [p.job_names[j] for j in range(p.n_jobs)]
    uid = np.empty(p.n_jobs, np.int64)
    uid[sorted(range(p.n_jobs), key=names.__getitem__)] = np.arange(p.n_jobs)
    ps_lo = np.searchsorted([ps[0] for ps in podsets], np.arange(p.n_jobs + 1)).astype(np.int64)
    t_podset = np.zeros(p.n_tasks, np.int64)
    for t in range(p.n_tasks):
        j = p.task_job[t]
        role = p.role_names[p.task_role[t]]
        t_podset[t] = next(i for i, ps in enumerate(podsets[ps_lo[j]:ps_lo[j + 1]]) if ps[1] == role)
    requests = [req for ps in podsets for req in ps[4]]
    tas, _ = _tas_tables(c, flavors)
    tas |= _tas_podsets(c, tas, flavors, podsets, cq_of, t_podset, ps_lo)
    return tas | {
        "kq_parent": np.array([index[id(n.parent)] if n.parent is not None else -1 for n in nodes], np.int64),
        "kq_post_lo": np.array(post_lo, np.int64), "kq_post": np.array(post, np.int64),
        "kq_kid_lo": np.concatenate([[0], np.cumsum([len(k) for k in kids])]).astype(np.int64),
        "kq_kids": np.array([c for k in kids for c in k], np.int64),
        "kq_subtree": subtree, "kq_local": local, "kq_potential": potential, "kq_has_bl": has_bl, "kq_bl": bl,
        "kq_height": np.array([n.height() if isinstance(n, Cohort) else 0 for n in nodes], np.int64),
        "kq_strict": np.array([cq.queueing_strategy == STRICT_FIFO for cq in cqs], bool),
        "kq_while_borrowing": np.array([cq.preemption.borrow_within_cohort != NEVER or (
            fair.enable and cq.preemption.reclaim_within_cohort != NEVER) for cq in cqs], bool),
        "kq_within": np.array([POLICIES.index(cq.preemption.within_cluster_queue) for cq in cqs], np.int64),
        "kq_reclaim": np.array([POLICIES.index(cq.preemption.reclaim_within_cohort) for cq in cqs], np.int64),
        "kq_threshold": np.array([np.nan if cq.preemption.max_priority_threshold is None
                                  else cq.preemption.max_priority_threshold for cq in cqs], float),
        "kq_stop_borrow": np.array([cq.fungibility.when_can_borrow == MAY_STOP_SEARCH for cq in cqs], bool),
        "kq_stop_preempt": np.array([cq.fungibility.when_can_preempt == MAY_STOP_SEARCH for cq in cqs], bool),
        "kq_group": group_of,
        "kg_lo": np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64),
        "kg_flavors": np.array([f for g in groups for f in g], np.int64),
        "kw_cq": cq_of, "kw_uid": uid, "kw_ps_lo": ps_lo,
        "ps_count": np.array([ps[2] for ps in podsets], np.int64),
        "ps_min": np.array([ps[3] for ps in podsets], np.int64),
        "ps_req_lo": np.concatenate([[0], np.cumsum([len(ps[4]) for ps in podsets])]).astype(np.int64),
        "ps_req_r": np.array([rk[r] for r, _ in requests], np.int64),
        "ps_req_v": np.array([v for _, v in requests], float),
        "t_podset": t_podset, "kf_nodes": flavor_nodes, "kr_arg": _ready_args(scenario.scheduler.kueue),
        "kq_root": np.array([index[id(n.root())] for n in nodes], np.int64),
        "kq_has_quota": np.array([[[(f, r) in n.quotas for r in resources] for f in flavors] for n in nodes],
                                 bool).reshape(shape),
        "kq_weight": np.array([n.weight for n in nodes], float), "kr_fair": bool(fair.enable),
        "kr_strategies": _strategies(fair.preemption_strategies or DEFAULT_STRATEGIES),
        "kr_default": _strategies(DEFAULT_STRATEGIES),
    }


def _tas_tables(c, flavors: list[str]) -> tuple[dict, tuple[list[str], list[str], list[str]]]:
    """The TAS arrays of :data:`KUEUE_STATIC` that do not depend on the podsets, and the names the
    messages read: each flavor's Topology, each global level's label, each taint exclusion's text.
    Each TAS flavor's domains are numbered level by level in the order of their level values (from
    the reference engine's trees, ``topology_aware``), so domain numbers break ties as values do."""
    scenario, p = c.scenario, c.problem
    tas = topology_aware(scenario, {})
    n_fl = max(len(flavors), 1)
    lvl_lo, leaf_lo, dom_lo, kid_lo, kid_hi, leaf_of, node_lo, nodes = [0], [0], [0], [], [], [], [0], []
    host, name_of, topologies, levels = np.zeros(n_fl, bool), np.full(n_fl, -1, np.int64), [], []
    node_leaf = np.full((n_fl, p.n_nodes), -1, np.int64)
    for fi in range(n_fl):
        tree = tas.trees.get(flavors[fi]) if tas is not None and fi < len(flavors) else None
        if tree is not None:
            host[fi] = tree.hostname
            if tree.name not in topologies:
                topologies.append(tree.name)
            name_of[fi] = topologies.index(tree.name)
            ordered = [sorted(level.values(), key=lambda d: d.values) for level in tree.per_level]
            number = {id(d): len(kid_lo) + sum(map(len, ordered[:k])) + i
                      for k, level in enumerate(ordered) for i, d in enumerate(level)}
            for k, level in enumerate(ordered):
                levels.append(tree.levels[k])
                dom_lo.append(dom_lo[-1] + len(level))
                for d in level:
                    kids = sorted(number[id(ch)] for ch in d.children)
                    kid_lo.append(kids[0] if kids else 0)
                    kid_hi.append(kids[-1] + 1 if kids else 0)
                    if k == len(ordered) - 1:
                        leaf_of.append(len(node_lo) - 1)
                        members = tree.leaf_nodes[d.leaf]
                        nodes += members
                        node_lo.append(len(nodes))
                        node_leaf[fi, members] = leaf_of[-1]
                    else:
                        leaf_of.append(-1)
        lvl_lo.append(len(dom_lo) - 1)
        leaf_lo.append(len(node_lo) - 1)
    taints = [pool.taints for pool in scenario.cluster.pools for _ in range(pool.count)]
    n_classes = p.class_node_ok.shape[0]
    excluded, texts = np.full((n_classes, p.n_nodes), -1, np.int64), []
    if host.any():
        tolerations = {}
        for t in range(p.n_tasks):
            job = scenario.jobs[p.task_job[t]]
            role = p.role_names[p.task_role[t]]
            tolerations.setdefault(int(p.task_class[t]), next(x for x in job.tasks if x.name == role).tolerations)
        for cls, tols in tolerations.items():
            for n, node_taints in enumerate(taints):
                why = next((taint_exclusion(x.key, x.value, x.effect) for x in node_taints
                            if x.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(x) for tol in tols)), None)
                if why is not None:
                    if why not in texts:
                        texts.append(why)
                    excluded[cls, n] = texts.index(why)
    names = list(p.resource_names)
    rank = np.empty(len(names), np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    arrays = {
        "kr_tas": tas is not None, "tf_lvl_lo": np.array(lvl_lo, np.int64), "tf_leaf_lo": np.array(leaf_lo, np.int64),
        "tf_host": host, "tf_name": name_of, "tl_dom_lo": np.array(dom_lo, np.int64),
        "td_kid_lo": np.array(kid_lo, np.int64), "td_kid_hi": np.array(kid_hi, np.int64),
        "td_leaf": np.array(leaf_of, np.int64), "tv_node_lo": np.array(node_lo, np.int64),
        "tv_nodes": np.array(nodes, np.int64), "tn_leaf": node_leaf, "tx_taint": excluded, "r_rank": rank,
    }
    return arrays, (topologies, levels, texts)


def _tas_podsets(c, tas_arrays: dict, flavors: list[str], podsets: list, cq_of: np.ndarray, t_podset: np.ndarray,
                 ps_lo: np.ndarray) -> dict:
    """Each podset's TAS request (``ps_tkind``; a TAS-only ClusterQueue's podsets without one:
    unconstrained), its level per flavor (``ps_tlevel``, the lowest one when unconstrained, -1 when
    the flavor's Topology lacks it) and its first task (whose requests TAS counts with)."""
    scenario, p = c.scenario, c.problem
    tas = topology_aware(scenario, {})
    n_fl = max(len(flavors), 1)
    cq_names = [cq.name for cq in scenario.kueue.cluster_queues]
    kind = np.zeros(len(podsets), np.int64)
    level = np.full((len(podsets), n_fl), -1, np.int64)
    lvl_lo = tas_arrays["tf_lvl_lo"]
    for k, (j, role, *_) in enumerate(podsets):
        request = next(x for x in scenario.jobs[j].tasks if x.name == role).topology_request
        if request is not None:
            kind[k] = TK_REQUIRED if request.required else TK_PREFERRED if request.preferred else TK_UNCONSTRAINED
        elif tas is not None and cq_of[j] >= 0 and cq_names[cq_of[j]] in tas.tas_only:
            kind[k] = TK_UNCONSTRAINED
        for fi in range(len(flavors)):
            tree = tas.trees.get(flavors[fi]) if tas is not None else None
            if tree is None or kind[k] == TK_NONE:
                continue
            key = request.level if request is not None else None
            if key is None:
                level[k, fi] = lvl_lo[fi + 1] - 1
            elif key in tree.levels:
                level[k, fi] = lvl_lo[fi] + tree.levels.index(key)
    first = np.full(len(podsets), -1, np.int64)
    for t in range(p.n_tasks - 1, -1, -1):
        first[ps_lo[p.task_job[t]] + t_podset[t]] = t
    return {"ps_tkind": kind, "ps_tlevel": level, "ps_task": first}


def _strategies(names) -> np.ndarray:
    """The first two fair-sharing preemption strategies as codes, -1 for none."""
    codes = [STRATEGIES.index(name) for name in names][:2]
    return np.array(codes + [-1] * (2 - len(codes)), np.int64)


def _ready_args(conf) -> np.ndarray:
    """waitForPodsReady as numbers (:data:`R_ENABLE` ...)."""
    ready = conf.wait_for_pods_ready
    strategy = ready.requeuing_strategy
    limit = -1 if strategy.backoff_limit_count is None else strategy.backoff_limit_count
    return np.array([ready.enable, parse_duration(ready.timeout), ready.block_admission,
                     strategy.timestamp == "Eviction", limit, strategy.backoff_base_seconds,
                     strategy.backoff_max_seconds], float)


def _post_order(k: int, kids: list[list[int]]) -> list[int]:
    """Node ``k``'s subtree, children before their parent (the order :func:`usage` sums in)."""
    return [m for c in kids[k] for m in _post_order(c, kids)] + [k]


def _kueue_mutable(static: dict, n_events: int, scale: float) -> dict:
    """Fresh Kueue books and scratch; ``n_events`` is the size of the event buffer (E)."""
    n_jobs = len(static["j_queue"])
    sizes = {"C": len(static["kq_strict"]), "Fl": static["kq_subtree"].shape[1], "Rk": static["kq_subtree"].shape[2],
             "J": n_jobs, "Ps": len(static["ps_count"]), "Mx": max(int(np.diff(static["kw_ps_lo"]).max()), 1)
             if n_jobs else 1, "Nq": len(static["kq_parent"]), "N": len(static["node_alloc"]),
             "R": len(static["total"]), "T": len(static["t_job"]), "E": n_events,
             "Mp": max(64, int(scale * (4 * n_jobs + 64))), "Tg": max(64, int(scale * (4 * n_jobs + 64))),
             "D": len(static["td_leaf"]), "Lv": len(static["tv_node_lo"]) - 1,
             "Xt": max(int(static["tx_taint"].max(initial=-1)) + 1, 1)}
    return fresh(KUEUE_MUTABLE, sizes)


def run(compiled, static: dict, scale: float = 1.0, progress=None) -> RunRecord:
    """Run a compiled Kueue scenario on the core (buffers sized by ``scale``, grown on need; ``progress``
    told between slices, ``core.in_slices``)."""
    mutable, kueue = run_grown(in_slices(run_core, progress), KueueFields, static, scale, _kueue_mutable)
    return record(mutable, lambda time, coded: _events(compiled, time, coded, static["kw_cq"], kueue))


def _events(c, time: np.ndarray, coded: np.ndarray, cq_of: np.ndarray, k: dict) -> tuple:
    """The event columns, with the reference engine's texts for the Kueue messages."""
    time, kind, job, task, node, reasons, messages = core_events(c.problem, time, coded, KINDS)
    scenario = c.scenario
    flavors, resources = _names(scenario)
    cq_names = [cq.name for cq in scenario.kueue.cluster_queues]
    podsets = [t.name for job_spec in scenario.jobs for t in job_spec.tasks]
    parts, values, heads = k["km_part"], k["km_val"], k["km_head"]
    code, arg = coded[:, 4].astype(np.int64), coded[:, 5].astype(np.int64)
    messages[code == MSG_BIND] = "kube-scheduler: least allocated node"
    names = np.array(c.problem.job_names, object)
    for what, why in ((MSG_TIMEOUT, "PodsReadyTimeout"), (MSG_POD_TIMEOUT, "kueue")):
        rows = np.flatnonzero(code == what)
        reasons[rows] = why
        messages[rows] = "Exceeded the PodsReady timeout " + names[job[rows]]
    strategy = scenario.scheduler.kueue.wait_for_pods_ready.requeuing_strategy
    rows = np.flatnonzero(code == MSG_DEACTIVATED)
    reasons[rows] = "RequeuingLimitExceeded"
    messages[rows] = f"exceeding the maximum number of re-queuing retries ({strategy.backoff_limit_count})"
    b = coded[:, 6].astype(np.int64)
    paths = [cq.path() for cq in build_tree(scenario.kueue).cqs.values()]

    def preempted(preemptor: int, variant: int, target: int) -> str:
        return (f"Preempted to accommodate a workload (UID: {names[preemptor]}) due to "
                f"{HUMAN_READABLE_REASONS[REASON_OF_VARIANT[variant]]}; preemptor path: {paths[cq_of[preemptor]]}; "
                f"preemptee path: {paths[cq_of[target]]}")

    for row in np.flatnonzero(code == MSG_PREEMPTED):
        reasons[row] = REASON_OF_VARIANT[b[row]]
        messages[row] = preempted(arg[row], b[row], job[row])
    for row in np.flatnonzero(code == MSG_POD_PREEMPTED):
        reasons[row] = "kueue"
        messages[row] = preempted(arg[row] // 8, arg[row] % 8, job[row])
    for row in np.flatnonzero(code == MSG_REQUEUED):
        reasons[row] = "PodsReadyTimeout"
        messages[row] = f"requeue {arg[row]}, back in the queue after {b[row]}s"

    tas_arrays, (topologies, levels, taint_texts) = _tas_tables(c, flavors)
    resource_names = list(c.problem.resource_names)

    def topology_reason(lo: int, hi: int) -> str:
        """``not_fit``: the TAS head part, then the exclusions, sorted as Kueue sorts them."""
        _, f, fit = parts[lo]
        count, leaves, level = (int(v) for v in values[lo])
        topology = f'"{topologies[tas_arrays["tf_name"][f]]}"'
        if fit == -2:
            return f"no topology domains at level: {levels[level]}"
        text = (f"topology {topology} doesn't allow to fit any of {count} pod(s)" if fit == 0 else
                f"topology {topology} allows to fit only {fit} out of {count} pod(s)")
        excluded = sorted(f'resource "{resource_names[a]}": {n}' if what == PART_TAS_RESOURCE else
                          f"{taint_texts[a]}: {n}" for what, a, n in parts[lo + 1:hi].tolist())
        return text + (f". Total nodes: {leaves}; excluded: " + ", ".join(excluded) if excluded else "")

    def reason(x: int) -> str:
        what, f, r = parts[x]
        if what == PART_TAS_FLAVOR:
            return f'Flavor "{flavors[f]}" ' + ("supports only TopologyAwareScheduling" if r == TAS_SUPPORTS_ONLY else
                                               "does not support TopologyAwareScheduling" if r == TAS_NOT_SUPPORTED
                                               else "does not contain the requested level")
        name, flavor = resources[r], flavors[f]
        value = values[x]
        if what == PART_CAPACITY:
            return (f"insufficient quota for {name} in flavor {flavor}, previously considered podsets requests "
                    f"({format_quantity(name, value[0] - value[1])}) + current podset request "
                    f"({format_quantity(name, value[1])}) > maximum capacity ({format_quantity(name, value[2])})")
        return (f"insufficient unused quota for {name} in flavor {flavor}, "
                f"{format_quantity(name, value[0] - value[1])} more needed")

    def message(what: int, podset: int, lo: int, hi: int, x: int, cq: int) -> str:
        if what == MSG_QUOTA_RESERVED:
            chosen = ", ".join(sorted(flavors[f] for f in range(len(flavors)) if x >> f & 1))
            return f"Quota reserved in ClusterQueue {cq_names[cq]}; flavors {chosen}"
        if what == MSG_NO_LONGER_FITS:
            return NO_LONGER_FITS
        if what == MSG_UNAVAILABLE:
            return (f"couldn't assign flavors to pod set {podsets[podset]}: resource {resources[x]} unavailable "
                    "in ClusterQueue")
        if hi > lo and parts[lo, 0] == PART_TAS:
            return f"couldn't assign flavors to pod set {podsets[podset]}: " + topology_reason(lo, hi)
        text = f"couldn't assign flavors to pod set {podsets[podset]}: " + ", ".join(reason(k) for k in range(lo, hi))
        return text + f". Pending the preemption of {x} workload(s)" if what == MSG_PREEMPTING else text

    rows = np.flatnonzero(code >= MSG_QUOTA_RESERVED)
    used, inverse = np.unique(arg[rows], return_inverse=True)  # a message row serves one workload
    owner = np.zeros(len(heads), np.int64)
    owner[arg[rows]] = job[rows]
    texts = np.array([message(*heads[h].tolist(), int(cq_of[owner[h]])) for h in used.tolist()] + [""], object)
    messages[rows] = texts[inverse.reshape(-1)]
    reasons[rows] = np.where(code[rows] == MSG_QUOTA_RESERVED, "QuotaReserved", WAITING_FOR_QUOTA)
    return time, kind, job, task, node, reasons, messages
