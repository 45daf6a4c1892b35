"""What the actions share (pkg/scheduler/util, actions/utils): the feasible-node scan with its
predicate cache, the allocate and preempt predicates, a task queue, a decision's reason."""

from __future__ import annotations

from labkit.engine.framework import (
    NodeInfo,
    PriorityQueue,
    Session,
    TaskInfo,
    fits,
)

MIN_NODES_TO_FIND = 100
MIN_PERCENTAGE_OF_NODES_TO_FIND = 5


def nodes_to_find(n_nodes: int) -> int:
    """CalculateNumOfFeasibleNodesToFind with the default options: every node up to 100
    nodes, else an adaptive 50% - n/125 (at least 5%, at least 100 nodes)."""
    if n_nodes <= MIN_NODES_TO_FIND:
        return n_nodes
    percentage = max(50 - n_nodes // 125, MIN_PERCENTAGE_OF_NODES_TO_FIND)
    return max(n_nodes * percentage // 100, MIN_NODES_TO_FIND)


class NodeScan:
    """util.PredicateHelper: finds feasible nodes for a task, remembering, per job and task
    role, the nodes that already failed a task of that role (the predicate error cache)."""

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.failed: dict[tuple[int, str], dict[int, str]] = {}

    def feasible(self, task: TaskInfo, nodes: list[NodeInfo], predicate) -> tuple[list[NodeInfo], dict[int, str]]:
        """PredicateNodes: scan ``nodes`` circularly from the session's rotating start, stop
        once more than enough feasible nodes were seen, and return (feasible, failures by
        node index). Volcano scans with 16 workers; we scan in order."""
        feasible: list[NodeInfo] = []
        failures: dict[int, str] = {}
        if not nodes:
            return feasible, failures
        wanted = nodes_to_find(len(nodes))
        cache = self.failed.setdefault((task.job, task.role), {}) if task.role else None
        start = self.ssn.next_node
        processed = 0
        for i in range(len(nodes)):
            node = nodes[(start + i) % len(nodes)]
            processed += 1
            failure = cache.get(node.index) if cache else None
            if failure is None:
                failure = predicate(task, node)
                if failure and cache is not None:
                    cache[node.index] = failure
            if failure:
                failures[node.index] = failure
                continue
            if len(feasible) == wanted:
                break
            feasible.append(node)
        self.ssn.next_node = (start + processed) % len(nodes)
        return feasible, failures


def allocate_predicate(ssn: Session, task: TaskInfo, node: NodeInfo) -> str | None:
    """allocate's predicate: the request fits FutureIdle, then PredicateForAllocateAction."""
    if not fits(task.request, node.future_idle()):
        return "unschedulable: insufficient resources"
    return ssn.predicate(task, node)


def preempt_predicate(ssn: Session, task: TaskInfo, node: NodeInfo) -> str | None:
    """PredicateForPreemptAction: only an UnschedulableAndUnresolvable failure drops a node;
    room is what the eviction loop makes."""
    failure = ssn.predicate(task, node)
    return failure if failure and failure.startswith("unresolvable") else None


def preempt_candidates(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """FilterOutUnschedulableAndUnresolvableNodesForTask, then the preempt predicate."""
    skip = ssn.jobs[task.job].fit_errors.get(task.index, set())
    nodes = [n for n in ssn.nodes if n.index not in skip]
    return NodeScan(ssn).feasible(task, nodes, lambda t, n: preempt_predicate(ssn, t, n))[0]


def task_queue(ssn: Session, tasks) -> PriorityQueue:
    pq = PriorityQueue(ssn.task_order)
    for t in tasks:
        pq.push(t)
    return pq


def reason(task: TaskInfo, what: str) -> str:
    return f"{what} for {task.name}"


def victims_can_make_room(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """util.ValidateVictims: FutureIdle plus everything the victims hold fits the task."""
    room = node.future_idle() + sum((v.request for v in victims), 0 * task.request)
    return fits(task.request, room)
