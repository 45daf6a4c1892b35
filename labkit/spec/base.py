"""The building blocks of every scenario object: the base Model (camelCase keys, unknown fields
refused, immutable), checked quantities, durations and Kubernetes names, and a node Taint. Kept
apart from `model.py` so that Kueue's and kube-scheduler's objects (`kueue.py`, `kube.py`), which
`model.py`'s Scheduler holds, build on them without importing `model.py`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from .quantity import parse_duration, parse_quantity

_RESOURCE_NAME = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _non_negative_quantity(value: str | float) -> str | int | float:
    if parse_quantity(value) < 0:
        raise ValueError("must be >= 0")
    return value


def non_negative_duration(value: str | float) -> str | int | float:
    if parse_duration(value) < 0:
        raise ValueError("must be >= 0")
    return value


def positive_duration(value: str | float) -> str | int | float:
    if parse_duration(value) <= 0:
        raise ValueError("must be > 0")
    return value


def _object_name(value: str) -> str:
    if len(value) > 253 or not _OBJECT_NAME.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes object name (lower case letters, digits, '-', '.')")
    return value


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a DNS label (lower case letters, digits, '-', at most 63)")
    return value


DEFAULT_MAX_PODS = 110
"""kubelet's default `maxPods`, what a node pool that does not list `pods` holds."""


Quantity = Annotated[str | int | float, AfterValidator(_non_negative_quantity)]
Duration = Annotated[str | int | float, AfterValidator(non_negative_duration)]
PositiveDuration = Annotated[str | int | float, AfterValidator(positive_duration)]
ObjectName = Annotated[str, AfterValidator(_object_name)]
Namespace = Annotated[str, AfterValidator(_dns_label)]


def _resource_names(value: dict[str, Any]) -> dict[str, Any]:
    for name in value:
        if not _RESOURCE_NAME.match(name):
            raise ValueError(f"{name!r} is not a resource name (e.g. cpu, memory, nvidia.com/gpu)")
    return value


ResourceList = Annotated[dict[str, Quantity], AfterValidator(_resource_names)]


def _whole_extended(value: dict[str, Any]) -> dict[str, Any]:
    """Extended resources (a `/` in the name, e.g. nvidia.com/gpu) are whole numbers: Kubernetes'
    ValidateResourceRequirements refuses `nvidia.com/gpu: 0.5` ("must be an integer")."""
    for name, amount in value.items():
        if "/" in name and not name.startswith("kubernetes.io/") and not parse_quantity(amount).is_integer():
            raise ValueError(f"{name}: {amount!r} must be a whole number (an extended resource is not divisible)")
    return value


PodResources = Annotated[ResourceList, AfterValidator(_whole_extended)]
"""A node's capacity or a pod's requests: extended resources in whole units."""


class Model(BaseModel):
    """Base: unknown fields are errors, objects are immutable, YAML keys are camelCase."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel, validate_default=False,
        strict=True, allow_inf_nan=False,
    )


class Taint(Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
