"""The prefill and decode steps: their terms by hand."""

from __future__ import annotations

import pytest

from planner import InferenceScenario
from planner.hardware.catalog import get_accelerator
from planner.inference.metrics import InferenceMetrics, inference_metrics
from planner.inference.scenario_inputs import scenario_inputs
from planner.physics.efficiency import DEFAULT_EFFICIENCY


def metrics_of(s: InferenceScenario) -> InferenceMetrics:
    """The plan's own inputs (`scenario_inputs`: the accelerator, the KV cache's and the weights' formats) through
    the engine with the documented efficiencies."""
    i = scenario_inputs(s)
    return inference_metrics(i.arch, i.counts, i.hw, DEFAULT_EFFICIENCY, i.inputs)


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


@pytest.mark.parametrize("pp", [1, 2])
def test_engine_fixed_costs_by_hand(pp):
    """Scheduler, sampler and request overhead: once per engine step (not per stage) and once per request."""
    s = InferenceScenario(
        model="llama-3.1-70b", num_gpus=4 * pp, tensor_parallel=4, pipeline_parallel=pp, concurrency=64
    )
    m = metrics_of(s)
    vocab = s.architecture().vocab_size
    assert vocab == 128_256
    # Prefill of one 2,048-token prompt in one chunk: one step, one sequence.
    # scheduler = 0.4 ms + 1 x 1.1 µs = 401.1 µs; sampler = 1 x 128,256 x 1.6e-11 s = 2.052 µs.
    assert m.prefill.scheduler_seconds == pytest.approx(0.4e-3 + 1.1e-6)
    assert m.prefill.sampler_seconds == pytest.approx(128_256 * 1.6e-11)
    # Decode: one engine step runs a micro-batch of 64 / pp sequences.
    batch = 64 // pp
    assert m.decode.scheduler_seconds == pytest.approx(0.4e-3 + batch * 1.1e-6)  # 470.4 µs at pp 1
    assert m.decode.sampler_seconds == pytest.approx(batch * 128_256 * 1.6e-11)  # 131.3 µs at pp 1
    for step in (m.prefill, m.decode):
        pipeline = (
            pp * (max(step.compute_seconds, step.memory_seconds) + step.collective_seconds + step.overhead_seconds)
            + step.handoff_seconds
        )
        assert step.seconds == pytest.approx(pipeline + step.scheduler_seconds + step.sampler_seconds)
        assert sum(step.terms().values()) == pytest.approx(step.seconds)
    # TTFT = 1.4 ms of API-server work (chat template, tokenisation) + the prefill step.
    assert m.request_overhead_seconds == 1.4e-3
    assert m.ttft_seconds == pytest.approx(1.4e-3 + m.prefill.seconds)


def test_prefill_chunks_each_pay_the_engine_step():
    """A prompt split into chunks takes one engine step per chunk, each scheduling and sampling it."""
    s = InferenceScenario(
        model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, prompt_tokens=8192, prefill_chunk_tokens=2048
    )
    m = metrics_of(s)
    # 8,192 / 2,048 = 4 chunks x (0.4 ms + 1.1 µs) = 1.6044 ms.
    assert m.prefill.scheduler_seconds == pytest.approx(4 * (0.4e-3 + 1.1e-6))
    assert m.prefill.sampler_seconds == pytest.approx(4 * 128_256 * 1.6e-11)
