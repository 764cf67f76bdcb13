"""What `plan()` returns: frozen pydantic records whose JSON is the CLI/CSV contract.

Breakdowns are data (named components; totals are computed fields), so the chart, the CSV and the
tests read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, computed_field


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Equation(Frozen):
    """One traceable number: the formula, the same formula with this scenario's numbers, the result."""

    name: str
    formula: str
    substituted: str
    value: float
    unit: str
    source: str = ""


class ModelSummary(Frozen):
    name: str
    model_id: str
    model_type: str
    params_total: int
    params_active: int
    kv_cache_bytes_per_token: float  # whole model, every layer, no sharding, at the scenario's KV dtype
    num_layers: int
    hidden_size: int
    max_context_tokens: int
    parameter_breakdown: dict[str, int]


class HardwareSummary(Frozen):
    id: str
    name: str
    memory_bytes: int
    memory_bandwidth_bytes_per_second: float
    peak_flops_per_second: float  # dense, at the scenario's compute dtype
    compute_dtype: str
    usd_per_gpu_hour: float
    usd_per_gpu_hour_is_reference: bool


class MemoryBreakdown(Frozen):
    """Per GPU (most loaded pipeline stage). `components` maps `<name>_bytes` to bytes."""

    components: dict[str, float]
    capacity_bytes: float
    budget_bytes: float  # what the engine may use (capacity x utilization for serving)
    host_bytes: float = 0.0  # memory moved to host RAM by offload, per GPU
    max_concurrency: int | None = None
    max_context_tokens: int | None = None
    kv_blocks: int | None = None
    max_micro_batch_size: int | None = None
    # training: what PyTorch's caching allocator likely reserves at the peak for `total_bytes` of tensors (the
    # allocated peak), at the typical and at the high fragmentation share (planner.physics.memory); None for serving,
    # whose engines size their pools from the profiled peak
    reserved_bytes: float | None = None
    reserved_bytes_high: float | None = None

    @computed_field
    @property
    def total_bytes(self) -> float:
        return float(sum(self.components.values()))

    @computed_field
    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.budget_bytes

    @computed_field
    @property
    def headroom_bytes(self) -> float:
        return self.budget_bytes - self.total_bytes

    @computed_field
    @property
    def headroom_fraction(self) -> float:
        return self.headroom_bytes / self.budget_bytes

    @computed_field
    @property
    def dominant_component(self) -> str:
        return max(self.components, key=self.components.__getitem__)


Resource = Literal["compute", "memory_bandwidth", "communication"]


class PhaseRoofline(Frozen):
    """One step of one phase on one GPU: the work, the time each resource needs, which binds.

    `compute_seconds` / `memory_seconds`: what all the step's FLOPs / bytes need. `compute_bound_seconds` /
    `memory_bound_seconds`: the time of the step's kernel groups that compute / bandwidth bind (a step's GEMMs
    can be compute-bound while its attention is bandwidth-bound; `roofline.kernel_groups_seconds`)."""

    phase: str
    tokens: float
    flops: float
    bytes: float
    compute_seconds: float
    memory_seconds: float
    compute_bound_seconds: float
    memory_bound_seconds: float
    communication_seconds: float
    seconds: float

    @computed_field
    @property
    def arithmetic_intensity_flops_per_byte(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @computed_field
    @property
    def binding(self) -> Resource:
        times: dict[Resource, float] = {
            "compute": self.compute_bound_seconds,
            "memory_bandwidth": self.memory_bound_seconds,
            "communication": self.communication_seconds,
        }
        return max(times, key=times.__getitem__)


Bottleneck = Literal["capacity", "memory_bandwidth", "compute", "communication"]


# ---------------------------------------------------------------------------------------------
# warnings: a stable code beside each sentence

LOW_HEADROOM_FRACTION = 0.10  # a plan that fits with less free memory than this is warned ("low_headroom")

WarningCode = Literal[
    # both kinds
    "generic_architecture",  # no dedicated config parser: planned as a Llama-style decoder
    "does_not_fit",
    "low_headroom",
    "fragmentation_risk",  # training: the tensors fit, what the caching allocator likely reserves does not
    "calibration_other_gpu",  # a calibration mapped explicitly from another device
    "tensor_parallel_over_pcie",
    # inference
    "context_over_max",
    "kv_exceeds_weights",
    "dequantized_format",  # a weight or KV format without tensor cores on this GPU
    "tensor_parallel_across_nodes",
    "uneven_replicas",
    "prefix_cache_assumed",
    "small_weight_group",
    "lora_slots_short",
    "speculative_slows_decode",
    "traffic_not_simulated",
    "stream_over_context",  # requests of the stream longer than the model's context
    "stream_over_kv_pool",  # requests no replica's KV cache holds whole
    "stream_overloaded",  # a stream sent faster than the deployment serves at its full batch
    # training
    "sequence_over_max",
    "uneven_pipeline_stages",
    "uneven_layer_split",
    "pipeline_bubble",
    "collectives_across_nodes",
    "tensor_parallel_without_sequence_parallel",
    "core_attn_recompute",
    "block_recompute_is_full",
    "no_fp8_tensor_cores",
    "attention_scores_stored",
    "fp16_loss_scaling",
    "bf16_without_master_weights",
    "cpu_optimizer_step",
    "zero_with_pipeline",
    "qlora_sharded_storage",
    "faster_micro_batch",
]


@dataclass(frozen=True, slots=True)
class PlanWarning:
    """One warning of a plan: its stable `code` (filter on it, never on the words) and its sentence.

    A plan keeps the sentences in `warnings` (a list of strings: the JSON every consumer reads) and the codes,
    in the same order, in `warning_codes`; `coded_warnings(plan)` pairs them again."""

    code: WarningCode
    message: str


class WarningFields(TypedDict):
    warnings: list[str]
    warning_codes: list[WarningCode]


def warning_fields(items: list[PlanWarning]) -> WarningFields:
    """A plan's `warnings` and `warning_codes` fields, in one order."""
    return {"warnings": [w.message for w in items], "warning_codes": [w.code for w in items]}


# What the request stream itself gets wrong (the dashboard shows these in its Serve traffic section).
STREAM_WARNING_CODES: frozenset[WarningCode] = frozenset(
    {"stream_over_context", "stream_over_kv_pool", "stream_overloaded"}
)


def coded_warnings(plan: Any) -> list[PlanWarning]:
    """A plan's warnings with their codes."""
    if len(plan.warning_codes) != len(plan.warnings):
        raise ValueError(f"{len(plan.warnings)} warnings but {len(plan.warning_codes)} warning codes")
    return [PlanWarning(code, message) for code, message in zip(plan.warning_codes, plan.warnings)]


def warning_of(plan: Any, code: WarningCode) -> PlanWarning | None:
    """The plan's first warning with `code`, or None."""
    return next((w for w in coded_warnings(plan) if w.code == code), None)
