"""A corrupt catalog file gets a message naming the file; everything else keeps working."""

from __future__ import annotations

import json

import pytest

import planner.hardware.catalog as hardware
import planner.model.catalog as models
from planner import plan
from planner.errors import PlanningError
from planner.inference.scenario import InferenceScenario


@pytest.fixture
def broken_hardware(tmp_path, monkeypatch):
    data = json.loads(hardware.HARDWARE_FILE.read_text())
    data["accelerators"][1]["memory_bytes"] = -5  # h100-pcie becomes invalid
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(hardware, "HARDWARE_FILE", path)
    hardware._load.cache_clear()
    yield path
    hardware._load.cache_clear()


def test_one_bad_accelerator_is_left_out_and_named(broken_hardware):
    assert any("'h100-pcie' is invalid" in p and str(broken_hardware) in p for p in hardware.catalog_problems())
    assert plan(InferenceScenario()).memory.fits  # h100-sxm still plans
    with pytest.raises(PlanningError, match="unknown GPU 'h100-pcie'"):
        hardware.get_accelerator("h100-pcie")


def test_an_unreadable_hardware_file_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "hardware.json"
    path.write_text("{ not json")
    monkeypatch.setattr(hardware, "HARDWARE_FILE", path)
    hardware._load.cache_clear()
    try:
        with pytest.raises(PlanningError, match=str(path)):
            hardware.get_accelerator("h100-sxm")
    finally:
        hardware._load.cache_clear()


def test_a_corrupt_model_file_names_the_file_and_others_still_plan(tmp_path, monkeypatch):
    for source in models.MODELS_DIR.glob("*.json"):
        (tmp_path / source.name).write_text(source.read_text())
    (tmp_path / "llama-3.1-8b.json").write_text('{"model_type": "llama", "hidden_size": ')
    monkeypatch.setattr(models, "MODELS_DIR", tmp_path)
    for cached in (models.catalog_model_ids, models._read, models._catalog_architecture):
        cached.cache_clear()
    try:
        with pytest.raises(PlanningError, match="llama-3.1-8b.json is corrupt"):
            models.resolve_model("llama-3.1-8b")
        assert models.resolve_model("mixtral-8x7b").num_experts == 8
    finally:
        for cached in (models.catalog_model_ids, models._read, models._catalog_architecture):
            cached.cache_clear()
