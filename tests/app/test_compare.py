"""Compare page: pins from the session, share links and CSV files; side-by-side table; CSV round trip."""

from __future__ import annotations

from conftest import assert_clean, open_page, warnings_text

from planner import InferenceScenario, plan, units
from planner.export import plans_to_csv
from planner.share import share_url
from planner.training.scenario import TrainingScenario
from ui.links import encode_pin

A = InferenceScenario(label="baseline", decision="keep bf16")
B = InferenceScenario(concurrency=32, kv_cache_dtype="fp8", label="fp8 KV", decision="=fp8 KV halves the cache")
T = TrainingScenario(global_batch_size=128, label="fine-tune")


def pinned(at):
    return [p.scenario for p in at.session_state["pins"]] if "pins" in at.session_state else []


def test_empty_state_explains_how_to_add_plans():
    at = open_page("compare")
    assert_clean(at)
    assert any("No plans pinned yet" in i.value for i in at.info)


def test_pins_from_the_link_are_compared_side_by_side():
    at = open_page("compare", {"pin": [encode_pin(A), encode_pin(B), encode_pin(T)]})
    assert_clean(at)
    assert pinned(at) == [A, B, T]
    inference_table = at.dataframe[0].value
    assert list(inference_table.columns) == ["1 · baseline", "2 · fp8 KV"]
    for column, scenario in zip(inference_table.columns, (A, B)):
        expected = plan(scenario)
        assert inference_table.loc["Time to first token", column] == units.seconds(expected.performance.ttft_seconds)
        assert inference_table.loc["$ per month", column] == units.usd(expected.cost.usd_per_month)
        assert inference_table.loc["Decision", column] == scenario.decision
    training_table = at.dataframe[1].value
    assert training_table.loc["Cost to train", "3 · fine-tune"] == units.usd(plan(T).cost.usd_total)
    assert len(at.get("vega_lite_chart")) >= 8


def test_csv_import_restores_the_plans_exactly():
    at = open_page("compare")
    csv_text = plans_to_csv([plan(A), plan(B)])
    at.file_uploader(key="compare_csv_upload").set_value(("plans.csv", csv_text.encode(), "text/csv")).run()
    assert_clean(at)
    assert pinned(at) == [A, B]
    assert any("Imported 2 plans" in s.value for s in at.success)


def test_a_bad_csv_is_explained():
    at = open_page("compare")
    at.file_uploader(key="compare_csv_upload").set_value(("x.csv", b"a,b\n1,2\n", "text/csv")).run()
    assert not at.exception
    assert any("x.csv" in e.value and "scenario" in e.value for e in at.error)
    assert pinned(at) == []


def test_share_link_is_added_and_pins_can_be_removed():
    at = open_page("compare")
    at.text_input(key="compare_link_text").input(share_url(B, "http://example.test"))
    next(b for b in at.button if b.label == "Add from link").click().run()
    assert_clean(at)
    assert pinned(at) == [B]
    pin_id = at.session_state["pins"][0].id
    at.button(key=f"compare_remove_{pin_id}").click().run()
    assert pinned(at) == []


def test_session_plan_can_be_pinned_from_compare():
    at = open_page()
    at.number_input(key="inference_concurrency").set_value(16).run()
    at.switch_page("app_pages/compare.py").run()
    at.button(key="compare_action_pin_inference").click().run()
    assert pinned(at) == [InferenceScenario(concurrency=16)]


def test_invalid_pin_params_warn():
    at = open_page("compare", {"pin": ["cfg:not-base64!", encode_pin(A), "plain"]})
    assert not at.exception
    text = warnings_text(at)
    assert "'pin' #1" in text and "'pin' #3" in text
    assert pinned(at) == [A]
