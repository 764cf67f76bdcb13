"""planner.architecture term by term, on toy configs small enough to check by hand.

Every expected value is written as the arithmetic that produces it. Configs go through the same
parser a user's upload does (`architecture_from_config`), so the key names are exercised too.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.architecture import (
    ModelArchitecture,
    attention_score_flops_per_token,
    cached_tokens_per_layer_sum,
    kv_cache_bytes_per_token,
    kv_elements_per_token_per_layer,
    layer_parameters,
    matmul_flops_per_token,
    mean_attended_tokens,
    parameter_counts,
    prefill_attention_flops,
)
from planner.model.cache import kv_cache_bytes_per_sequence_by_layer
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.model.hf_config import architecture_from_config

# ---------------------------------------------------------------------------------------------
# toy configs

LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "vocab_size": 100,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}  # head_dim = 64 / 4 = 16

GPT2 = {
    "model_type": "gpt2",
    "n_embd": 32,
    "n_head": 4,
    "n_layer": 2,
    "n_positions": 16,
    "vocab_size": 50,
    "n_inner": None,
}  # tied by default, MLP 4 x 32 = 128, biases everywhere, learned positions

OPT = {
    "model_type": "opt",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "ffn_dim": 64,
    "vocab_size": 50,
    "max_position_embeddings": 16,
    "word_embed_proj_dim": 32,
    "do_layer_norm_before": True,
}  # enable_bias / tie default true; 16 + 2 position rows

GEMMA2 = {
    "model_type": "gemma2",
    "hidden_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "vocab_size": 40,
    "max_position_embeddings": 64,
    "sliding_window": 8,
}  # tie defaults to true; heads x head_dim = 64 != hidden 48

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
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
    "moe_layer_freq": 1,
    "num_hidden_layers": 3,
    "vocab_size": 50,
    "max_position_embeddings": 128,
    "topk_method": "noaux_tc",
    "tie_word_embeddings": False,
}

MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "vocab_size": 50,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}  # head_dim 8


def arch(cfg, **overrides):
    return architecture_from_config({**cfg, **overrides})


# ---------------------------------------------------------------------------------------------
# parameter counts


def test_llama_toy():
    c = parameter_counts(arch(LLAMA))
    assert c.embedding == 100 * 64  # 6,400
    assert c.lm_head == 100 * 64  # untied: 6,400
    assert c.final_norms == 64  # RMSNorm weight
    layer = c.dense_layer
    assert layer.attention_sharded == 64 * 4 * 16 + 4 * 16 * 64  # q + o = 4,096 + 4,096 = 8,192
    assert layer.attention_kv == 2 * 64 * 2 * 16  # k + v = 4,096
    assert layer.mlp_dense == 3 * 64 * 128  # gate, up, down = 24,576
    assert layer.norms == 2 * 64  # 128
    assert layer.attention_bias == layer.mlp_bias == 0
    assert layer.total == 8_192 + 4_096 + 24_576 + 128  # 36,992
    assert c.total == 6_400 + 2 * 36_992 + 64 + 6_400  # 86,848
    assert c.active == c.total
    assert c.non_embedding == 86_848 - 12_800  # 74,048


def test_llama_toy_tied_and_biased():
    c = parameter_counts(arch(LLAMA, tie_word_embeddings=True, attention_bias=True, mlp_bias=True))
    assert c.lm_head == 0
    # attention_bias: q (64) + k (32) + v (32) + o (64) = 192; mlp_bias: gate 128 + up 128 + down 64 = 320
    # column-parallel (split over TP) and row-parallel (replicated) biases are kept apart
    assert c.dense_layer.attention_bias == 64 + 32 + 32 and c.dense_layer.attention_out_bias == 64
    assert c.dense_layer.mlp_bias == 128 + 128 and c.dense_layer.mlp_out_bias == 64
    assert c.total == 6_400 + 2 * (36_992 + 192 + 320) + 64  # 81,472


def test_gpt2_toy():
    c = parameter_counts(arch(GPT2))
    assert c.embedding == 50 * 32  # wte 1,600
    assert c.position_embedding == 16 * 32  # wpe 512
    assert c.lm_head == 0  # tied
    assert c.final_norms == 2 * 32  # ln_f weight + bias
    layer = c.dense_layer
    # ln_1 64 + c_attn (32x96 + 96 = 3,168) + c_proj (32x32 + 32 = 1,056) + ln_2 64
    # + c_fc (32x128 + 128 = 4,224) + mlp c_proj (128x32 + 32 = 4,128) = 12,704
    assert layer.total == 64 + 3_168 + 1_056 + 64 + 4_224 + 4_128
    assert layer.attention_bias == 96 and layer.attention_out_bias == 32
    assert layer.mlp_bias == 128 and layer.mlp_out_bias == 32
    assert c.total == 1_600 + 512 + 2 * 12_704 + 64  # 27,584


def test_opt_toy_positions_have_offset_two():
    c = parameter_counts(arch(OPT))
    assert c.position_embedding == (16 + 2) * 32  # OPTLearnedPositionalEmbedding: 576
    assert c.lm_head == 0
    # q, k, v, out (32x32 + 32 each = 4,224) + self_attn_layer_norm 64 + fc1 (32x64 + 64 = 2,112)
    # + fc2 (64x32 + 32 = 2,080) + final_layer_norm 64 = 8,544
    assert c.dense_layer.total == 4 * 1_056 + 64 + 2_112 + 2_080 + 64
    assert c.total == 1_600 + 576 + 2 * 8_544 + 64  # 19,328


def test_opt_without_final_norm_and_bias():
    c = parameter_counts(arch(OPT, do_layer_norm_before=False, enable_bias=False))
    assert c.final_norms == 0
    # 4 x 32x32 + 2 norms (64 each) + 32x64 + 64x32 = 4,096 + 128 + 4,096 = 8,320
    assert c.dense_layer.total == 4 * 1_024 + 128 + 2 * 2_048


def test_gemma2_toy_four_norms_tied():
    a = arch(GEMMA2)
    assert a.tie_word_embeddings and a.norms_per_layer == 4
    c = parameter_counts(a)
    layer = c.dense_layer
    # q 48x64 + o 64x48 = 6,144; k, v 48x32 each = 3,072; MLP 3 x 48 x 96 = 13,824; norms 4 x 48 = 192
    assert layer.attention_sharded == 48 * 64 + 64 * 48
    assert layer.attention_kv == 2 * 48 * 32
    assert layer.norms == 4 * 48
    assert layer.total == 6_144 + 3_072 + 13_824 + 192  # 23,232
    assert c.total == 40 * 48 + 3 * 23_232 + 48  # 1,920 + 69,696 + 48 = 71,664
    # HF Gemma2: layer i slides iff i is even -> layers 0 and 2 of 3
    assert a.sliding_window == 8 and a.sliding_window_layers == 2


def test_deepseek_v3_toy_mla_moe():
    a = arch(DEEPSEEK_V3)
    assert a.uses_mla and a.is_moe and a.router_bias
    assert (a.num_dense_layers, a.num_moe_layers) == (1, 2)
    c = parameter_counts(a)
    dense, moe = c.dense_layer, c.moe_layer
    # q_a 64x24 = 1,536 and kv_a 64x(16+4) = 1,280 are replicated across TP ranks
    assert dense.attention_replicated == 1_536 + 1_280
    # q_b 24 x 4x(8+4) = 1,152; kv_b 16 x 4x(8+8) = 1,024; o 4x8 x 64 = 2,048
    assert dense.attention_sharded == 1_152 + 1_024 + 2_048
    assert dense.attention_kv == 0
    # norms: 2 x 64 per layer + q_a_layernorm 24 + kv_a_layernorm 16 = 168
    assert dense.norms == 128 + 24 + 16
    assert dense.mlp_dense == 3 * 64 * 96  # 18,432
    assert dense.total == 2_816 + 4_224 + 168 + 18_432  # 25,640
    assert moe.experts_routed == 8 * 3 * 64 * 16  # 24,576
    assert moe.experts_shared == 3 * 64 * (2 * 16)  # 2 shared experts of width 16: 6,144
    assert moe.router == 8 * 64 + 8  # gate + e_score_correction_bias = 520
    assert moe.mlp_dense == 0
    assert moe.total == 2_816 + 4_224 + 168 + 24_576 + 6_144 + 520  # 38,448
    assert c.total == 50 * 64 + 50 * 64 + 64 + 25_640 + 2 * 38_448  # 109,000
    # active: each MoE layer uses 2 of 8 routed experts -> 2 x 24,576 x 6/8 = 36,864 unused
    assert c.active == 109_000 - 36_864  # 72,136
    assert c.routed_experts_total == 2 * 24_576


def test_deepseek_v2_toy_without_q_lora():
    a = arch(DEEPSEEK_V3, model_type="deepseek_v2", q_lora_rank=None, topk_method="greedy")
    c = parameter_counts(a)
    # q_proj 64 x 4x12 = 3,072 (sharded); no q_a / q_a_layernorm; no router bias
    assert c.dense_layer.attention_sharded == 3_072 + 1_024 + 2_048
    assert c.dense_layer.attention_replicated == 1_280
    assert c.dense_layer.norms == 128 + 16
    assert c.moe_layer.router == 8 * 64


def test_mixtral_toy():
    a = arch(MIXTRAL)
    assert (a.num_dense_layers, a.num_moe_layers) == (0, 2)
    c = parameter_counts(a)
    moe = c.moe_layer
    # q 32x32 + o 32x32 = 2,048; k, v 32x16 each = 1,024; experts 4 x 3 x 32 x 64 = 24,576; gate 4 x 32 = 128
    assert moe.attention_sharded == 2_048 and moe.attention_kv == 1_024
    assert moe.experts_routed == 24_576
    assert moe.router == 128
    assert moe.total == 2_048 + 1_024 + 24_576 + 128 + 64  # 27,840
    assert c.total == 1_600 + 1_600 + 32 + 2 * 27_840  # 58,912
    assert c.active == 58_912 - 2 * 24_576 // 2  # top-2 of 4: half the experts idle -> 34,336
    breakdown = c.as_dict()
    assert sum(breakdown.values()) == c.total
    assert breakdown["experts_routed"] == 2 * 24_576 and breakdown["mlp_dense"] == 0


@pytest.mark.parametrize("cfg", [LLAMA, GPT2, OPT, GEMMA2, DEEPSEEK_V3, MIXTRAL])
def test_breakdown_sums_to_total(cfg):
    c = parameter_counts(arch(cfg))
    assert sum(c.as_dict().values()) == c.total
    assert min(c.as_dict().values()) >= 0


def test_layer_parameters_linear_excludes_biases_norms_router():
    layer = layer_parameters(arch(GPT2), moe_layer=False)
    assert layer.linear == 32 * 96 + 32 * 32 + 32 * 128 + 128 * 32  # 11,264 matrix elements
    assert layer.total - layer.linear == 128 + 160 + 128  # biases + 2 LayerNorms (w + b)


# ---------------------------------------------------------------------------------------------
# KV cache geometry


def test_kv_elements_mha_gqa_mqa_mla():
    mha = arch(LLAMA, num_key_value_heads=4)
    gqa = arch(LLAMA)
    mqa = arch(LLAMA, num_key_value_heads=1)
    mla = arch(DEEPSEEK_V3)
    assert kv_elements_per_token_per_layer(mha) == 2 * 4 * 16  # 128
    assert kv_elements_per_token_per_layer(gqa) == 2 * 2 * 16  # 64
    assert kv_elements_per_token_per_layer(mqa) == 2 * 1 * 16  # 32
    assert kv_elements_per_token_per_layer(mla) == 16 + 4  # latent + decoupled RoPE key = 20


def test_kv_elements_tensor_parallel_split_and_replication():
    gqa = arch(LLAMA)  # 2 KV heads of 16
    assert kv_elements_per_token_per_layer(gqa, 2) == 2 * 1 * 16  # one head per rank: 32
    assert kv_elements_per_token_per_layer(gqa, 4) == 2 * 1 * 16  # TP 4 > 2 heads: each rank keeps one copy
    mqa = arch(LLAMA, num_key_value_heads=1)
    assert kv_elements_per_token_per_layer(mqa, 4) == 32
    mla = arch(DEEPSEEK_V3)
    assert kv_elements_per_token_per_layer(mla, 4) == 20  # the latent is not split
    # broadcasts over numpy
    got = kv_elements_per_token_per_layer(gqa, np.array([1, 2, 4]))
    assert list(got) == [64, 32, 32]


def test_kv_cache_bytes_per_token():
    assert kv_cache_bytes_per_token(arch(LLAMA), 2) == 2 * 64 * 2  # layers x elements x bytes = 256
    assert kv_cache_bytes_per_token(arch(DEEPSEEK_V3), 2) == 3 * 20 * 2  # 120
    assert kv_cache_bytes_per_token(arch(GPT2), 4) == 2 * (2 * 32) * 4  # MHA 4 heads x 8 = 32: 512


def test_sliding_window_token_sums():
    g = arch(GEMMA2)  # 3 layers, 2 of them slide with a window of 8
    assert cached_tokens_per_layer_sum(g, 5) == pytest.approx(3 * 5)  # below the window: 15
    assert cached_tokens_per_layer_sum(g, 8) == pytest.approx(3 * 8)  # 24
    assert cached_tokens_per_layer_sum(g, 20) == pytest.approx(1 * 20 + 2 * 8)  # 36
    assert mean_attended_tokens(g, 20) == pytest.approx(36 / 3)
    # a pipeline stage of one layer gets the proportional share: 20/3 + 2/3 x 8 = 12
    assert cached_tokens_per_layer_sum(g, 20, layers=1) == pytest.approx(12)
    full = arch(LLAMA)
    assert cached_tokens_per_layer_sum(full, 20) == 2 * 20
    mistral = arch(LLAMA, model_type="mistral", sliding_window=8)  # every layer slides
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (8, 2)
    assert cached_tokens_per_layer_sum(mistral, 20) == pytest.approx(2 * 8)
    assert list(cached_tokens_per_layer_sum(g, np.array([5, 20]))) == pytest.approx([15, 36])


def test_qwen2_sliding_window_off_unless_enabled():
    qwen = {**LLAMA, "model_type": "qwen2", "sliding_window": 8, "use_sliding_window": False}
    assert architecture_from_config(qwen).sliding_window is None
    assert architecture_from_config({**qwen, "use_sliding_window": True}).sliding_window_layers == 2


# ---------------------------------------------------------------------------------------------
# FLOPs


def test_attention_score_flops():
    a = arch(LLAMA)  # 4 heads x 16
    # QK^T: 2 x 4 x 16 x c; attention x V: 2 x 4 x 16 x c -> 256 per key
    assert attention_score_flops_per_token(a, 1) == 2 * 4 * (16 + 16)
    assert attention_score_flops_per_token(a, 10) == 2_560
    mla = arch(DEEPSEEK_V3)
    # prefill runs decompressed heads: qk = 8 + 4, v = 8 -> 2 x 4 x 20 = 160 per key
    assert attention_score_flops_per_token(mla, 1, "prefill") == 2 * 4 * (12 + 8)
    # decode runs over the latent: qk = 16 + 4, v = 16 -> 2 x 4 x 36 = 288 per key
    assert attention_score_flops_per_token(mla, 1, "decode") == 2 * 4 * (20 + 16)


def test_prefill_attention_flops_causal_sum():
    a = arch(LLAMA)
    # 2 layers x 256 per key x (1 + 2 + 3 + 4) keys
    assert prefill_attention_flops(a, 4) == 2 * 256 * 10
    g = arch(GEMMA2)  # per key 2 x 4 x 32 = 256; window 8 on 2 of 3 layers
    s = 20
    full = s * (s + 1) / 2  # 210
    capped = 8 * 9 / 2 + (20 - 8) * 8  # 36 + 96 = 132
    assert prefill_attention_flops(g, s) == pytest.approx(256 * (1 * full + 2 * capped))
    assert prefill_attention_flops(g, 6) == pytest.approx(256 * 3 * 21)  # below the window: all full


def test_matmul_flops_per_token():
    c = parameter_counts(arch(LLAMA))
    # 2 x (layer matrices + norms 2 x 36,992 + final norm 64, plus the lm_head 6,400)
    assert matmul_flops_per_token(c) == 2 * (2 * 36_992 + 64 + 6_400)
    assert matmul_flops_per_token(c, include_lm_head=False) == 2 * (2 * 36_992 + 64)
    tied = parameter_counts(arch(GPT2))
    # tied: the embedding matrix (1,600) serves as the head
    assert matmul_flops_per_token(tied) == 2 * (2 * 12_704 + 64 + 1_600)
    moe = parameter_counts(arch(MIXTRAL))
    assert matmul_flops_per_token(moe) == 2 * (34_336 - 3_200 + 1_600)


# ---------------------------------------------------------------------------------------------
# the normalized model validates itself


def test_architecture_rejects_inconsistent_shapes():
    base = arch(LLAMA).model_dump(exclude={"is_moe", "uses_mla", "num_moe_layers", "num_dense_layers"})
    with pytest.raises(ValueError, match="not a multiple of num_key_value_heads"):
        ModelArchitecture(**{**base, "num_kv_heads": 3})
    with pytest.raises(ValueError, match="between 1 and"):
        ModelArchitecture(**{**base, "num_experts": 4, "experts_per_token": 5, "expert_intermediate_size": 8})
    with pytest.raises(ValueError, match="moe_intermediate_size"):
        ModelArchitecture(**{**base, "num_experts": 4, "experts_per_token": 2})
    with pytest.raises(ValueError, match="leaves no MoE layers"):
        ModelArchitecture(
            **{
                **base,
                "num_experts": 4,
                "experts_per_token": 2,
                "expert_intermediate_size": 8,
                "first_k_dense_layers": 2,
            }
        )
    with pytest.raises(ValueError, match="more sliding-window layers"):
        ModelArchitecture(**{**base, "sliding_window": 4, "sliding_window_layers": 3})


# ---------------------------------------------------------------------------------------------
# every model is a list of layers; the per-layer cache terms agree with the uniform ones


def test_uniform_models_derive_their_layers():
    assert [layer.mixer for layer in arch(GEMMA2).layers] == [
        "sliding_attention",
        "full_attention",
        "sliding_attention",
    ]
    assert [layer.mlp for layer in arch(DEEPSEEK_V3).layers] == ["dense", "moe", "moe"]  # first_k_dense_replace 1
    assert arch(LLAMA).layer_kind_counts == {"full attention": 2}
    c = parameter_counts(arch(DEEPSEEK_V3))
    # the exact per-layer list and the dense/MoE representatives describe the same 109,000 elements
    assert [layer.total for layer in c.layers] == [25_640, 38_448, 38_448]
    assert c.layers_total == c.dense_layer.total * c.num_dense_layers + c.moe_layer.total * c.num_moe_layers


@pytest.mark.parametrize("model_id", [m for m in catalog_model_ids() if not resolve_model(m).is_hybrid])
def test_per_layer_kv_bytes_equal_the_uniform_formula_on_attention_only_models(model_id):
    a = resolve_model(model_id)
    for context in (100, 5_000, 200_000):
        for tp in (1, 8):
            uniform = cached_tokens_per_layer_sum(a, context) * kv_elements_per_token_per_layer(a, tp) * 2
            assert kv_cache_bytes_per_sequence_by_layer(a, context, 2, tp) == pytest.approx(uniform), (context, tp)
