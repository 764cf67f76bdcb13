"""MoE token permutation in a training micro-batch: the rows Megatron-core's all-to-all dispatcher copies, counted
by hand, and their seconds at the HBM roofline."""

from __future__ import annotations

import pytest

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import Efficiency
from planner.training.inputs import training_hardware, training_inputs
from planner.training.named_kernels import routed_token_copy_bytes, routed_token_copy_seconds
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops


def _qwen(**fields) -> TrainingScenario:
    base = {
        "model": "qwen3-30b-a3b",
        "gpu": "h100-sxm",
        "num_gpus": 8,
        "expert_parallel": 8,
        "micro_batch_size": 1,
        "global_batch_size": 64,
        "sequence_length": 4096,
    }
    return TrainingScenario.model_validate({**base, **fields})


def test_rows_copied_per_moe_layer_by_hand():
    """Qwen3-30B-A3B (hidden 2048, top-8, 128 experts), one 4096-token micro-batch, bf16 rows of 4096 B. Permute and
    unpermute: 2 x (1 + 8) x 4096 = 73,728 rows; with 16 local experts per rank (EP 8) the sort and unsort add
    4 x 8 x 4096 = 131,072; forward and backward move them once each."""
    s = _qwen()
    inputs = training_inputs(s)
    arch = s.architecture()
    assert routed_token_copy_bytes(arch, inputs, 1.0, 1.0) == (73_728 + 131_072) * 2048 * 2 * 2
    # selective recomputation of the moe module repeats the forward's copies
    assert routed_token_copy_bytes(arch, inputs, 2.0, 1.0) == (73_728 + 131_072) * 2048 * 2 * 3
    # the busiest rank's imbalance scales the rows it receives, not the ones it sends
    assert routed_token_copy_bytes(arch, inputs, 1.0, 1.5) == (73_728 + 1.5 * 131_072) * 2048 * 2 * 2
    # one local expert per rank (EP = 128 would need 128 GPUs): no local sort
    wide = _qwen(num_gpus=128, expert_parallel=128, global_batch_size=128)
    assert routed_token_copy_bytes(arch, training_inputs(wide), 1.0, 1.0) == 73_728 * 2048 * 2 * 2


def test_seconds_at_the_hbm_roofline_and_in_the_step():
    s = _qwen()
    arch, inputs, hw = s.architecture(), training_inputs(s), training_hardware(s, s.accelerator())
    flops = training_flops(arch, parameter_counts(arch), inputs)
    work = (flops.stage_moe_layers, flops.routed_expert_forward_passes, flops.expert_load_imbalance)
    efficiency = Efficiency()
    seconds = routed_token_copy_seconds(arch, hw, efficiency, inputs, *work)
    expected = 48 * (73_728 + 131_072) * 2048 * 2 * 2 / (hw.bandwidth_bytes_per_second * efficiency.memory_bandwidth)
    assert seconds == pytest.approx(expected, rel=1e-12)
    assert 0.025 < seconds < 0.035  # 80.5 GB at 3.35 TB/s x 0.8 on H100: ~30 ms per 4096-token micro-batch
    assert any("token permutation copies" in a for a in plan(s).assumptions)


def test_dense_models_copy_nothing():
    s = TrainingScenario(model="llama-3.1-8b", num_gpus=8)
    hw = training_hardware(s, s.accelerator())
    assert routed_token_copy_seconds(s.architecture(), hw, Efficiency(), training_inputs(s), 0, 1.0, 1.0) == 0
