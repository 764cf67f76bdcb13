"""The engine's one entry point: a frozen Scenario in, a frozen Plan out. Pure, no I/O."""

from __future__ import annotations

from typing import Any

from planner.inference.plan import plan_inference
from planner.inference.scenario import InferenceScenario
from planner.scenario import parse_scenario
from planner.training.plan import plan_training


def plan(scenario: Any, calibration=None):
    """Plan an InferenceScenario or TrainingScenario (or a dict of either, validated first).

    `calibration` (optional) is a calibration record whose measured efficiencies and memory correction
    replace the documented defaults; the plan says which calibration it used.
    """
    if isinstance(scenario, dict):
        scenario = parse_scenario(scenario)
    if isinstance(scenario, InferenceScenario):
        return plan_inference(scenario, calibration)

    return plan_training(scenario, calibration)
