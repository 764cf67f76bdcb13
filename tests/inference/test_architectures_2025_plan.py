"""Plans of 2025-26 architectures use their per-layer physics: KV only where softmax attention caches it,
a constant recurrent state for Gated DeltaNet / Mamba-2 layers, windows, V3.2's indexer, and weights that
equal the checkpoint's parameters.

Expected numbers are worked by hand from the real config.json numbers (written out below, independent of
the engine's code); the configs are read where they lie in shared/reference/hf_configs/.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import kv_cache_bytes_per_token, parameter_counts, prefill_attention_flops
from planner.model.cache import (
    context_tokens_for_cache_bytes,
    decode_cache_traffic_bytes,
    sequence_cache_bytes,
)
from planner.model.catalog import resolve_model
from planner.model.hf_config import architecture_from_config
from planner.physics import memory as mem
from planner.scenario import parse_scenario
from planner.search.sweep import evaluate_inference, inference_grid, scenario_for_row
from planner.training.scenario import TrainingScenario
from planner.training.step_time import attention_forward_flops_per_token
from tests.reference_data import require_reference

HF_CONFIGS = require_reference() / "hf_configs"
NAMES = sorted(path.stem for path in HF_CONFIGS.glob("*.json"))


def config(name: str) -> dict:
    return json.loads((HF_CONFIGS / f"{name}.json").read_text())


def arch_of(name: str):
    return architecture_from_config(config(name))


def inference(model, **fields) -> InferenceScenario:
    return parse_scenario({"kind": "inference", "model": model, **fields})


def kv_room(p) -> float:
    """Budget left for cache once weights, activations, logits and runtime are resident (per GPU)."""
    return p.memory.budget_bytes - (p.memory.total_bytes - p.memory.components["kv_cache_bytes"])


# ---------------------------------------------------------------------------------------------
# hand-worked bytes per sequence (whole model, bf16)

# Qwen3-Next-80B-A3B: 48 layers, full attention every 4th (full_attention_interval 4): 12 attention layers
# with 2 KV heads of 256; 36 Gated DeltaNet layers with 32 value heads, 16 key heads, head dims 128, conv 4.
QWEN3_NEXT_KV_PER_TOKEN = 12 * 2 * 2 * 256 * 2  # 24,576 B (every layer would be 98,304)
QWEN3_NEXT_STATE_PER_LAYER = (32 * 128 * 128 + (4 - 1) * (2 * 16 * 128 + 32 * 128)) * 2  # (524,288 + 24,576) x 2
QWEN3_NEXT_STATE = 36 * QWEN3_NEXT_STATE_PER_LAYER  # 39,518,208 B

# Nemotron-H-56B: 118 blocks 'M-M-...*...': 54 Mamba-2 (256 heads x 64, d_state 256, 8 groups, conv 4),
# 10 attention (8 KV heads of 128), 54 MLP blocks (no cache). No mamba_ssm_cache_dtype: state in bf16.
NEMOTRON_H_KV_PER_TOKEN = 10 * 2 * 8 * 128 * 2  # 40,960 B
NEMOTRON_H_STATE_PER_LAYER = (256 * 64 * 256 + (4 - 1) * (256 * 64 + 2 * 8 * 256)) * 2  # (4,194,304 + 61,440) x 2
NEMOTRON_H_STATE = 54 * NEMOTRON_H_STATE_PER_LAYER  # 459,620,352 B

# gpt-oss-120b: 36 layers alternating sliding (128) and full attention, 8 KV heads of 64.
GPT_OSS_KV_PER_TOKEN_PER_LAYER = 2 * 8 * 64 * 2  # 2,048 B

# Llama-3.3-Nemotron-Super-49B (Nemotron-NAS): 80 blocks, 49 GQA attention blocks (64 heads / 8 per group = 8
# KV heads of 8192 / 64 = 128), 31 attention no-ops (no cache).
NAS_KV_PER_TOKEN = 49 * 2 * 8 * 128 * 2  # 200,704 B (every layer would be 327,680)


def test_qwen3_next_bytes_per_sequence_by_hand():
    arch = arch_of("qwen3-next-80b-a3b-thinking")
    assert kv_cache_bytes_per_token(arch, 2) == QWEN3_NEXT_KV_PER_TOKEN == 24_576
    assert QWEN3_NEXT_STATE == 39_518_208
    context = 10_000
    assert sequence_cache_bytes(arch, context, 2, 2) == context * QWEN3_NEXT_KV_PER_TOKEN + QWEN3_NEXT_STATE
    # TP 2: one KV head per rank, half of every DeltaNet head's state
    assert sequence_cache_bytes(arch, context, 2, 2, 2) == (context * QWEN3_NEXT_KV_PER_TOKEN + QWEN3_NEXT_STATE) / 2
    # An fp8 KV cache halves the KV, not the recurrent state (kept in the model dtype)
    assert sequence_cache_bytes(arch, context, 1, 2) == context * QWEN3_NEXT_KV_PER_TOKEN / 2 + QWEN3_NEXT_STATE
    # The per-GPU term the plan reads, paged in blocks of 16: 10,000 -> 10,000 (a multiple of 16)
    assert mem.kv_cache_bytes_per_sequence(arch, 1, 1, context, 2, 16) == 285_278_208


def test_nemotron_h_bytes_per_sequence_by_hand():
    arch = arch_of("nemotron-h-56b-base-8k")
    assert kv_cache_bytes_per_token(arch, 2) == NEMOTRON_H_KV_PER_TOKEN == 40_960
    assert sequence_cache_bytes(arch, 8_192, 2, 2) == 8_192 * NEMOTRON_H_KV_PER_TOKEN + NEMOTRON_H_STATE
    assert NEMOTRON_H_STATE == 459_620_352


def test_nemotron_3_keeps_its_ssm_state_in_fp32():
    # mamba_ssm_cache_dtype float32: the SSM state in 4 bytes, the conv state in the activation dtype.
    # 23 Mamba layers (64 heads x 64, d_state 128, 8 groups, conv 4), 6 attention layers (2 KV heads of 128).
    arch = arch_of("nemotron-3-nano-30b-a3b-bf16")
    state = 23 * (64 * 64 * 128 * 4 + (4 - 1) * (64 * 64 + 2 * 8 * 128) * 2)  # 23 x 2,134,016
    assert sequence_cache_bytes(arch, 10_000, 2, 2) == 10_000 * 6 * 2 * 2 * 128 * 2 + state == 110_522_368


def test_gpt_oss_sliding_layers_cap_at_128():
    arch = arch_of("gpt-oss-120b")
    assert kv_cache_bytes_per_token(arch, 2) == 36 * GPT_OSS_KV_PER_TOKEN_PER_LAYER == 73_728
    # 18 full layers hold the whole context, 18 sliding layers at most 128 tokens
    assert sequence_cache_bytes(arch, 8_192, 2) == (18 * 8_192 + 18 * 128) * GPT_OSS_KV_PER_TOKEN_PER_LAYER
    assert sequence_cache_bytes(arch, 100, 2) == 36 * 100 * GPT_OSS_KV_PER_TOKEN_PER_LAYER
    # an engine that ignores the window keeps the whole context in every layer
    assert sequence_cache_bytes(arch, 8_192, 2, honor_window=False) == 36 * 8_192 * GPT_OSS_KV_PER_TOKEN_PER_LAYER


def test_nemotron_nas_no_op_layers_hold_nothing():
    arch = arch_of("llama-3.3-nemotron-super-49b-v1")
    assert kv_cache_bytes_per_token(arch, 2) == NAS_KV_PER_TOKEN == 200_704
    assert sequence_cache_bytes(arch, 4_096, 2) == 4_096 * NAS_KV_PER_TOKEN
    # TP 8: one KV head per rank in each of the 49 attention layers
    assert sequence_cache_bytes(arch, 4_096, 2, 2, 8) == 4_096 * 49 * 2 * 1 * 128 * 2


def test_deepseek_v32_indexer_cache_and_sparse_decode_reads():
    # 61 MLA layers: latent 512 + rope 64 per token; indexer keys of 128 fp8 + one fp32 scale (132 B); top-2048
    arch = arch_of("deepseek-v3.2")
    latent, indexer = (512 + 64) * 2, 132
    assert sequence_cache_bytes(arch, 10_000, 2) == 61 * 10_000 * (latent + indexer)
    # decode reads the 2,048 keys the indexer selects, and every indexer key
    assert decode_cache_traffic_bytes(arch, 10_000, 2) == 61 * (2_048 * latent + 10_000 * indexer)
    assert decode_cache_traffic_bytes(arch, 1_000, 2) == 61 * 1_000 * (latent + indexer)


def test_recurrent_state_is_read_and_written_every_decode_step():
    arch = arch_of("qwen3-next-80b-a3b-thinking")
    assert decode_cache_traffic_bytes(arch, 4_096, 2, 2) == 4_096 * QWEN3_NEXT_KV_PER_TOKEN + 2 * QWEN3_NEXT_STATE


# ---------------------------------------------------------------------------------------------
# plans: max concurrency, max context, decode traffic


def test_qwen3_next_max_concurrency_on_h100_rises_by_the_layer_ratio():
    s = inference("qwen3-next-80b-a3b", gpu="h100-sxm", num_gpus=4, tensor_parallel=4, prompt_tokens=32_768,
                  output_tokens=1_024, concurrency=64)  # fmt: skip
    p = plan(s)
    context = 32_768 + 1_024  # 33,792: a whole number of 16-token blocks
    # TP 4 over 2 KV heads: each rank keeps one head (replicated); the DeltaNet state splits 4 ways
    per_sequence = context * QWEN3_NEXT_KV_PER_TOKEN / 2 + QWEN3_NEXT_STATE / 4  # 415,236,096 + 9,879,552
    every_layer = context * 48 * 2 * 1 * 256 * 2  # KV counted on all 48 layers: 1,660,944,384
    assert p.memory.components["kv_cache_bytes"] == pytest.approx(64 * per_sequence, rel=1e-12)
    room = kv_room(p)
    # vLLM V1 accounting (planner.physics.runtimes) charges 2.1 GiB of NCCL / all-reduce growth at TP 4, and the
    # profiling step's fused-MoE caches (10 routed copies x (2048 + 128) per token: memory.fused_moe_workspace_*)
    assert p.memory.max_concurrency == math.floor(room / per_sequence) == 80
    assert math.floor(room / every_layer) == 20  # what counting KV on every layer allowed
    assert every_layer / per_sequence == pytest.approx(1_660_944_384 / 425_115_648)  # 3.907x
    assert p.memory.fits


def test_nemotron_h_max_concurrency_counts_attention_kv_and_mamba_state():
    s = inference(config("nemotron-h-56b-base-8k"), gpu="h100-sxm", num_gpus=2, tensor_parallel=2,
                  prompt_tokens=4_096, output_tokens=1_024, concurrency=8)  # fmt: skip
    p = plan(s)
    context = 5_120
    # TP 2: 4 KV heads per rank; Mamba heads split (8 groups divide by 2)
    per_sequence = (context * NEMOTRON_H_KV_PER_TOKEN + NEMOTRON_H_STATE) / 2
    room = kv_room(p)
    assert p.memory.max_concurrency == math.floor(room / per_sequence)
    every_layer = context * 118 * 2 * 4 * 128 * 2
    assert p.memory.max_concurrency > 3 * math.floor(room / every_layer)


def test_gpt_oss_window_lifts_max_concurrency_by_the_exact_ratio():
    fields = dict(gpu="h100-sxm", num_gpus=4, tensor_parallel=4, prompt_tokens=7_168, output_tokens=1_024)
    honoured = plan(inference("gpt-oss-120b", **fields))
    ignored = plan(inference("gpt-oss-120b", honor_sliding_window=False, **fields))
    # TP 4: 2 of the 8 KV heads per rank
    per_sequence = (18 * 8_192 + 18 * 128) * GPT_OSS_KV_PER_TOKEN_PER_LAYER / 4
    whole = 36 * 8_192 * GPT_OSS_KV_PER_TOKEN_PER_LAYER / 4
    assert honoured.memory.components["kv_cache_bytes"] == 64 * per_sequence
    assert kv_room(honoured) == pytest.approx(kv_room(ignored), rel=1e-12)  # totals differ by the KV only
    assert honoured.memory.max_concurrency == math.floor(kv_room(honoured) / per_sequence)
    assert ignored.memory.max_concurrency == math.floor(kv_room(ignored) / whole)
    assert whole / per_sequence == pytest.approx(2 * 8_192 / (8_192 + 128))  # 1.969x
    assert honoured.memory.max_concurrency > 1.9 * ignored.memory.max_concurrency > 0


def test_max_context_inverts_the_cache_bytes():
    for name in ("qwen3-next-80b-a3b-thinking", "gpt-oss-120b", "nemotron-h-56b-base-8k", "deepseek-v3.2",
                 "llama-3.3-nemotron-super-49b-v1"):  # fmt: skip
        arch = arch_of(name)
        for context in (50, 128, 129, 3_000, 70_000):
            for tp in (1, 2):
                budget = sequence_cache_bytes(arch, context, 2, 2, tp)
                assert context_tokens_for_cache_bytes(arch, budget, 2, 2, tp) == pytest.approx(context), name
    qwen = arch_of("qwen3-next-80b-a3b-thinking")
    assert context_tokens_for_cache_bytes(qwen, QWEN3_NEXT_STATE - 1, 2, 2) == 0  # even the state does not fit
    scout = resolve_model("llama-4-scout")  # chunked layers stop at 8,192; NoPE layers grow
    budget = sequence_cache_bytes(scout, 20_000, 2)
    assert context_tokens_for_cache_bytes(scout, budget, 2) == pytest.approx(20_000)
    mistral = resolve_model("mistral-7b-v0.1")  # every layer slides: memory never limits the context
    assert context_tokens_for_cache_bytes(mistral, 1e9, 2) == np.inf
    budgets = np.array([sequence_cache_bytes(qwen, c, 2, 2, 2) for c in (100, 5_000)])
    assert list(context_tokens_for_cache_bytes(qwen, budgets, 2, 2, 2)) == pytest.approx([100, 5_000])


def test_plan_max_context_holds_in_the_room():
    p = plan(inference("qwen3-next-80b-a3b", gpu="h100-sxm", num_gpus=4, tensor_parallel=4, concurrency=8))
    arch = resolve_model("qwen3-next-80b-a3b")
    room_per_sequence = kv_room(p) / 8
    longest = p.memory.max_context_tokens
    assert longest == arch.max_context_tokens or (
        mem.kv_cache_bytes_per_sequence(arch, 4, 1, longest, 2, 16) <= room_per_sequence
        < mem.kv_cache_bytes_per_sequence(arch, 4, 1, longest + 16, 2, 16)
    )  # fmt: skip


def test_decode_attention_flops_count_only_attending_layers():
    qwen = plan(inference("qwen3-next-80b-a3b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2, concurrency=1,
                          prompt_tokens=65_536, output_tokens=2))  # fmt: skip
    short = plan(inference("qwen3-next-80b-a3b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2, concurrency=1,
                           prompt_tokens=1, output_tokens=2))  # fmt: skip
    # one query attends 65,536 more keys in each of the 12 attention layers: 2 x 16 heads x (256 + 256) x c
    # FLOPs per layer, split over the 2 GPUs
    extra = 12 * 2 * 16 * (256 + 256) * 65_535 / 2
    assert qwen.performance.decode.flops - short.performance.decode.flops == pytest.approx(extra, rel=1e-9)


def test_training_token_mixing_flops_of_a_hybrid_stack():
    arch = arch_of("qwen3-next-80b-a3b-thinking")
    s = 4_096
    # Gated DeltaNet, per layer and token: 7 x 32 heads x 128 x 128 (state) + 2 x 4 x 8,192 conv channels
    recurrent = 36 * (7 * 32 * 128 * 128 + 2 * 4 * (2 * 16 * 128 + 32 * 128))  # 134,479,872
    scores = 2 * 16 * (256 + 256)  # per key, one attention layer
    unfused = (12 * scores * s + recurrent) / 48  # every key of the masked matrix, 12 of 48 layers
    causal = (12 * scores * s * (s + 1) / 2 / s + recurrent) / 48
    assert attention_forward_flops_per_token(arch, s, False) == pytest.approx(unfused, rel=1e-12)
    assert attention_forward_flops_per_token(arch, s, True) == pytest.approx(causal, rel=1e-12)


def test_chunked_attention_restarts_every_chunk_in_prefill():
    scout = resolve_model("llama-4-scout")  # 36 chunked layers (8,192), 12 NoPE global layers; 40 heads of 128
    per_key = 2 * 40 * (128 + 128)
    s = 20_000  # two whole chunks and 3,616 tokens
    chunked = 2 * 8_192 * 8_193 / 2 + 3_616 * 3_617 / 2
    expected = per_key * (12 * s * (s + 1) / 2 + 36 * chunked)
    assert prefill_attention_flops(scout, s) == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# the sweep runs the same per-layer terms over arrays


@pytest.mark.parametrize("model", ["qwen3-next-80b-a3b", "gpt-oss-20b", "llama-4-scout"])
def test_sweep_equals_plan_for_mixed_stacks(model):
    base = InferenceScenario(model=model, num_gpus=8, tensor_parallel=8, prompt_tokens=16_384)
    grid = inference_grid(
        base, tensor_parallel=[1, 2, 4, 8], pipeline_parallel=[1, 2], weight_dtypes=["bf16", "fp8"],
        kv_cache_dtypes=["bf16", "fp8"], concurrency=[1, 50],
    )  # fmt: skip
    result = evaluate_inference(base, grid)
    for _, row in result[result.valid].iterrows():
        p = plan(scenario_for_row(base, row))
        assert row["kv_cache_bytes"] == p.memory.components["kv_cache_bytes"]
        assert row["weights_bytes"] == p.memory.components["weights_bytes"]
        assert row["max_concurrency"] == p.memory.max_concurrency
        assert row["tpot_seconds"] == p.performance.tpot_seconds


# ---------------------------------------------------------------------------------------------
# weights = the checkpoint's parameters (sinks, expert and router biases, vision tower)


@pytest.mark.parametrize("name", NAMES)
def test_bf16_weights_on_one_gpu_are_every_parameter(name):
    arch = arch_of(name)
    counts = parameter_counts(arch)
    assert mem.weight_bytes(counts, arch, 1, 1, 1, 2, 2, 2) == 2 * counts.total_with_vision


def test_gpt_oss_weights_include_sinks_and_expert_biases():
    arch = arch_of("gpt-oss-120b")
    counts = parameter_counts(arch)
    # 36 layers x 64 sinks; 36 x 128 experts x (gate_up bias 2 x 2,880 + down bias 2,880); router bias 128 x 36
    assert sum(layer.attention_sinks for layer in counts.layers) == 36 * 64
    assert sum(layer.experts_bias for layer in counts.layers) == 36 * 128 * 3 * 2_880
    # Split over EP 8: the expert biases split with the experts, sinks with the heads over TP
    one = mem.weight_bytes(counts, arch, 1, 1, 1, 2, 2, 2)
    spread = mem.weight_bytes(counts, arch, 1, 1, 8, 2, 2, 2)
    routed = 36 * 128 * (3 * 2_880 * 2_880 + 3 * 2_880)  # matrices + biases
    assert one - spread == pytest.approx(2 * routed * (1 - 1 / 8))


def test_vision_tower_is_in_the_weights_and_the_parameter_count():
    arch = resolve_model("gemma-3-27b")
    counts = parameter_counts(arch)
    p = plan(inference("gemma-3-27b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2))
    assert p.model.params_total == counts.total_with_vision == counts.total + counts.vision_encoder
    assert p.model.parameter_breakdown["vision_encoder"] == counts.vision_encoder
    assert sum(p.model.parameter_breakdown.values()) == p.model.params_total
    text_only = mem.weight_bytes(counts, arch, 2, 1, 1, 2, 2, 2) - counts.vision_encoder / 2 * 2
    assert p.memory.components["weights_bytes"] - text_only == pytest.approx(counts.vision_encoder)


# ---------------------------------------------------------------------------------------------
# what the plan says


def test_plan_lists_the_parser_assumptions_and_the_layer_mix():
    qwen = plan(inference("qwen3-next-80b-a3b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2))
    text = " ".join(qwen.assumptions)
    assert "36 linear attention" in text and "12 full attention" in text
    assert "KV cache only on the 12 softmax-attention layers of 48" in text
    r1 = plan(inference(config("deepseek-r1"), gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8"))
    assert any("num_nextn_predict_layers=1" in line for line in r1.assumptions)
    gemma = plan(inference("gemma-3-27b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2))
    assert any("Vision tower" in line for line in gemma.assumptions)
    oss = plan(inference("gpt-oss-20b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1))
    assert any("Sliding-window layers (12 of 24) cache at most 128 tokens" in line for line in oss.assumptions)


def test_generic_fallback_is_a_warning_with_its_assumptions():
    cfg = {
        "model_type": "mystery_lm",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "intermediate_size": 8192,
        "vocab_size": 32000,
    }
    p = plan(inference(cfg, gpu="h100-sxm", num_gpus=1, tensor_parallel=1))
    assert any("'mystery_lm' has no dedicated parser" in w for w in p.warnings)
    assert any("num_key_value_heads" in a for a in p.assumptions)
    trained = plan(TrainingScenario.model_validate({"model": cfg, "gpu": "h100-sxm", "num_gpus": 8}))
    assert any("'mystery_lm' has no dedicated parser" in w for w in trained.warnings)
    assert any("num_key_value_heads" in a for a in trained.assumptions)
