"""Trade-offs: deltas equal the difference of two full plans; frontiers are non-dominated; the search
never returns a configuration that does not fit or breaks a constraint."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from planner import PlanningError, parse_scenario, plan, units
from planner.cli.main import main
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.search.alternatives import alternatives, catalog_sizes
from planner.search.checklist import QUESTIONS, checklist
from planner.search.constraints import (
    INFERENCE_EQUIVALENCE,
    apply_constraints,
    collapse_equivalent,
    pareto_front,
    parse_constraint,
    search,
)
from planner.search.diagnosis import diagnose, techniques
from planner.search.inference_tradeoffs import inference_techniques
from planner.search.report import TradeoffReport, tradeoff_report
from planner.search.sweep import evaluate_inference, inference_grid
from planner.search.training_tradeoffs import training_techniques
from planner.training.elementwise_kernels import elementwise_seconds
from planner.training.inputs import training_hardware, training_inputs
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops

BASE = InferenceScenario()


# Llama 3.1 70B by hand (its config.json): 80 layers, 8 KV heads of 128, hidden 8192, vocab 128,256,
# 70,553,706,496 parameters of which 2 x 128,256 x 8,192 are embedding + untied head and
# 80 x 2 x 8,192 + 8,192 are RMSNorm weights (kept 16-bit when the linears are quantized).
LLAMA70_PARAMS = 70_553_706_496
LLAMA70_LINEAR_PARAMS = LLAMA70_PARAMS - 2 * 128_256 * 8_192 - (80 * 2 + 1) * 8_192
# KV bytes on one of 4 TP ranks (2 KV heads each), bf16, 64 sequences x (2048 + 512) tokens:
LLAMA70_KV_BYTES_PER_GPU = 2 * 80 * (8 // 4) * 128 * 2 * 64 * (2048 + 512)


def _key(changes: dict) -> tuple:
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in changes.items()))


def test_each_planned_technique_saves_what_the_arithmetic_says():
    """The default scenario's technique deltas against numbers worked by hand from the model's shape,
    the formats' bit widths and the layout (none of them from the engine)."""
    base = plan(BASE)
    assert base.memory.components["kv_cache_bytes"] == LLAMA70_KV_BYTES_PER_GPU == 13_421_772_800
    by_change = {}
    for effect in (e for e in inference_techniques(BASE) if e.applicable and not e.derived):
        changed = {k: v for k, v in effect.scenario.items() if v != BASE.model_dump(mode="json").get(k)}
        by_change[_key(changed)] = effect

    def saved(**change):
        return -by_change[_key(change)].delta_memory_bytes

    # fp8 / int8 weights: one byte instead of two for every linear weight, a quarter on each TP rank.
    assert saved(weight_dtype="fp8") == LLAMA70_LINEAR_PARAMS * (2 - 1) / 4 == 17_112_760_320
    assert saved(weight_dtype="int8") == LLAMA70_LINEAR_PARAMS * (2 - 1) / 4
    # 4-bit formats: half a byte plus the block scales (NVFP4 one fp8 per 16, MXFP4 one e8m0 per 32,
    # GPTQ/AWQ int4 an fp16 scale and a packed 4-bit zero per group of 128, as AutoGPTQ's QuantLinear).
    assert saved(weight_dtype="nvfp4") == pytest.approx(LLAMA70_LINEAR_PARAMS * (2 - 0.5 - 1 / 16) / 4)
    assert saved(weight_dtype="mxfp4") == pytest.approx(LLAMA70_LINEAR_PARAMS * (2 - 0.5 - 1 / 32) / 4)
    assert saved(weight_dtype="int4") == pytest.approx(LLAMA70_LINEAR_PARAMS * (2 - 0.5 - 2.5 / 128) / 4)
    # KV cache: half of it at 8 bits; NVFP4 KV keeps 0.5 + 1/16 of a byte per element.
    assert saved(kv_cache_dtype="fp8") == LLAMA70_KV_BYTES_PER_GPU / 2
    assert saved(kv_cache_dtype="int8") == LLAMA70_KV_BYTES_PER_GPU / 2
    assert saved(kv_cache_dtype="nvfp4") == pytest.approx(LLAMA70_KV_BYTES_PER_GPU * (2 - 0.5625) / 2)
    # Another replica halves the sequences each replica holds, so half the KV cache.
    assert saved(num_gpus=8) == LLAMA70_KV_BYTES_PER_GPU / 2
    # An EAGLE head adds one decoder layer (855,654,400 parameters: q/o 8192^2 each, k/v 8192 x 1024 each,
    # a 3 x 8192 x 28672 MLP, two norms) and its 2h x h fusion projection, in bf16 over 4 ranks, plus that
    # layer's KV: 2 x 2 KV heads per rank x 128 x 2 bytes x 64 sequences x (2560 + 3 drafted, in 16-token
    # blocks = 2576) tokens.
    eagle = {
        "speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": None, "draft_model": None}
    }
    eagle_bytes = (855_654_400 + 2 * 8192 * 8192) * 2 / 4 + 2 * 2 * 128 * 2 * 64 * 2576
    assert -saved(**eagle) == eagle_bytes
    # A prefix-cache hit changes prefill work, not what the cache must hold.
    prefix = by_change[_key({"prefix_cache_hit_rate": 0.5})]
    assert prefix.delta_memory_bytes == 0 and prefix.delta_time_seconds < 0
    # Every planned move that frees bandwidth-bound bytes makes decode faster here (batch 64 on H100s).
    for change, effect in by_change.items():
        assert effect.delta_time_seconds < 0, change
        assert effect.delta_throughput > 0, change


def test_quantization_is_flagged_as_changing_numerics_and_sharding_is_not():
    effects = inference_techniques(BASE)
    by_name = {e.technique: e for e in effects}
    assert by_name["Weight quantization"].changes_numerics
    assert by_name["KV cache quantization"].changes_numerics
    assert not by_name["Tensor parallelism"].changes_numerics
    assert not by_name["Offload to host"].changes_numerics


def test_inapplicable_technique_says_why():
    scenario = InferenceScenario(model="llama-3.1-70b", num_gpus=64, tensor_parallel=64)
    effect = next(e for e in inference_techniques(scenario) if e.technique == "Tensor parallelism")
    assert not effect.applicable and "does not divide" in effect.reason


def test_missing_fp8_on_a100_is_flagged():
    scenario = InferenceScenario(gpu="a100-80gb")
    fp8 = next(e for e in inference_techniques(scenario) if e.variant.endswith("fp8") and "weights" in e.variant)
    assert "no native fp8" in fp8.costs


def test_dropping_the_kv_cache_frees_it_and_costs_decode_time():
    effect = next(e for e in inference_techniques(BASE) if e.technique == "KV cache vs recompute")
    # Llama 3.1 70B, TP 4: 80 layers x K and V x (8 KV heads / 4) x 128 head dim x 2 bytes (bf16)
    # = 81,920 bytes per token per GPU; 64 sequences x (2,048 + 512) tokens = 163,840 tokens
    # -> 13,421,772,800 bytes freed per GPU.
    assert effect.delta_memory_bytes == -(80 * 2 * 2 * 128 * 2) * (64 * 2560) == -13_421_772_800
    assert effect.delta_time_seconds > 0 and effect.derived


def test_diagnosis_names_the_binding_resource_with_evidence():
    d = diagnose(BASE)
    assert d.binding == plan(BASE).bottleneck == "memory_bandwidth"
    assert d.arithmetic_intensity_flops_per_byte < d.ridge_point_flops_per_byte
    assert abs(sum(d.time_shares.values()) - 1) < 1e-9
    assert d.relief and all(e.delta_throughput > 0 for e in d.relief)
    over = diagnose(InferenceScenario(concurrency=2000))
    assert over.binding == "capacity" and all(e.delta_memory_bytes < 0 for e in over.relief)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    grid = inference_grid(
        BASE,
        gpus=["h100-sxm", "h200", "a100-80gb", "l40s"],
        num_gpus=[1, 2, 4, 8],
        tensor_parallel=[1, 2, 4, 8],
        pipeline_parallel=[1, 2],
        weight_dtypes=["bf16", "fp8", "int4"],
        kv_cache_dtypes=["bf16", "fp8"],
        concurrency=[1, 8, 64, 256],
    )
    return evaluate_inference(BASE, grid)


def test_search_never_returns_a_misfit_or_a_broken_constraint(frame):
    constraints = ["ttft_seconds<=0.5", "tpot_seconds<=0.06"]
    best = search(frame, constraints, "usd_per_million_output_tokens", top=20)
    assert len(best) > 0
    assert best.fits.all() and best.valid.all()
    assert (best.ttft_seconds <= 0.5).all() and (best.tpot_seconds <= 0.06).all()
    feasible = apply_constraints(frame, constraints)
    assert best.usd_per_million_output_tokens.iloc[0] == feasible.usd_per_million_output_tokens.min()


def test_pareto_front_is_non_dominated_and_complete(frame):
    feasible = apply_constraints(frame, [])
    front = pareto_front(feasible, minimize=["usd_per_million_output_tokens", "tpot_seconds"])
    values = feasible[["usd_per_million_output_tokens", "tpot_seconds"]].to_numpy()
    chosen = front[["usd_per_million_output_tokens", "tpot_seconds"]].to_numpy()
    for point in chosen:  # nothing dominates a frontier point
        dominated = np.all(values <= point, axis=1) & np.any(values < point, axis=1)
        assert not dominated.any()
    for point in values:  # every feasible point is dominated by or equal to a frontier point
        assert np.any(np.all(chosen <= point, axis=1))


@pytest.mark.parametrize("text", ["ttft<0.5x", "ttft_seconds<=", "=1", "ttft_seconds=<1"])
def test_bad_constraints_are_rejected_with_a_sentence(text):
    with pytest.raises(PlanningError):
        parse_constraint(text)


# Llama 3.1 8B by hand: 8,030,261,248 parameters, hidden 4096, 32 layers, vocab 128,256 (untied head).
LLAMA8_PARAMS = 8_030_261_248
LLAMA8_EMBEDDING = 128_256 * 4_096
LLAMA8_MATMUL_PARAMS = LLAMA8_PARAMS - LLAMA8_EMBEDDING - 65 * 4_096  # the head is a matmul; norms are not


def _elementwise_seconds(s: TrainingScenario) -> float:
    arch, inputs = s.architecture(), training_inputs(s)
    flops = training_flops(arch, parameter_counts(arch), inputs)
    return elementwise_seconds(arch, training_hardware(s, s.accelerator()), DEFAULT_EFFICIENCY, inputs, flops)


def test_training_technique_deltas_match_the_arithmetic():
    """The default training scenario (Llama 3.1 8B, 8 x H100, ZeRO-1, mixed bf16, 4096 tokens, micro-batch
    1) against numbers worked by hand from the parameter count and the layer shapes."""
    scenario = parse_scenario({"kind": "training"})
    base = plan(scenario)
    start = scenario.model_dump(mode="json")
    by_change = {
        tuple(sorted((k, v) for k, v in e.scenario.items() if v != start.get(k))): e
        for e in techniques(scenario)
        if e.applicable and not e.derived
    }

    def effect(**change):
        return by_change[tuple(sorted(change.items()))]

    adam_bytes = 12 * LLAMA8_PARAMS  # fp32 master, m and v
    # ZeRO-1 keeps 1/8 of the AdamW state on each of 8 ranks; ZeRO-0 all of it; offload none of it.
    assert effect(zero_stage=0).delta_memory_bytes == adam_bytes * 7 / 8
    assert effect(offload_optimizer=True).delta_memory_bytes == -adam_bytes / 8
    # ZeRO-2 also shards the bf16 gradients, less the reduce-scatter buckets it keeps.
    zero2 = -effect(zero_stage=2).delta_memory_bytes
    assert 0.9 * 2 * LLAMA8_PARAMS * 7 / 8 < zero2 <= 2 * LLAMA8_PARAMS * 7 / 8
    # Saved activations and logits are linear in the micro-batch: doubling it adds one more of each.
    per_micro_batch = base.memory.components["activations_bytes"] + base.memory.components["logits_bytes"]
    assert effect(micro_batch_size=2).delta_memory_bytes == pytest.approx(per_micro_batch, rel=1e-12)
    # Full checkpointing recomputes each layer's forward once: 2 x (matmul params - head) FLOPs per token
    # plus causal attention's 2 x s x h per layer, against the step's 6 x matmul params + 3 x that attention.
    s, h, layers = 4096, 4096, 32
    attention = 2 * s * h * layers
    forward_layers = 2 * (LLAMA8_MATMUL_PARAMS - LLAMA8_EMBEDDING) + attention
    step = 6 * LLAMA8_MATMUL_PARAMS + 3 * attention
    assert base.performance.model_flops_per_token == pytest.approx(step, rel=1e-4)
    # The elementwise kernels (norms, adds, rotary, SwiGLU, loss: planner.training.elementwise_kernels) are
    # bytes, not FLOPs: recomputation repeats their forward apart.
    full = effect(activation_checkpointing="full")
    microbatches = base.layout.gradient_accumulation_steps
    elementwise = [
        microbatches * _elementwise_seconds(s)
        for s in (scenario, TrainingScenario.model_validate({**start, "activation_checkpointing": "full"}))
    ]
    flat = base.performance.step_breakdown_seconds["forward_backward_seconds"] - elementwise[0]
    expected = flat * forward_layers / step + elementwise[1] - elementwise[0]
    assert full.delta_time_seconds == pytest.approx(expected, rel=1e-3)
    # ... and keeps only each layer's bf16 input (s x h x 2 bytes) plus one layer being recomputed.
    kept = base.memory.components["activations_bytes"] + full.delta_memory_bytes
    assert layers * s * h * 2 < kept < layers * s * h * 2 + 2 * base.memory.components["activations_bytes"] / layers
    compression = next(e for e in techniques(scenario) if e.technique == "Lower-precision communication")
    assert compression.changes_numerics and compression.delta_time_seconds <= 0


# ---------------------------------------------------------------------------------------------- issue 15


def test_relief_puts_a_cheap_move_that_fits_first_and_the_absurd_one_last():
    scenario = InferenceScenario(concurrency=600)  # 70B on 4 x H100: the KV cache does not fit
    base = plan(scenario)
    assert base.bottleneck == "capacity"
    relief = diagnose(scenario).relief
    first = relief[0]
    # The first relief, planned in full, fits and is not slower than this plan.
    after = plan(InferenceScenario.model_validate(first.scenario))
    assert after.memory.fits and after.performance.tpot_seconds <= base.performance.tpot_seconds
    # Dropping the KV cache also fits, at ~350x this plan's TPOT: never first, last if listed at all.
    drop = next(e for e in inference_techniques(scenario) if e.technique == "KV cache vs recompute")
    assert drop.fits_after and drop.delta_time_seconds > 100 * base.performance.tpot_seconds
    assert all(e.technique != "KV cache vs recompute" for e in relief[:-1])
    # With 2,000 sequences nothing short of dropping the cache fits, and still it is not first.
    assert diagnose(InferenceScenario(concurrency=2000)).relief[0].technique != "KV cache vs recompute"


@pytest.mark.parametrize("concurrency", [64, 1])
def test_the_pipeline_sentence_says_what_the_two_plans_say(concurrency):
    scenario = InferenceScenario(concurrency=concurrency)
    effect = next(e for e in inference_techniques(scenario) if e.technique == "Pipeline parallelism")
    base, alt = plan(scenario), plan(InferenceScenario.model_validate(effect.scenario))
    change = alt.performance.tpot_seconds - base.performance.tpot_seconds
    # 64 in flight: two stages each decode half the sequences, TPOT falls by ~2.6 ms; one sequence: the
    # stage hand-off adds a few microseconds.
    assert (change < 0) == (concurrency == 64)
    word = "improves by" if change < 0 else "rises by"
    assert f"per-token latency {word} {units.seconds(abs(change))}" in effect.costs
    assert "does not improve" not in effect.costs


def test_collapse_keeps_one_row_per_equivalent_configuration():
    frame = pd.DataFrame(
        {
            "gpu": ["h100", "h100", "h100", "h100", "h200"],
            "num_gpus": [2, 4, 2, 2, 2],
            "tensor_parallel": [2, 2, 2, 2, 2],
            "pipeline_parallel": [1, 1, 1, 1, 1],
            "expert_parallel": [1, 1, 1, 1, 1],
            "weight_dtype": ["fp8", "fp8", "int8", "bf16", "fp8"],
            "concurrency": [128, 256, 128, 128, 128],
            "ttft_seconds": [0.1, 0.1, 0.1, 0.1, 0.1],
            # rows 0-2: identical outputs (row 2's TPOT differs in the 12th digit); row 3 is slower, row 4 another GPU
            "tpot_seconds": [0.05, 0.05, 0.05 * (1 + 1e-12), 0.06, 0.05],
            "usd_per_million_output_tokens": [0.78, 0.78, 0.78, 0.9, 0.78],
            "total_bytes": [6.5e10, 6.5e10, 6.5e10, 7e10, 6.5e10],
        }
    )
    out = collapse_equivalent(frame, *INFERENCE_EQUIVALENCE)
    assert list(out.index) == [0, 3, 4]
    assert list(out["equivalent_rows"]) == [3, 1, 1]


def test_search_is_not_padded_with_replicas_or_formats_that_change_nothing(frame):
    top = search(frame, [], "usd_per_million_output_tokens", top=10)
    keys = top[["gpu", "tensor_parallel", "pipeline_parallel", "tpot_seconds", "usd_per_million_output_tokens"]]
    assert not keys.duplicated().any()
    # Two full plans: the same TP 2 layout at twice the replicas and concurrency, with int8 instead of fp8
    # weights, gives the same TPOT and $ per 1M tokens, so only one of them may be listed.
    a = InferenceScenario(num_gpus=2, tensor_parallel=2, weight_dtype="fp8", kv_cache_dtype="fp8", concurrency=128)
    b = InferenceScenario(num_gpus=4, tensor_parallel=2, weight_dtype="int8", kv_cache_dtype="fp8", concurrency=256)
    pa, pb = plan(a), plan(b)
    assert pa.memory.fits and pa.performance.tpot_seconds == pytest.approx(pb.performance.tpot_seconds, rel=1e-12)
    assert pa.cost.usd_per_million_output_tokens == pytest.approx(pb.cost.usd_per_million_output_tokens, rel=1e-12)
    # The grid: 2, 4, 8 GPUs x TP 2 (1, 2, 4 replicas) x 128, 256, 512 in flight x fp8, int8 weights.
    grid = inference_grid(
        BASE,
        gpus=["h100-sxm"],
        num_gpus=[2, 4, 8],
        tensor_parallel=[2],
        pipeline_parallel=[1],
        weight_dtypes=["fp8", "int8"],
        kv_cache_dtypes=["fp8"],
        concurrency=[128, 256, 512],
    )
    listed = search(evaluate_inference(BASE, grid), [], "usd_per_million_output_tokens", top=100)
    same = listed[listed.tpot_seconds.sub(pa.performance.tpot_seconds).abs() < 1e-12]
    # 128 sequences per replica at 1, 2 and 4 replicas, each with fp8 or int8 weights: six rows, one listed,
    # on the fewest GPUs.
    assert len(same) == 1 and same.iloc[0].num_gpus == 2 and same.iloc[0].equivalent_rows == 6


def test_costs_read_as_money():
    assert units.usd(1_619_000) == "$1.62M"
    assert units.usd(48_200) == "$48,200"
    assert units.usd(3.1e9) == "$3.10B"


def test_training_offers_no_precision_the_engine_cannot_plan():
    scenario = TrainingScenario()
    effects = training_techniques(scenario)
    # Every variant the techniques offer is a scenario the engine validates and plans (an offered precision
    # the scenario rejected would be a dead link on the Trade-offs page).
    with pytest.raises(ValidationError):
        TrainingScenario(precision="fp4")  # type: ignore[arg-type]  # the point: an unplanned precision is rejected
    for e in effects:
        if e.scenario is not None:
            assert plan(TrainingScenario.model_validate(e.scenario)).kind == "training"


def test_training_offers_op_recompute_module_lists_frequency_and_fp8_and_each_plans():
    """The efficiency mechanisms are offered as planned variants where they apply (H100: FP8 tensor cores,
    FlashAttention on), and each offered variant is a scenario the engine validates and plans."""
    effects = {(e.technique, e.variant): e for e in training_techniques(TrainingScenario())}
    offered = {
        ("Activation checkpointing", "none → op"),
        ("Activation checkpointing", "none → selective (layernorm, mlp)"),
        ("Checkpoint frequency", "none → full on 16 of 32 layers per stage (block)"),
        ("FP8 training", "mixed_bf16 → fp8 (Transformer Engine, delayed scaling)"),
    }
    assert offered <= set(effects)
    for key in offered:
        e = effects[key]
        assert e.applicable and not e.derived and e.scenario is not None, key
        assert plan(TrainingScenario.model_validate(e.scenario)).kind == "training"
        assert e.delta_memory_bytes < 0 or key[0] == "FP8 training", key  # each frees activations
    assert effects[("FP8 training", "mixed_bf16 → fp8 (Transformer Engine, delayed scaling)")].changes_numerics
    # Going back from a recomputation level to one that keeps more relieves compute, as the deltas say.
    back = {e.variant: e for e in training_techniques(TrainingScenario(activation_checkpointing="full"))}
    assert back["full → op"].delta_memory_bytes > 0 and back["full → op"].relieves.startswith("compute")
    # No FP8 tensor cores (A100): the row says why instead of planning a speed-up that cannot happen.
    a100 = next(e for e in training_techniques(TrainingScenario(gpu="a100-80gb")) if e.technique == "FP8 training")
    assert not a100.applicable and "no FP8 tensor cores" in a100.reason and a100.scenario is None
    # Op recomputation needs FlashAttention; without it the row is not applicable and says so.
    no_flash = {e.variant: e for e in training_techniques(TrainingScenario(flash_attention=False))}
    assert not no_flash["none → op"].applicable and "flash_attention" in no_flash["none → op"].reason


def test_training_fp8_and_op_recompute_deltas_match_the_arithmetic():
    """Llama 3.1 8B on one 8-GPU H100 node (TP 1, PP 1, FlashAttention, no dropout, micro-batch 1 x 4096 tokens),
    worked by hand from the layer shapes: hidden 4096, 32 query heads and 8 KV heads of 128, MLP 14336 gated."""
    h, kv, ffn, layers, tokens = 4096, 1024, 14336, 32, 4096
    effects = {e.variant: e for e in training_techniques(TrainingScenario())}
    # FP8 (Transformer Engine): +2 B per layer GEMM weight (the cached FP8 copy and its transpose; ZeRO-1 keeps
    # every weight whole) and -1 B per element of every GEMM input saved for backward (kept in FP8): the
    # attention and MLP projections' normalized inputs (2 h), o_proj's input (h) and down_proj's input (ffn).
    gemm_weights = layers * (2 * h * h + 2 * h * kv + 3 * h * ffn)
    gemm_inputs = layers * tokens * (2 * h + h + ffn)
    fp8 = effects["mixed_bf16 → fp8 (Transformer Engine, delayed scaling)"]
    assert fp8.delta_memory_bytes == pytest.approx(2 * gemm_weights - gemm_inputs, rel=1e-12)
    # Op recomputation (torchtitan SAC) keeps the layer input (2 h B), the outputs of q, v, gate and down (every
    # second matmul: 2 (h + kv + ffn + h) B), the attention output (2 h B) and FlashAttention's fp32 log-sum-exp
    # (4 B x 32 heads) per token and layer, against everything without recomputation: two RMSNorm inputs and
    # statistics (2 (2 h + 4)), the two normalized projection inputs (2 x 2 h), q, k, v and the attention output
    # (2 (h + 2 kv + h)), the log-sum-exp, and the gated MLP's gate, up, activation and product (4 x 2 ffn).
    everything = 2 * (2 * h + 4) + 2 * 2 * h + 2 * (h + 2 * kv + h) + 4 * 32 + 4 * 2 * ffn
    op_kept = 2 * h + 2 * (h + kv + ffn + h) + 2 * h + 4 * 32
    # Every layer saves the difference; one layer's worth comes back while its backward recomputes.
    op = effects["none → op"]
    assert op.delta_memory_bytes == pytest.approx(-(layers - 1) * (everything - op_kept) * tokens, rel=1e-12)


# ----------------------------------------------------------------------------- alternatives, checklist


def test_alternatives_are_full_plans_of_their_changed_scenarios():
    scenario = InferenceScenario(num_gpus=2, tensor_parallel=2)
    base = plan(scenario)
    found = alternatives(scenario)
    assert found and all(a.kind in ("smaller_model", "longest_context") for a in found)
    for a in found:
        result = plan(InferenceScenario.model_validate(a.scenario))
        assert result.memory.fits == a.fits and result.memory.headroom_fraction == a.headroom_fraction
    smaller = next(a for a in found if a.kind == "smaller_model")
    # No catalog model between it and the 70B fits: it is the largest that does.
    for model_id, _, params in catalog_sizes():
        if smaller.params_total < params < base.model.params_total:
            try:
                fits = plan(InferenceScenario(model=model_id, num_gpus=2, tensor_parallel=2)).memory.fits
            except (ValidationError, PlanningError):
                continue
            assert not fits, model_id


def test_training_longest_sequence_is_the_last_power_of_two_that_fits():
    scenario = TrainingScenario()
    context = next(a for a in alternatives(scenario) if a.kind == "longest_context")
    assert context.fits and context.context_tokens & (context.context_tokens - 1) == 0
    longer = TrainingScenario.model_validate({**scenario.model_dump(), "sequence_length": context.context_tokens * 2})
    assert not plan(longer).memory.fits


def test_checklist_answers_with_the_plan_numbers():
    scenario = InferenceScenario(num_gpus=2, tensor_parallel=2)
    base = plan(scenario)
    answers = {i.topic: i for i in checklist(scenario).items}
    assert list(answers) == list(QUESTIONS)
    assert answers["bottleneck"].headline == "Memory capacity."
    assert answers["constraint"].headline == "Maximum problem size."
    assert units.gib(base.memory.total_bytes) in answers["constraint"].detail
    assert f"at most {base.memory.max_concurrency:,} sequences" in answers["constraint"].detail
    assert answers["decision"].level == "warning"
    decided = checklist(InferenceScenario(decision="fp8 weights")).items[-1]
    assert decided.headline == "“fp8 weights”" and decided.level == "info"


# ------------------------------------------------------------------------------------------------ CLI


def _diagnose(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_cli_diagnose_prints_the_report_as_json_and_text(tmp_path, capsys):
    scenario = InferenceScenario(concurrency=600)
    path = tmp_path / "scenario.json"
    path.write_text(scenario.model_dump_json())
    code, out = _diagnose(["diagnose", str(path)], capsys)
    assert code == 0
    report = TradeoffReport.model_validate_json(out)
    assert report.diagnosis.binding == plan(scenario).bottleneck == "capacity"
    assert [i.topic for i in report.checklist.items] == list(QUESTIONS)
    effect = next(e for e in report.techniques if e.technique == "Tensor parallelism")
    alt = plan(InferenceScenario.model_validate(effect.scenario))
    assert effect.delta_memory_bytes == pytest.approx(alt.memory.total_bytes - plan(scenario).memory.total_bytes)
    code, text = _diagnose(["diagnose", str(path), "--format", "text"], capsys)
    assert code == 0 and "Binding resource: memory capacity" in text
    assert report.diagnosis.relief[0].variant in text
    for item in report.checklist.items:
        assert item.question in text


def test_cli_diagnose_refuses_an_invalid_scenario(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"kind": "inference", "concurrency": -1}))
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "oncurrency" in err and "Traceback" not in err


def test_the_trade_off_answers_never_simulate_the_request_stream(monkeypatch):
    """Diagnosis, techniques, checklist and alternatives compare static plans: a stream on the scenario
    would otherwise be simulated once per variant (seconds) without changing a number they read."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("simulated a request stream")

    monkeypatch.setattr(TrafficEngine, "simulate", refuse)
    with_stream = BASE.model_copy(update={"traffic": Traffic(num_requests=50)})
    report, static = tradeoff_report(with_stream).diagnosis, tradeoff_report(BASE).diagnosis
    assert report.binding == static.binding
    assert [e.model_dump(exclude={"scenario"}) for e in report.relief] == [
        e.model_dump(exclude={"scenario"}) for e in static.relief
    ]
    # ... and each variant, opened as a plan, still carries the stream.
    assert all(e.scenario["traffic"] is not None for e in report.relief if e.scenario)
