"""The comparisons beside a plan: each GPU kind alone, packed on shared GPUs, disaggregated at the peak."""

from __future__ import annotations

import pytest

from planner.fleet import plan_fleet
from tests.fleet.fleets import deployment, fleet, planned, small


def test_one_gpu_kind_at_a_time_and_the_kind_the_plan_chose_costs_the_same():
    answer = planned()
    kinds = {c.name: c for c in answer.comparisons if c.name.startswith("one_kind:")}
    assert set(kinds) == {"one_kind:h100-sxm", "one_kind:a100-80gb"}
    used = {d.gpu for d in answer.deployments}
    if used == {"h100-sxm"}:  # the plan chose one kind: restricting to it changes nothing
        assert kinds["one_kind:h100-sxm"].usd_per_day == pytest.approx(answer.usd_per_day)
        assert kinds["one_kind:h100-sxm"].delta_usd_per_month == pytest.approx(0.0, abs=1e-6)
    for c in kinds.values():
        assert c.feasible and c.usd_per_month == pytest.approx(c.usd_per_day * answer.days_per_month)
        assert c.usd_per_day >= answer.usd_per_day - 1e-9  # the plan picks each deployment's cheapest candidate


def test_packing_on_shared_gpus_is_simulated_at_a_share_of_memory():
    answer = planned()
    (packed,) = [c for c in answer.comparisons if c.name.startswith("packed:")]
    assert packed.feasible and "chat and code packed on shared GPUs" in packed.label
    assert "50% of its memory" in packed.note and "interference between the engines is not modelled" in packed.note
    # both deployments hold at least one GPU all day when dedicated; packed they share: fewer GPU-hours
    assert packed.gpu_hours_per_day < answer.gpu_hours_per_day


def test_packing_is_refused_where_memory_does_not_allow_it():
    l4 = {"name": "l4", "gpu": "l4", "on_demand_usd_per_hour": 0.8}
    slow = {"diurnal": {"peak_requests_per_second": 1, "trough_requests_per_second": 0.2}}
    pair = [deployment("a", **slow), deployment("b", **slow)]
    for d in pair:  # an L4 streams 16 GB of weights at 300 GB/s: about 55 ms a decode step
        d["scenario"]["traffic"]["slo"] = {"ttft_seconds": 2.0, "tpot_seconds": 0.2}
    answer = plan_fleet(fleet(pools=[l4], deployments=pair))
    assert all(d.feasible for d in answer.deployments)  # each alone fits a 24 GB L4 (16 GB of weights)
    (packed,) = [c for c in answer.comparisons if c.name.startswith("packed:")]
    assert not packed.feasible and packed.note.startswith("memory does not allow it")
    assert "KV cache" in packed.note


def test_disaggregation_is_compared_at_the_peak_when_asked():
    answer = plan_fleet(small(compare_disaggregation=True))
    (split,) = [c for c in answer.comparisons if c.name.startswith("disaggregated:")]
    assert answer.deployments[0].peak_replicas == 2
    # two replicas at the peak: the only split is 1 prefill + 1 decode, and it meets the SLO on the same 2 GPUs
    assert split.label == "'chat' disaggregated: 2 GPUs at the peak (1 prefill) instead of 2"
    assert split.feasible and split.delta_usd_per_month == pytest.approx(0.0, abs=1e-6)
    assert "other hours scaled by the peak's ratio, an extrapolation" in split.note
    assert not any(c.name.startswith("disaggregated:") for c in planned().comparisons)  # opt-in


def test_disaggregation_says_why_a_deployment_is_not_compared():
    one = deployment("one", diurnal={"peak_requests_per_second": 5, "trough_requests_per_second": 1})
    answer = plan_fleet(small(compare_disaggregation=True, deployments=[one]))
    (split,) = answer.comparisons
    assert not split.feasible and split.note == "not compared: 1 replica(s) at the peak (compared from 2 to 16)"
