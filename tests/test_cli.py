"""The CLI contract: plan JSON/CSV, lists, schema, share; invalid input exits 2 without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner.cli.main import CliError, _parse, dashboard_script, main
from planner.errors import PlanningError
from planner.hardware.catalog import list_accelerators
from planner.model.catalog import catalog_model_ids
from planner.plan import plan
from planner.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], capture_output=True, text=True, cwd=ROOT, input=stdin, timeout=120
    )


def test_plan_json_has_the_contract_keys(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "kind": "inference",
                "model": "llama-3.1-70b",
                "gpu": "h100-sxm",
                "num_gpus": 4,
                "tensor_parallel": 4,
                "pipeline_parallel": 1,
                "expert_parallel": 1,
                "weight_dtype": "bf16",
                "kv_cache_dtype": "bf16",
                "prompt_tokens": 2048,
                "output_tokens": 512,
                "concurrency": 64,
            }
        )
    )
    assert main(["plan", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["params_total"] == 70_553_706_496
    for dotted in (
        "model.params_active",
        "model.kv_cache_bytes_per_token",
        "memory.components",
        "memory.total_bytes",
        "memory.capacity_bytes",
        "memory.fits",
        "memory.max_concurrency",
        "performance.ttft_seconds",
        "performance.tpot_seconds",
        "performance.output_tokens_per_second",
        "bottleneck",
        "cost.usd_per_hour",
        "cost.usd_per_million_output_tokens",
        "warnings",
        "assumptions",
    ):
        node = out
        for part in dotted.split("."):
            node = node[part]
    assert out["model"]["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2


def test_list_in_list_out_and_csv(capsys):
    assert main(["plan", str(ROOT / "examples" / "inference-sweep.json")]) == 0
    plans = json.loads(capsys.readouterr().out)
    assert isinstance(plans, list) and len(plans) == 3
    assert main(["plan", str(ROOT / "examples" / "inference-sweep.json"), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("kind,decision,scenario.")


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ('{"model": "llama-3.1-70b", "tensor_parallel": 3, "num_gpus": 3}', "does not divide"),
        ('{"model": "nope"}', "unknown model 'nope'"),
        ('{"concurrency": -1}', "concurrency"),
        ('{"kind": "quantum"}', "kind"),
        ("[]", "empty"),
        ("[1]", "expected a JSON object"),
        ("{not json", "not valid JSON"),
        ('{"model": {"model_type": "mamba", "hidden_size": 8}}', "hidden_size"),
    ],
)
def test_invalid_input_exits_2_with_a_sentence(payload, fragment):
    result = run_cli("plan", "-", stdin=payload)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert fragment in result.stderr


def test_missing_file_is_a_message(capsys):
    assert main(["plan", "/nonexistent/file.json"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_schema_and_share(capsys, tmp_path):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "inference" in json.dumps(schema) and "training" in json.dumps(schema)
    path = tmp_path / "s.json"
    path.write_text('{"concurrency": 8}')
    assert main(["share", str(path), "--base-url", "https://h.example"]) == 0
    assert capsys.readouterr().out.strip() == "https://h.example/inference?inference_concurrency=8"


def _sweep_plans() -> list:
    """The plans of examples/inference-sweep.json computed directly (the reference the CLI output must match)."""
    scenarios = json.loads((ROOT / "examples" / "inference-sweep.json").read_text())
    return [plan(parse_scenario(s)) for s in scenarios]


def test_json_output_is_strict_json_equal_to_the_plans(capsys):
    """The pydantic serializer writes what model_dump(mode="json") holds, as strict JSON (no NaN/Infinity)."""
    expected = [p.model_dump(mode="json") for p in _sweep_plans()]
    assert main(["plan", str(ROOT / "examples" / "inference-sweep.json")]) == 0

    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant}")

    assert json.loads(capsys.readouterr().out, parse_constant=refuse) == expected


def test_jsonl_is_one_plan_per_line(capsys):
    expected = [p.model_dump(mode="json") for p in _sweep_plans()]
    assert main(["plan", str(ROOT / "examples" / "inference-sweep.json"), "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == expected  # 3 scenarios -> 3 lines, in order


def test_single_scenario_jsonl_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text('{"concurrency": 8}')
    assert main(["plan", str(path), "--format", "jsonl"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["scenario"]["concurrency"] == 8


@pytest.mark.parametrize(
    "payload, suggestion",
    [
        ('{"concurency": 8}', "did you mean 'concurrency' for 'concurency'?"),
        ('{"kind": "training", "micro_batch": 2}', "did you mean 'micro_batch_size' for 'micro_batch'?"),
        ('{"model": "qwen2.5-7"}', "did you mean 'qwen2.5-7b'?"),
        ('{"gpu": "a100"}', "did you mean 'a100-40gb'?"),  # the first catalog id that extends 'a100'
        ('{"gpu": "mi300"}', "did you mean 'mi300x'?"),
    ],
)
def test_did_you_mean(tmp_path, capsys, payload, suggestion):
    path = tmp_path / "s.json"
    path.write_text(payload)
    assert main(["plan", str(path)]) == 2
    assert suggestion in capsys.readouterr().err


def test_suggestions_come_from_the_catalogs():
    """Every model and GPU id is suggested for itself minus its last character (a typical slip)."""
    for model_id in catalog_model_ids():
        message = _error_for({"model": model_id[:-1]})
        assert f"unknown model '{model_id[:-1]}' (did you mean '" in message
    gpu_ids = {accel.id for accel in list_accelerators()}
    for gpu_id in gpu_ids:
        if gpu_id[:-1] not in gpu_ids:  # 'h200' minus a character is the H20, 'l40s' the L40
            assert "(did you mean '" in _error_for({"gpu": gpu_id[:-1]})


def _error_for(payload: dict) -> str:
    try:
        parse_scenario(payload)
    except (ValidationError, PlanningError) as exc:
        return str(exc)
    raise AssertionError(f"{payload} was accepted")


def test_app_passes_unknown_options_to_streamlit_only():
    assert _parse(["app", "--server.port", "8600", "--server.headless", "true"]).streamlit_options == [
        "--server.port",
        "8600",
        "--server.headless",
        "true",
    ]
    with pytest.raises(CliError, match="unrecognized arguments: --server.port"):
        _parse(["gpus", "--server.port", "8600"])


def test_dashboard_script_is_the_checkout_app_py():
    script = dashboard_script()
    assert script == ROOT / "app.py" and (script.parent / "app_pages" / "inference.py").is_file()
