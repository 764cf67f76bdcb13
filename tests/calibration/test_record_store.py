"""The calibration record and its store: JSON round trip, atomic writes, clear errors naming the file,
the data directory, and plan() taking a record. No torch needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from planner import plan
from planner.calibration import store
from planner.calibration.errors import CalibrationFileError
from planner.calibration.report import markdown_report, text_table
from planner.calibration_record import CALIBRATION_VERSION
from planner.cli.main import main as cli_main
from planner.inference.scenario import InferenceScenario
from planner.physics.memory import GIB

from .synthetic import synthetic_record

ROOT = Path(__file__).resolve().parents[2]


def test_json_round_trip_is_exact():
    record = synthetic_record()
    text = store.export_calibration(record)
    data = json.loads(text)
    assert data["format"] == "headroom-calibration" and data["version"] == CALIBRATION_VERSION
    assert "error_fraction" in data["predicted_vs_measured"][0]  # derived values are written for readers
    assert store.parse_calibration(text, "x.json") == record


def test_save_list_load_delete(data_dir):
    old = synthetic_record("older", datetime(2024, 1, 1, tzinfo=UTC))
    new = synthetic_record("newer", datetime(2025, 6, 1, tzinfo=UTC))
    path = store.save_calibration(old)
    assert path == data_dir / "calibrations" / f"{old.id}.json"
    store.save_calibration(new)
    assert [r.label for r in store.list_calibrations()] == ["newer", "older"]
    assert store.load_calibration(old.id) == old
    assert store.delete_calibration(new.id)
    assert not store.delete_calibration(new.id)
    assert [r.label for r in store.list_calibrations()] == ["older"]


def test_writes_are_atomic(data_dir, monkeypatch):
    record = synthetic_record()
    path = store.save_calibration(record)
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.save_calibration(synthetic_record("changed"))
    assert path.read_text() == before  # the old record is intact
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", ["corrupt", "not valid JSON", "line 1"]),
        ('{"kind": "inference", "model": "llama-3.1-8b"}', ["not a Headroom calibration record"]),
        ("[1, 2]", ["not a Headroom calibration record"]),
    ],
)
def test_corrupt_or_foreign_files_are_named_in_the_error(tmp_path, content, words):
    path = tmp_path / "mine.json"
    path.write_text(content)
    with pytest.raises(CalibrationFileError) as info:
        store.load_calibration_file(path)
    assert str(path) in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_other_versions_are_refused_with_both_versions_named(tmp_path):
    data = json.loads(store.export_calibration(synthetic_record()))
    data["version"] = 2
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationFileError) as info:
        store.load_calibration_file(path)
    message = str(info.value)
    assert str(path) in message and "version 2" in message and f"reads version {CALIBRATION_VERSION}" in message


def test_invalid_fields_are_explained(tmp_path):
    data = json.loads(store.export_calibration(synthetic_record()))
    data["efficiency"]["memory_bandwidth"] = 1.7
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationFileError) as info:
        store.load_calibration_file(path)
    assert str(path) in str(info.value) and "efficiency.memory_bandwidth" in str(info.value)


def test_missing_files_and_bad_ids(tmp_path):
    with pytest.raises(CalibrationFileError, match="cannot read calibration file .*nope.json"):
        store.load_calibration_file(tmp_path / "nope.json")
    with pytest.raises(CalibrationFileError, match="not a calibration id"):
        store.load_calibration("../../etc/passwd")
    with pytest.raises(CalibrationFileError, match="no stored calibration"):
        store.load_calibration("absent-id")


def test_unreadable_files_in_the_store_are_reported_not_fatal(data_dir):
    store.save_calibration(synthetic_record())
    (data_dir / "calibrations" / "broken.json").write_text("{")
    records, problems = store.scan_calibrations()
    assert len(records) == 1 and len(problems) == 1 and "broken.json" in problems[0]


def test_data_directory_env_xdg_and_fallback(monkeypatch, tmp_path):
    monkeypatch.setenv(store.DATA_DIR_ENV, str(tmp_path / "x"))
    assert store.data_dir() == tmp_path / "x"
    monkeypatch.delenv(store.DATA_DIR_ENV)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert store.data_dir() == Path.home() / ".local" / "share" / "headroom"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.data_dir() == tmp_path / "xdg" / "headroom"


def test_plan_applies_the_record_and_says_so():
    record = synthetic_record(correction=1.5 * GIB)
    scenario = InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1)
    before, after = plan(scenario), plan(scenario, calibration=record)
    assert before.calibration is None and after.calibration == record.label
    assert any(record.label in line for line in after.assumptions)
    assert after.memory.components["runtime_overhead_bytes"] == pytest.approx(
        before.memory.components["runtime_overhead_bytes"] + 1.5 * GIB
    )
    assert after.performance.decode_step_seconds != before.performance.decode_step_seconds
    assert record.applies_to("h100-sxm") and not record.applies_to("a100-80gb")


def test_plan_training_takes_the_record_too():
    training = pytest.importorskip("planner.training.plan")
    from planner.training.scenario import TrainingScenario

    record = synthetic_record()
    scenario = TrainingScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=8)
    result = plan(scenario, calibration=record)
    assert result.calibration == record.label
    assert training is not None


def test_cli_plan_reads_a_calibration_file_and_names_a_bad_one(tmp_path, capsys):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h100-sxm", "num_gpus": 1, "tensor_parallel": 1}))
    good = store.write_calibration_file(synthetic_record(), tmp_path / "cal.json")
    assert cli_main(["plan", str(scenario), "--calibration", str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"] == "synthetic H100"
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert cli_main(["plan", str(scenario), "--calibration", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "corrupt" in err


def test_reports_render():
    record = synthetic_record()
    text = text_table(record)
    assert "held out" in text and "fitted" in text
    md = markdown_report(record, "python -m planner calibrate --device cuda")
    assert md.startswith("# Calibration: synthetic H100")
    assert "| quantity | kind | measured |" in md and "python -m planner calibrate --device cuda" in md


def test_the_calibration_package_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"  # any `import torch` now raises ImportError
        "import planner, planner.calibration, planner.calibration_record, planner.calibration.store\n"
        "import planner.calibration.fit, planner.calibration.comparison, planner.calibration.report, planner.cli.calibrate\n"
        "import planner.calibration.device, planner.calibration.microbench, planner.calibration.proxy\n"
        "import planner.calibration.profile\n"
        "from planner.calibration.profile import run_profile\n"
        "from planner.calibration.errors import ProfileUnavailable\n"
        "try:\n"
        "    run_profile()\n"
        "except ProfileUnavailable as exc:\n"
        "    assert 'pip install' in str(exc), exc\n"
        "    print('unavailable:', exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "unavailable: profiling needs PyTorch" in result.stdout
    code = "import sys, planner, planner.calibration; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def test_a_second_profile_while_one_runs_is_refused_and_a_stale_lock_is_taken_over(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys

    from planner.calibration.errors import ProfileUnavailable
    from planner.calibration.lock import LOCK_FILE, exclusive_profile

    monkeypatch.setenv(store.DATA_DIR_ENV, str(tmp_path))
    with exclusive_profile("dev"), pytest.raises(ProfileUnavailable, match="already running in this app"):
        with exclusive_profile("dev"):
            pass
    assert not (tmp_path / LOCK_FILE).exists()  # released
    # A lock held by another live process refuses the run and names it.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": holder.pid}))
        with pytest.raises(ProfileUnavailable, match=f"process {holder.pid}"), exclusive_profile("dev"):
            pass
    finally:
        holder.kill()
        holder.wait()
    # The holder is gone (a killed run): its stale lock is taken over.
    with exclusive_profile("dev"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] != holder.pid
