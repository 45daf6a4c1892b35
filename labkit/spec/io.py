"""Load, validate, resolve and dump scenarios; named presets and scheduler policies.

`load` accepts a path, a mapping or a Scenario; every problem becomes one `SpecError` naming the
field path (`jobs[3].tasks[0].resources.nvidia.com/gpu: must be >= 0`). `dump` writes YAML that
`load` reads back to an equal Scenario. `resolve` fills in what Volcano's admission webhook and
controllers would (task and job minAvailable, replicas, namespaces, the conf behind a policy name).
"""

from __future__ import annotations

import functools
import os
import stat
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import SpecError
from . import checks
from .model import Scenario, Scheduler, SchedulerConf
from .yamltext import parse_yaml

MAX_FILE_BYTES = 256 * 2**20
"""Largest scenario file read (a 1M-job trace workload is about 40 MB of YAML)."""

_PRESETS = resources.files("labkit.spec") / "presets"
_POLICIES = resources.files("labkit.spec") / "policies"


def _names(folder: Any) -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def preset_names() -> list[str]:
    return _names(_PRESETS)


def policy_names() -> list[str]:
    return _names(_POLICIES)


def _describe(folder: Any, name: str) -> str:
    data = yaml.safe_load((folder / f"{name}.yaml").read_text(encoding="utf-8"))
    return str(data.get("description", "")).strip().splitlines()[0] if data.get("description") else ""


def preset_descriptions() -> dict[str, str]:
    return {name: _describe(_PRESETS, name) for name in preset_names()}


def policy_descriptions() -> dict[str, str]:
    return {name: _describe(_POLICIES, name) for name in policy_names()}


def preset(name: str) -> Scenario:
    """A named scenario shipped with labkit (`labkit presets` lists them)."""
    if name not in preset_names():
        raise SpecError("--preset", f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    return loads((_PRESETS / f"{name}.yaml").read_text(encoding="utf-8"), source=f"preset {name}")


@functools.cache
def policy_scheduler(name: str) -> Scheduler:
    """The scheduler section a policy name stands for: Volcano's `conf`, Slurm's `slurm` keys, Kueue's
    `kueue` Configuration or a `kube` KubeSchedulerConfiguration (read once per name: it is immutable)."""
    if name not in policy_names():
        raise SpecError("--policy", f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    data = yaml.safe_load((_POLICIES / f"{name}.yaml").read_text(encoding="utf-8"))
    data.pop("description", None)
    return Scheduler.model_validate({"policy": name, **data})


def policy(name: str) -> SchedulerConf:
    """The Volcano scheduler conf behind a Volcano policy name (`labkit presets` lists them)."""
    conf = policy_scheduler(name).conf
    if conf is None:
        raise SpecError("--policy", f"policy {name!r} is not a Volcano conf")
    return conf


def load(source: str | Path | dict | Scenario) -> Scenario:
    """Load a scenario from a YAML file path, a mapping, YAML text (a string with a newline, a
    `key: value` or a `{...}`), or pass a Scenario through (validated)."""
    if isinstance(source, Scenario):
        checks.check(source, policy_names())
        return source
    if isinstance(source, dict):
        return validate(source)
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{") or ": " in source):
        return loads(source)
    if not isinstance(source, (str, os.PathLike)):
        raise SpecError("", f"expected a scenario: a YAML file path, YAML text, a dict or a Scenario, "
                            f"not {type(source).__name__}")
    return loads(read_text(Path(source)), source=str(source))


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's UTF-8 text; a FIFO, a device or a directory is refused, never read (a
    FIFO would block forever), and so is a file larger than `limit` bytes."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SpecError("", f"{path}: not a regular file")
            if info.st_size > limit:
                raise SpecError("", f"{path}: {info.st_size:,} bytes; files up to {limit:,} bytes are read")
            raw = handle.read(limit + 1)
    except FileNotFoundError:
        raise SpecError("", f"{path}: no such file") from None
    except OSError as err:
        raise SpecError("", f"{path}: cannot read ({err.strerror or err.__class__.__name__})") from None
    if len(raw) > limit:
        raise SpecError("", f"{path}: files up to {limit:,} bytes are read")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError("", f"{path}: not UTF-8 text (byte {err.start})") from None


def loads(text: str, source: str = "<text>") -> Scenario:
    """Load a scenario from YAML text."""
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise SpecError("", f"{source}: a scenario is a YAML mapping with at least a 'cluster' key")
    return validate(data)




def validate(data: dict) -> Scenario:
    """Build a Scenario from plain data, turning the first problem into a SpecError."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise _first_error(err) from None
    checks.check(scenario, policy_names())
    return scenario


def _first_error(err: ValidationError) -> SpecError:
    first = err.errors()[0]
    path = format_path(first["loc"])
    message = first["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.replace(prefix, "")
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    elif first["type"] == "missing":
        message = "required field is missing"
    elif isinstance(first.get("input"), bool) and first["type"] in ("int_type", "float_type"):
        message = f"{first['input']} is a boolean, not a number"
    elif first["type"] == "literal_error":
        message = f"{first['input']!r} is not allowed; {message.replace('Input should be ', 'use ')}"
    return SpecError(path, message)


def format_path(loc: tuple) -> str:
    """('jobs', 3, 'tasks', 0, 'resources', 'cpu') -> 'jobs[3].tasks[0].resources.cpu'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in str(part) or part in ("str", "int", "float", "bool"):
            continue  # pydantic's union-member tags, not fields of the scenario
        else:
            out += f".{part}" if out else str(part)
    return out


def dump(scenario: Scenario) -> str:
    """YAML that `load` reads back to an equal Scenario: what was given (or resolved), nothing else."""
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


def resolve(scenario: Scenario) -> Scenario:
    """Fill in the defaults Volcano's webhook and controllers apply, and the conf behind the policy."""
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for tenant, given in zip(scenario.tenants, data.get("tenants", [])):
        given["namespace"] = tenant.ns
    for job, given in zip(scenario.jobs, data.get("jobs", [])):
        for task, task_data in zip(job.tasks, given["tasks"]):
            task_data["name"] = task.name
            task_data["replicas"] = task.replicas_resolved
            task_data["minAvailable"] = task.min_available_resolved
        given["minAvailable"] = job.min_available_resolved
        given.setdefault("namespace", job.namespace)
        given.setdefault("queue", job.queue)
    sched = data.setdefault("scheduler", {})
    if scenario.scheduler.section is None:
        name = scenario.scheduler.policy or "volcano-shipped"
        behind = policy_scheduler(name).model_dump(mode="json", by_alias=True, exclude_unset=True)
        own = {k: sched[k] for k in ("queueingStrategy",) if k in sched}
        sched.update({**behind, **own})
    sched.setdefault("schedulePeriod", scenario.scheduler.schedule_period)
    return validate(data)


def scheduler_of(scenario: Scenario) -> Scheduler:
    """The scheduler section a scenario runs under, with a policy name replaced by what it stands for."""
    sched = scenario.scheduler
    if sched.section is not None:
        return sched
    behind = policy_scheduler(sched.policy or "volcano-shipped")
    update = {"schedule_period": sched.schedule_period}
    if sched.queueing_strategy is not None:  # the scenario's own choice beats the policy's
        update["queueing_strategy"] = sched.queueing_strategy
    merged = behind.model_copy(update=update)
    if merged.queueing_strategy == "StrictFIFO" and merged.section != "conf":
        raise SpecError("scheduler.queueingStrategy", f"applies to a Volcano conf; policy {sched.policy!r} "
                        f"is a {merged.section} policy")
    return merged


def conf_of(scenario: Scenario) -> SchedulerConf:
    """The Volcano conf a scenario runs under (SpecError when it runs under Slurm)."""
    conf = scheduler_of(scenario).conf
    if conf is None:
        raise SpecError("scheduler", "this scenario runs under a Slurm, Kueue or kube-scheduler policy, not a Volcano conf")
    return conf
