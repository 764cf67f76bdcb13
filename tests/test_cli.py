"""The CLI contract: plan JSON/CSV, lists, schema, share; invalid input exits 2 without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli.main import main

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
