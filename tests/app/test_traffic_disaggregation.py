"""Inference page, Serve traffic, disaggregated prefill/decode: off by default; a split shows colocated and
disaggregated side by side with planner.inference.disaggregation's numbers, the best split shows best_split's
table and verdict, and a split that is not a layout gets the engine's sentence, never a traceback."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import open_page

from planner import plan
from planner.inference.disaggregation import DisaggregatedLayout, best_split, simulate_disaggregated
from ui import traffic_disaggregation as view
from ui import traffic_text as words

# 8B on four GPUs of TP 1: four replicas to split, each simulation short.
SMALL = {
    "inference_model": "llama-3.1-8b",
    "inference_num_gpus": "4",
    "inference_tensor_parallel": "1",
    "inference_traffic": "true",
    "inference_traffic_num_requests": "200",
    "inference_traffic_requests_per_second": "4",
    "inference_traffic_slo_ttft_seconds": "0.1",
}


def comparison_table(at):
    found = [t.value for t in at.table if any(c.startswith("Disaggregated") for c in t.value.columns)]
    assert len(found) == 1
    return found[0]


def expected_table(colocated, result) -> list[list[str]]:
    rows = words.comparison_rows(colocated, result.traffic, result.kv_transfer_seconds_mean)
    return [[r[""], r["Colocated"], r["Disaggregated"]] for r in rows]


def shown(frame) -> list[list[str]]:
    return [[index, *row] for index, row in zip(frame.index, frame.values.tolist())]


def test_off_by_default_then_a_split_shows_the_engine_s_comparison():
    at = open_page(params=SMALL)
    assert not at.exception
    assert at.segmented_control(key=view.MODE_KEY).value == view.OFF
    assert not [t for t in at.table if any(c.startswith("Disaggregated") for c in t.value.columns)]
    at.segmented_control(key=view.MODE_KEY).set_value(view.SPLIT).run()
    at.number_input(key=view.PREFILL_GPUS_KEY).set_value(2).run()
    # no warning but an SLO verdict's 'at risk' (its likely range holds the target)
    assert not at.exception and not [w for w in at.warning if "(target" not in w.value]
    scenario = at.session_state["current_inference"]
    layout = DisaggregatedLayout(prefill_gpus=2, prefill_tensor_parallel=1)
    result = simulate_disaggregated(scenario, layout)
    frame = comparison_table(at)
    assert list(frame.columns) == ["Colocated (4 replicas)", "Disaggregated (2 prefill / 2 decode GPUs)"]
    assert shown(frame) == expected_table(plan(scenario).traffic, result)
    assert shown(frame)[-1][-1] == words.units.seconds(result.kv_transfer_seconds_mean)
    assert any("Assumptions of the disaggregated simulation" in e.label for e in at.expander)


def test_the_best_split_shows_every_split_and_the_verdict():
    at = open_page(params=SMALL)
    at.segmented_control(key=view.MODE_KEY).set_value(view.BEST).run()
    assert not at.exception
    scenario = at.session_state["current_inference"]
    comparison = best_split(scenario)
    assert comparison.best is not None
    assert shown(comparison_table(at)) == expected_table(comparison.colocated, comparison.best)
    splits = [f.value for f in at.dataframe if "GPUs (P / D)" in f.value.columns]
    assert len(splits) == 1
    pd.testing.assert_frame_equal(
        splits[0].reset_index(drop=True), pd.DataFrame(words.split_rows(comparison.splits, scenario.num_gpus))
    )
    assert list(splits[0]["GPUs (P / D)"]) == ["1 / 3", "2 / 2", "3 / 1"]
    verdict = "Disaggregation wins" if comparison.disaggregation_wins else "Colocated is as good or better"
    boxes = [b.value.replace("\\", "") for b in [*at.success, *at.info] if verdict in b.value]
    assert boxes and comparison.reason in boxes[0]


@pytest.mark.parametrize(
    ("params", "mode", "inputs", "words_"),
    [
        (
            SMALL,
            view.SPLIT,
            {view.PREFILL_TP_KEY: 2, view.PREFILL_GPUS_KEY: 3},
            "not a whole number of prefill replicas",
        ),
        (
            {"inference_traffic": "true", "inference_traffic_num_requests": "200"},
            view.BEST,
            {},
            "a split needs a prefill and a decode replica, at least 8 GPUs",
        ),
    ],
)
def test_a_split_that_is_no_layout_gets_a_sentence(params, mode, inputs, words_):
    at = open_page(params=params)
    at.segmented_control(key=view.MODE_KEY).set_value(mode).run()
    for key, value in inputs.items():
        at.number_input(key=key).set_value(value).run()
    assert not at.exception and not at.error
    text = " ".join(b.value for b in [*at.warning, *at.info])
    assert words_ in text
