"""Words for the engine's trade-off sentences (diagnosis, checklist, alternatives): the names of resources,
memory components and step-time components, and signed deltas. Numbers go through planner.units.
"""

from __future__ import annotations

import math
from collections.abc import Callable

RESOURCE_WORDS = {
    "capacity": "memory capacity",
    "memory_bandwidth": "memory bandwidth",
    "compute": "compute",
    "communication": "communication",
}

# Memory components (keys without `_bytes`) and step-time components (keys without `_seconds`).
COMPONENT_WORDS = {
    "weights": "parameters (weights)",
    "gradients": "gradients",
    "gradient_accumulation": "gradient accumulation buffer",
    "optimizer_states": "optimizer state",
    "master_weights": "fp32 master weights",
    "sharding_buffers": "ZeRO/FSDP buffers",
    "activations": "activations",
    "kv_cache": "KV cache",
    "logits": "logits",
    "runtime_overhead": "runtime overhead (CUDA context, allocator)",
    "lora": "LoRA adapters and their optimizer state",
    "compute": "compute",
    "memory_bandwidth": "memory traffic",
    "communication": "communication",
    "forward_backward": "forward + backward",
    "pipeline_bubble": "pipeline bubble",
    "tensor_parallel": "tensor-parallel comms",
    "expert_parallel": "expert all-to-all",
    "pipeline_p2p": "pipeline sends",
    "overlapped_communication_exposed": "exposed overlapped comms",
    "data_parallel": "data-parallel comms",
    "optimizer_step": "optimizer step",
    "offload_transfer": "offload transfers",
}
_ACRONYMS = {"kv": "KV", "lora": "LoRA", "gpu": "GPU", "moe": "MoE", "tp": "TP", "pp": "PP", "dp": "DP", "ep": "EP"}


def resource_words(name: str) -> str:
    """'memory_bandwidth' -> 'memory bandwidth'."""
    return RESOURCE_WORDS.get(name, name.replace("_", " "))


def component_words(name: str) -> str:
    """'kv_cache_bytes' -> 'KV cache'; 'data_parallel_seconds' -> 'data-parallel comms'; unknown keys read as words."""
    key = name.removesuffix("_bytes").removesuffix("_seconds")
    if key in COMPONENT_WORDS:
        return COMPONENT_WORDS[key]
    return " ".join(_ACRONYMS.get(w, w) for w in key.split("_") if w)


def capitalized(text: str) -> str:
    """First letter upper-cased, the rest untouched ('KV cache' stays, 'optimizer state' -> 'Optimizer state')."""
    return text[:1].upper() + text[1:]


def signed(value: float | None, formatter: Callable[[float], str]) -> str:
    """'+1.2 GiB' / '−3.4 ms' / '±0'; 'n/a' when there is no finite value."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "±0"
    return ("+" if value > 0 else "−") + formatter(abs(value))


def ranked_shares(shares: dict[str, float]) -> list[tuple[str, float]]:
    """(component key without unit suffix, share) for the positive shares, largest first."""
    return sorted(
        ((k.removesuffix("_bytes").removesuffix("_seconds"), v) for k, v in shares.items() if v > 0),
        key=lambda kv: -kv[1],
    )
