"""Chapter 5 (AI training workloads): who can train under partial allocation, gang and elastic jobs, the
GPU-hours a partial gang holds without training, and the chapter's cluster set."""

from __future__ import annotations

from pathlib import Path

import pytest

import labkit
from labkit.course import cases, steps, variants
from labkit.engine.problem import GPU
from labkit.k8s import sets
from labkit.k8s.export import MARKER

CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"


def _elastic_pair(workers: int):
    data = variants.gang_pair(workers=workers).model_dump(mode="json", by_alias=True, exclude_unset=True)
    for job in data["jobs"]:
        task = job["tasks"][0]
        task.pop("replicas")
        task["elastic"] = {"min": 1, "max": workers}
    return labkit.spec.validate(data)


@pytest.mark.parametrize("workers", [2, 4])
def test_an_elastic_job_trains_with_its_minimum(workers):
    """The placement of minAvailable 1 (each job short of its replicas) is training for an elastic job."""
    table = steps.workers(labkit.simulate(_elastic_pair(workers)), 60)
    assert (table.needed == 1).all()
    assert (table.running < workers).all() and table.can_train.all()
    rigid = steps.workers(labkit.simulate(variants.gang_pair(1, workers)), 60)
    assert (rigid.needed == workers).all() and not rigid.can_train.any()


def test_a_partial_pair_holds_every_gpu_hour_without_training():
    partial = labkit.simulate(cases.gang_pair(min_available=1))
    tasks = partial.tasks
    held = float((tasks[GPU] * (tasks.end - tasks.start)).sum()) / 3600
    assert held > 0
    assert steps.stalled_gpu_hours(partial) == pytest.approx(held)
    assert steps.stalled_gpu_hours(labkit.simulate(cases.gang_pair())) == 0


def test_stalled_time_ends_when_the_last_worker_starts():
    """A job of 2 workers with minAvailable 1 beside a 1-hour blocker: one worker waits for the other
    until the blocker ends; only that stretch counts."""
    data = cases.gang_pair(min_available=1).model_dump(mode="json", by_alias=True, exclude_unset=True)
    blocker, job = data["jobs"]
    blocker.update(name="blocker", duration="1h")
    blocker["tasks"][0].update(replicas=1, minAvailable=1)
    data["jobs"] = [blocker, job]
    run = labkit.simulate(labkit.spec.validate(data))
    pods = run.tasks[run.tasks.job == "default/ddp-y"]
    starts, ends = pods.start.sort_values().to_numpy(), pods.end.sort_values().to_numpy()
    assert len(starts) == 2 and starts[1] > starts[0]
    # stalled while one worker runs alone: before the second starts, and after the first ends (each
    # pod runs its own duration, the job completes when both have)
    alone = (starts[1] - starts[0]) + (ends[1] - ends[0])
    assert steps.stalled_gpu_hours(run) == pytest.approx(8 * alone / 3600)


def test_gang_pair_is_the_shipped_example():
    assert cases.gang_pair().name == "gang-pair"
    assert [t.min_available_resolved for j in cases.gang_pair(1).jobs for t in j.tasks] == [1, 1]
    assert [j.min_available_resolved for j in cases.gang_pair().jobs] == [2, 2]


def test_the_chapter_cluster_set_is_not_stale():
    made = sets.generated()["ch05"]
    kept = {p.name: p.read_text() for p in (CLUSTERS / "ch05").iterdir() if p.read_text().startswith(MARKER)}
    assert made == kept, f"clusters/ch05 is stale; run `{sets.REGENERATE}`"
    assert "--time-scale 60" in kept["08-vcjobs.yaml"].splitlines()[0]
