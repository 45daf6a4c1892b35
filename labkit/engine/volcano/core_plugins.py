"""The plugins and vote rules of a session, for the numba core (mirrors ``plugins.py`` and the
combination rules of ``framework.py``).

Which plugin answers a callback is decided by the driver: ``s.hooks[H_*]`` lists the plugin
entries that registered the callback and have its extension point on, in tier order, and the
functions here walk that row applying Volcano's rule for the callback (first non-zero order,
AND, OR, tier votes, per-tier victim intersection). Plugin state that lives for one session
(drf shares, proportion/capacity queue attributes, overcommit's room) is built by
:func:`open_plugins` and kept live by :func:`fire`, the Allocate/Deallocate event handlers.
"""

from __future__ import annotations

import math

from ..core_account import (
    ROLE_PIPELINED,
    ROLE_READY,
    ROLE_VALID,
    add_row,
    copy_row,
    dominant_share,
    greater_partly_on_relevant,
    intersects,
    is_empty,
    is_pipelined,
    is_ready,
    is_starving,
    le,
    less_equal,
    less_equal_partly_zero_filtered,
    n_tasks,
    ready,
    requested,
    roles_meet_minimum,
    valid_of,
    zero_row,
)
from ..core_state import (
    A_BALANCED,
    A_BALANCED_KUBERNETES,
    A_BINPACK_WEIGHT,
    A_LEAST,
    A_MOST,
    A_OVERCOMMIT_FACTOR,
    A_SLA_WAITING,
    A_TOPOLOGY_FADING,
    A_TOPOLOGY_NORMAL_POD,
    A_TOPOLOGY_WEIGHT,
    ABSTAIN,
    ALLOCATED,
    BALANCED_CHANGE_SINCE,
    BINDING,
    BOUND,
    CAPACITY,
    CONFORMANCE,
    CPU,
    DRF,
    F_NODE_MISMATCH,
    F_OK,
    F_POD_LIMIT,
    F_UNSCHEDULABLE_NODE,
    GANG,
    H_ALLOCATABLE,
    H_BATCH_NODE_ORDER,
    H_JOB_ENQUEUEABLE,
    H_JOB_ENQUEUED,
    H_JOB_ORDER,
    H_JOB_READY,
    H_JOB_STARVING,
    H_JOB_VALID,
    H_NODE_ORDER,
    H_OVERUSED,
    H_PREDICATE,
    H_PREEMPTIVE,
    H_QUEUE_ORDER,
    H_TASK_ORDER,
    HN_ALLOCATABLE,
    HN_FUTURE_IDLE,
    HN_IDLE,
    HN_USED,
    I_ATTRS,
    I_LIVE,
    I_QUEUE_HEAP,
    I_SESSIONS,
    I_STAMP,
    I_VICTIMS,
    I_WATER_FILLED,
    MEMORY,
    MIN_RESOURCE,
    NETWORK_TOPOLOGY_AWARE,
    OVERCOMMIT,
    PERMIT,
    PIPELINED,
    PODS,
    PRIORITY,
    PROPORTION,
    REJECT,
    RUNNING,
    SLA,
    SLOT_CAPACITY,
    SLOT_PROPORTION,
    jit,
    per_constant,
)

NON_ZERO_CPU = 100.0
NON_ZERO_MEMORY = 200 * 1024 * 1024.0
SHARE_DELTA = 1e-6

HEAP_QUEUE, HEAP_JOB, HEAP_TASK, HEAP_VICTIM = range(4)

# -------------------------------------------------------------------------------- orders


@jit
def task_less(s, a, b):
    """TaskOrderFn: priority, then helpers.CompareTask (pod-name index, creation, UID)."""
    if s.hook_len[H_TASK_ORDER] and s.t_prio[a] != s.t_prio[b]:  # priority is the only taskOrder plugin
        return s.t_prio[a] > s.t_prio[b]
    ia, ib = s.t_index[a], s.t_index[b]
    if ia >= 0 and ib >= 0 and ia != ib:
        return ia < ib
    return s.t_rank[a] < s.t_rank[b]


@jit
def sla_waiting(s, e, j):
    """The job's sla-waiting-time: its annotation, else the plugin's argument (NaN = none)."""
    w = s.j_sla[j]
    return s.p_arg[e, A_SLA_WAITING] if math.isnan(w) else w


@jit
def job_compare(s, a, b):
    """JobOrderFn without the fallback: the first plugin with a non-zero answer."""
    for i in range(s.hook_len[H_JOB_ORDER]):
        e = s.hooks[H_JOB_ORDER, i]
        kind = s.p_kind[e]
        if kind == PRIORITY:
            pa, pb = s.j_prio[a], s.j_prio[b]
            if pa != pb:
                return -1 if pa > pb else 1
        elif kind == GANG:
            ra, rb = is_ready(s, a), is_ready(s, b)
            if ra != rb:
                return 1 if ra else -1
        elif kind == DRF:
            drf_touch(s, a)
            drf_touch(s, b)
            sa, sb = s.d_share[a], s.d_share[b]
            if sa != sb:
                return -1 if sa < sb else 1
        elif kind == SLA:
            lw, rw = sla_waiting(s, e, a), sla_waiting(s, e, b)
            if math.isnan(lw):
                if not math.isnan(rw):
                    return 1
            elif math.isnan(rw):
                return -1
            else:
                ld, rd = s.j_creation[a] + lw, s.j_creation[b] + rw
                if ld != rd:
                    return -1 if ld < rd else 1
    return 0


@jit
def job_less(s, a, b):
    """JobOrderFn; fallback creationTimestamp, then UID."""
    result = job_compare(s, a, b)
    return result < 0 if result != 0 else s.j_rank[a] < s.j_rank[b]


@jit
def queue_less(s, a, b):
    """QueueOrderFn: proportion / capacity (priority, then share); fallback creation, UID."""
    for i in range(s.hook_len[H_QUEUE_ORDER]):
        e = s.hooks[H_QUEUE_ORDER, i]
        if s.q_prio[a] != s.q_prio[b]:
            return s.q_prio[a] > s.q_prio[b]
        slot = SLOT_PROPORTION if s.p_kind[e] == PROPORTION else SLOT_CAPACITY
        sa, sb = s.a_share[slot, a], s.a_share[slot, b]
        if sa != sb:
            return sa < sb
        if slot == SLOT_CAPACITY:
            la, lb = not is_empty(s.a_des[slot, a]), not is_empty(s.a_des[slot, b])
            if la != lb:
                return la
    return s.q_rank[a] < s.q_rank[b]


@jit
def victim_less(s, a, b):
    """BuildVictimsPriorityQueue's order: same job -> reverse task order; other queues ->
    VictimQueueOrderFn (default: reverse queue order); else reverse job order, then reverse task
    order."""
    ja, jb = s.t_job[a], s.t_job[b]
    if ja == jb:
        return not task_less(s, a, b)
    qa, qb = s.j_queue[ja], s.j_queue[jb]
    if qa != qb:
        return not queue_less(s, qa, qb)
    result = job_compare(s, ja, jb)
    if result != 0:
        return result > 0
    return not task_less(s, a, b)


# -------------------------------------------------------------------------------- heaps


@per_constant
def heap_less(s, kind, a, b):
    if kind == HEAP_QUEUE:
        return queue_less(s, a, b)
    if kind == HEAP_JOB:
        return job_less(s, a, b)
    if kind == HEAP_TASK:
        return task_less(s, a, b)
    return victim_less(s, a, b)


@per_constant
def heap_push(s, kind, buf, off, n, item):
    """container/heap Push onto ``buf[off:off+n]``."""
    j = n
    buf[off + j] = item
    while j > 0:
        i = (j - 1) // 2
        if not heap_less(s, kind, buf[off + j], buf[off + i]):
            break
        buf[off + i], buf[off + j] = buf[off + j], buf[off + i]
        j = i


@per_constant
def heap_pop(s, kind, buf, off, n):
    """container/heap Pop from ``buf[off:off+n]``; returns the item."""
    last = n - 1
    buf[off], buf[off + last] = buf[off + last], buf[off]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= last:
            break
        j = left
        if left + 1 < last and heap_less(s, kind, buf[off + left + 1], buf[off + left]):
            j = left + 1
        if not heap_less(s, kind, buf[off + j], buf[off + i]):
            break
        buf[off + i], buf[off + j] = buf[off + j], buf[off + i]
        i = j
    return buf[off + last]


@per_constant
def heap_of(s, kind, k):
    """Where heap ``k`` of ``kind`` lives: (buffer, offset, size array, size index). One queue
    heap and one victim heap at a time; a job heap per queue, a task heap per job."""
    if kind == HEAP_QUEUE:
        return s.qh, 0, s.ints, I_QUEUE_HEAP
    if kind == HEAP_JOB:
        return s.jh, s.q_off[k], s.jh_n, k
    if kind == HEAP_TASK:
        return s.th, s.j_lo[k], s.th_n, k
    return s.vh, 0, s.ints, I_VICTIMS


@per_constant
def push(s, kind, k, item):
    """Push ``item`` on heap ``k`` of ``kind`` (util.PriorityQueue.Push)."""
    buf, off, sizes, i = heap_of(s, kind, k)
    heap_push(s, kind, buf, off, sizes[i], item)
    sizes[i] += 1


@per_constant
def pop(s, kind, k):
    """Pop the first item of heap ``k`` of ``kind`` (util.PriorityQueue.Pop)."""
    buf, off, sizes, i = heap_of(s, kind, k)
    sizes[i] -= 1
    return heap_pop(s, kind, buf, off, sizes[i] + 1)


@jit
def first_touch(marks, i, stamp):
    """True the first time ``i`` is seen under ``stamp`` (and marks it)."""
    if marks[i] == stamp:
        return False
    marks[i] = stamp
    return True


@jit
def new_stamp(s):
    """A fresh mark value for the lazily reset ``*_mark`` arrays."""
    s.ints[I_STAMP] += 1
    return s.ints[I_STAMP]


# -------------------------------------------------------------------------------- gates and votes


@jit
def job_valid(s, j):
    """JobValid (gang, never switched off): enough valid pods overall and per role."""
    return not s.hook_len[H_JOB_VALID] or (
        roles_meet_minimum(s, j, ROLE_VALID) and valid_of(s.j_cnt[j]) >= s.j_min[j]
    )


@jit
def job_ready(s, j):
    """JobReady: AND over gang's ready check."""
    return not s.hook_len[H_JOB_READY] or (roles_meet_minimum(s, j, ROLE_READY) and is_ready(s, j))


@jit
def sla_permit(s, e, j, now):
    w = sla_waiting(s, e, j)
    return ABSTAIN if math.isnan(w) or now - s.j_creation[j] < w else PERMIT


@jit
def enqueue_room(s, slot, j):
    """proportion/capacity JobEnqueueable: minResources + allocated + inqueue - elastic stays
    within realCapability on the dimensions minResources names."""
    q = s.j_queue[j]
    minres, alloc, inq, el, cap = (
        s.j_minres[j],
        s.a_alloc[slot, q],
        s.a_inq[slot, q],
        s.q_use[3, q],
        s.q_rcap[q],
    )
    for r in range(minres.size):
        if requested(minres, r) and not minres[r] + alloc[r] + inq[r] - el[r] <= cap[r]:
            return False
    return True


@jit
def plugin_vote(s, e, j, now, enqueue):
    """One plugin's JobEnqueueable (``enqueue``) or JobPipelined vote."""
    kind = s.p_kind[e]
    if kind == SLA:
        return sla_permit(s, e, j, now)
    if not enqueue:  # gang
        return PERMIT if roles_meet_minimum(s, j, ROLE_PIPELINED) and is_pipelined(s, j) else REJECT
    if kind == OVERCOMMIT:
        if not s.j_has_minres[j]:
            return PERMIT
        minres, inq, idle = s.j_minres[j], s.o_inq, s.o_idle
        for r in range(minres.size):
            if requested(minres, r) and not inq[r] + minres[r] <= idle[r]:
                return REJECT
        return PERMIT
    if not s.q_open[s.j_queue[j]]:
        return REJECT
    if not s.j_has_minres[j]:
        return PERMIT
    return PERMIT if enqueue_room(s, SLOT_PROPORTION if kind == PROPORTION else SLOT_CAPACITY, j) else REJECT


@jit
def vote(s, hook, j, now):
    """JobPipelined / JobEnqueueable: any Reject => false; a tier with a Permit decides;
    default true."""
    tier, permitted = -1, False
    for i in range(s.hook_len[hook]):
        e = s.hooks[hook, i]
        if s.p_tier[e] != tier:
            if permitted:
                return True
            tier = s.p_tier[e]
        v = plugin_vote(s, e, j, now, hook == H_JOB_ENQUEUEABLE)
        if v < 0:
            return False
        if v > 0:
            permitted = True
    return True


@jit
def job_enqueued(s, j):
    """JobEnqueued: proportion, capacity and overcommit count the job's minResources inqueue."""
    if not s.j_has_minres[j]:
        return
    q = s.j_queue[j]
    for i in range(s.hook_len[H_JOB_ENQUEUED]):
        e = s.hooks[H_JOB_ENQUEUED, i]
        kind = s.p_kind[e]
        if kind == OVERCOMMIT:
            add_row(s.o_inq, s.j_minres[j], 1)
        elif kind == PROPORTION or s.a_has[q]:
            add_row(s.a_inq[SLOT_PROPORTION if kind == PROPORTION else SLOT_CAPACITY, q], s.j_minres[j], 1)


@jit
def job_starving(s, j):
    """JobStarving: the first tier that registers a fn decides (AND inside); default false."""
    tier = -1
    for i in range(s.hook_len[H_JOB_STARVING]):
        e = s.hooks[H_JOB_STARVING, i]
        if tier >= 0 and s.p_tier[e] != tier:
            break
        tier = s.p_tier[e]
        if s.p_kind[e] == PRIORITY:
            starving = ready(s, j) + s.j_cnt[j, PIPELINED] < n_tasks(s, j)
        else:
            starving = is_starving(s, j)
        if not starving:
            return False
    return tier >= 0


@jit
def overused(s, q):
    """Overused: proportion, deserved <= allocated."""
    return s.hook_len[H_OVERUSED] > 0 and less_equal(
        s.a_des[SLOT_PROPORTION, q], s.a_alloc[SLOT_PROPORTION, q]
    )


@jit
def within(alloc, req, limit):
    """allocated + request <= limit on the dimensions the request names."""
    for r in range(req.size):
        if requested(req, r) and not alloc[r] + req[r] <= limit[r]:
            return False
    return True


@jit
def queue_admits(s, hook, q, t):
    """Allocatable / Preemptive (``hook``): AND over proportion (within deserved) and capacity
    (within realCapability; for Preemptive also partly within deserved)."""
    req = s.t_req[t]
    for i in range(s.hook_len[hook]):
        e = s.hooks[hook, i]
        if not s.q_open[q]:
            return False
        if s.p_kind[e] == PROPORTION:
            if not within(s.a_alloc[SLOT_PROPORTION, q], req, s.a_des[SLOT_PROPORTION, q]):
                return False
            continue
        alloc = s.a_alloc[SLOT_CAPACITY, q]
        if not within(alloc, req, s.q_rcap[q]):
            return False
        if hook == H_PREEMPTIVE:
            future = s.vec[7]
            for r in range(req.size):
                future[r] = alloc[r] + req[r]
            if not less_equal_partly_zero_filtered(future, s.a_des[SLOT_CAPACITY, q], req):
                return False
    return True


@jit
def allocatable(s, q, t):
    return queue_admits(s, H_ALLOCATABLE, q, t)


@jit
def preemptive(s, q, t):
    return queue_admits(s, H_PREEMPTIVE, q, t)


# -------------------------------------------------------------------------------- evictable


@jit
def plugin_victims(s, e, preemptor, cand, nc):
    """One plugin's Preemptable/Reclaimable answer for ``cand[:nc]``, into ``s.vtmp``;
    returns (count, vote)."""
    kind = s.p_kind[e]
    out = s.vtmp
    count = 0
    pj = s.t_job[preemptor]
    if kind == PRIORITY:
        for i in range(nc):
            t = cand[i]
            j = s.t_job[t]
            if (s.j_prio[j] < s.j_prio[pj]) if j != pj else (s.t_prio[t] < s.t_prio[preemptor]):
                out[count] = t
                count += 1
    elif kind == GANG:
        stamp = new_stamp(s)
        for i in range(nc):
            t = cand[i]
            j = s.t_job[t]
            if first_touch(s.occ_mark, j, stamp):
                s.occ[j] = ready(s, j)
            if s.occ[j] > s.j_min[j]:
                s.occ[j] -= 1
                out[count] = t
                count += 1
    elif kind == CONFORMANCE:
        for i in range(nc):
            if not s.t_critical[cand[i]]:
                out[count] = cand[i]
                count += 1
    elif kind == DRF:
        ls = drf_preemptor_share(s, preemptor)
        stamp = new_stamp(s)
        for i in range(nc):
            t = cand[i]
            j = s.t_job[t]
            if first_touch(s.rem_mark, j, stamp):
                drf_touch(s, j)
                copy_row(s.rem[j], s.d_alloc[j])
            add_row(s.rem[j], s.t_req[t], -1)
            if drf_allows(ls, dominant_share(s.rem[j], s.total)):
                out[count] = t
                count += 1
    elif kind == PROPORTION:
        stamp = new_stamp(s)
        for i in range(nc):
            t = cand[i]
            q = s.j_queue[s.t_job[t]]
            if not s.a_has[q]:
                continue
            if first_touch(s.qrem_mark, q, stamp):
                copy_row(s.qrem[q], s.a_alloc[SLOT_PROPORTION, q])
            if not less_equal(s.qrem[q], s.a_des[SLOT_PROPORTION, q]):
                add_row(s.qrem[q], s.t_req[t], -1)
                out[count] = t
                count += 1
    else:
        count = capacity_victims(s, preemptor, cand, nc)
    return count, PERMIT


@jit
def drf_allows(ls, rs):
    """drf Preemptable: a victim whose job keeps share ``rs`` against the preemptor's ``ls``."""
    return ls < rs or abs(ls - rs) <= SHARE_DELTA


@jit
def drf_preemptor_share(s, preemptor):
    """drf Preemptable: the share of the preemptor's job with the preemptor placed."""
    mine = s.vec[6]
    pj = s.t_job[preemptor]
    drf_touch(s, pj)
    copy_row(mine, s.d_alloc[pj])
    add_row(mine, s.t_req[preemptor], 1)
    return dominant_share(mine, s.total)


# A bound over candidate victims (a row of 5 floats): how many there are; the lowest priority
# of their jobs (-inf when one is a lower-priority task of the preemptor's own job); whether a
# job has more ready pods than minAvailable (1.0); the largest drf share a job keeps after losing
# one of them; whether a queue is above its proportion deserved (1.0).
B_COUNT, B_PRIORITY, B_GANG, B_DRF, B_PROPORTION = range(5)


@jit
def bound_clear(b):
    b[B_COUNT], b[B_PRIORITY], b[B_GANG], b[B_DRF], b[B_PROPORTION] = 0.0, math.inf, 0.0, -math.inf, 0.0


@jit
def share_left(s, t):
    """drf: the share task ``t``'s job keeps after losing it (-inf without drf: it bounds nothing)."""
    if s.of_kind[DRF] < 0:
        return -math.inf
    j = s.t_job[t]
    left = s.vec[7]
    drf_touch(s, j)
    copy_row(left, s.d_alloc[j])
    add_row(left, s.t_req[t], -1)
    return dominant_share(left, s.total)


@jit
def bound_job(s, b, j, count, priority, drf):
    """``count`` candidates of job ``j`` into bound ``b``: ``priority`` is what they bring to the
    lowest priority, ``drf`` the largest share their job keeps after losing one of them."""
    if count == 0:
        return
    b[B_COUNT] += count
    b[B_PRIORITY] = min(b[B_PRIORITY], priority)
    if ready(s, j) > s.j_min[j]:
        b[B_GANG] = 1.0
    b[B_DRF] = max(b[B_DRF], drf)


@jit
def bound_proportion(s, b, q):
    """Queue ``q``, which has candidates in bound ``b``, is above its proportion deserved."""
    if s.a_has[q] and not less_equal(s.a_alloc[SLOT_PROPORTION, q], s.a_des[SLOT_PROPORTION, q]):
        b[B_PROPORTION] = 1.0


@jit
def bound_add(s, b, preemptor, t):
    """Candidate ``t`` for ``preemptor`` into bound ``b``."""
    j = s.t_job[t]
    if j != s.t_job[preemptor]:
        priority = float(s.j_prio[j])
    else:
        priority = -math.inf if s.t_prio[t] < s.t_prio[preemptor] else math.inf
    bound_job(s, b, j, 1, priority, share_left(s, t))
    bound_proportion(s, b, s.j_queue[j])


@jit
def bound_merge(b, other):
    b[B_COUNT] += other[B_COUNT]
    b[B_PRIORITY] = min(b[B_PRIORITY], other[B_PRIORITY])
    for k in (B_GANG, B_DRF, B_PROPORTION):
        b[k] = max(b[k], other[k])


@jit
def may_pick(s, e, preemptor, b, ls):
    """Plugin ``e`` might pick one of the candidates in bound ``b`` for ``preemptor``, whatever
    other candidates its node has (``ls``: drf's share of the preemptor's job). Exact for
    priority, gang, drf (the share left after the job's first eviction on a node is the largest,
    later ones only lower it, and drf_allows holds for a share if it holds for a smaller one)
    and proportion (the queue is above its deserved before any eviction); conformance and
    capacity are taken to pick."""
    if b[B_COUNT] == 0.0:
        return False
    kind = s.p_kind[e]
    if kind == PRIORITY:
        return b[B_PRIORITY] < float(s.j_prio[s.t_job[preemptor]])
    if kind == GANG:
        return b[B_GANG] > 0.0
    if kind == DRF:
        return drf_allows(ls, b[B_DRF])
    if kind == PROPORTION:
        return b[B_PROPORTION] > 0.0
    return True


@per_constant
def picks_none(s, hook, preemptor, b):
    """Preemptable / Reclaimable (``hook``) picks no victim on any node whose candidates are
    within bound ``b``: in every tier a plugin picks none of them, which leaves the tier
    undecided (see :func:`victims_of`)."""
    ls = drf_preemptor_share(s, preemptor) if s.of_kind[DRF] >= 0 else 0.0
    tier, none = -1, True
    for i in range(s.hook_len[hook]):
        e = s.hooks[hook, i]
        if s.p_tier[e] != tier:
            if not none:
                return False
            tier, none = s.p_tier[e], False
        if not none:
            none = not may_pick(s, e, preemptor, b, ls)
    return none


@jit
def capacity_victims(s, reclaimer, cand, nc):
    """capacity Reclaimable: in victim order, a reclaimee of a queue above its deserved (on a
    dimension both need) whose queue keeps its guarantee."""
    s.ints[I_VICTIMS] = 0
    for i in range(nc):
        push(s, HEAP_VICTIM, 0, cand[i])
    stamp = new_stamp(s)
    left, deserved = s.vec[6], s.vec[7]
    count = 0
    while s.ints[I_VICTIMS] > 0:
        t = pop(s, HEAP_VICTIM, 0)
        q = s.j_queue[s.t_job[t]]
        req = s.t_req[t]
        if not s.a_has[q] or not intersects(req, s.t_req[reclaimer], True):
            continue
        if first_touch(s.qrem_mark, q, stamp):
            copy_row(s.qrem[q], s.a_alloc[SLOT_CAPACITY, q])
        allocated = s.qrem[q]
        for r in range(req.size):
            left[r] = allocated[r] - req[r]
        if not less_equal(s.q_guar[q], left):
            continue
        for r in range(req.size):
            deserved[r] = s.a_des[SLOT_CAPACITY, q, r] if s.q_named[q, r] else 0.0
        if not intersects(req, deserved, False) or greater_partly_on_relevant(
            allocated, deserved, s.q_named[q], req
        ):
            add_row(allocated, req, -1)
            s.vtmp[count] = t
            count += 1
    return count


@jit
def victims_of(s, hook, preemptor, cand, nc):
    """Preemptable / Reclaimable: per tier, intersect the answers of the plugins that do not
    abstain (an empty answer ends the tier undecided; an empty intersection is re-seeded by
    the next answer); the first tier with victims decides. Victims go to ``s.vic``; returns
    their count (0 = none)."""
    nv, tier, skip = -1, -1, False
    for i in range(s.hook_len[hook]):
        e = s.hooks[hook, i]
        if s.p_tier[e] != tier:
            if nv > 0:
                return nv
            tier, skip = s.p_tier[e], False
        if skip:
            continue
        count, v = plugin_victims(s, e, preemptor, cand, nc)
        if v == ABSTAIN:
            continue
        if count == 0:
            nv, skip = -1, True
            continue
        if nv < 0:
            for k in range(count):
                s.vic[k] = s.vtmp[k]
            nv = count
            continue
        stamp = new_stamp(s)
        for k in range(count):
            s.mark[s.vtmp[k]] = stamp
        kept = 0
        for k in range(nv):
            if s.mark[s.vic[k]] == stamp:
                s.vic[kept] = s.vic[k]
                kept += 1
        nv = kept if kept > 0 else -1
    return max(nv, 0)


# -------------------------------------------------------------------------------- predicates, scores


@jit
def predicate(s, t, n):
    """PredicateFn (predicates plugin): schedulable node, selector/affinity/taints, max pods."""
    if not s.hook_len[H_PREDICATE]:
        return F_OK
    if not s.node_sched[n]:
        return F_UNSCHEDULABLE_NODE
    if not s.class_ok[s.t_class[t], n]:
        return F_NODE_MISMATCH
    if s.node_alloc[n, PODS] <= s.pods[n, 0]:
        return F_POD_LIMIT
    return F_OK


@jit
def binpack_score(s, e, t, n):
    """binpack BinPackingScore."""
    req, weights = s.t_req[t], s.p_w[e]
    score, weight_sum = 0.0, 0.0
    for r in range(req.size):
        if req[r] < MIN_RESOURCE or req[r] == 0 or math.isnan(weights[r]):
            continue
        capacity, used, w = s.node_alloc[n, r], s.n_used[n, r], weights[r]
        if capacity != 0 and w != 0:
            if req[r] + used > capacity:
                return 0.0
            score += (req[r] + used) * w / capacity
        weight_sum += w
    if weight_sum > 0:
        score /= weight_sum
    return score * 100 * s.p_arg[e, A_BINPACK_WEIGHT]


@jit
def non_zero(s, t, n, col, default):
    """k8s NonZeroRequested of the node's pods plus this one, for cpu (col 0) or memory (1)."""
    r = CPU if col == 0 else MEMORY
    own = s.t_req[t, r]
    return int(s.pods[n, 1 + col] + default * s.pods[n, 4 + col] + (own if own > 0 else default))


@jit
def balance_std(s, n, req, dims, own):
    """NodeResourcesBalancedAllocation's std of used/allocatable (capped at 1) over cpu, memory
    and, with ``dims`` 3, the GPU, on node n with ``own`` times the request ``req`` added."""
    f0, f1, f2, nf = 0.0, 0.0, 0.0, 0
    for k in range(dims):
        r = CPU if k == 0 else (MEMORY if k == 1 else s.gpu)
        cap = s.node_alloc[n, r]
        if cap == 0:
            continue
        f = min((s.pods[n, 1 + k] + own * req[r]) / cap, 1.0)
        if nf == 0:
            f0 = f
        elif nf == 1:
            f1 = f
        else:
            f2 = f
        nf += 1
    if nf == 2:
        return abs(f0 - f1) / 2
    if nf == 3:
        mean = (f0 + f1 + f2) / 3
        return math.sqrt(((f0 - mean) ** 2 + (f1 - mean) ** 2 + (f2 - mean) ** 2) / 3)
    return 0.0


@jit
def nodeorder_score(s, e, t, n):
    """nodeorder: LeastAllocated, MostAllocated and BalancedAllocation, weighted."""
    req = s.t_req[t]
    least, most = 0, 0
    for col in range(2):
        requested_ = non_zero(s, t, n, col, NON_ZERO_CPU if col == 0 else NON_ZERO_MEMORY)
        cap = int(s.node_alloc[n, CPU if col == 0 else MEMORY])
        least += 0 if cap == 0 or requested_ > cap else (cap - requested_) * 100 // cap * 50
        most += 0 if cap == 0 else min(requested_, cap) * 100 // cap
    least //= 100
    most //= 2
    dims = 3 if s.gpu >= 0 and req[s.gpu] > 0 else 2
    after = balance_std(s, n, req, dims, 1.0)
    if s.p_arg[e, A_BALANCED_KUBERNETES] < BALANCED_CHANGE_SINCE:
        balanced = int((1 - after) * 100)
    else:
        balanced = int((0.75 + (balance_std(s, n, req, dims, 0.0) - after) / 2) * 100)
    return s.p_arg[e, A_LEAST] * least + s.p_arg[e, A_MOST] * most + s.p_arg[e, A_BALANCED] * balanced


@jit
def node_score(s, t, n):
    """PrioritizeNodes for one node, remembered per node for the last few request shapes: a
    score depends only on the request and the node's books (``s.n_version`` counts changes).
    network-topology-aware's score also reads the HyperNodes' books and the pod's job, so with
    that plugin every score is fresh."""
    if s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0:
        return fresh_node_score(s, t, n, topology_node_score(s, t, n))
    slot = s.t_shape[t] % s.score_key.shape[1]
    if s.score_key[n, slot] == s.t_shape[t] and s.score_version[n, slot] == s.n_version[n]:
        return s.score_value[n, slot]
    score = fresh_node_score(s, t, n, 0.0)
    s.score_key[n, slot], s.score_version[n, slot], s.score_value[n, slot] = (
        s.t_shape[t],
        s.n_version[n],
        score,
    )
    return score


@jit
def fresh_node_score(s, t, n, topology):
    """PrioritizeNodes for one node: NodeOrderFns (binpack), then BatchNodeOrderFns (nodeorder,
    and network-topology-aware's score ``topology``) in tier order."""
    score = 0.0
    for i in range(s.hook_len[H_NODE_ORDER]):
        e = s.hooks[H_NODE_ORDER, i]
        score += binpack_score(s, e, t, n)
    for i in range(s.hook_len[H_BATCH_NODE_ORDER]):
        e = s.hooks[H_BATCH_NODE_ORDER, i]
        if s.p_kind[e] == NETWORK_TOPOLOGY_AWARE:
            score += topology
        else:
            score += nodeorder_score(s, e, t, n)
    return score


# -------------------------------------------------------------------------------- network topology


@jit
def in_hypernode(s, n, h):
    """Node ``n`` is a member of HyperNode ``h`` (the root holds every node)."""
    if h == s.hn_tier.size - 1:
        return True
    k = s.hn_tier[h] - 1
    return k < s.node_hn.shape[1] and s.node_hn[n, k] == h


@jit
def is_ancestor(s, a, h):
    """``a`` is ``h`` or one of its ancestors (GetAncestors)."""
    while h >= 0:
        if h == a:
            return True
        h = s.hn_parent[h]
    return False


@jit
def hypernode_lca(s, h, other):
    """GetLCAHyperNode: the lowest common ancestor (either one when the other is none, -1)."""
    if h < 0:
        return other
    if other < 0:
        return h
    while other >= 0:
        if is_ancestor(s, other, h):
            return other
        other = s.hn_parent[other]
    return -1


@jit
def job_hypernode(s, j):
    """recoverAllocatedHyperNode: the lowest HyperNode holding every allocated pod of ``j``
    (-1 without any)."""
    first = -1
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        st = s.status[t]
        if (st == ALLOCATED or st == BINDING or st == BOUND or st == RUNNING) and s.node[t] >= 0:
            first = t
            break
    if first < 0:
        return -1
    for k in range(s.node_hn.shape[1]):
        h = s.node_hn[s.node[first], k]
        if h < 0:
            continue
        common = True
        for t in range(first + 1, s.j_lo[j + 1]):
            st = s.status[t]
            placed = (st == ALLOCATED or st == BINDING or st == BOUND or st == RUNNING) and s.node[t] >= 0
            if placed and s.node_hn[s.node[t], k] != h:
                common = False
                break
        if common:
            return h
    return s.hn_tier.size - 1


@jit
def open_topology(s):
    """network-topology-aware's OnSessionOpen: each HyperNode's allocatable, used, idle and future
    idle summed over its members; and each live job's AllocatedHyperNode."""
    room = s.hn_room
    for h in range(s.hn_tier.size):
        for row in range(4):
            for r in range(room.shape[2]):
                room[row, h, r] = 0.0
        for k in range(s.hn_mem_off[h], s.hn_mem_off[h + 1]):
            n = s.hn_mem[k]
            for r in range(room.shape[2]):
                alloc, used = s.node_alloc[n, r], s.n_used[n, r]
                room[HN_ALLOCATABLE, h, r] += alloc
                room[HN_USED, h, r] += used
                room[HN_IDLE, h, r] += alloc - used
                room[HN_FUTURE_IDLE, h, r] += alloc - used + s.n_rel[n, r] - s.n_pip[n, r]
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if s.j_topo[j] >= 0:
            s.j_ahn[j] = job_hypernode(s, j)


@jit
def topology_event(s, t, n, sign):
    """network-topology-aware's Allocate/Deallocate handler: the used room of every HyperNode
    holding node ``n`` follows the pod."""
    req, used = s.t_req[t], s.hn_room[HN_USED]
    root = s.hn_tier.size - 1
    for r in range(req.size):
        used[root, r] += sign * req[r]
    for k in range(s.node_hn.shape[1]):
        h = s.node_hn[n, k]
        if h >= 0:
            for r in range(req.size):
                used[h, r] += sign * req[r]


@jit
def hypernode_binpack(s, e, req, h):
    """(used + request) / allocatable of HyperNode ``h``, averaged over the weighted resources
    requested (0 if one would overflow)."""
    weights, used, alloc = s.p_w[e], s.hn_room[HN_USED, h], s.hn_room[HN_ALLOCATABLE, h]
    total, weight_sum = 0.0, 0.0
    for r in range(req.size):
        if math.isnan(weights[r]) or req[r] <= 0:
            continue
        if used[r] + req[r] > alloc[r]:
            return 0.0
        total += weights[r] * (used[r] + req[r]) / alloc[r]
        weight_sum += weights[r]
    return total / weight_sum if weight_sum > 0 else 0.0


@jit
def task_share(s, j, h):
    """scoreWithTaskNum: the share of job ``j``'s pods placed on nodes of HyperNode ``h``."""
    lo, hi = s.j_lo[j], s.j_lo[j + 1]
    if h < 0 or hi == lo:
        return 0.0
    inside = 0
    for t in range(lo, hi):
        if s.node[t] >= 0 and in_hypernode(s, s.node[t], h):
            inside += 1
    return inside / (hi - lo)


@jit
def tier_score(s, h, allocated):
    """networkTopologyAwareScore: (maxTier - LCA tier) / (maxTier - minTier)."""
    if h < 0 or allocated < 0:
        return 0.0
    if h == allocated:
        return 1.0
    lca = hypernode_lca(s, h, allocated)
    if lca < 0:
        return 0.0
    lowest, highest = s.hn_tiers[0], s.hn_tiers[s.hn_tiers.size - 1]
    if lowest == highest:
        return 1.0
    tier = s.hn_tier[lca]
    if lowest <= tier <= highest:
        return (highest - tier) / (highest - lowest)
    return 0.0


@jit
def pod_hypernode(s, t):
    """The job's AllocatedHyperNode as allocate last told pod ``t`` this session (-1: none)."""
    return s.t_ahn[t] if s.t_ahn_in[t] == s.ints[I_SESSIONS] else -1


@jit
def topology_node_score(s, t, n):
    """network-topology-aware's node score for pod ``t`` on one node, scaled by the plugin
    weight: a pod of a networkTopology job by the tier of the lowest HyperNode shared with its
    job (:func:`topology_scores` adds the tie-break over a node list); any other pod, with
    ``hypernode.binpack.normal-pod.enable``, by the fading-weighted binpacking of the node's
    HyperNodes with the pod in them (1 for a tier with none)."""
    e = s.of_kind[NETWORK_TOPOLOGY_AWARE]
    scale = 100.0 * s.p_arg[e, A_TOPOLOGY_WEIGHT]
    if s.j_topo[s.t_job[t]] >= 0:
        return scale * tier_score(s, s.node_low[n], pod_hypernode(s, t))
    if s.p_arg[e, A_TOPOLOGY_NORMAL_POD] == 0:
        return scale * 0.0
    fading = s.p_arg[e, A_TOPOLOGY_FADING]
    lowest, highest = s.hn_tiers[0], s.hn_tiers[s.hn_tiers.size - 1]
    root = s.hn_tier.size - 1
    total, weights = 0.0, 0.0
    for tier in range(lowest, highest + 1):
        w = fading ** float(tier - 1)
        h = -1
        if tier == s.hn_tier[root]:
            h = root
        elif tier - 1 < s.node_hn.shape[1]:
            h = s.node_hn[n, tier - 1]
        total += w * (1.0 if h < 0 else hypernode_binpack(s, e, s.t_req[t], h))
        weights += w
    return scale * (total / weights if weights > 0 else 0.0)


@jit
def topology_scores(s, t, nodes, m):
    """batchNodeOrderFnForNetworkAwarePods over ``nodes[:m]`` into ``s.hn_score``: the tier
    scores, and where several nodes share the best one, the share of the job's pods already in
    each one's HyperNode added; scaled by the plugin weight."""
    e = s.of_kind[NETWORK_TOPOLOGY_AWARE]
    allocated = pod_hypernode(s, t)
    best, ties = 0.0, 0
    for k in range(m):
        score = tier_score(s, s.node_low[nodes[k]], allocated) if allocated >= 0 else 0.0
        s.hn_score[k] = score
        if k == 0 or score > best:
            best, ties = score, 1
        elif score == best:
            ties += 1
    j = s.t_job[t]
    for k in range(m):
        score = s.hn_score[k]
        if ties > 1 and allocated >= 0 and score == best:
            score += task_share(s, j, s.node_low[nodes[k]])
        s.hn_score[k] = 100.0 * s.p_arg[e, A_TOPOLOGY_WEIGHT] * score


@jit
def hypernode_gradient(s, j):
    """hyperNodeGradientFn for job ``j`` from the cluster top into ``s.hn_grad`` (returns the
    count): breadth first from the highest ancestor of the job's AllocatedHyperNode within its
    tier limit (the root when it has none), the HyperNodes of tier <= the limit where the job's
    minResources fit the idle or future idle room (every such HyperNode once the job has pods
    placed), lowest tier first. None when its AllocatedHyperNode is above the limit."""
    highest, allocated = s.j_topo[j], s.j_ahn[j]
    root = s.hn_tier.size - 1
    if allocated >= 0:
        allowed = -1
        a = allocated
        while a >= 0 and s.hn_tier[a] <= highest:
            allowed = a
            a = s.hn_parent[a]
        if allowed < 0:
            return 0
        root = allowed
    count = 0
    for i in range(s.hn_tiers.size):
        tier = s.hn_tiers[i]
        if tier > highest:
            break
        for h in s.hn_bfs:
            if s.hn_tier[h] != tier or not is_ancestor(s, root, h):
                continue
            if allocated >= 0 or room_for(s, j, h, HN_IDLE) or room_for(s, j, h, HN_FUTURE_IDLE):
                s.hn_grad[count] = h
                count += 1
    return count


@jit
def room_for(s, j, h, row):
    """The job's minResources (none: nothing) fit row ``row`` of HyperNode ``h``'s room."""
    if not s.j_has_minres[j]:
        for r in range(s.hn_room.shape[2]):
            if not le(0.0, s.hn_room[row, h, r]):
                return False
        return True
    return less_equal(s.j_minres[j], s.hn_room[row, h])


@jit
def hypernode_order(s, j, h):
    """PrioritizeHyperNodes for HyperNode ``h`` alone (allocate scores each solution by itself, so
    hyperNodeOrderFn's tie-break by task share never applies): its binpacking score with all the
    job's pods on it, scaled by the plugin weight; 0 with hyperNodeOrder off."""
    if not s.topo_order:
        return 0.0
    e = s.of_kind[NETWORK_TOPOLOGY_AWARE]
    req = s.vec[5]
    for r in range(req.size):
        req[r] = 0.0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        for r in range(req.size):
            req[r] += s.t_req[t, r]
    return 0.0 + 100.0 * s.p_arg[e, A_TOPOLOGY_WEIGHT] * hypernode_binpack(s, e, req, h)


# -------------------------------------------------------------------------------- session state


@jit
def capacity_share(s, q):
    """capacity updateQueueAttrShare: share 1 for a queue without deserved."""
    des = s.a_des[SLOT_CAPACITY, q]
    for r in range(des.size):
        if s.q_named[q, r] and r != PODS and des[r] >= MIN_RESOURCE:
            return dominant_share(s.a_alloc[SLOT_CAPACITY, q], des)
    return 1.0


@jit
def fire(s, t, n, sign):
    """Allocate (``sign`` 1) / Deallocate (-1) event of task ``t`` on node ``n``: the plugins'
    shares and HyperNode room follow (the nodes' pod view follows the task's status, see
    ``core_account.pod_view``)."""
    req = s.t_req[t]
    if s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0:
        topology_event(s, t, n, sign)
    j = s.t_job[t]
    if s.of_kind[DRF] >= 0:  # drf_touch(s, j) ran before the status change
        add_row(s.d_alloc[j], req, sign)
        s.d_share[j] = dominant_share(s.d_alloc[j], s.total)
    q = s.j_queue[j]
    if not s.a_has[q]:
        return
    if s.of_kind[PROPORTION] >= 0:
        add_row(s.a_alloc[SLOT_PROPORTION, q], req, sign)
        s.a_share[SLOT_PROPORTION, q] = dominant_share(
            s.a_alloc[SLOT_PROPORTION, q], s.a_des[SLOT_PROPORTION, q]
        )
    if s.of_kind[CAPACITY] >= 0:
        add_row(s.a_alloc[SLOT_CAPACITY, q], req, sign)
        s.a_share[SLOT_CAPACITY, q] = capacity_share(s, q)


@jit
def drf_touch(s, j):
    """drf's allocated and share of job ``j`` in this session, set from the job at first use."""
    if s.of_kind[DRF] < 0 or s.d_mark[j] == s.ints[I_SESSIONS]:
        return
    s.d_mark[j] = s.ints[I_SESSIONS]
    copy_row(s.d_alloc[j], s.j_alloc[j])
    s.d_share[j] = dominant_share(s.d_alloc[j], s.total)


@jit
def water_fill(s):
    """proportion's deserved: hand the cluster out by weight to unmet queues (see
    Proportion.water_fill)."""
    slot = SLOT_PROPORTION
    remaining, old_remaining, increased, decreased, old = s.vec[0], s.vec[1], s.vec[2], s.vec[3], s.vec[4]
    copy_row(remaining, s.total)
    order, na = s.a_order, s.ints[I_ATTRS]
    for k in range(na):
        s.a_met[order[k]] = False
    while True:
        total_weight = 0
        for k in range(na):
            if not s.a_met[order[k]]:
                total_weight += int(s.q_weight[order[k]])
        if total_weight == 0:
            break
        copy_row(old_remaining, remaining)
        zero_row(increased)
        zero_row(decreased)
        for k in range(na):
            q = order[k]
            if s.a_met[q]:
                continue
            des, req = s.a_des[slot, q], s.q_use[1, q]
            copy_row(old, des)
            fraction = float(int(s.q_weight[q])) / float(total_weight)
            same = True
            for r in range(des.size):
                d = min(min(old[r] + remaining[r] * fraction, s.q_rcap[q, r]), req[r])
                des[r] = max(d, s.q_guar[q, r])
                same = same and des[r] == old[r]
            s.a_share[slot, q] = dominant_share(s.a_alloc[slot, q], des)
            if less_equal(req, des) or same:
                s.a_met[q] = True
            for r in range(des.size):
                increased[r] += max(des[r] - old[r], 0.0)
                decreased[r] += max(old[r] - des[r], 0.0)
        same = True
        for r in range(remaining.size):
            remaining[r] = max(remaining[r] + decreased[r] - increased[r], 0.0)
            same = same and remaining[r] == old_remaining[r]
        if is_empty(remaining) or same:
            break


@jit
def deserved_cached(s):
    """proportion's deserved from the last session, if its inputs (the queues with jobs and
    their requests) are the same: water-filling then gives the same answer."""
    na = s.ints[I_ATTRS]
    if s.ints[I_WATER_FILLED] != na:
        return False
    for k in range(na):
        q = s.a_order[k]
        if s.wf_order[k] != q:
            return False
        for r in range(s.total.size):
            if s.wf_req[q, r] != s.q_use[1, q, r]:
                return False
    return True


@jit
def open_plugins(s):
    """The plugins' OnSessionOpen state for the queues with live jobs (``s.a_order``):
    proportion's water-filled deserved and capacity's spec deserved over the usage the clock
    keeps in ``s.q_use`` (allocated and inqueue are copied: the session's events move them),
    and overcommit's room; drf's shares are set lazily (drf_touch)."""
    na = s.ints[I_ATTRS]
    for slot in range(2):
        if s.of_kind[PROPORTION if slot == SLOT_PROPORTION else CAPACITY] < 0:
            continue
        for k in range(na):
            q = s.a_order[k]
            for r in range(s.total.size):
                s.a_alloc[slot, q, r] = s.q_use[0, q, r]
                s.a_inq[slot, q, r] = s.q_use[2, q, r]
                s.a_des[slot, q, r] = 0.0
            s.a_share[slot, q] = 0.0
    if s.of_kind[PROPORTION] >= 0:
        if deserved_cached(s):
            for k in range(na):
                q = s.a_order[k]
                copy_row(s.a_des[SLOT_PROPORTION, q], s.wf_des[q])
                s.a_share[SLOT_PROPORTION, q] = dominant_share(s.a_alloc[SLOT_PROPORTION, q], s.wf_des[q])
        else:
            water_fill(s)
            for k in range(na):
                q = s.a_order[k]
                s.wf_order[k] = q
                copy_row(s.wf_req[q], s.q_use[1, q])
                copy_row(s.wf_des[q], s.a_des[SLOT_PROPORTION, q])
            s.ints[I_WATER_FILLED] = na
    if s.of_kind[CAPACITY] >= 0:
        for k in range(na):
            q = s.a_order[k]
            des = s.a_des[SLOT_CAPACITY, q]
            for r in range(des.size):
                des[r] = max(min(s.q_des[q, r], s.q_rcap[q, r]), s.q_guar[q, r])
            s.a_share[SLOT_CAPACITY, q] = capacity_share(s, q)
    if s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0:
        open_topology(s)
    e = s.of_kind[OVERCOMMIT]
    if e >= 0:
        factor = s.p_arg[e, A_OVERCOMMIT_FACTOR]
        for r in range(s.total.size):
            s.o_idle[r] = s.total[r] * factor - s.o_base[1, r]
            s.o_inq[r] = s.o_base[0, r]
