"""What the scenario form draws, per kind (``inference``, ``training``): the widget specs, the sections they sit in,
the fields no single widget holds (written to the URL by ui.controls) and their custom sections, the placeholders of
optional boxes, and the field labels the user sees. Data and lookups only; ui.controls draws the form.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from ui import adapter_controls, speculative_controls, state, traffic_controls, training_controls
from ui.specs import COMMON_LAYOUT, ENERGY, ENGINE, NOTES, FieldFacts, Spec, field_facts

MANUAL_FIELDS = ("model", "gpu")
# The concurrency slider's stops: powers of two and the halfway 1.5x steps, 1 to 8,192. The number box beside
# it takes any value the field allows.
CONCURRENCY_STOPS: tuple[int, ...] = tuple(sorted({2**k for k in range(14)} | {3 * 2**k for k in range(12)}))


# ------------------------------------------------------------------------------------------ specs


INFERENCE_SPECS: tuple[Spec, ...] = (
    COMMON_LAYOUT
    + (
        Spec("expert_parallel", "EP (experts)", "number", section="layout"),
        Spec("weight_dtype", "Weights", "select", section="precision", column=0),
        Spec("kv_cache_dtype", "KV cache", "select", section="precision", column=1),
        Spec("attention_weight_dtype", "Attention weights", "select", section="precision"),
        Spec("prompt_tokens", "Prompt tokens", "number", section="workload", column=0, step=256),
        Spec("output_tokens", "Output tokens", "number", section="workload", column=1, step=64),
        Spec("images_per_request", "Images per request", "number", section="workload", column=0),
        Spec("tokens_per_image", "Tokens per image", "number", section="workload", column=1, step=16),
        Spec("concurrency", "Concurrency (sequences in flight)", "concurrency", section="workload"),
        Spec(
            "gpu_memory_utilization", "GPU memory the engine may use", "number", section="more", step=0.01, fmt="%.2f"
        ),
        Spec("prefix_cache_hit_rate", "Prefix-cache hit rate", "slider", section="more", step=0.05),
        Spec("kv_block_tokens", "KV block size (tokens)", "number", section="more", step=16),
        Spec("prefill_chunk_tokens", "Prefill chunk (tokens)", "number", section="more", step=1024),
        Spec("weight_group_size", "int4 group size", "number", section="more", step=16),
        Spec("fp8_scaling", "FP8 weight scales", "select", section="more"),
        Spec("quantize_embeddings", "Quantize embeddings and lm_head too", "toggle", section="more"),
        Spec("honor_sliding_window", "Honour sliding-window attention", "toggle", section="more"),
        Spec("usd_per_gpu_hour", "Price ($ per GPU-hour)", "number", section="more", step=0.1, fmt="%.2f"),
        Spec("target_requests_per_second", "Target requests/s", "number", section="more", step=1.0, fmt="%.3g"),
    )
    + ENGINE
    + ENERGY
    + NOTES
)

SPECS: dict[str, tuple[Spec, ...]] = {"inference": INFERENCE_SPECS, "training": training_controls.TRAINING_SPECS}

SECTIONS = {
    "inference": (
        ("hardware", None),
        ("layout", None),
        ("precision", "Precision"),
        ("workload", "Workload"),
        ("speculative", "Speculative decoding"),
        ("lora", "▸ LoRA adapters"),
        ("more", "▸ More settings"),
        ("notes", "Notes for the review"),
        ("traffic", None),
    ),
    "training": training_controls.SECTIONS,
}

# Extra manual fields (beyond model/gpu) and custom section renderers, per kind: fields no single widget
# holds (e.g. a LoRA config, the request stream) are rendered by ``fn(prefix, seed, where) -> (scenario fields,
# error or None)``. A custom section may bind its own widgets to the URL (CUSTOM_BOUND: prefix -> parameters;
# CUSTOM_SEEDS: ``fn(prefix, seed) -> rerun?`` seeds them like ``_seed_new_widgets``). MAIN_SECTIONS are drawn
# in the page's main area, where the page places them (``scenario_form(places=...)``), not in the sidebar.
EXTRA_MANUAL: dict[str, tuple[str, ...]] = {"inference": ("traffic", "speculative", "lora"), "training": ("lora",)}
CUSTOM_SECTIONS: dict[str, dict[str, Callable]] = {
    "inference": {
        "traffic": traffic_controls.traffic_section,
        "speculative": speculative_controls.speculative_section,
        "lora": adapter_controls.adapters_section,
    },
    "training": {"lora": training_controls.lora_section},
}
CUSTOM_BOUND: dict[str, Callable[[str], set[str]]] = {"inference": traffic_controls.bound_params}
CUSTOM_SEEDS: dict[str, Callable[[str, Any], bool]] = {
    "inference": lambda prefix, seed: any(
        [traffic_controls.seed_widgets(prefix, seed), speculative_controls.seed_widgets(prefix, seed)]
    )
}
# Custom sections whose choices depend on the model picked above them (``fn(prefix, seed, where, model)``).
MODEL_AWARE = {"speculative"}
MAIN_SECTIONS: dict[str, tuple[str, ...]] = {"inference": ("traffic",), "training": ()}

# Optional number fields: what an empty box means.
PLACEHOLDERS = {
    "usd_per_gpu_hour": "catalog price",
    "target_requests_per_second": "none",
    "data_parallel": "auto",
    "gpus_per_node": "the GPU's NVLink domain",
    "tokens_per_image": "the model's",
    "attention_weight_dtype": "same as the weights",
    "fp8_scaling": "the checkpoint's",
    "first_pipeline_stage_layers": "even split",
    "last_pipeline_stage_layers": "even split",
}


def specs_for(kind: str) -> tuple[Spec, ...]:
    return SPECS[kind]


def manual_fields(kind: str) -> tuple[str, ...]:
    """Fields whose URL parameter this module writes (no widget is bound to them)."""
    return MANUAL_FIELDS + EXTRA_MANUAL[kind] + tuple(s.name for s in SPECS[kind] if not s.bound)


@cache
def facts_for(kind: str, name: str) -> FieldFacts:
    return field_facts(state.scenario_class(kind), name)


def default_of(kind: str, name: str) -> Any:
    return state.scenario_class(kind).model_fields[name].get_default(call_default_factory=True)


def labels_for(kind: str) -> dict[str, str]:
    """Each field's label as the user sees it."""
    return {spec.name: spec.label for spec in specs_for(kind)}


def in_labels(kind: str, text: str) -> str:
    """An engine sentence with field names (``tensor_parallel=3``) replaced by the labels on screen.

    A one-word name (``decision``, ``precision``) is also an English word, so it is replaced only as
    ``name=value``.
    """
    labels = labels_for(kind)
    names = "|".join(sorted(map(re.escape, labels), key=len, reverse=True))

    def label(match: re.Match) -> str:
        name, assigned = match.group(1), match.group(2)
        if "_" not in name and not assigned:
            return match.group(0)
        return labels[name] + (" = " if assigned else "")

    return re.sub(rf"\b({names})\b(=)?", label, text)
