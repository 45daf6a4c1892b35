"""`labkit compare` on hand-built runs: the five agreement rules, the JSON shapes it reads, bad input."""

from __future__ import annotations

import json

import pytest

from labkit.cli import main
from labkit.compare import backfilled, compare, load_run, to_json
from labkit.errors import LabkitError


def _run(starts: dict[str, tuple], scenario: str = "slurm-backfill", **extra) -> dict:
    """A run: job -> (submit, start[, priority[, evictions]])."""
    jobs = []
    for name, values in starts.items():
        submit, start, priority, evictions = (*values, 0, 0)[:4]
        jobs.append({"name": name, "namespace": "default", "submit": submit, "start": start, "priority": priority,
                     "evictions": evictions, "state": "Completed" if start is not None else "Pending"})
    return {"scenario": scenario, "summary": {}, "jobs": jobs, **extra}


# §6.1 of slurm_local.md: A runs, B waits for all 4 nodes, C is backfilled, D waits for B.
SIM = _run({"a": (0, 0), "b": (1, 90), "d": (2, 100), "c": (3, 5)})
REAL = _run({"a": (0, 0, 1421), "b": (1, 91, 1562), "d": (2, 101, 1140), "c": (3, 4, 1140)},
            engine="slurm", time_scale=1, interval=5)


def test_the_backfill_experiment_agrees():
    result = compare(SIM, REAL)
    assert result.agree, result.report()
    assert result.tolerance == 6  # interval 5 s + 0 s rounding (sim) + 1 s (one real second)
    assert list(result.table["backfilled A"]) == list(result.table["backfilled B"]) == ["no", "no", "no", "yes"]
    assert list(result.table["order B"]) == [1, 3, 4, 2]
    assert "agree: 4 of 4 jobs started in both, in the same order; backfilled: default/c" in result.report()


def test_backfilled_means_started_while_a_job_ahead_waited():
    real = compare(SIM, REAL).table
    assert set(real.index[real["backfilled B"] == "yes"]) == {"default/c"}
    # builtin: C waits for B; C and D start in the same pass, D first or in the same second
    builtin = _run({"a": (0, 0), "b": (1, 90), "d": (2, 101), "c": (3, 101)})
    from labkit.compare import _table

    assert backfilled(_table(builtin), rounding=1) == set()
    # a lower-priority job submitted earlier is not ahead; a higher-priority one submitted later is
    jobs = _table(_run({"low": (0, None, 1), "high": (1, 1, 5)}))
    assert backfilled(jobs) == set()
    jobs = _table(_run({"high": (0, None, 5), "low": (1, 1, 1)}))
    assert backfilled(jobs) == {"default/low"}
    # seen on the real Slurm: A started in the second B (higher priority) was submitted; a whole-second
    # clock cannot say B was waiting when A started
    jobs = _table(_run({"a": (0, 1, 1421), "b": (1, 91, 1562)}))
    assert backfilled(jobs, rounding=1) == set() and backfilled(jobs) == {"default/a"}


def test_a_late_start_beyond_the_tolerance_disagrees():
    late = _run({"a": (0, 0), "b": (1, 90), "d": (2, 100), "c": (3, 12)}, time_scale=1, interval=5)
    result = compare(SIM, late)
    assert not result.agree
    assert result.problems == ["default/c: start differs by 7 s"]
    assert result.table.loc["default/c", "verdict"] == "start differs by 7 s"
    assert compare(SIM, late, tolerance=7).agree


def test_builtin_against_backfill_disagrees_on_every_rule_it_breaks():
    builtin = _run({"a": (0, 0), "b": (1, 91), "d": (2, 101), "c": (3, 101)}, time_scale=1, interval=3)
    problems = compare(SIM, builtin).problems
    # d and c start together in B: a tie is no order, so only b and c swapped
    assert problems == ["default/b: order: A starts default/c before default/b, B default/b before default/c",
                        "default/c: start differs by 96 s", "default/c: backfilled only in A"]


def test_jobs_started_in_one_run_only_and_jobs_missing():
    result = compare(_run({"a": (0, 0), "b": (1, None)}), _run({"a": (0, 0), "b": (1, 50), "x": (2, 3)}))
    assert result.problems == ["default/b: started only in B", "default/x: only in B"]


def test_ties_within_the_rounding_are_no_order_change():
    sim = _run({"d": (2, 100), "c": (3, 100)})
    assert compare(sim, _run({"d": (2, 101), "c": (3, 100)}, time_scale=1)).agree
    assert not compare(sim, _run({"d": (2, 103), "c": (3, 100)}, time_scale=1)).agree


def test_evicted_jobs_must_be_the_same_when_both_count_evictions():
    sim = _run({"l1": (0, 0, 0, 2), "l2": (1, 1, 0, 2), "h1": (5, 5)}, "slurm-preempt")
    real = _run({"l1": (0, 1, 1281, 1), "l2": (1, 3, 1281, 1), "h1": (5, 7, 1421)}, "slurm-preempt", time_scale=1,
                interval=5)
    assert compare(sim, real).agree  # 2 pods evicted vs 1 requeue: both evicted
    real["jobs"][1]["evictions"] = 0
    assert compare(sim, real).problems == ["default/l2: evicted only in A"]
    for job in real["jobs"]:
        del job["evictions"]
    assert compare(sim, real).agree  # B does not count evictions


def _write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_cli_prints_the_table_and_exits_0_or_1(tmp_path, capsys):
    sim = _write(tmp_path, "sim.json", SIM)
    assert main(["compare", sim, _write(tmp_path, "real.json", REAL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"compare slurm-backfill: A = {sim} (labkit), B = ")
    assert "(slurm, time scale 1)" in out and "tolerance 6 s" in out
    assert "default/c       5       4    -1" in out
    wrong = dict(REAL, jobs=[dict(j, start=j["start"] + 50) if j["name"] == "c" else j for j in REAL["jobs"]])
    assert main(["compare", sim, _write(tmp_path, "wrong.json", wrong)]) == 1
    assert "disagree: 1 problem(s)\n  default/c: start differs by 49 s" in capsys.readouterr().out


def test_reads_what_simulate_and_cluster_observe_print(tmp_path):
    simulate = {"scenario": "s", "summary": {"jobs": 1}, "jobs": [
        {"name": "j", "namespace": "team-a", "queue": "q", "priority": 0, "gpus": 8.0, "submit": 0.0, "enqueue": 0.0,
         "start": 10.0, "end": 70.0, "state": "Completed", "evictions": 0, "lost_work": 0.0, "wait": 10.0,
         "jct": 70.0}]}
    observe = {"engine": "volcano", "scenario": "s", "time_scale": 60.0, "summary": {"jobs": 1},
               "jobs": [dict(simulate["jobs"][0], start=60.0)]}
    a = load_run(_write(tmp_path, "sim.json", simulate))
    b = load_run(_write(tmp_path, "observe.json", observe))
    result = compare(a, b)
    assert result.tolerance == 60 and result.agree  # one real second is 60 scenario seconds
    assert list(result.table.index) == ["team-a/j"]


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"),
    ("[]", "not a run"),
    ('{"scenario": "s"}', "not a run"),
    ('{"scenario": "s", "jobs": [{"name": "j", "submit": 0}]}', "jobs[0] has no start"),
    ('{"scenario": "s", "jobs": [], "time_scale": "fast"}', "time_scale must be a number"),
    ('{"scenario": "s", "jobs": [], "schedule_period": -1}', "schedule_period must be a number >= 0"),
    ('{"scenario": "s", "jobs": [], "start_sessions": true}', "start_sessions must be a number"),
    ('{"scenario": "s", "jobs": [], "pods": [{"job": "j"}]}', "pods must be a list of objects with end, job"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    good = _write(tmp_path, "good.json", _run({"a": (0, 0)}, "s"))
    assert main(["compare", good, _write(tmp_path, "bad.json", text)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_runs_of_different_scenarios_and_missing_files_are_bad_input(tmp_path, capsys):
    with pytest.raises(LabkitError, match="different scenarios"):
        compare(_run({"a": (0, 0)}, "x"), _run({"a": (0, 0)}, "y"))
    assert main(["compare", str(tmp_path / "none.json"), str(tmp_path / "none.json")]) == 2
    assert "none.json: No such file or directory" in capsys.readouterr().err


def test_to_json_of_a_simulated_result_feeds_compare():
    import labkit

    scenario = labkit.spec.validate({"name": "tiny", "cluster": {"pools": [
        {"name": "n", "count": 1, "resources": {"nvidia.com/gpu": 8, "cpu": 8}}]}, "jobs": [
        {"name": "a", "tasks": [{"resources": {"nvidia.com/gpu": 8}}], "duration": 10},
        {"name": "b", "submit": 1, "tasks": [{"resources": {"nvidia.com/gpu": 8}}], "duration": 10}]})
    data = to_json(labkit.simulate(scenario))
    assert data["scenario"] == "tiny" and [j["name"] for j in data["jobs"]] == ["a", "b"]
    assert json.loads(json.dumps(data)) == data  # NaN written as null
    assert compare(data, data).agree


def test_a_real_volcano_s_latency_is_sessions_times_period_times_time_scale():
    """A vcjob starts in its second session: at a 1 s period and time scale 600 a real start may
    come 1200 scenario seconds after the simulator's, plus the 600 s rounding of a real second."""
    sim = _run({"a": (0, 1), "b": (0, 2)}, "s")
    real = _run({"a": (0, 1800), "b": (0, 1800)}, "s", time_scale=600, schedule_period=1, start_sessions=2)
    result = compare(sim, real)
    assert result.tolerance == 1200 + 600 and result.agree, result.report()
    assert result.why == "latency 1200 s (2 session(s) x period 1 s x time scale 600, B) + rounding 0 s (A) + 600 s (B)"
    late = _run({"a": (0, 1802), "b": (0, 1800)}, "s", time_scale=600, schedule_period=1, start_sessions=2)
    assert compare(sim, late).problems == ["default/a: start differs by 1801 s"]


def _pod(job: str, node: str, start: float, end: float | None) -> dict:
    return {"job": f"default/{job}", "task": "worker", "pod": f"default/{job}-worker-0", "node": node,
            "start": start, "end": end}


def test_placement_counts_no_other_job_s_pod_that_started_within_the_roundings():
    """b was bound in the session that bound a, on a's node: the simulator starts both at 10 s, a
    real clock of whole seconds may show a at 10 s and b at 11 s. That is no placement difference;
    a pod that had been running for seconds beside b, in one run only, is."""
    sim = _run({"a": (0, 10), "b": (0, 10)}, "s", pods=[_pod("a", "n-0", 10, 50), _pod("b", "n-0", 10, 50)])
    real = _run({"a": (0, 10), "b": (0, 11)}, "s", time_scale=1,
                pods=[_pod("a", "n-0", 10, 50), _pod("b", "n-0", 11, 51)])
    assert compare(sim, real).agree, compare(sim, real).report()
    beside = _run({"a": (0, 5), "b": (0, 11)}, "s", time_scale=1,
                  pods=[_pod("a", "n-0", 5, 50), _pod("b", "n-0", 11, 51)])
    late = _run({"a": (0, 5), "b": (0, 11)}, "s", pods=[_pod("a", "n-1", 5, 50), _pod("b", "n-0", 11, 51)])
    problems = compare(late, beside).problems
    assert "default/b: placement: B started 1 default/b/worker pod(s) on a n node running default/a/worker, " \
           "the other run did not" in problems
