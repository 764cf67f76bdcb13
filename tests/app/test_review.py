"""Review page: verdicts in plain words, risks, decision text; targets and plans travel in the link."""

from __future__ import annotations

from conftest import assert_clean, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.search.fixes import suggest_fixes
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


def test_a_target_inside_the_likely_range_is_at_risk_not_met():
    expected = plan(InferenceScenario())
    tpot_ms = expected.performance.tpot_seconds * 1e3
    band = expected.uncertainty["performance.tpot_seconds"]
    # halfway between the estimate and the likely range's top (the loaded family's band: about 41.7 and 46.6 ms)
    target_ms = round((tpot_ms + band.high * 1e3) / 2, 1)
    assert tpot_ms < target_ms < band.high * 1e3
    at = open_page("review", {"review_max_tpot_ms": f"{target_ms:g}"})
    assert not at.exception
    box = "\n".join(w.value for w in at.warning)
    assert "At risk on the latency target" in box
    assert "Meets the latency target" not in text_of(at)
    assert not at.success  # nothing green while a target is at risk


def test_review_states_the_workload_and_keeps_jargon_behind_the_expander():
    at = open_page("review")
    assert not at.exception
    details = next(e for e in at.expander if e.label.startswith("Technical details"))
    inside = "\n".join(m.value for m in details.markdown)
    outside = "\n".join(m.value for m in at.markdown if m.value not in inside)
    assert "Serves Llama 3.1 70B on 4 × H100 SXM5 80GB to 64 conversations at once" in outside
    assert "2,048-token prompt and a 512-token answer" in outside
    for jargon in ("ridge point", "GEMMs", "memory.total\\_bytes"):
        assert jargon not in outside, jargon
    assert "ridge point" in inside and "GEMMs" in inside


def test_a_plan_that_does_not_fit_is_reviewed_with_its_speed_caveated():
    short = InferenceScenario(concurrency=512, label="too many")
    at = open_page("review", {"pin": [encode_pin(short)], "review_max_tpot_ms": "500"})
    assert not at.exception
    body = text_of(at)
    assert "Does not fit in GPU memory" in body
    assert "cost $8,760 per month ($12.00 per hour), but the plan does not fit on them" in body.replace("\\", "")
    # its latency is hypothetical: marked and not green
    assert "(if it fit) Meets the latency target" in body and ":green[" not in body
    numbers = at.table[0].value
    expected = plan(short)
    assert numbers.loc["Time per output token", "Value"] == units.seconds(expected.performance.tpot_seconds) + (
        " (if it fit)"
    )
    assert numbers.loc["Max concurrency", "Value"] == f"{expected.memory.max_concurrency:,}"  # a fact: no caveat
    assert "**Suggestions that fix the plan**" in body
    urls = [b.proto.url for b in at.get("link_button") if b.proto.label == "Open"]
    assert len(urls) == len(suggest_fixes(short).items) >= 3 and all("/inference?" in u for u in urls)


def test_training_budget_and_deadline_verdicts():
    from planner.training.scenario import TrainingScenario

    job = TrainingScenario(label="job")
    expected = plan(job)
    days = expected.performance.time_to_train_seconds / 86400
    at = open_page(
        "review",
        {"pin": [encode_pin(job)], "review_max_training_days": f"{days * 2:g}", "review_max_training_usd": "1"},
    )
    assert not at.exception
    body = text_of(at)
    assert "Meets the deadline: training takes" in body
    assert "Over budget" in body
    assert "Trains Llama 3.1 8B on 8 × H100 SXM5 80GB (full training)" in body


def test_both_csvs_can_be_downloaded():
    at = open_page("review")
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download CSV" in labels and "Summary CSV" in labels


def test_risks_follow_the_engines_warning_codes_and_say_each_once():
    from ui import review

    p = plan(InferenceScenario(concurrency=175))  # 3 % headroom; the KV cache (34.2 GiB) outweighs the weights
    assert p.warning_codes == ["low_headroom", "kv_exceeds_weights"]
    risks = review.risks(p)
    assert risks[0] == ("Headroom is only 3% (under 10%): a longer input or a burst of traffic can run out of memory.")
    assert risks[-1].startswith("The KV cache (34.2 GiB) is larger than the weights (32.9 GiB)")
    assert not any(r in p.warnings for r in risks)  # the engine's own sentences are reworded, not repeated
    # A warning the review does not reword passes through as the engine wrote it.
    uneven = plan(InferenceScenario(concurrency=7, num_gpus=8, tensor_parallel=4))
    assert "uneven_replicas" in uneven.warning_codes
    assert [w for w, c in zip(uneven.warnings, uneven.warning_codes) if c == "uneven_replicas"][0] in review.risks(
        uneven
    )
    # A plan that does not fit: the memory verdict says so, not a risk.
    crowded = plan(InferenceScenario(concurrency=512))
    assert not any(r.startswith("Does not fit") for r in review.risks(crowded))
