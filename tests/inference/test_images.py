"""Images in the prompt of a multimodal model: the tokens an image becomes, the vision tower's FLOPs in
prefill (worked by hand from the tower's shape), decode never reading the tower, and clear refusals."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from planner import plan
from planner.inference.plan import TRAFFIC_NOT_SIMULATED
from planner.inference.scenario import InferenceScenario
from planner.inference.workload import Traffic
from planner.model.catalog import MODELS_DIR, resolve_model
from planner.share import query_params_to_scenario, scenario_to_query_params

GEMMA = dict(model="gemma-3-27b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, concurrency=8)
# Gemma 3's SigLIP tower (config: 896 px images, 14 px patches, width 1152, 27 layers) and its projector:
# 423,060,336 parameters (tests/model pins the count against the published ~400M encoder).
SIGLIP_PARAMETERS, SIGLIP_PATCHES, SIGLIP_LAYERS, SIGLIP_WIDTH = 423_060_336, (896 // 14) ** 2, 27, 1152


def _siglip_flops(patches):
    return 2 * SIGLIP_PARAMETERS * patches + 4 * SIGLIP_LAYERS * patches**2 * SIGLIP_WIDTH


def test_the_tokens_an_image_becomes():
    gemma = resolve_model("gemma-3-27b")
    assert (gemma.vision_patches_per_image, gemma.vision_tokens_per_image) == (4096, 256)  # mm_tokens_per_image
    scout = resolve_model("llama-4-scout")
    # One 336-px tile: (336 / 14)^2 = 576 patches + a class token; pixel shuffle 0.5 keeps 576 x 0.25 = 144.
    assert (scout.vision_patches_per_image, scout.vision_tokens_per_image) == (577, 144)
    assert InferenceScenario(**GEMMA, images_per_request=3).image_tokens_per_request == 768
    assert InferenceScenario(**GEMMA, images_per_request=3, tokens_per_image=512).image_tokens_per_request == 1536


def test_image_tokens_are_prompt_tokens_for_the_language_model():
    with_image = plan(InferenceScenario(**GEMMA, images_per_request=1)).memory.components
    as_text = plan(InferenceScenario(**{**GEMMA, "prompt_tokens": 2048 + 256})).memory.components
    assert with_image["kv_cache_bytes"] == as_text["kv_cache_bytes"]


@pytest.mark.parametrize(("images", "tokens_per_image", "patches"), [(1, None, 4096), (2, None, 4096), (1, 512, 8192)])
def test_prefill_adds_the_towers_flops_worked_by_hand(images, tokens_per_image, patches):
    """One GPU: the prefill FLOPs are the language model's over text + image tokens plus, per image,
    2 x tower parameters x patches + 4 x layers x patches^2 x width (patches scale with the tokens asked:
    16 SigLIP patches per Gemma 3 image token)."""
    scenario = InferenceScenario(**GEMMA, images_per_request=images, tokens_per_image=tokens_per_image)
    text_only = InferenceScenario(**{**GEMMA, "prompt_tokens": 2048 + scenario.image_tokens_per_request})
    added = plan(scenario).performance.prefill.flops - plan(text_only).performance.prefill.flops
    assert added == pytest.approx(images * _siglip_flops(patches), rel=1e-9)


def test_decode_never_reads_the_vision_tower():
    """The tower is resident (2 bytes x 423,060,336 on one GPU) but a decode step reads only the language
    model's weights and the cache: exactly the decode bytes of the same language model without a tower
    (Gemma 3's own text_config)."""
    config = json.loads((MODELS_DIR / "gemma-3-27b.json").read_text())
    text_only = {**GEMMA, "model": config["text_config"]}
    multimodal, text = plan(InferenceScenario(**GEMMA)), plan(InferenceScenario(**text_only))
    weights = multimodal.memory.components["weights_bytes"] - text.memory.components["weights_bytes"]
    assert weights == 2 * SIGLIP_PARAMETERS
    assert multimodal.performance.decode.bytes == text.performance.decode.bytes


def test_images_need_a_multimodal_model():
    with pytest.raises(ValidationError, match="needs a multimodal model; Llama 3.1 70B has no vision encoder"):
        InferenceScenario(images_per_request=1)


def test_a_stream_with_images_at_a_vanishing_rate_sees_the_idle_plan():
    """Each simulated request carries the images' tokens and pays the tower's FLOPs in its first chunk, and
    decode streams the language model's weights only: one request at a time meets the static plan's idle
    TTFT and decode step (the decode table interpolates contexts: 1e-5)."""
    scenario = InferenceScenario(**{**GEMMA, "concurrency": 1}, images_per_request=2)
    stream = Traffic(requests_per_second=0.01, arrival="uniform", num_requests=3)  # 100 s apart: never overlap
    p = plan(scenario.model_copy(update={"traffic": stream}))
    assert p.traffic is not None and not any(w.startswith(TRAFFIC_NOT_SIMULATED) for w in p.warnings)
    assert p.traffic.ttft_seconds.mean == pytest.approx(p.performance.ttft_seconds, rel=1e-6)
    assert p.traffic.tpot_seconds.mean == pytest.approx(p.performance.decode_step_seconds, rel=1e-4)


def test_a_link_carries_the_images():
    scenario = InferenceScenario(**GEMMA, images_per_request=2, tokens_per_image=300)
    decoded, warnings = query_params_to_scenario(scenario_to_query_params(scenario))
    assert not warnings and decoded == scenario


def test_the_profiled_image_batch_is_counted_in_memory():
    """vLLM V1's profiling encodes as many images as a prefill chunk's encoder budget holds: 8,192 / 256 = 32
    Gemma 3 images (16 sequences x 4 images bring 64). SigLIP's peak over their 32 x 4,096 patches is one
    layer's residual + normed copy + MLP up/activation, (2 + 8) x 1,152 x 2 bytes per patch on one GPU; the
    outputs are 32 x 256 tokens at Gemma's width 5,376 in bf16. The component is the outputs plus the peak
    beyond the language model's own forward peak (the activations component)."""
    p = plan(InferenceScenario(**{**GEMMA, "concurrency": 16}, images_per_request=4))
    peak = 32 * SIGLIP_PATCHES * (2 + 8) * SIGLIP_WIDTH * 2
    outputs = 32 * 256 * 5376 * 2
    forward = p.memory.components["activations_bytes"]
    assert p.memory.components["vision_encoder_bytes"] == pytest.approx(outputs + peak - forward, rel=1e-12)
    # One image at one sequence: the tower's peak stays under the language model's; only the outputs remain.
    single = plan(InferenceScenario(**{**GEMMA, "concurrency": 1}, images_per_request=1)).memory.components
    assert single["vision_encoder_bytes"] == 256 * 5376 * 2
    assert "vision_encoder_bytes" not in plan(InferenceScenario(**GEMMA)).memory.components
