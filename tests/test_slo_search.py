"""Search under traffic percentiles: best first, every answer meets its targets, cheaper ones do not."""

from __future__ import annotations

import json

import pytest

from planner.cli.main import main
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic
from planner.search.constraints import search
from planner.search.slo_search import percentile_value, slo_search, split_constraints
from planner.search.sweep import evaluate_inference, inference_grid, scenario_for_row

TRAFFIC = Traffic(requests_per_second=12, num_requests=300, seed=2)
BASE = InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, traffic=TRAFFIC)


def _frame():
    grid = inference_grid(
        BASE,
        gpus=["h100-sxm", "a100-80gb"],
        num_gpus=[1, 2, 4],
        tensor_parallel=[1, 2],
        pipeline_parallel=[1],
        expert_parallel=[1],
        weight_dtypes=["bf16", "fp8"],
        kv_cache_dtypes=["bf16"],
        concurrency=[64, 256],
    )
    return evaluate_inference(BASE, grid)


def test_split_constraints_routes_percentiles_to_the_simulation():
    static, slo = split_constraints(["ttft_seconds<=0.5", "p99_ttft_seconds<=2", "p50_tpot_seconds<0.03"])
    assert static == [("ttft_seconds", "<=", 0.5)]
    assert slo == [("p99_ttft_seconds", "<=", 2.0), ("p50_tpot_seconds", "<", 0.03)]


def test_every_answer_meets_the_targets_and_the_better_ranked_rows_do_not():
    frame = _frame()
    slo = [("p99_ttft_seconds", "<=", 0.5), ("p99_tpot_seconds", "<=", 0.04)]
    found, simulations = slo_search(BASE, frame, [], slo, "usd_per_hour", 2, TRAFFIC)
    assert 0 < len(found) <= 2 and simulations >= len(found)
    for _, row in found.iterrows():
        result = TrafficEngine.of(scenario_for_row(BASE, row).model_copy(update={"traffic": TRAFFIC})).simulate()
        assert percentile_value(result, "p99_ttft_seconds") == pytest.approx(row.p99_ttft_seconds)
        assert row.p99_ttft_seconds <= 0.5 and row.p99_tpot_seconds <= 0.04
    # Every row the objective ranks above the best answer misses a target (or cannot keep up with the rate).
    ranked = search(frame, [], "usd_per_hour", top=len(frame))
    best = found.iloc[0]
    for _, row in ranked.iterrows():
        if row.usd_per_hour >= best.usd_per_hour:
            break
        if row.requests_per_second < TRAFFIC.requests_per_second:
            continue
        result = TrafficEngine.of(scenario_for_row(BASE, row).model_copy(update={"traffic": TRAFFIC})).simulate()
        assert result.ttft_seconds.p99 > 0.5 or result.tpot_seconds.p99 > 0.04


def test_percentile_names_are_checked():
    with pytest.raises(ValueError, match="not a traffic percentile"):
        percentile_value(None, "p42_ttft_seconds")


@pytest.mark.parametrize(
    ("scenario", "extra", "words"),
    [
        ({"model": "llama-3.1-8b", "num_gpus": 1, "tensor_parallel": 1}, [], "traffic to serve"),
        (
            {"model": "llama-3.1-8b", "num_gpus": 1, "tensor_parallel": 1, "traffic": {"requests_per_second": 5}},
            ["--pareto", "usd_per_hour,ttft_seconds"],
            "--pareto",
        ),
        ({"kind": "training"}, [], "inference"),
    ],
)
def test_cli_refuses_percentile_constraints_it_cannot_answer(tmp_path, capsys, scenario, extra, words):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    code = main(["search", str(path), "--constraint", "p99_ttft_seconds<=2", "--max-gpus", "2", *extra])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
