"""The default kube-scheduler's configuration in a policy (``scheduler.kube``).

Written as a ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``) with one profile:
``plugins`` (per extension point ``enabled``/``disabled`` lists, ``multiPoint`` for all) and
``pluginConfig`` (``args`` per plugin). Defaults and validation follow
``pkg/scheduler/apis/config/v1/default_plugins.go``, ``defaults.go`` and ``validation/validation_pluginargs.go``;
the Coscheduling plugin is scheduler-plugins' (``apis/config/v1/defaults.go``: permitWaitingTimeSeconds 60).
:meth:`KubeProfile.effective` resolves the plugin sets the way ``mergePlugins`` does.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from .base import Model

MAX_NODE_SCORE = 100
"""framework.MaxNodeScore."""
MAX_CUSTOM_PRIORITY_SCORE = 10
"""config.MaxCustomPriorityScore: the score range of a RequestedToCapacityRatio shape point."""

DEFAULT_SCORE_WEIGHTS = {
    "TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2,
    "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1,
}
"""The default profile's Score plugins and weights (default_plugins.go)."""

KUBE_PLUGINS = (
    "PrioritySort", "SchedulingGates", "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
    "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
    "InterPodAffinity", "DefaultPreemption", "NodeResourcesBalancedAllocation", "ImageLocality", "DefaultBinder",
    "DynamicResources", "Coscheduling",
)
"""In-tree plugins of kube-scheduler plus scheduler-plugins' Coscheduling."""

IMPLEMENTS = {
    "PrioritySort": ("queueSort",), "DefaultPreemption": ("postFilter",),
    "Coscheduling": ("queueSort", "preFilter", "postFilter", "reserve", "permit"),
    **{name: ("preScore", "score") for name in DEFAULT_SCORE_WEIGHTS},
}
"""The extension points of the plugins whose choice changes a decision in the simulator."""

DEFAULTS = {"queueSort": ("PrioritySort",), "postFilter": ("DefaultPreemption",), "score": tuple(DEFAULT_SCORE_WEIGHTS)}
"""The default profile's plugins at those points (default_plugins.go, all enabled through multiPoint)."""

POINTS = ("multiPoint", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
          "preBind", "bind", "postBind")


def _known(name: str) -> str:
    if name not in KUBE_PLUGINS:
        raise ValueError(f"unknown plugin {name!r}; kube-scheduler plugins are {', '.join(KUBE_PLUGINS)}")
    return name


class Plugin(Model):
    """``config.Plugin``: a name and, for Score, a weight."""

    name: str
    weight: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _name(self) -> Plugin:
        if self.name != "*":
            _known(self.name)
        return self


class PluginSet(Model):
    enabled: list[Plugin] = Field(default_factory=list)
    disabled: list[Plugin] = Field(default_factory=list)


class Plugins(Model):
    """``config.Plugins``: one PluginSet per extension point."""

    multi_point: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()


# -------------------------------------------------------------------------------- plugin args


class ResourceSpec(Model):
    """``config.ResourceSpec``: a resource and its weight (1..100, validateResources)."""

    name: str
    weight: int = Field(default=1, ge=1, le=100)


class UtilizationShapePoint(Model):
    utilization: int = Field(ge=0, le=100)
    score: int = Field(ge=0, le=MAX_CUSTOM_PRIORITY_SCORE)


class RequestedToCapacityRatioParam(Model):
    shape: list[UtilizationShapePoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _increasing(self) -> RequestedToCapacityRatioParam:
        points = [p.utilization for p in self.shape]
        if any(b <= a for a, b in pairwise(points)):
            raise ValueError("shape: utilization values must be sorted in increasing order")
        return self


CPU_MEMORY = [ResourceSpec(name="cpu"), ResourceSpec(name="memory")]


class ScoringStrategy(Model):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = Field(default_factory=lambda: list(CPU_MEMORY), min_length=1)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @model_validator(mode="after")
    def _shape_given(self) -> ScoringStrategy:
        if self.type == "RequestedToCapacityRatio" and self.requested_to_capacity_ratio is None:
            raise ValueError("requestedToCapacityRatio: required for type RequestedToCapacityRatio")
        return self


class NodeResourcesFitArgs(Model):
    scoring_strategy: ScoringStrategy = ScoringStrategy()


class NodeResourcesBalancedAllocationArgs(Model):
    resources: list[ResourceSpec] = Field(default_factory=lambda: list(CPU_MEMORY), min_length=1)


class DefaultPreemptionArgs(Model):
    min_candidate_nodes_percentage: int = Field(default=10, ge=0, le=100)
    min_candidate_nodes_absolute: int = Field(default=100, ge=0)


class CoschedulingArgs(Model):
    permit_waiting_time_seconds: int = Field(default=60, ge=0)
    pod_group_backoff_seconds: int = Field(default=0, ge=0)


ARGS = {
    "NodeResourcesFit": NodeResourcesFitArgs, "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "DefaultPreemption": DefaultPreemptionArgs, "Coscheduling": CoschedulingArgs,
}


class PluginConfig(Model):
    """``config.PluginConfig``: a plugin's args, checked as kube-scheduler checks them."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _args(self) -> PluginConfig:
        _known(self.name)
        if self.name in ARGS:
            self.parsed()
        return self

    def parsed(self) -> Model:
        try:
            return ARGS[self.name].model_validate(self.args)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"args.{where}: {first['msg'].removeprefix('Value error, ')}") from None


class KubeProfile(Model):
    """``config.KubeSchedulerProfile``."""

    scheduler_name: str = "default-scheduler"
    plugins: Plugins = Plugins()
    plugin_config: list[PluginConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _resolvable(self) -> KubeProfile:
        sorts = self.enabled("queueSort")
        if len(sorts) != 1:
            raise ValueError(f"plugins: exactly one queueSort plugin must be enabled, got {sorts or 'none'}")
        if "Coscheduling" in self.enabled("permit") and sorts != ["Coscheduling"]:
            raise ValueError("plugins: Coscheduling needs its own queueSort (disable PrioritySort)")
        for point in POINTS[1:]:
            for plugin in getattr(self.plugins, _snake(point)).enabled:
                if plugin.name in IMPLEMENTS and point not in IMPLEMENTS[plugin.name]:
                    raise ValueError(f"plugins.{point}: {plugin.name} does not extend {point}")
        names = [c.name for c in self.plugin_config]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"pluginConfig: {name} is configured twice")
        return self

    def enabled(self, point: str) -> list[str]:
        """The plugins of an extension point after merging defaults, multiPoint and the point's own set."""
        return list(self._merged(point))

    def score_weight(self, name: str) -> int:
        """A Score plugin's weight (0 when it does not score)."""
        return self._merged("score").get(name, 0)

    def args(self, name: str) -> Model:
        for config in self.plugin_config:
            if config.name == name:
                return config.parsed()
        return ARGS[name]()

    def _merged(self, point: str) -> dict[str, int]:
        """mergePlugins: defaults minus the disabled ('*' = all), then multiPoint's enabled plugins at
        the points they implement, then the point's own enabled list; a weight of 0 keeps the default."""
        own = getattr(self.plugins, _snake(point))
        multi = self.plugins.multi_point
        disabled = {p.name for p in own.disabled} | {p.name for p in multi.disabled}
        plugins = {} if "*" in disabled else {
            name: DEFAULT_SCORE_WEIGHTS.get(name, 0) for name in DEFAULTS.get(point, ()) if name not in disabled}
        for plugin in [p for p in multi.enabled if point in IMPLEMENTS.get(p.name, ())] + own.enabled:
            plugins[plugin.name] = plugin.weight or DEFAULT_SCORE_WEIGHTS.get(plugin.name, 1)
        return plugins


def _snake(point: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in point)


class KubeSchedulerConfiguration(Model):
    """``KubeSchedulerConfiguration`` with one profile (the default scheduler)."""

    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100)
    profiles: list[KubeProfile] = Field(default_factory=lambda: [KubeProfile()], min_length=1, max_length=1)

    @property
    def profile(self) -> KubeProfile:
        return self.profiles[0]
