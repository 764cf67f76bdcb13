"""`python -m planner deploy`: the JSON contract, the text and k8s formats, and one-sentence errors (status 2)."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.cli.main import main

SCENARIO = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "num_gpus": 2, "tensor_parallel": 1, "concurrency": 16}


def _run(capsys, tmp_path, scenario, *options):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    code = main(["deploy", str(path), *options])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_has_the_contract_keys(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path, SCENARIO, "--format", "json")
    assert code == 0 and err == ""
    result = json.loads(out)
    assert {"engine", "serve_command", "benchmark_command", "notes"} <= result.keys()
    assert result["engine"] == "vllm" and result["servers"] == 2
    assert result["serve_command"].startswith("vllm serve meta-llama/Llama-3.1-8B ")
    assert "--max-num-seqs 8" in result["serve_command"]  # 16 sequences over 2 replicas
    assert result["serve_argv"][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert result["benchmark_command"].startswith("vllm bench serve ")
    assert all(isinstance(n, str) for n in result["notes"])


def test_text_and_k8s_formats(capsys, tmp_path):
    code, out, _ = _run(capsys, tmp_path, SCENARIO, "--engine", "sglang")
    assert code == 0 and "python -m sglang.launch_server \\\n    --model-path meta-llama/Llama-3.1-8B" in out
    assert "python -m sglang.bench_serving" in out and "notes:" in out
    code, out, _ = _run(capsys, tmp_path, SCENARIO, "--format", "k8s")
    assert code == 0
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Deployment", "Service"]


@pytest.mark.parametrize(
    ("scenario", "options", "message"),
    [
        ({"kind": "training"}, (), "deploy needs an inference scenario"),
        ({**SCENARIO, "runtime": "llama.cpp"}, (), "has no deploy command"),
        ([SCENARIO, SCENARIO], (), "one scenario"),
        ({**SCENARIO, "tensor_parallel": 3}, (), "tensor_parallel=3"),
        (SCENARIO, ("--engine", "tgi"), "invalid choice"),
    ],
)
def test_bad_input_is_one_sentence_and_status_2(capsys, tmp_path, scenario, options, message):
    code, out, err = _run(capsys, tmp_path, scenario, *options)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert "Traceback" not in err
