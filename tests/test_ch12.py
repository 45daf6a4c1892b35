"""Chapter 12 (borrowing and reclaim in a Kueue cohort): its checks judged with right and wrong answers
derived from the engine, the variant, and the engine behaviour the chapter shows on both engines."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import labkit
from labkit import metrics, spec
from labkit.course import cases, variants
from labkit.engine.simulate import simulate
from labkit.errors import SpecError
from labkit.grading import check
from labkit.grading.keys import judge
from labkit.k8s.export import render
from labkit.k8s.manifests import manifests


def _reclaimed_for(result, cq: str) -> list[str]:
    """Workloads whose Preempted message names a workload of `cq` as the preemptor (by its path)."""
    events = result.events
    hit = events[(events.kind == "Preempted") & events.message.str.contains(f"preemptor path: /research/{cq};")]
    return sorted(set(hit.job))


def _lender_free(result, a_jobs: int) -> bool:
    """team-a's jobs within its nominal quota (16 GPUs, 8 per job) all start, none preempting anyone."""
    events = result.events
    mine = [f"team-a/train-{i}" for i in range(min(a_jobs, 2))]
    started = set(events[events.kind == "Started"].job)
    preemptors = set(events[events.kind == "Preempted"].message.str.extract(r"\(UID: ([^),]+)")[0])
    return all(job in started and job not in preemptors for job in mine)


def _best_lending_limit(a_jobs: int) -> int:
    return max(x for x in (0, 8, 16)
               if _lender_free(simulate(cases.cohort_borrowing(a_jobs, a_lending_limit=x)), a_jobs))


def _sid_with(a_jobs: int) -> str:
    return next(f"s{i:03d}" for i in range(1, 500) if variants.params(12, f"s{i:03d}")["a_jobs"] == a_jobs)


def test_q1_right_and_wrong(capsys):
    right = _reclaimed_for(simulate(cases.cohort_borrowing(variants.params(12, "")["a_jobs"])), "team-a")
    assert right
    check("ch12.q1", right)
    assert capsys.readouterr().out == "ch12.q1: 正确\n"
    check("ch12.q1", right[:-1])
    assert capsys.readouterr().out.startswith("ch12.q1: 错误（")
    check("ch12.q1", right + ["team-b/finetune-3"])
    assert capsys.readouterr().out.startswith("ch12.q1: 错误（")


def test_q2_right_and_wrong(capsys):
    right = _best_lending_limit(variants.params(12, "")["a_jobs"])
    check("ch12.q2", right)
    assert capsys.readouterr().out == "ch12.q2: 正确\n"
    for wrong in sorted({0, 8, 16} - {right}):
        check("ch12.q2", wrong)
        assert capsys.readouterr().out.startswith("ch12.q2: 错误（")
    check("ch12.q2", 12)
    assert "0、8 或 16" in capsys.readouterr().out


def test_q3_right_and_wrong():
    for reclaim in ("LowerPriority", "Any"):
        assert judge("ch12.q3", {"reclaimWithinCohort": reclaim, "borrowWithinCohort": "LowerPriority"}).passed
    for reclaim in ("LowerPriority", "Any", "Never"):
        verdict = judge("ch12.q3", {"reclaimWithinCohort": reclaim, "borrowWithinCohort": "Never"})
        assert not verdict.passed and verdict.code == "wrong" and "eval-0 等了" in verdict.reason
    refused = judge("ch12.q3", {"reclaimWithinCohort": "Never", "borrowWithinCohort": "LowerPriority"})
    assert refused.code == "wrong-type" and "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never" in refused.reason
    assert judge("ch12.q3", "LowerPriority").code == "wrong-type"
    assert judge("ch12.q3", {"reclaimWithinCohort": "Some", "borrowWithinCohort": "Never"}).code == "wrong-type"


def test_the_variant_changes_the_expected_values():
    one, two = _sid_with(1), _sid_with(2)
    q1 = {sid: _reclaimed_for(simulate(cases.cohort_borrowing(a)), "team-a") for sid, a in ((one, 1), (two, 2))}
    q2 = {sid: _best_lending_limit(a) for sid, a in ((one, 1), (two, 2))}
    assert q1[one] != q1[two] and q2[one] != q2[two]
    for sid, other in ((one, two), (two, one)):
        assert judge("ch12.q1", q1[sid], sid).passed and not judge("ch12.q1", q1[other], sid).passed
        assert judge("ch12.q2", q2[sid], sid).passed and not judge("ch12.q2", q2[other], sid).passed


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_kueue_results_are_per_cluster_queue(engine):
    """A Kueue run's jobs table names each job's ClusterQueue, so per-queue metrics are per ClusterQueue."""
    result = simulate(cases.cohort_borrowing(), engine=engine)
    assert dict(zip(result.jobs.namespace, result.jobs.queue)) == {t: t for t in cases.TEAMS}
    assert sorted(metrics.per_queue(result).index) == list(cases.TEAMS)


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_preempting_workload_keeps_the_quota_it_waits_for(engine):
    """Kueue's processEntry adds a preempting entry's usage to the cycle's snapshot (cq.AddUsage), and the
    preemptor is nominated again every cycle: when team-a's train-0 ends (9031 s) eval-0 preempts one
    borrowed finetune job and waits; the quota it waits for is not given to another borrowed finetune job."""
    result = simulate(cases.cohort_borrowing(), engine=engine)
    events = result.events.reset_index(drop=True)
    by_eval = events[(events.kind == "Preempted") & events.message.str.contains("(UID: team-c/eval-0)", regex=False)]
    evicted = events[(events.kind == "Preempted") & (events.job == "team-c/eval-0")].index.min()
    first = by_eval[by_eval.index > evicted].index.min()  # eval-0, reclaimed by team-a, asks again
    admitted = events[(events.kind == "QuotaReserved") & (events.job == "team-c/eval-0")].index
    resumed = admitted[admitted > first].min()
    window = events.loc[first:resumed - 1]
    window = window[window.time < events.time[resumed]]  # until the session that admits it
    assert window[window.kind == "QuotaReserved"].empty, window
    assert (window.kind == "Preempted").sum() == 1


def test_both_engines_agree_on_the_chapter_runs():
    runs = [cases.cohort_borrowing(a) for a in (1, 2, 3)] + [
        cases.cohort_borrowing(2, b_borrowing_limit=8, a_lending_limit=8),
        cases.cohort_borrowing(2, a_reclaim="Never", c_borrow="Never")]
    for scenario in runs:
        ref, fast = simulate(scenario, engine="reference"), simulate(scenario, engine="numba")
        assert ref.events.equals(fast.events) and ref.jobs.equals(fast.jobs)


def test_borrow_within_cohort_needs_reclaim_within_cohort(tmp_path):
    """The ClusterQueue CRD's CEL rule: reclaimWithinCohort Never with borrowWithinCohort.policy not Never is refused."""
    with pytest.raises(SpecError, match=r"borrowWithinCohort\.policy: must be Never while reclaimWithinCohort is Never"):
        cases.cohort_borrowing(c_reclaim="Never", c_borrow="LowerPriority")
    cases.cohort_borrowing(c_reclaim="Never", c_borrow="Never")
    data = yaml.safe_load(spec.dump(cases.cohort_borrowing()))
    data["kueue"]["clusterQueues"][2]["preemption"]["reclaimWithinCohort"] = "Never"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    run = subprocess.run([sys.executable, "-m", "labkit", "validate", str(path)], check=False, capture_output=True, text=True)
    assert run.returncode == 2
    assert "kueue.clusterQueues[2].preemption.borrowWithinCohort.policy" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_chapter_panel_reruns_kueue_per_cluster_queue():
    """The notebook's panel cell: its knobs write the ClusterQueues' fields, the table is per ClusterQueue."""
    import ast
    from pathlib import Path

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "solutions" / "ch12_borrowing.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if "panel" in c.metadata.get("tags", []))
    tree = ast.parse(source)
    namespace = {"scenario": cases.cohort_borrowing()}
    exec(compile(ast.Module(tree.body[:-1], []), "panel", "exec"), namespace)  # noqa: S102 (the notebook's own cell)
    panel = eval(compile(ast.Expression(tree.body[-1].value), "panel", "eval"), namespace)
    assert list(panel.table.index) == [*cases.TEAMS, "cluster"]
    before = panel.table.copy()
    panel.values["team-a/lendingLimit"] = 0
    panel.values["team-b/borrowingLimit"] = 8
    panel.refresh()
    team_a = next(q for q in panel.scenario().kueue.cluster_queues if q.name == "team-a")
    assert float(team_a.resource_groups[0].flavors[0].resources[0].lending_limit) == 0
    assert panel.runs == 2 and not panel.table.equals(before)
    assert panel.table.loc["team-b", "evictions"] < before.loc["team-b", "evictions"]


CLUSTER = Path(__file__).resolve().parents[1] / "clusters" / "ch12"
EXPORT = "labkit export k8s clusters/ch12/cohort-borrowing.yaml --time-scale 20"


def test_clusters_ch12_is_not_stale():
    """The committed Kueue lab is the chapter's scenario, exported as the README says."""
    scenario = cases.cohort_borrowing()
    assert (CLUSTER / "cohort-borrowing.yaml").read_text(encoding="utf-8") == labkit.dump(scenario)
    files = render(manifests(scenario, 20.0), EXPORT)
    assert sorted(files) == sorted(p.name for p in CLUSTER.glob("[0-9][0-9]-*.yaml"))
    for name, text in files.items():
        assert (CLUSTER / name).read_text(encoding="utf-8") == text, f"clusters/ch12/{name} is stale: run `{EXPORT} -o clusters/ch12`"
