"""The two inference steps on one GPU: a prefill step (prompt tokens in) and a decode step (one token
per sequence out), each as the work it does and the time every resource needs for it.

Scope: one GPU of one replica; FLOPs and bytes are one pipeline stage's share, times are per stage
(`PhaseStep.seconds` is the whole pipeline). One function per cost term; every term broadcasts over
numpy arrays (DESIGN rule 4), so `planner.search.sweep` runs this code, and `planner.calibration.fit`
predicts its measured steps with the same terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.arrays import Number, maximum, where
from planner.inference.inputs import HardwareInputs, InferenceInputs, Link, ReplicaShape
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.model.cache import decode_cache_traffic_bytes
from planner.physics import collectives, roofline
from planner.physics import memory as mem
from planner.physics.efficiency import Efficiency
from planner.physics.flops import decode_flops, decode_mixing_flops, prefill_flops, prefill_mixing_flops
from planner.physics.gemm_efficiency import GEMMS_PER_LAYER, phase_compute_efficiency
from planner.physics.moe_efficiency import (
    moe_layer_extra_seconds,
    routed_expert_flops_per_token,
    routed_expert_read_bytes,
)
from planner.physics.runtimes import runtime_profile


@dataclass(frozen=True, slots=True)
class KernelGroups:
    """One stage's kernels of a step as three groups, each with the time its FLOPs and its HBM bytes need
    (seconds): the dense GEMMs (resident weights), the fused-MoE calls (routed experts) and the token mixing
    (attention over the KV cache, recurrent state updates). `seconds` runs the groups one after another
    (`roofline.kernel_groups_seconds`)."""

    gemm_compute: Number  # FLOP time and the GEMM kernels' fixed time (`gemm_tail`)
    gemm_memory: Number
    expert_compute: Number
    expert_memory: Number
    mixing_compute: Number
    mixing_memory: Number
    gemm_tail: Number = 0.0  # the part of gemm_compute that is the kernels' fixed time, not FLOPs

    @property
    def compute_seconds(self) -> Number:
        return self.gemm_compute + self.expert_compute + self.mixing_compute

    @property
    def memory_seconds(self) -> Number:
        return self.gemm_memory + self.expert_memory + self.mixing_memory

    @property
    def seconds(self) -> Number:
        return roofline.kernel_groups_seconds(
            self.gemm_compute,
            self.gemm_memory,
            self.expert_compute,
            self.expert_memory,
            self.mixing_compute,
            self.mixing_memory,
        )

    @property
    def compute_bound_seconds(self) -> Number:
        """Time in the groups whose FLOPs take longer than their bytes (a GEMM kernel's fixed time is neither:
        small decode GEMMs whose time is mostly that fixed time are not compute-bound)."""
        return sum(where(f > m, t, 0.0) for f, m, t in self._groups())

    @property
    def memory_bound_seconds(self) -> Number:
        """Time in the groups whose bytes take at least as long as their FLOPs."""
        return sum(where(f > m, 0.0, t) for f, m, t in self._groups())

    def _groups(self):
        """(FLOP time, byte time, the group's time) per group."""
        return (
            (self.gemm_compute - self.gemm_tail, self.gemm_memory, maximum(self.gemm_compute, self.gemm_memory)),
            (self.expert_compute, self.expert_memory, maximum(self.expert_compute, self.expert_memory)),
            (self.mixing_compute, self.mixing_memory, maximum(self.mixing_compute, self.mixing_memory)),
        )


@dataclass(frozen=True, slots=True)
class PhaseStep:
    """One step of a phase: its work on one GPU and where its time goes.

    `seconds` = pipeline_parallel x (kernels + collectives + overhead) + hand-offs
    (`roofline.pipeline_step_seconds`; kernels: `KernelGroups.seconds`) + the engine's per-step scheduler and
    sampler time (paid once per engine step, not per stage); `terms()` lists those addends.
    """

    tokens: Number  # tokens the step processes on its replica
    flops: Number  # per GPU, one stage
    bytes: Number  # HBM traffic per GPU, one stage
    kernels: KernelGroups  # per stage: compute and memory time of each kernel group
    collective_seconds: Number  # per stage: tensor-parallel all-reduces (and MoE all-to-alls)
    overhead_seconds: Number  # per stage: kernel launches and synchronisation, layers x fixed cost
    handoff_seconds: Number  # all pipeline hand-offs of the step together
    scheduler_seconds: Number  # per engine step: CPU scheduling, input prep, per-sequence bookkeeping
    sampler_seconds: Number  # per engine step: sampling every scheduled sequence over the vocabulary
    pipeline_parallel: Number
    seconds: Number  # the whole step, every stage

    @property
    def compute_seconds(self) -> Number:
        """What the step's FLOPs need per stage, all kernel groups."""
        return self.kernels.compute_seconds

    @property
    def memory_seconds(self) -> Number:
        """What the step's HBM bytes need per stage, all kernel groups."""
        return self.kernels.memory_seconds

    @property
    def communication_seconds(self) -> Number:
        """Non-overlapped communication per stage, the hand-offs spread over the stages."""
        return self.collective_seconds + self.handoff_seconds / self.pipeline_parallel

    def terms(self) -> dict[str, Number]:
        """The addends of `seconds`, named as the equation shows them."""
        pp = self.pipeline_parallel
        return {
            "PP x kernel groups": pp * self.kernels.seconds,
            "PP x collectives": pp * self.collective_seconds,
            "PP x layer overhead": pp * self.overhead_seconds,
            "hand-offs": self.handoff_seconds,
            "scheduler": self.scheduler_seconds,
            "sampler": self.sampler_seconds,
        }


# ---------------------------------------------------------------------------------------------
# work: FLOPs and bytes


def uncached_prompt_tokens(prompt_tokens, prefix_cache_hit_rate):
    """Prompt tokens a prefill must compute: those the prefix cache misses, at least one (the last
    position is always computed to sample the first output token)."""
    return maximum(np.ceil(prompt_tokens * (1 - prefix_cache_hit_rate)), 1)


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


def image_encoder_step_flops(encoder_flops_per_request, prompts, tensor_parallel, pipeline_parallel):
    """The vision tower's work for the step's prompts per GPU: it runs tensor-parallel on the first stage, so
    over the pipeline's PP x stage time it costs as if spread over every stage (no encoder cache: each
    request's images are encoded once, with its prefill)."""
    return encoder_flops_per_request * prompts / (tensor_parallel * pipeline_parallel)


def prefill_chunks(tokens, prefill_chunk_tokens):
    """Engine steps a prefill of `tokens` tokens takes with chunked prefill (each step reads the weights)."""
    return np.ceil(tokens / prefill_chunk_tokens)


def prefill_kv_write_bytes(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    prompts,
    prompt_tokens,
    kv_bytes,
    block_tokens,
    honor_sliding_window,
    state_bytes_per_element: Number = 2.0,
):
    """Cache a prefill writes on one GPU: the prompts' whole cache, laid out as the engine stores it
    (whole paged blocks; sliding-window layers keep only their window when the engine honours it; a
    recurrent layer's final state once)."""
    return mem.kv_cache_bytes(
        arch,
        tensor_parallel,
        pipeline_parallel,
        prompts,
        prompt_tokens,
        kv_bytes,
        block_tokens,
        honor_sliding_window,
        state_bytes_per_element,
    )


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
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, linear_bytes
):
    """Routed-expert weights resident on one GPU of the most loaded stage (split over max(TP, EP) GPUs)."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    return (
        mem.stage_moe_layers(arch, pipeline_parallel)
        * routed
        / maximum(tensor_parallel, expert_parallel)
        * linear_bytes
    )


def decode_kv_read_bytes(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    batch,
    context_tokens,
    kv_bytes,
    honor_sliding_window,
    state_bytes_per_element: Number = 2.0,
):
    """Cache traffic of a decode step on one GPU for its `batch` sequences at `context_tokens`: the keys
    each attention layer attends (tokens, not whole blocks; V3.2 only its top-k, plus its indexer keys) and
    each recurrent layer's state read and written back (`planner.model.cache.decode_cache_traffic_bytes`),
    for the stage's share of the layers."""
    per_sequence = decode_cache_traffic_bytes(
        arch, context_tokens, kv_bytes, state_bytes_per_element, tensor_parallel, honor_sliding_window
    )
    return batch * mem.stage_share(arch, pipeline_parallel, per_sequence)


# ---------------------------------------------------------------------------------------------
# compute time by GEMM shape and GPU generation


def step_compute_seconds(flops, layer_passes, hw: HardwareInputs, phase_efficiency):
    """Compute time of a step on one GPU, one stage (`roofline.shaped_compute_seconds`): its FLOPs at the phase
    efficiency x this GPU generation's GEMM ceiling relative to the reference (MAMF; `physics.gemm_efficiency`),
    plus the fixed time of each GEMM kernel it launches (`GEMMS_PER_LAYER` per layer per forward pass; a chunked
    prefill passes the stage's layers once per chunk). The fixed time is what makes a small step (a short prompt,
    a small decode batch) reach less of the peak than a large one."""
    return roofline.shaped_compute_seconds(
        flops,
        hw.peak_flops_per_second,
        phase_efficiency,
        hw.gemm_ceiling_ratio,
        layer_passes * GEMMS_PER_LAYER,
        hw.gemm_tail_seconds,
    )


# ---------------------------------------------------------------------------------------------
# routed experts: fused-MoE efficiency (planner.physics.moe_efficiency)


def step_expert_flops_per_token(counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel):
    """Routed-expert FLOPs per token on one GPU (the part of the step's FLOPs that runs in fused-MoE grouped
    GEMMs); 0 for a dense model."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    return routed_expert_flops_per_token(
        routed, arch.num_experts, arch.experts_per_token, arch.num_moe_layers, tensor_parallel, pipeline_parallel
    )


def kernel_groups(
    flops,
    expert_flops,
    mixing_flops,
    bytes_moved,
    expert_bytes,
    mixing_bytes,
    layer_passes,
    hw: HardwareInputs,
    phase_efficiency,
    efficiency: Efficiency,
) -> KernelGroups:
    """A step's kernel groups from its FLOPs and bytes, of which `expert_*` run in fused-MoE calls and
    `mixing_*` in the token-mixing kernels:
    - dense GEMMs: their FLOPs by GEMM shape at the phase efficiency (`step_compute_seconds`, with every GEMM
      kernel's fixed time), their weight bytes at `memory_bandwidth`;
    - routed experts: FLOPs at `moe_expert_compute` x the device's ceiling ratio for the format (never the block-
      scaled FP8 one: `HardwareInputs.expert_ceiling_ratio`), bytes at `moe_expert_bandwidth`
      (published fused-MoE rates; `planner.physics.moe_efficiency`);
    - token mixing: FLOPs at the phase efficiency x the ceiling ratio of the attention's own format (the KV
      cache's: `HardwareInputs.attention_peak_flops_per_second`), no GEMM kernel tails; KV bytes at
      `memory_bandwidth`."""
    bandwidth, peak = hw.bandwidth_bytes_per_second, hw.peak_flops_per_second
    expert_efficiency = phase_compute_efficiency(efficiency.moe_expert_compute, hw.expert_ceiling_ratio)
    mixing_efficiency = phase_compute_efficiency(phase_efficiency, hw.attention_ceiling_ratio)
    return KernelGroups(
        gemm_compute=step_compute_seconds(flops - expert_flops - mixing_flops, layer_passes, hw, phase_efficiency),
        gemm_tail=layer_passes * GEMMS_PER_LAYER * hw.gemm_tail_seconds,
        gemm_memory=roofline.memory_seconds(
            bytes_moved - expert_bytes - mixing_bytes, bandwidth, efficiency.memory_bandwidth
        ),
        expert_compute=roofline.compute_seconds(expert_flops, peak, expert_efficiency),
        expert_memory=roofline.memory_seconds(expert_bytes, bandwidth, efficiency.moe_expert_bandwidth),
        mixing_compute=roofline.compute_seconds(mixing_flops, hw.attention_peak_flops_per_second, mixing_efficiency),
        mixing_memory=roofline.memory_seconds(mixing_bytes, bandwidth, efficiency.memory_bandwidth),
    )


def moe_overhead_seconds(arch: ModelArchitecture, pipeline_parallel, hw: HardwareInputs, efficiency: Efficiency):
    """Fixed time of one forward pass's fused-MoE calls on one stage beyond the layers' GEMM tails
    (`moe_efficiency.moe_layer_extra_seconds`); 0 for a dense model."""
    if not arch.is_moe:
        return 0.0
    return moe_layer_extra_seconds(
        mem.stage_moe_layers(arch, pipeline_parallel),
        efficiency.moe_layer_seconds,
        hw.gemm_tail_seconds,
        hw.is_accelerator,
    )


# ---------------------------------------------------------------------------------------------
# time beyond the roofline: communication and launch overhead


def activation_message_bytes(arch: ModelArchitecture, tokens, activation_bytes):
    """The hidden states of `tokens` tokens: what an all-reduce or a pipeline hand-off carries."""
    return tokens * arch.hidden_size * activation_bytes


def tensor_parallel_seconds(stage_layers, message_bytes, tensor_parallel, link: Link, efficiency: Efficiency):
    """Tensor-parallel all-reduces of one step on one stage: two per layer (after attention and after
    the MLP; Megatron-LM, Shoeybi et al. 2019, Sec. 3), each by the fastest algorithm for its message size on
    this link (`collectives.allreduce_seconds`: one-shot / two-shot where `link.peer_access`, ring / tree)."""
    return (
        stage_layers
        * 2
        * collectives.allreduce_seconds(
            message_bytes,
            tensor_parallel,
            link.bytes_per_second,
            link.latency_seconds,
            efficiency.communication,
            link.peer_access,
            link.nodes,
        )
    )


def expert_dispatch_seconds(
    arch: ModelArchitecture,
    pipeline_parallel,
    tokens,
    tensor_parallel,
    expert_parallel,
    link: Link,
    activation_bytes,
    efficiency: Efficiency,
):
    """MoE all-to-alls of one step on one stage when experts spread beyond the tensor group: each token's
    hidden state travels to its k experts and back (2 per MoE layer; GShard, Lepikhin et al. 2020).
    Zero for dense models and when expert_parallel <= tensor_parallel."""
    if not arch.is_moe:
        return 0.0
    dispatch = activation_message_bytes(arch, tokens * arch.experts_per_token, activation_bytes)
    all_to_all = (
        2
        * mem.stage_moe_layers(arch, pipeline_parallel)
        * collectives.allgather_seconds(
            dispatch, expert_parallel, link.bytes_per_second, link.latency_seconds, efficiency.communication
        )
    )
    return where(expert_parallel > tensor_parallel, all_to_all, 0.0)


def step_collective_seconds(arch: ModelArchitecture, x: InferenceInputs, shape: ReplicaShape, tokens, efficiency):
    """Collectives of one engine step of `tokens` tokens on one stage: the tensor-parallel all-reduces of their
    hidden states, and for a MoE model the all-to-alls to experts beyond the tensor group."""
    message = activation_message_bytes(arch, tokens, x.activation_bytes)
    seconds = tensor_parallel_seconds(shape.stage_layers, message, x.tensor_parallel, shape.tensor_link, efficiency)
    if not arch.is_moe:
        return seconds
    return seconds + expert_dispatch_seconds(
        arch,
        x.pipeline_parallel,
        tokens,
        x.tensor_parallel,
        x.expert_parallel,
        shape.expert_link,
        x.activation_bytes,
        efficiency,
    )


def step_handoff_seconds(arch: ModelArchitecture, x: InferenceInputs, shape: ReplicaShape, tokens, efficiency):
    """Pipeline hand-offs of one engine step of `tokens` tokens: their hidden states between the stages."""
    message = activation_message_bytes(arch, tokens, x.activation_bytes)
    return pipeline_handoff_seconds(message, x.pipeline_parallel, shape.pipeline_link, efficiency)


def pipeline_handoff_seconds(message_bytes, pipeline_parallel, link: Link, efficiency: Efficiency):
    """Point-to-point sends of the activations between consecutive stages: pp - 1 per step."""
    return (pipeline_parallel - 1) * collectives.p2p_seconds(
        message_bytes, link.bytes_per_second, link.latency_seconds, efficiency.communication
    )


def launch_overhead_seconds(stage_layers, efficiency: Efficiency):
    """Fixed per-layer cost of a forward step on one stage (kernel launches, synchronisation, small ops):
    what makes batch-1 decode slower than its bandwidth roofline. Fitted by the calibration's probe."""
    return stage_layers * efficiency.layer_overhead_seconds


def scheduler_seconds(sequences, efficiency: Efficiency, host_work_overlapped: bool = False):
    """CPU time of one engine step that the GPU waits for: a fixed cost (scheduling, input preparation)
    plus a cost per scheduled sequence (post-step bookkeeping). Once per engine step, whatever the
    pipeline depth. Defaults from vLLM V1 measurements (see `Efficiency`); the calibration's torch probe
    runs no engine, so it never refines them. None is exposed where the runtime overlaps that work with the
    GPU's (`RuntimeProfile.host_work_overlapped`: SGLang's and TensorRT-LLM's overlap schedulers)."""
    if host_work_overlapped:
        return 0.0 * sequences
    return efficiency.step_host_seconds + sequences * efficiency.sequence_host_seconds


def host_work_overlapped(x: InferenceInputs) -> bool:
    """Whether the scenario's runtime hides its per-step CPU work behind the GPU's (`scheduler_seconds`)."""
    return runtime_profile(x.runtime).host_work_overlapped


def sampler_seconds(sequences, vocab_size, efficiency: Efficiency):
    """Sampling one token for each of `sequences` sequences: top-k / top-p over `vocab_size` logits each
    (the logits themselves are the lm_head's FLOPs, counted in the step's compute)."""
    return sequences * vocab_size * efficiency.sampler_seconds_per_logit


def request_overhead_seconds(efficiency: Efficiency):
    """Per request, once, before its first engine step: chat template, tokenisation and request set-up in
    the API server. Latency only (TTFT): it runs beside the GPU's work for other requests."""
    return efficiency.request_overhead_seconds


# ---------------------------------------------------------------------------------------------
# the steps


def prefill_step(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: Efficiency,
    x: InferenceInputs,
    shape: ReplicaShape,
    stage_weight_bytes: Number,
    new_tokens: Number,
    prompts: Number,
) -> PhaseStep:
    """`prompts` prompts prefilled together, each computing its last `new_tokens` tokens (the rest hit the
    prefix cache), in chunks of at most `prefill_chunk_tokens`."""
    tp, pp = x.tensor_parallel, x.pipeline_parallel
    tokens = new_tokens * prompts
    flops = prefill_step_flops(counts, arch, x.prompt_tokens, new_tokens, prompts, tp, pp) + image_encoder_step_flops(
        x.image_encoder_flops, prompts, tp, pp
    )

    # The cache of the positions the prefill computes, token by token (a write fills the slots it uses; whole
    # blocks are the allocation, not the traffic): the prompt's cache less the cached prefix's, as the traffic
    # simulation writes each prompt piece (`step_cost.RooflineStepCost`).
    def cache_of(prompt_tokens):
        return prefill_kv_write_bytes(
            arch, tp, pp, prompts, prompt_tokens, x.kv_bytes, 1, x.honor_sliding_window, x.activation_bytes
        )

    kv_written = cache_of(x.prompt_tokens) - cache_of(x.prompt_tokens - new_tokens)
    chunks = prefill_chunks(tokens, x.prefill_chunk_tokens)
    routed_bytes = stage_routed_expert_bytes(counts, arch, tp, pp, x.expert_parallel, x.linear_bytes)
    weight_reads, expert_bytes = prefill_weight_read_bytes(
        stage_weight_bytes, routed_bytes, arch, tokens, chunks, x.prefill_chunk_tokens
    )
    bytes_moved = prefill_step_bytes(weight_reads, kv_written)
    expert_flops = tokens * step_expert_flops_per_token(counts, arch, tp, pp)
    mixing_flops = prefill_step_mixing_flops(arch, x.prompt_tokens, new_tokens, prompts, tp, pp)

    def per_chunk(cost):
        return chunked(lambda n: cost(arch, x, shape, n, efficiency), tokens, chunks, x.prefill_chunk_tokens)

    return _step(
        tokens,
        flops,
        bytes_moved,
        kernel_groups(
            flops,
            expert_flops,
            mixing_flops,
            bytes_moved,
            expert_bytes,
            kv_written,
            chunks * shape.stage_layers,
            hw,
            efficiency.prefill_compute,
            efficiency,
        ),
        # every chunk is an engine step: a forward pass with its own collectives, launches and hand-offs, that
        # schedules and samples its prompts (vLLM V1 samples partial prefills too and discards the token)
        per_chunk(step_collective_seconds),
        chunks
        * (launch_overhead_seconds(shape.stage_layers, efficiency) + moe_overhead_seconds(arch, pp, hw, efficiency)),
        per_chunk(step_handoff_seconds),
        chunks * scheduler_seconds(prompts, efficiency, host_work_overlapped(x)),
        chunks * sampler_seconds(prompts, arch.vocab_size, efficiency),
        pp,
    )


def decode_step(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: Efficiency,
    x: InferenceInputs,
    shape: ReplicaShape,
    stage_weight_bytes: Number,
    query_tokens: Number = 1,
) -> PhaseStep:
    """One decode step of a micro-batch at the mean context of a request's life (prompt + output / 2):
    every resident weight read once (routed experts only where tokens go), every cached token read.
    `query_tokens` > 1 is a speculative verify step: each sequence runs that many positions against the
    same cached context, so compute, expert reads, messages and sampling scale with it and the KV read
    does not."""
    tp, pp, ep = x.tensor_parallel, x.pipeline_parallel, x.expert_parallel
    batch = shape.micro_batch
    tokens = batch * query_tokens
    mean_context = x.prompt_tokens + x.output_tokens / 2
    flops = decode_step_flops(counts, arch, tokens, mean_context, tp, pp)
    routed_bytes = stage_routed_expert_bytes(counts, arch, tp, pp, ep, x.linear_bytes)
    weight_reads = roofline.decode_weight_read_bytes(
        stage_weight_bytes, routed_bytes, arch.num_experts, arch.experts_per_token, tokens
    )
    expert_bytes = routed_expert_read_bytes(routed_bytes, arch.num_experts, arch.experts_per_token, tokens)
    expert_flops = tokens * step_expert_flops_per_token(counts, arch, tp, pp)
    mixing_flops = decode_step_mixing_flops(arch, tokens, mean_context, tp, pp)
    kv_read = decode_kv_read_bytes(
        arch, tp, pp, batch, mean_context, x.kv_bytes, x.honor_sliding_window, x.activation_bytes
    )
    bytes_moved = weight_reads + kv_read
    return _step(
        tokens,
        flops,
        bytes_moved,
        kernel_groups(
            flops,
            expert_flops,
            mixing_flops,
            bytes_moved,
            expert_bytes,
            kv_read,
            shape.stage_layers,
            hw,
            efficiency.decode_compute,
            efficiency,
        ),
        step_collective_seconds(arch, x, shape, tokens, efficiency),
        launch_overhead_seconds(shape.stage_layers, efficiency) + moe_overhead_seconds(arch, pp, hw, efficiency),
        step_handoff_seconds(arch, x, shape, tokens, efficiency),
        scheduler_seconds(batch, efficiency, host_work_overlapped(x)),
        sampler_seconds(tokens, arch.vocab_size, efficiency),
        pp,
    )


def _step(
    tokens, flops, bytes_moved, kernels: KernelGroups, collective, overhead, handoff, scheduler, sampler, pp
) -> PhaseStep:
    return PhaseStep(
        tokens=tokens,
        flops=flops,
        bytes=bytes_moved,
        kernels=kernels,
        collective_seconds=collective,
        overhead_seconds=overhead,
        handoff_seconds=handoff,
        scheduler_seconds=scheduler,
        sampler_seconds=sampler,
        pipeline_parallel=pp,
        seconds=roofline.pipeline_step_seconds(kernels.seconds, collective, overhead, handoff, pp)
        + scheduler
        + sampler,
    )
