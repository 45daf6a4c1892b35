"""Rules that span several fields of a Scenario: references, cycles, and pods that fit no node.

Each rule raises `SpecError` with the YAML path of the field at fault, so the user reads one line
such as `jobs[3].queue: no queue named 'team-x' (queues: default, team-a)`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import SpecError
from . import kueue
from .model import Job, NodePool, Scenario, Task, Toleration, Workload
from .quantity import parse_duration, parse_quantity

# Volcano creates these two queues itself (`cache.go newDefaultAndRootQueue`).
BUILTIN_QUEUES = ("root", "default")


def check(scenario: Scenario, policies: Iterable[str]) -> None:
    """Raise SpecError for the first cross-field rule the scenario breaks."""
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
    nodes = {name for pool in scenario.cluster.pools for name in pool.node_names()}
    seen: dict[tuple[str, str], int] = {}
    fitting: set[tuple] = set()
    for i, job in enumerate(scenario.jobs):
        key = (job.namespace, job.name)
        if key in seen:
            raise SpecError(f"jobs[{i}].name", f"job {job.namespace}/{job.name} is already jobs[{seen[key]}]")
        seen[key] = i
        _check_refs(f"jobs[{i}]", job, namespaces, queues, classes)
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
    for i, load in enumerate(scenario.workloads):
        _check_refs(f"workloads[{i}]", load, namespaces, queues, classes)
        check_fit(f"workloads[{i}]", largest_pod(load), None, scenario.cluster.pools)
    _unique("workloads", [w.name for w in scenario.workloads], "workload")
    _check_slurm(scenario)
    kueue.check(scenario.kueue, scenario.scheduler.kueue, {t.ns for t in scenario.tenants} | {"default"})
    sched = scenario.scheduler
    if sched.section is None:
        known = sorted(policies)
        if sched.policy is None:
            raise SpecError("scheduler", "give a policy (one of " + ", ".join(known) + ") or a conf")
        if sched.policy not in known:
            raise SpecError("scheduler.policy", f"unknown policy {sched.policy!r}; known: {', '.join(known)}")


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
        if queue.parent != "root" and queue.parent not in parents:
            raise SpecError(f"{path}.parent", f"no queue named {queue.parent!r}")
        chain, current = [queue.name], queue.parent
        while current != "root":
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
