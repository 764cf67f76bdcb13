"""A request stream's answers that a deployment review reads (issue 23, items 5 and 6): rates that add up, and a
stream that cannot be served as asked says so in the plan's warnings instead of only in its numbers."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from planner import plan
from planner.errors import PlanningError
from planner.export import plans_to_summary_csv
from planner.inference.scenario import InferenceScenario
from planner.inference.workload import Slo, TraceRow, Traffic, parse_trace_csv
from planner.units import per_second

SLO = Slo(ttft_seconds=2.0, tpot_seconds=0.05)
BASE = dict(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=2, tensor_parallel=1, concurrency=64)


def _trace(rows: list[tuple[float, int, int]], slo: Slo | None = None) -> Traffic:
    trace = tuple(TraceRow(arrival_seconds=a, prompt_tokens=p, output_tokens=o) for a, p, o in rows)
    return Traffic(lengths="trace", trace=trace, slo=slo)


STREAMS = {
    "poisson": Traffic(requests_per_second=8, num_requests=300, slo=SLO),
    "uniform lengths, gamma bursts": Traffic(
        requests_per_second=5,
        arrival="gamma",
        burstiness=0.5,
        lengths="uniform",
        range_ratio=0.5,
        num_requests=300,
        slo=SLO,
    ),
    "client cap": Traffic(requests_per_second=50, max_concurrency=8, num_requests=200, slo=SLO),
    "overloaded": Traffic(requests_per_second=200, num_requests=300, slo=SLO),
    "trace": _trace([(0.25 * k, 500 + 37 * (k % 9), 40 + 11 * (k % 5)) for k in range(120)], SLO),
}


@pytest.mark.parametrize("name", STREAMS)
def test_goodput_completed_and_offered_add_up(name):
    """goodput <= completed <= offered, over the windows the result states: offered over the sending window (first
    to last send), completed and goodput over the run (first send to last answer)."""
    t = plan(InferenceScenario(**BASE, traffic=STREAMS[name])).traffic
    assert t is not None and t.offered_requests_per_second is not None and t.goodput_requests_per_second is not None
    assert t.goodput_requests_per_second <= t.request_throughput_per_second <= t.offered_requests_per_second
    # completed over the run is every request over its duration
    assert t.request_throughput_per_second == pytest.approx(t.num_requests / t.duration_seconds)


def test_a_trace_is_offered_at_its_own_rate_and_the_csv_says_so():
    """The old summary CSV printed the Traffic default (1.0 req/s) for a 4 req/s trace, below its goodput."""
    scenario = InferenceScenario(**BASE, traffic=STREAMS["trace"])
    t = plan(scenario).traffic
    assert t is not None
    # 120 requests sent 0.25 s apart: 120 / 29.75 s
    assert t.offered_requests_per_second == pytest.approx(120 / 29.75)
    header, row = plans_to_summary_csv([plan(scenario)]).splitlines()[:2]
    columns = dict(zip(header.split(","), row.split(","), strict=False))
    assert float(columns["Traffic: requests/s offered"]) == pytest.approx(120 / 29.75, rel=1e-3)
    assert float(columns["Traffic: goodput (requests/s)"]) <= float(columns["Traffic: requests/s offered"])


def test_a_stream_sent_at_once_has_no_offered_rate():
    t = plan(InferenceScenario(**BASE, traffic=Traffic(requests_per_second=None, num_requests=50))).traffic
    assert t is not None and t.offered_requests_per_second is None


def test_requests_longer_than_the_context_or_the_kv_pool_are_named():
    """A 5,000,000-token request ran silently (TTFT 21.6 h, warnings []) while a static plan of the same prompt warns
    that the engine refuses it."""
    p = plan(InferenceScenario(**BASE, traffic=_trace([(0.0, 1000, 100), (0.5, 5_000_000, 50), (1.0, 2000, 200)])))
    assert "stream_over_context" in p.warning_codes and "stream_over_kv_pool" in p.warning_codes
    message = p.warnings[p.warning_codes.index("stream_over_context")]
    assert "1 of 3 requests" in message and "131,072" in message


def test_an_overloaded_stream_warns_and_a_served_one_does_not():
    overloaded = plan(InferenceScenario(**BASE, traffic=STREAMS["overloaded"]))
    assert "stream_overloaded" in overloaded.warning_codes
    served = plan(InferenceScenario(**BASE, traffic=STREAMS["poisson"]))
    assert not {"stream_overloaded", "stream_over_context", "stream_over_kv_pool"} & set(served.warning_codes)
    # the static plan's saturated rate at the stream's lengths is the bound the warning quotes
    sustained = plan(InferenceScenario(**BASE)).performance.requests_per_second
    message = overloaded.warnings[overloaded.warning_codes.index("stream_overloaded")]
    assert f"sends {per_second(200)} but" in message and f"about {per_second(sustained)} (2 replicas" in message


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_trace_values_are_named_as_such(value):
    with pytest.raises(PlanningError, match="finite number"):
        parse_trace_csv(f"arrival_seconds,prompt_tokens,output_tokens\n0,100,10\n{value},100,10\n")


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_a_non_finite_rate_is_named_as_such(value):
    with pytest.raises(ValidationError, match="finite number"):
        Traffic(requests_per_second=value)


# ------------------------------------------------------------------------- per-target percentiles (item 4)


def test_each_target_is_checked_at_its_own_percentile():
    """'p99 TTFT <= 2 s and p95 TPOT <= 50 ms', the usual SLO: each check reads its own percentile of the run."""
    slo = Slo(ttft_seconds=2.0, tpot_seconds=0.05, tpot_percentile=95)
    t = plan(InferenceScenario(**BASE, traffic=Traffic(requests_per_second=8, num_requests=300, slo=slo))).traffic
    assert t is not None
    checks = {c.metric: c for c in t.slo}
    assert (checks["ttft_seconds"].percentile, checks["tpot_seconds"].percentile) == (99, 95)
    assert checks["ttft_seconds"].simulated_seconds == t.ttft_seconds.p99
    assert checks["tpot_seconds"].simulated_seconds == t.tpot_seconds.p95


def test_the_nested_and_the_flat_forms_are_one_slo_and_the_old_form_still_reads():
    nested = Slo.model_validate({"ttft": {"seconds": 2, "percentile": 99}, "tpot": {"seconds": 0.05, "percentile": 95}})
    assert nested == Slo(ttft_seconds=2, ttft_percentile=99, tpot_seconds=0.05, tpot_percentile=95)
    assert Slo(ttft_seconds=2, percentile=90).percentile_of("ttft_seconds") == 90  # the shared percentile, as before
    with pytest.raises(ValidationError):
        Slo.model_validate({"ttft": {"seconds": 2, "p": 99}})


def test_the_cli_takes_one_percentile_per_target():
    from planner.cli.traffic import parse_slo

    slo = parse_slo(["p99_ttft_seconds<=2", "p95_tpot_seconds<=0.05"])
    assert slo is not None and (slo.percentile_of("ttft_seconds"), slo.percentile_of("tpot_seconds")) == (99, 95)
    same = parse_slo(["p90_ttft_seconds<=2", "p90_tpot_seconds<=0.05"])
    assert same == Slo(ttft_seconds=2, tpot_seconds=0.05, percentile=90)


def test_an_slo_search_constrains_each_target_at_its_own_percentile():
    from planner.search.slo_search import slo_constraints

    constraints = slo_constraints(Slo(ttft_seconds=2, tpot_seconds=0.05, tpot_percentile=95))
    assert constraints == [("p99_ttft_seconds", "<=", 2.0), ("p95_tpot_seconds", "<=", 0.05)]
