"""Published serving benchmarks (benchmarks/accuracy/serving_reference.csv) through the traffic simulator.

The `serving` family of benchmarks/accuracy.py replays each published `vllm bench serve` / NVIDIA NIM run with
the engine's documented defaults. These tests hold that every row maps to a scenario (or is unmapped only
because its model is outside the catalog or its weight format is not modelled yet), that every case
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
        if "is not in the catalog" in u.reason:
            assert row["model"] not in accuracy.SERVING_MODELS
        else:  # a weight format still being added to planner/dtypes.py (gpt-oss MXFP4)
            assert "is not one the engine models yet" in u.reason and row["dtype"] not in accuracy.DTYPES, u
    for c in cases:
        assert c.run.scenario.model in catalog_model_ids()
        assert c.metric in accuracy.SERVING_METRICS and c.group in accuracy.SERVING_GROUPS
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
    assert "not the V1 ones" in accuracy._serving_run({**row, "engine_version": "0.6.3"})


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
