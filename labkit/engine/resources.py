"""Resource-vector comparisons with Volcano's exact semantics (pkg/scheduler/api/resource_info.go).

A resource is a float64 vector over ``problem.resource_names`` (cpu milli, memory bytes, pods,
scalars milli). Volcano's ``Resource`` keeps cpu and memory as fields and everything else in a
map, and several comparisons look only at the dimensions a *request* names; these helpers spell
out each variant once, named after the Go function it mirrors.

Two details matter everywhere:

* ``pods`` is an "ignored scalar" for the request-dimension comparisons (every pod requests one),
  but it is compared by the plain ``LessEqual`` (that is how max-pods is enforced on a node).
* Only ``LessEqual``-style checks tolerate ``MIN_RESOURCE`` (0.1); the ``...WithDimension``
  checks used by queue quotas compare strictly.
"""

from __future__ import annotations

import numpy as np

from labkit.engine.problem import CPU, MEMORY, MIN_RESOURCE, PODS


def _le(left, right):
    """lessEqualFunc: ``l < r`` or within the 0.1 tolerance (element-wise)."""
    return (left < right) | (np.abs(left - right) < MIN_RESOURCE)


def _requested(req: np.ndarray) -> np.ndarray:
    """Dimensions a request names, without pods (IsIgnoredScalarResource)."""
    named = req > 0
    named[PODS] = False
    return named


def less_equal(left: np.ndarray, right: np.ndarray) -> bool:
    """Resource.LessEqual(rr, Zero): every dimension of left fits in right (with tolerance)."""
    return bool(np.all(_le(left, right)))


def less_equal_on_requested(left: np.ndarray, right: np.ndarray, req: np.ndarray) -> bool:
    """Resource.LessEqualWithDimensionAndResourcesName: left <= right, strictly, on the
    dimensions ``req`` names (pods excluded). Queue quota checks use this."""
    dims = _requested(req)
    return bool(np.all(left[dims] <= right[dims]))


def less_equal_partly_zero_filtered(left: np.ndarray, right: np.ndarray, req: np.ndarray) -> bool:
    """Resource.LessEqualPartlyWithDimensionZeroFiltered: on at least one requested dimension
    that is not zero on both sides, left <= right (with tolerance)."""
    dims = _requested(req) & ~((left < MIN_RESOURCE) & (right < MIN_RESOURCE))
    return bool(np.any(_le(left[dims], right[dims])))


def greater_partly_on_relevant(left: np.ndarray, right: np.ndarray, right_named: np.ndarray,
                               req: np.ndarray) -> bool:
    """Resource.GreaterPartlyWithRelevantDimensions: left > right on some dimension ``req``
    names that ``right`` also has (cpu/memory: right >= 0.1; scalars: named in right)."""
    relevant = _requested(req) & right_named
    relevant[CPU] &= right[CPU] >= MIN_RESOURCE
    relevant[MEMORY] &= right[MEMORY] >= MIN_RESOURCE
    return bool(np.any(left[relevant] > right[relevant]))


def resource_names(res: np.ndarray) -> np.ndarray:
    """Resource.ResourceNames as a mask: dimensions holding at least 0.1 (pods included)."""
    return res >= MIN_RESOURCE


def is_empty(res: np.ndarray) -> bool:
    """Resource.IsEmpty: nothing but pods (every other dimension below 0.1)."""
    rest = np.delete(res, PODS)
    return bool(np.all(rest < MIN_RESOURCE))


def exceeded_part(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """api.ExceededPart: the per-dimension positive part of ``left - right``."""
    return np.maximum(left - right, 0.0)


def share(allocated: float, total: float) -> float:
    """helpers.Share: allocated/total, with x/0 = 1 for x > 0 and 0/0 = 0."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def dominant_share(allocated: np.ndarray, total: np.ndarray) -> float:
    """Largest share over the dimensions ``total`` names (drf calculateShare, proportion and
    capacity updateQueueAttrShare)."""
    best = 0.0
    for r in np.flatnonzero(resource_names(total)):
        best = max(best, share(allocated[r], total[r]))
    return best


def intersects(a: np.ndarray, b: np.ndarray, ignore_pods: bool = False) -> bool:
    """api.Intersection (or IntersectionWithIgnoredScalarResources) is not empty."""
    both = resource_names(a) & resource_names(b)
    if ignore_pods:
        both[PODS] = False
    return bool(np.any(both))
