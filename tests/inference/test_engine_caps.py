"""The engine's batch cap per replica (issue 23, item 1) and sizing that holds when applied (item 2, in part).

vLLM's --max-num-seqs and SGLang's --max-running-requests are per engine: `Traffic.max_num_seqs` says so, and with
it adding replicas keeps each replica's engine. The GPUs-for-a-rate answer is simulated at the target before it is
shown, and applying it (its GPUs, its batch cap per replica) meets the SLO."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.search.sweep import evaluate_inference
from planner.share import query_params_to_scenario, scenario_to_query_params

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "inference-traffic-slo.json").read_text())


def _scenario(num_gpus: int, rate: float, max_num_seqs: int | None = None, num_requests: int = 600):
    traffic = {**EXAMPLE["traffic"], "requests_per_second": rate, "num_requests": num_requests}
    if max_num_seqs is not None:
        traffic["max_num_seqs"] = max_num_seqs
    return InferenceScenario.model_validate({**EXAMPLE, "num_gpus": num_gpus, "traffic": traffic})


def test_the_gpus_for_a_rate_hold_when_applied():
    """The issue's case: 70B on 4 x H100 sized for 20 req/s at p99 TTFT <= 2 s, TPOT <= 50 ms. The answer, applied
    with its batch cap per replica, meets the SLO; the same GPUs with the deployment-wide cap split over eight
    replicas miss it and say the stream is too fast for them."""
    cap = TrafficEngine.of(_scenario(4, 3.0)).capacity(20)
    assert cap.verified is True and cap.replicas_needed is not None and cap.gpus_needed is not None
    assert cap.max_num_seqs_per_replica == 64  # the scenario's concurrency on its one replica
    applied = plan(_scenario(cap.gpus_needed, 20, max_num_seqs=cap.max_num_seqs_per_replica))
    assert applied.traffic is not None and all(check.met for check in applied.traffic.slo)
    split = plan(_scenario(cap.gpus_needed, 20))
    assert split.traffic is not None and not all(check.met for check in split.traffic.slo)
    assert "stream_overloaded" in split.warning_codes


def test_more_replicas_keep_each_replica_s_engine():
    one, two = plan(_scenario(4, 1.0, max_num_seqs=48)), plan(_scenario(8, 1.0, max_num_seqs=48))
    # the same engine on every replica: the same KV pool and the same static rate per replica
    assert two.memory.components == one.memory.components and two.memory.kv_blocks == one.memory.kv_blocks
    assert two.performance.requests_per_second == pytest.approx(2 * one.performance.requests_per_second)
    assert any("max_num_seqs): 48 — the stream's, on every replica" in a for a in two.assumptions)
    # without the field the scenario's concurrency is split over the replicas, as before (old links read the same)
    old = plan(_scenario(8, 1.0))
    assert any("concurrency 64 over 2 replica(s)" in a for a in old.assumptions)


def test_the_batch_cap_travels_in_the_link():
    scenario = _scenario(8, 2.0, max_num_seqs=96)
    params = scenario_to_query_params(scenario, "inference_")
    assert params["inference_traffic_max_num_seqs"] == "96"
    back, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert warnings == [] and back == scenario


def test_the_sweep_keeps_each_replica_s_engine_too():
    """The SLO search's static bounds come from the sweep: with a per-replica cap, more GPUs mean more replicas of
    the same engine, not a thinner split of one concurrency."""
    base = _scenario(4, 3.0, max_num_seqs=64)
    grid = pd.DataFrame({"num_gpus": [4, 8, 16], "tensor_parallel": [4, 4, 4]})
    frame = evaluate_inference(base, grid)
    rates = frame["requests_per_second"].to_numpy()
    assert rates[1] == pytest.approx(2 * rates[0]) and rates[2] == pytest.approx(4 * rates[0])
    assert rates[0] == pytest.approx(plan(base).performance.requests_per_second)
