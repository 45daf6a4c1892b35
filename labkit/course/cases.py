"""The course's scenarios as chapters vary them: slices of the case study, the fragmentation snapshot."""

from __future__ import annotations

from importlib import resources
from typing import Any

from .. import spec
from ..conformance import replay
from ..spec import Scenario
from ..spec.quantity import parse_duration, parse_quantity

TEAMS = ("team-a", "team-b", "team-c")
EXAMPLES = resources.files("labkit") / "examples"
"""labkit/examples/ (the local-Slurm experiments; examples/ in the repository links to it): shipped in
the package, so chapter 4 runs on a plain `pip install`."""


def _data(name: str) -> dict[str, Any]:
    return spec.preset(name).model_dump(mode="json", by_alias=True, exclude_unset=True)


def case_study(nodes: int = 16, hours: int = 168, tenancy: bool = True,
               weights: tuple[int, int, int] | None = None, a_capability: int | None = None,
               week: bool = False) -> Scenario:
    """The running case as a miniature on `nodes` x 8 A100 for `hours`, or (week=True) the preset itself.

    The miniature scales the whole case by k = nodes / 32: teams B's and C's arrival rates, team A's
    gang sizes and team A's queue capability are multiplied by k, so every team offers the same load
    per GPU and A's gangs need the same share of the cluster as in the week (the default, 16 nodes
    for 7 days, shows what the week shows). `tenancy=False` is the naive set-up: one FIFO queue, no
    priorities, no quotas. `weights` are the queues' weights (A, B, C), default the preset's 5/3/2;
    `a_capability` caps team A's queue in GPUs (default: the preset's, scaled).
    """
    data = _data("case-study")
    if not week:
        k = nodes / data["cluster"]["pools"][0]["count"]
        data["cluster"]["pools"][0]["count"] = nodes
        data["horizon"] = f"{hours}h"
        pretrain, finetune, dataproc = data["workloads"]
        for workload in data["workloads"]:
            workload["end"] = f"{hours}h"
        for workload in (finetune, dataproc):
            workload["arrival"]["interval"] = f"{parse_duration(workload['arrival']['interval']) / k:g}s"
        pretrain["gpus"]["choices"] = [max(8, round(g * k / 8) * 8) for g in pretrain["gpus"]["choices"]]
        capability = data["queues"][0]["capability"]
        capability["nvidia.com/gpu"] = round(parse_quantity(capability["nvidia.com/gpu"]) * k)
    if not tenancy:
        data["queues"] = [{"name": "default"}]
        data.pop("priorityClasses", None)
        for workload in data["workloads"]:
            workload["queue"] = "default"
            workload.pop("priorityClassName", None)
        for tenant in data["tenants"]:
            tenant.pop("resourceQuota", None)
        return spec.validate(data)
    for queue, weight in zip(data["queues"], weights or ()):
        queue["weight"] = weight
    if a_capability is not None:
        data["queues"][0]["capability"] = {"nvidia.com/gpu": a_capability}
    return spec.validate(data)


def nodeorder_conf(strategy: str) -> dict[str, Any]:
    """The fragmentation preset's conf with one scoring strategy: `least` (LeastAllocated, spread),
    `most` (MostAllocated) or `binpack` (binpack plugin weighted on nvidia.com/gpu)."""
    if strategy not in ("least", "most", "binpack"):
        raise ValueError(f"strategy must be least, most or binpack, not {strategy!r}")
    conf = _data("fragmentation")["scheduler"]["conf"]
    args = {"least": {"leastrequested.weight": 1, "mostrequested.weight": 0},
            "most": {"leastrequested.weight": 0, "mostrequested.weight": 1},
            "binpack": {"leastrequested.weight": 0}}[strategy]
    plugins = [dict(p, arguments=args) if p["name"] == "nodeorder" else p for p in conf["tiers"][1]["plugins"]]
    if strategy == "binpack":
        plugins.append({"name": "binpack", "arguments": {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu",
                                                         "binpack.resources.nvidia.com/gpu": 10}})
    conf["tiers"][1]["plugins"] = plugins
    return conf


def fragmentation(strategy: str = "least", nodes: int = 4) -> Scenario:
    """The fragmentation preset (nodes x 8 GPUs, one 4-GPU job per node, then an 8-GPU job) under a
    scoring strategy (see `nodeorder_conf`)."""
    data = _data("fragmentation")
    data["cluster"]["pools"][0]["count"] = nodes
    resident = data["jobs"][0]
    data["jobs"] = [dict(resident, name=f"resident-{i}", submit=i) for i in range(nodes)] + [data["jobs"][-1]]
    data["scheduler"] = {"policy": strategy, "conf": nodeorder_conf(strategy)}
    return spec.validate(data)


def fragmentation_snapshot(strategy: str = "least", nodes: int = 4, placed: list[int] | None = None) -> Scenario:
    """The moment tp8 arrives: resident-i Running on gpu-placed[i] (default one per node), tp8 Inqueue.

    Residents beyond `len(placed)` are Inqueue too, so one session places them (in order) before tp8.
    """
    data = fragmentation(strategy, nodes).model_dump(mode="json", by_alias=True, exclude_unset=True)
    placed = list(range(nodes)) if placed is None else placed
    for i, job in enumerate(data["jobs"]):
        job["submit"] = 0
        job["status"] = {"phase": "Inqueue"}
        if i < len(placed) and i < nodes:
            job["status"] = {"phase": "Running", "running": {"worker": [f"gpu-{placed[i]}"]}}
    return spec.validate(data)


def quota_burst(gpu_quota: int = 16, cpu_quota: int = 64, jobs: int = 6, gpus: int = 4) -> Scenario:
    """Team C's namespace (ResourceQuota on GPUs and CPU, LimitRange defaults 4 CPU / 16Gi and at most
    8 GPUs per container) and a burst of `jobs` evaluation jobs of one pod with `gpus` GPUs, submitted
    a second apart, plus two CPU-only pods that give no requests (the LimitRange fills them in)."""
    burst = [{"name": f"c-eval-{i}", "namespace": "team-c", "queue": "team-c", "submit": i, "duration": "1h",
              "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}}]}
             for i in range(jobs)]
    burst += [{"name": f"c-clean-{i}", "namespace": "team-c", "queue": "team-c", "submit": jobs + i, "duration": "1h",
               "tasks": [{"name": "worker"}]} for i in range(2)]
    return spec.validate({
        "name": "quota-burst",
        "cluster": {"pools": [{"name": "a100", "count": 4,
                               "resources": {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}}]},
        "tenants": [{"name": "team-c", "resourceQuota": {"hard": {"requests.nvidia.com/gpu": str(gpu_quota),
                                                                   "requests.cpu": str(cpu_quota)}},
                     "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "4", "memory": "16Gi"},
                                                "max": {"nvidia.com/gpu": "8"}}]}}],
        "queues": [{"name": "team-c"}],
        "jobs": burst,
    })


def four_jobs(policy: str = "volcano-shipped", d_duration: int | None = None) -> Scenario:
    """examples/slurm-backfill.yaml (4 nodes x 8 GPUs; a: 3 nodes, b: a 4-node gang, d and c: 1 node each,
    submitted in that order) under `policy`; `d_duration` replaces job d's run time in seconds."""
    text = (EXAMPLES / "slurm-backfill.yaml").read_text(encoding="utf-8")
    scenario = spec.loads(text, source="examples/slurm-backfill.yaml")
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["scheduler"] = {"policy": policy}
    if d_duration is not None:
        next(j for j in data["jobs"] if j["name"] == "d")["duration"] = d_duration
    return spec.validate(data)


def gang_pair(min_available: int | None = None) -> Scenario:
    """Two data-parallel jobs of 2 workers x 8 GPUs on 2 nodes x 8 GPUs, submitted together: with
    minAvailable 1 each gets one worker (half a job each); with 2 (the default) one runs whole, then the other."""
    worker = {"name": "worker", "replicas": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}}
    if min_available is not None:
        worker["minAvailable"] = min_available
    return spec.validate({
        "name": "gang-pair",
        "cluster": {"pools": [{"name": "a100", "count": 2,
                               "resources": {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}}]},
        "queues": [{"name": "default"}],
        "jobs": [{"name": name, "submit": 0, "duration": "2h", "tasks": [worker]} for name in ("ddp-x", "ddp-y")],
    })


def shape_snapshot(replicas: int) -> Scenario:
    """A 16-GPU job as `replicas` pods of 16/replicas GPUs, arriving in the fragmentation snapshot (4 free GPUs per node)."""
    data = fragmentation_snapshot().model_dump(mode="json", by_alias=True, exclude_unset=True)
    task = data["jobs"][-1]["tasks"][0]
    task.update(replicas=replicas, resources={"nvidia.com/gpu": 16 // replicas, "cpu": 8, "memory": "64Gi"})
    data["jobs"][-1]["name"] = f"tp16x{replicas}"
    return spec.validate(data)


# ch. 7: priority and PriorityClass


def priority_stream(horizon: str | None = None, split: bool = False, global_default: str | None = "batch",
                    batch_jobs: int | None = None) -> Scenario:
    """examples/priority-stream.yaml: a steady stream of 8-GPU prod jobs (value 1000) that alone fills
    2 nodes x 8 GPUs, and 4-GPU batch jobs naming no PriorityClass, in one queue.

    `horizon` replaces the run's end; `split=True` is the fix: queue prod for the stream, queue batch
    for the batch jobs (weight 1 each); `global_default` names the class marked globalDefault (None:
    no class is); `batch_jobs` keeps that many batch jobs (one every 10 minutes from t=1h), more are
    added at the same spacing."""
    text = (EXAMPLES / "priority-stream.yaml").read_text(encoding="utf-8")
    data = spec.loads(text, source="examples/priority-stream.yaml").model_dump(mode="json", by_alias=True,
                                                                              exclude_unset=True)
    if horizon is not None:
        data["horizon"] = horizon
        data["workloads"][0]["end"] = horizon
    names = {p["name"] for p in data["priorityClasses"]}
    if global_default is not None and global_default not in names:
        raise ValueError(f"global_default must be one of {sorted(names)} or None, not {global_default!r}")
    for pclass in data["priorityClasses"]:
        pclass["globalDefault"] = pclass["name"] == global_default
    if batch_jobs is not None:
        first, *_ = data["jobs"]
        data["jobs"] = [dict(first, name=f"batch-{i}", submit=first["submit"] + 600 * i) for i in range(batch_jobs)]
    if split:
        data["queues"] = [{"name": "prod"}, {"name": "batch"}]
        data["workloads"][0]["queue"] = "prod"
        for job in data["jobs"]:
            job["queue"] = "batch"
    return spec.validate(data)


def priority_preempt(never: bool = False) -> Scenario:
    """The recorded real-Volcano run `priority-preempt` (labkit/conformance/volcano-real), scored as it was
    recorded; `never=True` gives its high class `preemptionPolicy: Never`."""
    data = replay.load_recording(replay.RECORDINGS / "priority-preempt").scenario.model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    if never:
        next(p for p in data["priorityClasses"] if p["name"] == "high")["preemptionPolicy"] = "Never"
    return spec.validate(data)


def priority_stream_slurm(age_weight: int = 0, max_age: str = "4h") -> Scenario:
    """`priority_stream` on Slurm: the same prod jobs (written out one by one) and batch jobs, the two
    PriorityClasses as QOS of the same priority (prod 1000, batch 100; slurmdbd), sched/builtin (strict
    priority order, no backfill) with multifactor priority: PriorityWeightQOS 10000, PriorityWeightAge
    `age_weight` (0: no aging) reached after `max_age` of waiting (PriorityMaxAge)."""
    base = priority_stream()
    stream = base.workloads[0]
    every, first, end = (parse_duration(x) for x in (stream.arrival.interval, stream.start, stream.end))
    count = int(-(-(end - first) // every))
    replicas, pod = stream.pod_shape(int(stream.gpus))
    prod_task = {"name": "worker", "replicas": replicas, "resources": pod}
    jobs = [{"name": f"prod-{k:05d}", "submit": first + k * every, "duration": stream.duration, "qos": "prod",
             "tasks": [prod_task]} for k in range(count)]
    jobs += [dict(job.model_dump(mode="json", by_alias=True, exclude_unset=True), qos="batch") for job in base.jobs]
    for job in jobs:
        job["timeLimit"] = f"{parse_duration(job['duration']) + 600:g}s"
    classes = {p.name: p.value for p in base.priority_classes}
    return spec.validate({
        "name": "priority-stream-slurm", "horizon": base.horizon,
        "cluster": base.cluster.model_dump(mode="json", by_alias=True, exclude_unset=True),
        "slurm": {"partitions": [{"name": "gpu", "default": True}],
                  "qos": [{"name": name, "priority": value} for name, value in classes.items()]},
        "jobs": jobs,
        "scheduler": {"policy": "slurm-builtin", "slurm": {
            "SchedulerType": "sched/builtin", "PriorityType": "priority/multifactor", "PriorityWeightQOS": 10000,
            "PriorityWeightAge": int(age_weight), "PriorityMaxAge": max_age,
            "AccountingStorageType": "accounting_storage/slurmdbd", "AccountingStorageEnforce": "limits,qos"}},
    })
# ch. 10: Volcano Queue weight / deserved / guarantee

QUEUE_TRIO_GPUS = (24, 16, 4)
"""Chapter 10's default GPU requests of team-a, team-b, team-c (in 4-GPU jobs)."""


def queue_conf(plugin: str = "proportion", policy: str = "volcano-shipped") -> dict[str, Any]:
    """The `policy` preset's Volcano conf with its queue plugin set to `plugin` (proportion or capacity,
    the two that compute a queue's deserved; they are used one instead of the other)."""
    if plugin not in ("proportion", "capacity"):
        raise ValueError(f"plugin must be proportion or capacity, not {plugin!r}")
    conf = spec.policy(policy).model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tier in conf["tiers"]:
        tier["plugins"] = [dict(p, name=plugin) if p["name"] in ("proportion", "capacity") else p
                           for p in tier["plugins"]]
    return conf


def queue_trio(weights: tuple[int, int, int] = (5, 3, 2), gpus: tuple[int, int, int] = QUEUE_TRIO_GPUS,
               queues: dict[str, dict[str, Any]] | None = None, plugin: str = "proportion",
               policy: str = "volcano-shipped", admitted: bool = True) -> Scenario:
    """Three queues on 4 nodes x 8 GPUs, every job already admitted (PodGroup Inqueue, its pods created)
    at 0 s and running 1 h; team-a, team-b and team-c ask for `gpus` GPUs in 4-GPU jobs (two fit a node,
    so no GPU is stranded by placement); the first session's request is then every job's. `admitted=False`:
    the jobs are only submitted at 0 s (what a real cluster is given), and enqueue admits them first.
    `weights` are the queues' spec.weight; `queues` adds Queue fields by name (guarantee, deserved,
    capability, reclaimable); `plugin` and `policy` as in `queue_conf`."""
    jobs = []
    size = 4
    for team, want in zip(TEAMS, gpus):
        if want % size:
            raise ValueError(f"{team} asks for {want} GPUs, not a multiple of its {size}-GPU jobs")
        jobs += [{"name": f"{team[-1]}{i + 1}", "namespace": team, "queue": team, "submit": 0, "duration": "1h",
                  **({"status": {"phase": "Inqueue"}} if admitted else {}),
                  "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": size, "cpu": 2 * size,
                                                             "memory": f"{16 * size}Gi"}}]}
                 for i in range(want // size)]
    return spec.validate({
        "name": "queue-trio",
        "cluster": {"pools": [{"name": "a100", "count": 4,
                               "resources": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi", "pods": 110}}]},
        "tenants": [{"name": team} for team in TEAMS],
        "queues": [{"name": team, "weight": int(w), **(queues or {}).get(team, {})} for team, w in zip(TEAMS, weights)],
        "jobs": jobs,
        "scheduler": {"policy": policy, "conf": queue_conf(plugin, policy)},
    })


def reclaim_pair(reclaimable: bool = True) -> Scenario:
    """The recorded real-Volcano run `queues-reclaim` (labkit/conformance/volcano-real; team-b, weight 1,
    fills 4 nodes x 8 GPUs with eight 4-GPU jobs, team-a, weight 3, asks for 4 GPUs at 12 s and a 2 x 4-GPU
    gang at 18 s, under volcano-multitenant) with team-b's Queue `reclaimable` set."""
    data = replay.load_recording(replay.RECORDINGS / "queues-reclaim").scenario.model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    next(q for q in data["queues"] if q["name"] == "team-b")["reclaimable"] = bool(reclaimable)
    return spec.validate(data)


def queue_stream(weights: tuple[int, int, int] = (5, 3, 2), gpus: tuple[int, int, int] = (32, 32, 32),
                 queues: dict[str, dict[str, Any]] | None = None, plugin: str = "proportion",
                 policy: str = "volcano-multitenant") -> Scenario:
    """Chapter 10's panel: `queue_trio`'s queues and 4-GPU jobs, submitted over the first hour (one every
    5 minutes, the teams interleaved) and running 1 to 3.5 hours, under `policy` (by default with reclaim
    and preempt, so each queue's deserved is enforced, not only its admission)."""
    data = queue_trio(weights, gpus, queues, plugin, policy, admitted=False).model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    for i, job in enumerate(data["jobs"]):
        job["submit"] = f"{(i * 7 % 13) * 5}m"
        job["duration"] = f"{60 + (i * 5 % 6) * 30}m"
    return spec.validate(data)
