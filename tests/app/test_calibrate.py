"""Calibration wiring: the Calibrate page chooses the active record; every page's plan then uses it, says so in
a caption, and names it in the assumptions. Records live in the test's own data directory (conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA_DIR, assert_clean, metric, open_page

from planner import InferenceScenario, plan, units
from planner.calibration import store
from planner.calibration.device import torch_available
from planner.search.diagnosis import techniques
from planner.training.scenario import TrainingScenario
from planner.units import GIB
from ui import bands

RECORD_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration_cpu.json"


@pytest.fixture
def active_record():
    """The CPU calibration checked in with the benchmarks, stored and made active; removed afterwards."""
    record = store.load_calibration_file(RECORD_FILE)
    store.save_calibration(record)
    store.set_active_id(record.id)
    assert Path(store.record_path(record.id)).is_relative_to(DATA_DIR)
    try:
        yield record
    finally:
        store.delete_calibration(record.id)
        store.set_active_id(None)


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_without_a_calibration_every_page_says_so():
    at = open_page("calibrate")
    assert not at.exception
    assert any("No calibration stored yet" in i.value for i in at.info)
    assert at.selectbox(key="calibrate_active").value == ""
    for page in ("inference", "training", "tradeoffs"):
        at = open_page(page)
        assert_clean(at)
        assert "Calibration: **none**" in captions(at), page


def test_active_calibration_changes_every_plan_and_is_named(active_record):
    label = active_record.label
    scenario = InferenceScenario()
    default, calibrated = plan(scenario), plan(scenario, calibration=active_record)
    assert calibrated.performance.tpot_seconds != default.performance.tpot_seconds

    at = open_page()
    assert_clean(at)
    assert metric(at, "Time per output token") == units.seconds(calibrated.performance.tpot_seconds)
    assert metric(at, "Time per output token") != units.seconds(default.performance.tpot_seconds)
    assert label in captions(at)
    assumptions = "\n".join(m.value for m in at.markdown)
    assert f"Calibrated with '{label}'" in assumptions.replace("\\", "")
    # Its bands are the calibration's residual error, not the published spread.
    band = calibrated.uncertainty["performance.tpot_seconds"]
    assert "calibration" in band.basis
    assert bands.likely(calibrated, "performance.tpot_seconds", units.seconds) in [m.delta for m in at.metric]

    at = open_page("training")
    assert_clean(at)
    expected = plan(TrainingScenario(), calibration=active_record)
    assert metric(at, "Step time") == units.seconds(expected.performance.step_seconds)
    assert label in captions(at)

    at = open_page("tradeoffs")
    assert_clean(at)
    assert label in captions(at)
    frame = [f.value for f in at.dataframe if "Variant" in f.value.columns][0]
    effects = [e for e in techniques(scenario, active_record) if e.applicable]
    assert list(frame["Δ memory per GPU (GiB)"]) == pytest.approx([e.delta_memory_bytes / GIB for e in effects])
    assert list(frame["Δ TPOT (ms)"]) == pytest.approx([e.delta_time_seconds * 1e3 for e in effects])

    at = open_page("review")
    assert not at.exception
    assert label in captions(at)
    numbers = at.table[0].value
    assert units.seconds(calibrated.performance.tpot_seconds) in list(numbers["Value"])

    at = open_page("calibrate")
    assert not at.exception
    assert at.selectbox(key="calibrate_active").value == active_record.id
    assert metric(at, "Decode step (current scenario)") == units.seconds(calibrated.performance.decode_step_seconds)


def test_choosing_none_on_the_calibrate_page_deactivates_it(active_record):
    at = open_page("calibrate")
    at.selectbox(key="calibrate_active").set_value("").run()
    assert not at.exception
    assert store.get_active_id() is None
    at = open_page()
    assert metric(at, "Time per output token") == units.seconds(plan(InferenceScenario()).performance.tpot_seconds)
    assert "Calibration: **none**" in captions(at)


def test_calibrate_page_says_how_to_profile_and_links_accuracy():
    at = open_page("calibrate")
    assert not at.exception
    if not torch_available():
        assert any('pip install "headroom[profile]"' in c.value for c in at.code)
    else:
        assert at.number_input(key="calibrate_seconds").value == 60
    assert any(link.label.startswith("How accurate") for link in at.get("page_link"))
