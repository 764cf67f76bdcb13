"""Calibration wiring, per user: the Calibrate page chooses this session's record; that session's plans for the
GPU it measured then use it, every page says so in a warning, and no other session (a fresh AppTest is a fresh
browser session) ever sees it. A calibration of another device is not applied until the session maps it.
Records live in the app tests' own data directory (conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA_DIR, assert_clean, metric, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.calibration import store
from planner.calibration.device import torch_available
from planner.search.diagnosis import techniques
from planner.share import CALIBRATION_PARAM, encode_calibration
from planner.training.scenario import TrainingScenario
from planner.units import GIB
from tests.calibration.synthetic import fitted_record, synthetic_record
from ui import bands
from ui.calibration_view import ANY_GPU_KEY, RECORD_KEY

RECORD_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration_cpu.json"
BANNER = "Plans use calibration '{}' measured on {}"


def _stored(record):
    store.save_calibration(record)
    assert Path(store.record_path(record.id)).is_relative_to(DATA_DIR)
    try:
        yield record
    finally:
        store.delete_calibration(record.id)


@pytest.fixture
def cpu_record():
    """The CPU calibration checked in with the benchmarks (measured on 'AMD EPYC', relative to 'cpu'), stored."""
    yield from _stored(store.load_calibration_file(RECORD_FILE))


@pytest.fixture
def h100_record():
    """A calibration of the default plan's GPU (h100-sxm), stored."""
    yield from _stored(synthetic_record())


@pytest.fixture
def fitted_h100_record():
    """An H100 calibration with fitted device terms (alpha 10 us, bf16 GEMM ceiling 70 %, t0 8 us), stored."""
    yield from _stored(fitted_record(synthetic_record(label="fitted H100")))


def choose(record, at=None):
    """This session (a new one unless `at` is given) chooses `record` on the Calibrate page."""
    if at is None:
        at = open_page("calibrate")
    else:
        at.switch_page("app_pages/calibrate.py").run()
    at.selectbox(key="calibrate_active").set_value(record.id).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[RECORD_KEY] == record
    return at


def go(at, page: str):
    at.switch_page(f"app_pages/{page}.py").run()
    assert_clean(at)
    return at


def listed(at, record) -> bool:
    """Whether the Calibrate page's choice lists `record` (AppTest shows the formatted option labels)."""
    return any(option.startswith(record.label) for option in at.selectbox(key="calibrate_active").options)


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_without_a_calibration_every_page_says_so():
    at = open_page("calibrate")
    assert not at.exception
    assert any("No calibration stored yet" in i.value for i in at.info)
    assert at.selectbox(key="calibrate_active").value == ""
    for page in ("inference", "training", "tradeoffs", "accuracy"):
        at = open_page(page)
        assert_clean(at)
        assert "Calibration: **none**" in captions(at), page
        assert "Plans use calibration" not in warnings_text(at), page


def test_a_matching_calibration_changes_every_plan_of_this_session_and_is_named(h100_record):
    label = h100_record.label
    scenario = InferenceScenario()
    default, calibrated = plan(scenario), plan(scenario, calibration=h100_record)
    assert calibrated.performance.tpot_seconds != default.performance.tpot_seconds
    banner = BANNER.format(label, "NVIDIA H100 80GB HBM3 (cuda)")

    at = go(choose(h100_record), "inference")
    assert metric(at, "Time per output token") == units.seconds(calibrated.performance.tpot_seconds)
    assert banner in warnings_text(at) and "GPU 'h100-sxm': calibrated" in warnings_text(at)
    assumptions = "\n".join(m.value for m in at.markdown)
    assert f"Calibrated with '{label}'" in assumptions.replace("\\", "")
    # Its bands are the calibration's residual error, not the published spread.
    assert "calibration" in calibrated.uncertainty["performance.tpot_seconds"].basis
    assert bands.likely(calibrated, "performance.tpot_seconds", units.seconds) in [m.delta for m in at.metric]

    go(at, "training")
    expected = plan(TrainingScenario(), calibration=h100_record)
    assert metric(at, "Step time") == units.seconds(expected.performance.step_seconds)
    assert banner in warnings_text(at)

    go(at, "tradeoffs")
    assert banner in warnings_text(at)
    frame = [f.value for f in at.dataframe if "Variant" in f.value.columns][0]
    effects = [e for e in techniques(scenario, h100_record) if e.applicable]
    assert list(frame["Δ memory per GPU (GiB)"]) == pytest.approx([e.delta_memory_bytes / GIB for e in effects])

    go(at, "inference").button(key="inference_action_pin").click().run()
    for page in ("compare", "review", "accuracy"):
        go(at, page)
        assert banner in warnings_text(at), page
    go(at, "review")
    assert units.seconds(calibrated.performance.tpot_seconds) in list(at.table[0].value["Value"])

    go(at, "calibrate")
    assert at.selectbox(key="calibrate_active").value == h100_record.id
    assert metric(at, "Decode step (current scenario)") == units.seconds(calibrated.performance.decode_step_seconds)

    # Back to none: this session's plans are the documented defaults again.
    at.selectbox(key="calibrate_active").set_value("").run()
    go(at, "inference")
    assert metric(at, "Time per output token") == units.seconds(default.performance.tpot_seconds)
    assert "Calibration: **none**" in captions(at)


def test_a_choice_in_one_session_never_reaches_another(h100_record):
    choose(h100_record)
    other = open_page()  # a second browser: the stored file and the first session's choice change nothing
    assert_clean(other)
    assert metric(other, "Time per output token") == units.seconds(plan(InferenceScenario()).performance.tpot_seconds)
    assert "Calibration: **none**" in captions(other) and "Plans use calibration" not in warnings_text(other)
    assert RECORD_KEY not in other.session_state or other.session_state[RECORD_KEY] is None


def test_a_cpu_calibration_reaches_an_h100_plan_only_when_mapped(cpu_record):
    scenario = InferenceScenario()
    default = plan(scenario)
    mapped = plan(scenario, cpu_record, calibration_any_gpu=True)

    at = go(choose(cpu_record), "inference")
    text = warnings_text(at)
    assert BANNER.format(cpu_record.label, "AMD EPYC (cpu)") in text
    assert "GPU 'h100-sxm': **not applied** (it measured 'cpu', not 'h100-sxm')" in text
    assert metric(at, "Time per output token") == units.seconds(default.performance.tpot_seconds)
    assert metric(at, "Time to first token") == units.seconds(default.performance.ttft_seconds)

    go(at, "calibrate")
    assert any("Not applied to the current scenario" in w.value for w in at.warning)
    at.toggle(key="calibrate_any_gpu").set_value(True).run()
    assert not at.exception and at.session_state[ANY_GPU_KEY] is True
    go(at, "inference")
    text = warnings_text(at)
    assert "GPU 'h100-sxm': **mapped**" in text and "measured on AMD EPYC (cpu)" in text
    assert mapped.warnings[0] in text  # the plan's own warning, naming both devices
    assert metric(at, "Time per output token") == units.seconds(mapped.performance.tpot_seconds)
    assert metric(at, "Time per output token") != units.seconds(default.performance.tpot_seconds)

    # Choosing again starts unmapped: mapping is a decision about one choice, not a setting of the session.
    go(at, "calibrate").selectbox(key="calibrate_active").set_value("").run()
    choose(cpu_record, at)
    assert at.session_state[ANY_GPU_KEY] is False and at.toggle(key="calibrate_any_gpu").value is False


def test_a_link_carries_the_calibration_into_a_fresh_session(h100_record, cpu_record):
    scenario = InferenceScenario()
    # The share link of a session with a calibration carries it.
    at = go(choose(h100_record), "inference")
    value = encode_calibration(h100_record)
    assert any(f"{CALIBRATION_PARAM}={value}" in c.value for c in at.code)

    fresh = open_page("inference", {CALIBRATION_PARAM: value})
    assert_clean(fresh)
    assert "(from the link you opened)" in warnings_text(fresh)
    expected = plan(scenario, h100_record)
    assert metric(fresh, "Time per output token") == units.seconds(expected.performance.tpot_seconds)

    # A CPU calibration in a link is announced and not applied to the H100 plan (links never carry a mapping).
    fresh = open_page("inference", {CALIBRATION_PARAM: encode_calibration(cpu_record)})
    assert BANNER.format(cpu_record.label, "AMD EPYC (cpu)") in warnings_text(fresh)
    assert "**not applied**" in warnings_text(fresh)
    assert metric(fresh, "Time per output token") == units.seconds(plan(scenario).performance.tpot_seconds)

    # A broken one is reported by name and the plan is uncalibrated.
    fresh = open_page("review", {CALIBRATION_PARAM: value[:-30]})
    assert not fresh.exception
    assert "The link's calibration could not be read" in warnings_text(fresh)
    assert units.seconds(plan(scenario).performance.tpot_seconds) in list(fresh.table[0].value["Value"])


def test_removing_is_per_session_and_deleting_the_file_needs_confirmation(cpu_record):
    keeper = go(choose(cpu_record), "calibrate")
    at = choose(cpu_record)
    at.button(key="calibrate_remove").click().run()
    assert at.session_state[RECORD_KEY] is None
    assert not listed(at, cpu_record)
    assert store.record_path(cpu_record.id).exists()  # the shared file stays
    assert listed(open_page("calibrate"), cpu_record)  # and other sessions still list it

    at = choose(cpu_record)
    at.button(key="calibrate_delete").click().run()
    assert store.record_path(cpu_record.id).exists()  # one click only asks
    assert any("from this server's store?" in w.value for w in at.warning)
    at.button(key="calibrate_delete_cancel").click().run()
    assert store.record_path(cpu_record.id).exists()
    at.button(key="calibrate_delete").click().run()
    at.button(key="calibrate_delete_confirm").click().run()
    assert not at.exception and not store.record_path(cpu_record.id).exists()
    # A session that chose it before keeps its own copy: deleting a file changes nobody's numbers.
    go(keeper, "calibrate")
    assert keeper.session_state[RECORD_KEY] == cpu_record
    assert keeper.selectbox(key="calibrate_active").value == cpu_record.id


def test_calibrate_page_says_how_to_profile_and_links_accuracy():
    at = open_page("calibrate")
    assert not at.exception
    if not torch_available():
        assert any('pip install "headroom[profile]"' in c.value for c in at.code)
    else:
        assert at.number_input(key="calibrate_seconds").value == 60
    assert any(link.label.startswith("How accurate") for link in at.get("page_link"))


def test_fitted_alpha_ceiling_and_t0_are_shown_and_reach_this_gpus_plans(fitted_h100_record):
    record = fitted_h100_record
    at = choose(record)
    table = [d.value for d in at.dataframe if "factor" in d.value.columns][0].set_index("factor")
    assert table.loc["link_latency_seconds (alpha)", "calibrated"] == units.seconds(10e-6)
    assert table.loc["gemm_ceiling bf16 (MAMF / peak)", "calibrated"] == units.percent(0.70, 2)
    assert table.loc["gemm_tail_seconds bf16 (t0)", "calibrated"] == units.seconds(8e-6)
    # The default inference plan (H100, bf16) reads the fitted GEMM curve: its TTFT is not the unfitted record's.
    scenario = InferenceScenario()
    fitted, unfitted = plan(scenario, calibration=record), plan(scenario, calibration=synthetic_record())
    assert fitted.performance.ttft_seconds != unfitted.performance.ttft_seconds
    go(at, "inference")
    assert metric(at, "Time per output token") == units.seconds(fitted.performance.tpot_seconds)
