"""Inference steps on one GPU, composed once: a step's work (FLOPs and bytes by kernel group and phase,
`planner.inference.step_work`) and its load (tokens, engine steps, sequences scheduled and sampled, their
collectives and hand-offs) become a `PhaseStep` in `compose_step`, for the static plan's prefill and decode steps
and for every step the traffic simulation prices (`planner.inference.step_cost` tabulates these functions; it
composes nothing itself).

Scope: one GPU of one replica; FLOPs and bytes are one pipeline stage's share, times are per stage
(`PhaseStep.seconds` is the whole pipeline). One function per cost term; every term broadcasts over
numpy arrays (DESIGN rule 4), so `planner.search.sweep` runs this code, and `planner.calibration.fit`
predicts its measured steps with the same terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.arrays import Number, maximum, minimum, where
from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.inference.step_overheads import (
    EP_ALL_TO_ALLS_PER_MOE_LAYER,
    TP_ALLREDUCES_PER_LAYER,
    block_fp8_floor_seconds_per_layer,
    host_work_overlapped,
    launch_overhead_seconds,
    moe_overhead_seconds,
    request_overhead_seconds,
    sampler_seconds,
    scheduler_seconds,
    step_collective_seconds,
    step_handoff_seconds,
)
from planner.inference.step_work import (
    adapter_activation_bytes,
    adapter_step_bytes,
    adapter_step_flops,
    chunked,
    decode_kv_read_bytes,
    decode_step_flops,
    decode_step_mixing_flops,
    image_encoder_step_flops,
    prefill_chunks,
    prefill_step_bytes,
    prefill_step_flops,
    prefill_step_mixing_flops,
    prefill_weight_read_bytes,
    stage_routed_expert_bytes,
    step_expert_flops_per_token,
    uncached_prompt_tokens,
)
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as mem
from planner.physics import roofline
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.energy import MEMORY_BOUND_ACTIVITY
from planner.physics.gemm_efficiency import GEMMS_PER_LAYER, phase_compute_efficiency
from planner.physics.moe_efficiency import early_block_fp8_expert_bandwidth_ratio, routed_expert_read_bytes
from planner.physics.runtimes import runtime_profile

__all__ = [  # the work terms live in step_work, the terms beyond the roofline in step_overheads; re-exported
    "EP_ALL_TO_ALLS_PER_MOE_LAYER",
    "TP_ALLREDUCES_PER_LAYER",
    "host_work_overlapped",
    "launch_overhead_seconds",
    "moe_overhead_seconds",
    "request_overhead_seconds",
    "sampler_seconds",
    "scheduler_seconds",
    "step_collective_seconds",
    "step_handoff_seconds",
    "chunked",
    "decode_kv_read_bytes",
    "decode_step_flops",
    "decode_step_mixing_flops",
    "image_encoder_step_flops",
    "prefill_chunks",
    "prefill_step_bytes",
    "prefill_step_flops",
    "prefill_step_mixing_flops",
    "prefill_weight_read_bytes",
    "stage_routed_expert_bytes",
    "step_expert_flops_per_token",
    "uncached_prompt_tokens",
]


@dataclass(frozen=True, slots=True)
class AchievedRates:
    """What each kernel group reaches on this device (FLOP/s, bytes/s: peak x efficiency), and the GEMM kernels'
    fixed time per pass through one layer. Derived once per replica (`StepContext`) from the device and the
    efficiencies; `kernel_groups` divides a step's work by them."""

    prefill_gemm_flops_per_second: Number  # the phase efficiency x the GPU's GEMM ceiling ratio (MAMF)
    decode_gemm_flops_per_second: Number
    expert_flops_per_second: Number  # fused-MoE calls: the published rate x the format's ceiling ratio
    prefill_mixing_flops_per_second: Number  # attention in the KV cache's own format
    decode_mixing_flops_per_second: Number
    weight_bytes_per_second: Number  # dense weights and the cache
    expert_bytes_per_second: Number  # routed experts (fused-MoE bandwidth)
    gemm_tail_seconds_per_layer: Number  # `GEMMS_PER_LAYER` kernels' fixed time
    # block-scaled FP8 GEMMs' small-M kernel time per layer: the dense GEMMs never run faster
    # (`step_overheads.block_fp8_floor_seconds_per_layer`); 0 for other weights and devices
    gemm_floor_seconds_per_layer: Number = 0.0

    @classmethod
    def of(
        cls,
        hw: HardwareInputs,
        efficiency: EfficiencyFigures,
        early_moe_kernels: bool = False,
        gemm_floor_seconds_per_layer: Number = 0.0,
    ) -> AchievedRates:
        """The rates of `kernel_groups`' docstring: dense GEMMs at each phase's efficiency x the device's GEMM
        ceiling ratio (`physics.gemm_efficiency`), routed experts at the fused-MoE figures (never the block-scaled
        FP8 ceiling: `HardwareInputs.expert_ceiling_ratio`; `physics.moe_efficiency`), token mixing at each phase's
        efficiency x the ceiling ratio of the attention's own format (`HardwareInputs.attention_peak_flops_per_second`),
        bytes at the HBM efficiencies. Routed-expert FLOPs run at their format's published share
        (`HardwareInputs.expert_compute_ratio`); `early_moe_kernels`: the runtime's fused-MoE kernels predate tuned
        block-FP8 configs (`RuntimeProfile.fused_moe_kernels`), so block-scaled FP8 experts stream slower
        (`moe_efficiency.early_block_fp8_expert_bandwidth_ratio`). `gemm_floor_seconds_per_layer`: the least time a
        layer's block-scaled FP8 GEMMs take (`step_overheads.block_fp8_floor_seconds_per_layer`)."""
        peak, attention_peak, bandwidth = (
            hw.peak_flops_per_second,
            hw.attention_peak_flops_per_second,
            hw.bandwidth_bytes_per_second,
        )
        return cls(
            prefill_gemm_flops_per_second=peak
            * phase_compute_efficiency(efficiency.prefill_compute, hw.gemm_ceiling_ratio),
            decode_gemm_flops_per_second=peak
            * phase_compute_efficiency(efficiency.decode_compute, hw.gemm_ceiling_ratio),
            expert_flops_per_second=peak
            * phase_compute_efficiency(
                efficiency.moe_expert_compute * hw.expert_compute_ratio, hw.expert_ceiling_ratio
            ),
            prefill_mixing_flops_per_second=attention_peak
            * phase_compute_efficiency(efficiency.prefill_compute, hw.attention_ceiling_ratio),
            decode_mixing_flops_per_second=attention_peak
            * phase_compute_efficiency(efficiency.decode_compute, hw.attention_ceiling_ratio),
            weight_bytes_per_second=bandwidth * efficiency.memory_bandwidth,
            expert_bytes_per_second=bandwidth
            * efficiency.moe_expert_bandwidth
            * early_block_fp8_expert_bandwidth_ratio(hw.block_fp8_experts, early_moe_kernels),
            gemm_tail_seconds_per_layer=GEMMS_PER_LAYER * hw.gemm_tail_seconds,
            gemm_floor_seconds_per_layer=gemm_floor_seconds_per_layer,
        )


@dataclass(frozen=True, slots=True)
class StepContext:
    """What every step of one replica is priced with: the model, the device, the efficiencies, the scenario's
    inputs and how it lands on the replica. The achieved rates, the per-pass fixed time and whether the runtime
    hides its host work are derived once here (a simulation prices tens of thousands of steps with one context)."""

    arch: ModelArchitecture
    counts: ParameterCounts
    hw: HardwareInputs
    efficiency: EfficiencyFigures
    inputs: InferenceInputs
    shape: ReplicaShape
    rates: AchievedRates = field(init=False)
    pass_overhead_seconds: Number = field(init=False)  # per stage, one forward pass: launches and MoE calls
    host_work_overlapped: bool = field(init=False)

    def __post_init__(self) -> None:
        pp = self.inputs.pipeline_parallel
        overhead = launch_overhead_seconds(self.shape.stage_layers, self.efficiency) + moe_overhead_seconds(
            self.arch, pp, self.hw, self.efficiency
        )
        runtime = runtime_profile(self.inputs.runtime)
        floor = block_fp8_floor_seconds_per_layer(self.arch, pp, self.shape.stage_layers, self.hw, runtime)
        rates = AchievedRates.of(self.hw, self.efficiency, runtime.fused_moe_kernels == "early-2025", floor)
        object.__setattr__(self, "rates", rates)
        object.__setattr__(self, "pass_overhead_seconds", overhead)
        object.__setattr__(self, "host_work_overlapped", host_work_overlapped(self.inputs))


# Not frozen (never mutated): the traffic simulation builds one per priced step, and a frozen dataclass's
# __init__ costs three times a plain one's.
@dataclass(slots=True)
class StepWork:
    """The work of one engine step (or of a static prefill's chunks together) on one GPU of its most loaded stage,
    by kernel group and phase (`kernel_groups` prices it): dense-GEMM FLOPs per phase (each phase at its own
    efficiency), routed-expert FLOPs, token-mixing FLOPs per phase (attention, state updates), and the bytes each
    group streams. Fields broadcast: a simulation passes the mixing terms as rows over a context grid."""

    prefill_gemm_flops: Number
    decode_gemm_flops: Number
    expert_flops: Number  # in fused-MoE calls
    prefill_mixing_flops: Number
    decode_mixing_flops: Number
    gemm_bytes: Number  # resident weights the dense GEMMs stream
    expert_bytes: Number  # routed-expert weights streamed
    mixing_bytes: Number  # cache read and written
    layer_passes: Number  # passes through the stage's layers: each pays its GEMM kernels' fixed time
    # multi-LoRA serving (`adapter_kernel_seconds`): the shrink/expand FLOPs, the distinct adapters' A and B
    # streamed, and the kernels launched
    adapter_flops: Number = 0.0
    adapter_bytes: Number = 0.0
    adapter_kernels: Number = 0.0

    @property
    def flops(self) -> Number:
        return (
            self.prefill_gemm_flops
            + self.decode_gemm_flops
            + self.expert_flops
            + self.prefill_mixing_flops
            + self.decode_mixing_flops
            + self.adapter_flops
        )

    @property
    def bytes(self) -> Number:
        return self.gemm_bytes + self.expert_bytes + self.mixing_bytes + self.adapter_bytes


# Not frozen (never mutated): the traffic simulation builds one per priced step, and a frozen dataclass's
# __init__ costs three times a plain one's.
@dataclass(slots=True)
class StepLoad:
    """What one engine step (or a static prefill's `engine_steps` chunks) asks beyond its kernels: the tokens it
    carries, the sequences it schedules and the positions it samples (per engine step), its collectives and
    hand-offs (all engine steps together). `in_round`: a speculative draft step inside a draft-and-verify round,
    whose scheduling the round pays once (with the verify step)."""

    tokens: Number
    scheduled_sequences: Number
    sampled_positions: Number
    collective_seconds: Number  # per stage
    handoff_seconds: Number
    engine_steps: Number = 1
    in_round: bool = False


# Not frozen (never mutated): the traffic simulation builds one per priced step, and a frozen dataclass's
# __init__ costs three times a plain one's.
@dataclass(slots=True)
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

    def active_seconds(self, memory_bound_activity) -> Number:
        """The groups' time weighted by what is busy (`planner.physics.energy`): each group's FLOP time at full
        activity, the rest of its time (bytes beyond FLOPs, a GEMM kernel's fixed time) at `memory_bound_activity`."""
        return sum(minimum(f, t) + memory_bound_activity * maximum(t - f, 0.0) for f, _, t in self._groups())

    def _groups(self):
        """(FLOP time, byte time, the group's time) per group."""
        return (
            (self.gemm_compute - self.gemm_tail, self.gemm_memory, maximum(self.gemm_compute, self.gemm_memory)),
            (self.expert_compute, self.expert_memory, maximum(self.expert_compute, self.expert_memory)),
            (self.mixing_compute, self.mixing_memory, maximum(self.mixing_compute, self.mixing_memory)),
        )


# Not frozen (never mutated): the traffic simulation builds one per priced step, and a frozen dataclass's
# __init__ costs three times a plain one's.
@dataclass(slots=True)
class PhaseStep:
    """One step of a phase: its work on one GPU and where its time goes.

    `seconds` = pipeline_parallel x (kernels + collectives + overhead) + hand-offs
    (`roofline.pipeline_step_seconds`; kernels: `KernelGroups.seconds`) + the engine's per-step scheduler and
    sampler time (paid once per engine step, not per stage); `terms()` lists those addends. Built by
    `compose_step` only, for the static plan and the traffic simulation alike.
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
    adapter_seconds: Number  # per stage: the LoRA kernels (multi-LoRA serving; 0 without adapters)
    pipeline_parallel: Number
    # `seconds` = pipeline_parallel x max(compute_row, memory_row) + fixed_seconds (`step_seconds`): the token-mixing
    # group with the other groups' offsets (`roofline.context_free_groups`), and every term that does not depend
    # on the context. A traffic simulation tabulates the rows over contexts and interpolates them exactly.
    compute_row: Number
    memory_row: Number
    fixed_seconds: Number
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

    @property
    def busy_seconds(self) -> Number:
        """Per GPU: the time it computes or moves data in this step, its roofline terms (kernel groups at the
        slower of compute and memory, collectives, its share of the hand-offs); the rest of `seconds` (other
        stages' turns, layer launches, scheduler, sampler) it waits. Read by `planner.physics.energy`."""
        return self.kernels.seconds + self.communication_seconds + self.adapter_seconds

    @property
    def active_seconds(self) -> Number:
        """`busy_seconds` weighted by what is busy, for power: compute-bound time fully, memory-bound time and
        communication at `energy.MEMORY_BOUND_ACTIVITY` (`KernelGroups.active_seconds`), never above busy."""
        active = self.kernels.active_seconds(MEMORY_BOUND_ACTIVITY) + MEMORY_BOUND_ACTIVITY * (
            self.communication_seconds + self.adapter_seconds
        )
        return minimum(active, self.busy_seconds)

    def terms(self) -> dict[str, Number]:
        """The addends of `seconds`, named as the equation shows them."""
        pp = self.pipeline_parallel
        return {
            "PP x kernel groups": pp * self.kernels.seconds,
            "PP x collectives": pp * self.collective_seconds,
            "PP x layer overhead": pp * self.overhead_seconds,
            "PP x LoRA kernels": pp * self.adapter_seconds,
            "hand-offs": self.handoff_seconds,
            "scheduler": self.scheduler_seconds,
            "sampler": self.sampler_seconds,
        }


# ---------------------------------------------------------------------------------------------
# kernel time by group: GEMM shape and GPU generation, fused-MoE rates, the attention's own format


def gemm_flop_seconds(gemm_flops, hw: HardwareInputs, phase_efficiency):
    """The dense GEMMs' FLOP time on one GPU, one stage: the phase efficiency (stated for the reference GEMM
    ceiling) x this GPU generation's ceiling relative to the reference (MAMF; `physics.gemm_efficiency`)."""
    return roofline.compute_seconds(
        gemm_flops, hw.peak_flops_per_second, phase_compute_efficiency(phase_efficiency, hw.gemm_ceiling_ratio)
    )


def gemm_tail_seconds(layer_passes, hw: HardwareInputs):
    """The fixed time of every GEMM kernel a step launches: `GEMMS_PER_LAYER` per layer per forward pass (a
    chunked prefill passes the stage's layers once per chunk). What makes a small step (a short prompt, a small
    decode batch) reach less of the peak than a large one."""
    return layer_passes * GEMMS_PER_LAYER * hw.gemm_tail_seconds


def step_compute_seconds(flops, layer_passes, hw: HardwareInputs, phase_efficiency):
    """Compute time of a single-phase step's dense GEMMs on one GPU, one stage: their FLOPs by shape and generation
    plus their kernels' fixed time (`gemm_flop_seconds` + `gemm_tail_seconds`; `roofline.shaped_compute_seconds`).
    The calibration's probes are such steps."""
    return gemm_flop_seconds(flops, hw, phase_efficiency) + gemm_tail_seconds(layer_passes, hw)


def kernel_groups(work: StepWork, rates: AchievedRates) -> KernelGroups:
    """A step's kernel groups: its work at the rates this device reaches (`AchievedRates.of`):
    - dense GEMMs: each phase's FLOPs at its GEMM rate by shape and generation, plus every GEMM kernel's fixed
      time (`gemm_tail_seconds` per pass through a layer), never less than block-scaled FP8 kernels' small-M time
      (`AchievedRates.gemm_floor_seconds_per_layer`); their weight bytes at the HBM rate;
    - routed experts: FLOPs and bytes at the published fused-MoE rates (`planner.physics.moe_efficiency`);
    - token mixing: each phase's FLOPs at the attention's rate in its own format, no GEMM kernel tails; cache
      bytes at the HBM rate."""
    flop_seconds = (
        work.prefill_gemm_flops / rates.prefill_gemm_flops_per_second
        + work.decode_gemm_flops / rates.decode_gemm_flops_per_second
    )
    compute = maximum(
        flop_seconds + work.layer_passes * rates.gemm_tail_seconds_per_layer,
        work.layer_passes * rates.gemm_floor_seconds_per_layer,
    )
    return KernelGroups(
        gemm_compute=compute,
        gemm_tail=compute - flop_seconds,
        gemm_memory=work.gemm_bytes / rates.weight_bytes_per_second,
        expert_compute=work.expert_flops / rates.expert_flops_per_second,
        expert_memory=work.expert_bytes / rates.expert_bytes_per_second,
        mixing_compute=work.prefill_mixing_flops / rates.prefill_mixing_flops_per_second
        + work.decode_mixing_flops / rates.decode_mixing_flops_per_second,
        mixing_memory=work.mixing_bytes / rates.weight_bytes_per_second,
    )


# ---------------------------------------------------------------------------------------------
# one composition


def adapter_work(inputs: InferenceInputs, tokens, sequences, layer_passes, engine_steps: Number = 1) -> dict:
    """`StepWork`'s LoRA fields for `engine_steps` steps of `tokens` tokens in all, `sequences` each
    (`step_work.adapter_step_flops` / `adapter_step_bytes` + `adapter_activation_bytes`; `AdapterInputs.kernels_per_layer`
    per layer pass)."""
    a = inputs.adapters
    if a is None:
        return {}
    return {
        "adapter_flops": adapter_step_flops(a, tokens),
        "adapter_bytes": engine_steps * adapter_step_bytes(a, sequences) + adapter_activation_bytes(a, tokens),
        "adapter_kernels": layer_passes * a.kernels_per_layer,
    }


def adapter_kernel_seconds(work: StepWork, ctx: StepContext):
    """The LoRA shrink and expand kernels of a step on one stage, after the base model's kernels (separate
    launches that wait on their inputs): the slower of their FLOPs at the decode GEMM rate and the distinct
    adapters' bytes at the HBM rate, plus every launch's fixed time (`gemm_efficiency.GEMM_TAIL_SECONDS`, the
    small-GEMM figure); 0 without adapters."""
    rates = ctx.rates
    return (
        maximum(
            work.adapter_flops / rates.decode_gemm_flops_per_second, work.adapter_bytes / rates.weight_bytes_per_second
        )
        + work.adapter_kernels * ctx.hw.gemm_tail_seconds
    )


def step_seconds(compute_row, memory_row, fixed_seconds, pipeline_parallel):
    """A step's time from its rows (`PhaseStep`): pp x max(compute_row, memory_row) + fixed_seconds. The static
    plan and the traffic simulation (over interpolated rows) both end here."""
    return pipeline_parallel * maximum(compute_row, memory_row) + fixed_seconds


def compose_step(ctx: StepContext, work: StepWork, load: StepLoad) -> PhaseStep:
    """The one composition of a step: its kernel groups (`kernel_groups`), per stage with its collectives and
    every forward pass's fixed time, times the stages, plus the hand-offs (`roofline.pipeline_step_seconds`), plus
    per engine step the host's scheduling (none inside a speculative round, none where the runtime overlaps it)
    and the sampler (vLLM V1 samples partial prefills too and discards the token)."""
    e, pp = ctx.efficiency, ctx.inputs.pipeline_parallel
    kernels = kernel_groups(work, ctx.rates)
    overhead = load.engine_steps * ctx.pass_overhead_seconds
    scheduler = load.engine_steps * scheduler_seconds(
        load.scheduled_sequences, e, ctx.host_work_overlapped or load.in_round
    )
    sampler = load.engine_steps * sampler_seconds(load.sampled_positions, ctx.arch.vocab_size, e)
    adapters = adapter_kernel_seconds(work, ctx)
    compute_offset, memory_offset, serial = roofline.context_free_groups(
        kernels.gemm_compute, kernels.gemm_memory, kernels.expert_compute, kernels.expert_memory
    )
    compute_row = kernels.mixing_compute + compute_offset
    memory_row = kernels.mixing_memory + memory_offset
    # pipeline_step_seconds with no kernels is exactly its terms beyond them
    fixed = (
        pp * (serial + adapters)
        + roofline.pipeline_step_seconds(0.0, load.collective_seconds, overhead, load.handoff_seconds, pp)
        + scheduler
        + sampler
    )
    return PhaseStep(
        tokens=load.tokens,
        flops=work.flops,
        bytes=work.bytes,
        kernels=kernels,
        collective_seconds=load.collective_seconds,
        overhead_seconds=overhead,
        handoff_seconds=load.handoff_seconds,
        scheduler_seconds=scheduler,
        sampler_seconds=sampler,
        adapter_seconds=adapters,
        pipeline_parallel=pp,
        compute_row=compute_row,
        memory_row=memory_row,
        fixed_seconds=fixed,
        seconds=step_seconds(compute_row, memory_row, fixed, pp),
    )


# ---------------------------------------------------------------------------------------------
# the static plan's steps


def prefill_step(
    ctx: StepContext, stage_weight_bytes: Number, new_tokens: Number, prompts: Number, in_round: bool = False
) -> PhaseStep:
    """`prompts` prompts prefilled together, each computing its last `new_tokens` tokens (the rest hit the
    prefix cache), in chunks of at most `prefill_chunk_tokens`: every chunk an engine step with its own
    collectives, launches, hand-offs, scheduling and sampling, the chunks' work together."""
    arch, counts, inputs, shape = ctx.arch, ctx.counts, ctx.inputs, ctx.shape
    tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
    tokens = new_tokens * prompts
    flops = prefill_step_flops(
        counts, arch, inputs.prompt_tokens, new_tokens, prompts, tp, pp
    ) + image_encoder_step_flops(
        inputs.image_encoder_flops, prompts, tp, pp, from_start=new_tokens >= inputs.prompt_tokens
    )

    # The cache of the positions the prefill computes, token by token (a write fills the slots it uses; whole
    # blocks are the allocation, not the traffic): the prompt's cache less the cached prefix's, as the traffic
    # simulation writes each prompt piece (`step_cost.RooflineStepCost`).
    def cache_of(prompt_tokens):
        return mem.kv_cache_bytes(
            arch,
            tp,
            pp,
            prompts,
            prompt_tokens,
            inputs.kv_bytes_per_element,
            1,
            inputs.honor_sliding_window,
            inputs.activation_bytes_per_element,
        )

    kv_written = cache_of(inputs.prompt_tokens) - cache_of(inputs.prompt_tokens - new_tokens)
    chunks = prefill_chunks(tokens, inputs.prefill_chunk_tokens)
    routed_bytes = stage_routed_expert_bytes(
        counts, arch, tp, pp, inputs.expert_parallel, inputs.linear_bytes_per_element
    )
    weight_reads, expert_bytes = prefill_weight_read_bytes(
        stage_weight_bytes, routed_bytes, arch, tokens, chunks, inputs.prefill_chunk_tokens
    )
    expert_flops = tokens * step_expert_flops_per_token(counts, arch, tp, pp)
    mixing_flops = prefill_step_mixing_flops(arch, inputs.prompt_tokens, new_tokens, prompts, tp, pp)
    work = StepWork(
        prefill_gemm_flops=flops - expert_flops - mixing_flops,
        decode_gemm_flops=0.0,
        expert_flops=expert_flops,
        prefill_mixing_flops=mixing_flops,
        decode_mixing_flops=0.0,
        gemm_bytes=weight_reads - expert_bytes,
        expert_bytes=expert_bytes,
        mixing_bytes=kv_written,
        layer_passes=chunks * shape.stage_layers,
        **adapter_work(inputs, tokens, maximum(prompts / chunks, 1.0), chunks * shape.stage_layers, chunks),
    )

    def per_chunk(cost):
        return chunked(
            lambda n: cost(arch, inputs, shape, n, ctx.efficiency), tokens, chunks, inputs.prefill_chunk_tokens
        )

    load = StepLoad(
        tokens=tokens,
        scheduled_sequences=prompts,
        sampled_positions=prompts,
        collective_seconds=per_chunk(step_collective_seconds),
        handoff_seconds=per_chunk(step_handoff_seconds),
        engine_steps=chunks,
        in_round=in_round,
    )
    return compose_step(ctx, work, load)


def decode_work(
    ctx: StepContext, stage_weight_bytes: Number, micro_batch, context_tokens, query_tokens: Number = 1
) -> StepWork:
    """The work of one decode step of `micro_batch` sequences at `context_tokens` each: every resident weight read
    once (routed experts only where tokens go), every cached token read. `query_tokens` > 1 is a speculative
    verify step: each sequence runs that many positions against the same cached context, so compute and expert
    reads scale with it and the KV read does not. `context_tokens` may be a row of contexts (a simulation's grid):
    only the token-mixing terms depend on it."""
    arch, counts, inputs = ctx.arch, ctx.counts, ctx.inputs
    tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
    tokens = micro_batch * query_tokens
    routed_bytes = stage_routed_expert_bytes(
        counts, arch, tp, pp, inputs.expert_parallel, inputs.linear_bytes_per_element
    )
    weight_reads = roofline.decode_weight_read_bytes(
        stage_weight_bytes, routed_bytes, arch.num_experts, arch.experts_per_token, tokens
    )
    expert_bytes = routed_expert_read_bytes(routed_bytes, arch.num_experts, arch.experts_per_token, tokens)
    expert_flops = tokens * step_expert_flops_per_token(counts, arch, tp, pp)
    mixing_flops = decode_step_mixing_flops(arch, tokens, context_tokens, tp, pp)
    # the GEMMs' FLOPs do not depend on the context: those of the step's tokens at no context at all
    gemm_flops = decode_step_flops(counts, arch, tokens, 0, tp, pp) - decode_step_mixing_flops(arch, tokens, 0, tp, pp)
    return StepWork(
        prefill_gemm_flops=0.0,
        decode_gemm_flops=gemm_flops - expert_flops,
        expert_flops=expert_flops,
        prefill_mixing_flops=0.0,
        decode_mixing_flops=mixing_flops,
        gemm_bytes=weight_reads - expert_bytes,
        expert_bytes=expert_bytes,
        mixing_bytes=decode_kv_read_bytes(
            arch,
            tp,
            pp,
            micro_batch,
            context_tokens,
            inputs.kv_bytes_per_element,
            inputs.honor_sliding_window,
            inputs.activation_bytes_per_element,
        ),
        layer_passes=ctx.shape.stage_layers,
        **adapter_work(inputs, tokens, micro_batch, ctx.shape.stage_layers),
    )


def decode_load(ctx: StepContext, micro_batch, query_tokens: Number = 1, in_round: bool = False) -> StepLoad:
    """What a decode step of `micro_batch` sequences (`query_tokens` positions each) asks beyond its kernels: its
    collectives and hand-offs for every position, the batch scheduled, every position sampled."""
    tokens = micro_batch * query_tokens
    inputs, shape, e = ctx.inputs, ctx.shape, ctx.efficiency
    return StepLoad(
        tokens=tokens,
        scheduled_sequences=micro_batch,
        sampled_positions=tokens,
        collective_seconds=step_collective_seconds(ctx.arch, inputs, shape, tokens, e),
        handoff_seconds=step_handoff_seconds(ctx.arch, inputs, shape, tokens, e),
        in_round=in_round,
    )


def decode_step(
    ctx: StepContext, stage_weight_bytes: Number, query_tokens: Number = 1, in_round: bool = False
) -> PhaseStep:
    """One decode step of a micro-batch at the mean context of a request's life (prompt + output / 2)
    (`decode_work`, `decode_load`)."""
    inputs = ctx.inputs
    mean_context = inputs.prompt_tokens + inputs.output_tokens / 2
    micro = ctx.shape.micro_batch
    return compose_step(
        ctx,
        decode_work(ctx, stage_weight_bytes, micro, mean_context, query_tokens),
        decode_load(ctx, micro, query_tokens, in_round),
    )
