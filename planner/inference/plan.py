"""Inference: one scenario in, one frozen `InferencePlan` out.

`plan_inference` builds the formulas' inputs, runs `metrics.inference_metrics` (the same function the
sweep runs over arrays) and wraps its numbers into the plan's records, with the words and equations of
`explain`.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.hardware.catalog import Accelerator
from planner.inference import explain
from planner.inference.draft import ACCEPTANCE_SOURCES, draft_architecture
from planner.inference.inputs import HardwareInputs, InferenceInputs
from planner.inference.memory import runtime_assumption
from planner.inference.metrics import InferenceMetrics, inference_metrics, phase_fields, record_fields
from planner.inference.plan_warnings import warnings_for
from planner.inference.results import (
    InferenceCost,
    InferenceEnergy,
    InferencePerformance,
    InferencePlan,
    SpeculativeSummary,
)
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import ScenarioInputs, scenario_inputs
from planner.inference.steps import PhaseStep
from planner.inference.traffic import TrafficEngine
from planner.model.architecture import ModelArchitecture, ParameterCounts, kv_cache_bytes_per_token
from planner.physics import roofline
from planner.physics.cost import replicas_for_request_rate
from planner.physics.efficiency import EfficiencyValues
from planner.physics.energy import accelerator_power, energy_assumption
from planner.results import (
    Equation,
    HardwareSummary,
    MemoryBreakdown,
    ModelSummary,
    PhaseRoofline,
    PlanWarning,
    warning_fields,
)
from planner.uncertainty import inference_bands

TRAFFIC_NOT_SIMULATED = "The request stream was not simulated: "  # a warning's prefix; the reason follows


def plan_inference(scenario: InferenceScenario, calibration: CalibrationRecord | None = None) -> InferencePlan:
    """Plan one validated scenario; `calibration` replaces the default efficiencies and runtime memory."""
    i = scenario_inputs(scenario, calibration)
    arch, counts, accel, efficiency, hw, inputs, price = (
        i.arch,
        i.counts,
        i.accel,
        i.efficiency,
        i.hw,
        i.inputs,
        i.usd_per_gpu_hour,
    )
    m = inference_metrics(arch, counts, hw, efficiency, inputs, i.draft)
    traffic, traffic_warnings = _traffic_engine(scenario, i, m)

    memory = _memory(m, accel)
    performance = _performance(m, hw, scenario)
    cost = _cost(scenario, m, performance, price)
    bottleneck, reason = explain.bottleneck(memory, performance)
    speculative_assumptions, speculative_warnings = explain.speculative_notes(scenario, performance)
    adapter_assumptions, adapter_warnings = explain.adapter_notes(scenario, inputs.adapters)
    model = _model_summary(scenario, arch, counts, kv_cache_bytes_per_token(arch, float(inputs.kv_bytes_per_element)))
    result = InferencePlan(
        scenario=scenario,
        model=model,
        hardware=_hardware_summary(scenario, accel, hw, price),
        memory=memory,
        performance=performance,
        cost=cost,
        energy=_energy(scenario, accel, m),
        bottleneck=bottleneck,
        bottleneck_reason=reason,
        **warning_fields(
            warnings_for(scenario, arch, accel, memory) + adapter_warnings + speculative_warnings + traffic_warnings
        ),
        assumptions=explain.assumptions(scenario, arch, efficiency, calibration)
        + [runtime_assumption(inputs, m.memory)]
        + [
            energy_assumption(
                accelerator_power(accel), scenario.pue, scenario.electricity_usd_per_kwh, scenario.carbon_kg_per_kwh
            )
        ]
        + adapter_assumptions
        + speculative_assumptions
        + (traffic.assumptions() if traffic is not None else []),
        uncertainty=inference_bands(
            memory.total_bytes,
            performance.ttft_seconds,
            performance.tpot_seconds,
            performance.output_tokens_per_second,
            calibration,
            float(m.shape.sequences),
        ),
        calibration=calibration.label if calibration is not None else None,
        traffic=traffic.simulate() if traffic is not None else None,
    )
    result._explain = _Equations(scenario, arch, model, hw, efficiency, inputs, m)
    return result


@dataclass(frozen=True)
class _Equations:
    """A plan's equations, built when first read: picklable (st.cache_data) and equal for equal plans."""

    scenario: InferenceScenario
    arch: ModelArchitecture
    model: ModelSummary
    hw: HardwareInputs
    efficiency: EfficiencyValues[float]
    inputs: InferenceInputs  # the scenario as numbers
    m: InferenceMetrics

    def __call__(self) -> list[Equation]:
        return explain.equations(self.scenario, self.arch, self.model, self.hw, self.efficiency, self.inputs, self.m)


def _traffic_engine(
    scenario: InferenceScenario, i: ScenarioInputs, m: InferenceMetrics
) -> tuple[TrafficEngine | None, list[PlanWarning]]:
    """The scenario's request stream, ready to simulate; a layout that cannot serve one (no room for any KV
    cache) still gets its static plan, with the reason as a warning instead of a traffic answer."""
    if scenario.traffic is None:
        return None, []
    try:
        engine = TrafficEngine.from_metrics(scenario, i, m)
    except PlanningError as exc:
        return None, [PlanWarning("traffic_not_simulated", f"{TRAFFIC_NOT_SIMULATED}{exc}.")]
    return engine, engine.warnings()


# ---------------------------------------------------------------------------------------------
# typed numbers -> the plan's records


def _memory(m: InferenceMetrics, accel: Accelerator) -> MemoryBreakdown:
    return MemoryBreakdown(
        components={name: float(value) for name, value in m.memory.components().items()},
        capacity_bytes=float(accel.memory_bytes),
        **record_fields(m, "memory"),
    )


def _phase(name: str, step: PhaseStep) -> PhaseRoofline:
    return PhaseRoofline(phase=name, **phase_fields(step))


def _speculative(m: InferenceMetrics, scenario: InferenceScenario) -> SpeculativeSummary | None:
    spec, round_ = scenario.speculative, m.speculation
    if spec is None or round_ is None:
        return None
    return SpeculativeSummary(
        method=spec.method,
        draft=draft_architecture(scenario.architecture(), spec).name,
        drafted_tokens=spec.num_speculative_tokens,
        acceptance_rate=spec.acceptance,
        acceptance_is_assumed=spec.acceptance_is_assumed,
        acceptance_source=ACCEPTANCE_SOURCES[spec.method] if spec.acceptance_is_assumed else "the scenario",
        tokens_per_round=float(round_.tokens_per_sequence),
        verify_step_seconds=float(round_.verify.seconds),
        draft_step_seconds=float(round_.draft_step.seconds),
        round_seconds=float(round_.round_seconds),
        plain_decode_step_seconds=float(round_.plain_decode_seconds),
        speedup=float(round_.speedup),
        draft_prefill_seconds=float(round_.draft_prefill_seconds),
        verify=_phase("verify", round_.verify),
    )


def _performance(m: InferenceMetrics, hw: HardwareInputs, scenario: InferenceScenario) -> InferencePerformance:
    return InferencePerformance(
        **record_fields(m, "performance"),
        prefill=_phase("prefill", m.prefill),
        decode=_phase("decode", m.decode),
        ridge_point_flops_per_byte=float(
            roofline.ridge_point_flops_per_byte(hw.peak_flops_per_second, hw.bandwidth_bytes_per_second)
        ),
        speculative=_speculative(m, scenario),
    )


def _cost(s: InferenceScenario, m: InferenceMetrics, performance: InferencePerformance, price: float) -> InferenceCost:
    replicas_needed = gpus_needed = None
    if s.target_requests_per_second:
        per_replica = performance.requests_per_second / m.shape.replicas
        replicas_needed = int(replicas_for_request_rate(s.target_requests_per_second, per_replica))
        gpus_needed = replicas_needed * s.tensor_parallel * s.pipeline_parallel
    return InferenceCost(
        num_gpus=s.num_gpus,
        usd_per_gpu_hour=price,
        **record_fields(m, "cost"),
        replicas_needed=replicas_needed,
        gpus_needed=gpus_needed,
    )


def _energy(s: InferenceScenario, accel: Accelerator, m: InferenceMetrics) -> InferenceEnergy:
    power = accelerator_power(accel)
    return InferenceEnergy(
        board_watts=power.board_watts,
        idle_watts=power.idle_watts,
        power_assumed=power.assumed,
        power_source=power.source,
        pue=s.pue,
        electricity_usd_per_kwh=s.electricity_usd_per_kwh,
        carbon_kg_per_kwh=s.carbon_kg_per_kwh,
        **record_fields(m, "energy"),
    )


def _model_summary(
    s: InferenceScenario, arch: ModelArchitecture, counts: ParameterCounts, kv_per_token: float
) -> ModelSummary:
    return ModelSummary(
        name=arch.name,
        model_id=s.model_id(),
        model_type=arch.model_type,
        params_total=counts.total_with_vision,
        params_active=counts.active,
        kv_cache_bytes_per_token=kv_per_token,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        max_context_tokens=arch.max_context_tokens,
        parameter_breakdown=counts.as_dict(),
    )


def _hardware_summary(s: InferenceScenario, accel: Accelerator, hw: HardwareInputs, price: float) -> HardwareSummary:
    return HardwareSummary(
        id=s.gpu_id(),
        name=accel.name,
        memory_bytes=accel.memory_bytes,
        memory_bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
        peak_flops_per_second=float(hw.peak_flops_per_second),
        compute_dtype=accel.gemm_dtype(s.weight_dtype),
        usd_per_gpu_hour=price,
        usd_per_gpu_hour_is_reference=s.usd_per_gpu_hour is None,
    )
