"""Trade-offs page: the technique table is planner.tradeoffs' numbers, the diagnosis is the plan's, the search
keeps only configurations that fit and meet every constraint, and every alternative opens as a full plan."""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import assert_clean, metric, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.search.alternatives import alternatives
from planner.search.checklist import QUESTIONS, checklist
from planner.search.diagnosis import diagnose, techniques
from planner.search.fixes import suggest_fixes
from planner.search.grid_search import InferenceSearchSpec, run_inference_search
from planner.share import query_params_to_scenario, scenario_to_query_params
from planner.training.scenario import TrainingScenario
from planner.units import GIB
from ui import render, tradeoff_data
from ui.text import component_label, resource_label


def table(at, which: str = "techniques"):
    """The technique table, or the search's 'top' or 'frontier' table (AppTest does not expose their keys)."""
    frames = [f.value for f in at.dataframe]
    if which == "techniques":
        found = [f for f in frames if "Variant" in f.columns]
    else:
        found = [f for f in frames if "Concurrency" in f.columns][("top", "frontier").index(which) :][:1]
    assert found, f"no {which} table; have {[list(f.columns)[:3] for f in frames]}"
    return found[0]


def scenario_of_link(url: str, kind: str):
    params = {k: v for k, v in parse_qs(urlsplit(url).query).items()}
    scenario, warnings = query_params_to_scenario(params, kind, f"{kind}_")
    assert not warnings, warnings
    return scenario


def assert_technique_table(at, scenario) -> None:
    kind = scenario.kind
    effects = [e for e in techniques(scenario) if e.applicable]
    frame = table(at)
    names = tradeoff_data.columns(kind)
    _, factor = tradeoff_data.time_unit(kind)
    assert list(frame["Variant"]) == [e.variant for e in effects]
    for (_, row), e in zip(frame.iterrows(), effects):
        assert row["Technique"] == e.technique
        assert row[names["memory"]] == pytest.approx(e.delta_memory_bytes / GIB)
        assert row[names["time"]] == pytest.approx(e.delta_time_seconds * factor)
        assert row[names["throughput"]] == pytest.approx(e.delta_throughput)
        assert row[names["cost"]] == pytest.approx(e.delta_cost)
        if kind == "inference":
            assert row[names["ttft"]] == pytest.approx(e.delta_ttft_seconds * 1e3)
        assert bool(row["Changes numerics?"]) == e.changes_numerics
        assert row["Estimate"] == ("derived from this plan's terms" if e.derived else "full plan")
        if e.scenario is None:
            assert not isinstance(row["Open as plan"], str)
        else:  # the link opens exactly the alternative scenario
            assert scenario_of_link(row["Open as plan"], kind) == type(scenario).model_validate(e.scenario)


def test_default_inference_tradeoffs_match_the_engine():
    at = open_page("tradeoffs")
    assert_clean(at)
    scenario = InferenceScenario()
    expected = plan(scenario)
    assert_technique_table(at, scenario)
    diagnosis = diagnose(scenario)
    assert diagnosis.binding == expected.bottleneck
    assert metric(at, "Binding resource") == resource_label(expected.bottleneck).capitalize()
    assert metric(at, "Arithmetic intensity") == f"{diagnosis.arithmetic_intensity_flops_per_byte:,.0f} FLOP/B"
    assert metric(at, "Ridge point") == f"{diagnosis.ridge_point_flops_per_byte:,.0f} FLOP/B"
    assert metric(at, "Largest memory component") == component_label(expected.memory.dominant_component)
    text = "\n".join(m.value for m in at.markdown)
    for relief in diagnosis.relief:
        assert relief.variant.replace(">", "\\>") in text or relief.variant in text
    # The checklist answers every question with the engine's words, and says no decision was recorded.
    for question in (
        "Is the bottleneck capacity, bandwidth, compute or communication?",
        "Which proposed techniques change numerics, and which only resource use?",
        "Would a smaller catalog model or a shorter context solve it more simply?",
        "At which fixed quantity are the alternatives compared?",
        "Which trade-off did you choose?",
    ):
        assert f"**{question}**" in text, question
    answers = checklist(scenario)
    assert [i.question for i in answers.items] == list(QUESTIONS.values())
    shown = text + warnings_text(at)
    for item in answers.items:
        assert f"**{render.md_escape(item.headline)}**" in shown, item.topic
    assert "No decision recorded yet" in warnings_text(at)
    # Every simpler alternative opens as exactly its changed scenario.
    links = re.findall(r"\[open as plan\]\(([^)]+)\)", text)
    for option in alternatives(scenario):
        assert any(scenario_of_link(u, "inference") == InferenceScenario.model_validate(option.scenario) for u in links)
    assert len(at.get("vega_lite_chart")) >= 4  # time and memory shares, technique map, where the plan sits


def test_training_view_matches_the_engine():
    scenario = TrainingScenario(decision="ZeRO-3 to fit a bigger micro-batch")
    at = open_page("tradeoffs", {**scenario_to_query_params(scenario, "training_"), "tradeoffs_kind": "Training"})
    assert_clean(at)
    assert at.session_state["current_training"] == scenario
    assert_technique_table(at, scenario)
    assert metric(at, "Binding resource") == resource_label(plan(scenario).bottleneck).capitalize()
    text = "\n".join(m.value for m in at.markdown)
    assert "ZeRO-3 to fit a bigger micro-batch" in text
    assert "No decision recorded yet" not in warnings_text(at)


def test_kv_cache_larger_than_the_weights_is_flagged():
    scenario = InferenceScenario(
        model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, concurrency=96, prompt_tokens=4096, output_tokens=512
    )
    p = plan(scenario)
    assert p.memory.components["kv_cache_bytes"] > p.memory.components["weights_bytes"]
    at = open_page("tradeoffs", scenario_to_query_params(scenario, "inference_"))
    assert not at.exception
    assert "is larger than the weights" in warnings_text(at)


def test_search_keeps_only_fitting_rows_that_meet_the_constraints():
    at = open_page("tradeoffs")
    at.multiselect(key="tradeoffs_gpus").set_value(["h100-sxm", "h200"])
    at.number_input(key="tradeoffs_max_tpot_ms").set_value(60.0)
    at.number_input(key="tradeoffs_max_ttft_s").set_value(1.0)
    at.number_input(key="tradeoffs_max_memory_gib").set_value(70.0)
    at.number_input(key="tradeoffs_max_usd_per_hour").set_value(40.0)
    at.button(key="tradeoffs_search_run").click().run()
    assert_clean(at)
    top, frontier = table(at, "top"), table(at, "frontier")
    assert len(top) == 10 and len(frontier) >= 1
    assert list(top["$ per 1M output tokens"]) == sorted(top["$ per 1M output tokens"])
    for frame in (top, frontier):
        for _, row in frame.iterrows():
            assert row["TPOT (ms)"] <= 60 and row["TTFT (ms)"] <= 1000 and row["Memory per GPU (GiB)"] <= 70
            assert row["$ per hour"] <= 40 and row["GPUs"] <= 8
            # Opened as a full plan, each row fits and says the same.
            alternative = plan(scenario_of_link(row["Open as plan"], "inference"))
            assert alternative.memory.fits
            assert alternative.performance.tpot_seconds * 1e3 == pytest.approx(row["TPOT (ms)"])
            assert alternative.cost.usd_per_million_output_tokens == pytest.approx(row["$ per 1M output tokens"])
    # The frontier is non-dominated: faster points cost more.
    ordered = frontier.sort_values("TPOT (ms)")
    assert all(a > b for a, b in zip(ordered["$ per 1M output tokens"], ordered["$ per 1M output tokens"][1:]))
    # A slider move elsewhere on the page does not lose the results.
    at.button_group(key="tradeoffs_view_position").set_value("Roofline (decode)").run()
    assert_clean(at)
    assert len(table(at, "top")) == 10


def test_frontier_csv_holds_full_plans_with_bands():
    from planner.export import scenarios_from_csv
    from ui.search_view import frontier_csv

    scenario = InferenceScenario()
    spec = InferenceSearchSpec(
        gpus=("h100-sxm",),
        max_gpus=8,
        weight_dtypes=("bf16", "fp8"),
        kv_cache_dtypes=("bf16",),
        concurrency=(16, 128),
        max_tpot_seconds=0.08,
    )
    result = run_inference_search(scenario, spec)
    assert len(result.frontier) >= 1 and result.feasible["fits"].all()
    assert (result.feasible["tpot_seconds"] <= 0.08).all()
    text = frontier_csv(scenario, result, None)
    header = text.splitlines()[0].split(",")
    for column in (
        "performance.tpot_seconds",
        "cost.usd_per_million_output_tokens",
        "uncertainty.performance.tpot_seconds.low",
        "uncertainty.performance.tpot_seconds.high",
    ):
        assert column in header, column
    restored = scenarios_from_csv(text)
    assert len(restored) == len(result.frontier)
    assert sorted(s.concurrency for s in restored) == sorted(int(c) for c in result.frontier["concurrency"])


def test_link_seeds_the_plan_and_invalid_links_warn():
    scenario = InferenceScenario(concurrency=150, kv_cache_dtype="fp8")
    at = open_page("tradeoffs", scenario_to_query_params(scenario, "inference_"))
    assert_clean(at)
    assert at.session_state["current_inference"] == scenario
    assert metric(at, "Binding resource") == resource_label(plan(scenario).bottleneck).capitalize()
    at = open_page("tradeoffs", {"inference_concurrency": "-3"})
    assert not at.exception
    assert "inference_concurrency" in warnings_text(at)
    assert at.session_state["current_inference"] == InferenceScenario()


def test_follows_the_inference_page():
    at = open_page()
    at.number_input(key="inference_concurrency").set_value(150).run()
    at.switch_page("app_pages/tradeoffs.py").run()
    assert_clean(at)
    assert_technique_table(at, InferenceScenario(concurrency=150))


def test_simpler_alternatives_are_real_plans():
    scenario = InferenceScenario(num_gpus=2, tensor_parallel=2)  # 70B in bf16 on 2 GPUs: does not fit
    base = plan(scenario)
    assert not base.memory.fits
    found = {a.kind: a for a in alternatives(scenario)}
    smaller = found["smaller_model"]
    assert smaller.params_total < base.model.params_total
    assert plan(InferenceScenario(model=smaller.model, num_gpus=2, tensor_parallel=2)).memory.fits
    assert InferenceScenario.model_validate(smaller.scenario) == InferenceScenario(
        model=smaller.model, num_gpus=2, tensor_parallel=2
    )
    # 400 tokens per sequence fit at 64 in flight: less than the 512 output tokens, so no context alternative.
    assert base.memory.max_context_tokens < scenario.output_tokens and "longest_context" not in found
    fitting = InferenceScenario(num_gpus=8, tensor_parallel=8)
    context = {a.kind: a for a in alternatives(fitting)}["longest_context"]
    assert context.context_tokens == plan(fitting).memory.max_context_tokens
    opened = plan(InferenceScenario.model_validate(context.scenario))
    assert opened.memory.fits and opened.memory.max_context_tokens >= context.context_tokens
    assert not math.isnan(context.headroom_fraction)


def test_training_search_keeps_only_fitting_rows_within_the_deadline():
    scenario = TrainingScenario(model="llama-3.1-8b", training_tokens=2e10)
    at = open_page("tradeoffs", {**scenario_to_query_params(scenario, "training_"), "tradeoffs_kind": "Training"})
    at.selectbox(key="tradeoffs_tsearch_max_gpus").set_value(32)
    at.number_input(key="tradeoffs_tsearch_days").set_value(3.0)
    at.button(key="tradeoffs_tsearch_run").click().run()
    assert_clean(at)
    frames = [f.value for f in at.dataframe if "Cost to train ($)" in f.value.columns]
    assert len(frames) == 2, "top and frontier tables"
    top, frontier = frames
    assert len(top) >= 1 and list(top["Cost to train ($)"]) == sorted(top["Cost to train ($)"])
    for frame in (top, frontier):
        for _, row in frame.iterrows():
            assert row["Time to train (days)"] <= 3 and row["GPUs"] <= 32
            alternative = plan(scenario_of_link(row["Open as plan"], "training"))
            assert alternative.memory.fits
            assert alternative.cost.usd_total == pytest.approx(row["Cost to train ($)"])
            assert alternative.performance.time_to_train_seconds / 86400 == pytest.approx(row["Time to train (days)"])
    ordered = frontier.sort_values("Time to train (days)")
    assert (
        all(a >= b for a, b in zip(ordered["Cost to train ($)"], ordered["Cost to train ($)"][1:])) or len(ordered) == 1
    )


def test_training_search_spec_travels_in_the_link():
    scenario = TrainingScenario(model="llama-3.1-8b", training_tokens=2e10)
    params = {
        **scenario_to_query_params(scenario, "training_"),
        "tradeoffs_kind": "Training",
        "tradeoffs_tsearch_max_gpus": "32",
        "tradeoffs_tsearch_days": "3",
        "tradeoffs_tsearch_micro": ["1", "2"],
        "tradeoffs_tsearch_objective": "time to train",
    }
    at = open_page("tradeoffs", params)
    assert_clean(at)
    assert at.selectbox(key="tradeoffs_tsearch_max_gpus").value == 32
    assert at.number_input(key="tradeoffs_tsearch_days").value == 3.0
    assert at.multiselect(key="tradeoffs_tsearch_micro").value == [1, 2]
    assert at.selectbox(key="tradeoffs_tsearch_objective").value == "time to train"
    at.button(key="tradeoffs_tsearch_run").click().run()
    assert_clean(at)
    top = next(f.value for f in at.dataframe if "Cost to train ($)" in f.value.columns)
    assert set(top["Micro-batch"]) <= {1, 2} and (top["GPUs"] <= 32).all()
    assert list(top["Time to train (days)"]) == sorted(top["Time to train (days)"])
    assert (top["Time to train (days)"] <= 3).all()
    # Costs read as money: the text column is planner.units' reading of the number beside it.
    assert list(top["Cost to train"]) == [units.usd(v) for v in top["Cost to train ($)"]]


def test_relief_for_a_plan_that_does_not_fit_starts_with_a_move_that_fits():
    scenario = InferenceScenario(concurrency=600)
    at = open_page("tradeoffs", scenario_to_query_params(scenario, "inference_"))
    assert not at.exception  # the page shows the does-not-fit verdict as an error: that is the point here
    text = "\n".join(m.value for m in at.markdown)
    first = diagnose(scenario).relief[0]
    assert f"1. **{render.md_escape(first.technique)}**: {render.md_escape(first.variant)}" in text
    assert "1. **KV cache vs recompute**" not in text
    line = next(x for x in text.splitlines() if x.startswith("1. **"))
    assert "fits after" in line
    # Under the verdict, the engine's suggestions that fix it, each an 'Open' button onto the Inference page.
    assert "**Suggestions that fix the plan**" in text
    ranked_by = suggest_fixes(scenario).ranked_by
    assert render.md_escape(ranked_by) in [c.value for c in at.caption]  # its $ signs are not read as LaTeX
    fixes = suggest_fixes(scenario).items
    urls = [b.proto.url for b in at.get("link_button") if b.proto.label == "Open"]
    assert len(urls) == len(fixes) >= 3
    for url, fix in zip(urls, fixes):
        assert urlsplit(url).path.endswith("/inference")
        opened, warnings = query_params_to_scenario(parse_qs(urlsplit(url).query), "inference", "inference_")
        assert warnings == [] and opened == InferenceScenario.model_validate(fix.scenario)
        assert plan(opened).memory.fits, url
