"""Altair chart builders. Each takes plan data (or a sweep frame) and returns a chart; no Streamlit here.

Conventions: memory in GiB (2^30 bytes), FLOP/s in TFLOP/s (1e12), time in ms; every mark has a
tooltip; colours come from ``ui.palette`` (Okabe–Ito, colour-blind safe); axis titles name the unit.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import altair as alt
import numpy as np
import pandas as pd

from planner import units
from ui import palette
from ui.text import component_label

GIB = units.GIB
TERA = 1e12

# Streamlit 1.67 draws its own chart toolbar (fullscreen, "Download as PNG"); vega-embed's action menu
# is switched off by Streamlit whatever the spec says, so we only ask for it for other renderers.
_EMBED = {"embedOptions": {"actions": {"export": True, "source": False, "compiled": False, "editor": False}}}


def _finish(chart: alt.TopLevelMixin, height: int | None = None) -> alt.TopLevelMixin:
    props = {"usermeta": _EMBED}
    if height is not None:
        props["height"] = height
    return chart.properties(**props).configure_axis(labelFontSize=12, titleFontSize=12, labelLimit=220) \
        .configure_legend(labelFontSize=12, titleFontSize=12, labelLimit=260).configure_view(strokeWidth=0)


# ------------------------------------------------------------------------------------------ memory


def memory_frame(components: dict[str, float], plan_label: str = "per GPU") -> pd.DataFrame:
    total = sum(components.values()) or 1.0
    rows = []
    for index, (name, value) in enumerate(components.items()):
        rows.append({
            "plan": plan_label,
            "component": component_label(name),
            "key": name,
            "order": index,
            "gib": value / GIB,
            "share": value / total,
            "size": units.gib(value),
            "colour": palette.component_colour(name, index),
        })
    return pd.DataFrame(rows)


def _component_scale(frame: pd.DataFrame) -> alt.Scale:
    seen = frame.drop_duplicates("component").sort_values("order")
    return alt.Scale(domain=list(seen["component"]), range=list(seen["colour"]))


def memory_bar(components: dict[str, float], budget_bytes: float, capacity_bytes: float,
               budget_label: str = "engine budget") -> alt.TopLevelMixin:
    """One GPU's memory as a stacked bar, with the budget and the physical capacity as rules."""
    frame = memory_frame(components)
    frame = frame[frame["gib"] > 0]
    scale = _component_scale(frame)
    limit = max(capacity_bytes, budget_bytes, sum(components.values())) / GIB * 1.04
    bars = alt.Chart(frame).mark_bar(height=38).encode(
        x=alt.X("sum(gib):Q", title="GiB per GPU (2^30 bytes)", scale=alt.Scale(domain=[0, limit], nice=False),
                stack="zero"),
        y=alt.Y("plan:N", title=None, axis=None),
        color=alt.Color("component:N", scale=scale, title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal", columns=3, symbolType="square")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("component:N", title="Component"), alt.Tooltip("size:N", title="Size"),
                 alt.Tooltip("share:Q", title="Share of total", format=".1%")],
    )
    lines = pd.DataFrame([
        {"what": f"{budget_label} {units.gib(budget_bytes)}", "gib": budget_bytes / GIB, "dash": "budget"},
        {"what": f"capacity {units.gib(capacity_bytes)}", "gib": capacity_bytes / GIB, "dash": "capacity"},
    ])
    rules = alt.Chart(lines).mark_rule(strokeWidth=2, color=palette.BLACK).encode(
        x="gib:Q",
        strokeDash=alt.StrokeDash("dash:N", scale=alt.Scale(domain=["budget", "capacity"], range=[[5, 3], [1, 0]]),
                                  legend=None),
        tooltip=[alt.Tooltip("what:N", title="Limit")],
    )
    # Budget label above the bar on the left of its rule, capacity label below on the right, so they never collide.
    budget_text = alt.Chart(lines.iloc[[0]]).mark_text(align="right", dx=-4, dy=-30, fontSize=11).encode(
        x="gib:Q", text="what:N")
    capacity_text = alt.Chart(lines.iloc[[1]]).mark_text(align="right", dx=-4, dy=30, fontSize=11).encode(
        x="gib:Q", text="what:N")
    return _finish(alt.layer(bars, rules, budget_text, capacity_text), height=110)


def memory_compare(frames: Sequence[tuple[str, dict[str, float], float]]) -> alt.TopLevelMixin:
    """Per-GPU memory of several plans side by side: (plan label, components, budget bytes)."""
    frame = pd.concat([memory_frame(components, label) for label, components, _ in frames], ignore_index=True)
    frame = frame[frame["gib"] > 0]
    order = [label for label, _, _ in frames]
    budgets = pd.DataFrame([{"plan": label, "gib": budget / GIB, "budget": units.gib(budget)}
                            for label, _, budget in frames])
    y = alt.Y("plan:N", title=None, sort=order, axis=alt.Axis(labelLimit=260))
    bars = alt.Chart(frame).mark_bar().encode(
        x=alt.X("sum(gib):Q", title="GiB per GPU", stack="zero"),
        y=y,
        color=alt.Color("component:N", scale=_component_scale(frame), title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal", columns=3)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("plan:N", title="Plan"), alt.Tooltip("component:N", title="Component"),
                 alt.Tooltip("size:N", title="Size"), alt.Tooltip("share:Q", title="Share", format=".1%")],
    )
    ticks = alt.Chart(budgets).mark_tick(color=palette.BLACK, thickness=3, size=26).encode(
        x="gib:Q", y=y, tooltip=[alt.Tooltip("plan:N", title="Plan"), alt.Tooltip("budget:N", title="Budget")])
    return _finish(alt.layer(bars, ticks), height=max(120, 46 * len(frames) + 60))


# ---------------------------------------------------------------------------------------- roofline


def roofline(peak_flops_per_second: float, bandwidth_bytes_per_second: float,
             phases: Iterable[dict]) -> alt.TopLevelMixin:
    """The GPU's roof (min(peak, bandwidth x intensity), log-log) with each phase at its achieved rate.

    `phases`: dicts with phase, flops, bytes, seconds, binding (one step on one GPU, from the plan).
    """
    points = []
    for item in phases:
        if not item["bytes"] or not item["seconds"]:
            continue
        intensity = item["flops"] / item["bytes"]
        achieved = item["flops"] / item["seconds"]
        roof = min(peak_flops_per_second, bandwidth_bytes_per_second * intensity)
        points.append({
            "phase": item["phase"],
            "intensity": intensity,
            "tflops": achieved / TERA,
            "roof": roof / TERA,
            "of_roof": achieved / roof if roof else float("nan"),
            "binding": item["binding"].replace("_", " "),
            "step": units.seconds(item["seconds"]),
            "label": f"{item['phase']} ({achieved / roof:.0%} of roof)" if roof else item["phase"],
        })
    ridge = peak_flops_per_second / bandwidth_bytes_per_second
    intensities = [p["intensity"] for p in points] + [ridge]
    low = 10 ** math.floor(math.log10(max(min(intensities) / 4, 1e-2)))
    high = 10 ** math.ceil(math.log10(max(intensities) * 4))
    xs = np.unique(np.concatenate([np.geomspace(low, high, 60), [ridge]]))
    roof_frame = pd.DataFrame({
        "intensity": xs,
        "tflops": np.minimum(peak_flops_per_second, bandwidth_bytes_per_second * xs) / TERA,
    })
    roof_frame["where"] = np.where(roof_frame["intensity"] < ridge, "memory-bandwidth roof", "compute roof")
    x = alt.X("intensity:Q", title="Arithmetic intensity (FLOP per byte, log)",
              scale=alt.Scale(type="log", domain=[low, high], nice=False))
    y_low = max(min([p["tflops"] for p in points] + [roof_frame["tflops"].min()]) / 3, 1e-3)
    y = alt.Y("tflops:Q", title="TFLOP/s per GPU (1e12, log)",
              scale=alt.Scale(type="log", domain=[y_low, peak_flops_per_second / TERA * 2.5], nice=False))
    roof_line = alt.Chart(roof_frame).mark_line(color=palette.BLACK, strokeWidth=2).encode(
        x=x, y=y,
        tooltip=[alt.Tooltip("where:N", title="Roof"), alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3~g"),
                 alt.Tooltip("tflops:Q", title="Attainable TFLOP/s", format=",.4~g")])
    ridge_frame = pd.DataFrame([{"intensity": ridge, "tflops": peak_flops_per_second / TERA,
                                 "label": f"ridge {ridge:,.0f} FLOP/B"}])
    ridge_mark = alt.Chart(ridge_frame).mark_point(shape="diamond", size=80, filled=True, color=palette.BLACK).encode(
        x=x, y=y, tooltip=[alt.Tooltip("label:N", title="Ridge point")])
    ridge_text = alt.Chart(ridge_frame).mark_text(dy=-12, fontSize=11).encode(x=x, y=y, text="label:N")
    frame = pd.DataFrame(points)
    colour = alt.Color("phase:N", title=None,
                       scale=alt.Scale(domain=list(palette.PHASE_COLOURS), range=list(palette.PHASE_COLOURS.values())),
                       legend=None)
    tooltip = [alt.Tooltip("phase:N", title="Phase"), alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3~g"),
               alt.Tooltip("tflops:Q", title="Achieved TFLOP/s", format=",.4~g"),
               alt.Tooltip("roof:Q", title="Roof at this intensity", format=",.4~g"),
               alt.Tooltip("of_roof:Q", title="Share of roof", format=".0%"),
               alt.Tooltip("binding:N", title="Binding resource"), alt.Tooltip("step:N", title="Step time")]
    dots = alt.Chart(frame).mark_point(size=160, filled=True, opacity=1).encode(x=x, y=y, color=colour, tooltip=tooltip)
    text = alt.Chart(frame).mark_text(align="left", dx=10, dy=10, fontSize=12, fontWeight="bold").encode(
        x=x, y=y, text="label:N", color=colour)
    return _finish(alt.layer(roof_line, ridge_mark, ridge_text, dots, text), height=320)


# ----------------------------------------------------------------------------------------- sweeps


def heatmap(frame: pd.DataFrame, current: tuple[int, int]) -> alt.TopLevelMixin:
    """Concurrency x context: colour = output tokens/s where the plan fits, grey with ✕ where it does not.

    `frame` columns: concurrency, context, fits, tokens_per_second, tpot_ms, ttft_ms, memory, headroom.
    """
    data = frame.copy()
    data["tps"] = data["tokens_per_second"].where(data["fits"])
    data["verdict"] = np.where(data["fits"], "fits", "does not fit")
    data["is_current"] = [(c, x) == current for c, x in zip(data["concurrency"], data["context"])]
    data["conc_label"] = data["concurrency"].map(lambda v: units.count(v))
    data["ctx_label"] = data["context"].map(lambda v: units.count(v))
    x_order = [units.count(v) for v in sorted(data["concurrency"].unique())]
    y_order = [units.count(v) for v in sorted(data["context"].unique(), reverse=True)]
    x = alt.X("conc_label:O", title="Concurrency (sequences in flight)", sort=x_order,
              axis=alt.Axis(labelAngle=0, labelOverlap="greedy"))
    y = alt.Y("ctx_label:O", title="Context per sequence (prompt + output tokens)", sort=y_order)
    tooltip = [alt.Tooltip("concurrency:Q", title="Concurrency", format=","),
               alt.Tooltip("context:Q", title="Context tokens", format=","),
               alt.Tooltip("verdict:N", title="Memory"),
               alt.Tooltip("memory:N", title="Memory per GPU"),
               alt.Tooltip("headroom:N", title="Headroom"),
               alt.Tooltip("tokens_per_second:Q", title="Output tokens/s", format=",.0f"),
               alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.1f"),
               alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.0f")]
    base = alt.Chart(data)
    fits = base.transform_filter("datum.fits").mark_rect(stroke="white", strokeWidth=1).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("tps:Q", title="Output tokens/s", scale=alt.Scale(scheme="viridis", type="log"),
                        legend=alt.Legend(orient="right", format="~s", gradientLength=180)))
    misses = base.transform_filter("!datum.fits").mark_rect(color=palette.LIGHT_GREY, stroke="white",
                                                            strokeWidth=1).encode(x=x, y=y, tooltip=tooltip)
    crosses = base.transform_filter("!datum.fits").mark_text(text="✕", color="#6B6B6B", fontSize=12).encode(
        x=x, y=y, tooltip=tooltip)
    marker = base.transform_filter("datum.is_current").mark_rect(fill=None, stroke=palette.VERMILLION,
                                                                 strokeWidth=3).encode(x=x, y=y, tooltip=tooltip)
    height = max(220, 30 * len(y_order) + 70)
    return _finish(alt.layer(fits, misses, crosses, marker), height=height)


def latency_curve(frame: pd.DataFrame, current_concurrency: int) -> alt.TopLevelMixin:
    """TPOT against total output tokens/s as concurrency grows; points that do not fit are marked.

    `frame` columns: concurrency, tokens_per_second, tpot_ms, ttft_ms, e2e_s, fits.
    """
    data = frame.sort_values("concurrency").copy()
    data["verdict"] = np.where(data["fits"], "fits in memory", "does not fit")
    data["is_current"] = data["concurrency"] == current_concurrency
    data["label"] = data["concurrency"].map(lambda v: f"concurrency {v:,}")
    x = alt.X("tokens_per_second:Q", title="Output tokens/s, whole deployment", axis=alt.Axis(format="~s"))
    y = alt.Y("tpot_ms:Q", title="Time per output token (ms)")
    tooltip = [alt.Tooltip("concurrency:Q", title="Concurrency", format=","),
               alt.Tooltip("verdict:N", title="Memory"),
               alt.Tooltip("tokens_per_second:Q", title="Output tokens/s", format=",.0f"),
               alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.1f"),
               alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.0f"),
               alt.Tooltip("e2e_s:Q", title="End-to-end latency (s)", format=",.2f")]
    line = alt.Chart(data).mark_line(color=palette.GREY, strokeWidth=2).encode(x=x, y=y, order="concurrency:Q")
    dots = alt.Chart(data).mark_point(size=80, filled=True).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("verdict:N", title=None,
                        scale=alt.Scale(domain=["fits in memory", "does not fit"],
                                        range=[palette.BLUE, palette.VERMILLION]),
                        legend=alt.Legend(orient="top-left")),
        shape=alt.Shape("verdict:N", scale=alt.Scale(domain=["fits in memory", "does not fit"],
                                                     range=["circle", "cross"]), legend=None))
    now = data[data["is_current"]]
    ring = alt.Chart(now).mark_point(size=320, strokeWidth=2.5, color=palette.BLACK).encode(x=x, y=y, tooltip=tooltip)
    text = alt.Chart(now).mark_text(align="left", dx=12, dy=-12, fontSize=12, fontWeight="bold").encode(
        x=x, y=y, text=alt.value(f"this plan (concurrency {current_concurrency:,})"))
    return _finish(alt.layer(line, dots, ring, text), height=320)


# ----------------------------------------------------------------------------------------- compare


def metric_bars(frame: pd.DataFrame, metric: str, title: str, fmt: str, plan_order: Sequence[str],
                better: str = "") -> alt.TopLevelMixin:
    """One metric across plans, one bar each; colour = plan (same colours on every compare chart)."""
    data = frame[["plan", metric, metric + "_text"]].rename(columns={metric: "value", metric + "_text": "text"})
    data = data[np.isfinite(data["value"].astype(float))]
    colour = alt.Color("plan:N", scale=alt.Scale(domain=list(plan_order), range=palette.CATEGORICAL), legend=None)
    y = alt.Y("plan:N", sort=list(plan_order), title=None, axis=alt.Axis(labelLimit=140))
    x = alt.X("value:Q", title=title + (f" ({better})" if better else ""), axis=alt.Axis(format=fmt, tickCount=4))
    bars = alt.Chart(data).mark_bar().encode(
        x=x, y=y, color=colour,
        tooltip=[alt.Tooltip("plan:N", title="Plan"), alt.Tooltip("text:N", title=title)])
    labels = alt.Chart(data).mark_text(align="left", dx=4, fontSize=11).encode(x=x, y=y, text="text:N")
    return _finish(alt.layer(bars, labels), height=max(110, 34 * len(plan_order) + 50))


def stacked_time(frame: pd.DataFrame, title: str = "Seconds per step") -> alt.TopLevelMixin:
    """A breakdown of one step's time (training), stacked; `frame`: plan, component, seconds, order, colour."""
    scale = alt.Scale(domain=list(frame.drop_duplicates("component")["component"]),
                      range=list(frame.drop_duplicates("component")["colour"]))
    bars = alt.Chart(frame).mark_bar(height=38).encode(
        x=alt.X("sum(seconds):Q", title=title, stack="zero"),
        y=alt.Y("plan:N", title=None, axis=None),
        color=alt.Color("component:N", scale=scale, title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal", columns=3, symbolType="square")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("component:N", title="Component"), alt.Tooltip("text:N", title="Time"),
                 alt.Tooltip("share:Q", title="Share", format=".1%")],
    )
    return _finish(bars, height=110)
