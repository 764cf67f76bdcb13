"""Altair charts of a simulated request stream (the Traffic view). No Streamlit here.

Like ui.charts: each chart is compiled once per shape (``lru_cache``) over named datasets, and a rerun only
attaches fresh frames. Latencies span milliseconds to minutes once a replica saturates, so their axes are
logarithmic; TTFT and end-to-end latency are in seconds, TPOT in ms (as on the rest of the page).
"""

from __future__ import annotations

import math
from functools import lru_cache

import altair as alt
import pandas as pd

from planner import units
from planner.inference.traffic_results import LoadCurve, TrafficResult
from ui import palette
from ui.charts import _finish, _records, _spec

# metric -> (LoadPoint field stem, axis title, display unit per second)
CURVE_METRICS = {
    "ttft_seconds": ("ttft", "Time to first token (s, log scale)", 1.0),
    "tpot_seconds": ("tpot", "Time per output token (ms, log scale)", 1e3),
}
SERIES = ("p50", "p99")
SERIES_COLOURS = (palette.SKY, palette.BLUE)
# Vertical markers on the load curve: kind -> (legend words, colour, dash). A legend names them: text beside
# each line would cross the others where they sit close (the knee and the SLO's limit often do).
MARKERS = {
    "stream": ("this stream", palette.BLACK, [1, 0]),
    "knee": ("knee", palette.GREY, [4, 3]),
    "slo": ("largest rate within the SLO", palette.GREEN, [6, 2]),
}
RATE_AXIS = "Requests/s per replica (offered)"
PERCENTILE_METRICS = (("ttft_seconds", "TTFT"), ("tpot_seconds", "TPOT"), ("e2e_latency_seconds", "End-to-end"))
PERCENTILE_COLOURS = (palette.BLUE, palette.ORANGE, palette.GREEN)
# (label, Distribution field, position on the tail axis = 1 / (1 - share of requests at or below))
PERCENTILES = (("p50", "p50", 2), ("p90", "p90", 10), ("p95", "p95", 20), ("p99", "p99", 100))


MAX_LOG_TICKS = 5  # Vega hides overlapping labels of a log axis: ask for no more than fit in 150 px


def log_ticks(low: float, high: float, max_ticks: int = MAX_LOG_TICKS) -> list[float]:
    """Tick values for a log axis from `low` to `high`: the finest of 1-2-3-5, 1-2-5, 1-3 and 1 per decade that
    gives at most `max_ticks` (Vega's own log ticks label or grid every 1..9 multiple within a decade)."""
    if not (low > 0 and high > 0):
        return []
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for steps in ((1, 2, 3, 5), (1, 2, 5), (1, 3), (1,)):
        values = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        inside = [round(v, 12) for v in values if low <= v <= high]
        if len(inside) <= max_ticks:
            break
    if len(inside) > max_ticks:  # many decades: every other power of ten
        inside = inside[:: math.ceil(len(inside) / max_ticks)]
    return inside


def _with_ticks(spec: dict, channel: str, values: list[float]) -> dict:
    """Set the tick values of `channel`'s axis on every layer that draws it (the compiled spec is shared)."""
    for layer in spec.get("layer", [spec]):
        encoding = layer.get("encoding", {}).get(channel)
        if encoding is not None and "axis" in encoding:
            encoding["axis"] = {**encoding["axis"], "values": values}
    return spec


# ------------------------------------------------------------------------------------ load curve


@lru_cache(maxsize=32)
def _load_curve_chart(title: str, kinds: tuple[str, ...]) -> dict:
    x = alt.X("rate:Q", title=RATE_AXIS, axis=alt.Axis(tickCount=6, format=",~f"), scale=alt.Scale(zero=True))
    # nice=False: the axis spans the data (and the SLO target), not the enclosing powers of ten.
    y = alt.Y(
        "value:Q",
        title=title,
        scale=alt.Scale(type="log", nice=False, padding=10),
        axis=alt.Axis(format=",~f", tickCount=5),
    )
    series_scale = alt.Scale(domain=list(SERIES), range=list(SERIES_COLOURS))
    colour = alt.Color(
        "series:N", title=None, scale=series_scale, legend=alt.Legend(orient="top", direction="horizontal")
    )
    tooltip = [
        alt.Tooltip("rate_text:N", title="Offered per replica"),
        alt.Tooltip("series:N", title="Percentile"),
        alt.Tooltip("text:N", title="Latency"),
        alt.Tooltip("served_text:N", title="Served per replica"),
    ]
    curve = alt.Chart(_records("curve"))
    layers = [
        # The SLO target and, above it (to the top of the plot: y2 in pixels), the latencies that miss it.
        alt.Chart(_records("slo"))
        .mark_rect(color=palette.VERMILLION, opacity=0.07)
        .encode(y=alt.Y("value:Q"), y2=alt.value(0), tooltip=[alt.Tooltip("label:N", title="Misses the target")]),
        alt.Chart(_records("slo"))
        .mark_rule(color=palette.VERMILLION, strokeDash=[6, 3], strokeWidth=1.5)
        .encode(y=alt.Y("value:Q"), tooltip=[alt.Tooltip("label:N", title="SLO target")]),
        alt.Chart(_records("slo"))
        .mark_text(align="left", baseline="bottom", dx=4, dy=-3, color=palette.VERMILLION, fontSize=11)
        .encode(y=alt.Y("value:Q"), x=alt.value(0), text="label:N"),
        curve.mark_line(strokeWidth=2).encode(x=x, y=y, color=colour, detail="series:N"),
        curve.mark_point(size=45, filled=True, opacity=1).encode(
            x=x, y=y, color=alt.Color("series:N", scale=series_scale, legend=None), tooltip=tooltip
        ),
    ]
    if kinds:
        words = [MARKERS[k][0] for k in kinds]
        legend = alt.Legend(
            orient="bottom", direction="horizontal", title=None, symbolType="stroke", symbolStrokeWidth=2
        )
        layers.append(
            alt.Chart(_records("marks"))
            .mark_rule(strokeWidth=1.5)
            .encode(
                x=x,
                color=alt.Color(
                    "words:N", scale=alt.Scale(domain=words, range=[MARKERS[k][1] for k in kinds]), legend=legend
                ),
                # The colour legend names the markers; a second (dash) legend would not merge with it here.
                strokeDash=alt.StrokeDash(
                    "words:N", scale=alt.Scale(domain=words, range=[MARKERS[k][2] for k in kinds]), legend=None
                ),
                tooltip=[alt.Tooltip("words:N", title="Marker"), alt.Tooltip("rate_text:N", title="Per replica")],
            )
        )
    # 340 px in all: the plot keeps ~230 px under its two legends.
    return _finish(alt.layer(*layers).resolve_scale(color="independent"), height=340).to_dict()


def load_curve(
    curve: LoadCurve,
    metric: str,
    stream_rate_per_replica: float | None,
    slo_seconds: float | None = None,
    slo_label: str = "",
    slo_rate_per_replica: float | None = None,
) -> dict:
    """p50 and p99 of `metric` (ttft_seconds or tpot_seconds) against the offered rate per replica, with the knee,
    this stream's rate and the SLO's largest rate as vertical markers and the SLO target as a band above its line
    (the latencies that miss it)."""
    stem, title, scale = CURVE_METRICS[metric]
    rows = []
    for point in curve.points:
        for series in SERIES:
            seconds = getattr(point, f"{stem}_{series}_seconds")
            rows.append(
                {
                    "rate": point.requests_per_second,
                    "rate_text": units.per_second(point.requests_per_second),
                    "served_text": units.per_second(point.achieved_requests_per_second),
                    "series": series,
                    # A log axis has no zero: an empty sample's 0 s sits at the axis floor instead.
                    "value": max(seconds * scale, 1e-6 * scale),
                    "text": units.seconds(seconds),
                }
            )
    frame = pd.DataFrame(rows)
    given = {
        "stream": stream_rate_per_replica,
        "knee": curve.knee_requests_per_second,
        "slo": slo_rate_per_replica,
    }
    markers = [(kind, value) for kind, value in given.items() if value]
    marks = pd.DataFrame(
        [
            {"kind": kind, "rate": value, "words": MARKERS[kind][0], "rate_text": units.per_second(value)}
            for kind, value in markers
        ],
        columns=["kind", "rate", "words", "rate_text"],
    )
    slo = pd.DataFrame(
        [{"value": slo_seconds * scale, "label": slo_label}] if slo_seconds else [], columns=["value", "label"]
    )
    kinds = tuple(kind for kind, _ in markers)
    spec = _spec(_load_curve_chart(title, kinds), {"curve": frame, "marks": marks, "slo": slo})
    values = [*frame["value"], *([slo_seconds * scale] if slo_seconds else [])]
    return _with_ticks(spec, "y", log_ticks(min(values) / 1.2, max(values) * 1.2))


# ------------------------------------------------------------------------------------------ CDF


@lru_cache(maxsize=1)
def _percentile_chart() -> dict:
    names = [label for _, label in PERCENTILE_METRICS]
    metric_scale = alt.Scale(domain=names, range=list(PERCENTILE_COLOURS))
    colour = alt.Color(
        "metric:N", title=None, scale=metric_scale, legend=alt.Legend(orient="top", direction="horizontal")
    )
    ticks = [tail for _, _, tail in PERCENTILES]
    names_of = " : ".join(f"datum.value == {tail} ? '{name}'" for name, _, tail in PERCENTILES[:-1])
    x = alt.X(
        "tail:Q",
        title="Percentile of the requests (the tail stretched: 1 / (1 − share))",
        scale=alt.Scale(type="log", domain=[1.6, 130]),
        axis=alt.Axis(values=ticks, labelExpr=f"{names_of} : '{PERCENTILES[-1][0]}'", grid=True),
    )
    y = alt.Y(
        "seconds:Q",
        title="Latency (s, log scale)",
        scale=alt.Scale(type="log", nice=False, padding=10),
        axis=alt.Axis(format=",~f", tickCount=6),
    )
    tooltip = [
        alt.Tooltip("metric:N", title="Latency"),
        alt.Tooltip("percentile:N", title="Percentile"),
        alt.Tooltip("text:N", title="Simulated"),
    ]
    points = alt.Chart(_records("percentiles"))
    line = points.mark_line(strokeWidth=2).encode(x=x, y=y, color=colour, detail="metric:N")
    dots = points.mark_point(size=50, filled=True, opacity=1).encode(
        x=x, y=y, color=alt.Color("metric:N", scale=metric_scale, legend=None), tooltip=tooltip
    )
    rules = (
        alt.Chart(_records("targets"))
        .mark_rule(strokeDash=[6, 3], strokeWidth=1.5)
        .encode(
            y=alt.Y("seconds:Q"),
            color=alt.Color("metric:N", scale=metric_scale, legend=None),
            tooltip=[alt.Tooltip("label:N", title="SLO target")],
        )
    )
    return _finish(alt.layer(line, dots, rules), height=260).to_dict()


def latency_percentiles(result: TrafficResult, targets: dict[str, float] | None = None, percentile: int = 99) -> dict:
    """Each latency's distribution at the percentiles the simulation reports (p50, p90, p95, p99), on a percentile
    axis that stretches the tail (HdrHistogram's percentile plot), with the SLO targets as dashed lines in the
    metric's colour."""
    labels = {metric: label for metric, label in PERCENTILE_METRICS}
    rows = []
    for metric, label in PERCENTILE_METRICS:
        dist = getattr(result, metric)
        for name, field, tail in PERCENTILES:
            seconds = getattr(dist, field)
            if seconds > 0:  # a log axis has no zero (an empty sample)
                rows.append(
                    {
                        "metric": label,
                        "percentile": name,
                        "tail": tail,
                        "seconds": seconds,
                        "text": units.seconds(seconds),
                    }
                )
    target_rows = [
        {"metric": labels[m], "seconds": s, "label": f"{labels[m]}: p{percentile} ≤ {units.seconds(s)}"}
        for m, s in (targets or {}).items()
        if m in labels
    ]
    spec = _spec(
        _percentile_chart(),
        {
            "percentiles": pd.DataFrame(rows, columns=["metric", "percentile", "tail", "seconds", "text"]),
            "targets": pd.DataFrame(target_rows, columns=["metric", "seconds", "label"]),
        },
    )
    values = [row["seconds"] for row in rows] + [row["seconds"] for row in target_rows]
    return _with_ticks(spec, "y", log_ticks(min(values) / 1.2, max(values) * 1.2, max_ticks=5)) if values else spec


# ------------------------------------------------------------------------------------ latency CDF

CDF_METRICS = (
    ("ttft_seconds", "TTFT"),
    ("tpot_seconds", "TPOT"),
    ("itl_seconds", "ITL"),
    ("e2e_latency_seconds", "End-to-end"),
)
CDF_COLOURS = (palette.BLUE, palette.ORANGE, palette.SKY, palette.GREEN)
# The y axis stretches the tail: a request share q sits at 1 / (1 - q) on a log scale (p0 at 1, p50 at 2,
# p90 at 10, p99 at 100, p99.9 at 1,000); the slowest request (p100) has no place on it and is left out.
CDF_TICKS = ((1, "p0"), (2, "p50"), (10, "p90"), (100, "p99"), (1000, "p99.9"))


def _tail_position(percentile: float) -> float:
    return 1.0 / (1.0 - percentile / 100.0)


@lru_cache(maxsize=1)
def _cdf_chart() -> dict:
    names = [label for _, label in CDF_METRICS]
    metric_scale = alt.Scale(domain=names, range=list(CDF_COLOURS))
    colour = alt.Color(
        "metric:N", title=None, scale=metric_scale, legend=alt.Legend(orient="top", direction="horizontal")
    )
    x = alt.X(
        "seconds:Q",
        title="Latency (s, log scale)",
        scale=alt.Scale(type="log", nice=False),
        axis=alt.Axis(format=",~f", tickCount=6),
    )
    labels = " : ".join(f"datum.value == {value} ? '{name}'" for value, name in CDF_TICKS[:-1])
    y = alt.Y(
        "tail:Q",
        title="Share of requests at or below (tail stretched)",
        scale=alt.Scale(type="log", domain=[1, 1000]),
        axis=alt.Axis(
            values=[v for v, _ in CDF_TICKS],
            labelExpr=f"{labels} : '{CDF_TICKS[-1][1]}'",
            grid=True,
            labelOverlap=False,  # five labels, never crowded: keep p50 and p99 (Vega drops some on a log axis)
        ),
    )
    tooltip = [
        alt.Tooltip("metric:N", title="Latency"),
        alt.Tooltip("percentile:N", title="Percentile"),
        alt.Tooltip("text:N", title="Simulated"),
    ]
    points = alt.Chart(_records("cdf"))
    line = points.mark_line(strokeWidth=2).encode(
        x=x, y=y, color=colour, detail="metric:N", order="tail:Q", tooltip=tooltip
    )
    targets = (
        alt.Chart(_records("targets"))
        .mark_rule(strokeDash=[6, 3], strokeWidth=1.5)
        .encode(
            x=alt.X("seconds:Q"),
            color=alt.Color("metric:N", scale=metric_scale, legend=None),
            tooltip=[alt.Tooltip("label:N", title="SLO target")],
        )
    )
    level = (
        alt.Chart(_records("level"))
        .mark_rule(strokeDash=[2, 2], strokeWidth=1, color=palette.GREY)
        .encode(y=alt.Y("tail:Q"), tooltip=[alt.Tooltip("label:N", title="SLO percentile")])
    )
    return _finish(alt.layer(line, targets, level), height=320).to_dict()


def latency_cdf(
    result: TrafficResult, targets: dict[str, float] | None = None, percentile: int | dict[str, int] = 99
) -> dict:
    """Each latency's distribution function from the simulation's quantile table (`latency_quantiles`): latency
    on a log x axis, the share of requests at or below it on a y axis that stretches the tail, the SLO targets as
    dashed verticals in the metric's colour and the SLO's percentile as a dotted line (a target is met where its
    curve crosses that line left of its vertical). `percentile`: one for every target, or each target's own."""
    at = percentile if isinstance(percentile, dict) else {m: percentile for m in targets or {}}
    table = result.latency_quantiles
    labels = dict(CDF_METRICS)
    rows = []
    if table is not None:
        for metric, label in CDF_METRICS:
            for q, seconds in zip(table.percentiles, getattr(table, metric), strict=True):
                if q < 100 and seconds > 0:  # a log axis has no zero; p100 is off the tail axis
                    rows.append(
                        {
                            "metric": label,
                            "percentile": f"p{q:g}",
                            "tail": _tail_position(q),
                            "seconds": seconds,
                            "text": units.seconds(seconds),
                        }
                    )
    target_rows = [
        {"metric": labels[m], "seconds": s, "label": f"{labels[m]}: p{at.get(m, 99)} ≤ {units.seconds(s)}"}
        for m, s in (targets or {}).items()
        if m in labels
    ]
    levels = sorted({at.get(m, 99) for m in (targets or {}) if m in labels})
    level_rows = [{"tail": _tail_position(q), "label": f"p{q}"} for q in levels]
    spec = _spec(
        _cdf_chart(),
        {
            "cdf": pd.DataFrame(rows, columns=["metric", "percentile", "tail", "seconds", "text"]),
            "targets": pd.DataFrame(target_rows, columns=["metric", "seconds", "label"]),
            "level": pd.DataFrame(level_rows, columns=["tail", "label"]),
        },
    )
    values = [row["seconds"] for row in rows] + [row["seconds"] for row in target_rows]
    return _with_ticks(spec, "x", log_ticks(min(values) / 1.2, max(values) * 1.2, max_ticks=7)) if values else spec


# ----------------------------------------------------------------------------------- KV over time


@lru_cache(maxsize=1)
def _kv_chart() -> dict:
    area = (
        alt.Chart(_records("kv"))
        .mark_area(color=palette.ORANGE, opacity=0.35, line={"color": palette.ORANGE}, interpolate="step-after")
        .encode(
            x=alt.X("seconds:Q", title="Time into the run (s)", axis=alt.Axis(format=",~f", tickCount=6)),
            y=alt.Y(
                "share:Q",
                title="KV cache blocks in use",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%", tickCount=5),
            ),
            tooltip=[
                alt.Tooltip("time_text:N", title="Time"),
                alt.Tooltip("share:Q", title="KV blocks in use", format=".0%"),
            ],
        )
    )
    return _finish(area, height=260).to_dict()


def kv_over_time(series: list[tuple[float, float]]) -> dict:
    """The share of KV-cache blocks in use over the run (replica 0), as the simulation sampled it."""
    frame = pd.DataFrame(series, columns=["seconds", "share"])
    frame["time_text"] = frame["seconds"].map(units.seconds)
    return _spec(_kv_chart(), {"kv": frame})
