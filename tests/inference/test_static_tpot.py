"""The static plan's TPOT and end-to-end latency leave a request's own prefill to TTFT (issue 22, bug c).

At one sequence the plan's TPOT is the decode step, as a vllm-bench-style TPOT ((e2e - TTFT) / (output - 1)) of
the traffic simulation at a vanishing rate measures it; the issue's cases read 10.9 ms vs 7.4 ms and 188 ms vs
11.4 ms before the fix. With more sequences, the other sequences' prefills still interfere."""

from __future__ import annotations

import pytest

from planner import InferenceScenario, plan
from planner.inference.traffic import Traffic, TrafficEngine

ONE_SEQUENCE_CASES = [  # (model, gpu, GPUs, prompt tokens, output tokens): the three, every ratio
    ("llama-3.1-8b", "h100-sxm", 1, 8192, 64),
    ("qwen2.5-7b", "a100-80gb", 1, 30000, 16),
    ("llama-3.1-70b", "h100-sxm", 4, 2048, 256),
    ("qwen3-0.6b", "h100-sxm", 1, 128, 2048),
]


@pytest.mark.parametrize(("model", "gpu", "gpus", "prompt", "output"), ONE_SEQUENCE_CASES)
def test_one_sequence_tpot_and_e2e_match_the_simulator_at_a_vanishing_rate(model, gpu, gpus, prompt, output):
    scenario = InferenceScenario(
        model=model,
        gpu=gpu,
        num_gpus=gpus,
        tensor_parallel=gpus,
        prompt_tokens=prompt,
        output_tokens=output,
        concurrency=1,
    )
    static = plan(scenario).performance
    simulated = TrafficEngine.of(scenario, None, Traffic(requests_per_second=0.001, num_requests=3, seed=0)).simulate()
    assert static.tpot_seconds == pytest.approx(simulated.tpot_seconds.mean, rel=0.03)
    assert static.e2e_latency_seconds == pytest.approx(simulated.e2e_latency_seconds.mean, rel=0.03)
    # the prompt is TTFT's: the decode step alone, not (prefill + output x decode) / output
    assert static.tpot_seconds == pytest.approx(plan(scenario).performance.decode_step_seconds, rel=1e-9)


def test_other_sequences_prefills_still_interfere():
    one = plan(InferenceScenario(prompt_tokens=4096, output_tokens=128, concurrency=1)).performance
    many = plan(InferenceScenario(prompt_tokens=4096, output_tokens=128, concurrency=64)).performance
    cycle = many.output_tokens_per_second  # unchanged by the fix: every prefill is in the cycle
    assert many.tpot_seconds > many.decode_step_seconds and cycle > one.output_tokens_per_second
