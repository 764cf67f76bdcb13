"""Benchmark result files: each client's layout read back to exact values (ms -> s at the edge), and every kind of
bad input answered with one sentence naming the file, nothing of a rejected file kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.calibration.benchmark_results import (
    MAX_FILE_BYTES,
    MAX_FILES,
    BenchmarkResultError,
    detect_client,
    load_benchmark_paths,
    read_benchmark_file,
    read_benchmark_files,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark_results"


def _read(name: str):
    return read_benchmark_file(name, (FIXTURES / name).read_bytes())


def test_vllm_aggregates_in_ms_become_seconds():
    (run,) = _read("vllm_serve.json")
    assert (run.client, run.model, run.num_prompts, run.max_concurrency) == (
        "vllm",
        "meta-llama/Llama-3.1-8B-Instruct",
        200,
        16,
    )
    assert run.request_rate_per_second is None and run.request_rate == float("inf")
    assert run.prompt_tokens_mean == pytest.approx(204800 / 200) and run.output_tokens_mean == pytest.approx(128)
    assert (run.ttft.mean_seconds, run.ttft.median_seconds, run.ttft.p99_seconds) == pytest.approx(
        (0.0855, 0.08025, 0.13)
    )
    assert (run.tpot.mean_seconds, run.itl.median_seconds, run.e2e.p99_seconds) == pytest.approx((0.0245, 0.0235, 3.4))
    assert (run.request_throughput_per_second, run.output_tokens_per_second) == (4.848, 620.6)
    assert not run.per_request_arrays and run.arrival == "poisson"


def test_vllm_per_request_arrays_are_used_and_failures_left_out():
    (run,) = _read("vllm_serve_detailed.json")
    assert run.per_request_arrays and (run.completed, run.failed, run.num_prompts) == (3, 1, 4)
    assert run.request_rate_per_second == 2.0
    # successful requests only: input 900, 1000, 1100; output 4, 5, 3
    assert (run.prompt_tokens_mean, run.prompt_tokens_min, run.prompt_tokens_max) == (1000.0, 900, 1100)
    assert (run.output_tokens_mean, run.output_tokens_min, run.output_tokens_max) == (4.0, 3, 5)
    assert run.ttft.mean_seconds == pytest.approx((0.1 + 0.2 + 0.3) / 3)
    # TPOT per request = (latency - ttft) / (output - 1): 0.06/3, 0.12/4, 0.08/2 = 0.02, 0.03, 0.04
    assert run.tpot.mean_seconds == pytest.approx(0.03) and run.tpot.median_seconds == pytest.approx(0.03)
    assert run.itl.median_seconds == pytest.approx(0.03)  # gaps 0.02 x3, 0.03 x4, 0.04 x2
    assert run.e2e.mean_seconds == pytest.approx((0.16 + 0.32 + 0.38) / 3)


def test_sglang_jsonl_is_one_run_per_line_with_its_range_ratio():
    first, second = _read("sglang_bench_serving.jsonl")
    assert (first.source, first.client, first.model) == ("sglang_bench_serving.jsonl line 1", "sglang", None)
    assert first.request_rate_per_second is None and first.max_concurrency == 8  # request_rate Infinity
    assert (first.prompt_tokens_mean, first.output_tokens_mean, first.num_prompts) == (1024.0, 256.0, 100)
    assert first.range_ratio == 0.0  # random_range_ratio 1.0: [L, L], fixed lengths
    assert (first.ttft.mean_seconds, first.tpot.median_seconds, first.e2e.mean_seconds) == pytest.approx(
        (0.0605, 0.00925, 2.43)
    )
    assert second.request_rate_per_second == 4.0 and second.max_concurrency is None
    assert second.range_ratio == pytest.approx(1 / 3)  # [0.5 L, L]: mean 0.75 L, +- 0.25 L = 1/3 of it
    assert (second.prompt_tokens_mean, second.output_tokens_mean) == (768.0, 192.0)
    assert second.output_tokens_per_second == 738.5


def test_genai_perf_statistics_and_input_config():
    (run,) = _read("profile_export_genai_perf.json")
    assert (run.client, run.model, run.max_concurrency, run.request_rate_per_second) == (
        "genai-perf",
        "meta-llama/Llama-3.1-8B-Instruct",
        8,
        None,
    )
    assert (run.num_prompts, run.arrival) == (100, "uniform")
    assert (run.prompt_tokens_mean, run.prompt_tokens_min, run.prompt_tokens_max) == (2000.0, 1990, 2012)
    assert (run.output_tokens_mean, run.output_tokens_min, run.output_tokens_max) == (128.0, 120, 131)
    assert (run.ttft.mean_seconds, run.ttft.median_seconds, run.ttft.p99_seconds) == pytest.approx((0.12, 0.118, 0.17))
    assert run.tpot.mean_seconds == pytest.approx(0.024)  # inter_token_latency: per request, excl. the first token
    assert run.e2e.mean_seconds == pytest.approx(3.2)
    assert (run.request_throughput_per_second, run.output_tokens_per_second) == (2.5, 320.0)


def test_guidellm_report_is_one_run_per_benchmark_with_its_strategy():
    sync, concurrent, poisson = _read("guidellm_benchmarks.json")
    assert [r.source for r in (sync, concurrent, poisson)] == [
        f"guidellm_benchmarks.json benchmark {i}" for i in (1, 2, 3)
    ]
    assert (sync.max_concurrency, sync.request_rate_per_second, sync.num_prompts) == (1, None, 60)
    assert (concurrent.max_concurrency, concurrent.num_prompts) == (16, 300)
    assert (poisson.request_rate_per_second, poisson.arrival, poisson.max_concurrency) == (6.5, "poisson", None)
    assert concurrent.model == "Qwen/Qwen3-8B"
    assert concurrent.ttft.mean_seconds == pytest.approx(0.055)
    # TPOT is inter_token_latency_ms (10 ms), never time_per_output_token_ms (12 ms, first token included)
    assert concurrent.tpot.mean_seconds == pytest.approx(0.010)
    assert concurrent.e2e.mean_seconds == pytest.approx(1.33)  # request_latency is in seconds already
    assert (concurrent.output_tokens_per_second, concurrent.request_throughput_per_second) == (1470.0, 11.5)
    assert (concurrent.prompt_tokens_mean, concurrent.output_tokens_mean) == (512.0, 128.0)


def test_inference_perf_stage_report_in_seconds():
    (run,) = _read("stage_0_lifecycle_metrics.json")
    assert (run.client, run.model, run.request_rate_per_second, run.num_prompts) == ("inference-perf", None, 2.0, 120)
    assert (run.ttft.mean_seconds, run.ttft.median_seconds, run.ttft.p99_seconds) == (0.045, 0.043, 0.07)
    assert run.tpot.mean_seconds == 0.0065 and run.e2e.mean_seconds == 0.9
    assert (run.prompt_tokens_mean, run.output_tokens_min, run.output_tokens_max) == (200.5, 100, 128)
    assert (run.output_tokens_per_second, run.request_throughput_per_second) == (250.2, 1.99)


def test_detect_client_names_each_fixture():
    found = {}
    for path in sorted(FIXTURES.glob("*.json")):
        found[path.name] = detect_client(json.loads(path.read_text()))
    assert found == {
        "guidellm_benchmarks.json": "guidellm",
        "profile_export_genai_perf.json": "genai-perf",
        "stage_0_lifecycle_metrics.json": "inference-perf",
        "vllm_serve.json": "vllm",
        "vllm_serve_detailed.json": "vllm",
    }


# ---------------------------------------------------------------------------------------------- bad input


def _rejected(name: str, data: str | bytes) -> str:
    with pytest.raises(BenchmarkResultError) as caught:
        read_benchmark_file(name, data)
    message = str(caught.value)
    assert message.startswith(name) and "Traceback" not in message and "\n" not in message
    return message


def test_malformed_json_is_one_sentence():
    assert "is not valid JSON" in _rejected("bad.json", "{ this is not json }")


def test_truncated_file_says_so():
    text = (FIXTURES / "vllm_serve.json").read_text()
    message = _rejected("cut.json", text[: len(text) // 2])
    assert "ends part-way through its JSON (truncated?)" in message


def test_huge_file_is_refused_before_parsing():
    message = _rejected("huge.json", b"{" + b" " * MAX_FILE_BYTES + b"}")
    assert f"a benchmark result file may be {MAX_FILE_BYTES:,}" in message


def test_too_many_files_are_refused():
    files = [(f"r{i}.json", (FIXTURES / "vllm_serve.json").read_bytes()) for i in range(MAX_FILES + 1)]
    with pytest.raises(BenchmarkResultError, match=f"{MAX_FILES + 1} result files given; at most {MAX_FILES}"):
        read_benchmark_files(files)


def test_a_scenario_or_a_calibration_is_not_a_benchmark_result():
    assert "is not a benchmark result Headroom reads (expected vllm bench serve" in _rejected(
        "scenario.json", json.dumps({"kind": "inference", "model": "llama-3.1-8b"})
    )
    assert "is a Headroom calibration record" in _rejected("cal.json", json.dumps({"format": "headroom-calibration"}))
    assert "perf_analyzer's raw profile_export.json" in _rejected(
        "profile_export.json", json.dumps({"experiments": [], "version": "1.0"})
    )
    assert "is not a benchmark result" in _rejected("list.json", "[1, 2, 3]")


def test_a_result_without_measurements_or_completions_is_rejected():
    data = json.loads((FIXTURES / "vllm_serve.json").read_text())
    data["completed"] = 0
    assert "cannot be used: no request completed" in _rejected("zero.json", json.dumps(data))
    bare = {"backend": "openai", "model_id": "x", "num_prompts": 10, "mean_ttft_ms": None, "request_rate": "inf"}
    assert "cannot be used" in _rejected("bare.json", json.dumps(bare))


def test_a_bad_line_rejects_the_whole_jsonl_file():
    lines = (FIXTURES / "sglang_bench_serving.jsonl").read_text().splitlines()
    message = _rejected("runs.jsonl", lines[0] + "\n" + lines[1][:40] + "\n")
    assert message.startswith("runs.jsonl line 2 is not valid JSON")


def test_many_files_keep_the_good_ones_and_list_the_bad():
    good = (FIXTURES / "vllm_serve.json").read_bytes()
    runs, problems = read_benchmark_files([("good.json", good), ("bad.json", b"{oops"), ("x.json", b"{}")])
    assert [r.source for r in runs] == ["good.json"]
    assert len(problems) == 2 and problems[0].startswith("bad.json") and problems[1].startswith("x.json")


def test_paths_that_do_not_exist_or_are_too_large(tmp_path):
    with pytest.raises(BenchmarkResultError, match="cannot read benchmark result .*missing.json"):
        load_benchmark_paths([tmp_path / "missing.json"])
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(BenchmarkResultError, match="big.json is .* bytes; a benchmark result file may be"):
        load_benchmark_paths([big])
