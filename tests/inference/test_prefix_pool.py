"""Bounded GPU prefix cache and a Mooncake-style DRAM/SSD prefix pool: hand-worked LRU walks, transfer time,
the limits (a pool too small = no pool; an infinitely fast pool = GPU hits), and the latency CDF table."""

from __future__ import annotations

import numpy as np
import pytest

from planner.inference.scenario import InferenceScenario
from planner.inference.serving.scheduler import ReplicaContext
from planner.inference.traffic import TrafficEngine, simulate_after_request_overhead
from planner.inference.traffic_results import QUANTILE_GRID
from planner.inference.workload import (
    GPU_HIT,
    MISS,
    POOL_HIT,
    POOL_TIER_DEFAULTS,
    PrefixPool,
    TraceRow,
    Traffic,
    prefix_residency,
)

BASE = (
    InferenceScenario()
)  # Llama 3.1 70B, 4x H100, TP4: 327,680 KV bytes per token (bf16, 80 layers x 8 x 128 x 2 x 2)
A, B, C = 0, 1, 2


def test_a_hand_worked_walk_through_a_gpu_cache_for_two_prefixes_and_a_pool():
    # Six requests, prefixes A B A C A B of 500 tokens each; the GPU holds 2 prefixes (1,000 tokens), the pool 3.
    #   A: miss (GPU [A], pool [A])          B: miss (GPU [A B], pool [A B])
    #   A: GPU hit (GPU [B A])               C: miss, evicts B from GPU (GPU [A C], pool [A B C])
    #   A: GPU hit (GPU [C A])               B: pool hit, evicts C (GPU [A B]); 500 x 1,000 B / 1e9 B/s = 0.5 ms
    key = np.array([A, B, A, C, A, B])
    tokens = np.full(6, 500)
    hits = prefix_residency(key, tokens, 1000, 1500, kv_bytes_per_token=1000.0, pool_bytes_per_second=1e9)
    assert hits.source.tolist() == [MISS, MISS, GPU_HIT, MISS, GPU_HIT, POOL_HIT]
    assert hits.cached_tokens.tolist() == [0, 0, 500, 0, 500, 500]
    assert hits.transfer_seconds.tolist() == pytest.approx([0, 0, 0, 0, 0, 0.5e-3])
    assert hits.bytes_transferred == 500 * 1000


def test_a_cycle_longer_than_the_gpu_cache_thrashes_it_and_the_pool_catches_every_repeat():
    # A B C A B C A with room for 2 in GPU memory: LRU evicts exactly the prefix needed next (the textbook case).
    key = np.array([A, B, C, A, B, C, A])
    hits = prefix_residency(key, np.full(7, 500), 1000, 10_000, 1000.0, 1e9)
    assert hits.source.tolist() == [MISS] * 3 + [POOL_HIT] * 4
    no_pool = prefix_residency(key, np.full(7, 500), 1000, 0, 1000.0, 1e9)
    assert no_pool.source.tolist() == [MISS] * 7
    assert hits.bytes_transferred == 4 * 500 * 1000 and no_pool.bytes_transferred == 0


def test_requests_without_a_prefix_and_prefixes_larger_than_a_cache_are_left_alone():
    key = np.array([-1, A, A, B, B])
    tokens = np.array([0, 500, 500, 2000, 2000])  # B does not fit in the GPU cache (1,000) but fits the pool
    hits = prefix_residency(key, tokens, 1000, 5000, 1000.0, 1e9)
    assert hits.source.tolist() == [0, MISS, GPU_HIT, MISS, POOL_HIT]
    assert hits.transfer_seconds[4] == pytest.approx(2000 * 1000 / 1e9)


def _trace(order: str, prompt: int = 2000, gap: float = 30.0) -> tuple[TraceRow, ...]:
    """Requests far apart (each served alone), prefix ids from `order`."""
    return tuple(
        TraceRow(arrival_seconds=gap * i, prompt_tokens=prompt, output_tokens=16, prefix_id=p)
        for i, p in enumerate(order)
    )


def _traffic(order: str, **extra) -> Traffic:
    return Traffic(lengths="trace", trace=_trace(order), shared_prefix_fraction=0.5, **extra)


def test_the_engine_counts_hits_and_charges_the_transfer_before_the_prefill():
    engine = TrafficEngine.of(BASE)
    prefix = 1000  # half of a 2,000-token prompt
    share = 2 * prefix / (engine.limits.kv_blocks * engine.limits.block_tokens)  # room for exactly two prefixes
    pool = PrefixPool(tier="ssd")
    with_pool = engine.simulate(_traffic("ABACAB", gpu_prefix_cache_share=share, prefix_pool=pool))
    stats = with_pool.prefix_cache
    assert stats is not None and stats.mode == "bounded"
    assert (stats.gpu_hits, stats.pool_hits, stats.misses) == (2, 1, 3)
    per_token = engine.kv_bytes_per_token
    assert per_token == 327_680  # 80 layers x 8 KV heads x 128 x (K and V) x 2 bytes
    transfer = prefix * per_token / POOL_TIER_DEFAULTS["ssd"][1]  # 1,000 x 327,680 B / 6.5 GB/s = 50.4 ms
    assert stats.pool_transfer_seconds_mean == pytest.approx(transfer)
    assert stats.pool_bytes_transferred == prefix * per_token
    # The last request (B, a pool hit) would have been a GPU hit in an unbounded cache: same work, later by the
    # transfer. Requests 30 s apart are served alone, so their TTFTs differ by exactly that.
    unbounded = engine.simulate(_traffic("ABACAB"))
    ttft_pool = _ttfts(engine, _traffic("ABACAB", gpu_prefix_cache_share=share, prefix_pool=pool))
    ttft_free = _ttfts(engine, _traffic("ABACAB"))
    assert ttft_pool[5] - ttft_free[5] == pytest.approx(transfer, rel=1e-9)
    assert ttft_pool[:5] == pytest.approx(ttft_free[:5], rel=1e-12)
    assert unbounded.prefix_cache is not None and unbounded.prefix_cache.gpu_hits == 3


def _ttfts(engine: TrafficEngine, traffic: Traffic) -> list[float]:
    """Per-request TTFT, one replica, recomputed from the timeline."""
    reqs = engine.requests(traffic)
    cached, delay = reqs.cached_prompt_tokens, None
    if traffic.prefix_pool is not None or traffic.gpu_prefix_cache_share is not None:
        assert reqs.prefix_key is not None and reqs.prefix_tokens is not None
        hits = engine.prefix_hits(traffic, reqs.prefix_key, reqs.prefix_tokens)
        cached, delay = hits.cached_tokens, hits.transfer_seconds
    t = simulate_after_request_overhead(
        reqs.arrival_seconds,
        reqs.prompt_tokens,
        reqs.output_tokens,
        cached,
        np.arange(len(reqs)),
        ReplicaContext(engine.limits, engine.step_cost(reqs)),
        ready_delay_seconds=delay,
    )
    return (t.first_token_seconds - t.sent_seconds).tolist()


def _stream(**extra) -> Traffic:
    return Traffic(
        requests_per_second=4.0, num_requests=300, shared_prefix_fraction=0.5, num_prefixes=30, seed=3, **extra
    )


def test_a_pool_too_small_for_one_prefix_serves_like_no_pool():
    engine = TrafficEngine.of(BASE)
    share = 0.01
    tiny = engine.simulate(_stream(gpu_prefix_cache_share=share, prefix_pool=PrefixPool(capacity_bytes=1e6)))
    none = engine.simulate(_stream(gpu_prefix_cache_share=share))
    assert tiny.prefix_cache is not None and none.prefix_cache is not None
    assert tiny.prefix_cache.pool_hits == 0 and tiny.prefix_cache.misses == none.prefix_cache.misses
    skip = {"prefix_cache"}
    assert tiny.model_dump(exclude=skip) == none.model_dump(exclude=skip)


def test_an_infinitely_fast_pool_times_every_hit_like_a_gpu_hit():
    engine = TrafficEngine.of(BASE)
    traffic = _stream(gpu_prefix_cache_share=0.01)
    reqs = engine.requests(traffic)
    assert reqs.prefix_key is not None and reqs.prefix_tokens is not None
    per_token = engine.kv_bytes_per_token
    hits = prefix_residency(
        reqs.prefix_key, reqs.prefix_tokens, engine.gpu_prefix_cache_tokens(traffic), 1e18, per_token, np.inf
    )
    assert (hits.source == POOL_HIT).sum() > 100  # the small GPU cache sends most repeats to the pool
    # Every repeat hits somewhere, for free: exactly the unbounded cache's cached tokens and timeline.
    assert hits.cached_tokens.tolist() == reqs.cached_prompt_tokens.tolist()
    assert not hits.transfer_seconds.any()
    args = (reqs.arrival_seconds, reqs.prompt_tokens, reqs.output_tokens)
    rest = (np.arange(len(reqs)), ReplicaContext(engine.limits, engine.step_cost(reqs)))
    fast = simulate_after_request_overhead(*args, hits.cached_tokens, *rest, ready_delay_seconds=hits.transfer_seconds)
    free = simulate_after_request_overhead(*args, reqs.cached_prompt_tokens, *rest)
    assert fast.first_token_seconds.tolist() == free.first_token_seconds.tolist()
    assert fast.finish_seconds.tolist() == free.finish_seconds.tolist()
    # Through the engine at the largest bandwidth a pool may state (10 TB/s, 34 us a prefix): a pool hit joins the
    # queue at the first step boundary after its load, so it waits at most one step more than a GPU hit.
    fastest = PrefixPool(bandwidth_bytes_per_second=1e13)
    quick = engine.simulate(_stream(gpu_prefix_cache_share=0.01, prefix_pool=fastest))
    unbounded = engine.simulate(_stream())
    assert unbounded.ttft_seconds.mean <= quick.ttft_seconds.mean <= unbounded.ttft_seconds.mean + quick.itl_seconds.p99


def test_a_slow_pool_costs_ttft_and_recomputation_costs_more_than_a_fast_one():
    engine = TrafficEngine.of(BASE)
    share = 0.01
    dram = engine.simulate(_stream(gpu_prefix_cache_share=share, prefix_pool=PrefixPool(tier="dram")))
    ssd = engine.simulate(_stream(gpu_prefix_cache_share=share, prefix_pool=PrefixPool(tier="ssd")))
    none = engine.simulate(_stream(gpu_prefix_cache_share=share))
    assert dram.prefix_cache and ssd.prefix_cache
    assert dram.prefix_cache.pool_hits == ssd.prefix_cache.pool_hits > 0
    assert dram.ttft_seconds.mean < ssd.ttft_seconds.mean
    assert dram.ttft_seconds.mean < none.ttft_seconds.mean


def test_without_a_bound_or_a_pool_the_stream_is_served_as_before():
    engine = TrafficEngine.of(BASE)
    result = engine.simulate(Traffic(num_requests=200, shared_prefix_fraction=0.5))
    assert result.prefix_cache is not None and result.prefix_cache.mode == "unbounded"
    assert (result.prefix_cache.gpu_hits, result.prefix_cache.misses) == (199, 1)
    assert engine.simulate(Traffic(num_requests=200)).prefix_cache is None


# ------------------------------------------------------------------------------------- latency CDF


@pytest.mark.parametrize(
    "traffic",
    [
        Traffic(requests_per_second=3.0, num_requests=400, lengths="uniform", range_ratio=0.5, seed=2),
        Traffic(requests_per_second=None, num_requests=150),
    ],
)
def test_the_quantile_table_is_numpy_s_on_the_simulated_requests(traffic):
    scenario = InferenceScenario(num_gpus=8, tensor_parallel=4, concurrency=128)  # two replicas
    engine = TrafficEngine.of(scenario)
    result = engine.simulate(traffic)
    table = result.latency_quantiles
    assert table is not None and table.percentiles == list(QUANTILE_GRID)
    # Recompute independently: the same stream, each replica's timeline, per-request values.
    reqs = engine.requests(traffic)
    timelines = []
    for r in range(engine.replicas):
        mine = np.arange(r, len(reqs), engine.replicas)
        timelines.append(
            simulate_after_request_overhead(
                reqs.arrival_seconds[mine],
                reqs.prompt_tokens[mine],
                reqs.output_tokens[mine],
                reqs.cached_prompt_tokens[mine],
                mine,
                ReplicaContext(engine.limits, engine.step_cost(reqs)),
            )
        )
    sent = np.concatenate([t.sent_seconds for t in timelines])
    first = np.concatenate([t.first_token_seconds for t in timelines])
    finish = np.concatenate([t.finish_seconds for t in timelines])
    scheduled = np.concatenate([t.scheduled_seconds for t in timelines])
    out = np.concatenate([t.output_tokens for t in timelines])
    ttft, e2e = first - sent, finish - sent
    tpot = ((e2e - ttft) / (out - 1))[out > 1]
    for metric, values in (
        ("ttft_seconds", ttft),
        ("e2e_latency_seconds", e2e),
        ("queue_seconds", scheduled - sent),
        ("tpot_seconds", tpot),
    ):
        assert getattr(table, metric) == pytest.approx(np.percentile(values, QUANTILE_GRID).tolist(), rel=1e-12)
    # ITL by tokens: numpy's inverted-CDF weighted percentile of the step durations, weighted by tokens sampled.
    steps = np.concatenate([t.step_seconds for t in timelines])
    tokens = np.concatenate([t.step_batch for t in timelines])
    expected = np.percentile(steps[tokens > 0], QUANTILE_GRID, weights=tokens[tokens > 0], method="inverted_cdf")
    assert table.itl_seconds == pytest.approx(expected.tolist(), rel=1e-12)
    for metric in ("ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_latency_seconds", "queue_seconds"):
        column = getattr(table, metric)
        assert column == sorted(column)  # monotone
        dist = getattr(result, metric)
        assert table.at(metric, 50) == dist.p50 and table.at(metric, 99) == dist.p99
        assert table.at(metric, 90) == dist.p90 and table.at(metric, 95) == dist.p95
        assert column[0] <= dist.mean <= column[-1]
