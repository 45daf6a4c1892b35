"""Rules that span several fields of a Scenario: references, cycles, and pods that fit no node.

Each rule raises `SpecError` with the YAML path of the field at fault, so the user reads one line
such as `jobs[3].queue: no queue named 'team-x' (queues: default, team-a)`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..errors import SpecError
from . import kueue
from .model import MAX_JOBS, MAX_NODES, MAX_PODS, Job, NodePool, Scenario, Task, Tenant, Toleration, Workload
from .quantity import parse_duration, parse_quantity
from .timeline import node_events

# Volcano creates these two queues itself (`cache.go newDefaultAndRootQueue`).
BUILTIN_QUEUES = ("root", "default")


def check(scenario: Scenario, policies: Iterable[str]) -> None:
    """Raise SpecError for the first cross-field rule the scenario breaks."""
    _check_sizes(scenario)
    _unique("tenants", [t.name for t in scenario.tenants], "tenant")
    _unique("tenants", [t.ns for t in scenario.tenants], "namespace")
    _unique("priorityClasses", [p.name for p in scenario.priority_classes], "priority class")
    _unique("cluster.pools", [p.name for p in scenario.cluster.pools], "node pool")
    defaults = [i for i, p in enumerate(scenario.priority_classes) if p.global_default]
    if len(defaults) > 1:
        raise SpecError(f"priorityClasses[{defaults[1]}].globalDefault", "only one PriorityClass may be the global default")
    _check_queues(scenario)
    namespaces = {t.ns for t in scenario.tenants} | {"default"}
    queues = {q.name for q in scenario.queues} | set(BUILTIN_QUEUES)
    classes = {p.name for p in scenario.priority_classes}
    children = Counter(q.parent for q in scenario.queues)
    nodes = {name for pool in scenario.cluster.pools for name in pool.node_names()}
    tenants = {t.ns: t for t in scenario.tenants}
    seen: dict[tuple[str, str], int] = {}
    fitting: set[tuple] = set()
    for i, job in enumerate(scenario.jobs):
        key = (job.namespace, job.name)
        if key in seen:
            raise SpecError(f"jobs[{i}].name", f"job {job.namespace}/{job.name} is already jobs[{seen[key]}]")
        seen[key] = i
        _check_refs(f"jobs[{i}]", job, namespaces, queues, classes)
        tenant = tenants.get(job.namespace)
        if tenant is not None and tenant.limit_range is not None:
            for k, task in enumerate(job.tasks):
                check_limit_range(f"jobs[{i}].tasks[{k}].resources", task.resources, tenant)
        _check_leaf(f"jobs[{i}].queue", job.queue, children)
        for k, task in enumerate(job.tasks):
            shape = (tuple(sorted((n, str(v)) for n, v in task.resources.items())),
                     tuple(sorted(task.node_selector.items())))
            if not task.tolerations and shape in fitting:
                continue  # the same pod shape (no tolerations) fitted a pool already
            check_fit(f"jobs[{i}].tasks[{k}]", task.resources, task, scenario.cluster.pools)
            if not task.tolerations:
                fitting.add(shape)
        if job.status is not None:
            for role, placed in job.status.running.items():
                for n, node in enumerate(placed):
                    if node not in nodes:
                        raise SpecError(f"jobs[{i}].status.running.{role}[{n}]", f"no node named {node!r}")
    _check_running_fits(scenario)
    _check_node_events(scenario)
    _check_changes(scenario)
    _check_progress(scenario)
    for i, load in enumerate(scenario.workloads):
        _check_refs(f"workloads[{i}]", load, namespaces, queues, classes)
        _check_leaf(f"workloads[{i}].queue", load.queue, children)
        check_fit(f"workloads[{i}]", largest_pod(load), None, scenario.cluster.pools)
        tenant = tenants.get(load.namespace)
        if tenant is not None and tenant.limit_range is not None:
            check_limit_range(f"workloads[{i}].resources", largest_pod(load), tenant)
    _unique("workloads", [w.name for w in scenario.workloads], "workload")
    _check_slurm(scenario)
    kueue.check(scenario.kueue, scenario.scheduler.kueue, {t.ns for t in scenario.tenants} | {"default"},
                scenario.cluster.pools)
    kueue.check_topology(scenario.kueue, scenario.cluster.node_labels(), scenario.jobs)
    sched = scenario.scheduler
    if sched.section is None:
        known = sorted(policies)
        if sched.policy is None:
            raise SpecError("scheduler", "give a policy (one of " + ", ".join(known) + ") or a conf")
        if sched.policy not in known:
            raise SpecError("scheduler.policy", f"unknown policy {sched.policy!r}; known: {', '.join(known)}")


def _check_sizes(scenario: Scenario) -> None:
    """Nodes, jobs and pods within the limits of `labkit.spec.model` (MAX_NODES, MAX_JOBS,
    MAX_PODS), checked before anything is expanded, so a typo of a few zeros is one line, not a
    MemoryError after minutes."""
    nodes = sum(p.count for p in scenario.cluster.pools)
    if nodes > MAX_NODES:
        raise SpecError("cluster.pools", f"{nodes:,} nodes; a scenario may have at most {MAX_NODES:,}")
    for i, job in enumerate(scenario.jobs):
        pods = sum(t.replicas_resolved for t in job.tasks)
        if pods > MAX_PODS:
            raise SpecError(f"jobs[{i}].tasks", f"{pods:,} pods; a job may have at most {MAX_PODS:,}")
    jobs = len(scenario.jobs)
    for i, load in enumerate(scenario.workloads):
        if load.trace is not None:
            jobs += len(load.trace.names)
            continue
        top = _max_value(load.gpus)
        if top / load.gpus_per_pod > MAX_PODS:
            raise SpecError(f"workloads[{i}].gpus", f"up to {top:,.0f} GPUs make more than {MAX_PODS:,} pods "
                            f"of {load.gpus_per_pod} GPUs; a job may have at most {MAX_PODS:,}")
        if load.count is not None:
            jobs += load.count
            continue
        expected = (parse_duration(load.end) - parse_duration(load.start)) / parse_duration(load.arrival.interval)
        if expected > MAX_JOBS:
            raise SpecError(f"workloads[{i}].end", f"about {expected:,.0f} jobs from start to end at one per "
                            f"{load.arrival.interval}; a scenario may have at most {MAX_JOBS:,} (give count)")
        jobs += int(expected)
    if jobs > MAX_JOBS:
        raise SpecError("workloads" if scenario.workloads else "jobs",
                        f"about {jobs:,} jobs; a scenario may have at most {MAX_JOBS:,}")


def _check_running_fits(scenario: Scenario) -> None:
    """The pods a `status` snapshot puts on a node fit it, all jobs' together (a node never holds
    more than its allocatable): the snapshot is a state the cluster could be in."""
    pool_of = {name: pool for pool in scenario.cluster.pools for name in pool.node_names()}
    used: dict[str, dict[str, float]] = {}
    for i, job in enumerate(scenario.jobs):
        if job.status is None:
            continue
        tasks = {t.name: t for t in job.tasks}
        for role, placed in job.status.running.items():
            for n, node in enumerate(placed):
                pool = pool_of.get(node)
                if pool is None:
                    continue  # named in the unknown-node check
                have = used.setdefault(node, {})
                for name, amount in tasks[role].resources.items():
                    have[name] = have.get(name, 0.0) + parse_quantity(amount)
                    capacity = parse_quantity(pool.resources.get(name, 0))
                    if have[name] > capacity:
                        raise SpecError(f"jobs[{i}].status.running.{role}[{n}]", f"node {node} has {_fmt(capacity)} "
                                        f"{name}; the snapshot's pods on it request {_fmt(have[name])}")


def _check_node_events(scenario: Scenario) -> None:
    """Each node event names a node or a pool, and makes sense for the node's state when it
    happens (in time order, ties as written, a spot pool's drawn interruptions after
    `cluster.events`): `fail` an up node, `recover` a failed one, `cordon` a schedulable one,
    `uncordon` a cordoned one (`drain` cordons, once or again)."""
    if not scenario.cluster.events and not any(pool.spot for pool in scenario.cluster.pools):
        return
    events = node_events(scenario)
    pools = {pool.name: pool.node_names() for pool in scenario.cluster.pools}
    nodes = {name for names in pools.values() for name in names}
    down: dict[str, str] = {}
    cordoned: dict[str, str] = {}
    for i, (path, event) in enumerate(events):
        if event.node not in pools and event.node not in nodes:
            raise SpecError(f"{path}.node", f"no node or pool named {event.node!r} "
                            f"(pools: {', '.join(pools)}; nodes are <pool>-<i>)")
    steps = sorted((at, i, k, kind) for i, (_, event) in enumerate(events) for k, (at, kind) in enumerate(event.steps()))
    for at, i, _, kind in steps:
        path, event = events[i]
        when = f"{at:g}s" if event.kind == "interrupt" else str(event.at)
        for node in pools.get(event.node, [event.node]):
            wrong = {"fail": node in down, "recover": node not in down, "cordon": node in cordoned,
                     "uncordon": node not in cordoned}.get(kind, False)
            if wrong:
                state = (f"already down since {down[node]}" if kind == "fail" else
                         "not down (recover follows a fail)" if kind == "recover" else
                         f"already cordoned since {cordoned[node]}" if kind == "cordon" else
                         "not cordoned (uncordon follows a cordon or drain)")
                where = f"{path}.kind" if path.startswith("cluster.events") else path
                drawn = "" if path.startswith("cluster.events") else "a drawn "
                raise SpecError(where, f"{drawn}{event.kind} at {event.at}: node {node} is {state}")
            if kind == "fail":
                down[node] = when
            elif kind == "recover":
                del down[node]
            elif kind in ("cordon", "drain"):
                cordoned[node] = when
            elif kind == "uncordon":
                del cordoned[node]


def _check_changes(scenario: Scenario) -> None:
    """Each change names a Queue or PriorityClass of the scenario (or Volcano's `default` queue),
    and a scheduler change keeps the schedule period (the session's clock, not the conf)."""
    queues = {q.name for q in scenario.queues} | {"default"}
    classes = {p.name for p in scenario.priority_classes}
    for i, change in enumerate(scenario.changes):
        if change.queue is not None and change.queue.name not in queues:
            raise SpecError(f"changes[{i}].queue.name", f"no queue named {change.queue.name!r} "
                            f"(queues: {', '.join(sorted(queues))})")
        if change.priority_class is not None and change.priority_class.name not in classes:
            raise SpecError(f"changes[{i}].priorityClass.name", f"no PriorityClass named {change.priority_class.name!r}"
                            f" (priorityClasses: {', '.join(sorted(classes)) or 'none'})")
        if change.scheduler is not None and "schedule_period" in change.scheduler.model_fields_set:
            raise SpecError(f"changes[{i}].scheduler.schedulePeriod", "the schedule period is the scheduler's "
                            "command-line flag, not its conf: a change cannot set it")


def simulated_only(scenario: Scenario, node_events: bool = False) -> None:
    """Refuse what only the simulator runs, for the adapters to a real cluster: spot pools, changes
    in time and node events (`node_events`: the adapter applies `cluster.events` itself)."""
    for k, pool in enumerate(scenario.cluster.pools):
        if pool.spot is not None:
            raise SpecError(f"cluster.pools[{k}].spot", "spot interruptions are simulated only: a real cluster's "
                                                        "spot nodes are reclaimed by its provider (remove it to run it on one)")
    if scenario.changes:
        raise SpecError("changes", "changes in time are simulated only: on a real cluster, kubectl apply them "
                                   "at their time (remove them to run it on one)")
    if scenario.cluster.events and not node_events:
        raise SpecError("cluster.events", "node events are simulated only: a real cluster's nodes fail, cordon and "
                                          "drain by its operator's hand (remove them to run it on one)")


def check_limit_range(path: str, requests: dict, tenant: Tenant) -> None:
    """Kubernetes' LimitRanger admission refuses a pod whose container (labkit pods have one, whose
    limits are its requests) or whole pod is above a LimitRange `max` or below its `min`; the
    request is the pod's, else the LimitRange's defaultRequest, else its default."""
    for item in tenant.limit_range.limits:
        for name, bound in item.max.items():
            asked = _requested(requests, item, name)
            if asked is not None and asked > parse_quantity(bound):
                raise SpecError(f"{path}.{name}", f"namespace {tenant.ns}'s LimitRange refuses the pod: maximum "
                                f"{name} usage per {item.type} is {bound}, but limit is {_fmt(asked)}")
        for name, bound in item.min.items():
            asked = _requested(requests, item, name)
            if asked is None or asked < parse_quantity(bound):
                said = "No request is specified" if asked is None else f"but request is {_fmt(asked)}"
                raise SpecError(f"{path}.{name}", f"namespace {tenant.ns}'s LimitRange refuses the pod: minimum "
                                f"{name} usage per {item.type} is {bound}, {said}")


def _requested(requests: dict, item, name: str) -> float | None:
    for source in (requests, item.stored_default_request, item.stored_default):
        if name in source:
            return parse_quantity(source[name])
    return None


def _check_slurm(scenario: Scenario) -> None:
    """Partitions name existing pools; jobs name existing partitions and QOS; QOS preempt lists resolve."""
    slurm = scenario.slurm
    partitions = [p.name for p in slurm.partitions] if slurm else []
    qos = [q.name for q in slurm.qos] if slurm else []
    known_qos = set(qos) | {"normal"}  # sacctmgr creates QOS normal
    pools = [p.name for p in scenario.cluster.pools]
    if slurm:
        _unique("slurm.partitions", partitions, "partition")
        _unique("slurm.qos", qos, "QOS")
        for i, part in enumerate(slurm.partitions):
            for k, pool in enumerate(part.pools or []):
                if pool not in pools:
                    raise SpecError(f"slurm.partitions[{i}].pools[{k}]", f"no node pool named {pool!r}")
        if sum(p.default for p in slurm.partitions) > 1:
            raise SpecError("slurm.partitions", "only one partition may be the default")
        for i, q in enumerate(slurm.qos):
            for k, other in enumerate(q.preempt):
                if other not in known_qos:
                    raise SpecError(f"slurm.qos[{i}].preempt[{k}]", f"no QOS named {other!r}")
        _check_associations(slurm)
    for i, job in enumerate(scenario.jobs):
        if job.partition is not None and job.partition not in partitions:
            raise SpecError(f"jobs[{i}].partition", f"no partition named {job.partition!r} ({_listing(set(partitions))})")
        if job.qos is not None and job.qos not in known_qos:
            raise SpecError(f"jobs[{i}].qos", f"no QOS named {job.qos!r} ({_listing(known_qos)})")
        if job.time_limit is not None and job.partition is not None:
            part = slurm.partitions[partitions.index(job.partition)]
            if part.max_time is not None and parse_duration(job.time_limit) > parse_duration(part.max_time):
                raise SpecError(f"jobs[{i}].timeLimit", f"exceeds partition {part.name}'s MaxTime ({part.max_time})")


def _check_associations(slurm) -> None:
    """Accounts hang under root or another account, without cycles; users charge an existing account."""
    accounts = [a.name for a in slurm.accounts]
    _unique("slurm.accounts", accounts, "account")
    _unique("slurm.users", [u.name for u in slurm.users], "user")
    parents = {a.name: a.parent for a in slurm.accounts}
    for i, account in enumerate(slurm.accounts):
        if account.name == "root":
            raise SpecError(f"slurm.accounts[{i}].name", "account 'root' is Slurm's own; give your accounts other names")
        chain, current = [account.name], account.parent
        while current != "root":
            if current not in parents:
                raise SpecError(f"slurm.accounts[{i}].parent", f"no account named {current!r}")
            if current in chain:
                raise SpecError(f"slurm.accounts[{i}].parent", "accounts form a cycle: " + " -> ".join(chain + [current]))
            chain.append(current)
            current = parents[current]
    for i, user in enumerate(slurm.users):
        if user.parent != "root" and user.parent not in parents:
            raise SpecError(f"slurm.users[{i}].parent", f"no account named {user.parent!r} ({_listing(set(accounts))})")


def _unique(path: str, names: list[str], what: str) -> None:
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SpecError(f"{path}[{i}]", f"{what} {name!r} is defined twice")


def _check_queues(scenario: Scenario) -> None:
    names = [q.name for q in scenario.queues]
    _unique("queues", names, "queue")
    parents = {q.name: q.parent for q in scenario.queues}
    for i, queue in enumerate(scenario.queues):
        path = f"queues[{i}]"
        if queue.name == "root":
            raise SpecError(f"{path}.name", "queue 'root' is created by Volcano; give your queues other names")
        chain, current = [queue.name], queue.parent
        while current != "root":
            if current not in parents:
                where = "" if current == queue.parent else f" (its ancestor {chain[-1]!r} names it)"
                raise SpecError(f"{path}.parent", f"no queue named {current!r}{where}")
            if current in chain:
                cycle = " -> ".join(chain[chain.index(current):] + [current])
                raise SpecError(f"{path}.parent", f"queue parents form a cycle: {cycle}")
            chain.append(current)
            current = parents[current]
        for name, amount in queue.guarantee.items():
            if name in queue.capability and parse_quantity(amount) > parse_quantity(queue.capability[name]):
                raise SpecError(f"{path}.guarantee.{name}", f"must be <= capability ({queue.capability[name]})")
        for name, amount in queue.deserved.items():
            if name in queue.capability and parse_quantity(amount) > parse_quantity(queue.capability[name]):
                raise SpecError(f"{path}.deserved.{name}", f"must be <= capability ({queue.capability[name]})")


def _check_refs(path: str, item: Job | Workload, namespaces: set[str], queues: set[str], classes: set[str]) -> None:
    if item.namespace not in namespaces:
        raise SpecError(f"{path}.namespace", f"no tenant has namespace {item.namespace!r} ({_listing(namespaces)})")
    if item.queue not in queues:
        raise SpecError(f"{path}.queue", f"no queue named {item.queue!r} ({_listing(queues)})")
    if item.priority_class_name is not None and item.priority_class_name not in classes:
        raise SpecError(
            f"{path}.priorityClassName", f"no PriorityClass named {item.priority_class_name!r} ({_listing(classes)})"
        )


def placement_levels(scenario: Scenario) -> list[str]:
    """The topology levels a gang can span, lowest first: ``node``, each ``cluster.topology`` tier,
    ``cluster`` (the cluster-top HyperNode above the last tier)."""
    topology = scenario.cluster.topology
    return ["node", *(tier.name for tier in (topology.tiers if topology else [])), "cluster"]


def _check_progress(scenario: Scenario) -> None:
    """The job progress model's names: classes are unique, a speed names a pool's GPU model, a
    placement a topology level, a job's workloadClass a class."""
    _unique("workloadClasses", [c.name for c in scenario.workload_classes], "workload class")
    models = {pool.gpu_model for pool in scenario.cluster.pools if pool.gpu_model is not None}
    levels = placement_levels(scenario)
    for i, cls in enumerate(scenario.workload_classes):
        for model in cls.speeds:
            if model not in models:
                raise SpecError(f"workloadClasses[{i}].speeds.{model}",
                                f"unknown GPU model {model!r}: no pool has it as gpuModel ({_listing(models)})")
        _check_placement(f"workloadClasses[{i}].placement", cls.placement, levels)
    names = {c.name for c in scenario.workload_classes}
    for kind, items in (("jobs", scenario.jobs), ("workloads", scenario.workloads)):
        for i, item in enumerate(items):
            if item.workload_class is not None and item.workload_class not in names:
                raise SpecError(f"{kind}[{i}].workloadClass",
                                f"no workload class named {item.workload_class!r} ({_listing(names)})")
    for i, job in enumerate(scenario.jobs):
        _check_placement(f"jobs[{i}].placement", job.placement, levels)


def _check_placement(path: str, placement: dict, levels: list[str]) -> None:
    for level in placement:
        if level not in levels:
            raise SpecError(f"{path}.{level}", f"not a topology level; a gang spans one of {', '.join(levels)}")


def _check_leaf(path: str, queue: str, children: Counter) -> None:
    """Volcano's job admission webhook (jobs/validate/admit_job.go) takes jobs into leaf queues only."""
    if queue == "root":
        raise SpecError(path, "Volcano's admission webhook refuses it: can not submit job to root queue")
    if children[queue]:
        raise SpecError(path, f"Volcano's admission webhook refuses it: can only submit job to leaf queue, "
                              f"queue `{queue}` has {children[queue]} child queues")


def _listing(names: set[str]) -> str:
    return "known: " + ", ".join(sorted(names)) if names else "none defined"


def largest_pod(load: Workload) -> dict[str, float]:
    """The biggest pod a workload generator can make (its GPU count at the top of its range, a
    trace's largest job)."""
    top = max(load.trace.gpus, default=0) if load.trace is not None else int(_max_value(load.gpus))
    return load.pod_shape(top)[1]


def _max_value(random: object) -> float:
    if not hasattr(random, "distribution"):
        return parse_duration(random)
    if random.max is not None:
        return parse_duration(random.max)
    if random.distribution == "constant":
        return parse_duration(random.value)
    if random.distribution == "uniform":
        return parse_duration(random.high)
    if random.distribution == "choice":
        return max(parse_duration(c) for c in random.choices)
    return 0.0  # unbounded distributions have no largest pod to check


def check_fit(path: str, requests: dict, task: Task | None, pools: list[NodePool]) -> None:
    """A pod must fit at least one node pool: resources, nodeSelector labels and taints."""
    wanted = {name: parse_quantity(v) for name, v in requests.items()}
    selector = task.node_selector if task else {}
    tolerations = task.tolerations if task else []
    candidates = [p for p in pools if all(p.labels.get(k) == v for k, v in selector.items())]
    if not candidates:
        labels = ", ".join(f"{k}={v}" for k, v in selector.items())
        raise SpecError(f"{path}.nodeSelector", f"no node pool has the labels {labels}")
    candidates = [p for p in candidates if _tolerated(p, tolerations)]
    if not candidates:
        raise SpecError(f"{path}.tolerations", "every matching node pool has a taint this pod does not tolerate")
    for pool in candidates:
        have = {name: parse_quantity(v) for name, v in pool.resources.items()}
        if all(amount <= have.get(name, 0.0) for name, amount in wanted.items() if amount > 0):
            return
    asked = ", ".join(f"{n}={_fmt(a)}" for n, a in wanted.items() if a > 0)
    sizes = "; ".join(
        f"{p.name}: " + ", ".join(f"{n}={_fmt(parse_quantity(p.resources.get(n, 0)))}" for n in wanted if wanted[n] > 0)
        for p in candidates
    )
    where = f"{path}.resources" if task else path
    raise SpecError(where, f"a pod requesting {asked} fits no node pool ({sizes})")


def _tolerated(pool: NodePool, tolerations: list[Toleration]) -> bool:
    return all(
        any(t.tolerates(taint) for t in tolerations) for taint in pool.taints if taint.effect != "PreferNoSchedule"
    )


def _fmt(value: float) -> str:
    if value >= 2**30 and value % 2**30 == 0:
        return f"{value / 2**30:g}Gi"
    return f"{value:g}"
