"""labkit course: solutions -> labs (placeholders, no outputs), the staleness check, the chapter cases."""

from pathlib import Path

import nbformat
import pytest

import labkit
from labkit import metrics
from labkit.cli import main
from labkit.course import cases, notebooks, steps

ROOT = Path(__file__).resolve().parents[1]


def test_solution_region_becomes_placeholders():
    source = "x = 1\n# BEGIN SOLUTION\nanswer = compute(\n    x)\nanswer = answer + 1\nother = 2\n# END SOLUTION\ncheck(answer)"
    assert notebooks.strip_solutions(source) == (
        "x = 1\nanswer = ...  # 在此作答\nother = ...  # 在此作答\ncheck(answer)")


def test_indented_region_and_region_without_assignment():
    source = "def f():\n    # BEGIN SOLUTION\n    return 3\n    # END SOLUTION"
    assert notebooks.strip_solutions(source) == "def f():\n    ...  # 在此作答"
    with pytest.raises(ValueError, match="without"):
        notebooks.strip_solutions("# BEGIN SOLUTION\nx = 1")


def _chapter(tmp_path: Path) -> tuple[Path, Path]:
    solutions, labs = tmp_path / "solutions", tmp_path / "labs"
    solutions.mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("# BEGIN SOLUTION\nanswer = 42\n# END SOLUTION", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", text="42\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    nbformat.write(nb, solutions / "ch99_test.ipynb")
    return solutions, labs


def test_build_then_check(tmp_path, capsys):
    solutions, labs = _chapter(tmp_path)
    args = ["--solutions", str(solutions), "--labs", str(labs)]
    assert main(["course", "check", *args]) == 1
    assert "missing" in capsys.readouterr().out
    assert main(["course", "build", *args]) == 0
    lab = nbformat.read(labs / "ch99_test.ipynb", as_version=4)
    assert lab.cells[1].source == "answer = ...  # 在此作答"
    assert lab.cells[1].outputs == [] and lab.cells[1].execution_count is None
    assert main(["course", "check", *args]) == 0
    nb = nbformat.read(solutions / "ch99_test.ipynb", as_version=4)
    nb.cells[0].source = "# changed"
    nbformat.write(nb, solutions / "ch99_test.ipynb")
    assert main(["course", "check", *args]) == 1
    assert "stale" in capsys.readouterr().out


def test_no_sources_is_bad_input(tmp_path):
    assert main(["course", "build", "--solutions", str(tmp_path)]) == 2


def test_shipped_labs_are_current():
    assert notebooks.stale(ROOT / "solutions", ROOT / "labs") == []


def test_every_chapter_has_checks_and_answers():
    from labkit.grading import check_cells
    from labkit.grading.keys import CHECKS

    for path in notebooks.chapters(ROOT / "solutions"):
        nb = nbformat.read(path, as_version=4)
        checks = check_cells(nb).values()
        assert 2 <= len(checks) <= 4, path.name
        assert set(checks) <= set(CHECKS)
        for cell in nb.cells:
            if any(t.startswith("check:") for t in cell.metadata.get("tags", [])):
                assert "nbval-check-output" in cell.metadata["tags"]


def test_fragmentation_spread_strands_the_free_gpus():
    table = steps.placement(cases.fragmentation_snapshot())
    assert table.free_gpus.tolist() == [4.0] * 4
    assert (table["filter"] != "pass").all() and not table.bound.any()


def test_binpack_leaves_a_whole_node_for_tp8():
    table = steps.placement(cases.fragmentation_snapshot("binpack", placed=[]))
    bound = table[table.bound].set_index("task").node
    assert bound["ml/tp8-worker-0"] in ("gpu-2", "gpu-3")
    assert bound["ml/resident-1-worker-0"] == "gpu-0"


def test_case_study_slice_and_week():
    small = cases.case_study(nodes=4, hours=2, tenancy=False)
    assert small.cluster.pools[0].count == 4 and [q.name for q in small.queues] == ["default"]
    assert cases.case_study(week=True).cluster.pools[0].count == 32
    with pytest.raises(ValueError):
        cases.nodeorder_conf("random")


def _problems(week: bool) -> dict:
    """What the running case shows under the shipped policy, computed from the engine's runs."""
    scenario = cases.case_study(week=week)
    run = labkit.simulate(scenario)
    jobs = run.jobs.assign(waited=metrics.waited(run), duration=metrics.job_times(run).duration)
    team = {name: jobs[jobs.namespace == name] for name in cases.TEAMS}
    a, b, c = team["team-a"], team["team-b"], team["team-c"]
    capability = float(scenario.queues[0].capability["nvidia.com/gpu"])
    capped = labkit.simulate(cases.case_study(week=week, a_capability=int(capability * 2 // 3)))
    capped_waits = metrics.waited(capped).groupby(capped.jobs.namespace).mean()
    largest = a[a.gpus == a.gpus.max()]
    return {
        "utilisation": metrics.utilisation(run),
        # team A's multi-node gangs wait behind B's stream: its largest never start, A waits longest
        "a_largest_started": int(largest.start.notna().sum()),
        "a_waits_longest": a.waited.mean() > max(b.waited.mean(), c.waited.mean()),
        "a_multi_node": bool((a.gpus > 8).all()),
        # team C's short jobs starve: one in twenty waits longer than a typical C job runs
        "c_p95_over_median_run": c.waited.quantile(0.95) / c.duration.median(),
        # the quota mistake: A's capability (75% of the cluster) lets unplaceable gangs hold the enqueue
        # room; at two thirds of it B and C wait far less, A starts no fewer jobs, the GPUs do more work
        "b_wait_ratio": capped_waits["team-b"] / b.waited.mean(),
        "c_wait_ratio": capped_waits["team-c"] / c.waited.mean(),
        "a_started_more_or_same": capped.jobs[capped.jobs.namespace == "team-a"].start.notna().sum()
                                  >= a.start.notna().sum(),
        "utilisation_gain": metrics.utilisation(capped) - metrics.utilisation(run),
    }


@pytest.fixture(scope="module")
def problems() -> dict[str, dict]:
    return {"week": _problems(True), "slice": _problems(False)}


@pytest.mark.parametrize("which", ["week", "slice"])
def test_the_case_shows_the_seeds_problems(problems, which):
    shown = problems[which]
    assert shown["a_multi_node"] and shown["a_largest_started"] == 0 and shown["a_waits_longest"]
    assert shown["c_p95_over_median_run"] > 1
    assert shown["b_wait_ratio"] < 0.5 and shown["c_wait_ratio"] < 0.5 and shown["a_started_more_or_same"]
    assert shown["utilisation_gain"] > 0.05


def test_the_slice_is_a_miniature_of_the_week(problems):
    """Same load per GPU: the slice's GPU utilisation is within 5 points of the week's."""
    assert abs(problems["slice"]["utilisation"] - problems["week"]["utilisation"]) < 0.05
    slice_, week = cases.case_study(), cases.case_study(week=True)
    share = [float(s.queues[0].capability["nvidia.com/gpu"]) / (s.cluster.pools[0].count * 8) for s in (slice_, week)]
    assert share[0] == share[1]


def test_quota_refuses_at_admission_and_counts_limitrange_defaults():
    """ch. 3's burst on the engine: each pod the vcjob controller creates gets the LimitRange defaults,
    then passes the ResourceQuota or is refused (FailedCreate)."""
    run = labkit.simulate(cases.quota_burst(cpu_quota=36))
    refused = run.events[run.events.kind == "Rejected"].drop_duplicates("task").set_index("task").message
    assert refused.index.tolist() == ["team-c/c-eval-4-worker-0", "team-c/c-eval-5-worker-0", "team-c/c-clean-1-worker-0"]
    assert refused.iloc[0] == ('pods "c-eval-4-worker-0" is forbidden: exceeded quota: team-c, requested: '
                               "requests.cpu=8,requests.nvidia.com/gpu=4, used: requests.cpu=32,requests.nvidia.com/gpu=16, "
                               "limited: requests.cpu=36,requests.nvidia.com/gpu=16")
    assert "requested: requests.cpu=4, used: requests.cpu=36, limited: requests.cpu=36" in refused.iloc[2]
    assert run.tasks.set_index("job").cpu["team-c/c-clean-0"] == 4.0  # the LimitRange's defaultRequest


def test_partial_gangs_hold_gpus_without_training():
    partial = steps.workers(labkit.simulate(cases.gang_pair(min_available=1)), at=60)
    assert partial.running.tolist() == [1, 1] and not partial.can_train.any()
    whole = steps.workers(labkit.simulate(cases.gang_pair()), at=60)
    assert whole.running.tolist() == [2, 0]
