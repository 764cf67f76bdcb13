"""Disaggregated prefill/decode: the KV transfer by hand, when it wins and when it does not, bad splits."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.errors import PlanningError
from planner.hardware.catalog import get_accelerator
from planner.inference.disaggregation import (
    DisaggregatedLayout,
    best_split,
    kv_transfer_seconds,
    simulate_disaggregated,
)
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Slo, Traffic
from planner.physics.efficiency import DEFAULT_EFFICIENCY

LONG = InferenceScenario(
    gpu="h200", num_gpus=8, tensor_parallel=2, prompt_tokens=8192, output_tokens=256, concurrency=64
)
SLO = Slo(ttft_seconds=2.5, tpot_seconds=0.05, percentile=90)


def _traffic(scenario: InferenceScenario, load: float, n: int = 900) -> Traffic:
    rate = load * plan(scenario).performance.requests_per_second
    return Traffic(requests_per_second=rate, num_requests=n, slo=SLO, seed=5)


def test_kv_transfer_by_hand():
    """Llama 3.1 70B bf16: 80 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 327,680 B per token; a TP2 prefill
    replica sends half of an 8,192-token prompt's KV from each GPU over NVLink inside the 8-GPU node."""
    engine = TrafficEngine.of(LONG.model_copy(update={"num_gpus": 2, "concurrency": 16}))
    seconds = kv_transfer_seconds(engine, engine, np.array([8192]))[0]
    h200 = get_accelerator("h200")
    per_gpu_bytes = 327_680 * 8192 / 2
    expected = (
        per_gpu_bytes / (h200.interconnect_bandwidth_bytes_per_second * DEFAULT_EFFICIENCY.communication)
        + h200.interconnect_latency_seconds
    )
    assert seconds == pytest.approx(expected, rel=1e-9)


def test_long_prompts_on_a_big_model_win_by_removing_prefill_interference():
    comparison = best_split(LONG, traffic=_traffic(LONG, 0.8))
    assert comparison.disaggregation_wins, comparison.reason
    best = comparison.best
    assert best.traffic.goodput_requests_per_second > 1.5 * comparison.colocated.goodput_requests_per_second
    # Decode replicas never stop for a prompt: their TPOT is below the colocated one.
    assert best.traffic.tpot_seconds.p90 < comparison.colocated.tpot_seconds.p90


def test_short_prompts_on_a_small_model_do_not_win():
    short = InferenceScenario(
        model="llama-3.1-8b", num_gpus=4, tensor_parallel=1, prompt_tokens=256, output_tokens=256, concurrency=512
    )
    comparison = best_split(short, traffic=_traffic(short, 0.8))
    assert not comparison.disaggregation_wins, comparison.reason


def test_every_request_is_served_once_with_its_output_tokens():
    result = simulate_disaggregated(
        LONG, DisaggregatedLayout(prefill_gpus=4, prefill_tensor_parallel=2), traffic=_traffic(LONG, 0.3, 200)
    )
    assert result.traffic.num_requests == 200
    assert result.prefill_replicas == 2 and result.decode_replicas == 2
    assert result.traffic.output_tokens_per_second * result.traffic.duration_seconds == pytest.approx(200 * 256)
    assert result.traffic.ttft_seconds.p50 < result.traffic.e2e_latency_seconds.p50


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        (DisaggregatedLayout(prefill_gpus=8, prefill_tensor_parallel=2), "must be less than"),
        (DisaggregatedLayout(prefill_gpus=7, prefill_tensor_parallel=1), "less than one decode replica"),
        (DisaggregatedLayout(prefill_gpus=3, prefill_tensor_parallel=2), "whole number of prefill replicas"),
        (DisaggregatedLayout(prefill_gpus=2, prefill_tensor_parallel=1), "not a valid layout|KV cache"),
    ],
)
def test_impossible_splits_are_sentences(layout, words):
    with pytest.raises(PlanningError, match=words):
        simulate_disaggregated(LONG, layout, traffic=_traffic(LONG, 0.3, 50))


def test_speculative_decoding_runs_in_the_decode_pool():
    """EAGLE (k 3, acceptance 0.8) on the default 70B at a vanishing rate: the decode pool's time per output token
    is the static plan's speculative time per token at batch 1 (round / expected tokens per round), not plain
    decoding's; the prefill pool pays the draft's prompt pass. Acceptances are random draws: 3 % allowed."""
    eagle = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.8}
    scenario = InferenceScenario(num_gpus=8, tensor_parallel=4, output_tokens=256, concurrency=8, speculative=eagle)
    plain = scenario.model_copy(update={"speculative": None})
    layout = DisaggregatedLayout(prefill_gpus=4, prefill_tensor_parallel=4)
    traffic = Traffic(requests_per_second=0.05, num_requests=60, seed=2)
    fast = simulate_disaggregated(scenario, layout, traffic=traffic).traffic
    slow = simulate_disaggregated(plain, layout, traffic=traffic).traffic
    single = plan(scenario.model_copy(update={"num_gpus": 4, "concurrency": 1})).performance.speculative
    per_token = single.round_seconds / single.tokens_per_round
    assert fast.tpot_seconds.mean == pytest.approx(per_token, rel=0.03)
    assert slow.tpot_seconds.mean > 1.8 * fast.tpot_seconds.mean
    assert fast.ttft_seconds.mean > slow.ttft_seconds.mean  # the draft's prompt pass


def test_a_bounded_prefix_cache_lives_in_the_prefill_pool():
    """30 shared prefixes, a GPU prefix cache of 1 % of each prefill replica's KV blocks: the stream's prefix
    answer is the prefill pool's bounded residency (hits and misses add up to the requests with a prefix)."""
    traffic = Traffic(
        requests_per_second=2.0,
        num_requests=200,
        shared_prefix_fraction=0.5,
        num_prefixes=30,
        gpu_prefix_cache_share=0.01,
        seed=3,
    )
    layout = DisaggregatedLayout(prefill_gpus=4, prefill_tensor_parallel=2)
    result = simulate_disaggregated(LONG, layout, traffic=traffic).traffic
    stats = result.prefix_cache
    assert stats is not None and stats.mode == "bounded"
    assert stats.gpu_hits + stats.pool_hits + stats.misses == stats.requests_with_prefix > 0
    unbounded = simulate_disaggregated(
        LONG, layout, traffic=traffic.model_copy(update={"gpu_prefix_cache_share": None})
    )
    assert unbounded.traffic.prefix_cache is not None and unbounded.traffic.prefix_cache.mode == "unbounded"
    assert stats.gpu_hits < unbounded.traffic.prefix_cache.gpu_hits
