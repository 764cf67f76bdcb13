"""Every number is traceable (DESIGN rule 7): the step equations show every addend of their value."""

from __future__ import annotations

import pytest

from planner import InferenceScenario, plan
from planner.units import seconds

from .test_steps import metrics_of


@pytest.mark.parametrize("pp", [1, 2])
@pytest.mark.parametrize("model", ["llama-3.1-70b", "mixtral-8x7b"])
def test_step_equations_list_every_term_and_the_terms_add_up(model, pp):
    s = InferenceScenario(model=model, num_gpus=4 * pp, tensor_parallel=4, pipeline_parallel=pp)
    p = plan(s)
    m = metrics_of(s)
    equations = {e.name: e for e in p.equations}
    for name, step, value, request in (
        ("TTFT", m.prefill, p.performance.ttft_seconds, m.request_overhead_seconds),
        ("Decode step", m.decode, p.performance.decode_step_seconds, 0.0),
    ):
        # The pipeline's addends, read from the step's typed parts, then the engine's per-step scheduler and
        # sampler, and (TTFT) the request's own overhead.
        parts = [
            pp * step.kernels.seconds,
            pp * step.collective_seconds,
            pp * step.overhead_seconds,
            step.handoff_seconds,
            step.scheduler_seconds,
            step.sampler_seconds,
        ] + ([request] if request else [])
        assert all(part >= 0 for part in parts)
        assert equations[name].value == value
        assert sum(parts) == pytest.approx(value, rel=1e-3)
        for part in parts:
            assert seconds(part) in equations[name].substituted, (name, seconds(part), equations[name].substituted)
        # The overhead and (at PP2) the hand-offs are a visible share of the step: leaving either out of the
        # equation would miss its value by more than the tolerance above.
        assert pp * step.overhead_seconds > 2e-3 * value
        if pp > 1:
            assert step.handoff_seconds > 0
        # So are the engine's fixed costs.
        assert step.scheduler_seconds > 2e-3 * value and step.sampler_seconds > 0
    assert m.request_overhead_seconds > 2e-3 * p.performance.ttft_seconds
