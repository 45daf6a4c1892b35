"""labkit.widgets without a browser: knobs write the scenario, the panel's callbacks re-run and redraw."""

from __future__ import annotations

import asyncio
import time

import pytest
from test_simulate import reclaim_scenario

import labkit
from labkit import widgets
from labkit.errors import LabkitError

GPU = "nvidia.com/gpu"


@pytest.fixture
def scenario():
    return reclaim_scenario()


def knobs(s):
    return [widgets.queue_weight(s, "b"), widgets.queue_capability(s, "a"), widgets.queue_guarantee(s, "b"),
            widgets.queue_deserved(s, "b"), widgets.checkpoint_interval(s), widgets.grace_period(s),
            widgets.action(s, "reclaim"), widgets.plugin(s, "binpack"), widgets.policy(s)]


def test_knobs_at_their_start_leave_the_scenario_as_written(scenario):
    panel = widgets.Panel(scenario, knobs(scenario), debounce=0)
    assert panel.scenario() == scenario
    assert panel.table.loc["cluster", "evictions"] == labkit.simulate(scenario).summary()["evictions"]


def test_each_knob_writes_its_field(scenario):
    panel = widgets.Panel(scenario, knobs(scenario), charts=(), debounce=0)
    values = {"queue/b/weight": 3, f"queue/a/capability/{GPU}": 8, f"queue/b/guarantee/{GPU}": 8,
              f"queue/b/deserved/{GPU}": 4, "jobs/checkpointInterval": 0, "jobs/gracePeriod": 5,
              "action/reclaim": False, "plugin/binpack": False, "scheduler/policy": "volcano-shipped"}
    changed = panel.scenario({**panel.values, **{k: v for k, v in values.items() if k != "scheduler/policy"}})
    queues = {q.name: q for q in changed.queues}
    assert queues["b"].weight == 3 and queues["a"].capability[GPU] == 8
    assert queues["b"].guarantee[GPU] == 8 and queues["b"].deserved[GPU] == 4
    assert all(j.checkpoint_interval is None and j.grace_period == 5 for j in changed.jobs)
    conf = changed.scheduler.conf
    assert "reclaim" not in conf.action_list()
    assert all(p.name != "binpack" for tier in conf.tiers for p in tier.plugins)
    shipped = panel.scenario({**panel.values, "scheduler/policy": "volcano-shipped"})
    assert shipped.scheduler.policy == "volcano-shipped" and shipped.scheduler.conf is None


def test_priority_value_knob():
    scenario = labkit.preset("case-study")
    knob = widgets.priority_value(scenario, "low")
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    knob.apply(data, 900)
    assert next(p for p in data["priorityClasses"] if p["name"] == "low")["value"] == 900
    assert (knob.low, knob.high, knob.value) == (0, 1000, 100)


def test_a_knob_change_reruns_and_redraws(scenario):
    """Turning reclaim off: b0 waits for a's jobs instead of evicting two of them."""
    panel = widgets.Panel(scenario, knobs(scenario), charts=("utilisation", "gantt"), debounce=0)
    before_table, before_svgs = panel.table.copy(), list(panel.svgs)
    assert panel.table.loc["cluster", "evictions"] == 2
    panel.set("action/reclaim", False)
    assert panel.runs == 2
    assert panel.table.loc["cluster", "evictions"] == 0
    assert not panel.table.equals(before_table)
    assert panel.svgs != before_svgs and all(svg.lstrip().startswith("<svg") for svg in panel.svgs)
    assert panel._charts[1].value == panel.svgs[1], "the chart widget holds the new SVG"
    assert "<table" in panel._table.value


def test_the_widget_drives_the_same_callbacks(scenario):
    panel = widgets.Panel(scenario, [widgets.queue_capability(scenario, "a", step=4)], charts=(), debounce=0)
    slider = panel.widget.children[0].children[0]
    slider.value = 12
    assert panel.values[f"queue/a/capability/{GPU}"] == 12 and panel.runs == 2


def _refusing_after_the_first_run(message: str):
    """An engine for a panel: the first run simulates, every later one raises LabkitError(message)."""
    calls = []

    def engine(s):
        calls.append(s)
        if len(calls) > 1:
            raise LabkitError(message)
        return labkit.simulate(s)

    return engine


def test_a_failing_run_keeps_the_last_result(scenario):
    engine = _refusing_after_the_first_run("engine refused")
    panel = widgets.Panel(scenario, [widgets.queue_weight(scenario, "a")], charts=(), run=engine, debounce=0)
    result = panel.result
    panel.set("queue/a/weight", 2)
    assert panel.result is result and "engine refused" in panel._status.value


def test_debounce_runs_once_after_the_last_change():
    calls = []
    debouncer = widgets.Debouncer(0.05, lambda: calls.append(time.monotonic()))
    for _ in range(5):
        debouncer.trigger()  # no event loop here: a timer thread
    time.sleep(0.3)
    assert len(calls) == 1

    async def on_the_loop():
        loop_calls = []
        on_loop = widgets.Debouncer(0.05, lambda: loop_calls.append(1))
        for _ in range(5):
            on_loop.trigger()
        await asyncio.sleep(0.3)
        return loop_calls

    assert asyncio.run(on_the_loop()) == [1]


def _chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_what_a_student_reads_is_chinese_and_the_code_stays_english(scenario):
    every = knobs(scenario) + [widgets.priority_value(labkit.spec.preset("case-study"), "high")]
    assert all(_chinese(k.label) for k in every), [k.label for k in every if not _chinese(k.label)]
    assert all(k.name.isascii() for k in every)
    dropdown = widgets.policy(scenario, ["volcano-shipped", "volcano-multitenant"]).widget()
    assert all(_chinese(label) for label, _ in dropdown.options[1:])
    assert dropdown.options[1] == ("volcano-shipped：Volcano 安装自带（enqueue、allocate、backfill，无抢占）", "volcano-shipped")

    engine = _refusing_after_the_first_run("queues[0].weight: must be >= 1")
    panel = widgets.Panel(scenario, [widgets.queue_weight(scenario, "a")], charts=(), run=engine, debounce=0)
    assert panel._status.value.startswith("第 1 次运行：")
    assert list(panel.table.columns[:2]) == ["jobs", "completed"] and "cluster" in panel.table.index
    assert "<th>作业数</th>" in panel._table.value and "<th>整个集群</th>" in panel._table.value
    panel.set("queue/a/weight", 2)
    assert "场景不接受这个取值" in panel._status.value and "queues[0].weight: must be &gt;= 1" in panel._status.value
