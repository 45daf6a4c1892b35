"""One Volcano session in the numba core: open, the actions in conf order, close (mirrors
``reference.py`` and the Session/Statement of ``framework.py``).

The session works on the live part of the state in place: the jobs in ``s.live`` and the pods
they have. Tentative changes are task status changes through the bookkeeping of
``core_account``; :func:`close_session` turns everything the session only tentatively placed
back to Pending, leaving the binds and evictions it committed in ``s.binds`` / ``s.evicts`` and
the pipelined pods in ``s.pipelined`` for the clock to apply.
"""

from __future__ import annotations

import math

import numpy as np

from ..core_account import (
    allocated_tasks,
    bounds_dirty,
    copy_row,
    fits_future,
    fits_idle,
    future_idle,
    is_ready,
    less_equal,
    n_tasks,
    need_continue_allocating,
    pod_view,
    ready,
    scheduled,
    session_phase,
    set_session_phase,
    set_status,
)
from ..core_state import (
    ALLOCATE,
    ALLOCATED,
    BACKFILL,
    BINDING,
    BOUND,
    ENQUEUE,
    F_NODE_MISMATCH,
    F_OK,
    F_RESOURCES,
    F_UNSCHEDULABLE_NODE,
    FAILED,
    GANG,
    H_JOB_ENQUEUEABLE,
    H_JOB_PIPELINED,
    H_PREDICATE,
    H_PREEMPTABLE,
    H_RECLAIMABLE,
    I_ACTION,
    I_ACTIVE,
    I_ATTRS,
    I_BINDS,
    I_BOOKS,
    I_BOUNDS_BUILT,
    I_BOUNDS_DIRTY,
    I_CANDIDATES,
    I_CLOSED,
    I_EVICTS,
    I_FIT_POOL,
    I_FIT_TASKS,
    I_FREED,
    I_FULL_NODES,
    I_IMPURE,
    I_IN_SESSION,
    I_KINDS,
    I_LIVE,
    I_NEXT_NODE,
    I_NODES,
    I_OTHERS,
    I_OVERFLOW,
    I_PENDING_GROUPS,
    I_QUEUE_HEAP,
    I_SESSIONS,
    I_TO_CLOSE,
    I_TOP,
    I_UNRESOLVABLE,
    I_VICTIMS,
    I_WAITING,
    M_PREEMPT_JOB,
    M_PREEMPT_QUEUE,
    M_RECLAIM,
    MSG_BACKFILL,
    MSG_FITS_IDLE,
    NETWORK_TOPOLOGY_AWARE,
    OP_ALLOCATE,
    OP_EVICT,
    OP_PIPELINE,
    PENDING,
    PH_COMPLETED,
    PH_INQUEUE,
    PH_PENDING,
    PH_RUNNING,
    PH_UNKNOWN,
    PH_UNSET,
    PIPELINED,
    PREEMPT,
    RECLAIM,
    RELEASING,
    RUNNING,
    SCAN_ALLOCATE,
    SCAN_PREDICATE,
    SCAN_PREEMPT,
    SUCCEEDED,
    call_unit,
    inlined,
    jit,
    per_constant,
    unit,
)
from .core_plugins import (
    B_COUNT,
    B_DRF,
    B_GANG,
    B_PRIORITY,
    HEAP_JOB,
    HEAP_QUEUE,
    HEAP_TASK,
    HEAP_VICTIM,
    allocatable,
    bound_add,
    bound_clear,
    bound_merge,
    bound_proportion,
    drf_touch,
    fire,
    first_touch,
    fresh_node_score,
    hypernode_gradient,
    hypernode_lca,
    hypernode_order,
    in_hypernode,
    job_enqueued,
    job_less,
    job_ready,
    job_starving,
    job_valid,
    new_stamp,
    node_score,
    open_plugins,
    overused,
    picks_none,
    pop,
    predicate,
    preemptive,
    push,
    share_left,
    task_less,
    topology_scores,
    victims_of,
    vote,
)

MIN_NODES_TO_FIND = 100
MIN_PERCENTAGE_OF_NODES_TO_FIND = 5

SCOPE_QUEUE, SCOPE_JOB, SCOPE_RECLAIM = 0, 1, -1

# What an attempt for one task came to: placed (pipelined), failed, or passed over as known to
# fail with nothing changed but the rotating start (core_actions.pass_over)
TASK_FAILED, TASK_PLACED, TASK_PASSED = 0, 1, 2

# -------------------------------------------------------------------------------- statements


@jit
def push_op(s, kind, t, ref):
    top = s.ints[I_TOP]
    if top >= s.ops.shape[0]:
        s.ints[I_OVERFLOW] = 1
        return
    s.ops[top, 0], s.ops[top, 1], s.ops[top, 2] = kind, t, ref
    s.ints[I_TOP] = top + 1


@jit
def place(s, t, n, status):
    """Session._place: the task goes Allocated or Pipelined on ``n``; its Allocate event fires."""
    drf_touch(s, s.t_job[t])
    set_status(s, t, status, n)
    fire(s, t, n, 1)


@jit
def unplace(s, t):
    """Session._unplace: back to Pending, off its node; its Deallocate event fires."""
    drf_touch(s, s.t_job[t])
    n = s.node[t]
    set_status(s, t, PENDING, -1)
    fire(s, t, n, -1)


@jit
def evict(s, t, ref):
    """Statement.Evict: the task is Releasing on its node (``ref``: the task it makes room for)."""
    drf_touch(s, s.t_job[t])
    set_status(s, t, RELEASING, s.node[t])
    pod_view(s, t, s.node[t], -1)
    fire(s, t, s.node[t], -1)
    push_op(s, OP_EVICT, t, ref)


@jit
def pipeline(s, t, n, evicted):
    """Statement.Pipeline, remembering which action pipelined the task (its event's reason) and
    whether it evicted for it (evictionOccurred: the pod is then nominated to the node)."""
    place(s, t, n, PIPELINED)
    s.pip_action[t] = s.ints[I_ACTION]
    s.pip_evicted[t] = evicted
    push_op(s, OP_PIPELINE, t, t)


@jit
def stmt_allocate(s, t, n):
    place(s, t, n, ALLOCATED)
    push_op(s, OP_ALLOCATE, t, t)


@jit
def dispatch(s, t, msg, ref_task, ref_node):
    """Send an Allocated task to the binder: Binding, recorded as a bind with its reason."""
    set_status(s, t, BINDING, s.node[t])
    k = s.ints[I_BINDS]
    if k >= s.binds.shape[0]:
        s.ints[I_OVERFLOW] = 1
        return
    s.binds[k, 0], s.binds[k, 1], s.binds[k, 2], s.binds[k, 3], s.binds[k, 4] = (
        t,
        msg,
        ref_task,
        ref_node,
        s.node[t],
    )
    s.ints[I_BINDS] = k + 1


@jit
def discard(s, start):
    """Statement.Discard: undo the operations above ``start``, last first."""
    for k in range(s.ints[I_TOP] - 1, start - 1, -1):
        t = s.ops[k, 1]
        if s.ops[k, 0] == OP_EVICT:
            set_status(s, t, RUNNING, s.node[t])  # drf was touched by the eviction
            pod_view(s, t, s.node[t], 1)
            fire(s, t, s.node[t], 1)
        else:
            unplace(s, t)
    s.ints[I_TOP] = start


@jit
def commit(s, start):
    """Statement.Commit: evictions go to the evictor, allocations to the binder."""
    for k in range(start, s.ints[I_TOP]):
        kind, t, ref = s.ops[k, 0], s.ops[k, 1], s.ops[k, 2]
        if kind == OP_EVICT:
            e = s.ints[I_EVICTS]
            if e >= s.evicts.shape[0]:
                s.ints[I_OVERFLOW] = 1
                continue
            s.evicts[e, 0], s.evicts[e, 1], s.evicts[e, 2] = t, s.ints[I_ACTION], ref
            s.ints[I_EVICTS] = e + 1
        elif kind == OP_ALLOCATE:
            dispatch(s, t, MSG_FITS_IDLE, t, s.node[t])
    s.ints[I_TOP] = start


@jit
def session_allocate(s, t, n):
    """Session.Allocate (backfill): allocate, and dispatch the job's Allocated tasks once ready."""
    place(s, t, n, ALLOCATED)
    j = s.t_job[t]
    if job_ready(s, j):
        for other in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.status[other] == ALLOCATED:
                dispatch(s, other, MSG_BACKFILL, t, n)


# -------------------------------------------------------------------------------- node scan


@jit
def nodes_to_find(n):
    """CalculateNumOfFeasibleNodesToFind with the default options."""
    if n <= MIN_NODES_TO_FIND:
        return n
    percentage = max(50 - n // 125, MIN_PERCENTAGE_OF_NODES_TO_FIND)
    return max(n * percentage // 100, MIN_NODES_TO_FIND)


@jit
def unresolvable(failure):
    return failure == F_UNSCHEDULABLE_NODE or failure == F_NODE_MISMATCH


@per_constant
def failure_of(s, t, n, mode):
    """The predicate a scan applies: allocate (FutureIdle fit, then PredicateFn), backfill
    (PredicateFn) or preempt (only unresolvable failures count)."""
    if mode == SCAN_ALLOCATE and not fits_future(s, t, n):
        return F_RESOURCES
    failure = predicate(s, t, n)
    if mode == SCAN_PREEMPT and not unresolvable(failure):
        return F_OK
    return failure


@per_constant
def scan(s, t, mode, nodes, nn, cache_row):
    """PredicateNodes over ``nodes[:nn]`` from the rotating start: the feasible nodes go to
    ``s.feas`` (returns their count), unresolvable failures to ``s.unres``. ``cache_row`` >= 0
    is the predicate error cache of the task's (job, role) in this scan."""
    s.ints[I_UNRESOLVABLE] = 0
    if nn == 0:
        return 0
    wanted = nodes_to_find(nn)
    start = s.ints[I_NEXT_NODE]
    found, failed, processed = 0, 0, 0
    k = start % nn
    for _ in range(nn):
        n = nodes[k]
        k = k + 1 if k + 1 < nn else 0
        processed += 1
        failure = s.cache[cache_row, n] if cache_row >= 0 else F_OK
        if failure == F_OK:
            failure = failure_of(s, t, n, mode)
            if failure != F_OK and cache_row >= 0:
                s.cache[cache_row, n] = failure
        if failure != F_OK:
            if unresolvable(failure):
                s.unres[failed] = n
                failed += 1
            continue
        if found == wanted:
            break
        s.feas[found] = n
        found += 1
    s.ints[I_NEXT_NODE] = (start + processed) % nn
    s.ints[I_UNRESOLVABLE] = failed
    return found


@jit
def record_fit_error(s, t, with_nodes):
    """NodesFitErrors[task]: the task found no node; with ``with_nodes`` the unresolvable
    nodes of the last scan are kept for preempt and reclaim to skip."""
    if not s.fit[t]:
        s.fit_tasks[s.ints[I_FIT_TASKS]] = t
        s.ints[I_FIT_TASKS] += 1
    s.fit[t] = True
    s.pr_fail[s.t_pair[t]] = True
    count = s.ints[I_UNRESOLVABLE] if with_nodes else 0
    top = s.ints[I_FIT_POOL]
    if top + count > s.fit_pool.size:
        s.ints[I_OVERFLOW] = 1
        count = 0
    s.fit_start[t], s.fit_len[t] = top, count
    for k in range(count):
        s.fit_pool[top + k] = s.unres[k]
    s.ints[I_FIT_POOL] = top + count


@jit
def best_node(s, t, nodes, m):
    """SelectBestNodeAndScore: the highest score; equal scores go to the lowest node index. A pod
    of a networkTopology job is scored over the whole list (network-topology-aware's tie-break)."""
    batch = s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0 and s.j_topo[s.t_job[t]] >= 0
    if batch:
        topology_scores(s, t, nodes, m)
    best, best_score = -1, 0.0
    for k in range(m):
        n = nodes[k]
        score = fresh_node_score(s, t, n, s.hn_score[k]) if batch else node_score(s, t, n)
        if best < 0 or score > best_score or (score == best_score and n < best):
            best, best_score = n, score
    return best


@jit
def sort_nodes(s, t, m):
    """SortNodes of ``s.feas[:m]`` into ``s.norder``: descending score, ties in scan order."""
    for k in range(m):
        score = node_score(s, t, s.feas[k])
        i = k
        while i > 0 and s.score[i - 1] < score:
            s.score[i], s.norder[i] = s.score[i - 1], s.norder[i - 1]
            i -= 1
        s.score[i], s.norder[i] = score, s.feas[k]


@jit
def prioritize(s, t, m):
    """allocate prioritizeNodes over ``s.feas[:m]``: nodes where the task fits Idle, else those
    where it fits FutureIdle; the best of the group."""
    group = s.norder
    size = 0
    for k in range(m):
        if fits_idle(s, t, s.feas[k]):
            group[size] = s.feas[k]
            size += 1
    if size == 0:
        for k in range(m):
            if fits_future(s, t, s.feas[k]):
                group[size] = s.feas[k]
                size += 1
    return group[0] if size == 1 else best_node(s, t, group, size)


# -------------------------------------------------------------------------------- open / close


@jit
def sort_prefix(values, n):
    """Sort ``values[:n]`` in place (insertion sort for the few jobs a session usually touches)."""
    if n > 64:
        values[:n].sort()
        return
    for i in range(1, n):
        v = values[i]
        k = i
        while k > 0 and values[k - 1] > v:
            values[k] = values[k - 1]
            k -= 1
        values[k] = v


@jit
def is_pending(phase):
    return phase == PH_PENDING or phase == PH_UNSET


@jit
def waiting_list(s, j):
    """Where job ``j``'s waiting list (its queue's jobs of its minResources shape) is in ``s.w_job``:
    (start, end)."""
    q, k = s.j_queue[j], s.j_mshape[j]
    start = s.w_off[q * s.w_n.shape[1] + k]
    return start, start + s.w_n[q, k]


@jit
def ordered_at(jobs, lo, hi, order, key):
    """Where in ``jobs[lo:hi]``, sorted by ``order[job]``, the first job at or after ``key`` is."""
    while lo < hi:
        mid = (lo + hi) // 2
        if order[jobs[mid]] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def shift_in(jobs, at, end, j):
    """``j`` into ``jobs[at]``, the jobs of ``jobs[at:end]`` one place on."""
    for k in range(end, at, -1):
        jobs[k] = jobs[k - 1]
    jobs[at] = j


@jit
def shift_out(jobs, at, end):
    """``jobs[at]`` out, the jobs of ``jobs[at + 1:end]`` one place back."""
    for k in range(at, end - 1):
        jobs[k] = jobs[k + 1]


@jit
def waiting_at(s, j):
    """Where in job ``j``'s waiting list the first job at or after its order is."""
    lo, hi = waiting_list(s, j)
    return ordered_at(s.w_job, lo, hi, s.j_worder, s.j_worder[j])


@jit
def waiting_insert(s, j):
    shift_in(s.w_job, waiting_at(s, j), waiting_list(s, j)[1], j)
    s.w_n[s.j_queue[j], s.j_mshape[j]] += 1
    s.ints[I_PENDING_GROUPS] += 1


@jit
def waiting_remove(s, j):
    shift_out(s.w_job, waiting_at(s, j), waiting_list(s, j)[1])
    s.w_n[s.j_queue[j], s.j_mshape[j]] -= 1
    s.ints[I_PENDING_GROUPS] -= 1


@jit
def active_at(s, j):
    """Where job ``j`` is, or goes, in the active list (sorted by job index)."""
    lo, hi = 0, s.ints[I_ACTIVE]
    while lo < hi:
        mid = (lo + hi) // 2
        if s.act[mid] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def active_insert(s, j):
    shift_in(s.act, active_at(s, j), s.ints[I_ACTIVE], j)
    s.ints[I_ACTIVE] += 1


@jit
def active_remove(s, j):
    shift_out(s.act, active_at(s, j), s.ints[I_ACTIVE])
    s.ints[I_ACTIVE] -= 1


@jit
def update_waiting(s):
    """The jobs the clock touched since the last session (``s.to_close``) that became, or stopped
    being, Pending PodGroups enter, or leave, their queue's waiting list (kept in enqueue's job
    order, ``s.j_worder``, one list per minResources shape); the other live jobs are the active list (``s.act``, by index). A
    waiting job whose pods exist or hold resources (a restart not yet over) is counted in
    ``ints[I_IMPURE]``: that order may then not be JobOrderFn's, nor the job idle in a session."""
    for i in range(s.ints[I_TO_CLOSE]):
        j = s.to_close[i]
        waiting = s.is_live[j] and is_pending(s.phase[j])
        if waiting != s.w_in[j]:
            if waiting:
                waiting_insert(s, j)
            else:
                waiting_remove(s, j)
            s.w_in[j] = waiting
        active = s.is_live[j] and not waiting
        if active != s.act_in[j]:
            if active:
                active_insert(s, j)
            else:
                active_remove(s, j)
            s.act_in[j] = active
        impure = False
        if waiting:
            impure = s.created[j]
            for r in range(s.j_alloc.shape[1]):
                impure = impure or s.j_alloc[j, r] != 0.0
        if impure != s.w_impure[j]:
            s.ints[I_IMPURE] += 1 if impure else -1
            s.w_impure[j] = impure


@jit
def waiting_apart(s):
    """The Pending PodGroups are in their waiting lists and need no other look this session."""
    return s.fast_enqueue and s.ints[I_IMPURE] == 0


@jit
def candidates_read(s):
    """An action that reads the session's candidates runs (backfill, preempt, reclaim; enqueue and
    allocate read them only when the Pending PodGroups are not apart)."""
    for a in s.actions:
        if a == BACKFILL or a == PREEMPT or a == RECLAIM:
            return True
    return False


@jit
def open_session(s):
    """OpenSession on the live jobs: the queues with jobs in order of their first job, room per
    queue in the job heaps, the jobs an action may act on (``s.candidates``: Pending PodGroups
    and jobs with pending pods, as no session step creates either), then the plugins' state."""
    if s.fast_enqueue:
        update_waiting(s)
    n_queues = 0
    for q in range(s.q_live.size):
        s.q_off[q + 1] = s.q_off[q] + s.q_live[q]
        s.a_has[q] = s.q_live[q] > 0
        if s.a_has[q]:  # insert by first live job
            k = n_queues
            while k > 0 and s.q_first[s.a_order[k - 1]] > s.q_first[q]:
                s.a_order[k] = s.a_order[k - 1]
                k -= 1
            s.a_order[k] = q
            n_queues += 1
    s.ints[I_ATTRS] = n_queues
    n_candidates, n_waiting = 0, 0
    if waiting_apart(s):  # the Pending PodGroups are enqueue's alone, allocate keeps its own candidates
        if candidates_read(s):
            for i in range(s.ints[I_ACTIVE]):
                j = s.act[i]
                if s.j_cnt[j, PENDING] > 0:
                    s.candidates[n_candidates] = j
                    n_candidates += 1
        n_waiting = s.ints[I_PENDING_GROUPS]
    else:
        for i in range(s.ints[I_LIVE]):
            j = s.live[i]
            waiting = is_pending(s.phase[j])
            if waiting or s.j_cnt[j, PENDING] > 0:
                s.candidates[n_candidates] = j
                n_candidates += 1
                n_waiting += waiting
    s.ints[I_CANDIDATES] = n_candidates
    s.ints[I_WAITING] = n_waiting
    s.ints[I_FIT_POOL] = 0
    s.ints[I_FIT_TASKS] = 0
    s.ints[I_TOP] = 0
    s.ints[I_BINDS] = 0
    s.ints[I_EVICTS] = 0
    s.ints[I_IN_SESSION] = 1
    s.ints[I_BOOKS] += 1  # what a session remembers of failed attempts lasts for that session
    open_plugins(s)


@jit
def releasing_suffices(s, j):
    """gang shouldSkipUnschedulableForReleasing."""
    releasing = s.j_cnt[j, RELEASING]
    if releasing == 0 or s.j_cnt[j, PENDING] > 0 or s.j_cnt[j, PIPELINED] > 0:
        return False
    return scheduled(s, j) >= s.j_min[j]


@jit
def podgroup_phase(s, j, unschedulable):
    """getPodGroupPhase at session close."""
    c = s.j_cnt[j]
    if c[RUNNING] > 0 and unschedulable:
        return PH_UNKNOWN
    done = scheduled(s, j)
    if done >= s.j_min[j]:
        return PH_COMPLETED if done == c[SUCCEEDED] + c[FAILED] else PH_RUNNING
    return PH_INQUEUE if session_phase(s, j) == PH_INQUEUE else PH_PENDING


@jit
def close_session(s):
    """CloseSession: gang marks unready jobs unschedulable and PodGroup phases go to
    ``s.new_phase`` for the live jobs touched since the last close (``s.closed``; for every
    other job nothing changed, so neither does its phase); pipelined pods go to
    ``s.pipelined`` (returns their count). Then the session is undone: every pod it placed is
    Pending again (the binds are in ``s.binds``) and every pod it evicted Running again (in
    ``s.evicts``), for the clock to apply; these jobs count as touched for the next close. The
    session's fit errors are forgotten."""
    n = s.ints[I_TO_CLOSE]
    sort_prefix(s.to_close, n)
    gang = s.of_kind[GANG] >= 0
    closed = 0
    for i in range(n):
        j = s.to_close[i]
        s.close_mark[j] = False
        if s.is_live[j]:
            unschedulable = gang and n_tasks(s, j) > 0 and not is_ready(s, j) and not releasing_suffices(s, j)
            s.new_phase[j] = podgroup_phase(s, j, unschedulable)
            s.closed[closed] = j
            closed += 1
    s.ints[I_TO_CLOSE] = 0
    s.ints[I_CLOSED] = closed
    n_pipelined = 0
    for i in range(closed):
        j = s.closed[i]
        if s.j_cnt[j, PIPELINED] + s.j_cnt[j, ALLOCATED] + s.j_cnt[j, BINDING] == 0:
            continue
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            st = s.status[t]
            if st == PIPELINED:
                s.pipelined[n_pipelined] = t
                s.pipelined_on[n_pipelined] = s.node[t]
                n_pipelined += 1
                set_status(s, t, PENDING, -1)
            elif st == ALLOCATED or st == BINDING:
                set_status(s, t, PENDING, -1)
    for k in range(s.ints[I_EVICTS]):
        t = s.evicts[k, 0]
        set_status(s, t, RUNNING, s.node[t])
        pod_view(s, t, s.node[t], 1)
    for k in range(s.ints[I_FIT_TASKS]):
        t = s.fit_tasks[k]
        s.fit[t] = False
        s.pr_fail[s.t_pair[t]] = False
    s.ints[I_IN_SESSION] = 0
    return n_pipelined


# -------------------------------------------------------------------------------- actions


@jit
def tasks_with_status(s, j, status):
    """The job's task heap holds its tasks in ``status``, pushed in task order."""
    s.th_n[j] = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == status:
            push(s, HEAP_TASK, j, t)


@jit
def first_sight(s, q):
    """The queue enters this action: mark it, empty its job heap; True the first time."""
    if s.q_seen[q]:
        return False
    s.q_seen[q] = True
    s.jh_n[q] = 0
    s.jl_n[q] = 0
    return True


@per_constant
def start_action(s, action):
    s.q_seen[:] = False
    s.ints[I_QUEUE_HEAP] = 0
    s.ints[I_ACTION] = action


@jit
def enqueue(s, now):
    """enqueue: admit Pending PodGroups, one job per queue turn, queues by QueueOrderFn (every
    queue with a job takes part; without a Pending PodGroup nothing can happen)."""
    start_action(s, ENQUEUE)
    if s.ints[I_WAITING] == 0:
        return
    for k in range(s.ints[I_ATTRS]):
        q = s.a_order[k]
        first_sight(s, q)
        push(s, HEAP_QUEUE, 0, q)
    if s.fast_enqueue and s.ints[I_IMPURE] == 0:
        # nothing enqueue does moves a queue's share, so a popped queue comes back on top: the
        # queues take their turns one after the other, each to the end of its jobs
        while s.ints[I_QUEUE_HEAP] > 0:
            enqueue_queue(s, pop(s, HEAP_QUEUE, 0), now)
        return
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if is_pending(session_phase(s, j)):
            push(s, HEAP_JOB, s.j_queue[j], j)
    while s.ints[I_QUEUE_HEAP] > 0:
        q = pop(s, HEAP_QUEUE, 0)
        if s.jh_n[q] == 0:
            continue
        j = pop(s, HEAP_JOB, q)
        if not s.j_has_minres[j] or vote(s, H_JOB_ENQUEUEABLE, j, now):
            job_enqueued(s, j)
            set_session_phase(s, j, PH_INQUEUE)
        push(s, HEAP_QUEUE, 0, q)


@jit
def enqueue_queue(s, q, now):
    """enqueue's turns of queue ``q`` in job order, its waiting lists (one per minResources
    shape) merged. An admission only takes room, so a shape rejected once is rejected for the
    rest of the session: its list is dropped, and the queue ends when none is left
    (``s.w_shapes[:alive]``, each read from ``s.w_head``)."""
    n_shapes = s.w_n.shape[1]
    alive = 0
    for k in range(n_shapes):
        if s.w_n[q, k] > 0:
            s.w_head[k] = s.w_off[q * n_shapes + k]
            s.w_shapes[alive] = k
            alive += 1
    while alive > 0:
        first = 0
        for a in range(1, alive):
            if s.j_worder[s.w_job[s.w_head[s.w_shapes[a]]]] < s.j_worder[s.w_job[s.w_head[s.w_shapes[first]]]]:
                first = a
        k = s.w_shapes[first]
        j = s.w_job[s.w_head[k]]
        s.w_head[k] += 1
        dropped = s.w_head[k] == s.w_off[q * n_shapes + k] + s.w_n[q, k]
        if is_pending(session_phase(s, j)):
            if not s.j_has_minres[j] or vote(s, H_JOB_ENQUEUEABLE, j, now):
                job_enqueued(s, j)
                set_session_phase(s, j, PH_INQUEUE)
            else:
                dropped = True
        if dropped:
            alive -= 1
            s.w_shapes[first] = s.w_shapes[alive]


AC_NONE, AC_PLAIN, AC_OTHER = 0, 1, 2


@jit
def candidate_kind(s, j):
    """What allocate makes of job ``j`` once enqueue ran without impure PodGroups: not a
    candidate (a Pending PodGroup, no pending pod but best-effort ones, or not JobValid), a plain
    candidate (every pod Pending and the job not ready, so JobOrderFn ranks it by ``s.j_worder``),
    or another (its place in the order depends on its pods)."""
    if not s.is_live[j] or is_pending(s.phase[j]):
        return AC_NONE
    pending = s.j_cnt[j, PENDING]
    if pending - s.j_pbe[j] == 0 or not job_valid(s, j):
        return AC_NONE
    if pending == s.j_lo[j + 1] - s.j_lo[j] and not is_ready(s, j):
        return AC_PLAIN
    return AC_OTHER


@jit
def plain_at(s, j):
    """Where job ``j`` is, or goes, in its queue's plain candidates (sorted by ``s.j_worder``)."""
    lo = s.al_off[s.j_queue[j]]
    return ordered_at(s.al_job, lo, lo + s.al_n[s.j_queue[j]], s.j_worder, s.j_worder[j])


@jit
def candidate_leave(s, j):
    kind = s.ac_kind[j]
    if kind == AC_PLAIN:
        q = s.j_queue[j]
        shift_out(s.al_job, plain_at(s, j), s.al_off[q] + s.al_n[q])
        s.al_n[q] -= 1
    elif kind == AC_OTHER:
        last = s.ints[I_OTHERS] - 1
        at = s.ao_at[j]
        s.ao_job[at] = s.ao_job[last]
        s.ao_at[s.ao_job[at]] = at
        s.ao_at[j] = -1
        s.ints[I_OTHERS] = last
    s.ac_kind[j] = AC_NONE


@jit
def candidate_enter(s, j, kind):
    if kind == AC_PLAIN:
        q = s.j_queue[j]
        shift_in(s.al_job, plain_at(s, j), s.al_off[q] + s.al_n[q], j)
        s.al_n[q] += 1
    elif kind == AC_OTHER:
        s.ao_at[j] = s.ints[I_OTHERS]
        s.ao_job[s.ints[I_OTHERS]] = j
        s.ints[I_OTHERS] += 1
    s.ac_kind[j] = kind


@jit
def update_candidates(s):
    """allocate's candidates kept between sessions: the jobs touched since the last close
    (``s.to_close``, which also holds those touched since in this session) are sorted again into
    their queue's plain candidates or the others, and into their pass kind's starving plain
    candidates or out; no other job changed since it was sorted."""
    for i in range(s.ints[I_TO_CLOSE]):
        j = s.to_close[i]
        kind = candidate_kind(s, j)
        if kind != s.ac_kind[j]:
            candidate_leave(s, j)
            candidate_enter(s, j, kind)
        member = kind == AC_PLAIN and s.j_kind[j] >= 0 and job_starving(s, j)
        if member != s.jk_in[j]:
            if member:
                kind_join(s, j)
            else:
                kind_leave(s, j)


@jit
def kind_join(s, j):
    """Job ``j`` joins its pass kind's starving plain candidates."""
    g = s.j_kind[j]
    head = s.pk_head[g]
    s.jk_prev[j], s.jk_next[j] = -1, head
    if head >= 0:
        s.jk_prev[head] = j
    s.pk_head[g] = j
    if s.pk_jobs[g] == 0:
        s.pk_at[g] = s.ints[I_KINDS]
        s.pk_list[s.ints[I_KINDS]] = g
        s.ints[I_KINDS] += 1
    s.pk_jobs[g] += 1
    s.pk_pods[g] += s.j_lo[j + 1] - s.j_lo[j]
    s.jk_in[j] = True


@jit
def kind_leave(s, j):
    g = s.j_kind[j]
    before, after = s.jk_prev[j], s.jk_next[j]
    if before >= 0:
        s.jk_next[before] = after
    else:
        s.pk_head[g] = after
    if after >= 0:
        s.jk_prev[after] = before
    s.pk_jobs[g] -= 1
    s.pk_pods[g] -= s.j_lo[j + 1] - s.j_lo[j]
    if s.pk_jobs[g] == 0:
        last = s.ints[I_KINDS] - 1
        at = s.pk_at[g]
        s.pk_list[at] = s.pk_list[last]
        s.pk_at[s.pk_list[at]] = at
        s.pk_at[g] = -1
        s.ints[I_KINDS] = last
    s.jk_in[j] = False


@jit
def allocate_heaps(s):
    """allocate's job heaps from every candidate (the session's, in job order); the queues that
    have one are on the queue heap."""
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if is_pending(session_phase(s, j)):
            if s.has_enqueue:
                continue
            set_session_phase(s, j, PH_INQUEUE)
        if s.j_cnt[j, PENDING] - s.j_pbe[j] == 0 or not job_valid(s, j):
            continue
        q = s.j_queue[j]
        if first_sight(s, q):
            push(s, HEAP_QUEUE, 0, q)
        push(s, HEAP_JOB, q, j)


@jit
def allocate_lists(s):
    """allocate's job heaps from the other candidates only; each queue's plain candidates are read
    in order from its list (:func:`next_job`), as a heap of them would give them."""
    for i in range(s.ints[I_OTHERS]):
        j = s.ao_job[i]
        q = s.j_queue[j]
        if first_sight(s, q):
            push(s, HEAP_QUEUE, 0, q)
        push(s, HEAP_JOB, q, j)
    for q in range(s.al_n.size):
        if s.al_n[q] > 0:
            s.al_head[q] = s.al_off[q]
            if first_sight(s, q):
                push(s, HEAP_QUEUE, 0, q)


@jit
def has_job(s, q, lists):
    return s.jh_n[q] > 0 or (lists and s.al_head[q] < s.al_off[q] + s.al_n[q])


@jit
def next_job(s, q, lists):
    """The first job of queue ``q`` by JobOrderFn: its job heap's, or the next plain candidate
    of its list (``lists``) when that one comes first. No job in the list changes during allocate
    (a statement touches the popped job's pods alone), so the list stays in heap order."""
    if lists:
        h = s.al_head[q]
        if h < s.al_off[q] + s.al_n[q] and (s.jh_n[q] == 0 or job_less(s, s.al_job[h], s.jh[s.q_off[q]])):
            s.al_head[q] = h + 1
            return s.al_job[h]
    return pop(s, HEAP_JOB, q)


@jit
def attempt_known_to_fail(s, j):
    """Job ``j``'s last allocate attempt was discarded, and since then no node's books and nothing
    of the job changed (``ints[I_NODES]``, ``s.j_ver``): this attempt would read the same and be
    discarded too, leaving nothing behind that a later step reads (``s.attempt_memo`` says when
    that holds). A blocked head of a StrictFIFO queue is then passed over in the sessions that
    arrivals bring."""
    return s.jm_nodes[j] == s.ints[I_NODES] + 1 and s.jm_ver[j] == s.j_ver[j] + 1


@jit
def remember_attempt_failed(s, j):
    """The attempt was discarded: the books it read are back as they were."""
    s.jm_nodes[j] = s.ints[I_NODES] + 1
    s.jm_ver[j] = s.j_ver[j] + 1


@jit
def attempt_fits_nowhere(s, j, now):
    """Job ``j``'s attempt would place nothing and be discarded, seen without making it: its pods
    are all Pending and alike (``s.j_alike``), and one like them is not Allocatable in its queue or
    fits no node (:func:`fit_known_to_fail`), and with nothing placed the job is neither ready nor
    pipelined. What the attempt would leave behind, fit errors without nodes, no later step reads."""
    t = s.j_lo[j]
    if not s.j_alike[j] or s.j_cnt[j, PENDING] != s.j_lo[j + 1] - t:
        return False
    if allocatable(s, s.j_queue[j], t) and not fit_known_to_fail(s, t):
        return False
    return not job_ready(s, j) and not vote(s, H_JOB_PIPELINED, j, now)


@jit
def allocate(s, now):
    """allocate: one job per queue turn (Overused queues dropped), its pending tasks in one
    statement, committed when the job is ready; under StrictFIFO a queue whose job is not ready
    leaves the heap."""
    start_action(s, ALLOCATE)
    worksheet = new_stamp(s)
    lists = False
    if s.fast_enqueue:
        update_candidates(s)
        lists = waiting_apart(s)
    if lists:
        allocate_lists(s)
    else:
        allocate_heaps(s)
    while s.ints[I_QUEUE_HEAP] > 0:
        q = pop(s, HEAP_QUEUE, 0)
        if overused(s, q):
            continue
        if not has_job(s, q, lists):
            continue
        j = next_job(s, q, lists)
        topology = s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0 and s.j_topo[j] >= 0
        if not topology and ((s.attempt_memo and attempt_known_to_fail(s, j)) or attempt_fits_nowhere(s, j, now)):
            if s.strict_fifo:
                continue
            push(s, HEAP_QUEUE, 0, q)
            continue
        if first_touch(s.th_mark, j, worksheet):
            # the job's worksheet (its pending tasks in task order), made when the job is first
            # popped: until then no statement touches its pods, and most jobs of a long queue are
            # never popped (StrictFIFO stops at the head)
            s.th_n[j] = 0
            for t in range(s.j_lo[j], s.j_lo[j + 1]):
                if s.status[t] == PENDING and not s.t_be[t]:
                    push(s, HEAP_TASK, j, t)
        start = s.ints[I_TOP]
        if topology and s.topo_gradient:
            kept = allocate_for_job(s, j, now, start)
        else:
            kept = allocate_tasks(s, j, now, start, s.all_nodes, s.all_nodes.size, -1)
        if kept and job_ready(s, j):
            commit(s, start)
            if s.th_n[j] > 0:
                push(s, HEAP_JOB, q, j)
        else:
            if not kept and s.attempt_memo and not topology:
                remember_attempt_failed(s, j)
            s.ints[I_TOP] = start  # a pipelined job keeps its placements; the statement is dropped
            if s.strict_fifo:
                continue  # StrictFIFO: the queue's head did not fit, so the queue stops here
        push(s, HEAP_QUEUE, 0, q)


@jit
def allocate_for_job(s, j, now, start):
    """allocateForJob for a job with networkTopology (allocate._allocate_for_job): gradient by
    gradient (lowest tier first), the gang is tried inside each HyperNode on a copy of its
    worksheet and undone; the first gradient with a HyperNode where the job ends ready or
    pipelined wins, the best-scored such HyperNode (hyperNodeOrder; the first on a tie) gets the
    placements again and the job's worksheet becomes what that try left. No HyperNode: nothing
    placed, the worksheet unchanged (returns False)."""
    lo, n_tasks_j = s.j_lo[j], s.j_lo[j + 1] - s.j_lo[j]
    n0 = s.th_n[j]
    base = s.th[lo:lo + n0].copy()
    count = hypernode_gradient(s, j)
    k = 0
    while k < count:
        end = k
        while end < count and s.hn_tier[s.hn_grad[end]] == s.hn_tier[s.hn_grad[k]]:
            end += 1
        width = end - k
        found_h = np.empty(width, np.int64)
        ops = np.empty((width, max(n_tasks_j, 1), 3), np.int64)
        n_ops = np.zeros(width, np.int64)
        left = np.empty((width, max(n0, 1)), np.int64)
        n_left = np.zeros(width, np.int64)
        found = 0
        for i in range(k, end):
            h = s.hn_grad[i]
            forget_fit_errors(s, j)
            copy_row(s.th[lo:lo + n0], base)
            s.th_n[j] = n0
            lo_m, hi_m = s.hn_mem_off[h], s.hn_mem_off[h + 1]
            if not allocate_tasks(s, j, now, start, s.hn_mem[lo_m:hi_m], hi_m - lo_m, h):
                continue
            top = s.ints[I_TOP]
            if top == start:
                continue
            found_h[found] = h
            n_ops[found] = top - start
            for o in range(start, top):
                t = s.ops[o, 1]
                ops[found, o - start, 0], ops[found, o - start, 1], ops[found, o - start, 2] = s.ops[o, 0], t, s.node[t]
            n_left[found] = s.th_n[j]
            copy_row(left[found, :s.th_n[j]], s.th[lo:lo + s.th_n[j]])
            found += 1
            discard(s, start)
        if found == 0:
            k = end
            continue
        w, best = 0, hypernode_order(s, j, found_h[0])
        for i in range(1, found):
            score = hypernode_order(s, j, found_h[i])
            if score > best:
                w, best = i, score
        for o in range(n_ops[w]):
            if ops[w, o, 0] == OP_ALLOCATE:
                stmt_allocate(s, ops[w, o, 1], ops[w, o, 2])
            else:
                pipeline(s, ops[w, o, 1], ops[w, o, 2], False)
        s.th_n[j] = n_left[w]
        copy_row(s.th[lo:lo + n_left[w]], left[w, :n_left[w]])
        s.j_ahn[j] = hypernode_lca(s, s.j_ahn[j], found_h[w])
        return True
    copy_row(s.th[lo:lo + n0], base)
    s.th_n[j] = n0
    return False


@jit
def forget_fit_errors(s, j):
    """``job.fit_errors = {}``: job ``j``'s pods have no fit errors (their nodes stay in the
    pool until the session closes)."""
    kept = 0
    for k in range(s.ints[I_FIT_TASKS]):
        t = s.fit_tasks[k]
        if s.t_job[t] == j:
            s.fit[t] = False
            s.fit_len[t] = 0
            s.pr_fail[s.t_pair[t]] = False
        else:
            s.fit_tasks[kept] = t
            kept += 1
    s.ints[I_FIT_TASKS] = kept


@jit
def allocate_tasks(s, j, now, start, nodes, nn, h):
    """allocateResourcesForTasks on ``nodes[:nn]`` (every node, or the members of HyperNode ``h``
    for a job with networkTopology) in a statement opened at ``start``: True if it is kept (job
    ready or pipelined), else it is discarded. A pod of a networkTopology job is scored against
    the HyperNode the job holds so far (JobAllocatedHyperNode)."""
    q = s.j_queue[j]
    stamp = new_stamp(s)
    whole = nn == s.all_nodes.size  # the scan sees every node: what failed everywhere fails here
    topology = s.of_kind[NETWORK_TOPOLOGY_AWARE] >= 0 and s.j_topo[j] >= 0
    allocated = s.j_ahn[j] if topology else -1
    while s.th_n[j] > 0:
        t = pop(s, HEAP_TASK, j)
        if not allocatable(s, q, t):
            continue
        if s.t_named[t] and s.pr_fail[s.t_pair[t]]:
            record_fit_error(s, t, False)
            continue
        if whole and fit_known_to_fail(s, t):
            s.ints[I_UNRESOLVABLE] = 0  # (the failed scan saw every node and moved the start by all of them)
            found = 0
        else:
            row = -1
            if s.t_named[t]:
                row = s.t_pair[t] - s.j_pair[j]
                if s.cache_mark[row] != stamp:
                    s.cache_mark[row] = stamp
                    s.cache[row, :] = F_OK
            found = nominated_scan(s, t, row, h)
            if found == 0:
                found = scan(s, t, SCAN_ALLOCATE, nodes, nn, row)
        if found == 0:
            if whole:
                remember_fits_nowhere(s, t)
            record_fit_error(s, t, True)
            if need_continue_allocating(s, j):
                continue
            break
        if topology:
            s.t_ahn[t], s.t_ahn_in[t] = allocated, s.ints[I_SESSIONS]
        n = prioritize(s, t, found)
        if fits_idle(s, t, n):
            stmt_allocate(s, t, n)
        else:
            pipeline(s, t, n, False)
        if topology:
            allocated = hypernode_lca(s, s.node_low[n], allocated)
        if job_ready(s, j):
            break
    if job_ready(s, j) or vote(s, H_JOB_PIPELINED, j, now):
        return True
    discard(s, start)
    return False


@jit
def nominated_scan(s, t, row, h):
    """allocate.go: a pod nominated to a node by the last session's preemption (nominatedNodeName)
    tries that node first, alone, when its FutureIdle holds the request and it is a member of
    HyperNode ``h`` (-1: any node) (allocate._nominated); the feasible count (0 or 1)."""
    n = s.nominated[t]
    if n < 0 or s.nominated_in[t] != s.ints[I_SESSIONS] - 1 or not fits_future(s, t, n):
        return 0
    if h >= 0 and not in_hypernode(s, n, h):
        return 0
    s.one[0] = n
    return scan(s, t, SCAN_ALLOCATE, s.one, 1, row)


@jit
def fit_known_to_fail(s, t):
    """No node fits a task of ``t``'s request shape (FutureIdle and predicates), as found with
    the books as they are (:func:`remember_fits_nowhere`), so allocate's scan for ``t`` finds
    none either: where a request fits does not depend on the task, nor do the predicates of a
    class that :func:`predicates_pass_everywhere` (the task's predicate error cache is not read
    again: its role failed). The finding holds across sessions while the nodes whose room grew
    since still fail it (:func:`still_fits_nowhere`)."""
    if not predicates_pass_everywhere(s, t):
        return False
    z = s.t_shape[t]
    return s.fit_books[z] == s.ints[I_BOOKS] or still_fits_nowhere(s, t, z)


@jit
def still_fits_nowhere(s, t, z):
    """Request shape ``z`` fitted no node when last scanned, and none of the nodes that lost a
    pod since (``s.freed``: only those can have more room; FutureIdle and the pod count are all
    a failed scan read) fits ``t`` now. Refreshes the finding."""
    seen = s.m_freed[z] - 1
    now = s.ints[I_FREED]
    if seen < 0 or now - seen > s.freed.size:
        return False
    for k in range(seen, now):
        if failure_of(s, t, s.freed[k % s.freed.size], SCAN_ALLOCATE) == F_OK:
            return False
    s.m_freed[z] = now + 1
    s.fit_books[z] = s.ints[I_BOOKS]
    return True


@jit
def remember_fits_nowhere(s, t):
    """Every node failed ``t`` (FutureIdle or predicates): remember it for the request shape
    when the task's class fails no node's unresolvable predicates."""
    if predicates_pass_everywhere(s, t):
        s.fit_books[s.t_shape[t]] = s.ints[I_BOOKS]
        s.m_freed[s.t_shape[t]] = s.ints[I_FREED] + 1


@jit
def backfill(s, now):
    """backfill: best-effort pending pods (and best-effort pipelined ones, un-pipelined first),
    queue -> job -> task order, each on its best feasible node."""
    start_action(s, BACKFILL)
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if (
            (s.j_pbe[j] == 0 and s.j_cnt[j, PIPELINED] == 0)
            or is_pending(session_phase(s, j))
            or not job_valid(s, j)
        ):
            continue
        s.th_n[j] = 0
        if s.j_pbe[j] > 0:
            for t in range(s.j_lo[j], s.j_lo[j + 1]):
                if s.status[t] == PENDING and s.t_be[t]:
                    push(s, HEAP_TASK, j, t)
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            if s.status[t] == PIPELINED and s.t_be[t]:
                unplace(s, t)
                push(s, HEAP_TASK, j, t)
        if s.th_n[j] == 0:
            continue
        q = s.j_queue[j]
        if first_sight(s, q):
            push(s, HEAP_QUEUE, 0, q)
        push(s, HEAP_JOB, q, j)
    ordered = 0
    while s.ints[I_QUEUE_HEAP] > 0:
        q = pop(s, HEAP_QUEUE, 0)
        while s.jh_n[q] > 0:
            j = pop(s, HEAP_JOB, q)
            while s.th_n[j] > 0:
                s.l_tasks[ordered] = pop(s, HEAP_TASK, j)
                ordered += 1
    for k in range(ordered):
        t = s.l_tasks[k]
        found = scan(s, t, SCAN_PREDICATE, s.all_nodes, s.all_nodes.size, -1)
        if found == 0:
            record_fit_error(s, t, True)
            continue
        n = s.feas[0] if found == 1 else best_node(s, t, s.feas, found)
        session_allocate(s, t, n)


@jit
def failure_known(s, kind, t):
    """An attempt of ``kind`` for a task like ``t`` failed in this session and the books have not
    changed since (``ints[I_BOOKS]``), so this one fails too: a failed attempt undoes all it
    tried, and what it reads besides the books is what :func:`remember_failure` keys it by."""
    z, j = s.t_shape[t], s.t_job[t]
    q = s.j_queue[j]
    if s.m_books[kind, z, q] != s.ints[I_BOOKS] or not comparable(s, kind, t):
        return False
    key = s.m_key[kind, z, q]
    return key[0] == s.t_class[t] and key[1] == s.j_prio[j] and key[2] == s.t_be[t] and key[3] == excludes_nodes(s, t)


@jit
def remember_failure(s, kind, t):
    """The attempt of ``kind`` for ``t`` found nothing on any feasible node: remember it under
    the task's request shape and queue."""
    if not comparable(s, kind, t):
        return
    z, j = s.t_shape[t], s.t_job[t]
    q = s.j_queue[j]
    key = s.m_key[kind, z, q]
    key[0], key[1], key[2], key[3] = s.t_class[t], s.j_prio[j], s.t_be[t], excludes_nodes(s, t)
    s.m_books[kind, z, q] = s.ints[I_BOOKS]


@jit
def excludes_nodes(s, t):
    """The task's fit error keeps nodes from preempt and reclaim: those its predicates can never
    pass, the same for every task of its class (a failed scan visits every node)."""
    return s.fit[t] and s.fit_len[t] > 0


@jit
def comparable(s, kind, t):
    """Attempts for tasks of one key read the same: reclaim's victims are in other queues; a
    preemptor's own job has nothing placed (drf reads its share, preempt within a job its tasks)."""
    if kind == M_RECLAIM:
        return True
    j = s.t_job[t]
    return allocated_tasks(s, j) + s.j_cnt[j, PIPELINED] == 0


@jit
def preempt_candidates(s, t):
    """FilterOutUnschedulableAndUnresolvableNodesForTask, then the preempt predicate scan of
    the nodes left (``s.nlist``); the feasible nodes are in ``s.feas``. Returns their count, the
    count of nodes left and whether the feasible nodes are all there (the scan did not stop at
    its share of the nodes, so where it started from does not matter)."""
    nn = 0
    stamp = new_stamp(s)
    if s.fit[t]:
        for k in range(s.fit_start[t], s.fit_start[t] + s.fit_len[t]):
            s.node_mark[s.fit_pool[k]] = stamp
    for n in range(s.all_nodes.size):
        if s.node_mark[n] != stamp:
            s.nlist[nn] = n
            nn += 1
    found = scan(s, t, SCAN_PREEMPT, s.nlist, nn, -1)
    wanted = nodes_to_find(nn)
    return found, nn, found < wanted or wanted == nn


@jit
def fails_beyond_scan(s, t, scope, j, found, nn, none):
    """An attempt failed on the ``found`` nodes its scan of ``s.nlist[:nn]`` kept (``s.feas``);
    True if no other feasible node can make room either (``none``: no victims anywhere): it
    then fails on whatever share of the nodes a scan takes, as a node fails the same whichever
    failed nodes were tried before it (they are undone)."""
    stamp = new_stamp(s)
    for k in range(found):
        s.node_mark[s.feas[k]] = stamp
    for k in range(nn):
        n = s.nlist[k]
        if s.node_mark[n] == stamp or failure_of(s, t, n, SCAN_PREEMPT) != F_OK:
            continue
        if room_without_victims(s, t, n, scope, j) if none else victims_on(s, t, n, scope, j) >= 0:
            return False
    return True


@jit
def predicates_pass_everywhere(s, t):
    """The task's class fails no node's unresolvable predicates (node unschedulable, selector,
    affinity, taints); the pod limit is the only predicate left, and it reads the node alone."""
    return s.class_clean[s.t_class[t]] or not s.hook_len[H_PREDICATE]


@jit
def passable(s, t):
    """Passing over an attempt for ``t`` needs no look at the nodes: its predicates pass every
    node and no fit error keeps nodes out, so its scan would move the rotating start by
    :func:`scan_step` whatever the nodes hold."""
    return not excludes_nodes(s, t) and predicates_pass_everywhere(s, t)


@jit
def pass_over(s, t):
    """An attempt known to fail is not made, but its node scan moves the rotating start as
    it would: by :func:`pass_by` when :func:`passable` (then True), else by scanning."""
    if not passable(s, t):
        preempt_candidates(s, t)
        return False
    pass_by(s, 1)
    return True


@jit
def pass_by(s, scans):
    """The rotating start moved as ``scans`` passed-over scans move it (none of them keeps
    unresolvable nodes)."""
    if scans == 0:
        return
    s.ints[I_UNRESOLVABLE] = 0
    nn = s.all_nodes.size
    if nn > 0:
        s.ints[I_NEXT_NODE] = (s.ints[I_NEXT_NODE] + scans * scan_step(nn)) % nn


@jit
def give_up(s, kind, t):
    """An attempt of ``kind`` known to fail is not made: its scan's move of the rotating start
    (:func:`pass_over`), and its failure remembered as the full attempt would remember it."""
    passed = pass_over(s, t)
    remember_failure(s, kind, t)
    return TASK_PASSED if passed else TASK_FAILED


@jit
def scan_step(nn):
    """How far a preempt scan over ``nn`` nodes that all pass moves the rotating start."""
    wanted = nodes_to_find(nn)
    return nn if wanted >= nn else wanted + 1


@jit
def pass_over_alike(s, t, j):
    """Task ``t`` was just passed over (:func:`pass_over` True) and nothing changed since: the
    tasks next in job ``j``'s task heap that are like it (request shape, class, priority, flags,
    no fit error keeping nodes out) would each be passed over the same way, so they are taken off
    the heap at once and the rotating start moved as their pass-overs would move it."""
    base = s.j_lo[j]
    alike = 0
    while s.th_n[j] > 0:
        u = s.th[base]
        if (s.t_shape[u] != s.t_shape[t] or s.t_class[u] != s.t_class[t] or s.t_prio[u] != s.t_prio[t]
                or s.t_be[u] != s.t_be[t] or s.t_never[u] != s.t_never[t] or excludes_nodes(s, u)):
            break
        pop(s, HEAP_TASK, j)
        alike += 1
    pass_by(s, alike)


@jit
def tasks_on_node(s, n, preemptor, scope, j):
    """The candidates on node ``n`` (NodeInfo.Tasks, by task index): preempt's eligible victims
    in ``scope`` (SCOPE_QUEUE: other jobs of the queue, SCOPE_JOB: the same job), or for
    reclaim (SCOPE_RECLAIM) the Running preemptable tasks of other, reclaimable queues. Into
    ``s.cand``."""
    count = 0
    t = s.node_first[n]
    while t >= 0:
        if candidate(s, t, preemptor, scope, j):
            s.cand[count] = t
            count += 1
        t = s.node_next[t]
    sort_prefix(s.cand, count)
    return count


@jit
def in_scope(s, other, scope, j):
    """Job ``other``'s tasks may be candidates in ``scope`` for a preemptor of job ``j``."""
    if scope == SCOPE_JOB:
        return other == j
    oq, q = s.j_queue[other], s.j_queue[j]
    if scope == SCOPE_QUEUE:
        return oq == q and other != j
    return oq != q and s.q_reclaimable[oq]


@per_constant
def candidate(s, t, preemptor, scope, j):
    """Task ``t``, on a node, is one of the candidates of :func:`tasks_on_node`."""
    st = s.status[t]
    if scope == SCOPE_RECLAIM:
        keep = st == RUNNING
    else:
        keep = (st == BOUND or st == RUNNING) and (s.t_be[t] or not s.t_be[preemptor])
    return keep and s.t_preemptable[t] and in_scope(s, s.t_job[t], scope, j)


@per_constant
def no_victims_anywhere(s, t, scope, j):
    """The vote picks no victim for ``t`` on any node: it is bounded over every candidate of
    the live jobs (:func:`core_plugins.picks_none`). An attempt can then only place the task
    where it fits as things are (see :func:`room_without_victims`), and the nodes need not be
    scored. Reclaim's candidates, and preempt's within a queue for a preemptor that is not
    best-effort and has nothing placed, are bounded per queue (:func:`queue_bounds`)."""
    b = s.vb
    bound_clear(b)
    if scope == SCOPE_RECLAIM:
        bounds = queue_bounds(s, 1)
        for oq in range(bounds.shape[0]):
            if oq != s.j_queue[j] and s.q_reclaimable[oq]:
                bound_merge(b, bounds[oq])
        return picks_none(s, H_RECLAIMABLE, t, b)
    if scope == SCOPE_QUEUE and not s.t_be[t] and s.j_cnt[j, RUNNING] + s.j_cnt[j, BOUND] == 0:
        bound_merge(b, queue_bounds(s, 0)[s.j_queue[j]])
    elif scope == SCOPE_JOB:
        bound_candidates(s, b, t, scope, j, j)
    else:
        for i in range(s.ints[I_LIVE]):
            bound_candidates(s, b, t, scope, j, s.live[i])
    return picks_none(s, H_PREEMPTABLE, t, b)


@per_constant
def bound_candidates(s, b, t, scope, j, other):
    """Job ``other``'s candidates for ``t`` in ``scope`` (:func:`candidate`) into bound ``b``."""
    if s.j_cnt[other, RUNNING] + s.j_cnt[other, BOUND] == 0 or not in_scope(s, other, scope, j):
        return
    for c in range(s.j_lo[other], s.j_lo[other + 1]):
        if candidate(s, c, t, scope, j):
            bound_add(s, b, t, c)


@jit
def queue_bounds(s, kind):
    """The bound over each queue's candidates (rows of ``s.nv_bound[kind]``) for preempt (kind
    0: Bound or Running) or reclaim (1: Running), preemptable tasks of the live jobs; made again
    only when the books changed since (``s.nv_books``), from per-queue sums that follow the jobs
    as they change (:func:`bounds_refresh`)."""
    bounds = s.nv_bound[kind]
    if s.nv_books[kind] == s.ints[I_BOOKS]:
        return bounds
    bounds_refresh(s)
    for q in range(bounds.shape[0]):
        b = bounds[q]
        bound_clear(b)
        if s.qa_count[kind, q] == 0:
            continue
        if s.qa_stale[kind, q]:
            largest_drf_again(s, kind, q)
        b[B_COUNT] = float(s.qa_count[kind, q])
        for r in range(s.prio_of_rank.size):
            if s.qa_prio[kind, q, r] > 0:
                b[B_PRIORITY] = s.prio_of_rank[r]
                break
        if s.qa_gang[kind, q] > 0:
            b[B_GANG] = 1.0
        b[B_DRF] = s.qa_drf[kind, q]
        bound_proportion(s, b, q)
    s.nv_books[kind] = s.ints[I_BOOKS]
    return bounds


@jit
def bounds_refresh(s):
    """The per-queue sums behind :func:`queue_bounds` follow the jobs changed since they were last
    read (``s.bd_job``: touched, or out of the snapshot; every live job the first time): each one's
    share (its candidates per kind, its priority, gang's flag, drf's share left, from
    :func:`job_bounds`) is taken out and put back as it is now."""
    if not s.ints[I_BOUNDS_BUILT]:
        s.ints[I_BOUNDS_BUILT] = 1
        for i in range(s.ints[I_LIVE]):
            bounds_dirty(s, s.live[i])
    for i in range(s.ints[I_BOUNDS_DIRTY]):
        j = s.bd_job[i]
        s.bd_mark[j] = False
        counted = s.is_live[j] and s.j_cnt[j, RUNNING] + s.j_cnt[j, BOUND] > 0
        if counted:
            job_bounds(s, j)
        for kind in range(2):
            if s.qc_count[j, kind] > 0:
                bound_leave(s, j, kind)
            if counted and s.jb_count[j, kind] > 0:
                bound_enter(s, j, kind)
    s.ints[I_BOUNDS_DIRTY] = 0


@jit
def bounds_reset(s):
    """The per-queue sums behind :func:`queue_bounds` emptied, made again from every live job when
    next wanted: what a job brought was counted at its priority's rank then, which a PriorityClass
    change moves, and a Queue or conf change moves what the bounds read."""
    s.qa_count[:, :] = 0
    s.qa_prio[:, :, :] = 0
    s.qa_gang[:, :] = 0
    s.qa_drf[:, :] = -math.inf
    s.qa_drf_n[:, :] = 0
    s.qa_stale[:, :] = False
    s.qc_count[:, :] = 0
    s.qc_gang[:, :] = False
    s.qc_drf[:, :] = -math.inf
    for i in range(s.ints[I_BOUNDS_DIRTY]):
        s.bd_mark[s.bd_job[i]] = False
    s.ints[I_BOUNDS_DIRTY] = 0
    s.ints[I_BOUNDS_BUILT] = 0
    s.nv_books[:] = -1


@jit
def bound_enter(s, j, kind):
    """Job ``j``'s candidates of ``kind`` into its queue's sums."""
    q = s.j_queue[j]
    s.qc_count[j, kind] = s.jb_count[j, kind]
    s.qa_count[kind, q] += s.jb_count[j, kind]
    s.qa_prio[kind, q, s.j_prank[j]] += 1
    gang = ready(s, j) > s.j_min[j]
    s.qc_gang[j, kind] = gang
    s.qa_gang[kind, q] += gang
    drf = s.jb_drf[j, kind]
    s.qc_drf[j, kind] = drf
    if not s.qa_stale[kind, q]:
        if s.qa_drf_n[kind, q] == 0 or drf > s.qa_drf[kind, q]:
            s.qa_drf[kind, q], s.qa_drf_n[kind, q] = drf, 1
        elif drf == s.qa_drf[kind, q]:
            s.qa_drf_n[kind, q] += 1


@jit
def bound_leave(s, j, kind):
    """Job ``j``'s candidates of ``kind`` out of its queue's sums, as :func:`bound_enter` put them
    in; when the last job with the largest drf share leaves, the largest is found again when next
    wanted (:func:`largest_drf_again`)."""
    q = s.j_queue[j]
    s.qa_count[kind, q] -= s.qc_count[j, kind]
    s.qc_count[j, kind] = 0
    s.qa_prio[kind, q, s.j_prank[j]] -= 1
    s.qa_gang[kind, q] -= s.qc_gang[j, kind]
    if not s.qa_stale[kind, q] and s.qc_drf[j, kind] == s.qa_drf[kind, q]:
        s.qa_drf_n[kind, q] -= 1
        if s.qa_drf_n[kind, q] == 0:
            s.qa_stale[kind, q] = True


@jit
def largest_drf_again(s, kind, q):
    """The largest drf share left among queue ``q``'s jobs with candidates of ``kind``, read from
    what they brought (``s.qc_drf``)."""
    largest, n = -math.inf, 0
    for i in range(s.ints[I_LIVE]):
        j = s.live[i]
        if s.j_queue[j] != q or s.qc_count[j, kind] == 0:
            continue
        drf = s.qc_drf[j, kind]
        if n == 0 or drf > largest:
            largest, n = drf, 1
        elif drf == largest:
            n += 1
    s.qa_drf[kind, q], s.qa_drf_n[kind, q], s.qa_stale[kind, q] = largest, n, False


@jit
def job_bounds(s, j):
    """Job ``j``'s candidates for preempt and reclaim (:func:`queue_bounds`): their count
    (``s.jb_count``) and the largest drf share the job keeps after losing one (``s.jb_drf``);
    made again only when the job changed since (``s.j_ver``: its pods' statuses, which also
    move its drf allocated)."""
    if s.jb_ver[j] == s.j_ver[j]:
        return
    s.jb_count[j, 0], s.jb_count[j, 1] = 0, 0
    s.jb_drf[j, 0], s.jb_drf[j, 1] = -math.inf, -math.inf
    for c in range(s.j_lo[j], s.j_lo[j + 1]):
        st = s.status[c]
        if s.t_preemptable[c] and (st == RUNNING or st == BOUND):
            share = share_left(s, c)
            for kind in range(2 if st == RUNNING else 1):
                s.jb_count[j, kind] += 1
                s.jb_drf[j, kind] = max(s.jb_drf[j, kind], share)
    s.jb_ver[j] = s.j_ver[j]


@jit
def room_without_victims(s, t, n, scope, j):
    """With no victims picked, the attempt succeeds on node ``n`` exactly when the task fits
    FutureIdle (ValidateVictims) and, for preempt, passes the predicates (preemptorFitsOnNode,
    once its queue is Allocatable, the same on every node); for reclaim, the node has a reclaimee."""
    if not fits_future(s, t, n):
        return False
    if scope != SCOPE_RECLAIM:
        return predicate(s, t, n) == F_OK
    c = s.node_first[n]
    while c >= 0:
        if candidate(s, c, t, scope, j):
            return True
        c = s.node_next[c]
    return False


@jit
def victims_room(s, t, n, victims, nv, slack=0.0):
    """util.ValidateVictims: FutureIdle plus what ``victims[:nv]`` hold fits the task (each
    dimension given ``slack`` more, relative)."""
    room = s.vec[6]
    future_idle(s, n, room)
    for k in range(nv):
        req = s.t_req[victims[k]]
        for r in range(room.size):
            room[r] += req[r]
    if slack > 0:
        for r in range(room.size):
            room[r] += slack * (1.0 + abs(room[r]))
    return less_equal(s.t_req[t], room)


@jit
def no_victims_room(s, t, n, nc):
    """Not even all candidates on ``n`` (``s.cand[:nc]``) make room for ``t``, so no choice of
    victims among them does (the slack covers the sums' rounding in another order)."""
    return not victims_room(s, t, n, s.cand, nc, 1e-9)


@jit
def victims_heap(s, nv):
    """BuildVictimsPriorityQueue of ``s.vic[:nv]``."""
    s.ints[I_VICTIMS] = 0
    for k in range(nv):
        push(s, HEAP_VICTIM, 0, s.vic[k])


@jit
def victims_on(s, t, n, scope, j):
    """The victims the vote picks on node ``n`` (into ``s.vic``; returns their count) when
    they, with FutureIdle, make room for ``t`` (util.ValidateVictims); else -1. Reclaim
    (SCOPE_RECLAIM) passes over a node without reclaimees."""
    nc = tasks_on_node(s, n, t, scope, j)
    if (scope == SCOPE_RECLAIM and nc == 0) or no_victims_room(s, t, n, nc):
        return -1
    nv = victims_of(s, H_RECLAIMABLE if scope == SCOPE_RECLAIM else H_PREEMPTABLE, t, s.cand, nc)
    return nv if victims_room(s, t, n, s.vic, nv) else -1


@jit
def fits_on_node(s, q, t, n):
    """preemptorFitsOnNode: Allocatable, FutureIdle fit, PredicateFn."""
    return allocatable(s, q, t) and fits_future(s, t, n) and predicate(s, t, n) == F_OK


@jit
def preempt_task(s, t, scope):
    """normalPreempt: nodes by descending score; on each, evict Preemptable victims in victim
    order until the task fits, then pipeline it there (a node that never fits is undone).
    TASK_PLACED, TASK_FAILED, or TASK_PASSED: passed over with nothing changed but the rotating start."""
    if s.t_never[t]:
        return TASK_FAILED
    j = s.t_job[t]
    q = s.j_queue[j]
    kind = M_PREEMPT_QUEUE if scope == SCOPE_QUEUE else M_PREEMPT_JOB
    if failure_known(s, kind, t) or (scope == SCOPE_JOB and comparable(s, kind, t) and not allocatable(s, q, t)):
        # (a job with nothing placed has no victims of its own: its queue must allow the task)
        return TASK_PASSED if pass_over(s, t) else TASK_FAILED
    none = no_victims_anywhere(s, t, scope, j)
    if none and (not allocatable(s, q, t) or fit_known_to_fail(s, t)):
        return give_up(s, kind, t)  # (no victims, and no node where the task fits as things are)
    found, nn, every = preempt_candidates(s, t)
    if none:
        n = best_room_without_victims(s, t, scope, j, found)
        if n >= 0:
            pipeline(s, t, n, False)
            return TASK_PLACED
    else:
        sort_nodes(s, t, found)
        for k in range(found):
            n = s.norder[k]
            nv = victims_on(s, t, n, scope, j)
            if nv < 0:
                continue
            start = s.ints[I_TOP]
            victims_heap(s, nv)
            fits = fits_on_node(s, q, t, n)
            while s.ints[I_VICTIMS] > 0 and not fits:
                victim = pop(s, HEAP_VICTIM, 0)
                evict(s, victim, t)
                fits = fits_on_node(s, q, t, n)
            if fits:
                pipeline(s, t, n, s.ints[I_TOP] > start)
                return TASK_PLACED
            discard(s, start)
    if comparable(s, kind, t) and (every or fails_beyond_scan(s, t, scope, j, found, nn, none)):
        remember_failure(s, kind, t)
        if none and not excludes_nodes(s, t):
            remember_fits_nowhere(s, t)  # (the queue allows the task: no node fits it)
    return TASK_FAILED


@jit
def best_room_without_victims(s, t, scope, j, found):
    """The node normalPreempt would pipeline ``t`` on when no victims are picked: the first of
    the feasible nodes (``s.feas[:found]``) by descending score, ties in scan order, where the
    task fits (:func:`room_without_victims`); -1 if none."""
    best, best_score = -1, 0.0
    for k in range(found):
        n = s.feas[k]
        if room_without_victims(s, t, n, scope, j):
            score = node_score(s, t, n)
            if best < 0 or score > best_score:
                best, best_score = n, score
    return best


@jit
def preempt_known(s, t, scope):
    """What :func:`preempt_task` does for ``t`` when it is known to make no attempt: 0 (failed,
    nothing changed) or 1 (passed over, a :func:`pass_by` of one scan; the failure remembered as
    :func:`give_up` remembers it); -1 when it would look at the nodes."""
    if s.t_never[t]:
        return 0
    if not passable(s, t):
        return -1
    j = s.t_job[t]
    q = s.j_queue[j]
    kind = M_PREEMPT_QUEUE if scope == SCOPE_QUEUE else M_PREEMPT_JOB
    if failure_known(s, kind, t) or (scope == SCOPE_JOB and comparable(s, kind, t) and not allocatable(s, q, t)):
        return 1
    if no_victims_anywhere(s, t, scope, j) and (not allocatable(s, q, t) or fit_known_to_fail(s, t)):
        remember_failure(s, kind, t)
        return 1
    return -1


@jit
def tries_alike(s, j):
    """Preempt and reclaim would try each of job ``j``'s pods the same way: all Pending and alike
    (``s.j_alike``), none with a fit error that keeps nodes out. The job's first pod then answers
    for all (a pod's own priority is read only against placed pods of its job, and it has none)."""
    lo, hi = s.j_lo[j], s.j_lo[j + 1]
    if not s.j_alike[j] or s.j_cnt[j, PENDING] != hi - lo:
        return False
    for t in range(lo, hi):
        if excludes_nodes(s, t):
            return False
    return True


@jit
def by_kind(s):
    """The starving plain candidates can be answered by pass kind (``s.j_kind``), each kind by one
    of them: they are this session's candidates (the Pending PodGroups are apart, so the candidates
    are the active jobs with pending pods), brought up to date (:func:`update_candidates`), and
    none has a fit error that keeps nodes out (``s.fit_tasks``), so each tries its pods alike
    (:func:`tries_alike`) and as every job of its kind: what a try reads of a job with nothing
    placed is its queue, priority and pods' kind."""
    if not waiting_apart(s):
        return False
    update_candidates(s)
    for k in range(s.ints[I_FIT_TASKS]):
        t = s.fit_tasks[k]
        if s.jk_in[s.t_job[t]] and excludes_nodes(s, t):
            return False
    return True


@jit
def pending_known(s, t, j, action):
    """What ``action`` (preempt within the queue, or reclaim) does for pending task ``t`` of job
    ``j`` when it is known to make no attempt (:func:`preempt_known`, :func:`reclaim_known`)."""
    return preempt_known(s, t, SCOPE_QUEUE) if action == PREEMPT else reclaim_known(s, t, j)


@jit
def pending_passes(s, j, action):
    """The scans ``action``'s tries of starving job ``j``'s pending tasks pass over, -1 when one of
    them would look at the nodes; alike pods are answered by the first (:func:`tries_alike`)."""
    lo, hi = s.j_lo[j], s.j_lo[j + 1]
    if tries_alike(s, j):
        known = pending_known(s, lo, j, action)
        return -1 if known < 0 else known * (hi - lo)
    scans = 0
    for t in range(lo, hi):
        if s.status[t] != PENDING:
            continue
        known = pending_known(s, t, j, action)
        if known < 0:
            return -1
        scans += known
    return scans


@jit
def job_preempt_passes(s, j):
    """The scans preempt passes over for starving job ``j`` (:func:`preempt_passes`): its pending
    tasks within the queue, then its first pending task (TaskOrderFn) within the job; -1 when one
    of its tries would look at the nodes."""
    scans = pending_passes(s, j, PREEMPT)
    if scans < 0:
        return -1
    first = -1
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == PENDING and (first < 0 or task_less(s, t, first)):
            first = t
    if first >= 0:
        known = preempt_known(s, first, SCOPE_JOB)
        if known < 0:
            return -1
        scans += known
    return scans


@jit
def preempt_passes(s):
    """The scans preempt would pass over when every task it would try is known to make no
    attempt (:func:`preempt_known`): each starving job's pending tasks within the queue, then its
    first pending task (TaskOrderFn) within the job. A pass changes nothing a later step reads but
    the rotating start, so the order of the tries does not matter, nor do the heaps, and the
    starving plain candidates count by kind (:func:`by_kind`). -1 when some task would look at the
    nodes: then the action runs in full."""
    scans = 0
    kinds = by_kind(s)
    if kinds:
        for k in range(s.ints[I_KINDS]):
            g = s.pk_list[k]
            j = s.pk_head[g]
            t = s.j_lo[j]
            within_queue, within_job = pending_known(s, t, j, PREEMPT), preempt_known(s, t, SCOPE_JOB)
            if within_queue < 0 or within_job < 0:
                return -1
            scans += within_queue * s.pk_pods[g] + within_job * s.pk_jobs[g]
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if kinds and s.jk_in[j]:
            continue
        if is_pending(session_phase(s, j)) or not job_valid(s, j) or not job_starving(s, j) or s.j_topo[j] >= 0:
            continue
        known = job_preempt_passes(s, j)
        if known < 0:
            return -1
        scans += known
    return scans


@jit
def preempt(s, now):
    """preempt: starving jobs take room from other jobs of their queue (one statement per job,
    committed if the job is then pipelined); then pending tasks of those jobs from running
    lower-priority tasks of their own job. Only the session's candidates can have a pending
    task (a session creates none); any other starving job would enter a heap and leave it with
    nothing tried. A job with networkTopology never preempts (v1.15.1: "jobs containing
    networkTopology do not support preemption"). When every try is known to fail, only their passes
    are made (:func:`preempt_passes`)."""
    start_action(s, PREEMPT)
    scans = preempt_passes(s)
    if scans >= 0:
        pass_by(s, scans)
        return
    n_queues = 0
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if is_pending(session_phase(s, j)) or not job_valid(s, j) or not job_starving(s, j) or s.j_topo[j] >= 0:
            continue
        q = s.j_queue[j]
        if first_sight(s, q):
            s.q_order[n_queues] = q
            n_queues += 1
        push(s, HEAP_JOB, q, j)
        s.jl[s.q_off[q] + s.jl_n[q]] = j
        s.jl_n[q] += 1
        tasks_with_status(s, j, PENDING)
    for k in range(n_queues):
        push(s, HEAP_QUEUE, 0, s.q_order[k])
    while s.ints[I_QUEUE_HEAP] > 0:
        q = pop(s, HEAP_QUEUE, 0)
        while s.jh_n[q] > 0:
            j = pop(s, HEAP_JOB, q)
            start = s.ints[I_TOP]
            while job_starving(s, j) and s.th_n[j] > 0:
                t = pop(s, HEAP_TASK, j)
                if preempt_task(s, t, SCOPE_QUEUE) == TASK_PASSED:
                    pass_over_alike(s, t, j)
            if vote(s, H_JOB_PIPELINED, j, now):
                commit(s, start)
            else:
                discard(s, start)
        for k in range(s.jl_n[q]):
            j = s.jl[s.q_off[q] + k]
            tasks_with_status(s, j, PENDING)
            while s.th_n[j] > 0:
                start = s.ints[I_TOP]
                if preempt_task(s, pop(s, HEAP_TASK, j), SCOPE_JOB) != TASK_PLACED:
                    discard(s, start)
                    break
                commit(s, start)


@jit
def reclaim_task(s, t, j):
    """reclaimForTask: on the first feasible node where the Reclaimable victims make room,
    evict them in victim order while the request does not fit, then pipeline the task
    (:func:`preempt_task`'s outcomes)."""
    if failure_known(s, M_RECLAIM, t):
        return TASK_PASSED if pass_over(s, t) else TASK_FAILED
    if reclaim_known_to_fail(s, t, j):
        return give_up(s, M_RECLAIM, t)
    found, nn, every = preempt_candidates(s, t)
    # the vote's bound is read by the node loop and by fails_beyond_scan, neither of which runs
    # when the scan found no node and saw them all
    none = (found > 0 or not every) and no_victims_anywhere(s, t, SCOPE_RECLAIM, j)
    available = s.vec[5]
    req = s.t_req[t]
    for k in range(found):
        n = s.feas[k]
        if none:
            if room_without_victims(s, t, n, SCOPE_RECLAIM, j):
                pipeline(s, t, n, False)
                return TASK_PLACED
            continue
        nv = victims_on(s, t, n, SCOPE_RECLAIM, j)
        if nv < 0:
            continue
        victims_heap(s, nv)
        future_idle(s, n, available)
        start = s.ints[I_TOP]
        while s.ints[I_VICTIMS] > 0 and not less_equal(req, available):
            victim = pop(s, HEAP_VICTIM, 0)
            evict(s, victim, t)
            for r in range(available.size):
                available[r] += s.t_req[victim, r]
        if not less_equal(req, available):
            discard(s, start)
            continue
        pipeline(s, t, n, s.ints[I_TOP] > start)
        return TASK_PLACED
    if every or fails_beyond_scan(s, t, SCOPE_RECLAIM, j, found, nn, none):
        remember_failure(s, M_RECLAIM, t)
    return TASK_FAILED


@jit
def reclaim_known_to_fail(s, t, j):
    """The vote picks no reclaimee for ``t`` anywhere, and no node's FutureIdle fits it (allocate's
    finding, :func:`fit_known_to_fail`, with no node at its pod limit, the one predicate that
    finding lets fail where the task would fit): the attempt finds no room on any node."""
    return ((not s.hook_len[H_PREDICATE] or s.ints[I_FULL_NODES] == 0) and fit_known_to_fail(s, t)
            and no_victims_anywhere(s, t, SCOPE_RECLAIM, j))


@jit
def reclaim_known(s, t, j):
    """What reclaim does for pending task ``t`` of job ``j`` when it is known to make no attempt:
    0 (not tried: never-preempting, or its queue does not let it preempt) or 1 (passed over, the
    failure remembered as :func:`give_up` remembers it); -1 when it would look at the nodes."""
    if s.t_never[t] or not preemptive(s, s.j_queue[j], t):
        return 0
    if not passable(s, t):
        return -1
    if failure_known(s, M_RECLAIM, t):
        return 1
    if not reclaim_known_to_fail(s, t, j):
        return -1
    remember_failure(s, M_RECLAIM, t)
    return 1


@jit
def reclaim_passes(s):
    """The scans reclaim would pass over when every task it would try (the pending tasks of a
    starving job whose queue is not Overused) is known to make no attempt (:func:`reclaim_known`);
    -1 when one would look at the nodes (:func:`preempt_passes` says why the order does not
    matter and the starving plain candidates count by kind)."""
    scans = 0
    kinds = by_kind(s)
    if kinds:
        for k in range(s.ints[I_KINDS]):
            g = s.pk_list[k]
            j = s.pk_head[g]
            if overused(s, s.j_queue[j]):
                continue
            known = pending_known(s, s.j_lo[j], j, RECLAIM)
            if known < 0:
                return -1
            scans += known * s.pk_pods[g]
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if kinds and s.jk_in[j]:
            continue
        if is_pending(session_phase(s, j)) or not job_valid(s, j):
            continue
        if overused(s, s.j_queue[j]) or not job_starving(s, j):
            continue
        known = pending_passes(s, j, RECLAIM)
        if known < 0:
            return -1
        scans += known
    return scans


@jit
def reclaim(s, now):
    """reclaim: queues by QueueOrderFn (Overused skipped); each starving job takes room for its
    pending tasks from other, reclaimable queues; committed if the job is then pipelined (of
    the live jobs, the session's candidates, as in preempt). When every try is known to fail,
    only their passes are made (:func:`reclaim_passes`)."""
    start_action(s, RECLAIM)
    scans = reclaim_passes(s)
    if scans >= 0:
        pass_by(s, scans)
        return
    for i in range(s.ints[I_CANDIDATES]):
        j = s.candidates[i]
        if is_pending(session_phase(s, j)) or not job_valid(s, j):
            continue
        q = s.j_queue[j]
        if first_sight(s, q):
            push(s, HEAP_QUEUE, 0, q)
        if job_starving(s, j):
            push(s, HEAP_JOB, q, j)
            tasks_with_status(s, j, PENDING)
    while s.ints[I_QUEUE_HEAP] > 0:
        q = pop(s, HEAP_QUEUE, 0)
        if overused(s, q):
            continue
        while s.jh_n[q] > 0:
            j = pop(s, HEAP_JOB, q)
            start = s.ints[I_TOP]
            while job_starving(s, j) and s.th_n[j] > 0:
                t = pop(s, HEAP_TASK, j)
                if s.t_never[t] or not preemptive(s, q, t):
                    continue
                if reclaim_task(s, t, j) == TASK_PASSED:
                    pass_over_alike(s, t, j)
            if vote(s, H_JOB_PIPELINED, j, now):
                commit(s, start)
            else:
                discard(s, start)
            if s.jh_n[q] > 0:
                push(s, HEAP_QUEUE, 0, q)


@unit
def enqueue_allocate_backfill(s, now, action):
    """The actions that admit and place pending jobs (Volcano's shipped conf), compiled on their own
    (``core_state.unit``)."""
    if action == ENQUEUE:
        enqueue(s, now)
    elif action == ALLOCATE:
        allocate(s, now)
    else:
        backfill(s, now)


@unit
def preempt_or_reclaim(s, now, action):
    """The actions that evict running pods for starving ones, compiled on their own: a conf without
    them (Volcano's shipped one) never compiles them."""
    if action == PREEMPT:
        preempt(s, now)
    else:
        reclaim(s, now)


UNITS = (enqueue_allocate_backfill, preempt_or_reclaim)
"""The slots of ``s.units`` (``core_state.N_UNITS``)."""
UNIT_OF_ACTION = (0, 0, 0, 1, 1)
"""The unit (slot of ``UNITS``) each action is compiled in, by action code (ENQUEUE ... RECLAIM)."""


@inlined
def run_session(s, now):
    """One scheduling cycle on the live jobs, its actions in conf order (each in its unit, called
    through ``s.units``); returns the number of pipelined pods at close."""
    open_session(s)
    for a in s.actions:
        call_unit(s.units[UNIT_OF_ACTION[a]], s, now, a)
    return close_session(s)
