"""The simulated clock of ``clock.py`` in the numba core: arrivals, sessions on the
schedule-period grid (skipped when nothing changed), binds, evictions with grace periods,
restarts, completions.

:func:`run` is the core's entry point: it takes the named tuple of arrays the driver built,
runs the whole scenario and leaves the run's record (per-job arrays, pod runs, coded events)
in those arrays. The record buffers (events, pod runs, the clock's heap) are checked before each
step and grown by the driver between calls; another buffer that turns out too small sets
``ints[I_OVERFLOW]`` and stops the run, and the driver then runs again with larger buffers.
"""

from __future__ import annotations

import math

import numpy as np

from .core_account import (
    contribute,
    copy_row,
    copy_rows,
    move_phase,
    move_task,
    set_created,
    set_job_phase,
    set_live,
    set_status,
    touch,
)
from .core_state import (
    ALLOCATE,
    EI_A,
    EI_B,
    EI_JOB,
    EI_KIND,
    EI_MSG,
    EI_NODE,
    EI_TASK,
    EV_BOUND,
    EV_CHANGE,
    EV_COMPLETED,
    EV_DELETED,
    EV_ENQUEUED,
    EV_EVICTED,
    EV_NODE,
    EV_PIPELINED,
    EV_RESTARTING,
    EV_STARTED,
    EV_SUBMITTED,
    I_ARRIVED,
    I_BINDS,
    I_BOOKS,
    I_CLOSED,
    I_CONF,
    I_CREATED,
    I_EVENTS,
    I_EVICTS,
    I_FREED,
    I_GROW,
    I_HEAP,
    I_LIVE,
    I_NODES,
    I_OVERFLOW,
    I_RUNS,
    I_SESSIONS,
    I_TO_START,
    I_WATER_FILLED,
    MSG_DRAINED,
    MSG_FITS_FUTURE,
    MSG_NODE_LOST,
    MSG_NONE,
    MSG_PHASE,
    MSG_PODS_RUNNING,
    MSG_PREEMPTED_BY,
    MSG_PREEMPTED_ROOM,
    MSG_RECLAIMED_BY,
    MSG_RECLAIMED_ROOM,
    MSG_RESTART,
    MSG_SNAPSHOT,
    PENDING,
    PH_COMPLETED,
    PH_PENDING,
    PREEMPT,
    RELEASING,
    RUNNING,
    SUCCEEDED,
    entry,
    inlined,
    jit,
)
from .events import (
    ARRIVAL,
    CH_PRIORITY_CLASS,
    CH_QUEUE,
    CHANGE,
    CORDON,
    DRAIN,
    FAIL,
    FINISH,
    NODE,
    RECOVER,
    RELEASED,
    WAKE,
)
from .volcano.core_actions import bounds_reset, run_session, sort_prefix

# -------------------------------------------------------------------------------- records


@jit
def log(s, time, kind, j, t, n, msg, a, b):
    """One run event: (time, kind, job, task, node) and its message code with two arguments."""
    k = s.ints[I_EVENTS]
    if k >= s.ev_time.size:
        s.ints[I_OVERFLOW] = 1
        return
    s.ev_time[k] = time
    row = s.ev_int[k]
    row[EI_KIND], row[EI_JOB], row[EI_TASK], row[EI_NODE] = kind, j, t, n
    row[EI_MSG], row[EI_A], row[EI_B] = msg, a, b
    s.ints[I_EVENTS] = k + 1


@jit
def push_row(rows, counts, slot, a, b, c, d, e):
    """Row ``counts[slot]`` of a session's output ``rows`` becomes (a, b, c, d, e); one more row."""
    k = counts[slot]
    rows[k, 0], rows[k, 1], rows[k, 2], rows[k, 3], rows[k, 4] = a, b, c, d, e
    counts[slot] = k + 1


@jit
def close_run(s, t, now):
    if s.open_run[t] >= 0:
        s.runs[s.open_run[t], 3] = now
        s.open_run[t] = -1


# -------------------------------------------------------------------------------- event heap


@jit
def event_less(s, a, b):
    """Heap order of (time, kind, index, version), as Python compares the tuples."""
    if s.h_time[a] != s.h_time[b]:
        return s.h_time[a] < s.h_time[b]
    for c in range(3):
        if s.h_key[a, c] != s.h_key[b, c]:
            return s.h_key[a, c] < s.h_key[b, c]
    return False


@jit
def event_swap(s, a, b):
    s.h_time[a], s.h_time[b] = s.h_time[b], s.h_time[a]
    for c in range(3):
        s.h_key[a, c], s.h_key[b, c] = s.h_key[b, c], s.h_key[a, c]


@jit
def push_event(s, time, kind, index, version):
    n = s.ints[I_HEAP]
    if n >= s.h_time.size:
        s.ints[I_OVERFLOW] = 1
        return
    s.h_time[n] = time
    s.h_key[n, 0], s.h_key[n, 1], s.h_key[n, 2] = kind, index, version
    s.ints[I_HEAP] = n + 1
    while n > 0:
        parent = (n - 1) // 2
        if not event_less(s, n, parent):
            break
        event_swap(s, n, parent)
        n = parent


@jit
def pop_event(s):
    """Remove the earliest event; it is left at the heap's old last slot, which is returned."""
    last = s.ints[I_HEAP] - 1
    event_swap(s, 0, last)
    s.ints[I_HEAP] = last
    i = 0
    while True:
        child = 2 * i + 1
        if child >= last:
            break
        if child + 1 < last and event_less(s, child + 1, child):
            child += 1
        if not event_less(s, child, i):
            break
        event_swap(s, i, child)
        i = child
    return last


@jit
def wake_queued(s, time):
    """A wake-up at ``time`` is already on the heap (clock.Simulation.wakes)."""
    for h in range(s.ints[I_HEAP]):
        if s.h_key[h, 0] == WAKE and s.h_time[h] == time:
            return True
    return False


@jit
def arrival_next(s):
    """The next clock event is a job's arrival: arrivals are not on the heap but read in order
    from ``s.arrivals`` (by submit time, then job index, as the heap would give them), and an
    arrival comes before any other event of its instant (ARRIVAL is the first kind)."""
    k = s.ints[I_ARRIVED]
    return k < s.arrivals.size and (s.ints[I_HEAP] == 0 or s.j_submit[s.arrivals[k]] <= s.h_time[0])


@jit
def next_event_time(s):
    if arrival_next(s):
        return s.j_submit[s.arrivals[s.ints[I_ARRIVED]]]
    return s.h_time[0] if s.ints[I_HEAP] > 0 else math.inf


@jit
def take_event(s):
    """Remove the next clock event and return the heap slot that holds it (:func:`pop_event`'s);
    an arrival is written to the first free slot. -1 (and ``ints[I_OVERFLOW]``) if there is none."""
    if not arrival_next(s):
        return pop_event(s)
    slot = s.ints[I_HEAP]
    if slot >= s.h_time.size:
        s.ints[I_OVERFLOW] = 1
        return -1
    j = s.arrivals[s.ints[I_ARRIVED]]
    s.h_time[slot] = s.j_submit[j]
    s.h_key[slot, 0], s.h_key[slot, 1], s.h_key[slot, 2] = ARRIVAL, j, 0
    s.ints[I_ARRIVED] += 1
    return slot


# -------------------------------------------------------------------------------- live jobs


@jit
def live_insert(s, j):
    """The job enters the session snapshot; ``s.live`` stays sorted by job index."""
    n = s.ints[I_LIVE]
    i = n
    while i > 0 and s.live[i - 1] > j:
        s.live[i] = s.live[i - 1]
        i -= 1
    s.live[i] = j
    s.ints[I_LIVE] = n + 1
    q = s.j_queue[j]
    if s.q_first[q] < 0 or j < s.q_first[q]:
        s.q_first[q] = j
    set_live(s, j, True)


@jit
def live_remove(s, j):
    """The job leaves the snapshot; its queue's first live job moves to the next one."""
    set_live(s, j, False)
    n = s.ints[I_LIVE]
    i = np.searchsorted(s.live[:n], j)
    copy_row(s.live[i:n - 1], s.live[i + 1:n])
    s.ints[I_LIVE] = n - 1
    q = s.j_queue[j]
    if s.q_first[q] == j:
        s.q_first[q] = -1
        for k in range(i, n - 1):
            if s.j_queue[s.live[k]] == q:
                s.q_first[q] = s.live[k]
                break


@jit
def count_status(s, j, status):
    count = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == status:
            count += 1
    return count


# -------------------------------------------------------------------------------- the clock's steps


@jit
def namespace_used(s, q, created, out):
    """What the pods of ResourceQuota ``q``'s namespace use (``out``, per tracked key): those
    created (``created[t]``) and not succeeded, as the admission counts them."""
    out[:] = 0
    for t in range(s.t_job.size):
        if created[t] and s.status[t] != SUCCEEDED and s.k_job_quota[s.t_job[t]] == q:
            for k in range(out.size):
                out[k] += s.k_usage[t, k]


@jit
def quota_refuses(s, j):
    """Whether the ResourceQuota admission refuses one of the job's pods, created in order (each
    admitted one counts for the next) over the pods of its namespace that exist and have not
    succeeded (``quotas.ResourceQuotas.admit``)."""
    q = s.k_job_quota[j]
    used = np.zeros(s.k_usage.shape[1], np.int64)
    namespace_used(s, q, s.created[s.t_job], used)
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.k_unset[t]:
            return True
        for k in range(used.size):
            if s.k_tracked[q, k] and used[k] + s.k_usage[t, k] > s.k_hard[q, k]:
                return True
        for k in range(used.size):
            used[k] += s.k_usage[t, k]
    return False


@jit
def set_phase(s, now, j, phase):
    """The PodGroup phase after a session; leaving Pending creates the pods. True if changed."""
    old = s.phase[j]
    if phase == old:
        return False
    set_job_phase(s, j, phase)
    if old == PH_PENDING:
        if s.k_job_quota[j] >= 0 and quota_refuses(s, j):
            s.refused[0] = True  # the run stops: the reference engine runs it (core.QUOTA_REFUSED)
        set_created(s, j, True)
        if math.isnan(s.enq_t[j]):
            s.enq_t[j] = now
        log(s, now, EV_ENQUEUED, j, -1, -1, MSG_PHASE, old, phase)
    return True


@jit
def bind(s, now, t, n, msg, ref_task, ref_node):
    """A bound pod runs from now: a new pod run and a Bound event."""
    set_status(s, t, RUNNING, n)
    s.pip_on[t] = -1
    j = s.t_job[t]
    if s.rt_class[j] >= 0 and not math.isnan(s.run_start[j]):
        replan(s, now, j)  # scale-out: the job runs on with one more pod
    if s.t_rerun[t] == math.inf:
        s.t_rerun[t] = now + s.j_work[j] / (s.node_speed[n] if s.j_uses_speed[j] else 1.0)
        if s.draining[j]:
            next_pod_done(s, now, j)
    k = s.ints[I_RUNS]
    if k >= s.runs.shape[0]:
        s.ints[I_OVERFLOW] = 1
        return
    s.open_run[t] = k
    s.runs[k, 0], s.runs[k, 1], s.runs[k, 2] = t, n, now
    s.runs[k, 3], s.runs[k, 4] = math.nan, math.nan
    s.ints[I_RUNS] = k + 1
    log(s, now, EV_BOUND, s.t_job[t], t, n, msg, ref_task, ref_node)


@jit
def maybe_start(s, now, j):
    """The job's work runs once minAvailable pods run; its completion is scheduled; a pod not yet
    running will run its whole duration once bound (clock._maybe_start)."""
    if not math.isnan(s.run_start[j]):
        return
    running, speed = 0, math.inf
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING:
            running += 1
            speed = min(speed, s.node_speed[s.node[t]])
    if running < max(1, s.j_min[j]):
        return
    s.run_start[j] = now
    if math.isnan(s.start_t[j]):
        s.start_t[j] = now
    if not s.j_uses_speed[j]:
        speed = 1.0
    setup = s.j_restart[j] if s.restarts[j] else 0.0
    rated = s.rt_class[j] >= 0
    if rated:
        speed = s.rate[j] = rate_of(s, j)
        s.rate_since[j] = now + setup
    remaining = (s.j_work[j] - s.work_done[j]) / speed
    s.version[j] += 1
    push_event(s, now + setup + remaining, FINISH, j, s.version[j])
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if not rated and s.status[t] != RUNNING and math.isnan(s.t_rerun[t]):
            s.t_rerun[t] = math.inf  # a pod bound later runs its whole duration (clock._maybe_start)
    log(s, now, EV_STARTED, j, -1, -1, MSG_PODS_RUNNING, running, 0)


@jit
def span_level(s, j):
    """The topology level the job's running pods span (hypernodes.span_level): 0 on one node, k
    inside one HyperNode of tier k, the number of tiers + 1 across the cluster."""
    first, level = -1, 0
    tiers = s.rt_hn.shape[1]
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] != RUNNING:
            continue
        n = s.node[t]
        if first < 0:
            first = n
        elif n != first:
            k = 0
            while k < tiers and not (s.rt_hn[n, k] >= 0 and s.rt_hn[n, k] == s.rt_hn[first, k]):
                k += 1
            level = max(level, k + 1)
    return level


@jit
def rate_of(s, j):
    """A job of the progress model: its rate with the pods it runs now (clock.Simulation._rate)."""
    k = s.rt_class[j]
    speed, running = math.inf, 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING:
            n = s.node[t]
            pod = s.rt_speed[k, s.rt_model[n]]
            if s.j_uses_speed[j]:
                pod *= s.node_speed[n]
            speed = min(speed, pod)
            running += 1
    placement = s.rt_place[k, span_level(s, j)]
    return speed * placement * s.rt_scale[k, running] / s.rt_scale[k, s.j_lo[j + 1] - s.j_lo[j]]


@jit
def progress(s, now, j):
    """A job of the progress model: its work done by ``now`` (clock.Simulation._progress)."""
    return min(s.j_work[j], s.work_done[j] + max(0.0, now - s.rate_since[j]) * s.rate[j])


@jit
def replan(s, now, j):
    """A running job of the progress model gained or lost a pod: the work so far at the old rate,
    the rest at the new one (clock.Simulation._replan)."""
    s.work_done[j] = progress(s, now, j)
    s.rate_since[j] = max(now, s.rate_since[j])
    s.rate[j] = rate_of(s, j)
    s.version[j] += 1
    push_event(s, s.rate_since[j] + (s.j_work[j] - s.work_done[j]) / s.rate[j], FINISH, j, s.version[j])


@jit
def finish(s, now, j):
    """The job's work is done: its pods succeed (a terminating surplus pod ends with its grace),
    unless pods recreated after an eviction still run (or wait to run) their whole duration: the
    other pods succeed now, each of those when its own duration ends, and the job completes with
    the last (clock._work_done)."""
    later = 0
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.t_rerun[t] > now:
            later += 1
    if later == 0:
        finish_as(s, now, j, EV_COMPLETED, MSG_NONE)
        return
    s.draining[j] = True
    s.work_done[j] = s.j_work[j]
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RUNNING and not s.t_rerun[t] > now:
            close_run(s, t, now)
            set_status(s, t, SUCCEEDED, s.node[t])
    next_pod_done(s, now, j)


@jit
def next_pod_done(s, now, j):
    """While job ``j`` drains, its next FINISH is when the first of its running recreated pods
    ends (clock._next_pod_done); none running: the next bind schedules it."""
    first = math.inf
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if now < s.t_rerun[t] < first:
            first = s.t_rerun[t]
    if first < math.inf:
        s.version[j] += 1
        push_event(s, first, FINISH, j, s.version[j])


@jit
def finish_as(s, now, j, kind, msg):
    """:func:`finish`, logged as event ``kind`` with message ``msg`` (Slurm's Timeout too)."""
    touch(s, j)
    live = s.is_live[j]
    if live:
        contribute(s, j, -1)
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[t] == RELEASING:
            continue
        close_run(s, t, now)
        move_task(s, t, SUCCEEDED, s.node[t])
    if s.created[j]:
        s.ints[I_CREATED] -= s.j_lo[j + 1] - s.j_lo[j]
    s.done[j] = True
    move_phase(s, j, PH_COMPLETED)
    if live:
        contribute(s, j, 1)
    s.end_t[j] = now
    s.work_done[j] = s.j_work[j]
    log(s, now, kind, j, -1, -1, msg, 0, 0)
    if count_status(s, j, RELEASING) == 0:
        live_remove(s, j)


@jit
def terminate(s, now, t):
    """Graceful deletion: the pod holds its resources (Releasing) until its grace period ends."""
    terminate_in(s, now, t, s.j_grace[s.t_job[t]])


@jit
def terminate_in(s, now, t, grace):
    """:func:`terminate` with a grace period of ``grace`` seconds (clock.Simulation._terminate)."""
    set_status(s, t, RELEASING, s.node[t])
    if s.open_run[t] >= 0:
        s.runs[s.open_run[t], 4] = now
    push_event(s, now + grace, RELEASED, t, 0)


@jit
def stop_work(s, now, j):
    """The run that ends now: work up to the last checkpoint is kept, the rest is lost."""
    setup = s.j_restart[j] if s.restarts[j] else 0.0
    speed, placed = math.inf, False
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.node[t] >= 0:
            speed = min(speed, s.node_speed[s.node[t]])
            placed = True
    if not (s.j_uses_speed[j] and placed):
        speed = 1.0
    if s.rt_class[j] >= 0:
        total = progress(s, now, j)
    else:
        total = min(s.j_work[j], s.work_done[j] + max(0.0, now - s.run_start[j] - setup) * speed)
    interval = s.j_ckpt[j]
    kept = 0.0
    if math.isfinite(interval):
        kept = max(math.floor(total / interval) * interval, s.work_done[j])
    s.lost_work[j] += total - kept
    s.work_done[j] = kept
    s.run_start[j] = math.nan
    s.version[j] += 1


@jit
def evict(s, now, t, msg, a, b):
    """An eviction the session committed, logged with message ``msg`` (a, b); below minAvailable
    the job restarts (RestartJob)."""
    j = s.t_job[t]
    s.evictions[j] += 1
    log(s, now, EV_EVICTED, j, t, s.node[t], msg, a, b)
    if s.status[t] == RELEASING:
        return  # its job's restart, for an earlier eviction of this session, already deletes it
    terminate(s, now, t)
    if count_status(s, j, RUNNING) >= max(1, s.j_min[j]) or s.draining[j]:
        # the job runs on; the controller recreates the pod (SyncJob)
        if s.rt_class[j] < 0:
            s.t_rerun[t] = math.inf
        elif not math.isnan(s.run_start[j]):
            replan(s, now, j)  # scale-in
        return
    for other in range(s.j_lo[j], s.j_lo[j + 1]):
        s.t_rerun[other] = math.nan  # the whole job restarts: its pods run as one again
    if not math.isnan(s.run_start[j]):
        stop_work(s, now, j)
    for other in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.status[other] == RUNNING:
            terminate(s, now, other)
    s.restarts[j] += 1
    log(s, now, EV_RESTARTING, j, -1, -1, MSG_RESTART, 0, 0)


@jit
def released(s, now, t):
    """The grace period ended: the pod is deleted; a restarted job goes back to Pending, podless."""
    j = s.t_job[t]
    log(s, now, EV_DELETED, j, t, s.node[t], MSG_NONE, 0, 0)
    close_run(s, t, now)
    set_status(s, t, SUCCEEDED if s.done[j] else PENDING, -1)
    if s.done[j]:
        if count_status(s, j, RELEASING) == 0:
            live_remove(s, j)
        return
    if not math.isnan(s.run_start[j]) or count_status(s, j, RELEASING) > 0:
        return
    set_created(s, j, False)
    set_job_phase(s, j, PH_PENDING)


@jit
def arrive(s, now, j):
    """The PodGroup appears; a job with a ``status`` snapshot starts in that state."""
    s.present[j] = True
    live_insert(s, j)
    log(s, now, EV_SUBMITTED, j, -1, -1, MSG_NONE, 0, 0)
    if s.j_init_phase[j] < 0:
        return
    set_phase(s, now, j, s.j_init_phase[j])
    for t in range(s.j_lo[j], s.j_lo[j + 1]):
        if s.t_init_node[t] >= 0:
            bind(s, now, t, s.t_init_node[t], MSG_SNAPSHOT, -1, -1)
    maybe_start(s, now, j)


@jit
def submit(s, now, j):
    """A job whose pods exist from submit (a batch Job, an sbatch) is submitted (Policy.pods_at_submit)."""
    s.present[j] = True
    live_insert(s, j)
    log(s, now, EV_SUBMITTED, j, -1, -1, MSG_NONE, 0, 0)
    s.enq_t[j] = now
    set_created(s, j, True)


@jit
def quiet(s):
    """No job is left to arrive, only wake-ups are left on the heap, no job's work runs and no pod
    terminates: a later session would repeat the last one (clock.Simulation._settled)."""
    if s.ints[I_ARRIVED] < s.arrivals.size:
        return False
    for h in range(s.ints[I_HEAP]):
        if s.h_key[h, 0] != WAKE:
            return False
    for j in range(s.done.size):
        if not s.done[j] and not math.isnan(s.run_start[j]):
            return False
    for t in range(s.status.size):
        if s.status[t] == RELEASING:
            return False
    return True


@inlined
def clock_event(s, now, slot, arrival, release):
    """One clock event with the family's own steps: a job's arrival (``arrival(s, now, j)``), a pod's
    grace period ending (``release(s, now, t)``), a job's work done (False when a later run made
    that completion stale); anything else (a wake-up) only makes the next session run."""
    kind, index = s.h_key[slot, 0], s.h_key[slot, 1]
    if kind == ARRIVAL:
        arrival(s, now, index)
    elif kind == RELEASED:
        release(s, now, index)
    elif kind == FINISH:
        return ended(s, now, slot, finish)
    return True


@inlined
def ended(s, now, slot, end):
    """A job's end the clock scheduled with its run's version (FINISH, Slurm's TIMEOUT):
    ``end(s, now, j)``, unless a later run of the job made it stale (then False)."""
    j = s.h_key[slot, 1]
    if s.h_key[slot, 2] != s.version[j]:
        return False
    end(s, now, j)
    return True


@jit
def node_event(s, now, e):
    """Node event ``e`` (clock.Simulation._node_event): the node's flags and whether it takes pods;
    a failed node's pods are lost, a drained node's evicted, each as an eviction (:func:`evict`).
    The sessions' memos of where pods fit are read again (the node's books change)."""
    n, what = s.ne_node[e], s.ne_kind[e]
    if what == FAIL or what == RECOVER:
        s.node_down[n] = what == FAIL
    else:
        s.node_cordon[n] = what == CORDON or what == DRAIN
    s.node_sched[n] = not (s.node_down[n] or s.node_cordon[n])
    every = True
    for m in range(s.node_sched.size):
        every = every and s.node_sched[m]
    for c in range(s.class_clean.size):
        clean = every
        for m in range(s.class_ok.shape[1]):
            clean = clean and s.class_ok[c, m]
        s.class_clean[c] = clean
    s.n_version[n] += 1
    s.ints[I_NODES] += 1
    s.ints[I_BOOKS] += 1
    s.freed[s.ints[I_FREED] % s.freed.size] = n
    s.ints[I_FREED] += 1
    log(s, now, EV_NODE + what, -1, -1, n, MSG_NONE, 0, 0)
    if what != FAIL and what != DRAIN:
        return
    for t in range(s.status.size):
        if s.node[t] == n and s.status[t] == RUNNING:
            evict(s, now, t, MSG_NODE_LOST if what == FAIL else MSG_DRAINED, 0, 0)


@jit
def change_event(s, now, e):
    """Change ``e`` of the scenario (clock.Simulation._change), after the other events of its
    instant, so that the instant's session reads it: a Queue's fields (the queue arrays as the change
    leaves them, ``s.ch_q_*``), a PriorityClass's value (every PodGroup's priority, the priority of
    the pods not created yet, and the record's priority of the jobs not started), or the conf: the
    driver swaps in the arrays of conf ``s.ch_arg[e]`` when the clock stops at ``ints[I_CONF]``.
    What sessions remember across sessions of what a change moves is made afresh: every live job's
    phase is recomputed at the next close (touched), the victim bounds, proportion's deserved, and
    for a new conf the node scores and the fits-nowhere memo (its plugins decide them)."""
    kind, arg = s.ch_kind[e], s.ch_arg[e]
    if kind == CH_QUEUE:
        copy_row(s.q_weight, s.ch_q_weight[e])
        copy_rows(s.q_rcap, s.ch_q_rcap[e])
        copy_rows(s.q_guar, s.ch_q_guar[e])
        copy_rows(s.q_des, s.ch_q_des[e])
        copy_rows(s.q_named, s.ch_q_named[e])
    elif kind == CH_PRIORITY_CLASS:
        for j in range(s.j_prio.size):
            value = s.ch_prio[arg, j]
            s.j_prio[j] = value
            s.j_prank[j] = np.searchsorted(s.prio_of_rank, float(value))
            if math.isnan(s.start_t[j]):
                s.rec_prio[j] = value
            if not s.created[j]:
                for t in range(s.j_lo[j], s.j_lo[j + 1]):
                    s.t_prio[t] = value
    else:
        s.ints[I_CONF] = arg + 1
        s.score_key[:, :] = -1
        s.fit_books[:] = -1
        s.m_freed[:] = 0
    s.ints[I_WATER_FILLED] = -1
    bounds_reset(s)
    s.ints[I_BOOKS] += 1
    for i in range(s.ints[I_LIVE]):
        touch(s, s.live[i])
    log(s, now, EV_CHANGE + kind, -1, -1, -1, MSG_NONE, e, 0)


@jit
def apply_event(s, now, slot):
    if s.h_key[slot, 0] == NODE:
        node_event(s, now, s.h_key[slot, 1])
        return True
    if s.h_key[slot, 0] == CHANGE:
        change_event(s, now, s.h_key[slot, 1])
        return True
    return clock_event(s, now, slot, arrive, released)


@jit
def room(s, events, runs, pushes):
    """The record buffers take ``events`` more run events, ``runs`` pod runs and ``pushes`` clock
    events; if not, ``ints[I_GROW]`` asks the driver for larger ones before the clock goes on."""
    if (s.ints[I_EVENTS] + events <= s.ev_time.size and s.ints[I_RUNS] + runs <= s.runs.shape[0]
            and s.ints[I_HEAP] + pushes <= s.h_time.size):
        return True
    s.ints[I_GROW] = 1
    return False


@jit
def room_for_event(s):
    """Room for the next clock event: an arrival from a snapshot logs its enqueue, binds and
    start, and schedules its completion; a node event logs itself and per pod it evicts an eviction
    and a restart, terminates at most the pods of those pods' jobs and re-plans a completion (a
    job of the progress model losing the pod); any other logs one event."""
    if not arrival_next(s):
        if s.ints[I_HEAP] == 0 or s.h_key[0, 0] != NODE:
            return room(s, 1, 0, 0)
        n, pods, terminated = s.ne_node[s.h_key[0, 1]], 0, 0
        for t in range(s.status.size):
            if s.node[t] == n and s.status[t] == RUNNING:
                pods += 1
                terminated += s.j_lo[s.t_job[t] + 1] - s.j_lo[s.t_job[t]]
        return room(s, 1 + 2 * pods, 0, terminated + pods)
    j = s.arrivals[s.ints[I_ARRIVED]]
    pods = s.j_lo[j + 1] - s.j_lo[j]
    return room(s, 3 + pods, pods, 2)  # its slot, and its completion


@jit
def room_for_session(s):
    """Room for a session: per pod that exists a bind, an eviction, a restart and a pipelined
    event, a pod run, a termination and a re-planned completion (a job of the progress model
    gains or loses it); per live job an enqueue and a start."""
    pods, jobs = s.ints[I_CREATED], s.ints[I_LIVE]
    return room(s, 4 * pods + 2 * jobs, pods, 2 * pods + jobs)


@jit
def always_room(s):
    """A family whose buffers are not grown in place: an overflow runs it again (``ints[I_OVERFLOW]``)."""
    return True


@inlined
def session_once(s, now):
    """One session on the live jobs, its decisions applied; True if it changed anything. Phases
    and starts are looked at for the jobs touched since (the others cannot change)."""
    if s.ints[I_LIVE] == 0:
        return False
    s.ints[I_SESSIONS] += 1
    n_pipelined = run_session(s, now)
    changed = s.ints[I_BINDS] > 0 or s.ints[I_EVICTS] > 0
    for k in range(s.ints[I_BINDS]):
        bind(s, now, s.binds[k, 0], s.binds[k, 4], s.binds[k, 1], s.binds[k, 2], s.binds[k, 3])
    for k in range(s.ints[I_EVICTS]):
        msg = MSG_PREEMPTED_BY if s.evicts[k, 1] == PREEMPT else MSG_RECLAIMED_BY
        evict(s, now, s.evicts[k, 0], msg, s.evicts[k, 2], 0)
    for k in range(n_pipelined):
        t, n = s.pipelined[k], s.pipelined_on[k]
        if s.pip_evicted[t]:
            s.nominated[t], s.nominated_in[t] = n, s.ints[I_SESSIONS]
        elif s.nominated_in[t] == s.ints[I_SESSIONS] - 1:
            s.nominated_in[t] = s.ints[I_SESSIONS]  # Volcano never sets nominatedNodeName to none
        if s.pip_on[t] != n:
            s.pip_on[t] = n
            action = s.pip_action[t]
            msg = (
                MSG_FITS_FUTURE
                if action == ALLOCATE
                else (MSG_PREEMPTED_ROOM if action == PREEMPT else MSG_RECLAIMED_ROOM)
            )
            log(s, now, EV_PIPELINED, s.t_job[t], t, n, msg, action, 0)
    for i in range(s.ints[I_CLOSED]):
        j = s.closed[i]
        if set_phase(s, now, j, s.new_phase[j]):
            changed = True
    n = s.ints[I_TO_START]
    sort_prefix(s.to_start, n)
    for i in range(n):
        j = s.to_start[i]
        s.start_mark[j] = False
        maybe_start(s, now, j)
    s.ints[I_TO_START] = 0
    return changed


@jit
def on_grid(now, last, period):
    """The first instant of the period grid from ``now`` on, one period after the ``last`` session."""
    return max(math.ceil(now / period - 1e-9) * period + 0.0, last + period)


@inlined
def clock_loop(s, budget, next_session, settled, apply_event, changed, session, room_for_event, room_for_session):
    """The clock of a run (Simulation.run) with the family's own steps: events in time order
    (``apply_event``; ``changed(s)`` after an instant some event changed) and sessions
    (``session(s, t)``) when ``next_session(s, now)`` says, until nothing is left to do, the
    horizon, or ``settled(s, now)`` before events. At most ``budget`` steps (an instant's events,
    or a session) per call: the clock is kept in ``s.clock`` (now, last session, dirty, begun,
    evented) and the family's arrays, so the next call goes on where this one stopped and the run
    is the same however it is cut. A step the record buffers may not hold (``room_for_event``,
    ``room_for_session``) is not begun (an instant's events are taken one by one, ``clock[3]`` = 2
    while its events are left): ``ints[I_GROW]`` asks the driver for larger buffers, and the next
    call goes on. True when the run is over."""
    if s.clock[3] == 0.0:
        s.clock[0], s.clock[1], s.clock[2], s.clock[3] = 0.0, -math.inf, 0.0, 1.0
    now, horizon = s.clock[0], s.horizon
    over = True
    while s.ints[I_OVERFLOW] == 0 and not s.refused[0]:
        within = s.clock[3] == 2.0  # events of the instant ``now`` are left
        t_event = next_event_time(s)
        t_session = next_session(s, now)
        first = min(t_event, t_session)
        if not within and (first > horizon or first == math.inf):
            break
        if not within and t_event <= t_session and settled(s, now):
            break
        if budget <= 0:
            over = False
            break
        budget -= 1
        if within or t_event <= t_session:
            if not within:
                now = t_event
            s.clock[3] = 2.0
            touched = False
            while next_event_time(s) == now and s.ints[I_OVERFLOW] == 0:
                if not room_for_event(s):
                    break
                slot = take_event(s)
                if slot < 0:
                    break
                if apply_event(s, now, slot):
                    touched = True
                if s.ints[I_CONF]:
                    break
            if touched:
                changed(s)
            if s.ints[I_GROW] or s.ints[I_CONF]:
                over = False
                break
            s.clock[3] = 1.0
        else:
            if not room_for_session(s):
                over = False
                break
            now = t_session
            session(s, now)
    s.clock[0] = now
    return over


@jit
def next_session(s, now):
    """A session on the schedule-period grid once something changed (the Volcano clock)."""
    return on_grid(now, s.clock[1], s.period) if s.clock[2] != 0.0 else math.inf


@jit
def never(s, now):
    return False


@jit
def changed(s):
    s.clock[2] = 1.0


@jit
def session_at(s, now, changed):
    """A session ran at ``now``; the next one is due once something ``changed``."""
    s.clock[1] = now
    s.clock[2] = 1.0 if changed else 0.0


@jit
def session(s, now):
    session_at(s, now, session_once(s, now))


@jit
def push_node_events(s):
    """At a run's start (before the first :func:`clock_loop`), the scenario's node events onto the
    clock's heap, which has room for them (core.mutable_arrays)."""
    if s.clock[3] == 0.0:
        for e in range(s.ne_time.size):
            push_event(s, s.ne_time[e], NODE, e, 0)


@jit
def push_changes(s):
    """At a run's start, the scenario's changes onto the clock's heap (it has room for them too)."""
    if s.clock[3] == 0.0:
        for e in range(s.ch_time.size):
            push_event(s, s.ch_time[e], CHANGE, e, 0)


@entry
def run(s, budget):
    """The run of a compiled scenario (:func:`clock_loop`, Volcano's sessions), at most ``budget``
    steps of it; True when it is over."""
    push_changes(s)
    push_node_events(s)
    return clock_loop(s, budget, next_session, never, apply_event, changed, session, room_for_event, room_for_session)
