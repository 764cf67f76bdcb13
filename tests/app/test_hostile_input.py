"""Hostile links and uploads on every page: a warning naming the problem, the default used, no exception."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from conftest import open_page, warnings_text

ROOT = Path(__file__).resolve().parents[2]

FUZZ = [
    ("concurrency", "🙂"),
    ("concurrency", "9" * 400),
    ("concurrency", "-1"),
    ("concurrency", "1e308"),
    ("concurrency", "nan"),
    ("prompt_tokens", "0x10"),
    ("gpu", "'; DROP TABLE gpus; --"),
    ("model", "cfg:" + "A" * 5000),
    ("model", "../../etc/passwd"),
    ("label", "<script>alert(1)</script>" * 100),
    ("num_gpus", "1000000000"),
    ("tensor_parallel", "0"),
    ("unknown_knob", "1"),
]


@pytest.mark.parametrize("field, value", FUZZ)
def test_fuzzed_inference_link_warns_and_never_raises(field, value):
    at = open_page(params={f"inference_{field}": value})
    assert not at.exception
    if field != "label":  # a long label is valid text (shown as text, never as HTML)
        assert f"inference_{field}" in warnings_text(at)


@pytest.mark.parametrize(
    "field, value",
    [
        ("zero_stage", "7"),
        ("micro_batch_size", "-3"),
        ("precision", "fp4"),
        ("global_batch_size", "🙂"),
        ("optimizer", "lion"),
    ],
)
def test_fuzzed_training_link_warns_and_never_raises(field, value):
    at = open_page("training", params={f"training_{field}": value})
    assert not at.exception
    assert f"training_{field}" in warnings_text(at)


def test_repeated_parameters_use_the_last_value():
    at = open_page(params={"inference_concurrency": ["8", "16"]})
    assert not at.exception
    assert at.number_input(key="inference_concurrency").value == 16


@pytest.mark.parametrize(
    "payload, fragment",
    [
        (b"[" * 50_000 + b"]" * 50_000, "nested"),
        (b"\xff\xfe garbage", "UTF-8"),
        (json.dumps({"model_type": "llama", "hidden_size": "big"}).encode(), "hidden_size"),
        (json.dumps({"model_type": "mamba"}).encode(), "not supported"),
        (json.dumps([1, 2, 3]).encode(), "JSON object"),
        (
            json.dumps(
                {
                    "model_type": "llama",
                    "hidden_size": 10**9,
                    "intermediate_size": 1,
                    "num_hidden_layers": 1,
                    "num_attention_heads": 1,
                    "vocab_size": 1,
                }
            ).encode(),
            "hidden_size",
        ),
    ],
)
def test_hostile_config_uploads_are_explained(payload, fragment):
    at = open_page()
    at.radio(key="inference_pick_model_source").set_value("Upload").run()
    at.file_uploader(key="inference_pick_config_file").set_value(("config.json", payload, "application/json"))
    at.run()
    assert not at.exception
    assert any(fragment in e.value for e in at.error), [e.value for e in at.error]


def test_upload_size_limit_is_small():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] <= 2  # MB: config files and CSVs are kilobytes
    from planner.safe_json import MAX_JSON_BYTES

    assert config["server"]["maxUploadSize"] * 1024 * 1024 >= MAX_JSON_BYTES
