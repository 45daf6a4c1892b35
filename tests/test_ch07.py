"""Chapter 7 (priority and PriorityClass): its scenarios show what the chapter says, and its checks
pass right answers and fail wrong ones, on each student's variant."""

import pytest

from labkit import metrics
from labkit.course import cases, variants
from labkit.engine.simulate import simulate
from labkit.grading import check
from labkit.grading.keys import judge


def _batch(result):
    return result.jobs.name.str.startswith("batch-")


def _mean_wait(batch_jobs: int) -> int:
    result = simulate(cases.priority_stream(batch_jobs=batch_jobs))
    return round(float(metrics.waited(result)[_batch(result)].mean()))


def _ids_with_different(key: str) -> tuple[str, str]:
    first = "s001"
    other = next(f"s{i:03d}" for i in range(2, 500)
                 if variants.params(7, f"s{i:03d}")[key] != variants.params(7, first)[key])
    return first, other


def test_the_stream_starves_batch_and_the_censored_wait_grows_with_the_horizon():
    short, long = simulate(cases.priority_stream()), simulate(cases.priority_stream(horizon="24h"))
    for result in (short, long):
        assert result.jobs[_batch(result)].start.isna().all()
        assert (result.jobs[~_batch(result)].priority == 1000).all()
    assert (metrics.waited(long)[_batch(long)] - metrics.waited(short)[_batch(short)] == 12 * 3600).all()


def test_a_queue_of_its_own_lets_batch_run():
    result = simulate(cases.priority_stream(split=True))
    batch = result.jobs[_batch(result)]
    assert batch.start.notna().all() and set(batch.queue) == {"batch"}


@pytest.mark.parametrize(("default_class", "value"), [("batch", 100), (None, 0), ("prod", 1000)])
def test_global_default_gives_unnamed_jobs_their_priority(default_class, value):
    result = simulate(cases.priority_stream(global_default=default_class))
    assert set(result.jobs[_batch(result)].priority) == {value}


def test_priority_stream_refuses_an_unknown_default_class():
    with pytest.raises(ValueError, match="global_default must be one of"):
        cases.priority_stream(global_default="gold")


def test_never_waits_instead_of_evicting():
    lower, never = simulate(cases.priority_preempt()), simulate(cases.priority_preempt(never=True))
    assert lower.jobs.evictions.sum() >= 1
    assert never.jobs.evictions.sum() == 0
    start = never.jobs.set_index("name").start
    assert start["high-small"] > lower.jobs.set_index("name").start["high-small"]
    assert start["high-small"] >= never.jobs.set_index("name").end.drop("high-small").min()


def _right(qid: str):
    if qid == "ch07.q1":
        return int(simulate(cases.priority_stream()).jobs.set_index("name").priority["batch-0"])
    if qid == "ch07.q2":
        return _mean_wait(variants.OPTIONS[7]["batch_jobs"][0])
    return int(simulate(cases.priority_preempt(never=True)).jobs.set_index("name").start["high-small"])


@pytest.mark.parametrize(("qid", "wrong"), [
    ("ch07.q1", 0),                       # as if no class were globalDefault
    ("ch07.q2", None),                    # started jobs only: none started, so no mean at all
    ("ch07.q3", "lower"),                 # the start when the class may preempt
])
def test_right_passes_wrong_fails(qid, wrong, capsys, monkeypatch):
    monkeypatch.delenv(variants.ENV, raising=False)
    variants.student("")
    capsys.readouterr()
    if wrong == "lower":
        wrong = int(simulate(cases.priority_preempt()).jobs.set_index("name").start["high-small"])
    if qid == "ch07.q2":
        wrong = _right(qid) - 600  # the waits counted to the last submit's horizon minus one batch spacing
    check(qid, _right(qid))
    check(qid, wrong)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{qid}: 正确"
    assert out[1].startswith(f"{qid}: 错误")


def test_q2_refuses_a_fraction_and_takes_a_rounded_number():
    right = _mean_wait(variants.OPTIONS[7]["batch_jobs"][0])
    assert judge("ch07.q2", right + 1).passed
    assert not judge("ch07.q2", right + 2).passed
    assert judge("ch07.q2", right + 0.5).code == "wrong-type"


@pytest.mark.parametrize(("key", "qid"), [("batch_jobs", "ch07.q2"), ("default_class", "ch07.q1")])
def test_two_students_two_expected_values(key, qid):
    one, two = _ids_with_different(key)

    def expected(sid):
        v = variants.params(7, sid)
        if qid == "ch07.q2":
            return _mean_wait(v["batch_jobs"])
        default = None if v["default_class"] == "none" else v["default_class"]
        return int(simulate(cases.priority_stream(global_default=default)).jobs.set_index("name").priority["batch-0"])

    a, b = expected(one), expected(two)
    assert a != b
    assert judge(qid, a, student=one).passed and not judge(qid, a, student=two).passed
    assert judge(qid, b, student=two).passed


def test_per_queue_by_priority_tells_the_classes_of_one_queue_apart():
    result = simulate(cases.priority_stream())
    by_queue, by_priority = metrics.per_queue(result), metrics.per_queue(result, by="priority")
    assert list(by_queue.index) == ["default"]
    assert list(by_priority.index) == [1000, 100]
    assert by_priority.loc[100, "not_started"] == by_priority.loc[100, "jobs"] == 6
    assert by_priority.loc[1000, "not_started"] == 0
    assert by_priority.gpu_hours.sum() == pytest.approx(by_queue.gpu_hours.sum(), abs=0.1)
    assert by_priority.loc[100, "mean_wait_s"] == pytest.approx(metrics.waited(result)[_batch(result)].mean(), abs=0.1)


def test_the_priority_panel_rows_and_chart():
    from labkit import widgets

    scenario = cases.priority_stream()
    panel = widgets.Panel(scenario, [widgets.priority_value(scenario, "batch", high=2000)],
                          charts=("priority_waits",), debounce=0, by="priority")
    assert list(panel.table.index) == [1000, 100, "cluster"]
    assert panel.table.loc[100, "not_started"] == 6 and "<svg" in panel.svgs[0]
    panel.set("priorityClass/batch", 2000)  # batch above prod: now prod waits behind the batch jobs
    assert list(panel.table.index) == [2000, 1000, "cluster"]
    assert panel.table.loc[2000, "not_started"] == 0
    assert panel.table.loc[1000, "mean_wait_s"] > 60


def test_clusters_ch07_is_the_fresh_export_of_the_example():
    from pathlib import Path

    from labkit.k8s import sets
    from labkit.k8s.export import MARKER

    folder = Path(__file__).resolve().parents[1] / "clusters" / "ch07"
    made = sets.generated()["ch07"]
    kept = {p.name: p.read_text() for p in folder.iterdir() if p.read_text().startswith(MARKER)}
    assert made == kept, f"clusters/ch07 is stale; run `{sets.REGENERATE}`"
    assert "examples/priority-stream.yaml --time-scale 60" in kept["00-nodes.yaml"].splitlines()[0]
    assert "globalDefault: true" in kept["06-priorityclasses.yaml"]


def test_slurm_age_factor_lets_batch_overtake_only_when_it_can_bridge_the_qos_gap():
    def run(weight):
        result = simulate(cases.priority_stream_slurm(age_weight=weight))
        batch = result.jobs[_batch(result)]
        return batch.start.min(), int(batch.start.notna().sum()), result
    horizon = metrics.window_end(run(0)[2])
    assert run(0)[0] == horizon  # no aging: batch only at the window's last moment
    assert run(5000)[:2] == run(0)[:2]  # 1000 + 5000 never passes a fresh prod job's 10000
    first, started, result = run(20000)
    assert first < horizon / 2 and started > run(0)[1]
    assert result.info["engine"] in ("numba", "reference") and "prod" in {j.qos for j in result.scenario.jobs}


def test_slurm_stream_mirrors_the_volcano_scenario():
    volcano, slurm = simulate(cases.priority_stream()), cases.priority_stream_slurm()
    prod = volcano.jobs[~_batch(volcano)]
    assert sorted(prod.submit) == sorted(j.submit for j in slurm.jobs if j.qos == "prod")
    assert {q.name: q.priority for q in slurm.slurm.qos} == {p.name: p.value for p in volcano.scenario.priority_classes}


@pytest.mark.parametrize("build", [cases.priority_stream, lambda: cases.priority_stream(split=True),
                                   cases.priority_preempt, lambda: cases.priority_preempt(never=True),
                                   lambda: cases.priority_stream_slurm(age_weight=20000)])
def test_the_chapter_scenarios_run_alike_on_both_engines(build):
    scenario = build()
    fast, slow = simulate(scenario, engine="numba"), simulate(scenario, engine="reference")
    assert fast.info["engine"] == "numba" and slow.info["engine"] == "reference"
    columns = ["name", "start", "end", "evictions"]
    assert fast.jobs[columns].fillna(-1).equals(slow.jobs[columns].fillna(-1))


def test_the_preempt_toggle_on_the_chapter_panel_reruns_the_scenario():
    """Section 7.5's panel: the priority stream names no scheduler, so the toggle must write the default
    conf with preempt added (it used to add an empty scheduler section the scenario then refused)."""
    from labkit import widgets

    scenario = cases.priority_stream()
    assert "scheduler" not in scenario.model_dump(exclude_unset=True)
    panel = widgets.Panel(scenario, [widgets.action(scenario, "preempt")], charts=(), debounce=0, by="priority")
    panel.set("action/preempt", True)
    assert panel.runs == 2, panel._status.value
    assert "preempt" in panel.scenario().scheduler.conf.action_list()
    assert panel.table.loc["cluster", "evictions"] == 0  # the batch jobs never start, so there is nobody to evict
