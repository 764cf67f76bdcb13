"""MXFP8 routed experts in training: their grouped GEMMs and the quantization and scale-layout kernels around them at
torchao's published B200 per-kernel times (planner.physics.grouped_gemm_training), in plan and sweep alike."""

from __future__ import annotations

import numpy as np
import pytest

from planner import PlanningError, plan
from planner.model.architecture import parameter_counts
from planner.physics import grouped_gemm_training as ggt
from planner.physics.efficiency import Efficiency
from planner.scenario import parse_scenario
from planner.search.sweep import evaluate_training, training_grid, training_scenario_for_row
from planner.training.inputs import training_hardware, training_inputs
from planner.training.named_kernels import fp8_cast_seconds, routed_expert_grouped_gemms
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops


def test_the_source_table_is_reproduced_at_its_own_shape():
    """torchao README, 'MXFP8 Kernel Breakdown by Pass' (B200, DeepSeek-V3 shapes): GEMMs 1838.1 + 1838.1 + 2412.4 us,
    quantization 580.6 + 76.8 + 166.0 + 76.8 + 191.7 + 670.7 us, scale layout 198.7 + 11.4 + 192.5 + 11.0 + 17.4 +
    31.6 us: 8,314 us in all on B200's FP8 MAMF (3432.5 TFLOP/s) and 8.0 TB/s."""
    t = ggt.mxfp8_grouped_gemm_time(131072, 2048, 7168, 8, 1, 3432.5e12, 8.0e12)
    assert t.gemm_seconds == pytest.approx((1838.1 * 2 + 2412.4) * 1e-6, rel=1e-9)
    assert t.quantize_seconds == pytest.approx((580.6 + 76.8 + 166.0 + 76.8 + 191.7 + 670.7) * 1e-6, rel=2e-3)
    assert t.rearrange_seconds == pytest.approx((198.7 + 11.4 + 192.5 + 11.0 + 17.4 + 31.6) * 1e-6, rel=1e-9)
    assert t.total_seconds * 1e6 == pytest.approx(8314, abs=1)
    # the rates the docstring quotes
    assert ggt.FORWARD_GEMM_OF_MAMF == pytest.approx(0.610, abs=5e-4)
    assert ggt.WEIGHT_GRADIENT_GEMM_OF_MAMF == pytest.approx(0.465, abs=5e-4)
    assert ggt.ROWWISE_QUANTIZE_OF_HBM == pytest.approx(0.613, abs=5e-4)
    assert ggt.COLWISE_QUANTIZE_OF_HBM == pytest.approx(0.531, abs=5e-4)


def test_small_experts_pay_a_larger_share_outside_the_gemm():
    """The quantization kernels scale with rows x (N + K), the GEMM with rows x N x K: Qwen3-30B-A3B's experts
    (hidden 2048, intermediate 768) spend a larger share of their time outside the GEMM than DeepSeek-V3's."""

    def outside_share(n, k):
        t = ggt.mxfp8_grouped_gemm_time(131072, n, k, 8, 1, 3432.5e12, 8.0e12)
        return (t.quantize_seconds + t.rearrange_seconds) / t.total_seconds

    assert outside_share(2048, 7168) == pytest.approx(2225 / 8314, abs=0.002)
    assert outside_share(1536, 2048) > 1.5 * outside_share(2048, 7168)


def _expert_work(flops):
    return flops.stage_moe_layers, flops.routed_expert_forward_passes, flops.expert_load_imbalance


def _qwen(**fields):
    base = {
        "model": "qwen3-30b-a3b",
        "gpu": "b200",
        "num_gpus": 8,
        "expert_parallel": 8,
        "precision": "fp8",
        "micro_batch_size": 4,
        "global_batch_size": 512,
        "sequence_length": 4096,
    }
    return TrainingScenario.model_validate({**base, **fields})


def test_mxfp8_moves_exactly_the_experts_from_the_flat_rate_to_the_published_kernels():
    """Same plan under current scaling and MXFP8: the micro-batch's compute differs by the grouped-GEMM time less
    the same FLOPs at the flat FP8 rate (the training efficiency x this GPU's ceiling ratio of the FP8 peak), nothing else."""
    mx, cur = _qwen(fp8_recipe="mxfp8"), _qwen(fp8_recipe="current")
    arch = mx.architecture()
    counts = parameter_counts(arch)
    hw, inputs = training_hardware(mx, mx.accelerator()), training_inputs(mx)
    flops = training_flops(arch, counts, inputs)
    expert_flops, expert_seconds = routed_expert_grouped_gemms(arch, hw, inputs, *_expert_work(flops))
    # hand count: 48 MoE layers, rows = 16384 tokens x 8, gate/up 2048 -> 1536, down 768 -> 2048, 3 passes
    assert expert_flops == pytest.approx(48 * 2 * 16384 * 8 * (2048 * 1536 + 768 * 2048) * 3)
    flat_rate = (
        hw.gemm_peak_flops_per_second
        * hw.gemm_format_ceiling_ratio
        * Efficiency().training_compute
        * hw.gemm_ceiling_ratio
    )
    m_mx, m_cur = plan(mx).performance, plan(cur).performance
    microbatches = 512 // (8 * 4)
    delta = (
        m_mx.step_breakdown_seconds["forward_backward_seconds"]
        - m_cur.step_breakdown_seconds["forward_backward_seconds"]
    )
    # and the casts the two recipes run beside the GEMMs (MXFP8's routed experts cast inside their own term)
    cur_inputs, cur_hw = training_inputs(cur), training_hardware(cur, cur.accelerator())
    casts = fp8_cast_seconds(arch, hw, Efficiency(), inputs, flops) - fp8_cast_seconds(
        arch, cur_hw, Efficiency(), cur_inputs, training_flops(arch, counts, cur_inputs)
    )
    assert delta == pytest.approx(microbatches * (expert_seconds - expert_flops / flat_rate + casts), rel=1e-9)
    assert m_mx.tokens_per_second_per_gpu < m_cur.tokens_per_second_per_gpu
    assert any("MXFP8 routed experts" in a for a in plan(mx).assumptions)


def test_dense_models_and_other_recipes_are_unchanged():
    dense = dict(model="llama-3.1-8b", gpu="b200", num_gpus=8, precision="fp8", global_batch_size=64)
    a = plan(TrainingScenario.model_validate({**dense, "fp8_recipe": "mxfp8"})).performance
    b = plan(TrainingScenario.model_validate({**dense, "fp8_recipe": "current"})).performance
    # a dense model differs only by its casts: 4 + 2/32 B per element against current scaling's 6
    fb = "forward_backward_seconds"
    ratio = (4 + 2 / 32) / 6
    d = TrainingScenario.model_validate({**dense, "fp8_recipe": "current"})
    di, dh = training_inputs(d), training_hardware(d, d.accelerator())
    dflops = training_flops(d.architecture(), parameter_counts(d.architecture()), di)
    cur_casts = fp8_cast_seconds(d.architecture(), dh, Efficiency(), di, dflops) * di.microbatches
    assert a.step_breakdown_seconds[fb] - b.step_breakdown_seconds[fb] == pytest.approx(
        cur_casts * (ratio - 1), rel=1e-9
    )
    s = _qwen(fp8_recipe="current")
    arch = s.architecture()
    inputs = training_inputs(s)
    flops = training_flops(arch, parameter_counts(arch), inputs)
    assert routed_expert_grouped_gemms(arch, training_hardware(s, s.accelerator()), inputs, *_expert_work(flops)) == (
        0.0,
        0.0,
    )


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200", "mi300x", "a100-80gb"])
def test_mxfp8_off_blackwell_is_refused_with_a_sentence(gpu):
    # refused where the scenario is built, so a page or link shows the sentence before any plan runs
    with pytest.raises((PlanningError, ValueError), match="fp8_recipe=mxfp8 needs a Blackwell GPU"):
        _qwen(gpu=gpu, fp8_recipe="mxfp8")


def test_mxfp8_needs_precision_fp8():
    with pytest.raises((PlanningError, ValueError), match="needs precision fp8"):
        _qwen(precision="mixed_bf16", fp8_recipe="mxfp8")


def test_sweep_prices_mxfp8_experts_as_the_plan_does():
    base = parse_scenario(
        {
            "kind": "training",
            "model": "qwen3-30b-a3b",
            "gpu": "gb200-nvl72",
            "num_gpus": 16,
            "global_batch_size": 256,
            "sequence_length": 4096,
            "precision": "fp8",
            "fp8_recipe": "mxfp8",
        }
    )
    grid = training_grid(base, num_gpus=[8, 16], tensor_parallel=[1, 2], pipeline_parallel=[1, 2])
    grid = grid.assign(expert_parallel=8)
    result = evaluate_training(base, grid)
    valid = np.flatnonzero(result.valid)
    assert valid.size
    for index in valid:
        row = result.iloc[index]
        assert row["step_seconds"] == plan(training_scenario_for_row(base, row)).performance.step_seconds


def test_a_sweep_over_gpus_refuses_mxfp8_rows_off_blackwell_by_the_scenario_sentence():
    base = _qwen(gpu="b200", fp8_recipe="mxfp8")
    result = evaluate_training(base, training_grid(base, gpus=["h100-sxm", "b200"]))
    by_gpu = {row["gpu"]: row for _, row in result.iterrows()}
    assert not by_gpu["h100-sxm"]["valid"]
    assert "needs a Blackwell GPU" in by_gpu["h100-sxm"]["invalid_reason"]
    assert by_gpu["b200"]["valid"]
    assert by_gpu["b200"]["step_seconds"] == plan(base).performance.step_seconds
