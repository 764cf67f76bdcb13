"""The training scenario's widgets, declared like the inference ones (see ui.controls), and its LoRA section."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner.training.scenario import ALL_LINEAR, LoraConfig
from ui.specs import COMMON_LAYOUT, ENERGY, NOTES, Spec, field_facts

TRAINING_SPECS: tuple[Spec, ...] = (
    COMMON_LAYOUT
    + (
        Spec("gpus_per_node", "GPUs per node", "number", section="hardware", column=0),
        Spec(
            "inter_node_bandwidth_bytes_per_second",
            "Network GB/s",
            "number",
            section="hardware",
            column=1,
            scale=1e9,
            step=25.0,
            fmt="%g",
        ),
        Spec("data_parallel", "DP (data)", "number", section="layout", column=0),
        Spec("context_parallel", "CP (context)", "number", section="layout", column=1),
        Spec("expert_parallel", "EP (experts)", "number", section="layout", column=0),
        Spec("virtual_pipeline_stages", "Virtual stages", "number", section="layout", column=1),
        Spec("pipeline_schedule", "Pipeline schedule", "select", section="layout"),
        Spec("sequence_parallel", "Sequence parallelism (with TP > 1)", "toggle", section="layout"),
        Spec("first_pipeline_stage_layers", "First-stage layers", "number", section="layout", column=0),
        Spec("last_pipeline_stage_layers", "Last-stage layers", "number", section="layout", column=1),
        Spec("precision", "Precision", "select", section="precision", column=0),
        Spec("optimizer", "Optimizer", "select", section="precision", column=1),
        Spec("fp8_recipe", "FP8 scaling (precision fp8)", "select", section="precision"),
        Spec("grad_accumulation_fp32", "fp32 gradient accumulation buffer", "toggle", section="precision"),
        Spec("micro_batch_size", "Micro-batch", "number", section="batch", column=0),
        Spec("global_batch_size", "Global batch", "number", section="batch", column=1, step=8),
        Spec("sequence_length", "Sequence length (tokens)", "number", section="batch", step=512),
        Spec("training_tokens", "Tokens to train on (billions)", "number", section="batch", scale=1e9, fmt="%g"),
        Spec("zero_stage", "ZeRO stage", "select", section="memory", column=0),
        Spec("activation_checkpointing", "Recompute", "select", section="memory", column=1),
        Spec("recompute_modules", "Recompute modules (selective)", "multiselect", section="memory"),
        Spec("recompute_method", "Full recompute method", "select", section="memory", column=0),
        Spec("recompute_num_layers", "Full recompute layers", "number", section="memory", column=1),
        Spec("distributed_optimizer", "Megatron distributed optimizer", "toggle", section="memory"),
        Spec("offload_optimizer", "Offload optimizer to CPU", "toggle", section="memory"),
        Spec("offload_parameters", "Offload parameters to CPU", "toggle", section="memory"),
        Spec("flash_attention", "FlashAttention", "toggle", section="memory"),
        Spec("attention_kernel", "Attention kernel", "select", section="more"),
        Spec("loss_kernel", "Cross-entropy kernel", "select", section="more"),
        Spec("overlap_grad_reduce", "Overlap gradient reduction with backward", "toggle", section="more"),
        Spec("overlap_tp_backward", "Overlap TP backward collectives (Megatron-core)", "toggle", section="more"),
        Spec("tp_comm_overlap", "Pipeline TP collectives with GEMMs (TE userbuffers)", "toggle", section="more"),
        Spec("expert_dispatch", "MoE dispatch", "select", section="more"),
        Spec("overlap_expert_all_to_all", "Overlap MoE all-to-all (Megatron-core)", "toggle", section="more"),
        Spec(
            "expert_load_imbalance",
            "MoE load imbalance (busiest rank / mean)",
            "number",
            section="more",
            step=0.05,
            fmt="%.2f",
        ),
        Spec("dropout", "Dropout (GPT-3 style)", "toggle", section="more"),
        Spec("usd_per_gpu_hour", "Price ($ per GPU-hour)", "number", section="more", step=0.1, fmt="%.2f"),
    )
    + ENERGY
    + NOTES
)

SECTIONS = (
    ("hardware", None),
    ("layout", "Parallelism"),
    ("batch", "Batch and tokens"),
    ("precision", "Precision and optimizer"),
    ("memory", "Memory savers"),
    ("lora", "Fine-tuning"),
    ("more", "▸ More settings"),
    ("notes", "Notes for the review"),
)


def _seed_lora(prefix: str, lora: LoraConfig | None) -> None:
    ss = st.session_state
    shown = lora if lora is not None else LoraConfig()
    ss[prefix + "pick_lora"] = lora is not None
    ss[prefix + "pick_lora_rank"] = shown.rank
    ss[prefix + "pick_lora_modules"] = list(shown.target_modules)
    ss[prefix + "pick_lora_qlora"] = shown.quantize_base
    ss[prefix + "pick_lora_double_quant"] = shown.double_quantization


def lora_section(prefix: str, seed, where) -> tuple[dict[str, Any], str | None]:
    """LoRA / QLoRA adapters: a config object, so its URL parameter is written by ui.controls."""
    if prefix + "pick_lora" not in st.session_state:
        _seed_lora(prefix, seed.lora)
    on = where.toggle(
        "LoRA adapters (freeze the base model)",
        key=prefix + "pick_lora",
        persist_state="session",
        help="Train low-rank adapters only (Hu et al. 2021); QLoRA also stores the frozen base in 4-bit.",
    )
    if not on:
        return {"lora": None}, None
    left, right = where.columns(2, vertical_alignment="bottom")
    lo, hi = field_facts(LoraConfig, "rank").widget_range()
    rank = left.number_input(
        "Rank", min_value=lo, max_value=hi, step=8, key=prefix + "pick_lora_rank", persist_state="session"
    )
    qlora = right.toggle("QLoRA (4-bit base)", key=prefix + "pick_lora_qlora", persist_state="session")
    modules = where.multiselect(
        "Target projections", list(ALL_LINEAR), key=prefix + "pick_lora_modules", persist_state="session"
    )
    double = where.toggle(
        "Double quantization (QLoRA)",
        key=prefix + "pick_lora_double_quant",
        persist_state="session",
        disabled=not qlora,
    )
    if not modules:
        return {"lora": None}, "LoRA needs at least one target projection"
    config = {
        "rank": int(rank),
        "target_modules": tuple(modules),
        "quantize_base": bool(qlora),
        "double_quantization": bool(double),
    }
    original = seed.lora
    if original is not None and original.model_dump() == {**original.model_dump(), **config}:
        return {"lora": original}, None
    return {"lora": config}, None
