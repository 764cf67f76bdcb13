"""The whole training computation over plain numbers: memory per GPU, step time, throughput and cost.

`training_metrics` broadcasts over numpy arrays of the numeric inputs (layout degrees, batch sizes,
sequence length, bytes per element, 0/1 flags, `recompute` levels, `Recompute`), so `planner.search.sweep` and the
micro-batch table run the very same code as `plan()` (DESIGN rule 4). Memory lives in
`planner.training.footprint`, the step in `planner.training.step`; this module adds what follows from
the step time: tokens per second, MFU/HFU, time and cost to train.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Number
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics.cost import gpu_hours, usd_for, usd_per_hour, usd_per_million_tokens
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.energy import busy_share, deployment_watts, energy_kwh, gpu_power_watts, kwh_per_million_tokens
from planner.training import step_time
from planner.training.footprint import TrainingMemory, training_memory
from planner.training.inputs import TrainingHardware, TrainingInputs
from planner.training.step import StepTime, training_step


@dataclass(frozen=True, slots=True)
class TrainingThroughput:
    """Whole-job rates. MFU counts model FLOPs, HFU hardware FLOPs (see `planner.training.step_time`), both
    over the GPUs' dense peak."""

    tokens_per_step: Number
    tokens_per_second: Number
    tokens_per_second_per_gpu: Number
    model_flops_per_step: Number
    hardware_flops_per_step: Number
    flops_roofline_seconds: Number  # hardware FLOPs / (GPUs x dense peak): no step can be faster
    pipeline_bubble_fraction: Number
    mfu: Number
    hfu: Number
    time_to_train_seconds: Number
    steps_to_train: Number


@dataclass(frozen=True, slots=True)
class TrainingSpend:
    usd_per_hour: Number  # the whole cluster
    gpu_hours: Number
    usd_total: Number
    usd_per_million_tokens: Number


@dataclass(frozen=True, slots=True)
class TrainingEnergy:
    """What the run draws (`planner.physics.energy`): per GPU over a step, the cluster, and the whole run."""

    busy_share: Number  # per GPU: the step less its pipeline bubble and offload transfers, over the step
    watts_per_gpu: Number  # idle + busy share x (board - idle)
    cluster_watts: Number  # every GPU, times the PUE
    kwh: Number  # the whole run
    kwh_per_million_tokens: Number
    electricity_usd: Number
    co2e_kg: Number


@dataclass(frozen=True, slots=True)
class TrainingMetrics:
    memory: TrainingMemory
    time: StepTime
    throughput: TrainingThroughput
    spend: TrainingSpend
    energy: TrainingEnergy

    @property
    def step_seconds(self) -> Number:
        return self.time.step.step_seconds


def training_throughput(
    hw: TrainingHardware, inputs: TrainingInputs, time: StepTime, step_seconds: Number
) -> TrainingThroughput:
    lay, batch = inputs.layout, inputs.batch
    tokens_per_step = batch.global_batch_size * batch.sequence_length
    tokens_per_second = tokens_per_step / step_seconds
    model_flops = time.flops.model_flops_per_token * tokens_per_step
    hardware_flops = time.flops.hardware_flops_per_token * tokens_per_step
    cluster_peak = lay.num_gpus * hw.peak_flops_per_second
    return TrainingThroughput(
        tokens_per_step=tokens_per_step,
        tokens_per_second=tokens_per_second,
        tokens_per_second_per_gpu=tokens_per_second / lay.num_gpus,
        model_flops_per_step=model_flops,
        hardware_flops_per_step=hardware_flops,
        flops_roofline_seconds=hardware_flops / cluster_peak,
        pipeline_bubble_fraction=step_time.pipeline_bubble_fraction(
            lay.pipeline_parallel, inputs.microbatches, lay.virtual_stages
        ),
        mfu=model_flops / (step_seconds * cluster_peak),
        hfu=hardware_flops / (step_seconds * cluster_peak),
        time_to_train_seconds=batch.training_tokens / tokens_per_second,
        steps_to_train=batch.training_tokens / tokens_per_step,
    )


def training_spend(hw: TrainingHardware, inputs: TrainingInputs, throughput: TrainingThroughput) -> TrainingSpend:
    gpus, seconds = inputs.layout.num_gpus, throughput.time_to_train_seconds
    cluster_usd_per_hour = usd_per_hour(gpus, hw.usd_per_gpu_hour)
    return TrainingSpend(
        usd_per_hour=cluster_usd_per_hour,
        gpu_hours=gpu_hours(gpus, seconds),
        usd_total=usd_for(gpus, seconds, hw.usd_per_gpu_hour),
        usd_per_million_tokens=usd_per_million_tokens(cluster_usd_per_hour, throughput.tokens_per_second),
    )


def training_energy(
    hw: TrainingHardware, inputs: TrainingInputs, time: StepTime, throughput: TrainingThroughput
) -> TrainingEnergy:
    """Power and energy of the run: each GPU busy for the step less its pipeline bubble and its offload transfers
    (it waits through both), at idle + busy share x (board - idle); every GPU for the time to train, x PUE."""
    step, site, gpus = time.step, inputs.site, inputs.layout.num_gpus
    busy = step.step_seconds - step.pipeline_bubble_seconds - step.offload_transfer_seconds
    share = busy_share(busy, step.step_seconds)
    watts = gpu_power_watts(hw.board_watts, hw.idle_watts, share)
    kwh = energy_kwh(watts, gpu_hours(gpus, throughput.time_to_train_seconds), site.pue)
    return TrainingEnergy(
        busy_share=share,
        watts_per_gpu=watts,
        cluster_watts=deployment_watts(gpus, watts, site.pue),
        kwh=kwh,
        kwh_per_million_tokens=kwh_per_million_tokens(gpus, watts, site.pue, throughput.tokens_per_second),
        electricity_usd=kwh * site.electricity_usd_per_kwh,
        co2e_kg=kwh * site.carbon_kg_per_kwh,
    )


def training_metrics(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    efficiency: EfficiencyFigures,
    inputs: TrainingInputs,
) -> TrainingMetrics:
    """Every number of a training plan, per GPU unless named otherwise."""
    memory = training_memory(arch, counts, hw, inputs)
    time = training_step(arch, counts, hw, efficiency, inputs, memory)
    throughput = training_throughput(hw, inputs, time, time.step.step_seconds)
    return TrainingMetrics(
        memory=memory,
        time=time,
        throughput=throughput,
        spend=training_spend(hw, inputs, throughput),
        energy=training_energy(hw, inputs, time, throughput),
    )
