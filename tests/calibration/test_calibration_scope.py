"""A calibration is scoped to the device it measured (plan(), the CLI) and to its user (links carry it; a
mapping to other GPUs is the caller's explicit choice, never stored). No torch, no Streamlit server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import InferenceScenario, PlanningError, plan
from planner.calibration import store
from planner.calibration.errors import CalibrationFileError
from planner.cli.main import main as cli_main
from planner.inference.plan import plan_inference
from planner.plan import calibration_for_gpu, check_calibration
from planner.share import (
    CALIBRATION_PARAM,
    calibration_fingerprint,
    decode_calibration,
    encode_calibration,
    encode_inline,
    share_url,
)
from planner.training.scenario import TrainingScenario
from ui.calibration_view import calibration_from_link

from .synthetic import synthetic_record

ROOT = Path(__file__).resolve().parents[2]
CPU_FILE = ROOT / "benchmarks" / "calibration_cpu.json"


@pytest.fixture(scope="module")
def cpu():
    """The committed CPU profile: measured on 'AMD EPYC' (cpu), efficiencies relative to catalog 'cpu'."""
    record = store.load_calibration_file(CPU_FILE)
    assert (record.device.kind, record.device.name, record.reference_gpu) == ("cpu", "AMD EPYC", "cpu")
    return record


H100 = InferenceScenario()  # the default plan: 4x h100-sxm


# ------------------------------------------------------------------------------------------- engine


def test_a_cpu_calibration_is_refused_for_an_h100_plan_naming_both(cpu):
    assert H100.gpu_id() == "h100-sxm"
    with pytest.raises(PlanningError) as info:
        plan(H100, cpu)
    message = str(info.value)
    for part in ("'AMD EPYC (cpu)'", "plans for 'cpu'", "not 'h100-sxm'", "map it explicitly"):
        assert part in message
    with pytest.raises(PlanningError, match="not 'h100-sxm'"):
        plan(H100.model_dump(mode="json"), cpu)  # the dict path too
    with pytest.raises(PlanningError, match="not 'h100-sxm'"):
        plan(TrainingScenario(gpu="h100-sxm"), cpu)


def test_mapping_applies_it_with_a_warning_naming_both_devices(cpu):
    mapped = plan(H100, cpu, calibration_any_gpu=True)
    warning = mapped.warnings[0]
    assert "'AMD EPYC (cpu)'" in warning and "'h100-sxm'" in warning and "mapped explicitly" in warning
    assert mapped.calibration == cpu.label
    # Independent path: the same efficiencies in a record that says it measured the H100, applied without
    # any mapping by the inference planner itself, give identical numbers; only the warning differs.
    twin = cpu.model_copy(update={"reference_gpu": "h100-sxm"})
    direct = plan_inference(H100, twin)
    assert mapped.performance == direct.performance and mapped.memory == direct.memory
    assert mapped.warnings[1:] == direct.warnings
    # The record mapped once (for_any_gpu) is the same request as the keyword.
    assert plan(H100, cpu.for_any_gpu()) == mapped
    # The symptom, bounded: the CPU's decode bandwidth efficiency is far below the default, so the
    # mapped TPOT is many times the uncalibrated one (it was 39 ms -> 3.62 s when applied silently).
    assert mapped.performance.tpot_seconds > 5 * plan(H100).performance.tpot_seconds


def test_the_same_device_needs_no_mapping_and_gets_no_warning(cpu):
    record = synthetic_record()
    assert record.reference_gpu == "h100-sxm"
    result = plan(H100, record)
    assert result.calibration == record.label
    assert not any("mapped explicitly" in w for w in result.warnings)
    assert result.warnings == plan(H100, record, calibration_any_gpu=True).warnings  # mapping is a no-op here
    on_cpu = plan(InferenceScenario(gpu="cpu"), cpu)
    assert on_cpu.calibration == cpu.label and not any("mapped" in w for w in on_cpu.warnings)


def test_calibration_for_gpu_and_check_calibration(cpu):
    assert calibration_for_gpu("h100-sxm", None) is None
    assert calibration_for_gpu("cpu", cpu) is cpu
    assert calibration_for_gpu("h100-sxm", cpu) is None
    mapped = cpu.for_any_gpu()
    assert calibration_for_gpu("h100-sxm", mapped) is mapped
    assert check_calibration("cpu", cpu) is None and check_calibration("h100-sxm", None) is None
    assert "'h100-sxm'" in (check_calibration("h100-sxm", mapped) or "")
    with pytest.raises(PlanningError):
        check_calibration("a100-80gb", cpu)
    assert mapped.as_measured() == cpu and cpu.for_any_gpu().mapped_to_any_gpu and not cpu.mapped_to_any_gpu


def test_the_cli_refuses_then_maps_with_the_flag(cpu, tmp_path, capsys):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"model": "llama-3.1-70b", "gpu": "h100-sxm", "num_gpus": 4, "tensor_parallel": 4}))
    assert cli_main(["plan", str(scenario), "--calibration", str(CPU_FILE)]) == 2
    err = capsys.readouterr().err
    assert "'AMD EPYC (cpu)'" in err and "not 'h100-sxm'" in err and "--calibration-any-gpu" in err
    assert cli_main(["plan", str(scenario), "--calibration", str(CPU_FILE), "--calibration-any-gpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "'AMD EPYC (cpu)'" in out["warnings"][0] and "'h100-sxm'" in out["warnings"][0]
    expected = plan(H100, cpu, calibration_any_gpu=True)
    assert out["performance"]["output_tokens_per_second"] == pytest.approx(
        expected.performance.output_tokens_per_second
    )
    assert cli_main(["plan", str(scenario)]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == plan(H100).warnings


# -------------------------------------------------------------------------------------------- store


def test_files_never_carry_the_mapping(cpu, tmp_path):
    text = store.export_calibration(cpu.for_any_gpu())
    assert "mapped_to_any_gpu" not in text
    assert store.parse_calibration(text, "x.json") == cpu
    data = json.loads(text)
    data["mapped_to_any_gpu"] = True
    path = tmp_path / "mapped.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationFileError) as info:
        store.load_calibration_file(path)
    assert str(path) in str(info.value) and "caller's explicit choice" in str(info.value)


def test_the_store_has_no_server_wide_choice(cpu, data_dir):
    store.save_calibration(cpu)
    # A file from an older version that chose one for the whole server is neither read nor reported.
    (data_dir / "calibrations" / "active.json").write_text(json.dumps({"active": cpu.id}))
    records, problems = store.scan_calibrations()
    assert records == [cpu] and problems == []
    assert not hasattr(store, "set_active_id") and not hasattr(store, "load_active")
    assert store.delete_calibration(cpu.id) and store.list_calibrations() == []


# --------------------------------------------------------------------------------------------- link


def test_a_link_carries_the_record_and_its_fingerprint(cpu):
    value = encode_calibration(cpu)
    fingerprint, record_id, _ = value.split("~")
    assert (fingerprint, record_id) == (calibration_fingerprint(cpu), cpu.id) and len(fingerprint) == 12
    # The checked-in CPU record is 21.9 kB of pretty JSON; compressed in the link it is a few kB.
    assert 2_000 < len(value) < 8_000
    link = decode_calibration(value)
    assert link.record == cpu and link.fingerprint == fingerprint
    assert encode_calibration(cpu.for_any_gpu()) == value  # a link never carries the sender's mapping
    url = share_url(H100, calibration=cpu)
    assert f"{CALIBRATION_PARAM}={value}" in url  # '~' and base64url need no escaping


def test_a_fingerprint_ignores_key_order_but_not_content(cpu):
    data = json.loads(store.export_calibration(cpu))
    reordered = store.record_from_data(dict(reversed(list(data.items()))), "reordered")
    assert calibration_fingerprint(reordered) == calibration_fingerprint(cpu)
    data["efficiency"]["memory_bandwidth"] *= 0.5
    assert calibration_fingerprint(store.record_from_data(data, "edited")) != calibration_fingerprint(cpu)


def test_an_altered_or_foreign_link_value_is_refused_with_a_reason(cpu):
    fingerprint, record_id, body = encode_calibration(cpu).split("~")
    other = encode_calibration(synthetic_record()).split("~")[2]
    with pytest.raises(ValueError, match="does not match"):
        decode_calibration(f"{fingerprint}~{record_id}~{other}")
    for bad in ("", "nonsense", f"{fingerprint}~../etc~{body}", f"{fingerprint}~{record_id}~{body[:-40]}"):
        with pytest.raises(ValueError):
            decode_calibration(bad)
    foreign = encode_inline({"kind": "inference"})[4:]
    with pytest.raises(ValueError, match="not a Headroom calibration record"):
        decode_calibration(f"{fingerprint}~{record_id}~{foreign}")


def test_a_record_too_large_travels_as_its_id_and_is_looked_up(cpu, data_dir):
    value = encode_calibration(cpu, max_chars=100)
    assert value == f"{calibration_fingerprint(cpu)}~{cpu.id}"
    record, notice = calibration_from_link(value)
    assert record is None and notice is not None and "not stored on this server" in notice and cpu.id in notice
    store.save_calibration(cpu)
    assert calibration_from_link(value) == (cpu, None)
    edited = cpu.model_copy(update={"label": "edited on this server"})
    store.save_calibration(edited)
    record, notice = calibration_from_link(value)
    assert record is None and notice is not None and "differs" in notice
    record, notice = calibration_from_link("garbage")
    assert record is None and notice is not None and "could not be read" in notice
