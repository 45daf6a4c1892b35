"""Invariants of every simulated run, on random scenarios (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from scenarios import (
    broken_gangs,
    over_committed_nodes,
    pods_on_unavailable_nodes,
    queues_over_capability,
    scenarios,
    unconserved_work,
)

import labkit

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(scenarios())
def test_invariants_hold(scenario):
    result = labkit.simulate(scenario)
    assert not over_committed_nodes(result)
    assert not broken_gangs(result)
    assert not queues_over_capability(result)
    assert not unconserved_work(result)
    assert not pods_on_unavailable_nodes(result)
    finished = result.jobs[result.jobs.state == "Completed"]
    assert (finished.start >= finished.submit).all() and (finished.end > finished.start).all()
