"""Published serving benchmarks (benchmarks/accuracy/serving_reference.csv) through the traffic simulator.

The `serving` family of benchmarks/accuracy.py replays each published `vllm bench serve` / SGLang / TensorRT-LLM /
NVIDIA NIM run with the engine's documented defaults. These tests hold that every row maps to a scenario (or is
unmapped only because its model or GPU is outside the catalog, its weight format is not modelled yet, or its
engine release's defaults are not stated), that each case names its source and regime, that every case
simulates to a finite positive number, and that the family's median |error| is the one its summary reports.
The ceiling on that median is benchmarks/accuracy/ceilings.json's `serving` entry, enforced (with every other
family's) by tests/test_accuracy_report.py; this file keeps no bound of its own. Nothing in the engine is
fitted to these rows.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
from pathlib import Path

import pytest

from planner.model.catalog import catalog_model_ids
from tests.reference_data import require_reference

ROOT = Path(__file__).resolve().parents[2]
require_reference()  # like the other reference tests: skip locally, fail under CI, when shared/ is missing


@pytest.fixture(scope="module")
def accuracy():
    spec = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def serving(accuracy):
    cases, unmapped = accuracy.serving_cases()
    return accuracy, cases, unmapped, accuracy.evaluate(cases)


def test_every_row_maps_unless_its_model_or_format_is_outside_the_engine(serving):
    accuracy, cases, unmapped, _ = serving
    rows = {row["id"]: row for row in accuracy._read(accuracy.SERVING_FILE)}
    assert len(cases) + len(unmapped) == len(rows)
    assert len(cases) >= 150
    assert {c.family for c in cases} == {accuracy.SERVING}
    for u in unmapped:
        row = rows[u.row_id]
        if "model '" in u.reason and "is not in the catalog" in u.reason:
            assert row["model"] not in accuracy.SERVING_MODELS
        elif "GPU '" in u.reason:
            assert row["gpu"] not in accuracy.SERVING_GPUS
        elif "weight format" in u.reason:  # a weight format still being added to planner/dtypes.py
            assert "is not one the engine models yet" in u.reason and row["dtype"] not in accuracy.DTYPES, u
        else:  # an engine release whose defaults or scheduler are not stated here (vLLM V0, SGLang < 0.5, ...)
            assert row["engine"] in u.reason.lower() or "version" in u.reason, u
            assert isinstance(accuracy._engine_settings(row["engine"], row["engine_version"], "h100-sxm", 1), str)
    for c in cases:
        assert c.run.scenario.model in catalog_model_ids()
        assert c.metric in accuracy.SERVING_METRICS and c.group in accuracy.SERVING_GROUPS
        # every case names its source (SOURCE_RULE) and its deployment regime
        assert c.publisher == accuracy.serving_source(rows[c.source])
        assert c.regime == accuracy.serving_regime(c.run)
    # every row states its source and the run's engine and version
    assert all(row["source"].startswith("https://") and row["engine_version"] for row in rows.values())


def test_every_case_simulates_to_a_finite_positive_value(serving):
    _, cases, _, results = serving
    assert len(results) == len(cases)
    for r in results:
        assert math.isfinite(r.predicted) and r.predicted > 0, r.case.case_id
        assert math.isfinite(r.error), r.case.case_id


def test_engine_defaults_follow_the_stated_vllm_rule(accuracy):
    row = {
        "model": "Qwen/Qwen3-32B",
        "gpu": "H100 80GB SXM",
        "num_gpus": "1",
        "tp": "1",
        "dtype": "bf16",
        "engine": "vllm",
        "engine_version": "0.11.0",
        "input_len": "2000",
        "output_len": "100",
        "num_prompts": "500",
        "request_rate": "inf",
        "max_concurrency": "",
        "metric": "mean_ttft_ms",
        "engine_args": "",
    }
    h100 = accuracy._serving_run(row)
    assert (h100.scenario.concurrency, h100.scenario.prefill_chunk_tokens) == (1024, 8192)
    assert h100.scenario.gpu_memory_utilization == 0.9 and h100.traffic.requests_per_second is None
    a100 = accuracy._serving_run({**row, "gpu": "A100 80GB SXM", "request_rate": "16", "max_concurrency": "4"})
    assert (a100.scenario.concurrency, a100.scenario.prefill_chunk_tokens) == (256, 2048)
    assert a100.traffic.requests_per_second == 16 and a100.traffic.max_concurrency == 4
    v0 = accuracy._serving_run({**row, "engine_version": "0.6.3"})
    if accuracy.resolve_runtime is None:  # no versioned runtime in the engine: V0 rows stay unmapped, said so
        assert isinstance(v0, str) and "V0 engine" in v0 and "vllm@0.7.3" in v0
        return
    # V0 (0.6-0.7): the versioned runtime, max_num_seqs 256; Qwen3-32B's 40,960-token context is over 32K, so
    # chunked prefill is on, at 512 tokens a step in 0.6 and 2048 in 0.7
    assert v0.scenario.runtime == accuracy.resolve_runtime("vllm@0.6.3")
    assert (v0.scenario.concurrency, v0.scenario.prefill_chunk_tokens, v0.traffic.chunked_prefill) == (256, 512, True)
    assert accuracy._serving_run({**row, "engine_version": "0.7.3"}).scenario.prefill_chunk_tokens == 2048
    # max_model_len 8192 set by the run: chunked prefill off, a step holds max(8192, 2048) tokens
    short = accuracy._serving_run({**row, "engine_version": "0.7.3", "engine_args": "max_model_len=8192"})
    assert (short.scenario.prefill_chunk_tokens, short.traffic.chunked_prefill) == (8192, False)
    # an MLA model: chunked prefill off whatever the context; a step holds its whole context
    mla = accuracy._serving_run(
        {**row, "engine_version": "0.7.3", "model": "deepseek-ai/DeepSeek-R1-0528", "num_gpus": "8", "tp": "8"}
    )
    context = mla.scenario.architecture().max_context_tokens
    assert (mla.scenario.prefill_chunk_tokens, mla.traffic.chunked_prefill) == (max(context, 2048), False)
    assert "0.9's GPU-size rule" in accuracy._serving_run({**row, "engine_version": "0.8.5"})
    assert "before 0.6" in accuracy._serving_run({**row, "engine_version": "0.5.3"})


def test_sglang_defaults_follow_its_memory_heuristics(accuracy):
    """SGLang 0.5 server_args._handle_gpu_memory_settings, by hand. H100 (79.6 GiB = 81,559 MiB, below 90 GiB):
    chunk 8192, CUDA graphs up to 256 at TP1; reserved = 512 + 1.5 x 8192 + 2 x 256 + 1/8 x 1024 = 13,440 MiB
    (over the 10 GiB floor) -> mem_fraction_static = (81,559 - 13,440) / 81,559 = 0.835. At TP8 graphs up to 512:
    reserved = 512 + 12,288 + 1,024 + 1,024 = 14,848 -> 0.818. L4 (22.5 GiB = 23,034 MiB, below 35 GiB): chunk 2048,
    graphs 24; reserved 512 + 3,072 + 48 + 128 = 3,760 (no floor under 60 GiB) -> 0.837."""
    h100 = accuracy.get_accelerator("h100-sxm").memory_bytes
    assert accuracy.sglang_defaults(h100, 1) == {
        "max_num_seqs": 4096,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.835,
    }
    assert accuracy.sglang_defaults(h100, 8)["gpu_memory_utilization"] == 0.818
    l4 = accuracy.sglang_defaults(accuracy.get_accelerator("l4").memory_bytes, 1)
    assert (l4["max_num_batched_tokens"], l4["gpu_memory_utilization"]) == (2048, 0.837)
    b200 = accuracy.sglang_defaults(accuracy.get_accelerator("b200").memory_bytes, 8)
    assert b200["max_num_batched_tokens"] == 16384


def test_sglang_and_tensorrt_llm_rows_map_with_their_defaults_and_engine_args(accuracy):
    row = {
        "model": "Qwen/Qwen3-32B",
        "gpu": "H100 80GB SXM",
        "num_gpus": "2",
        "tp": "2",
        "dtype": "bf16",
        "engine": "sglang",
        "engine_version": "0.5.6",
        "input_len": "1000",
        "output_len": "200",
        "num_prompts": "100",
        "request_rate": "inf",
        "max_concurrency": "32",
        "metric": "mean_ttft_ms",
        "engine_args": "",
    }
    sglang = accuracy._serving_run(row)
    assert sglang.scenario.runtime == "sglang" and sglang.scenario.prefill_chunk_tokens == 8192
    assert (
        sglang.scenario.gpu_memory_utilization
        == accuracy.sglang_defaults(accuracy.get_accelerator("h100-sxm").memory_bytes, 2)["gpu_memory_utilization"]
    )
    named = accuracy._serving_run({**row, "engine_args": "mem_fraction_static=0.8;chunked_prefill_size=4096"})
    assert (named.scenario.gpu_memory_utilization, named.scenario.prefill_chunk_tokens) == (0.8, 4096)
    assert "0.5 releases" in accuracy._serving_run({**row, "engine_version": "0.4.3"})
    trt = accuracy._serving_run({**row, "engine": "tensorrt-llm", "engine_version": "1.0.0"})
    assert trt.scenario.runtime == "tensorrt-llm"
    assert (trt.scenario.concurrency, trt.scenario.prefill_chunk_tokens) == (2048, 8192)
    assert trt.scenario.gpu_memory_utilization == 0.9
    assert "TensorRT-engine release" in accuracy._serving_run(
        {**row, "engine": "tensorrt-llm", "engine_version": "0.9"}
    )
    regime = accuracy.serving_regime(trt)
    assert regime == "dense, multi-GPU, NVIDIA, tensorrt-llm"


def test_the_summary_reports_the_median_of_the_cases(accuracy, serving):
    """The number ceilings.json bounds (tests/test_accuracy_report.py) is the median over every case, and each
    metric the summary lists has its own median."""
    _, _, _, results = serving
    summary = accuracy.summarize_serving(results)
    assert summary["median_abs_error"] == pytest.approx(statistics.median(abs(r.error) for r in results))
    assert set(summary["metrics"]) <= set(accuracy.SERVING_METRICS)
    for metric, row in summary["metrics"].items():
        errors = [abs(r.error) for r in results if r.case.metric == metric]
        assert row["median_abs_error"] == pytest.approx(statistics.median(errors)), metric


def test_every_mapped_model_and_gpu_is_in_the_catalog(accuracy):
    from planner.hardware.catalog import get_accelerator

    assert set(accuracy.SERVING_MODELS.values()) <= set(catalog_model_ids())
    for gpu in accuracy.SERVING_GPUS.values():
        get_accelerator(gpu)  # raises for an id the catalog lacks
