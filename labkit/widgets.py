"""Interactive panels: knobs on a scenario that re-run the engine and redraw charts and a metrics table.

A `Panel` is built from a scenario and a list of `Knob`s (queue weight, capability, deserved,
guarantee, PriorityClass values, policy, plugin and action toggles, checkpoint interval, grace
period). Moving a knob schedules a re-run (debounced, so dragging a slider runs once); the
charts (SVG from vl-convert, see `labkit.viz`) and the table are replaced in place.
What a student reads (labels, options, status, the table's headings) is Chinese, with the
scheduler's own field names kept beside it; knob names and `panel.table`'s columns stay English.

Everything the widgets call is a plain method: `panel.set(name, value)`, `panel.scenario()`,
`panel.refresh()`, `panel.table`, `panel.svgs`, so labs and tests drive a panel without a browser.
"""

from __future__ import annotations

import asyncio
import html
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as w
import pandas as pd

from . import metrics, viz
from .engine.simulate import simulate
from .errors import LabkitError
from .results import Result
from .spec import Scenario, conf_of, policy_names, policy_scheduler, validate
from .spec.quantity import parse_duration, parse_quantity

Apply = Callable[[dict, Any], None]


@dataclass(frozen=True)
class Knob:
    """One tunable value: `name` (unique key), widget `kind` (int, float, choice, toggle), its range or
    choices (`labels`, when given, are what the dropdown shows for them), the starting value, and
    `apply(data, value)` writing it into the scenario's YAML form."""

    name: str
    label: str
    kind: str
    value: Any
    apply: Apply
    low: float = 0
    high: float = 1
    step: float = 1
    choices: tuple = ()
    labels: tuple = ()

    def widget(self) -> w.ValueWidget:
        """The ipywidget for this knob (continuous updates; the panel debounces)."""
        style = {"description_width": "initial"}
        if self.kind == "toggle":
            return w.Checkbox(value=bool(self.value), description=self.label, style=style)
        if self.kind == "choice":
            options = list(zip(self.labels, self.choices, strict=True)) if self.labels else list(self.choices)
            return w.Dropdown(options=options, value=self.value, description=self.label, style=style)
        slider = w.IntSlider if self.kind == "int" else w.FloatSlider
        return slider(value=self.value, min=self.low, max=self.high, step=self.step, description=self.label,
                      continuous_update=True, style=style, layout=w.Layout(width="420px"))


# ------------------------------------------------------------------------------------ knobs


def _queue(data: dict, name: str) -> dict:
    queues = data.setdefault("queues", [])
    found = next((q for q in queues if q["name"] == name), None)
    if found is None:
        found = {"name": name}
        queues.append(found)
    return found


def queue_weight(scenario: Scenario, queue: str, high: int = 10) -> Knob:
    """The Volcano Queue's `spec.weight` (proportion's share of the cluster)."""
    start = next((q.weight for q in scenario.queues if q.name == queue), 1)
    return Knob(f"queue/{queue}/weight", f"{queue} 权重 weight", "int", start,
                lambda data, v: _queue(data, queue).__setitem__("weight", int(v)), low=1, high=high)


FIELD_LABELS = {"capability": "上限", "deserved": "应得", "guarantee": "保底"}
"""The Queue's resource fields in Chinese, shown before the field's own name."""


def _queue_resource(field: str, doc: str):
    def knob(scenario: Scenario, queue: str, resource: str = metrics.GPU, high: float | None = None,
             step: float = 1) -> Knob:
        spec = next((q for q in scenario.queues if q.name == queue), None)
        top = high if high is not None else metrics.allocatable(scenario, resource)
        given = getattr(spec, field).get(resource) if spec else None
        start = float(given) if given is not None else (top if field == "capability" else 0)

        def apply(data: dict, value: Any) -> None:
            _queue(data, queue).setdefault(field, {})[resource] = value

        label = f"{queue} {FIELD_LABELS[field]} {field} {resource}"
        return Knob(f"queue/{queue}/{field}/{resource}", label, "int", int(start), apply,
                    low=0, high=int(top), step=step)

    knob.__doc__ = doc
    knob.__name__ = f"queue_{field}"
    return knob


queue_capability = _queue_resource("capability", "The Queue's `spec.capability` of one resource (a hard ceiling).")
queue_deserved = _queue_resource("deserved", "The Queue's `spec.deserved` of one resource (capacity plugin).")
queue_guarantee = _queue_resource("guarantee", "The Queue's `spec.guarantee` of one resource (reserved for it).")


def namespace_quota(scenario: Scenario, tenant: str, key: str, high: int, step: int = 1) -> Knob:
    """One `spec.hard` entry (e.g. ``requests.nvidia.com/gpu``) of a tenant's ResourceQuota: the API
    server's admission limit on the namespace's pods, not a scheduler share (ch. 3)."""
    spec = next(t for t in scenario.tenants if t.name == tenant)
    if spec.resource_quota is None or key not in spec.resource_quota.hard:
        raise ValueError(f"tenant {tenant} has no ResourceQuota entry {key}")

    def apply(data: dict, value: Any) -> None:
        quota = next(t for t in data["tenants"] if t["name"] == tenant)["resourceQuota"]
        quota["hard"][key] = str(int(value))

    start = int(parse_quantity(spec.resource_quota.hard[key]))
    return Knob(f"tenant/{tenant}/resourceQuota/{key}", f"{tenant} 配额 ResourceQuota {key}", "int", start, apply,
                low=0, high=high, step=step)


def priority_value(scenario: Scenario, name: str, high: int = 1000) -> Knob:
    """A PriorityClass `value` (job order, and who may preempt whom)."""
    start = next(p.value for p in scenario.priority_classes if p.name == name)

    def apply(data: dict, value: Any) -> None:
        next(p for p in data["priorityClasses"] if p["name"] == name)["value"] = int(value)

    return Knob(f"priorityClass/{name}", f"优先级 {name} value", "int", start, apply, low=0, high=max(high, start))


POLICY_LABELS = {
    "volcano-shipped": "Volcano 安装自带（enqueue、allocate、backfill，无抢占）",
    "volcano-multitenant": "自带配置加 reclaim 与 preempt",
    "helios-fifo": "严格 FIFO，按 GPU 紧凑放置",
    "kube-default": "默认 kube-scheduler（逐个 Pod，无 gang）",
    "kube-coscheduling": "kube-scheduler 加 Coscheduling（gang）",
    "kueue": "Kueue（整体准入）",
    "slurm-backfill": "Slurm 回填（backfill）",
    "slurm-builtin": "Slurm 严格优先级顺序（builtin）",
    "slurm-fairshare": "Slurm 公平共享（Fair Tree）",
}
"""What each policy preset is, in a dropdown's words (`labkit presets` has the full description)."""


def policy(scenario: Scenario, choices: Sequence[str] | None = None) -> Knob:
    """The scheduler policy preset (`labkit presets`) replacing the scenario's conf; the first choice keeps it."""
    own = scenario.scheduler.policy or "scenario conf"
    options = tuple(dict.fromkeys([own, *(choices or [n for n in policy_names() if _is_volcano(n)])]))
    start = own

    def apply(data: dict, value: Any) -> None:
        data["scheduler"] = {**{k: v for k, v in data.get("scheduler", {}).items() if k != "conf"}, "policy": value}

    labels = tuple(f"{name}：{POLICY_LABELS[name]}" if name in POLICY_LABELS else name for name in options)
    if own == "scenario conf":
        labels = ("场景自带的 conf", *labels[1:])
    return Knob("scheduler/policy", "调度策略 policy", "choice", start, apply, choices=options, labels=labels)


def _is_volcano(name: str) -> bool:
    return policy_scheduler(name).conf is not None


def _conf(data: dict) -> dict:
    """The scenario's Volcano conf in YAML form, written out in full so it can be edited."""
    if "conf" not in data.get("scheduler", {}):  # resolve first: no scheduler section means the default policy
        conf = conf_of(validate(data)).model_dump(mode="json", by_alias=True, exclude_unset=True)
        data.setdefault("scheduler", {})["conf"] = conf
    return data["scheduler"]["conf"]


def plugin(scenario: Scenario, name: str) -> Knob:
    """A plugin on or off: off removes it from its tier; on adds it back to the last tier."""
    start = any(p.name == name for tier in conf_of(scenario).tiers for p in tier.plugins)

    def apply(data: dict, value: Any) -> None:
        tiers = _conf(data)["tiers"]
        present = any(p["name"] == name for tier in tiers for p in tier["plugins"])
        if value and not present:
            tiers[-1]["plugins"].append({"name": name})
        if not value:
            for tier in tiers:
                tier["plugins"] = [p for p in tier["plugins"] if p["name"] != name]
            tiers[:] = [tier for tier in tiers if tier["plugins"]]

    return Knob(f"plugin/{name}", f"插件 {name}", "toggle", start, apply)


def action(scenario: Scenario, name: str) -> Knob:
    """An action (preempt, reclaim, backfill) on or off in `actions`, kept in Volcano's usual order."""
    order = ["enqueue", "allocate", "backfill", "preempt", "reclaim"]
    start = name in conf_of(scenario).action_list()

    def apply(data: dict, value: Any) -> None:
        conf = _conf(data)
        names = {a.strip() for a in conf["actions"].split(",")} - {name} | ({name} if value else set())
        conf["actions"] = ", ".join(sorted(names, key=lambda a: order.index(a) if a in order else len(order)))

    return Knob(f"action/{name}", f"动作 {name}", "toggle", start, apply)


def _every_job(field: str) -> Apply:
    """Write `field` into every job and workload generator (0 removes a checkpointInterval)."""
    def apply(data: dict, chosen: Any) -> None:
        for item in data.get("jobs", []) + data.get("workloads", []):
            if field == "checkpointInterval" and not chosen:
                item.pop(field, None)
            else:
                item[field] = chosen
    return apply


def checkpoint_interval(scenario: Scenario, high: float = 4 * 3600, step: float = 600) -> Knob:
    """Every job's `checkpointInterval` in seconds (0 = no checkpoints: an eviction loses all work)."""
    given = [parse_duration(j.checkpoint_interval) for j in scenario.jobs + scenario.workloads if j.checkpoint_interval]
    return Knob("jobs/checkpointInterval", "检查点间隔 checkpointInterval（秒）", "int", int(given[0]) if given else 0,
                _every_job("checkpointInterval"), low=0, high=int(high), step=step)


def grace_period(scenario: Scenario, high: float = 600, step: float = 10) -> Knob:
    """Every job's `gracePeriod` (terminationGracePeriodSeconds): how long an evicted pod holds its node."""
    given = [parse_duration(j.grace_period) for j in scenario.jobs + scenario.workloads]
    return Knob("jobs/gracePeriod", "优雅终止期 gracePeriod（秒）", "int", int(given[0]) if given else 30,
                _every_job("gracePeriod"), low=0, high=int(high), step=step)


# ------------------------------------------------------------------------------------ the panel


CHARTS: dict[str, Callable[[Result], Any]] = {
    "utilisation": viz.utilisation_chart,
    "gantt": viz.gantt,
    "share": viz.share_chart,
    "queue_length": viz.queue_length_chart,
    "wait_cdf": viz.wait_cdf,
    "priority_waits": viz.priority_waits,
    "jobs": viz.job_timeline,
    "job_gantt": viz.job_gantt,
    "admission": viz.admission_timeline,
}


WAIT_NOTE = "平均等待：到模拟结束仍未启动的作业（未启动）按一直等到结束计入。"
"""Said under the panel's table: the waits of jobs that never started are censored at the horizon."""


def metrics_table(result: Result, by: str = "queue") -> pd.DataFrame:
    """The panel's table: per queue (or per `by`, see `metrics.per_queue`) jobs, completed, not started,
    mean wait (unstarted jobs counted to the horizon), evictions, GPU-hours, work lost to evictions (hours
    of the job's run time), plus a cluster row."""
    table = metrics.per_queue(result, by)
    total = metrics.summary(result)
    cluster = pd.DataFrame([{"jobs": total["jobs"], "completed": total["completed"], "not_started": total["not_started"],
                             "mean_wait_s": total["mean_wait_s"], "evictions": total["evictions"],
                             "gpu_hours": round(metrics.gpu_seconds(result) / 3600, 1)}],
                           index=["cluster"])
    table = pd.concat([table, cluster])
    lost = result.jobs.groupby(by).lost_work.sum().reindex(table.index[:-1], fill_value=0.0)
    table["lost_work_h"] = [*(lost / 3600).round(2), round(total["lost_work_s"] / 3600, 2)]
    table["gpu_utilisation"] = [None] * (len(table) - 1) + [total["gpu_utilisation"]]
    return table


TABLE_HEADINGS = {"jobs": "作业数", "completed": "已完成", "not_started": "未启动", "mean_wait_s": "平均等待（秒）", "evictions": "驱逐次数",
                  "gpu_hours": "GPU·小时", "lost_work_h": "丢失的工作（小时）", "gpu_utilisation": "GPU 利用率"}
"""The table's headings as the panel shows them (`panel.table` keeps the column names)."""


class Debouncer:
    """Calls `fn` once, `delay` seconds after the last `trigger()`; on the kernel's event loop when there is one."""

    def __init__(self, delay: float, fn: Callable[[], None]):
        self.delay, self.fn = delay, fn
        self._pending: Any = None

    def trigger(self) -> None:
        if self.delay <= 0:
            self.fn()
            return
        if self._pending is not None:
            self._pending.cancel()
        try:
            self._pending = asyncio.get_running_loop().call_later(self.delay, self.fn)
        except RuntimeError:  # no loop in this thread (a plain script): a timer thread
            self._pending = threading.Timer(self.delay, self.fn)
            self._pending.start()


class Panel:
    """Knobs, charts and a metrics table over one scenario; re-runs `run(scenario)` when a knob moves.
    The table has a row per queue, or per `by` (``priority``: the PriorityClass values of one queue's jobs)."""

    def __init__(self, scenario: Scenario, knobs: Sequence[Knob], charts: Sequence[str] = ("utilisation", "gantt"),
                 run: Callable[[Scenario], Result] = simulate, debounce: float = 0.3, by: str = "queue"):
        self.base = scenario
        self.by = by
        self.knobs = {k.name: k for k in knobs}
        self.values = {k.name: k.value for k in knobs}
        self.chart_names = list(charts)
        self.run = run
        self.result: Result | None = None
        self.table: pd.DataFrame | None = None
        self.svgs: list[str] = []
        self.runs = 0
        self._debouncer = Debouncer(debounce, self.refresh)
        self._controls = {name: knob.widget() for name, knob in self.knobs.items()}
        for name, control in self._controls.items():
            control.observe(lambda change, name=name: self.set(name, change["new"]), names="value")
        self._status = w.HTML().add_class("labkit-status")
        self._charts = [w.HTML().add_class("labkit-chart") for _ in self.chart_names]
        self._table = w.HTML().add_class("labkit-table")
        self.refresh()

    def scenario(self, values: dict[str, Any] | None = None) -> Scenario:
        """The base scenario with every moved knob's value written in (validated); a knob at its
        starting value, read from the scenario, leaves the scenario as written."""
        data = self.base.model_dump(mode="json", by_alias=True, exclude_unset=True)
        for name, value in (values or self.values).items():
            if value != self.knobs[name].value:
                self.knobs[name].apply(data, value)
        return validate(data)

    def set(self, name: str, value: Any) -> None:
        """A knob moved: remember the value and schedule a (debounced) re-run."""
        self.values[name] = value
        self._status.value = "<i>运行中…</i>"
        self._debouncer.trigger()

    def refresh(self) -> None:
        """Re-run the engine on the current values and replace the charts and table in place."""
        started = time.perf_counter()
        try:
            self.result = self.run(self.scenario())
        except LabkitError as err:  # a knob value the scenario rejects: say so, keep the last charts
            self._status.value = f"<b style='color:#b00'>场景不接受这个取值，图表仍是上一次的结果：{html.escape(str(err))}</b>"
            return
        self.runs += 1
        self.table = metrics_table(self.result, self.by)
        self.svgs = [viz.to_svg(CHARTS[name](self.result)) for name in self.chart_names]
        for holder, svg in zip(self._charts, self.svgs):
            holder.value = svg
        shown = self.table.rename(columns=TABLE_HEADINGS, index={"cluster": "整个集群"})
        self._table.value = (shown.to_html(classes="labkit-metrics", na_rep="", float_format="{:g}".format)
                             + f"<small>{WAIT_NOTE}</small>")
        self._status.value = f"第 {self.runs} 次运行：{time.perf_counter() - started:.2f} 秒"

    @property
    def widget(self) -> w.Widget:
        """The panel: knobs on the left, status, table and charts on the right."""
        controls = w.VBox(list(self._controls.values()), layout=w.Layout(min_width="440px"))
        return w.HBox([controls, w.VBox([self._status, self._table, *self._charts])])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


# ch. 6: the queue order policy

QUEUE_ORDER_LABELS = {
    "fifo-besteffort": "先到先服务 + BestEffortFIFO（队头放不下就跳过）",
    "fifo-strict": "先到先服务 + StrictFIFO（队头放不下，整个队列等）",
    "priority-besteffort": "按优先级 + BestEffortFIFO",
    "priority-strict": "按优先级 + StrictFIFO",
}
"""The queue order policies: job order (creation time, or the priority plugin's PriorityClass first)
x what allocate does when the queue's head does not fit (`scheduler.queueingStrategy`)."""


def queue_order(scenario: Scenario) -> Knob:
    """The queue order policy of a Volcano conf: the priority plugin on or off (Volcano's JobOrderFn:
    PriorityClass first, else creation time) and `scheduler.queueingStrategy`."""
    conf = conf_of(scenario)
    priority = any(p.name == "priority" for tier in conf.tiers for p in tier.plugins)
    strategy = scenario.scheduler.queueing_strategy or "BestEffortFIFO"
    start = f"{'priority' if priority else 'fifo'}-{'strict' if strategy == 'StrictFIFO' else 'besteffort'}"

    def apply(data: dict, value: Any) -> None:
        tiers = _conf(data)["tiers"]
        for tier in tiers:
            tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "priority"]
        if value.startswith("priority"):
            tiers[0]["plugins"].insert(0, {"name": "priority"})
        tiers[:] = [tier for tier in tiers if tier["plugins"]]
        data["scheduler"]["queueingStrategy"] = "StrictFIFO" if value.endswith("strict") else "BestEffortFIFO"

    options = tuple(QUEUE_ORDER_LABELS)
    return Knob("scheduler/queueOrder", "队列顺序策略 queue order", "choice", start, apply, choices=options,
                labels=tuple(QUEUE_ORDER_LABELS[o] for o in options))


# ch. 9: the overcommit plugin's factor as a knob


def overcommit_factor(scenario: Scenario, high: float = 3.0, step: float = 0.05) -> Knob:
    """The overcommit plugin's `overcommit-factor` (enqueue admits while the inqueue minResources fit in
    total x factor - used); starts at the scenario's value, else Volcano's default 1.2. From 1.0: Volcano
    replaces a smaller value by the default."""
    found = [p for tier in conf_of(scenario).tiers for p in tier.plugins if p.name == "overcommit"]
    if not found:
        raise LabkitError("overcommit_factor: the scenario's conf has no overcommit plugin")
    start = float(found[0].arguments.get("overcommit-factor", 1.2))

    def apply(data: dict, value: Any) -> None:
        for tier in _conf(data)["tiers"]:
            for p in tier["plugins"]:
                if p["name"] == "overcommit":
                    p["arguments"] = {**p.get("arguments", {}), "overcommit-factor": float(value)}

    return Knob("plugin/overcommit/overcommit-factor", "超分系数 overcommit-factor", "float", start, apply,
                low=1.0, high=max(high, start), step=step)
