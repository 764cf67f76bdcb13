"""Issue 13 item 4, training: op-level and module-level recomputation, checkpoint frequency, uneven pipeline
stages and FP8 training. Expected values are written out as arithmetic on toy dimensions or on the real
Llama 3.1 8B / 405B shapes, not retyped from the engine's formulas."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import plan
from planner.model.architecture import ModelArchitecture, parameter_counts
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.share import query_params_to_scenario, scenario_to_query_params
from planner.training import activations as tact
from planner.training import memory as tmem
from planner.training import step_time
from planner.training.elementwise_kernels import elementwise_seconds
from planner.training.footprint import training_memory
from planner.training.inputs import training_hardware, training_inputs
from planner.training.metrics import training_metrics
from planner.training.named_kernels import fp8_cast_seconds
from planner.training.recompute import Recompute
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops
from planner.training.step_time import FlopsInputs

# Llama-style toy: h 8, 2 heads of 4, 1 KV head, SwiGLU width 16, RMSNorm (4 B statistics), 4 layers.
TOY = ModelArchitecture(
    name="toy",
    model_type="llama",
    num_layers=4,
    hidden_size=8,
    num_attention_heads=2,
    num_kv_heads=1,
    head_dim=4,
    intermediate_size=16,
    vocab_size=32,
    max_context_tokens=64,
)


def toy_terms(**kw):
    args = dict(tensor_parallel=1, sequence_parallel=False, flash_attention=True, dropout=False, sequence_length=64)
    return tact.layer_activation_terms(TOY, False, tact.ActivationInputs(**{**args, **kw}))


# ---------------------------------------------------------------------------------------------
# what each recomputation level keeps, per token per layer (bf16, B = 2)
#
# none: residual 2 norms x (8 x 2 + 4) + 2 normalized inputs x 8 x 2 = 40 + 32 = 72
#       attention q 8 + k 4 + v 4 + out 8 = 24 elements x 2 = 48, + log-sum-exp 4 B x 2 heads = 8 -> 56
#       SwiGLU gate, up, silu(gate), product: 4 x 16 x 2 = 128                      total 256


def test_levels_keep_the_hand_counted_bytes():
    t = toy_terms()
    assert t.none == 72 + 56 + 128 == 256
    assert t.full == 8 * 2 == 16  # the layer input only
    # torchtitan op: layer input 16 + saved matmul outputs q (8), v (4), gate (16), down (8): 36 x 2 = 72,
    # the fused attention's output 8 x 2 = 16 and log-sum-exp 8
    assert t.op == 16 + 72 + 16 + 8 == 112
    # Megatron core_attn with FlashAttention frees only the log-sum-exp
    assert t.selective == 256 - 8 == 248


@pytest.mark.parametrize(
    ("modules", "kept"),
    [
        ("core_attn", 256 - 8),
        ("layernorm", 256 - 2 * 8 * 2),  # the two normalized inputs, 2 x h x B
        ("mlp", 256 - 128),  # the SwiGLU tensors
        ("core_attn,layernorm,mlp", 256 - 8 - 32 - 128),
    ],
)
def test_megatron_modules_free_their_terms(modules, kept):
    assert toy_terms(recompute_modules=tuple(modules.split(","))).selective == kept


def test_core_attn_without_flash_drops_the_score_matrix():
    # unfused attention expands K/V to both heads (q 8 + k 8 + v 8 + out 8 = 32 x 2 = 64, no log-sum-exp) and keeps
    # the bf16 softmax: 2 heads x 64 keys x 2 B = 256; core_attn recomputes it
    t = toy_terms(flash_attention=False)
    assert t.none == 72 + 64 + 128 + 256 == 520
    assert t.selective == 520 - 256
    assert toy_terms(flash_attention=False, recompute_modules=("mlp",)).selective == 520 - 128


def test_fp8_keeps_gemm_inputs_in_one_byte():
    # GEMM inputs saved for the weight gradient: 2 normalized inputs (16), attention output (8), down-projection
    # input (16) = 40 elements, 1 B instead of 2
    t = toy_terms(gemm_input_bytes_per_element=1.0)
    assert t.none == 256 - 40
    # layernorm then frees the FP8 copies: 2 x 8 x 1
    assert toy_terms(gemm_input_bytes_per_element=1.0, recompute_modules=("layernorm",)).selective == 256 - 40 - 16


def test_op_and_selective_recompute_flops():
    # torchtitan op recomputes every second matmul: k (8 x 4), o (8 x 8), up (8 x 16), 2 FLOPs each
    assert sum(m.d_in * m.d_out for m in tact.op_recomputed_matrices(TOY, False)) == 32 + 64 + 128
    counts = parameter_counts(TOY)
    matmul, attention = step_time.layer_recompute_flops_per_token(
        counts, TOY, False, FlopsInputs(64, True, Recompute.OP)
    )
    assert (matmul, attention) == (2 * (32 + 64 + 128), 0.0)
    # Megatron mlp: gate, up, down (3 x 8 x 16) again
    selective_mlp = FlopsInputs(64, True, Recompute.SELECTIVE, recompute_modules=("mlp",))
    matmul, _ = step_time.layer_recompute_flops_per_token(counts, TOY, False, selective_mlp)
    assert matmul == 2 * 3 * 8 * 16 == 768


def test_llama_8b_recompute_flops_per_token():
    s = TrainingScenario()
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    _, plain = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True))
    # mlp: 32 layers x 2 x 3 x 4096 x 14336
    selective_mlp = FlopsInputs(4096, True, Recompute.SELECTIVE, recompute_modules=("mlp",))
    _, mlp = step_time.model_training_flops_per_token(counts, arch, selective_mlp)
    assert mlp - plain == 32 * 2 * 3 * 4096 * 14336 == 11_274_289_152
    # op: k (4096 x 1024), o (4096 x 4096), up (4096 x 14336) per layer: 32 x 2 x 79,691,776
    _, op = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True, Recompute.OP))
    assert op - plain == 32 * 2 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336) == 5_100_273_664


# ---------------------------------------------------------------------------------------------
# checkpoint frequency (Megatron --recompute-method / --recompute-num-layers), one stage of 4 toy layers,
# micro-batch 1 x 64 tokens; edges of a single stage: final norm input 16 + statistics 4 + head input 16 = 36


def toy_stage(method, layers_per_group):
    activations = tact.ActivationInputs(
        1,
        False,
        True,
        False,
        64,
        recompute=Recompute.FULL,
        recompute_method=method,
        recompute_num_layers=layers_per_group,
    )
    return tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(1, 1), 64)


def test_uniform_and_block_recompute_bytes():
    # uniform 1 (every layer): 4 inputs x 16 + edges 36 + one layer rebuilt (256 - 16)
    assert toy_stage("uniform", 1) == 64 * (4 * 16 + 36 + 240)
    # uniform 2: ceil(4/2) = 2 group inputs x 16 + edges + a group of 2 layers rebuilt (2 x 256 - 16)
    assert toy_stage("uniform", 2) == 64 * (2 * 16 + 36 + 496)
    # block 1: one layer keeps only its input, three keep everything (3 x 256), one layer rebuilt
    assert toy_stage("block", 1) == 64 * (16 + 3 * 256 + 36 + 240)
    # block with as many layers as the stage is full recomputation
    assert toy_stage("block", 4) == toy_stage("uniform", 1)


def test_block_recompute_charges_its_share_of_the_forward():
    base = dict(model="llama-3.1-70b", num_gpus=64, tensor_parallel=8, pipeline_parallel=4, global_batch_size=128)
    full = TrainingScenario(**base, activation_checkpointing="full")
    block = TrainingScenario(**base, activation_checkpointing="full", recompute_method="block", recompute_num_layers=5)
    arch, counts = full.architecture(), parameter_counts(full.architecture())
    # 80 layers on 4 stages: 5 of 20 recomputed = 1/4 of full recomputation's extra forward
    _, plain = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True))
    f_full = training_flops(arch, counts, training_inputs(full)).hardware_flops_per_token - plain
    f_block = training_flops(arch, counts, training_inputs(block)).hardware_flops_per_token - plain
    assert f_block == pytest.approx(f_full * 5 / 20, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# uneven pipeline stages: Llama 3 405B, 126 layers on 16 stages as 7 + 14 x 8 + 7 (Llama 3 paper, Sec. 3.3.2)

LLAMA_405B = dict(
    model="llama-3.1-405b",
    num_gpus=128,
    tensor_parallel=8,
    pipeline_parallel=16,
    global_batch_size=16,
    sequence_length=8192,
    first_pipeline_stage_layers=7,
    last_pipeline_stage_layers=7,
)


def test_llama3_405b_stages_and_the_most_loaded_one():
    s = TrainingScenario(**LLAMA_405B)
    assert s.stage_layer_counts() == (7, 8, 7)
    p = plan(s)
    assert p.layout.heaviest_stage == "middle"
    # per token per layer at TP 8 with sequence parallelism (h 16384, 128 heads of 128, 8 KV heads, SwiGLU 53248):
    # residual (2 x (16384 x 2 + 4) + 2 x 16384 x 2) / 8 = 16,385; attention (2048 + 2 x 128 + 2048) x 2 + 4 x 16
    # = 8,768; MLP 4 x 53248 x 2 / 8 = 53,248; together 78,401 B. The second stage holds 8 layers for 15
    # micro-batches in flight (the first 7 for 16: 112 < 120 layer-micro-batches); no edges, no recompute working set
    assert p.memory.components["activations_bytes"] == 8192 * 8 * 15 * (16_385 + 8_768 + 53_248)
    # the step runs at the slowest stage: 8 middle layers beat 7 layers plus the 2.1B-parameter head
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    flops = training_flops(arch, counts, training_inputs(s))
    assert flops.stage_layers == 8
    _, layer = step_time.layer_training_flops_per_token(counts, arch, False, FlopsInputs(8192, True))
    assert flops.stage_hardware_flops_per_token == pytest.approx(8 * layer, rel=1e-12)


def test_uneven_stages_are_cheaper_than_the_even_ceiling():
    even = plan(
        TrainingScenario(**{**LLAMA_405B, "first_pipeline_stage_layers": None, "last_pipeline_stage_layers": None})
    )
    uneven = plan(TrainingScenario(**LLAMA_405B))
    # the even split charges ceil(126/16) = 8 layers and 16 in flight on the first stage: 128 vs 120
    ratio = uneven.memory.components["activations_bytes"] / even.memory.components["activations_bytes"]
    assert ratio == pytest.approx(120 / 128, rel=1e-3)
    assert uneven.performance.step_seconds < even.performance.step_seconds


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (dict(first_pipeline_stage_layers=7, last_pipeline_stage_layers=8), "do not split evenly"),
        (dict(first_pipeline_stage_layers=7, pipeline_parallel=1, num_gpus=8, last_pipeline_stage_layers=None), "pipeline_parallel > 1"),
        (dict(first_pipeline_stage_layers=130, last_pipeline_stage_layers=None), "exceed"),
    ],
)  # fmt: skip
def test_uneven_stage_sentences(overrides, words):
    with pytest.raises((ValidationError, ValueError), match=words):
        TrainingScenario(**{**LLAMA_405B, **overrides})


# ---------------------------------------------------------------------------------------------
# FP8 (Transformer Engine), Llama 3.1 8B on 8 x H100, ZeRO-1: 32 layers x 218,103,808 GEMM weights


def test_fp8_memory_copies_and_activations():
    bf16, fp8 = plan(TrainingScenario()), plan(TrainingScenario(precision="fp8"))
    # an FP8 copy and its transpose, 2 B per GEMM weight element (ZeRO-1 leaves weights whole)
    assert fp8.memory.components["weights_bytes"] - bf16.memory.components["weights_bytes"] == 2 * 6_979_321_856
    # gradients and fp32 master + Adam moments unchanged
    for name in ("gradients_bytes", "optimizer_states_bytes"):
        assert fp8.memory.components[name] == bf16.memory.components[name]
    # GEMM inputs at 1 B: (2 x 4096 normalized + 4096 attention output + 14336 down input) x 1 B x 32 layers x 4096
    saved = bf16.memory.components["activations_bytes"] - fp8.memory.components["activations_bytes"]
    assert saved == (2 * 4096 + 4096 + 14336) * 32 * 4096 == 3_489_660_928


def test_fp8_gemms_run_at_the_fp8_peak():
    s16, s8 = TrainingScenario(), TrainingScenario(precision="fp8")
    assert tmem.stage_gemm_weight_elements(parameter_counts(s8.architecture()), s8.architecture(), 1, 1, 1) == (
        6_979_321_856
    )
    hw8 = training_hardware(s8, s8.accelerator())
    assert (hw8.peak_flops_per_second, hw8.gemm_peak_flops_per_second) == (989.4e12, 1978.9e12)
    compute = {}
    for s in (s16, s8):
        compute[s.precision] = plan(s).performance.forward_backward.compute_seconds
    # per token: 48,249,962,496 hardware FLOPs of which 3 x 2 x 6,979,321,856 = 41,875,931,136 are layer GEMMs,
    # which count 989.4 / (1978.9 x 0.709/0.803) of themselves (H100's FP8 MAMF share over its BF16 one, planner.
    # physics.gemm_efficiency); both pay the same GEMM kernels' fixed time (planner.physics.
    # gemm_efficiency): 32 layers x 4 GEMMs x 3 passes (no recomputation) x 6.6 us = 2.5344 ms; FP8 adds its casts
    # (tests/training/test_fp8_casts.py); both the same elementwise kernels (16-bit activations)
    fp8_share = (1402.6 / 1979.0) / (794.5 / 989.0)
    assert hw8.gemm_format_ceiling_ratio == pytest.approx(fp8_share)
    expected = 1 - 41_875_931_136 / 48_249_962_496 * (1 - 989.4 / (1978.9 * fp8_share))
    tail = 32 * 4 * 3 * 6.6e-6
    arch, inputs = s8.architecture(), training_inputs(s8)
    casts = fp8_cast_seconds(
        arch, hw8, DEFAULT_EFFICIENCY, inputs, training_flops(arch, parameter_counts(arch), inputs)
    )
    assert casts > 0
    elementwise = elementwise_seconds(
        arch, hw8, DEFAULT_EFFICIENCY, inputs, training_flops(arch, parameter_counts(arch), inputs)
    )
    ratio = (compute["fp8"] - casts - tail - elementwise) / (compute["mixed_bf16"] - tail - elementwise)
    assert ratio == pytest.approx(expected, rel=1e-12)


def test_fp8_on_a_gpu_without_fp8_warns_and_runs_at_bf16():
    p = plan(TrainingScenario(precision="fp8", gpu="a100-80gb"))
    assert any("no FP8 tensor cores" in w for w in p.warnings)
    ref = plan(TrainingScenario(gpu="a100-80gb"))
    assert p.performance.forward_backward.compute_seconds == ref.performance.forward_backward.compute_seconds


# ---------------------------------------------------------------------------------------------
# validation, links, old scenarios


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (dict(activation_checkpointing="selective", recompute_modules="attention"), "unknown recompute module"),
        (dict(activation_checkpointing="selective", recompute_modules=""), "at least one recompute module"),
        (dict(recompute_modules="mlp"), "needs activation_checkpointing selective"),
        (dict(activation_checkpointing="selective", recompute_modules="moe"), "needs a mixture-of-experts"),
        (dict(activation_checkpointing="selective", recompute_modules="mla_up_proj"), "does not use MLA"),
        (dict(model="mixtral-8x7b", activation_checkpointing="selective", recompute_modules="mlp"), "has none"),
        (dict(activation_checkpointing="op", flash_attention=False), "flash_attention"),
        (dict(recompute_num_layers=2), "not full"),
        (dict(fp8_recipe="current"), "needs precision fp8"),
        (dict(precision="fp8", lora={"rank": 8}), "LoRA"),
    ],
)
def test_impossible_combinations_have_sentences(fields, words):
    with pytest.raises((ValidationError, ValueError), match=words):
        TrainingScenario(**fields)


def test_module_names_are_normalised():
    s = TrainingScenario(activation_checkpointing="selective", recompute_modules=" mlp ; core_attn,mlp")
    assert s.recompute_modules == "core_attn,mlp"
    assert s.recompute_module_set == ("core_attn", "mlp")


def test_links_round_trip_and_old_selective_links_still_plan():
    s = TrainingScenario(
        **LLAMA_405B, precision="fp8", fp8_recipe="current", activation_checkpointing="selective",
        recompute_modules="layernorm,mlp",
    )  # fmt: skip
    params = scenario_to_query_params(s)
    assert params["recompute_modules"] == "layernorm,mlp" and params["first_pipeline_stage_layers"] == "7"
    back, warnings = query_params_to_scenario(params, kind="training")
    assert back == s and not warnings
    old, warnings = query_params_to_scenario({"activation_checkpointing": "selective"}, kind="training")
    assert not warnings and old.recompute_module_set == ("core_attn",)
    assert any("core_attn" in w and "before recompute_modules" in w for w in plan(old).warnings)


def test_defaults_keep_today_numbers():
    """Default fields choose the old formulas: uniform full recomputation of every layer and an even split give
    the same memory as the per-layer input sum, and a mixed_bf16 plan has no FP8 term."""
    s = TrainingScenario(activation_checkpointing="full")
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    m = training_memory(arch, counts, training_hardware(s, s.accelerator()), training_inputs(s))
    # 32 layer inputs (4096 x 2 B) + edges (final norm input 8192 + 4 B statistics + head input 8192) + one layer
    # rebuilt, for 4096 tokens
    per_layer = tact.layer_activation_terms(arch, False, tact.ActivationInputs(1, False, True, False, 4096))
    expected = 4096 * (32 * 8192 + (8192 + 4 + 8192) + (per_layer.none - 8192))
    assert m.components.activations_bytes == expected


# ---------------------------------------------------------------------------------------------
# interleaved 1F1B with uneven first/last stages (issue 24, item 2): Llama 3 405B as trained, 126 layers on 16
# stages with 8 virtual stages each, one layer fewer on the first and the last stage (Llama 3 paper, Sec. 3.3.2
# and Table 4: 8,192 H100, TP 8, PP 16, DP 64, 32 micro-batches of one 8k sequence per replica)

LLAMA_405B_AS_TRAINED = dict(
    LLAMA_405B, num_gpus=8192, global_batch_size=2048, micro_batch_size=1, virtual_pipeline_stages=8
)


def test_interleaved_stages_with_uneven_first_and_last_stages_plan():
    s = TrainingScenario(**LLAMA_405B_AS_TRAINED)
    assert s.stage_layer_counts() == (7, 8, 7) and s.gradient_accumulation_steps == 32
    p = plan(s)
    # the bubble of the interleaved schedule, (p - 1) / (v m) = 15 / (8 x 32) of the ideal time
    one_f_one_b = plan(TrainingScenario(**{**LLAMA_405B_AS_TRAINED, "virtual_pipeline_stages": 1}))
    assert p.performance.step_seconds < one_f_one_b.performance.step_seconds
    assert step_time.pipeline_bubble_fraction(16, 32, 8) == pytest.approx(15 / 256)
    # in flight, in units of a stage's layers: rank 0 holds p + (p - 1)/v = 17.875, rank 1 p + (p - 3)/v = 17.625
    # (Megatron-core's interleaved warm-up, 2 (p - r - 1) + (v - 1) p chunk-micro-batches, one more at the peak)
    assert tact.in_flight_microbatches(16, 32, 8) == pytest.approx(16 + 15 / 8)
    assert tact.second_stage_in_flight_microbatches(16, 32, 8) == pytest.approx(16 + 13 / 8)
    assert tact.second_stage_in_flight_microbatches(16, 32, 1) == 15  # 1F1B: p - 1
    # the second stage (8 layers x 17.625) holds more than the first (7 layers x 17.875)
    assert p.layout.heaviest_stage == "middle"
    per_layer_micro = 8192 * (16_385 + 8_768 + 53_248)  # tokens x TP-sharded bytes per token per layer
    assert p.memory.components["activations_bytes"] == pytest.approx(per_layer_micro * 8 * (16 + 13 / 8), rel=1e-9)


def test_interleaving_an_uneven_layer_count_without_uneven_stages_says_how():
    with pytest.raises((ValidationError, ValueError), match="uneven first/last stages"):
        TrainingScenario(**{**LLAMA_405B_AS_TRAINED, "first_pipeline_stage_layers": None,
                            "last_pipeline_stage_layers": None})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the backward's TP collectives under the weight-gradient GEMMs (issue 24, item 3; Megatron-core's asynchronous
# input-gradient all-reduce / reduce-scatter, Korthikanti et al. 2022 Sec. 6.2)

TP8 = dict(model="llama-3.1-70b", num_gpus=64, tensor_parallel=8, pipeline_parallel=4, global_batch_size=256)


def _microbatch(**overrides):
    s = TrainingScenario(**{**TP8, **overrides})
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    inputs, hw = training_inputs(s), training_hardware(s, s.accelerator())
    return training_metrics(arch, counts, hw, DEFAULT_EFFICIENCY, inputs).time.microbatch, plan(s)


def test_overlapping_tp_backward_hides_at_most_the_backward_s_collectives_under_the_weight_gradients():
    off, off_plan = _microbatch()
    on, on_plan = _microbatch(overlap_tp_backward=True)
    assert off.tensor_parallel_hidden_seconds == 0
    tp = on.communication.tensor_parallel_seconds
    assert tp == off.communication.tensor_parallel_seconds  # the collectives themselves are the same
    # no recomputation: the backward runs 2 of the layer's 4; the weight gradient is 1 of the 3 GEMM passes
    assert 0 < on.tensor_parallel_hidden_seconds <= tp / 2
    assert on.tensor_parallel_hidden_seconds <= on.compute_seconds / 3  # the GEMMs are at most all of the compute
    assert on.slot_seconds == pytest.approx(off.slot_seconds - on.tensor_parallel_hidden_seconds)
    assert on_plan.performance.step_seconds < off_plan.performance.step_seconds
    assert on_plan.performance.communication_totals == off_plan.performance.communication_totals  # before overlap


def test_full_recomputation_repeats_forward_collectives_that_stay_exposed():
    on, _ = _microbatch(overlap_tp_backward=True, activation_checkpointing="full")
    # 4 + 2 recomputed collectives per layer: only the backward's 2 of 6 can hide
    assert on.tensor_parallel_hidden_seconds <= on.communication.tensor_parallel_seconds * 2 / 6 + 1e-12
