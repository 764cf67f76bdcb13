"""FLOPs, schedule and communication terms of a training step."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics.collectives import link_bandwidth
from planner.physics.communication import Link
from planner.training import step_time
from planner.training.recompute import Recompute
from planner.training.scenario import TrainingScenario
from planner.training.step_time import FlopsInputs

# Llama-3.1-8B by hand (h 4096, 32 heads x 128, 8 KV heads x 128, SwiGLU 14336, 32 layers, vocabulary 128256,
# untied head, no biases, no sliding window), sequence 4096:
# matrices per layer: q 4096 x 4096 + k, v 2 x 4096 x 1024 + o 4096 x 4096 = 41,943,040; MLP 3 x 4096 x 14336 =
# 176,160,768; 218,103,808 x 32 = 6,979,321,856; head 128256 x 4096 = 525,336,576 -> N = 7,504,658,432 matrix
# parameters a token multiplies through (the embedding is a lookup; norms are element-wise).
# Causal attention forward per token and layer: 4 x 32 heads x 128 x (4096 + 1)/2 mean keys = 33,562,624;
# x 32 layers = 1,074,003,968.
LLAMA_8B_MATMUL_PARAMETERS = 7_504_658_432
LLAMA_8B_LAYER_MATMUL_PARAMETERS = 6_979_321_856
LLAMA_8B_HEAD_PARAMETERS = 525_336_576
LLAMA_8B_CAUSAL_ATTENTION_FLOPS = 1_074_003_968


def test_model_flops_are_6n_plus_causal_attention():
    s = TrainingScenario()
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    model, hardware = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True))
    # 6 N + 3 x attention (forward + 2 x backward) = 45,027,950,592 + 3,222,011,904
    assert model == 6 * LLAMA_8B_MATMUL_PARAMETERS + 3 * LLAMA_8B_CAUSAL_ATTENTION_FLOPS == 48_249_962_496
    assert hardware == model  # FlashAttention, no recomputation: nothing extra executed
    # Kaplan's 6N with N = non-embedding parameters (7.505e9 incl. 266,240 norm weights) misses the attention: +7 %
    assert model / (6 * (counts.total - counts.embedding)) == pytest.approx(1.07, abs=0.005)


def test_recomputation_and_lora_change_hardware_and_model_flops():
    s = TrainingScenario()
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    model, _ = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True))
    # the output head over forward and backward: 3 x 2 x 525,336,576
    assert step_time.head_training_flops_per_token(counts) == 6 * LLAMA_8B_HEAD_PARAMETERS == 3_152_019_456
    # full recomputation runs every layer's forward once more: 2 x 6,979,321,856 + 1,074,003,968 (FlashAttention
    # skips masked blocks, so the recomputed attention is causal too)
    _, full = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True, Recompute.FULL))
    assert full == model + 2 * LLAMA_8B_LAYER_MATMUL_PARAMETERS + LLAMA_8B_CAUSAL_ATTENTION_FLOPS == 63_282_610_176
    _, selective = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True, Recompute.SELECTIVE))
    # Megatron's default selective module, core_attn, checkpoints the fused attention and runs its forward again
    # in the backward: 32 layers' causal attention, 48,249,962,496 + 1,074,003,968
    assert selective == model + LLAMA_8B_CAUSAL_ATTENTION_FLOPS == 49_323_966_464
    # no weight gradients for the frozen base: its matmuls run 2x (forward, input gradient) instead of 3x;
    # attention has no weights and stays 3x: 4 x 7,504,658,432 + 3 x 1,074,003,968
    lora_model, _ = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(4096, True, frozen_base=True))
    assert lora_model == 4 * LLAMA_8B_MATMUL_PARAMETERS + 3 * LLAMA_8B_CAUSAL_ATTENTION_FLOPS == 33_240_645_632


def test_engine_hardware_flops_match_megatron_equation_3():
    """Narayanan et al. 2021, Eq. 3, for GPT-3 175B (B 1, s 2048, l 96, h 12288, V 51200) with full recomputation:
    96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs per step. The engine counts the same work (4h GeLU MLP, unfused
    dense attention, one extra forward) and leaves out biases and norms as the paper does: within 0.2 %."""
    s = TrainingScenario(model="gpt-3-175b", gpu="a100-80gb", num_gpus=8, global_batch_size=8, sequence_length=2048)
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    _, hardware = step_time.model_training_flops_per_token(counts, arch, FlopsInputs(2048, False, Recompute.FULL))
    paper_per_step = 96 * 1 * 2048 * 96 * 12288**2 * (1 + 2048 / (6 * 12288) + 51200 / (16 * 96 * 12288))
    assert paper_per_step == pytest.approx(2.9368e15, rel=1e-4)
    assert hardware == pytest.approx(paper_per_step / 2048, rel=2e-3)


def test_pipeline_bubble():
    assert step_time.pipeline_bubble_fraction(1, 8) == 0
    assert step_time.pipeline_bubble_fraction(4, 8) == 3 / 8
    assert step_time.pipeline_bubble_fraction(4, 8, 3) == 3 / 24
    # 4 stages, 3 chunks each: (4 - 1)/3 = 1 idle slot of 2 s per step; with 8 slots of work that is 3/24 of them
    assert step_time.pipeline_bubble_seconds(2.0, 4, 3) == 2.0
    assert step_time.pipeline_bubble_seconds(2.0, 1) == 0


def test_links_switch_to_the_network_across_nodes():
    assert link_bandwidth(8, 8, 450e9, 50e9) == 450e9
    assert link_bandwidth(16, 8, 450e9, 50e9) == 50e9
    assert list(link_bandwidth(np.array([4, 32]), 8, 450e9, 50e9)) == [450e9, 50e9]


def test_tensor_parallel_comm_count():
    message = 1000 * 100 * 2  # 1000 tokens x h 100 x 2 B
    one = step_time.tensor_parallel_comm_seconds(1, message, 4, Link(100e9, 0.0), 1.0)
    # ring all-reduce of 1000 x 100 x 2 B over 4 GPUs with no link latency: NCCL's fixed 3.6 us per collective
    # (planner.physics.collectives.RING_BASE_SECONDS) + 2 x 3/4 x 200 kB / 100 GB/s = 3.6 + 3.0 us, 4 per layer
    assert one == pytest.approx(4 * (3.6e-6 + 2 * 0.75 * 200_000 / 100e9))
    # full recomputation repeats the forward's two (step_time.recomputed_collectives)
    again, _, _ = step_time.recomputed_collectives(Recompute.FULL)
    assert step_time.tensor_parallel_comm_seconds(1, message, 4, Link(100e9, 0.0), 1.0, again) == pytest.approx(
        one * 6 / 4
    )
    assert step_time.tensor_parallel_comm_seconds(1, message, 1, Link(100e9, 3e-6), 1.0) == 0


def test_step_step_breakdown_seconds_sums_and_respects_the_roofline():
    for fields in (
        dict(),
        dict(tensor_parallel=2, pipeline_parallel=2, num_gpus=16, zero_stage=3),
        dict(
            model="mixtral-8x7b",
            num_gpus=16,
            tensor_parallel=2,
            expert_parallel=4,
            global_batch_size=32,
            activation_checkpointing="full",
        ),
        dict(offload_optimizer=True, zero_stage=2, context_parallel=2, sequence_length=8192),
    ):
        perf = plan(TrainingScenario(**fields)).performance
        assert sum(perf.step_breakdown_seconds.values()) == pytest.approx(perf.step_seconds)
        assert perf.step_seconds >= perf.flops_roofline_seconds
        assert 0 < perf.mfu <= perf.hfu < 1


def test_gradient_accumulation_vs_larger_micro_batch_table():
    p = plan(TrainingScenario(model="llama-3.2-1b", global_batch_size=64, sequence_length=2048))
    options = {o.micro_batch_size: o for o in p.micro_batch_options}
    assert sorted(options) == [1, 2, 4, 8]
    assert [options[b].gradient_accumulation_steps for b in (1, 2, 4, 8)] == [8, 4, 2, 1]
    # activations grow linearly with the micro-batch; total memory with them
    assert options[8].activations_bytes == pytest.approx(8 * options[1].activations_bytes)
    assert options[1].total_bytes < options[2].total_bytes < options[8].total_bytes
    assert p.memory.max_micro_batch_size >= max(b for b, o in options.items() if o.fits)


def test_overlapped_collectives_slow_the_compute_they_run_beside():
    """Hand-worked: 10 s of compute beside 4 s of collectives take 10 + 0.189 x 4 = 10.756 s (the compute slows
    while both run, arXiv:2507.03114); beside 30 s they take 30 s (the collectives outlast even the slowed
    compute, 10 x 1.189 = 11.89 s); nothing to overlap adds nothing; a sequential pair would cost the sum."""
    from planner.physics.communication import OVERLAP_COMPUTE_SLOWDOWN, overlapped_exposed_seconds

    assert OVERLAP_COMPUTE_SLOWDOWN == pytest.approx(0.189)
    assert overlapped_exposed_seconds(10.0, 4.0) == pytest.approx(0.756)
    assert overlapped_exposed_seconds(10.0, 30.0) == pytest.approx(20.0)
    assert overlapped_exposed_seconds(10.0, 0.0) == 0.0
    assert overlapped_exposed_seconds(0.0, 3.0) == pytest.approx(3.0)
    # the sequential cost bounds it from above, the longer of the two from below
    for c in (0.5, 5.0, 9.0, 11.0, 50.0):
        assert max(10.0, c) <= 10.0 + overlapped_exposed_seconds(10.0, c) <= 10.0 + c
    arrays = overlapped_exposed_seconds(np.array([10.0, 10.0]), np.array([4.0, 30.0]))
    assert arrays == pytest.approx([0.756, 20.0])


def test_data_parallel_collectives_cross_nodes_over_every_member_s_nic():
    """A ZeRO-3 group of 32 GPUs on 4 nodes of 8 (TP 1) moves its all-gathers over the 8 NICs of each node
    (NCCL puts one ring per channel on each NIC: 192 GB/s busBW measured on DGX A100 with 8 x 25 GB/s,
    NVIDIA/nccl#812), not one NIC; with TP 8 the same group has one member per node and one NIC."""
    from planner.physics.efficiency import DEFAULT_EFFICIENCY
    from planner.training.footprint import training_memory
    from planner.training.inputs import training_hardware, training_inputs
    from planner.training.step import data_parallel_collectives

    def gathers(tp: int):
        s = TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=32 * tp,
            tensor_parallel=tp,
            data_parallel=32,
            zero_stage=3,
            gpu="h100-sxm",
            global_batch_size=64,
            micro_batch_size=1,
            inter_node_bandwidth_bytes_per_second=50e9,
        )
        arch, counts = s.architecture(), parameter_counts(s.architecture())
        inputs, hw = training_inputs(s), training_hardware(s, s.accelerator())
        states = training_memory(arch, counts, hw, inputs).last_stage.states
        seconds = data_parallel_collectives(hw, DEFAULT_EFFICIENCY, inputs, states).parameter_allgather_seconds
        return states.param_dense_bytes / seconds  # bytes gathered per second

    wide_rate, narrow_rate = gathers(1), gathers(8)
    # 8 NICs per node against one; one NIC at 0.75 x 50 GB/s gathers 32/31 of that (each rank sends (n-1)/n)
    assert wide_rate / narrow_rate == pytest.approx(8.0, rel=0.01)
    assert narrow_rate == pytest.approx(0.75 * 50e9 * 32 / 31, rel=0.02)


MOE_EP4 = dict(model="mixtral-8x7b", num_gpus=16, tensor_parallel=2, expert_parallel=4, global_batch_size=32)


def test_expert_load_imbalance_charges_the_busiest_rank_s_routed_experts_and_all_to_all():
    """Mixtral 8x7B (8 experts, top-2, 32 MoE layers): the busiest EP rank at 1.25 x the mean runs 0.25 x the
    routed experts' forward FLOPs per token three more times (forward and both backward GEMMs) in every MoE layer
    of its stage, and sends 1.25 x the dispatch bytes; the model FLOPs (MFU's numerator) stay."""
    from planner.training.inputs import training_inputs
    from planner.training.step import training_flops

    balanced = TrainingScenario(**MOE_EP4)
    skewed = TrainingScenario(**MOE_EP4, expert_load_imbalance=1.25)
    arch, counts = balanced.architecture(), parameter_counts(balanced.architecture())
    f0, f1 = (
        training_flops(arch, counts, training_inputs(balanced)),
        training_flops(arch, counts, training_inputs(skewed)),
    )
    routed = step_time.routed_expert_forward_flops_per_token(counts, True)
    # per MoE layer: 2 FLOPs x 3 matrices of 4096 x 14336 x the 2 active experts
    assert routed == pytest.approx(2 * 3 * 4096 * 14336 * 2)
    assert f1.stage_hardware_flops_per_token - f0.stage_hardware_flops_per_token == pytest.approx(
        0.25 * routed * 3 * 32
    )
    assert f1.stage_gemm_flops_per_token - f0.stage_gemm_flops_per_token == pytest.approx(0.25 * routed * 3 * 32)
    assert f1.model_flops_per_token == f0.model_flops_per_token
    p0, p1 = plan(balanced).performance, plan(skewed).performance
    assert p1.communication_totals["expert_parallel_seconds"] == pytest.approx(
        1.25 * p0.communication_totals["expert_parallel_seconds"], rel=0.02
    )
    assert p1.step_seconds > p0.step_seconds and p1.mfu < p0.mfu
    assert any("1.25 x the mean share" in a for a in plan(skewed).assumptions)
    assert any("Routing assumed balanced" in a for a in plan(balanced).assumptions)


def test_expert_load_imbalance_needs_expert_parallelism_and_at_least_one():
    """With every expert on every GPU (EP 1) the split of tokens over experts does not move the step; below 1 is
    not an imbalance and is refused with the field named."""
    one = dict(MOE_EP4, expert_parallel=1)
    assert plan(TrainingScenario(**one, expert_load_imbalance=2.0)).performance.step_seconds == pytest.approx(
        plan(TrainingScenario(**one)).performance.step_seconds
    )
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="expert_load_imbalance"):
        TrainingScenario(**MOE_EP4, expert_load_imbalance=0.8)


def test_zero_bubble_h1_leaves_p_minus_1_times_f_plus_b_minus_2w():
    """ZB-H1 (Qi et al., ICLR 2024; DeepSeek-V3 report Table 2 'ZB1P'): the bubble is (p - 1)(F + B - 2W), W the
    weight-gradient GEMMs of one micro-batch, against 1F1B's (p - 1)(F + B); the rest of the step and the memory
    (1F1B's peak activations) are unchanged."""
    from planner.physics.efficiency import DEFAULT_EFFICIENCY
    from planner.training.inputs import training_hardware, training_inputs
    from planner.training.metrics import training_metrics
    from planner.training.step import weight_gradient_seconds

    fields = dict(model="llama-3.1-70b", num_gpus=32, tensor_parallel=4, pipeline_parallel=8, global_batch_size=32)
    one, zb = TrainingScenario(**fields), TrainingScenario(**fields, pipeline_schedule="zb-h1")
    arch, counts = zb.architecture(), parameter_counts(zb.architecture())
    inputs, hw = training_inputs(zb), training_hardware(zb, zb.accelerator())
    time = training_metrics(arch, counts, hw, DEFAULT_EFFICIENCY, inputs).time
    w = weight_gradient_seconds(inputs, time.flops, time.microbatch.compute_seconds)
    assert 0 < w < time.microbatch.compute_seconds / 2
    assert time.step.pipeline_bubble_seconds == pytest.approx(7 * (time.microbatch.slot_seconds - 2 * w))
    p1, pz = plan(one), plan(zb)
    assert p1.performance.step_breakdown_seconds["pipeline_bubble_seconds"] == pytest.approx(
        7 * time.microbatch.slot_seconds
    )
    others = [k for k in p1.performance.step_breakdown_seconds if k != "pipeline_bubble_seconds"]
    for k in others:
        assert pz.performance.step_breakdown_seconds[k] == pytest.approx(p1.performance.step_breakdown_seconds[k])
    assert pz.memory.total_bytes == p1.memory.total_bytes


def test_zero_bubble_needs_a_plain_pipeline():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="zb-h1 needs pipeline_parallel > 1 and virtual_pipeline_stages = 1"):
        TrainingScenario(pipeline_schedule="zb-h1")
    with pytest.raises(ValidationError, match="virtual_pipeline_stages=2"):
        TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=32,
            tensor_parallel=4,
            pipeline_parallel=8,
            virtual_pipeline_stages=2,
            global_batch_size=32,
            pipeline_schedule="zb-h1",
        )


def test_deepep_sends_one_copy_per_remote_node():
    """Hand-worked: top-8 over 4 nodes, uniform: a token reaches 3 x (1 - 0.75^8) = 2.6997 remote nodes where an
    all-to-all sends 8 x 3/4 = 6 copies across: 0.44995; inside one node nothing changes."""
    from planner.physics.communication import node_deduplicated_dispatch_share

    assert node_deduplicated_dispatch_share(8, 4) == pytest.approx(3 * (1 - 0.75**8) / 6)
    assert node_deduplicated_dispatch_share(8, 1) == 1.0
    assert node_deduplicated_dispatch_share(1, 4) == pytest.approx(1.0)  # top-1: one copy either way
    assert list(node_deduplicated_dispatch_share(8, np.array([1, 4]))) == pytest.approx([1.0, 0.44995], rel=1e-4)


def test_expert_dispatch_and_its_overlap_on_a_cross_node_expert_group():
    """Mixtral 8x7B, EP 8 over 32 GPUs at TP 4: the expert group spans 4 nodes. DeepEP cuts the all-to-all by the
    node share (top-2 over 4 nodes: 3 x (1 - 0.75^2) / 1.5 = 0.875); overlapping it under another micro-batch's
    compute leaves what outlasts that compute, plus its 18.9 % slowdown, exposed."""
    from planner.physics.communication import overlapped_exposed_seconds

    fields = dict(model="mixtral-8x7b", num_gpus=32, tensor_parallel=4, expert_parallel=8, global_batch_size=64)
    nccl = plan(TrainingScenario(**fields)).performance
    deepep = plan(TrainingScenario(**fields, expert_dispatch="deepep")).performance
    total = nccl.communication_totals["expert_parallel_seconds"]
    assert deepep.communication_totals["expert_parallel_seconds"] == pytest.approx(
        total * 3 * (1 - 0.75**2) / 1.5, rel=0.02
    )
    overlapped = plan(TrainingScenario(**fields, overlap_expert_all_to_all=True)).performance
    m = 64 // 8  # micro-batches per replica (micro-batch 1, DP 8)
    compute = nccl.step_breakdown_seconds["forward_backward_seconds"] / m
    a2a = total / m
    assert overlapped.step_breakdown_seconds["expert_parallel_seconds"] == pytest.approx(
        m * overlapped_exposed_seconds(compute, a2a), rel=1e-6
    )
    assert overlapped.step_seconds < nccl.step_seconds
