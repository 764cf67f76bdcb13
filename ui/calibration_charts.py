"""The Calibrate page's data and charts (no Streamlit): predicted vs measured for the documented defaults and
for a calibration, the error in %, and the efficiencies a record measured.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from planner import units
from planner.calibration.report import device_terms, format_error, format_value
from planner.calibration_record import CalibrationRecord
from planner.physics.efficiency import DEFAULT_EFFICIENCY

SERIES_DEFAULT = "documented defaults"
SERIES_CALIBRATED = "this calibration"
SERIES_COLOURS = {SERIES_DEFAULT: "#E69F00", SERIES_CALIBRATED: "#0072B2"}  # Okabe-Ito orange / blue
GROUPS = {"s": "time", "B": "memory", "B/s": "ceilings", "FLOP/s": "ceilings"}


def comparison_frame(record: CalibrationRecord) -> pd.DataFrame:
    """One row per (quantity, prediction series): measured, predicted, error %, display strings."""
    rows = []
    for order, row in enumerate(record.predicted_vs_measured):
        for series, predicted, error in (
            (SERIES_DEFAULT, row.predicted, row.error_fraction),
            (SERIES_CALIBRATED, row.predicted_calibrated, row.calibrated_error_fraction),
        ):
            if predicted is None or error is None:
                continue
            rows.append(
                {
                    "order": order,
                    "quantity": row.quantity,
                    "role": row.role,
                    "unit": row.unit,
                    "group": GROUPS.get(row.unit, "other"),
                    "series": series,
                    "measured": row.measured,
                    "predicted": predicted,
                    "error_pct": error * 100.0,
                    "measured_text": format_value(row.measured, row.unit),
                    "predicted_text": format_value(predicted, row.unit),
                    "error_text": format_error(error),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "order",
            "quantity",
            "role",
            "unit",
            "group",
            "series",
            "measured",
            "predicted",
            "error_pct",
            "measured_text",
            "predicted_text",
            "error_text",
        ],
    )


def _tooltip():
    return [
        alt.Tooltip("quantity:N", title="Quantity"),
        alt.Tooltip("series:N", title="Prediction"),
        alt.Tooltip("measured_text:N", title="Measured"),
        alt.Tooltip("predicted_text:N", title="Predicted"),
        alt.Tooltip("error_text:N", title="Error"),
        alt.Tooltip("role:N", title="Row"),
    ]


def error_chart(frame: pd.DataFrame) -> alt.Chart:
    """Horizontal bars of (predicted - measured) / measured in %, one pair per quantity. Symmetric-log
    x axis: uncalibrated errors on a CPU reach 10^5 %, calibrated ones a few %."""
    order = list(dict.fromkeys(frame.sort_values("order")["quantity"]))
    base = alt.Chart(frame)
    bars = base.mark_bar().encode(
        x=alt.X(
            "error_pct:Q",
            title="error: (predicted - measured) / measured, % (symlog)",
            scale=alt.Scale(type="symlog", constant=1),
        ),
        y=alt.Y("quantity:N", sort=order, title=None),
        yOffset=alt.YOffset("series:N"),
        color=alt.Color(
            "series:N",
            title="Prediction",
            scale=alt.Scale(domain=list(SERIES_COLOURS), range=list(SERIES_COLOURS.values())),
        ),
        tooltip=_tooltip(),
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#1F2430").encode(x="x:Q")
    return (bars + zero).properties(height=max(160, 26 * len(order)))


def scatter_chart(frame: pd.DataFrame, group: str) -> alt.Chart:
    """Predicted against measured on log-log axes for one group of units; on the diagonal = exact."""
    data = frame[frame["group"] == group]
    unit = data["unit"].iloc[0] if len(data) else ""
    low = float(min(data["measured"].min(), data["predicted"].min())) if len(data) else 1.0
    high = float(max(data["measured"].max(), data["predicted"].max())) if len(data) else 10.0
    low, high = max(low / 2, 1e-12), high * 2
    scale = alt.Scale(type="log", domain=[low, high])
    points = (
        alt.Chart(data)
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("measured:Q", title=f"measured ({unit})", scale=scale),
            y=alt.Y("predicted:Q", title=f"predicted ({unit})", scale=scale),
            color=alt.Color(
                "series:N",
                title="Prediction",
                scale=alt.Scale(domain=list(SERIES_COLOURS), range=list(SERIES_COLOURS.values())),
            ),
            shape=alt.Shape("role:N", title="Row"),
            tooltip=_tooltip(),
        )
    )
    diagonal = (
        alt.Chart(pd.DataFrame({"v": [low, high]}))
        .mark_line(color="#8C8C8C", strokeDash=[4, 4])
        .encode(x=alt.X("v:Q", scale=scale), y=alt.Y("v:Q", scale=scale))
    )
    return (diagonal + points).properties(height=360)


def efficiency_frame(record: CalibrationRecord) -> pd.DataFrame:
    rows = []
    for name in type(record.efficiency).model_fields:
        if name == "source":
            continue
        value, default = getattr(record.efficiency, name), getattr(DEFAULT_EFFICIENCY, name)
        show = units.seconds if name.endswith("_seconds") else (lambda v: units.percent(v, 2))
        rows.append(
            {
                "factor": name,
                "calibrated": show(value),
                "documented default": show(default),
                "how": record.efficiency_notes.get(name, ""),
            }
        )
    # The fitted device terms (link alpha, GEMM ceiling and t0), beside the published values they replace.
    for term in device_terms(record):
        show = units.seconds if term.unit == "s" else (lambda v: units.percent(v, 2))
        rows.append(
            {
                "factor": term.name,
                "calibrated": show(term.fitted),
                "documented default": show(term.published),
                "how": term.how,
            }
        )
    return pd.DataFrame(rows)
