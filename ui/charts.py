"""Altair chart builders. No Streamlit here.

Each chart is an Altair chart over *named* datasets; the chart is built and validated once per shape
(``functools.lru_cache``) and every rerun only attaches fresh data frames to a copy of the compiled
Vega-Lite spec. Building and validating an Altair chart costs ~100 ms; attaching data costs well under
1 ms, which keeps a slider move fast. The public functions return a Vega-Lite dict for
``st.vega_lite_chart`` (``chart_spec(...)`` gives the Altair object, for tests and other renderers).

Conventions: memory in GiB (2^30 bytes), FLOP/s in TFLOP/s (1e12), time in ms; every mark has a
tooltip; colours come from ``ui.palette`` (Okabe–Ito, colour-blind safe); axis titles name the unit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from functools import lru_cache

import altair as alt
import numpy as np
import pandas as pd

from planner import units
from ui import palette
from ui.text import component_label

GIB = units.GIB
TERA = 1e12
# Speculative decoding's draft: light versions of the target's weights (blue) and KV cache (orange) colours, so
# the draft reads as "more of the same" next to them. The verify step is a third roofline phase.
DRAFT_COLOURS = {"draft_weights": palette.SKY, "draft_kv_cache": palette.YELLOW}
PHASE_COLOURS = {**palette.PHASE_COLOURS, "verify": palette.GREEN}

# Streamlit 1.67 draws its own chart toolbar (fullscreen, "Download as PNG") and switches vega-embed's
# action menu off whatever the spec says; the request stays in the spec for other renderers (and SVG).
_EMBED = {"embedOptions": {"actions": {"export": True, "source": False, "compiled": False, "editor": False}}}


def _finish(chart, height: int | None = None):
    props = {"usermeta": _EMBED}
    if height is not None:
        props["height"] = height
    return (
        chart.properties(**props)
        .configure_axis(labelFontSize=12, titleFontSize=12, labelLimit=220, titleFontWeight="normal")
        .configure_legend(labelFontSize=12, titleFontSize=12, labelLimit=260)
        .configure_view(strokeWidth=0)
    )


def _spec(chart, datasets: dict[str, pd.DataFrame], height: int | None = None) -> dict:
    spec = copy.deepcopy(chart)
    spec["datasets"] = {name: frame for name, frame in datasets.items()}
    if height is not None:
        spec["height"] = height
    return spec


def _records(name: str) -> alt.NamedData:
    return alt.NamedData(name=name)


# ------------------------------------------------------------------------------------------ memory


def memory_frame(components: dict[str, float], plan_label: str = "per GPU", rank: int = 0) -> pd.DataFrame:
    total = sum(components.values()) or 1.0
    rows = []
    for index, (name, value) in enumerate(components.items()):
        rows.append(
            {
                "plan": plan_label,
                "rank": rank,
                "component": component_label(name),
                "order": index,
                "gib": value / GIB,
                "share": value / total,
                "size": units.gib(value),
            }
        )
    return pd.DataFrame(rows)


def _component_colour(key: str, index: int) -> str:
    return DRAFT_COLOURS.get(key.removesuffix("_bytes"), palette.component_colour(key, index))


def _component_scale(keys: Sequence[str]) -> alt.Scale:
    return alt.Scale(
        domain=[component_label(k) for k in keys], range=[_component_colour(k, i) for i, k in enumerate(keys)]
    )


@lru_cache(maxsize=32)
def _memory_bar_chart(keys: tuple[str, ...]) -> dict:
    bars = (
        alt.Chart(_records("memory"))
        .mark_bar(height=30)
        .encode(
            x=alt.X(
                "sum(gib):Q",
                title="GiB per GPU (2^30 bytes)",
                stack="zero",
                scale=alt.Scale(zero=True),
                axis=alt.Axis(tickCount=8),
            ),
            y=alt.Y("plan:N", title=None, axis=None),
            color=alt.Color(
                "component:N",
                scale=_component_scale(keys),
                title=None,
                legend=alt.Legend(orient="top", direction="horizontal", columns=3, symbolType="square", offset=6),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("component:N", title="Component"),
                alt.Tooltip("size:N", title="Size"),
                alt.Tooltip("share:Q", title="Share of total", format=".1%"),
            ],
        )
    )
    limits = alt.Chart(_records("limits"))
    tooltip = [alt.Tooltip("what:N", title="Limit")]
    budget = limits.transform_filter("datum.dash == 'budget'")
    capacity = limits.transform_filter("datum.dash == 'capacity'")
    budget_rule = budget.mark_rule(strokeWidth=2, strokeDash=[5, 3], color=palette.BLACK).encode(
        x="gib:Q", tooltip=tooltip
    )
    capacity_rule = capacity.mark_rule(strokeWidth=2, color=palette.BLACK).encode(x="gib:Q", tooltip=tooltip)
    # The limits are named in the caption above the chart and in their tooltips, not as text marks: two
    # labels a few GiB apart would collide on a narrow screen.
    return _finish(alt.layer(bars, budget_rule, capacity_rule), height=170).to_dict()


def memory_bar(
    components: dict[str, float], budget_bytes: float, capacity_bytes: float, budget_label: str = "engine budget"
) -> dict:
    """One GPU's memory as a stacked bar, with the budget (dashed) and physical capacity (solid) as rules."""
    keys = tuple(k for k, v in components.items() if v > 0)
    frame = memory_frame({k: components[k] for k in keys})
    limits = [{"what": f"capacity {units.gib(capacity_bytes)}", "gib": capacity_bytes / GIB, "dash": "capacity"}]
    if not math.isclose(budget_bytes, capacity_bytes, rel_tol=1e-9):
        limits.append(
            {"what": f"{budget_label} {units.gib(budget_bytes)}", "gib": budget_bytes / GIB, "dash": "budget"}
        )
    limits = pd.DataFrame(limits)
    return _spec(_memory_bar_chart(keys), {"memory": frame, "limits": limits})


@lru_cache(maxsize=32)
def _memory_compare_chart(keys: tuple[str, ...]) -> dict:
    y = alt.Y(
        "plan:N", title=None, sort=alt.EncodingSortField("rank", order="ascending"), axis=alt.Axis(labelLimit=220)
    )
    bars = (
        alt.Chart(_records("memory"))
        .mark_bar()
        .encode(
            x=alt.X("sum(gib):Q", title="GiB per GPU", stack="zero"),
            y=y,
            color=alt.Color(
                "component:N",
                scale=_component_scale(keys),
                title=None,
                legend=alt.Legend(orient="bottom", direction="horizontal", columns=3),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("plan:N", title="Plan"),
                alt.Tooltip("component:N", title="Component"),
                alt.Tooltip("size:N", title="Size"),
                alt.Tooltip("share:Q", title="Share", format=".1%"),
            ],
        )
    )
    ticks = (
        alt.Chart(_records("budgets"))
        .mark_tick(color=palette.BLACK, thickness=3, size=26)
        .encode(
            x="gib:Q",
            y=alt.Y("plan:N", sort=alt.EncodingSortField("rank", order="ascending")),
            tooltip=[alt.Tooltip("plan:N", title="Plan"), alt.Tooltip("budget:N", title="Memory budget")],
        )
    )
    return _finish(alt.layer(bars, ticks), height=200).to_dict()


def memory_compare(plans: Sequence[tuple[str, dict[str, float], float]]) -> dict:
    """Per-GPU memory of several plans side by side: (plan label, components, budget bytes)."""
    keys: list[str] = []
    for _, components, _ in plans:
        keys += [k for k, v in components.items() if v > 0 and k not in keys]
    frame = pd.concat(
        [
            memory_frame({k: v for k, v in components.items() if v > 0}, label, rank)
            for rank, (label, components, _) in enumerate(plans)
        ],
        ignore_index=True,
    )
    budgets = pd.DataFrame(
        [
            {"plan": label, "rank": rank, "gib": budget / GIB, "budget": units.gib(budget)}
            for rank, (label, _, budget) in enumerate(plans)
        ]
    )
    return _spec(
        _memory_compare_chart(tuple(keys)),
        {"memory": frame, "budgets": budgets},
        height=max(130, 44 * len(plans) + 130),
    )


# ---------------------------------------------------------------------------------------- roofline


@lru_cache(maxsize=1)
def _roofline_chart() -> dict:
    x = alt.X("intensity:Q", title="Arithmetic intensity (FLOP per byte, log)", scale=alt.Scale(type="log", nice=False))
    y = alt.Y("tflops:Q", title="TFLOP/s per GPU (1e12, log)", scale=alt.Scale(type="log", nice=False))
    roof_line = (
        alt.Chart(_records("roof"))
        .mark_line(color=palette.BLACK, strokeWidth=2)
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("where:N", title="Roof"),
                alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3~g"),
                alt.Tooltip("tflops:Q", title="Attainable TFLOP/s", format=",.4~g"),
            ],
        )
    )
    ridge = alt.Chart(_records("ridge"))
    ridge_mark = ridge.mark_point(shape="diamond", size=80, filled=True, color=palette.BLACK).encode(
        x=x, y=y, tooltip=[alt.Tooltip("label:N", title="Ridge point")]
    )
    ridge_text = ridge.mark_text(dy=-12, fontSize=11).encode(x=x, y=y, text="label:N")
    colour = alt.Color(
        "label:N",
        title=None,
        sort=alt.EncodingSortField("order"),
        scale=alt.Scale(range=list(PHASE_COLOURS.values())),
        legend=alt.Legend(orient="bottom", direction="horizontal", columns=2, symbolSize=90, labelLimit=300),
    )
    tooltip = [
        alt.Tooltip("phase:N", title="Phase"),
        alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3~g"),
        alt.Tooltip("tflops:Q", title="Achieved TFLOP/s", format=",.4~g"),
        alt.Tooltip("roof:Q", title="Roof at this intensity", format=",.4~g"),
        alt.Tooltip("of_roof:Q", title="Share of roof", format=".0%"),
        alt.Tooltip("binding:N", title="Binding resource"),
        alt.Tooltip("step:N", title="Step time"),
    ]
    points = alt.Chart(_records("phases"))
    dots = points.mark_point(size=160, filled=True, opacity=1).encode(x=x, y=y, color=colour, tooltip=tooltip)
    # Phases are named in a legend (with their share of the roof), not next to the points: a label beside
    # a point can run over the roof line or off the chart.
    return _finish(alt.layer(roof_line, ridge_mark, ridge_text, dots), height=360).to_dict()


def roof_frame(roof) -> pd.DataFrame:
    """The engine's roof (planner.search.roofline_points.Roof) in TFLOP/s, each sample named by its side of the ridge."""
    frame = pd.DataFrame(
        {"intensity": roof.intensities_flops_per_byte, "tflops": np.asarray(roof.attainable_flops_per_second) / TERA}
    )
    frame["where"] = np.where(frame["intensity"] < roof.ridge_flops_per_byte, "memory-bandwidth roof", "compute roof")
    return frame


def roofline(line) -> dict:
    """The GPU's roof (min(peak, bandwidth x intensity), log-log) with each phase at its achieved rate.

    `line`: the engine's planner.search.roofline_points.PlanRoofline (one step per phase on one GPU).
    """
    points = [
        {
            "phase": p.phase,
            "intensity": p.arithmetic_intensity_flops_per_byte,
            "tflops": p.achieved_flops_per_second / TERA,
            "roof": p.roof_flops_per_second / TERA,
            "of_roof": p.fraction_of_roof,
            "binding": str(p.binding).replace("_", " "),
            "step": units.seconds(p.seconds),
            "label": f"{p.phase}: {p.fraction_of_roof:.0%} of the roof",
            "order": list(PHASE_COLOURS).index(p.phase) if p.phase in PHASE_COLOURS else 9,
        }
        for p in line.phases
    ]
    ridge = line.roof.ridge_flops_per_byte
    ridge_frame = pd.DataFrame(
        [{"intensity": ridge, "tflops": line.roof.peak_flops_per_second / TERA, "label": f"ridge {ridge:,.0f} FLOP/B"}]
    )
    return _spec(
        _roofline_chart(), {"roof": roof_frame(line.roof), "ridge": ridge_frame, "phases": pd.DataFrame(points)}
    )


# ----------------------------------------------------------------------------------------- sweeps

_SWEEP_TOOLTIP = [
    alt.Tooltip("concurrency:Q", title="Concurrency", format=","),
    alt.Tooltip("verdict:N", title="Memory"),
    alt.Tooltip("memory:N", title="Memory per GPU"),
    alt.Tooltip("headroom:N", title="Headroom"),
    alt.Tooltip("tokens_per_second:Q", title="Output tokens/s", format=",.0f"),
    alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.1f"),
    alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.0f"),
]


@lru_cache(maxsize=1)
def _heatmap_chart() -> dict:
    x = alt.X(
        "conc_label:O",
        title="Concurrency (sequences in flight)",
        sort=alt.EncodingSortField("concurrency", order="ascending"),
        axis=alt.Axis(labelAngle=0, labelOverlap="greedy"),
    )
    y = alt.Y(
        "ctx_label:O",
        title="Context per sequence (prompt + output tokens)",
        sort=alt.EncodingSortField("context", order="descending"),
    )
    tooltip = [_SWEEP_TOOLTIP[0], alt.Tooltip("context:Q", title="Context tokens", format=","), *_SWEEP_TOOLTIP[1:]]
    cells = alt.Chart(_records("grid"))
    fits = (
        cells.transform_filter("datum.fits")
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            x=x,
            y=y,
            tooltip=tooltip,
            color=alt.Color(
                "tokens_per_second:Q",
                title="Output tokens/s",
                scale=alt.Scale(scheme="viridis", type="log"),
                legend=alt.Legend(orient="right", format=".2~s", gradientLength=160),
            ),
        )
    )
    misses = (
        cells.transform_filter("!datum.fits")
        .mark_rect(color=palette.LIGHT_GREY, stroke="white", strokeWidth=1)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    crosses = (
        cells.transform_filter("!datum.fits")
        .mark_text(text="✕", color="#5F5F5F", fontSize=12)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    marker = (
        cells.transform_filter("datum.is_current")
        .mark_rect(fill=None, stroke=palette.VERMILLION, strokeWidth=3)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    return _finish(alt.layer(fits, misses, crosses, marker), height=300).to_dict()


def context_label(tokens: int) -> str:
    """Context lengths as people say them: 1024 -> '1K', 131072 -> '128K', 2560 -> '2,560'."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def heatmap(frame: pd.DataFrame, current: tuple[int, int]) -> dict:
    """Concurrency x context: colour = output tokens/s where the plan fits, grey ✕ where it does not.

    `frame` columns: concurrency, context, fits, tokens_per_second, tpot_ms, ttft_ms, memory, headroom.
    """
    data = frame.copy()
    data["verdict"] = np.where(data["fits"], "fits", "does not fit")
    data["is_current"] = [(c, x) == tuple(current) for c, x in zip(data["concurrency"], data["context"])]
    data["conc_label"] = data["concurrency"].map(lambda v: f"{v:,}")
    data["ctx_label"] = data["context"].map(context_label)
    rows = data["context"].nunique()
    return _spec(_heatmap_chart(), {"grid": data}, height=max(220, 30 * rows + 100))


@lru_cache(maxsize=1)
def _latency_chart() -> dict:
    x = alt.X("tokens_per_second:Q", title="Output tokens/s, whole deployment", axis=alt.Axis(format="~s"))
    y = alt.Y("tpot_ms:Q", title="Time per output token (ms)")
    tooltip = [*_SWEEP_TOOLTIP, alt.Tooltip("e2e_s:Q", title="End-to-end latency (s)", format=",.2f")]
    points = alt.Chart(_records("curve"))
    line = points.mark_line(color=palette.GREY, strokeWidth=2).encode(x=x, y=y, order="concurrency:Q")
    verdicts = ["fits in memory", "does not fit"]
    dots = points.mark_point(size=80, filled=True).encode(
        x=x,
        y=y,
        tooltip=tooltip,
        color=alt.Color(
            "verdict:N",
            title=None,
            scale=alt.Scale(domain=verdicts, range=[palette.BLUE, palette.VERMILLION]),
            legend=alt.Legend(orient="top-left", fillColor="white", padding=4),
        ),
        shape=alt.Shape("verdict:N", scale=alt.Scale(domain=verdicts, range=["circle", "cross"]), legend=None),
    )
    now = points.transform_filter("datum.is_current")
    ring = now.mark_point(size=320, strokeWidth=2.5, color=palette.BLACK).encode(x=x, y=y, tooltip=tooltip)
    text = now.mark_text(align="right", dx=-14, dy=-12, fontSize=12, fontWeight="bold").encode(x=x, y=y, text="label:N")
    return _finish(alt.layer(line, dots, ring, text), height=320).to_dict()


def latency_curve(frame: pd.DataFrame, current_concurrency: int) -> dict:
    """TPOT against total output tokens/s as concurrency grows; points that do not fit are marked.

    `frame` columns: concurrency, tokens_per_second, tpot_ms, ttft_ms, e2e_s, fits, memory, headroom.
    """
    data = frame.sort_values("concurrency").copy()
    data["verdict"] = np.where(data["fits"], "fits in memory", "does not fit")
    data["is_current"] = data["concurrency"] == current_concurrency
    data["label"] = np.where(data["is_current"], f"this plan (concurrency {current_concurrency:,})", "")
    return _spec(_latency_chart(), {"curve": data})


# ----------------------------------------------------------------------------------------- compare


@lru_cache(maxsize=64)
def _metric_chart(title: str, axis_format: str) -> dict:
    y = alt.Y(
        "plan:N", sort=alt.EncodingSortField("rank", order="ascending"), title=None, axis=alt.Axis(labelLimit=130)
    )
    x = alt.X(
        "value:Q", title=title, axis=alt.Axis(format=axis_format, tickCount=4), scale=alt.Scale(zero=True, nice=True)
    )
    colour = alt.Color(
        "plan:N",
        sort=alt.EncodingSortField("rank", order="ascending"),
        scale=alt.Scale(range=palette.CATEGORICAL),
        legend=None,
    )
    bars = (
        alt.Chart(_records("values"))
        .mark_bar()
        .encode(
            x=x, y=y, color=colour, tooltip=[alt.Tooltip("plan:N", title="Plan"), alt.Tooltip("text:N", title=title)]
        )
    )
    return _finish(bars, height=120).to_dict()


def metric_bars(
    plans: Sequence[str], values: Sequence[float], texts: Sequence[str], title: str, axis_format: str = "~s"
) -> dict:
    """One metric across plans, one bar each; colour = plan, in pin order on every compare chart."""
    frame = pd.DataFrame(
        {
            "plan": list(plans),
            "rank": range(len(plans)),
            "value": [v if v is not None and math.isfinite(v) else None for v in values],
            "text": list(texts),
        }
    )
    return _spec(_metric_chart(title, axis_format), {"values": frame}, height=max(130, 34 * len(plans) + 80))


@lru_cache(maxsize=32)
def _stacked_time_chart(keys: tuple[str, ...], title: str) -> dict:
    bars = (
        alt.Chart(_records("parts"))
        .mark_bar(height=38)
        .encode(
            x=alt.X("sum(seconds):Q", title=title, stack="zero"),
            y=alt.Y("plan:N", title=None, axis=None),
            color=alt.Color(
                "component:N",
                scale=_component_scale(keys),
                title=None,
                legend=alt.Legend(orient="bottom", direction="horizontal", columns=3, symbolType="square"),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("component:N", title="Component"),
                alt.Tooltip("text:N", title="Time"),
                alt.Tooltip("share:Q", title="Share of the step", format=".1%"),
            ],
        )
    )
    return _finish(bars, height=190).to_dict()


def stacked_time(parts: dict[str, float], title: str = "Seconds per optimizer step") -> dict:
    """A breakdown of one step's time (training): `parts` maps component names to seconds."""
    keys = tuple(k for k, v in parts.items() if v > 0)
    total = sum(parts[k] for k in keys) or 1.0
    frame = pd.DataFrame(
        [
            {
                "plan": "step",
                "component": component_label(k),
                "order": i,
                "seconds": parts[k],
                "share": parts[k] / total,
                "text": units.seconds(parts[k]),
            }
            for i, k in enumerate(keys)
        ]
    )
    return _spec(_stacked_time_chart(keys, title), {"parts": frame})


def to_altair(spec: dict) -> alt.TopLevelMixin:
    """The Altair chart of a spec (data included), e.g. to save it: ``to_altair(spec).save("chart.svg")``."""
    data = {
        name: (frame.to_dict("records") if isinstance(frame, pd.DataFrame) else frame)
        for name, frame in spec.get("datasets", {}).items()
    }
    return alt.Chart.from_dict({**spec, "datasets": data}, validate=False)
