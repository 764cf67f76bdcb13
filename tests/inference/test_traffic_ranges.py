"""Likely ranges on every traffic answer (issue 23, item 3): intervals that hold the simulated value, verdicts that
read them, rates that still add up, replicas with a range, and ranges whose out-of-source check holds."""

from __future__ import annotations

import dataclasses

import pytest

from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.traffic_ranges import STATISTICS, TrafficRanges
from planner.inference.workload import Slo, Traffic
from planner.scenario_base import revised
from planner.uncertainty import PROMISED, TrafficRange, serving_errors, serving_regime, traffic_range

SLO = Slo(ttft_seconds=2.0, tpot_seconds=0.05, e2e_latency_seconds=60.0)
DISTRIBUTIONS = ("ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_latency_seconds", "queue_seconds")


def _range(kind: str, low: float, high: float) -> TrafficRange:
    return TrafficRange(kind=kind, low_error=low, high_error=high, regime=None, basis="test", loo_coverage=None)


def _ranges(ttft=(-0.5, 0.25), tpot=(-0.2, 0.1), throughput=(-0.1, 0.5)) -> TrafficRanges:
    return TrafficRanges("test", _range("ttft", *ttft), _range("tpot", *tpot), _range("throughput", *throughput))


def _engine(rate: float | None = 2.0, ranges: TrafficRanges | None = None, **traffic) -> TrafficEngine:
    stream = Traffic(requests_per_second=rate, num_requests=300, slo=SLO, **traffic)
    engine = TrafficEngine.of(InferenceScenario(traffic=stream))
    return dataclasses.replace(engine, ranges=ranges) if ranges is not None else engine


def test_an_interval_is_the_measured_value_band_around_the_prediction():
    r = _range("ttft", -0.5, 0.25)  # measured between P / 1.25 and P / 0.5
    assert r.interval(1.0) == pytest.approx((0.8, 2.0))
    assert _range("ttft", 0.1, 0.3).interval(1.0)[1] == 1.0  # an interval always holds the prediction


@pytest.mark.parametrize("rate", [0.5, 2.0, 6.0, None])
def test_every_statistic_s_likely_interval_holds_it_and_rates_still_add_up(rate):
    result = _engine(rate).simulate()
    for name in DISTRIBUTIONS:
        d = getattr(result, name)
        assert d.likely is not None and set(d.likely) == set(STATISTICS)
        for stat in STATISTICS:
            low, high = d.likely[stat]
            assert low <= getattr(d, stat) <= high
    low, high = result.request_throughput_likely
    assert low <= result.request_throughput_per_second <= high
    if result.offered_requests_per_second is not None:
        assert high <= max(result.offered_requests_per_second, result.request_throughput_per_second) + 1e-9
    g_low, g_high = result.goodput_likely
    assert 0 <= g_low <= result.goodput_requests_per_second <= g_high <= high + 1e-9
    a_low, a_high = result.slo_attainment_likely
    assert 0 <= a_low <= result.slo_attainment <= a_high <= 1
    assert set(result.likely_basis) == {"ttft", "tpot", "throughput"}


def test_verdicts_read_the_likely_range_against_the_target():
    ranges = _ranges(ttft=(-0.5, 0.25))  # measured TTFT within [0.8, 2.0] x simulated
    result = _engine(0.5, ranges).simulate()
    for check in result.slo:
        low, high = check.likely_seconds
        expected = "meets" if high <= check.target_seconds else "misses" if low > check.target_seconds else "at risk"
        assert check.verdict == expected
    ttft = next(c for c in result.slo if c.metric == "ttft_seconds")
    assert ttft.likely_seconds == pytest.approx((ttft.simulated_seconds / 1.25, ttft.simulated_seconds / 0.5))
    # A target just above the simulated value but below the range's slow edge is at risk, not met.
    engine = _engine(0.5, ranges)
    tight = engine.simulate(revised(engine.traffic, slo=Slo(ttft_seconds=ttft.simulated_seconds * 1.2)))
    check = next(c for c in tight.slo if c.metric == "ttft_seconds")
    assert check.met and check.verdict == "at risk"


def test_end_to_end_latency_composes_the_ttft_and_tpot_ranges_per_request():
    exact = _ranges(ttft=(0.0, 0.0), tpot=(0.0, 0.0))
    e2e = _engine(2.0, exact).simulate().e2e_latency_seconds
    for stat in STATISTICS:
        assert e2e.likely[stat] == pytest.approx((getattr(e2e, stat), getattr(e2e, stat)))
    decode_only = _engine(2.0, _ranges(ttft=(0.0, 0.0), tpot=(-0.5, 0.0))).simulate()
    # the slow edge doubles each request's decode time and leaves its TTFT: between 1x and 2x the e2e latency
    slow = decode_only.e2e_latency_seconds.likely["mean"][1]
    mean, ttft = decode_only.e2e_latency_seconds.mean, decode_only.ttft_seconds.mean
    assert slow == pytest.approx(ttft + 2 * (mean - ttft), rel=1e-9)


def test_an_open_stream_below_capacity_completes_its_rate_at_the_fast_edge_and_less_at_a_slow_one():
    """At light load a faster real deployment cannot complete more than is sent; a much slower one cannot keep up."""
    light = _engine(0.5, _ranges(throughput=(-0.5, 0.2))).simulate()
    low, high = light.request_throughput_likely
    assert high == pytest.approx(light.request_throughput_per_second)  # sent, not more
    assert low == pytest.approx(light.request_throughput_per_second)  # 1/1.2 of capacity still serves 0.5 req/s
    slow = _engine(0.5, _ranges(throughput=(-0.5, 20.0))).simulate()
    assert slow.request_throughput_likely[0] < 0.5 * slow.request_throughput_per_second


def test_the_replicas_for_a_rate_carry_a_range_that_holds_the_verified_count():
    answer = _engine(2.0, _ranges(throughput=(-0.25, 0.5))).capacity(20.0)
    assert answer.verified and answer.replicas_needed is not None
    n = answer.replicas_needed
    low, high = answer.replicas_likely
    assert low <= n <= high and low >= 1
    assert (low, high) == (max(1, -(-n * 3 // 4)), -(-n * 3 // 2))
    assert answer.gpus_likely == (low * 4, high * 4)
    assert answer.usd_per_month_likely == pytest.approx(
        (low * answer.usd_per_replica_month, high * answer.usd_per_replica_month)
    )
    assert "throughput range" in answer.likely_basis


def test_a_plan_reads_its_regime_s_own_range_only_where_several_sources_measured_it():
    ranges = serving_errors()["ranges"]
    dense_one = serving_regime(False, 1, "nvidia", "vllm")
    own = ranges["ttft"]["regimes"][dense_one]
    assert own["sources"] >= 2
    assert traffic_range("ttft", dense_one).regime == dense_one
    assert traffic_range("ttft", dense_one).low_error == pytest.approx(min(own["band"]["low_error"], -0.02))
    amd = serving_regime(True, 8, "amd", "vllm")  # one source measured it: the pooled range
    assert ranges["ttft"]["regimes"][amd]["sources"] == 1
    assert traffic_range("ttft", amd).regime is None
    unmeasured = traffic_range("tpot", serving_regime(False, 1, "nvidia", "tensorrt-llm"))
    assert unmeasured.regime is None and "every regime" in unmeasured.basis


def test_each_kind_s_pooled_range_holds_its_promise_with_each_source_left_out():
    """The ranges' coverage on left-out sources: every statistic against the band built without its source."""
    for kind, entry in serving_errors()["ranges"].items():
        band = entry["all"]["band"]
        assert band["loo_by"] == "run" and band["tested"], kind  # grouped: a source's statistics leave together
        assert band["loo_coverage"] >= PROMISED, (kind, band)
        assert entry["all"]["sources"] >= 4


def test_the_likely_replicas_widen_to_the_capacity_at_the_latency_ranges_edges():
    """A wide TTFT range (measured up to 1 / 0.2 = 5x the simulated) makes the slow edge's SLO capacity, and so its
    replicas, the range's top; the throughput range alone would stop at n x 1.5 (issue 23, item 9's finding: the
    throughput range held 6 of 10 measured counts)."""
    narrow = _engine(2.0, _ranges(throughput=(-0.25, 0.5))).capacity(20.0)
    wide = _engine(2.0, _ranges(ttft=(-0.8, 0.25), throughput=(-0.25, 0.5))).capacity(20.0)
    n = wide.replicas_needed
    assert n == narrow.replicas_needed and wide.replicas_likely[1] > -(-n * 3 // 2)
    assert "latency ranges' fast and slow edges" in wide.likely_basis
    # by hand: the edges' counts widen the throughput range, never narrow it
    r = _ranges(throughput=(-0.25, 0.5))
    answer = revised(narrow, replicas_likely=None)
    assert r.capacity(answer, 4, fast_edge_replicas=2, slow_edge_replicas=30).replicas_likely == (2, 30)
    assert r.capacity(answer, 4, fast_edge_replicas=99, slow_edge_replicas=1).replicas_likely == (
        max(1, -(-n * 3 // 4)),
        -(-n * 3 // 2),
    )
