"""Inference page: renders, matches the engine, and round-trips its scenario through the URL."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

from conftest import assert_clean, metric, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.model.catalog import load_catalog_config
from planner.search.fixes import suggest_fixes
from planner.share import query_params_to_scenario, scenario_to_query_params
from planner.verdict import memory_verdict


def assert_metrics_match(at, scenario: InferenceScenario) -> None:
    expected = plan(scenario)
    perf, cost, mem = expected.performance, expected.cost, expected.memory
    assert metric(at, "Time to first token") == units.seconds(perf.ttft_seconds)
    assert metric(at, "Time per output token") == units.seconds(perf.tpot_seconds)
    assert metric(at, "Output tokens/s") == units.count(perf.output_tokens_per_second)
    assert metric(at, "$ per 1M output tokens") == units.usd(cost.usd_per_million_output_tokens)
    assert metric(at, "Max concurrency") == f"{mem.max_concurrency:,}"
    assert metric(at, "Max context") == units.count(mem.max_context_tokens) + " tokens"
    energy = expected.energy  # two significant figures, beside the cost lines
    assert metric(at, "Power per GPU") == units.watts(energy.watts_per_gpu)
    assert metric(at, "kWh per 1M output tokens") == units.kwh(energy.kwh_per_million_output_tokens)
    assert metric(at, "Electricity per 1M output tokens") == units.usd_approx(
        energy.electricity_usd_per_million_output_tokens
    )
    assert any("idle + busy share × (board − idle)" in c.value for c in at.caption)
    # The verdict box follows the engine's memory verdict over the whole likely range, not the point alone.
    status = memory_verdict(expected).status
    box = {"met": at.success, "at_risk": at.warning, "missed": at.error}[status]
    verdict = next(b.value for b in box if "GPU memory" in b.value)
    assert units.gib(mem.total_bytes) in verdict and units.gib(mem.budget_bytes) in verdict
    assert any(expected.bottleneck_reason.split(";")[0][:40] in i.value for i in at.info)


def test_default_page_is_the_engine_default():
    at = open_page()
    assert_clean(at)
    assert at.session_state["current_inference"] == InferenceScenario()
    assert_metrics_match(at, InferenceScenario())
    assert at.title[0].value == "Inference"


def test_moving_the_concurrency_slider_replans():
    at = open_page()
    at.select_slider(key="inference_pick_concurrency").set_value(128).run()
    assert_clean(at)
    assert at.number_input(key="inference_concurrency").value == 128
    assert_metrics_match(at, InferenceScenario(concurrency=128))


def test_changing_gpu_and_precision_replans():
    at = open_page()
    at.selectbox(key="inference_pick_gpu").set_value("h200")
    at.selectbox(key="inference_weight_dtype").set_value("fp8")
    at.number_input(key="inference_num_gpus").set_value(8).run()
    assert_clean(at)
    assert_metrics_match(at, InferenceScenario(gpu="h200", weight_dtype="fp8", num_gpus=8))


def test_query_params_seed_every_widget_and_round_trip():
    scenario = InferenceScenario(
        model="llama-3.1-8b",
        gpu="a100-80gb",
        num_gpus=4,
        tensor_parallel=2,
        weight_dtype="fp8",
        kv_cache_dtype="fp8",
        prompt_tokens=1000,
        output_tokens=200,
        concurrency=48,
        gpu_memory_utilization=0.85,
        prefix_cache_hit_rate=0.25,
        usd_per_gpu_hour=2.5,
        target_requests_per_second=10.0,
        label="chat tier",
        decision="fp8 on A100: memory only, accepted",
    )
    at = open_page(params=scenario_to_query_params(scenario, "inference_"))
    assert_clean(at)
    assert "link had problems" not in warnings_text(at), warnings_text(at)
    assert at.session_state["current_inference"] == scenario
    assert at.number_input(key="inference_concurrency").value == 48
    assert at.select_slider(key="inference_pick_concurrency").value == 48
    assert at.text_area(key="inference_decision").value == scenario.decision
    assert_metrics_match(at, scenario)


def test_size_model_and_custom_gpu_travel_in_the_link():
    gpu = {
        "name": "Lab card",
        "memory_bytes": 64 * 2**30,
        "memory_bandwidth_bytes_per_second": 2.0e12,
        "peak_flops_per_second": {"bf16": 400e12},
        "reference_usd_per_hour": 1.5,
    }
    scenario = InferenceScenario(model="dense-13b", gpu=gpu, num_gpus=2, tensor_parallel=2, concurrency=16)
    params = scenario_to_query_params(scenario, "inference_")
    assert params["inference_gpu"].startswith("cfg:")
    at = open_page(params=params)
    assert_clean(at)
    assert "link had problems" not in warnings_text(at), warnings_text(at)
    assert at.session_state["current_inference"] == scenario
    assert at.radio(key="inference_pick_model_source").value == "Size"
    assert at.selectbox(key="inference_pick_gpu").value == "custom"
    assert_metrics_match(at, scenario)


def test_uploaded_config_plans_like_the_catalog_model():
    at = open_page()
    at.radio(key="inference_pick_model_source").set_value("Upload").run()
    config = load_catalog_config("qwen2.5-7b")
    at.file_uploader(key="inference_pick_config_file").set_value(
        ("config.json", json.dumps(config).encode(), "application/json")
    )
    at.number_input(key="inference_tensor_parallel").set_value(1)
    at.number_input(key="inference_num_gpus").set_value(1).run()
    assert_clean(at)
    scenario = at.session_state["current_inference"]
    assert scenario.model == config
    assert_metrics_match(at, InferenceScenario(model=config, num_gpus=1, tensor_parallel=1))


def test_a_broken_config_upload_is_explained_not_raised():
    at = open_page()
    at.radio(key="inference_pick_model_source").set_value("Upload").run()
    at.file_uploader(key="inference_pick_config_file").set_value(("config.json", b"{not json", "application/json"))
    at.run()
    assert not at.exception
    assert any("not valid JSON" in e.value for e in at.error)


def test_invalid_params_warn_by_name_and_fall_back():
    at = open_page(
        params={
            "inference_concurrency": "lots",
            "inference_weight_dtype": "fp7",
            "inference_prompt_tokens": "-5",
            "inference_colour": "blue",
            "inference_model": "no-such-model",
        }
    )
    assert not at.exception
    text = warnings_text(at)
    for name in (
        "inference_concurrency",
        "inference_weight_dtype",
        "inference_prompt_tokens",
        "inference_colour",
        "inference_model",
    ):
        assert name in text, name
    assert at.session_state["current_inference"] == InferenceScenario()
    assert_metrics_match(at, InferenceScenario())


def test_impossible_layout_falls_back_to_the_default_layout():
    at = open_page(params={"inference_tensor_parallel": "3", "inference_concurrency": "32"})
    assert not at.exception
    assert "inference_tensor_parallel" in warnings_text(at)
    assert at.number_input(key="inference_tensor_parallel").value == 4
    assert_metrics_match(at, InferenceScenario(concurrency=32))


def test_value_outside_the_slider_range_warns_and_uses_the_default():
    # 100,000 is beyond the slider's last stop (8,192) but within the field (at most 10,000,000): the exact
    # box keeps it and the slider sits at its end. Above the field's bound the link warns and uses the default.
    at = open_page(params={"inference_concurrency": "100000"})
    assert not at.exception and "link had problems" not in warnings_text(at)
    assert at.number_input(key="inference_concurrency").value == 100_000
    assert at.select_slider(key="inference_pick_concurrency").value == 8192
    assert_metrics_match(at, InferenceScenario(concurrency=100_000))
    at = open_page(params={"inference_concurrency": "10000001"})
    assert not at.exception
    assert "inference_concurrency" in warnings_text(at)
    assert at.number_input(key="inference_concurrency").value == 64
    assert_metrics_match(at, InferenceScenario())


def test_impossible_widget_choice_is_explained():
    at = open_page()
    at.number_input(key="inference_tensor_parallel").set_value(3).run()
    assert not at.exception
    assert any("TP (tensor) = 3" in e.value for e in at.error)


def test_equations_assumptions_and_pin():
    at = open_page()
    labels = [e.label for e in at.expander]
    assert any(label.startswith("How each number is computed") for label in labels)
    assert any(label.startswith("Assumptions") for label in labels)
    expected = plan(InferenceScenario())
    codes = "\n".join(c.value for c in at.code)
    assert expected.equations[0].substituted in codes
    at.button(key="inference_action_pin").click().run()
    pins = at.session_state["pins"]
    assert [p.scenario for p in pins] == [InferenceScenario()]


def test_heatmap_view_renders():
    at = open_page()
    at.button_group(key="inference_view_explore").set_value("Concurrency × context").run()
    assert_clean(at)
    assert len(at.get("vega_lite_chart")) >= 3


def test_headline_metrics_show_their_likely_range():
    from ui import bands

    at = open_page()
    expected = plan(InferenceScenario())
    shown = [m.delta for m in at.metric]
    for path, formatter in (
        ("performance.ttft_seconds", units.seconds),
        ("performance.tpot_seconds", units.seconds),
        ("performance.output_tokens_per_second", units.count),
    ):
        band = expected.uncertainty[path]
        assert band.low <= getattr(expected.performance, path.split(".")[1]) <= band.high
        assert bands.likely(expected, path, formatter) in shown, path
    assert bands.memory(expected) in at.success[0].value  # the verdict: "needs 47.0 GiB (likely …)"


def test_csv_export_carries_the_uncertainty_bands():
    from planner.export import plans_to_csv, scenarios_from_csv

    expected = plan(InferenceScenario())
    import csv
    import io

    text = plans_to_csv([expected])
    columns = next(csv.DictReader(io.StringIO(text)))
    for path, band in expected.uncertainty.items():
        assert float(columns[f"uncertainty.{path}.low"]) == band.low
        assert float(columns[f"uncertainty.{path}.high"]) == band.high
    assert scenarios_from_csv(text) == [InferenceScenario()]


def test_a_plan_at_risk_is_not_shown_green():
    """176 sequences fit at the estimate (69.9 of 71.7 GiB) but the likely range (to 75.9 GiB) reaches past the
    budget."""
    scenario = InferenceScenario(concurrency=176)
    expected = plan(scenario)
    band = expected.uncertainty["memory.total_bytes"]
    assert expected.memory.fits and band.high > expected.memory.budget_bytes
    at = open_page(params=scenario_to_query_params(scenario, "inference_"))
    assert not at.exception
    assert not at.success
    box = at.warning[0].value
    assert "May not fit in GPU memory" in box and "worst end of the likely range does not" in box
    assert_metrics_match(at, scenario)


def test_a_plan_that_does_not_fit_caveats_speed_and_cost_and_links_plans_that_fit():
    scenario = InferenceScenario(concurrency=512)
    expected = plan(scenario)
    assert not expected.memory.fits
    at = open_page(params=scenario_to_query_params(scenario, "inference_"))
    assert not at.exception
    short = units.gib(-expected.memory.headroom_bytes)
    assert "Does not fit in GPU memory" in at.error[0].value and f"{short} short per GPU" in at.error[0].value
    markdown = "\n".join(m.value for m in at.markdown)
    assert "If it fit" in markdown and f"each GPU is {short} short" in markdown
    assert_metrics_match(at, scenario)  # the numbers are still there, under the caveat
    assert any(m.value.startswith("**Suggestions that fix the plan**") for m in at.markdown)
    buttons = [b.proto for b in at.get("link_button") if b.proto.label == "Open"]
    urls = [b.url for b in buttons]
    # One button per engine suggestion, in the engine's order, each keyed by the page.
    expected_fixes = suggest_fixes(scenario).items
    assert len(urls) == len(expected_fixes) >= 3
    assert {"more_gpus", "fewer_users", "next_gpu"} <= {s.kind for s in expected_fixes}
    for url, fix in zip(urls, expected_fixes):
        alternative, _ = query_params_to_scenario(parse_qs(urlsplit(url).query), "inference", "inference_")
        assert alternative == InferenceScenario.model_validate(fix.scenario)
    for url in urls:
        params = parse_qs(urlsplit(url).query)
        assert urlsplit(url).path.endswith("/inference")
        alternative, warnings = query_params_to_scenario(params, "inference", "inference_")
        assert warnings == [] and alternative != scenario
        assert plan(alternative).memory.fits, url


def test_the_sites_energy_figures_replan_and_travel_in_the_link():
    at = open_page()
    at.number_input(key="inference_pue").set_value(1.5)
    at.number_input(key="inference_electricity_usd_per_kwh").set_value(0.08).run()
    assert_clean(at)
    expected = InferenceScenario(pue=1.5, electricity_usd_per_kwh=0.08)
    assert at.session_state["current_inference"] == expected
    assert_metrics_match(at, expected)
    assert scenario_to_query_params(expected) == {"pue": "1.5", "electricity_usd_per_kwh": "0.08"}
