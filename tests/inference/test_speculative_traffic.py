"""Speculative decoding under a request stream: a round costs what the static plan's `speculative_round` says,
each sequence gains 1 + A tokens per round with A drawn as the plan's Eq. 1 assumes, and the stream's TPOT
at a vanishing rate is the plan's speculative TPOT within the sampling noise of A."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from planner import plan
from planner.inference.draft import expected_tokens_per_step
from planner.inference.inputs import ReplicaShape
from planner.inference.memory import inference_memory
from planner.inference.plan import TRAFFIC_NOT_SIMULATED
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.serving.decoders import Speculation
from planner.inference.serving.scheduler import ReplicaContext, simulate_replica
from planner.inference.speculative import speculative_round
from planner.inference.steps import StepContext, decode_step
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic

EAGLE = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.8}
SPEC = InferenceScenario(speculative=EAGLE)  # Llama 3.1 70B, 4x H100, TP4, 2048 in / 512 out, batch cap 64


def _engine(scenario: InferenceScenario = SPEC, **traffic) -> TrafficEngine:
    return TrafficEngine.of(scenario, traffic=Traffic(**traffic))


def _replica(engine: TrafficEngine, speculation: Speculation | None):
    reqs = engine.requests()
    return reqs, simulate_replica(
        reqs.arrival_seconds,
        reqs.prompt_tokens,
        reqs.output_tokens,
        reqs.cached_prompt_tokens,
        np.arange(len(reqs)),
        ReplicaContext(
            engine.limits,
            engine.step_cost(reqs) if speculation is None else engine.speculative_cost(reqs),
            speculation=speculation,
        ),
    )


def _static_round(scenario: InferenceScenario, batch: int, context: int):
    """`speculative_round` at `batch` sequences (micro-batch over the pipeline) and `context` tokens each."""
    i = scenario_inputs(scenario)
    assert i.draft is not None
    shape = ReplicaShape.of(i.arch, i.inputs, i.hw)
    weights = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape, i.draft).weights_bytes
    micro_shape = replace(shape, micro_batch=-(-batch // scenario.pipeline_parallel))
    x = replace(i.inputs, prompt_tokens=context, output_tokens=0)
    ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, x, micro_shape)
    plain = decode_step(ctx, weights)
    return speculative_round(i.draft, ctx, weights, plain, context)


# ------------------------------------------------------------------------------------ round costs


@pytest.mark.parametrize(
    "scenario",
    [
        SPEC,
        InferenceScenario(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1, speculative=EAGLE),
        InferenceScenario(model="mixtral-8x7b", speculative={"method": "eagle", "num_speculative_tokens": 2}),
        InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-1b"}),
    ],
    ids=["eagle-tp4", "eagle-sliding-window", "eagle-moe", "draft-model"],
)
def test_a_round_costs_what_the_plan_s_speculative_round_says(scenario):
    """No second physics: a pure decode round is `speculative_round(...).round_seconds` (the verify step over
    k + 1 query tokens plus k draft steps without their scheduling), at the same batch and context."""
    engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=10))
    cost = engine.speculative_cost(engine.requests())
    k = scenario.speculative.num_speculative_tokens
    for batch, context in [(1, 100), (7, 3000), (64, 2300), (33, 129)]:
        static = _static_round(scenario, batch, context)
        assert cost.round_seconds(batch, batch * context, []) == pytest.approx(static.round_seconds, rel=1e-5)
        verify = cost.target.mixed_seconds(batch, batch * context, [], k + 1)
        assert verify == pytest.approx(static.verify.seconds, rel=1e-5)
    # the draft's pass over a whole prompt is the plan's draft_prefill_seconds (part of its TTFT)
    prompt = scenario.prompt_tokens
    static = _static_round(scenario, 1, prompt)
    assert cost.draft_prefill_seconds([(0, prompt)]) == pytest.approx(static.draft_prefill_seconds, rel=1e-9)


# --------------------------------------------------------------------------- against the static plan


def _rounds_moments(tokens: int, acceptance: float, k: int) -> tuple[float, float]:
    """Mean and variance of the rounds that produce `tokens` tokens when each round yields G = 1 + A of them,
    P(A >= j) = a^j (j <= k), the last round capped: exact, by recursion on the tokens left."""
    p = [acceptance**j - (acceptance ** (j + 1) if j < k else 0.0) for j in range(k + 1)]  # P(A = j)
    mean, square = [0.0] * (tokens + 1), [0.0] * (tokens + 1)
    for m in range(1, tokens + 1):
        mean[m] = 1 + sum(pj * mean[max(m - 1 - j, 0)] for j, pj in enumerate(p))
        square[m] = sum(pj * (1 + 2 * mean[max(m - 1 - j, 0)] + square[max(m - 1 - j, 0)]) for j, pj in enumerate(p))
    return mean[tokens], square[tokens] - mean[tokens] ** 2


def test_at_a_vanishing_rate_tpot_is_the_static_plan_s_speculative_tpot():
    """A lone sequence decodes by rounds of batch 1. The plan's TPOT is round / E at the request's mean context;
    the stream's is rounds x round / (output - 1) per request, rounds random. Tolerance: 4 standard errors of the
    mean of 200 requests' round counts (exact moments), the end-of-request cap's bias (exact mean rounds
    against (output - 1) / E) and the context grid's interpolation (2e-3, as for plain decoding)."""
    scenario = SPEC.model_copy(update={"concurrency": 1})
    static = plan(scenario).performance.speculative
    assert static is not None
    static_tpot = static.round_seconds / static.tokens_per_round
    n = 200
    result = _engine(scenario, requests_per_second=0.01, arrival="uniform", num_requests=n, seed=5).simulate()
    assert result.peak_batch == 1 and result.preemptions == 0
    tokens = scenario.output_tokens - 1
    mean_rounds, var_rounds = _rounds_moments(tokens, 0.8, 3)
    assert mean_rounds == pytest.approx(tokens / expected_tokens_per_step(0.8, 3), rel=0.01)  # E, up to the cap
    standard_error = math.sqrt(var_rounds / n) / mean_rounds  # relative, of the mean TPOT
    cap_bias = abs(mean_rounds * static.tokens_per_round / tokens - 1)
    assert result.tpot_seconds.mean == pytest.approx(static_tpot, rel=4 * standard_error + cap_bias + 2e-3)
    # the tighter statement: against the exact expected rounds
    expected = mean_rounds * static.round_seconds / tokens
    assert result.tpot_seconds.mean == pytest.approx(expected, rel=4 * standard_error + 2e-3)
    # and TTFT is the plan's (the draft's pass over the prompt included)
    assert result.ttft_seconds.p50 == pytest.approx(plan(SPEC).performance.ttft_seconds, rel=1e-6)
    # ITL by token: a request's gaps add up to its prefill step (its first token) plus (output - 1) x its TPOT
    prefill_step = result.ttft_seconds.p50 - result.queue_seconds.p50
    per_request = prefill_step + tokens * result.tpot_seconds.mean
    assert result.itl_seconds.mean == pytest.approx(per_request / scenario.output_tokens, rel=1e-3)


def test_with_acceptance_going_to_zero_a_round_yields_one_token_and_costs_verify_plus_draft():
    engine = _engine(requests_per_second=0.01, arrival="uniform", num_requests=5)
    plain_engine = _engine(InferenceScenario(), requests_per_second=0.01, arrival="uniform", num_requests=5)
    reqs, spec = _replica(engine, Speculation(drafted_tokens=3, acceptance=0.0, seed=0))
    _, plain = _replica(plain_engine, None)
    # the same steps, batches and held sequences as the plain stream: one token per sequence and round
    assert len(spec.step_seconds) == len(plain.step_seconds)
    assert np.array_equal(spec.step_batch, plain.step_batch)
    assert np.array_equal(spec.step_running, plain.step_running)
    assert spec.itl_tokens is not None and spec.itl_seconds is not None
    assert spec.itl_tokens.sum() == reqs.output_tokens.sum()
    # a lone request's decode rounds walk its context from the prompt up; each costs verify + k draft steps
    prompt = int(reqs.prompt_tokens[0])
    first_request_steps = spec.step_seconds[: int(reqs.output_tokens[0])]  # its prompt, then its rounds
    for j in [1, 2, 100, 400]:
        static = _static_round(SPEC, 1, prompt + j - 1)
        assert first_request_steps[j] == pytest.approx(static.round_seconds, rel=1e-5)
        assert static.round_seconds == pytest.approx(
            static.verify.seconds + 3 * (static.draft_step.seconds - static.draft_step.scheduler_seconds)
        )


# -------------------------------------------------------------------------------- the simulation


def test_little_s_law_holds_with_speculation():
    engine = _engine(requests_per_second=2.5, num_requests=1500, lengths="uniform", range_ratio=0.5, seed=3)
    reqs, timeline = _replica(engine, engine.speculation())
    busy = timeline.step_seconds.sum()
    held_time_average = np.dot(timeline.step_running, timeline.step_seconds) / busy
    throughput = len(reqs) / busy
    mean_held = np.mean(timeline.finish_seconds - timeline.scheduled_seconds)
    assert held_time_average == pytest.approx(throughput * mean_held, rel=0.02)
    # every output token is accounted for once (no preemption here)
    assert timeline.preemptions == 0
    assert timeline.itl_tokens is not None and timeline.itl_tokens.sum() == reqs.output_tokens.sum()


def test_the_same_seed_gives_the_same_answer_and_another_seed_another():
    engine = _engine(requests_per_second=3.0, num_requests=200, seed=1)
    a, b = engine.simulate(), engine.simulate()
    assert a == b
    other = engine.simulate(engine.traffic.model_copy(update={"seed": 2}))
    assert other.tpot_seconds.mean != a.tpot_seconds.mean


def test_a_sequence_gains_e_tokens_per_round_on_average():
    """Tokens after each request's first over the (sequence, round) pairs that made them: E = (1 - a^(k+1)) /
    (1 - a), less the end-of-request cap (< 1 % at 512 output tokens; the sampling error is ~0.1 %)."""
    engine = _engine(requests_per_second=4.0, num_requests=300, seed=4)
    reqs, timeline = _replica(engine, engine.speculation())
    assert timeline.preemptions == 0
    n = len(reqs)
    sequence_rounds = timeline.step_batch.sum() - n  # a step's batch counts each prompt it finished once
    gained = reqs.output_tokens.sum() - n
    assert gained / sequence_rounds == pytest.approx(expected_tokens_per_step(0.8, 3), rel=0.01)


def test_speculation_pays_under_a_light_stream_and_the_kv_tight_stream_still_finishes():
    light = {"requests_per_second": 1.0, "num_requests": 200, "seed": 1}
    spec = _engine(**light).simulate()
    plain = _engine(InferenceScenario(), **light).simulate()
    speedup = plan(SPEC.model_copy(update={"concurrency": 1})).performance.speculative.speedup
    assert plain.tpot_seconds.mean / spec.tpot_seconds.mean == pytest.approx(speedup, rel=0.1)
    long = InferenceScenario(prompt_tokens=8000, output_tokens=2000, concurrency=256, speculative=EAGLE)
    result = _engine(long, requests_per_second=None, num_requests=120, seed=6).simulate()
    assert result.preemptions > 0 and result.num_requests == 120
    assert math.isfinite(result.e2e_latency_seconds.p99)


def test_a_speculative_scenario_s_request_stream_is_simulated():
    p = plan(InferenceScenario(speculative=EAGLE, traffic=Traffic(requests_per_second=1.0, num_requests=50)))
    assert p.traffic is not None
    assert not any(w.startswith(TRAFFIC_NOT_SIMULATED) for w in p.warnings)
    assert any("draft-and-verify round" in a for a in p.assumptions)
