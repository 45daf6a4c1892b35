"""Resource comparisons and the bookkeeping of tasks, jobs and nodes, for the numba core.

The comparisons mirror ``labkit.engine.resources`` (Volcano's api/resource_info.go) on rows of
the state's arrays. The bookkeeping is kept incrementally: :func:`account` adds or removes one
task's share (job status counters, per-role counters, the job's allocated and pending requests,
the node's Used/Releasing/Pipelined), and every status change goes through :func:`set_status`.
Only tasks of jobs whose pods exist (``s.created``) are counted, as a session sees only those.
All quantities are whole numbers in Volcano units, so incremental sums are exact. Every change
of the books counts up ``ints[I_BOOKS]``, so a session can tell that nothing changed since an
attempt failed (``core_actions.failure_known``).
"""

from __future__ import annotations

from .core_state import (
    ALLOCATED,
    BINDING,
    BOUND,
    CPU,
    FAILED,
    I_BOOKS,
    I_BOUNDS_DIRTY,
    I_CREATED,
    I_FREED,
    I_FULL_NODES,
    I_IN_SESSION,
    I_NODES,
    I_SESSIONS,
    I_TO_CLOSE,
    I_TO_START,
    MEMORY,
    MIN_RESOURCE,
    PENDING,
    PH_INQUEUE,
    PH_RUNNING,
    PIPELINED,
    PODS,
    RELEASING,
    RUNNING,
    SUCCEEDED,
    jit,
)

# -------------------------------------------------------------------------------- resources


@jit
def le(left, right):
    """lessEqualFunc: ``left < right`` or within the 0.1 tolerance."""
    return left < right or abs(left - right) < MIN_RESOURCE


@jit
def less_equal(left, right):
    """Resource.LessEqual: every dimension fits, with tolerance."""
    for r in range(left.size):
        if not le(left[r], right[r]):
            return False
    return True


@jit
def requested(req, r):
    """The request names dimension ``r`` (pods is an ignored scalar)."""
    return r != PODS and req[r] > 0


@jit
def less_equal_on_requested(left, right, req):
    """LessEqualWithDimensionAndResourcesName: strictly ``left <= right`` on requested dims."""
    for r in range(req.size):
        if requested(req, r) and not left[r] <= right[r]:
            return False
    return True


@jit
def less_equal_partly_zero_filtered(left, right, req):
    """LessEqualPartlyWithDimensionZeroFiltered: ``left <= right`` (tolerant) on at least one
    requested dimension that is not zero on both sides."""
    for r in range(req.size):
        if (
            requested(req, r)
            and not (left[r] < MIN_RESOURCE and right[r] < MIN_RESOURCE)
            and le(left[r], right[r])
        ):
            return True
    return False


@jit
def greater_partly_on_relevant(left, right, right_named, req):
    """GreaterPartlyWithRelevantDimensions: ``left > right`` on a requested dimension ``right`` has."""
    for r in range(req.size):
        if not (requested(req, r) and right_named[r]):
            continue
        if (r == CPU or r == MEMORY) and right[r] < MIN_RESOURCE:
            continue
        if left[r] > right[r]:
            return True
    return False


@jit
def is_empty(res):
    """Resource.IsEmpty: nothing but pods."""
    for r in range(res.size):
        if r != PODS and res[r] >= MIN_RESOURCE:
            return False
    return True


@jit
def intersects(a, b, ignore_pods):
    """api.Intersection (WithIgnoredScalarResources) is not empty."""
    for r in range(a.size):
        if ignore_pods and r == PODS:
            continue
        if a[r] >= MIN_RESOURCE and b[r] >= MIN_RESOURCE:
            return True
    return False


@jit
def dominant_share(allocated, total):
    """Largest allocated/total over the dimensions ``total`` names (helpers.Share)."""
    best = 0.0
    for r in range(total.size):
        if total[r] >= MIN_RESOURCE:
            share = allocated[r] / total[r]
            best = max(best, share)
    return best


@jit
def fits_idle(s, t, n):
    """The task's request fits the node's Idle (allocatable - used)."""
    req, alloc, used = s.t_req[t], s.node_alloc[n], s.n_used[n]
    for r in range(req.size):
        if not le(req[r], alloc[r] - used[r]):
            return False
    return True


@jit
def future_idle(s, n, out):
    """FutureIdle = Idle + Releasing - Pipelined, into ``out``."""
    alloc, used, rel, pip = s.node_alloc[n], s.n_used[n], s.n_rel[n], s.n_pip[n]
    for r in range(out.size):
        out[r] = alloc[r] - used[r] + rel[r] - pip[r]


@jit
def fits_future(s, t, n):
    """The task's request fits the node's FutureIdle."""
    req, alloc, used, rel, pip = s.t_req[t], s.node_alloc[n], s.n_used[n], s.n_rel[n], s.n_pip[n]
    for r in range(req.size):
        if not le(req[r], alloc[r] - used[r] + rel[r] - pip[r]):
            return False
    return True


# -------------------------------------------------------------------------------- bookkeeping


@jit
def add_row(dst, src, sign):
    """``dst += sign * src`` without a temporary."""
    for r in range(dst.size):
        dst[r] += sign * src[r]


@jit
def copy_row(dst, src):
    """``dst[:] = src`` for two 1-d arrays of one length, as a loop from the first element (so a
    shift to the left within one array is right). numba's slice assignment of an array checks the
    shapes and builds its error message with numba's string functions: compiling those took ~1 s
    of each cold compile that had one."""
    for r in range(dst.size):
        dst[r] = src[r]


@jit
def copy_rows(dst, src):
    """``dst[:, :] = src`` for two 2-d arrays of one shape (:func:`copy_row` row by row)."""
    for r in range(dst.shape[0]):
        copy_row(dst[r], src[r])


@jit
def is_allocated(status):
    """api.AllocatedStatus."""
    return status == BOUND or status == BINDING or status == RUNNING or status == ALLOCATED


@jit
def account(s, t, sign):
    """Add (``sign`` 1) or remove (-1) task ``t``'s share for its current status and node."""
    j, p, st = s.t_job[t], s.t_pair[t], s.status[t]
    req = s.t_req[t]
    s.j_cnt[j, st] += sign
    s.pr_cnt[p, st] += sign
    if st == PENDING:
        if s.t_be[t]:
            s.j_pbe[j] += sign
            s.pr_pbe[p] += sign
        add_row(s.j_preq[j], req, sign)
    elif is_allocated(st):
        add_row(s.j_alloc[j], req, sign)
    n = s.node[t]
    if n < 0 or st == PENDING or st == SUCCEEDED or st == FAILED:
        return
    pod_view(s, t, n, sign)
    if sign > 0:  # NodeInfo.AddTask / RemoveTask: the node's task list
        list_insert(s.node_first, s.node_next, s.node_prev, t, n)
    else:
        list_remove(s.node_first, s.node_next, s.node_prev, t, n)
    if st == PIPELINED:
        add_row(s.n_pip[n], req, sign)
        return
    add_row(s.n_used[n], req, sign)
    add_row(s.o_base[1], req, sign)
    if st == RELEASING:
        add_row(s.n_rel[n], req, sign)


@jit
def list_insert(first, after, before, t, n):
    """Task ``t`` at the head of node ``n``'s task list: ``first`` (N,) heads, ``after`` and
    ``before`` (T,) the doubly linked neighbours (-1 = none)."""
    after[t] = first[n]
    before[t] = -1
    if first[n] >= 0:
        before[first[n]] = t
    first[n] = t


@jit
def list_remove(first, after, before, t, n):
    """Task ``t`` out of node ``n``'s task list."""
    if before[t] >= 0:
        after[before[t]] = after[t]
    else:
        first[n] = after[t]
    if after[t] >= 0:
        before[after[t]] = before[t]


@jit
def pod_view(s, t, n, sign):
    """The pods the node's Kubernetes NodeInfo holds (predicates' max pods, nodeorder's scores):
    every task placed on it, but one evicted in the current session (``s.pods`` columns: count,
    cpu, memory, gpu requested, pods without a cpu / memory request). Every change of a node's
    books passes here and counts up ``ints[I_NODES]``; one that takes a pod off (the only way the
    node's room grows: Used or Pipelined less, Releasing more, a pod fewer) is logged in ``s.freed``.
    ``ints[I_FULL_NODES]`` counts the nodes at their pod limit (predicates' max pods)."""
    req, view = s.t_req[t], s.pods[n]
    s.n_version[n] += 1
    s.ints[I_NODES] += 1
    if sign < 0:
        s.freed[s.ints[I_FREED] % s.freed.size] = n
        s.ints[I_FREED] += 1
    full = s.node_alloc[n, PODS] <= view[0]
    view[0] += sign
    s.ints[I_FULL_NODES] += int(s.node_alloc[n, PODS] <= view[0]) - int(full)
    view[1] += sign * req[CPU]
    view[2] += sign * req[MEMORY]
    if s.gpu >= 0:
        view[3] += sign * req[s.gpu]
    if req[CPU] <= 0:
        view[4] += sign
    if req[MEMORY] <= 0:
        view[5] += sign


@jit
def contribute(s, j, sign):
    """Add (remove) live job ``j``'s usage to what session open reads from the live jobs:
    its queue's allocated, request, inqueue and elastic (proportion and capacity
    ``_queue_usage``) and overcommit's inqueue, all from the clock's phase. A session leaves
    these as they were at its open (it undoes all it did before the clock applies its binds
    and evictions), so they are not followed inside one; nor kept at all when no plugin reads
    them (``s.usage_read``)."""
    if s.ints[I_IN_SESSION] or not s.usage_read:
        return
    q, has, phase = s.j_queue[j], s.j_has_minres[j], s.phase[j]
    running = phase == PH_RUNNING and allocated_tasks(s, j) >= s.j_min[j]
    inqueue = has and (phase == PH_INQUEUE or running)
    use, base = s.q_use, s.o_base
    for r in range(s.j_alloc.shape[1]):
        alloc, minres = s.j_alloc[j, r], s.j_minres[j, r]
        use[0, q, r] += sign * alloc
        use[1, q, r] += sign * (alloc + s.j_preq[j, r])
        if inqueue and minres > 0:
            use[2, q, r] += sign * max(minres - alloc, 0.0)
        use[3, q, r] += sign * max(alloc - (minres if has else 0.0), 0.0)
        if has and phase == PH_INQUEUE:
            base[0, r] += sign * minres
        elif has and running and minres > 0:
            base[0, r] += sign * max(minres - alloc, 0.0)


@jit
def touch(s, j):
    """Something about job ``j`` changed: its PodGroup phase is recomputed at the next session
    close (``s.to_close``) and whether its work starts at the next session end (``s.to_start``);
    for the others nothing changed since, so neither can change. The job's version counts up."""
    s.j_ver[j] += 1
    bounds_dirty(s, j)
    if not s.close_mark[j]:
        s.close_mark[j] = True
        s.to_close[s.ints[I_TO_CLOSE]] = j
        s.ints[I_TO_CLOSE] += 1
    if not s.start_mark[j]:
        s.start_mark[j] = True
        s.to_start[s.ints[I_TO_START]] = j
        s.ints[I_TO_START] += 1


@jit
def set_status(s, t, status, node):
    """Move task ``t`` to ``status`` on ``node`` (-1 = none), keeping the bookkeeping in step."""
    j = s.t_job[t]
    touch(s, j)
    live = s.is_live[j]
    if live:
        contribute(s, j, -1)
    move_task(s, t, status, node)
    if live:
        contribute(s, j, 1)


@jit
def move_task(s, t, status, node):
    """:func:`set_status` for a touched job whose live usage is out of the sums meanwhile
    (between ``contribute(s, j, -1)`` and ``contribute(s, j, 1)``, once for all its pods)."""
    counted = s.created[s.t_job[t]]
    s.ints[I_BOOKS] += 1
    if counted:
        account(s, t, -1)
    s.status[t] = status
    s.node[t] = node
    if counted:
        account(s, t, 1)


@jit
def set_created(s, j, created):
    """The vcjob controller creates (or deletes) the job's pods: they enter (leave) the books
    (``ints[I_CREATED]`` counts the pods of jobs not done, what a session can place or evict)."""
    if s.created[j] == created:
        return
    s.ints[I_BOOKS] += 1
    touch(s, j)
    if s.is_live[j]:
        contribute(s, j, -1)
    if not created:
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            account(s, t, -1)
    s.created[j] = created
    if not s.done[j]:
        s.ints[I_CREATED] += (1 if created else -1) * (s.j_lo[j + 1] - s.j_lo[j])
    if created:
        for t in range(s.j_lo[j], s.j_lo[j + 1]):
            account(s, t, 1)
    if s.is_live[j]:
        contribute(s, j, 1)


@jit
def set_job_phase(s, j, phase):
    """The clock's PodGroup phase, with the live usage it feeds kept in step."""
    touch(s, j)
    live = s.is_live[j]
    if live:
        contribute(s, j, -1)
    move_phase(s, j, phase)
    if live:
        contribute(s, j, 1)


@jit
def move_phase(s, j, phase):
    """:func:`set_job_phase` for a touched job whose live usage is out of the sums meanwhile
    (as :func:`move_task`)."""
    s.ints[I_BOOKS] += 1
    s.phase[j] = phase


@jit
def set_live(s, j, live):
    """The job enters (leaves) the session snapshot: present and not done, or still releasing."""
    q = s.j_queue[j]
    s.ints[I_BOOKS] += 1
    if live:
        touch(s, j)
        s.is_live[j] = True
        contribute(s, j, 1)
        s.q_live[q] += 1
    else:
        contribute(s, j, -1)
        s.is_live[j] = False
        s.q_live[q] -= 1
        bounds_dirty(s, j)


@jit
def bounds_dirty(s, j):
    """Job ``j``'s share in the per-queue victim bounds may have changed: it is read again when
    they are next wanted (``s.bd_job``, core_actions.bounds_refresh)."""
    if not s.bd_mark[j]:
        s.bd_mark[j] = True
        s.bd_job[s.ints[I_BOUNDS_DIRTY]] = j
        s.ints[I_BOUNDS_DIRTY] += 1


@jit
def session_phase(s, j):
    """The PodGroup phase as the session sees it (enqueue may have moved it to Inqueue)."""
    return s.s_phase[j] if s.sp_mark[j] == s.ints[I_SESSIONS] else s.phase[j]


@jit
def set_session_phase(s, j, phase):
    s.ints[I_BOOKS] += 1
    s.s_phase[j] = phase
    s.sp_mark[j] = s.ints[I_SESSIONS]
    touch(s, j)


# -------------------------------------------------------------------------------- job counters


@jit
def n_tasks(s, j):
    """len(job.tasks): the job's pods, once created."""
    return s.j_lo[j + 1] - s.j_lo[j] if s.created[j] else 0


@jit
def ready_of(c):
    """ReadyTaskNum from a row of status counts: allocated statuses + Succeeded."""
    return c[ALLOCATED] + c[BINDING] + c[BOUND] + c[RUNNING] + c[SUCCEEDED]


@jit
def ready(s, j):
    return ready_of(s.j_cnt[j])


@jit
def allocated_tasks(s, j):
    c = s.j_cnt[j]
    return c[ALLOCATED] + c[BINDING] + c[BOUND] + c[RUNNING]


@jit
def is_ready(s, j):
    """JobInfo.IsReady: ready + pending best-effort >= minAvailable."""
    return ready(s, j) + s.j_pbe[j] >= s.j_min[j]


@jit
def is_pipelined(s, j):
    return s.j_cnt[j, PIPELINED] + ready(s, j) + s.j_pbe[j] >= s.j_min[j]


@jit
def is_starving(s, j):
    return s.j_cnt[j, PIPELINED] + ready(s, j) < s.j_min[j]


@jit
def valid_of(c):
    """ValidTaskNum from a row of status counts."""
    return ready_of(c) + c[PIPELINED] + c[PENDING]


@jit
def scheduled(s, j):
    """ScheduledTaskNum + releasing tasks on a node (getPodGroupPhase)."""
    c = s.j_cnt[j]
    return c[RUNNING] + c[BOUND] + c[FAILED] + c[SUCCEEDED] + c[RELEASING]


ROLE_VALID, ROLE_READY, ROLE_PIPELINED = 0, 1, 2


@jit
def roles_meet_minimum(s, j, what):
    """CheckTaskValid / CheckTaskReady / CheckTaskPipelined: every role with a minimum has that
    many tasks counted; skipped when minAvailable < the sum of the role minima."""
    if s.j_min[j] < s.j_min_total[j]:
        return True
    for p in range(s.j_pair[j], s.j_pair[j + 1]):
        need = s.pair_min[p]
        if need <= 0:
            continue
        c = s.pr_cnt[p]
        if what == ROLE_VALID:
            have = valid_of(c)
        elif what == ROLE_READY:
            have = ready_of(c)
        else:
            have = ready_of(c) + c[PIPELINED] + s.pr_pbe[p]
        if have < need:
            return False
    return True


@jit
def need_continue_allocating(s, j):
    """JobInfo.NeedContinueAllocating after a task found no node."""
    if s.j_min[j] == n_tasks(s, j):
        return False
    if s.j_min[j] < s.j_min_total[j]:
        left = 0
        for p in range(s.j_pair[j], s.j_pair[j + 1]):
            if not s.pr_fail[p]:
                left += s.pr_cnt[p, PENDING]
        return ready(s, j) + left >= s.j_min[j]
    for p in range(s.j_pair[j], s.j_pair[j + 1]):
        if s.pr_fail[p] and s.pair_min[p] > 0 and ready_of(s.pr_cnt[p]) < s.pair_min[p]:
            return False
    return True


@jit
def zero_row(row):
    for r in range(row.size):
        row[r] = 0.0
