"""Everything the formulas read for one inference scenario, built once: the static plan and the traffic
simulation start from the same inputs."""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration_record import CalibrationRecord
from planner.hardware.catalog import Accelerator
from planner.inference.inputs import HardwareInputs, InferenceInputs
from planner.inference.scenario import InferenceScenario
from planner.inference.speculative import Draft, draft_for
from planner.model.architecture import ModelArchitecture, ParameterCounts, parameter_counts
from planner.model.checkpoint_precision import fp8_block_scaled
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency


@dataclass(frozen=True, slots=True)
class ScenarioInputs:
    arch: ModelArchitecture
    counts: ParameterCounts
    accel: Accelerator
    efficiency: Efficiency
    hw: HardwareInputs
    x: InferenceInputs
    usd_per_gpu_hour: float
    draft: Draft | None = None  # speculative decoding's draft (absent: plain decoding)


def scenario_inputs(scenario: InferenceScenario, calibration: CalibrationRecord | None = None) -> ScenarioInputs:
    """The formulas' inputs; `calibration` replaces the default efficiencies and runtime memory."""
    arch, accel = scenario.architecture(), scenario.accelerator()
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    price = scenario.usd_per_gpu_hour if scenario.usd_per_gpu_hour is not None else accel.reference_usd_per_hour
    return ScenarioInputs(
        arch=arch,
        counts=parameter_counts(arch),
        accel=accel,
        efficiency=calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY,
        hw=HardwareInputs.from_accelerator(
            accel,
            scenario.weight_dtype,
            price,
            calibration,
            scenario.kv_cache_dtype,
            fp8_block_scaled(arch, scenario.weight_dtype, scenario.fp8_scaling),
        ),
        x=InferenceInputs.from_scenario(scenario, correction),
        usd_per_gpu_hour=price,
        draft=draft_for(arch, scenario.speculative),
    )
