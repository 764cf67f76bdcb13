"""A search over several GPU types applies a calibration only to the GPU it measured (as plan() does)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.scenario import parse_scenario
from planner.search.sweep import (
    evaluate_inference,
    evaluate_training,
    inference_grid,
    scenario_for_row,
    training_grid,
    training_scenario_for_row,
)

from .synthetic import fitted_record, synthetic_record

BASE = InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1)


def test_each_row_gets_the_calibration_only_on_its_own_gpu():
    record = synthetic_record()
    assert record.applies_to("h100-sxm") and not record.applies_to("h200")
    grid = inference_grid(
        BASE,
        gpus=["h100-sxm", "h200"],
        num_gpus=[1, 2],
        tensor_parallel=[1, 2],
        pipeline_parallel=[1],
        expert_parallel=[1],
        weight_dtypes=["bf16"],
        kv_cache_dtypes=["bf16"],
        concurrency=[16, 64],
    )
    frame = evaluate_inference(BASE, grid, record)
    frame = frame[frame.valid]
    assert set(frame.gpu) == {"h100-sxm", "h200"}
    for _, row in frame.iterrows():
        scenario = scenario_for_row(BASE, row)
        # plan() refuses the H100 record for an H200 plan; the sweep uses the defaults there instead.
        expected = plan(scenario, record if row.gpu == "h100-sxm" else None)
        assert np.isclose(row.tpot_seconds, expected.performance.tpot_seconds, rtol=1e-9), row.gpu
        assert np.isclose(row.total_bytes, expected.memory.total_bytes, rtol=1e-9), row.gpu


def test_a_record_mapped_to_any_gpu_applies_to_every_row():
    record = synthetic_record().for_any_gpu()
    grid = pd.DataFrame({"gpu": ["h100-sxm", "h200"]})
    frame = evaluate_inference(BASE, grid, record)
    for _, row in frame.iterrows():
        expected = plan(scenario_for_row(BASE, row), record)
        assert np.isclose(row.tpot_seconds, expected.performance.tpot_seconds, rtol=1e-9)


def test_the_training_search_follows_the_same_rule():
    base = parse_scenario({"kind": "training", "model": "llama-3.1-8b", "num_gpus": 8})
    grid = training_grid(
        base,
        gpus=["h100-sxm", "h200"],
        num_gpus=[8],
        tensor_parallel=[1, 2],
        pipeline_parallel=[1],
        zero_stages=[1],
        checkpointing=["none"],
        micro_batch_sizes=[1],
    )
    record = synthetic_record()
    frame = evaluate_training(base, grid, record)
    frame = frame[frame.valid]
    assert set(frame.gpu) == {"h100-sxm", "h200"}
    for _, row in frame.iterrows():
        expected = plan(training_scenario_for_row(base, row), record if row.gpu == "h100-sxm" else None)
        assert np.isclose(row.step_seconds, expected.performance.step_seconds, rtol=1e-9), row.gpu


def test_the_fitted_device_terms_reach_the_sweep_rows_of_their_gpu_only():
    """alpha and the GEMM curve of a record that fitted them: the same per-row rule as plan()."""
    record = fitted_record()
    grid = pd.DataFrame({"gpu": ["h100-sxm", "h200"], "num_gpus": [2, 2], "tensor_parallel": [2, 2]})
    frame = evaluate_inference(BASE, grid, record)
    for _, row in frame.iterrows():
        expected = plan(scenario_for_row(BASE, row), record if row.gpu == "h100-sxm" else None)
        assert np.isclose(row.tpot_seconds, expected.performance.tpot_seconds, rtol=1e-9), row.gpu
        assert np.isclose(row.ttft_seconds, expected.performance.ttft_seconds, rtol=1e-9), row.gpu
    base = parse_scenario({"kind": "training", "model": "llama-3.1-8b", "num_gpus": 8})
    frame = evaluate_training(base, pd.DataFrame({"gpu": ["h100-sxm", "h200"], "tensor_parallel": [2, 2]}), record)
    for _, row in frame[frame.valid].iterrows():
        expected = plan(training_scenario_for_row(base, row), record if row.gpu == "h100-sxm" else None)
        assert np.isclose(row.step_seconds, expected.performance.step_seconds, rtol=1e-9), row.gpu
