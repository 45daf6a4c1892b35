"""Kueue's Topology Aware Scheduling (TAS): a TAS flavor's tree of topology domains and the placement
of a podset on it, as kubernetes-sigs/kueue does it (``pkg/cache/scheduler/tas_topology_tree.go``,
``tas_flavor_snapshot.go``: ``findTopologyAssignment``).

A domain of level i is the tuple of its nodes' values of the Topology's first i+1 level labels; the
leaves are the lowest level (one node each when that level is ``kubernetes.io/hostname``), holding
the summed free capacity of their nodes. Phase 1 counts the pods each leaf holds and sums them up the
tree. Phase 2 finds the domains at the requested level that hold the podset (required: one domain or
nothing; preferred: that level, else each level above, else spread over the domains of the top level;
unconstrained: the lowest level), then walks down level by level keeping as few domains as it can,
and returns the pods per leaf. Profiles as Kueue's defaults: BestFit (domains by free pods
descending, the last one the tightest that still fits), LeastFreeCapacity for unconstrained podsets
(``TASProfileMixed``, on by default since v0.15).

A podset's slices (``podset-slice-required-topology``), podset groups (leader and workers),
balanced placement and preferred node affinity (alpha gates, off by default) are not modelled: one
pod is one slice, as for a podset that asks for none.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

HOSTNAME = "kubernetes.io/hostname"


class Domain:
    """A topology domain (``domain``) and the algorithm's counts for it (``domainState``)."""

    __slots__ = ("children", "leaf", "pods", "slices", "values")

    def __init__(self, values: tuple[str, ...], leaf: int = -1):
        self.values = values
        self.children: list[Domain] = []
        self.leaf = leaf
        self.pods = 0
        self.slices = 0


class TopologyTree:
    """The domains of a TAS flavor (``topologyTree``) over ``nodes``: each node's level values, in node
    order (the flavor's nodes that carry every level label)."""

    def __init__(self, name: str, levels: Sequence[str], nodes: Sequence[tuple[int, tuple[str, ...]]]):
        self.name = name
        self.levels = tuple(levels)
        self.hostname = self.levels[-1] == HOSTNAME
        self.per_level: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.levels]
        self.leaves: list[Domain] = []
        self.leaf_nodes: list[list[int]] = []
        self.node_leaf: dict[int, int] = {}
        for node, values in nodes:
            leaf = self.per_level[-1].get(values)
            if leaf is None:
                leaf = self.per_level[-1][values] = Domain(values, len(self.leaves))
                self.leaves.append(leaf)
                self.leaf_nodes.append([])
            self.leaf_nodes[leaf.leaf].append(node)
            self.node_leaf[node] = leaf.leaf
        for level in range(len(self.levels) - 1, 0, -1):
            for values, domain in self.per_level[level].items():
                parent = self.per_level[level - 1].get(values[:-1])
                if parent is None:
                    parent = self.per_level[level - 1][values[:-1]] = Domain(values[:-1])
                parent.children.append(domain)

    def level_of(self, key: str) -> int:
        return self.levels.index(key)


def count_in(request: np.ndarray, capacity: np.ndarray, resource_names: Sequence[str]) -> tuple[int, str]:
    """``CountInWithLimitingResource``: how many pods of ``request`` fit in ``capacity``, and the
    resource giving the least (ties to the first name alphabetically); requests of 0 do not limit."""
    best, limiting = None, ""
    for r in np.flatnonzero(request > 0):
        n = max(0, math.floor(capacity[r] / request[r] + 1e-9))
        name = resource_names[r]
        if best is None or n < best or (n == best and name < limiting):
            best, limiting = n, name
    return (0, "") if best is None else (best, limiting)


def _sorted(domains: list[Domain], unconstrained: bool) -> list[Domain]:
    """``sortedDomains``: BestFit by slices descending, LeastFreeCapacity (unconstrained) ascending;
    then pods ascending, then level values."""
    sign = 1 if unconstrained else -1
    return sorted(domains, key=lambda d: (sign * d.slices, d.pods, d.values))


def _best_fit(domains: list[Domain], needed: int) -> Domain:
    """``findBestFitDomainForSlices``: the first domain with the fewest slices that still holds
    ``needed``, else the first."""
    best, fewest = domains[0], None
    for d in domains:
        if d.slices >= needed and (fewest is None or d.slices < fewest):
            best, fewest = d, d.slices
    return best


def _to_minimum(domains: list[Domain], count: int, unconstrained: bool) -> list[Domain]:
    """``updateCountsToMinimumGeneric`` (one pod per slice, no leaders): take domains in order, the
    last one the tightest that holds what is left (BestFit), and set each one's pods to its share."""
    out, remaining = [], count
    for i, d in enumerate(domains):
        if not unconstrained and d.slices >= remaining:
            d = _best_fit(domains[i:], remaining)
        out.append(d)
        if d.slices >= remaining:
            d.pods = d.slices = remaining
            return out
        d.pods = d.slices
        remaining -= d.slices
    raise AssertionError(f"{remaining} of {count} pods left over")  # phase 1 counted room for them


class _NoFit(Exception):
    pass


def find_assignment(tree: TopologyTree, free: np.ndarray, request: np.ndarray, count: int, level: str | None,
                    required: bool, resource_names: Sequence[str], excluded: Sequence[str | None] | None = None
                    ) -> tuple[list[tuple[int, int]], str]:
    """``findTopologyAssignment`` for one podset: ``count`` pods of ``request`` on the leaves'
    ``free`` capacity (leaves x resources), at ``level`` (None: unconstrained) as ``required`` or
    preferred. ``excluded``: per leaf, why a node-level leaf cannot take the pod (an untolerated
    taint, as ``taint "key=value:Effect"``) or None. Returns ((leaf, pods) in level-value order, "")
    or ([], Kueue's reason)."""
    unconstrained = level is None
    stats: Counter[str] = Counter()
    for leaf in tree.leaves:
        if excluded is not None and excluded[leaf.leaf] is not None:
            stats[excluded[leaf.leaf]] += 1
            leaf.pods = leaf.slices = 0
            continue
        leaf.pods, limiting = count_in(request, free[leaf.leaf], resource_names)
        leaf.slices = leaf.pods
        if leaf.pods == 0 and limiting:
            stats[f"resource {_quote(limiting)}"] += 1
    for lvl in range(len(tree.levels) - 2, -1, -1):
        for d in tree.per_level[lvl].values():
            d.pods = d.slices = sum(c.pods for c in d.children)

    def not_fit(fit: int) -> str:
        what = (f"topology {_quote(tree.name)} doesn't allow to fit any of {count} pod(s)" if fit == 0 else
                f"topology {_quote(tree.name)} allows to fit only {fit} out of {count} pod(s)")
        if stats:
            reasons = sorted(f"{key}: {n}" for key, n in stats.items())
            what += f". Total nodes: {len(tree.leaves)}; excluded: " + ", ".join(reasons)
        return what

    def find_level(idx: int) -> tuple[int, list[Domain]]:
        """``findLevelWithFitDomains``."""
        domains = list(tree.per_level[idx].values())
        if not domains:
            raise _NoFit(f"no topology domains at level: {tree.levels[idx]}")
        ordered = _sorted(domains, unconstrained)
        top = ordered[0]
        if not unconstrained and top.slices >= count:
            top = _best_fit(ordered, count)
        if unconstrained:
            for d in ordered:
                if d.slices >= count:
                    return idx, [d]
        if top.slices >= count:
            return idx, [top]
        if required:
            raise _NoFit(not_fit(top.slices))
        if idx > 0 and not unconstrained:
            return find_level(idx - 1)
        out, remaining = [], count
        for i, d in enumerate(ordered):
            if remaining <= 0:
                break
            if not unconstrained and d.slices >= remaining:
                d = _best_fit(ordered[i:], remaining)
            out.append(d)
            remaining -= d.slices
        if remaining > 0:
            raise _NoFit(not_fit(count - remaining))
        return idx, out

    try:
        fit_level, fit = find_level(tree.level_of(level) if level is not None else len(tree.levels) - 1)
    except _NoFit as no:
        return [], str(no)
    fit = _to_minimum(fit, count, unconstrained)
    for _ in range(fit_level, len(tree.levels) - 1):
        fit = _to_minimum(_sorted([c for d in fit for c in d.children], unconstrained), count, unconstrained)
    return [(d.leaf, d.pods) for d in sorted(fit, key=lambda d: d.values) if d.pods > 0], ""


def _quote(text: str) -> str:
    """Go's %q for plain label and resource names."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def taint_exclusion(key: str, value: str, effect: str) -> str:
    """How the exclusion stats name a node left out for an untolerated taint: ``taint %q`` of
    ``Taint.ToString`` (key=value:effect, without the parts that are empty)."""
    head = f"{key}={value}" if value else key
    return "taint " + _quote(f"{head}:{effect}" if effect else (f"{head}:" if value else head))


class Snapshot:
    """The TAS flavors in one scheduling cycle (``TASFlavorSnapshot``): per flavor its tree, the free
    capacity of its leaves with no TAS workload on them (node allocatable less the other pods:
    ``freeCapacity``) and with the admitted TAS workloads' assignments taken off (``tasUsage``), and the
    usage assumed by the podsets of the workload being placed (``assumedUsage``)."""

    def __init__(self, trees: dict[str, TopologyTree], empty: dict[str, np.ndarray], resource_names: Sequence[str]):
        self.trees = trees
        self.empty = empty
        self.free = {f: a.copy() for f, a in empty.items()}
        self.assumed = {f: np.zeros_like(a) for f, a in empty.items()}
        self.resource_names = resource_names

    def add(self, flavor: str, placement: list[tuple[int, int]], request: np.ndarray, sign: float = 1.0,
            assumed: bool = False) -> None:
        """Take ``placement``'s pods of ``request`` off the flavor's free capacity (``sign`` -1: give them
        back); ``assumed``: as the usage of the workload being placed only."""
        book = self.assumed[flavor] if assumed else self.free[flavor]
        for leaf, n in placement:
            book[leaf] -= sign * n * request

    def fits(self, flavor: str, placement: list[tuple[int, int]], request: np.ndarray) -> bool:
        """``TASFlavorSnapshot.Fits``: each leaf of ``placement`` still holds its pods."""
        free = self.free[flavor]
        return all(count_in(request, free[leaf], self.resource_names)[0] >= n for leaf, n in placement)

    def find(self, flavor: str, request: np.ndarray, count: int, level: str | None, required: bool,
             excluded: Sequence[str | None] | None, simulate_empty: bool = False) -> tuple[list[tuple[int, int]], str]:
        """:func:`find_assignment` on the flavor, on its free capacity or, ``simulate_empty``, as if no
        TAS workload were admitted (``WithSimulateEmpty``); either less the assumed usage."""
        free = (self.empty if simulate_empty else self.free)[flavor] - self.assumed[flavor]
        return find_assignment(self.trees[flavor], free, request, count, level, required, self.resource_names,
                               excluded)
