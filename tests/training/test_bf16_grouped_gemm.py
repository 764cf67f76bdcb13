"""16-bit routed experts in training: their grouped GEMMs at the rate torchao publishes for `torch._grouped_mm` on
B200 (planner.physics.grouped_gemm_training), as a share of each GPU's BF16 MAMF, in plan and sweep alike."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics import gemm_efficiency
from planner.physics import grouped_gemm_training as ggt
from planner.physics.efficiency import Efficiency
from planner.scenario import parse_scenario
from planner.search.sweep import evaluate_training, training_grid
from planner.training.inputs import bf16_grouped_gemm_flops, training_hardware, training_inputs
from planner.training.named_kernels import routed_expert_grouped_gemms
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops


def _qwen(**fields) -> TrainingScenario:
    base = {
        "model": "qwen3-30b-a3b",
        "gpu": "b200",
        "num_gpus": 8,
        "expert_parallel": 8,
        "micro_batch_size": 4,
        "global_batch_size": 512,
        "sequence_length": 4096,
    }
    return TrainingScenario.model_validate({**base, **fields})


def test_the_published_cells_read_as_shares_of_the_mamf():
    """DeepSeek-V3 shapes, G = 8: 3 x 2 x 128,000 x 2048 x 7168 FLOPs in 14,966.8 us = 753.3 TFLOP/s, 0.432 of B200's
    1745 TFLOP/s BF16 MAMF; Llama4 Scout, G = 8: 854.4 TFLOP/s, 0.490. The eight cells' mean is the figure."""
    assert 3 * 2 * 128_000 * 2048 * 7168 / 14966.8e-6 / 1745e12 == pytest.approx(0.4317, abs=1e-4)
    assert 3 * 2 * 128_000 * 8192 * 5120 / 37700.7e-6 / 1745e12 == pytest.approx(0.4896, abs=1e-4)
    assert ggt.BF16_GROUPED_GEMM_OF_MAMF == pytest.approx(0.4530, abs=1e-4)
    # B200: 0.453 x 1745 TFLOP/s = 790.5, a third of the 2250 TFLOP/s peak
    s = _qwen()
    assert bf16_grouped_gemm_flops(s, s.accelerator()) == pytest.approx(0.4530 * 1745e12, rel=1e-3)


def test_experts_by_hand_and_in_the_step():
    """Qwen3-30B-A3B, 16,384 tokens per micro-batch, top-8: per MoE layer gate/up (N = 1536, K = 2048) and down
    (N = 2048, K = 768) over 131,072 rows, three passes, at the grouped rate; the flat compute gives them up."""
    s = _qwen()
    arch = s.architecture()
    counts = parameter_counts(arch)
    hw, inputs = training_hardware(s, s.accelerator()), training_inputs(s)
    flops = training_flops(arch, counts, inputs)
    work = (flops.stage_moe_layers, flops.routed_expert_forward_passes, flops.expert_load_imbalance)
    expert_flops, expert_seconds = routed_expert_grouped_gemms(arch, hw, inputs, *work)
    hand_flops = 48 * 2 * 16384 * 8 * (1536 * 2048 + 2048 * 768) * 3
    assert expert_flops == pytest.approx(hand_flops)
    assert expert_seconds == pytest.approx(hand_flops / hw.bf16_grouped_gemm_flops_per_second, rel=1e-12)
    # against the flat training efficiency (0.586 x B200's ceiling ratio of the peak) they take ~1.6x as long
    flat_rate = hw.gemm_peak_flops_per_second * Efficiency().training_compute * hw.gemm_ceiling_ratio
    assert 1.3 < expert_seconds / (expert_flops / flat_rate) < 1.7


def test_fp8_and_fp32_recipes_and_dense_models_keep_the_flat_rate():
    for fields in ({"precision": "fp8", "fp8_recipe": "current"}, {"precision": "fp8"}, {"precision": "fp32"}):
        s = _qwen(**fields)
        assert bf16_grouped_gemm_flops(s, s.accelerator()) == 0.0
    dense = TrainingScenario(model="llama-3.1-8b", gpu="b200", num_gpus=8)
    arch = dense.architecture()
    inputs = training_inputs(dense)
    hw = training_hardware(dense, dense.accelerator())
    flops = training_flops(arch, parameter_counts(arch), inputs)
    assert routed_expert_grouped_gemms(arch, hw, inputs, 0, 1.0, 1.0) == (0.0, 0.0)
    assert flops.stage_moe_layers == 0


def test_other_gpus_read_their_own_mamf_and_the_plan_says_so():
    h100 = _qwen(gpu="h100-sxm")
    assert bf16_grouped_gemm_flops(h100, h100.accelerator()) == pytest.approx(
        ggt.BF16_GROUPED_GEMM_OF_MAMF * gemm_efficiency.gemm_ceiling("h100-sxm", "bf16") * 989.4e12, rel=1e-3
    )
    p = plan(h100)
    assert any("16-bit routed experts" in a and "Assumed" in a for a in p.assumptions)


def test_sweep_prices_16_bit_experts_as_the_plan_does():
    base = parse_scenario(
        {
            "kind": "training",
            "model": "qwen3-30b-a3b",
            "gpu": "b200",
            "num_gpus": 16,
            "expert_parallel": 8,
            "global_batch_size": 256,
            "sequence_length": 4096,
        }
    )
    grid = training_grid(base, num_gpus=[8, 16], tensor_parallel=[1, 2], pipeline_parallel=[1, 2])
    grid = grid.assign(expert_parallel=8)
    result = evaluate_training(base, grid)
    valid = np.flatnonzero(result.valid)
    assert len(valid) >= 2
    for i in valid:
        row = result.iloc[i]
        s = base.model_copy(
            update={
                "num_gpus": int(row.num_gpus),
                "tensor_parallel": int(row.tensor_parallel),
                "pipeline_parallel": int(row.pipeline_parallel),
                "expert_parallel": 8,
            }
        )
        assert row.step_seconds == pytest.approx(plan(s).performance.step_seconds, rel=1e-9)
