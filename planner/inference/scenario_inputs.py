"""Everything the formulas read for one inference scenario, built once: the static plan and the traffic
simulation start from the same inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from planner.arrays import Number
from planner.calibration_record import CalibrationRecord
from planner.hardware.catalog import Accelerator
from planner.inference.adapters import frame_adapters
from planner.inference.inputs import ElementBytes, HardwareInputs, InferenceInputs, element_bytes
from planner.inference.scenario import InferenceScenario
from planner.inference.speculative import Draft, draft_for
from planner.model.architecture import ModelArchitecture, ParameterCounts, parameter_counts
from planner.model.checkpoint_precision import fp8_block_scaled
from planner.physics.efficiency import DEFAULT_EFFICIENCY, EfficiencyValues


@dataclass(frozen=True, slots=True)
class ScenarioInputs:
    arch: ModelArchitecture
    counts: ParameterCounts
    accel: Accelerator
    efficiency: EfficiencyValues[float]  # the formulas' plain view of the (default or calibrated) Efficiency
    hw: HardwareInputs
    inputs: InferenceInputs  # the scenario as numbers
    usd_per_gpu_hour: float
    draft: Draft | None = None  # speculative decoding's draft (absent: plain decoding)


def scenario_inputs(scenario: InferenceScenario, calibration: CalibrationRecord | None = None) -> ScenarioInputs:
    """The formulas' inputs; `calibration` replaces the default efficiencies and runtime memory."""
    arch, accel = scenario.architecture(), scenario.accelerator()
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    price = gpu_hour_price(scenario, accel)
    return ScenarioInputs(
        arch=arch,
        counts=parameter_counts(arch),
        accel=accel,
        efficiency=EfficiencyValues.of(calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY),
        hw=hardware_inputs(scenario, arch, accel, scenario.weight_dtype, scenario.kv_cache_dtype, calibration),
        inputs=InferenceInputs.from_scenario(scenario, correction),
        usd_per_gpu_hour=price,
        draft=draft_for(arch, scenario.speculative),
    )


def gpu_hour_price(scenario: InferenceScenario, accel: Accelerator) -> float:
    """The scenario's price per GPU-hour, else the accelerator's reference price."""
    return scenario.usd_per_gpu_hour if scenario.usd_per_gpu_hour is not None else accel.reference_usd_per_hour


def hardware_inputs(
    scenario: InferenceScenario,
    arch: ModelArchitecture,
    accel: Accelerator,
    weight_dtype: str,
    kv_cache_dtype: str,
    calibration: CalibrationRecord | None = None,
) -> HardwareInputs:
    """The accelerator's numbers for these weight and KV formats (`HardwareInputs.from_accelerator`), at the
    scenario's price and FP8 scaling; a plan and each distinct (GPU, formats) row of a sweep build them here."""
    price = gpu_hour_price(scenario, accel)
    block = fp8_block_scaled(arch, weight_dtype, scenario.fp8_scaling)
    # Not memoized: the accuracy report's mechanism study re-plans with gemm_efficiency's rules switched off.
    return HardwareInputs.from_accelerator(accel, weight_dtype, price, calibration, kv_cache_dtype, block)


# ---------------------------------------------------------------------------------------------
# a frame of scenarios: one base scenario, some knobs per row (planner.search.sweep)


def frame_inputs(
    base: InferenceScenario,
    layout: Mapping[str, np.ndarray],
    formats: Sequence[tuple[str, str]],
    format_rows: np.ndarray,
    runtime_overhead_correction_bytes: Number = 0.0,
    host_link_bytes_per_second: Number | None = None,
) -> InferenceInputs:
    """`InferenceInputs` for a frame of scenarios: `base`'s, with per-row arrays for the `layout` fields
    (tensor_parallel, pipeline_parallel, expert_parallel, num_gpus, concurrency) and, per row, the bytes per
    element of `formats[format_rows[row]]` (a distinct (weight dtype, KV dtype) pair; `element_bytes`, the
    mapping `InferenceInputs.from_scenario` uses, runs once per pair). LoRA adapters are priced per row's layout,
    format and GPU host link (`host_link_bytes_per_second`, per row; default: the base GPU's)."""
    per_format = [element_bytes(w, kv, base.weight_group_size, base.quantize_embeddings) for w, kv in formats]
    element_columns = {
        name: np.array([float(b[name]) for b in per_format])[format_rows] for name in ElementBytes.__annotations__
    }
    inputs = replace(
        InferenceInputs.from_scenario(base, runtime_overhead_correction_bytes), **layout, **element_columns
    )
    if base.lora is None:
        return inputs
    link = base.accelerator().host_link_bandwidth_bytes_per_second
    adapters = frame_adapters(
        base.lora,
        base.architecture(),
        base.runtime,
        (layout["tensor_parallel"], layout["pipeline_parallel"]),
        element_columns["activation_bytes_per_element"],
        link if host_link_bytes_per_second is None else host_link_bytes_per_second,
    )
    return replace(inputs, adapters=adapters)


def frame_hardware(
    base: InferenceScenario,
    arch: ModelArchitecture,
    devices: Sequence[tuple[Accelerator, str, str]],
    device_rows: np.ndarray,
    calibration: CalibrationRecord | None = None,
) -> HardwareInputs:
    """`HardwareInputs` of per-row arrays: row r gets `hardware_inputs` of `devices[device_rows[r]]`, a distinct
    (accelerator, weight dtype, KV dtype), built once each."""
    built = [hardware_inputs(base, arch, accel, w, kv, calibration) for accel, w, kv in devices]
    columns = {
        f.name: np.array([float(getattr(b, f.name)) for b in built])[device_rows] for f in fields(HardwareInputs)
    }
    for flag in ("is_accelerator", "peer_link", "block_fp8_experts"):
        columns[flag] = columns[flag].astype(bool)
    return HardwareInputs(**columns)
