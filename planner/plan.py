"""The engine's one entry point: a frozen Scenario in, a frozen Plan out. Pure, no I/O."""

from __future__ import annotations

from typing import Any

from planner.scenario import InferenceScenario, parse_scenario


def plan(scenario: Any, calibration=None):
    """Plan an InferenceScenario or TrainingScenario (or a dict of either, validated first).

    `calibration` (optional) is a calibration record whose measured efficiencies and memory correction
    replace the documented defaults; the plan says which calibration it used.
    """
    if isinstance(scenario, dict):
        scenario = parse_scenario(scenario)
    if isinstance(scenario, InferenceScenario):
        from planner.inference import plan_inference

        return plan_inference(scenario, calibration)
    from planner.training.plan import plan_training

    return plan_training(scenario, calibration)
