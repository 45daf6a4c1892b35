"""The session's HyperNode tree (pkg/scheduler/api/hyper_node_info.go, framework/session.go).

Built from the Problem's ``node_hypernode`` columns, with the virtual ``<cluster-top-hypernode>``
that ``Session.addClusterTopHyperNode`` puts above every HyperNode without a parent: its tier is
one more than the highest real tier (1 when there is none) and it holds every node.
HyperNodes are indices; the root is the last one.
"""

from __future__ import annotations

import numpy as np

from labkit.engine.problem import Problem

CLUSTER_TOP_HYPERNODE = "<cluster-top-hypernode>"

NONE = -1
"""No HyperNode (Volcano's empty name)."""


class HyperNodes:
    """Names, tiers, parents and member nodes of every HyperNode, plus the root."""

    def __init__(self, problem: Problem):
        real = len(problem.hypernode_names)
        tiers = [int(t) for t in problem.hypernode_tier]
        self.root = real
        self.names = [*problem.hypernode_names, CLUSTER_TOP_HYPERNODE]
        self.tier = [*tiers, max(tiers, default=0) + 1]
        self.tiers = sorted(set(self.tier))
        """HyperNodesTiers: every tier in use, the root's included, lowest first."""
        columns = self._columns = problem.node_hypernode
        self.members: list[list[int]] = [[] for _ in range(real)] + [list(range(problem.n_nodes))]
        for h in range(real):
            self.members[h] = np.flatnonzero(columns[:, tiers[h] - 1] == h).tolist()
        self.parent = [self.root] * real + [NONE]
        for h in range(real):
            if self.members[h]:
                above = [int(x) for x in columns[self.members[h][0], tiers[h]:] if x >= 0]
                self.parent[h] = above[0] if above else self.root
        self.children: list[list[int]] = [[] for _ in self.names]
        for h in range(real):
            self.children[self.parent[h]].append(h)
        lowest = self.tiers[0]
        self._lowest = ([self.root] * problem.n_nodes if lowest == self.tier[self.root]
                        else columns[:, lowest - 1].tolist())

    def of_node(self, node: int) -> int:
        """util.FindHyperNodeForNode: the HyperNode of the lowest tier holding ``node`` (NONE if
        no HyperNode of that tier holds it)."""
        return self._lowest[node]

    def ancestors(self, h: int) -> list[int]:
        """GetAncestors: ``h``, its parent, ..., the root."""
        out = []
        while h != NONE:
            out.append(h)
            h = self.parent[h]
        return out

    def lca(self, h: int, other: int) -> int:
        """GetLCAHyperNode: the lowest common ancestor (either one when the other is NONE)."""
        if h == NONE:
            return other
        if other == NONE:
            return h
        mine = set(self.ancestors(h))
        return next((a for a in self.ancestors(other) if a in mine), NONE)

    def holding(self, node: int) -> set[int]:
        """Every HyperNode whose members include ``node``, the root's included."""
        return {self.root} | {h for h in self._columns[node].tolist() if h >= 0}


def span_level(nodes: np.ndarray, node_hypernode: np.ndarray) -> int:
    """The topology level a gang on ``nodes`` spans (``node_hypernode``: the Problem's node ->
    HyperNode id per tier, -1 = none): 0 on one node, k when one HyperNode of tier k holds them
    all (and none of a lower tier does), the number of tiers + 1 when only the cluster-top
    HyperNode does. No nodes: 0."""
    if len(nodes) == 0 or (nodes == nodes[0]).all():
        return 0
    for k in range(node_hypernode.shape[1]):
        ids = node_hypernode[nodes, k]
        if ids[0] >= 0 and (ids == ids[0]).all():
            return k + 1
    return node_hypernode.shape[1] + 1
