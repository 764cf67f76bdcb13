"""Review page: verdicts in plain words, risks, decision text; targets and plans travel in the link."""

from __future__ import annotations

from conftest import assert_clean, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.share import scenario_to_query_params
from ui.links import encode_pin

TIGHT = InferenceScenario(concurrency=176, label="tight", decision="ship it at 176 sequences")


def text_of(at) -> str:
    parts = [m.value for m in at.markdown] + [s.value for s in at.success] + [e.value for e in at.error]
    return "\n".join(parts + [i.value for i in at.info])


def test_default_review_shows_the_current_plan_in_plain_words():
    at = open_page("review")
    assert_clean(at)
    body = text_of(at)
    expected = plan(InferenceScenario())
    assert "Fits in GPU memory" in body
    assert "No latency target set" in body and "No monthly budget set" in body
    assert units.usd(expected.cost.usd_per_month).replace("$", "\\$") in body
    assert "Limited by memory bandwidth" in body or "Limited by" in body


def test_targets_from_the_link_give_verdicts():
    params = {
        "review_max_ttft_s": "0.001",
        "review_max_usd_per_month": "100000",
        **scenario_to_query_params(InferenceScenario(concurrency=32), "inference_"),
    }
    at = open_page("review", params)
    assert not at.exception
    body = text_of(at)
    assert "Misses the latency target" in body
    assert "Within budget" in body
    assert at.number_input(key="review_max_ttft_s").value == 0.001
    assert at.session_state["current_inference"] == InferenceScenario(concurrency=32)


def test_pinned_plans_show_decision_and_risks():
    at = open_page("review", {"pin": [encode_pin(TIGHT)]})
    assert not at.exception
    body = text_of(at)
    assert "ship it at 176 sequences" in body
    mem = plan(TIGHT).memory
    assert mem.fits and mem.headroom_fraction < 0.10
    assert "Headroom is only" in body
    assert "Plan 1: tight (inference)" in body


def test_invalid_target_params_warn_by_name():
    at = open_page("review", {"review_max_tpot_ms": "fast", "review_max_usd_per_month": "-1"})
    assert not at.exception
    text = warnings_text(at)
    assert "review_max_tpot_ms" in text and "review_max_usd_per_month" in text
    assert at.number_input(key="review_max_tpot_ms").value is None


def test_key_numbers_carry_their_likely_range():
    from ui import bands

    at = open_page("review")
    expected = plan(InferenceScenario())
    numbers = at.table[0].value
    likely = dict(zip(numbers.index, numbers["Likely range"]))
    assert likely["Time per output token"] == bands.likely(
        expected, "performance.tpot_seconds", units.seconds
    ).removeprefix("likely ")
    assert likely["Memory per GPU"] == bands.memory(expected).removeprefix("likely ")


def test_a_memory_band_past_the_budget_is_a_risk():
    from ui import review

    expected = plan(TIGHT)
    band = expected.uncertainty["memory.total_bytes"]
    assert expected.memory.fits and band.high > expected.memory.budget_bytes
    assert any(r.startswith("The likely memory range reaches") for r in review.risks(expected))
    assert not any(
        r.startswith("The likely memory range") for r in review.risks(plan(InferenceScenario(concurrency=8)))
    )
