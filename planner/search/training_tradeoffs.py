"""Training techniques, each quantified as the difference of two full training plans."""

from __future__ import annotations

from planner.search.techniques import TechniqueEffect, _try_variant
from planner.training.plan import plan_training
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
    numbers = _numbers(base)
    effects: list[TechniqueEffect] = []

    def variant(name, label, changes, **info):
        effects.append(_try_variant(name, label, scenario, numbers, _numbers, changes, calibration, **info))

    levels = ("none", "selective", "full")
    for level in levels:
        if level == scenario.activation_checkpointing:
            continue
        variant(
            "Activation checkpointing",
            f"{scenario.activation_checkpointing} → {level}",
            {"activation_checkpointing": level},
            changes_numerics=False,
            relieves="capacity (activations)"
            if levels.index(level) > levels.index(scenario.activation_checkpointing)
            else "compute (no recompute)",
            costs="recomputes the forward (full: ~33% more FLOPs; selective: attention only)",
            watch="full recomputation is rarely needed with FlashAttention + selective",
        )
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
    arch = scenario.architecture()
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
    effects.append(_gradient_compression(scenario, base))
    return effects


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
