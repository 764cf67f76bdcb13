"""The 2025-26 layer kinds term by term, on toy configs small enough to check by hand.

Every expected value is the arithmetic that produces it (in the comment beside it); each toy is also
rebuilt as torch modules by the independent builders in tests/model/builders.py. The configs go
through `architecture_from_config`, the parser a user's upload takes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from planner.errors import PlanningError
from planner.model.architecture import LayerSpec, parameter_counts
from planner.model.cache import (
    indexer_cache_bytes_per_sequence,
    indexer_key_elements_per_token,
    kv_cache_bytes_per_sequence_by_layer,
    layer_cached_tokens,
    layer_kv_elements_per_token,
    linear_attention_state_elements,
    mamba_state_elements,
    recurrent_state_bytes_per_sequence,
)
from planner.model.catalog import resolve_model
from planner.model.hf_config import architecture_from_config
from planner.model.vision import llama4_vision_parameters, siglip_vision_parameters
from tests.model import builders


def torch_count(build, cfg) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in build(cfg).parameters())


# ---------------------------------------------------------------------------------------------
# gpt-oss: sinks, biases everywhere, alternating sliding window

GPT_OSS = {
    "model_type": "gpt_oss",
    "hidden_size": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 4,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "intermediate_size": 6,
    "vocab_size": 10,
    "attention_bias": True,
    "tie_word_embeddings": False,
}


def test_gpt_oss_toy_layer_by_hand():
    arch = architecture_from_config(GPT_OSS)
    layer = parameter_counts(arch).moe_layer
    assert layer is not None
    assert layer.attention_sharded == 8 * 16 + 16 * 8  # q 8 -> 4 x 4, o back: 256
    assert layer.attention_kv == 2 * 8 * (2 * 4)  # k, v: 128
    assert layer.attention_bias == 16 + 8 + 8  # q, k, v biases: 32
    assert layer.attention_out_bias == 8
    assert layer.attention_sinks == 4  # one logit per query head
    assert layer.experts_routed == 4 * 3 * 8 * 6  # 576
    assert layer.experts_bias == 4 * (2 * 6 + 8)  # gate_up bias 12 + down bias 8 per expert: 80
    assert layer.router == 4 * 8 + 4  # weight + bias: 36
    assert layer.norms == 2 * 8
    assert layer.total == 256 + 128 + 32 + 8 + 4 + 576 + 80 + 36 + 16  # 1,136


def test_gpt_oss_toy_totals_active_and_torch():
    counts = parameter_counts(architecture_from_config(GPT_OSS))
    assert counts.total == 10 * 8 + 10 * 8 + 8 + 2 * 1_136  # 2,440
    # top-2 of 4: half of each layer's routed experts and their biases (656) sit idle
    assert counts.active == 2_440 - 2 * 656 // 2  # 1,784
    assert torch_count(builders.build_gpt_oss, GPT_OSS) == 2_440


def test_gpt_oss_toy_layer_pattern_keeps_the_uniform_window_fields():
    arch = architecture_from_config(GPT_OSS)
    assert [layer.kind for layer in arch.layers] == ["sliding window 4", "full attention"]
    assert (arch.sliding_window, arch.sliding_window_layers) == (4, 1)
    # the default pattern (no layer_types) slides on even layers, as GptOssConfig does
    default = architecture_from_config({k: v for k, v in GPT_OSS.items() if k != "layer_types"})
    assert [layer.mixer for layer in default.layers] == ["sliding_attention", "full_attention"]


def test_sliding_and_chunked_layers_cache_at_most_their_window():
    full, sliding = LayerSpec(), LayerSpec(mixer="sliding_attention", window_tokens=4)
    chunked, mamba = LayerSpec(mixer="chunked_attention", window_tokens=8), LayerSpec(mixer="mamba", mlp="none")
    assert layer_cached_tokens(full, 10) == 10
    assert layer_cached_tokens(sliding, 3) == 3 and layer_cached_tokens(sliding, 10) == 4
    assert layer_cached_tokens(chunked, 10) == 8
    assert layer_cached_tokens(mamba, 10) == 0
    assert list(layer_cached_tokens(sliding, np.array([2, 9]))) == [2, 4]
    with pytest.raises(ValueError, match="needs"):
        LayerSpec(mixer="sliding_attention")


def test_gpt_oss_toy_kv_bytes_layer_by_layer():
    arch = architecture_from_config(GPT_OSS)
    # K and V of 2 heads of 4 per token: 16 elements; sliding layer keeps 4 of 10 tokens, the full one 10
    assert kv_cache_bytes_per_sequence_by_layer(arch, 10, 2) == (4 + 10) * 16 * 2  # 448
    # TP 2: one KV head per rank, 8 elements per token
    assert kv_cache_bytes_per_sequence_by_layer(arch, 10, 2, tensor_parallel=2) == (4 + 10) * 8 * 2
    assert recurrent_state_bytes_per_sequence(arch, 4, 2) == 0


# ---------------------------------------------------------------------------------------------
# Qwen3-Next: Gated DeltaNet + gated attention, MoE with a gated shared expert

QWEN3_NEXT = {
    "model_type": "qwen3_next",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "num_hidden_layers": 4,
    "full_attention_interval": 2,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 2,
    "linear_value_head_dim": 3,
    "linear_conv_kernel_dim": 3,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 5,
    "shared_expert_intermediate_size": 6,
    "intermediate_size": 7,
    "vocab_size": 10,
    "tie_word_embeddings": False,
}


def test_qwen3_next_toy_layers_by_hand():
    arch = architecture_from_config(QWEN3_NEXT)
    assert [layer.mixer for layer in arch.layers] == ["linear_attention", "full_attention"] * 2
    counts = parameter_counts(arch)
    linear, full = counts.layers[0], counts.layers[1]
    # Gated DeltaNet: key_dim 2x2 = 4, value_dim 4x3 = 12, conv_dim 2x4 + 12 = 20
    # in_proj_qkvz 8 x (8 + 24) = 256, in_proj_ba 8 x 8 = 64, out_proj 12 x 8 = 96
    assert linear.attention_sharded == 256 + 64 + 96
    assert linear.attention_bias == 20 * 3 + 4 + 4  # conv1d 20 x 3, dt_bias, A_log: 68
    assert linear.attention_kv == 0
    # gated attention: q_proj 8 -> 2 x 4 x 2 = 16 (query + gate), o 8 -> 8; k, v 8 -> 4
    assert full.attention_sharded == 8 * 16 + 8 * 8  # 192
    assert full.attention_kv == 2 * 8 * 4  # 64
    # MoE: 4 experts x 3 x 8 x 5 = 480; shared 3 x 8 x 6 = 144; router 4 x 8 + shared gate 8 = 40
    assert (full.experts_routed, full.experts_shared, full.router) == (480, 144, 40)
    assert linear.norms == 16 + 3  # two RMSNorms + the DeltaNet's gated norm (head_v_dim)
    assert full.norms == 16 + 2 * 4  # two RMSNorms + q/k norms per head
    assert linear.total == 416 + 68 + 480 + 144 + 40 + 19  # 1,167
    assert full.total == 192 + 64 + 480 + 144 + 40 + 24  # 944
    assert counts.total == 80 + 80 + 8 + 2 * 1_167 + 2 * 944  # 4,390
    assert counts.active == 4_390 - 4 * 480 // 2  # 3,430
    assert torch_count(builders.build_qwen3_next, QWEN3_NEXT) == 4_390
    breakdown = counts.as_dict()
    assert breakdown["linear_attention"] == 2 * (416 + 68) and sum(breakdown.values()) == counts.total


def test_gated_deltanet_state_is_constant_per_sequence():
    arch = architecture_from_config(QWEN3_NEXT)
    # recurrent: 4 v-heads x 2 x 3 = 24; conv: (3 - 1) x conv_dim 20 = 40
    assert linear_attention_state_elements(arch) == (24, 40)
    assert linear_attention_state_elements(arch, 2) == (12, 20)
    # two DeltaNet layers, state in fp32 (4 B), conv window in bf16 (2 B): 2 x (96 + 80)
    assert recurrent_state_bytes_per_sequence(arch, 4, 2) == 352
    # only the two attention layers cache tokens: 2 x 10 tokens x (K+V of 1 head of 4 = 8) x 2 B
    assert kv_cache_bytes_per_sequence_by_layer(arch, 10, 2) == 2 * 10 * 8 * 2
    assert arch.is_hybrid and arch.layer_kind_counts == {"linear attention": 2, "full attention": 2}


def test_qwen3_next_mlp_only_layers_are_dense():
    arch = architecture_from_config({**QWEN3_NEXT, "mlp_only_layers": [0]})
    assert [layer.mlp for layer in arch.layers] == ["dense", "moe", "moe", "moe"]
    # layer 0 swaps the MoE block (480 + 144 + 40 = 664) for a dense MLP of 3 x 8 x 7 = 168
    assert parameter_counts(arch).total == 4_390 - 664 + 168
    assert torch_count(builders.build_qwen3_next, {**QWEN3_NEXT, "mlp_only_layers": [0]}) == 4_390 - 664 + 168


# ---------------------------------------------------------------------------------------------
# Nemotron-H: Mamba-2, attention, MLP and MoE blocks

NEMOTRON_H = {
    "model_type": "nemotron_h",
    "hybrid_override_pattern": "M*-E",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "intermediate_size": 6,
    "mamba_num_heads": 4,
    "mamba_head_dim": 2,
    "ssm_state_size": 3,
    "n_groups": 2,
    "conv_kernel": 3,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 5,
    "moe_shared_expert_intermediate_size": 6,
    "vocab_size": 10,
}


def test_nemotron_h_toy_blocks_by_hand():
    arch = architecture_from_config(NEMOTRON_H)
    assert [(layer.mixer, layer.mlp) for layer in arch.layers] == [
        ("mamba", "none"),
        ("full_attention", "none"),
        ("none", "dense"),
        ("none", "moe"),
    ]
    mamba, attention, mlp, moe = parameter_counts(arch).layers
    # Mamba-2: inner 4 x 2 = 8, conv_dim 8 + 2 x 2 x 3 = 20; in_proj 8 x (8 + 20 + 4) = 256, out_proj 8 x 8
    assert mamba.attention_sharded == 256 + 64
    # conv1d 20 x 3 + bias 20, dt_bias/A_log/D 3 x 4, gated norm 8
    assert mamba.attention_bias == 80 + 12 + 8
    assert mamba.norms == 8  # one RMSNorm per block
    assert mamba.total == 428
    assert attention.total == 2 * 8 * 8 + 2 * 8 * 4 + 8  # q + o, k + v, norm: 200
    assert mlp.total == 2 * 8 * 6 + 8  # up + down (relu^2, no gate) + norm: 104
    # up/down experts 4 x 2 x 8 x 5 = 320, shared up/down 2 x 8 x 6 = 96, router 4 x 8 + correction 4
    assert (moe.experts_routed, moe.experts_shared, moe.router) == (320, 96, 36)
    assert moe.total == 320 + 96 + 36 + 8
    counts = parameter_counts(arch)
    assert counts.total == 80 + 80 + 8 + 428 + 200 + 104 + 460  # 1,360
    assert torch_count(builders.build_nemotron_h, NEMOTRON_H) == 1_360
    assert (arch.num_dense_layers, arch.num_moe_layers) == (3, 1)
    assert counts.as_dict()["mamba"] == 420 and sum(counts.as_dict().values()) == 1_360


def test_mamba_state_is_constant_and_replicates_groups_past_tensor_parallel():
    arch = architecture_from_config(NEMOTRON_H)
    # SSM: 4 heads x 2 x 3 = 24; conv: (3 - 1) x 20 = 40
    assert mamba_state_elements(arch) == (24, 40)
    assert mamba_state_elements(arch, 2) == (12, 20)  # 2 groups split evenly
    # TP 4 > 2 groups: vLLM widens to 4 groups, conv_dim 8 + 2 x 4 x 3 = 32 -> (2 x 32) / 4
    assert mamba_state_elements(arch, 4) == (6, 16)
    assert recurrent_state_bytes_per_sequence(arch, 4, 2) == 24 * 4 + 40 * 2
    # the one attention block caches K + V of one 4-wide head per token
    assert layer_kv_elements_per_token(arch, arch.layers[1]) == 8
    assert layer_kv_elements_per_token(arch, arch.layers[0]) == 0


def test_nemotron_h_rejects_a_pattern_that_disagrees_with_the_layer_count():
    with pytest.raises(PlanningError, match="4 blocks but num_hidden_layers is 5"):
        architecture_from_config({**NEMOTRON_H, "num_hidden_layers": 5})


# ---------------------------------------------------------------------------------------------
# Nemotron-NAS (DeciLM block_configs): per-layer KV heads, widths, no-op and linear sublayers


def _block(attention: dict, ffn: dict) -> dict:
    base_attention = {"no_op": False, "replace_with_linear": False, "n_heads_in_group": None}
    base_ffn = {"no_op": False, "replace_with_linear": False}
    return {"attention": {**base_attention, **attention}, "ffn": {**base_ffn, **ffn}}


NAS = {
    "model_type": "nemotron-nas",
    "hidden_size": 12,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "vocab_size": 10,
    "block_configs": [
        _block({"n_heads_in_group": 2}, {"ffn_mult": 0.625}),  # int(2 x 0.625 x 12 / 3) = 5 -> 256
        _block({"no_op": True}, {"ffn_mult": 1.0}),  # int(8) -> 256
        _block({"replace_with_linear": True}, {"no_op": True}),
        _block({"n_heads_in_group": 4}, {"replace_with_linear": True}),
    ],
}


def test_nas_toy_blocks_by_hand():
    arch = architecture_from_config(NAS)
    assert [layer.kind for layer in arch.layers] == [
        "full attention",
        "no mixer",
        "linear replacement",
        "full attention",
    ]
    assert [layer.num_kv_heads for layer in arch.layers] == [2, None, None, 1]
    b0, b1, b2, b3 = parameter_counts(arch).layers
    # q, o 12 x 12 each; k, v 12 x 2 heads x 3; SwiGLU 3 x 12 x 256; two norms
    assert b0.total == 288 + 144 + 3 * 12 * 256 + 24  # 9,672
    assert b1.total == 3 * 12 * 256 + 12  # no attention, no input norm: 9,228
    assert b2.total == 144 + 12  # one bias-free 12 x 12 linear and its norm
    assert b3.total == 288 + 2 * 12 * 3 + 144 + 24  # 1 KV head; the MLP replaced by a 12 x 12 linear: 528
    total = 120 + 120 + 12 + 9_672 + 9_228 + 156 + 528
    assert parameter_counts(arch).total == total == 19_836
    assert torch_count(builders.build_nemotron_nas, NAS) == total


def test_nas_toy_kv_per_layer_and_the_mean_layer():
    arch = architecture_from_config(NAS)
    # layer 0: K+V of 2 heads of 3 = 12 per token; layer 3: of 1 head = 6; the rest none
    assert kv_cache_bytes_per_sequence_by_layer(arch, 5, 2) == 5 * (12 + 6) * 2
    # TP 2: layer 0 keeps one head (6), layer 3 replicates its single head (6)
    assert kv_cache_bytes_per_sequence_by_layer(arch, 5, 2, tensor_parallel=2) == 5 * (6 + 6) * 2
    counts = parameter_counts(arch)
    # the physics' mean dense layer: each field rounded down, so 4 x mean is within 4 elements per field
    fields = 14
    assert 0 <= counts.layers_total - 4 * counts.dense_layer.total < 4 * fields


def test_nas_ffn_mult_matches_the_published_widths():
    real = {
        **NAS,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "block_configs": [_block({"n_heads_in_group": 8}, {"ffn_mult": m}) for m in (5.25, 2.625, 1.3125, 0.5)],
    }
    widths = [layer.intermediate_size for layer in architecture_from_config(real).layers]
    # int(2 x m x 8192 / 3) rounded up to 256: 28672 (Llama-3.3-70B's width), 14336, 7168, 2730 -> 2816
    assert widths == [28_672, 14_336, 7_168, 2_816]


# ---------------------------------------------------------------------------------------------
# Llama 4: interleaved MoE, shared expert, chunked local attention and NoPE layers

LLAMA4 = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 4,
        "num_hidden_layers": 4,
        "interleave_moe_layer_step": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "intermediate_size": 5,
        "intermediate_size_mlp": 6,
        "vocab_size": 10,
        "attention_chunk_size": 16,
    },
    "vision_config": {
        "model_type": "llama4_vision_model",
        "hidden_size": 4,
        "intermediate_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 4,
        "patch_size": 2,
        "projector_input_dim": 6,
        "projector_output_dim": 5,
        "vision_output_dim": 5,
    },
}


def test_llama4_toy_layers_by_hand():
    arch = architecture_from_config(LLAMA4)
    assert [layer.mlp for layer in arch.layers] == ["dense", "moe", "dense", "moe"]  # moe_layers 1, 3
    # NoPE every 4th layer (global, full attention); the RoPE layers attend within 16-token chunks
    assert [layer.kind for layer in arch.layers] == ["chunked local 16"] * 3 + ["full attention"]
    assert [layer.rope for layer in arch.layers] == [True, True, True, False]
    assert (arch.sliding_window, arch.sliding_window_layers) == (16, 3)
    dense, moe, _, _ = parameter_counts(arch).layers
    attention = 2 * 8 * 8 + 2 * 8 * 4  # q + o 64 each, k + v 32 each: 192
    assert dense.total == attention + 3 * 8 * 6 + 16  # dense MLP of intermediate_size_mlp: 352
    # 4 experts x 3 x 8 x 5 + one shared expert 3 x 8 x 5 + router 4 x 8 (no bias)
    assert moe.total == attention + 480 + 120 + 32 + 16  # 840
    counts = parameter_counts(arch)
    assert counts.total == 80 + 80 + 8 + 2 * 352 + 2 * 840  # 2,552
    assert torch_count(builders.build_llama4, LLAMA4) == 2_552


def test_llama4_vision_tower_is_counted_apart():
    # patch linear 3 x 2 x 2 -> 4 = 48, class 4, positions (4/2)^2 + 1 = 5 rows x 4, pre/post LayerNorm 16
    # layer: q/k/v/o 4 x (16 + 4), 2 LayerNorms 16, fc1 4 x 8 + 8, fc2 8 x 4 + 4: 172
    # adapter: fc1 8 -> 6 = 48, fc2 5 -> 5 = 25 (no biases)
    assert llama4_vision_parameters(LLAMA4["vision_config"]) == 88 + 172 + 73
    counts = parameter_counts(architecture_from_config(LLAMA4))
    assert counts.vision_encoder == 333 + 5 * 8  # + the projector vision_output_dim x text hidden
    assert counts.total_with_vision == counts.total + 373
    assert architecture_from_config(LLAMA4).vision_model_type == "llama4_vision_model"


def test_siglip_tower_and_gemma3_projector_by_hand():
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": 4,
        "intermediate_size": 6,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 4,
        "patch_size": 2,
        "vision_use_head": False,
    }
    # conv 3 x 2 x 2 x 4 + 4 bias = 52, positions 4 x 4 = 16; layer 4 x 20 + 16 + (24 + 6) + (24 + 4) = 154;
    # post LayerNorm 8
    assert siglip_vision_parameters(vision) == 52 + 16 + 154 + 8
    text = {
        "model_type": "gemma3_text",
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 4,
        "intermediate_size": 6,
        "num_hidden_layers": 7,
        "vocab_size": 10,
        "sliding_window": 3,
    }
    arch = architecture_from_config({"model_type": "gemma3", "text_config": text, "vision_config": vision})
    assert arch.vision_encoder_parameters == 230 + 4 * 8 + 4  # + mm_input_projection 4 x 8 and its RMSNorm 4
    # every 6th layer global (index 5); the rest slide
    assert [layer.mixer for layer in arch.layers].index("full_attention") == 5
    assert arch.sliding_window_layers == 6 and arch.tie_word_embeddings
    assert any("vocab_size" in a for a in architecture_from_config({**text, "vocab_size": None}).assumptions)


# ---------------------------------------------------------------------------------------------
# DeepSeek-V3.2: the lightning indexer

DEEPSEEK_V32 = {
    "model_type": "deepseek_v32",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 24,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
    "intermediate_size": 96,
    "moe_intermediate_size": 16,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 3,
    "vocab_size": 50,
    "topk_method": "noaux_tc",
    "index_n_heads": 2,
    "index_head_dim": 8,
}


def test_deepseek_v32_indexer_by_hand():
    v3 = parameter_counts(architecture_from_config({**DEEPSEEK_V32, "model_type": "deepseek_v3"}))
    arch = architecture_from_config(DEEPSEEK_V32)
    v32 = parameter_counts(arch)
    # per layer: wq_b 24 x 2 x 8 = 384, wk 64 x 8 = 512, weights_proj 64 x 2 = 128 (replicated), k_norm 2 x 8
    assert v32.dense_layer.attention_replicated - v3.dense_layer.attention_replicated == 384 + 512 + 128
    assert v32.total == v3.total + 3 * (1_024 + 16)
    assert v3.total == 109_000  # tests/test_architecture.py works the V3 toy out by hand
    assert indexer_key_elements_per_token(arch) == 8
    # 3 MLA layers x 10 tokens x 8 elements x (fp8 + an fp32 scale per 128): 132/128 bytes each
    assert indexer_cache_bytes_per_sequence(arch, 10) == pytest.approx(3 * 10 * 8 * 132 / 128)
    assert indexer_key_elements_per_token(architecture_from_config({**DEEPSEEK_V32, "model_type": "deepseek_v3"})) == 0


# ---------------------------------------------------------------------------------------------
# the generic fallback

GENERIC = {
    "model_type": "brand_new_lm",
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 6,
    "vocab_size": 10,
}


def test_unknown_family_with_the_standard_fields_plans_and_says_what_it_assumed():
    arch = architecture_from_config(GENERIC)
    # q, k, v, o 8 x 8 each, SwiGLU 3 x 8 x 6, two norms: 416 a layer; untied embedding and head
    assert parameter_counts(arch).total == 80 + 80 + 8 + 2 * 416
    text = " ".join(arch.assumptions)
    for fact in ("brand_new_lm", "num_key_value_heads", "head_dim", "tie_word_embeddings", "max_position_embeddings"):
        assert fact in text, fact


def test_unknown_family_with_experts_and_layer_types():
    cfg = {
        **GENERIC,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 3,
        "sliding_window": 5,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    arch = architecture_from_config(cfg)
    assert arch.num_moe_layers == 2 and arch.sliding_window_layers == 1
    # each layer: attention 256, experts 4 x 3 x 8 x 3 = 288, router 32, norms 16
    assert parameter_counts(arch).total == 168 + 2 * (256 + 288 + 32 + 16)
    assert any("experts" in a for a in arch.assumptions)


def test_unknown_family_without_the_standard_fields_is_still_rejected_by_name():
    with pytest.raises(PlanningError) as info:
        architecture_from_config({"model_type": "mamba", "hidden_size": 8})
    message = str(info.value)
    assert message.startswith("model_type 'mamba' is not supported")
    assert "missing: num_hidden_layers, num_attention_heads, intermediate_size, vocab_size" in message


# ---------------------------------------------------------------------------------------------
# checkpoint quantization as data


def test_gpt_oss_checkpoint_stores_only_the_experts_in_mxfp4():
    q = resolve_model("gpt-oss-20b").quantization
    assert q is not None and q.method == "mxfp4"
    assert q.quantized_groups == ("routed_experts",)
    assert q.checkpoint_dtype("routed_experts") == "mxfp4"
    for group in ("attention", "router", "embedding", "lm_head"):
        assert q.checkpoint_dtype(group) == "bfloat16", group


def test_deepseek_checkpoint_is_fp8_block_wise_except_embeddings_norms_and_router():
    q = resolve_model("deepseek-r1").quantization
    assert q is not None and (q.weight_format, q.weight_block_size) == ("float8_e4m3fn", (128, 128))
    assert q.quantized_groups == ("attention", "mlp", "routed_experts", "shared_experts")
    assert q.checkpoint_dtype("router") == q.checkpoint_dtype("embedding") == "bfloat16"
    minimax = resolve_model("minimax-m2.5").quantization
    assert minimax is not None and "gate" in minimax.modules_to_not_convert
    assert minimax.quantized_groups == ("attention", "routed_experts")
    assert resolve_model("qwen3-8b").quantization is None


def test_sub_layer_norms_follow_the_present_sublayers():
    arch = architecture_from_config(NAS)
    # a layer with both sublayers has both norms; one with a no-op keeps one; a model-level check
    assert [parameter_counts(arch).layers[i].norms for i in range(4)] == [24, 12, 12, 24]
