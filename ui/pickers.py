"""The pickers that build a model or GPU reference no single widget holds: a catalog model, a size, or the
user's own model (config.json uploaded or pasted, or a Hugging Face id); a catalog GPU or a custom one.

Their widgets are keyed ``<page>_pick_<thing>`` and driven by session state only (seeded there, never given
a default); what they remember between runs that no widget holds is a ``PickerMemo`` (inside the form's
memo, see ui.controls).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import streamlit as st

from planner import PlanningError, explain
from planner.hardware.catalog import list_accelerators, resolve_accelerator
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from planner.model.hf_config import architecture_from_config
from planner.model.synthetic import parse_size_id, size_id
from planner.safe_json import load_json
from planner.units import GIB

SOURCE_CATALOG, SOURCE_SIZE, SOURCE_UPLOAD = "Catalog", "Size", "Upload"
CUSTOM_GPU = "custom"


@dataclass
class PickerMemo:
    """What the pickers remember between runs."""

    model: Any = None  # an uploaded / pasted config.json, or the catalog id a Hub id resolved to
    model_name: str = ""  # where it came from, for the caption
    model_error: str | None = None
    upload_marker: tuple | None = None  # (file id, name) of the upload already read
    pasted: str = ""  # the paste box's text already read
    hub_id: str = ""  # the Hub id box's text already read
    gpu: dict | None = None  # a custom accelerator spec from a link, kept byte for byte while untouched


# ---------------------------------------------------------------------------------------- the model


@lru_cache(maxsize=1)
def _catalog_names() -> dict[str, str]:
    return {mid: model_metadata(mid).get("display_name", mid) for mid in catalog_model_ids()}


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SOURCE_REPO = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)\s+(?:\([^)]*\)\s+)?config\.json")


@lru_cache(maxsize=1)
def _catalog_by_hub_id() -> dict[str, str]:
    """Hugging Face repo id (lower case) -> catalog id, from each catalog entry's recorded source."""
    out = {}
    for model_id in catalog_model_ids():
        match = _SOURCE_REPO.match(str(model_metadata(model_id).get("source", "")))
        if match:
            out[match.group(1).lower()] = model_id
    return out


def hub_model(text: str) -> tuple[str | None, str | None]:
    """(catalog id, None) for a Hugging Face model id the catalog holds, else (None, a sentence why not)."""
    hub_id = text.strip().removeprefix("https://").removeprefix("huggingface.co/").strip("/")
    if hub_id in _catalog_names():
        return hub_id, None
    if not _HUB_ID.match(hub_id):
        return None, f"'{text.strip()}' is not a Hugging Face model id (owner/name, e.g. meta-llama/Llama-3.1-8B)"
    model_id = _catalog_by_hub_id().get(hub_id.lower())
    if model_id is not None:
        return model_id, None
    return None, (
        f"{hub_id} is not in the catalog, and importing from the Hugging Face Hub is not available yet: "
        "upload or paste its config.json instead"
    )


def _take_config(memo: PickerMemo, data: str | bytes, name: str) -> None:
    """Read a config.json; on failure forget the previous one too (no stale plan under the error)."""
    try:
        config = load_json(data, name)
        if not isinstance(config, dict):
            raise PlanningError("config.json must hold a JSON object")
        architecture_from_config(config)
    except PlanningError as exc:
        memo.model, memo.model_error = None, f"{name}: {explain(exc)}"
    else:
        memo.model, memo.model_name, memo.model_error = config, name, None


def _take_hub_id(memo: PickerMemo, text: str) -> None:
    model_id, error = hub_model(text)
    if model_id is None:
        memo.model, memo.model_error = None, error
    else:
        memo.model, memo.model_error = model_id, None
        memo.model_name = f"the Hugging Face id {text.strip()} (catalog entry {model_id})"


def _seed_model_picker(prefix: str, model: Any, memo: PickerMemo) -> None:
    ss = st.session_state
    ss[prefix + "pick_model"] = "llama-3.1-70b" if "llama-3.1-70b" in _catalog_names() else catalog_model_ids()[0]
    ss[prefix + "pick_size_b"] = 70.0
    ss[prefix + "pick_moe"] = False
    if isinstance(model, dict):
        ss[prefix + "pick_model_source"] = SOURCE_UPLOAD
        memo.model, memo.model_name, memo.model_error = model, "the config.json in the link", None
    elif isinstance(model, str) and (size := parse_size_id(model)) is not None:
        moe, params = size
        ss[prefix + "pick_model_source"] = SOURCE_SIZE
        ss[prefix + "pick_size_b"] = float(params / 1e9)
        ss[prefix + "pick_moe"] = moe
    else:
        ss[prefix + "pick_model_source"] = SOURCE_CATALOG
        if model in _catalog_names():
            ss[prefix + "pick_model"] = model


def _own_model(prefix: str, memo: PickerMemo, where) -> tuple[Any, str | None]:
    """A config.json uploaded or pasted, or a Hugging Face model id: whichever the user changed last."""
    upload = where.file_uploader(
        "Hugging Face config.json",
        type=["json"],
        key=prefix + "pick_config_file",
        help="The model's config.json (architecture only; no weights are read).",
    )
    pasted = where.text_area(
        "…or paste config.json",
        key=prefix + "pick_config_text",
        height=90,
        placeholder='{"model_type": "llama", "hidden_size": 4096, …}',
    )
    hub_id = where.text_input(
        "…or a Hugging Face model id",
        key=prefix + "pick_hub_id",
        placeholder="meta-llama/Llama-3.1-8B",
        help="Ids of catalog models resolve to the catalog entry; importing other models from the Hub is not "
        "available yet.",
    )
    if upload is not None and (upload.file_id, upload.name) != memo.upload_marker:
        memo.upload_marker = (upload.file_id, upload.name)
        _take_config(memo, upload.getvalue(), upload.name)
    elif pasted != memo.pasted:
        memo.pasted = pasted
        if pasted.strip():
            _take_config(memo, pasted, "the pasted config.json")
    elif hub_id != memo.hub_id:
        memo.hub_id = hub_id
        if hub_id.strip():
            _take_hub_id(memo, hub_id)
    if memo.model_error:
        where.error(memo.model_error)
        return None, memo.model_error
    if memo.model is None:
        return None, "upload or paste a config.json, give a Hugging Face model id, or pick a catalog model"
    try:
        arch = resolve_model(memo.model)
    except PlanningError as exc:
        return None, explain(exc)
    where.caption(f"Using **{arch.name}** from {memo.model_name}.")
    return memo.model, None


def model_picker(prefix: str, seed_model: Any, where, memo: PickerMemo) -> tuple[Any, str | None]:
    """(model reference for the scenario, error sentence or None)."""
    if prefix + "pick_model_source" not in st.session_state:
        _seed_model_picker(prefix, seed_model, memo)
    source = where.radio(
        "Model",
        [SOURCE_CATALOG, SOURCE_SIZE, SOURCE_UPLOAD],
        key=prefix + "pick_model_source",
        horizontal=True,
        persist_state="session",
        format_func=lambda source: "Your model" if source == SOURCE_UPLOAD else source,
        help="A built-in model, a size such as 70B (architecture derived from Llama-3 / Qwen3-MoE "
        "proportions), or your own: a Hugging Face config.json (uploaded or pasted) or model id.",
    )
    names = _catalog_names()
    if source == SOURCE_CATALOG:
        model = where.selectbox(
            "Catalog model",
            list(names),
            format_func=lambda m: names.get(m, m),
            key=prefix + "pick_model",
            persist_state="session",
            label_visibility="collapsed",
            help="Type to search the catalog.",
        )
        return model, None
    if source == SOURCE_SIZE:
        left, right = where.columns([3, 2], vertical_alignment="bottom")
        billions = left.number_input(
            "Parameters (billions)",
            min_value=0.1,
            max_value=10_000.0,
            step=1.0,
            format="%g",
            key=prefix + "pick_size_b",
            persist_state="session",
        )
        moe = right.toggle(
            "MoE",
            key=prefix + "pick_moe",
            persist_state="session",
            help="Mixture of experts: 128 experts, 8 routed per token.",
        )
        model = size_id(billions * 1e9, moe)
        try:
            resolve_model(model)
        except PlanningError as exc:
            return None, explain(exc)
        return model, None
    return _own_model(prefix, memo, where)


# ------------------------------------------------------------------------------------------ the GPU

_CUSTOM_FIELDS = (  # key suffix, label, unit factor, min, max, step
    ("mem_gib", "Memory (GiB)", GIB, 1.0, 1e6, 1.0),
    ("bw_tbps", "HBM bandwidth (TB/s)", 1e12, 0.01, 1000.0, 0.1),
    ("bf16_tflops", "Dense bf16 TFLOP/s", 1e12, 0.1, 1e6, 10.0),
    ("fp8_tflops", "Dense fp8 TFLOP/s (0: none)", 1e12, 0.0, 1e6, 10.0),
    ("fp4_tflops", "Dense fp4 TFLOP/s (0: none)", 1e12, 0.0, 1e6, 10.0),
    ("link_gbps", "GPU-GPU link (GB/s, 0: PCIe)", 1e9, 0.0, 1e5, 50.0),
    ("usd_h", "Reference $/GPU-hour", 1.0, 0.0, 10_000.0, 0.1),
)


@lru_cache(maxsize=1)
def _gpu_names() -> dict[str, str]:
    return {a.id: a.name for a in list_accelerators()}


def _custom_values(spec: dict | None) -> dict[str, float]:
    accel = resolve_accelerator(spec if spec is not None else "h100-sxm")
    link = accel.interconnect
    return {
        "mem_gib": round(accel.memory_bytes / GIB, 3),
        "bw_tbps": accel.memory_bandwidth_bytes_per_second / 1e12,
        "bf16_tflops": (accel.peak_flops_per_second.get("bf16") or accel.peak_flops("bf16")) / 1e12,
        "fp8_tflops": (accel.peak_flops_per_second.get("fp8") or 0.0) / 1e12,
        "fp4_tflops": (accel.peak_flops_per_second.get("fp4") or 0.0) / 1e12,
        "link_gbps": (link.bandwidth_bytes_per_second / 1e9) if link else 0.0,
        "usd_h": accel.reference_usd_per_hour,
    }


def _seed_gpu_picker(prefix: str, gpu: Any, memo: PickerMemo) -> None:
    ss = st.session_state
    memo.gpu = gpu if isinstance(gpu, dict) else None
    ss[prefix + "pick_gpu"] = CUSTOM_GPU if memo.gpu is not None else (gpu if gpu in _gpu_names() else "h100-sxm")
    try:
        values = _custom_values(memo.gpu)
    except PlanningError:
        values = _custom_values(None)
    for suffix, value in values.items():
        ss[prefix + "pick_gpu_" + suffix] = float(value)


def gpu_picker(prefix: str, seed_gpu: Any, where, memo: PickerMemo) -> tuple[Any, str | None]:
    if prefix + "pick_gpu" not in st.session_state:
        _seed_gpu_picker(prefix, seed_gpu, memo)
    names = _gpu_names()
    options = [*names, CUSTOM_GPU]
    gpu = where.selectbox(
        "GPU",
        options,
        key=prefix + "pick_gpu",
        persist_state="session",
        format_func=lambda g: "Custom accelerator…" if g == CUSTOM_GPU else names.get(g, g),
        help="Catalog figures are dense (no 2:4 sparsity) peak FLOP/s and HBM bandwidth.",
    )
    if gpu != CUSTOM_GPU:
        return gpu, None
    values = {}
    box = where.container(border=True)
    box.caption("Custom accelerator")
    cols = box.columns(2)
    for index, (suffix, label, _, lo, hi, step) in enumerate(_CUSTOM_FIELDS):
        values[suffix] = cols[index % 2].number_input(
            label,
            min_value=lo,
            max_value=hi,
            step=step,
            format="%g",
            key=prefix + "pick_gpu_" + suffix,
            persist_state="session",
        )
    if memo.gpu is not None:
        try:
            original = _custom_values(memo.gpu)
        except PlanningError:
            original = None
        if original is not None and all(
            math.isclose(values[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in original.items()
        ):
            return memo.gpu, None  # untouched: keep the link's spec byte for byte
    spec: dict[str, Any] = {
        "name": "Custom accelerator",
        "memory_bytes": int(round(values["mem_gib"] * GIB)),
        "memory_bandwidth_bytes_per_second": values["bw_tbps"] * 1e12,
        "peak_flops_per_second": {"bf16": values["bf16_tflops"] * 1e12},
        "reference_usd_per_hour": values["usd_h"],
    }
    for dtype in ("fp8", "fp4"):  # optional tensor-core formats: 0 means the GPU dequantizes them
        if values[f"{dtype}_tflops"] > 0:
            spec["peak_flops_per_second"][dtype] = values[f"{dtype}_tflops"] * 1e12
    if values["link_gbps"] > 0:
        spec["interconnect"] = {"name": "custom link", "bandwidth_bytes_per_second": values["link_gbps"] * 1e9}
    try:
        resolve_accelerator(spec)
    except PlanningError as exc:
        return None, explain(exc)
    return spec, None
