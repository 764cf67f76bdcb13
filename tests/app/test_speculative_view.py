"""Inference page, speculative decoding: the sidebar section, the results box, the link and the CSV."""

from __future__ import annotations

import csv
import io

import pytest
from conftest import assert_clean, metric, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.export import plans_to_csv, scenarios_from_csv
from planner.share import query_params_to_scenario, scenario_to_query_params
from ui import render
from ui.speculative_view import speedup_text

METHOD = "inference_pick_speculative"
DEEPSEEK = dict(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8)


def captions(at) -> str:
    return "\n".join(c.value for c in [*at.caption, *at.sidebar.caption]).replace("\\", "")


def test_turning_it_on_replans_tpot_to_the_engines_value_and_shows_the_speedup():
    at = open_page()
    assert_clean(at)
    plain = plan(InferenceScenario())
    assert metric(at, "Time per output token") == units.seconds(plain.performance.tpot_seconds)
    assert not [m for m in at.metric if m.label == "Speedup vs plain decode"]

    at.radio(key=METHOD).set_value("eagle").run()
    assert_clean(at)
    scenario = InferenceScenario(speculative={"method": "eagle"})
    assert at.session_state["current_inference"] == scenario
    expected = plan(scenario)
    spec = expected.performance.speculative
    assert metric(at, "Time per output token") == units.seconds(expected.performance.tpot_seconds)
    assert expected.performance.tpot_seconds != plain.performance.tpot_seconds
    assert metric(at, "Speedup vs plain decode") == speedup_text(spec.speedup)
    assert metric(at, "Tokens per round") == f"{spec.tokens_per_round:.2f}"
    assert metric(at, "Verify step") == units.seconds(spec.verify_step_seconds)
    assert metric(at, "Draft step") == units.seconds(spec.draft_step_seconds)
    assert "0.7 (assumed)" in captions(at)  # EAGLE's default acceptance, marked
    assert at.query_params["inference_speculative"] == "eagle"  # the page writes the link


def test_k_and_a_typed_acceptance_reach_the_plan_and_drop_the_assumed_mark():
    at = open_page()
    at.radio(key=METHOD).set_value("eagle").run()
    at.slider(key="inference_pick_speculative_k").set_value(5).run()
    at.number_input(key="inference_pick_speculative_acceptance").set_value(0.8).run()
    assert_clean(at)
    scenario = InferenceScenario(speculative={"method": "eagle", "num_speculative_tokens": 5, "acceptance_rate": 0.8})
    assert at.session_state["current_inference"] == scenario
    assert metric(at, "Time per output token") == units.seconds(plan(scenario).performance.tpot_seconds)
    text = captions(at)
    assert "0.8** (your value)" in text and "(assumed)" not in text


def test_ranges_and_help_come_from_the_fields():
    at = open_page()
    at.radio(key=METHOD).set_value("eagle").run()
    k = at.slider(key="inference_pick_speculative_k")
    assert (k.min, k.max) == (1, 16)
    assert k.help.startswith("Tokens the draft proposes per sequence")
    acceptance = at.number_input(key="inference_pick_speculative_acceptance")
    assert acceptance.value is None and acceptance.placeholder == "0.7 (assumed: a guess)"
    assert 0 < acceptance.min < 0.001 and 0.999 < acceptance.max < 1


def test_mtp_is_offered_for_deepseek_v3_and_not_for_llama_which_says_why():
    at = open_page()
    assert "mtp" not in at.radio(key=METHOD).options and "MTP" not in at.radio(key=METHOD).options
    assert "MTP** is not offered: Llama 3.1 70B's config ships no multi-token-prediction modules" in captions(at)

    at = open_page(params=scenario_to_query_params(InferenceScenario(**DEEPSEEK), "inference_"))
    assert_clean(at)
    assert "MTP" in at.radio(key=METHOD).options
    assert "Draft model" not in at.radio(key=METHOD).options  # no smaller catalog model has its vocabulary
    at.radio(key=METHOD).set_value("mtp").run()
    assert_clean(at)
    scenario = InferenceScenario(**DEEPSEEK, speculative={"method": "mtp"})
    assert at.session_state["current_inference"] == scenario
    assert metric(at, "Time per output token") == units.seconds(plan(scenario).performance.tpot_seconds)
    assert at.number_input(key="inference_pick_speculative_acceptance").placeholder == (
        "0.85 (assumed: DeepSeek-V3 report)"
    )
    assert "0.85 (assumed)" in captions(at)

    # A model without MTP modules switches it off and says so, instead of an error.
    at.selectbox(key="inference_pick_model").set_value("llama-3.1-8b").run()
    assert_clean(at)
    assert at.radio(key=METHOD).value == "off"
    assert at.session_state["current_inference"].speculative is None
    assert any("MTP is not available for Llama 3.1 8B" in i.value for i in at.sidebar.info)


def test_the_draft_picker_lists_smaller_models_with_the_same_vocabulary():
    at = open_page()
    at.radio(key=METHOD).set_value("draft_model").run()
    assert_clean(at)
    picker = at.selectbox(key="inference_pick_speculative_draft")
    assert picker.value == "llama-3.2-1b"  # the smallest first
    names = picker.options
    assert any("Llama 3.2 1B" in n for n in names) and any("Llama 3.1 8B" in n for n in names)
    assert not any("Qwen" in n or "70B" in n or "405B" in n for n in names)
    picker.set_value("llama-3.2-3b").run()
    assert_clean(at)
    scenario = InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-3b"})
    assert at.session_state["current_inference"] == scenario
    assert metric(at, "Time per output token") == units.seconds(plan(scenario).performance.tpot_seconds)


def test_an_invalid_combination_shows_the_engines_sentence():
    # Speculative decoding with pipeline parallelism: the engine's sentence, no traceback.
    at = open_page(params={"inference_pipeline_parallel": "2", "inference_tensor_parallel": "2"})
    assert_clean(at)
    at.radio(key=METHOD).set_value("eagle").run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "This scenario cannot be planned" in errors and "without pipeline parallelism" in errors, errors


@pytest.mark.parametrize(
    "scenario",
    [
        InferenceScenario(**DEEPSEEK, speculative={"method": "mtp", "num_speculative_tokens": 2}),
        InferenceScenario(
            concurrency=16,
            speculative={
                "method": "draft_model",
                "draft_model": "llama-3.2-1b",
                "num_speculative_tokens": 5,
                "acceptance_rate": 0.65,
            },
        ),
    ],
    ids=["mtp", "draft_model"],
)
def test_a_share_link_with_speculative_decoding_round_trips(scenario):
    params = scenario_to_query_params(scenario, "inference_")
    at = open_page(params=params)
    assert_clean(at)
    assert "link" not in warnings_text(at).lower(), warnings_text(at)
    assert at.session_state["current_inference"] == scenario
    spec = scenario.speculative
    assert at.radio(key=METHOD).value == spec.method
    assert at.slider(key="inference_pick_speculative_k").value == spec.num_speculative_tokens
    assert at.number_input(key="inference_pick_speculative_acceptance").value == spec.acceptance_rate
    # The URL the page keeps is the link again, and reading it back gives the same scenario.
    url = {key: at.query_params[key] for key in at.query_params}
    assert url == params
    assert query_params_to_scenario(url, "inference", "inference_") == (scenario, [])
    assert metric(at, "Speedup vs plain decode") == speedup_text(plan(scenario).performance.speculative.speedup)


@pytest.mark.parametrize(
    "params, words",
    [
        ({"inference_speculative": "turbo"}, "'inference_speculative' = 'turbo' is invalid"),
        ({"inference_speculative": "mtp"}, "ships no multi-token-prediction modules"),
        (
            {"inference_speculative": "eagle", "inference_speculative_num_speculative_tokens": "40"},
            "'inference_speculative_num_speculative_tokens' = '40' is invalid",
        ),
        (
            {"inference_speculative": "draft_model", "inference_speculative_draft_model": "qwen3-0.6b"},
            "a draft must share the target's tokenizer",
        ),
    ],
)
def test_a_malformed_speculative_link_gets_a_sentence_and_still_plans(params, words):
    at = open_page(params=params)
    assert_clean(at)
    assert words in warnings_text(at), warnings_text(at)
    assert metric(at, "Time per output token")  # the page still plans


def test_csv_export_of_a_speculative_plan_has_the_draft_rows(monkeypatch):
    exported: list[str] = []

    def recording(plans):
        text = plans_to_csv(plans)
        exported.append(text)
        return text

    monkeypatch.setattr(render, "plans_to_csv", recording)
    scenario = InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-1b"})
    at = open_page(params=scenario_to_query_params(scenario, "inference_"))
    assert_clean(at)
    assert "Download CSV" in [b.proto.label for b in at.get("download_button")]
    row = next(csv.DictReader(io.StringIO(exported[-1])))
    expected = plan(scenario)
    assert float(row["memory.components.draft_weights_bytes"]) == expected.memory.components["draft_weights_bytes"]
    assert float(row["memory.components.draft_kv_cache_bytes"]) == expected.memory.components["draft_kv_cache_bytes"]
    assert float(row["performance.speculative.speedup"]) == expected.performance.speculative.speedup
    assert row["performance.speculative.draft"] == "Llama 3.2 1B"
    assert scenarios_from_csv(exported[-1]) == [scenario]


def test_memory_chart_names_the_draft_components():
    scenario = InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-1b"})
    at = open_page(params=scenario_to_query_params(scenario, "inference_"))
    memory = next(c.value for c in at.caption if "total" in c.value and "Weights" in c.value)
    components = plan(scenario).memory.components
    assert f"Draft weights {units.gib(components['draft_weights_bytes'])}" in memory
    assert f"Draft KV cache {units.gib(components['draft_kv_cache_bytes'])}" in memory
