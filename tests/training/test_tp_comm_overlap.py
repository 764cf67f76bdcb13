"""Tensor-parallel communication overlap by decomposition (`tp_comm_overlap`: Transformer Engine's userbuffers,
Megatron's --tp-comm-overlap): every TP collective is split into TP chunks pipelined with its GEMM's, so all but one
chunk of each hide under the layer GEMMs, the GEMMs slowed while they run beside them; planner/training/step.py
tensor_parallel_hidden_seconds."""

from __future__ import annotations

import pytest

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics.communication import OVERLAP_COMPUTE_SLOWDOWN
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.training.inputs import training_hardware, training_inputs
from planner.training.metrics import training_metrics
from planner.training.scenario import TrainingScenario

TP8 = dict(model="llama-3.1-70b", num_gpus=64, tensor_parallel=8, pipeline_parallel=4, global_batch_size=256)


def _time(**overrides):
    s = TrainingScenario(**{**TP8, **overrides})
    arch, counts = s.architecture(), parameter_counts(s.architecture())
    inputs, hw = training_inputs(s), training_hardware(s, s.accelerator())
    return training_metrics(arch, counts, hw, DEFAULT_EFFICIENCY, inputs).time, plan(s)


def test_all_but_one_chunk_of_every_collective_hides_under_the_gemms():
    """Llama 3.1 70B at TP8 on H100: the micro-batch's GEMMs outlast its TP collectives, so 7/8 of them hide, less the
    18.9 % the GEMMs slow down beside them (arXiv:2507.03114); what stays exposed is one chunk plus that slowdown."""
    off, off_plan = _time()
    on, on_plan = _time(tp_comm_overlap=True)
    flops, micro = on.flops, on.microbatch
    tp = micro.communication.tensor_parallel_seconds
    gemms = micro.compute_seconds * flops.stage_gemm_flops_per_token / flops.stage_hardware_flops_per_token
    chunked = tp * 7 / 8
    assert gemms > chunked
    assert micro.tensor_parallel_hidden_seconds == pytest.approx(chunked * (1 - OVERLAP_COMPUTE_SLOWDOWN))
    assert micro.tensor_parallel_exposed_seconds == pytest.approx(tp / 8 + OVERLAP_COMPUTE_SLOWDOWN * chunked)
    assert off.microbatch.tensor_parallel_hidden_seconds == 0
    assert on_plan.performance.step_seconds < off_plan.performance.step_seconds
    # the collectives themselves do not change: only how much of them the step waits on
    assert on_plan.performance.communication_totals == off_plan.performance.communication_totals


def test_never_hides_less_than_megatron_s_asynchronous_backward_and_nothing_at_tp1():
    both, _ = _time(tp_comm_overlap=True, overlap_tp_backward=True)
    backward, _ = _time(overlap_tp_backward=True)
    decomposed, _ = _time(tp_comm_overlap=True)
    hidden = [t.microbatch.tensor_parallel_hidden_seconds for t in (both, backward, decomposed)]
    assert hidden[0] == max(hidden[1], hidden[2]) and hidden[2] > hidden[1] > 0
    tp1, _ = _time(tp_comm_overlap=True, tensor_parallel=1, num_gpus=8, pipeline_parallel=1)
    assert tp1.microbatch.tensor_parallel_hidden_seconds == 0
    assert tp1.microbatch.communication.tensor_parallel_seconds == 0


def test_the_plan_says_which_overlap_it_assumed():
    _, on_plan = _time(tp_comm_overlap=True)
    assert any("userbuffers" in a for a in on_plan.assumptions)
    _, off_plan = _time()
    assert not any("userbuffers" in a for a in off_plan.assumptions)
