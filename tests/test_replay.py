"""`labkit replay`: the recorded real Volcano runs shipped with labkit, judged against the simulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from labkit.cli import main
from labkit.compare import compare
from labkit.conformance.replay import RECORDINGS, Steer, judge, load_recording, recordings, simulated_pods
from labkit.engine.simulate import simulate
from labkit.engine.volcano.reference import run_session
from labkit.spec import loads

SHIPPED = recordings(RECORDINGS)


@pytest.mark.parametrize("folder", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_recording_agrees_with_the_simulator(folder):
    result = judge(load_recording(folder), engine="reference")
    assert result.agree, result.report()


def test_the_command_prints_one_line_per_recording_and_the_count_last(capsys):
    assert main(["replay", str(RECORDINGS / "gang-minavailable"), "--engine", "reference"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("PASS gang-minavailable (Volcano master ed72c7c8")
    assert "tolerance 4 s: latency 2 s (2 session(s) x period 1 s x time scale 1, B)" in out[0]
    assert out[-1] == "1 passed, 0 failed"


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(RECORDINGS / name, folder)
    return folder


def test_master_s_balanced_allocation_is_what_the_priority_preempt_recording_needs(tmp_path, capsys):
    """Volcano master vendors Kubernetes 1.36: low-elastic packs onto one node, low-single starts at
    once and high-small preempts a surplus pod. With 1.35's score the simulator spreads instead."""
    folder = _copy("priority-preempt", tmp_path)
    (folder / "recording.yaml").write_text('volcano: master ed72c7c8\nkubernetes: "1.35"\n')
    assert main(["replay", str(tmp_path), "--engine", "reference"]) == 1
    out = capsys.readouterr().out
    assert "FAIL priority-preempt" in out
    assert "ml/low-elastic: evicted only in B" in out
    assert out.splitlines()[-1] == "0 passed, 1 failed"


def test_a_real_start_outside_the_latency_fails(tmp_path):
    folder = _copy("placement-binpack", tmp_path)
    run = json.loads((folder / "real.json").read_text())
    big = next(j for j in run["jobs"] if j["name"] == "big")
    big["start"] += 5
    (folder / "real.json").write_text(json.dumps(run))
    result = judge(load_recording(folder), engine="reference")
    assert result.problems == ["ml/big: start differs by 5 s"]


def test_placement_is_judged_up_to_alike_nodes(tmp_path):
    """placement-binpack packs s1-s4 on gpu-1 for real, on gpu-0 in the simulator: the same; moving
    one of them to the node holding s5 and s6 is not."""
    folder = _copy("placement-binpack", tmp_path)
    assert judge(load_recording(folder), engine="reference").agree
    lines = (folder / "pods.tsv").read_text().splitlines()
    header = lines[1].split("\t")
    node = header.index("node")
    for i, line in enumerate(lines[2:], start=2):
        cells = line.split("\t")
        if cells[1] == "s4-worker-0":
            cells[node] = "gpu-0"
            lines[i] = "\t".join(cells)
    (folder / "pods.tsv").write_text("\n".join(lines) + "\n")
    problems = judge(load_recording(folder), engine="reference").problems
    assert any(p.startswith("ml/s4: placement: ") for p in problems), problems


def test_random_ties_are_judged_by_pool_and_said(tmp_path, capsys):
    folder = _copy("placement-shipped", tmp_path)
    assert main(["replay", str(folder), "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "variant ml/big: starts when some node has 8 GPUs free" in out
    (folder / "recording.yaml").write_text('volcano: master ed72c7c8\nkubernetes: "1.36"\n')
    problems = judge(load_recording(folder), engine="reference").problems
    assert "ml/big: start differs by 32 s" in problems


def test_evictions_of_alike_jobs_are_counted_by_class():
    """queues-reclaim-repeat1: reclaim evicted b3 for real, b1 in the simulator: b1-b8 are alike."""
    result = judge(load_recording(RECORDINGS / "queues-reclaim-repeat1"), engine="reference")
    assert result.table.loc["team-b/b1", "evicted A"] == "1" and result.table.loc["team-b/b3", "evicted B"] == "1"
    assert result.agree, result.report()


def test_fragmentation_at_time_scale_600_passes_on_timing():
    """Every real start is ~659 s (about one real second) after the simulator's: a vcjob needs two
    sessions of 1 real second, i.e. 1200 scenario seconds at time scale 600, plus the 600 s rounding."""
    recording = load_recording(RECORDINGS / "fragmentation-ts600")
    result = judge(recording, engine="reference")
    assert result.agree, result.report()
    assert result.tolerance == 2 * 1 * 600 + 600 + 1
    assert result.why == "latency 1200 s (2 session(s) x period 1 s x time scale 600, B) + rounding 1 s (A) + 600 s (B)"
    assert max(abs(result.table["delta"])) > 601  # the old tolerance (interval 0 + roundings) failed it
    bare = {k: v for k, v in recording.real.items() if k not in ("schedule_period", "start_sessions")}
    sim = json.loads(json.dumps(simulate(recording.scenario, engine="reference").to_json()))
    assert not compare(sim, bare).agree


def test_simulated_pods_mark_each_pod_s_first_run():
    recording = load_recording(RECORDINGS / "priority-preempt")
    pods = simulated_pods(simulate(recording.scenario, engine="reference"))
    firsts = [p["pod"] for p in pods if p["first"]]
    assert len(firsts) == len(set(firsts)) == 7
    real = [p for p in recording.real["pods"] if p["pod"] == "ml/low-elastic-worker-3"]
    assert [p["first"] for p in real] == [True, False] and real[0]["end"] == 11.0


@pytest.mark.parametrize("text, message", [
    ("kubernetes: [1]\n", "expected a Kubernetes version"),
    ("volcan: master\n", "unknown key 'volcan'"),
    ("random: [ml/big]\n", "random must map job"),
    ("random: {ml/nope: x}\n", "random names no job of the scenario: ml/nope"),
])
def test_bad_recording_metadata_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    folder = _copy("placement-binpack", tmp_path)
    (folder / "recording.yaml").write_text(text)
    assert main(["replay", str(folder), "--engine", "reference"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_folder_without_recordings_is_bad_input(tmp_path, capsys):
    assert main(["replay", str(tmp_path)]) == 2
    assert "no recording" in capsys.readouterr().err


def test_the_shipped_runs_are_small():
    size = sum(f.stat().st_size for f in RECORDINGS.rglob("*") if f.is_file())
    assert size < 300_000


SHARED = Path(__file__).resolve().parents[2] / "shared" / "oracles" / "volcano-real"


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is not here (the recordings' source, outside the project)")
def test_the_shipped_copies_match_their_source():
    for folder in SHIPPED:
        for name in ("scenario.yaml", "real.json", "pods.tsv"):
            assert (folder / name).read_bytes() == (SHARED / folder.name / name).read_bytes(), (folder.name, name)


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_an_evicted_surplus_pod_is_recreated_and_runs_its_whole_duration_again(engine):
    """priority-preempt: preempt evicts one of low-elastic's 4 pods at 11 s; the vcjob controller
    recreates it (SyncJob), it runs again from 32 s for its whole 60 s, and low-elastic completes at
    92 s, as recorded; its other pods end at 61 s and free their GPUs for high-big."""
    recording = load_recording(RECORDINGS / "priority-preempt")
    result = simulate(recording.scenario, engine=engine)
    real = {j["name"]: j for j in recording.real["jobs"]}
    for job in result.jobs.itertuples():
        assert (job.start, job.end, job.evictions) == (real[job.name]["start"], real[job.name]["end"],
                                                       real[job.name]["evictions"]), job.name
    runs = result.tasks[result.tasks.job == "ml/low-elastic"].sort_values(["index", "start"])
    (evicted,) = runs[runs.evicted.notna()]["index"]  # which of the 4 alike pods: Volcano breaks the tie by UID
    recreated = runs[runs["index"] == evicted]
    assert len(recreated) == 2 and recreated.end.iloc[1] - recreated.start.iloc[1] == 60
    assert (runs[runs["index"] != evicted].end == 61).all()
    assert result.jobs.set_index("name").loc["low-elastic", "lost_work"] == 0


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_surplus_pod_bound_later_runs_its_whole_duration_and_the_job_waits_for_it(engine):
    """An elastic vcjob (2 pods, minAvailable 1) finds room for one pod; the other waits until the
    filler ends. On KWOK each pod runs its whole duration from its own start, and the vcjob is
    Completed only when Succeeded + Failed == replicas (Volcano's running state), so the job ends
    when the late pod has run 60 s, not when the first pod's 60 s are up. (mt-priority-30
    recorded it: low8-worker-1 waited from 25 s to 68 s, ran to 108 s, and low8 completed then.)"""
    job = {"namespace": "default", "queue": "default", "duration": 60, "gracePeriod": 0}
    gpus = {"nvidia.com/gpu": 2, "cpu": 4, "memory": "16Gi"}
    scenario = loads(yaml.safe_dump({
        "name": "late-surplus-pod",
        "cluster": {"pools": [{"name": "gpu", "count": 1, "resources": {"nvidia.com/gpu": 4, "cpu": 64,
                                                                         "memory": "512Gi"}}]},
        "queues": [{"name": "default"}],
        "jobs": [{**job, "name": "filler", "submit": 0, "duration": 30, "tasks": [{"resources": gpus}]},
                 {**job, "name": "elastic", "submit": 1, "minAvailable": 1,
                  "tasks": [{"replicas": 2, "minAvailable": 1, "resources": gpus}]}],
        "scheduler": {"policy": "volcano-multitenant"},
    }))
    result = simulate(scenario, engine=engine)
    runs = result.tasks[result.tasks.job == "default/elastic"].sort_values("start")
    assert len(runs) == 2 and runs.evicted.isna().all()
    first, late = runs.iloc[0], runs.iloc[1]
    filler_end = result.jobs.set_index("name").loc["filler", "end"]
    assert late.start > first.start and late.start >= filler_end
    assert (first.end - first.start, late.end - late.start) == (60, 60)
    assert result.jobs.set_index("name").loc["elastic", "end"] == late.end


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_mt_priority_30_s_never_evicted_elastic_job_ends_with_its_late_pod(engine):
    """mt-priority-30: low8 (2 pods, minAvailable 1) was never evicted; worker-0 ran 27-67 s,
    worker-1 waited for room until 68 s and ran its whole 40 s, and the vcjob completed at 108 s.
    The simulator agrees within the recording's tolerance (before, it completed low8 at 67 s and
    never ran worker-1)."""
    recording = load_recording(RECORDINGS / "mt-priority-30")
    result = simulate(recording.scenario, engine=engine)
    real = next(j for j in recording.real["jobs"] if j["name"] == "low8")
    low8 = result.jobs.set_index("name").loc["low8"]
    tolerance = judge(recording, engine).tolerance
    assert low8.evictions == real["evictions"] == 0
    assert abs(low8.end - real["end"]) <= tolerance, (low8.end, real["end"])
    runs = result.tasks[result.tasks.job == "ml/low8"]
    assert len(runs) == 2 and ((runs.end - runs.start) == 40).all()


def _evicted_at(result, time: float) -> set[str]:
    events = result.events
    return set(events[(events.kind == "Evicted") & (events.time == time)].task)


def test_victim_order_variant_takes_the_pods_the_recording_evicted():
    """mt-priority-30 at 16 s: high1 needs 3 GPUs on the node holding low1's 3 pods and low2-worker-0.
    gang's Preemptable offers the first 2 of low1's 3 running pods it meets (minAvailable 1) in the
    walk of node.Tasks, a Go map: labkit's own order (task index) gives worker-0 and -1; the real
    walk gave worker-1 and -2. Steered to the recording, the reference engine evicts those, and the
    rest of the run follows: 'evicted only in B' for low2 is gone, the recording agrees."""
    recording = load_recording(RECORDINGS / "mt-priority-30")
    own = simulate(recording.scenario, engine="reference")
    assert _evicted_at(own, 16) == {"ml/low1-worker-0", "ml/low1-worker-1"}
    steer = Steer({"ml/low1-worker-1": [16.0], "ml/low1-worker-2": [16.0]}, 3.0)
    steered = simulate(recording.scenario, session=lambda p, s: run_session(p, s, steer))
    assert _evicted_at(steered, 16) == {"ml/low1-worker-1", "ml/low1-worker-2"}
    assert steer.changed >= 1 and steer.walks > steer.changed

    result = judge(recording, engine="reference")
    assert result.agree, result.report()
    assert result.variant.startswith("victim order steered to the recording's evictions (within 3 s) in ")
    assert "on the reference engine; with labkit's own order (reference): " in result.variant
    assert result.variant.endswith("problem(s)")


def test_without_victim_order_mt_priority_30_disagrees_on_evictions(tmp_path, capsys):
    folder = _copy("mt-priority-30", tmp_path)
    meta = yaml.safe_load((folder / "recording.yaml").read_text())
    del meta["victimOrder"]
    (folder / "recording.yaml").write_text(yaml.safe_dump(meta))
    problems = judge(load_recording(folder), engine="reference").problems
    assert "ml/low2: evicted only in B" in problems
    (folder / "recording.yaml").write_text(yaml.safe_dump({**meta, "victimOrder": "  "}))
    assert main(["replay", str(folder), "--engine", "reference"]) == 2
    assert "victimOrder must say why" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_recreated_pods_each_end_after_their_own_duration(engine):
    """An elastic vcjob (3 pods, minAvailable 1, 60 s) gets its pods one by one as fillers end (at
    about 0, 20 and 40 s). On KWOK each pod runs 60 s from its own start and gives its GPU back
    then, so the second pod's GPU is free at about 80 s for a job waiting for it, not only when the
    third pod ends at about 100 s. (mt-priority-30: low4-worker-2, recreated, ran 69-120 s while
    low4-worker-0's second run went on to 145 s.)"""
    gpu = {"nvidia.com/gpu": 1, "cpu": 1, "memory": "1Gi"}
    job = {"namespace": "default", "queue": "default", "gracePeriod": 0, "tasks": [{"resources": gpu}]}
    scenario = loads(yaml.safe_dump({
        "name": "own-durations",
        "cluster": {"pools": [{"name": "gpu", "count": 1, "resources": {"nvidia.com/gpu": 4, "cpu": 64,
                                                                         "memory": "512Gi"}}]},
        "queues": [{"name": "default"}],
        "jobs": [{**job, "name": "f1", "submit": 0, "duration": 20},
                 {**job, "name": "f2", "submit": 0, "duration": 40},
                 {**job, "name": "f3", "submit": 0, "duration": 200},
                 {**job, "name": "elastic", "submit": 1, "duration": 60, "minAvailable": 1,
                  "tasks": [{"replicas": 3, "minAvailable": 1, "resources": gpu}]},
                 {**job, "name": "waiter", "submit": 50, "duration": 10,
                  "tasks": [{"resources": {**gpu, "nvidia.com/gpu": 2}}]}],
        "scheduler": {"policy": "volcano-multitenant"},
    }))
    result = simulate(scenario, engine=engine)
    runs = result.tasks[result.tasks.job == "default/elastic"].sort_values("start")
    assert len(runs) == 3 and list(runs.start.diff().dropna() > 10) == [True, True]
    assert ((runs.end - runs.start) == 60).all(), runs
    jobs = result.jobs.set_index("name")
    assert jobs.loc["elastic", "end"] == runs.end.max()
    assert runs.end.iloc[1] <= jobs.loc["waiter", "start"] < runs.end.iloc[2], (jobs.loc["waiter", "start"], runs)


def test_a_copy_of_a_shipped_recording_takes_its_metadata(tmp_path, capsys):
    folder = _copy("placement-shipped", tmp_path)
    (folder / "recording.yaml").unlink()
    assert main(["replay", str(folder), "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "(from labkit's shipped copy of this recording)" in out.splitlines()[0]
    assert "variant ml/big: starts when some node has 8 GPUs free" in out


def test_a_recording_names_its_build_in_its_readme_or_is_said_to_assume_v1_15_1(tmp_path, capsys):
    """Renamed, a recording is no copy of a shipped one: its README.md's Volcano line gives the build
    (and, for a build labkit knows, the Kubernetes it vendors); without one, the FAIL line says that
    v1.15.1 is assumed and how to state the build."""
    folder = tmp_path / "mine"
    shutil.copytree(RECORDINGS / "priority-preempt", folder)
    (folder / "recording.yaml").unlink()
    assert main(["replay", str(folder), "--engine", "reference"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("FAIL mine (Volcano v1.15.1 assumed: the folder has no recording.yaml and its "
                            "README.md names no build; state it in recording.yaml, e.g. volcano: master ed72c7c8 "
                            'and kubernetes: "1.36"; tolerance 4 s')
    (folder / "README.md").write_text(
        "# Real Volcano run: priority-preempt\n\n* Volcano: volcano-sh/volcano master "
        "ed72c7c815a9fd547a787134676f73d42e9d049c (git describe v1.16.0-alpha.1-42-ged72c7c81), built offline; "
        "vc-controller-manager + vc-scheduler (`--schedule-period=1s --leader-elect=false`)\n")
    assert main(["replay", str(folder), "--engine", "reference"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "PASS mine (Volcano master ed72c7c8 (v1.16.0-alpha.1-42), nodeorder scoring Kubernetes 1.36 (from README.md); ")
    (folder / "README.md").write_text("* Volcano: volcano-sh/volcano v1.15.1 (`--schedule-period=2s`)\n")
    recording = load_recording(folder)
    assert (recording.volcano, recording.kubernetes, recording.real["schedule_period"]) == ("v1.15.1", None, 2.0)
    assert recording.ran() == "Volcano v1.15.1 (from README.md, which vendors a Kubernetes labkit does not know: " \
                              'v1.15.1\'s scoring assumed (state it in recording.yaml as kubernetes: "1.36"))'
