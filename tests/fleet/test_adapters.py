"""LoRA adapters on a deployment's shared base: their memory, kernels and waits reach the fleet's capacity and bill."""

from __future__ import annotations

import copy

from planner.fleet import plan_fleet
from planner.fleet.export import fleet_text
from tests.fleet.fleets import small

# 12 adapters, Zipf-skewed: with every adapter resident the kernels and loads cost a little; with 2 GPU slots the
# batch holds 2 distinct adapters and the rest wait (vLLM V1's skip rule), which costs replicas.
ADAPTERS = {"adapters": 12, "zipf_exponent": 1.0}


def with_adapters(**lora) -> dict:
    fleet = small()
    chat = copy.deepcopy(fleet["deployments"][0])
    chat["scenario"]["lora"] = {**ADAPTERS, **lora}
    fleet["deployments"] = [chat]
    return fleet


def test_adapters_never_make_a_deployment_cheaper_and_short_slots_cost_replicas():
    base = plan_fleet(small()).deployments[0]
    resident = plan_fleet(with_adapters(max_loras=12)).deployments[0]
    short = plan_fleet(with_adapters(max_loras=2)).deployments[0]
    assert base.adapters is None
    assert resident.feasible and short.feasible
    # Resident adapters: the kernels and the first loads lower the capacity by a few percent, no more.
    assert 0.8 * base.capacity_requests_per_second_per_replica <= resident.capacity_requests_per_second_per_replica
    assert resident.capacity_requests_per_second_per_replica < base.capacity_requests_per_second_per_replica
    assert short.capacity_requests_per_second_per_replica < resident.capacity_requests_per_second_per_replica
    assert base.peak_replicas <= resident.peak_replicas <= short.peak_replicas
    assert base.usd_per_day <= resident.usd_per_day <= short.usd_per_day
    assert short.peak_replicas > base.peak_replicas


def test_the_answer_and_its_text_say_what_each_replica_serves():
    answer = plan_fleet(with_adapters(max_loras=12))
    (d,) = answer.deployments
    assert d.adapters.startswith("12 LoRA adapters (rank 16) on 12 GPU slots per replica")
    assert f"    adapters: {d.adapters}" in fleet_text(answer)
