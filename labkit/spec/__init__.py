"""The scenario model (`Scenario`), its YAML form, presets and scheduler policies."""

from .io import (
    conf_of,
    dump,
    load,
    loads,
    policy,
    policy_names,
    policy_scheduler,
    preset,
    preset_names,
    resolve,
    scheduler_of,
    validate,
)
from .model import (
    Cluster,
    Job,
    NodeEvent,
    NodePool,
    PriorityClass,
    Queue,
    Scenario,
    Scheduler,
    SchedulerConf,
    Task,
    Tenant,
    Workload,
)

__all__ = [
    "Cluster", "Job", "NodeEvent", "NodePool", "PriorityClass", "Queue", "Scenario", "Scheduler", "SchedulerConf", "Task",
    "Tenant", "Workload", "conf_of", "dump", "load", "loads", "policy", "policy_names", "policy_scheduler", "preset", "preset_names",
    "resolve", "scheduler_of", "validate",
]
