"""Charts of a run (altair), coloured by tenant (queue), small enough for a notebook.

Large results are aggregated before they become chart data: the GPU Gantt switches from one bar
per pod and GPU to per-node occupancy per time bin, timelines are time-weighted means over bins,
CDFs are down-sampled. A week of the case study stays well under 1 MB per chart.

Offline rendering. JupyterLab 4's built-in renderer knows the vega-lite v3-v5 mimetypes, altair 6
emits v6, and altair's html renderer loads vega from a CDN, so neither draws a chart without
internet. `enable_offline()` switches altair to its ``svg`` renderer: vl-convert (a Python
wheel with vega inside) turns the spec into SVG in the kernel, and the notebook shows an
``image/svg+xml`` output, which JupyterLab renders with no script at all. `to_svg`/`to_png`/`save`
are the same conversion for files; `labkit.widgets` puts the SVG in its panels.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd

from . import metrics
from .spec.quantity import parse_quantity

if TYPE_CHECKING:
    from .results import Result

GPU = metrics.GPU
HOUR = 3600.0


def enable_offline() -> None:
    """Render altair charts as inline SVG made by vl-convert in the kernel: no CDN, no JavaScript."""
    alt.renderers.enable("svg")


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG document (vl-convert)."""
    buffer = io.StringIO()
    chart.save(buffer, format="svg")
    return buffer.getvalue()


def to_png(chart: alt.TopLevelMixin, scale: float = 1.0) -> bytes:
    """The chart as PNG bytes (vl-convert)."""
    buffer = io.BytesIO()
    chart.save(buffer, format="png", scale_factor=scale)
    return buffer.getvalue()


def save(chart: alt.TopLevelMixin, path: str) -> None:
    """Write the chart to `path`; the format follows the suffix (.svg, .png, .html, .json)."""
    chart.save(path)


def tenant_colour(result: Result) -> alt.Scale:
    """One colour per queue, the same in every chart of the run."""
    queues = sorted(set(result.jobs.queue))
    return alt.Scale(domain=queues, range=_tableau(len(queues)))


def _node_gpus(result: Result) -> dict[str, int]:
    return {n: int(parse_quantity(pool.resources.get(GPU, 0))) for pool in result.scenario.cluster.pools
            for n in pool.node_names()}


# ------------------------------------------------------------------------------------ GPU slots


def gpu_slots(result: Result) -> pd.DataFrame:
    """One row per pod run and GPU it holds: node, slot (0..GPUs-1), start, end, job, queue, evicted.

    Slots are assigned per node in start order, each run taking the lowest slots free at its start,
    as a device plugin hands out device IDs; a run keeps its slots until it releases them.
    """
    tasks = result.tasks
    if GPU not in tasks or tasks.empty:
        return pd.DataFrame(columns=["node", "slot", "start", "end", "job", "queue", "evicted"])
    gpus_of = _node_gpus(result)
    runs = tasks[tasks[GPU] > 0].assign(queue=tasks.job.map(metrics.queue_of(result)),
                                        end=tasks.end.fillna(metrics.window_end(result)))
    rows = []
    for node, on_node in runs.sort_values(["start", "end"], kind="stable").groupby("node"):
        free_at = np.full(gpus_of.get(node, int(on_node[GPU].max())), -np.inf)
        for start, end, want, job, queue, evicted in zip(on_node.start, on_node.end, on_node[GPU].round().astype(int),
                                                         on_node.job, on_node.queue, on_node.evicted):
            taken = np.argsort(free_at > start, kind="stable")[:want]  # free slots first, lowest index first
            free_at[taken] = end
            rows += [(node, int(s), start, end, job, queue, evicted) for s in taken]
    return pd.DataFrame(rows, columns=["node", "slot", "start", "end", "job", "queue", "evicted"])


# ------------------------------------------------------------------------------------ charts


def gantt(result: Result, max_rows: int = 4000, bins: int = 120) -> alt.LayerChart:
    """GPU Gantt by node: a bar per pod and GPU slot, coloured by tenant; evictions are black crosses.

    Above `max_rows` bars the chart shows, per node and time bin, the tenant holding most
    GPU-seconds (colour) and the node's GPU occupancy (opacity) instead.
    """
    slots = gpu_slots(result)
    colour = alt.Color("queue:N", scale=tenant_colour(result), title="tenant")
    evicted = result.tasks[result.tasks.evicted.notna()].assign(hours=lambda t: t.evicted / HOUR)
    if len(slots) <= max_rows:
        data = slots.assign(start=slots.start / HOUR, end=slots.end / HOUR)[["node", "slot", "start", "end", "job",
                                                                              "queue"]]
        bars = alt.Chart(data).mark_bar(stroke="white", strokeWidth=0.3).encode(
            x=alt.X("start:Q", title="hours"), x2="end:Q", y=alt.Y("node:N", title=None),
            yOffset=alt.YOffset("slot:O"), color=colour, tooltip=["job", "queue", "node", "slot"])
    else:
        data = _occupancy_bins(result, bins)
        bars = alt.Chart(data).mark_rect().encode(
            x=alt.X("start:Q", title="hours"), x2="end:Q", y=alt.Y("node:N", title=None), color=colour,
            opacity=alt.Opacity("occupancy:Q", scale=alt.Scale(domain=[0, 1]), title="GPU occupancy"),
            tooltip=["node", "queue", alt.Tooltip("occupancy:Q", format=".0%")])
    marks = alt.Chart(evicted[["node", "hours", "job"]]).mark_point(shape="cross", color="black", size=60).encode(
        x="hours:Q", y="node:N", tooltip=["job", alt.Tooltip("hours:Q", title="evicted at (h)", format=".2f")])
    return (bars + marks).properties(title="GPU Gantt by node", width=700)


def _occupancy_bins(result: Result, bins: int) -> pd.DataFrame:
    """Per node and time bin: the tenant with most GPU-seconds and the node's mean GPU occupancy."""
    table = metrics.usage(result, GPU, by=["node", "queue"], bins=bins)
    total = table.groupby(["node", "time"]).used.transform("sum")
    top = table.loc[table.groupby(["node", "time"]).used.idxmax()].assign(total=total)
    top = top[top.total > 0]
    gpus = top.node.map(_node_gpus(result)).replace(0, np.nan)
    return pd.DataFrame({"node": top.node, "start": top.time / HOUR, "end": top.time_end / HOUR,
                         "queue": top.queue, "occupancy": (top.total / gpus).round(3)})


def utilisation_chart(result: Result, resource: str = GPU, bins: int = 200) -> alt.LayerChart:
    """Resource in use, stacked by tenant (time-weighted mean per bin), under the cluster capacity line."""
    table = metrics.usage(result, resource, by="queue", bins=bins)
    data = pd.DataFrame({"hours": table.time / HOUR, "queue": table.queue, "used": table.used.round(3)})
    area = alt.Chart(data).mark_area(interpolate="step-after").encode(
        x=alt.X("hours:Q", title="hours"), y=alt.Y("used:Q", stack="zero", title=f"{resource} in use"),
        color=alt.Color("queue:N", scale=tenant_colour(result), title="tenant"), tooltip=["queue", "hours", "used"])
    cap = alt.Chart(pd.DataFrame({"capacity": [metrics.capacity(result, resource)]})).mark_rule(
        strokeDash=[4, 4], color="gray").encode(y="capacity:Q")
    return (area + cap).properties(title=f"{resource} utilisation by tenant", width=700, height=220)


def queue_length_chart(result: Result, bins: int = 200) -> alt.Chart:
    """Jobs waiting per queue over time (mean per bin)."""
    table = metrics.queue_length(result, bins=bins)
    data = pd.DataFrame({"hours": table.time / HOUR, "queue": table.queue, "waiting": table.waiting.round(3)})
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("hours:Q", title="hours"), y=alt.Y("waiting:Q", title="jobs waiting"),
        color=alt.Color("queue:N", scale=tenant_colour(result), title="tenant"),
    ).properties(title="queue length", width=700, height=200)


def share_chart(result: Result, samples: int = 48) -> alt.Chart:
    """Each queue's allocated GPU share (solid) against its deserved share from the engine (dashed)."""
    table = metrics.queue_shares(result, samples=samples)
    data = table.assign(hours=table.time / HOUR).melt(
        id_vars=["hours", "queue"], value_vars=["share", "deserved_share"], var_name="measure", value_name="value")
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("hours:Q", title="hours"), y=alt.Y("value:Q", title="share of cluster GPUs", axis=alt.Axis(format="%")),
        color=alt.Color("queue:N", scale=tenant_colour(result), title="tenant"),
        strokeDash=alt.StrokeDash("measure:N", title=None, sort=["share", "deserved_share"]),
        tooltip=["queue", "measure", alt.Tooltip("value:Q", format=".1%")],
    ).properties(title="allocated vs deserved share", width=700, height=220)


def wait_cdf(result: Result, points: int = 200) -> alt.Chart:
    """Empirical CDF of `metrics.waited` per tenant (jobs not started by T counted to T), at most `points` points each."""
    frames = []
    for queue, waits in metrics.waited(result).groupby(result.jobs.queue):
        values = np.sort(waits.to_numpy(float))
        keep = np.unique(np.linspace(0, len(values) - 1, min(points, len(values))).round().astype(int))
        frames.append(pd.DataFrame({"queue": queue, "wait_min": values[keep] / 60,
                                    "fraction": (keep + 1) / len(values)}))
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["queue", "wait_min", "fraction"])
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("wait_min:Q", title="wait (minutes; not started: until the horizon)", scale=alt.Scale(type="symlog")),
        y=alt.Y("fraction:Q", title="fraction of jobs", axis=alt.Axis(format="%")),
        color=alt.Color("queue:N", scale=tenant_colour(result), title="tenant"),
    ).properties(title="wait-time CDF by tenant", width=500, height=220)


def occupancy_heatmap(result: Result, at: float) -> alt.Chart:
    """Node x GPU grid at `at`: each GPU coloured by the tenant holding it, grey when free."""
    slots = gpu_slots(result)
    now = slots[(slots.start <= at) & (slots.end > at)]
    grid = pd.DataFrame([(n, s) for n, g in _node_gpus(result).items() for s in range(g)], columns=["node", "slot"])
    grid = grid.merge(now[["node", "slot", "queue", "job"]], on=["node", "slot"], how="left")
    grid = grid.fillna({"queue": "free", "job": ""})
    queues = sorted(set(result.jobs.queue))
    scale = alt.Scale(domain=[*queues, "free"], range=[*_tableau(len(queues)), "#e6e6e6"])
    return alt.Chart(grid).mark_rect(stroke="white").encode(
        x=alt.X("slot:O", title="GPU"), y=alt.Y("node:N", title=None),
        color=alt.Color("queue:N", scale=scale, title="tenant"), tooltip=["node", "slot", "queue", "job"],
    ).properties(title=f"GPU occupancy at t = {at / HOUR:.2f} h")


def _tableau(n: int) -> list[str]:
    """Vega's tableau10 colours, cycled."""
    palette = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6",
               "#9d755d", "#bab0ac"]
    return [palette[i % len(palette)] for i in range(n)]


def compare_chart(results: dict[str, Result],
                  measures: tuple[str, ...] = ("mean_wait_s", "p95_wait_s", "mean_jct_s", "gpu_utilisation",
                                               "evictions")) -> alt.Chart:
    """Policy comparison: one bar per run for each headline number of `labkit.metrics.summary`."""
    rows = [{"policy": name, "measure": m, "value": metrics.summary(r)[m]} for name, r in results.items()
            for m in measures]
    return alt.Chart(pd.DataFrame(rows)).mark_bar().encode(
        x=alt.X("policy:N", title=None), y=alt.Y("value:Q", title=None), color=alt.Color("policy:N", legend=None),
        tooltip=["policy", "measure", "value"],
    ).properties(width=120, height=160).facet(facet="measure:N", columns=len(measures)).resolve_scale(y="independent")


# ch. 6: each job's wait and run


def job_timeline(result: Result, max_jobs: int = 200) -> alt.LayerChart:
    """One row per job (submit order, at most `max_jobs`): a grey bar from submit to start (waiting; to
    the run's end when it never started) and a bar coloured by GPUs from start to end (running)."""
    jobs = result.jobs.sort_values(["submit", "name"], kind="stable").head(max_jobs)
    end = metrics.window_end(result)
    label = jobs.namespace + "/" + jobs.name if jobs.namespace.nunique() > 1 else jobs.name
    data = pd.DataFrame({"job": label.to_numpy(), "gpus": jobs.gpus.to_numpy(),
                         "submit": jobs.submit.to_numpy() / HOUR,
                         "start": jobs.start.fillna(end).to_numpy() / HOUR,
                         "end": jobs.end.fillna(end).to_numpy() / HOUR})
    order = alt.Y("job:N", sort=list(data.job), title=None)
    waiting = alt.Chart(data).mark_bar(color="#c8c8c8", height=8).encode(
        x=alt.X("submit:Q", title="hours"), x2="start:Q", y=order,
        tooltip=["job", alt.Tooltip("submit:Q", format=".2f"), alt.Tooltip("start:Q", format=".2f")])
    running = alt.Chart(data[data.end > data.start]).mark_bar(height=8).encode(
        x="start:Q", x2="end:Q", y=order, color=alt.Color("gpus:O", title="GPUs"),
        tooltip=["job", "gpus", alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")])
    return (waiting + running).properties(title="jobs: waiting (grey) and running", width=700)


# ch. 7: waits by PriorityClass


def priority_waits(result: Result) -> alt.Chart:
    """Each job's `metrics.waited` against its submit time, coloured by priority value; a triangle is a
    job still waiting at the horizon (its wait is a lower bound)."""
    jobs = result.jobs
    data = pd.DataFrame({"job": jobs.name, "submit_h": jobs.submit / HOUR, "waited_h": metrics.waited(result) / HOUR,
                         "priority": jobs.priority.astype(str),
                         "started": jobs.start.notna().map({True: "started", False: "still waiting"})})
    return alt.Chart(data).mark_point(size=60, filled=True).encode(
        x=alt.X("submit_h:Q", title="submitted (hours)"),
        y=alt.Y("waited_h:Q", title="waited (hours; to the horizon if not started)"),
        color=alt.Color("priority:N", title="priority"),
        shape=alt.Shape("started:N", title=None, scale=alt.Scale(domain=["started", "still waiting"],
                                                                 range=["circle", "triangle-up"])),
        tooltip=["job", "priority", "started", alt.Tooltip("waited_h:Q", format=".2f")],
    ).properties(title="waited per job by priority (triangle: still waiting)", width=500, height=220)
# ch. 11: a handful of jobs, each pod a labelled bar


def job_gantt(result: Result, unit: float = 60.0) -> alt.LayerChart:
    """Pods on nodes over time for a small workload: one bar per pod, coloured and labelled by job, the
    time axis in minutes (`unit` seconds). Pods without GPUs (best-effort) get their own lane under
    the node, as they share it. For a few jobs, where `gantt`'s colour per tenant says too little."""
    tasks = result.tasks[result.tasks.start.notna()]
    data = pd.DataFrame({
        "node": tasks.node, "job": tasks.job.str.split("/").str[-1],
        "lane": np.where(tasks[GPU].fillna(0) > 0, "GPU", "no GPU") if GPU in tasks else "GPU",
        "start": tasks.start / unit, "end": tasks.end.fillna(metrics.window_end(result)) / unit})
    data["middle"] = (data.start + data.end) / 2
    base = alt.Chart(data)
    bars = base.mark_bar(stroke="white").encode(
        x=alt.X("start:Q", title="minutes"), x2="end:Q", y=alt.Y("node:N", title=None), yOffset="lane:N",
        color=alt.Color("job:N", title="job"), tooltip=["job", "node", "start", "end"])
    labels = base.mark_text(color="white", fontSize=11).encode(x="middle:Q", y="node:N", yOffset="lane:N",
                                                               text="job:N")
    return (bars + labels).properties(width=640)


# ch. 3: where each job waits, before or after its pods exist


ADMISSION_PHASES = {"PodGroup Pending": "#c8c8c8", "pod refused (FailedCreate)": "#e45756", "running": "#4c78a8"}
"""The three spans `admission_timeline` draws, in its legend's order, with their colours."""


def admission_timeline(result: Result, unit: float = 60.0, until: float | None = None) -> alt.LayerChart:
    """One row per job (submit order): its PodGroup Pending in the scheduler's enqueue (submit to
    enqueue), its pods refused at creation while the vcjob controller retries (the first
    ``Rejected`` event to start, or to the job's termination), and running; a cross marks a job the
    controller terminated. Time in minutes (`unit` seconds), up to `until` seconds (default: the run's end)."""
    jobs = result.jobs.sort_values(["submit", "name"], kind="stable")
    end = metrics.window_end(result) if until is None else until
    key = jobs.namespace + "/" + jobs.name
    refused = result.events[result.events.kind == "Rejected"].groupby("job").time.min()
    ended = jobs.end.fillna(end).to_numpy()
    spans = []
    for (name, submit, enqueue, start, stop, job) in zip(jobs.name, jobs.submit, jobs.enqueue, jobs.start, ended,
                                                          key, strict=True):
        first_refusal = refused.get(job, np.nan)
        pending_until = enqueue if not np.isnan(enqueue) else (start if not np.isnan(start) else stop)
        spans.append((name, "PodGroup Pending", submit, pending_until))
        if not np.isnan(first_refusal):
            spans.append((name, "pod refused (FailedCreate)", first_refusal, stop if np.isnan(start) else start))
        if not np.isnan(start):
            spans.append((name, "running", start, stop))
    data = pd.DataFrame(spans, columns=["job", "phase", "from", "to"])
    data = data[(data["to"] > data["from"]) & (data["from"] < end)].assign(to=lambda d: d["to"].clip(upper=end))
    data[["from", "to"]] /= unit
    order = alt.Y("job:N", sort=list(jobs.name), title=None)
    colour = alt.Color("phase:N", title=None, scale=alt.Scale(domain=list(ADMISSION_PHASES),
                                                              range=list(ADMISSION_PHASES.values())))
    x = alt.X("from:Q", title={1.0: "seconds", 60.0: "minutes"}.get(unit, f"time (x {unit:g} s)"),
              scale=alt.Scale(domain=[0, end / unit]))
    bars = alt.Chart(data).mark_bar(height=10).encode(x=x, x2="to:Q", y=order, color=colour,
                                                      tooltip=["job", "phase", "from", "to"])
    gone = jobs[(jobs.state == "Terminated") & (jobs.end <= end)]
    marks = alt.Chart(pd.DataFrame({"job": gone.name, "ended": gone.end / unit})).mark_point(
        shape="cross", size=90, color="black", filled=True).encode(x="ended:Q", y=order)
    return (bars + marks).properties(width=560)
