"""Trade-offs page, 'Layouts that meet a traffic SLO': the table is planner.search.slo_search's answer for the
plan's stream and SLO (targets typed on the page replace the stream's), each row opens as a plan with that stream,
and a plan without a stream or an SLO nobody meets gets a sentence, never a traceback."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import open_page

from planner.inference.scenario import InferenceScenario
from planner.inference.workload import Slo
from planner.search.grid_search import InferenceSearchSpec
from planner.search.slo_search import run_slo_search
from planner.search.sweep import scenario_for_row
from planner.share import query_params_to_scenario
from ui import slo_search_view

STREAM = {
    "inference_model": "llama-3.1-8b",
    "inference_num_gpus": "1",
    "inference_tensor_parallel": "1",
    "inference_traffic": "true",
    "inference_traffic_num_requests": "200",
    "inference_traffic_requests_per_second": "8",
    "inference_traffic_slo_ttft_seconds": "1",
}


def slo_table(at):
    found = [f.value for f in at.dataframe if "SLO attainment (%)" in f.value.columns]
    assert len(found) == 1, [list(f.value.columns)[:3] for f in at.dataframe]
    return found[0]


def expected(scenario: InferenceScenario, slo: Slo):
    """What the form's defaults ask the engine: this GPU, up to 8 of them, this weight and KV format and
    concurrency, cheapest per hour first, three answers, twelve simulations."""
    spec = InferenceSearchSpec(
        gpus=(scenario.gpu_id(),),
        max_gpus=8,
        weight_dtypes=(scenario.weight_dtype,),
        kv_cache_dtypes=(scenario.kv_cache_dtype,),
        concurrency=(scenario.concurrency, scenario.concurrency),
        objective="usd_per_hour",
        top=3,
    )
    return run_slo_search(scenario, spec, slo, max_simulations=slo_search_view.DEFAULT_SIMULATIONS)


def assert_matches(at, slo: Slo) -> None:
    assert not at.exception, [e.value for e in at.exception]
    scenario = at.session_state["current_inference"]
    result = expected(scenario, slo)
    assert not result.rows.empty
    frame = slo_table(at)
    assert len(frame) == len(result.rows)
    for (_, shown), (_, row) in zip(frame.iterrows(), result.rows.iterrows()):
        assert shown["GPUs"] == row["num_gpus"]
        assert shown["$ per hour"] == pytest.approx(row["usd_per_hour"])
        assert shown["p99 TTFT (ms)"] == pytest.approx(row["p99_ttft_seconds"] * 1e3)
        assert shown["p99 TPOT (ms)"] == pytest.approx(row["p99_tpot_seconds"] * 1e3)
        assert shown["SLO attainment (%)"] == pytest.approx(row["slo_attainment"] * 100)
        assert shown["Goodput (req/s)"] == pytest.approx(row["goodput_requests_per_second"])
        # The link opens that layout serving the same stream, with the SLO searched for.
        params = parse_qs(urlsplit(shown["Open as plan"]).query)
        linked, warnings = query_params_to_scenario(params, "inference", "inference_")
        assert not warnings, warnings
        layout = scenario_for_row(scenario, row)
        assert linked.model_dump(exclude={"traffic"}) == layout.model_dump(exclude={"traffic"})
        assert linked.traffic == result.traffic and linked.traffic.slo == slo
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")
    assert f"{len(result.rows)} layout(s) meet" in text and f"{result.simulations} simulated" in text


def test_the_slo_search_shows_the_engine_s_answers_for_the_stream_s_slo():
    at = open_page("tradeoffs", params=STREAM)
    assert "Layouts that meet a traffic SLO" in [s.value for s in at.subheader]
    assert not [f for f in at.dataframe if "SLO attainment (%)" in f.value.columns]  # nothing runs unasked
    at.button(key="tradeoffs_slo_run").click().run()
    assert_matches(at, Slo(ttft_seconds=1.0))
    assert any("Assumptions of the SLO search" in e.label for e in at.expander)


def test_a_target_typed_on_the_page_joins_the_stream_s():
    at = open_page("tradeoffs", params=STREAM)
    at.number_input(key="tradeoffs_slo_tpot_ms").set_value(30.0)
    at.selectbox(key="tradeoffs_slo_percentile").set_value(90)
    at.button(key="tradeoffs_slo_run").click().run()
    slo = Slo(ttft_seconds=1.0, tpot_seconds=0.03, percentile=90)
    assert_matches(at, slo)
    assert "p90 TTFT (ms)" in slo_table(at).columns  # the percentile the SLO targets, beside the p99s


def test_no_stream_and_no_answer_get_a_sentence():
    at = open_page("tradeoffs")
    assert not at.exception
    assert any("serves no request stream" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "tradeoffs_slo_run"]
    at = open_page("tradeoffs", params=STREAM)
    at.number_input(key="tradeoffs_slo_ttft_s").set_value(0.001)  # 1 ms: no layout prefills that fast
    at.button(key="tradeoffs_slo_run").click().run()
    assert not at.exception and not at.error
    boxes = [i.value.replace("\\", "") for i in at.info if "No candidate meets" in i.value]
    assert boxes and "p99 TTFT ≤ 1.00 ms" in boxes[0] and "0 pass the static bounds" in boxes[0]
