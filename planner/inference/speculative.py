"""Speculative decoding's costs: the draft's weights and KV cache, and one draft-and-verify round.

A round costs one verify step of the target plus k draft steps. It pays while decode is memory-bound,
where k + 1 query tokens cost about what one does; once the batch makes the verify step compute-bound,
the round costs (k + 1)x and speculation slows decode down (`SpeculativeRound.speedup` < 1). The option
and the draft network are `planner.inference.draft`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.arrays import Number
from planner.inference.draft import (
    SpeculativeDecoding,
    draft_architecture,
    expected_tokens_per_step,
    head_fusion_parameters,
)
from planner.inference.inputs import InferenceInputs, ReplicaShape
from planner.inference.steps import PhaseStep, StepContext, decode_step, prefill_step
from planner.model.architecture import ModelArchitecture, ParameterCounts, parameter_counts
from planner.physics import memory as mem


@dataclass(frozen=True, slots=True)
class Draft:
    """What the formulas read for a speculative scenario (built once per scenario, scalar in a sweep)."""

    method: str
    arch: ModelArchitecture
    counts: ParameterCounts
    drafted_tokens: int  # k
    acceptance: float
    fusion_parameters: int
    modules: int  # MTP modules chained (each drafts one token); 1 for the others

    @property
    def shares_target_embeddings(self) -> bool:
        return self.method != "draft_model"


def draft_for(target: ModelArchitecture, spec: SpeculativeDecoding | None) -> Draft | None:
    if spec is None:
        return None
    arch = draft_architecture(target, spec)
    return Draft(
        method=spec.method,
        arch=arch,
        counts=parameter_counts(arch),
        drafted_tokens=spec.num_speculative_tokens,
        acceptance=spec.acceptance,
        fusion_parameters=head_fusion_parameters(target, spec.method),
        modules=min(target.mtp_layers, spec.num_speculative_tokens) if spec.method == "mtp" else 1,
    )


def draft_inputs(inputs: InferenceInputs) -> InferenceInputs:
    """The draft runs tensor-parallel like the target on the same GPUs, unpipelined, experts over the tensor
    group, in the target's weight formats (attention's included); it drafts text, so the request's images are the
    target's to encode, not the draft's. It runs no LoRA adapters: engines apply them to the target model only
    (vLLM's speculative decoding loads the draft without LoRA, vllm-project/vllm PR #11966)."""
    return replace(
        inputs, pipeline_parallel=1, expert_parallel=1, image_encoder_flops=0.0, images_per_request=0, adapters=None
    )


# ---------------------------------------------------------------------------------------------
# memory


def draft_weight_bytes(draft: Draft, inputs: InferenceInputs) -> Number:
    """Draft weights per GPU. A head adds its layer(s) and fusion projection, split over the tensor group
    (it reads the target's embedding and output head); a draft model adds all of its weights."""
    d = draft_inputs(inputs)
    if draft.shares_target_embeddings:
        own = draft.counts.layers_total + draft.fusion_parameters
        return draft.modules * own * d.linear_bytes_per_element / d.tensor_parallel
    return _draft_network_bytes(draft, d)


def _draft_network_bytes(draft: Draft, d: InferenceInputs) -> Number:
    """The draft network's parameters on one GPU (`physics.memory.weight_bytes`, one stage, the target's formats;
    a head's network includes the embedding and output head it shares with the target)."""
    return mem.weight_bytes(
        draft.counts,
        draft.arch,
        d.tensor_parallel,
        1,
        1,
        d.linear_bytes_per_element,
        d.high_precision_bytes_per_element,
        d.embedding_bytes_per_element,
        d.attention_linear_bytes_per_element,
    )


def draft_kv_bytes_per_sequence(draft: Draft, inputs: InferenceInputs) -> Number:
    """The draft's own KV cache for one sequence at full context (+ k drafted positions), per GPU."""
    d = draft_inputs(inputs)
    context = d.prompt_tokens + d.output_tokens + draft.drafted_tokens
    return draft.modules * mem.kv_cache_bytes_per_sequence(
        draft.arch,
        d.tensor_parallel,
        1,
        context,
        d.kv_bytes_per_element,
        d.kv_block_tokens,
        d.honor_sliding_window,
        d.activation_bytes_per_element,
    )


# ---------------------------------------------------------------------------------------------
# time


@dataclass(frozen=True, slots=True)
class SpeculativeRound:
    """One round on a replica: the draft's k steps, then the target's verify step over k + 1 tokens each."""

    verify: PhaseStep  # the target over k + 1 query tokens per sequence
    draft_step: PhaseStep  # one draft step inside the round (no scheduling: the round pays it once, with `verify`)
    drafted_tokens: Number
    tokens_per_sequence: Number  # E: tokens each sequence gains per round
    round_seconds: Number
    plain_decode_seconds: Number  # the same batch's plain decode step, for the speedup
    draft_prefill_seconds: Number  # the draft's pass over one prompt (before the first round)

    @property
    def seconds_per_token(self) -> Number:
        """Per sequence and generated token: the decode step time the serving cycle reads."""
        return self.round_seconds / self.tokens_per_sequence

    @property
    def speedup(self) -> Number:
        """Plain decode step / seconds per token: > 1 while speculation pays."""
        return self.plain_decode_seconds / self.seconds_per_token


def draft_replica_shape(draft: Draft, shape: ReplicaShape) -> ReplicaShape:
    """The replica shape a draft step runs in: the target's micro-batch and links, the draft's layers."""
    return replace(shape, stage_layers=draft.arch.num_layers)


def draft_read_bytes(draft: Draft, inputs: InferenceInputs) -> Number:
    """Weight bytes one draft step streams per GPU: a head reads its own layer and the target's embedding and
    output head (plus its fusion projection); a draft model its weights."""
    d = draft_inputs(inputs)
    return _draft_network_bytes(draft, d) + draft.fusion_parameters * d.linear_bytes_per_element / d.tensor_parallel


def round_seconds(verify_seconds, draft_step_seconds, drafted_tokens):
    """A draft-and-verify round: the verify step, then `drafted_tokens` draft steps composed inside the round
    (`steps.StepLoad.in_round`). The static plan and the traffic simulation (`step_cost.SpeculativeStepCost`)
    both add a round up here."""
    return verify_seconds + drafted_tokens * draft_step_seconds


def speculative_round(
    draft: Draft, ctx: StepContext, stage_weight_bytes: Number, plain_decode: PhaseStep, new_prompt_tokens: Number
) -> SpeculativeRound:
    """One round on the target's replica (`ctx`): a verify step over k + 1 query tokens per sequence, and k draft
    steps of the draft network over the same micro-batch, composed `in_round` (the round pays the engine's
    scheduling once, with its verify step); the draft's pass over a prompt likewise."""
    k = draft.drafted_tokens
    verify = decode_step(ctx, stage_weight_bytes, query_tokens=k + 1)
    drafting = draft_context(draft, ctx)
    read_bytes = draft_read_bytes(draft, ctx.inputs)
    step = decode_step(drafting, read_bytes, in_round=True)
    prefill = prefill_step(drafting, read_bytes, new_prompt_tokens, 1, in_round=True)
    return SpeculativeRound(
        verify=verify,
        draft_step=step,
        drafted_tokens=k,
        tokens_per_sequence=expected_tokens_per_step(draft.acceptance, k),
        round_seconds=round_seconds(verify.seconds, step.seconds, k),
        plain_decode_seconds=plain_decode.seconds,
        draft_prefill_seconds=prefill.seconds,
    )


def draft_context(draft: Draft, ctx: StepContext) -> StepContext:
    """What the draft's steps are priced with: its own network, on the target's GPUs (`draft_inputs`) and
    micro-batch (`draft_replica_shape`)."""
    return StepContext(
        draft.arch,
        draft.counts,
        ctx.hw,
        ctx.efficiency,
        draft_inputs(ctx.inputs),
        draft_replica_shape(draft, ctx.shape),
    )
