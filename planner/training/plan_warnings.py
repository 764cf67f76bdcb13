"""What a training plan warns about: possible but risky, each a sentence saying what and why with its stable code
(planner.results.PlanWarning; DESIGN rule 5). Reads the plan's typed results only."""

from __future__ import annotations

from planner.hardware.catalog import Accelerator
from planner.model.architecture import ModelArchitecture
from planner.model.notes import architecture_warnings
from planner.physics.memory import ALLOCATOR_FRAGMENTATION_SHARE, ALLOCATOR_FRAGMENTATION_SHARE_HIGH, stage_layers
from planner.results import LOW_HEADROOM_FRACTION, MemoryBreakdown, PlanWarning
from planner.training.results import MicroBatchOption, TrainingPerformance
from planner.training.scenario import TrainingScenario
from planner.units import gib, percent


def warnings_for(
    s: TrainingScenario,
    arch: ModelArchitecture,
    accel: Accelerator,
    memory: MemoryBreakdown,
    perf: TrainingPerformance,
    options: list[MicroBatchOption],
) -> list[PlanWarning]:
    """Every warning of the plan, in a fixed order: the model, memory, layout, recomputation, precision and
    optimizer, then a faster micro-batch."""
    return [
        *(PlanWarning("generic_architecture", w) for w in architecture_warnings(arch)),
        *_memory_warnings(s, arch, memory),
        *_layout_warnings(s, arch, accel, perf),
        *_recompute_warnings(s, arch),
        *_precision_and_optimizer_warnings(s, accel),
        *_micro_batch_warnings(memory, perf, options),
    ]


def _memory_warnings(s: TrainingScenario, arch: ModelArchitecture, memory: MemoryBreakdown) -> list[PlanWarning]:
    """Does not fit (and what would), little headroom, a sequence past the model's context."""
    out = []
    if not memory.fits:
        hint = (
            f"micro_batch_size {memory.max_micro_batch_size} would fit"
            if memory.max_micro_batch_size
            else "even micro_batch_size 1 does not fit: shard more (ZeRO stage, TP, PP), recompute activations, "
            "offload, or use LoRA"
        )
        out.append(
            PlanWarning(
                "does_not_fit",
                f"Does not fit: {gib(memory.total_bytes)} needed per GPU, {gib(memory.capacity_bytes)} on the "
                f"device; {hint}.",
            )
        )
    elif memory.reserved_bytes is not None and memory.reserved_bytes > memory.capacity_bytes:
        out.append(
            PlanWarning(
                "fragmentation_risk",
                f"The tensors fit ({gib(memory.total_bytes)} allocated at the peak, {gib(memory.capacity_bytes)} on the "
                f"device), but PyTorch's caching allocator typically reserves "
                f"{percent(1 / (1 - ALLOCATOR_FRAGMENTATION_SHARE) - 1)} more than it holds (fragmentation "
                f"{percent(ALLOCATOR_FRAGMENTATION_SHARE)} of reserved memory on average, up to "
                f"{percent(ALLOCATOR_FRAGMENTATION_SHARE_HIGH)}; GMLake, ASPLOS 2024): about "
                f"{gib(memory.reserved_bytes)} reserved, past the device: the allocator then frees and re-splits its cache and may still run "
                "out of memory. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation; a smaller "
                "micro-batch, more sharding or recomputation leaves room.",
            )
        )
    elif memory.headroom_fraction < LOW_HEADROOM_FRACTION:
        out.append(
            PlanWarning(
                "low_headroom",
                f"Headroom is only {percent(memory.headroom_fraction)} of device memory: with the caching "
                f"allocator's fragmentation ({percent(ALLOCATOR_FRAGMENTATION_SHARE)} of reserved memory typical, up to "
                f"{percent(ALLOCATOR_FRAGMENTATION_SHARE_HIGH)}; GMLake, ASPLOS 2024) an out-of-memory error is "
                "possible.",
            )
        )
    if s.sequence_length > arch.max_context_tokens:
        out.append(
            PlanWarning(
                "sequence_over_max",
                f"sequence_length {s.sequence_length:,} exceeds {arch.name}'s trained context of "
                f"{arch.max_context_tokens:,} tokens.",
            )
        )
    return out


def _layout_warnings(
    s: TrainingScenario, arch: ModelArchitecture, accel: Accelerator, perf: TrainingPerformance
) -> list[PlanWarning]:
    """Uneven pipeline stages, a large bubble, collectives across nodes, TP without sequence parallelism."""
    out = []
    uneven = s.stage_layer_counts()
    if uneven is not None:
        first, middle, last = uneven
        out.append(
            PlanWarning(
                "uneven_pipeline_stages",
                f"Uneven pipeline stages: {first} layers on the first stage, {middle} on each middle stage, {last} on the "
                f"last; memory is charged to the most loaded stage and the step to the slowest one.",
            )
        )
    elif arch.num_layers % s.pipeline_parallel:
        out.append(
            PlanWarning(
                "uneven_layer_split",
                f"{arch.num_layers} layers do not split evenly over {s.pipeline_parallel} pipeline stages; the "
                f"plan charges every stage {stage_layers(arch, s.pipeline_parallel)} layers (the heaviest).",
            )
        )
    if perf.pipeline_bubble_fraction > 0.2:
        out.append(
            PlanWarning(
                "pipeline_bubble",
                f"The pipeline bubble is {percent(perf.pipeline_bubble_fraction)} of the ideal time: raise the "
                "number of micro-batches (global batch / (micro-batch x DP)) or use virtual_pipeline_stages.",
            )
        )
    if s.tensor_parallel * s.context_parallel > s.gpus_per_node_on(accel):
        out.append(
            PlanWarning(
                "collectives_across_nodes",
                "tensor_parallel x context_parallel spans more than one node: their per-layer collectives run over "
                "the inter-node network.",
            )
        )
    if s.tensor_parallel > 1 and not s.sequence_parallel:
        out.append(
            PlanWarning(
                "tensor_parallel_without_sequence_parallel",
                "Tensor parallelism without sequence parallelism keeps norm and dropout activations replicated on "
                "every TP rank (Korthikanti et al.: 10 sbh of 34 sbh per layer).",
            )
        )
    return out


def _recompute_warnings(s: TrainingScenario, arch: ModelArchitecture) -> list[PlanWarning]:
    """Recomputation settings that do less (or more) than they seem to."""
    out = []
    if s.flash_attention and s.recompute_module_set == ("core_attn",):
        out.append(
            PlanWarning(
                "core_attn_recompute",
                "Selective recomputation of core_attn (Megatron-core's default module) drops the attention score matrix, "
                "which FlashAttention never stores: it frees only the kernel's log-sum-exp yet runs the attention forward "
                "again. Add layernorm, mlp, moe_act or moe to recompute_modules, or use op or full recomputation, to save "
                "memory. (Plans made before recompute_modules existed charged this recomputation no FLOPs.)",
            )
        )
    if s.activation_checkpointing == "full" and s.recompute_method == "block":
        per_chunk = stage_layers(arch, s.pipeline_parallel) / s.virtual_pipeline_stages
        if s.recompute_num_layers >= per_chunk:
            out.append(
                PlanWarning(
                    "block_recompute_is_full",
                    f"recompute_num_layers={s.recompute_num_layers} covers every layer of a stage ({per_chunk:g} per "
                    "model chunk): block recomputation is full recomputation here.",
                )
            )
    return out


def _precision_and_optimizer_warnings(s: TrainingScenario, accel: Accelerator) -> list[PlanWarning]:
    """Precision, attention memory, the optimizer's placement, sharding with pipelines, QLoRA storage, PCIe TP."""
    out = []
    if s.precision == "fp8" and not accel.peak_flops_per_second.get("fp8"):
        out.append(
            PlanWarning(
                "no_fp8_tensor_cores",
                f"{accel.name} has no FP8 tensor cores: Transformer Engine's FP8 needs compute capability 8.9 or newer "
                "(Ada, Hopper, Blackwell). The plan runs the GEMMs at the bf16 peak and keeps FP8's memory, which such a "
                "GPU could not use.",
            )
        )
    if not s.flash_attention and s.activation_checkpointing == "none":
        out.append(
            PlanWarning(
                "attention_scores_stored",
                "Without FlashAttention or recomputation every layer keeps the full attention score matrix "
                "(a x s^2 per sequence); it grows quadratically with sequence_length.",
            )
        )
    if s.precision == "mixed_fp16":
        out.append(
            PlanWarning(
                "fp16_loss_scaling", "fp16 training needs loss scaling; overflow-skipped steps are not modelled."
            )
        )
    if s.precision == "bf16":
        out.append(
            PlanWarning(
                "bf16_without_master_weights",
                "Pure bf16 without master weights loses small updates (bf16 has 8 mantissa bits); use Kahan "
                "summation or stochastic rounding, or keep fp32 master weights.",
            )
        )
    if s.offload_optimizer:
        out.append(
            PlanWarning(
                "cpu_optimizer_step",
                "The optimizer step runs on the CPU: its compute time (CPU Adam) is not modelled, only the PCIe "
                "transfers; host RAM must hold memory.host_bytes per GPU.",
            )
        )
    if s.zero_stage >= 2 and s.pipeline_parallel > 1:
        out.append(
            PlanWarning(
                "zero_with_pipeline",
                "ZeRO-2/3 with pipeline parallelism reduce-scatters or gathers per micro-batch on every stage; "
                "DeepSpeed's pipeline engine supports ZeRO-1 only (torchtitan/FSDP2 supports it).",
            )
        )
    if s.lora is not None and s.zero_stage == 3 and s.lora.quantize_base:
        out.append(
            PlanWarning(
                "qlora_sharded_storage",
                "QLoRA with FSDP/ZeRO-3 needs a quant_storage dtype the sharding can flatten (bitsandbytes >= 0.43).",
            )
        )
    if s.tensor_parallel > 1 and accel.interconnect is None:
        out.append(
            PlanWarning(
                "tensor_parallel_over_pcie",
                f"{accel.name} has no NVLink-class interconnect: tensor-parallel collectives run over PCIe.",
            )
        )
    return out


def _micro_batch_warnings(
    memory: MemoryBreakdown, perf: TrainingPerformance, options: list[MicroBatchOption]
) -> list[PlanWarning]:
    """A larger micro-batch from the plan's own table that also fits and is at least 5 % faster."""
    out = []
    better = [o for o in options if o.fits and o.tokens_per_second > perf.tokens_per_second * 1.05]
    if better and memory.fits:
        best = max(better, key=lambda o: o.tokens_per_second)
        out.append(
            PlanWarning(
                "faster_micro_batch",
                f"micro_batch_size {best.micro_batch_size} (gradient accumulation "
                f"{best.gradient_accumulation_steps}) also fits and is "
                f"{percent(best.tokens_per_second / perf.tokens_per_second - 1)} faster.",
            )
        )
    return out
