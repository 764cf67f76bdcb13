"""The pickers that build a model or GPU reference no single widget holds: a catalog model, a size, or the
user's own model (config.json uploaded or pasted, or a Hugging Face id); a catalog GPU or a custom one.

Their widgets are keyed ``<page>_pick_<thing>`` and driven by session state only (seeded there, never given
a default); what they remember between runs that no widget holds is a ``PickerMemo`` (inside the form's
memo, see ui.controls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import streamlit as st

from planner import PlanningError, explain
from planner.hardware.catalog import list_accelerators, resolve_accelerator
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from planner.model.checkpoint_check import parameter_check, stored_counts
from planner.model.hf_config import architecture_from_config
from planner.model.hub import HubImport, catalog_model_for, hub_available, import_from_hub, parse_hub_ref
from planner.model.synthetic import parse_size_id, size_id
from planner.safe_json import load_json
from planner.units import GIB

SOURCE_CATALOG, SOURCE_SIZE, SOURCE_UPLOAD = "Catalog", "Size", "Upload"
CUSTOM_GPU = "custom"


@dataclass
class PickerMemo:
    """What the pickers remember between runs."""

    model: Any = None  # an uploaded / pasted / Hub-imported config.json, or the catalog id a Hub id resolved to
    model_name: str = ""  # where it came from, for the caption
    model_error: str | None = None
    model_notes: tuple[str, ...] = ()  # what the Hub import said beyond the checkpoint check (offline, no check)
    upload_marker: tuple | None = None  # (file id, name) of the upload already read
    pasted: str = ""  # the paste box's text already read
    hub_id: str = ""  # the Hub id box's text already read
    gpu: dict | None = None  # a custom accelerator spec from a link, kept byte for byte while untouched


# ---------------------------------------------------------------------------------------- the model


@lru_cache(maxsize=1)
def _catalog_names() -> dict[str, str]:
    return {mid: model_metadata(mid).get("display_name", mid) for mid in catalog_model_ids()}


HUB_CACHE_SECONDS = 3600  # a Hub import is fetched again after an hour (a branch may have moved)


@st.cache_data(ttl=HUB_CACHE_SECONDS, max_entries=32, show_spinner=False)
def _hub_import(ref_text: str) -> HubImport:
    """One import per id and revision per hour for the whole server; a failure raises and is not cached, so
    the next try fetches again."""
    return import_from_hub(ref_text)


def hub_model(text: str) -> tuple[str | None, str | None]:
    """(catalog id, None) for a catalog id or a Hugging Face id the catalog holds (without @revision);
    (None, None) for another valid Hub id (to import); (None, a sentence) for text that is neither."""
    stripped = text.strip()
    if stripped in _catalog_names():
        return stripped, None
    try:
        ref = parse_hub_ref(stripped)
    except PlanningError as exc:
        return None, explain(exc)
    return catalog_model_for(ref), None


def _take_config(memo: PickerMemo, data: str | bytes, name: str) -> None:
    """Read a config.json; on failure forget the previous one too (no stale plan under the error)."""
    memo.model_notes = ()
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
    """A catalog id, a Hub id the catalog holds, or any other Hub id: imported (config.json and safetensors
    counts, network or cache). On failure the previous model is forgotten too (no stale plan under the error)."""
    memo.model_notes = ()
    model_id, error = hub_model(text)
    if error is not None:
        memo.model, memo.model_error = None, error
        return
    if model_id is not None:
        memo.model, memo.model_error = model_id, None
        memo.model_name = f"the Hugging Face id {text.strip()} (catalog entry {model_id})"
        return
    ref = parse_hub_ref(text)
    try:
        with st.spinner(f"Fetching {ref.text} from the Hugging Face Hub…"):
            imported = _hub_import(ref.text)
    except PlanningError as exc:
        memo.model, memo.model_error = None, explain(exc)
        return
    where = f"the Hugging Face Hub (commit {imported.commit[:12]})" if imported.commit else "the Hugging Face Hub"
    memo.model, memo.model_error = imported.config, None
    memo.model_name = where + (", read offline from the local cache" if imported.from_cache_only else "")
    memo.model_notes = (imported.check_skipped,) if imported.check_skipped else ()


def _checkpoint_note(where, model: Any, arch: ModelArchitecture) -> None:
    """The check of an imported config's safetensors counts: a caption when the counts agree (or cannot be
    compared), a warning when they differ."""
    if not isinstance(model, dict):
        return
    try:
        counts = stored_counts(model.get("_headroom"))
    except PlanningError:
        return  # resolve_model already refused it
    if not counts:
        return
    check = parameter_check(arch, counts)
    sentence = check.sentence()
    sentence = sentence[0].upper() + sentence[1:] + "."
    if check.agrees is False:
        where.warning(sentence)
    else:
        where.caption(sentence)


def _seed_model_picker(prefix: str, model: Any, memo: PickerMemo) -> None:
    ss = st.session_state
    ss[prefix + "pick_model"] = "llama-3.1-70b" if "llama-3.1-70b" in _catalog_names() else catalog_model_ids()[0]
    ss[prefix + "pick_size_b"] = 70.0
    ss[prefix + "pick_moe"] = False
    if isinstance(model, dict):
        ss[prefix + "pick_model_source"] = SOURCE_UPLOAD
        meta = model.get("_headroom")
        imported = isinstance(meta, dict) and isinstance(meta.get("hub_id"), str)
        name = "the config.json in the link" + (" (imported from the Hugging Face Hub)" if imported else "")
        memo.model, memo.model_name, memo.model_error = model, name, None
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
        help="owner/name, optionally @revision (a branch, tag or commit). Ids of catalog models resolve to the "
        "catalog entry; any other is imported from the Hub: its config.json and the parameter counts of its "
        "safetensors headers (gated models need HF_TOKEN or `hf auth login` on the server; offline, the local "
        "Hugging Face cache is used). The imported config.json travels in share links."
        + ("" if hub_available() else ' Importing needs huggingface_hub: pip install "headroom[hub]".'),
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
    _checkpoint_note(where, memo.model, arch)
    for note in memo.model_notes:
        where.caption(note + ".")
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
