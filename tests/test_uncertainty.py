"""Error bands: contain the point estimate, widen with the family's measured error, and are in the plan."""

from __future__ import annotations

import json

import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.uncertainty import band, coverage_text, family_errors


def test_bands_contain_the_point_and_are_in_the_plan_json():
    p = plan(InferenceScenario())
    data = json.loads(p.model_dump_json())
    for path, b in data["uncertainty"].items():
        node = data
        for part in path.split("."):
            node = node[part]
        assert b["low"] <= node <= b["high"], path


def test_bands_widen_with_larger_family_error(monkeypatch):
    import planner.uncertainty as u

    monkeypatch.setattr(
        u,
        "family_errors",
        lambda: {
            "narrow": {"cases": 5, "p10_signed_error": -0.05, "p90_signed_error": 0.05},
            "wide": {"cases": 5, "p10_signed_error": -0.30, "p90_signed_error": 0.40},
        },
    )
    narrow, wide = u.band(100.0, "narrow"), u.band(100.0, "wide")
    assert wide.low < narrow.low <= 100 <= narrow.high < wide.high
    unmeasured = u.band(100.0, "never-measured")
    assert "no published measurement" in unmeasured.basis and unmeasured.high > wide.high


def test_biased_family_still_contains_the_point():
    b = band(10.0, "x")
    assert b.low <= 10.0 <= b.high


def test_calibration_residual_replaces_the_published_spread():
    class Calibration:
        label = "my box"
        residual_error = 0.03

    b = band(100.0, "max_throughput", Calibration())
    assert "my box" in b.basis and abs(b.high / 100 - 1 / 0.97) < 1e-12


def test_committed_summary_has_every_family():
    families = family_errors()
    assert {"memory", "max_throughput", "decode_speed", "ttft"} <= set(families)


def test_proportional_band_keeps_the_relative_spread():
    from planner.uncertainty import Band

    step = Band(low=8.0, high=12.5, family="training_step", basis="x")  # around a 10 s step: -20 %, +25 %
    cost = step.proportional(10.0, 400.0)  # $400 at 10 s: $320-$500
    assert (cost.low, cost.high) == (pytest.approx(320.0), pytest.approx(500.0))
    rate = step.proportional(10.0, 1000.0, inverse=True)  # 1000 tokens/s at 10 s: 10000/12.5 .. 10000/8
    assert (rate.low, rate.high) == (pytest.approx(800.0), pytest.approx(1250.0))
    assert rate.family == "training_step" and rate.basis == "x"


# Worked examples of how a band is built from a family's signed errors and checked by leaving each case out.


def test_band_with_enough_cases_uses_conformal_ranks_and_holds_its_promise_left_out():
    from planner.uncertainty import band_edges, loo_coverage

    errors = [-0.25, -0.20, -0.15, -0.10, -0.05, 0.0, 0.05, 0.10, 0.15, 0.20, 0.30]  # 11 cases
    # ranks floor(0.1 x 12) = 1 and ceil(0.9 x 12) = 11: the smallest and the largest
    assert band_edges(errors) == (-0.25, 0.30)
    # Left out, each case meets a band from 10 others: ranks floor(0.1 x 11) = 1, ceil(0.9 x 11) = 10, the
    # others' extremes; only the overall smallest (-0.25) and largest (+0.30) fall outside: 9 of 11 held.
    assert loo_coverage(errors) == (9, 11)


def test_band_with_few_cases_is_symmetric_and_with_very_few_at_least_the_unmeasured_50_percent():
    from planner.uncertainty import band_edges, loo_coverage

    five = [0.10, -0.30, 0.05, 0.20, -0.15]
    # floor(0.1 x 6) = 0: no lower rank; +- the ceil(0.8 x 6) = 5th smallest |error| = 0.30
    assert band_edges(five) == (-0.30, 0.30)
    # Left out: +- the ceil(0.8 x 5) = 4th of 4 others' |error|: -0.30 meets +-0.20 and misses; the rest held
    assert loo_coverage(five) == (4, 5)
    two = [0.068, 0.594]  # decode speed today: ceil(0.8 x 3) = 3 > 2 cases
    assert band_edges(two) == (-0.594, 0.594)
    # Left out: 0.594 meets the +-50 % of a single case and misses; 0.068 meets +-0.594 and is held
    assert loo_coverage(two) == (1, 2)
    assert band_edges([0.001]) == (-0.5, 0.5)  # one tiny error never makes a narrow band
    assert band_edges([0.001] * 9) == (-0.02, 0.02)  # the FLOOR


def test_cases_that_move_together_are_left_out_together_and_the_band_widens_until_it_holds():
    from planner.uncertainty import band_summary, loo_coverage

    errors = [0.10, 0.11, -0.10, -0.12, 0.40, 0.41]
    runs = ["a", "a", "b", "b", "c", "c"]
    # One case at a time (5 others: +- the 5th of 5 |error|): only 0.41 misses (its twin 0.40 sets the band).
    assert loo_coverage(errors) == (5, 6)
    # Run c left out whole: the band from a and b is +-0.12 and both of c's cases miss: 4 of 6, short of 80 %.
    assert loo_coverage(errors, runs) == (4, 6)
    summary = band_summary(errors, runs)
    # At the 81 % level, 4 others no longer place an edge (ceil(0.81 x 5) = 5 > 4): +-max(50 %, largest), so
    # run c is held; the band from all 6 cases: +- the ceil(0.81 x 7) = 6th |error| = 0.41.
    assert summary["level"] == 0.81 and (summary["loo_held"], summary["loo_cases"]) == (6, 6)
    assert (summary["low_error"], summary["high_error"]) == (-0.41, 0.41)
    assert summary["loo_by"] == "run" and summary["tested"]
    assert "widened to the 81% level" in coverage_text({"band": summary})


def test_the_band_reads_the_summarys_edges_and_says_how_often_they_held(monkeypatch):
    import planner.uncertainty as u

    edges = u.band_summary([-0.25, -0.20, -0.15, -0.10, -0.05, 0.0, 0.05, 0.10, 0.15, 0.20, 0.30])
    stats = {"cases": 11, "p10_signed_error": -0.2, "p90_signed_error": 0.2, "band": edges}
    monkeypatch.setattr(u, "family_errors", lambda: {"x": stats})
    b = u.band(100.0, "x")
    # measured = P / (1 + e): e from -0.25 to +0.30 -> 100 / 1.30 .. 100 / 0.75
    assert (b.low, b.high) == (pytest.approx(100 / 1.30), pytest.approx(100 / 0.75))
    assert "80% band; held 82% of 11 cases when each was left out" in b.basis


def test_committed_bands_keep_their_promise_when_each_case_is_left_out():
    families = family_errors()
    for family, stats in families.items():
        b = stats["band"]
        assert b["loo_cases"] == stats["cases"], family
        if b["tested"]:
            assert b["loo_coverage"] >= b["promised_coverage"], (family, b)


def test_tpot_and_tokens_per_second_read_one_family_reciprocally():
    """Output tokens/s = sequences / TPOT, so their bands carry the same relative error: the loaded family
    (max throughput) above one sequence per replica, the batch-1 decode family at one."""
    from planner import InferenceScenario, plan

    loaded = plan(InferenceScenario(concurrency=64))
    u, perf = loaded.uncertainty, loaded.performance
    tpot, rate = u["performance.tpot_seconds"], u["performance.output_tokens_per_second"]
    assert tpot.family == rate.family == "max_throughput"
    assert tpot.low / perf.tpot_seconds == pytest.approx(perf.output_tokens_per_second / rate.high)
    assert tpot.high / perf.tpot_seconds == pytest.approx(perf.output_tokens_per_second / rate.low)
    single = plan(InferenceScenario(concurrency=1)).uncertainty
    assert single["performance.tpot_seconds"].family == single["performance.output_tokens_per_second"].family
    assert single["performance.tpot_seconds"].family == "decode_speed"
