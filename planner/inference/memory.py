"""Inference memory per GPU: what the scenario needs, and what else would fit in the engine's budget.

Scope: one GPU on the most loaded pipeline stage of the busiest replica. The terms themselves live in
`planner.physics.memory`; this module sizes them for the scenario. Broadcasts over arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.arrays import Number, maximum, minimum
from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.inference.speculative import Draft, draft_kv_bytes_per_sequence, draft_weight_bytes
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.model.cache import context_tokens_for_cache_bytes
from planner.physics import memory as mem
from planner.physics.runtimes import RuntimeMemoryInputs, kv_block_tokens, runtime_memory, runtime_profile
from planner.units import gib


@dataclass(frozen=True, slots=True)
class InferenceMemory:
    """Bytes per GPU by component, and the budget the serving engine may fill."""

    weights_bytes: Number
    kv_cache_bytes: Number
    activations_bytes: Number
    logits_bytes: Number
    runtime_overhead_bytes: Number
    budget_bytes: Number  # capacity x the engine's memory utilization
    # A speculative draft's weights and its own KV cache (present only with speculative decoding).
    draft_weights_bytes: Number = 0.0
    draft_kv_cache_bytes: Number = 0.0
    has_draft: bool = False
    # Encoding the profiled batch of images (multimodal prompts only): the tower's peak beyond the language
    # model's forward, and the encoder outputs held for it.
    vision_encoder_bytes: Number = 0.0
    has_images: bool = False
    # Memory the runtime keeps outside its KV budget, under the runtime's own name (`RuntimeProfile.
    # reserve_component`: SGLang's static pool reserve, TensorRT-LLM's free memory reserve, llama.cpp's compute
    # buffers); none for vLLM, whose budget fraction leaves it outside.
    reserve_bytes: Number = 0.0
    reserve_component: str | None = None
    # Multi-LoRA serving: the engine's adapter slots (max_loras x one slot at the largest rank), created with the
    # model, so before the KV pool is sized (`planner.inference.adapters`)
    lora_adapters_bytes: Number = 0.0
    has_adapters: bool = False
    # Of `weights_bytes`, copies the runtime builds beside the checkpoint's weights (vLLM v0.7's MLA decode
    # matrices, `memory.mla_absorbed_weight_bytes`): resident, but read in place of the projections they were
    # built from, so a step's weight reads leave them out (`read_weight_bytes`)
    weight_copies_bytes: Number = 0.0

    @property
    def read_weight_bytes(self) -> Number:
        """The weights a step streams: the checkpoint's, without the runtime's copies."""
        return self.weights_bytes - self.weight_copies_bytes

    def components(self) -> dict[str, Number]:
        """The named components, in the order the total adds them (`MemoryBreakdown.components`)."""
        named = {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "activations_bytes": self.activations_bytes,
            "logits_bytes": self.logits_bytes,
            "runtime_overhead_bytes": self.runtime_overhead_bytes,
        }
        if self.reserve_component is not None:
            named[self.reserve_component] = self.reserve_bytes
        if self.has_draft:
            named |= {
                "draft_weights_bytes": self.draft_weights_bytes,
                "draft_kv_cache_bytes": self.draft_kv_cache_bytes,
            }
        if self.has_images:
            named["vision_encoder_bytes"] = self.vision_encoder_bytes
        if self.has_adapters:
            named["lora_adapters_bytes"] = self.lora_adapters_bytes
        return named

    @property
    def total_bytes(self) -> Number:
        return (
            self.weights_bytes
            + self.kv_cache_bytes
            + self.activations_bytes
            + self.logits_bytes
            + self.runtime_overhead_bytes
            + self.reserve_bytes
            + self.draft_weights_bytes
            + self.draft_kv_cache_bytes
            + self.vision_encoder_bytes
            + self.lora_adapters_bytes
        )

    @property
    def fits(self):
        return self.total_bytes <= self.budget_bytes

    @property
    def kv_room_bytes(self) -> Number:
        """Budget left for KV cache (the target's and a draft's) once everything else is resident (never
        negative)."""
        return maximum(self.budget_bytes - (self.total_bytes - self.kv_cache_bytes - self.draft_kv_cache_bytes), 0.0)


@dataclass(frozen=True, slots=True)
class Headroom:
    """What else the same budget would hold, with everything but the KV cache unchanged."""

    max_concurrency: Number  # whole deployment, at the scenario's context
    max_context_tokens: Number  # per sequence, at the scenario's concurrency
    kv_blocks: Number  # paged blocks per GPU


def inference_memory(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    inputs: InferenceInputs,
    shape: ReplicaShape,
    draft: Draft | None = None,
) -> InferenceMemory:
    """Every component per GPU, as the runtime (`x.runtime`, `planner.physics.runtimes`) budgets it: weights,
    the KV cache of the replica's sequences at full context, and the reserves the engine holds back before
    sizing its KV pool: the activations of its profiling step (max_num_batched_tokens = the prefill chunk,
    whatever the workload), the sampler's fp32 logits copies over max_num_seqs rows (the replica's sequences,
    the smallest batch cap that runs them) and the non-torch memory its budget counts (plus a calibration's
    correction). The profiling run's torch peak is the larger of the forward's and the sampler's (the forward's
    intermediates are freed before sampling), so `logits_bytes` is the sampler's excess over the forward peak.
    Other runtimes budget the whole device and name what they keep outside their KV budget
    (`runtimes.runtime_memory`)."""
    tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
    context = inputs.prompt_tokens + inputs.output_tokens
    runtime = runtime_profile(inputs.runtime)
    weights = mem.weight_bytes(
        counts,
        arch,
        tp,
        pp,
        inputs.expert_parallel,
        inputs.linear_bytes_per_element,
        inputs.high_precision_bytes_per_element,
        inputs.embedding_bytes_per_element,
        inputs.attention_linear_bytes_per_element,
    )
    copies = 0.0
    if runtime.mla_absorbed_weights:
        attention_bytes = inputs.attention_linear_bytes_per_element or inputs.linear_bytes_per_element
        copies = mem.mla_absorbed_weight_bytes(arch, tp, pp, attention_bytes == 1, inputs.activation_bytes_per_element)
    reserves = runtime_memory(
        runtime,
        arch,
        RuntimeMemoryInputs(
            tensor_parallel=tp,
            capacity_bytes=hw.memory_capacity_bytes,
            fraction=inputs.memory_utilization,
            is_accelerator=hw.is_accelerator,
            weights_bytes=weights,
            prefill_chunk_tokens=inputs.prefill_chunk_tokens,
            decode_rows=shape.micro_batch,
            sequences=shape.sequences,
            prompt_tokens=inputs.prompt_tokens,
            activation_bytes_per_element=inputs.activation_bytes_per_element,
            correction_bytes=inputs.runtime_overhead_correction_bytes,
        ),
    )
    return InferenceMemory(
        weights_bytes=weights + copies,
        weight_copies_bytes=copies,
        kv_cache_bytes=mem.kv_cache_bytes(
            arch,
            tp,
            pp,
            shape.sequences,
            context,
            inputs.kv_bytes_per_element,
            kv_block_tokens(runtime, inputs.kv_block_tokens),
            inputs.honor_sliding_window,
            inputs.activation_bytes_per_element,
        ),
        activations_bytes=reserves.activations_bytes,
        logits_bytes=reserves.logits_bytes,
        runtime_overhead_bytes=reserves.runtime_overhead_bytes,
        budget_bytes=reserves.budget_bytes,
        reserve_bytes=reserves.reserve_bytes,
        reserve_component=runtime.reserve_component,
        draft_weights_bytes=draft_weight_bytes(draft, inputs) if draft else 0.0,
        draft_kv_cache_bytes=shape.sequences * draft_kv_bytes_per_sequence(draft, inputs) if draft else 0.0,
        vision_encoder_bytes=_vision_encoder_bytes(arch, inputs, shape, reserves.activations_bytes),
        has_images=bool(inputs.images_per_request),
        has_draft=draft is not None,
        lora_adapters_bytes=0.0 if inputs.adapters is None else inputs.adapters.slots * inputs.adapters.slot_bytes,
        has_adapters=inputs.adapters is not None,
    )


def profiled_images(inputs: InferenceInputs, shape: ReplicaShape):
    """Images vLLM V1 encodes in its profiling run: as many as the encoder budget (max_num_batched_tokens, the
    prefill chunk) holds, at least one, at most what the replica's sequences bring."""
    per_chunk = maximum(np.floor(inputs.prefill_chunk_tokens / maximum(inputs.tokens_per_image, 1)), 1)
    return minimum(per_chunk, shape.sequences * inputs.images_per_request)


def _vision_encoder_bytes(
    arch: ModelArchitecture, inputs: InferenceInputs, shape: ReplicaShape, forward_peak
) -> Number:
    """The encoder outputs held for the language model plus the tower's peak where it exceeds the language
    model's forward peak (the profiling run encodes first, then runs the forward with the outputs cached)."""
    if not inputs.images_per_request:
        return 0.0
    peak, outputs = mem.vision_encoder_profile_bytes(
        arch,
        profiled_images(inputs, shape),
        inputs.tokens_per_image,
        inputs.tensor_parallel,
        inputs.activation_bytes_per_element,
    )
    return outputs + maximum(peak - forward_peak, 0.0)


def runtime_assumption(inputs: InferenceInputs, memory: InferenceMemory) -> str:
    """The plan's sentence on which runtime it assumes and what that runtime reserves, per GPU."""
    runtime = runtime_profile(inputs.runtime)
    if runtime.budget_kind != "profiled":
        share = (
            f"gpu_memory_utilization {float(inputs.memory_utilization):g} is read as {runtime.fraction_setting}"
            if runtime.fraction_setting
            else "gpu_memory_utilization does not apply"
        )
        reserve = (
            f"; {runtime.reserve_component.removesuffix('_bytes').replace('_', ' ')} {gib(float(memory.reserve_bytes))}"
            if runtime.reserve_component
            else ""
        )
        return (
            f"Runtime: {runtime.title} ({runtime.version}): {runtime.budget_rule}; {share}{reserve}; non-torch memory "
            f"{gib(float(memory.runtime_overhead_bytes))}. Source: {runtime.sources[0]}."
        )
    absorbed = ""
    if float(memory.weight_copies_bytes):
        absorbed = (
            " Weights include the MLA decode copies this release builds at load time (W_Q_UK, W_UV_O in the "
            "checkpoint's format, W_QR, W_UK and W_UV in 16 bits; vllm/attention/backends/mla/utils.py "
            "process_weights_after_loading, removed in v0.8.0 by vLLM PR #14770)."
        )
    return (
        f"Runtime: {runtime.title} ({runtime.version}); KV pool = budget - weights - profiling-step activations "
        f"({gib(float(memory.activations_bytes))}, {int(inputs.prefill_chunk_tokens):,} tokens) - the sampler's excess "
        f"over them ({gib(float(memory.logits_bytes))}, {runtime.sampler_fp32_copies} fp32 copies of the logits) - "
        f"non-torch memory ({gib(float(memory.runtime_overhead_bytes))}); {runtime.budget_rule}. Source: "
        f"{runtime.sources[0]}.{absorbed}"
    )


def headroom(
    arch: ModelArchitecture,
    memory: InferenceMemory,
    inputs: InferenceInputs,
    shape: ReplicaShape,
    draft: Draft | None = None,
) -> Headroom:
    """Sequences, context and KV blocks the budget left for KV cache holds (`InferenceMemory.kv_room_bytes`).
    A speculative draft's cache grows with the sequences too: concurrency counts both caches; context and
    blocks count the target's share of the room (exact at the scenario's context). With HF generate() the
    batch's activations grow with it as well."""
    tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
    block_tokens = kv_block_tokens(runtime_profile(inputs.runtime), inputs.kv_block_tokens)
    room = memory.kv_room_bytes
    per_sequence = mem.kv_cache_bytes_per_sequence(
        arch,
        tp,
        pp,
        inputs.prompt_tokens + inputs.output_tokens,
        inputs.kv_bytes_per_element,
        block_tokens,
        inputs.honor_sliding_window,
        inputs.activation_bytes_per_element,
    )
    max_concurrency = np.floor(room / per_sequence) * shape.replicas
    if draft is not None:
        both = per_sequence + draft_kv_bytes_per_sequence(draft, inputs)
        max_concurrency = np.floor(room / both) * shape.replicas
        room = room * per_sequence / both
    if runtime_profile(inputs.runtime).budget_kind == "device":
        # generate() holds the whole batch's prompt activations (and the sampler's excess over them): both grow
        # linearly with the sequences, so each one's share counts against the concurrency too.
        batch_bytes = memory.activations_bytes + memory.logits_bytes
        per_sequence_all = (
            per_sequence
            + (draft_kv_bytes_per_sequence(draft, inputs) if draft is not None else 0.0)
            + batch_bytes / shape.sequences
        )
        max_concurrency = np.floor((memory.kv_room_bytes + batch_bytes) / per_sequence_all) * shape.replicas
    return Headroom(
        max_concurrency=max_concurrency,
        max_context_tokens=max_context_tokens(
            arch,
            tp,
            pp,
            inputs.kv_bytes_per_element,
            room / shape.sequences,
            block_tokens,
            inputs.honor_sliding_window,
            inputs.activation_bytes_per_element,
        ),
        kv_blocks=np.floor(room / mem.kv_block_bytes(arch, tp, pp, inputs.kv_bytes_per_element, block_tokens)),
    )


def max_context_tokens(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    kv_bytes_per_element,
    kv_budget_per_sequence,
    block_tokens: Number = 1,
    honor_sliding_window: bool = True,
    state_bytes_per_element: Number = 2.0,
):
    """Longest context one sequence can hold in `kv_budget_per_sequence` bytes on one GPU.

    Inverts `physics.memory.kv_cache_bytes_per_sequence` (`planner.model.cache.context_tokens_for_cache_bytes`
    on the whole-model budget the stage's share implies): full-attention layers grow with every token,
    windowed layers stop at their window, recurrent layers hold a constant state. Capped at the model's
    maximum context. Rounded down to a block.
    """
    whole_model_budget = kv_budget_per_sequence * arch.num_layers / mem.stage_layers(arch, pipeline_parallel)
    tokens = context_tokens_for_cache_bytes(
        arch, whole_model_budget, kv_bytes_per_element, state_bytes_per_element, tensor_parallel, honor_sliding_window
    )
    tokens = minimum(tokens, float(arch.max_context_tokens))
    return np.floor(np.floor(tokens) / block_tokens) * block_tokens
