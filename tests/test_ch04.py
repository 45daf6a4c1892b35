"""Chapter 4 (scheduler architectures): the four-job workload shows, under each scheduler family, what
the chapter says of it, and exercise 4.4's check passes the right choice and fails wrong ones on
every variant."""

import pytest

from labkit import viz
from labkit.course import cases, variants
from labkit.engine.simulate import simulate
from labkit.grading import check
from labkit.grading.keys import judge

ONLY_BACKFILL_RESERVES = ["slurm-backfill"]
"""Exercise 4.4 reasoned by hand: with d running 100 s, only a reservation keeps b on time."""


def _student_with(c_duration: int) -> str:
    return next(sid for sid in (f"s{i:03d}" for i in range(1, 2000))
                if variants.params(4, sid)["c_duration"] == c_duration)


def _jobs(policy: str, **kw):
    return simulate(variants.four_jobs(policy, **kw)).jobs.set_index("name")


def test_only_the_kueue_policy_gets_the_kueue_objects():
    assert cases.four_jobs("kueue").kueue is not None
    assert cases.four_jobs("volcano-shipped").kueue is None


def test_kueue_holds_b_on_quota_and_admits_d_first():
    result = simulate(variants.four_jobs("kueue"))
    events = result.events
    b_pending = events[(events.job == "default/b") & (events.kind == "Pending")].iloc[0]
    assert b_pending.time == 1
    assert b_pending.message.endswith("insufficient unused quota for nvidia.com/gpu in flavor default-flavor, "
                                      "24 more needed")
    jobs = result.jobs.set_index("name")
    assert jobs.start["d"] < jobs.start["c"] < jobs.start["b"]
    assert jobs.start["b"] >= jobs.end["a"]


def test_default_kube_scheduler_binds_one_pod_of_b_on_the_idle_node():
    result = simulate(variants.four_jobs("kube-default"))
    b = result.tasks[result.tasks.job == "default/b"]
    early = b[b.start < result.jobs.set_index("name").start["b"]]
    assert len(early) == 1 and early.start.iloc[0] == 1  # one pod of the gang holds the free node from t=1
    jobs = result.jobs.set_index("name")
    assert jobs.start["d"] >= jobs.end["b"] and jobs.start["c"] >= jobs.end["b"]


def test_backfill_reserves_for_b_from_a_time_limit():
    events = simulate(variants.four_jobs("slurm-backfill")).events
    plans = events[events.kind == "StartTime"].drop_duplicates("job").set_index("job").message
    assert plans["default/b"].startswith("StartTime=120 ")  # a started at 0 with a 2-minute limit
    assert plans["default/d"].startswith("StartTime=240 ")  # after b's 2-minute reservation


@pytest.mark.parametrize("c_duration", variants.OPTIONS[4]["c_duration"])
def test_q4_right_passes_wrong_fails_on_every_variant(c_duration):
    sid = _student_with(c_duration)
    assert judge("ch04.q4", ONLY_BACKFILL_RESERVES, sid).passed
    gang_without_reservation = ["volcano-shipped", "kube-coscheduling", "kueue", "slurm-backfill"]
    assert not judge("ch04.q4", gang_without_reservation, sid).passed
    assert not judge("ch04.q4", [], sid).passed


def test_q4_answer_is_what_the_runs_show():
    for policy in ("volcano-shipped", "kube-coscheduling", "kueue"):
        jobs = _jobs(policy, d_duration=100)
        assert jobs.start["b"] > jobs.end["a"] + 2  # no reservation: d still holds the idle node
    for policy in ("kube-default", "slurm-builtin"):
        jobs = _jobs(policy, d_duration=100)
        assert jobs.start["d"] > jobs.start["b"] and jobs.start["c"] > jobs.start["b"]  # nothing used the idle node


def test_q4_names_an_unknown_scheduler_and_refuses_a_string(capsys):
    check("ch04.q4", ["slurm-backfill", "yunikorn"])
    check("ch04.q4", "slurm-backfill")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ch04.q4: 错误（不是第 4.4 节的调度器：yunikorn）"
    assert lines[1].startswith("ch04.q4: 错误（应为调度器名列表")


def test_the_pod_chart_names_its_time_unit():
    run = simulate(variants.four_jobs("kube-default"))
    titles = {unit: viz.job_gantt(run, unit=unit).to_dict()["layer"][0]["encoding"]["x"]["title"]
              for unit in (1, 60, 3600, 10)}
    assert titles == {1: "seconds", 60: "minutes", 3600: "hours", 10: "time / 10 s"}
