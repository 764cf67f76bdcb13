"""Every number of an inference plan: memory, the prefill and decode steps, the steady-state serving
cycle with continuous batching, and its price.

`inference_metrics` is the whole computation over plain numbers; it broadcasts, so `planner.search.sweep`
runs the very same code over numpy arrays of scenarios (DESIGN rule 4). `plan_inference` feeds it one
scenario and wraps the numbers into a frozen `InferencePlan`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.arrays import Number, maximum, minimum, where
from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.inference.memory import Headroom, InferenceMemory, headroom, inference_memory
from planner.inference.speculative import Draft, SpeculativeRound, speculative_round
from planner.inference.steps import (
    PhaseStep,
    decode_step,
    prefill_step,
    request_overhead_seconds,
    uncached_prompt_tokens,
)
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as mem
from planner.physics.cost import usd_per_hour, usd_per_million_tokens
from planner.physics.efficiency import Efficiency


@dataclass(frozen=True, slots=True)
class ServingCycle:
    """Steady state with continuous batching on one replica: each request costs its share of a batched
    prefill once and a decode slot for `output_tokens` steps; a replica produces `sequences` tokens per
    decode step. Queueing is not modelled."""

    prefill_seconds_per_request: Number  # a chunk's time shared by the prompts in it
    cycle_seconds: Number  # sequences x prefill per request + output tokens x decode step
    tpot_seconds: Number  # mean time per output token, prefill interference included
    burst_ttft_seconds: Number  # the last request's TTFT when a replica's whole concurrency arrives at once
    e2e_latency_seconds: Number
    output_tokens_per_second_per_replica: Number
    output_tokens_per_second: Number  # whole deployment
    output_tokens_per_second_per_gpu: Number
    requests_per_second: Number
    prefill_share_of_time: Number


@dataclass(frozen=True, slots=True)
class InferenceSpend:
    usd_per_hour: Number  # every GPU billed, busy or not
    usd_per_million_output_tokens: Number


@dataclass(frozen=True, slots=True)
class InferenceMetrics:
    """The plan as numbers, per GPU unless named otherwise (arrays of them in a sweep)."""

    shape: ReplicaShape
    memory: InferenceMemory
    headroom: Headroom
    prefill: PhaseStep  # one request's uncached prompt at an idle replica
    request_overhead_seconds: Number  # the API server's per-request work before the prefill (TTFT only)
    decode: PhaseStep  # plain decoding (the verify step is `speculation.verify`)
    serving: ServingCycle
    spend: InferenceSpend
    speculation: SpeculativeRound | None = None  # with speculative decoding: the draft-and-verify round

    @property
    def draft_prefill_seconds(self) -> Number:
        return self.speculation.draft_prefill_seconds if self.speculation is not None else 0.0

    @property
    def ttft_seconds(self) -> Number:
        """Request overhead + the prefill step (which samples the first token) + a draft's pass over the
        prompt."""
        return self.request_overhead_seconds + self.prefill.seconds + self.draft_prefill_seconds

    @property
    def decode_seconds_per_token(self) -> Number:
        """Per sequence and output token: a decode step, or a speculative round over the tokens it yields."""
        return self.speculation.seconds_per_token if self.speculation is not None else self.decode.seconds


def inference_metrics(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: Efficiency,
    x: InferenceInputs,
    draft: Draft | None = None,
) -> InferenceMetrics:
    """Memory, then the steps sized by it, then the serving cycle they make and its price. With a
    speculative `draft`, decode advances by draft-and-verify rounds (`planner.inference.speculative`)."""
    shape = ReplicaShape.of(arch, x, hw)
    memory = inference_memory(arch, counts, hw, x, shape, draft)
    weights = memory.weights_bytes
    new_tokens = uncached_prompt_tokens(x.prompt_tokens, x.prefix_cache_hit_rate)
    prefill = prefill_step(arch, counts, hw, efficiency, x, shape, weights, new_tokens, 1)
    request_overhead = request_overhead_seconds(efficiency)
    decode = decode_step(arch, counts, hw, efficiency, x, shape, decode_read_weight_bytes(counts, x, weights))
    speculation = None
    if draft is not None:
        speculation = speculative_round(
            draft,
            arch,
            counts,
            hw,
            efficiency,
            x,
            shape,
            decode_read_weight_bytes(counts, x, weights),
            decode,
            new_tokens,
        )
    draft_prefill = speculation.draft_prefill_seconds if speculation is not None else 0.0
    prefill_per_request = (
        batched_prefill_seconds_per_request(arch, counts, hw, efficiency, x, shape, weights, new_tokens) + draft_prefill
    )
    per_token = speculation.seconds_per_token if speculation is not None else decode.seconds
    serving = serving_cycle(
        x, shape, request_overhead + prefill.seconds + draft_prefill, prefill_per_request, per_token
    )
    cluster_usd_per_hour = usd_per_hour(x.num_gpus, hw.usd_per_gpu_hour)
    return InferenceMetrics(
        shape=shape,
        memory=memory,
        headroom=headroom(arch, memory, x, shape, draft),
        prefill=prefill,
        request_overhead_seconds=request_overhead,
        decode=decode,
        speculation=speculation,
        serving=serving,
        spend=InferenceSpend(
            usd_per_hour=cluster_usd_per_hour,
            usd_per_million_output_tokens=usd_per_million_tokens(
                cluster_usd_per_hour, serving.output_tokens_per_second
            ),
        ),
    )


def decode_read_weight_bytes(counts: ParameterCounts, x: InferenceInputs, stage_weight_bytes: Number) -> Number:
    """Weights a decode step reads: the stage's, less a vision tower that decoding never runs (with one
    stage; with several the most loaded stage may be the last, which holds none, so nothing is taken off)."""
    if not counts.vision_encoder:
        return stage_weight_bytes
    vision = mem.vision_weight_bytes(counts, x.tensor_parallel, x.high_precision_bytes)
    return where(x.pipeline_parallel == 1, stage_weight_bytes - vision, stage_weight_bytes)


def batched_prefill_seconds_per_request(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: Efficiency,
    x: InferenceInputs,
    shape: ReplicaShape,
    stage_weight_bytes: Number,
    new_tokens: Number,
) -> Number:
    """Prefill time one request costs under load: prompts are prefilled in full chunks (as many whole
    prompts as a chunk holds, at most the replica's sequences), and a chunk reads the weights once for
    all of them, so each pays the chunk's time divided by the prompts in it."""
    prompts_per_chunk = maximum(np.floor(x.prefill_chunk_tokens / new_tokens), 1)
    prompts = minimum(prompts_per_chunk, shape.sequences)
    batched = prefill_step(arch, counts, hw, efficiency, x, shape, stage_weight_bytes, new_tokens, prompts)
    return batched.seconds / prompts


def serving_cycle(
    x: InferenceInputs,
    shape: ReplicaShape,
    ttft_seconds: Number,
    prefill_seconds_per_request: Number,
    decode_step_seconds: Number,
) -> ServingCycle:
    """The steady-state cycle of one replica and the rates it sustains (see `ServingCycle`)."""
    sequences, output = shape.sequences, x.output_tokens
    prefill_seconds = sequences * prefill_seconds_per_request
    cycle = prefill_seconds + output * decode_step_seconds
    tpot = cycle / output
    per_replica = sequences * output / cycle
    tokens_per_second = per_replica * shape.replicas
    return ServingCycle(
        prefill_seconds_per_request=prefill_seconds_per_request,
        cycle_seconds=cycle,
        tpot_seconds=tpot,
        burst_ttft_seconds=maximum(prefill_seconds, ttft_seconds),
        e2e_latency_seconds=ttft_seconds + (output - 1) * tpot,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_second=tokens_per_second,
        output_tokens_per_second_per_gpu=tokens_per_second / x.num_gpus,
        requests_per_second=tokens_per_second / output,
        prefill_share_of_time=prefill_seconds / cycle,
    )
