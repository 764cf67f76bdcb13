"""A request stream in a share link: readable parameters, one per field, exact round trip, no trace."""

from __future__ import annotations

import pytest

from planner.inference.scenario import InferenceScenario
from planner.inference.workload import PrefixPool, Slo, TraceRow, Traffic
from planner.share import encode_inline, param_field, query_params_to_scenario, scenario_to_query_params

ROWS = (TraceRow(arrival_seconds=0.0, prompt_tokens=100, output_tokens=20),)


def with_traffic(traffic: Traffic | None) -> InferenceScenario:
    return InferenceScenario(traffic=traffic)


@pytest.mark.parametrize(
    "traffic",
    [
        Traffic(),
        Traffic(requests_per_second=None, num_requests=50),
        Traffic(requests_per_second=12.5, arrival="gamma", burstiness=0.25, seed=7, max_concurrency=32),
        Traffic(lengths="uniform", range_ratio=0.3, shared_prefix_fraction=0.5, chunked_prefill=False),
        Traffic(lengths="lognormal", prompt_tokens_p90=5000, output_tokens_p90=900),
        Traffic(slo=Slo(ttft_seconds=2, tpot_seconds=0.05, e2e_latency_seconds=30, percentile=95)),
        Traffic(slo=Slo()),  # an SLO with every field at its default still exists after the trip
    ],
)
def test_a_stream_round_trips_through_readable_parameters(traffic):
    scenario = with_traffic(traffic)
    params = scenario_to_query_params(scenario, "inference_")
    assert params["inference_traffic"] == "true"
    assert all(k == "inference_traffic" or k.startswith("inference_traffic_") for k in params)
    assert not any(v.startswith("cfg:") for v in params.values())
    back, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert warnings == [] and back == scenario


def test_the_parameters_are_the_field_names_and_say_only_what_differs():
    params = scenario_to_query_params(with_traffic(Traffic(requests_per_second=20, slo=Slo(ttft_seconds=2))), "p_")
    assert params == {"p_traffic": "true", "p_traffic_requests_per_second": "20", "p_traffic_slo_ttft_seconds": "2"}
    assert param_field("traffic_slo_ttft_seconds") == "traffic" and param_field("concurrency") == "concurrency"


def test_a_trace_never_travels_and_its_link_falls_back_to_fixed_lengths():
    params = scenario_to_query_params(with_traffic(Traffic(lengths="trace", trace=ROWS)), "p_")
    assert params == {"p_traffic": "true", "p_traffic_lengths": "trace"}
    back, warnings = query_params_to_scenario(params, "inference", "p_")
    assert back.traffic == Traffic() and any("cannot carry" in w for w in warnings)
    _, warnings = query_params_to_scenario({"p_traffic_trace": "0,1,2"}, "inference", "p_")
    assert any("cannot carry a trace" in w for w in warnings)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("p_traffic_requests_per_second", "fast", "p_traffic_requests_per_second"),
        ("p_traffic_requests_per_second", "-1", "p_traffic_requests_per_second"),
        ("p_traffic_arrival", "bursty", "p_traffic_arrival"),
        ("p_traffic_num_requests", "1e9", "p_traffic_num_requests"),
        ("p_traffic_slo_percentile", "97", "p_traffic_slo_percentile"),
        ("p_traffic_slo_ttft_seconds", "0", "p_traffic_slo_ttft_seconds"),
        ("p_traffic_bogus", "1", "Unknown link parameter 'p_traffic_bogus'"),
        ("p_traffic_slo_bogus", "1", "Unknown link parameter 'p_traffic_slo_bogus'"),
        ("p_traffic", "maybe", "p_traffic"),
    ],
)
def test_a_bad_stream_parameter_is_named_and_defaulted(key, value, fragment):
    scenario, warnings = query_params_to_scenario({"p_traffic": "true", key: value}, "inference", "p_")
    assert scenario.traffic is not None and scenario.traffic.requests_per_second == 1.0
    assert any(fragment in w for w in warnings), warnings


def test_stream_parameters_without_the_switch_imply_it_and_false_switches_it_off():
    on, warnings = query_params_to_scenario({"p_traffic_requests_per_second": "4"}, "inference", "p_")
    assert warnings == [] and on.traffic == Traffic(requests_per_second=4)
    off, warnings = query_params_to_scenario({"p_traffic": "false", "p_traffic_seed": "3"}, "inference", "p_")
    assert warnings == [] and off.traffic is None


def test_the_blob_form_is_still_read():
    blob = encode_inline({"requests_per_second": 7, "slo": {"ttft_seconds": 1.5}})
    back, warnings = query_params_to_scenario({"p_traffic": blob}, "inference", "p_")
    assert warnings == [] and back.traffic == Traffic(requests_per_second=7, slo=Slo(ttft_seconds=1.5))


def test_lognormal_lengths_without_their_p90s_fall_back_to_fixed_with_a_reason():
    back, warnings = query_params_to_scenario({"p_traffic_lengths": "lognormal"}, "inference", "p_")
    assert back.traffic == Traffic() and any("p90" in w for w in warnings)


@pytest.mark.parametrize(
    "traffic",
    [
        Traffic(shared_prefix_fraction=0.5, num_prefixes=40, gpu_prefix_cache_share=0.1),
        Traffic(shared_prefix_fraction=0.5, prefix_pool=PrefixPool()),  # every pool field at its default
        Traffic(
            shared_prefix_fraction=0.25,
            num_prefixes=8,
            prefix_pool=PrefixPool(tier="ssd", capacity_bytes=2e11, bandwidth_bytes_per_second=12.5e9),
        ),
    ],
)
def test_a_prefix_pool_round_trips_through_readable_parameters(traffic):
    scenario = with_traffic(traffic)
    params = scenario_to_query_params(scenario, "inference_")
    assert all(key.startswith("inference_traffic") for key in params)
    if traffic.prefix_pool is not None:
        assert any(key.startswith("inference_traffic_prefix_pool_") for key in params)
    back, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert warnings == [] and back == scenario


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("traffic_prefix_pool_bandwidth_bytes_per_second", "-5", "greater than 0"),
        ("traffic_prefix_pool_capacity_bytes", "lots", "number"),
        ("traffic_prefix_pool_tier", "tape", "'dram' or 'ssd'"),
        ("traffic_gpu_prefix_cache_share", "7", "less than or equal to 1"),
        ("traffic_num_prefixes", "0", "greater than or equal to 1"),
    ],
)
def test_hostile_prefix_pool_parameters_get_a_sentence_and_the_default(key, value, words):
    params = {"inference_traffic": "true", "inference_traffic_prefix_pool_tier": "ssd", f"inference_{key}": value}
    scenario, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert scenario.traffic is not None
    assert len(warnings) == 1 and f"inference_{key}" in warnings[0] and words in warnings[0], warnings
