"""labkit.viz: GPU slots against the tasks table, chart data sizes, offline SVG/PNG export."""

from __future__ import annotations

import json

import altair as alt
import pytest
from test_simulate import reclaim_scenario

import labkit
from labkit import metrics, spec, viz

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def reclaim():
    return labkit.simulate(reclaim_scenario())


@pytest.fixture(scope="module")
def weekly():
    """Two teams on 4 nodes for two days: a few hundred pod runs, enough to need aggregation."""
    load = {"arrival": {"process": "poisson", "interval": "20m"}, "end": "2d", "perGpu": {"cpu": 4},
            "gpus": {"distribution": "choice", "choices": [1, 2, 4, 8]},
            "duration": {"distribution": "lognormal", "median": "2h", "sigma": 0.5}}
    return labkit.simulate(spec.validate({
        "name": "weekly", "horizon": "2d",
        "cluster": {"pools": [{"name": "gpu", "count": 4, "resources": {GPU: 8, "cpu": 64, "memory": "512Gi"}}]},
        "queues": [{"name": "a"}, {"name": "b"}],
        "workloads": [{**load, "name": "a", "queue": "a"}, {**load, "name": "b", "queue": "b", "seed": 7}],
    }))


def test_gpu_slots_never_overlap(weekly):
    slots = viz.gpu_slots(weekly)
    assert len(slots) == int(weekly.tasks[GPU].sum()), "one row per run and GPU"
    assert slots.slot.between(0, 7).all()
    for _, lane in slots.groupby(["node", "slot"]):
        lane = lane.sort_values("start")
        assert (lane.start.iloc[1:].to_numpy() >= lane.end.iloc[:-1].to_numpy() - 1e-9).all()


def test_occupancy_heatmap_matches_the_pods_holding(weekly):
    at = 30 * 3600.0
    data = viz.occupancy_heatmap(weekly, at).data
    held = metrics.holding(weekly, at)
    assert len(data) == 4 * 8
    assert (data.queue != "free").sum() == int(held[GPU].sum())


def test_gantt_aggregates_large_runs(reclaim, weekly):
    small = viz.gantt(reclaim)
    assert len(small.layer[0].data) == len(viz.gpu_slots(reclaim)), "a bar per pod and GPU"
    assert len(small.layer[1].data) == reclaim.tasks.evicted.notna().sum(), "a cross per eviction"
    big = viz.gantt(weekly, max_rows=100, bins=50)
    assert len(big.layer[0].data) <= 4 * 50, "one cell per node and bin at most"
    assert len(json.dumps(big.to_dict())) < 100_000


def test_timelines_are_binned(weekly):
    chart = viz.utilisation_chart(weekly, bins=40)
    data = chart.layer[0].data
    assert len(data) == 2 * 40
    total = data.groupby("hours").used.sum().mean()
    assert total == pytest.approx(metrics.utilisation(weekly) * metrics.capacity(weekly), rel=1e-3)
    assert len(viz.queue_length_chart(weekly, bins=40).data) == 2 * 40
    assert len(viz.wait_cdf(weekly, points=30).data) <= 2 * 30


def test_share_chart_has_share_and_deserved(reclaim):
    data = viz.share_chart(reclaim, samples=5).data
    assert set(data.measure) == {"share", "deserved_share"} and set(data.queue) == {"a", "b"}


def test_static_export(reclaim, tmp_path):
    svg = viz.to_svg(viz.share_chart(reclaim, samples=5))
    assert svg.lstrip().startswith("<svg") and "allocated vs deserved share" in svg
    assert viz.to_png(viz.wait_cdf(reclaim)).startswith(b"\x89PNG")
    viz.save(viz.compare_chart({"proportion": reclaim, "again": reclaim}), str(tmp_path / "compare.svg"))
    assert (tmp_path / "compare.svg").read_text().lstrip().startswith("<svg")


def test_offline_renderer_emits_svg(reclaim):
    previous = alt.renderers.active
    try:
        viz.enable_offline()
        bundle = viz.wait_cdf(reclaim)._repr_mimebundle_()
        bundle = bundle[0] if isinstance(bundle, tuple) else bundle
        assert set(bundle) == {"image/svg+xml"}, "no vega-lite JSON or CDN script: JupyterLab shows it as is"
    finally:
        alt.renderers.enable(previous)


def test_case_study_week_charts_stay_small():
    """A week of 32 x 8 GPUs and ~3,700 jobs: every chart's spec, data included, under 1 MB."""
    result = labkit.simulate(spec.preset("case-study"))
    for chart in (viz.gantt, viz.utilisation_chart, viz.queue_length_chart, viz.share_chart, viz.wait_cdf,
                  lambda r: viz.occupancy_heatmap(r, 3 * 86400)):
        assert len(json.dumps(chart(result).to_dict())) < 1_000_000
