"""Trade-offs: deltas equal the difference of two full plans; frontiers are non-dominated; the search
never returns a configuration that does not fit or breaks a constraint."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner import PlanningError, plan
from planner.inference.scenario import InferenceScenario
from planner.search.constraints import (
    apply_constraints,
    pareto_front,
    parse_constraint,
    search,
)
from planner.search.diagnosis import diagnose
from planner.search.inference_tradeoffs import inference_techniques
from planner.search.sweep import evaluate_inference, inference_grid

BASE = InferenceScenario()


def test_each_planned_technique_delta_is_the_difference_of_two_plans():
    base = plan(BASE)
    effects = [e for e in inference_techniques(BASE) if e.applicable and not e.derived]
    assert {e.technique for e in effects} >= {
        "Weight quantization",
        "KV cache quantization",
        "Prefix / prompt caching",
        "Tensor parallelism",
        "Pipeline parallelism",
    }
    for effect in effects:
        alt = plan(InferenceScenario.model_validate(effect.scenario))
        assert effect.delta_memory_bytes == alt.memory.total_bytes - base.memory.total_bytes
        assert effect.delta_time_seconds == alt.performance.tpot_seconds - base.performance.tpot_seconds
        assert effect.delta_throughput == (
            alt.performance.output_tokens_per_second - base.performance.output_tokens_per_second
        )
        assert effect.delta_cost == (alt.cost.usd_per_million_output_tokens - base.cost.usd_per_million_output_tokens)


def test_quantization_is_flagged_as_changing_numerics_and_sharding_is_not():
    effects = inference_techniques(BASE)
    by_name = {e.technique: e for e in effects}
    assert by_name["Weight quantization"].changes_numerics
    assert by_name["KV cache quantization"].changes_numerics
    assert not by_name["Tensor parallelism"].changes_numerics
    assert not by_name["Offload to host"].changes_numerics


def test_inapplicable_technique_says_why():
    scenario = InferenceScenario(model="llama-3.1-70b", num_gpus=64, tensor_parallel=64)
    effect = next(e for e in inference_techniques(scenario) if e.technique == "Tensor parallelism")
    assert not effect.applicable and "does not divide" in effect.reason


def test_missing_fp8_on_a100_is_flagged():
    scenario = InferenceScenario(gpu="a100-80gb")
    fp8 = next(e for e in inference_techniques(scenario) if e.variant.endswith("fp8") and "weights" in e.variant)
    assert "no native fp8" in fp8.costs


def test_dropping_the_kv_cache_frees_it_and_costs_decode_time():
    effect = next(e for e in inference_techniques(BASE) if e.technique == "KV cache vs recompute")
    base = plan(BASE)
    assert effect.delta_memory_bytes == -base.memory.components["kv_cache_bytes"]
    assert effect.delta_time_seconds > 0 and effect.derived


def test_diagnosis_names_the_binding_resource_with_evidence():
    d = diagnose(BASE)
    assert d.binding == plan(BASE).bottleneck == "memory_bandwidth"
    assert d.arithmetic_intensity_flops_per_byte < d.ridge_point_flops_per_byte
    assert abs(sum(d.time_shares.values()) - 1) < 1e-9
    assert d.relief and all(e.delta_throughput > 0 for e in d.relief)
    over = diagnose(InferenceScenario(concurrency=2000))
    assert over.binding == "capacity" and all(e.delta_memory_bytes < 0 for e in over.relief)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    grid = inference_grid(
        BASE,
        gpus=["h100-sxm", "h200", "a100-80gb", "l40s"],
        num_gpus=[1, 2, 4, 8],
        tensor_parallel=[1, 2, 4, 8],
        pipeline_parallel=[1, 2],
        weight_dtypes=["bf16", "fp8", "int4"],
        kv_cache_dtypes=["bf16", "fp8"],
        concurrency=[1, 8, 64, 256],
    )
    return evaluate_inference(BASE, grid)


def test_search_never_returns_a_misfit_or_a_broken_constraint(frame):
    constraints = ["ttft_seconds<=0.5", "tpot_seconds<=0.06"]
    best = search(frame, constraints, "usd_per_million_output_tokens", top=20)
    assert len(best) > 0
    assert best.fits.all() and best.valid.all()
    assert (best.ttft_seconds <= 0.5).all() and (best.tpot_seconds <= 0.06).all()
    feasible = apply_constraints(frame, constraints)
    assert best.usd_per_million_output_tokens.iloc[0] == feasible.usd_per_million_output_tokens.min()


def test_pareto_front_is_non_dominated_and_complete(frame):
    feasible = apply_constraints(frame, [])
    front = pareto_front(feasible, minimize=["usd_per_million_output_tokens", "tpot_seconds"])
    values = feasible[["usd_per_million_output_tokens", "tpot_seconds"]].to_numpy()
    chosen = front[["usd_per_million_output_tokens", "tpot_seconds"]].to_numpy()
    for point in chosen:  # nothing dominates a frontier point
        dominated = np.all(values <= point, axis=1) & np.any(values < point, axis=1)
        assert not dominated.any()
    for point in values:  # every feasible point is dominated by or equal to a frontier point
        assert np.any(np.all(chosen <= point, axis=1))


@pytest.mark.parametrize("text", ["ttft<0.5x", "ttft_seconds<=", "=1", "ttft_seconds=<1"])
def test_bad_constraints_are_rejected_with_a_sentence(text):
    with pytest.raises(PlanningError):
        parse_constraint(text)


def test_training_technique_deltas_are_differences_of_two_training_plans():
    from planner import parse_scenario
    from planner.search.diagnosis import techniques

    scenario = parse_scenario({"kind": "training"})
    base = plan(scenario)
    effects = [e for e in techniques(scenario) if e.applicable and not e.derived]
    assert {e.technique for e in effects} >= {
        "Activation checkpointing",
        "Gradient accumulation",
        "Sharding (ZeRO / FSDP)",
        "Offload to host",
        "Tensor parallelism",
    }
    for effect in effects:
        alt = plan(parse_scenario(effect.scenario))
        assert effect.delta_memory_bytes == alt.memory.total_bytes - base.memory.total_bytes
        assert effect.delta_time_seconds == alt.performance.step_seconds - base.performance.step_seconds
        assert effect.delta_cost == alt.cost.usd_total - base.cost.usd_total
    full = next(e for e in effects if e.variant.endswith("→ full"))
    assert full.delta_memory_bytes < 0 < full.delta_time_seconds  # saves activations, pays recompute
    compression = next(e for e in techniques(scenario) if e.technique == "Lower-precision communication")
    assert compression.changes_numerics and compression.delta_time_seconds <= 0
