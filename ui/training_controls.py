"""The training scenario's widgets, declared like the inference ones (see ui.controls)."""

from __future__ import annotations

from typing import Any, get_args

import streamlit as st

from planner.scenario_base import MAX_TOKENS
from planner.training.scenario import ALL_LINEAR, Checkpointing, Optimizer, Precision
from ui.specs import COMMON_LAYOUT, Spec

PRECISION_HELP = (
    "mixed_bf16: bf16 weights and gradients with fp32 master weights and optimizer state (Megatron, "
    "DeepSpeed); amp_bf16: fp32 weights with bf16 autocast (PyTorch AMP); bf16: pure bf16."
)

TRAINING_SPECS: tuple[Spec, ...] = COMMON_LAYOUT + (
    Spec(
        "gpus_per_node",
        "GPUs per node",
        "int",
        1,
        1024,
        1,
        section="hardware",
        column=0,
        help="GPUs that share one NVLink domain; traffic between nodes goes over the network.",
    ),
    Spec(
        "inter_node_bandwidth_bytes_per_second",
        "Network GB/s",
        "float",
        0.001,
        10_000.0,
        25.0,
        fmt="%g",
        section="hardware",
        column=1,
        scale=1e9,
        bound=False,
        help="Inter-node bandwidth per GPU, one direction, in GB/s (1e9 bytes/s). 400 Gb/s InfiniBand = 50.",
    ),
    Spec(
        "data_parallel",
        "DP (data)",
        "optional_int",
        1,
        100_000,
        1,
        section="layout",
        column=0,
        help="Data-parallel replicas; empty: GPUs / (TP × PP × CP).",
    ),
    Spec(
        "context_parallel",
        "CP (context)",
        "int",
        1,
        1024,
        1,
        section="layout",
        column=1,
        help="Context parallelism (ring attention): each sequence is split over this many GPUs.",
    ),
    Spec(
        "expert_parallel",
        "EP (experts)",
        "int",
        1,
        65_536,
        1,
        section="layout",
        column=0,
        help="Expert parallelism for mixture-of-experts models, carved out of the data-parallel ranks.",
    ),
    Spec(
        "virtual_pipeline_stages",
        "Virtual stages",
        "int",
        1,
        128,
        1,
        section="layout",
        column=1,
        help="> 1: interleaved 1F1B pipeline schedule (smaller bubble, more point-to-point traffic).",
    ),
    Spec("sequence_parallel", "Sequence parallelism (with TP > 1)", "toggle", section="layout"),
    Spec(
        "precision",
        "Precision",
        "select",
        options=get_args(Precision),
        section="precision",
        column=0,
        help=PRECISION_HELP,
    ),
    Spec(
        "optimizer",
        "Optimizer",
        "select",
        options=get_args(Optimizer),
        section="precision",
        column=1,
        help="AdamW keeps two fp32 moments per parameter; adam8bit two 8-bit ones; SGD none (momentum: one).",
    ),
    Spec("grad_accumulation_fp32", "fp32 gradient accumulation buffer", "toggle", section="precision"),
    Spec(
        "micro_batch_size",
        "Micro-batch",
        "int",
        1,
        MAX_TOKENS,
        1,
        section="batch",
        column=0,
        help="Sequences per forward/backward on each data-parallel replica.",
    ),
    Spec(
        "global_batch_size",
        "Global batch",
        "int",
        1,
        MAX_TOKENS,
        8,
        section="batch",
        column=1,
        help="Sequences per optimizer step over the whole job (micro-batch × DP × accumulation steps).",
    ),
    Spec("sequence_length", "Sequence length (tokens)", "int", 1, MAX_TOKENS, 512, section="batch"),
    Spec(
        "training_tokens",
        "Tokens to train on (billions)",
        "float",
        1e-6,
        1e7,
        1.0,
        fmt="%g",
        section="batch",
        scale=1e9,
        bound=False,
        help="Total training tokens, in billions (1e9): sets the time and cost to train.",
    ),
    Spec(
        "zero_stage",
        "ZeRO stage",
        "select",
        options=(0, 1, 2, 3),
        section="memory",
        column=0,
        help="0: plain DDP; 1: shard optimizer state; 2: + gradients; 3: + parameters (FSDP).",
    ),
    Spec(
        "activation_checkpointing",
        "Recompute",
        "select",
        options=get_args(Checkpointing),
        section="memory",
        column=1,
        help="Activation checkpointing: selective recomputes attention internals; full recomputes "
        "each layer's forward.",
    ),
    Spec("distributed_optimizer", "Megatron distributed optimizer", "toggle", section="memory"),
    Spec("offload_optimizer", "Offload optimizer to CPU (ZeRO-Offload)", "toggle", section="memory"),
    Spec("offload_parameters", "Offload parameters to CPU (needs ZeRO-3)", "toggle", section="memory"),
    Spec("flash_attention", "FlashAttention", "toggle", section="memory"),
    Spec("overlap_grad_reduce", "Overlap gradient reduction with backward", "toggle", section="more"),
    Spec("dropout", "Dropout (GPT-3 style)", "toggle", section="more"),
    Spec(
        "usd_per_gpu_hour",
        "Price ($ per GPU-hour)",
        "optional_float",
        0.0,
        10_000.0,
        0.1,
        fmt="%.2f",
        section="more",
        help="Leave empty to use the catalog's reference price for this GPU.",
    ),
    Spec(
        "label",
        "Plan label",
        "text",
        max_chars=200,
        section="notes",
        help="A short name for this plan in Compare and Review.",
    ),
    Spec(
        "decision",
        "Decision",
        "textarea",
        max_chars=2000,
        section="notes",
        help="Which trade-off you chose and why. It travels with the plan: in the share link, the CSV and Review.",
    ),
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


def _seed_lora(prefix: str, lora: Any) -> None:
    ss = st.session_state
    ss[prefix + "pick_lora"] = lora is not None
    ss[prefix + "pick_lora_rank"] = lora.rank if lora is not None else 16
    ss[prefix + "pick_lora_modules"] = list(lora.target_modules) if lora is not None else list(ALL_LINEAR)
    ss[prefix + "pick_lora_qlora"] = bool(lora.quantize_base) if lora is not None else False
    ss[prefix + "pick_lora_double_quant"] = bool(lora.double_quantization) if lora is not None else True


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
    rank = left.number_input(
        "Rank", min_value=1, max_value=4096, step=8, key=prefix + "pick_lora_rank", persist_state="session"
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
