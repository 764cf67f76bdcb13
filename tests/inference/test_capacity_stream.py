"""Capacity from the stream itself (issue 23, item 2): the largest rate per replica under the SLO, and the replicas
a target rate needs, use the stream's own lengths — a trace's too (replayed at each probe's rate) — and are
checked by simulating them."""

from __future__ import annotations

import numpy as np
import pytest

from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine, probe_scenario, probe_traffic
from planner.inference.workload import Slo, TraceRow, Traffic, generate_requests, replayed_trace

SLO = Slo(ttft_seconds=2.0, tpot_seconds=0.05, percentile=99)


def _trace(prompt: tuple[int, int], output: tuple[int, int], n: int = 300, rate: float = 2.0, seed: int = 1):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    arrivals -= arrivals[0]
    return tuple(
        TraceRow(
            arrival_seconds=float(a),
            prompt_tokens=int(rng.integers(prompt[0], prompt[1] + 1)),
            output_tokens=int(rng.integers(output[0], output[1] + 1)),
            prefix_id=f"p{i % 3}",
        )
        for i, a in enumerate(arrivals)
    )


def _engine(trace=None) -> TrafficEngine:
    traffic = Traffic(slo=SLO, lengths="trace" if trace else "fixed", trace=trace, num_requests=300)
    return TrafficEngine.of(InferenceScenario(traffic=traffic, prompt_tokens=2048, output_tokens=512))


def test_a_trace_of_short_requests_sustains_many_times_the_rate_of_long_ones():
    """The issue's case: 'up to 2.8 req/s per replica' was the same for fixed 2048/512 tokens and a trace of
    100-300 / 20-80 tokens, because the probes replaced a trace by the scenario's fixed lengths."""
    fixed = _engine().capacity(20.0)
    short = _engine(_trace((100, 300), (20, 80))).capacity(20.0)
    assert short.max_requests_per_second_per_replica > 5 * fixed.max_requests_per_second_per_replica
    assert short.replicas_needed is not None and fixed.replicas_needed is not None
    assert short.replicas_needed < fixed.replicas_needed
    assert short.verified and fixed.verified


def test_the_capacity_search_scales_to_the_trace_s_mean_lengths():
    short = _engine(_trace((100, 300), (20, 80)))
    assert short.probe_scale_requests_per_second_per_replica() > 5 * short.static_requests_per_second_per_replica
    fixed = _engine()
    assert fixed.probe_scale_requests_per_second_per_replica() == fixed.static_requests_per_second_per_replica


def test_a_trace_sized_answer_holds_when_simulated_directly():
    """N replicas at R, the trace replayed at R on them, meets every target; the search had grown N until it did."""
    engine = _engine(_trace((1500, 2700), (300, 550)))
    answer = engine.capacity(12.0)
    assert answer.verified and answer.replicas_needed is not None
    stream = probe_traffic(engine.traffic, 12.0, 300 * answer.replicas_needed, grow=True)
    result = engine.simulate(stream, answer.replicas_needed)
    assert all(check.met for check in result.slo) and len(result.slo) == 2
    assert result.offered_requests_per_second == pytest.approx(12.0, rel=0.02)


def test_replayed_trace_keeps_lengths_and_pattern_and_sets_the_mean_gap():
    rows = _trace((100, 300), (20, 80), n=50, rate=2.0)
    replay = replayed_trace(rows, rate=10.0, num_requests=120)
    assert len(replay) == 120
    arrivals = np.array([r.arrival_seconds for r in replay])
    assert arrivals[0] == 0 and np.all(np.diff(arrivals) >= 0)
    assert np.mean(np.diff(arrivals)) == pytest.approx(0.1)
    # lengths repeat the trace's in order; the pattern of gaps is the trace's, time-scaled
    assert [r.prompt_tokens for r in replay[:50]] == [r.prompt_tokens for r in rows]
    assert [r.output_tokens for r in replay[50:100]] == [r.output_tokens for r in rows]
    gaps, original = np.diff(arrivals[:50]), np.diff([r.arrival_seconds for r in rows])
    assert np.allclose(gaps / gaps.sum(), original / original.sum())
    # each pass's prefixes are its own: the first request of a prefix misses again, as in the trace
    assert replay[50].prefix_id == f"{rows[0].prefix_id}#1"
    reqs = generate_requests(Traffic(lengths="trace", trace=replay), 1, 1)
    first_pass = generate_requests(Traffic(lengths="trace", trace=rows), 1, 1)
    assert int((reqs.cached_prompt_tokens[50:100] > 0).sum()) == int((first_pass.cached_prompt_tokens > 0).sum())
    assert all(r.arrival_seconds == 0 for r in replayed_trace(rows, None, 10))


def test_a_trace_sent_at_once_is_spaced_evenly_at_the_probe_rate():
    rows = tuple(TraceRow(arrival_seconds=0.0, prompt_tokens=100 + i, output_tokens=10) for i in range(5))
    arrivals = [r.arrival_seconds for r in replayed_trace(rows, 4.0, 9)]
    assert np.allclose(np.diff(arrivals), 0.25)


def test_the_probe_of_a_trace_keeps_the_trace_and_its_request_count():
    rows = _trace((100, 300), (20, 80), n=40)
    scenario = InferenceScenario(traffic=Traffic(slo=SLO, lengths="trace", trace=rows))
    probe = probe_scenario(scenario, keep_slo=False, max_requests=600).traffic
    assert probe is not None and probe.lengths == "trace" and probe.trace is not None
    assert len(probe.trace) == 40  # a probe is at most the stream; only a verification grows it
    assert [r.prompt_tokens for r in probe.trace] == [r.prompt_tokens for r in rows]
    assert probe.slo is None
