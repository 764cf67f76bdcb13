"""Verdicts with their error band: met only when the whole likely range meets the target, at risk when the
range straddles it, missed when not even its best end meets it. Bands are hand-computed from fixed family
errors (planner.uncertainty: measured = P / (1 + e), so the band is [P / (1 + e90), P / (1 + e10)])."""

from __future__ import annotations

import numpy as np
import pytest

import planner.uncertainty as uncertainty
from planner import plan, units
from planner.inference.scenario import InferenceScenario
from planner.training.scenario import TrainingScenario
from planner.verdict import Targets, judge, memory_verdict, overall, span, target_verdicts, verdicts

# Fixed spreads, so every band below is simple arithmetic on the point estimate.
FAMILIES = {
    # decode speed s: band [s / 1.5, s / 0.9]; TPOT = 1 / s: band [0.9 T, 1.5 T]
    "decode_speed": {"cases": 3, "p10_signed_error": -0.10, "p90_signed_error": 0.50},
    # TTFT P: band [P / 1.25, P / 0.8] = [0.8 P, 1.25 P]
    "ttft": {"cases": 3, "p10_signed_error": -0.20, "p90_signed_error": 0.25},
    # memory M: e90 = 0 is raised to the 2 % floor: band [M / 1.02, M / 0.8] = [M / 1.02, 1.25 M]
    "memory": {"cases": 3, "p10_signed_error": -0.20, "p90_signed_error": 0.0},
    "max_throughput": {"cases": 3, "p10_signed_error": -0.10, "p90_signed_error": 0.10},
    # achieved FLOP/s r: band [r / 1.25, r / 0.8]; step time S = work / r: band [0.8 S, 1.25 S]
    "training_step": {"cases": 3, "p10_signed_error": -0.20, "p90_signed_error": 0.25},
}


@pytest.fixture
def fixed_spreads(monkeypatch):
    monkeypatch.setattr(uncertainty, "family_errors", lambda: FAMILIES)


@pytest.mark.parametrize(
    "low, high, target, direction, expected",
    [
        (85.8, 158.0, 100.0, "at_most", "at_risk"),  # the issue: 87.5 ms shown as "meets <= 100 ms"
        (38.3, 70.7, 100.0, "at_most", "met"),
        (38.3, 100.0, 100.0, "at_most", "met"),  # the worst end exactly at the limit still meets it
        (100.0, 120.0, 100.0, "at_most", "at_risk"),  # the best end meets it, the rest does not
        (100.5, 158.0, 100.0, "at_most", "missed"),
        (1200.0, 1700.0, 1000.0, "at_least", "met"),
        (900.0, 1700.0, 1000.0, "at_least", "at_risk"),
        (700.0, 999.0, 1000.0, "at_least", "missed"),
    ],
)
def test_judge(low, high, target, direction, expected):
    assert judge(low, high, target, direction) == expected


def test_judge_broadcasts_over_arrays():
    low, high = np.array([38.3, 85.8, 100.5]), np.array([70.7, 158.0, 158.0])
    assert list(judge(low, high, 100.0)) == ["met", "at_risk", "missed"]


def test_tpot_target_met_at_risk_and_missed(fixed_spreads):
    p = plan(InferenceScenario(concurrency=1))  # one sequence: TPOT takes the batch-1 decode family's band
    tpot = p.performance.tpot_seconds

    def tpot_verdict(target):
        (v,) = target_verdicts(p, Targets(max_tpot_seconds=target))
        return v

    met = tpot_verdict(1.6 * tpot)  # band [0.9 T, 1.5 T] all under 1.6 T
    assert met.status == "met"
    assert (met.low, met.high) == (pytest.approx(0.9 * tpot), pytest.approx(1.5 * tpot))
    assert met.sentence.startswith("Meets the latency target: each output token takes " + units.seconds(tpot))
    assert "the whole likely range meets it" in met.sentence

    risky = tpot_verdict(1.2 * tpot)  # the estimate meets 1.2 T, the band's top (1.5 T) does not
    assert risky.status == "at_risk" and risky.point_meets
    assert "the estimate meets it, but the worst end of the likely range does not" in risky.sentence
    assert f"likely {span(0.9 * tpot, 1.5 * tpot, units.seconds)}" in risky.sentence
    assert f"at most {units.seconds(1.2 * tpot)}" in risky.sentence

    hopeful = tpot_verdict(0.95 * tpot)  # the estimate misses 0.95 T, the band's bottom (0.9 T) meets it
    assert hopeful.status == "at_risk" and not hopeful.point_meets
    assert "the estimate does not, but the best end of the likely range meets it" in hopeful.sentence

    missed = tpot_verdict(0.85 * tpot)  # even 0.9 T is over 0.85 T
    assert missed.status == "missed"
    assert missed.sentence.startswith("Misses the latency target")


def test_ttft_band_is_the_families_spread(fixed_spreads):
    p = plan(InferenceScenario())
    ttft = p.performance.ttft_seconds
    (v,) = target_verdicts(p, Targets(max_ttft_seconds=1.0 * ttft))
    assert (v.low, v.high) == (pytest.approx(0.8 * ttft), pytest.approx(1.25 * ttft))
    assert v.status == "at_risk"  # 0.8 P <= P < 1.25 P
    (v,) = target_verdicts(p, Targets(max_ttft_seconds=1.3 * ttft))
    assert v.status == "met"


@pytest.mark.parametrize(
    "concurrency, expected",
    [
        (64, "met"),  # 47.0 GiB: 1.25 x 47.0 = 58.7 GiB of 71.7 GiB
        (176, "at_risk"),  # 68.9 GiB fits, 1.25 x 68.9 = 86.1 GiB does not
        (512, "missed"),  # 135 GiB: even 135 / 1.02 = 132 GiB is over 71.7 GiB
    ],
)
def test_memory_verdict(fixed_spreads, concurrency, expected):
    p = plan(InferenceScenario(concurrency=concurrency))
    mem = p.memory
    v = memory_verdict(p)
    assert (v.low, v.high) == (pytest.approx(mem.total_bytes / 1.02), pytest.approx(mem.total_bytes * 1.25))
    assert v.target == mem.budget_bytes
    assert v.status == expected
    assert v.point_meets == mem.fits
    assert units.gib(mem.total_bytes) in v.sentence and units.gib(mem.budget_bytes) in v.sentence
    assert v.headline == {"met": "Fits in GPU memory", "at_risk": "May not fit in GPU memory"}.get(
        expected, "Does not fit in GPU memory"
    )


def test_training_cost_and_deadline_move_with_the_step_time_band(fixed_spreads):
    p = plan(TrainingScenario())
    cost, seconds = p.cost.usd_total, p.performance.time_to_train_seconds
    targets = Targets(max_training_usd=1.1 * cost, max_training_seconds=1.3 * seconds)
    budget, deadline = target_verdicts(p, targets)
    # step time band [0.8 S, 1.25 S]; steps, GPUs and price fixed: cost and time take the same factors
    assert (budget.low, budget.high) == (pytest.approx(0.8 * cost), pytest.approx(1.25 * cost))
    assert budget.status == "at_risk" and budget.headline == "At risk of going over budget"
    assert (deadline.low, deadline.high) == (pytest.approx(0.8 * seconds), pytest.approx(1.25 * seconds))
    assert deadline.status == "met" and deadline.sentence.startswith("Meets the deadline: training takes")
    (late,) = target_verdicts(p, Targets(max_training_seconds=0.75 * seconds))
    assert late.status == "missed"


def test_monthly_cost_is_exact():
    p = plan(InferenceScenario())
    month = p.cost.usd_per_month  # 4 GPUs x $3.00 per GPU-hour x 730 hours = $8,760
    assert month == pytest.approx(4 * 3.0 * 730)
    (at_limit,) = target_verdicts(p, Targets(max_usd_per_month=month))
    assert at_limit.status == "met" and at_limit.low == at_limit.high == month
    assert at_limit.sentence == "Within budget: $8,760 per month against a budget of $8,760 per month."
    (over,) = target_verdicts(p, Targets(max_usd_per_month=month - 1))
    assert over.status == "missed" and over.sentence.startswith("Over budget")


def test_targets_of_the_other_kind_are_ignored_and_memory_comes_first():
    targets = Targets(max_tpot_seconds=0.1, max_training_usd=100.0)
    inference = verdicts(plan(InferenceScenario()), targets)
    assert [v.path for v in inference] == ["memory.total_bytes", "performance.tpot_seconds"]
    training = verdicts(plan(TrainingScenario()), targets)
    assert [v.path for v in training] == ["memory.total_bytes", "cost.usd_total"]


def test_overall_is_the_worst_status():
    assert overall(["met", "met"]) == "met"
    assert overall(["met", "at_risk"]) == "at_risk"
    assert overall(["at_risk", "missed", "met"]) == "missed"


def test_span_shares_the_unit():
    assert span(0.0383, 0.0707, units.seconds) == "38.3–70.7 ms"
    assert span(0.95, 1.2, units.seconds) == "950 ms–1.20 s"
    assert span(61.85, 89.92, units.usd) == "$61.85–89.92"
    assert span(2.0, 2.0, units.seconds) == "2.00 s"
