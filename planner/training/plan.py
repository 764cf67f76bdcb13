"""Training: one TrainingScenario through `training_metrics`, wrapped into a frozen `TrainingPlan` with the
micro-batch table, warnings, assumptions and equations (the shape of `planner.inference.plan_inference`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.calibration_record import CalibrationRecord
from planner.hardware.catalog import Accelerator
from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    kv_cache_bytes_per_token,
    parameter_counts,
)
from planner.physics import memory as base_memory
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency
from planner.physics.energy import accelerator_power, energy_assumption
from planner.physics.lora import lora_adapter_elements
from planner.results import HardwareSummary, MemoryBreakdown, ModelSummary, PhaseRoofline, warning_fields
from planner.training import precision as tprec
from planner.training.explain import PlanFigures, assumptions_for, bottleneck, equations_for
from planner.training.footprint import TrainingMemory, training_memory
from planner.training.inputs import TrainingHardware, TrainingInputs, training_hardware, training_inputs
from planner.training.metrics import TrainingMetrics, training_metrics
from planner.training.plan_warnings import warnings_for
from planner.training.results import (
    MicroBatchOption,
    TrainingCost,
    TrainingEnergy,
    TrainingLayout,
    TrainingPerformance,
    TrainingPlan,
)
from planner.training.scenario import TrainingScenario
from planner.uncertainty import training_bands

MAX_MICRO_BATCH_SEARCH = 1024


def plan_training(scenario: TrainingScenario, calibration: CalibrationRecord | None = None) -> TrainingPlan:
    """Memory per GPU, step time, throughput and cost of one training job; a calibration replaces the
    documented efficiencies and corrects the runtime overhead."""
    arch, accel = scenario.architecture(), scenario.accelerator()
    counts = parameter_counts(arch)
    efficiency = calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    hw = training_hardware(scenario, accel, calibration)
    inputs = training_inputs(scenario, correction)
    metrics = training_metrics(arch, counts, hw, efficiency, inputs)

    upper = min(scenario.global_batch_size // scenario.dp, MAX_MICRO_BATCH_SEARCH)
    memory = _memory_breakdown(metrics.memory, largest_fitting_micro_batch(arch, counts, hw, inputs, upper))
    performance = _performance(scenario, metrics)
    cost = _cost(scenario, hw, metrics)
    layout = _layout(scenario, arch, counts, inputs, metrics.memory)
    hardware = _hardware_summary(scenario, accel, hw)
    options = _micro_batch_options(scenario, arch, counts, hw, efficiency, inputs)
    binding, reason = bottleneck(memory, performance)
    energy = _energy(scenario, accel, metrics)
    return TrainingPlan(
        scenario=scenario,
        model=_model_summary(scenario, arch, counts),
        hardware=hardware,
        layout=layout,
        memory=memory,
        performance=performance,
        cost=cost,
        energy=energy,
        micro_batch_options=options,
        bottleneck=binding,
        bottleneck_reason=reason,
        **warning_fields(warnings_for(scenario, arch, accel, memory, performance, options)),
        assumptions=assumptions_for(scenario, arch, efficiency, calibration)
        + [
            energy_assumption(
                accelerator_power(accel), scenario.pue, scenario.electricity_usd_per_kwh, scenario.carbon_kg_per_kwh
            )
        ],
        equations=equations_for(
            scenario, arch, counts, efficiency, PlanFigures(layout, memory, performance, cost, hardware, energy)
        ),
        uncertainty=training_bands(memory.total_bytes, performance.step_seconds, calibration, arch.is_moe),
        calibration=calibration.label if calibration is not None else None,
    )


# ---------------------------------------------------------------------------------------------
# searches over the micro-batch size (one broadcast call each)


def _with_micro_batch(inputs: TrainingInputs, micro_batch_size) -> TrainingInputs:
    return replace(inputs, batch=replace(inputs.batch, micro_batch_size=micro_batch_size))


def largest_fitting_micro_batch(
    arch: ModelArchitecture, counts: ParameterCounts, hw: TrainingHardware, inputs: TrainingInputs, upper: int
) -> int:
    """Largest micro-batch in 1..upper whose memory fits (0 when none). Memory grows with the micro-batch, so
    the fitting set is a prefix."""
    candidates = np.arange(1, max(int(upper), 1) + 1)
    fits = np.asarray(training_memory(arch, counts, hw, _with_micro_batch(inputs, candidates)).fits)
    fitting = candidates[fits]
    return int(fitting.max()) if fitting.size else 0


def _micro_batch_candidates(scenario: TrainingScenario) -> list[int]:
    """The scenario's micro-batch and every power of two that splits a replica's share of the global batch
    into whole micro-batches (a multiple of the stages for the interleaved schedule)."""
    per_replica = scenario.global_batch_size // scenario.dp
    out = {scenario.micro_batch_size}
    size = 1
    while size <= per_replica and size <= MAX_MICRO_BATCH_SEARCH:
        if per_replica % size == 0 and (
            scenario.virtual_pipeline_stages == 1 or (per_replica // size) % scenario.pipeline_parallel == 0
        ):
            out.add(size)
        size *= 2
    return sorted(out)


def _micro_batch_options(
    scenario: TrainingScenario,
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    efficiency: Efficiency,
    inputs: TrainingInputs,
) -> list[MicroBatchOption]:
    """Gradient accumulation against larger micro-batches for the same global batch."""
    candidates = _micro_batch_candidates(scenario)
    per_candidate = _with_micro_batch(inputs, np.array(candidates))
    m = training_metrics(arch, counts, hw, efficiency, per_candidate)
    columns = {
        "gradient_accumulation_steps": per_candidate.microbatches,
        "total_bytes": m.memory.total_bytes,
        "activations_bytes": m.memory.components.activations_bytes,
        "fits": m.memory.fits,
        "step_seconds": m.step_seconds,
        "tokens_per_second": m.throughput.tokens_per_second,
        "pipeline_bubble_fraction": m.throughput.pipeline_bubble_fraction,
    }
    values = {name: np.asarray(column) for name, column in columns.items()}
    return [
        MicroBatchOption(
            micro_batch_size=int(b),
            gradient_accumulation_steps=int(round(float(values["gradient_accumulation_steps"][i]))),
            total_bytes=float(values["total_bytes"][i]),
            activations_bytes=float(values["activations_bytes"][i]),
            fits=bool(values["fits"][i]),
            step_seconds=float(values["step_seconds"][i]),
            tokens_per_second=float(values["tokens_per_second"][i]),
            pipeline_bubble_fraction=float(values["pipeline_bubble_fraction"][i]),
        )
        for i, b in enumerate(candidates)
    ]


# ---------------------------------------------------------------------------------------------
# typed numbers -> the plan's frozen records


def _floats(values: dict) -> dict[str, float]:
    return {key: float(value) for key, value in values.items()}


def _memory_breakdown(memory: TrainingMemory, max_micro_batch_size: int) -> MemoryBreakdown:
    return MemoryBreakdown(
        components=_floats(memory.components.as_dict()),
        capacity_bytes=float(memory.capacity_bytes),
        budget_bytes=float(memory.capacity_bytes),  # training may use the whole device
        host_bytes=float(memory.host_bytes),
        max_micro_batch_size=max_micro_batch_size,
        reserved_bytes=float(base_memory.reserved_bytes(memory.components.total_bytes)),
        reserved_bytes_high=float(
            base_memory.reserved_bytes(memory.components.total_bytes, base_memory.ALLOCATOR_FRAGMENTATION_SHARE_HIGH)
        ),
    )


def _performance(scenario: TrainingScenario, m: TrainingMetrics) -> TrainingPerformance:
    mb, opt, t = m.time.microbatch, m.time.optimizer, m.throughput
    forward_backward = PhaseRoofline(
        phase="forward_backward",
        tokens=float(mb.tokens),
        flops=float(mb.flops),
        bytes=float(mb.bytes),
        compute_seconds=float(mb.compute_seconds),
        memory_seconds=float(mb.memory_seconds),
        # one roofline for the micro-batch's forward and backward (training.step.microbatch_time)
        compute_bound_seconds=float(mb.compute_seconds) if mb.compute_seconds > mb.memory_seconds else 0.0,
        memory_bound_seconds=0.0 if mb.compute_seconds > mb.memory_seconds else float(mb.memory_seconds),
        communication_seconds=float(mb.exposed_communication_seconds),
        seconds=float(mb.slot_seconds),
    )
    optimizer_step = PhaseRoofline(
        phase="optimizer_step",
        tokens=0.0,
        flops=0.0,
        bytes=float(opt.bytes),
        compute_seconds=0.0,
        memory_seconds=float(opt.seconds),
        compute_bound_seconds=0.0,
        memory_bound_seconds=float(opt.seconds),
        communication_seconds=float(opt.offload_transfer_seconds),
        seconds=float(opt.seconds) + float(opt.offload_transfer_seconds),
    )
    return TrainingPerformance(
        step_seconds=float(m.step_seconds),
        tokens_per_second=float(t.tokens_per_second),
        tokens_per_second_per_gpu=float(t.tokens_per_second_per_gpu),
        mfu=float(t.mfu),
        hfu=float(t.hfu),
        model_flops_per_step=float(t.model_flops_per_step),
        hardware_flops_per_step=float(t.hardware_flops_per_step),
        model_flops_per_token=float(m.time.flops.model_flops_per_token),
        flops_roofline_seconds=float(t.flops_roofline_seconds),
        pipeline_bubble_fraction=float(t.pipeline_bubble_fraction),
        gradient_accumulation_steps=scenario.gradient_accumulation_steps,
        time_to_train_seconds=float(t.time_to_train_seconds),
        steps_to_train=float(t.steps_to_train),
        training_tokens=scenario.training_tokens,
        step_breakdown_seconds=_floats(m.time.step.as_dict()),
        communication_totals=_floats(m.time.communication.as_dict()),
        forward_backward=forward_backward,
        optimizer_step=optimizer_step,
    )


def _cost(scenario: TrainingScenario, hw: TrainingHardware, m: TrainingMetrics) -> TrainingCost:
    return TrainingCost(
        num_gpus=scenario.num_gpus,
        usd_per_gpu_hour=float(hw.usd_per_gpu_hour),
        usd_per_hour=float(m.spend.usd_per_hour),
        gpu_hours=float(m.spend.gpu_hours),
        usd_total=float(m.spend.usd_total),
        usd_per_million_tokens=float(m.spend.usd_per_million_tokens),
    )


def _energy(scenario: TrainingScenario, accel: Accelerator, m: TrainingMetrics) -> TrainingEnergy:
    power, e = accelerator_power(accel), m.energy
    return TrainingEnergy(
        board_watts=power.board_watts,
        idle_watts=power.idle_watts,
        power_assumed=power.assumed,
        power_source=power.source,
        busy_share=float(e.busy_share),
        watts_per_gpu=float(e.watts_per_gpu),
        pue=scenario.pue,
        cluster_watts=float(e.cluster_watts),
        kwh=float(e.kwh),
        kwh_per_million_tokens=float(e.kwh_per_million_tokens),
        electricity_usd_per_kwh=scenario.electricity_usd_per_kwh,
        electricity_usd=float(e.electricity_usd),
        carbon_kg_per_kwh=scenario.carbon_kg_per_kwh,
        co2e_kg=float(e.co2e_kg),
    )


def trainable_parameters(scenario: TrainingScenario, arch: ModelArchitecture, counts: ParameterCounts) -> int:
    """Whole-model trainable parameters: all of them, or the LoRA adapters (TP = PP = EP = 1)."""
    if scenario.lora is None:
        return counts.total_with_vision
    # float(): the term broadcasts (arrays on the sweep path); with scalar inputs it is one number.
    adapters = lora_adapter_elements(arch, scenario.lora.rank, scenario.lora.target_modules, 1, 1, 1)
    return int(round(float(adapters)))


def _layout(
    scenario: TrainingScenario,
    arch: ModelArchitecture,
    counts: ParameterCounts,
    inputs: TrainingInputs,
    memory: TrainingMemory,
) -> TrainingLayout:
    if scenario.pipeline_parallel == 1:
        heaviest = "only"
    elif bool(memory.middle_stage_is_heaviest):
        heaviest = "middle"
    else:
        heaviest = "first" if memory.first_stage_is_heaviest else "last"
    return TrainingLayout(
        tensor_parallel=scenario.tensor_parallel,
        pipeline_parallel=scenario.pipeline_parallel,
        data_parallel=scenario.dp,
        context_parallel=scenario.context_parallel,
        expert_parallel=scenario.expert_parallel,
        virtual_pipeline_stages=scenario.virtual_pipeline_stages,
        sequence_parallel=bool(inputs.layout.sequence_parallel),
        zero_stage=scenario.effective_zero_stage,
        micro_batch_size=scenario.micro_batch_size,
        global_batch_size=scenario.global_batch_size,
        gradient_accumulation_steps=scenario.gradient_accumulation_steps,
        sequence_length=scenario.sequence_length,
        tokens_per_step=scenario.tokens_per_step,
        parameters_trainable=trainable_parameters(scenario, arch, counts),
        parameters_trainable_per_gpu=float(memory.last_stage.states.trainable_elements),
        heaviest_stage=heaviest,
    )


def _model_summary(scenario: TrainingScenario, arch: ModelArchitecture, counts: ParameterCounts) -> ModelSummary:
    return ModelSummary(
        name=arch.name,
        model_id=scenario.model_id(),
        model_type=arch.model_type,
        params_total=counts.total_with_vision,
        params_active=counts.active,
        kv_cache_bytes_per_token=kv_cache_bytes_per_token(arch, 2.0),
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        max_context_tokens=arch.max_context_tokens,
        parameter_breakdown=counts.as_dict(),
    )


def _hardware_summary(scenario: TrainingScenario, accel: Accelerator, hw: TrainingHardware) -> HardwareSummary:
    return HardwareSummary(
        id=scenario.gpu_id(),
        name=accel.name,
        memory_bytes=accel.memory_bytes,
        memory_bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
        peak_flops_per_second=float(hw.peak_flops_per_second),
        compute_dtype=tprec.PRECISIONS[scenario.precision].compute_dtype,
        usd_per_gpu_hour=float(hw.usd_per_gpu_hour),
        usd_per_gpu_hour_is_reference=scenario.usd_per_gpu_hour is None,
    )
