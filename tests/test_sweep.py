"""The vectorized sweep runs the same formulas as plan(): identical numbers, identical validity."""

from __future__ import annotations

import numpy as np
import pytest

from planner import PlanningError, plan
from planner.scenario import InferenceScenario
from planner.sweep import evaluate_inference, inference_grid, scenario_for_row

COLUMNS = {
    "total_bytes": lambda p: p.memory.total_bytes,
    "kv_cache_bytes": lambda p: p.memory.components["kv_cache_bytes"],
    "max_concurrency": lambda p: p.memory.max_concurrency,
    "ttft_seconds": lambda p: p.performance.ttft_seconds,
    "tpot_seconds": lambda p: p.performance.tpot_seconds,
    "output_tokens_per_second": lambda p: p.performance.output_tokens_per_second,
    "usd_per_million_output_tokens": lambda p: p.cost.usd_per_million_output_tokens,
    "fits": lambda p: p.memory.fits,
}


@pytest.mark.parametrize("model", ["llama-3.1-70b", "mixtral-8x7b", "deepseek-v2-lite", "gemma-2-9b"])
def test_sweep_equals_scalar_plan_exactly(model):
    base = InferenceScenario(model=model, num_gpus=1, tensor_parallel=1)
    grid = inference_grid(base, gpus=["h100-sxm", "a100-40gb", "l4", "cpu"], num_gpus=[1, 2, 4, 8],
                          tensor_parallel=[1, 2, 4, 8], pipeline_parallel=[1, 2, 3], expert_parallel=[1, 2, 8],
                          weight_dtypes=["bf16", "int4", "fp8"], kv_cache_dtypes=["bf16", "int4"],
                          concurrency=[1, 13, 256])
    result = evaluate_inference(base, grid)
    rng = np.random.default_rng(7)
    for index in rng.choice(len(result), size=60, replace=False):
        row = result.iloc[index]
        try:
            scenario = scenario_for_row(base, row)
        except (PlanningError, ValueError):
            assert not row["valid"], row["invalid_reason"]
            continue
        assert row["valid"], f"sweep rejected a valid layout: {row['invalid_reason']}"
        p = plan(scenario)
        for column, read in COLUMNS.items():
            assert row[column] == read(p), (column, row[column], read(p))


def test_invalid_rows_are_flagged_not_planned():
    base = InferenceScenario()
    grid = inference_grid(base, tensor_parallel=[3], num_gpus=[3])
    result = evaluate_inference(base, grid)
    assert not result.valid.any() and not result.fits.any()
    assert "attention heads" in result.invalid_reason.iloc[0]
    assert np.isnan(result.total_bytes.iloc[0])


def test_grid_size_is_bounded():
    with pytest.raises(ValueError):
        inference_grid(InferenceScenario(), concurrency=list(range(1, 3000)), num_gpus=list(range(1, 1000)))
