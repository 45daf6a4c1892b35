"""Trace loaders: small synthetic fixtures always, the real traces in ../shared/traces when present."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import labkit
from labkit import spec
from labkit.cli import main
from labkit.errors import SpecError
from labkit.workloads import expand, traces

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:10,100.0,1,100.0,6214e9
2017-10-01 00:00:00,50.0,16,800.0,11cb48
2017-10-01 00:01:40,30.0,4,120.0,6214e9
2017-10-01 00:03:20,20.0,2,40.0,ee9e8c
"""

EF = """job_id,submission_time,duration,num_gpu
a,1000,600,8
b,1000,300,64
c,1600,900,1
"""

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,64000,262144,2,P100
n2,96000,786432,8,V100M32
n3,32000,65536,0,
"""

PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,1000,,LS,Running,0,5000,0
p1,6000,12288,1,460,,BE,Succeeded,100,700,160
p2,4000,8192,0,0,,Burstable,Pending,200,900,
p3,8000,16384,8,1000,,LS,Failed,300,1300,400
"""

SWF = """; Version: 2.2
; Computer: labkit fixture, 4 nodes x 64 cores
; MaxProcs: 256
1 0 10 3600 64 -1 -1 64 7200 -1 1 3 1 -1 1 -1 -1 -1
2 60 0 -1 32 -1 -1 32 600 -1 5 4 1 -1 1 -1 -1 -1
3 120 5 1800 128 -1 -1 128 1800 -1 1 4 2 -1 2 -1 -1 -1
4 180 0 900 -1 -1 -1 16 -1 -1 1 3 1 -1 1 -1 -1 -1   ; requested procs only
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def by_name(fragment: dict) -> dict[str, dict]:
    return {j["name"]: j for j in fragment["jobs"]}


def expanded(fragment: dict) -> list:
    """A trace fragment's jobs as `expand` makes them (Job models, in submit order)."""
    return expand(spec.validate({"cluster": traces.cluster(2048), **fragment})).jobs


def trace_names(fragment: dict) -> list[str]:
    return [j.name for j in expanded(fragment)]


# ---------------------------------------------------------------------------------------- philly


def test_philly_tenants_become_queues_and_gangs_whole_nodes(tmp_path):
    frag = traces.philly(write(tmp_path, "philly.csv", PHILLY), gpus=64)
    assert [w["name"] for w in frag["workloads"]] == ["philly-11cb48", "philly-6214e9", "philly-ee9e8c"]
    assert frag["workloads"][1]["trace"] == {"names": ["philly-0", "philly-2"], "submit": [10.0, 100.0],
                                             "gpus": [1, 4], "duration": [100.0, 30.0]}
    jobs = {j.name: j for j in expanded(frag)}
    assert list(jobs) == ["philly-1", "philly-0", "philly-2", "philly-3"]  # submit order
    assert jobs["philly-1"].submit == 0 and jobs["philly-0"].submit == 10 and jobs["philly-3"].submit == 200
    task = jobs["philly-1"].tasks[0]
    assert (task.name, task.replicas, task.resources) == ("worker", 2, {"nvidia.com/gpu": 8})
    assert jobs["philly-2"].tasks[0].resources == {"nvidia.com/gpu": 4} and jobs["philly-2"].duration == 30
    assert (jobs["philly-0"].namespace, jobs["philly-0"].queue) == ("6214e9", "6214e9")
    assert [q["name"] for q in frag["queues"]] == ["11cb48", "6214e9", "ee9e8c"]
    assert frag["cluster"]["pools"][0]["count"] == 8
    scenario = spec.validate({**frag, "scheduler": {"policy": "volcano-multitenant"}})
    result = labkit.simulate(scenario)
    assert (result.jobs.state == "Completed").all()


def test_queue_mapping_default_and_dict(tmp_path):
    path = write(tmp_path, "philly.csv", PHILLY)
    flat = traces.philly(path, queues="default")
    assert flat["queues"] == [] and [(w["name"], w["queue"]) for w in flat["workloads"]] == [("philly", "default")]
    mapped = traces.philly(path, queues={"6214e9": "big", "11cb48": "big", "ee9e8c": "small"})
    assert [q["name"] for q in mapped["queues"]] == ["big", "small"]
    assert {j.name: j.queue for j in expanded(mapped)}["philly-3"] == "small"
    with pytest.raises(SpecError, match="no queue for tenant 'ee9e8c'"):
        traces.philly(path, queues={"6214e9": "big", "11cb48": "big"})
    clash = traces.philly(write(tmp_path, "clash.csv", PHILLY.replace("6214e9", "EE9E8C")),
                          queues={"EE9E8C": "big", "11cb48": "big", "ee9e8c": "small"})
    assert [(w["name"], w["namespace"], w["queue"]) for w in clash["workloads"]] == [
        ("philly-11cb48", "11cb48", "big"), ("philly-ee9e8c", "ee9e8c", "big"), ("philly-ee9e8c-1", "ee9e8c", "small")]
    assert len(expanded(clash)) == 4


def test_sample_window_and_load_are_seeded_and_rescale_arrivals(tmp_path):
    path = write(tmp_path, "philly.csv", PHILLY)
    one = traces.philly(path, n=2, seed=7)
    assert one == traces.philly(path, n=2, seed=7) and len(trace_names(one)) == 2
    assert {name for s in range(20) for name in trace_names(traces.philly(path, n=2, seed=s))} == {
        "philly-0", "philly-1", "philly-2", "philly-3"}
    window = expanded(traces.philly(path, window=(5, "3m")))
    assert [(j.name, j.submit) for j in window] == [("philly-0", 0), ("philly-2", 90)]
    doubled = traces.philly(path, load=2.0)
    assert [j.submit for j in expanded(doubled)] == [0, 5, 50, 100]


@pytest.mark.parametrize(("text", "where"), [
    (PHILLY.replace("num_gpus", "gpus"), "missing column 'num_gpus'"),
    (PHILLY.replace("30.0,4", "-30.0,4"), "philly.csv line 4, column duration: must be > 0 (got '-30.0')"),
    (PHILLY.replace("20.0,2", "x,2"), "line 5, column duration: not a number"),
    (PHILLY.replace("50.0,16", "50.0,1.5"), "line 3, column num_gpus: must be a whole number >= 1"),
    (PHILLY.replace("2017-10-01 00:01:40", "yesterday"), "line 4, column timestamp: not a date-time"),
])
def test_bad_rows_name_the_line_and_column(tmp_path, text, where):
    with pytest.raises(SpecError) as err:
        traces.philly(write(tmp_path, "philly.csv", text))
    assert where in str(err.value) and "\n" not in str(err.value)


def test_bad_options(tmp_path):
    path = write(tmp_path, "philly.csv", PHILLY)
    with pytest.raises(SpecError, match="load: must be > 0"):
        traces.philly(path, load=0)
    with pytest.raises(SpecError, match="not a positive multiple of 8"):
        traces.philly(path, gpus=12)
    with pytest.raises(SpecError, match="expected 'tenant', 'default'"):
        traces.philly(path, queues="vc")


# ---------------------------------------------------------------------------------------- elasticflow


def test_elasticflow(tmp_path, capsys):
    frag = traces.elasticflow(write(tmp_path, "cluster03.csv", EF), gpus=256)
    assert [(w["name"], w["namespace"], w["queue"]) for w in frag["workloads"]] == [("ef", "default", "default")]
    jobs = {j.name: j for j in expanded(frag)}
    assert list(jobs) == ["ef-0", "ef-1", "ef-2"]
    assert jobs["ef-1"].tasks[0].replicas == 8 and jobs["ef-2"].submit == 600
    assert frag["queues"] == [] and frag["tenants"] == []
    path = tmp_path / "ef.yaml"
    path.write_text(yaml.safe_dump({"name": "ef", **frag, "scheduler": {"policy": "helios-fifo"}}))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.endswith("0 job(s) + 1 trace workload(s) of 3 jobs\n")
    assert main(["show", str(path), "--expand"]) == 0 and "jobs: 3; workload generators: 0" in capsys.readouterr().out
    with pytest.raises(SpecError, match="line 3, column duration: must be > 0"):
        traces.elasticflow(write(tmp_path, "bad.csv", EF.replace("300,64", "-3,64")))


# ---------------------------------------------------------------------------------------- openb


def test_openb_pools_labels_and_gpu_milli(tmp_path):
    frag = traces.openb(write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS))
    pools = {p["name"]: p for p in frag["cluster"]["pools"]}
    p100 = pools["p100-2g-64c-256gi"]
    assert p100["count"] == 2 and p100["labels"] == {"nvidia.com/gpu.product": "P100"}
    assert p100["resources"]["alibaba.com/gpu-milli"] == 2000 and p100["resources"]["nvidia.com/gpu"] == 2
    assert "nvidia.com/gpu" not in pools["none-0g-32c-64gi"]["resources"]
    jobs = by_name(frag)
    assert jobs["openb-0"]["tasks"][0]["resources"] == {
        "cpu": "12000m", "memory": "16384Mi", "alibaba.com/gpu-milli": 1000, "nvidia.com/gpu": 1}
    assert jobs["openb-1"]["tasks"][0]["resources"] == {"cpu": "6000m", "memory": "12288Mi", "alibaba.com/gpu-milli": 460}
    assert jobs["openb-1"]["duration"] == 540  # deletion - scheduled
    assert jobs["openb-2"]["duration"] == 700  # never scheduled: deletion - creation
    assert jobs["openb-3"]["tasks"][0]["resources"]["alibaba.com/gpu-milli"] == 8000
    assert jobs["openb-1"]["priorityClassName"] == "be"
    assert {c["name"]: c["value"] for c in frag["priorityClasses"]} == {"be": 0, "burstable": 500, "ls": 1000}
    scenario = spec.validate({**frag, "scheduler": {"policy": "volcano-shipped"}})
    result = labkit.simulate(scenario)
    assert (result.jobs.state == "Completed").all()
    assert list(result.tasks.loc[result.tasks.job == "default/openb-3", "node"]) == ["v100m32-8g-96c-768gi-0"]


def test_openb_round_and_qos_queues(tmp_path):
    frag = traces.openb(write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS),
                        fractional="round", queues="tenant", qos_priority=False)
    jobs = by_name(frag)
    assert jobs["openb-1"]["tasks"][0]["resources"]["nvidia.com/gpu"] == 1
    assert all("alibaba.com/gpu-milli" not in p["resources"] for p in frag["cluster"]["pools"])
    assert [q["name"] for q in frag["queues"]] == ["be", "burstable", "ls"] and "priorityClasses" not in frag
    with pytest.raises(SpecError, match="pods.csv line 3, column deletion_time: is before"):
        traces.openb(write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS.replace("700,160", "150,160")))
    with pytest.raises(SpecError, match="fractional"):
        traces.openb(tmp_path / "nodes.csv", tmp_path / "pods.csv", fractional="share")


# ---------------------------------------------------------------------------------------- swf


def test_swf_fixture(tmp_path):
    frag = traces.swf(write(tmp_path, "fixture.swf", SWF), nodes=4)
    jobs = by_name(frag)
    assert list(jobs) == ["swf-0", "swf-2", "swf-3"]  # job 2 never ran (run time -1)
    assert jobs["swf-2"]["tasks"][0] == {"name": "worker", "replicas": 2, "resources": {"cpu": 64}}
    assert jobs["swf-3"]["tasks"][0]["resources"] == {"cpu": 16}  # requested processors
    assert jobs["swf-0"]["timeLimit"] == 7200 and "timeLimit" not in jobs["swf-3"]
    assert (jobs["swf-0"]["namespace"], jobs["swf-2"]["queue"]) == ("user-3", "user-4")
    assert frag["cluster"]["pools"][0] == {"name": "node", "count": 4, "resources": {"cpu": 64}}
    by_queue = traces.swf(tmp_path / "fixture.swf", tenant="queue")
    assert [q["name"] for q in by_queue["queues"]] == ["queue-1", "queue-2"]
    assert spec.validate({**frag, "scheduler": {"policy": "volcano-shipped"}}).jobs[1].duration == 1800


@pytest.mark.parametrize(("line", "where"), [
    ("5 200 0 -7 8 -1 -1 8 -1 -1 1 3 1 -1 1 -1 -1 -1\n", "fixture.swf line 8, field 4 (run time): must be >= 0 or -1"),
    ("5 200 0 7 8\n", "fixture.swf line 8: 5 fields, SWF has 18"),
    ("5 200 0 x 8 -1 -1 8 -1 -1 1 3 1 -1 1 -1 -1 -1\n", "line 8: a field is not a number"),
])
def test_swf_bad_lines(tmp_path, line, where):
    with pytest.raises(SpecError, match=where.replace("(", r"\(").replace(")", r"\)")):
        traces.swf(write(tmp_path, "fixture.swf", SWF + line))


# ---------------------------------------------------------------------------------------- real traces


def real(name: str) -> Path:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is absent (the course's shared traces); the fixtures above cover the loader")
    return path


def test_real_philly():
    frag = traces.philly(real("philly-pollux.csv"), gpus=2048)
    assert sum(len(w["trace"]["names"]) for w in frag["workloads"]) == 82_247 and len(frag["queues"]) == 15
    assert max(g for w in frag["workloads"] for g in w["trace"]["gpus"]) == 128
    assert max(t.replicas for j in expanded(frag) for t in j.tasks) == 16  # 128 GPUs = 16 x 8
    sample = traces.philly(real("philly-pollux.csv"), n=200, seed=1, gpus=256)
    assert {len(name) for name in trace_names(sample)} == {len("philly-82246")}  # names do not depend on the sample
    result = labkit.simulate(spec.validate({**sample, "scheduler": {"policy": "volcano-multitenant"}}))
    assert len(result.jobs) == 200 and result.jobs.start.notna().all()


def test_real_elasticflow_and_openb():
    frag = traces.elasticflow(real("elasticflow-cluster03.csv"), gpus=256)
    jobs = expanded(frag)
    assert len(jobs) == 3011 and jobs[0].submit == 0
    openb = traces.openb(real("openb_node_list_gpu_node.csv"), real("openb_pod_list_default.csv"))
    scenario = spec.validate(openb)
    assert sum(p.count for p in scenario.cluster.pools) == 1213 and len(scenario.jobs) == 8152
    gpus = sum(p.count * int(p.resources["nvidia.com/gpu"]) for p in scenario.cluster.pools)
    assert gpus == 6212
    shares = sum(1 for j in openb["jobs"] if "nvidia.com/gpu" not in j["tasks"][0]["resources"]
                 and "alibaba.com/gpu-milli" in j["tasks"][0]["resources"])
    assert shares == 3078  # the fractional 1-GPU pods
