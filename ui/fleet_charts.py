"""The Fleet page's charts: the day as stacked areas of GPUs per hour, by deployment and by pricing.

Each hour holds its GPUs for the whole hour, so the areas are steps (hour h drawn from h:00 to h+1:00).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from planner.fleet import FleetAnswer
from ui import palette
from ui.charts import _finish

SPARES = "spares"
PRICING = {"reserved": "reserved", "on_demand": "on demand", "spot": "spot"}
HEIGHT = 300
PRICING_COLOURS = [palette.BLUE, palette.ORANGE, palette.GREEN]


def _stepped(rows: list[dict]) -> pd.DataFrame:
    """Hour 23's values again at 24:00, so the last step has a width."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    last = frame[frame["hour"] == 23].copy()
    last["hour"] = 24
    return pd.concat([frame, last], ignore_index=True)


def by_deployment_frame(answer: FleetAnswer) -> pd.DataFrame:
    """GPUs each hour per deployment (serving), and the fleet's spares as one more series."""
    rows = []
    for hour in answer.hours:
        for d in hour.deployments:
            rows.append({"hour": hour.hour, "series": d.deployment, "gpus": d.gpus, "order": 0})
        rows.append({"hour": hour.hour, "series": SPARES, "gpus": hour.spare_gpus, "order": 1})
    return _stepped(rows)


def by_pricing_frame(answer: FleetAnswer) -> pd.DataFrame:
    rows = [
        {"hour": hour.hour, "series": label, "gpus": hour.gpus_by_pricing.get(key, 0.0), "order": i}
        for hour in answer.hours
        for i, (key, label) in enumerate(PRICING.items())
    ]
    return _stepped(rows)


def _area(frame: pd.DataFrame, colour: alt.Color) -> alt.Chart:
    area = (
        alt.Chart(frame)
        .mark_area(interpolate="step-after", opacity=0.85)
        .encode(
            x=alt.X(
                "hour:Q",
                title="Hour of day",
                scale=alt.Scale(domain=[0, 24], nice=False),
                axis=alt.Axis(values=list(range(0, 25, 3)), format="02d"),
            ),
            y=alt.Y("gpus:Q", title="GPUs", stack="zero"),
            color=colour,
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("hour:Q", title="Hour", format="02d"),
                alt.Tooltip("series:N", title="Series"),
                alt.Tooltip("gpus:Q", title="GPUs", format=",.3~g"),
            ],
        )
    )
    return _finish(area, height=HEIGHT)


def gpus_by_deployment(answer: FleetAnswer) -> alt.Chart:
    frame = by_deployment_frame(answer)
    names = [d.name for d in answer.deployments if d.feasible]
    domain = names + [SPARES]
    colours = [palette.CATEGORICAL[i % len(palette.CATEGORICAL)] for i in range(len(names))] + [palette.GREY]
    colour = alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=domain, range=colours),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )
    return _area(frame, colour)


def gpus_by_pricing(answer: FleetAnswer) -> alt.Chart:
    colour = alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=list(PRICING.values()), range=PRICING_COLOURS),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )
    return _area(by_pricing_frame(answer), colour)
