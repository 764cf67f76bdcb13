"""Training techniques, each quantified as the difference of two full training plans."""

from __future__ import annotations

from planner.scenario_base import revised
from planner.search.techniques import Baseline, TechniqueEffect
from planner.training.plan import plan_training
from planner.training.scenario import RECOMPUTE_MODULES
from planner.units import percent


def _numbers(p) -> dict[str, float]:
    return dict(
        memory=p.memory.total_bytes,
        time=p.performance.step_seconds,
        throughput=p.performance.tokens_per_second,
        cost=p.cost.usd_total,
        fits=p.memory.fits,
    )


def training_techniques(scenario, calibration=None) -> list[TechniqueEffect]:

    base = plan_training(scenario, calibration)
    baseline = Baseline(scenario, calibration, _numbers(base), _numbers)
    effects: list[TechniqueEffect] = []

    def variant(name, label, changes, **info):
        effects.append(baseline.effect(name, label, changes, **info))

    arch = scenario.architecture()
    for name, label, changes, info in _checkpointing_variants(scenario, arch):
        variant(name, label, changes, **info)
        effect = effects[-1]
        if effect.applicable and effect.delta_memory_bytes > 0:  # it keeps more than the scenario: it buys time
            effects[-1] = revised(effect, relieves="compute (less recomputation)")
    _fp8_variant(scenario, variant, effects)
    _batch_and_sharding_variants(scenario, variant)
    _parallel_variants(scenario, arch, variant)
    effects.append(_gradient_compression(scenario, base))
    return effects


def _batch_and_sharding_variants(scenario, variant) -> None:
    """Half and double the micro-batch (same global batch), every other ZeRO stage, optimizer and parameter offload."""
    accumulation = scenario.gradient_accumulation_steps
    if scenario.micro_batch_size > 1:
        half = scenario.micro_batch_size // 2
        variant(
            "Gradient accumulation",
            f"micro-batch {scenario.micro_batch_size} → {half} "
            f"(accumulation {accumulation} → {scenario.global_batch_size // (half * scenario.dp)})",
            {"micro_batch_size": half},
            changes_numerics=False,
            relieves="capacity (activations)",
            costs="more, smaller micro-steps: lower GEMM efficiency and more pipeline/launch overhead",
            watch="same optimizer steps and global batch: convergence is unchanged",
        )
    double = scenario.micro_batch_size * 2
    variant(
        "Gradient accumulation",
        f"micro-batch {scenario.micro_batch_size} → {double} (fewer micro-steps)",
        {"micro_batch_size": double},
        changes_numerics=False,
        relieves="time (fewer micro-steps, smaller bubble)",
        costs="activation memory doubles",
        watch="must still divide the per-replica batch",
    )
    for stage in (0, 1, 2, 3):
        if stage == scenario.effective_zero_stage:
            continue
        variant(
            "Sharding (ZeRO / FSDP)",
            f"ZeRO-{scenario.effective_zero_stage} → ZeRO-{stage}",
            {"zero_stage": stage, "distributed_optimizer": False},
            changes_numerics=False,
            relieves="capacity (model states)" if stage > scenario.effective_zero_stage else "communication",
            costs="ZeRO-3 all-gathers parameters every micro-batch (forward and backward)",
            watch="needs data parallelism > 1; gains grow with the DP degree",
        )
    if not scenario.offload_optimizer:
        variant(
            "Offload to host",
            "optimizer state to CPU (ZeRO-Offload)",
            {"offload_optimizer": True},
            changes_numerics=False,
            relieves="capacity (optimizer state)",
            costs="gradients down and parameters up over PCIe every step; the CPU runs the optimizer step",
            watch="host RAM must hold the state; CPU Adam speed is not modelled",
        )
    if not scenario.offload_parameters:
        variant(
            "Offload to host",
            "parameters to CPU (ZeRO-Infinity)",
            {"offload_parameters": True, "zero_stage": 3},
            changes_numerics=False,
            relieves="capacity (weights)",
            costs="parameters stream over PCIe every pass",
            watch="a last resort: PCIe is ~50x slower than HBM",
        )


def _parallel_variants(scenario, arch, variant) -> None:
    """TP and PP doubled at the same GPU count (halving DP), and EP doubled for a MoE model."""
    dp = scenario.dp
    if dp % 2 == 0:
        variant(
            "Tensor parallelism",
            f"TP {scenario.tensor_parallel} → {scenario.tensor_parallel * 2} (same GPUs)",
            {"tensor_parallel": scenario.tensor_parallel * 2, "data_parallel": dp // 2},
            changes_numerics=False,
            relieves="capacity per GPU",
            costs="all-reduces per layer on the critical path; halves data parallelism",
            watch="keep TP inside the NVLink domain",
        )
        variant(
            "Pipeline parallelism",
            f"PP {scenario.pipeline_parallel} → {scenario.pipeline_parallel * 2} (same GPUs)",
            {"pipeline_parallel": scenario.pipeline_parallel * 2, "data_parallel": dp // 2},
            changes_numerics=False,
            relieves="capacity per GPU",
            costs="pipeline bubble (p-1)/m; halves data parallelism",
            watch="needs many micro-batches per step",
        )
    if arch.is_moe and dp % 2 == 0 and arch.num_experts % (scenario.expert_parallel * 2) == 0:
        variant(
            "Expert parallelism",
            f"EP {scenario.expert_parallel} → {scenario.expert_parallel * 2}",
            {"expert_parallel": scenario.expert_parallel * 2},
            changes_numerics=False,
            relieves="capacity (expert weights, grads, states)",
            costs="all-to-all token dispatch per MoE layer",
            watch="router load imbalance",
        )


# What each recomputation level relieves, repeats and asks to watch, in the trade-off rows' words. A variant that
# keeps more activations than the scenario relieves compute instead (`training_techniques` reads its delta).
_LEVEL_WORDS = {
    "none": ("compute (no recomputation)", "keeps every activation: the most activation memory", ""),
    "selective": (
        "capacity (attention's saved activations)",
        "recomputes the attention core (Megatron-core core_attn)",
        "with FlashAttention core_attn frees little (the kernel already keeps no score matrix); add mlp or layernorm",
    ),
    "op": (
        "capacity (activations: every second matmul output)",
        "recomputes every second matmul of each layer (k, o and the MLP's up or down projection)",
        "torchtitan op-level SAC; needs FlashAttention; MoE expert blocks are kept whole",
    ),
    "full": (
        "capacity (activations: only each layer's input is kept)",
        "recomputes each layer's whole forward (~33% more FLOPs)",
        "full recomputation is rarely needed with FlashAttention + selective or op",
    ),
}
# Checkpointing settings that only one level takes: every level variant resets them to the defaults.
_RECOMPUTE_DEFAULTS = {"recompute_modules": "core_attn", "recompute_method": "uniform", "recompute_num_layers": 1}


def _checkpointing_variants(scenario, arch):
    """(technique, label, changes, info) of every recomputation choice but the scenario's own: the levels, a
    Megatron-core module list that frees real memory, and full recomputation on part of each stage."""
    current = scenario.activation_checkpointing
    for level, (relieves, costs, watch) in _LEVEL_WORDS.items():
        if level == current:
            continue
        yield (
            "Activation checkpointing",
            f"{current} → {level}",
            {**_RECOMPUTE_DEFAULTS, "activation_checkpointing": level},
            dict(changes_numerics=False, relieves=relieves, costs=costs, watch=watch),
        )
    modules = _memory_saving_modules(scenario, arch)
    if current != "selective" or scenario.recompute_modules != modules:
        yield (
            "Activation checkpointing",
            f"{current} → selective ({modules.replace(',', ', ')})",
            {**_RECOMPUTE_DEFAULTS, "activation_checkpointing": "selective", "recompute_modules": modules},
            dict(
                changes_numerics=False,
                relieves="capacity (norm inputs and MLP or expert activations)",
                costs="recomputes the listed modules' forward (the MLP's matmuls; norms are cheap elementwise work)",
                watch="Megatron-core --recompute-modules; the MLP's intermediate activations are the largest saved",
            ),
        )
    chunk_layers = arch.num_layers // (scenario.pipeline_parallel * scenario.virtual_pipeline_stages)
    if (
        chunk_layers >= 2
        and scenario.first_pipeline_stage_layers is None
        and scenario.last_pipeline_stage_layers is None
    ):
        half = chunk_layers // 2
        if not (current == "full" and scenario.recompute_method == "block" and scenario.recompute_num_layers == half):
            yield (
                "Checkpoint frequency",
                f"{current} → full on {half} of {chunk_layers} layers per stage (block)",
                {
                    **_RECOMPUTE_DEFAULTS,
                    "activation_checkpointing": "full",
                    "recompute_method": "block",
                    "recompute_num_layers": half,
                },
                dict(
                    changes_numerics=False,
                    relieves="capacity (half the layers keep only their input)",
                    costs=f"recomputes the forward of {half} of each stage's {chunk_layers} layers; the rest keep "
                    "everything",
                    watch="Megatron-core --recompute-method block --recompute-num-layers: pick the smallest count "
                    "that fits",
                ),
            )


def _memory_saving_modules(scenario, arch) -> str:
    """The Megatron-core recompute modules that free real memory on this model: layernorm, the dense MLP and
    the MoE block where the model has them, MLA's up-projections; core_attn only without FlashAttention (with
    it, the fused kernel already keeps no score matrix)."""
    wanted = {
        "core_attn": not scenario.flash_attention,
        "layernorm": True,
        "mlp": arch.num_dense_layers > 0,
        "moe": arch.is_moe,
        "mla_up_proj": arch.uses_mla,
    }
    return ",".join(m for m in RECOMPUTE_MODULES if wanted.get(m, False))


def _fp8_variant(scenario, variant, effects) -> None:
    """Transformer Engine FP8 training where the GPU has FP8 tensor cores; elsewhere a row that says why not."""
    if scenario.precision == "fp8":
        return
    accel = scenario.accelerator()
    relieves = "compute (layer GEMMs at the FP8 peak) and some activation memory (GEMM inputs kept in 1 byte)"
    costs = "+2 B per layer GEMM weight for Transformer Engine's cached FP8 copy and its transpose; scaling bookkeeping"
    watch = (
        "E4M3/E5M2 numerics: check the loss curve against bf16; attention, norms and the output head stay in bf16"
        + ("" if scenario.precision == "mixed_bf16" else "; the model states become mixed_bf16's as well")
    )
    if not accel.supports("fp8"):
        effects.append(
            TechniqueEffect(
                technique="FP8 training",
                variant=f"{scenario.precision} → fp8",
                applicable=False,
                reason=f"{accel.name} has no FP8 tensor cores: FP8 GEMMs would run no faster than bf16",
                changes_numerics=True,
                relieves=relieves,
                costs=costs,
                watch=watch,
            )
        )
        return
    variant(
        "FP8 training",
        f"{scenario.precision} → fp8 (Transformer Engine, delayed scaling)",
        {"precision": "fp8"},
        changes_numerics=True,
        relieves=relieves,
        costs=costs,
        watch=watch,
    )


def _gradient_compression(scenario, base) -> TechniqueEffect:
    """Data-parallel gradients reduced in half the bytes (bf16 -> fp8 or fp32 -> bf16 communication).

    The engine has no switch for the communication dtype, so this is derived from the plan's own step
    breakdown: the data-parallel collective time halves, nothing else moves.
    """
    breakdown = base.performance.step_breakdown_seconds
    exposed = breakdown.get("data_parallel_seconds", 0.0)
    saved = exposed / 2
    step = base.performance.step_seconds
    tokens_per_step = base.performance.tokens_per_second * step
    new_step = step - saved
    return TechniqueEffect(
        technique="Lower-precision communication",
        variant="gradients reduced in half the bytes",
        applicable=exposed > 0,
        reason="" if exposed > 0 else "no exposed data-parallel communication to save in this scenario",
        changes_numerics=True,
        derived=True,
        relieves="communication",
        costs="quantize/dequantize compute around each collective",
        watch=f"gradient noise; exposed data-parallel time is {percent(exposed / step)} of the step",
        delta_time_seconds=-saved,
        delta_throughput=tokens_per_step / new_step - base.performance.tokens_per_second,
        delta_cost=base.cost.usd_total * (new_step / step - 1),
        fits_after=base.memory.fits,
    )
