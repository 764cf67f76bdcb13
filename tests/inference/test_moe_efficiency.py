"""Routed-expert (fused-MoE) efficiency: the three published terms, worked arithmetic, and the plan's steps using them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner import plan
from planner.inference.inputs import ReplicaShape
from planner.inference.memory import inference_memory
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.steps import StepContext, decode_step, launch_overhead_seconds, step_compute_seconds
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency
from planner.physics.gemm_efficiency import GEMM_TAIL_SECONDS
from planner.physics.moe_efficiency import (
    DOCUMENTED_EXPERT_COMPUTE,
    expert_compute_format_ratio,
    moe_layer_extra_seconds,
    routed_expert_flops_per_token,
    routed_expert_read_bytes,
)

H100_BANDWIDTH = 3.35e12


def _uniform_distinct(experts, k, tokens):
    return experts * (1 - (1 - k / experts) ** tokens)


def test_defaults_are_the_mean_of_the_two_published_h100_shapes():
    """vLLM PR #24700, benchmark_moe.py on H100: Mixtral-8x7B BF16 TP2 (tuned) and Qwen3-30B-A3B FP8 (main)."""
    mixtral_expert = (7168 * 4096 + 4096 * 3584) * 2  # 88,080,384 B: w1 (gate+up, shard 7168) + w2, bf16
    qwen_expert = 3 * 2048 * 768  # 4,718,592 B, fp8
    # small batches: bandwidth from the slope, fixed time from the intercept
    m1, m32 = _uniform_distinct(8, 2, 1) * mixtral_expert, _uniform_distinct(8, 2, 32) * mixtral_expert
    q1, q128 = _uniform_distinct(128, 8, 1) * qwen_expert, _uniform_distinct(128, 8, 128) * qwen_expert
    mixtral_bw = (m32 - m1) / ((487.35 - 144.03) * 1e-6)  # 1.539 TB/s
    qwen_bw = (q128 - q1) / ((273.72 - 44.54) * 1e-6)  # 2.470 TB/s
    mixtral_t0 = 144.03e-6 - m1 / mixtral_bw  # 29.57 us
    qwen_t0 = 44.54e-6 - q1 / qwen_bw  # 29.26 us
    assert mixtral_bw / H100_BANDWIDTH == pytest.approx(0.459, abs=1e-3)
    assert qwen_bw / H100_BANDWIDTH == pytest.approx(0.737, abs=1e-3)
    assert (mixtral_t0 + qwen_t0) / 2 == pytest.approx(DEFAULT_EFFICIENCY.moe_layer_seconds, abs=0.1e-6)
    assert (mixtral_bw + qwen_bw) / 2 / H100_BANDWIDTH == pytest.approx(
        DEFAULT_EFFICIENCY.moe_expert_bandwidth, abs=5e-3
    )
    # large batches: marginal FLOP rate with every expert busy
    mixtral_rate = 512 * (2 * 2 * 3 * 4096 * 3584) / ((1122.93 - 833.72) * 1e-6) / 989e12  # 0.315 of BF16 peak
    qwen_rate = 2048 * (2 * 8 * 3 * 2048 * 768) / ((1647.57 - 911.64) * 1e-6) / 1979e12  # 0.106 of FP8 peak
    qwen_reference = qwen_rate / ((1402.6 / 1979) / (794.5 / 989))  # 0.120 in H100-BF16-ceiling terms
    assert mixtral_rate == pytest.approx(0.315, abs=1e-3)
    assert qwen_reference == pytest.approx(0.120, abs=1e-3)
    assert (mixtral_rate + qwen_reference) / 2 == pytest.approx(DEFAULT_EFFICIENCY.moe_expert_compute, abs=5e-3)


def test_routed_expert_flops_per_token():
    # 8 experts of 6,144 parameters each (49,152 routed per layer), top-2, 4 MoE layers, TP2 x PP1:
    # 2 FLOP x 2 experts x 6,144 x 4 layers / 2 GPUs = 49,152 FLOP per token per GPU
    assert routed_expert_flops_per_token(49_152, 8, 2, 4, 2, 1) == pytest.approx(49_152)
    assert routed_expert_flops_per_token(0, 0, 0, 0, 1, 1) == 0.0


def test_routed_expert_read_bytes_follow_uniform_routing():
    # 8 experts, top-2: one token touches 8 (1 - 0.75) = 2 experts = 1/4 of 1000 B; two tokens 8 (1 - 0.5625) = 3.5
    assert routed_expert_read_bytes(1000.0, 8, 2, 1) == pytest.approx(250.0)
    assert routed_expert_read_bytes(1000.0, 8, 2, 2) == pytest.approx(437.5)
    assert routed_expert_read_bytes(1000.0, 0, 0, 5) == 0.0


def test_moe_layer_extra_seconds():
    # 4 MoE layers x (29.4 us - 2 x 6.6 us of GEMM tails already charged) = 4 x 16.2 us = 64.8 us; none on a CPU
    assert moe_layer_extra_seconds(4, 29.4e-6, GEMM_TAIL_SECONDS, True) == pytest.approx(64.8e-6)
    assert moe_layer_extra_seconds(4, 29.4e-6, GEMM_TAIL_SECONDS, False) == 0.0
    assert moe_layer_extra_seconds(4, 10e-6, GEMM_TAIL_SECONDS, True) == 0.0  # never negative


def _neutral(e: Efficiency) -> Efficiency:
    """MoE terms that price experts exactly as the dense roofline does (no fixed time beyond the GEMM tails); the
    expert FLOP rate is scaled to BF16 experts' format figure, so it is divided out (the MoE scenarios here are BF16)."""
    return Efficiency.model_validate(
        {
            **e.model_dump(),
            "moe_expert_bandwidth": e.memory_bandwidth,
            "moe_expert_compute": e.decode_compute / expert_compute_format_ratio("bf16", "bf16"),
            "moe_layer_seconds": 2 * GEMM_TAIL_SECONDS,
        }
    )


def _decode(scenario: InferenceScenario, efficiency: Efficiency, batch: int):
    i = scenario_inputs(scenario)
    shape = replace(ReplicaShape.of(i.arch, i.inputs, i.hw), micro_batch=batch)
    weights = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape).weights_bytes
    return i, shape, decode_step(StepContext(i.arch, i.counts, i.hw, efficiency, i.inputs, shape), weights)


def test_neutral_moe_terms_reproduce_the_dense_roofline():
    """With the fused-MoE figures set to the dense ones, a MoE decode step is the plain roofline again."""
    e = _neutral(DEFAULT_EFFICIENCY)
    i, shape, step = _decode(InferenceScenario(model="mixtral-8x7b"), e, 16)
    assert step.memory_seconds == pytest.approx(step.bytes / (i.hw.bandwidth_bytes_per_second * e.memory_bandwidth))
    assert step.compute_seconds == pytest.approx(
        step_compute_seconds(step.flops, shape.stage_layers, i.hw, e.decode_compute)
    )
    assert step.overhead_seconds == pytest.approx(launch_overhead_seconds(shape.stage_layers, e))


def test_moe_terms_slow_a_moe_step_and_leave_a_dense_one_alone():
    moe, dense = InferenceScenario(model="mixtral-8x7b"), InferenceScenario()
    for batch in (1, 16, 64):
        slow = _decode(moe, DEFAULT_EFFICIENCY, batch)[2]
        fast = _decode(moe, _neutral(DEFAULT_EFFICIENCY), batch)[2]
        assert slow.seconds > fast.seconds
        # Mixtral on 4 H100s (TP4): 32 MoE layers x (29.4 - 2 x 6.6) us = 518.4 us more fixed time per step
        assert slow.overhead_seconds - fast.overhead_seconds == pytest.approx(32 * 16.2e-6)
        assert _decode(dense, DEFAULT_EFFICIENCY, batch)[2].seconds == pytest.approx(
            _decode(dense, _neutral(DEFAULT_EFFICIENCY), batch)[2].seconds, rel=1e-12
        )


def test_the_plan_carries_the_moe_terms():
    """plan() and the simulator read the same step functions (tests/inference/test_traffic.py holds them equal);
    the plan's decode step of a MoE model includes the fused-MoE fixed time."""
    p = plan(InferenceScenario(model="mixtral-8x7b"))
    names = " ".join(eq.formula for eq in p.equations)
    assert "fused-MoE" in names


def test_expert_compute_reads_the_experts_own_format():
    """The two PR #24700 shapes differ in format: BF16 experts 0.315, FP8 experts computing in FP8 0.120 (reference
    terms); a format with no figure of its own keeps the 0.22 mean."""
    assert expert_compute_format_ratio("bf16", "bf16") * DOCUMENTED_EXPERT_COMPUTE == pytest.approx(0.315)
    assert expert_compute_format_ratio("fp8", "fp8") * DOCUMENTED_EXPERT_COMPUTE == pytest.approx(0.120)
    assert expert_compute_format_ratio("fp8", "bf16") == 1.0  # FP8 weights dequantised on a device without FP8
    assert expert_compute_format_ratio("mxfp4", "bf16") == 1.0
    assert expert_compute_format_ratio("int4", "int4") == 1.0
    assert DOCUMENTED_EXPERT_COMPUTE == DEFAULT_EFFICIENCY.moe_expert_compute


@pytest.mark.parametrize(("weight_dtype", "expected"), [("bf16", 0.315), ("fp8", 0.120)])
def test_the_plan_prices_routed_expert_flops_at_their_formats_rate(weight_dtype, expected):
    """Qwen3-30B-A3B on one H100: the routed-expert FLOP rate of the step is peak x the format's figure x the
    device's ceiling ratio for that format (1 for BF16; FP8 MAMF 70.9 % / BF16 MAMF 80.3 % = 0.883)."""
    i = scenario_inputs(InferenceScenario(model="qwen3-30b-a3b", gpu="h100-sxm", weight_dtype=weight_dtype))
    shape = ReplicaShape.of(i.arch, i.inputs, i.hw)
    ctx = StepContext(i.arch, i.counts, i.hw, DEFAULT_EFFICIENCY, i.inputs, shape)
    peak = {"bf16": 989e12, "fp8": 1979e12}[weight_dtype]
    ratio = {"bf16": 1.0, "fp8": (1402.6 / 1979) / (794.5 / 989)}[weight_dtype]
    assert ctx.rates.expert_flops_per_second == pytest.approx(peak * expected * ratio, rel=1e-3)
