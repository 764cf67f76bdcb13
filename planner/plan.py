"""The engine's one entry point: a frozen Scenario in, a frozen Plan out. Pure, no I/O.

The calibration rule lives here, so plan(), the CLI, the sweeps' callers and the dashboard all follow it: a
calibration measured on one accelerator applies to plans for that accelerator only (its efficiencies are
fractions of that accelerator's catalog peaks, and its runtime memory correction is that device's). A plan
for another GPU with that calibration is refused with a sentence naming both, unless the caller maps it
explicitly (`calibration_any_gpu=True`, or a record from `CalibrationRecord.for_any_gpu()`); a mapped
plan carries a warning naming both devices.
"""

from __future__ import annotations

from typing import Any

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.plan import plan_inference
from planner.inference.results import InferencePlan
from planner.inference.scenario import InferenceScenario
from planner.results import PlanWarning, coded_warnings, warning_fields
from planner.scenario import parse_scenario
from planner.scenario_base import revised
from planner.training.plan import plan_training
from planner.training.results import TrainingPlan

HOW_TO_MAP = (
    "plan(..., calibration_any_gpu=True) in Python, --calibration-any-gpu on the command line, "
    "or the Calibrate page's 'apply to other GPUs' switch"
)


def calibration_for_gpu(gpu_id: str, calibration: CalibrationRecord | None) -> CalibrationRecord | None:
    """The calibration a plan for accelerator `gpu_id` may use: the record when it measured that accelerator
    or was mapped to any GPU explicitly, else None (the documented default efficiencies)."""
    if calibration is None or not (calibration.applies_to(gpu_id) or calibration.mapped_to_any_gpu):
        return None
    return calibration


def check_calibration(gpu_id: str, calibration: CalibrationRecord | None, scenario: Any = None) -> str | None:
    """Whether a plan for accelerator `gpu_id` may use `calibration`: None (no calibration, or the one it
    measured), a warning sentence (mapped explicitly to another GPU), or PlanningError (not mapped).

    Given the `scenario`, a benchmark calibration (`CalibrationRecord.benchmark`) is also held to the serving stack it
    measured: another runtime or model family is refused the same way unless mapped explicitly."""
    stack = stack_mismatch(scenario, calibration)
    if stack is not None:
        assert calibration is not None
        if not calibration.mapped_to_any_gpu:
            raise PlanningError(
                f"calibration '{calibration.label}' was fitted to benchmarks of another serving stack (this plan has "
                f"{stack}); map it explicitly to use it anyway ({HOW_TO_MAP})"
            )
        gpu_warning = None if calibration.applies_to(gpu_id) else check_calibration(gpu_id, calibration)
        stack_warning = (
            f"Calibration '{calibration.label}' was fitted to benchmarks of another serving stack (this plan has "
            f"{stack}) but is applied because it was mapped explicitly: its factors describe that stack."
        )
        return stack_warning if gpu_warning is None else f"{gpu_warning} {stack_warning}"
    if calibration is None or calibration.applies_to(gpu_id):
        return None
    if not calibration.mapped_to_any_gpu:
        raise PlanningError(
            f"calibration '{calibration.label}' was measured on '{calibration.measured_on}'; it applies to plans "
            f"for '{calibration.reference_gpu}', not '{gpu_id}': map it explicitly to use it anyway ({HOW_TO_MAP})"
        )
    return (
        f"Calibration '{calibration.label}' was measured on '{calibration.measured_on}' (efficiencies relative to "
        f"'{calibration.reference_gpu}') but is applied to this '{gpu_id}' plan because it was mapped explicitly: "
        f"its efficiencies, memory correction and error bands describe the other device, not '{gpu_id}'."
    )


def stack_mismatch(scenario: Any, calibration: CalibrationRecord | None) -> str | None:
    """How a plan's serving stack differs from the one a benchmark calibration measured (None: no difference, no
    benchmark calibration, or no scenario to compare)."""
    if calibration is None or calibration.benchmark is None or scenario is None:
        return None
    if not isinstance(scenario, InferenceScenario):
        return calibration.benchmark.scope_mismatch(None, None)
    return calibration.benchmark.scope_mismatch(str(scenario.runtime), scenario.architecture().model_type)


def calibration_for_scenario(scenario: Any, calibration: CalibrationRecord | None) -> CalibrationRecord | None:
    """`calibration_for_gpu` for a whole scenario: also None for a benchmark calibration of another serving stack
    (runtime or model family) that was not mapped explicitly."""
    usable = calibration_for_gpu(scenario.gpu_id(), calibration)
    if usable is not None and not usable.mapped_to_any_gpu and stack_mismatch(scenario, usable) is not None:
        return None
    return usable


def plan(
    scenario: Any, calibration: CalibrationRecord | None = None, *, calibration_any_gpu: bool = False
) -> InferencePlan | TrainingPlan:
    """Plan an InferenceScenario or TrainingScenario (or a dict of either, validated first).

    `calibration` (optional) is a calibration record whose measured efficiencies and memory correction
    replace the documented defaults; the plan says which calibration it used. It must have measured the
    scenario's accelerator, unless `calibration_any_gpu=True` (or the record came from `for_any_gpu()`):
    then it is applied anyway and the plan's first warning names both devices.
    """
    if isinstance(scenario, dict):
        scenario = parse_scenario(scenario)
    if calibration is not None and calibration_any_gpu:
        calibration = calibration.for_any_gpu()
    mapping_warning = check_calibration(scenario.gpu_id(), calibration, scenario)
    if isinstance(scenario, InferenceScenario):
        result = plan_inference(scenario, calibration)
    else:
        result = plan_training(scenario, calibration)
    if mapping_warning is None:
        return result
    warnings = [PlanWarning("calibration_other_gpu", mapping_warning), *coded_warnings(result)]
    return revised(result, **warning_fields(warnings))


def without_traffic(scenario: Any) -> Any:
    """The scenario without its request stream (itself when it has none)."""
    if getattr(scenario, "traffic", None) is None:
        return scenario
    return revised(scenario, traffic=None)


def static_plan(
    scenario: Any, calibration: CalibrationRecord | None = None, *, calibration_any_gpu: bool = False
) -> InferencePlan | TrainingPlan:
    """`plan()` of the scenario without its request stream: what the trade-offs, diagnosis, checklist and
    alternatives compare (each plans many variants; a simulation per variant would cost seconds and change
    none of the static numbers they read)."""
    if isinstance(scenario, dict):
        scenario = parse_scenario(scenario)
    return plan(without_traffic(scenario), calibration, calibration_any_gpu=calibration_any_gpu)


__all__ = [
    "calibration_for_gpu",
    "calibration_for_scenario",
    "check_calibration",
    "plan",
    "static_plan",
    "without_traffic",
]
