"""Trace loaders: public cluster traces as Scenario fragments (plain scenario data, YAML field names).

Each loader reads a file the user downloaded (nothing is fetched at run time) and returns a dict
with the trace's jobs (one vcjob per trace job: pods of at most `gpus_per_node` GPUs, gangs for
larger jobs), `tenants` and `queues` (from the trace's tenant column), and `cluster` when the trace
describes its nodes (openb) or `gpus=` asks for one. Traces of whole-GPU jobs (Philly, ElasticFlow)
give `workloads`: one trace workload per namespace and queue, whose jobs are four columns (names,
submit, GPUs, run time) compiled as arrays, so 82k jobs never become 82k job objects; `expand`
makes them into `jobs` where a list of jobs is needed. openb and SWF jobs carry per-job CPU and
memory and give `jobs`. Merge the fragment into a scenario and validate::

    fragment = traces.philly("philly.csv", n=5000, seed=1, load=0.5, gpus=256)
    scenario = labkit.spec.validate({**fragment, "scheduler": {"policy": "volcano-multitenant"}})

Common options: `window=(start, end)` keeps jobs submitted in that span (seconds or durations such
as "7d", from the trace start); `n` keeps a seeded random sample of that many jobs; `load` rescales
the offered load by compressing arrival times (2.0 = twice as many arrivals per second); submit
times are then counted from the first kept job. `queues` maps tenants onto Volcano queues:
"tenant" (one queue and namespace per tenant), "default" (everyone in the default queue) or a
dict {tenant: queue}. Bad input raises `SpecError` naming the file, line and column.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import SpecError
from ..spec.io import read_text
from ..spec.model import MAX_NODES, Workload
from ..spec.quantity import MAX_SECONDS, parse_duration

GPU = "nvidia.com/gpu"
GPU_MILLI = "alibaba.com/gpu-milli"
"""openb's fractional-GPU resource (the name Alibaba's GPU-sharing scheduler uses), in 1/1000 GPU."""
GPU_MODEL_LABEL = "nvidia.com/gpu.product"

QueueMap = str | Mapping[str, str]


def cluster(gpus: int, gpus_per_node: int = 8, cpu: int = 96, memory: str = "768Gi") -> dict:
    """A homogeneous cluster of `gpus` GPUs in nodes of `gpus_per_node` (the Helios/Philly shape)."""
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise SpecError("gpus_per_node", f"must be a whole number >= 1, got {gpus_per_node!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0 or gpus % gpus_per_node:
        raise SpecError("gpus", f"{gpus} GPUs is not a positive multiple of {gpus_per_node} GPUs per node")
    resources = {GPU: gpus_per_node, "cpu": cpu, "memory": memory}
    return {"pools": [{"name": "gpu", "count": gpus // gpus_per_node, "resources": resources}]}


def philly(path: str | Path, *, n: int | None = None, window: tuple | None = None, seed: int = 0,
           load: float = 1.0, queues: QueueMap = "tenant", gpus: int | None = None,
           gpus_per_node: int = 8) -> dict:
    """The Philly trace as Pollux keeps it (`timestamp,duration,num_gpus,gpu_time,cluster`);
    `cluster` (the virtual cluster) is the tenant."""
    df = _read(path, ["timestamp", "duration", "num_gpus", "cluster"])
    stamps = pd.to_datetime(df["timestamp"], errors="coerce")
    _check(path, df, "timestamp", stamps.isna(), "not a date-time")
    submit = (stamps - stamps.min()).dt.total_seconds().to_numpy()
    table = pd.DataFrame({"submit": submit, "duration": _number(path, df, "duration", positive=True),
                          "gpus": _count(path, df, "num_gpus"), "tenant": df["cluster"].astype(str)})
    return _fragment("philly", table, n, window, seed, load, queues, gpus, gpus_per_node)


def elasticflow(path: str | Path, *, n: int | None = None, window: tuple | None = None, seed: int = 0,
                load: float = 1.0, gpus: int | None = None, gpus_per_node: int = 8) -> dict:
    """An ElasticFlow/ITP cluster CSV (`job_id,submission_time,duration,num_gpu`, extra columns
    ignored); it has no tenant column, so every job is in the default queue."""
    df = _read(path, ["submission_time", "duration", "num_gpu"])
    table = pd.DataFrame({"submit": _number(path, df, "submission_time"),
                          "duration": _number(path, df, "duration", positive=True),
                          "gpus": _count(path, df, "num_gpu"), "tenant": "default"})
    return _fragment("ef", table, n, window, seed, load, "default", gpus, gpus_per_node)


def openb(nodes: str | Path, pods: str | Path, *, n: int | None = None, window: tuple | None = None,
          seed: int = 0, load: float = 1.0, queues: QueueMap = "default", fractional: str = "milli",
          qos_priority: bool = True) -> dict:
    """Alibaba's openb GPU cluster (ATC'23 FGD): the node list becomes node pools, the pod list jobs.

    Nodes with the same model, GPU count, CPU and memory form one pool, labelled
    `nvidia.com/gpu.product=<model>`. A pod asks for `cpu_milli`, `memory_mib` and `num_gpu` GPUs of
    `gpu_milli` thousandths each. `fractional="milli"` models GPU sharing with the extended resource
    `alibaba.com/gpu-milli` (every node offers 1000 per GPU): a whole-GPU pod requests both
    `nvidia.com/gpu` and its milli, a fractional pod only milli; the node's milli is one pool, so
    two shares that would each fit only split across two GPUs are (optimistically) accepted.
    `fractional="round"` rounds every share up to a whole GPU. A pod's run time is
    deletion - scheduled time (creation time when never scheduled); pods still Running when the
    trace ends are censored there. `qos` (LS, BE, Burstable, Guaranteed) is the tenant that
    `queues` maps, and with `qos_priority` a PriorityClass (LS and Guaranteed above Burstable above BE).
    """
    if fractional not in ("milli", "round"):
        raise SpecError("fractional", f"{fractional!r}: expected 'milli' or 'round'")
    node_df = _read(nodes, ["sn", "cpu_milli", "memory_mib", "gpu", "model"])
    pools = _openb_pools(nodes, node_df, fractional)
    df = _read(pods, ["cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos", "creation_time",
                      "deletion_time", "scheduled_time"])
    created = _number(pods, df, "creation_time")
    scheduled = pd.to_numeric(df["scheduled_time"], errors="coerce").to_numpy(float)
    began = np.where(np.isnan(scheduled), created, scheduled)
    deleted = _number(pods, df, "deletion_time")
    _check(pods, df, "deletion_time", deleted < began, "is before the pod's scheduled/creation time")
    share = _number(pods, df, "gpu_milli")
    _check(pods, df, "gpu_milli", share > 1000, "must be <= 1000 (a share of one GPU)")
    count = _count(pods, df, "num_gpu", minimum=0)
    qos = df["qos"].fillna("BE").astype(str)
    table = pd.DataFrame({"submit": created, "duration": np.maximum(deleted - began, 1.0), "gpus": count,
                          "share": share, "cpu": _number(pods, df, "cpu_milli"),
                          "memory": _number(pods, df, "memory_mib"), "tenant": qos})
    table, width = _select(table, n, window, seed, load)
    frag = _tenancy(table, queues)
    frag["cluster"] = {"pools": pools}
    names = _names("openb", table.index, width)
    jobs = []
    for name, (submit, duration, gpus, milli, cpu, memory, tenant) in zip(
            names, table[["submit", "duration", "gpus", "share", "cpu", "memory", "tenant"]].itertuples(index=False)):
        pod: dict = {"cpu": f"{int(cpu)}m", "memory": f"{int(memory)}Mi"}
        if gpus and fractional == "round":
            pod[GPU] = int(gpus)
        elif gpus:
            pod[GPU_MILLI] = int(gpus * milli)
            if milli >= 1000:
                pod[GPU] = int(gpus)
        job = _job(name, submit, duration, [{"name": "worker", "replicas": 1, "resources": pod}],
                   frag["placement"][tenant])
        if qos_priority:
            job["priorityClassName"] = _label(tenant)
        jobs.append(job)
    if qos_priority:
        frag["priorityClasses"] = [{"name": _label(q), "value": _QOS_PRIORITY.get(q, 0)}
                                   for q in sorted(table["tenant"].unique())]
    frag["jobs"] = jobs
    del frag["placement"]
    return frag


_QOS_PRIORITY = {"LS": 1000, "Guaranteed": 1000, "Burstable": 500, "BE": 0}


def swf(path: str | Path, *, n: int | None = None, window: tuple | None = None, seed: int = 0,
        load: float = 1.0, queues: QueueMap = "tenant", tenant: str = "user", resource: str = "cpu",
        per_node: int = 64, nodes: int | None = None) -> dict:
    """A Standard Workload Format log (Parallel Workloads Archive): 18 whitespace-separated fields,
    `;` comments. Processors (allocated, else requested) become `resource` units in pods of at
    most `per_node`; requested time becomes `timeLimit` (at least the run time). `tenant` is the SWF field that names the
    tenant: "user" (12), "group" (13), "queue" (15) or "partition" (16). Jobs with run time 0 or -1
    (unknown: cancelled before they ran) are skipped; `nodes` adds a cluster of that many nodes."""
    fields = {"user": 11, "group": 12, "queue": 14, "partition": 15}
    if tenant not in fields:
        raise SpecError("tenant", f"{tenant!r}: expected one of {', '.join(fields)}")
    _options(n, window, seed, load)
    if per_node < 1 or (nodes is not None and not 1 <= nodes <= MAX_NODES):
        raise SpecError("per_node" if per_node < 1 else "nodes", f"must be a whole number from 1 (got "
                        f"{per_node if per_node < 1 else nodes})")
    rows, lines = [], []
    try:
        text_of_file = read_text(Path(path))
    except SpecError as err:
        raise SpecError(Path(path).name, err.message.removeprefix(f"{path}: ")) from None
    for line_no, line in enumerate(text_of_file.splitlines(), 1):
        text = line.split(";", 1)[0].split()
        if not text:
            continue
        if len(text) != 18:
            raise SpecError(f"{Path(path).name} line {line_no}", f"{len(text)} fields, SWF has 18")
        try:
            row = [float(v) for v in text]
        except ValueError:
            raise SpecError(f"{Path(path).name} line {line_no}", "a field is not a number") from None
        if not all(np.isfinite(row)) or any(abs(v) > MAX_SECONDS for v in row):
            raise SpecError(f"{Path(path).name} line {line_no}", "a field is not a finite number in range")
        rows.append(row)
        lines.append(line_no)
    if not rows:
        raise SpecError(Path(path).name, "no jobs (every line is blank or a ; comment)")
    data = np.array(rows, float).reshape(-1, 18)
    runtime = data[:, 3]
    bad = (runtime < 0) & (runtime != -1)
    if bad.any():
        i = int(np.argmax(bad))
        raise SpecError(f"{Path(path).name} line {lines[i]}, field 4 (run time)", f"must be >= 0 or -1, got {runtime[i]:g}")
    procs = np.where(data[:, 4] > 0, data[:, 4], data[:, 7])
    keep = (runtime > 0) & (procs > 0)
    table = pd.DataFrame({"submit": data[keep, 1], "duration": runtime[keep], "gpus": procs[keep].astype(int),
                          "limit": data[keep, 8], "tenant": [f"{tenant}-{int(v)}" for v in data[keep, fields[tenant]]]},
                         index=np.flatnonzero(keep))
    table, width = _select(table, n, window, seed, load)
    frag = _tenancy(table, queues)
    jobs = []
    for name, (submit, duration, procs_, limit, who) in zip(
            _names("swf", table.index, width), table[["submit", "duration", "gpus", "limit", "tenant"]].itertuples(index=False)):
        replicas, pod = _shape(per_node, resource)(int(procs_))
        job = _job(name, submit, duration, [{"name": "worker", "replicas": replicas, "resources": pod}],
                   frag["placement"][who])
        if limit > 0:
            job["timeLimit"] = max(limit, duration)
        jobs.append(job)
    frag["jobs"] = jobs
    del frag["placement"]
    if nodes is not None:
        frag["cluster"] = {"pools": [{"name": "node", "count": nodes, "resources": {resource: per_node}}]}
    return frag


# ---------------------------------------------------------------------------------------- helpers


def _read(path: str | Path, columns: list[str]) -> pd.DataFrame:
    """The CSV as strings; blank lines dropped, each row's line in the file kept in `attrs["lines"]`."""
    path = Path(path)
    try:
        text = read_text(path)
    except SpecError as err:
        raise SpecError(path.name, err.message.removeprefix(f"{path}: ")) from None
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""],
                         skip_blank_lines=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        raise SpecError(path.name, f"cannot read it as CSV: {str(err).splitlines()[0]}") from None
    for column in columns:
        if column not in df.columns:
            raise SpecError(path.name, f"missing column {column!r} (has {', '.join(map(str, df.columns))})")
    lines = np.arange(len(df)) + 2  # the header is line 1
    kept = ~df.isna().all(axis=1).to_numpy()
    df = df[kept].reset_index(drop=True)
    df.attrs["lines"] = lines[kept]
    if not len(df):
        raise SpecError(path.name, "no rows after the header")
    return df


def _check(path: str | Path, df: pd.DataFrame, column: str, bad, message: str) -> None:
    """SpecError on the first bad row: `<file> line <k>, column <c>: <message> (got <value>)`."""
    bad = np.asarray(bad, bool)
    if bad.any():
        i = int(np.argmax(bad))
        line = df.attrs["lines"][i] if "lines" in df.attrs else i + 2
        raise SpecError(f"{Path(path).name} line {line}, column {column}",
                        f"{message} (got {df[column].iloc[i]!r})")


def _number(path: str | Path, df: pd.DataFrame, column: str, positive: bool = False) -> np.ndarray:
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(float)
    _check(path, df, column, np.isnan(values), "not a number")
    _check(path, df, column, np.isinf(values), "not a finite number")
    if positive:
        _check(path, df, column, values <= 0, "must be > 0")
    else:
        _check(path, df, column, values < 0, "must be >= 0")
    return values


def _count(path: str | Path, df: pd.DataFrame, column: str, minimum: int = 1) -> np.ndarray:
    values = _number(path, df, column)
    _check(path, df, column, (values != np.round(values)) | (values < minimum), f"must be a whole number >= {minimum}")
    return values.astype(np.int64)


def _select(table: pd.DataFrame, n: int | None, window: tuple | None, seed: int,
            load: float) -> tuple[pd.DataFrame, int]:
    """Window, seeded sample, load rescaling; submit times from the first kept job; submit order.
    Also the digits of the largest row number, so a row's job name does not depend on the sample."""
    _options(n, window, seed, load)
    width = len(str(int(table.index.max()))) if len(table) else 1
    table = table.sort_values("submit", kind="stable")
    origin = table["submit"].min() if len(table) else 0.0
    if window is not None:
        start, end = (parse_duration(w) for w in window)
        rel = table["submit"] - origin
        table = table[(rel >= start) & (rel < end)]
    if n is not None and n < len(table):
        rows = np.sort(np.random.default_rng(seed).choice(len(table), size=n, replace=False))
        table = table.iloc[rows]
    if len(table):
        table = table.assign(submit=((table["submit"] - table["submit"].min()) / load).round(3))
    return table, width


def _options(n, window, seed, load) -> None:
    """The loaders' common options, each refused with one line naming it."""
    if isinstance(load, bool) or not isinstance(load, (int, float)) or not 0 < load < math.inf:
        raise SpecError("load", f"must be > 0, got {load!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise SpecError("n", f"must be a whole number >= 0, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SpecError("seed", f"must be a whole number >= 0, got {seed!r}")
    if window is not None:
        try:
            start, end = (parse_duration(w) for w in window)
        except (TypeError, ValueError) as err:
            raise SpecError("window", f"expected (start, end) durations: {err}") from None
        if not 0 <= start < end:
            raise SpecError("window", f"expected 0 <= start < end, got {window!r}")


def _label(text: str) -> str:
    """A DNS-label form of a tenant name (lower case, '-' for anything else)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return label or "tenant"


def _tenancy(table: pd.DataFrame, queues: QueueMap) -> dict:
    """tenants and queues for the trace's tenants; `placement` maps tenant -> (namespace, queue)."""
    tenants = sorted(table["tenant"].unique())
    if isinstance(queues, Mapping):
        missing = [t for t in tenants if t not in queues]
        if missing:
            raise SpecError("queues", f"no queue for tenant {missing[0]!r}")
        placement = {t: (_label(t), queues[t]) for t in tenants}
    elif queues == "tenant":
        placement = {t: (_label(t), _label(t)) for t in tenants}
    elif queues == "default":
        placement = {t: ("default", "default") for t in tenants}
    else:
        raise SpecError("queues", f"{queues!r}: expected 'tenant', 'default' or a {{tenant: queue}} mapping")
    namespaces = sorted({ns for ns, _ in placement.values()} - {"default"})
    names = sorted({q for _, q in placement.values()} - {"default"})
    return {"tenants": [{"name": ns} for ns in namespaces], "queues": [{"name": q} for q in names],
            "placement": placement}


def _names(prefix: str, rows, width: int) -> list[str]:
    """Job names from the trace's row numbers, so a job maps back to its line in the file."""
    return [f"{prefix}-{int(r):0{width}d}" for r in rows]


@functools.cache
def _shape(per_node: int, resource: str = GPU):
    """`(replicas, pod)` for a job of k units: Workload.pod_shape's split into pods of <= per_node."""
    shaper = Workload(name="trace", arrival={"interval": 1}, count=1, duration=1, gpus_per_pod=per_node,
                      gpu_resource=resource)

    @functools.cache
    def shape(units: int) -> tuple[int, dict]:
        replicas, pod = shaper.pod_shape(units)
        return replicas, {k: int(v) for k, v in pod.items()}

    return shape


def _job(name: str, submit: float, duration: float, tasks: list[dict], placement: tuple[str, str]) -> dict:
    namespace, queue = placement
    return {"name": name, "namespace": namespace, "queue": queue, "submit": float(submit),
            "duration": float(duration), "tasks": tasks}


def _fragment(prefix: str, table: pd.DataFrame, n, window, seed, load, queues, gpus, gpus_per_node) -> dict:
    """A trace workload per (namespace, queue) the tenants map to (jobs of whole GPUs in pods of
    <= gpus_per_node), the tenancy, and the cluster when asked."""
    table, width = _select(table, n, window, seed, load)
    frag = _tenancy(table, queues)
    placement = frag.pop("placement")
    table = table.assign(name=_names(prefix, table.index, width),
                         place=table["tenant"].map(lambda t: placement[t]) if len(table) else [])
    frag["workloads"], taken = [], set()
    for (namespace, queue), jobs in table.groupby("place", sort=True):
        base = prefix if namespace == "default" else f"{prefix}-{namespace}"[:58].rstrip("-")
        name, k = base, 1
        while name in taken:  # two tenants whose labels are the same, in two queues
            name, k = f"{base}-{k}", k + 1
        taken.add(name)
        frag["workloads"].append({
            "name": name, "namespace": namespace, "queue": queue, "gpusPerPod": gpus_per_node,
            "trace": {"names": jobs["name"].tolist(), "submit": jobs["submit"].tolist(),
                      "gpus": jobs["gpus"].tolist(), "duration": jobs["duration"].tolist()}})
    if gpus is not None:
        frag["cluster"] = cluster(gpus, gpus_per_node)
    return frag


def _openb_pools(path: str | Path, df: pd.DataFrame, fractional: str) -> list[dict]:
    cpu = _count(path, df, "cpu_milli")
    memory = _count(path, df, "memory_mib")
    gpus = _count(path, df, "gpu", minimum=0)
    model = df["model"].fillna("none").astype(str)
    pools: dict[tuple, int] = {}
    for key in zip(model, gpus, cpu, memory):
        pools[key] = pools.get(key, 0) + 1
    out = []
    for (name, g, c, m), count in pools.items():
        resources: dict = {"cpu": f"{int(c)}m", "memory": f"{int(m)}Mi"}
        if g:
            resources[GPU] = int(g)
            if fractional == "milli":
                resources[GPU_MILLI] = int(g) * 1000
        out.append({"name": _label(f"{name}-{g}g-{c // 1000}c-{m // 1024}gi"), "count": count,
                    "resources": resources, "labels": {GPU_MODEL_LABEL: name}})
    return out
