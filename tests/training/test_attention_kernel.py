"""A named fused-attention kernel prices a training step's attention at its published rate
(planner.physics.attention_efficiency); unstated keeps the flat training efficiency."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics import attention_efficiency as ae
from planner.physics.efficiency import Efficiency
from planner.training.inputs import training_hardware, training_inputs
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops


def test_published_figures_and_the_flop_count_conversion():
    # FlashAttention-3 abstract (arXiv:2407.08608): FA2 at 35 % of H100, FA3 1.5-2.0 x faster (low end taken)
    assert ae.attention_kernel_fraction("h100-sxm", "fa2") == pytest.approx(0.35)
    assert ae.attention_kernel_fraction("h200", "fa3") == pytest.approx(0.525)
    assert ae.attention_kernel_fraction("h100-sxm", "cudnn") == ae.attention_kernel_fraction("h100-sxm", "fa3")
    # no published training figure: nothing (the flat efficiency applies)
    for gpu, kernel in (("a100-80gb", "fa2"), ("b200", "fa3"), ("h100-sxm", "unstated"), ("mi300x", "cudnn")):
        assert ae.attention_kernel_fraction(gpu, kernel) == 0.0
    # FlashAttention counts a training step's attention as 3.5 forwards, the planner as 3
    assert ae.planner_attention_efficiency("h100-sxm", "fa2") == pytest.approx(0.35 * 3 / 3.5)


def _step(**fields):
    s = TrainingScenario(**{"sequence_length": 8192, **fields})
    return s, plan(s).performance


def test_fa2_on_h100_adds_exactly_the_slower_attention_time():
    """Llama 3.1 8B on 8 H100, sequence 8192: the fa2 step exceeds the unstated one by the micro-batches'
    attention FLOPs at 0.35 x 3/3.5 of the peak less the same FLOPs at the flat efficiency (no overlapped
    collective or bubble changes the difference here: one GPU group, ZeRO 1)."""
    s, fa2 = _step(attention_kernel="fa2")
    _, flat = _step()
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    inputs, hw = training_inputs(s), training_hardware(s, s.accelerator())
    flops = training_flops(arch, counts, inputs)
    attention = inputs.tokens_per_microbatch * flops.stage_attention_flops_per_token
    at_kernel = attention / (hw.peak_flops_per_second * 0.35 * 3 / 3.5)
    flat_efficiency = min(Efficiency().training_compute * hw.gemm_ceiling_ratio, 1.0)
    at_flat = attention / (hw.peak_flops_per_second * flat_efficiency)
    m = inputs.microbatches
    assert fa2.step_breakdown_seconds["forward_backward_seconds"] - flat.step_breakdown_seconds[
        "forward_backward_seconds"
    ] == pytest.approx(m * (at_kernel - at_flat), rel=1e-6)
    assert fa2.step_seconds > flat.step_seconds and fa2.mfu < flat.mfu
    # FA3 runs 1.5 x FA2's rate: 0.525 x 3/3.5 = 0.45 of the peak, still below the flat 0.586 x 0.803/0.869 = 0.54
    _, fa3 = _step(attention_kernel="fa3")
    assert flat.step_seconds < fa3.step_seconds < fa2.step_seconds


def test_attention_flops_are_the_softmax_attention_only():
    """Causal attention of Llama 3.1 8B at 8192 per token and layer: 4 x 32 heads x 128 x 4096.5 mean keys forward,
    x 3 over forward and backward; op-level recomputation repeats no attention. Full recomputation repeats one
    more forward."""
    s = TrainingScenario(sequence_length=8192)
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    per_layer = 4 * 32 * 128 * (8192 + 1) / 2
    flops = training_flops(arch, counts, training_inputs(s))
    assert flops.stage_attention_flops_per_token == pytest.approx(3 * per_layer * 32)
    full = TrainingScenario(sequence_length=8192, activation_checkpointing="full")
    assert training_flops(arch, counts, training_inputs(full)).stage_attention_flops_per_token == pytest.approx(
        4 * per_layer * 32
    )


def test_unpublished_devices_do_not_move_and_unfused_attention_cannot_name_a_kernel():
    assert _step(gpu="a100-80gb", attention_kernel="fa2")[1].step_seconds == pytest.approx(
        _step(gpu="a100-80gb")[1].step_seconds
    )
    assert _step(gpu="b200", attention_kernel="cudnn")[1].step_seconds == pytest.approx(
        _step(gpu="b200")[1].step_seconds
    )
    with pytest.raises(ValidationError, match="attention_kernel=fa2 names a fused attention kernel"):
        TrainingScenario(attention_kernel="fa2", flash_attention=False)
