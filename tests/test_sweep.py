"""The vectorized sweep runs the same formulas as plan(): identical numbers, identical validity."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from planner import PlanningError, plan
from planner.errors import explain
from planner.inference.scenario import InferenceScenario
from planner.search.sweep import evaluate_inference, inference_grid, scenario_for_row

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
    grid = inference_grid(
        base,
        gpus=["h100-sxm", "a100-40gb", "l4", "cpu"],
        num_gpus=[1, 2, 4, 8],
        tensor_parallel=[1, 2, 4, 8],
        pipeline_parallel=[1, 2, 3],
        expert_parallel=[1, 2, 8],
        weight_dtypes=["bf16", "int4", "fp8"],
        kv_cache_dtypes=["bf16", "int4"],
        concurrency=[1, 13, 256],
    )
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


def test_invalid_reason_is_the_scenarios_own_sentence():
    base = InferenceScenario()
    grid = inference_grid(base, gpus=["h100-sxm", "l4"], num_gpus=[3, 6], tensor_parallel=[3], concurrency=[1, 2])
    result = evaluate_inference(base, grid)
    with pytest.raises(ValidationError) as rejected:
        InferenceScenario(num_gpus=3, tensor_parallel=3)
    # "tensor_parallel=3 does not divide the model's 64 attention heads", for every row of that layout.
    assert set(result.invalid_reason) == {explain(rejected.value)}
    assert "64 attention heads" in explain(rejected.value)


def test_sweep_rejects_what_the_scenario_rejects_for_a_moe_layout():
    # Mixtral has 8 experts: EP 3 does not divide them; EP 2 with TP 4 divides the tensor group (valid);
    # EP 8 with TP 2 needs 8 GPUs per stage.
    base = InferenceScenario(model="mixtral-8x7b", num_gpus=8, tensor_parallel=2)
    grid = inference_grid(base, num_gpus=[4, 8], tensor_parallel=[2, 4], expert_parallel=[2, 3, 8])
    result = evaluate_inference(base, grid)
    for _, row in result.iterrows():
        try:
            scenario_for_row(base, row)
        except ValidationError as exc:
            assert row["invalid_reason"] == explain(exc)
        else:
            assert row["valid"] and row["invalid_reason"] == ""
    assert result.valid.any() and not result.valid.all()


def test_grid_size_is_bounded():
    with pytest.raises(ValueError):
        inference_grid(InferenceScenario(), concurrency=list(range(1, 3000)), num_gpus=list(range(1, 1000)))


def test_training_sweep_equals_scalar_training_plans_exactly():
    from planner.scenario import parse_scenario
    from planner.search.sweep import (
        evaluate_training,
        training_grid,
        training_scenario_for_row,
    )

    base = parse_scenario({"kind": "training", "model": "llama-3.1-70b", "num_gpus": 64, "global_batch_size": 512})
    grid = training_grid(
        base,
        gpus=["h100-sxm", "a100-80gb"],
        num_gpus=[32, 64, 128],
        tensor_parallel=[1, 2, 8],
        pipeline_parallel=[1, 4, 3],
        zero_stages=[0, 1, 3],
        checkpointing=["none", "selective", "full"],
        micro_batch_sizes=[1, 2, 3],
    )
    result = evaluate_training(base, grid)
    assert result.valid.any() and (~result.valid).any() and result.fits.any()
    rng = np.random.default_rng(3)
    for index in rng.choice(len(result), size=40, replace=False):
        row = result.iloc[index]
        try:
            scenario = training_scenario_for_row(base, row)
        except (PlanningError, ValueError):
            assert not row["valid"] and row["invalid_reason"]
            continue
        assert row["valid"]
        p = plan(scenario)
        assert row["total_bytes"] == p.memory.total_bytes
        assert row["fits"] == p.memory.fits
        assert row["step_seconds"] == p.performance.step_seconds
        assert row["mfu"] == p.performance.mfu
        assert row["usd_total"] == p.cost.usd_total


def test_training_search_respects_constraints(capsys):
    from pathlib import Path

    from planner.cli.main import main

    example = Path(__file__).resolve().parents[1] / "examples" / "training-llama-3.1-8b-full-finetune.json"
    code = main(
        [
            "search",
            str(example),
            "--max-gpus",
            "16",
            "--constraint",
            "time_to_train_seconds<=86400",
            "--format",
            "json",
            "--top",
            "5",
        ]
    )
    assert code == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["time_to_train_seconds"] <= 86400 for r in rows)
    costs = [r["usd_total"] for r in rows]
    assert costs == sorted(costs)


def test_sweep_prices_a_releases_fused_moe_kernels_as_the_plan_does():
    """Block-scaled FP8 experts under an early-2025 release (vllm@0.6) stream at PR #13932's rate in a sweep
    too: the flag reaches the frame's hardware columns."""
    base = InferenceScenario(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8")
    for runtime in ("vllm", "vllm@0.6"):
        scenario = InferenceScenario(**{**base.model_dump(exclude={"kind"}), "runtime": runtime})
        grid = inference_grid(
            scenario, gpus=["h200"], num_gpus=[8], tensor_parallel=[8], weight_dtypes=["fp8"], concurrency=[1, 64]
        )
        result = evaluate_inference(scenario, grid)
        for _, row in result.iterrows():
            p = plan(scenario_for_row(scenario, row))
            for column, read in COLUMNS.items():
                assert row[column] == read(p), (runtime, column, row[column], read(p))


def test_training_sweep_with_context_and_expert_parallel_columns_equals_full_plans():
    """The optional layout columns (CP, EP, interleaved stages) a training grid may carry plan as plan() does."""
    import pandas as pd

    from planner.scenario import parse_scenario
    from planner.search.sweep import evaluate_training, training_grid, training_scenario_for_row

    base = parse_scenario(
        {
            "kind": "training",
            "model": "mixtral-8x7b",
            "num_gpus": 64,
            "global_batch_size": 512,
            "sequence_length": 8192,
            "pipeline_parallel": 2,
            "virtual_pipeline_stages": 2,
        }
    )
    grid = training_grid(base, num_gpus=[32, 64], tensor_parallel=[1, 2, 8], pipeline_parallel=[1, 2, 4])
    grid = pd.concat(
        [
            grid.assign(context_parallel=cp, expert_parallel=ep, virtual_pipeline_stages=v)
            for cp in (1, 2, 4)
            for ep in (1, 2, 8)
            for v in (1, 2)
        ],
        ignore_index=True,
    )
    result = evaluate_training(base, grid)
    assert result.valid.any() and (~result.valid).any() and result.fits.any() and (~result.fits).any()
    rng = np.random.default_rng(5)
    for index in rng.choice(np.flatnonzero(result.valid), size=30, replace=False):
        row = result.iloc[index]
        scenario = training_scenario_for_row(base, row)
        assert (scenario.context_parallel, scenario.expert_parallel) == (
            row["context_parallel"],
            row["expert_parallel"],
        )
        p = plan(scenario)
        assert row["total_bytes"] == p.memory.total_bytes
        assert row["step_seconds"] == p.performance.step_seconds
        assert row["usd_total"] == p.cost.usd_total
    for index in np.flatnonzero(~result.valid)[:10]:
        with pytest.raises((PlanningError, ValueError)):
            training_scenario_for_row(base, result.iloc[index])
