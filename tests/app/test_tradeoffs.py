"""Trade-offs page (placeholder until the technique explorer): the current plan's binding resource."""

from __future__ import annotations

from planner import InferenceScenario, plan
from planner.share import scenario_to_query_params
from ui.text import component_label, resource_label

from conftest import assert_clean, metric, open_page, warnings_text


def test_shows_the_coming_state_and_the_default_plan():
    at = open_page("tradeoffs")
    assert_clean(at)
    assert any("technique explorer is coming" in i.value for i in at.info)
    expected = plan(InferenceScenario())
    assert metric(at, "Binding resource") == resource_label(expected.bottleneck).capitalize()
    assert metric(at, "Largest memory component") == component_label(expected.memory.dominant_component)


def test_link_seeds_the_plan():
    scenario = InferenceScenario(concurrency=150, kv_cache_dtype="fp8")
    at = open_page("tradeoffs", scenario_to_query_params(scenario, "inference_"))
    assert_clean(at)
    assert at.session_state["current_inference"] == scenario
    expected = plan(scenario)
    assert metric(at, "Binding resource") == resource_label(expected.bottleneck).capitalize()
    assert metric(at, "Largest memory component") == component_label(expected.memory.dominant_component)


def test_invalid_link_warns():
    at = open_page("tradeoffs", {"inference_concurrency": "-3"})
    assert not at.exception
    assert "inference_concurrency" in warnings_text(at)
    assert at.session_state["current_inference"] == InferenceScenario()


def test_follows_the_inference_page():
    at = open_page()
    at.slider(key="inference_concurrency").set_value(150).run()
    at.switch_page("app_pages/tradeoffs.py").run()
    assert_clean(at)
    expected = plan(InferenceScenario(concurrency=150))
    assert metric(at, "Binding resource") == resource_label(expected.bottleneck).capitalize()
