"""Regressions for the bugs a review of the 2025–26 additions found (each was reproduced before the fix)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import parse_scenario, plan
from planner.inference.draft import SpeculativeDecoding, draft_architecture
from planner.inference.scenario import InferenceScenario
from planner.model.catalog import resolve_model


def test_hf_generate_max_concurrency_fits_and_one_more_does_not():
    """generate() holds the whole batch's prompt activations: they grow with the sequences (200 was reported
    for Llama 3.1 8B on one H100 where 126 fit)."""
    base = dict(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, runtime="hf-transformers")
    most = plan(InferenceScenario(**base, concurrency=8)).memory.max_concurrency
    assert plan(InferenceScenario(**base, concurrency=most)).memory.fits
    assert not plan(InferenceScenario(**base, concurrency=most + 1)).memory.fits


@pytest.mark.parametrize("method", ["eagle", "mtp"])
def test_a_draft_head_has_no_vision_tower(method):
    target = resolve_model("gemma-3-27b") if method == "eagle" else resolve_model("deepseek-v3")
    head = draft_architecture(target, SpeculativeDecoding(method=method))
    assert head.vision_encoder_parameters == 0 and head.vision_tokens_per_image == 0


def test_the_verify_step_streams_what_plain_decode_streams():
    """Gemma 3 (a resident vision tower) with one drafted token on a dense model: verify reads the same weights
    and KV as a plain decode step; only compute, messages and sampling grow."""
    p = plan(
        InferenceScenario(
            model="gemma-3-27b",
            num_gpus=1,
            tensor_parallel=1,
            speculative={"method": "eagle", "num_speculative_tokens": 1},
        )
    ).performance
    assert p.speculative.verify.bytes == pytest.approx(p.decode.bytes, rel=1e-12)


def test_a_users_attention_format_is_kept_for_a_quantized_checkpoint():
    s = InferenceScenario(model="gpt-oss-120b", num_gpus=4, tensor_parallel=4, attention_weight_dtype="fp8")
    assert (s.weight_dtype, s.attention_weight_dtype) == ("mxfp4", "fp8")


def test_explicit_stored_formats_read_as_stored():
    p = plan(
        InferenceScenario(
            model="deepseek-r1",
            gpu="h200",
            num_gpus=8,
            tensor_parallel=8,
            weight_dtype="fp8",
            attention_weight_dtype="fp8",
        )
    )
    assert any("Checkpoint quantization_config" in a and a.endswith("as stored.") for a in p.assumptions)


def test_recompute_num_layers_above_the_largest_stage_is_refused():
    with pytest.raises(ValidationError, match="more than the 32 layers of the largest pipeline stage"):
        parse_scenario(
            {
                "kind": "training",
                "activation_checkpointing": "full",
                "recompute_method": "block",
                "recompute_num_layers": 33,
            }
        )


def test_a_draft_model_keeps_the_targets_attention_format():
    """gpt-oss-20b drafting for gpt-oss-120b (MXFP4 experts, BF16 attention): the draft holds its checkpoint's
    12.8 GiB (model card), not 11.9 GiB with its attention in MXFP4."""
    p = plan(
        InferenceScenario(
            model="gpt-oss-120b",
            gpu="h200",
            num_gpus=1,
            tensor_parallel=1,
            speculative={"method": "draft_model", "draft_model": "gpt-oss-20b"},
        )
    )
    assert p.memory.components["draft_weights_bytes"] / (1 << 30) == pytest.approx(12.8, abs=0.06)


def test_the_drafts_prompt_pass_does_not_encode_the_images_again():
    """Gemma 3 with 4 images and an EAGLE head: the head's pass over the prompt is one layer over the tokens
    (~3 ms), the tower's FLOPs are the target's prefill's only (they made it ~40 ms)."""
    base = dict(model="gemma-3-27b", num_gpus=1, tensor_parallel=1, prompt_tokens=1024, speculative={"method": "eagle"})
    with_images = plan(InferenceScenario(**base, images_per_request=4)).performance.speculative
    as_text = plan(InferenceScenario(**{**base, "prompt_tokens": 1024 + 4 * 256})).performance.speculative
    assert with_images.draft_prefill_seconds == pytest.approx(as_text.draft_prefill_seconds, rel=1e-9)
