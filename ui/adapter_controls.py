"""The LoRA adapters section's inputs (``scenario.lora``, a ``LoraAdapters``), drawn in the sidebar by ui.controls.

Off, or many fine-tuned adapters served on the shared base: how many, the largest rank (every engine slot is that
size), the projections the engine wraps, the slots on the GPU (``max_loras``) and in host memory, and how the
requests spread over the adapters (a Zipf exponent; per-adapter shares travel in a link or a JSON scenario and are
kept while the adapter count is unchanged). Ranges, defaults and help come from the pydantic fields.

Keys (``<page>`` = inference): pickers in ui.controls' sense, driven by session state only (seeded from the
scenario the form starts from) and not bound to the URL; ui.controls writes the link's ``<page>_lora`` parameter.

* ``<page>_pick_adapters``: on or off.
* ``<page>_pick_adapters_count``, ``_rank``, ``_modules``, ``_max_loras``, ``_max_cpu_loras``, ``_zipf``,
  ``_storage_gbps`` (GB/s; empty = the default drive).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import streamlit as st
from pydantic import ValidationError

from planner import PlanningError, explain
from planner.inference.adapters import ADAPTER_STORAGE_BYTES_PER_SECOND, ALL_LINEAR, LoraAdapters
from planner.share import MAX_PARAM_CHARS, encode_inline
from ui.specs import FieldFacts, field_facts

NAMES = ("count", "rank", "modules", "max_loras", "max_cpu_loras", "zipf", "storage_gbps")


def keys(prefix: str) -> dict[str, str]:
    return {"on": prefix + "pick_adapters", **{name: f"{prefix}pick_adapters_{name}" for name in NAMES}}


def facts(name: str) -> FieldFacts:
    return field_facts(LoraAdapters, name)


def _seed(prefix: str, lora: LoraAdapters | None) -> None:
    ss = st.session_state
    k = keys(prefix)
    shown = lora if lora is not None else LoraAdapters()
    storage = shown.storage_bytes_per_second
    values = {
        "on": lora is not None,
        "count": shown.adapters,
        "rank": shown.adapter_rank,
        "modules": list(shown.target_modules),
        "max_loras": shown.max_loras,
        "max_cpu_loras": shown.max_cpu_loras,
        "zipf": shown.zipf_exponent,
        "storage_gbps": None if storage is None else storage / 1e9,
    }
    for name, key in k.items():
        ss[key] = values[name]


@lru_cache(maxsize=16)
def fits_a_link(lora: LoraAdapters) -> bool:
    """Whether a share link can carry the adapters (`planner.share` writes them as one inline parameter). Cached:
    the section asks at every rerun, and compressing 100,000 shares takes a while."""
    return len(encode_inline(lora.model_dump(mode="json"))) <= MAX_PARAM_CHARS


def _optional_count(where, label: str, key: str, name: str, placeholder: str) -> int | None:
    f = facts(name)
    lo, hi = f.widget_range()
    value = where.number_input(
        label,
        min_value=lo,
        max_value=hi,
        value=None,
        step=1,
        key=key,
        persist_state="session",
        placeholder=placeholder,
        help=f.help(),
    )
    return None if value is None else int(value)


def adapters_section(prefix: str, seed, where) -> tuple[dict[str, Any], str | None]:
    """The adapters' fields when on; (fields, error)."""
    ss = st.session_state
    k = keys(prefix)
    if k["on"] not in ss:
        _seed(prefix, seed.lora)
    on = where.toggle(
        "Serve LoRA adapters on the shared base",
        key=k["on"],
        persist_state="session",
        help="Every request names one fine-tuned adapter (multi-LoRA serving: vLLM --enable-lora, SGLang "
        "--enable-lora). The engine keeps max_loras adapter slots on the GPU, runs the adapters' kernels in every "
        "step and loads an adapter it does not hold before the step.",
    )
    if not on:
        where.caption("No adapters: every request runs the base model.")
        return {"lora": None}, None
    count, rank = _count_and_rank(where, k)
    left, right = where.columns(2)
    max_loras = _optional_count(left, "GPU slots (max_loras)", k["max_loras"], "max_loras", "default")
    max_cpu = _optional_count(right, "Host slots", k["max_cpu_loras"], "max_cpu_loras", "all")
    modules = where.multiselect(
        "Wrapped projections",
        list(ALL_LINEAR),
        key=k["modules"],
        persist_state="session",
        help=LoraAdapters.model_fields["target_modules"].description,
    )
    zipf, storage = _popularity_and_storage(where, k)
    if not modules:
        return {"lora": None}, "LoRA adapters need at least one wrapped projection"
    original = seed.lora
    # Per-adapter shares have no widget: a link's or a file's shares stay while they still fit the count.
    shares = original.traffic_shares if original is not None and original.adapters == count else None
    values = {
        "adapters": count,
        "adapter_rank": rank,
        "target_modules": tuple(modules),
        "max_loras": max_loras,
        "max_cpu_loras": max_cpu,
        "zipf_exponent": zipf,
        "traffic_shares": shares,
        "storage_bytes_per_second": storage,
    }
    try:
        lora = LoraAdapters(**values)
    except (ValidationError, PlanningError) as exc:
        return {"lora": None}, f"the LoRA adapters are not valid ({explain(exc)})"
    if shares is not None:
        where.caption(f"Traffic shares: the {len(shares):,} per-adapter shares of the link or file (skew unused).")
        if not fits_a_link(lora):
            where.warning(
                f"A share link cannot carry {len(shares):,} per-adapter shares (its LoRA parameter would exceed "
                f"{MAX_PARAM_CHARS:,} characters), so one opened from this page's link plans without the adapters. "
                "Share the scenario as JSON (Download CSV, or the CLI's scenario file) instead.",
                icon=":material/link_off:",
            )
    return {"lora": lora}, None


def _count_and_rank(where, k: dict[str, str]) -> tuple[int, int]:
    left, right = where.columns(2)

    def number(place, label: str, name: str, key: str, step: int) -> int:
        f = facts(name)
        lo, hi = f.widget_range()
        value = place.number_input(
            label, min_value=lo, max_value=hi, step=step, key=key, persist_state="session", help=f.help()
        )
        return int(value)

    return number(left, "Adapters", "adapters", k["count"], 1), number(
        right, "Largest rank", "adapter_rank", k["rank"], 8
    )


def _popularity_and_storage(where, k: dict[str, str]) -> tuple[float, float | None]:
    """The Zipf exponent and the storage bandwidth (bytes/s; None: the default drive)."""
    zipf_f = facts("zipf_exponent")
    zipf = where.slider(
        "Popularity skew (Zipf exponent)",
        min_value=zipf_f.widget_range()[0],
        max_value=zipf_f.widget_range()[1],
        step=0.1,
        key=k["zipf"],
        persist_state="session",
        help=zipf_f.help(),
    )
    storage_lo, storage_hi = facts("storage_bytes_per_second").widget_range(scale=1e9)
    storage = where.number_input(
        "Storage read bandwidth (GB/s)",
        min_value=storage_lo,
        max_value=storage_hi,
        value=None,
        step=0.5,
        format="%.1f",
        key=k["storage_gbps"],
        persist_state="session",
        placeholder=f"{ADAPTER_STORAGE_BYTES_PER_SECOND / 1e9:g} (one NVMe drive)",
        help=facts("storage_bytes_per_second").help(),
    )
    return float(zipf), None if storage is None else float(storage) * 1e9
