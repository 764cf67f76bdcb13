"""Inference page, LoRA adapters: the sidebar section reaches the plan, the link, and says what is wrong."""

from __future__ import annotations

from conftest import assert_clean, metric, open_page

from planner import InferenceScenario, plan, units
from planner.share import query_params_to_scenario, scenario_to_query_params

ON = "inference_pick_adapters"


def component_bytes(scenario) -> int:
    return plan(scenario).memory.components["lora_adapters_bytes"]


def test_turning_adapters_on_plans_them_and_writes_the_link():
    at = open_page()
    assert_clean(at)
    plain = plan(InferenceScenario())
    at.toggle(key=ON).set_value(True).run()
    assert_clean(at)
    scenario = InferenceScenario(lora={})
    assert at.session_state["current_inference"] == scenario
    expected = plan(scenario)
    assert expected.memory.components["lora_adapters_bytes"] > 0
    assert metric(at, "Time per output token") == units.seconds(expected.performance.tpot_seconds)
    assert expected.performance.tpot_seconds > plain.performance.tpot_seconds
    # The link carries the adapters and reads back to the same scenario.
    link = {k: v for k, v in at.query_params.items() if k.startswith("inference_")}
    assert "inference_lora" in link
    read, warnings = query_params_to_scenario(link, "inference", "inference_")
    assert warnings == [] and read.lora == scenario.lora


def test_counts_rank_and_slots_reach_the_plan():
    at = open_page()
    at.toggle(key=ON).set_value(True).run()
    at.number_input(key="inference_pick_adapters_count").set_value(40).run()
    at.number_input(key="inference_pick_adapters_rank").set_value(64).run()
    at.number_input(key="inference_pick_adapters_max_loras").set_value(4).run()
    at.slider(key="inference_pick_adapters_zipf").set_value(1.0).run()
    assert_clean(at)
    lora = at.session_state["current_inference"].lora
    assert (lora.adapters, lora.adapter_rank, lora.max_loras, lora.zipf_exponent) == (40, 64, 4, 1.0)
    # Four rank-64 slots hold 4 x 4 = 16 times the memory of the default one rank-16 slot (vLLM's max_loras 1).
    assert component_bytes(InferenceScenario(lora=lora)) == 16 * component_bytes(InferenceScenario(lora={}))


def test_ranges_and_help_come_from_the_fields():
    at = open_page()
    at.toggle(key=ON).set_value(True).run()
    rank = at.number_input(key="inference_pick_adapters_rank")
    assert (rank.min, rank.max) == (1, 512)
    assert rank.help.startswith("The largest adapter rank")
    slots = at.number_input(key="inference_pick_adapters_max_loras")
    assert slots.value is None and slots.placeholder == "default"


def test_no_projection_is_a_sentence_not_a_traceback():
    at = open_page()
    at.toggle(key=ON).set_value(True).run()
    at.multiselect(key="inference_pick_adapters_modules").set_value([]).run()
    assert not at.exception
    assert any("at least one wrapped projection" in e.value for e in at.error)


def test_a_link_with_adapters_and_shares_opens_with_them_kept():
    shared = InferenceScenario(lora={"adapters": 3, "max_loras": 2, "traffic_shares": (0.7, 0.2, 0.1)})
    at = open_page(params=scenario_to_query_params(shared, "inference_"))
    assert_clean(at)
    assert at.toggle(key=ON).value is True
    assert at.session_state["current_inference"].lora == shared.lora
    assert any("per-adapter shares" in c.value for c in at.sidebar.caption)


def test_a_link_with_adapters_on_an_engine_without_them_is_planned_without_them_and_says_why():
    shared = InferenceScenario(lora={"adapters": 2}).model_copy(update={"runtime": "llama.cpp"})
    at = open_page(params=scenario_to_query_params(shared, "inference_"))
    assert_clean(at)
    current = at.session_state["current_inference"]
    assert current.lora is None and current.runtime == "llama.cpp"  # the rest of the link is kept
    text = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "LoRA adapters (inference_lora) cannot work with its scenario" in text
    assert "llama.cpp does not batch requests of different LoRA adapters" in text


def test_a_link_says_when_it_cannot_carry_the_shares():
    import numpy as np

    from ui.adapter_controls import fits_a_link

    def lora(n: int):
        shares = tuple(float(x) for x in np.random.default_rng(0).random(n))
        return InferenceScenario(lora={"adapters": n, "max_loras": 8, "traffic_shares": shares}).lora

    small, large = lora(100), lora(3000)
    assert fits_a_link(small) and not fits_a_link(large)
    for carried, scenario_lora in ((True, small), (False, large)):
        params = scenario_to_query_params(InferenceScenario(lora=scenario_lora), "inference_")
        read, _ = query_params_to_scenario(params, "inference", "inference_")
        assert (read.lora == scenario_lora) is carried  # what fits_a_link promises
