"""Words for the dashboard: labels of plan fields and numbers formatted through planner.units.

planner.units is the one formatting module; this file only picks which of its functions a unit needs.
"""

from __future__ import annotations

import math
import re

from planner import units

_ACRONYMS = {
    "kv": "KV",
    "lora": "LoRA",
    "gpu": "GPU",
    "hbm": "HBM",
    "moe": "MoE",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "ep": "EP",
    "cp": "CP",
    "zero": "ZeRO",
}

RESOURCE_WORDS = {
    "capacity": "memory capacity",
    "memory_bandwidth": "memory bandwidth",
    "compute": "compute",
    "communication": "communication",
}


COMPONENT_WORDS = {
    "forward_backward": "Forward + backward",
    "pipeline_bubble": "Pipeline bubble",
    "tensor_parallel": "Tensor-parallel comms",
    "expert_parallel": "Expert all-to-all",
    "pipeline_p2p": "Pipeline sends",
    "overlapped_communication_exposed": "Exposed overlapped comms",
    "data_parallel": "Data-parallel comms",
    "optimizer_step": "Optimizer step",
    "offload_transfer": "Offload transfers",
    "sharding_buffers": "ZeRO/FSDP buffers",
    "draft_weights": "Draft weights",
    "draft_kv_cache": "Draft KV cache",
    "vision_encoder": "Vision encoder (images)",
    "lora_adapters": "LoRA adapter slots",
}


def component_label(name: str) -> str:
    """'kv_cache_bytes' -> 'KV cache'; 'optimizer_states_bytes' -> 'Optimizer states'."""
    key = name.removesuffix("_bytes").removesuffix("_seconds")
    if key in COMPONENT_WORDS:
        return COMPONENT_WORDS[key]
    words = name.removesuffix("_bytes").removesuffix("_seconds").split("_")
    words = [_ACRONYMS.get(w, w) for w in words if w]
    if not words:
        return name
    first = words[0]
    words[0] = first if first.isupper() else first[:1].upper() + first[1:]
    return " ".join(words)


def resource_label(name: str) -> str:
    return RESOURCE_WORDS.get(name, name.replace("_", " "))


def fmt(value: float | None, unit: str) -> str:
    """A value with its unit, through planner.units: bytes in GiB, rates in SI, time adaptive."""
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "∞" if value > 0 else "n/a"
    unit_l = unit.lower()
    if unit_l in ("bytes", "b"):
        return units.gib(value)
    if unit_l in ("seconds", "s"):
        return units.seconds(value)
    if unit_l in ("usd", "$"):
        return units.usd(value)
    if unit_l in ("fraction", "ratio"):
        return units.percent(value, 1)
    if unit_l.endswith("/s") and unit_l.startswith(("b", "flop")):
        return units.rate(value, unit)
    if unit_l in ("tokens/s", "requests/s", "sequences/s", "samples/s"):
        return f"{units.count(value)} {unit}"
    if unit_l in ("parameters", "tokens", "flops", "flop", "gpus", "steps", "sequences"):
        return f"{units.count(value)} {unit}"
    return f"{units.count(value)} {unit}".strip()


def tokens(value: float | None) -> str:
    return "n/a" if value is None else f"{units.count(value)} tokens"


def gpu_short_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").removeprefix("AMD ").removeprefix("Instinct ")


def md_escape(text: str) -> str:
    """Escape Markdown (and Streamlit's $…$ LaTeX) in engine text; intraword underscores stay as they are."""
    return re.sub(r"([\\`*{}\[\]<>#|~$])", r"\\\1", str(text))


def equation(plan, name: str):
    for eq in getattr(plan, "equations", []) or []:
        if eq.name == name:
            return eq
    return None


def equation_help(plan, *names: str, note: str = "") -> str | None:
    """Markdown for a metric's help tooltip: each named equation with the numbers filled in."""
    parts = []
    for name in names:
        eq = equation(plan, name)
        if eq is None:
            continue
        parts.append(
            f"**{md_escape(eq.name)}** = {md_escape(eq.formula)}\n\n"
            f"= {md_escape(eq.substituted)}\n\n= **{md_escape(fmt(eq.value, eq.unit))}**"
        )
    if note:
        parts.append(note)
    return "\n\n---\n\n".join(parts) or None
