"""FLOPs, schedule and communication terms of a training step."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.model.architecture import (
    matmul_flops_per_token,
    parameter_counts,
    prefill_attention_flops,
)
from planner.training import step_time
from planner.training.scenario import TrainingScenario


def test_model_flops_are_6n_plus_causal_attention():
    s = TrainingScenario()
    arch, counts, seq = s.architecture(), parameter_counts(s.architecture()), 4096
    model, hardware = step_time.model_training_flops_per_token(counts, arch, seq, True, 0)
    # norms and biases are elementwise, not matmul FLOPs (Llama has no biases)
    norms = counts.final_norms + arch.num_layers * counts.dense_layer.norms
    matmul_params = counts.total - counts.embedding - norms
    assert 2 * matmul_params == matmul_flops_per_token(counts) - 2 * norms
    expected = 6 * matmul_params + 3 * prefill_attention_flops(arch, seq) / seq
    assert model == pytest.approx(expected)
    assert hardware == pytest.approx(model)  # FlashAttention, no recomputation: nothing extra executed
    # causal attention adds 3 x 32 layers x 4 x 4096 x 2048.5 keys = 3.2 GFLOP per token to 6N = 45 GFLOP: +7 %
    assert model / (6 * (counts.total - counts.embedding)) == pytest.approx(1.07, abs=0.005)


def test_recomputation_and_lora_change_hardware_and_model_flops():
    s = TrainingScenario()
    arch, counts, seq = s.architecture(), parameter_counts(s.architecture()), 4096
    model, _ = step_time.model_training_flops_per_token(counts, arch, seq, True, 0)
    _, full = step_time.model_training_flops_per_token(counts, arch, seq, True, 2)
    head = step_time.head_training_flops_per_token(counts)
    assert (full - head) / (model - head) == pytest.approx(4 / 3)  # one more forward of every layer
    _, selective = step_time.model_training_flops_per_token(counts, arch, seq, True, 1)
    assert selective == pytest.approx(model)  # FlashAttention already recomputes inside its kernel
    lora_model, _ = step_time.model_training_flops_per_token(counts, arch, seq, True, 0, frozen_base=True)
    # no weight gradients for the frozen base: its matmuls run 2x instead of 3x; attention stays 3x
    attention = 3 * prefill_attention_flops(arch, seq) / seq
    assert lora_model == pytest.approx((model - attention) * 2 / 3 + attention)


def test_engine_hardware_flops_match_megatron_equation_3():
    """Narayanan et al. 2021 Eq. 3 counts the same work (full recomputation, unfused attention) minus biases and
    norms: within 0.2 %."""
    s = TrainingScenario(model="gpt-3-175b", gpu="a100-80gb", num_gpus=8, global_batch_size=8, sequence_length=2048)
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    _, hardware = step_time.model_training_flops_per_token(counts, arch, 2048, False, 2)
    paper = step_time.megatron_flops_per_step(1, 2048, 96, 12288, 51200) / 2048
    assert hardware == pytest.approx(paper, rel=2e-3)


def test_pipeline_bubble():
    assert step_time.pipeline_bubble_fraction(1, 8) == 0
    assert step_time.pipeline_bubble_fraction(4, 8) == 3 / 8
    assert step_time.pipeline_bubble_fraction(4, 8, 3) == 3 / 24


def test_links_switch_to_the_network_across_nodes():
    assert step_time.link_bandwidth(8, 8, 450e9, 50e9) == 450e9
    assert step_time.link_bandwidth(16, 8, 450e9, 50e9) == 50e9
    assert list(step_time.link_bandwidth(np.array([4, 32]), 8, 450e9, 50e9)) == [450e9, 50e9]


def test_tensor_parallel_comm_count():
    one = step_time.tensor_parallel_comm_seconds(1, 1000, 100, 2, 4, 0, 100e9, 0.0, 1.0)
    # ring all-reduce of 1000 x 100 x 2 B over 4 GPUs: 2 x 3/4 x 200 kB / 100 GB/s, 4 per layer
    assert one == pytest.approx(4 * 2 * 0.75 * 200_000 / 100e9)
    assert step_time.tensor_parallel_comm_seconds(1, 1000, 100, 2, 4, 2, 100e9, 0.0, 1.0) == pytest.approx(one * 6 / 4)
    assert step_time.tensor_parallel_comm_seconds(1, 1000, 100, 2, 1, 0, 100e9, 3e-6, 1.0) == 0


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
