"""Error bands: contain the point estimate, widen with the family's measured error, and are in the plan."""

from __future__ import annotations

import json

import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.uncertainty import band, family_errors


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
