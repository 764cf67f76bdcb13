"""Calibrate page (placeholder until profiling lands): how to enable it, the efficiencies in use."""

from __future__ import annotations

from planner import InferenceScenario, plan, units
from planner.performance import DEFAULT_EFFICIENCY
from planner.share import scenario_to_query_params

from conftest import assert_clean, metric, open_page, warnings_text


def test_says_how_to_enable_profiling_and_shows_the_defaults():
    at = open_page("calibrate")
    assert_clean(at)
    assert any('pip install "headroom[profile]"' in c.value for c in at.code)
    table = at.dataframe[0].value
    shown = dict(zip(table["Factor"], table["Value"]))
    assert shown["memory_bandwidth"] == units.percent(DEFAULT_EFFICIENCY.memory_bandwidth)
    assert shown["prefill_compute"] == units.percent(DEFAULT_EFFICIENCY.prefill_compute)
    expected = plan(InferenceScenario())
    assert metric(at, "Predicted decode step") == units.seconds(expected.performance.decode_step_seconds)


def test_link_seeds_the_plan_and_bad_params_warn():
    scenario = InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1)
    at = open_page("calibrate", {**scenario_to_query_params(scenario, "inference_"), "inference_kv_cache_dtype": "x"})
    assert not at.exception
    assert "inference_kv_cache_dtype" in warnings_text(at)
    expected = plan(scenario)
    assert metric(at, "Predicted decode step") == units.seconds(expected.performance.decode_step_seconds)
