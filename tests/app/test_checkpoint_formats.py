"""Inference page: a newly picked model is served as its checkpoint stores it (the weight widgets follow its
quantization_config, with a note), the attention format is offered, and images reach the plan."""

from __future__ import annotations

from conftest import assert_clean, metric, open_page

from planner import InferenceScenario, plan, units


def _notes(at) -> str:
    return "\n".join(x.value for x in [*at.sidebar.info, *at.sidebar.caption, *at.info, *at.caption])


def test_picking_an_fp8_checkpoint_serves_it_in_fp8_and_says_so():
    at = open_page()
    assert_clean(at)
    at.selectbox(key="inference_pick_model").set_value("deepseek-r1").run()
    assert not at.exception
    assert at.selectbox(key="inference_weight_dtype").value == "fp8"
    assert at.selectbox(key="inference_attention_weight_dtype").value is None
    assert "Weights follow DeepSeek-R1: fp8" in _notes(at)
    scenario = at.session_state["current_inference"]
    assert (scenario.weight_dtype, scenario.attention_weight_dtype) == ("fp8", None)
    assert metric(at, "Time per output token") == units.seconds(plan(scenario).performance.tpot_seconds)


def test_gpt_oss_brings_mxfp4_experts_and_bf16_attention_and_llama_goes_back_to_bf16():
    at = open_page()
    at.selectbox(key="inference_pick_model").set_value("gpt-oss-120b").run()
    assert_clean(at)
    assert at.selectbox(key="inference_weight_dtype").value == "mxfp4"
    assert at.selectbox(key="inference_attention_weight_dtype").value == "bf16"
    at.selectbox(key="inference_pick_model").set_value("llama-3.1-8b").run()
    assert at.selectbox(key="inference_weight_dtype").value == "bf16"
    assert at.selectbox(key="inference_attention_weight_dtype").value is None


def test_a_format_chosen_after_the_model_is_kept():
    at = open_page()
    at.selectbox(key="inference_pick_model").set_value("deepseek-r1").run()
    at.selectbox(key="inference_weight_dtype").set_value("nvfp4").run()
    assert not at.exception
    assert at.session_state["current_inference"].weight_dtype == "nvfp4"


def test_images_per_request_reach_the_plan():
    at = open_page()
    at.selectbox(key="inference_pick_model").set_value("gemma-3-27b").run()
    at.number_input(key="inference_images_per_request").set_value(2).run()
    assert_clean(at)
    scenario = at.session_state["current_inference"]
    assert scenario.images_per_request == 2 and scenario.image_tokens_per_request == 512
    expected = plan(scenario)
    assert metric(at, "Time to first token") == units.seconds(expected.performance.ttft_seconds)
    assert scenario == InferenceScenario(**{**scenario.model_dump(), "images_per_request": 2})


def test_fp8_block_scales_follow_the_checkpoint_and_can_be_set_from_the_sidebar():
    """DeepSeek-R1's checkpoint has 128 x 128 block scales: the sidebar's 'FP8 weight scales' reads 'the
    checkpoint's' (empty), the plan says what it assumes, and choosing per-tensor scales reaches the plan and
    its numbers (faster dense GEMMs on the H100)."""
    at = open_page()
    at.selectbox(key="inference_pick_model").set_value("deepseek-r1").run()
    assert at.selectbox(key="inference_fp8_scaling").value is None
    block = at.session_state["current_inference"]
    assert block.fp8_scaling is None and any("128 x 128 block scales" in a for a in plan(block).assumptions)
    at.selectbox(key="inference_fp8_scaling").set_value("tensor").run()
    assert not at.exception
    tensor = at.session_state["current_inference"]
    assert tensor.fp8_scaling == "tensor"
    assert plan(tensor).performance.ttft_seconds < plan(block).performance.ttft_seconds
    assert metric(at, "Time to first token") == units.seconds(plan(tensor).performance.ttft_seconds)
