"""Scenario widgets, created once here and used by every page that edits a scenario.

How a page's inputs stay in the URL
-----------------------------------
* Every scenario field with a plain widget is bound to the URL (``bind="query-params"``); its key is the
  URL parameter, page-prefixed (``inference_concurrency``) and its default is the scenario's default, so
  the URL carries exactly the inputs that differ from the defaults — the same rule as
  ``planner.share.scenario_to_query_params``.
* ``model`` and ``gpu`` can be a catalog id, a size id or a whole config.json / accelerator spec, which no
  single widget can hold; the picker widgets are not bound and this module writes ``<prefix>model`` /
  ``<prefix>gpu`` to ``st.query_params`` itself, in ``planner.share``'s format.
* Streamlit drops invalid bound values silently, so before any widget exists the link is validated with
  ``planner.share.query_params_to_scenario`` (plus the widgets' own ranges) and its warnings are kept to
  show. If a widget still came up with a value other than the validated one (a value the widget can hold
  but the scenario cannot, e.g. an impossible layout), the validated value is written to session state and
  the page reruns once.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from planner import PlanningError, explain
from planner.dtypes import DTYPES
from planner.hardware.catalog import list_accelerators, resolve_accelerator
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from planner.model.hf_config import architecture_from_config
from planner.model.synthetic import parse_size_id, size_id
from planner.safe_json import load_json
from planner.scenario_base import MAX_TOKENS
from planner.share import query_params_to_scenario, scenario_to_query_params
from planner.units import GIB
from ui import state, training_controls
from ui.specs import COMMON_LAYOUT, Spec

MANUAL_FIELDS = ("model", "gpu")
SOURCE_CATALOG, SOURCE_SIZE, SOURCE_UPLOAD = "Catalog", "Size", "Upload"
CUSTOM_GPU = "custom"


# ------------------------------------------------------------------------------------------ specs


INFERENCE_SPECS: tuple[Spec, ...] = COMMON_LAYOUT + (
    Spec(
        "expert_parallel",
        "EP (experts)",
        "int",
        1,
        65_536,
        1,
        section="layout",
        help="Expert parallelism (mixture-of-experts models only): experts are spread over this many GPUs.",
    ),
    Spec(
        "weight_dtype",
        "Weights",
        "select",
        options=DTYPES,
        section="precision",
        column=0,
        help="Storage format of the linear-layer weights. fp8/int8 run their GEMMs in that format; int4 is "
        "weight-only (GPTQ/AWQ) and computes in bf16.",
    ),
    Spec(
        "kv_cache_dtype",
        "KV cache",
        "select",
        options=DTYPES,
        section="precision",
        column=1,
        help="Storage format of the cached keys and values.",
    ),
    Spec(
        "prompt_tokens",
        "Prompt tokens",
        "int",
        1,
        MAX_TOKENS,
        256,
        section="workload",
        column=0,
        help="Tokens in each request's prompt (input).",
    ),
    Spec(
        "output_tokens",
        "Output tokens",
        "int",
        1,
        MAX_TOKENS,
        64,
        section="workload",
        column=1,
        help="Tokens generated per request.",
    ),
    Spec(
        "concurrency",
        "Concurrency (sequences in flight)",
        "slider_int",
        1,
        8192,
        1,
        section="workload",
        help="Requests being served at once across the whole deployment (continuous batching). "
        "Use the arrow keys on the slider for single steps.",
    ),
    Spec(
        "gpu_memory_utilization",
        "GPU memory the engine may use",
        "float",
        0.1,
        1.0,
        0.01,
        fmt="%.2f",
        section="more",
        help="vLLM-style gpu_memory_utilization: the share of each GPU's memory the serving "
        "engine pre-allocates (weights, KV cache, activations).",
    ),
    Spec(
        "prefix_cache_hit_rate",
        "Prefix-cache hit rate",
        "slider_float",
        0.0,
        1.0,
        0.05,
        section="more",
        help="Share of prompt tokens already in the KV cache (shared system prompts); skips their prefill.",
    ),
    Spec(
        "kv_block_tokens",
        "KV block size (tokens)",
        "int",
        1,
        4096,
        16,
        section="more",
        help="Paged-attention block size; every sequence's KV cache is rounded up to whole blocks.",
    ),
    Spec(
        "prefill_chunk_tokens",
        "Prefill chunk (tokens)",
        "int",
        16,
        MAX_TOKENS,
        1024,
        section="more",
        help="Most prompt tokens processed in one prefill step (chunked prefill).",
    ),
    Spec(
        "weight_group_size",
        "int4 group size",
        "int",
        16,
        4096,
        16,
        section="more",
        help="Quantization group of int4 weights: one fp16 scale and a 4-bit zero per group.",
    ),
    Spec("quantize_embeddings", "Quantize embeddings and lm_head too", "toggle", section="more"),
    Spec(
        "honor_sliding_window",
        "Honour sliding-window attention",
        "toggle",
        section="more",
        help="Sliding-window layers cache at most their window (as engines that support it do).",
    ),
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
        "target_requests_per_second",
        "Target requests/s",
        "optional_float",
        0.001,
        1e7,
        1.0,
        fmt="%.3g",
        section="more",
        help="Optional: the request rate to serve; the plan then says how many GPUs it needs.",
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

SPECS: dict[str, tuple[Spec, ...]] = {"inference": INFERENCE_SPECS, "training": training_controls.TRAINING_SPECS}

SECTIONS = {
    "inference": (
        ("hardware", None),
        ("layout", None),
        ("precision", "Precision"),
        ("workload", "Workload"),
        ("more", "▸ More settings"),
        ("notes", "Notes for the review"),
    ),
    "training": training_controls.SECTIONS,
}

# Extra manual fields (beyond model/gpu) and custom section renderers, per kind: fields no single widget
# holds (e.g. a LoRA config) are rendered by ``fn(prefix, seed, where) -> (scenario fields, error or None)``.
EXTRA_MANUAL: dict[str, tuple[str, ...]] = {"inference": (), "training": ("lora",)}
CUSTOM_SECTIONS: dict[str, dict[str, Callable]] = {
    "inference": {},
    "training": {"lora": training_controls.lora_section},
}


def manual_fields(kind: str) -> tuple[str, ...]:
    specs_for(kind)
    return MANUAL_FIELDS + EXTRA_MANUAL[kind] + tuple(s.name for s in SPECS[kind] if not s.bound)


def specs_for(kind: str) -> tuple[Spec, ...]:
    return SPECS[kind]


def default_of(kind: str, name: str) -> Any:
    return state.scenario_class(kind).model_fields[name].get_default(call_default_factory=True)


# ------------------------------------------------------------------------------------ link reading


def _prefixed_params(prefix: str) -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params if key.startswith(prefix)}


def read_link(kind: str, params: dict[str, list[str]] | None = None, check_widgets: bool = True):
    """The scenario a link describes and the warnings about it (never raises).

    `params` defaults to the current URL's parameters with this kind's prefix. Besides planner.share's
    checks, a value the scenario accepts but the dashboard's widget cannot show falls back to the default.
    """
    prefix = f"{kind}_"
    params = _prefixed_params(prefix) if params is None else params
    params, literal_ints = _split_literal_ints(kind, prefix, params)
    scenario, warnings = query_params_to_scenario(params, kind, prefix)
    scenario = _apply_literal_ints(kind, prefix, scenario, literal_ints, warnings)
    if not check_widgets:
        return scenario, warnings
    fixes = {}
    for spec in specs_for(kind):
        key = prefix + spec.name
        if key not in params:
            continue
        value = getattr(scenario, spec.name)
        if not spec.accepts(value):
            raw = params[key][-1] if isinstance(params[key], list) else params[key]
            fixes[spec.name] = default_of(kind, spec.name)
            warnings.append(
                f"Link parameter '{key}' = '{raw}' is outside what the dashboard can set "
                f"({spec.describe()}); using the default {fixes[spec.name]!r}."
            )
    if fixes:
        candidate, error = state.build_scenario(kind, {**_fields(scenario), **fixes})
        scenario = candidate if candidate is not None else state.scenario_class(kind)()
        if error:
            warnings.append(
                f"With those defaults the link's plan is impossible ({error}); the default scenario is shown."
            )
    return scenario, warnings


def _literal_int_fields(kind: str) -> dict[str, tuple]:
    """Fields typed Literal[0, 1, 2, 3] (e.g. zero_stage): pydantic will not read them from URL text."""

    out = {}
    for name, info in state.scenario_class(kind).model_fields.items():
        if typing.get_origin(info.annotation) is typing.Literal:
            args = typing.get_args(info.annotation)
            if args and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                out[name] = args
    return out


def _split_literal_ints(kind: str, prefix: str, params: dict) -> tuple[dict, dict]:
    literal = _literal_int_fields(kind)
    rest, taken = {}, {}
    for key, value in params.items():
        name = key[len(prefix) :]
        (taken if name in literal else rest)[key] = value
    return rest, taken


def _apply_literal_ints(kind: str, prefix: str, scenario, taken: dict, warnings: list[str]):
    """planner.share reads Literal-int fields as text and rejects them; read them here instead."""
    literal = _literal_int_fields(kind)
    for key, raw in taken.items():
        name = key[len(prefix) :]
        text = raw[-1] if isinstance(raw, (list, tuple)) else raw
        try:
            value = int(text)
            if value not in literal[name]:
                raise ValueError
        except (TypeError, ValueError):
            warnings.append(
                f"Link parameter '{key}' = '{text}' is invalid (use one of "
                f"{', '.join(map(str, literal[name]))}); using the default {default_of(kind, name)!r}."
            )
            continue
        candidate, error = state.build_scenario(kind, {**_fields(scenario), name: value})
        if candidate is None:
            warnings.append(
                f"Link parameter '{key}' = '{text}' cannot work with the rest of the plan ({error}); "
                f"using the default {default_of(kind, name)!r}."
            )
            continue
        scenario = candidate
    return scenario


def _fields(scenario) -> dict[str, Any]:
    return {name: getattr(scenario, name) for name in type(scenario).model_fields if name != "kind"}


def link_warnings_key(kind: str) -> str:
    return f"link_warnings_{kind}"


def _store_link_warnings(kind: str, scenario, warnings: list[str]) -> None:
    if warnings:
        st.session_state[link_warnings_key(kind)] = (scenario, list(warnings))


def pending_link_warnings(kind: str, current) -> list[str]:
    """Warnings of the link this session opened, while the plan is still the one the link described."""
    stored = st.session_state.get(link_warnings_key(kind))
    if not stored:
        return []
    scenario, warnings = stored
    if current is not None and current != scenario:
        st.session_state.pop(link_warnings_key(kind), None)
        return []
    return warnings


def current_scenario(kind: str):
    """The scenario a display page (Trade-offs, Calibrate, Review) works on, and keep it in the URL.

    A fresh session opened from a link takes it from the URL; otherwise the input page's last scenario.
    """
    prefix = f"{kind}_"
    scenario = state.remembered(kind)
    params = _prefixed_params(prefix)
    if scenario is None:
        if params:
            scenario, warnings = read_link(kind, params)
            _store_link_warnings(kind, scenario, warnings)
            # Hand the values to the input page's widgets (they register later, off-screen now).
            for spec in specs_for(kind):
                if spec.bound:
                    st.session_state.setdefault(prefix + spec.name, getattr(scenario, spec.name))
        else:
            scenario = default_scenario(kind)
        state.remember(kind, scenario)
    write_url(kind, scenario, fields=None)
    return scenario


def default_scenario(kind: str):
    if kind == "training":
        # A first visit to Training starts from the model and GPU the user chose for inference (if any).
        base = state.remembered("inference")
        cls = state.scenario_class("training")
        chosen = base is not None and (base.model, base.gpu) != (
            default_of("inference", "model"),
            default_of("inference", "gpu"),
        )
        if chosen:
            candidate, _ = state.build_scenario("training", {"model": base.model, "gpu": base.gpu})
            if candidate is not None:
                return candidate
        return cls()
    return state.scenario_class(kind)()


def write_url(kind: str, scenario, fields: Sequence[str] | None) -> None:
    """Make the URL carry `fields` of the scenario (None: all of them); drop stale params of this prefix.

    Only parameters no widget is bound to are touched (Streamlit owns bound ones).
    """
    prefix = f"{kind}_"
    wanted = scenario_to_query_params(scenario, prefix)
    names = set(type(scenario).model_fields) - {"kind"} if fields is None else set(fields)
    bound = set() if fields is None else {prefix + s.name for s in specs_for(kind) if s.bound}
    for name in names:
        key = prefix + name
        if key in bound:
            continue
        if key in wanted:
            if st.query_params.get_all(key) != [wanted[key]]:
                _set_param(key, wanted[key])
        elif key in st.query_params:
            _del_param(key)
    for key in list(st.query_params):
        if key.startswith(prefix) and key not in bound and key[len(prefix) :] not in names:
            _del_param(key)


def _set_param(key: str, value: str) -> None:
    try:
        st.query_params[key] = value
    except StreamlitAPIException:  # still bound to a widget of the page we came from
        pass


def _del_param(key: str) -> None:
    try:
        del st.query_params[key]
    except (KeyError, StreamlitAPIException):
        pass


# ------------------------------------------------------------------------------------ the widgets


def _bound_widget(spec: Spec, key: str, default: Any, where) -> Any:
    """The widget of one spec, returning the value in scenario units."""
    return spec.from_widget(_widget(spec, key, spec.to_widget(default), where))


def _widget(spec: Spec, key: str, default: Any, where) -> Any:
    common = dict(key=key, help=spec.help)
    common.update(bind="query-params") if spec.bound else common.update(persist_state="session")
    w = spec.widget
    if w == "int":
        return where.number_input(
            spec.label,
            min_value=int(spec.lo),
            max_value=int(spec.hi),
            value=int(default),
            step=int(spec.step or 1),
            **common,
        )
    if w == "float":
        return where.number_input(
            spec.label,
            min_value=float(spec.lo),
            max_value=float(spec.hi),
            value=float(default),
            step=float(spec.step),
            format=spec.fmt,
            **common,
        )
    if w == "optional_float":
        return where.number_input(
            spec.label,
            min_value=float(spec.lo),
            max_value=float(spec.hi),
            value=None,
            step=float(spec.step),
            format=spec.fmt,
            placeholder="default",
            **common,
        )
    if w == "optional_int":
        return where.number_input(
            spec.label,
            min_value=int(spec.lo),
            max_value=int(spec.hi),
            value=None,
            step=int(spec.step or 1),
            placeholder="auto",
            **common,
        )
    if w == "slider_int":
        return where.slider(
            spec.label,
            min_value=int(spec.lo),
            max_value=int(spec.hi),
            value=int(default),
            step=int(spec.step or 1),
            **common,
        )
    if w == "slider_float":
        return where.slider(
            spec.label,
            min_value=float(spec.lo),
            max_value=float(spec.hi),
            value=float(default),
            step=float(spec.step),
            **common,
        )
    if w == "select":
        return where.selectbox(spec.label, list(spec.options), index=list(spec.options).index(default), **common)
    if w == "toggle":
        return where.toggle(spec.label, value=bool(default), **common)
    if w == "text":
        return where.text_input(spec.label, value=default, max_chars=spec.max_chars, **common)
    if w == "textarea":
        return where.text_area(spec.label, value=default, max_chars=spec.max_chars, height=110, **common)
    raise ValueError(f"unknown widget kind {w}")


def _value(kind: str, spec: Spec, where) -> Any:
    prefix = f"{kind}_"
    value = _bound_widget(spec, prefix + spec.name, default_of(kind, spec.name), where)
    original = st.session_state.get(f"{prefix}original_{spec.name}")
    if original is not None and spec.to_widget(value) == original[0]:
        return original[1]  # untouched: the exact value the link or the last plan had, not a rounded product
    return value


def _render_section(kind: str, section: str, values: dict[str, Any], where) -> None:
    specs = [s for s in specs_for(kind) if s.section == section]
    i = 0
    while i < len(specs):
        spec = specs[i]
        if spec.column == 0 and i + 1 < len(specs) and specs[i + 1].column == 1:
            left, right = where.columns(2)
            for target, item in ((left, spec), (right, specs[i + 1])):
                values[item.name] = _value(kind, item, target)
            i += 2
            continue
        values[spec.name] = _value(kind, spec, where)
        i += 1


@lru_cache(maxsize=1)
def _catalog_names() -> dict[str, str]:
    return {mid: model_metadata(mid).get("display_name", mid) for mid in catalog_model_ids()}


@lru_cache(maxsize=1)
def _gpu_names() -> dict[str, str]:
    return {a.id: a.name for a in list_accelerators()}


def _seed_model_picker(prefix: str, model: Any) -> None:
    ss = st.session_state
    ss[prefix + "pick_model"] = "llama-3.1-70b" if "llama-3.1-70b" in _catalog_names() else catalog_model_ids()[0]
    ss[prefix + "pick_size_b"] = 70.0
    ss[prefix + "pick_moe"] = False
    if isinstance(model, dict):
        ss[prefix + "pick_model_source"] = SOURCE_UPLOAD
        ss[prefix + "inline_model"] = model
        ss[prefix + "inline_model_name"] = "config.json from the link"
    elif isinstance(model, str) and parse_size_id(model) is not None:
        moe, params = parse_size_id(model)
        ss[prefix + "pick_model_source"] = SOURCE_SIZE
        ss[prefix + "pick_size_b"] = float(params / 1e9)
        ss[prefix + "pick_moe"] = moe
    else:
        ss[prefix + "pick_model_source"] = SOURCE_CATALOG
        if model in _catalog_names():
            ss[prefix + "pick_model"] = model


def model_picker(prefix: str, seed_model: Any, where) -> tuple[Any, str | None]:
    """(model reference for the scenario, error sentence or None)."""
    if prefix + "pick_model_source" not in st.session_state:
        _seed_model_picker(prefix, seed_model)
    source = where.radio(
        "Model",
        [SOURCE_CATALOG, SOURCE_SIZE, SOURCE_UPLOAD],
        key=prefix + "pick_model_source",
        horizontal=True,
        persist_state="session",
        help="A built-in model, a size such as 70B (architecture derived from Llama-3 / Qwen3-MoE "
        "proportions), or your own Hugging Face config.json.",
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
    upload = where.file_uploader(
        "Hugging Face config.json",
        type=["json"],
        key=prefix + "pick_config_file",
        help="The model's config.json (architecture only; no weights are read).",
    )
    if upload is not None:
        marker = (upload.file_id, upload.name)
        if st.session_state.get(prefix + "inline_model_file") != marker:
            st.session_state[prefix + "inline_model_file"] = marker
            try:
                config = load_json(upload.getvalue(), upload.name)
                if not isinstance(config, dict):
                    raise PlanningError("config.json must hold a JSON object")
                architecture_from_config(config)
            except PlanningError as exc:
                st.session_state[prefix + "inline_model_error"] = f"{upload.name}: {explain(exc)}"
            else:
                st.session_state[prefix + "inline_model_error"] = None
                st.session_state[prefix + "inline_model"] = config
                st.session_state[prefix + "inline_model_name"] = upload.name
    error = st.session_state.get(prefix + "inline_model_error")
    if error:
        where.error(error)
    config = st.session_state.get(prefix + "inline_model")
    if config is None:
        return None, "upload a config.json (or pick a catalog model)"
    try:
        arch = resolve_model(config)
    except PlanningError as exc:
        return None, explain(exc)
    where.caption(f"Using **{arch.name}** from {st.session_state.get(prefix + 'inline_model_name', 'config.json')}.")
    return config, None


# ---- GPU

_CUSTOM_FIELDS = (  # key suffix, label, unit factor, min, max, step
    ("mem_gib", "Memory (GiB)", GIB, 1.0, 1e6, 1.0),
    ("bw_tbps", "HBM bandwidth (TB/s)", 1e12, 0.01, 1000.0, 0.1),
    ("bf16_tflops", "Dense bf16 TFLOP/s", 1e12, 0.1, 1e6, 10.0),
    ("fp8_tflops", "Dense fp8 TFLOP/s (0: none)", 1e12, 0.0, 1e6, 10.0),
    ("link_gbps", "GPU-GPU link (GB/s, 0: PCIe)", 1e9, 0.0, 1e5, 50.0),
    ("usd_h", "Reference $/GPU-hour", 1.0, 0.0, 10_000.0, 0.1),
)


def _custom_values(spec: dict | None) -> dict[str, float]:
    accel = resolve_accelerator(spec if spec is not None else "h100-sxm")
    link = accel.interconnect
    return {
        "mem_gib": round(accel.memory_bytes / GIB, 3),
        "bw_tbps": accel.memory_bandwidth_bytes_per_second / 1e12,
        "bf16_tflops": (accel.peak_flops_per_second.get("bf16") or accel.peak_flops("bf16")) / 1e12,
        "fp8_tflops": (accel.peak_flops_per_second.get("fp8") or 0.0) / 1e12,
        "link_gbps": (link.bandwidth_bytes_per_second / 1e9) if link else 0.0,
        "usd_h": accel.reference_usd_per_hour,
    }


def _seed_gpu_picker(prefix: str, gpu: Any) -> None:
    ss = st.session_state
    original = gpu if isinstance(gpu, dict) else None
    ss[prefix + "pick_gpu"] = CUSTOM_GPU if original is not None else (gpu if gpu in _gpu_names() else "h100-sxm")
    ss[prefix + "inline_gpu"] = original
    try:
        values = _custom_values(original)
    except PlanningError:
        values = _custom_values(None)
    for suffix, value in values.items():
        ss[prefix + "pick_gpu_" + suffix] = float(value)


def gpu_picker(prefix: str, seed_gpu: Any, where) -> tuple[Any, str | None]:
    if prefix + "pick_gpu" not in st.session_state:
        _seed_gpu_picker(prefix, seed_gpu)
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
    original = st.session_state.get(prefix + "inline_gpu")
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
    if original is not None:
        try:
            if all(math.isclose(values[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in _custom_values(original).items()):
                return original, None  # untouched: keep the link's spec byte for byte
        except PlanningError:
            pass
    spec: dict[str, Any] = {
        "name": "Custom accelerator",
        "memory_bytes": int(round(values["mem_gib"] * GIB)),
        "memory_bandwidth_bytes_per_second": values["bw_tbps"] * 1e12,
        "peak_flops_per_second": {"bf16": values["bf16_tflops"] * 1e12},
        "reference_usd_per_hour": values["usd_h"],
    }
    if values["fp8_tflops"] > 0:
        spec["peak_flops_per_second"]["fp8"] = values["fp8_tflops"] * 1e12
    if values["link_gbps"] > 0:
        spec["interconnect"] = {"name": "custom link", "bandwidth_bytes_per_second": values["link_gbps"] * 1e9}
    try:
        resolve_accelerator(spec)
    except PlanningError as exc:
        return None, explain(exc)
    return spec, None


# ---------------------------------------------------------------------------------- the whole form


@dataclass
class FormResult:
    scenario: Any
    error: str | None
    link_warnings: list[str] = field(default_factory=list)


def scenario_form(kind: str, extra: Callable[[Any], None] | None = None) -> FormResult:
    """Draw the scenario's widgets in the sidebar and return the scenario they describe.

    Pages call this once, before anything that reads the plan.
    """
    prefix = f"{kind}_"
    specs = specs_for(kind)
    ss = st.session_state
    fix = ss.pop(f"link_fix_{kind}", None)
    if fix:
        for key, value in fix.items():
            ss[key] = value
    params = _prefixed_params(prefix)
    link_load = state.remembered(kind) is None and bool(params) and not fix
    if link_load:
        seed, warnings = read_link(kind, params)
        _store_link_warnings(kind, seed, warnings)
    else:
        seed = state.remembered(kind) or default_scenario(kind)
    for spec in specs:
        if prefix + spec.name not in ss:
            ss[prefix + spec.name] = spec.to_widget(getattr(seed, spec.name))
            if spec.scale != 1.0:
                ss[f"{prefix}original_{spec.name}"] = (ss[prefix + spec.name], getattr(seed, spec.name))

    values: dict[str, Any] = {}
    errors: list[str] = []
    side = st.sidebar
    side.markdown("#### Model")
    model, error = model_picker(prefix, seed.model, side)
    errors += [error] if error else []
    side.markdown("#### Hardware")
    gpu, error = gpu_picker(prefix, seed.gpu, side)
    errors += [error] if error else []
    custom = CUSTOM_SECTIONS.get(kind, {})
    for section, title in SECTIONS[kind]:
        target = side
        if title is not None and title.startswith("▸ "):
            target = side.expander(title[2:])
        elif title is not None:
            side.markdown(f"#### {title}")
        if section in custom:
            fields, error = custom[section](prefix, seed, target)
            values.update(fields)
            errors += [error] if error else []
        else:
            _render_section(kind, section, values, target)
    if extra is not None:
        extra(side)

    if link_load:
        mismatched = {
            prefix + s.name: s.to_widget(getattr(seed, s.name))
            for s in specs
            if not s.same(values.get(s.name), getattr(seed, s.name))
        }
        if mismatched:
            ss[f"link_fix_{kind}"] = mismatched
            state.remember(kind, seed)
            st.rerun()

    if errors:
        return FormResult(None, "; ".join(errors), pending_link_warnings(kind, None))
    scenario, error = state.build_scenario(kind, {"model": model, "gpu": gpu, **values})
    if scenario is None:
        return FormResult(None, error, pending_link_warnings(kind, None))
    state.remember(kind, scenario)
    write_url(kind, scenario, manual_fields(kind))
    return FormResult(scenario, None, pending_link_warnings(kind, scenario))
