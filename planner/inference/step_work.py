"""The work of an inference step on one GPU: its FLOPs and the HBM bytes it moves, term by term.

Scope: one GPU of one replica, one pipeline stage's share (FLOPs = 2 per multiply-add, `physics.flops`). The
static plan (`planner.inference.steps`), the traffic simulation's tables (`planner.inference.step_cost`), the
sweep and the calibration's probes all call these; every term broadcasts over numpy arrays (DESIGN rule 4).
"""

from __future__ import annotations

from planner.arrays import Flag, Number, ceil, maximum, where
from planner.inference.adapters import AdapterInputs
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.model.cache import decode_cache_traffic_bytes
from planner.physics import memory as mem
from planner.physics import roofline
from planner.physics.flops import decode_flops, decode_mixing_flops, prefill_flops, prefill_mixing_flops
from planner.physics.moe_efficiency import routed_expert_flops_per_token, routed_expert_read_bytes


def uncached_prompt_tokens(prompt_tokens, prefix_cache_hit_rate):
    """Prompt tokens a prefill must compute: those the prefix cache misses, at least one (the last
    position is always computed to sample the first output token)."""
    return maximum(ceil(prompt_tokens * (1 - prefix_cache_hit_rate)), 1)


def prefill_step_flops(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    prompt_tokens,
    new_tokens,
    prompts,
    tensor_parallel,
    pipeline_parallel,
):
    """Prefill FLOPs per GPU for `prompts` prompts computing their last `new_tokens` tokens: the replica's
    work (`physics.flops.prefill_flops`) split evenly over its tensor x pipeline GPUs."""
    return prefill_flops(counts, arch, prompt_tokens, prompts, new_tokens=new_tokens) / (
        tensor_parallel * pipeline_parallel
    )


def image_encoder_step_flops(
    encoder_flops_per_request, prompts, tensor_parallel, pipeline_parallel, from_start: Flag = True
):
    """The vision tower's work for the step's prompts per GPU: it runs tensor-parallel on the first stage, so
    over the pipeline's PP x stage time it costs as if spread over every stage. Each request's images are
    encoded once, with the prefill piece that starts at its prompt's first position (`from_start`): images sit
    at the start of a chat prompt, and a prefix-cache hit covers them (vLLM's prefix cache hashes the image
    content into its blocks), so a prompt whose prefix is cached encodes none."""
    return where(from_start, encoder_flops_per_request * prompts / (tensor_parallel * pipeline_parallel), 0.0)


def prefill_chunks(tokens, prefill_chunk_tokens):
    """Engine steps a prefill of `tokens` tokens takes with chunked prefill (each step reads the weights)."""
    return ceil(tokens / prefill_chunk_tokens)


def chunked(cost, tokens, chunks, chunk_tokens):
    """A cost each engine step pays for its own `n` tokens (`cost(n)`), summed over a prefill of `tokens` tokens in
    `chunks` chunks of at most `chunk_tokens`: the full chunks and the last, possibly shorter one, each as the
    traffic simulation steps them."""
    return (chunks - 1) * cost(chunk_tokens) + cost(tokens - (chunks - 1) * chunk_tokens)


def prefill_weight_read_bytes(stage_weight_bytes, stage_routed_expert_bytes, arch, tokens, chunks, chunk_tokens):
    """Weight bytes a prefill of `tokens` tokens in `chunks` chunks of at most `chunk_tokens` streams on one GPU, and
    the routed-expert part of them: every chunk reads the stage's weights, of its routed experts those its own
    tokens are routed to (all but for short chunks: uniform routing, `roofline.expected_distinct_experts`)."""
    e, k = arch.num_experts, arch.experts_per_token

    def reads(n):
        return roofline.decode_weight_read_bytes(stage_weight_bytes, stage_routed_expert_bytes, e, k, n)

    def experts(n):
        return routed_expert_read_bytes(stage_routed_expert_bytes, e, k, n)

    return chunked(reads, tokens, chunks, chunk_tokens), chunked(experts, tokens, chunks, chunk_tokens)


def prefill_step_bytes(weight_read_bytes, kv_write_bytes):
    """HBM traffic of a prefill on one GPU: the weights its chunks read plus the KV it writes."""
    return weight_read_bytes + kv_write_bytes


def decode_step_flops(
    counts: ParameterCounts, arch: ModelArchitecture, batch, context_tokens, tensor_parallel, pipeline_parallel
):
    """Decode FLOPs per GPU for one token of each of `batch` sequences at `context_tokens`
    (`physics.flops.decode_flops`), split evenly over the replica's tensor x pipeline GPUs."""
    return decode_flops(counts, arch, batch, context_tokens) / (tensor_parallel * pipeline_parallel)


def decode_step_mixing_flops(arch: ModelArchitecture, batch, context_tokens, tensor_parallel, pipeline_parallel):
    """The token-mixing part of `decode_step_flops` (attention, recurrent state updates) per GPU."""
    return decode_mixing_flops(arch, batch, context_tokens) / (tensor_parallel * pipeline_parallel)


def prefill_step_mixing_flops(
    arch: ModelArchitecture, prompt_tokens, new_tokens, prompts, tensor_parallel, pipeline_parallel
):
    """The token-mixing part of `prefill_step_flops` (attention, recurrent state updates) per GPU."""
    return prefill_mixing_flops(arch, prompt_tokens, prompts, new_tokens) / (tensor_parallel * pipeline_parallel)


def stage_routed_expert_bytes(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    linear_bytes_per_element,
):
    """Routed-expert weights resident on one GPU of the most loaded stage (split over max(TP, EP) GPUs)."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    return (
        mem.stage_moe_layers(arch, pipeline_parallel)
        * routed
        / maximum(tensor_parallel, expert_parallel)
        * linear_bytes_per_element
    )


def decode_kv_read_bytes(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    batch,
    context_tokens,
    kv_bytes_per_element,
    honor_sliding_window,
    state_bytes_per_element: Number = 2.0,
):
    """Cache traffic of a decode step on one GPU for its `batch` sequences at `context_tokens`: the keys
    each attention layer attends (tokens, not whole blocks; V3.2 only its top-k, plus its indexer keys) and
    each recurrent layer's state read and written back (`planner.model.cache.decode_cache_traffic_bytes`),
    for the stage's share of the layers."""
    per_sequence = decode_cache_traffic_bytes(
        arch, context_tokens, kv_bytes_per_element, state_bytes_per_element, tensor_parallel, honor_sliding_window
    )
    return batch * mem.stage_share(arch, pipeline_parallel, per_sequence)


def step_expert_flops_per_token(counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel):
    """Routed-expert FLOPs per token on one GPU (the part of the step's FLOPs that runs in fused-MoE grouped
    GEMMs); 0 for a dense model."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    return routed_expert_flops_per_token(
        routed, arch.num_experts, arch.experts_per_token, arch.num_moe_layers, tensor_parallel, pipeline_parallel
    )


def adapter_step_flops(adapters: AdapterInputs | None, tokens):
    """The LoRA shrink and expand FLOPs of a step's tokens through every wrapped projection on one GPU, one stage
    (`AdapterInputs.flops_per_token`); 0 without adapters."""
    return 0.0 * tokens if adapters is None else tokens * adapters.flops_per_token


def adapter_activation_bytes(adapters: AdapterInputs | None, tokens):
    """The activations the LoRA kernels move for a step's tokens on one GPU, one stage (their inputs read, the
    base outputs they add into read and written: `AdapterInputs.activation_bytes_per_token`); 0 without."""
    return 0.0 * tokens if adapters is None else tokens * adapters.activation_bytes_per_token


def adapter_step_bytes(adapters: AdapterInputs | None, sequences):
    """A and B of every distinct adapter among a step's sequences, each read once (the expected distinct count of
    independent draws from the shares, at most the slots: `AdapterInputs.expected_distinct`); 0 without adapters."""
    return 0.0 * sequences if adapters is None else adapters.slot_bytes * adapters.expected_distinct(sequences)
