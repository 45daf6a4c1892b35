"""The API server's ResourceQuota admission of pod creation, as the clock applies it to every
Kubernetes policy family (Volcano, the kube-scheduler, Kueue): the namespaces' quotas compiled to
arrays (`resource_quotas`, called by `compile.py`) and the check of each pod
(`ResourceQuotas.admit`; the numba cores keep the same arrays, ``core._quota_arrays``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..spec.model import Tenant
from ..spec.quantity import parse_quantity


@dataclass(frozen=True)
class ResourceQuotas:
    """The namespaces' ResourceQuotas as the API server's admission checks each pod creation
    (``apiserver/pkg/admission/plugin/resourcequota/controller.go checkRequest``).

    Amounts are whole milli-units (millicores, millibytes, millipods), as ``resource.Quantity``
    keeps them exact: sums do not depend on the order pods are added in.

    ``names`` (Qn,) the quota of each tenant (named after it); ``keys`` (K,) tracked keys, sorted
    (``pods``, ``requests.<r>`` (``cpu``/``memory`` alone mean requests), ``limits.<r>``);
    ``hard`` (Qn, K) int64 and ``tracked`` (Qn, K) bool, whether that quota tracks the key;
    ``job_quota`` (J,) the quota of a job's namespace, -1 = none; ``task_usage`` (T, K) int64 what a
    pod counts; ``task_unset`` (T, K) a compute key the pod's containers leave unset.
    """

    names: tuple[str, ...]
    keys: tuple[str, ...]
    hard: np.ndarray
    tracked: np.ndarray
    job_quota: np.ndarray
    task_usage: np.ndarray
    task_unset: np.ndarray
    task_pod: tuple[str, ...]
    task_job: np.ndarray

    def admit(self, t: int, counted: np.ndarray) -> str | None:
        """None if creating pod ``t`` passes its namespace's quota, else the 403 message. ``counted``
        (T,) marks the pods that count against quotas now (created, not yet deleted)."""
        q = int(self.job_quota[self.task_job[t]])
        if q < 0:
            return None
        mine = counted & (self.job_quota[self.task_job] == q)
        return self.refusal(t, self.task_usage[mine].sum(axis=0))

    def must_specify(self, t: int) -> bool:
        """The pod leaves a compute key its quota tracks unset: refused whatever the usage."""
        return bool((self.tracked[self.job_quota[self.task_job[t]]] & self.task_unset[t]).any())

    def refusal(self, t: int, used: np.ndarray) -> str | None:
        """The 403 message for pod ``t`` of a namespace with a quota, whose counted pods use ``used``
        (K,), or None."""
        q = int(self.job_quota[self.task_job[t]])
        tracked = self.tracked[q]
        unset = [self.keys[k] for k in np.flatnonzero(tracked & self.task_unset[t])]
        if unset:
            return f'pods "{self.task_pod[t]}" is forbidden: failed quota: {self.names[q]}: must specify {",".join(unset)}'
        request = self.task_usage[t]
        over = [k for k in np.flatnonzero(tracked) if used[k] + request[k] > self.hard[q, k]]
        if not over:
            return None

        def listing(values: np.ndarray) -> str:
            return ",".join(f"{self.keys[k]}={format_quantity(self.keys[k], values[k] / 1000)}" for k in over)

        return (f'pods "{self.task_pod[t]}" is forbidden: exceeded quota: {self.names[q]}, '
                f"requested: {listing(request)}, used: {listing(used)}, limited: {listing(self.hard[q])}")


def resource_quotas(tenants: list[Tenant], job_namespaces: list[str], pods: list[tuple[int, str, dict, dict]]
                    ) -> ResourceQuotas | None:
    """Compile the tenants' quotas. ``pods`` are (job, pod name, requests, limits) after LimitRange."""
    with_quota = [t for t in tenants if t.resource_quota is not None]
    if not with_quota:
        return None
    keys = sorted({_quota_key(k) for t in with_quota for k in t.resource_quota.hard if _quota_key(k)})
    hard = np.zeros((len(with_quota), len(keys)), np.int64)
    tracked = np.zeros((len(with_quota), len(keys)), bool)
    for q, tenant in enumerate(with_quota):
        for key, value in tenant.resource_quota.hard.items():
            if _quota_key(key):
                k = keys.index(_quota_key(key))
                hard[q, k], tracked[q, k] = _milli(value), True
    quota_of = {t.ns: q for q, t in enumerate(with_quota)}
    usage = np.zeros((len(pods), len(keys)), np.int64)
    unset = np.zeros((len(pods), len(keys)), bool)
    for i, (_, _, requests, limits) in enumerate(pods):
        for k, key in enumerate(keys):
            kind, _, resource = key.partition(".")
            if key == "pods":
                usage[i, k] = 1000
                continue
            values = requests if kind == "requests" else limits
            if resource in values:
                usage[i, k] = _milli(values[resource])
            elif resource in ("cpu", "memory", "ephemeral-storage"):
                unset[i, k] = True  # compute resources must be set when a quota tracks them
    return ResourceQuotas(
        names=tuple(t.name for t in with_quota), keys=tuple(keys), hard=hard, tracked=tracked,
        job_quota=np.array([quota_of.get(ns, -1) for ns in job_namespaces], np.int64), task_usage=usage,
        task_unset=unset, task_pod=tuple(name for _, name, _, _ in pods),
        task_job=np.array([j for j, _, _, _ in pods], np.int64))


def _milli(value) -> int:
    """A quantity in whole milli-units (Kubernetes rounds a finer one up)."""
    return math.ceil(parse_quantity(value) * 1000 - 1e-6)


def _quota_key(key: str) -> str | None:
    """A hard key as the pod evaluator tracks it (``cpu`` = ``requests.cpu``); None if pods never count."""
    if key in ("pods", "count/pods"):
        return "pods"
    if key in ("cpu", "memory", "ephemeral-storage"):
        return f"requests.{key}"
    if key.startswith(("requests.", "limits.")) and key not in ("requests.storage",):
        return key
    return None


def format_quantity(key: str, value: float) -> str:
    """A value as ``resource.Quantity.String()`` prints it, for the API server's quota messages and
    Kueue's (``resources.ResourceQuantityString``) alike: memory and ephemeral-storage are BinarySI
    (a binary suffix where one divides the amount exactly), a fraction is printed in millis, else a
    plain number."""
    if key.endswith(("memory", "ephemeral-storage")):
        for suffix, scale in (("Ei", 2.0**60), ("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20),
                              ("Ki", 2.0**10)):
            if value >= scale and float(value / scale).is_integer():
                return f"{int(value / scale)}{suffix}"
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"
