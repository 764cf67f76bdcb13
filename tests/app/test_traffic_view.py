"""The Inference page's Traffic section: the stream's inputs build scenario.traffic (so links, CSVs and pins carry
it), the results are the engine's, a bad trace gets a sentence, and a link reproduces the same numbers."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean, open_page, warnings_text
from test_charts import _check
from test_controls import duplicate_warnings, run  # noqa: F401  (fixture)

from planner import InferenceScenario, plan
from planner.export import plans_to_csv
from planner.inference.traffic import CAPACITY_MAX_REQUESTS, CURVE_REQUESTS, TrafficEngine, probe_scenario
from planner.inference.workload import PrefixPool, Slo, TraceRow, Traffic
from planner.share import scenario_to_query_params
from ui import traffic_charts, traffic_controls, traffic_text
from ui.links import decode_pin, encode_pin

# 200 requests keep each simulation (and the curve's and the capacity search's probes) short.
LIGHT = {"inference_traffic": "true", "inference_traffic_num_requests": "200"}
TRACE = b"arrival_seconds,prompt_tokens,output_tokens\n0,1000,200\n0.5,3000,100\n1.25,500,400\n"


def scenario_of(at) -> InferenceScenario:
    return at.session_state["current_inference"]


def table(at) -> list[list[str]]:
    frame = at.table[0].value
    return [[index, *row] for index, row in zip(frame.index, frame.values.tolist())]


def boxes(at, words: str) -> list[str]:
    return [b.value.replace("\\", "") for b in [*at.success, *at.warning, *at.error, *at.info] if words in b.value]


def verdict(at) -> str:
    """The Traffic section's verdict: the capacity sentence (or, without an SLO, the no-target box) and what the
    stream got on this deployment."""
    found = boxes(at, "per replica") + boxes(at, "No SLO target set") + boxes(at, "This deployment (")
    assert 1 <= len(found) <= 2, found
    return "\n".join(found)


def test_the_section_is_off_by_default_and_changes_nothing():
    at = open_page()
    assert_clean(at)
    assert at.toggle(key="inference_traffic").value is False
    assert scenario_of(at) == InferenceScenario()
    assert not at.table  # no percentile table without a stream


def test_the_view_renders_with_defaults_and_shows_the_engine_s_numbers():
    at = open_page(params={"inference_traffic": "true"})
    assert_clean(at)
    scenario = scenario_of(at)
    assert scenario.traffic == Traffic()
    expected = plan(scenario).traffic
    rows = table(at)
    assert [r[0] for r in rows] == ["Time to first token", "Time per output token", "Inter-token latency",
                                    "End-to-end latency", "Queue wait"]  # fmt: skip
    assert rows == [
        [r[""], r["Mean"], r["p50"], r["p90"], r["p99"], r["p99 likely"]]
        for r in traffic_text.percentile_rows(expected)
    ]
    # each p99 with the interval a real deployment likely measures, holding the simulated value
    assert all("–" in r[-1] for r in rows)
    assert "No SLO target set" in verdict(at)
    # Load curve (TTFT, TPOT), CDF and KV use, besides the static plan's memory and roofline charts.
    assert len(at.get("vega_lite_chart")) >= 6
    assert any("Assumptions of the simulation" in e.label for e in at.expander)


def test_moving_the_rate_changes_the_percentiles_and_the_verdict():
    at = open_page(params={**LIGHT, "inference_traffic_slo_ttft_seconds": "2"})
    assert_clean(at)
    before_table, before = table(at), verdict(at)
    assert "1 replica (4 × H100 SXM5 80GB, max_num_seqs 64 each) for 1.0 req/s (simulated at that rate: met)" in before
    at.select_slider(key="inference_pick_traffic_rate").set_value(5.0).run()
    assert_clean_but_slo(at)
    assert at.number_input(key="inference_traffic_requests_per_second").value == 5.0
    assert scenario_of(at).traffic.requests_per_second == 5.0
    after = verdict(at)
    assert after != before and "for 5.0 req/s" in after and "This deployment (1 replica) at 5.0 req/s" in after
    assert table(at) != before_table
    assert table(at) == [
        [r[""], r["Mean"], r["p50"], r["p90"], r["p99"], r["p99 likely"]]
        for r in traffic_text.percentile_rows(plan(scenario_of(at)).traffic)
    ]
    # The exact box takes a rate the slider has no stop for.
    at.number_input(key="inference_traffic_requests_per_second").set_value(2.5).run()
    assert scenario_of(at).traffic.requests_per_second == 2.5
    assert "at 2.5 req/s" in verdict(at)


def test_the_rate_slider_writes_the_box_without_a_duplicate_value_warning(duplicate_warnings):  # noqa: F811
    at = open_page(params=LIGHT)
    run(at.select_slider(key="inference_pick_traffic_rate").set_value(2.0))  # the box follows the slider
    run(at.number_input(key="inference_traffic_requests_per_second").set_value(4.0))  # the slider follows the box
    run(at.number_input(key="inference_traffic_slo_tpot_seconds").set_value(40.0))  # the ms box, state-driven
    assert not at.exception
    assert at.select_slider(key="inference_pick_traffic_rate").value == 5.0  # nearest stop on a log scale
    assert duplicate_warnings() == []


def assert_clean_but_slo(at) -> None:
    """No exception; errors only from a missed SLO (the verdict box is red then)."""
    assert not at.exception, [e.value for e in at.exception]
    assert all("(target" in e.value or "even at light load" in e.value for e in at.error), [e.value for e in at.error]


def test_slo_targets_show_met_and_missed():
    at = open_page(params={**LIGHT, "inference_traffic_slo_ttft_seconds": "2"})
    text = verdict(at)
    assert "p99 TTFT" in text and ("(target 2.00 s): meets" in text or "(target 2.00 s): at risk" in text)
    assert "likely" in text  # the simulated p99 with its likely measured range
    assert at.success and "Meets p99 TTFT ≤ 2.00 s up to" in verdict(at)
    at.number_input(key="inference_traffic_slo_tpot_seconds").set_value(5.0).run()  # 5 ms: no layout decodes so fast
    assert_clean_but_slo(at)
    assert scenario_of(at).traffic.slo == Slo(ttft_seconds=2.0, tpot_seconds=0.005)
    text = verdict(at)
    assert "(target 5.00 ms): misses" in text and "Misses p99 TTFT ≤ 2.00 s and p99 TPOT ≤ 5.00 ms" in text
    assert boxes(at, "Misses p99 TTFT") and not boxes(at, "Meets")


def test_a_bad_trace_gets_a_sentence_and_the_plan_never_keeps_an_old_trace():
    at = open_page(params=LIGHT)
    at.selectbox(key="inference_traffic_lengths").set_value("trace").run()
    assert_clean(at)
    assert any("No valid trace" in i.value for i in at.info)
    assert scenario_of(at).traffic.lengths == "fixed"
    upload = at.file_uploader(key="inference_pick_traffic_trace")
    upload.set_value(("trace.csv", TRACE, "text/csv")).run()
    assert_clean(at)
    traffic = scenario_of(at).traffic
    assert traffic.lengths == "trace" and [r.prompt_tokens for r in traffic.trace] == [1000, 3000, 500]
    assert "3 requests" in table_caption(at)
    bad = b"arrival_seconds,prompt_tokens,output_tokens\n0,-5,10\n"
    at.file_uploader(key="inference_pick_traffic_trace").set_value(("bad.csv", bad, "text/csv")).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(e.startswith("This trace cannot be used: trace row 2 is not a valid request") for e in errors), errors
    assert scenario_of(at).traffic.lengths == "fixed" and scenario_of(at).traffic.trace is None
    at.file_uploader(key="inference_pick_traffic_trace").set_value(None).run()
    assert not at.error and scenario_of(at).traffic.trace is None


def table_caption(at) -> str:
    return "\n".join(c.value for c in at.caption)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"", "empty"),
        (b"a,b\n1,2\n", "no column arrival_seconds"),
        (b"arrival_seconds,prompt_tokens,output_tokens\n0,12,ten\n", "trace row 2"),
        (b"x" * (8 * 1024 * 1024 + 1), "larger than 8 MiB"),
    ],
)
def test_reading_an_uploaded_trace_never_raises(data, words):
    rows, error = traffic_controls.read_trace(data)
    assert rows is None and words in error


def test_the_url_carries_the_stream_and_a_fresh_page_reproduces_the_numbers():
    at = open_page(params={**LIGHT, "inference_traffic_slo_ttft_seconds": "2"})
    at.select_slider(key="inference_pick_traffic_rate").set_value(3.0).run()
    at.selectbox(key="inference_traffic_arrival").set_value("gamma").run()
    at.number_input(key="inference_traffic_burstiness").set_value(0.5).run()
    at.number_input(key="inference_traffic_slo_tpot_seconds").set_value(50.0).run()
    scenario = scenario_of(at)
    assert scenario.traffic == Traffic(
        requests_per_second=3.0,
        arrival="gamma",
        burstiness=0.5,
        num_requests=200,
        slo=Slo(ttft_seconds=2.0, tpot_seconds=0.05),
    )
    params = scenario_to_query_params(scenario, "inference_")
    assert params == {
        "inference_traffic": "true",
        "inference_traffic_requests_per_second": "3",
        "inference_traffic_arrival": "gamma",
        "inference_traffic_burstiness": "0.5",
        "inference_traffic_num_requests": "200",
        "inference_traffic_slo_ttft_seconds": "2",
        "inference_traffic_slo_tpot_seconds": "0.05",
    }
    # The one parameter no widget is bound to (the TPOT target is shown in ms) is written by the form.
    assert at.query_params["inference_traffic_slo_tpot_seconds"] in ("0.05", ["0.05"])
    # The CSV carries the stream too (the full CSV restores it; the summary has its percentiles).
    row = plans_to_csv([plan(scenario)]).splitlines()
    assert "traffic.ttft_seconds.p99" in row[0] and json.dumps(3.0) in row[1]
    fresh = open_page(params=params)
    assert not fresh.exception
    assert scenario_of(fresh) == scenario
    assert table(fresh) == table(at) and verdict(fresh) == verdict(at)
    assert fresh.number_input(key="inference_traffic_slo_tpot_seconds").value == 50.0


def test_a_link_with_lengths_trace_but_no_trace_falls_back_to_fixed_lengths_with_a_note():
    at = open_page(params={**LIGHT, "inference_traffic_lengths": "trace"})
    assert not at.exception
    assert "a link cannot carry" in warnings_text(at)
    assert scenario_of(at).traffic.lengths == "fixed"
    assert at.selectbox(key="inference_traffic_lengths").value == "fixed"


def test_pins_leave_the_trace_out_of_the_link_and_say_so():
    rows = (TraceRow(arrival_seconds=0, prompt_tokens=10, output_tokens=5),)
    scenario = InferenceScenario(traffic=Traffic(lengths="trace", trace=rows))
    notes: list[str] = []
    back = decode_pin(encode_pin(scenario), notes)
    assert back.traffic.lengths == "fixed" and back.traffic.trace is None
    assert notes and "cannot carry" in notes[0]


def test_the_cached_curve_and_capacity_are_the_engine_s_for_the_scenario_itself():
    """ui.state caches them without the stream's rate, trace and (past the engine's own cap) request count: the
    answers must be the same as for the scenario as it is."""
    slo = Slo(ttft_seconds=3.0)
    # The curve: 700 requests, past its 600 per point; the SLO does not change its latencies.
    curve_scenario = InferenceScenario(traffic=Traffic(requests_per_second=7.0, num_requests=700, slo=slo))
    probe = probe_scenario(curve_scenario, keep_slo=False, max_requests=CURVE_REQUESTS)
    assert probe.traffic.requests_per_second != 7.0 and probe.traffic.num_requests == CURVE_REQUESTS
    ignore = {"slo_attainment"}  # the one thing the SLO changes; the curve does not show it
    points = [p.model_dump(exclude=ignore) for p in TrafficEngine.of(probe).load_curve().points]
    assert points == [p.model_dump(exclude=ignore) for p in TrafficEngine.of(curve_scenario).load_curve().points]
    # The capacity search, with a trace (its probes replay it at each rate) and gamma arrivals.
    rows = tuple(TraceRow(arrival_seconds=i / 3, prompt_tokens=500 + i, output_tokens=100) for i in range(30))
    traffic = Traffic(num_requests=120, lengths="trace", trace=rows, arrival="gamma", burstiness=2, slo=slo)
    scenario = InferenceScenario(traffic=traffic)
    probe = probe_scenario(scenario, keep_slo=True, max_requests=CAPACITY_MAX_REQUESTS)
    assert probe.traffic.trace is not None and probe.traffic.slo == slo
    assert [r.prompt_tokens for r in probe.traffic.trace] == [r.prompt_tokens for r in rows]
    assert TrafficEngine.of(probe).capacity(10.0) == TrafficEngine.of(scenario).capacity(10.0)


def test_a_layout_without_room_for_a_kv_cache_says_so_instead_of_failing():
    at = open_page(params={"inference_traffic": "true", "inference_num_gpus": "1", "inference_tensor_parallel": "1"})
    assert not at.exception
    assert any("cannot serve a request stream" in e.value for e in at.error)
    assert scenario_of(at).traffic == Traffic()  # the link keeps the stream; only its simulation is missing


def test_review_shows_the_slo_verdict_of_a_pinned_plan_in_plain_words():
    met = InferenceScenario(label="calm", traffic=Traffic(num_requests=200, slo=Slo(ttft_seconds=2.0)))
    missed = InferenceScenario(
        label="busy", traffic=Traffic(requests_per_second=6.0, num_requests=200, slo=Slo(ttft_seconds=2.0))
    )
    at = open_page("review", {"pin": [encode_pin(met), encode_pin(missed)]})
    assert not at.exception
    body = "\n".join(b.value for b in [*at.success, *at.info, *at.warning, *at.error, *at.markdown]).replace("\\", "")
    calm = plan(met).traffic.slo[0]
    verb = {"meets": "Meets", "at risk": "At risk on", "misses": "Misses"}[calm.verdict]
    assert f"{verb} the p99 time to first token target (2.00 s) under a simulated stream of 1.0 req/s" in body
    assert "Misses the p99 time to first token target (2.00 s) under a simulated stream of 6.0 req/s" in body
    assert "of the 200 simulated requests met every target" in body
    assert "No latency target set" not in body  # the stream's SLO is the latency target: one story
    # the table beside the lines shows the numbers they judge, with the same likely ranges
    tables = [t.value for t in at.table]
    stream_rows = [frame.loc["Stream p99 TTFT"] for frame in tables if "Stream p99 TTFT" in frame.index]
    assert len(stream_rows) == 2
    calm_ttft = plan(met).traffic.ttft_seconds
    assert stream_rows[0]["Likely range"] == traffic_text.seconds_range(calm_ttft.likely_at(99))


def test_the_traffic_charts_have_tooltips_valid_data_and_few_log_ticks():
    scenario = InferenceScenario(traffic=Traffic(num_requests=120, slo=Slo(ttft_seconds=2.0, tpot_seconds=0.03)))
    result, curve = plan(scenario).traffic, TrafficEngine.of(scenario).load_curve(120)
    specs = [
        traffic_charts.load_curve(curve, "ttft_seconds", 1.0, 2.0, "SLO p99 TTFT ≤ 2 s", 3.0),
        traffic_charts.load_curve(curve, "tpot_seconds", None),  # no markers, no SLO
        traffic_charts.latency_percentiles(result, {"ttft_seconds": 2.0, "tpot_seconds": 0.03}),
        traffic_charts.latency_cdf(result, {"ttft_seconds": 2.0, "tpot_seconds": 0.03}),
        traffic_charts.latency_cdf(result),  # no SLO: no markers
        traffic_charts.kv_over_time(result.kv_utilization_over_time),
    ]
    for spec in specs:
        _check(spec)
    assert traffic_charts.log_ticks(0.15, 6.5) == [0.2, 0.5, 1.0, 2.0, 5.0]
    assert traffic_charts.log_ticks(18, 40) == [20.0, 30.0]
    assert traffic_charts.log_ticks(0.01, 1000) == [0.01, 1.0, 100.0]  # six decades: every other one
    assert len(traffic_charts.log_ticks(1e-6, 1e6)) <= traffic_charts.MAX_LOG_TICKS


def test_the_cdf_chart_draws_the_quantile_table_with_the_slo_marked():
    scenario = InferenceScenario(traffic=Traffic(num_requests=120, slo=Slo(ttft_seconds=2.0, percentile=95)))
    result = plan(scenario).traffic
    spec = traffic_charts.latency_cdf(result, scenario.traffic.slo.targets, 95)
    cdf = spec["datasets"]["cdf"]
    table = result.latency_quantiles
    ttft = cdf[cdf["metric"] == "TTFT"]
    assert ttft["seconds"].tolist() == [v for q, v in zip(table.percentiles, table.ttft_seconds) if q < 100]
    assert ttft["tail"].tolist() == pytest.approx([1 / (1 - q / 100) for q in table.percentiles if q < 100])
    assert spec["datasets"]["targets"]["seconds"].tolist() == [2.0]
    assert spec["datasets"]["level"]["tail"].tolist() == pytest.approx([20.0])  # p95


def test_a_prefix_pool_from_the_link_shows_its_hit_breakdown_and_round_trips():
    params = {
        **LIGHT,
        "inference_traffic_shared_prefix_fraction": "0.5",
        "inference_traffic_num_prefixes": "30",
        "inference_traffic_gpu_prefix_cache_share": "0.01",
        "inference_traffic_prefix_pool_tier": "ssd",
        "inference_traffic_prefix_pool_capacity_bytes": "50000000000",
    }
    at = open_page(params=params)
    assert_clean(at)
    traffic = scenario_of(at).traffic
    assert traffic.prefix_pool == PrefixPool(tier="ssd", capacity_bytes=50e9)
    assert traffic.num_prefixes == 30 and traffic.gpu_prefix_cache_share == 0.01
    assert at.selectbox(key="inference_pick_traffic_pool_tier").value == "ssd"
    assert at.number_input(key="inference_pick_traffic_pool_capacity_gb").value == 50.0
    stats = plan(scenario_of(at)).traffic.prefix_cache
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Prefix hits from the pool"] == f"{stats.pool_hits:,}" and stats.pool_hits > 0
    assert metrics["Prefixes prefilled again"] == f"{stats.misses:,}"
    assert any("in the SSD pool" in c.value for c in at.caption)
    assert scenario_to_query_params(scenario_of(at), "inference_") == {
        k: v for k, v in params.items() if k != "inference_traffic_num_requests"
    } | {"inference_traffic_num_requests": "200"}
    # Switching the pool off from the widget drops it from the scenario.
    at.selectbox(key="inference_pick_traffic_pool_tier").set_value("none").run()
    assert scenario_of(at).traffic.prefix_pool is None
    assert "Prefix hits from the pool" in {m.label for m in at.metric}
    assert {m.label: m.value for m in at.metric}["Prefix hits from the pool"] == "no pool"


def test_an_overloaded_stream_shows_the_engine_s_warning_once_in_the_traffic_section():
    """The section's overload sentence is the engine's `stream_overloaded` warning (its code, its words), shown
    there and not again in the plan's warning box at the top."""
    at = open_page(params={**LIGHT, "inference_traffic_requests_per_second": "12"})
    assert_clean(at)
    expected = plan(scenario_of(at))
    assert "stream_overloaded" in expected.warning_codes
    message = expected.warnings[expected.warning_codes.index("stream_overloaded")]
    shown = [w.value.replace("\\", "") for w in at.warning]
    assert sum(message in w for w in shown) == 1, shown
    completed = [m for m in at.metric if m.label == "Requests completed"]
    assert completed and completed[0].delta.startswith("of ")


def test_a_target_at_its_own_percentile_comes_from_the_link_and_reaches_the_checks():
    """'p99 TTFT <= 2 s and p95 TPOT <= 50 ms' said in the dashboard: the TPOT target's own percentile (More stream
    settings) travels in the link and the verdict reads p95 for TPOT."""
    at = open_page(
        params={
            **LIGHT,
            "inference_traffic_slo_ttft_seconds": "2",
            "inference_traffic_slo_tpot_seconds": "0.05",
            "inference_traffic_slo_tpot_percentile": "95",
        }
    )
    assert_clean(at)
    slo = scenario_of(at).traffic.slo
    assert slo is not None and (slo.percentile_of("ttft_seconds"), slo.percentile_of("tpot_seconds")) == (99, 95)
    assert at.selectbox(key="inference_traffic_slo_tpot_percentile").value == 95
    assert at.selectbox(key="inference_traffic_slo_ttft_percentile").value is None
    checks = plan(scenario_of(at)).traffic.slo
    assert [c.percentile for c in checks] == [99, 95]
    assert any("p95 TPOT" in b for b in boxes(at, "TPOT"))


def test_the_link_the_app_writes_with_lognormal_lengths_and_empty_p90s_reopens_cleanly():
    """Issue 23, item 6: lognormal picked, p90s not yet typed. The section says the requests have fixed lengths
    until they are set, and the address bar's link is that stream: it reopens without 'This link had problems'."""
    at = open_page(params={"inference_traffic": "true", "inference_traffic_num_requests": "100"})
    at.selectbox(key="inference_traffic_lengths").set_value("lognormal").run()
    assert not at.exception
    assert any("Lognormal lengths need both p90s" in c.value for c in [*at.caption, *at.info, *at.warning])
    written = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    reopened = open_page(params=written)
    assert_clean(reopened)
    assert "This link had problems" not in warnings_text(reopened)
    assert scenario_of(reopened).traffic == scenario_of(at).traffic
