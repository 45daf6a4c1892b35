"""The scheduler sections beside Volcano's conf: `scheduler.kube` (a KubeSchedulerConfiguration) and
`scheduler.slurm` with the Slurm objects of a scenario; the shipped policies; bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import labkit
from labkit import spec
from labkit.engine.families import compile_scenario
from labkit.engine.problem import MOST_ALLOCATED, Family, KubeAction, PreemptMode, SlurmAction
from labkit.engine.simulate import with_policy
from labkit.errors import SpecError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BASE = {"name": "p", "cluster": {"pools": [{"name": "g", "count": 2, "resources": {"nvidia.com/gpu": 8, "cpu": 32}}]},
        "jobs": [{"name": "a", "duration": 10, "tasks": [{"resources": {"nvidia.com/gpu": 8}}]}]}


def with_scheduler(scheduler: dict, **extra) -> spec.Scenario:
    return spec.validate({**BASE, **extra, "scheduler": scheduler})


@pytest.mark.parametrize("name, section", [("kube-default", "kube"), ("kube-coscheduling", "kube"),
                                           ("slurm-backfill", "slurm"), ("slurm-builtin", "slurm"),
                                           ("slurm-fairshare", "slurm")])
def test_shipped_policies(name, section):
    assert spec.policy_scheduler(name).section == section
    resolved = spec.resolve(with_scheduler({"policy": name}))
    assert resolved.scheduler.section == section
    assert spec.loads(spec.dump(resolved)) == resolved


def test_kube_default_profile_is_kube_schedulers_default():
    profile = spec.policy_scheduler("kube-default").kube.profile
    assert profile.enabled("queueSort") == ["PrioritySort"] and profile.enabled("postFilter") == ["DefaultPreemption"]
    assert profile.enabled("permit") == []
    assert (profile.score_weight("NodeResourcesFit"), profile.score_weight("NodeResourcesBalancedAllocation"),
            profile.score_weight("TaintToleration")) == (1, 1, 3)
    fit = profile.args("NodeResourcesFit").scoring_strategy
    assert fit.type == "LeastAllocated" and [(r.name, r.weight) for r in fit.resources] == [("cpu", 1), ("memory", 1)]
    assert profile.args("Coscheduling").permit_waiting_time_seconds == 60


def test_coscheduling_profile_replaces_the_queue_sort():
    profile = spec.policy_scheduler("kube-coscheduling").kube.profile
    assert profile.enabled("queueSort") == ["Coscheduling"]
    assert profile.enabled("postFilter") == ["DefaultPreemption", "Coscheduling"]
    assert profile.enabled("permit") == ["Coscheduling"]


def test_plugin_sets_merge_like_kube_scheduler():
    kube = {"profiles": [{"plugins": {
        "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
        "postFilter": {"disabled": [{"name": "*"}]},
        "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}}]}
    profile = with_scheduler({"policy": "k", "kube": kube}).scheduler.kube.profile
    assert profile.score_weight("NodeResourcesFit") == 5
    assert profile.score_weight("NodeResourcesBalancedAllocation") == 0
    assert profile.enabled("postFilter") == []


def test_kube_policy_compiles_to_kube_args():
    kube = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 3}, {"name": "cpu", "weight": 1}]}}}]}]}
    problem = compile_scenario(with_scheduler({"policy": "k", "kube": kube})).problem
    policy = problem.policy
    assert policy.family == Family.KUBE and list(policy.actions) == [KubeAction.SCHEDULE]
    assert policy.pods_at_submit and bool(policy.action_on_event[0])
    weights = dict(zip(problem.resource_names, policy.kube.fit_weights))
    assert policy.kube.strategy == MOST_ALLOCATED and weights["nvidia.com/gpu"] == 3 and weights["cpu"] == 1
    assert policy.kube.preemption and not policy.kube.coscheduling


def test_slurm_policy_compiles_cadence_and_tables():
    scenario = labkit.load(EXAMPLES / "slurm-preempt.yaml")
    problem = compile_scenario(scenario).problem
    policy = problem.policy
    assert policy.family == Family.SLURM and list(policy.actions) == [SlurmAction.SCHED, SlurmAction.BACKFILL]
    # the main scheduler on events and every sched_interval (60 s); backfill every bf_interval (5 s)
    assert list(policy.action_period) == [60, 5] and list(policy.action_on_event) == [True, False]
    assert policy.requeue_hold == 121 and policy.slurm.preempt_mode == PreemptMode.REQUEUE
    assert problem.partition_names == ("gpu", "low", "high")
    assert list(problem.partition_tier) == [1, 1, 10]
    assert list(problem.partition_preempt_mode) == [PreemptMode.UNSET, PreemptMode.REQUEUE, PreemptMode.OFF]
    assert list(problem.job_time_limit) == [600, 600, 300]
    assert problem.qos_names == ("normal",) and problem.assoc_names == ("root", "user:default")


def test_slurm_allocates_whole_cpus():
    slurm = {"SchedulerType": "sched/builtin"}
    scenario = spec.validate({**BASE, "jobs": [{"name": "a", "duration": 10,
                                                "tasks": [{"resources": {"nvidia.com/gpu": 1, "cpu": "1500m"}}]},
                                               {"name": "b", "duration": 10, "tasks": [{"resources": {"nvidia.com/gpu": 1}}]}],
                              "scheduler": {"policy": "s", "slurm": slurm}})
    cpu = compile_scenario(scenario).problem.task_request[:, 0]
    assert list(cpu) == [2000.0, 1000.0]  # 1.5 CPUs -> 2; none -> at least 1 per node


def test_slurm_objects_parse():
    slurm = {"partitions": [{"name": "gpu", "default": True, "graceTime": 30, "preemptMode": "CANCEL"}],
             "qos": [{"name": "hi", "priority": 100, "preempt": ["normal"], "grpTRES": {"gres/gpu": 16, "mem": 64000},
                      "maxTRESPerUser": {"node": 2}}],
             "accounts": [{"name": "ml", "fairshare": 3}, {"name": "ml-cv", "parent": "ml"}],
             "users": [{"name": "ana", "parent": "ml-cv", "fairshare": "parent"}]}
    scenario = with_scheduler({"policy": "slurm-fairshare"}, slurm=slurm,
                              jobs=[{**BASE["jobs"][0], "qos": "hi", "user": "ana", "partition": "gpu"}])
    problem = compile_scenario(scenario).problem
    assert problem.assoc_names == ("root", "ml", "ml-cv", "user:ana")
    assert list(problem.assoc_parent) == [-1, 0, 1, 2] and list(problem.assoc_shares) == [1, 3, 1, -1]
    assert problem.qos_names == ("hi", "normal") and bool(problem.qos_preempt[0, 1])
    assert list(problem.qos_grp_tres[0]) == pytest.approx([np.nan, 64000, np.nan, 16], nan_ok=True)
    conf = spec.scheduler_of(scenario).slurm
    assert conf.slurmdbd and conf.enforces_limits() and conf.tres_weights() == {}


def test_slurm_conf_helpers():
    conf = spec.model.SlurmConf.model_validate({"PriorityWeightTRES": "CPU=1000,Mem=2000,GRES/gpu=3000",
                                                "PriorityFlags": "NO_FAIR_TREE,ACCRUE_ALWAYS"})
    assert conf.tres_weights() == {"cpu": 1000, "mem": 2000, "gres/gpu": 3000}
    assert conf.flags() == {"NO_FAIR_TREE", "ACCRUE_ALWAYS"}
    assert not conf.slurmdbd and not conf.enforces_limits()


def test_policy_flag_replaces_the_scheduler_section():
    scenario = labkit.load(EXAMPLES / "slurm-preempt.yaml")
    assert spec.scheduler_of(scenario).slurm.preempt_type == "preempt/partition_prio"
    builtin = with_policy(scenario, "slurm-builtin")
    assert spec.scheduler_of(builtin).slurm.scheduler_type == "sched/builtin"
    assert spec.scheduler_of(builtin).slurm.preempt_type == "preempt/none"
    assert spec.scheduler_of(with_policy(scenario, "kube-default")).section == "kube"


def test_cli_simulate_with_a_slurm_and_a_kube_policy():
    for policy in ("slurm-builtin", "kube-default"):
        done = subprocess.run([sys.executable, "-m", "labkit.cli", "simulate", str(EXAMPLES / "slurm-backfill.yaml"),
                               "--policy", policy, "--json"], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        jobs = {j["name"]: j for j in json.loads(done.stdout)["jobs"]}
        assert set(jobs) == {"a", "b", "c", "d"} and all(j["state"] == "Completed" for j in jobs.values())


@pytest.mark.parametrize("scheduler, extra, message", [
    ({"conf": {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}]}]}, "slurm": {}}, {},
     "scheduler: give one of conf, slurm, kueue or kube, not conf and slurm"),
    ({"policy": "k", "kube": {"profiles": [{}, {}]}}, {}, "scheduler.kube.profiles: List should have at most 1 item"),
    ({"policy": "k", "kube": {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}]}},
     {}, "scheduler.kube.profiles[0]: pluginConfig: NodeResourcesFit is configured twice"),
    ({"policy": "k", "kube": {"percentageOfNodesToScore": 101}}, {}, "scheduler.kube.percentageOfNodesToScore"),
    ({"policy": "slurm-backfill"}, {"slurm": {"accounts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}},
     "slurm.accounts[0].parent: accounts form a cycle: a -> b -> a"),
    ({"policy": "slurm-backfill"}, {"slurm": {"accounts": [{"name": "root"}]}}, "slurm.accounts[0].name: account 'root'"),
    ({"policy": "slurm-backfill"}, {"slurm": {"accounts": [{"name": "a", "fairshare": -1}]}},
     "slurm.accounts[0].fairshare"),
    ({"policy": "slurm-backfill"}, {"slurm": {"users": [{"name": "u"}, {"name": "u"}]}},
     "slurm.users[1]: user 'u' is defined twice"),
    ({"policy": "s", "slurm": {"AccountingStorageEnforce": "everything"}}, {},
     "scheduler.slurm.AccountingStorageEnforce: 'everything' is not an AccountingStorageEnforce option"),
    ({"policy": "s", "slurm": {"FairShareDampeningFactor": 0}}, {}, "scheduler.slurm.FairShareDampeningFactor"),
])
def test_bad_scheduler_sections_are_one_line(scheduler, extra, message):
    with pytest.raises(SpecError) as err:
        with_scheduler(scheduler, **extra)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_two_partitions_and_no_default_is_an_error():
    slurm = {"partitions": [{"name": "a"}, {"name": "b"}]}
    with pytest.raises(SpecError, match=r"^jobs\[0\].partition: no default partition"):
        compile_scenario(with_scheduler({"policy": "slurm-backfill"}, slurm=slurm))
