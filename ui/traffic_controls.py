"""The Traffic section's inputs: the request stream an inference plan serves (``scenario.traffic``).

ui.controls draws this section where the page places it (the Inference page's main area, beside its results),
as one of the form's sections: the scenario it builds carries the stream, so the share link, the CSV and the
pins do too. Ranges, choices and help come from the pydantic fields of ``Traffic`` and ``Slo``.

Keys (``<page>`` = inference)
-----------------------------
* ``<page>_traffic``: the toggle; on = the scenario has a stream. Bound to the URL (``<page>_traffic=true``).
* ``<page>_traffic_<field>``, ``<page>_traffic_slo_<field>``: one widget per field of Traffic / its Slo, bound to
  the URL; the names and texts are planner.share's, so the address bar is a share link. A hidden input (the
  burstiness of a Poisson stream, the p90s of fixed lengths) is left at its default. Exception: the TPOT target
  is shown in ms, so, like ui.controls' scaled widgets, it is driven by session state and ui.controls writes its
  parameter (``<page>_traffic_slo_tpot_seconds``, in seconds).
* ``<page>_pick_traffic_rate``: the rate's log-scale slider (a picker: the exact box beside it is the bound
  widget, as for the concurrency).
* ``<page>_pick_traffic_trace``: the trace upload. A file never travels in a link; without a valid one the
  requests get fixed lengths and the section says so.
* ``<page>_pick_traffic_pool_tier``, ``_pool_capacity_gb``, ``_pool_bandwidth_gbs``: the prefix pool (pickers,
  seeded from the link's ``<page>_traffic_prefix_pool_<field>``, which ui.controls writes; empty capacity or
  bandwidth: the tier's default, ``planner.inference.workload.POOL_TIER_DEFAULTS``).
* ``<page>_memo_traffic``: one ``TrafficMemo``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from pydantic import ValidationError

from planner import PlanningError, explain
from planner.inference.scenario import InferenceScenario
from planner.inference.workload import (
    MAX_TRACE_BYTES,
    POOL_TIER_DEFAULTS,
    Slo,
    TraceRow,
    Traffic,
    parse_trace_csv,
)
from planner.share import scenario_to_query_params
from planner.units import MIB
from ui import state
from ui.specs import FieldFacts, Spec, field_facts

# The rate slider's stops: 1, 1.5, 2, 3, 5, 7 per decade from 0.1 to 10,000 requests/s; the box takes any rate.
RATE_STOPS: tuple[float, ...] = tuple(
    sorted({round(m * 10.0**e, 6) for e in range(-1, 4) for m in (1, 1.5, 2, 3, 5, 7)} | {10_000.0})
)
# The field excludes a ratio of 1 (requests of length 0); a box offers two decimals.
MAX_RANGE_RATIO = 0.99
MS_PER_SECOND = 1000

TRAFFIC_SPECS: tuple[Spec, ...] = (
    Spec("requests_per_second", "Exact (req/s)", "number", step=1.0, fmt="%g"),
    Spec("arrival", "Arrival pattern", "select"),
    Spec("burstiness", "Burstiness (gamma shape)", "number", step=0.1, fmt="%g"),
    Spec("lengths", "Prompt and output lengths", "select"),
    Spec("range_ratio", "Range (± share of the mean)", "number", step=0.05, fmt="%.2f"),
    Spec("prompt_tokens_p90", "Prompt p90 (tokens)", "number", step=256),
    Spec("output_tokens_p90", "Output p90 (tokens)", "number", step=64),
    Spec("num_requests", "Requests to simulate", "number", step=500),
    Spec("slo_percentile", "SLO percentile", "select"),
    Spec("slo_ttft_seconds", "TTFT at most (s)", "number", step=0.5, fmt="%g"),
    Spec("slo_tpot_seconds", "TPOT at most (ms)", "number", scale=1e-3, step=5.0, fmt="%g"),
    Spec("slo_e2e_latency_seconds", "End-to-end at most (s)", "number", step=5.0, fmt="%g"),
    Spec("slo_ttft_percentile", "TTFT target's percentile", "select"),
    Spec("slo_tpot_percentile", "TPOT target's percentile", "select"),
    Spec("slo_e2e_latency_percentile", "End-to-end target's percentile", "select"),
    Spec("max_concurrency", "Client concurrency cap", "number", step=8),
    Spec("max_num_seqs", "Engine batch cap per replica (max_num_seqs)", "number", step=8),
    Spec("shared_prefix_fraction", "Shared prompt prefix (share)", "slider", step=0.05),
    Spec("num_prefixes", "Distinct shared prefixes", "number", step=1),
    Spec("gpu_prefix_cache_share", "GPU prefix cache (share of KV blocks)", "number", step=0.05, fmt="%.2f"),
    Spec("chunked_prefill", "Chunked prefill", "toggle"),
    Spec("seed", "Random seed", "number", step=1),
)
SPECS = {spec.name: spec for spec in TRAFFIC_SPECS}
EXTRA_HELP = {
    "requests_per_second": "Requests per second sent to the whole deployment (every replica together).",
    "arrival": "poisson: random, independent arrivals (vllm bench serve's default); uniform: evenly spaced; "
    "gamma: gaps with the burstiness below as their shape (below 1 burstier, above 1 more regular).",
    "lengths": "fixed: every request has the sidebar's prompt and output tokens; uniform: within ± the range "
    "of them (vLLM's random dataset); lognormal: those as the mean, with the p90s below; trace: a CSV you "
    "upload (its arrivals and lengths).",
    "prompt_tokens_p90": "90% of prompts are at most this long (above the sidebar's prompt tokens, the mean).",
    "output_tokens_p90": "90% of outputs are at most this long (above the sidebar's output tokens, the mean).",
    "num_requests": "More requests give steadier tails (a p99 over 1,000 requests rests on 10 of them) and take "
    "longer to simulate.",
    "slo_percentile": "Each target is met when this percentile of the requests is at or below it.",
    "slo_ttft_seconds": "Time to first token, from sending the request (queueing included). Empty: no target.",
    "slo_tpot_seconds": "Time per output token after the first, per request. Empty: no target.",
    "slo_e2e_latency_seconds": "From sending the request to its last token. Empty: no target.",
    "slo_ttft_percentile": "Empty: the SLO percentile above. Set one to say e.g. p99 TTFT with p95 TPOT.",
    "slo_tpot_percentile": "Empty: the SLO percentile above. Set one to say e.g. p99 TTFT with p95 TPOT.",
    "slo_e2e_latency_percentile": "Empty: the SLO percentile above.",
    "seed": "The same seed gives the same request stream, so two plans compare on the same requests.",
    "max_num_seqs": "Set it (the sizing sentence says the value) and each replica keeps this engine when you add "
    "GPUs; empty: the sidebar's concurrency split over the replicas, as a static plan serves it.",
    "num_prefixes": "Each request starts with one of this many prefixes, picked at random (a system prompt per "
    "tenant, a document per conversation).",
    "gpu_prefix_cache_share": "Empty: every repeat of a prefix hits (the cache never fills). A share bounds the "
    "cache per replica, least recently used prefixes evicted first.",
}
# The prefix pool's pickers (session state; ui.controls writes their link parameters, planner.share's
# ``<page>_traffic_prefix_pool_<field>``): its tier (or none), capacity in GB and bandwidth in GB/s.
POOL_TIERS = ("none", "dram", "ssd")
POOL_TIER_WORDS = {"none": "No pool", "dram": "DRAM (RDMA, Mooncake Store)", "ssd": "SSD (NVMe)"}
GB = 1e9
PLACEHOLDERS = {
    "prompt_tokens_p90": "needed",
    "output_tokens_p90": "needed",
    "slo_ttft_seconds": "no target",
    "slo_tpot_seconds": "no target",
    "slo_e2e_latency_seconds": "no target",
    "max_concurrency": "no cap",
    "max_num_seqs": "concurrency / replicas",
    "slo_ttft_percentile": "the SLO percentile",
    "slo_tpot_percentile": "the SLO percentile",
    "slo_e2e_latency_percentile": "the SLO percentile",
    "gpu_prefix_cache_share": "unbounded",
}
TRACE_HELP = (
    "A CSV with a header row arrival_seconds,prompt_tokens,output_tokens (and optionally prefix_id), one row per "
    f"request, up to {MAX_TRACE_BYTES // int(MIB)} MiB. Its arrivals replace the rate and its rows the request count."
)
LINK_NOTE = (
    "The share link and the CSV carry every input of this section; a link cannot carry an uploaded trace (it says "
    "lengths = trace, and whoever opens it uploads the file again)."
)


def key_of(prefix: str, name: str) -> str:
    """The widget key (and URL parameter) of a Traffic field or an ``slo_`` field."""
    return f"{prefix}traffic_{name}"


def bound_params(prefix: str) -> set[str]:
    """The URL parameters Streamlit keeps for this section's bound widgets (ui.controls writes the others)."""
    return {prefix + "traffic"} | {key_of(prefix, s.name) for s in TRAFFIC_SPECS if s.bound}


def facts(name: str) -> FieldFacts:
    if name.startswith("slo_"):
        return field_facts(Slo, name.removeprefix("slo_"))
    return field_facts(Traffic, name)


def help_of(name: str) -> str | None:
    own = facts(name).help()
    extra = EXTRA_HELP.get(name)
    if own and extra:
        return f"{own}. {extra}"
    return own or extra


# ---------------------------------------------------------------------------------------- memory


@dataclass
class TrafficMemo:
    """What the section remembers between runs (session state ``<page>_memo_traffic``)."""

    written: set[str] = field(default_factory=set)  # widget keys a callback wrote for the coming run
    upload_marker: tuple | None = None  # (file id, name) of the trace already read
    trace: tuple[TraceRow, ...] | None = None  # the trace that upload held, when it was valid
    trace_error: str | None = None  # why it was not


def memo_of(prefix: str) -> TrafficMemo:
    return st.session_state.setdefault(prefix + "memo_traffic", TrafficMemo())


def read_trace(data: bytes) -> tuple[tuple[TraceRow, ...] | None, str | None]:
    """An uploaded trace's rows, or None and one sentence saying what is wrong with the file (never raises)."""
    if len(data) > MAX_TRACE_BYTES:
        return None, f"the file is larger than {MAX_TRACE_BYTES // int(MIB)} MiB; sample it first"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "the file is not UTF-8 text; save the trace as a CSV"
    try:
        return parse_trace_csv(text), None
    except PlanningError as exc:
        return None, explain(exc)


def _take_upload(memo: TrafficMemo, upload) -> None:
    """Read a new upload; no upload forgets the trace (the plan never keeps a file the page no longer shows)."""
    if upload is None:
        memo.upload_marker, memo.trace, memo.trace_error = None, None, None
        return
    marker = (upload.file_id, upload.name)
    if marker != memo.upload_marker:
        memo.upload_marker = marker
        memo.trace, memo.trace_error = read_trace(upload.getvalue())


# ------------------------------------------------------------------------------------------ seeding


def seed_widgets(prefix: str, seed) -> bool:
    """Give this section's widgets that do not exist yet the seed's stream (ui.controls' rule: a bound widget
    is seeded through the URL, so where the URL says something else the URL is rewritten and the page reruns;
    the TPOT box in ms through session state). True when the page must rerun first."""
    ss = st.session_state
    wanted = scenario_to_query_params(seed, prefix)
    rerun = False
    for key in sorted(bound_params(prefix)):
        if key in ss:
            continue
        if st.query_params.get_all(key) != ([wanted[key]] if key in wanted else []):
            rerun = state.set_url_param(key, wanted.get(key)) or rerun
    pool = seed.traffic.prefix_pool if seed.traffic is not None else None
    for key, value in (
        (prefix + "pick_traffic_pool_tier", pool.tier if pool is not None else "none"),
        (prefix + "pick_traffic_pool_capacity_gb", None if pool is None else pool.capacity_bytes),
        (prefix + "pick_traffic_pool_bandwidth_gbs", None if pool is None else pool.bandwidth_bytes_per_second),
    ):
        if key not in ss:
            ss[key] = value / GB if isinstance(value, float) else value
    tpot_key = key_of(prefix, "slo_tpot_seconds")
    if tpot_key not in ss:
        slo = seed.traffic.slo if seed.traffic is not None else None
        ss[tpot_key] = None if slo is None or slo.tpot_seconds is None else slo.tpot_seconds * MS_PER_SECOND
    return rerun


# ------------------------------------------------------------------------------------------ widgets


def _nearest_stop(rate: float) -> float:
    return min(RATE_STOPS, key=lambda stop: abs(math.log(stop) - math.log(max(rate, 1e-9))))


def _rate_moved(prefix: str) -> None:
    """The rate slider moved: its stop goes into the exact box (drawn later this run, without a default)."""
    key = key_of(prefix, "requests_per_second")
    st.session_state[key] = float(st.session_state[prefix + "pick_traffic_rate"])
    memo_of(prefix).written.add(key)


def _rate(prefix: str, where, written: set[str]) -> float:
    """A log-scale slider for moving fast and a number box for exact values, both for the stream's rate."""
    spec, f = SPECS["requests_per_second"], facts("requests_per_second")
    box_key, pick_key = key_of(prefix, "requests_per_second"), prefix + "pick_traffic_rate"
    lo, hi = f.widget_range()
    left, right = where.columns([5, 1], vertical_alignment="bottom")
    exact = right.number_input(
        spec.label,
        min_value=lo,
        max_value=hi,
        value=None if box_key in written else float(f.default),
        step=spec.step,
        format=spec.fmt,
        key=box_key,
        bind="query-params",
        help=f"{help_of('requests_per_second')} Any rate up to {hi:,.0f} requests/s.",
    )
    rate = float(exact) if exact is not None else float(f.default)
    st.session_state[pick_key] = _nearest_stop(rate)
    left.select_slider(
        "Request rate (req/s, whole deployment)",
        options=RATE_STOPS,
        key=pick_key,
        on_change=_rate_moved,
        args=(prefix,),
        format_func=lambda v: f"{v:,g}",
        help=f"Log scale, {RATE_STOPS[0]:g} to {RATE_STOPS[-1]:,g} requests/s; the box beside it takes exact rates.",
    )
    return rate


def _input(prefix: str, name: str, where, written: set[str]) -> Any:
    """One bound widget of the section (the TPOT box in ms excepted); its value in the field's units."""
    spec, f = SPECS[name], facts(name)
    key = key_of(prefix, name)
    common: dict[str, Any] = {"key": key, "help": help_of(name)}
    if not spec.bound:
        # The TPOT target in ms: session state holds it (seed_widgets), ui.controls writes its URL parameter.
        lo, hi = f.widget_range(spec.scale)
        shown = where.number_input(
            spec.label,
            min_value=lo,
            max_value=hi,
            value=None,
            step=spec.step,
            format=spec.fmt,
            placeholder=PLACEHOLDERS.get(name),
            persist_state="session",
            **common,
        )
        return None if shown is None else shown / MS_PER_SECOND
    common["bind"] = "query-params"
    from_state = key in written
    if spec.widget == "select":
        options = list(f.options())
        if f.optional:  # empty: the field's own default rule (its placeholder says which)
            return where.selectbox(spec.label, options, index=None, placeholder=PLACEHOLDERS.get(name), **common)
        return where.selectbox(spec.label, options, index=None if from_state else options.index(f.default), **common)
    if spec.widget == "toggle":
        return where.toggle(spec.label, value=bool(f.default), **common)
    lo, hi = f.widget_range()
    if name == "range_ratio":
        hi = min(hi, MAX_RANGE_RATIO)
    if spec.widget == "slider":
        return where.slider(
            spec.label, min_value=float(lo), max_value=float(hi), value=float(f.default), step=spec.step, **common
        )
    numeric = int if f.kind is int else float
    value = where.number_input(
        spec.label,
        min_value=None if lo is None else numeric(lo),
        max_value=None if hi is None else numeric(hi),
        value=None if f.optional or from_state else numeric(f.default),
        step=numeric(spec.step or 1),
        format=spec.fmt,
        placeholder=PLACEHOLDERS.get(name),
        **common,
    )
    if value is None and not f.optional:  # a box drawn without a default was emptied
        return f.default
    return value


def _lengths_inputs(prefix: str, where, written: set[str], memo: TrafficMemo, values: dict[str, Any]) -> list[str]:
    """The length distribution's own inputs; returns notes about inputs the stream cannot use yet."""
    notes = []
    lengths = values["lengths"]
    if lengths == "uniform":
        values["range_ratio"] = _input(prefix, "range_ratio", where, written)
    elif lengths == "lognormal":
        left, right = where.columns(2)
        values["prompt_tokens_p90"] = _input(prefix, "prompt_tokens_p90", left, written)
        values["output_tokens_p90"] = _input(prefix, "output_tokens_p90", right, written)
        if values["prompt_tokens_p90"] is None or values["output_tokens_p90"] is None:
            values["lengths"] = "fixed"
            notes.append("Lognormal lengths need both p90s: until they are set the requests have fixed lengths.")
    elif lengths == "trace":
        upload = where.file_uploader(
            "Trace (CSV)",
            type=["csv"],
            key=prefix + "pick_traffic_trace",
            max_upload_size=MAX_TRACE_BYTES // int(MIB),
            help=TRACE_HELP,
        )
        _take_upload(memo, upload)
        if memo.trace_error:
            where.error(f"This trace cannot be used: {memo.trace_error}.", icon=":material/block:")
        if memo.trace is None:
            values["lengths"] = "fixed"
            notes.append(
                "No valid trace: the requests have fixed lengths and arrive at the rate set here until a trace is "
                "uploaded. A share link never carries a trace."
            )
        else:
            values["trace"] = memo.trace
            span = memo.trace[-1].arrival_seconds - memo.trace[0].arrival_seconds if len(memo.trace) > 1 else 0.0
            where.caption(
                f"Trace: {len(memo.trace):,} requests over {span:,.3g} s. It sets the arrivals and lengths; the "
                "load curve and the SLO sizing below use the sidebar's fixed lengths."
            )
    return notes


def traffic_section(prefix: str, seed, where) -> tuple[dict[str, Any], str | None]:
    """The toggle and, when on, the stream's inputs in three columns: arrivals, lengths, SLO."""
    memo = memo_of(prefix)
    written, memo.written = set(memo.written), set()
    where.markdown("#### Serve traffic")
    on = where.toggle(
        "Simulate a request stream on this deployment",
        value=False,
        key=prefix + "traffic",
        bind="query-params",
        help=_description(InferenceScenario, "traffic"),
    )
    if not on:
        where.caption(
            "The plan above is one idle replica at a fixed concurrency. Switch this on to send it a stream of "
            "requests (a rate, varying lengths, SLO targets): queueing, batching and the KV cache are simulated step "
            "by step, and the section shows latency percentiles, the load–latency curve and the GPUs an SLO needs."
        )
        return {"traffic": None}, None
    values: dict[str, Any] = {}
    rate_row = where.container()  # the rate, the section's main control, across the page (unless a trace sets it)
    arrivals, lengths, slo = where.columns(3, gap="large")
    arrivals.markdown("**Arrivals**")
    lengths.markdown("**Lengths**")
    slo.markdown("**SLO targets**")
    values["lengths"] = _input(prefix, "lengths", lengths, written)
    notes = _lengths_inputs(prefix, lengths, written, memo, values)
    if values.get("trace"):
        arrivals.caption("The trace sets when each request arrives.")
    else:
        values["requests_per_second"] = _rate(prefix, rate_row, written)
        values["arrival"] = _input(prefix, "arrival", arrivals, written)
        if values["arrival"] == "gamma":
            values["burstiness"] = _input(prefix, "burstiness", arrivals, written)
        values["num_requests"] = _input(prefix, "num_requests", arrivals, written)
    slo_fields = ("percentile", "ttft_seconds", "tpot_seconds", "e2e_latency_seconds")  # the percentile reads first
    targets = {name: _input(prefix, f"slo_{name}", slo, written) for name in slo_fields}
    with where.expander("More stream settings"):
        left, right = st.columns(2)
        values["max_concurrency"] = _input(prefix, "max_concurrency", left, written)
        values["max_num_seqs"] = _input(prefix, "max_num_seqs", right, written)
        values["seed"] = _input(prefix, "seed", right, written)
        values["shared_prefix_fraction"] = _input(prefix, "shared_prefix_fraction", left, written)
        values["chunked_prefill"] = _input(prefix, "chunked_prefill", right, written)
        values["num_prefixes"] = _input(prefix, "num_prefixes", left, written)
        values["gpu_prefix_cache_share"] = _input(prefix, "gpu_prefix_cache_share", right, written)
        for i, metric in enumerate(("ttft", "tpot", "e2e_latency")):  # each target's own percentile, if not shared
            targets[f"{metric}_percentile"] = _input(prefix, f"slo_{metric}_percentile", (left, right)[i % 2], written)
        values["prefix_pool"] = _pool_inputs(prefix)
    for note in notes:
        where.info(note, icon=":material/info:")
    where.caption(LINK_NOTE)
    if Slo(**targets) != Slo():  # an SLO with nothing set is no SLO (the link then says nothing about it)
        values["slo"] = targets
    try:
        traffic = Traffic(**values)
    except (ValidationError, PlanningError) as exc:
        return {"traffic": None}, f"the request stream is not valid ({explain(exc)})"
    return {"traffic": traffic}, None


def _pool_inputs(prefix: str) -> dict[str, Any] | None:
    """The Mooncake-style prefix pool: a tier (or none), and its capacity and bandwidth (empty: the tier's)."""
    st.markdown("**Prefix pool** (KV of shared prefixes kept outside GPU memory)")
    tier_col, capacity_col, bandwidth_col = st.columns(3)
    tier = tier_col.selectbox(
        "Pool tier",
        POOL_TIERS,
        format_func=POOL_TIER_WORDS.__getitem__,
        key=prefix + "pick_traffic_pool_tier",
        help="A prefix evicted from GPU memory is read back from the pool (its KV bytes / the pool's bandwidth, "
        "before the request's prefill) instead of being prefilled again. Without a GPU share above, the GPU "
        "cache is bounded by all the KV blocks.",
    )
    if tier == "none":
        return None
    capacity_default, bandwidth_default = POOL_TIER_DEFAULTS[tier]
    capacity = capacity_col.number_input(
        "Pool capacity (GB per replica)",
        min_value=0.001,
        max_value=1e6,
        value=None,
        step=100.0,
        format="%g",
        placeholder=f"{capacity_default / GB:,.0f} (default)",
        key=prefix + "pick_traffic_pool_capacity_gb",
        help=f"Empty: {capacity_default / GB:,.0f} GB ({tier.upper()} default). 1 GB = 10^9 bytes.",
    )
    bandwidth = bandwidth_col.number_input(
        "Pool bandwidth (GB/s)",
        min_value=0.001,
        max_value=1e4,
        value=None,
        step=5.0,
        format="%g",
        placeholder=f"{bandwidth_default / GB:,.1f} (default)",
        key=prefix + "pick_traffic_pool_bandwidth_gbs",
        help=f"Empty: {bandwidth_default / GB:,.1f} GB/s — "
        + (
            "Mooncake's Transfer Engine on 4 x 200 Gbps RoCE (kvcache-ai/Mooncake)."
            if tier == "dram"
            else "one PCIe 4.0 x4 NVMe drive's sequential read."
        ),
    )
    pool: dict[str, Any] = {"tier": tier}
    if capacity is not None:
        pool["capacity_bytes"] = capacity * GB
    if bandwidth is not None:
        pool["bandwidth_bytes_per_second"] = bandwidth * GB
    return pool


def _description(cls: type, name: str) -> str | None:
    description = cls.model_fields[name].description
    return description[0].upper() + description[1:] if description else None
