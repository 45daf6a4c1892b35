"""The course's scenarios as chapters vary them: slices of the case study, the fragmentation snapshot."""

from __future__ import annotations

from importlib import resources
from typing import Any

from .. import spec
from ..conformance.replay import RECORDINGS, load_recording
from ..spec import Scenario
from ..spec.quantity import parse_duration, parse_quantity

TEAMS = ("team-a", "team-b", "team-c")
EXAMPLES = resources.files("labkit") / "examples"
"""labkit/examples/ (the local-Slurm experiments; examples/ in the repository links to it): shipped in
the package, so chapter 4 runs on a plain `pip install`."""


def _data(name: str) -> dict[str, Any]:
    return spec.preset(name).model_dump(mode="json", by_alias=True, exclude_unset=True)


def _example(file: str) -> dict[str, Any]:
    """A scenario shipped in labkit/examples as data to edit (what the user wrote, no defaults added)."""
    text = (EXAMPLES / file).read_text(encoding="utf-8")
    return spec.loads(text, source=f"examples/{file}").model_dump(mode="json", by_alias=True, exclude_unset=True)


def _recording(name: str) -> dict[str, Any]:
    """The scenario of a recorded real-Volcano run (labkit/conformance/volcano-real) as data to edit."""
    return load_recording(RECORDINGS / name).scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)


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


def quota_burst(gpu_quota: int = 16, cpu_quota: int = 64, jobs: int = 6, gpus: int = 4,
                duration: int | str = "1h") -> Scenario:
    """Team C's namespace (ResourceQuota on GPUs and CPU, LimitRange defaults 4 CPU / 16Gi, no GPU, and at
    most 8 GPUs per container: without the GPU default the API server would default it to the max) and a burst of `jobs` evaluation jobs of one pod with `gpus` GPUs, submitted
    a second apart, plus two CPU-only pods that give no requests (the LimitRange fills them in); every
    job runs `duration` (seconds, or a duration string)."""
    burst = [{"name": f"c-eval-{i}", "namespace": "team-c", "queue": "team-c", "submit": i, "duration": duration,
              "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}}]}
             for i in range(jobs)]
    burst += [{"name": f"c-clean-{i}", "namespace": "team-c", "queue": "team-c", "submit": jobs + i, "duration": duration,
               "tasks": [{"name": "worker"}]} for i in range(2)]
    return spec.validate({
        "name": "quota-burst",
        "cluster": {"pools": [{"name": "a100", "count": 4,
                               "resources": {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}}]},
        "tenants": [{"name": "team-c", "resourceQuota": {"hard": {"requests.nvidia.com/gpu": str(gpu_quota),
                                                                   "requests.cpu": str(cpu_quota)}},
                     "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "4", "memory": "16Gi"},
                                                "default": {"nvidia.com/gpu": "0"}, "max": {"nvidia.com/gpu": "8"}}]}}],
        "queues": [{"name": "team-c"}],
        "jobs": burst,
    })


FOUR_JOBS_KUEUE = {
    "resourceFlavors": [{"name": "default-flavor"}],
    "clusterQueues": [{"name": "cluster", "resourceGroups": [
        {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
         "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 32},
                                                             {"name": "memory", "nominalQuota": "32000Mi"},
                                                             {"name": "nvidia.com/gpu", "nominalQuota": 32}]}]}]}],
    "localQueues": [{"name": "main", "namespace": "default", "clusterQueue": "cluster"}],
}
"""Chapter 4's Kueue objects: one ClusterQueue whose nominalQuota is the whole 4 x 8-GPU cluster."""


def four_jobs(policy: str = "volcano-shipped", d_duration: int | None = None) -> Scenario:
    """examples/slurm-backfill.yaml (4 nodes x 8 GPUs; a: 3 nodes, b: a 4-node gang, d and c: 1 node each,
    submitted in that order) under `policy`; `d_duration` replaces job d's run time in seconds. Under a
    policy that is not Slurm's the jobs are the Kubernetes ones: no `slurm` partition, no `timeLimit`
    (sbatch -t), which that scheduler has no notion of. Under `kueue` the jobs go through
    `FOUR_JOBS_KUEUE` (LocalQueue main -> ClusterQueue cluster)."""
    data = _example("slurm-backfill.yaml")
    data["scheduler"] = {"policy": policy}
    if spec.policy_scheduler(policy).section != "slurm":
        data.pop("slurm")
        for job in data["jobs"]:
            job.pop("timeLimit")
    if policy == "kueue":
        data["kueue"] = FOUR_JOBS_KUEUE
    if d_duration is not None:
        next(j for j in data["jobs"] if j["name"] == "d")["duration"] = d_duration
    return spec.validate(data)


def gang_pair(min_available: int | None = None) -> Scenario:
    """examples/gang-pair.yaml: two data-parallel jobs of 2 workers x 8 GPUs on 2 nodes x 8 GPUs, submitted
    together: with minAvailable 1 each gets one worker (half a job each); with 2 (the default) one runs
    whole, then the other."""
    data = _example("gang-pair.yaml")
    if min_available is not None:
        for job in data["jobs"]:
            job["tasks"][0]["minAvailable"] = min_available
    return spec.validate(data)


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
    data = _example("priority-stream.yaml")
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
    data = _recording("priority-preempt")
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
    data = _recording("queues-reclaim")
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
# ch. 8: preemption and reclaim, victims, grace period, checkpoints

_CH08_POOL = {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi", "pods": 110}


def _ch08_pod(gpus: int) -> dict[str, Any]:
    return {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}


def victims_snapshot(urgent_gpus: int = 2, ft_priority: int = 500) -> Scenario:
    """One queue `ml` on 2 nodes x 8 GPUs, full, under volcano-multitenant: on gpu-0 `sweep` (low, 100)
    and `ft` (PriorityClass mid = `ft_priority`), each 2 pods x 2 GPUs with minAvailable 1; on gpu-1
    `etl` (low, 1 pod x 8 GPUs). `urgent` (high, 1000; 1 pod x `urgent_gpus` GPUs) is Inqueue: what
    does the next session's preempt evict for it?"""
    def running(name: str, cls: str, replicas: int, gpus: int, node: str) -> dict[str, Any]:
        return {"name": name, "namespace": "ml", "queue": "ml", "priorityClassName": cls, "duration": "4h",
                "minAvailable": 1, "tasks": [{"name": "worker", "replicas": replicas, "resources": _ch08_pod(gpus)}],
                "status": {"phase": "Running", "running": {"worker": [node] * replicas}}}
    return spec.validate({
        "name": "ch08-victims",
        "cluster": {"pools": [{"name": "gpu", "count": 2, "resources": _CH08_POOL}]},
        "tenants": [{"name": "ml"}],
        "queues": [{"name": "ml"}],
        "priorityClasses": [{"name": "low", "value": 100}, {"name": "mid", "value": int(ft_priority)},
                            {"name": "high", "value": 1000}],
        "scheduler": {"policy": "volcano-multitenant"},
        "jobs": [running("sweep", "low", 2, 2, "gpu-0"), running("ft", "mid", 2, 2, "gpu-0"),
                 running("etl", "low", 1, 8, "gpu-1"),
                 {"name": "urgent", "namespace": "ml", "queue": "ml", "priorityClassName": "high", "duration": "1h",
                  "tasks": [{"name": "worker", "resources": _ch08_pod(int(urgent_gpus))}],
                  "status": {"phase": "Inqueue"}}],
    })


def checkpoint_case(checkpoint: str | int | None = "30m", grace: str | int = 300) -> Scenario:
    """The preset `preemption-checkpoint` (5 nodes x 8 GPUs; pretrain, a gang of 4 x 8 GPUs, preempted by four
    4-GPU hotfix jobs) with pretrain's `checkpointInterval` = `checkpoint` (None: no checkpoints, an
    eviction loses all work) and every pod's `gracePeriod` = `grace`."""
    data = _data("preemption-checkpoint")
    for job in data["jobs"]:
        job["gracePeriod"] = grace
    pretrain = next(j for j in data["jobs"] if j["name"] == "pretrain")
    if checkpoint is None:
        pretrain.pop("checkpointInterval")
    else:
        pretrain["checkpointInterval"] = checkpoint
    return spec.validate(data)


def hotfix_snapshot() -> Scenario:
    """The preset `preemption-checkpoint` as the session at hotfix-1's arrival sees it: pretrain Running on
    gpu-0..gpu-3, serving on gpu-4, hotfix-1 Inqueue (the later hotfixes not yet submitted)."""
    data = _data("preemption-checkpoint")
    data["jobs"] = [j for j in data["jobs"] if j["name"] in ("pretrain", "serving", "hotfix-1")]
    for job in data["jobs"]:
        job["submit"] = 0
    placed = {"pretrain": {"worker": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]}, "serving": {"replica": ["gpu-4"]}}
    for job in data["jobs"]:
        job["status"] = {"phase": "Running", "running": placed[job["name"]]} if job["name"] in placed else {"phase": "Inqueue"}
    return spec.validate(data)


def reclaim_case(actions: str = "enqueue, allocate, backfill, reclaim, preempt", a1_priority: int | None = None) -> Scenario:
    """The recorded real run `queues-reclaim` (team-b's eight 4-GPU jobs fill 4 x 8 GPUs, team-a's a1
    arrives at 12 s; weights 3:1) with the conf's `actions` replaced; `a1_priority` gives a1 a
    PriorityClass of that value (the others have none: priority 0)."""
    data = _recording("queues-reclaim")
    data["scheduler"]["conf"]["actions"] = actions
    if a1_priority is not None:
        data["priorityClasses"] = [{"name": "urgent", "value": int(a1_priority)}]
        next(j for j in data["jobs"] if j["name"] == "a1")["priorityClassName"] = "urgent"
    return spec.validate(data)


# ch. 6: queue management (one workload under each job order and queueing strategy)

HEAD = "big"
"""Chapter 6's head job: a 4 x 8-GPU gang that needs the whole cluster."""
URGENT = "s-4"
"""Chapter 6's urgent job: a small job with the PriorityClass `urgent`."""
QUEUE_ORDERS = {
    "fifo-besteffort": (False, "BestEffortFIFO"),
    "fifo-strict": (False, "StrictFIFO"),
    "priority-besteffort": (True, "BestEffortFIFO"),
    "priority-strict": (True, "StrictFIFO"),
}
"""Chapter 6's queue order policies: (job order by priority?, what happens when the head does not fit)."""


def queue_order(order: str = "fifo-besteffort", resident_minutes: int = 60, kueue: bool = False) -> Scenario:
    """examples/queue-order.yaml (4 nodes x 8 GPUs, one queue `ml`: residents run-1 and run-2 at t=0, the
    head `big`, 4 x 8 GPUs, at 60 s, a 4-GPU job every 10 minutes behind it, s-4 urgent) under `order`,
    one of QUEUE_ORDERS: the priority plugin (PriorityClass first in Volcano's job order) on or off,
    and `scheduler.queueingStrategy`. run-2 runs `resident_minutes`. `kueue=True` runs the jobs through
    one Kueue ClusterQueue `ml` (nominalQuota: the cluster's 512 CPUs, 4096Gi, 32 GPUs) with that
    queueingStrategy instead, without the Volcano Queue; Kueue always orders by priority, then creation time."""
    if order not in QUEUE_ORDERS:
        raise ValueError(f"order must be one of {', '.join(QUEUE_ORDERS)}, not {order!r}")
    priority, strategy = QUEUE_ORDERS[order]
    data = _example("queue-order.yaml")
    next(j for j in data["jobs"] if j["name"] == "run-2")["duration"] = f"{int(resident_minutes)}m"
    data["name"] = f"queue-order-{'kueue-' if kueue else ''}{order}"
    if kueue:
        data["kueue"] = {
            "resourceFlavors": [{"name": "a100"}],
            "clusterQueues": [{"name": "ml", "queueingStrategy": strategy, "resourceGroups": [
                {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                 "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 512},
                                                            {"name": "memory", "nominalQuota": "4096Gi"},
                                                            {"name": "nvidia.com/gpu", "nominalQuota": 32}]}]}]}],
            "localQueues": [{"name": "ml", "namespace": "ml", "clusterQueue": "ml"}],
        }
        data["scheduler"] = {"policy": "kueue"}
        data.pop("queues")  # no Volcano Queue: each job goes to its namespace's only LocalQueue, `ml`
        for job in data["jobs"]:
            job.pop("queue")
        return spec.validate(data)
    scheduler = data["scheduler"]
    scheduler.update(policy=order, queueingStrategy=strategy)
    if priority:
        scheduler["conf"]["tiers"][0]["plugins"].insert(0, {"name": "priority"})
    return spec.validate(data)
# ch. 11: backfill scheduling


def backfill_mix(policy: str | None = None, estimate: float | None = None, bf_window: int | None = None,
                 limits: dict[str, int] | None = None) -> Scenario:
    """examples/backfill-estimates.yaml (4 nodes x 8 GPUs: team A's 3-node a, then its 4-node gang b; team B's
    one-node c1..c4; team C's best-effort indexer e), under `policy` (default: the file's slurm-backfill).

    `limits`: job -> time limit in minutes, replacing the file's whole hours. `estimate`: every job's time
    limit becomes estimate x its run time (`set_estimate`). `bf_window`: slurm-backfill with that
    bf_window in minutes (`set_bf_window`).
    """
    data = _example("backfill-estimates.yaml")
    if policy is not None:
        data["scheduler"] = {"policy": policy}
    for job in data["jobs"]:
        if limits and job["name"] in limits:
            job["timeLimit"] = f"{int(limits[job['name']])}m"
    if estimate is not None:
        set_estimate(data, estimate)
    if bf_window is not None:
        set_bf_window(data, bf_window)
    return spec.validate(data)


def set_estimate(data: dict[str, Any], estimate: float) -> None:
    """Every job's time limit (YAML form) = `estimate` x its run time, rounded up to whole minutes as
    sbatch rounds `-t`: the user's runtime estimate off by that factor."""
    for job in data["jobs"]:
        seconds = round(float(estimate) * parse_duration(job["duration"]), 6)
        job["timeLimit"] = f"{int(-(-seconds // 60))}m"


def set_bf_window(data: dict[str, Any], minutes: int) -> None:
    """The scenario (YAML form) under slurm-backfill with SchedulerParameters' bf_window = `minutes`."""
    conf = spec.policy_scheduler("slurm-backfill").slurm.model_dump(mode="json", by_alias=True, exclude_unset=True)
    params = [p for p in conf.get("SchedulerParameters", "").split(",") if p and not p.startswith("bf_window=")]
    conf["SchedulerParameters"] = ",".join([*params, f"bf_window={int(minutes)}"])
    data["scheduler"] = {"policy": "slurm-backfill", "slurm": conf}
# ch. 9: one limit written three ways (ResourceQuota, Queue capability, Kueue nominalQuota); overcommit-factor

A100_NODE = {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}
LIMIT_MECHANISMS = ("resourcequota", "capability", "kueue")


def quota_limit(mechanism: str, limit: int = 16, duration: int = 90, jobs: int = 8, gpus: int = 4) -> Scenario:
    """Team C's burst on 4 x 8 GPUs: `jobs` one-pod evaluation jobs of `gpus` GPUs running `duration` s,
    submitted a second apart, with team C held to `limit` GPUs by a namespace ResourceQuota
    (``resourcequota``), its Volcano Queue's capability (``capability``) or its Kueue ClusterQueue's
    nominalQuota (``kueue``, without the Volcano Queue; cpu and memory are covered too, with room to spare,
    as Kueue requires)."""
    if mechanism not in LIMIT_MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(LIMIT_MECHANISMS)}, not {mechanism!r}")
    data: dict[str, Any] = {
        "name": f"quota-limit-{mechanism}",
        "cluster": {"pools": [{"name": "a100", "count": 4, "labels": {"gpu": "a100"}, "resources": A100_NODE}]},
        "tenants": [{"name": "team-c"}],
        "queues": [{"name": "team-c"}],
        "jobs": [{"name": f"c-eval-{i}", "namespace": "team-c", "queue": "team-c", "submit": i, "duration": duration,
                  "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": gpus, "cpu": 8, "memory": "64Gi"}}]}
                 for i in range(jobs)],
    }
    if mechanism == "resourcequota":
        data["tenants"][0]["resourceQuota"] = {"hard": {"requests.nvidia.com/gpu": str(limit)}}
    elif mechanism == "capability":
        data["queues"][0]["capability"] = {"nvidia.com/gpu": limit}
    else:
        quotas = [{"name": "cpu", "nominalQuota": 512}, {"name": "memory", "nominalQuota": "4096Gi"},
                  {"name": "nvidia.com/gpu", "nominalQuota": limit}]
        data["kueue"] = {
            "resourceFlavors": [{"name": "a100", "nodeLabels": {"gpu": "a100"}}],
            "clusterQueues": [{"name": "team-c", "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": quotas}]}]}],
            "localQueues": [{"name": "team-c", "namespace": "team-c", "clusterQueue": "team-c"}]}
        data["scheduler"] = {"policy": "kueue"}
        data.pop("queues")  # no Volcano Queue: the jobs go to the namespace's only LocalQueue, team-c
        for job in data["jobs"]:
            job.pop("queue")
    return spec.validate(data)


def overcommit_conf(factor: float) -> dict[str, Any]:
    """Volcano's shipped conf (policy volcano-shipped) with the overcommit plugin's `overcommit-factor`."""
    conf = spec.policy("volcano-shipped").model_dump(mode="json", by_alias=True, exclude_unset=True)
    for plugin in conf["tiers"][1]["plugins"]:
        if plugin["name"] == "overcommit":
            plugin["arguments"] = {"overcommit-factor": float(factor)}
    return conf


def overcommit_wave(factor: float = 1.2, capability: int | None = None, quota: int | None = None,
                    jobs: int = 6) -> Scenario:
    """Teams B and C each submit `jobs` one-pod 8-GPU training jobs (10 minutes) at t=0 onto 4 x 8 GPUs,
    under the shipped conf with `overcommit-factor` `factor`; `capability` caps team C's queue (GPUs),
    `quota` is team C's namespace ResourceQuota (``requests.nvidia.com/gpu``)."""
    teams = ("team-b", "team-c")
    data: dict[str, Any] = {
        "name": "overcommit-wave",
        "cluster": {"pools": [{"name": "a100", "count": 4, "resources": A100_NODE}]},
        "tenants": [{"name": team} for team in teams],
        "queues": [{"name": team} for team in teams],
        "jobs": [{"name": f"{team[-1]}-train-{i}", "namespace": team, "queue": team, "submit": 0, "duration": "10m",
                  "tasks": [{"name": "worker", "resources": {"nvidia.com/gpu": 8, "cpu": 16, "memory": "128Gi"}}]}
                 for i in range(jobs) for team in teams],
        "scheduler": {"conf": overcommit_conf(factor)},
    }
    if capability is not None:
        data["queues"][1]["capability"] = {"nvidia.com/gpu": int(capability)}
    if quota is not None:
        data["tenants"][1]["resourceQuota"] = {"hard": {"requests.nvidia.com/gpu": str(quota)}}
    return spec.validate(data)


def elastic_under_limit(mechanism: str, limit: int = 16) -> Scenario:
    """`quota_limit`'s three forms with one 8-GPU job running 10 minutes, then (t=5 s) a job of 4 workers x
    4 GPUs with minAvailable 2 (5 minutes): its minimum fits beside the first job under the limit, all of it does not."""
    data = quota_limit(mechanism, limit=limit, duration=600, jobs=1, gpus=8).model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    data["name"] = f"elastic-under-limit-{mechanism}"
    data["jobs"].append({"name": "c-elastic", "namespace": "team-c", "submit": 5, "duration": 300,
                         "tasks": [{"name": "worker", "replicas": 4, "minAvailable": 2,
                                    "resources": {"nvidia.com/gpu": 4, "cpu": 8, "memory": "64Gi"}}]})
    if "queue" in data["jobs"][0]:  # a Volcano Queue (not under Kueue)
        data["jobs"][-1]["queue"] = data["jobs"][0]["queue"]
    return spec.validate(data)


# ch. 12: borrowing and reclaim in a Kueue cohort


def cohort_borrowing(a_jobs: int = 2, b_borrowing_limit: int | None = None, a_lending_limit: int | None = None,
                     a_reclaim: str = "Any", c_reclaim: str = "LowerPriority", c_borrow: str = "LowerPriority") -> Scenario:
    """Three ClusterQueues in the Kueue cohort `research` on 4 nodes x 8 A100 (one flavor): team-a
    (nominalQuota 16 GPUs, the lender), team-b and team-c (8 each). At 0 team-b submits four 8-GPU
    fine-tuning jobs (2 h) and borrows what the others leave idle; at 15 min team-c submits an evaluation job
    of 2 pods x 8 GPUs (priority 100, 1 h); at 30 min team-a submits `a_jobs` 8-GPU training jobs (2 h).

    The knobs are the ClusterQueues' fields: team-b's `borrowingLimit`, team-a's `lendingLimit`,
    team-a's `preemption.reclaimWithinCohort`, team-c's `reclaimWithinCohort` and
    `borrowWithinCohort.policy` (None / "Never" leave a limit or policy unset)."""
    def cluster_queue(name: str, nominal: int, preemption: dict, borrowing: int | None = None,
                      lending: int | None = None) -> dict:
        quota = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        if lending is not None:
            quota["lendingLimit"] = lending
        return {"name": name, "cohortName": "research", "preemption": preemption,
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                    "flavors": [{"name": "a100", "resources": [quota]}]}]}

    def jobs(team: str, kind: str, count: int, pods: int, submit: int, duration: str, **extra) -> list[dict]:
        worker = {"name": "worker", "replicas": pods, "resources": {"nvidia.com/gpu": 8}}
        return [{"name": f"{kind}-{i}", "namespace": team, "submit": submit, "duration": duration, "tasks": [worker],
                 **extra} for i in range(count)]

    c_preemption = {"reclaimWithinCohort": c_reclaim}
    if c_borrow != "Never":
        c_preemption["borrowWithinCohort"] = {"policy": c_borrow}
    return spec.validate({
        "name": "cohort-borrowing",
        "cluster": {"pools": [{"name": "a100", "count": 4, "labels": {"gpu": "a100"},
                               "resources": {"nvidia.com/gpu": 8, "cpu": 128, "memory": "1024Gi", "pods": 110}}]},
        "tenants": [{"name": team} for team in TEAMS],
        "priorityClasses": [{"name": "eval-high", "value": 100}],
        "kueue": {
            "resourceFlavors": [{"name": "a100", "nodeLabels": {"gpu": "a100"}}],
            "clusterQueues": [cluster_queue("team-a", 16, {"reclaimWithinCohort": a_reclaim}, lending=a_lending_limit),
                              cluster_queue("team-b", 8, {}, borrowing=b_borrowing_limit),
                              cluster_queue("team-c", 8, c_preemption)],
            "localQueues": [{"name": "main", "namespace": team, "clusterQueue": team} for team in TEAMS],
        },
        "jobs": (jobs("team-b", "finetune", 4, 1, 0, "2h")
                 + jobs("team-c", "eval", 1, 2, 900, "1h", priorityClassName="eval-high")
                 + jobs("team-a", "train", a_jobs, 1, 1800, "2h")),
        "scheduler": {"policy": "kueue"},
    })
