"""The Calibrate page's "From a benchmark result" section: upload result files of vllm bench serve, SGLang
bench_serving, genai-perf, guidellm or inference-perf, fit them on this session's Inference scenario (the deployment
they measured), see predicted vs measured per point (a table and a chart), and apply the record to this session's
plans. The fit is `planner.calibration.from_benchmark` (this module only gathers the uploads and draws); the result
lives in `st.session_state` (one server serves many people) and, once applied, travels in the share link like any
calibration.

Widget keys: calibrate_benchmark_upload, calibrate_benchmark_hold_out, calibrate_benchmark_fit,
calibrate_benchmark_apply. Session key: calibration_benchmark_result (the fit, with the scenario it was made for).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import altair as alt
import pandas as pd
import streamlit as st

from planner.calibration.benchmark_results import CLIENTS_READ, read_benchmark_files
from planner.calibration.from_benchmark import calibrate_from_benchmark
from planner.calibration.report import table_rows
from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError, explain
from planner.inference.scenario import InferenceScenario

UPLOAD_KEY = "calibrate_benchmark_upload"
HOLD_OUT_KEY = "calibrate_benchmark_hold_out"
FIT_KEY = "calibrate_benchmark_fit"
APPLY_KEY = "calibrate_benchmark_apply"
RESULT_KEY = "calibration_benchmark_result"  # (scenario, record or None, problems)
HOLD_OUT_CHOICES = {"middle": "a sweep's middle runs", "none": "none (fit every run)"}
SERIES = {"measured": "measured", "predicted": "documented defaults", "predicted_calibrated": "this calibration"}


def fit_uploads(
    files: Sequence[tuple[str, bytes]], scenario: InferenceScenario, hold_out: str = "middle"
) -> tuple[CalibrationRecord | None, list[str]]:
    """The record fitted to the readable uploads, and one sentence per file (or reason) that was not used."""
    try:
        runs, problems = read_benchmark_files(files)
    except PlanningError as exc:
        return None, [str(exc)]
    if not runs:
        return None, problems or ["no benchmark run in the uploaded files"]
    try:
        return calibrate_from_benchmark(scenario, runs, hold_out=hold_out), problems
    except PlanningError as exc:
        return None, [*problems, explain(exc)]


def point_frame(record: CalibrationRecord) -> pd.DataFrame:
    """One row per (point, metric, series): the value, the point's load in words and its role, for the chart."""
    points = {p.key: p for p in record.benchmark.points} if record.benchmark is not None else {}
    rows = []
    for order, row in enumerate(record.predicted_vs_measured):
        point = points.get(row.phase)
        if point is None:
            continue
        for field, series in SERIES.items():
            value = getattr(row, field)
            if value is None:
                continue
            rows.append(
                {
                    "order": order,
                    "point": f"{point.key} {point.load}",
                    "role": "held out" if row.role == "holdout" else "fitted",
                    "metric": f"{row.quantity} ({row.unit})",
                    "series": series,
                    "value": value,
                }
            )
    return pd.DataFrame(rows, columns=["order", "point", "role", "metric", "series", "value"])


def point_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """Measured and predicted per point, one panel per metric (log scale: latencies span orders of magnitude)."""
    base = alt.Chart(frame).encode(
        x=alt.X("point:N", sort=None, title=None),
        y=alt.Y("value:Q", scale=alt.Scale(type="log"), title=None),
        color=alt.Color("series:N", title=None),
        shape=alt.Shape("role:N", title=None),
        tooltip=["point", "metric", "series", alt.Tooltip("value:Q", format=".4g"), "role"],
    )
    layered = base.mark_line(opacity=0.5) + base.mark_point(size=60, filled=True)
    return layered.facet(column=alt.Column("metric:N", title=None)).resolve_scale(y="independent")


def _deployment_words(scenario: InferenceScenario) -> str:
    return (
        f"{scenario.model_id()} on {scenario.num_gpus}x {scenario.gpu_id()} (TP{scenario.tensor_parallel}), "
        f"runtime {scenario.runtime}, batch cap {scenario.concurrency}"
    )


def _fit_controls(scenario: InferenceScenario) -> None:
    uploads = st.file_uploader(
        "Result files",
        type=["json", "jsonl"],
        accept_multiple_files=True,
        key=UPLOAD_KEY,
        help=f"Reads {CLIENTS_READ}.",
    )
    hold_out = st.segmented_control(
        "Held out",
        list(HOLD_OUT_CHOICES),
        format_func=HOLD_OUT_CHOICES.get,
        default="middle",
        key=HOLD_OUT_KEY,
        help="Held-out runs are predicted, not fitted: their error is the honest one.",
    )
    if st.button("Fit to these results", key=FIT_KEY, disabled=not uploads, icon=":material/tune:"):
        files = [(u.name, u.getvalue()) for u in uploads or []]
        with st.spinner("Replaying each run through the traffic simulator..."):
            record, problems = fit_uploads(files, scenario, hold_out or "middle")
        st.session_state[RESULT_KEY] = (scenario, record, problems)


def _show_record(record: CalibrationRecord, on_apply: Callable[[CalibrationRecord], None]) -> None:
    st.markdown(record.summary())
    for note in record.notes:
        st.caption(note)
    st.dataframe(pd.DataFrame(table_rows(record)), hide_index=True, width="stretch")
    frame = point_frame(record)
    if not frame.empty:
        st.altair_chart(point_chart(frame))
    if record.benchmark is not None:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "factor": f.name,
                        "multiplier": f"x{f.multiplier:.3g}",
                        "fields": ", ".join(f.fields),
                        "note": f.note,
                    }
                    for f in record.benchmark.factors
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    if st.button("Apply to this session's plans", key=APPLY_KEY, icon=":material/check:"):
        on_apply(record)  # makes it this session's calibration and redraws the page


def render_benchmark_section(scenario, on_apply: Callable[[CalibrationRecord], None]) -> None:
    """The section; `on_apply(record)` makes the record this session's calibration (the page's own chooser)."""
    st.subheader("From a benchmark result", anchor=False)
    st.caption(
        "Upload what your benchmark client wrote for the deployment on the Inference page; each run is replayed "
        "through the traffic simulator and a few factors of that serving stack are fitted. No GPU needed."
    )
    if not isinstance(scenario, InferenceScenario):
        st.info("Set up the deployment on the Inference page first.", icon=":material/info:")
        return
    st.caption(f"Deployment: {_deployment_words(scenario)}.")
    _fit_controls(scenario)
    result = st.session_state.get(RESULT_KEY)
    if result is None:
        return
    fitted_for, record, problems = result
    if fitted_for != scenario:
        st.info("The deployment changed since the last fit: fit again to see it on this one.", icon=":material/info:")
        return
    for problem in problems:
        st.warning(problem, icon=":material/warning:")
    if record is not None:
        _show_record(record, on_apply)


__all__ = ["fit_uploads", "point_chart", "point_frame", "render_benchmark_section"]
