"""slurm.conf, gres.conf and one sbatch script per job, from a Scenario.

Node pools become `NodeName` lines (one slurmd per node on 127.0.0.1, each on its own port; a pool's
`cpu`, `memory` and `*/gpu` become CPUs, RealMemory and `Gres=gpu:N`), `scenario.slurm.partitions`
become `PartitionName` lines (default: one partition `gpu` over every node) and the scheduler's `slurm`
keys are written as slurm.conf spells them. GPUs are fake: gres.conf points `File=` at character
devices `fakedev/nvidia*` in the state directory (`mknod c 1 3`, /dev/null clones), which slurmd
requires of a GPU.

Each replica of a job is one node of its allocation: `-N replicas --ntasks-per-node=1`, with the
pod's requests per node (`-c`, `--mem`, `--gres=gpu:N`). `time_scale` divides every time: submit
offsets, the `sleep` that stands for the run time, time limits (then rounded up to whole minutes,
Slurm's unit) and the time-like SchedulerParameters (so backfill runs as often, in scenario time, as
the scenario says).
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabkitError, SpecError
from ..spec import Job, NodePool, Scenario, policy_scheduler, scheduler_of
from ..spec.checks import simulated_only
from ..spec.model import SlurmConf, SlurmPartition
from ..spec.quantity import parse_duration, parse_quantity
from ..workloads import expand
from .nodes import node_actions, script

FIRST_PORT = 6817
"""SlurmctldPort when nothing else asks; the slurmd ports follow it, one per node."""
DEFAULT_PARTITION = SlurmPartition(name="gpu", default=True)
"""The partition of a scenario that names none: every node, the default for every job."""
SECONDS_PARAMETERS = {"bf_interval": 30, "bf_resolution": 60, "batch_sched_delay": 3, "sched_interval": 60}
MINUTES_PARAMETERS = {"bf_window": 1440}
"""Time-like SchedulerParameters (Slurm's defaults), divided by the time scale."""

CLUSTER_KEYS = """\
ClusterName=labkit
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MinJobAge=600
InactiveLimit=0
KillWait=5
Waittime=0
"""
"""The fixed part: munge auth, no cgroups, no job accounting, cons_tres with GPUs as GRES.
config_overrides lets four 8-CPU nodes live on a 2-CPU host."""
DURATION = str | int | float
"""How the scenario model types a duration field (`15m`, `7d`, 90): written as Slurm's days-hh:mm:ss."""


@dataclass(frozen=True)
class Ports:
    """SlurmctldPort and the slurmd ports, one per node in scenario order."""

    slurmctld: int
    slurmd: tuple[int, ...]

    @classmethod
    def block(cls, first: int, nodes: int) -> Ports:
        return cls(first, tuple(range(first + 1, first + 1 + nodes)))

    def named(self, nodes: list[str]) -> dict[int, str]:
        """port -> the daemon that listens on it."""
        return {self.slurmctld: "slurmctld", **{p: f"slurmd {n}" for p, n in zip(self.slurmd, nodes)}}


@dataclass(frozen=True)
class SlurmJob:
    """What sbatch is asked for one scenario job: the allocation, limits and the scaled times."""

    name: str
    key: str
    nodes: int
    roles: tuple[tuple[str, int], ...]
    cpus: int | None
    mem_mb: int | None
    gpus: int
    time_limit_min: int | None
    partition: str
    qos: str | None
    submit: float
    sleep: float
    requeue: bool | None = None
    """sbatch --requeue (True) or --no-requeue (False); None: JobRequeue decides."""


def slurm_scenario(scenario: Scenario, policy: str | None = None) -> tuple[Scenario, SlurmConf]:
    """The scenario with generators expanded (under `policy`, if given) and the slurm.conf keys it runs under."""
    if policy is not None:
        behind = policy_scheduler(policy)
        if behind.slurm is None:
            raise SpecError("--policy", f"policy {policy!r} is not a Slurm policy")
        scenario = scenario.model_copy(update={"scheduler": behind})
    simulated_only(scenario, node_events=True)  # `run` applies them with scontrol (nodes.py)
    conf = scheduler_of(scenario).slurm
    if conf is None:
        raise SpecError("scheduler", "this scenario runs under a Volcano conf; give a Slurm policy "
                                     "(scheduler.policy: slurm-backfill or slurm-builtin, or --policy)")
    return expand(scenario), conf


def needs_slurmdbd(scenario: Scenario, conf: SlurmConf) -> None:
    """QOS, fair share and limits enforcement live in slurmdbd, which the local Slurm has not:
    a scenario that needs them is refused (one line naming the field)."""
    slurm = scenario.slurm
    needs = [(f"jobs[{i}].qos", job.qos) for i, job in enumerate(scenario.jobs)] + [
        ("slurm.qos", slurm and slurm.qos),
        ("scheduler.slurm.PreemptType", conf.preempt_type == "preempt/qos"),
        ("scheduler.slurm.PriorityWeightFairshare", conf.priority_weight_fairshare),
        ("scheduler.slurm.AccountingStorageType", conf.accounting_storage_type != "accounting_storage/none"),
        ("scheduler.slurm.AccountingStorageEnforce", conf.accounting_storage_enforce)]
    where = next((path for path, needed in needs if needed), None)
    if where:
        raise LabkitError(f"{where}: needs slurmdbd, which the local Slurm has not (no QOS, fair share or "
                          "association limits there); run this scenario on the simulator only")


def node_names(scenario: Scenario) -> list[str]:
    return [name for pool in scenario.cluster.pools for name in pool.node_names()]


def hostlist(pool: NodePool) -> str:
    """The pool's nodes as a Slurm hostlist expression: `n-[0-3]`."""
    names = pool.node_names()
    if len(names) == 1:
        return names[0]
    return f"{pool.name}-[{names[0].rsplit('-', 1)[1]}-{names[-1].rsplit('-', 1)[1]}]"


def _port_range(ports: tuple[int, ...]) -> str:
    return str(ports[0]) if len(ports) == 1 else f"[{ports[0]}-{ports[-1]}]"


def _gpus(resources: dict) -> int:
    return math.ceil(sum(parse_quantity(v) for k, v in resources.items() if k.endswith("/gpu")))


def _mebibytes(resources: dict) -> int | None:
    return math.ceil(parse_quantity(resources["memory"]) / 2**20) if "memory" in resources else None


def _cpus(resources: dict) -> int | None:
    return math.ceil(parse_quantity(resources["cpu"])) if "cpu" in resources else None


def slurm_time(seconds: float) -> str:
    """A duration as slurm.conf writes one: `days-hours:minutes:seconds`."""
    whole = math.ceil(seconds)
    days, rest = divmod(whole, 86400)
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def minutes(seconds: float, time_scale: float) -> int:
    """A time limit in Slurm's unit: scaled, then rounded up to whole minutes (at least 1)."""
    return max(1, math.ceil(seconds / time_scale / 60 - 1e-9))


def scheduler_parameters(conf: SlurmConf, time_scale: float) -> dict[str, int | bool]:
    """SchedulerParameters with the time-like ones divided by the time scale (Slurm's defaults made explicit)."""
    given = conf.parameters()
    if time_scale == 1:
        return given
    out = dict(given)
    for key, default in SECONDS_PARAMETERS.items():
        out[key] = max(1, math.floor(int(given.get(key, default)) / time_scale + 0.5))
    for key, default in MINUTES_PARAMETERS.items():
        out[key] = max(1, math.ceil(int(given.get(key, default)) / time_scale))
    return out


def scheduling_interval(conf: SlurmConf, time_scale: float) -> float:
    """Scenario seconds between two chances to start a job: the backfill interval (under sched/backfill)
    or the main scheduler's batch_sched_delay, whichever is longer."""
    params = scheduler_parameters(conf, time_scale)
    delay = int(params.get("batch_sched_delay", SECONDS_PARAMETERS["batch_sched_delay"]))
    if conf.scheduler_type == "sched/backfill":
        delay = max(delay, int(params.get("bf_interval", SECONDS_PARAMETERS["bf_interval"])))
    return delay * time_scale


def backfill_grid(conf: SlurmConf, time_scale: float) -> int:
    """Real seconds of the grid backfill floors reservation times to (bf_resolution, scaled), 1 when
    backfill is off. Slurm floors epoch times, the simulator scenario times: a run that starts on the
    grid makes the two agree."""
    if conf.scheduler_type != "sched/backfill":
        return 1
    return int(scheduler_parameters(conf, time_scale).get("bf_resolution", SECONDS_PARAMETERS["bf_resolution"]))


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return str(value)


def scheduling_keys(conf: SlurmConf, time_scale: float) -> list[str]:
    """The scenario's slurm.conf scheduling keys as slurm.conf spells them; durations scaled and in Slurm's format."""
    lines = []
    for name, field in type(conf).model_fields.items():
        key, value = field.alias or name, getattr(conf, name)
        if key == "SchedulerParameters":
            params = scheduler_parameters(conf, time_scale)
            value = ",".join(k if v is True else f"{k}={v}" for k, v in params.items())
        elif field.annotation == DURATION:
            value = slurm_time(parse_duration(value) / time_scale)
        if value != "":
            lines.append(f"{key}={_value(value)}")
    return lines


def partitions(scenario: Scenario) -> list[SlurmPartition]:
    given = scenario.slurm.partitions if scenario.slurm else []
    return list(given) or [DEFAULT_PARTITION]


def _partition_line(part: SlurmPartition, scenario: Scenario, time_scale: float) -> str:
    pools = [p for p in scenario.cluster.pools if part.pools is None or p.name in part.pools]
    words = [f"PartitionName={part.name}", f"Nodes={','.join(hostlist(p) for p in pools)}"]
    if part.default:
        words.append("Default=YES")
    max_time = minutes(parse_duration(part.max_time), time_scale) if part.max_time is not None else "INFINITE"
    words += [f"MaxTime={max_time}", "State=UP", "OverSubscribe=NO"]
    for field, key in (("priority_tier", "PriorityTier"), ("priority_job_factor", "PriorityJobFactor"),
                       ("max_nodes", "MaxNodes")):
        if field in part.model_fields_set:
            words.append(f"{key}={getattr(part, field)}")
    if part.preempt_mode is not None:
        words.append(f"PreemptMode={part.preempt_mode}")
    if parse_duration(part.grace_time):
        words.append(f"GraceTime={math.ceil(parse_duration(part.grace_time) / time_scale)}")
    return " ".join(words)


def slurm_conf(scenario: Scenario, conf: SlurmConf, state_dir: Path, ports: Ports, time_scale: float = 1.0,
               header: str = "") -> str:
    """slurm.conf for the scenario's cluster on 127.0.0.1, every file of Slurm's under `state_dir`."""
    host = socket.gethostname().split(".")[0]
    d = state_dir.resolve()
    lines = [f"# {header}" if header else f"# labkit: scenario {scenario.name}, time scale {time_scale:g}",
             f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ports.slurmctld}",
             f"AuthInfo=socket={d}/run/munge.socket", f"StateSaveLocation={d}/state",
             f"SlurmdSpoolDir={d}/spool/%n", f"SlurmctldPidFile={d}/run/slurmctld.pid",
             f"SlurmdPidFile={d}/run/slurmd-%n.pid", f"SlurmctldLogFile={d}/log/slurmctld.log",
             f"SlurmdLogFile={d}/log/slurmd-%n.log"]
    lines += CLUSTER_KEYS.splitlines() + scheduling_keys(conf, time_scale)
    offset = 0
    for pool in scenario.cluster.pools:
        cpus, mem, gpus = _cpus(pool.resources) or 1, _mebibytes(pool.resources), _gpus(pool.resources)
        words = [f"NodeName={hostlist(pool)}", f"NodeHostname={host}", "NodeAddr=127.0.0.1",
                 f"Port={_port_range(ports.slurmd[offset:offset + pool.count])}", f"CPUs={cpus}", "Boards=1",
                 "SocketsPerBoard=1", f"CoresPerSocket={cpus}", "ThreadsPerCore=1"]
        words += [f"RealMemory={mem}"] if mem else []
        words += [f"Gres=gpu:{gpus}"] if gpus else []
        lines.append(" ".join(words + [f"Feature={pool.name}", "State=UNKNOWN"]))
        offset += pool.count
    lines += [_partition_line(part, scenario, time_scale) for part in partitions(scenario)]
    return "\n".join(lines) + "\n"


def fake_gpus(scenario: Scenario) -> int:
    """How many fake GPU device files the largest node needs."""
    return max((_gpus(p.resources) for p in scenario.cluster.pools), default=0)


def gres_conf(scenario: Scenario, state_dir: Path) -> str:
    """gres.conf: each pool's GPUs as files in `fakedev/` (character devices, made by `labkit slurm up`)."""
    lines = ["# labkit: fake GPUs, character devices c 1 3 made by `labkit slurm up`", "AutoDetect=off"]
    for pool in scenario.cluster.pools:
        gpus = _gpus(pool.resources)
        if gpus:
            files = "nvidia0" if gpus == 1 else f"nvidia[0-{gpus - 1}]"
            lines.append(f"NodeName={hostlist(pool)} Name=gpu File={state_dir.resolve()}/fakedev/{files}")
    return "\n".join(lines) + "\n"


def _run_time(scenario: Scenario, job: Job, path: str) -> float:
    if job.duration is not None:
        return parse_duration(job.duration)
    speeds = {p.speed for p in scenario.cluster.pools}
    if len(speeds) > 1:
        raise LabkitError(f"{path}.work: the real Slurm run cannot scale work by node speed "
                          f"(pools of speeds {sorted(speeds)}); give the job a duration")
    return parse_duration(job.work) / speeds.pop()


def slurm_jobs(scenario: Scenario, time_scale: float = 1.0) -> list[SlurmJob]:
    """Every job as an sbatch request (scenario order); a job with roles of different shapes is refused."""
    if not time_scale > 0:
        raise SpecError("--time-scale", f"must be > 0, got {time_scale}")
    default = next((p.name for p in partitions(scenario) if p.default), None)
    out = []
    for i, job in enumerate(scenario.jobs):
        shapes = {tuple(sorted((k, parse_quantity(v)) for k, v in t.resources.items())) for t in job.tasks}
        if len(shapes) > 1:
            raise LabkitError(f"jobs[{i}].tasks: a Slurm job has one shape per node; "
                              f"the tasks of {job.name} request different resources")
        pod = job.tasks[0].resources
        limit = minutes(parse_duration(job.time_limit), time_scale) if job.time_limit is not None else None
        out.append(SlurmJob(
            name=job.name, key=f"{job.namespace}/{job.name}",
            nodes=sum(t.replicas_resolved for t in job.tasks),
            roles=tuple((t.name, t.replicas_resolved) for t in job.tasks),
            cpus=_cpus(pod), mem_mb=_mebibytes(pod), gpus=_gpus(pod), time_limit_min=limit,
            partition=job.partition or default or "", qos=job.qos,
            submit=parse_duration(job.submit) / time_scale, sleep=_run_time(scenario, job, f"jobs[{i}]") / time_scale,
            requeue=job.requeue))
    return out


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def sbatch_script(job: SlurmJob, state_dir: Path, time_scale: float = 1.0) -> str:
    """The batch script of one job: its allocation as #SBATCH lines, then a sleep of its scaled run time,
    counted from Slurm's StartTime."""
    lines = ["#!/bin/sh",
             f"# labkit: job {job.key}, submitted at +{_seconds(job.submit)} s (time scale {time_scale:g})",
             f"#SBATCH -J {job.name}", f"#SBATCH -N {job.nodes}", "#SBATCH --ntasks-per-node=1"]
    lines += [f"#SBATCH -c {job.cpus}"] if job.cpus else []
    lines += [f"#SBATCH --mem={job.mem_mb}M"] if job.mem_mb else []
    lines += [f"#SBATCH --gres=gpu:{job.gpus}"] if job.gpus else []
    lines += [f"#SBATCH -t {job.time_limit_min}"] if job.time_limit_min else []
    lines += [f"#SBATCH -p {job.partition}"] if job.partition else []
    lines += [f"#SBATCH --qos={job.qos}"] if job.qos else []
    lines += [] if job.requeue is None else ["#SBATCH --requeue" if job.requeue else "#SBATCH --no-requeue"]
    out = state_dir.resolve() / "out"
    lines += [f"#SBATCH -D {out}", f"#SBATCH -o {out}/%x-%j.out", *_sleep(job.sleep)]
    return "\n".join(lines) + "\n"


def _sleep(seconds: float) -> list[str]:
    """Shell lines that sleep until the job's StartTime + `seconds`: slurmd starts the script some tenths of a
    second after slurmctld started the job, and a job that held its nodes that much longer would delay the
    jobs waiting for them. Without an answer from squeue, the whole `seconds`."""
    run = _seconds(seconds)
    return ["# the run time counts from Slurm's StartTime (whole seconds), not from when this script began",
            'start=$(SLURM_TIME_FORMAT=%s squeue -h -j "$SLURM_JOB_ID" -o %S 2>/dev/null)',
            (f'exec sleep "$(awk -v start="$start" -v now="$(date +%s.%N)" \'BEGIN {{ left = (start ~ /^[0-9]+$/) ? '
             f'start + {run} - now : {run}; printf "%.3f", (left > 0) ? left : 0 }}\')"')]


def render(scenario: Scenario, conf: SlurmConf, state_dir: Path, ports: Ports, time_scale: float = 1.0,
           header: str = "") -> dict[str, str]:
    """Every file, by path relative to the state dir: slurm.conf, gres.conf, jobs/<name>.sbatch and,
    when the scenario has node events, node-events.sh (their scontrol commands at their times)."""
    files = {"slurm.conf": slurm_conf(scenario, conf, state_dir, ports, time_scale, header),
             "gres.conf": gres_conf(scenario, state_dir)}
    for job in slurm_jobs(scenario, time_scale):
        files[f"jobs/{job.key.replace('/', '.')}.sbatch"] = sbatch_script(job, state_dir, time_scale)
    actions = node_actions(scenario)
    if actions:
        files["node-events.sh"] = script(actions, time_scale)
    return files


def export(scenario: Scenario, out_dir: Path, time_scale: float, command: str, force: bool = False) -> list[Path]:
    """`labkit export slurm`: the files for a state dir `out_dir` (ports from 6817; fakedev made by `slurm up`).
    A file already there with other content (an admin's slurm.conf) is replaced only with `force`;
    LabkitError before anything is written."""
    scenario, conf = slurm_scenario(scenario)
    ports = Ports.block(FIRST_PORT, len(node_names(scenario)))
    files = render(scenario, conf, out_dir, ports, time_scale, header=command)
    for name, text in files.items():
        path = out_dir / name
        if not force and (path.is_symlink() or path.exists()) and _content(path) != text:
            raise LabkitError(f"{path}: exists with other content; will not overwrite it (--force replaces it)")
    written = []
    for name, text in files.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _content(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
