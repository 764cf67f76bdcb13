"""The Calibrate page: run a profile (progress, cancel), choose the active calibration, see predicted vs
measured with the error in %, import and export records.

The page script calls one function, ``render_calibrate_page(scenario=None)``. Other pages get the active
record from ``active_calibration()`` and pass it to ``plan(scenario, calibration=...)``.

Widget keys (all ``calibrate_``-prefixed): calibrate_device, calibrate_seconds, calibrate_model,
calibrate_label, calibrate_memory_share, calibrate_layers, calibrate_dtype, calibrate_gpu, calibrate_run,
calibrate_cancel, calibrate_active, calibrate_view, calibrate_import, calibrate_export, calibrate_delete,
calibrate_save_partial. Session keys: calibrate_job (the running profile).

The profile runs in a background thread (the script thread keeps serving reruns); an ``st.fragment``
polls its progress twice a second, and its Cancel button sets the thread's cancel event. torch is only
imported by the profile itself: without it the page says how to install it and still lists, imports
and exports records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import altair as alt
import pandas as pd
import streamlit as st

from planner import plan, units
from planner.calibration import profile, store
from planner.calibration.device import torch_available
from planner.calibration.errors import CalibrationError, ProfileAborted
from planner.calibration.record import CalibrationRecord, ProfileSettings
from planner.calibration.report import format_error, format_value, table_rows
from planner.hardware.catalog import list_accelerators
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.physics.efficiency import DEFAULT_EFFICIENCY

JOB_KEY = "calibrate_job"
SERIES_DEFAULT = "documented defaults"
SERIES_CALIBRATED = "this calibration"
SERIES_COLOURS = {SERIES_DEFAULT: "#E69F00", SERIES_CALIBRATED: "#0072B2"}  # Okabe-Ito orange / blue
GROUPS = {"s": "time", "B": "memory", "B/s": "ceilings", "FLOP/s": "ceilings"}


# ---------------------------------------------------------------------------------------------
# data and charts (no Streamlit)


def comparison_frame(record: CalibrationRecord) -> pd.DataFrame:
    """One row per (quantity, prediction series): measured, predicted, error %, display strings."""
    rows = []
    for order, row in enumerate(record.predicted_vs_measured):
        for series, predicted, error in (
            (SERIES_DEFAULT, row.predicted, row.error_fraction),
            (SERIES_CALIBRATED, row.predicted_calibrated, row.calibrated_error_fraction),
        ):
            if predicted is None:
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
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# the background profile


@dataclass
class ProfileJob:
    settings: ProfileSettings
    cancel: threading.Event = field(default_factory=threading.Event)
    fraction: float = 0.0
    message: str = "starting"
    record: CalibrationRecord | None = None
    error: str | None = None
    partial: CalibrationRecord | None = None
    done: bool = False
    started: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def run(self) -> None:

        try:
            self.record = profile.run_profile(self.settings, progress=self.progress, cancel=self.cancel)
        except ProfileAborted as exc:
            self.error, self.partial = str(exc), exc.partial
        except CalibrationError as exc:
            self.error = str(exc)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True

    def start(self) -> ProfileJob:
        self.thread = threading.Thread(target=self.run, name="headroom-calibration", daemon=True)
        self.thread.start()
        return self


def start_profile(settings: ProfileSettings) -> ProfileJob:
    job = ProfileJob(settings).start()
    st.session_state[JOB_KEY] = job
    return job


# ---------------------------------------------------------------------------------------------
# the active calibration (for every page)


@st.cache_data(max_entries=8, show_spinner=False)
def _load_record(path: str, modified: float) -> CalibrationRecord | None:
    try:
        return store.load_calibration_file(path)
    except CalibrationError:
        return None


def active_calibration() -> CalibrationRecord | None:
    """The calibration every plan should use (None: documented defaults). Re-read only when its file changes."""
    record_id = store.get_active_id()
    if record_id is None:
        return None
    try:
        path = store.record_path(record_id)
        return _load_record(str(path), path.stat().st_mtime)
    except (OSError, CalibrationError):
        return None


# ---------------------------------------------------------------------------------------------
# page sections


def _torch_available() -> bool:

    return torch_available()


def _model_options() -> list[str]:

    out = []
    for model_id in catalog_model_ids():
        arch = resolve_model(model_id)
        if not arch.is_moe and not arch.uses_mla:
            out.append(model_id)
    return out


def _run_section() -> None:
    st.markdown("##### Run a profile")
    if not _torch_available():
        st.warning(
            "Profiling needs PyTorch, which is not installed on this server. Install the profile extra "
            "(and, on a GPU machine, the CUDA build of torch first):",
            icon=":material/info:",
        )
        st.code('pip install "headroom[profile]"', language="bash")
        st.caption("Or run `python -m planner calibrate` on the GPU machine and import its JSON below.")
        return
    job: ProfileJob | None = st.session_state.get(JOB_KEY)
    if job is not None and not job.done:
        _job_progress()
        return
    models = _model_options()
    cols = st.columns([1, 1, 2])
    device = cols[0].segmented_control("Device", ["auto", "cpu", "cuda"], default="auto", key="calibrate_device")
    seconds = cols[1].number_input(
        "Time budget (s)", min_value=2, max_value=1800, value=60, step=10, key="calibrate_seconds"
    )
    model = cols[2].selectbox(
        "Proxy model (a few of its layers, real width)",
        models,
        index=models.index("llama-3.1-8b") if "llama-3.1-8b" in models else 0,
        key="calibrate_model",
    )
    with st.expander("More settings"):
        c = st.columns(4)
        share = c[0].slider("Most of the free memory to use", 0.1, 0.9, 0.5, 0.05, key="calibrate_memory_share")
        layers = c[1].number_input(
            "Proxy layers (0 = auto)", min_value=0, max_value=16, value=0, key="calibrate_layers"
        )
        dtype = c[2].selectbox("dtype", ["auto", "bf16", "fp16", "fp32"], key="calibrate_dtype")

        gpus = ["detect"] + [a.id for a in list_accelerators()]
        gpu = c[3].selectbox("Efficiencies relative to", gpus, key="calibrate_gpu")
        label = st.text_input("Label (shown in plans)", value="", max_chars=200, key="calibrate_label")
    if st.button("Run profile", type="primary", key="calibrate_run", icon=":material/speed:"):
        settings = ProfileSettings(
            device=device or "auto",
            seconds=float(seconds),
            model=model,
            memory_share=share,
            layers=int(layers) or None,
            dtype=dtype,
            reference_gpu=None if gpu == "detect" else gpu,
            label=label.strip() or None,
        )
        start_profile(settings)
        st.rerun()
    if job is not None and job.done:
        _job_result(job)


@st.fragment(run_every=0.5)
def _job_progress() -> None:
    job: ProfileJob | None = st.session_state.get(JOB_KEY)
    if job is None:
        return
    if job.done:
        st.rerun(scope="app")
    st.progress(
        min(max(job.fraction, 0.0), 1.0),
        text=f"{job.message} ({time.monotonic() - job.started:.0f} s of ~{job.settings.seconds:.0f} s)",
    )
    if job.cancel.is_set():
        st.caption("Cancelling after the current measurement…")
    elif st.button("Cancel", key="calibrate_cancel", icon=":material/stop_circle:"):
        job.cancel.set()


def _job_result(job: ProfileJob) -> None:
    if job.record is not None:
        if not st.session_state.get(f"calibrate_saved_{job.record.id}"):
            store.save_calibration(job.record)
            store.set_active_id(job.record.id)
            st.session_state[f"calibrate_saved_{job.record.id}"] = True
        st.success(
            f"Profile finished in {job.record.elapsed_seconds:.0f} s and is now the active calibration: "
            f"{job.record.label}.",
            icon=":material/check_circle:",
        )
        return
    st.error(job.error or "the profile stopped", icon=":material/error:")
    if job.partial is not None and job.partial.predicted_vs_measured:
        if st.button("Save what was measured (partial record)", key="calibrate_save_partial"):
            store.save_calibration(job.partial)
            st.toast(f"Saved partial record {job.partial.id}")


def _active_section(records: list[CalibrationRecord]) -> CalibrationRecord | None:
    st.markdown("##### Active calibration")
    ids = [""] + [r.id for r in records]
    labels = {
        r.id: f"{r.label}{'' if r.complete else ' (partial)'} · {r.device.name} · {r.created_at:%Y-%m-%d %H:%M}"
        for r in records
    }
    labels[""] = "None: documented default efficiencies"
    current = store.get_active_id()
    if current not in ids:
        current = ""

    def changed() -> None:
        store.set_active_id(st.session_state["calibrate_active"] or None)

    chosen = st.selectbox(
        "Every plan uses",
        ids,
        index=ids.index(current),
        format_func=labels.__getitem__,
        key="calibrate_active",
        on_change=changed,
    )
    return next((r for r in records if r.id == chosen), None)


def _record_section(record: CalibrationRecord, scenario=None) -> None:
    d = record.device
    if not record.complete:
        st.warning(f"Partial record: {record.stopped_reason}", icon=":material/warning:")
    cols = st.columns(4)
    cols[0].metric(
        "Device",
        d.name[:40],
        help=f"{d.kind}, torch {d.torch_version}" + (f", CUDA {d.cuda_version}" if d.cuda_version else ""),
    )
    cols[1].metric("Relative to", record.reference_gpu, help="catalog accelerator whose peaks the efficiencies scale")
    cols[2].metric(
        "Decode bandwidth",
        units.percent(record.efficiency.memory_bandwidth, 1),
        help=record.efficiency_notes.get("memory_bandwidth"),
    )
    cols[3].metric(
        "Prefill compute",
        units.percent(record.efficiency.prefill_compute, 1),
        help=record.efficiency_notes.get("prefill_compute"),
    )
    if scenario is not None:
        _scenario_effect(record, scenario)
    frame = comparison_frame(record)
    st.markdown("##### Predicted vs measured")
    st.caption(
        "Predicted (documented defaults) is what a plan assumes without calibration; predicted (this "
        "calibration) uses the fitted factors. *fitted* rows set a factor (≈0 % by construction); "
        "*held out* rows test it; *memory* rows compare exact tensor bytes with the engine's terms."
    )
    if len(frame):
        view = st.segmented_control(
            "View", ["Error %", "Times", "Memory", "Ceilings"], default="Error %", key="calibrate_view"
        )
        if view in (None, "Error %"):
            st.altair_chart(error_chart(frame), width="stretch")
        else:
            group = {"Times": "time", "Memory": "memory", "Ceilings": "ceilings"}[view]
            if (frame["group"] == group).any():
                st.altair_chart(scatter_chart(frame, group), width="stretch")
            else:
                st.caption("Nothing of this kind was measured.")
    st.dataframe(pd.DataFrame(table_rows(record)), hide_index=True, width="stretch")
    with st.expander("Fitted efficiencies, proxy model and notes"):
        st.dataframe(efficiency_frame(record), hide_index=True, width="stretch")
        st.markdown(
            f"**Memory correction:** {units.gib(record.runtime_overhead_correction_bytes)}. "
            f"{record.memory_correction_note}"
        )
        if record.proxy is not None:
            a = record.proxy.architecture
            st.markdown(
                f"**Proxy:** {a.num_layers} of {record.proxy.source_num_layers} layers of "
                f"{record.proxy.model_name}, hidden {a.hidden_size}, {a.num_attention_heads} heads, "
                f"{a.num_kv_heads} KV heads, {record.proxy.dtype}."
            )
            for cap in record.proxy.caps:
                st.markdown(f"- {cap}")
        for key, reason in record.ceilings.skipped.items():
            st.markdown(f"- skipped {key}: {reason}")
        for note in record.notes:
            st.markdown(f"- {note}")
        st.caption(f"Record {record.id}, format version {record.version}, {record.elapsed_seconds:.0f} s.")


def _scenario_effect(record: CalibrationRecord, scenario) -> None:

    try:
        before, after = plan(scenario), plan(scenario, calibration=record)
    except Exception:
        return
    gpu = scenario.gpu_id()
    if not record.applies_to(gpu):
        st.info(
            f"This calibration measured '{record.reference_gpu}', but the current scenario plans on '{gpu}': "
            "its factors are applied anyway when active.",
            icon=":material/info:",
        )
    if before.kind != "inference":
        return
    cols = st.columns(3)
    b, a = before.performance, after.performance
    cols[0].metric(
        "Decode step (current scenario)",
        units.seconds(a.decode_step_seconds),
        delta=f"{(a.decode_step_seconds / b.decode_step_seconds - 1) * 100:+.0f}% vs defaults",
        delta_color="inverse",
    )
    cols[1].metric(
        "Time to first token",
        units.seconds(a.ttft_seconds),
        delta=f"{(a.ttft_seconds / b.ttft_seconds - 1) * 100:+.0f}% vs defaults",
        delta_color="inverse",
    )
    cols[2].metric(
        "Memory per GPU",
        units.gib(after.memory.total_bytes),
        delta=units.gib(after.memory.total_bytes - before.memory.total_bytes) + " vs defaults",
        delta_color="inverse",
    )


def _files_section(records: list[CalibrationRecord], selected: CalibrationRecord | None) -> None:
    st.markdown("##### Import and export")
    cols = st.columns(2)
    with cols[0]:
        upload = st.file_uploader(
            "Import a calibration (JSON from `python -m planner calibrate --out`)",
            type=["json"],
            key="calibrate_import",
        )
        if upload is not None:
            marker = f"calibrate_imported_{upload.file_id}"
            if not st.session_state.get(marker):
                try:
                    record = store.import_calibration(upload.getvalue(), upload.name)
                except CalibrationError as exc:
                    st.error(str(exc), icon=":material/error:")
                else:
                    st.session_state[marker] = True
                    st.success(f"Imported {record.label} ({record.id}); choose it above to apply it.")
    with cols[1]:
        if selected is not None:
            st.download_button(
                "Export the selected calibration (JSON)",
                store.export_calibration(selected),
                file_name=f"{selected.id}.json",
                mime="application/json",
                key="calibrate_export",
                icon=":material/download:",
            )
            if st.button("Delete the selected calibration", key="calibrate_delete", icon=":material/delete:"):
                store.delete_calibration(selected.id)
                st.rerun()
        else:
            st.caption("Choose a calibration above to export or delete it.")


def render_calibrate_page(scenario=None) -> None:
    """The whole Calibrate page body. `scenario` (optional): the current scenario, to show what the
    active calibration changes in its plan."""
    st.caption(
        "A calibration measures this machine (matmul and bandwidth ceilings, a few layers of a real "
        "model) and replaces the documented efficiency factors with fitted ones. It is optional: without "
        "one every plan uses the documented defaults."
    )
    _run_section()
    records, problems = store.scan_calibrations()
    for problem in problems:
        st.warning(f"Skipped an unreadable calibration: {problem}", icon=":material/warning:")
    selected = _active_section(records)
    if selected is not None:
        _record_section(selected, scenario)
    elif not records:
        st.info("No calibration stored yet: run a profile above, or import one.", icon=":material/info:")
    _files_section(records, selected)


__all__ = [
    "ProfileJob",
    "active_calibration",
    "comparison_frame",
    "efficiency_frame",
    "error_chart",
    "render_calibrate_page",
    "scatter_chart",
    "start_profile",
]
