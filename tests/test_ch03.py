"""Chapter 3 (namespace isolation: ResourceQuota, LimitRange): the LimitRange defaults as the API server
stores them, ex. 3.4's key right and wrong, the quota knob, the admission timeline, the clusters/ch03 sets."""

from pathlib import Path

import pytest

import labkit
from labkit import viz, widgets
from labkit.course import cases
from labkit.grading.keys import judge
from labkit.k8s.export import render
from labkit.k8s.manifests import manifests
from labkit.spec.model import LimitRangeItem


def _refusals(scenario) -> dict[str, str]:
    events = labkit.simulate(scenario).events
    refused = events[events.kind == "Rejected"]
    return dict(zip(refused.task.str.split("/").str[-1], refused.message, strict=True))


def test_a_limit_range_max_alone_becomes_the_default_request():
    # SetDefaults_LimitRangeItem: max -> default (limit) -> defaultRequest, min -> defaultRequest
    item = LimitRangeItem.model_validate({"type": "Container", "max": {"nvidia.com/gpu": 8}, "min": {"cpu": 1},
                                          "defaultRequest": {"memory": "1Gi"}})
    assert item.stored_default == {"nvidia.com/gpu": 8}
    assert item.stored_default_request == {"nvidia.com/gpu": 8, "cpu": 1, "memory": "1Gi"}
    pod = LimitRangeItem.model_validate({"type": "Pod", "max": {"nvidia.com/gpu": 8}})
    assert pod.stored_default == {} and pod.stored_default_request == {}


def test_without_a_gpu_default_the_clean_up_pods_ask_for_the_max_and_are_refused():
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert data["tenants"][0]["limitRange"]["limits"][0].pop("default") == {"nvidia.com/gpu": "0"}
    refused = _refusals(labkit.spec.validate(data))
    assert "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16" in refused["c-clean-0-worker-0"]
    assert set(refused) == {"c-eval-4-worker-0", "c-eval-5-worker-0", "c-clean-0-worker-0", "c-clean-1-worker-0"}
    # the chapter's namespace gives GPUs no default: only the two evaluation pods over the quota are refused
    assert set(_refusals(cases.quota_burst())) == {"c-eval-4-worker-0", "c-eval-5-worker-0"}


def _eval_4_started(duration: int) -> bool:
    jobs = labkit.simulate(cases.quota_burst(duration=duration)).jobs.set_index("name")
    return bool(jobs.start.notna()["c-eval-4"])


def _longest() -> int:
    low, high = 1, 3600  # c-eval-4 starts with 1 s jobs, not with 1 h jobs
    assert _eval_4_started(low) and not _eval_4_started(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _eval_4_started(middle) else (low, middle)
    return low


def test_q1_job_names_for_pod_names_are_told_what_is_asked():
    refused = sorted(_refusals(cases.quota_burst()))
    assert judge("ch03.q1", refused).passed
    jobs = judge("ch03.q1", [pod.rsplit("-", 2)[0] for pod in refused])  # c-eval-4, c-eval-5: the jobs
    assert not jobs.passed and "Pod 名" in jobs.reason and "作业名" in jobs.reason
    assert "有 2 个" in judge("ch03.q1", refused[:1]).reason


def test_q4_the_longest_run_time_right_and_wrong():
    right = _longest()
    assert judge("ch03.q4", right).passed
    assert not judge("ch03.q4", right + 1).passed  # c-eval-4 is terminated before the quota frees
    assert not judge("ch03.q4", right - 1).passed  # not the longest
    assert not judge("ch03.q4", 3600).passed
    assert judge("ch03.q4", 12.5).code == "wrong-type"


def test_q4_the_answer_is_the_controllers_last_retry():
    # the 15th requeue (--max-requeue-num) of c-eval-4 (refused at 4 s) comes 5 ms x (2^15 - 1) later;
    # c-eval-0 (started at 1 s) must end by then
    run = labkit.simulate(cases.quota_burst(duration=_longest() + 1))
    jobs = run.jobs.set_index("name")
    refused = run.events[(run.events.kind == "Rejected") & (run.events.job == "team-c/c-eval-4")].time.min()
    assert jobs.state["c-eval-4"] == "Terminated"
    assert jobs.end["c-eval-4"] == pytest.approx(refused + 0.005 * (2**15 - 1))
    assert jobs.end["c-eval-0"] > jobs.end["c-eval-4"] > jobs.end["c-eval-0"] - 1


def test_the_namespace_quota_knob_moves_the_quota():
    base = cases.quota_burst()
    gpu = widgets.namespace_quota(base, "team-c", "requests.nvidia.com/gpu", high=32, step=4)
    assert gpu.value == 16
    panel = widgets.Panel(base, [gpu], charts=("admission",), debounce=0)
    assert panel.table.loc["team-c", "not_started"] == 2 and "<svg" in panel.svgs[0]
    panel.set(gpu.name, 24)
    assert panel.table.loc["team-c", "not_started"] == 0
    assert not (panel.result.events.kind == "Rejected").any()
    with pytest.raises(ValueError, match="requests.memory"):
        widgets.namespace_quota(base, "team-c", "requests.memory", high=8)


def test_the_admission_timeline_shows_where_each_job_waits():
    refused = viz.admission_timeline(labkit.simulate(cases.quota_burst())).layer[0].data
    spans = refused[refused.job == "c-eval-4"]
    assert list(spans.phase) == ["pod refused (FailedCreate)"]  # no PodGroup wait, never ran
    data = cases.quota_burst().model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["tenants"][0].pop("resourceQuota")
    data["queues"][0]["capability"] = {"nvidia.com/gpu": 16}
    queued = viz.admission_timeline(labkit.simulate(labkit.spec.validate(data))).layer[0].data
    assert list(queued[queued.job == "c-eval-4"].phase) == ["PodGroup Pending", "running"]


CH03 = Path(__file__).resolve().parents[1] / "clusters" / "ch03"
SETS = {"burst": lambda: cases.quota_burst(), "quick": lambda: cases.quota_burst(duration=60)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_cluster_sets_are_not_stale(name):
    """clusters/ch03/<name>.yaml is the chapter's scenario as labkit.dump writes it, and <name>/ is its export."""
    scenario = SETS[name]()
    assert (CH03 / f"{name}.yaml").read_text() == labkit.dump(scenario), "regenerate: see clusters/ch03/README.md"
    made = render(manifests(scenario, 1.0), f"labkit export k8s clusters/ch03/{name}.yaml")
    kept = {p.name: p.read_text() for p in (CH03 / name).iterdir()}
    assert kept == made, "regenerate: see clusters/ch03/README.md"
