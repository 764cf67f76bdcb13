"""Rendering a training plan: header, verdict, metrics with their equations, where a step's time goes, the
micro-batch table (ui.render holds what inference and training plans share). Every number comes from the Plan."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planner import units
from planner.physics.memory import ALLOCATOR_FRAGMENTATION_SHARE, ALLOCATOR_FRAGMENTATION_SHARE_HIGH
from planner.verdict import memory_verdict
from ui import bands, charts, energy_view
from ui.render import (
    assumptions,
    binding,
    calibration_caption,
    chart,
    equations,
    fixes_section,
    if_it_fit,
    memory_chart,
    memory_detail,
    metric_with_band,
    plan_warnings,
    scenario_params,
    share_bar,
    verdict_box,
    verdict_markdown,
)
from ui.text import component_label, equation_help, md_escape


def _fp8_mfu_note(plan) -> str:
    """FP8 training's MFU stays against the dense bf16 peak (comparable with bf16 runs), so it can pass 100 %."""
    if getattr(plan.scenario, "precision", None) != "fp8":
        return ""
    return " FP8 GEMMs run at up to twice the dense bf16 peak that MFU is measured against, so it can exceed 100 %."


def training_header(plan) -> None:
    lay, s = plan.layout, plan.scenario
    parts = [f"TP {lay.tensor_parallel}", f"PP {lay.pipeline_parallel}", f"DP {lay.data_parallel}"]
    if lay.context_parallel > 1:
        parts.append(f"CP {lay.context_parallel}")
    if lay.expert_parallel > 1:
        parts.append(f"EP {lay.expert_parallel}")
    lora = getattr(s, "lora", None)
    job = ("QLoRA" if lora and lora.quantize_base else "LoRA") + f" rank {lora.rank}" if lora else "full training"
    st.caption(
        f"**{md_escape(plan.model.name)}** ({units.count(plan.model.params_total)} parameters, "
        f"{units.count(lay.parameters_trainable)} trainable, {job}) on **{s.num_gpus} × "
        f"{md_escape(plan.hardware.name)}** · {' · '.join(parts)} · ZeRO {lay.zero_stage} · {s.precision} · "
        f"{s.optimizer} · batch {lay.global_batch_size:,} × {lay.sequence_length:,} tokens "
        f"(micro-batch {lay.micro_batch_size}, {lay.gradient_accumulation_steps} accumulation steps)"
    )


def training_verdict(plan) -> None:
    """The engine's memory verdict, the largest micro-batch that fits, and what to do when none does."""
    mem = plan.memory
    v = memory_verdict(plan)
    largest = mem.max_micro_batch_size or 0
    if mem.fits:
        extra = f" Largest micro-batch that fits: **{largest}**."
    elif largest:
        extra = f" A micro-batch of {largest} would fit."
    else:
        extra = " Not even a micro-batch of 1 fits: shard more (ZeRO, TP/PP), recompute activations or offload."
    verdict_box(v, verdict_markdown(v) + memory_detail(plan) + extra)
    if mem.reserved_bytes is not None:
        st.caption(reserved_caption(mem))


def reserved_caption(mem) -> str:
    """Which memory the plan's number is, and what a training log's reserved peak will likely read."""
    return (
        f"Memory per GPU is the tensors allocated at the peak (`torch.cuda.max_memory_allocated`). PyTorch's caching "
        f"allocator likely reserves about {units.gib(mem.reserved_bytes)} for them (up to "
        f"{units.gib(mem.reserved_bytes_high)}): what `torch.cuda.max_memory_reserved` and torchtitan's "
        f"'max_reserved' read. Fragmentation {units.percent(ALLOCATOR_FRAGMENTATION_SHARE)} of reserved memory "
        f"typical, up to {units.percent(ALLOCATOR_FRAGMENTATION_SHARE_HIGH)} (GMLake, ASPLOS 2024: eight LLM "
        "training workloads on A100-80GB)."
    )


def training_metrics(plan) -> None:
    perf, cost, mem = plan.performance, plan.cost, plan.memory
    likely = bands.training_texts(plan)
    step_basis = bands.basis(plan, "performance.step_seconds")
    scaled = "Moves with the step-time band (same tokens, GPUs and price). " + step_basis
    micro_batch_help = "Largest micro-batch whose memory fits on every GPU with this layout and these savers."
    if not mem.fits:
        # A fact about memory, not a hypothetical speed: it stays out of the greyed "if it fit" group.
        st.columns(3)[0].metric(
            "Largest micro-batch that fits", f"{mem.max_micro_batch_size or 0}", help=micro_batch_help
        )
    group = if_it_fit(plan, "training")
    row1 = group.columns(3)
    metric_with_band(
        row1[0],
        "Step time",
        units.seconds(perf.step_seconds),
        equation_help(plan, "Step time"),
        likely["Step time"],
        step_basis,
    )
    metric_with_band(
        row1[1],
        "Tokens/s",
        units.count(perf.tokens_per_second),
        f"Whole job; {units.count(perf.tokens_per_second_per_gpu)} per GPU.",
        likely["Tokens/s"],
        scaled,
    )
    metric_with_band(
        row1[2],
        "MFU",
        units.percent(perf.mfu, 1),
        equation_help(plan, "MFU", note=f"HFU {units.percent(perf.hfu, 1)}." + _fp8_mfu_note(plan)),
        likely["MFU"],
        scaled,
    )
    row2 = group.columns(3)
    metric_with_band(
        row2[0],
        "Time to train",
        units.seconds(perf.time_to_train_seconds),
        equation_help(
            plan, "Time to train", note=f"{units.count(perf.training_tokens)} tokens, {perf.steps_to_train:,.0f} steps."
        ),
        likely["Time to train"],
        scaled,
    )
    metric_with_band(
        row2[1],
        "Cost to train",
        units.usd(cost.usd_total),
        equation_help(
            plan,
            "Cost to train",
            note=f"{cost.gpu_hours:,.0f} GPU-hours at {units.usd(cost.usd_per_gpu_hour)}; "
            f"{units.usd(cost.usd_per_million_tokens)} per 1M tokens.",
        ),
        likely["Cost to train"],
        scaled,
    )
    if mem.fits:
        row2[2].metric("Largest micro-batch that fits", f"{mem.max_micro_batch_size or 0}", help=micro_batch_help)
    energy_view.training_energy(group, plan)


def step_chart(plan) -> None:
    perf = plan.performance
    st.markdown("**Where a step's time goes**")
    breakdown = getattr(perf, "step_breakdown_seconds", None) or getattr(perf, "time_breakdown", {})
    parts = {k: v for k, v in breakdown.items() if v > 0}
    st.caption(
        " · ".join(f"{component_label(k)} {units.seconds(v)}" for k, v in parts.items())
        + f" · bubble {units.percent(perf.pipeline_bubble_fraction)}",
        help=equation_help(plan, "Micro-batch compute on one GPU", "Step time"),
    )
    chart(charts.stacked_time(parts, "Seconds per optimizer step"), width="stretch")


def micro_batch_table(plan) -> None:

    rows = [
        {
            "Micro-batch": o.micro_batch_size,
            "Accumulation steps": o.gradient_accumulation_steps,
            "Memory per GPU": units.gib(o.total_bytes),
            "Activations": units.gib(o.activations_bytes),
            "Fits": "yes" if o.fits else "no",
            "Step time": units.seconds(o.step_seconds),
            "Tokens/s": units.count(o.tokens_per_second),
            "Bubble": units.percent(o.pipeline_bubble_fraction),
        }
        for o in plan.micro_batch_options
    ]
    if rows:
        st.markdown("**Micro-batch vs gradient accumulation** (same global batch)")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def training_page(scenario, plan, calibration=None) -> None:
    training_header(plan)
    calibration_caption(calibration, scenario)
    training_verdict(plan)
    if not plan.memory.fits:
        fixes_section(scenario, calibration, "training")
    share_bar("training", scenario_params(scenario), [plan], "headroom-training-plan", scenario=scenario)
    training_metrics(plan)
    binding(plan)
    plan_warnings(plan)
    left, right = st.columns(2, gap="large")
    with left:
        memory_chart(plan, budget_label="capacity")
    with right:
        step_chart(plan)
    micro_batch_table(plan)
    equations(plan)
    assumptions(plan)
