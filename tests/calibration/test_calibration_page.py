"""The Calibrate page: chart data and charts (ui/calibration_charts.py), the background job (ui/calibration_job.py),
and the page in AppTest (ui/calibration_view.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from planner.calibration import store
from planner.calibration.errors import ProfileAborted
from planner.calibration_record import ProfileSettings
from ui import calibration_charts as charts
from ui import calibration_job as job_module
from ui import calibration_view as view

from .synthetic import fitted_record, synthetic_record


def test_comparison_frame_has_both_prediction_series_with_errors_in_percent():
    record = synthetic_record()
    frame = charts.comparison_frame(record)
    assert set(frame["series"]) == {charts.SERIES_DEFAULT, charts.SERIES_CALIBRATED}
    row = record.predicted_vs_measured[-1]
    default = frame[(frame["quantity"] == row.quantity) & (frame["series"] == charts.SERIES_DEFAULT)].iloc[0]
    assert default["error_pct"] == pytest.approx(row.error_fraction * 100)
    assert set(frame["group"]) <= {"time", "memory", "ceilings"}


def test_charts_compile_to_vega_lite():
    frame = charts.comparison_frame(synthetic_record())
    spec = charts.error_chart(frame).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "symlog"
    for group in ("time", "ceilings"):
        scatter = charts.scatter_chart(frame, group).to_dict()
        assert scatter["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"


def test_the_background_job_reports_success_and_failure(monkeypatch):
    from planner.calibration import profile

    record = synthetic_record()

    def finished(settings, progress, cancel):
        progress(0.5, "halfway")
        return record

    monkeypatch.setattr(profile, "run_profile", finished)
    job = job_module.ProfileJob(ProfileSettings()).start()
    job.thread.join(10)
    assert job.done and job.record == record and job.message == "halfway" and job.error is None

    def stopped(settings, progress, cancel):
        raise ProfileAborted("calibration stopped: out of memory. Measured so far: nothing.", partial=record)

    monkeypatch.setattr(profile, "run_profile", stopped)
    job = job_module.ProfileJob(ProfileSettings()).start()
    job.thread.join(10)
    assert job.done and job.record is None and "out of memory" in job.error and job.partial == record


def _page():
    from planner.inference.scenario import InferenceScenario
    from ui.calibration_view import render_calibrate_page

    render_calibrate_page(InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1))


def test_the_page_with_an_active_calibration():
    record = synthetic_record()
    store.save_calibration(record)
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception
    assert at.selectbox(key="calibrate_active").value == ""  # stored is not chosen: a fresh session plans bare
    at.selectbox(key="calibrate_active").set_value(record.id).run()
    assert not at.exception
    assert at.selectbox(key="calibrate_active").value == record.id
    assert at.session_state[view.RECORD_KEY] == record
    metrics = {m.label: m for m in at.metric}
    assert metrics["Relative to"].value == "h100-sxm"
    assert "vs defaults" in metrics["Decode step (current scenario)"].delta
    assert len(at.dataframe) >= 2
    at.segmented_control(key="calibrate_view").set_value("Times").run()
    assert not at.exception
    at.selectbox(key="calibrate_active").select_index(0).run()  # back to the documented defaults
    assert not at.exception and at.session_state[view.RECORD_KEY] is None


def test_the_page_without_torch_says_how_to_enable_profiling(monkeypatch):
    monkeypatch.setattr(view, "_torch_available", lambda: False)
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception
    assert any("headroom[profile]" in c.value for c in at.code)
    assert any("No calibration stored yet" in i.value for i in at.info)


def test_the_page_offers_a_run_with_settings():
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception
    assert at.button(key="calibrate_run").label == "Run profile"
    assert at.selectbox(key="calibrate_model").value == "llama-3.1-8b"
    assert "deepseek-v3" not in at.selectbox(key="calibrate_model").options  # MLA/MoE proxies are not offered


def test_the_fitted_device_terms_are_listed_beside_the_published_values():
    frame = view.efficiency_frame(fitted_record()).set_index("factor")
    assert frame.loc["link_latency_seconds (alpha)", "calibrated"] == "10 µs"
    assert frame.loc["link_latency_seconds (alpha)", "documented default"] == "3.0 µs"
    assert frame.loc["gemm_ceiling bf16 (MAMF / peak)", "calibrated"] == "70.00%"
    assert frame.loc["gemm_ceiling bf16 (MAMF / peak)", "documented default"] == "80.33%"
    assert frame.loc["gemm_tail_seconds bf16 (t0)", "calibrated"] == "8.0 µs"
    assert "h100-sxm" in frame.loc["gemm_tail_seconds bf16 (t0)", "how"]
    assert not view.efficiency_frame(synthetic_record())["factor"].str.startswith("gemm_").any()


def test_the_page_shows_the_fitted_terms_of_the_active_calibration():
    record = fitted_record()
    store.save_calibration(record)
    at = AppTest.from_function(_page, default_timeout=30).run()
    at.selectbox(key="calibrate_active").set_value(record.id).run()
    assert not at.exception
    factors = [set(d.value["factor"]) for d in at.dataframe if "factor" in d.value.columns]
    assert factors and {"link_latency_seconds (alpha)", "gemm_ceiling bf16 (MAMF / peak)"} <= factors[0]
