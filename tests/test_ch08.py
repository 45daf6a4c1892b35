"""Chapter 8: the plugins' votes on victims, the scenarios' preemption semantics, the checks on right and wrong answers."""

import pandas as pd
import pytest

import labkit
from labkit import spec, widgets
from labkit.course import cases, steps, variants
from labkit.engine.simulate import simulate
from labkit.errors import LabkitError
from labkit.grading import check
from labkit.grading.keys import judge
from labkit.grading.keys.ch08 import CHECKPOINT_CHOICES_MIN

URGENT = "ml/urgent-worker-0"
VARIANTS = [(g, p) for g in variants.OPTIONS[8]["urgent_gpus"] for p in variants.OPTIONS[8]["ft_priority"]]


def _job(pod: str) -> str:
    return pod.split("/", 1)[1].rsplit("-worker-", 1)[0]


def _evicted_jobs(urgent_gpus: int, ft_priority: int) -> list[str]:
    """From the cycle's evictions, in order (independent of the key's reading of the decisions)."""
    return list(dict.fromkeys(_job(p) for p in labkit.cycle(cases.victims_snapshot(urgent_gpus, ft_priority)).evicted()))


def _first_deciding_tier(table: pd.DataFrame) -> pd.Series:
    """session_plugins.go Preemptable/Reclaimable: per tier the intersection of the votes; the first
    tier with a non-empty intersection decides; a plugin voting nobody voids its tier."""
    tiers = sorted({c.split(":")[0] for c in table.columns if c.startswith("tier")})
    for tier in tiers:
        voted = table[[c for c in table.columns if c.startswith(f"{tier}:")]]
        if voted.any(axis=0).all():
            both = voted.all(axis=1)
            if both.any():
                return both
    return pd.Series(False, index=table.index)


# ------------------------------------------------------------------------------------ steps.votes


def test_votes_default_snapshot_gang_gives_one_surplus_pod_per_job():
    table = steps.votes(cases.victims_snapshot(), URGENT, "gpu-0")
    assert list(table.columns) == ["job", "priority", "tier1:priority", "tier1:gang", "tier1:conformance", "tier2:drf",
                                   "victim", "evicted"]
    assert table["tier1:priority"].all() and table["tier1:conformance"].all()
    assert table.groupby("job")["tier1:gang"].sum().to_dict() == {"ml/ft": 1, "ml/sweep": 1}
    assert list(table.index[table.victim]) == ["ml/sweep-worker-0", "ml/ft-worker-0"]
    assert list(table.index[table.evicted]) == ["ml/sweep-worker-0"]  # the lower-priority job goes first; then it fits


def test_votes_whole_gang_is_safe():
    table = steps.votes(cases.victims_snapshot(), URGENT, "gpu-1")
    assert list(table.index) == ["ml/etl-worker-0"]
    assert not table["tier1:gang"].any() and not table.victim.any() and not table.evicted.any()


def test_the_shipped_confs_preemptable_switches_leave_a_gang_unprotected():
    """Section 8.2's last cells: the shipped conf has `enablePreemptable: false` on gang and drf, so with
    only preempt added the first tier is priority and conformance, and urgent's 6 GPUs take both of
    sweep's pods (below its minAvailable) and one of ft's; volcano-multitenant evicts nobody."""
    shipped = spec.policy("volcano-shipped").model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert [p["name"] for t in shipped["tiers"] for p in t["plugins"] if p.get("enablePreemptable") is False] == [
        "gang", "drf"]
    shipped["actions"] += ", preempt"
    data = cases.victims_snapshot(urgent_gpus=6).model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["scheduler"] = {"conf": shipped}
    evicted = labkit.cycle(spec.validate(data)).evicted()
    assert sorted(evicted) == ["ml/ft-worker-1", "ml/sweep-worker-0", "ml/sweep-worker-1"]
    assert [_job(p) for p in evicted][:2] == ["sweep", "sweep"]  # the lower-priority job's pods go first
    assert labkit.cycle(cases.victims_snapshot(urgent_gpus=6)).evicted() == []


@pytest.mark.parametrize(("gpus", "priority"), VARIANTS)
def test_votes_combine_as_the_session_does(gpus, priority):
    table = steps.votes(cases.victims_snapshot(gpus, priority), URGENT, "gpu-0")
    assert table.victim.equals(_first_deciding_tier(table).rename("victim"))
    assert not (table.evicted & ~table.victim).any()  # only victims are evicted
    assert {_job(p) for p in table.index[table.evicted]} == set(_evicted_jobs(gpus, priority))


def test_votes_reclaim_across_queues_by_proportion():
    data = cases.victims_snapshot().model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["queues"].append({"name": "other"})
    urgent = next(j for j in data["jobs"] if j["name"] == "urgent")
    urgent["queue"] = "other"
    table = steps.votes(spec.validate(data), URGENT, "gpu-0", action="reclaim")
    assert [c for c in table.columns if c.startswith("tier")] == ["tier1:gang", "tier1:conformance", "tier2:proportion"]
    # queue ml holds all 16 GPUs, deserved 14 (other asks for 2): proportion gives up one 2-GPU pod
    assert int(table["tier2:proportion"].sum()) == 1
    assert table.victim.equals(_first_deciding_tier(table).rename("victim"))
    assert table.evicted.sum() == 1


def test_votes_refuse_bad_input():
    with pytest.raises(LabkitError, match="action must be preempt or reclaim"):
        steps.votes(cases.victims_snapshot(), URGENT, "gpu-0", action="allocate")
    with pytest.raises(LabkitError, match="no pod 'ml/nobody'"):
        steps.votes(cases.victims_snapshot(), "ml/nobody", "gpu-0")


# ------------------------------------------------------------------------------------ scenarios


def test_preempt_does_not_cross_queues_reclaim_does():
    def a1(scenario):
        jobs = simulate(scenario).jobs.set_index("name")
        return jobs.loc["a1", "start"], jobs[jobs.queue == "team-b"].end.min(), int(jobs.evictions.sum())

    shipped = a1(cases.reclaim_case("enqueue, allocate, backfill"))
    preempt = a1(cases.reclaim_case("enqueue, allocate, backfill, preempt", a1_priority=1000))
    reclaim = a1(cases.reclaim_case())
    assert shipped[2] == preempt[2] == 0 and preempt[0] == shipped[0] >= shipped[1]
    assert reclaim[2] == 1 and reclaim[0] < shipped[1]


@pytest.mark.parametrize("grace", [0, 120, 600])
def test_grace_period_is_the_preemptors_wait(grace):
    result = simulate(cases.checkpoint_case("30m", grace))
    jobs = result.jobs.set_index("name")
    evicted = result.events[result.events.kind == "Evicted"].time
    assert len(evicted) == sum(j.name.startswith("hotfix") for j in result.scenario.jobs)
    period = float(result.info.get("schedule_period", 1.0))
    # evicted in the session after it arrives, bound in the session after the victim is deleted
    assert jobs.loc["hotfix-1", "wait"] <= grace + 2 * period
    assert jobs.loc["hotfix-1", "wait"] >= grace


def test_checkpoint_case_defaults_are_the_preset():
    assert cases.checkpoint_case() == spec.preset("preemption-checkpoint")


def test_lost_work_bounded_by_checkpoints():
    none = simulate(cases.checkpoint_case(None)).jobs.set_index("name").loc["pretrain"]
    for minutes in (5, 30, 120):
        job = simulate(cases.checkpoint_case(minutes * 60)).jobs.set_index("name").loc["pretrain"]
        assert job.evictions == none.evictions
        assert 0 < job.lost_work <= job.evictions * minutes * 60  # each eviction loses less than one interval
        assert job.lost_work <= none.lost_work


@pytest.mark.parametrize(("checkpoint", "grace"), [(None, 30), ("10m", 0), ("45m", 600)])
def test_checkpoint_case_numba_equals_reference(checkpoint, grace):
    scenario = cases.checkpoint_case(checkpoint, grace)
    fast, ref = simulate(scenario, engine="numba"), simulate(scenario, engine="reference")
    columns = ["name", "start", "end", "evictions", "lost_work"]
    pd.testing.assert_frame_equal(fast.jobs[columns], ref.jobs[columns])


def test_panel_table_reports_lost_work():
    scenario = cases.checkpoint_case()
    panel = widgets.Panel(scenario, [widgets.grace_period(scenario), widgets.checkpoint_interval(scenario)], charts=(),
                          debounce=0)
    lost = simulate(scenario).jobs.groupby("queue").lost_work.sum() / 3600
    assert panel.table.loc["ml", "lost_work_h"] == round(lost["ml"], 2) > 0
    assert panel.table.loc["cluster", "lost_work_h"] == round(lost.sum(), 2)
    panel.set("jobs/checkpointInterval", 0)  # no checkpoints: everything since the start is lost
    assert panel.table.loc["cluster", "lost_work_h"] > round(lost.sum(), 2)


# ------------------------------------------------------------------------------------ checks


def _lost_min(minutes: int) -> float:
    return simulate(cases.checkpoint_case(minutes * 60)).jobs.set_index("name").loc["pretrain", "lost_work"] / 60


def _best_interval(budget: float) -> int:
    return max(m for m in CHECKPOINT_CHOICES_MIN if _lost_min(m) <= budget)


def test_right_passes_wrong_fails_default_variant(capsys, monkeypatch):
    monkeypatch.delenv(variants.ENV, raising=False)
    variants.student("")
    capsys.readouterr()
    v = variants.params(8)
    best = _best_interval(v["lost_budget_min"])
    shorter = max(m for m in CHECKPOINT_CHOICES_MIN if m < best)
    longer = min(m for m in CHECKPOINT_CHOICES_MIN if m > best)
    right_victims = _evicted_jobs(v["urgent_gpus"], v["ft_priority"])
    cases_ = [("ch08.q1", right_victims, [*right_victims, "etl"]),
              ("ch08.q1", right_victims, ["ft"] if right_victims != ["ft"] else ["sweep"]),
              ("ch08.q2", best, shorter), ("ch08.q2", best, longer), ("ch08.q2", best, 7),
              ("ch08.q3", "reclaim", "preempt")]
    for qid, right, wrong in cases_:
        check(qid, right)
        assert capsys.readouterr().out == f"{qid}: 正确\n"
        check(qid, wrong)
        assert capsys.readouterr().out.startswith(f"{qid}: 错误（")


def test_a_job_named_once_per_evicted_pod_is_told_so():
    """A job written twice (once per evicted pod, say) is wrong, and the verdict says so instead of
    blaming the order."""
    student = next(f"s{i:03d}" for i in range(1, 500) if variants.params(8, f"s{i:03d}")["urgent_gpus"] == 2)
    expected = _evicted_jobs(2, variants.params(8, student)["ft_priority"])
    verdict = judge("ch08.q1", expected * 2, student)
    assert not verdict.passed and "只写一次" in verdict.reason
    assert judge("ch08.q1", expected, student).passed


def test_victims_order_matters():
    order = _evicted_jobs(4, 500)
    assert len(order) == 2
    student = next(f"s{i:03d}" for i in range(1, 500)
                   if (variants.params(8, f"s{i:03d}")["urgent_gpus"], variants.params(8, f"s{i:03d}")["ft_priority"])
                   == (4, 500))
    assert judge("ch08.q1", order, student).passed
    assert not judge("ch08.q1", order[::-1], student).passed


@pytest.mark.parametrize(("qid", "answer"), [("ch08.q1", "sweep"), ("ch08.q2", 20.5), ("ch08.q2", "20"),
                                             ("ch08.q3", "both")])
def test_unusable_answers(qid, answer):
    verdict = judge(qid, answer)
    assert not verdict.passed and verdict.code == "wrong-type"


def _student_with(predicate) -> str:
    return next(f"s{i:03d}" for i in range(1, 2000) if predicate(variants.params(8, f"s{i:03d}")))


@pytest.mark.parametrize("qid", ["ch08.q1", "ch08.q2"])
def test_two_students_two_expected_values(qid):
    def expected(v):
        if qid == "ch08.q1":
            return _evicted_jobs(v["urgent_gpus"], v["ft_priority"])
        return _best_interval(v["lost_budget_min"])

    one = "s001"
    a = expected(variants.params(8, one))
    two = _student_with(lambda v: expected(v) != a)
    b = expected(variants.params(8, two))
    assert judge(qid, a, one).passed and judge(qid, b, two).passed
    assert not judge(qid, a, two).passed and not judge(qid, b, one).passed


def test_hotfix_snapshot_preempts_the_gang_by_drfs_vote():
    table = steps.votes(cases.hotfix_snapshot(), "ml/hotfix-1-worker-0", "gpu-0")
    assert list(table.index) == ["ml/pretrain-worker-0"]
    assert not table["tier1:gang"].any() and table["tier2:drf"].all()  # tier 1 voids, tier 2 decides
    assert table.victim.all() and table.evicted.all()
