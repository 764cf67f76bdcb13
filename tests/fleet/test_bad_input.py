"""Bad input: a sentence each, and the rest of the fleet still planned where that makes sense."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.fleet import FleetScenario, manager_summary, plan_fleet
from planner.fleet.demand import MAX_RATE_TRACE_ROWS, trace_rates
from tests.fleet.fleets import deployment, fleet, small


def _one_sentence(text: str) -> None:
    assert text and "\n" not in text and "Traceback" not in text


def test_a_deployment_that_cannot_meet_its_slo_is_named_with_why_and_the_rest_is_planned():
    impossible = deployment("tight")
    impossible["scenario"]["traffic"]["slo"] = {"ttft_seconds": 0.001}  # below one prefill step anywhere
    data = small(impossible)
    data["pools"] = fleet()["pools"]
    answer = plan_fleet(data)
    tight = next(d for d in answer.deployments if d.name == "tight")
    assert not tight.feasible
    assert tight.why is not None and "cannot meet its SLO on any allowed pool" in tight.why
    assert "'h100'" in tight.why and "'a100'" in tight.why  # every candidate says why
    _one_sentence(tight.why)
    assert [d.feasible for d in answer.deployments if d.name != "tight"] == [True]
    assert any("tight" in w for w in answer.warnings)
    assert "not planned: tight" in manager_summary(answer)
    # its offered requests count as not meeting the SLO; no hour meets every SLO
    assert answer.slo_attainment is not None and answer.slo_attainment < 1
    assert answer.hours_every_slo_met == 0


def test_a_pool_too_small_for_the_peak_says_so_and_the_hours_it_cuts_miss_the_slo():
    small = fleet(
        pools=[{"name": "h100", "gpu": "h100-sxm", "max_gpus": 2, "on_demand_usd_per_hour": 3.0}],
        deployments=[deployment("chat", diurnal={"peak_requests_per_second": 90, "trough_requests_per_second": 5})],
        spares={"n_plus_k": 0},
    )
    answer = plan_fleet(small)
    chat = answer.deployments[0]
    assert chat.feasible and chat.peak_replicas == 2
    assert any("pool 'h100' (2 GPUs at most) is too small for deployment 'chat'" in w for w in answer.warnings)
    peak = answer.hours[chat.peak_hour].deployments[0]
    assert not peak.slo_met and peak.replicas == 2
    assert peak.requests_per_second_per_replica > chat.capacity_requests_per_second_per_replica
    assert answer.hours[2].deployments[0].slo_met  # the night fits
    assert all(h.gpus <= 2 for h in answer.hours)
    assert chat.hours_slo_met < 24


@pytest.mark.parametrize(
    "rates, words",
    [
        ([1.0] * 23 + [-1.0], "greater than or equal to 0"),
        ([1.0] * 12 + [math.nan] + [1.0] * 11, "finite number"),
        ([1.0] * 23, "needs 24 numbers"),
    ],
)
def test_a_deployment_with_bad_rates_is_left_out_with_a_sentence_and_the_rest_is_planned(rates, words):
    answer = plan_fleet(small(deployment("bad", rate_by_hour=rates)))
    assert [d.name for d in answer.deployments] == ["chat"] and answer.deployments[0].feasible
    (rejected,) = answer.rejected
    assert (rejected.what, rejected.name) == ("deployment", "bad")
    assert words in rejected.why
    _one_sentence(rejected.why)


def test_a_million_row_rate_trace_is_refused_with_a_sentence():
    text = "seconds,requests_per_second\n" + "1,5\n" * 1_000_000  # 4 MB: under the size limit, over the rows
    with pytest.raises(PlanningError, match=f"more than {MAX_RATE_TRACE_ROWS:,} rows; resample it"):
        trace_rates(text)
    wide = "seconds,requests_per_second\n" + "".join(f"{i * 0.0864:.4f},5.000\n" for i in range(1_000_000))
    with pytest.raises(PlanningError, match="larger than 8 MiB; resample it first"):
        trace_rates(wide)
    answer = plan_fleet(small(deployment("traced", rate_trace_csv=text)))
    (rejected,) = answer.rejected
    assert rejected.name == "traced" and "more than 100,000 rows" in rejected.why
    assert [d.name for d in answer.deployments] == ["chat"]


@pytest.mark.parametrize(
    "text, words",
    [
        ("time,rate\n0,1\n", "no column seconds, requests_per_second"),
        ("seconds,requests_per_second\n0,fast\n", "row 2 is not two numbers"),
        ("seconds,requests_per_second\n0,-3\n", "row 2: requests_per_second must be a finite number"),
        ("seconds,requests_per_second\nnan,3\n", "row 2: seconds must be a finite number"),
        ("seconds,requests_per_second\n0,3\n3600,3\n", "no sample in hour(s) 02:00"),
        ("seconds,requests_per_second\n", "a header but no rows"),
    ],
)
def test_a_bad_rate_trace_gets_a_sentence(text, words):
    with pytest.raises(PlanningError, match=words.replace("(", r"\(").replace(")", r"\)")):
        trace_rates(text)


def test_an_unknown_gpu_leaves_its_pool_out_and_the_fleet_runs_on_the_others():
    data = small()
    data["pools"].append({"name": "typo", "gpu": "h100-sx", "on_demand_usd_per_hour": 3.0})
    answer = plan_fleet(data)
    (rejected,) = answer.rejected
    assert (rejected.what, rejected.name) == ("pool", "typo")
    assert "unknown" in rejected.why and "did you mean 'h100-sxm'" in rejected.why
    _one_sentence(rejected.why)
    assert all(d.feasible for d in answer.deployments)


def test_a_deployment_whose_only_pool_was_left_out_is_named():
    data = small({**deployment("code"), "pools": ["typo"]})
    data["pools"].append({"name": "typo", "gpu": "h100-sx"})
    answer = plan_fleet(data)
    assert {r.name for r in answer.rejected} == {"typo", "code"}
    code = next(r for r in answer.rejected if r.name == "code")
    assert "were left out" in code.why
    assert [d.name for d in answer.deployments] == ["chat"]


def test_nothing_to_plan_is_one_sentence():
    with pytest.raises(PlanningError, match="no pool can be planned: .*unknown"):
        plan_fleet(fleet(pools=[{"name": "typo", "gpu": "nope"}]))
    bad = deployment("bad", rate_by_hour=[-1.0] * 24)
    with pytest.raises(PlanningError, match="no deployment can be planned"):
        plan_fleet(fleet(deployments=[bad]))


@pytest.mark.parametrize(
    "change, words",
    [
        ({"deployments": [deployment("a"), deployment("a")]}, "deployment names must be unique"),
        ({"rate_scale": 0}, "rate_scale"),
        ({"spares": {"n_plus_k": 1, "gpu_mtbf_hours": 1000}}, "not both"),
        ({"pools": [{"name": "p", "gpu": "h100-sxm", "spot_share": 0.5}]}, "spot_share needs spot_usd_per_hour"),
        (
            {"pools": [{"name": "p", "gpu": "h100-sxm", "board_watts": 300, "idle_watts": 400}]},
            "idle_watts 400 must be below board_watts 300",
        ),
        (
            {
                "pools": [
                    {
                        "name": "p",
                        "gpu": {
                            "name": "x",
                            "memory_bytes": 8e10,
                            "memory_bandwidth_bytes_per_second": 3e12,
                            "peak_flops_per_second": {"bf16": 1e15},
                        },
                    }
                ]
            },
            "has no reference price",
        ),
    ],
)
def test_the_strict_schema_explains_each_error_in_a_sentence(change, words):
    with pytest.raises(ValidationError) as caught:
        FleetScenario.model_validate(fleet(**change))
    message = explain(caught.value)
    assert words in message
    _one_sentence(message)


@pytest.mark.parametrize(
    "entry, words",
    [
        (
            deployment(
                "two", rate_by_hour=[1.0] * 24, diurnal={"peak_requests_per_second": 2, "trough_requests_per_second": 1}
            ),
            "needs exactly one load",
        ),
        (
            {**deployment("noslo"), "scenario": {"model": "llama-3.1-8b", "num_gpus": 1, "tensor_parallel": 1}},
            "has no SLO to size for",
        ),
        ({**deployment("where"), "pools": ["elsewhere"]}, "names unknown pool(s) 'elsewhere'"),
        (
            deployment("wave", diurnal={"peak_requests_per_second": 1, "trough_requests_per_second": 2}),
            "trough 2 requests/s is above its peak 1",
        ),
        ({**deployment("tp"), "layouts": [{"tensor_parallel": 3}]}, None),
    ],
)
def test_a_bad_deployment_is_left_out_with_why(entry, words):
    answer = plan_fleet(small(entry))
    if words is None:  # an invalid candidate layout: the deployment is infeasible, named with the layout's reason
        tp = next(d for d in answer.deployments if d.name == "tp")
        assert not tp.feasible and tp.why is not None and "tensor_parallel=3 does not divide" in tp.why
        return
    (rejected,) = answer.rejected
    assert words in rejected.why
    _one_sentence(rejected.why)
    assert answer.deployments[0].feasible
