"""What an inference plan says in words and equations: the binding resource, warnings, assumptions and
every headline number's equation with the scenario's numbers filled in (DESIGN rules 5 and 7).

Reads the plan's typed results only; computes nothing the equations do not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Number
from planner.calibration_record import CalibrationRecord
from planner.dtypes import (
    FORMATS,
    kv_bytes_per_element,
    uses_weight_group_size,
    weight_bytes_per_element,
)
from planner.hardware.catalog import Accelerator
from planner.inference.adapters import AdapterInputs, adapter_assumptions, adapter_warnings
from planner.inference.cache_notes import cache_assumptions, kv_per_gpu_substitution, kv_per_token_equation
from planner.inference.draft import METHOD_TITLES
from planner.inference.inputs import HardwareInputs, InferenceInputs, attention_compute_dtype
from planner.inference.metrics import InferenceMetrics
from planner.inference.results import InferencePerformance
from planner.inference.scenario import InferenceScenario
from planner.inference.steps import PhaseStep
from planner.model.architecture import ModelArchitecture
from planner.model.checkpoint_precision import checkpoint_weight_dtypes, fp8_block_scaled
from planner.model.notes import architecture_assumptions
from planner.physics.efficiency import EfficiencyValues
from planner.physics.gemm_efficiency import BLOCK_FP8_SMALL_M_GEMM_SECONDS, BLOCK_SCALED_FP8_OF_BF16
from planner.physics.memory import stage_moe_layers
from planner.physics.runtimes import kv_block_tokens, runtime_profile
from planner.results import Bottleneck, Equation, MemoryBreakdown, ModelSummary, PlanWarning
from planner.units import count, gib, percent, rate, seconds, usd

RESOURCE_WORDS = {
    "compute": "compute",
    "memory_bandwidth": "memory bandwidth",
    "communication": "communication",
}


def bottleneck(memory: MemoryBreakdown, performance: InferencePerformance) -> tuple[Bottleneck, str]:
    """What binds, and a sentence saying why: capacity when the plan does not fit, else the resource
    that takes longest in the phase that takes most of the serving cycle."""
    prefill, decode = performance.prefill, performance.decode
    prefill_share, ridge = performance.prefill_share_of_time, performance.ridge_point_flops_per_byte
    if not memory.fits:
        return "capacity", (
            f"The plan needs {gib(memory.total_bytes)} per GPU but the engine may use {gib(memory.budget_bytes)}: "
            "memory capacity binds before anything else."
        )
    phase = prefill if prefill_share > 0.5 else decode
    share = prefill_share if phase is prefill else 1 - prefill_share
    binding = phase.binding
    intensity = phase.arithmetic_intensity_flops_per_byte
    side = "below" if intensity < ridge else "above"
    reason = (
        f"{phase.phase.capitalize()} takes {percent(share)} of the time; its step spends {_step_split(phase)}, so "
        f"{RESOURCE_WORDS[binding]} binds "
        f"(arithmetic intensity {intensity:,.0f} FLOP/B, {side} the GPU's ridge point of {ridge:,.0f} FLOP/B)."
    )
    return binding, reason


def _step_split(phase) -> str:
    """Where a step's time goes, the parts that are there: '12 ms in compute-bound kernels, 3 ms in
    bandwidth-bound ones and 1 ms in communication'."""
    parts = [
        (phase.compute_bound_seconds, "in compute-bound kernels"),
        (phase.memory_bound_seconds, "in bandwidth-bound kernels"),
        (phase.communication_seconds, "in communication"),
    ]
    words = [f"{seconds(t)} {what}" for t, what in parts if t > 0]
    if not words:
        return "no measurable time"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


# ---------------------------------------------------------------------------------------------
# assumptions


def _budget_sentence(s: InferenceScenario) -> str:
    runtime = runtime_profile(s.runtime)
    blocks = kv_block_tokens(runtime, s.kv_block_tokens)
    cache = f"KV cache in paged blocks of {blocks} tokens" if blocks > 1 else "KV cache token by token (no blocks)"
    if runtime.budget_kind == "profiled":
        budget = f"Serving engine budget = {percent(s.gpu_memory_utilization)} of device memory (vLLM-style gpu_memory_utilization)"
    elif runtime.fraction_setting:
        budget = (
            f"{runtime.title} budgets the whole device, {runtime.fraction_setting} = "
            f"{percent(s.gpu_memory_utilization)} (the scenario's gpu_memory_utilization)"
        )
    else:
        budget = f"{runtime.title} has no budget fraction: the plan must fit the device's memory"
    return f"{budget}; {cache}, every sequence held at its full prompt + output length."


def _scheduler_sentence(s: InferenceScenario, arch: ModelArchitecture) -> str:
    """The release whose scheduler a traffic simulation runs, and what that scheduler does."""
    runtime = runtime_profile(s.runtime)
    policy = runtime.scheduler
    forced = (
        " Chunked prefill is off for this model whatever the stream's setting (MLA)."
        if not policy.chunked_prefill(True, arch.uses_mla)
        else ""
    )
    return (
        f"Traffic simulation runs {runtime.title}'s scheduler ({runtime.version}): {policy.describe()}.{forced} "
        f"Read from: {policy.sources[0]}"
    )


def _engine_costs_sentence(s: InferenceScenario, efficiency: EfficiencyValues[float]) -> str:
    """The engine's fixed costs and where they come from for the scenario's runtime (`RuntimeProfile`)."""
    runtime = runtime_profile(s.runtime)
    step = (
        f"no per-step CPU time ({runtime.title} overlaps scheduling with the GPU's work)"
        if runtime.host_work_overlapped
        else f"per step {efficiency.step_host_seconds * 1e3:g} ms of scheduling and input preparation (vLLM PR "
        f"#42131) plus {efficiency.sequence_host_seconds * 1e6:g} µs per scheduled sequence "
        "(Scheduler.update_from_output, PR #46112)"
    )
    return (
        f"Fixed engine costs, not fitted to any benchmark ({runtime.title}: {runtime.host_costs_source}): {step}; "
        f"the sampler's top-k/top-p at {efficiency.sampler_seconds_per_logit * 1e12:g} ps per sequence per "
        "vocabulary entry (FlashInfer sampler, vLLM PR #40376); per request "
        f"{efficiency.request_overhead_seconds * 1e3:g} ms of chat template + tokenisation before its first step "
        "(tt-inference-server #2173), added to TTFT only. The calibration's torch probe runs no engine, so it "
        "keeps these defaults."
    )


def assumptions(
    s: InferenceScenario,
    arch: ModelArchitecture,
    efficiency: EfficiencyValues[float],
    calibration: CalibrationRecord | None,
) -> list[str]:
    """What the estimate rests on, in the order a reader checks them."""
    out = [
        "Memory is per GPU on the most loaded pipeline stage; memory.total_bytes is what the scenario needs, "
        "not what an engine pre-reserves.",
        _budget_sentence(s),
        f"Efficiencies ({efficiency.source}): prefill GEMMs at {percent(efficiency.prefill_compute)} and decode at "
        f"{percent(efficiency.decode_compute)} of dense peak FLOP/s, HBM at {percent(efficiency.memory_bandwidth)} "
        f"of peak bandwidth, collectives at {percent(efficiency.communication)} of link bandwidth, plus "
        f"{efficiency.layer_overhead_seconds * 1e6:g} µs of launch/synchronisation overhead per layer per step.",
        _engine_costs_sentence(s, efficiency),
        "Roofline per step, per kernel group: the dense GEMMs, the fused-MoE calls and the attention each take "
        "max(their FLOPs / achieved FLOP/s, their bytes / achieved bandwidth), one group after another, + "
        "non-overlapped communication (2 tensor-parallel all-reduces per layer, pipeline hand-offs).",
        "Continuous batching: each request costs its share of a batched prefill chunk plus output_tokens decode "
        "steps; its TPOT includes the other requests' prefills, its own is TTFT's. Queueing delay is not modelled "
        "(TTFT = idle replica).",
        _scheduler_sentence(s, arch),
        "Runtime overhead: CUDA context and workspaces 0.5 GiB, CUDA graphs 0.25 GiB, NCCL buffers 0.25 GiB when "
        "GPUs communicate.",
    ]
    return (
        out
        + _model_assumptions(s, arch)
        + _precision_assumptions(s, s.accelerator(), calibration)
        + _kernel_format_assumptions(s, arch, s.accelerator())
    )


def adapter_notes(s: InferenceScenario, adapters: AdapterInputs | None) -> tuple[list[str], list[PlanWarning]]:
    """The LoRA adapters' assumptions and, when a batch needs more distinct adapters than the slots, a warning
    (`adapters`: the plan's own `InferenceInputs.adapters`)."""
    if s.lora is None or adapters is None:
        return [], []
    per_replica = s.traffic.max_num_seqs if s.traffic is not None and s.traffic.max_num_seqs else None
    return adapter_assumptions(s.lora, adapters), adapter_warnings(
        adapters, per_replica or -(-s.concurrency // s.replicas)
    )


def _model_assumptions(s: InferenceScenario, arch: ModelArchitecture) -> list[str]:
    out = []
    if arch.model_type == "synthetic":
        out.append(
            f"{arch.name}: architecture derived from size alone (Llama-3 / Qwen3-MoE proportions: "
            f"{arch.num_layers} layers, hidden {arch.hidden_size}, {arch.num_attention_heads} heads, "
            f"{arch.num_kv_heads} KV heads); parameter count within 2% of the requested size."
        )
    if arch.is_moe:
        out.append(
            "MoE: uniform top-k routing; a decode step reads only the experts its tokens are routed to "
            "(expected distinct experts E(1-(1-k/E)^T)); routed experts split over max(TP, EP) GPUs."
        )
    return (
        out
        + architecture_assumptions(arch)
        + cache_assumptions(s, arch)
        + _checkpoint_precision(s, arch)
        + _image_assumptions(s, arch)
    )


def _image_assumptions(s: InferenceScenario, arch: ModelArchitecture) -> list[str]:
    if not s.images_per_request:
        return []
    per_image = s.image_tokens_per_request // s.images_per_request
    patches = per_image * arch.vision_patches_per_image / arch.vision_tokens_per_image
    default = "" if s.tokens_per_image else " (the model's default)"
    return [
        f"Images: {s.images_per_request} per request x {per_image:,} tokens{default} = "
        f"{s.image_tokens_per_request:,} prompt tokens beside the {s.prompt_tokens:,} of text; the language model "
        f"prefills and caches them like text. The {arch.vision_model_type} tower ({count(arch.vision_encoder_parameters)} "
        f"parameters with its projector) encodes each image's {patches:,.0f} patches in the request's prefill: "
        "2 x parameters x patches + 4 x layers x patches^2 x width FLOPs, at the prefill efficiency, tensor-parallel, "
        "no encoder cache (a repeated image is encoded again). Memory adds what vLLM V1's profiling run holds for "
        "images: the tower's peak over the images one prefill chunk's encoder budget takes (beyond the language "
        "model's forward peak) and their outputs at the model's width (`vision_encoder_bytes`; the tower's MLP "
        "taken as 4x its width)."
    ]


def _checkpoint_precision(s: InferenceScenario, arch: ModelArchitecture) -> list[str]:
    """What the checkpoint stores, and whether the plan serves it as stored."""
    attention = s.attention_weight_dtype or s.weight_dtype
    serves = f"MLP/experts {s.weight_dtype}, attention {attention}"
    q = arch.quantization
    if q is None:
        return (
            [] if s.attention_weight_dtype is None else [f"Weights: {serves} (per-module formats set by the scenario)."]
        )
    stored = checkpoint_weight_dtypes(arch)
    groups = ", ".join(g.replace("_", " ") for g in q.quantized_groups) or "no module group"
    words = (
        f"Checkpoint quantization_config ({q.method}): {groups} stored in {q.weight_format}"
        + (f" with {'x'.join(map(str, q.weight_block_size))} block scales" if q.weight_block_size else "")
        + f", the rest in {q.unquantized_dtype}. This plan serves {serves}"
    )
    if stored is None:
        return [
            words + f"; {q.weight_format} is not a format the planner models, so it does not follow the checkpoint."
        ]
    served_formats = (s.weight_dtype, s.attention_weight_dtype or s.weight_dtype)
    if served_formats == (stored[0], stored[1] or stored[0]):
        return [words + ", as stored."]
    return [words + ": not as stored, so it needs a checkpoint quantized (or dequantized) to these formats."]


def _precision_assumptions(
    s: InferenceScenario, accel: Accelerator, calibration: CalibrationRecord | None
) -> list[str]:
    out = []
    weights = FORMATS[s.weight_dtype]
    if weights.quantized:
        group = f" (group {s.weight_group_size})" if uses_weight_group_size(s.weight_dtype) else ""
        bits = 8 * weight_bytes_per_element(s.weight_dtype, s.weight_group_size)
        out.append(f"{s.weight_dtype} weights{group}: {weights.layout}; {bits:.4g} bits per weight with its metadata.")
        out.append(_weight_compute_assumption(s.weight_dtype, accel))
    kv = FORMATS[s.kv_cache_dtype]
    if kv.quantized:
        bits = 8 * kv_bytes_per_element(s.kv_cache_dtype)
        out.append(f"{s.kv_cache_dtype} KV cache: {bits:.4g} bits per cached value with its scales; {kv.kv_engines}.")
    if not s.quantize_embeddings and weights.quantized:
        out.append("Embedding, lm_head, norms and routers stay in 16-bit; only linear layers are quantized.")
    if calibration is not None:
        out.append(f"Calibrated with '{calibration.label}': efficiencies and runtime overhead from a measured profile.")
    return out


def _kernel_format_assumptions(s: InferenceScenario, arch: ModelArchitecture, accel: Accelerator) -> list[str]:
    """The formats the step's kernel groups compute in, where they differ from the weights'
    (`roofline.kernel_groups_seconds`): attention in the KV cache's format, block-scaled FP8 GEMMs on Hopper."""
    out = []
    attention = attention_compute_dtype(accel, s.kv_cache_dtype)
    gemm = accel.gemm_dtype(s.weight_dtype)
    if attention != gemm:
        out.append(
            f"Attention's math runs in {attention} (the {s.kv_cache_dtype} KV cache's format), the GEMMs in {gemm}: "
            "each kernel group (GEMMs, experts, attention) is its own roofline and they run one after another."
        )
    if gemm == "fp8" and fp8_block_scaled(arch, s.weight_dtype, s.fp8_scaling):
        share = BLOCK_SCALED_FP8_OF_BF16.get(accel.id)
        rate = (
            f"on {accel.name} its dense GEMMs run at {share:.2f} x the BF16 GEMM rate (vLLM PR #23280, H100 CUTLASS "
            f"block-FP8 kernel) and never faster than {_block_fp8_kernel(s.runtime)} at small M; the fused-MoE "
            "calls keep their per-tensor published rate (no block-scaled figure)"
            if share is not None
            else f"{accel.name} applies the block scales at the FP8 rate (no penalty is modelled)"
        )
        source = "the scenario" if s.fp8_scaling is not None else "the checkpoint's quantization_config"
        out.append(f"FP8 weights with 128 x 128 block scales ({source}): {rate}.")
    return out


def _block_fp8_kernel(runtime: str) -> str:
    """Which small-M block-FP8 kernel time the runtime's dense GEMMs are held to (`step_overheads`)."""
    kernel = runtime_profile(runtime).block_fp8_linear_kernel
    if kernel is None:
        return "their kernels' fixed time (no published small-M figure for this engine's block-FP8 kernels)"
    source = "DeepGEMM's README" if kernel == "deepgemm" else "vLLM PR #23280"
    return f"the {kernel} kernel's {BLOCK_FP8_SMALL_M_GEMM_SECONDS[kernel] * 1e6:.1f} us per GEMM ({source})"


def _weight_compute_assumption(weight_dtype: str, accel: Accelerator) -> str:
    """Where the GEMMs over quantized weights run: the format's tensor cores, or 16 bits after dequantizing
    (Accelerator.gemm_dtype, the rule the plan's peak FLOP/s follows)."""
    gemm = accel.gemm_dtype(weight_dtype)
    peak = rate(accel.peak_flops(gemm), "FLOP/s")
    if accel.computes_in(weight_dtype):
        return (
            f"{weight_dtype} GEMMs run on {accel.name}'s {gemm} tensor cores at its dense {gemm} peak ({peak}); "
            "activations are quantized on the fly to match."
        )
    why = (
        "weight-only kernels (GPTQ/AWQ, Marlin) dequantize it on the fly"
        if FORMATS[weight_dtype].tensor_core is None
        else f"{accel.name} has no {FORMATS[weight_dtype].tensor_core} tensor cores, so the kernels (e.g. vLLM's "
        "Marlin) dequantize it on the fly"
    )
    return (
        f"{weight_dtype} weights are dequantized to {gemm}: {why}. They save memory and bandwidth (decode); the "
        f"GEMMs compute at the dense {gemm} peak ({peak}), so prefill is not faster than in {gemm}."
    )


# ---------------------------------------------------------------------------------------------
# equations


def equations(
    s: InferenceScenario,
    arch: ModelArchitecture,
    model: ModelSummary,
    hw: HardwareInputs,
    efficiency: EfficiencyValues[float],
    inputs: InferenceInputs,
    m: InferenceMetrics,
) -> list[Equation]:
    """The headline numbers, each with its formula and the scenario's numbers substituted."""
    moe_layers = int(stage_moe_layers(arch, inputs.pipeline_parallel)) if arch.is_moe else 0
    facts = StepFacts(hw, efficiency, m.shape.stage_layers, moe_layers)
    return [
        *_memory_equations(s, arch, model, inputs, m),
        step_equation(
            "TTFT",
            m.prefill,
            efficiency.prefill_compute,
            facts,
            request_overhead_seconds=float(m.request_overhead_seconds),
            draft_prefill_seconds=float(m.draft_prefill_seconds) if m.speculation is not None else None,
        ),
        step_equation("Decode step", m.decode, efficiency.decode_compute, facts),
        *_speculative_equations(facts, m),
        *_serving_equations(s, hw, m),
    ]


def _speculative_equations(facts: StepFacts, m: InferenceMetrics) -> list[Equation]:
    r = m.speculation
    if r is None:
        return []
    k = int(r.drafted_tokens)
    return [
        step_equation(f"Verify step ({k + 1} tokens per sequence)", r.verify, facts.efficiency.decode_compute, facts),
        Equation(
            name="Decode time per token (speculative)",
            formula="(verify step + k x draft step) / ((1 - a^(k+1)) / (1 - a))",
            substituted=f"({seconds(float(r.verify.seconds))} + {k} x {seconds(float(r.draft_step.seconds))}) / "
            f"{float(r.tokens_per_sequence):.2f}",
            value=float(r.seconds_per_token),
            unit="seconds",
            source="Leviathan et al. 2023, Eq. 1 (expected tokens per verify step)",
        ),
    ]


def _memory_equations(
    s: InferenceScenario,
    arch: ModelArchitecture,
    model: ModelSummary,
    inputs: InferenceInputs,
    m: InferenceMetrics,
) -> list[Equation]:
    kv_b = float(inputs.kv_bytes_per_element)
    stage_layers = int(m.shape.stage_layers)
    kv_formula, kv_sub = kv_per_token_equation(arch, kv_b)
    return [
        Equation(
            name="Parameters",
            formula="embedding + layers x (attention + MLP/experts + norms) + lm_head",
            substituted=" + ".join(f"{k} {count(v)}" for k, v in model.parameter_breakdown.items() if v),
            value=model.params_total,
            unit="parameters",
        ),
        Equation(
            name="KV cache per token",
            formula=kv_formula,
            substituted=kv_sub,
            value=model.kv_cache_bytes_per_token,
            unit="bytes",
            source="vLLM paper Sec. 3 (MHA); DeepSeek-V2 Sec. 2.1 (MLA)",
        ),
        Equation(
            name="Weights per GPU",
            formula="stage layers x (sharded / TP + replicated) x bytes + embedding/head on the edge stage",
            substituted=f"{stage_layers} layers, TP {s.tensor_parallel}, {s.weight_dtype} "
            f"({float(inputs.linear_bytes_per_element):g} B/param)"
            + (
                f" + the runtime's MLA decode copies {gib(copies)}"
                if (copies := float(m.memory.weight_copies_bytes))
                else ""
            ),
            value=float(m.memory.weights_bytes),
            unit="bytes",
        ),
        Equation(
            name="KV cache per GPU",
            formula="sequences per replica x context (rounded to blocks) x stage layers x KV elements per "
            "layer per rank x bytes",
            substituted=kv_per_gpu_substitution(s, arch, int(m.shape.sequences), stage_layers, kv_b),
            value=float(m.memory.kv_cache_bytes),
            unit="bytes",
        ),
    ]


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What a step's equation quotes beside the step itself: the device, the efficiencies, and the stage's layers
    and MoE layers (their fixed per-layer times)."""

    hw: HardwareInputs
    efficiency: EfficiencyValues[float]
    stage_layers: Number
    moe_layers: int = 0


def step_equation(
    name: str,
    step: PhaseStep,
    compute_efficiency: float,
    facts: StepFacts,
    request_overhead_seconds: float | None = None,
    draft_prefill_seconds: float | None = None,
) -> Equation:
    """A step's time with every addend of `PhaseStep.terms()` shown with its number, then their sum; TTFT
    adds the request's own overhead (`request_overhead_seconds`) in front and a speculative draft's pass
    over the prompt (`draft_prefill_seconds`) behind."""
    hw, efficiency, stage_layers, moe_layers = facts.hw, facts.efficiency, facts.stage_layers, facts.moe_layers
    parts = [float(v) for v in step.terms().values()]
    request_formula = request_sub = draft_formula = draft_sub = ""
    if request_overhead_seconds is not None:
        parts.insert(0, float(request_overhead_seconds))
        request_formula, request_sub = "request overhead + ", f"{seconds(float(request_overhead_seconds))} + "
    if draft_prefill_seconds is not None:
        parts.append(float(draft_prefill_seconds))
        draft_formula, draft_sub = " + draft's prompt pass", f" + {seconds(float(draft_prefill_seconds))}"
    # Routed experts (inference.steps.kernel_groups' expert group, moe_overhead_seconds): their FLOPs and weight
    # bytes at the published fused-MoE rates, and each MoE layer's fixed fused-MoE time.
    moe_formula = moe_sub = ""
    if moe_layers:
        moe_formula = (
            " + experts max(routed-expert FLOPs / (peak x fused-MoE eff x format x ratio), routed-expert bytes / (BW x "
            "fused-MoE BW eff)); MoE layers x (fused-MoE fixed time - 2 GEMM tails) in the overhead"
        )
        moe_sub = (
            f"; MoE: eff {efficiency.moe_expert_compute:g} x format {float(hw.expert_compute_ratio):.3g} x ratio "
            f"{float(hw.expert_ceiling_ratio):.3g}, BW eff "
            f"{efficiency.moe_expert_bandwidth:g}, "
            f"{int(moe_layers)} x ({seconds(efficiency.moe_layer_seconds)} - 2 x "
            f"{seconds(float(hw.gemm_tail_seconds))})"
        )
    terms = " + ".join(seconds(v) for v in parts)
    # Kernel groups (roofline.kernel_groups_seconds): dense GEMMs, fused-MoE calls, token mixing (attention, state
    # updates), each max(its FLOPs' time, its bytes' time), one after another. The GEMMs' FLOPs by GEMM generation
    # and shape (inference.steps.step_compute_seconds): the phase efficiency x the GPU's GEMM ceiling ratio
    # (capped at 1), plus the fixed time of the step's GEMM kernels.
    k = step.kernels
    ratio = float(hw.gemm_ceiling_ratio)
    groups = [("GEMMs", k.gemm_compute, k.gemm_memory), ("attention", k.mixing_compute, k.mixing_memory)]
    if moe_layers:
        groups.append(("experts", k.expert_compute, k.expert_memory))
    kernels_sub = " + ".join(f"{label} max({seconds(float(c))}, {seconds(float(m))})" for label, c, m in groups)
    gemm_time = "FLOPs / (peak x eff x GEMM ceiling ratio) + GEMM kernels x tail"
    if bool(hw.block_fp8_dense):  # steps.kernel_groups: block-scaled FP8 kernels' small-M floor
        gemm_time = f"max({gemm_time}, layers x block-FP8 GEMMs x small-M kernel time)"
    return Equation(
        name=name,
        formula=f"{request_formula}PP x (kernel groups + all-reduces + layers x overhead) + hand-offs + scheduler "
        "(per step + sequences x per sequence) + sampler (sequences x vocabulary x per logit)"
        f"{draft_formula}; kernel groups, one after another: GEMMs max({gemm_time}, weight bytes / (BW x eff)) + attention max(attention FLOPs / (peak of the KV cache's format x eff x ratio), "
        f"KV bytes read or written / (BW x eff)){moe_formula}",
        substituted=f"{request_sub}{int(step.pipeline_parallel)} x ({seconds(float(k.seconds))} + "
        f"{seconds(float(step.collective_seconds))} + "
        f"{int(stage_layers)} x {seconds(efficiency.layer_overhead_seconds)}) + "
        f"{seconds(float(step.handoff_seconds))} + {seconds(float(step.scheduler_seconds))} + "
        f"{seconds(float(step.sampler_seconds))}{draft_sub} = {terms}; kernel groups: {kernels_sub} "
        f"({count(float(step.flops))}FLOP and {gib(float(step.bytes))} in all; "
        f"{rate(float(hw.peak_flops_per_second), 'FLOP/s')} x {compute_efficiency:g} x {ratio:.3g}, attention "
        f"{rate(float(hw.attention_peak_flops_per_second), 'FLOP/s')} x {compute_efficiency:g} x "
        f"{float(hw.attention_ceiling_ratio):.3g}, "
        f"{rate(float(hw.bandwidth_bytes_per_second), 'B/s')} x {efficiency.memory_bandwidth:g}){moe_sub}",
        value=float(step.seconds) + float(request_overhead_seconds or 0.0) + float(draft_prefill_seconds or 0.0),
        unit="seconds",
    )


def _serving_equations(s: InferenceScenario, hw: HardwareInputs, m: InferenceMetrics) -> list[Equation]:
    serving, sequences = m.serving, int(m.shape.sequences)
    return [
        Equation(
            name="TPOT",
            formula="(sequences x prefill per request + output x decode "
            + ("time per token" if m.speculation is not None else "step")
            + ") / output",
            substituted=f"({sequences} x {seconds(float(serving.prefill_seconds_per_request))} + "
            f"{s.output_tokens} x {seconds(float(m.decode_seconds_per_token))}) / {s.output_tokens}",
            value=float(serving.tpot_seconds),
            unit="seconds",
        ),
        Equation(
            name="Output tokens/s",
            formula="replicas x sequences per replica / TPOT",
            substituted=f"{int(m.shape.replicas)} x {sequences} / {seconds(float(serving.tpot_seconds))}",
            value=float(serving.output_tokens_per_second),
            unit="tokens/s",
        ),
        Equation(
            name="$ per 1M output tokens",
            formula="GPUs x $/GPU-hour / (tokens/s x 3600) x 1e6",
            substituted=f"{s.num_gpus} x {usd(float(hw.usd_per_gpu_hour))} / "
            f"({float(serving.output_tokens_per_second):,.0f} x 3600) x 1e6",
            value=float(m.spend.usd_per_million_output_tokens),
            unit="USD",
        ),
        *_energy_equations(s, hw, m),
    ]


def _energy_equations(s: InferenceScenario, hw: HardwareInputs, m: InferenceMetrics) -> list[Equation]:
    e = m.energy
    return [
        Equation(
            name="Power per GPU",
            formula="idle + busy share x (board - idle); busy share = roofline time / serving-cycle time",
            substituted=f"{float(hw.idle_watts):.0f} W + {float(e.busy_share):.2f} x "
            f"({float(hw.board_watts):.0f} W - {float(hw.idle_watts):.0f} W)",
            value=float(e.watts_per_gpu),
            unit="W",
            source="planner.physics.energy (linear idle-to-board power model); board and idle power per GPU from "
            "the catalog's power_source",
        ),
        Equation(
            name="kWh per 1M output tokens",
            formula="GPUs x W per GPU x PUE / 1000 x 1e6 / (tokens/s x 3600)",
            substituted=f"{s.num_gpus} x {float(e.watts_per_gpu):.0f} W x {s.pue:g} / 1000 x 1e6 / "
            f"({float(m.serving.output_tokens_per_second):,.0f} x 3600)",
            value=float(e.kwh_per_million_output_tokens),
            unit="kWh",
        ),
    ]


def speculative_notes(s: InferenceScenario, performance: InferencePerformance) -> tuple[list[str], list[PlanWarning]]:
    """Speculative decoding's assumptions and, where it does not pay, a warning."""
    spec, summary = s.speculative, performance.speculative
    if spec is None or summary is None:
        return [], []
    acceptance = (
        f"acceptance {summary.acceptance_rate:.2f} per drafted token (ASSUMED: {summary.acceptance_source}; it depends "
        "on the workload: measure it, vLLM logs it)"
        if summary.acceptance_is_assumed
        else f"acceptance {summary.acceptance_rate:.2f} per drafted token (given)"
    )
    assumptions = [
        f"Speculative decoding ({METHOD_TITLES[spec.method]}, draft: {summary.draft}): {spec.num_speculative_tokens} "
        f"drafted tokens per round, {acceptance}, positions accepted independently, so a round yields "
        f"{summary.tokens_per_round:.2f} tokens per sequence (Leviathan et al. 2023, Eq. 1). A round = the target's "
        f"verify step over {spec.num_speculative_tokens + 1} tokens per sequence + {spec.num_speculative_tokens} draft "
        "steps; the draft runs tensor-parallel on the same GPUs, its steps pay no extra scheduling, and its pass over "
        "a prompt is charged per request as if alone (an upper bound). Output is unchanged (rejection sampling)."
    ]
    warnings = []
    if summary.speedup < 1:
        warnings.append(
            PlanWarning(
                "speculative_slows_decode",
                f"Speculative decoding slows decode here ({summary.speedup:.2f}x): with "
                f"{performance.decode.tokens:,.0f} sequences per step the verify step over "
                f"{spec.num_speculative_tokens + 1} tokens each is compute-bound. Draft fewer tokens, serve smaller "
                "batches per replica, or turn it off.",
            )
        )
    return assumptions, warnings
