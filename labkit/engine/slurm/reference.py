"""Slurm's slurmctld as a policy family of the engine: the main scheduler and sched/backfill over
the session objects of ``framework.py``, with multifactor priority, fair-share, QOS limits and
preemption. A job's pods are its nodes' allocations (``-N`` = the pod count, ``--gres=gpu:N`` and
cpus per node = a pod's requests); pods of one task role go to distinct nodes.

A Slurm scenario compiles with :data:`SLURM` (slurm.conf as the Policy, the partitions, QOS and
associations as the Problem's Slurm fields).

Each piece follows the Slurm 22.05 source (SchedMD/slurm, tag slurm-22-05-8-1) or doc it names:

- priority: ``plugins/priority/multifactor/priority_multifactor.c`` (``set_priority_factors``,
  ``_get_priority_internal``; :func:`priority_factors`), decay and usage ``_decay_thread`` /
  ``_apply_new_usage`` (:func:`decayed_usage`), classic fair-share ``_set_usage_efctv`` and
  ``priority_p_calc_fs_factor`` (:func:`classic_fair_share`), Fair Tree ``fair_tree.c``
  (:func:`fair_tree`), normalised shares ``common/assoc_mgr.c``;
- the main scheduler: ``slurmctld/job_scheduler.c schedule()`` (:meth:`Slurmctld.schedule`): strict
  order by partition PriorityTier, priority, submit time; a job that cannot start blocks its
  partition and takes its nodes away from the rest of the pass;
- backfill: ``plugins/sched/backfill/backfill.c _attempt_backfill`` (:meth:`Slurmctld.backfill`):
  reservations of whole nodes from time limits, bf_window, bf_resolution, bf_max_job_test;
- preemption: ``slurmctld/preempt.c`` and ``plugins/preempt/{partition_prio,qos}`` (candidates and
  their order), ``select/cons_common/job_test.c`` (remove candidates until the job fits, reorder,
  repeat; :meth:`Slurmctld.preemptees`);
- QOS limits: ``slurmctld/acct_policy.c`` (GrpTRES, MaxTRESPerUser) and the reasons of
  ``common/slurm_protocol_defs.c job_reason_string``;
- node events (``cluster.events``, spot interruptions; the clock applies them, ``clock.py``) as
  slurmctld's node states (:data:`NODE_WORDS`): ``fail`` sets the node DOWN (``scontrol update
  state=down``, ``node_mgr.c update_node`` -> ``_make_node_down``, then
  ``job_mgr.c kill_running_job_by_node_name``): every job with a node there is killed as a whole,
  at once (sbatch's default kill-on-node-fail; GraceTime is for preemption only), and requeued
  when its ``--requeue`` (default JobRequeue) allows it: state NODE_FAIL in accounting, then
  PENDING held until BeginTime = now + cred_expire + 1 (``batch_requeue_fini``), its run from the
  start of its script, so the work since its last checkpoint is lost; else it ends NODE_FAIL
  (reason NodeDown). ``recover`` is the node back up (IDLE, a DRAIN flag kept), ``cordon`` and
  ``drain`` both set DRAIN (``state=drain``: no new job; running jobs run on, DRAINING until
  they end, then DRAINED: Slurm's drain evicts nothing), ``uncordon`` clears it
  (``state=undrain``, the base state kept). A spot ``interrupt`` is a DRAIN at its notice, then
  DOWN at its time: the node a cloud provider takes away under Slurm's power-save / cloud nodes.
  The main scheduler and backfill place and plan only on nodes neither DOWN nor DRAIN
  (``avail_node_bitmap``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import SpecError
from ...spec import scheduler_of
from ...spec.model import Scenario, SlurmConf
from ...spec.quantity import parse_duration, parse_quantity
from ..compile import FamilyRules, FamilyTables
from ..framework import JobInfo, Session, TaskInfo
from ..problem import (
    CPU,
    MEMORY,
    PODS,
    SLURM_TRES,
    Decisions,
    Eviction,
    Family,
    Note,
    Policy,
    PreemptMode,
    Problem,
    SlurmAction,
    SlurmArgs,
    State,
    TaskStatus,
)

MB = 2.0**20
NODE_WORDS = ("NodeDown", "NodeUp", "NodeDrain", "NodeUndrain", "NodeDrain")
"""What each node event kind (``events.NODE_KINDS``: fail, recover, cordon, uncordon, drain) logs:
the node state slurmctld sets."""
YEAR_SECONDS = 365 * 24 * 3600.0
CRED_EXPIRE = 120.0
"""A requeued job's BeginTime is now + cred_expire + 1 (job_mgr.c)."""
HOLDING = (TaskStatus.RUNNING, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RELEASING)
MODES = {"OFF": PreemptMode.OFF, "CANCEL": PreemptMode.CANCEL, "REQUEUE": PreemptMode.REQUEUE,
         "SUSPEND": PreemptMode.SUSPEND, None: PreemptMode.UNSET}
PREEMPT_TYPES = {"preempt/none": 0, "preempt/partition_prio": 1, "preempt/qos": 2}
GRP_REASON = {"cpu": "QOSGrpCpuLimit", "mem": "QOSGrpMemLimit", "node": "QOSGrpNodeLimit", "gres/gpu": "QOSGrpGRES"}
USER_REASON = {"cpu": "QOSMaxCpuPerUserLimit", "mem": "QOSMaxMemoryPerUser", "node": "QOSMaxNodePerUserLimit",
               "gres/gpu": "QOSMaxGRESPerUser"}


# ------------------------------------------------------------------------------------ compile


def slurm_policy(conf: SlurmConf) -> Policy:
    """The Policy of slurm.conf's scheduling keys (SchedulerParameters defaults from slurm.conf(5):
    sched_interval 60, bf_interval 30, bf_resolution 60, bf_window 1440 min, bf_max_job_test 500)."""
    params = conf.parameters()
    backfill = conf.scheduler_type == "sched/backfill" and params.get("bf_interval", 30) != -1
    args = SlurmArgs(
        backfill=backfill, sched_interval=float(params.get("sched_interval", 60)),
        bf_interval=float(params.get("bf_interval", 30)), bf_resolution=float(params.get("bf_resolution", 60)),
        bf_window=60.0 * params.get("bf_window", 1440), bf_max_job_test=int(params.get("bf_max_job_test", 500)),
        weight_age=conf.priority_weight_age, weight_fairshare=conf.priority_weight_fairshare,
        weight_job_size=conf.priority_weight_job_size, weight_partition=conf.priority_weight_partition,
        weight_qos=conf.priority_weight_q_o_s,
        weight_tres=np.array([conf.tres_weights().get(t, 0) for t in SLURM_TRES], float),
        max_age=parse_duration(conf.priority_max_age), decay_half_life=parse_duration(conf.priority_decay_half_life),
        calc_period=parse_duration(conf.priority_calc_period), favor_small=conf.priority_favor_small,
        flags=frozenset(conf.flags()), dampening=float(conf.fair_share_dampening_factor),
        preempt_type=PREEMPT_TYPES[conf.preempt_type], preempt_mode=int(MODES[conf.preempt_mode]),
        slurmdbd=conf.slurmdbd, enforce_limits=conf.enforces_limits(),
    )
    if args.preempt_type and args.preempt_mode == PreemptMode.OFF:
        raise SpecError("scheduler.slurm.PreemptMode", f"{conf.preempt_type} is not compatible with PreemptMode=OFF")
    actions = [SlurmAction.SCHED] + ([SlurmAction.BACKFILL] if backfill else [])
    empty = np.zeros(0, np.int64)
    return Policy(
        actions=np.array(actions, np.int64), plugin_tier=empty, plugin_kind=empty,
        plugin_enabled=np.zeros((0, 0), bool), plugin_args=np.zeros((0, 0)), plugin_resource_weights=np.zeros((0, 0)),
        family=Family.SLURM, action_period=np.array([args.sched_interval, args.bf_interval][:len(actions)]),
        action_on_event=np.array([True, False][:len(actions)]), pods_at_submit=True,
        requeue_hold=CRED_EXPIRE + 1, node_fail_ends_job=True, node_words=NODE_WORDS, slurm=args)


def slurm_tables(scenario: Scenario, node_pools: list[str]) -> FamilyTables:
    """Partitions, QOS, associations and each job's partition, QOS, user, time limit and whether it
    may be requeued (its --requeue, else JobRequeue); each job's GraceTime as its grace period."""
    conf = scheduler_of(scenario).slurm
    slurm = scenario.slurm
    partitions = list(slurm.partitions) if slurm and slurm.partitions else []
    names = [p.name for p in partitions] or ["default"]
    nodes = np.array([[p.pools is None or pool in p.pools for pool in node_pools] for p in partitions]
                     or [[True] * len(node_pools)], bool).reshape(len(names), len(node_pools))
    defaults = [i for i, p in enumerate(partitions) if p.default] or ([0] if len(names) == 1 else [])
    qos = list(slurm.qos) if slurm else []
    qos_names = [q.name for q in qos] + ([] if any(q.name == "normal" for q in qos) else ["normal"])
    qos_index = {name: i for i, name in enumerate(qos_names)}
    assoc = _associations(scenario)
    job_partition, job_qos, job_assoc, limits, grace = [], [], [], [], []
    for i, job in enumerate(scenario.jobs):
        if job.partition is None and not defaults:
            raise SpecError(f"jobs[{i}].partition", "no default partition: give one or mark a partition default: true")
        p = names.index(job.partition) if job.partition is not None else defaults[0]
        q = qos_index[job.qos or "normal"]
        part = partitions[p] if partitions else None
        limit = job.time_limit if job.time_limit is not None else (part.max_time if part else None)
        # Slurm keeps time limits in whole minutes (sbatch -t rounds seconds up)
        limits.append(math.ceil(parse_duration(limit) / 60.0) * 60.0 if limit is not None else math.inf)
        job_partition.append(p)
        job_qos.append(q)
        job_assoc.append(assoc.user_index[job.user or job.namespace])
        grace.append(_grace(conf, part, qos[q] if q < len(qos) else None))
    fields = {
        "job_partition": np.array(job_partition, np.int64), "job_qos": np.array(job_qos, np.int64),
        "job_assoc": np.array(job_assoc, np.int64), "job_time_limit": np.array(limits, float),
        "job_requeue": np.array([conf.job_requeue == 1 if job.requeue is None else job.requeue
                                 for job in scenario.jobs], bool).reshape(len(scenario.jobs)),
        "partition_names": tuple(names), "partition_nodes": nodes,
        "partition_tier": np.array([p.priority_tier for p in partitions] or [1], np.int64),
        "partition_job_factor": np.array([p.priority_job_factor for p in partitions] or [1], np.int64),
        "partition_preempt_mode": np.array([MODES[p.preempt_mode] for p in partitions] or [-1], np.int64),
        "partition_max_nodes": np.array([p.max_nodes or -1 for p in partitions] or [-1], np.int64),
        "qos_names": tuple(qos_names),
        "qos_priority": np.array([q.priority for q in qos] + [0] * (len(qos_names) - len(qos)), np.int64),
        "qos_preempt": np.array([[other in q.preempt for other in qos_names] for q in qos]
                                + [[False] * len(qos_names)] * (len(qos_names) - len(qos)), bool),
        "qos_preempt_mode": np.array([MODES[q.preempt_mode] for q in qos] + [-1] * (len(qos_names) - len(qos)),
                                     np.int64),
        "qos_grp_tres": _tres_rows([q.grp_tres for q in qos], len(qos_names)),
        "qos_max_tres_per_user": _tres_rows([q.max_tres_per_user for q in qos], len(qos_names)),
        "assoc_names": assoc.names, "assoc_parent": assoc.parent, "assoc_shares": assoc.shares,
        "assoc_is_user": assoc.is_user,
    }
    return FamilyTables(fields, np.array(grace, float))


def _grace(conf: SlurmConf, part, qos) -> float:
    """GraceTime applies to a preempted job in CANCEL mode: the partition's (partition_prio) or QOS's."""
    if conf.preempt_type == "preempt/partition_prio" and part is not None:
        mode, grace = part.preempt_mode or conf.preempt_mode, part.grace_time
    elif conf.preempt_type == "preempt/qos" and qos is not None:
        mode, grace = qos.preempt_mode or conf.preempt_mode, qos.grace_time
    else:
        return 0.0
    return parse_duration(grace) if mode == "CANCEL" else 0.0


def _tres_rows(limits: list[dict], n: int) -> np.ndarray:
    """QOS TRES limits as (n, 4) over SLURM_TRES; mem is MB (a plain number) or a quantity in bytes."""
    rows = np.full((n, len(SLURM_TRES)), np.nan)
    for q, limit in enumerate(limits):
        for name, value in limit.items():
            amount = parse_quantity(value)
            if name == "mem" and not str(value).replace(".", "").isdigit():
                amount /= MB
            rows[q, SLURM_TRES.index(name)] = amount
    return rows


@dataclass(frozen=True)
class _Associations:
    names: tuple[str, ...]
    parent: np.ndarray
    shares: np.ndarray
    is_user: np.ndarray
    user_index: dict[str, int]


def _associations(scenario: Scenario) -> _Associations:
    """root, the accounts, then the users (listed ones, then every job user not listed, under root)."""
    slurm = scenario.slurm
    accounts = list(slurm.accounts) if slurm else []
    users = list(slurm.users) if slurm else []
    for i, account in enumerate(accounts):
        if account.fairshare == "parent":
            raise SpecError(f"slurm.accounts[{i}].fairshare", "FairShare=parent is simulated for users only")
    names, parent, shares = ["root"], [-1], [1.0]
    index = {"root": 0}
    for account in accounts:
        index[account.name] = len(names)
        names.append(account.name)
    for account in accounts:
        parent.append(-2)  # filled below, once every account has an index
        shares.append(float(account.fairshare))
    for k, account in enumerate(accounts, start=1):
        parent[k] = index[account.parent]
    listed = {u.name for u in users}
    extra = sorted({job.user or job.namespace for job in scenario.jobs} - listed)
    user_index = {}
    for user in users + [None] * len(extra):
        name = user.name if user else extra.pop(0)
        user_index[name] = len(names)
        names.append(f"user:{name}")
        parent.append(index[user.parent] if user else 0)
        shares.append(-1.0 if user and user.fairshare == "parent" else float(user.fairshare if user else 1))
    return _Associations(tuple(names), np.array(parent, np.int64), np.array(shares, float),
                         np.array([n.startswith("user:") for n in names], bool), user_index)


def slurm_request(request: np.ndarray) -> np.ndarray:
    """What select/cons_tres allocates on a node for a pod's request: whole CPUs, at least one."""
    out = request.copy()
    out[CPU] = max(1000.0, math.ceil(out[CPU] / 1000.0 - 1e-9) * 1000.0)
    return out


SLURM = FamilyRules(policy=lambda scenario, resources: slurm_policy(scheduler_of(scenario).slurm),
                    request=slurm_request, tables=slurm_tables, namespaces=False, node_events=lambda policy: None)
"""How a Slurm scenario compiles: slurm.conf as the Policy, a pod's cpu as cons_tres allocates it,
the partitions, QOS and associations (from each job of the expanded scenario), no
namespaces, so no ResourceQuotas, and node events as Slurm's node states (the module docstring)."""


# ------------------------------------------------------------------------------------ priority


def decay_factor(half_life: float) -> float:
    """Per-second decay: 1 - 0.693 / PriorityDecayHalfLife (1 = no decay when it is 0)."""
    return 1.0 - 0.693 / half_life if half_life > 0 else 1.0


def decayed_usage(problem: Problem, runs: np.ndarray, now: float) -> np.ndarray:
    """Each user association's ``usage_raw`` after the last PriorityCalcPeriod tick at or before
    ``now``, from the pod runs (K, 5: task, node, start, end, evicted) in CPU-seconds (billing =
    allocated CPUs). The decay thread ticks every P seconds from 0: it multiplies the usage by
    d^P, then adds for each running job its slice Δ x d^Δ x cpus; a job that ends adds its last
    slice at once (``priority_p_job_end``), decayed from the next tick on."""
    args: SlurmArgs = problem.policy.slurm
    usage = np.zeros(len(problem.assoc_names))
    if not len(runs):
        return usage
    period = args.calc_period
    d = decay_factor(args.decay_half_life)
    g = d**period
    last = math.floor(now / period)  # index K of the last tick, at K x period
    task = runs[:, 0].astype(np.int64)
    start = runs[:, 2]
    stop = np.where(np.isnan(runs[:, 4]), runs[:, 3], runs[:, 4])
    stop = np.where(np.isnan(stop), np.inf, stop)
    cpus = problem.task_request[task, CPU] / 1000.0
    first = np.floor(start / period) + 1  # the first tick after the start
    final = np.where(np.isinf(stop), np.inf, np.ceil(stop / period) - 1)  # the last tick before the stop
    upto = np.minimum(final, last)
    total = np.zeros(len(runs))
    ran = first <= upto
    # the first slice, from the start to the first tick after it
    delta0 = first * period - start
    total += np.where(ran, delta0 * d**delta0 * g ** (last - first), 0.0)
    # whole periods after it, ticks first+1 .. upto: P d^P (g^(K-upto) + ... + g^(K-first-1))
    count = np.where(ran, upto - first, 0.0)
    geometric = count if g == 1 else g ** (last - upto) * (1 - g**count) / (1 - g)
    total += np.where(ran, period * g * geometric, 0.0)
    # the last slice of a run that ended by the last tick
    ended = stop <= last * period
    begin = np.where(final >= first, final * period, start)
    with np.errstate(invalid="ignore"):  # inf - inf for the runs still going, masked out
        delta = np.where(ended, stop - begin, 0.0)
    total += np.where(ended, delta * d**delta * g ** np.where(ended, last - final, 0.0), 0.0)
    np.add.at(usage, problem.job_assoc[problem.task_job[task]], cpus * total)
    return usage


def _children(problem: Problem) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in problem.assoc_names]
    for a, parent in enumerate(problem.assoc_parent):
        if parent >= 0:
            kids[parent].append(a)
    return kids


def _tree_usage(problem: Problem, usage: np.ndarray, kids: list[list[int]]) -> np.ndarray:
    """usage_raw of every association: accounts sum their children."""
    total = usage.astype(float).copy()

    def walk(a: int) -> float:
        total[a] = usage[a] + sum(walk(c) for c in kids[a])
        return total[a]

    walk(0)
    return total


def _level_shares(problem: Problem, kids: list[list[int]], a: int) -> float:
    """The raw shares of an association and its siblings (FairShare=parent ones left out)."""
    parent = problem.assoc_parent[a]
    return float(sum(problem.assoc_shares[c] for c in kids[parent] if problem.assoc_shares[c] >= 0))


def fair_tree(problem: Problem, usage: np.ndarray) -> np.ndarray:
    """Fair Tree (fair_tree.c): per association Level FS = S / U with S its shares over its
    siblings' and U its usage over its parent's (inf when U = 0 < S, 0 when S = 0, inf for a user
    with FairShare=parent); siblings sorted by LF descending, users before accounts on ties; users
    ranked in that depth-first order; fs_factor = rank / user count (the top user gets 1.0; tied
    users share a rank)."""
    kids = _children(problem)
    raw = _tree_usage(problem, usage, kids)
    n_users = int(problem.assoc_is_user.sum())
    factor = np.zeros(len(problem.assoc_names))
    state = {"rank": n_users, "rnt": n_users}

    def level_fs(a: int) -> float:
        if problem.assoc_shares[a] < 0:
            return math.inf
        level = _level_shares(problem, kids, a)
        s = problem.assoc_shares[a] / level if level else 0.0
        parent_usage = raw[problem.assoc_parent[a]]
        u = raw[a] / parent_usage if parent_usage else 0.0
        if s == 0:
            return 0.0
        return math.inf if u == 0 else s / u

    def walk(siblings: list[int], account_tied: bool) -> None:
        lf = {a: level_fs(a) for a in siblings}
        ordered = sorted(siblings, key=lambda a: (-lf[a], not problem.assoc_is_user[a]))
        previous = None
        for i, a in enumerate(ordered):
            tied = account_tied if i == 0 else previous == lf[a]
            if problem.assoc_is_user[a]:
                if not tied:
                    state["rank"] = state["rnt"]
                factor[a] = state["rank"] / n_users
                state["rnt"] -= 1
            else:
                walk(kids[a], tied)
            previous = lf[a]

    if n_users:
        walk(kids[0], False)
    return factor


def classic_fair_share(problem: Problem, usage: np.ndarray, dampening: float) -> np.ndarray:
    """Classic fair-share (PriorityFlags=NO_FAIR_TREE): F = 2^(-UE / S / dampening) with S the
    shares normalised down the tree (Π raw / level shares), U = usage / root usage, and
    UE = UA + (UE_parent - UA) x S_raw / level shares (UE = U under root); a FairShare=parent
    user takes its account's."""
    kids = _children(problem)
    raw = _tree_usage(problem, usage, kids)
    root_usage = raw[0]
    n = len(problem.assoc_names)
    norm_shares, efctv, factor = np.ones(n), np.zeros(n), np.zeros(n)

    def walk(a: int) -> None:
        for c in kids[a]:
            own = c if problem.assoc_shares[c] >= 0 else a
            level = _level_shares(problem, kids, c)
            if problem.assoc_shares[c] < 0:
                norm_shares[c], efctv[c] = norm_shares[a], efctv[a]
            else:
                norm_shares[c] = norm_shares[a] * (problem.assoc_shares[c] / level if level else 0.0)
                ua = raw[c] / root_usage if root_usage else 0.0
                efctv[c] = ua if a == 0 else (efctv[a] if not level else
                                              ua + (efctv[a] - ua) * problem.assoc_shares[c] / level)
            factor[c] = 2.0 ** (-efctv[own] / norm_shares[own] / dampening) if norm_shares[own] > 0 else 0.0
            walk(c)

    walk(0)
    return factor


@dataclass(frozen=True)
class Factors:
    """One job's weighted priority factors (what ``sprio`` shows) and the total."""

    age: float
    fairshare: float
    job_size: float
    partition: float
    qos: float
    tres: float

    @property
    def priority(self) -> int:
        """The sum, truncated to an integer, at least 1 (0 is for held jobs)."""
        total = self.age + self.fairshare + self.job_size + self.partition + self.qos + self.tres
        return max(1, int(total))

    def sprio(self) -> str:
        """As ``sprio`` prints it: the total, then each weighted factor rounded (``%.0f``)."""
        return (f"PRIORITY={self.priority} AGE={self.age:.0f} FAIRSHARE={self.fairshare:.0f} "
                f"JOBSIZE={self.job_size:.0f} PARTITION={self.partition:.0f} QOS={self.qos:.0f} TRES={self.tres:.0f}")


def job_tres(problem: Problem, tasks: list[TaskInfo]) -> np.ndarray:
    """A job's TRES over SLURM_TRES: cpus, memory MB, nodes, GPUs."""
    request = sum((t.request for t in tasks), np.zeros(problem.n_resources))
    gpu = sum(request[r] for r, name in enumerate(problem.resource_names) if name.endswith("/gpu")) / 1000.0
    return np.array([request[CPU] / 1000.0, request[MEMORY] / MB, len(tasks), gpu])


def node_tres(problem: Problem, nodes: np.ndarray) -> np.ndarray:
    """The TRES of a set of nodes (a partition's, for the TRES factor and job size)."""
    alloc = problem.node_allocatable[nodes]
    gpu = sum(alloc[:, r].sum() for r, name in enumerate(problem.resource_names) if name.endswith("/gpu")) / 1000.0
    return np.array([alloc[:, CPU].sum() / 1000.0, alloc[:, MEMORY].sum() / MB, float(nodes.sum()), gpu])


def priority_factors(problem: Problem, job: JobInfo, at: float, accrue: float, fairshare: float) -> Factors:
    """set_priority_factors x weights for one job evaluated at time ``at``; ``accrue`` is when it
    began to accrue age; ``fairshare`` its association's factor. Without slurmdbd, age, fair-share
    and QOS count 0 ("PriorityWeightAge can only be used with SlurmDBD, ignoring")."""
    args: SlurmArgs = problem.policy.slurm
    tres = job_tres(problem, job.tasks)
    cpus, min_nodes = tres[0], tres[2]
    n_nodes = problem.n_nodes
    cluster_cpus = problem.node_allocatable[:, CPU].sum() / 1000.0
    age = 0.0
    if args.slurmdbd and args.weight_age:
        age = min(1.0, max(0.0, at - accrue) / args.max_age) if args.max_age > 0 else 1.0
    if "SMALL_RELATIVE_TO_TIME" in args.flags:
        minutes = problem.job_time_limit[job.index] / 60.0
        js = max(min_nodes * cluster_cpus / n_nodes, cpus) / (minutes if math.isfinite(minutes) else 0xFFFFFFFF)
        js /= cluster_cpus
        js = 1.0 - js if args.favor_small else js
    elif args.favor_small:
        js = ((n_nodes - min_nodes) / n_nodes + ((cluster_cpus - cpus) / cluster_cpus if cpus else 0.0)) / (2 if cpus else 1)
    else:
        js = (min_nodes / n_nodes + (cpus / cluster_cpus if cpus else 0.0)) / (2 if cpus else 1)
    js = min(1.0, max(0.0, js))
    p = problem.job_partition[job.index]
    factor = problem.partition_job_factor[p]
    part = factor if "NO_NORMAL_PART" in args.flags else factor / max(problem.partition_job_factor.max(), 1)
    q = problem.job_qos[job.index]
    qos = 0.0
    if args.slurmdbd and problem.qos_priority[q]:
        qos = problem.qos_priority[q] if "NO_NORMAL_QOS" in args.flags else problem.qos_priority[q] / problem.qos_priority.max()
    tres_factor = 0.0
    if args.weight_tres.any():
        total = node_tres(problem, problem.partition_nodes[p])
        normal = tres if "NO_NORMAL_TRES" in args.flags else np.divide(tres, total, out=np.zeros(4), where=total > 0)
        tres_factor = float((normal * args.weight_tres).sum())
    fs = fairshare if args.slurmdbd else 0.0
    return Factors(age=args.weight_age * age, fairshare=args.weight_fairshare * fs,
                   job_size=args.weight_job_size * js, partition=args.weight_partition * part,
                   qos=args.weight_qos * qos, tres=tres_factor)


# ------------------------------------------------------------------------------------ session


@dataclass
class Reservation:
    """A backfill plan: whole nodes held for a pending job from ``start`` to ``end``."""

    start: float
    end: float
    nodes: set[int]


class Slurmctld:
    """slurmctld's view of one session: the jobs by state, their priorities, node use."""

    def __init__(self, ssn: Session, state: State):
        self.ssn = ssn
        self.p = ssn.problem
        self.args: SlurmArgs = self.p.policy.slurm
        self.now = state.now
        self.eligible = state.job_eligible
        self.suspended = state.job_suspended
        self.notes: list[Note] = []
        self.start = {j.index: float(np.nanmin(state.task_start[[t.index for t in j.tasks]]))
                      for j in ssn.jobs if self.running(j)}
        tick = math.floor(self.now / self.args.calc_period) * self.args.calc_period
        fs = np.zeros(len(self.p.assoc_names))
        if self.args.slurmdbd and self.args.weight_fairshare:
            usage = state.assoc_usage
            fs = (classic_fair_share(self.p, usage, self.args.dampening) if "NO_FAIR_TREE" in self.args.flags
                  else fair_tree(self.p, usage))
        self.factors: dict[int, Factors] = {}
        for job in ssn.jobs:
            if self.pending(job):
                accrue = job.creation if "ACCRUE_ALWAYS" in self.args.flags else max(job.creation, self.eligible[job.index])
                at = max(tick, accrue)
                self.factors[job.index] = priority_factors(self.p, job, at, accrue, fs[self.p.job_assoc[job.index]])
        self.time_dependent = self.args.slurmdbd and bool(self.args.weight_age or self.args.weight_fairshare)

    # -- job states -------------------------------------------------------------------------
    @staticmethod
    def pending(job: JobInfo) -> bool:
        return bool(job.tasks) and all(t.status == TaskStatus.PENDING for t in job.tasks)

    def running(self, job: JobInfo) -> bool:
        """The job holds nodes and is not suspended."""
        return not self.suspended[job.index] and any(t.status in HOLDING and t.node >= 0 for t in job.tasks)

    def queue(self) -> list[JobInfo]:
        """build_job_queue + sort_job_queue2: partition PriorityTier, priority, submit time, job id."""
        pending = [j for j in self.ssn.jobs if j.index in self.factors and self.pending(j)]
        return sorted(pending, key=lambda j: (-self.p.partition_tier[self.p.job_partition[j.index]],
                                              -self.factors[j.index].priority, j.creation, j.rank))

    def limit(self, job: JobInfo) -> float:
        limit = self.p.job_time_limit[job.index]
        return limit if math.isfinite(limit) else YEAR_SECONDS

    def not_runnable(self, job: JobInfo, started: list[JobInfo]) -> str | None:
        """The reason a job may not be considered now, before any node is looked at: BeginTime,
        PartitionNodeLimit (job_limits_check), then the QOS limits (acct_policy_job_runnable_pre_select)."""
        if self.eligible[job.index] > self.now:
            return "BeginTime"
        p = self.p.job_partition[job.index]
        n_nodes = len(job.tasks)
        max_nodes = self.p.partition_max_nodes[p]
        if n_nodes > self.p.partition_nodes[p].sum() or 0 <= max_nodes < n_nodes:
            return "PartitionNodeLimit"
        if not self.args.enforce_limits:
            return None
        q = self.p.job_qos[job.index]
        want = job_tres(self.p, job.tasks)
        holders = [j for j in self.ssn.jobs if (self.running(j) or j in started) and self.p.job_qos[j.index] == q]
        group = sum((job_tres(self.p, j.tasks) for j in holders), np.zeros(4))
        user = sum((job_tres(self.p, j.tasks) for j in holders
                    if self.p.job_assoc[j.index] == self.p.job_assoc[job.index]), np.zeros(4))
        for limits, used, reasons in ((self.p.qos_grp_tres[q], group, GRP_REASON),
                                      (self.p.qos_max_tres_per_user[q], user, USER_REASON)):
            for k, name in enumerate(SLURM_TRES):
                if not np.isnan(limits[k]) and used[k] + want[k] > limits[k] + 1e-9:
                    return reasons[name]
        return None

    # -- node selection ---------------------------------------------------------------------
    def select_nodes(self, job: JobInfo, free: np.ndarray, allowed: np.ndarray) -> dict[int, int] | None:
        """select/cons_tres on the allowed nodes: each pod on the lowest-index node that has its
        request free and no other pod of its role; {task: node}, or None if the job does not fit."""
        free = free.copy()
        placement: dict[int, int] = {}
        used_by_role: dict[str, set[int]] = {}
        ok = self.p.class_node_ok & self.p.node_schedulable
        for task in sorted(job.tasks, key=lambda t: t.rank):
            taken = used_by_role.setdefault(task.role, set())
            fits = allowed & ok[task.node_class] & np.all(np.delete(free - task.request, PODS, axis=1) >= -1e-9, axis=1)
            choice = next((int(n) for n in np.flatnonzero(fits) if n not in taken), None)
            if choice is None:
                return None
            placement[task.index] = choice
            taken.add(choice)
            free[choice] -= task.request
        return placement

    def free_now(self) -> np.ndarray:
        """Idle resources per node; a suspended job's CPUs count as free (its memory and GRES not)."""
        free = np.array([n.idle for n in self.ssn.nodes]).reshape(self.p.n_nodes, self.p.n_resources)
        for job in self.ssn.jobs:
            if self.suspended[job.index]:
                for t in job.tasks:
                    if t.node >= 0:
                        free[t.node, CPU] += t.request[CPU]
        return free

    def resume(self, free: np.ndarray) -> None:
        """The gang scheduler resumes a suspended job once its CPUs are free again on its nodes; from
        then on the session sees it running (its CPUs no longer free for backfill)."""
        for job in sorted(self.ssn.jobs, key=lambda j: j.rank):
            if not self.suspended[job.index]:
                continue
            need = np.zeros(self.p.n_nodes)
            for t in job.tasks:
                need[t.node] += t.request[CPU]
            if np.all(free[:, CPU] >= need - 1e-9):
                free[:, CPU] -= need
                for t in job.tasks:
                    self.ssn.dispatch(t, "gang", f"resumed JobId={job.name}")
                self.suspended[job.index] = False
                self.start[job.index] = self.now

    def start_job(self, job: JobInfo, placement: dict[int, int], action: str) -> None:
        nodes = ",".join(self.ssn.nodes[n].name for n in sorted(set(placement.values())))
        for t, n in placement.items():
            task = self.ssn.tasks[t]
            self.ssn._place(task, self.ssn.nodes[n], TaskStatus.ALLOCATED)
            self.ssn.dispatch(task, action, f"Allocate JobId={job.name} NodeList={nodes}")
        self.start[job.index] = self.now

    def _take(self, free: np.ndarray, placement: dict[int, int]) -> np.ndarray:
        """``free`` less what a placement takes."""
        out = free.copy()
        for t, n in placement.items():
            out[n] -= self.ssn.tasks[t].request
        return out

    def note(self, job: JobInfo, kind: str, reason: str, message: str = "") -> None:
        self.notes.append(Note(job.index, -1, kind, reason, message))

    # -- the main scheduler --------------------------------------------------------------------
    def schedule(self) -> None:
        """schedule(): jobs in strict order; one that cannot start gets Resources, blocks its
        partition (later jobs there get Priority) and takes its nodes from the rest of the pass."""
        free = self.free_now()
        self.resume(free)
        avail = self.p.node_schedulable.copy()
        failed: set[int] = set()
        started: list[JobInfo] = []
        for job in self.queue():
            p = self.p.job_partition[job.index]
            self.note(job, "Priority", "multifactor", self.factors[job.index].sprio())
            reason = self.not_runnable(job, started)
            if reason is not None:
                self.note(job, "Pending", reason)
                continue
            if p in failed:
                self.note(job, "Pending", "Priority")
                continue
            allowed = self.p.partition_nodes[p] & avail
            placement = self.select_nodes(job, free, allowed) if allowed.sum() >= len(job.tasks) else None
            if placement is not None:
                self.start_job(job, placement, "sched")
                free = self._take(free, placement)
                started.append(job)
                continue
            victims = self.preemptees(job, free, allowed) if self.args.preempt_type else []
            if victims:
                room = free + sum((self.freed(v) for v in victims), np.zeros_like(free))
                self.preempt(job, victims)
                if all(self.mode(v) == PreemptMode.SUSPEND for v in victims):
                    # the gang scheduler suspends them and the job runs on their CPUs at once
                    for v in victims:
                        self.suspended[v.index] = True
                    placement = self.select_nodes(job, room, allowed)
                    self.start_job(job, placement, "sched")
                    free = self._take(room, placement)
                    started.append(job)
                    continue
            self.note(job, "Pending", "Resources")
            failed.add(p)
            avail &= ~self.p.partition_nodes[p]

    # -- preemption ---------------------------------------------------------------------------
    def mode(self, job: JobInfo) -> int:
        """The PreemptMode that stops a job: its partition's (partition_prio) or QOS's (qos), else
        the cluster's."""
        if self.args.preempt_type == 1:
            mode = self.p.partition_preempt_mode[self.p.job_partition[job.index]]
        else:
            mode = self.p.qos_preempt_mode[self.p.job_qos[job.index]]
        return int(self.args.preempt_mode if mode == PreemptMode.UNSET else mode)

    def can_preempt(self, job: JobInfo, victim: JobInfo) -> bool:
        """preempt_p_preemptable: a lower PriorityTier partition (partition_prio), or a QOS in the
        preemptor QOS's Preempt list (qos); and a PreemptMode that is not OFF."""
        if self.mode(victim) == PreemptMode.OFF:
            return False
        if self.args.preempt_type == 1:
            tier = self.p.partition_tier
            return bool(tier[self.p.job_partition[victim.index]] < tier[self.p.job_partition[job.index]])
        return bool(self.args.slurmdbd and self.p.qos_preempt[self.p.job_qos[job.index], self.p.job_qos[victim.index]])

    def preempt_priority(self, job: JobInfo) -> int:
        """_gen_job_prio: (PriorityTier or QOS priority) << 16 + node count; lower is preempted first."""
        if self.args.preempt_type == 1:
            high = self.p.partition_tier[self.p.job_partition[job.index]]
        else:
            high = self.p.qos_priority[self.p.job_qos[job.index]]
        return (min(int(high), 0xFFFF) << 16) + min(len(job.tasks), 0xFFFF)

    def freed(self, victim: JobInfo) -> np.ndarray:
        """What a victim gives back per node: everything, or only its CPUs when it would be
        suspended (memory and GRES of a suspended job stay allocated)."""
        out = np.zeros((self.p.n_nodes, self.p.n_resources))
        for t in victim.tasks:
            if t.status in HOLDING and t.node >= 0 and t.status != TaskStatus.RELEASING:
                if self.mode(victim) == PreemptMode.SUSPEND:
                    out[t.node, CPU] += t.request[CPU]
                else:
                    out[t.node] += t.request
        return out

    def preemptees(self, job: JobInfo, free: np.ndarray, allowed: np.ndarray) -> list[JobInfo]:
        """The jobs to stop so that ``job`` starts: candidates in preemption order, removed one by
        one until the job fits; then the one that completed the fit first, the others by how many
        of the chosen nodes they hold, and the same pass again (cons_common job_test.c)."""
        free = free + sum((self._held(j, releasing=True) for j in self.ssn.jobs),
                          np.zeros((self.p.n_nodes, self.p.n_resources)))
        candidates = [j for j in self.ssn.jobs if self.running(j) and j is not job and self.can_preempt(job, j)
                      and any(t.node >= 0 and allowed[t.node] and t.status != TaskStatus.RELEASING for t in j.tasks)]
        candidates.sort(key=lambda j: (self.preempt_priority(j), j.rank))

        def fill(order: list[JobInfo]) -> tuple[list[JobInfo], dict[int, int] | None]:
            room = free.copy()
            for i, victim in enumerate(order):
                room = room + self.freed(victim)
                placement = self.select_nodes(job, room, allowed)
                if placement is not None:
                    return order[:i + 1], placement
            return [], None

        if self.select_nodes(job, free, allowed) is not None:
            return []  # what earlier victims still release is enough: wait for them
        first, placement = fill(candidates)
        if placement is None:
            return []
        chosen = set(placement.values())
        rest = sorted(first[:-1], key=lambda j: -sum(1 for t in j.tasks if t.node in chosen))
        second, placement = fill([first[-1]] + rest + [c for c in candidates if c not in first])
        chosen = set(placement.values()) if placement else set()
        return [v for v in second if any(t.node in chosen for t in v.tasks)]

    def preempt(self, job: JobInfo, victims: list[JobInfo]) -> None:
        """Stop the victims: REQUEUE puts them back in the queue, held until BeginTime, when they
        may be requeued (`Problem.job_requeue`: --requeue, else JobRequeue); CANCEL (or REQUEUE of
        a job that may not be) ends them; SUSPEND pauses them, their memory and GRES still
        allocated, until the gang scheduler resumes them."""
        for victim in victims:
            how = {PreemptMode.REQUEUE: "requeue" if self.p.job_requeue[victim.index] else "cancel",
                   PreemptMode.CANCEL: "cancel", PreemptMode.SUSPEND: "suspend"}[self.mode(victim)]
            verb = {"requeue": "has been requeued", "cancel": "has been cancelled", "suspend": "has been suspended"}
            reason = f"preempted JobId={victim.name} {verb[how]} to reclaim resources for JobId={job.name}"
            for t in victim.tasks:
                if t.status in HOLDING and t.status != TaskStatus.RELEASING:
                    if how != "suspend":
                        self.ssn._set_status_on_node(t, TaskStatus.RELEASING)
                    self.ssn.decisions.evictions.append(Eviction(t.index, "Preempted", reason, how))

    # -- backfill -----------------------------------------------------------------------------
    def expected_ends(self) -> list[tuple[float, JobInfo]]:
        """Running jobs and when they must end (start + time limit), soonest first."""
        ends = [(self.start[j.index] + self.limit(j), j) for j in self.ssn.jobs if self.running(j)]
        return sorted(ends, key=lambda e: (e[0], e[1].index))

    def backfill(self) -> None:
        """_attempt_backfill: jobs in priority order (at most bf_max_job_test), each at its earliest
        start given the running jobs' expected ends and the reservations made so far; start it if
        that is now, else reserve its nodes from then for its time limit (times floored to
        bf_resolution, within bf_window)."""
        resolution, window = self.args.bf_resolution, self.args.bf_window
        reservations: list[Reservation] = []
        started: list[JobInfo] = []
        tested = 0
        for job in self.queue():
            if tested >= self.args.bf_max_job_test:
                break
            if self.not_runnable(job, started) is not None:
                continue
            tested += 1
            limit = self.limit(job)
            p = self.p.job_partition[job.index]
            ends = self.expected_ends()
            times = sorted({self.now, *(e for e, _ in ends if e > self.now), *(r.end for r in reservations)})
            for at in times:
                if at > self.now + window:
                    break
                end = at + limit
                allowed = self.p.partition_nodes[p] & self.p.node_schedulable
                for r in reservations:
                    if r.start <= end and r.end > at:
                        allowed[list(r.nodes)] = False
                free = self.free_now() + sum((self._held(j) for e, j in ends if e <= at),
                                             np.zeros((self.p.n_nodes, self.p.n_resources)))
                placement = self.select_nodes(job, free, allowed)
                if placement is None:
                    continue
                if at <= self.now:
                    self.start_job(job, placement, "backfill")
                    started.append(job)
                else:
                    nodes = set(placement.values())
                    start, stop = math.floor(at / resolution) * resolution, math.floor(end / resolution) * resolution
                    reservations.append(Reservation(start, max(stop, start + resolution), nodes))
                    names = ",".join(self.ssn.nodes[n].name for n in sorted(nodes))
                    self.note(job, "StartTime", "Backfill", f"StartTime={at:g} SchedNodeList={names}")
                break

    def _held(self, job: JobInfo, releasing: bool = False) -> np.ndarray:
        """What a job holds per node (only its terminating pods' share with ``releasing``)."""
        out = np.zeros((self.p.n_nodes, self.p.n_resources))
        for t in job.tasks:
            if t.status in HOLDING and t.node >= 0 and (not releasing or t.status == TaskStatus.RELEASING):
                out[t.node] += t.request
        return out

    # -- close ------------------------------------------------------------------------------
    def decisions(self) -> Decisions:
        d = self.ssn.decisions
        d.notes = self.notes
        d.priorities = {j: f.priority for j, f in self.factors.items()}
        waiting = [j for j in self.ssn.jobs if self.pending(j)]
        wake = [self.eligible[j.index] for j in waiting if self.eligible[j.index] > self.now]
        if self.time_dependent and waiting:
            period = self.args.calc_period
            wake.append((math.floor(self.now / period) + 1) * period)  # priorities change at the next tick
        d.wake_at = min(wake, default=math.inf)
        return d


def run_session(problem: Problem, state: State) -> Decisions:
    """One slurmctld session: the actions due now, in order (main scheduler, then backfill)."""
    ssn = Session(problem, state)
    ctld = Slurmctld(ssn, state)
    for action in problem.policy.actions:
        if action == SlurmAction.SCHED:
            ctld.schedule()
        elif action == SlurmAction.BACKFILL:
            ctld.backfill()
    return ctld.decisions()
