"""Namespace admission of a burst of pods: LimitRange (defaults, then min/max), then ResourceQuota.

The order is the API server's: the LimitRanger plugin fills missing requests/limits and rejects a
container outside min/max, then the ResourceQuota plugin adds the pod's requests to the namespace's
usage and refuses it with ``exceeded quota`` when a `spec.hard` entry would be passed. Pods are
admitted in submit order and none has finished (a burst submitted together): the verdicts of a
burst at a glance, with LimitRange min/max, which the engine does not check. The engine applies
the ResourceQuota part as the controllers create pods (`Rejected` events, reason `FailedCreate`).
"""

from __future__ import annotations

import pandas as pd

from ..spec import Scenario
from ..spec.quantity import parse_quantity

COLUMNS = ["pod", "namespace", "cpu", "nvidia.com/gpu", "verdict", "message"]


def _fmt(value: float) -> str:
    return f"{value:g}"


def _container(requests: dict[str, float], tenant) -> tuple[dict[str, float], dict[str, float], str | None]:
    """(requests, limits, refusal) after the tenant's LimitRange (Container items)."""
    limits: dict[str, float] = {}
    for item in tenant.limit_range.limits if tenant and tenant.limit_range else []:
        if item.type != "Container":
            continue
        for name, amount in item.default.items():
            limits.setdefault(name, parse_quantity(amount))
        for name, amount in item.default_request.items():
            requests.setdefault(name, parse_quantity(amount))
        for name, amount in item.default.items():  # a missing request defaults to the limit
            requests.setdefault(name, parse_quantity(amount))
        for name, amount in item.max.items():
            if requests.get(name, 0.0) > parse_quantity(amount):
                return requests, limits, (f"maximum {name} usage per Container is {amount}, "
                                          f"but request is {_fmt(requests[name])}")
        for name, amount in item.min.items():
            if requests.get(name, 0.0) < parse_quantity(amount):
                return requests, limits, (f"minimum {name} usage per Container is {amount}, "
                                          f"but request is {_fmt(requests.get(name, 0.0))}")
    return requests, limits, None


def admit(scenario: Scenario) -> pd.DataFrame:
    """One row per pod of the scenario's jobs, in submit order: its requests and `admitted` or `forbidden`."""
    tenants = {t.ns: t for t in scenario.tenants}
    used: dict[str, dict[str, float]] = {}
    rows = []
    for job in sorted(scenario.jobs, key=lambda j: j.submit):
        tenant = tenants.get(job.namespace)
        for task in job.tasks:
            for i in range(task.replicas_resolved):
                pod = f"{job.name}-{task.name}-{i}"
                given = {name: parse_quantity(v) for name, v in task.resources.items()}
                requests, limits, refusal = _container(given, tenant)
                message = f'pods "{pod}" is forbidden: {refusal}' if refusal else ""
                if not refusal and tenant is not None and tenant.resource_quota is not None:
                    message = _quota(pod, tenant, requests, limits, used.setdefault(job.namespace, {}))
                verdict = "forbidden" if message else "admitted"
                rows.append([pod, job.namespace, requests.get("cpu", 0.0), requests.get("nvidia.com/gpu", 0.0),
                             verdict, message])
    return pd.DataFrame(rows, columns=COLUMNS)


def _quota(pod: str, tenant, requests: dict[str, float], limits: dict[str, float], used: dict[str, float]) -> str:
    """The ResourceQuota verdict: "" (and the usage charged) or the API server's `exceeded quota` error."""
    charge = {"pods": 1.0, "count/pods": 1.0}
    charge.update({f"requests.{k}": v for k, v in requests.items()})
    charge.update({k: v for k, v in requests.items() if k in ("cpu", "memory")})
    charge.update({f"limits.{k}": v for k, v in limits.items()})
    over = [(name, charge[name], used.get(name, 0.0), parse_quantity(hard))
            for name, hard in tenant.resource_quota.hard.items()
            if name in charge and used.get(name, 0.0) + charge[name] > parse_quantity(hard) + 1e-9]
    if over:
        return (f'pods "{pod}" is forbidden: exceeded quota: {tenant.name}, '
                f"requested: {','.join(f'{n}={_fmt(r)}' for n, r, _, _ in over)}, "
                f"used: {','.join(f'{n}={_fmt(u)}' for n, _, u, _ in over)}, "
                f"limited: {','.join(f'{n}={_fmt(h)}' for n, _, _, h in over)}")
    for name in tenant.resource_quota.hard:
        if name in charge:
            used[name] = used.get(name, 0.0) + charge[name]
    return ""
