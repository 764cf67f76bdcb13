"""One step composition: the traffic simulation's steps are the static plan's steps.

`steps.compose_step` is the only place a step's terms are added up; the simulation (`step_cost`) tabulates the
plan's work and load functions and composes its steps through it. This test holds the two paths together over a
random grid of scenarios (dense, MoE, MLA, sliding window, hybrid linear attention, speculative, PP, prefix hits,
images, overlap schedulers) at 1e-9, so a term that reached one path and not the other fails here at once.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from planner.inference.memory import inference_memory
from planner.inference.metrics import decode_read_weight_bytes
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.speculative import speculative_round
from planner.inference.steps import StepContext, decode_step, prefill_step
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic
from planner.physics.runtimes import DEFAULT_RUNTIME

REL = 1e-9

MODELS = [
    dict(model="llama-3.1-70b"),  # dense GQA
    dict(model="mixtral-8x7b"),  # MoE
    dict(model="deepseek-v2-lite", num_gpus=2, tensor_parallel=2),  # MLA + MoE
    dict(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1),  # sliding window + MoE
    dict(model="qwen3-next-80b-a3b", gpu="h200", num_gpus=2, tensor_parallel=2),  # hybrid linear attention
    dict(model="gemma-3-27b", num_gpus=1, tensor_parallel=1, images_per_request=2),  # images, local windows
    dict(model="llama-3.1-8b", num_gpus=2, tensor_parallel=1, pipeline_parallel=2),  # PP
    dict(model="qwen3-30b-a3b", num_gpus=4, tensor_parallel=2, expert_parallel=4),  # EP beyond TP
]
OPTIONS = [
    {},
    {"prefix_cache_hit_rate": 0.5},
    {"runtime": "sglang"},  # the overlap scheduler: no host time per step
    {"speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}},
    {"kv_cache_dtype": "fp8"},
]


def _grid(seed: int = 21, size: int = 16):
    """`size` (model, option) pairs drawn without replacement, plus every model once with no option."""
    rng = random.Random(seed)
    pairs = [(m, o) for m in range(len(MODELS)) for o in range(1, len(OPTIONS))]
    drawn = rng.sample(pairs, size) + [(m, 0) for m in range(len(MODELS))]
    return [
        pytest.param({**MODELS[m], **OPTIONS[o]}, id=f"{MODELS[m]['model']}-{'+'.join(OPTIONS[o]) or 'plain'}")
        for m, o in drawn
    ]


def _static(scenario: InferenceScenario):
    i = scenario_inputs(scenario)
    engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=10))
    shape = engine._costs["shape"]
    weights = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape, i.draft).weights_bytes
    return i, engine, shape, weights


@pytest.mark.parametrize("fields", _grid())
def test_a_simulated_step_is_the_static_step(fields):
    scenario = InferenceScenario.model_validate(fields)
    i, engine, shape, weights = _static(scenario)
    requests = engine.requests()
    cost = engine.step_cost(requests)
    pp = scenario.pipeline_parallel
    decode_weights = decode_read_weight_bytes(i.counts, i.inputs, weights)
    rng = random.Random(str(fields))
    for _ in range(4):
        batch, context = rng.randint(1, 64), rng.randint(1, cost.max_position_tokens)  # contexts it tabulates
        micro_shape = replace(shape, micro_batch=-(-batch // pp))
        x = replace(i.inputs, prompt_tokens=context, output_tokens=0)
        ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, x, micro_shape)
        expected = decode_step(ctx, decode_weights).seconds
        assert cost.mixed_seconds(batch, batch * context, []) == pytest.approx(expected, rel=REL)
        assert cost.decode_step_seconds(batch, batch * context) == pytest.approx(expected, rel=REL)
        assert cost.decode_seconds(batch, np.array([batch * context]))[0] == pytest.approx(expected, rel=REL)
        if i.draft is not None:
            static = speculative_round(i.draft, ctx, decode_weights, decode_step(ctx, decode_weights), context)
            rounds = engine.speculative_cost(requests)
            assert rounds.round_seconds(batch, batch * context, []) == pytest.approx(static.round_seconds, rel=REL)
            assert rounds.decode_round_seconds(batch, batch * context) == pytest.approx(static.round_seconds, rel=REL)
    # a lone prompt within one chunk (whole, or only the part the prefix cache misses) is the plan's prefill
    prompt = min(int(requests.prompt_tokens[0]), scenario.prefill_chunk_tokens)
    x = replace(i.inputs, prompt_tokens=prompt)
    ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, x, shape)
    for new in (prompt, max(prompt // 8, 1)):
        expected = prefill_step(ctx, decode_weights, new, 1).seconds
        assert cost.mixed_seconds(0, 0, [(prompt - new, prompt)]) == pytest.approx(expected, rel=REL)
        if i.draft is not None:
            static = speculative_round(i.draft, ctx, decode_weights, decode_step(ctx, decode_weights), new)
            rounds = engine.speculative_cost(requests)
            assert rounds.draft_prefill_seconds([(prompt - new, prompt)]) == pytest.approx(
                static.draft_prefill_seconds, rel=REL
            )


@pytest.mark.parametrize("fields", _grid(seed=7, size=6))
def test_the_terms_of_a_simulated_step_add_up_to_its_time(fields):
    """A mixed step (decodes and prompt pieces) is one `PhaseStep`: its named terms sum to its seconds, and its
    kernel groups' FLOPs and bytes are the work it was given."""
    scenario = InferenceScenario.model_validate(fields)
    _, engine, _, _ = _static(scenario)
    cost = engine.step_cost(engine.requests())
    step = cost.step(9, 9 * 1500, [(0, 700), (300, 500)])
    assert sum(step.terms().values()) == pytest.approx(step.seconds, rel=REL)
    assert step.tokens == -(-9 // scenario.pipeline_parallel) + 700 + 200
    host = 0.0 if scenario.runtime == "sglang" else step.scheduler_seconds
    assert step.scheduler_seconds == host
    assert scenario.runtime != DEFAULT_RUNTIME or step.scheduler_seconds > 0
