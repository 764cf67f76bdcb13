"""`python -m planner plan` on a list writes each plan's own JSON, indented as list items: byte for byte what
pydantic writes for the whole list (the format a deployment's CI compares against)."""

from __future__ import annotations

import gc
import json

from pydantic import TypeAdapter

from planner.cli.main import _json_list, _without_cycle_collection
from planner.inference.results import InferencePlan
from planner.plan import plan
from planner.scenario import parse_scenario
from planner.training.results import TrainingPlan

LIST = TypeAdapter(list[InferencePlan | TrainingPlan])


def test_a_list_of_plans_is_the_json_pydantic_writes_for_the_list():
    plans = [
        plan(parse_scenario(s))
        for s in (
            {"kind": "inference"},
            {"kind": "training"},
            {"kind": "inference", "model": "mixtral-8x7b", "gpu": "h200", "num_gpus": 2, "tensor_parallel": 2},
            {"kind": "inference", "speculative": {"method": "eagle", "num_speculative_tokens": 3}},
        )
    ]
    for items in (plans, plans[:1], []):
        assert _json_list(items) == LIST.dump_json(items, indent=2).decode()


def test_the_cycle_collector_comes_back_on():
    assert gc.isenabled()
    with _without_cycle_collection():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_plans_json_states_its_energy():
    inference, training = (plan(parse_scenario({"kind": kind})) for kind in ("inference", "training"))
    out = json.loads(_json_list([inference, training]))
    serving, run = out[0]["energy"], out[1]["energy"]
    for key in (
        "board_watts",
        "idle_watts",
        "power_assumed",
        "power_source",
        "busy_share",
        "watts_per_gpu",
        "pue",
        "deployment_watts",
        "kwh_per_million_output_tokens",
        "electricity_usd_per_million_output_tokens",
        "co2e_kg_per_million_output_tokens",
    ):
        assert key in serving, key
    for key in ("watts_per_gpu", "cluster_watts", "kwh", "kwh_per_million_tokens", "electricity_usd", "co2e_kg"):
        assert key in run, key
    assert out[0]["scenario"]["pue"] == 1.0 and out[0]["scenario"]["electricity_usd_per_kwh"] == 0.127
    assert serving["kwh_per_million_output_tokens"] == inference.energy.kwh_per_million_output_tokens
