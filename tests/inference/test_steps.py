"""The prefill and decode steps: their terms by hand."""

from __future__ import annotations

import pytest

from planner import InferenceScenario
from planner.hardware.catalog import get_accelerator
from planner.inference.inputs import HardwareInputs, InferenceInputs
from planner.inference.metrics import InferenceMetrics, inference_metrics
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import DEFAULT_EFFICIENCY


def metrics_of(s: InferenceScenario) -> InferenceMetrics:
    arch, accel = s.architecture(), s.accelerator()
    hw = HardwareInputs.from_accelerator(accel, s.weight_dtype, accel.reference_usd_per_hour)
    return inference_metrics(arch, parameter_counts(arch), hw, DEFAULT_EFFICIENCY, InferenceInputs.from_scenario(s))


@pytest.mark.parametrize("pp", [1, 2])
def test_step_terms_by_hand(pp):
    s = InferenceScenario(model="llama-3.1-70b", num_gpus=4 * pp, tensor_parallel=4, pipeline_parallel=pp)
    m = metrics_of(s)
    h100 = get_accelerator("h100-sxm")
    for step in (m.prefill, m.decode):
        # 80 layers over pp stages, 20 µs each per step.
        assert step.overhead_seconds == pytest.approx(80 / pp * 20e-6)
        assert step.pipeline_parallel == pp
    # One hand-off at PP2, inside the node (TP4 x PP2 = 8 GPUs): the prompt's hidden states,
    # 2,048 tokens x 8,192 x 2 B = 33,554,432 B over NVLink at 75 % efficiency, plus its latency.
    handoff = (pp - 1) * (33_554_432 / (h100.interconnect_bandwidth_bytes_per_second * 0.75) + 3e-6)
    assert m.prefill.handoff_seconds == pytest.approx(handoff)
    assert h100.interconnect_latency_seconds == 3e-6
