"""Altair charts of the Trade-offs page (same conventions as ui.charts: compiled once per shape, data attached
per run, a tooltip on every data mark, Okabe–Ito colours, units in the axis titles). No Streamlit here.
"""

from __future__ import annotations

import math
from functools import lru_cache

import altair as alt
import pandas as pd

from planner import units
from planner.search import roofline_points
from ui import palette
from ui.charts import _finish, _records, _spec, roof_frame
from ui.text import component_label

NUMERICS = ["resource use only", "changes numerics"]
# At most about this many labelled ticks per axis; overlapping labels are dropped rather than drawn on top of
# each other (log axes otherwise label every 1-2-5 step).
TICKS = 6


def _axis(**kwargs) -> alt.Axis:
    return alt.Axis(tickCount=TICKS, labelOverlap="greedy", **kwargs)


NUMERICS_COLOURS = [palette.BLUE, palette.VERMILLION]
ESTIMATES = ["full plan", "derived"]


def _numerics_colour(legend: bool = True) -> alt.Color:
    return alt.Color(
        "numerics:N",
        title=None,
        scale=alt.Scale(domain=NUMERICS, range=NUMERICS_COLOURS),
        legend=alt.Legend(orient="top", direction="horizontal") if legend else None,
    )


def _estimate_shape() -> alt.Shape:
    return alt.Shape(
        "estimate:N",
        title=None,
        scale=alt.Scale(domain=ESTIMATES, range=["circle", "diamond"]),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )


def _technique_tooltip(time_title: str) -> list:
    return [
        alt.Tooltip("technique:N", title="Technique"),
        alt.Tooltip("variant:N", title="Variant"),
        alt.Tooltip("d_memory_text:N", title="Δ memory per GPU"),
        alt.Tooltip("d_time_text:N", title=f"Δ {time_title}"),
        alt.Tooltip("d_cost_text:N", title="Δ cost"),
        alt.Tooltip("numerics:N", title="Numerics"),
        alt.Tooltip("fits:N", title="Fits after"),
        alt.Tooltip("estimate:N", title="Estimate"),
    ]


# ------------------------------------------------------------------------------------- technique map


PERCENT_TICKS = (
    -100,
    -50,
    -20,
    -10,
    -5,
    -2,
    0,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
)


@lru_cache(maxsize=4)
def _technique_map_chart(time_title: str) -> dict:
    x_title, y_title = "Δ memory per GPU (GiB, 2^30 bytes)", f"Δ {time_title} (% of this plan's, symlog)"
    x = alt.X("d_memory_gib:Q", title=x_title, scale=alt.Scale(zero=True, nice=True), axis=_axis())
    y = alt.Y(
        "d_time_pct:Q",
        title=y_title,
        scale=alt.Scale(type="symlog", constant=1),
        axis=alt.Axis(
            values=list(PERCENT_TICKS),
            labelExpr="(datum.value > 0 ? '+' : '') + datum.label + '%'",
            labelOverlap="greedy",
        ),
    )
    zero_x = (
        alt.Chart(_records("zero"))
        .mark_rule(color=palette.GREY, strokeDash=[3, 3])
        .encode(x=alt.X("x:Q", title=x_title))
    )
    zero_y = (
        alt.Chart(_records("zero"))
        .mark_rule(color=palette.GREY, strokeDash=[3, 3])
        .encode(y=alt.Y("y:Q", title=y_title))
    )
    base = alt.Chart(_records("points"))
    dots = base.mark_point(size=110, filled=True, opacity=0.9).encode(
        x=x, y=y, color=_numerics_colour(), shape=_estimate_shape(), tooltip=_technique_tooltip(time_title)
    )
    labels = (
        base.transform_filter("datum.label != ''")
        .mark_text(align="left", dx=8, dy=-7, fontSize=11, color="#1F2430")
        .encode(x=x, y=y, text="label:N")
    )
    return _finish(alt.layer(zero_x, zero_y, dots, labels), height=380).to_dict()


def technique_map(points: pd.DataFrame, time_title: str) -> dict:
    """Δ memory per GPU against Δ time (in % of this plan's) for every applicable technique; colour:
    changes numerics or not; diamonds: derived from the plan's own terms. Lower-left is better on both."""
    spec = _spec(_technique_map_chart(time_title), {"points": points, "zero": pd.DataFrame({"x": [0.0], "y": [0.0]})})
    if len(points):
        lo, hi = min(points["d_time_pct"].min(), 0.0), max(points["d_time_pct"].max(), 0.0)
        ticks = [t for t in PERCENT_TICKS if lo * 1.5 - 1 <= t <= hi * 1.5 + 1]
        _set_axis_values(spec, "y", ticks)
    return spec


def _set_axis_values(spec: dict, channel: str, values: list) -> None:
    for layer in spec.get("layer", []):
        enc = layer.get("encoding", {}).get(channel)
        if isinstance(enc, dict) and "axis" in enc and isinstance(enc["axis"], dict):
            enc["axis"] = {**enc["axis"], "values": values}


def _set_domain(spec: dict, channel: str, domain: list) -> None:
    for layer in spec.get("layer", []):
        enc = layer.get("encoding", {}).get(channel)
        if isinstance(enc, dict) and "field" in enc:
            enc["scale"] = {**enc.get("scale", {}), "domain": domain}


# -------------------------------------------------------------------------------- memory vs time


@lru_cache(maxsize=4)
def _position_chart(time_title: str, time_unit: str) -> dict:
    def xs(field: str) -> alt.X:
        return alt.X(f"{field}:Q", title="Memory per GPU (GiB, 2^30 bytes)", scale=alt.Scale(zero=True), axis=_axis())

    def ys(field: str) -> alt.Y:
        return alt.Y(
            f"{field}:Q",
            title=f"{time_title} ({time_unit}, log)",
            scale=alt.Scale(type="log", nice=False),
            axis=_axis(format="~g"),
        )

    x, y = xs("memory_gib"), ys("time_plot")
    limits = alt.Chart(_records("limits"))
    limit_rules = limits.mark_rule(strokeWidth=2, color=palette.BLACK).encode(
        x=xs("gib"),
        strokeDash=alt.StrokeDash(
            "what:N", title=None, legend=None, scale=alt.Scale(domain=["budget", "capacity"], range=[[6, 4], [1, 0]])
        ),
        tooltip=[alt.Tooltip("text:N", title="Limit")],
    )
    limit_text = limits.mark_text(align="left", dx=4, baseline="top", y=4, fontSize=11, color=palette.BLACK).encode(
        x=xs("gib"), text="short:N"
    )
    base = alt.Chart(_records("points"))
    arrows = base.mark_rule(strokeWidth=1.5, opacity=0.6).encode(
        x=xs("base_memory_gib"), y=ys("base_time"), x2="memory_gib:Q", y2="time_plot:Q", color=_numerics_colour()
    )
    dots = base.mark_point(size=90, filled=True).encode(
        x=x, y=y, color=_numerics_colour(), shape=_estimate_shape(), tooltip=_technique_tooltip(time_title)
    )
    labels = (
        base.transform_filter("datum.position_label != ''")
        .mark_text(align="left", dx=7, dy=-6, fontSize=11, color="#1F2430")
        .encode(x=x, y=y, text="position_label:N")
    )
    now = alt.Chart(_records("now"))
    now_dot = now.mark_point(size=260, strokeWidth=3, color=palette.BLACK).encode(
        x=x,
        y=y,
        tooltip=[
            alt.Tooltip("label:N", title="Plan"),
            alt.Tooltip("memory:N", title="Memory per GPU"),
            alt.Tooltip("time_text:N", title=time_title),
        ],
    )
    now_text = now.mark_text(align="center", dy=20, fontSize=12, fontWeight="bold").encode(x=x, y=y, text="label:N")
    return _finish(alt.layer(limit_rules, limit_text, arrows, dots, labels, now_dot, now_text), height=400).to_dict()


def position_ceiling(points: pd.DataFrame, base_time: float) -> float:
    """Top of the memory-vs-time chart: 1.6x the slowest full-plan point (derived ones can be 100x slower)."""
    full = points.loc[points["estimate"] != "derived", "time"] if len(points) else []
    return max([base_time, *full]) * 1.6


def position(
    points: pd.DataFrame,
    memory,
    base_time: float,
    time_text: str,
    time_title: str,
    time_unit: str,
    budget_label: str = "engine budget",
) -> dict:
    """Where the plan sits (memory per GPU, time) and an arrow to where each technique moves it; the
    memory budget (dashed) and capacity (solid) as vertical lines. `memory`: the plan's MemoryBreakdown
    (total, budget and capacity bytes per GPU)."""
    base_memory_bytes, budget_bytes, capacity_bytes = memory.total_bytes, memory.budget_bytes, memory.capacity_bytes
    limits = [
        {
            "what": "capacity",
            "gib": capacity_bytes / units.GIB,
            "text": f"capacity {units.gib(capacity_bytes)}",
            "short": "capacity",
        }
    ]
    if not math.isclose(budget_bytes, capacity_bytes, rel_tol=1e-9):
        limits.append(
            {
                "what": "budget",
                "gib": budget_bytes / units.GIB,
                "text": f"{budget_label} {units.gib(budget_bytes)}",
                "short": budget_label,
            }
        )
    now = pd.DataFrame(
        [
            {
                "memory_gib": base_memory_bytes / units.GIB,
                "time_plot": base_time,
                "label": "this plan",
                "memory": units.gib(base_memory_bytes),
                "time_text": time_text,
            }
        ]
    )
    points = points.copy()
    domain = None
    if len(points):
        # Derived techniques (dropping the KV cache, offload) can be 100x slower: they would squeeze every other
        # point into one line, so they are drawn at the top edge with "↑" and their time in the label.
        hi = position_ceiling(points, base_time)
        lo = min([base_time, *points["time"]]) / 1.3
        over = points["time"] > hi
        points["time_plot"] = points["time"].clip(upper=hi)
        points.loc[over, "position_label"] = "↑"
        domain = [lo, hi]
    spec = _spec(_position_chart(time_title, time_unit), {"points": points, "limits": pd.DataFrame(limits), "now": now})
    if domain:
        _set_domain(spec, "y", domain)
    return spec


# ---------------------------------------------------------------------------------- roofline moves


@lru_cache(maxsize=1)
def _roofline_moves_chart() -> dict:
    def xs(field: str) -> alt.X:
        return alt.X(
            f"{field}:Q",
            title="Arithmetic intensity of a decode step (FLOP per byte, log)",
            scale=alt.Scale(type="log", nice=False),
            axis=_axis(format="~g"),
        )

    def ys(field: str) -> alt.Y:
        return alt.Y(
            f"{field}:Q",
            title="Achieved TFLOP/s per GPU (1e12, log)",
            scale=alt.Scale(type="log", nice=False),
            axis=_axis(format="~g"),
        )

    x, y = xs("intensity"), ys("tflops")
    roof = (
        alt.Chart(_records("roof"))
        .mark_line(color=palette.BLACK, strokeWidth=2)
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("where:N", title="Roof"),
                alt.Tooltip("tflops:Q", title="Attainable TFLOP/s", format=",.4~g"),
            ],
        )
    )
    moves = alt.Chart(_records("moves"))
    arrows = moves.mark_rule(strokeWidth=1.5, opacity=0.6).encode(
        x=xs("base_intensity"),
        y=ys("base_tflops"),
        x2="intensity:Q",
        y2="tflops:Q",
        color=_numerics_colour(legend=False),
    )
    tooltip = [
        alt.Tooltip("variant:N", title="Technique"),
        alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3~g"),
        alt.Tooltip("tflops:Q", title="Achieved TFLOP/s", format=",.4~g"),
        alt.Tooltip("binding:N", title="Binding resource"),
        alt.Tooltip("numerics:N", title="Numerics"),
    ]
    dots = moves.mark_point(size=90, filled=True).encode(x=x, y=y, color=_numerics_colour(), tooltip=tooltip)
    labels = (
        moves.transform_filter("datum.label != ''")
        .mark_text(align="left", dx=7, dy=-6, fontSize=11)
        .encode(x=x, y=y, text="label:N")
    )
    now = alt.Chart(_records("now"))
    now_dot = now.mark_point(size=260, strokeWidth=3, color=palette.BLACK).encode(x=x, y=y, tooltip=tooltip[1:4])
    now_text = now.mark_text(align="center", dy=20, fontSize=12, fontWeight="bold").encode(x=x, y=y, text="variant:N")
    return _finish(alt.layer(roof, arrows, dots, labels, now_dot, now_text), height=400).to_dict()


def roofline_moves(
    peak_flops_per_second: float, bandwidth_bytes_per_second: float, base: dict, moves: pd.DataFrame
) -> dict:
    """The decode step on the GPU's roofline and where each technique (a full alternative plan) moves it.

    `base`: intensity, tflops, binding of this plan's decode step; `moves`: one row per technique with
    intensity, tflops, binding, variant, label, numerics (and the base point repeated for the arrows).
    """
    intensities = [base["intensity"], *moves.get("intensity", [])]
    line = roofline_points.roof(
        peak_flops_per_second, bandwidth_bytes_per_second, intensities, margin=2.0, whole_decades=False
    )
    now = pd.DataFrame([{**base, "variant": "this plan"}])
    return _spec(_roofline_moves_chart(), {"roof": roof_frame(line), "moves": moves, "now": now})


# ------------------------------------------------------------------------------------------- shares


@lru_cache(maxsize=32)
def _shares_chart(keys: tuple[str, ...], title: str) -> dict:
    scale = alt.Scale(
        domain=[component_label(k) for k in keys], range=[palette.component_colour(k, i) for i, k in enumerate(keys)]
    )
    bars = (
        alt.Chart(_records("shares"))
        .mark_bar(height=30)
        .encode(
            x=alt.X(
                "sum(share):Q",
                title=None,
                stack="zero",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%", tickCount=5),
            ),
            y=alt.Y("what:N", title=None, axis=None),
            color=alt.Color(
                "component:N",
                scale=scale,
                title=None,
                legend=alt.Legend(orient="top", direction="horizontal", columns=3, symbolType="square", offset=6),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("component:N", title="Component"),
                alt.Tooltip("share:Q", title="Share", format=".1%"),
                alt.Tooltip("value:N", title="Amount"),
            ],
        )
    )
    return _finish(bars, height=130).to_dict()


def shares(rows: list[tuple[str, float, str]], title: str) -> dict:
    """One 100 % bar: (component key, share, amount text) per part, largest first."""
    keys = tuple(k for k, _, _ in rows)
    frame = pd.DataFrame(
        [
            {"what": title, "component": component_label(k), "order": i, "share": v, "value": text}
            for i, (k, v, text) in enumerate(rows)
        ]
    )
    return _spec(_shares_chart(keys, title), {"shares": frame})


# --------------------------------------------------------------------------------------- pareto


@lru_cache(maxsize=1)
def _pareto_chart() -> dict:
    x = alt.X(
        "tpot_ms:Q",
        title="Time per output token (ms, log)",
        scale=alt.Scale(type="log", nice=False),
        axis=_axis(format="~g"),
    )
    y = alt.Y(
        "usd_per_million:Q",
        title="$ per 1M output tokens (log)",
        scale=alt.Scale(type="log", nice=False),
        axis=_axis(format="$~g"),
    )
    tooltip = [
        alt.Tooltip("config:N", title="Configuration"),
        alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.1f"),
        alt.Tooltip("usd_per_million:Q", title="$ per 1M output tokens", format="$,.3~f"),
        alt.Tooltip("ttft:N", title="TTFT"),
        alt.Tooltip("tps:N", title="Output tokens/s"),
        alt.Tooltip("memory:N", title="Memory per GPU"),
    ]
    cloud = (
        alt.Chart(_records("cloud"))
        .mark_point(size=18, filled=True, opacity=0.35, color=palette.GREY)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    frontier = alt.Chart(_records("frontier"))
    line = frontier.mark_line(color=palette.BLACK, strokeWidth=1.5, interpolate="step-after").encode(
        x=x, y=y, order="tpot_ms:Q"
    )
    dots = frontier.mark_point(size=90, filled=True, opacity=1).encode(
        x=x,
        y=y,
        tooltip=tooltip,
        color=alt.Color(
            "gpu:N",
            title="GPU (frontier)",
            scale=alt.Scale(range=palette.CATEGORICAL),
            legend=alt.Legend(orient="top", direction="horizontal"),
        ),
    )
    best = alt.Chart(_records("best"))
    ring = best.mark_point(size=420, strokeWidth=3, color=palette.VERMILLION).encode(x=x, y=y, tooltip=tooltip)
    text = best.mark_text(align="left", dx=14, dy=-10, fontSize=12, fontWeight="bold", color=palette.VERMILLION).encode(
        x=x, y=y, text=alt.value("best at your fixed quantity")
    )
    return _finish(alt.layer(cloud, line, dots, ring, text), height=400).to_dict()


def pareto(points: dict[str, pd.DataFrame]) -> dict:
    """Feasible configurations (grey), the $/1M-tokens vs TPOT Pareto frontier (coloured by GPU, stepped
    line), and the best plan at the user's fixed quantity (ring)."""
    return _spec(_pareto_chart(), points)


@lru_cache(maxsize=1)
def _training_pareto_chart() -> dict:
    x = alt.X("days:Q", title="Time to train (days, log)", scale=alt.Scale(type="log"), axis=_axis(format="~g"))
    y = alt.Y("usd:Q", title="Cost to train ($, log)", scale=alt.Scale(type="log"), axis=_axis(format="$~s"))
    tooltip = [
        alt.Tooltip("config:N", title="Configuration"),
        alt.Tooltip("days_text:N", title="Time to train"),
        alt.Tooltip("usd_text:N", title="Cost to train"),
    ]
    cloud = (
        alt.Chart(_records("cloud"))
        .mark_circle(size=18, color=palette.GREY, opacity=0.35)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    frontier = alt.Chart(_records("frontier"))
    line = frontier.mark_line(color=palette.BLACK, strokeWidth=1.5, interpolate="step-after").encode(
        x=x, y=y, order="days:Q"
    )
    dots = frontier.mark_circle(size=70, opacity=1).encode(
        x=x,
        y=y,
        tooltip=tooltip,
        color=alt.Color(
            "gpu:N",
            title="GPU (frontier)",
            scale=alt.Scale(range=palette.CATEGORICAL),
            legend=alt.Legend(orient="top", direction="horizontal"),
        ),
    )
    return _finish(alt.layer(cloud, line, dots), height=340).to_dict()


def training_pareto(feasible: pd.DataFrame, frontier: pd.DataFrame, sample: int = 1500) -> dict:
    """Cost to train vs time to train: every feasible configuration (grey, sampled) and the Pareto frontier."""

    def points(frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "days": frame["time_to_train_seconds"] / 86400,
                "usd": frame["usd_total"],
                "gpu": frame["gpu"],
                "days_text": [units.seconds(v) for v in frame["time_to_train_seconds"]],
                "usd_text": [units.usd(v) for v in frame["usd_total"]],
                "config": [
                    f"{g}×{int(n)} TP{int(t)} PP{int(p)} ZeRO-{int(z)} {r} mb{int(m)}"
                    for g, n, t, p, z, r, m in zip(
                        frame["gpu"],
                        frame["num_gpus"],
                        frame["tensor_parallel"],
                        frame["pipeline_parallel"],
                        frame["zero_stage"],
                        frame["activation_checkpointing"],
                        frame["micro_batch_size"],
                    )
                ],
            }
        )

    cloud = feasible.sample(sample, random_state=0) if len(feasible) > sample else feasible
    return _spec(_training_pareto_chart(), {"cloud": points(cloud), "frontier": points(frontier)})
