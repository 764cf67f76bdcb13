"""What `plan_training()` returns: frozen pydantic records whose JSON is the CLI/CSV contract.

Reuses the shared `MemoryBreakdown`, `Equation`, `PhaseRoofline`, `ModelSummary` and `HardwareSummary`
so a training plan reads like an inference plan: `memory.components` (named `<term>_bytes`),
`memory.total_bytes`, `memory.capacity_bytes`, `memory.fits`, `performance.*`, `cost.*`, `bottleneck`,
`warnings`, `assumptions`, `equations`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.results import (
    Bottleneck,
    Equation,
    HardwareSummary,
    MemoryBreakdown,
    ModelSummary,
    PhaseRoofline,
    WarningCode,
)
from planner.training.scenario import TrainingScenario
from planner.uncertainty import Band


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TrainingLayout(_Frozen):
    """How the job is laid out and batched (derived values included)."""

    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    context_parallel: int
    expert_parallel: int
    virtual_pipeline_stages: int
    sequence_parallel: bool
    zero_stage: int  # effective: Megatron's distributed optimizer counts as 1
    micro_batch_size: int
    global_batch_size: int
    gradient_accumulation_steps: int
    sequence_length: int
    tokens_per_step: int
    parameters_trainable: int  # whole model (LoRA: the adapters)
    parameters_trainable_per_gpu: float  # this GPU's TP/PP/EP shard, before ZeRO sharding
    heaviest_stage: Literal["first", "middle", "last", "only"]


class TrainingPerformance(_Frozen):
    step_seconds: float
    tokens_per_second: float  # whole job
    tokens_per_second_per_gpu: float
    mfu: float  # model FLOPs (causal attention, no recomputation) / (time x GPUs x dense peak)
    hfu: float  # hardware FLOPs (executed attention, recomputation included) / (time x GPUs x dense peak)
    model_flops_per_step: float
    hardware_flops_per_step: float
    model_flops_per_token: float
    flops_roofline_seconds: float  # hardware FLOPs / (GPUs x dense peak): no step can be faster
    pipeline_bubble_fraction: float
    gradient_accumulation_steps: int
    time_to_train_seconds: float
    steps_to_train: float
    training_tokens: float
    step_breakdown_seconds: dict[str, float]  # seconds per step, sums to step_seconds
    communication_totals: dict[str, float]  # seconds per step before overlap
    forward_backward: PhaseRoofline  # one micro-batch on one GPU of the slowest (last) stage
    optimizer_step: PhaseRoofline


class TrainingCost(_Frozen):
    num_gpus: int
    usd_per_gpu_hour: float
    usd_per_hour: float
    gpu_hours: float
    usd_total: float
    usd_per_million_tokens: float


class TrainingEnergy(_Frozen):
    """Power and energy of the run (planner.physics.energy): per GPU, idle + busy share x (board - idle) over a
    step; the cluster, every GPU x PUE; the whole run at the time to train. GPUs only, not their hosts."""

    board_watts: float  # per GPU, the datasheet's board power (or a stated assumption)
    idle_watts: float  # per GPU, a published idle reading (or a stated assumption)
    power_assumed: bool  # True: a figure above is a guess (power_source says which)
    power_source: str
    busy_share: float  # per GPU: the step less pipeline bubble and offload transfers, over the step
    watts_per_gpu: float
    pue: float
    cluster_watts: float  # all GPUs x watts_per_gpu x PUE
    kwh: float  # the whole run
    kwh_per_million_tokens: float
    electricity_usd_per_kwh: float
    electricity_usd: float  # the whole run's electricity
    carbon_kg_per_kwh: float
    co2e_kg: float  # the whole run


class MicroBatchOption(_Frozen):
    """Gradient accumulation vs a larger micro-batch: the same global batch, memory and time side by side."""

    micro_batch_size: int
    gradient_accumulation_steps: int
    total_bytes: float
    activations_bytes: float
    fits: bool
    step_seconds: float
    tokens_per_second: float
    pipeline_bubble_fraction: float


class TrainingPlan(_Frozen):
    kind: Literal["training"] = "training"
    scenario: TrainingScenario
    model: ModelSummary
    hardware: HardwareSummary
    layout: TrainingLayout
    memory: MemoryBreakdown
    performance: TrainingPerformance
    cost: TrainingCost
    energy: TrainingEnergy
    micro_batch_options: list[MicroBatchOption]
    bottleneck: Bottleneck
    bottleneck_reason: str
    warnings: list[str]
    warning_codes: list[WarningCode]  # warning_codes[i]: the stable code of warnings[i] (results.PlanWarning)
    assumptions: list[str]
    equations: list[Equation]
    uncertainty: dict[str, Band] = {}  # headline field (dotted path) -> range the measured value likely falls in
    calibration: str | None = None
