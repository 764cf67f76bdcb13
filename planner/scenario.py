"""Scenarios: the frozen, validated description of one workload on one cluster.

Everything that enters Headroom (widgets, share links, CSV rows, CLI JSON) becomes one of these.
Layout rules that make a plan impossible are validation errors with a sentence; things that are
possible but risky become plan warnings later.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from planner.architecture import ModelArchitecture
from planner.catalog import Accelerator, resolve_accelerator, resolve_model
from planner.dtypes import DType
from planner.errors import PlanningError

# A model is a catalog id, a size id ("dense-70b", "moe-400b") or an inline config.json object.
ModelRef = Union[Annotated[str, Field(min_length=1, max_length=200)], dict[str, Any]]
# A GPU is a catalog id or an inline accelerator spec.
GpuRef = Union[Annotated[str, Field(min_length=1, max_length=64)], dict[str, Any]]

MAX_GPUS = 100_000
MAX_TOKENS = 10_000_000


class _ScenarioBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelRef = "llama-3.1-70b"
    gpu: GpuRef = "h100-sxm"
    num_gpus: int = Field(default=4, ge=1, le=MAX_GPUS)
    tensor_parallel: int = Field(default=4, ge=1, le=1024)
    pipeline_parallel: int = Field(default=1, ge=1, le=1024)
    usd_per_gpu_hour: float | None = Field(
        default=None, ge=0, le=10_000, description="overrides the catalog's reference $/GPU-hour"
    )
    label: str = Field(default="", max_length=200)
    decision: str = Field(default="", max_length=2000, description="which trade-off was chosen and why")

    def architecture(self) -> ModelArchitecture:
        return resolve_model(self.model)

    def accelerator(self) -> Accelerator:
        return resolve_accelerator(self.gpu)

    def model_id(self) -> str:
        return self.model if isinstance(self.model, str) else "custom"

    def gpu_id(self) -> str:
        return self.gpu if isinstance(self.gpu, str) else "custom"

    def _check_tensor_parallel(self, arch: ModelArchitecture) -> None:
        tp = self.tensor_parallel
        if arch.num_attention_heads % tp:
            raise PlanningError(
                f"tensor_parallel={tp} does not divide the model's {arch.num_attention_heads} attention heads"
            )
        if not arch.uses_mla and tp > arch.num_kv_heads and tp % arch.num_kv_heads:
            raise PlanningError(
                f"tensor_parallel={tp} exceeds the {arch.num_kv_heads} KV heads and is not a multiple of them, "
                "so KV heads cannot be replicated evenly"
            )
        if not arch.uses_mla and tp < arch.num_kv_heads and arch.num_kv_heads % tp:
            raise PlanningError(f"tensor_parallel={tp} does not divide the model's {arch.num_kv_heads} KV heads")

    def _check_pipeline(self, arch: ModelArchitecture) -> None:
        if self.pipeline_parallel > arch.num_layers:
            raise PlanningError(
                f"pipeline_parallel={self.pipeline_parallel} is more stages than the model's {arch.num_layers} layers"
            )


class InferenceScenario(_ScenarioBase):
    """Serving one model: `concurrency` sequences of `prompt_tokens` in and `output_tokens` out."""

    kind: Literal["inference"] = "inference"
    expert_parallel: int = Field(default=1, ge=1, le=65_536)
    weight_dtype: DType = "bf16"
    kv_cache_dtype: DType = "bf16"
    weight_group_size: int = Field(default=128, ge=16, le=4096, description="int4 quantization group")
    quantize_embeddings: bool = Field(default=False, description="also quantize embedding and lm_head")
    prompt_tokens: int = Field(default=2048, ge=1, le=MAX_TOKENS)
    output_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS)
    concurrency: int = Field(default=64, ge=1, le=MAX_TOKENS, description="sequences in flight, whole deployment")
    kv_block_tokens: int = Field(default=16, ge=1, le=4096, description="paged KV block size")
    gpu_memory_utilization: float = Field(default=0.90, gt=0.05, le=1.0, description="engine's share of GPU memory")
    prefill_chunk_tokens: int = Field(default=8192, ge=16, le=MAX_TOKENS, description="max tokens per prefill step")
    honor_sliding_window: bool = True
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0.0, le=1.0, description="share of prompt tokens already cached")
    target_requests_per_second: float | None = Field(default=None, gt=0, le=1e7)

    @model_validator(mode="after")
    def _valid_layout(self) -> "InferenceScenario":
        arch = self.architecture()
        self.accelerator()
        self._check_tensor_parallel(arch)
        self._check_pipeline(arch)
        per_replica = self.tensor_parallel * self.pipeline_parallel
        if self.num_gpus % per_replica:
            raise PlanningError(
                f"num_gpus={self.num_gpus} is not a multiple of tensor_parallel x pipeline_parallel = {per_replica}; "
                f"use {per_replica * max(1, self.num_gpus // per_replica)} GPUs or change the layout"
            )
        ep = self.expert_parallel
        if ep > 1:
            if not arch.is_moe:
                raise PlanningError(f"expert_parallel={ep} needs a mixture-of-experts model; {arch.name} is dense")
            if arch.num_experts % ep:
                raise PlanningError(f"expert_parallel={ep} does not divide the model's {arch.num_experts} experts")
            gpus_per_stage = self.num_gpus // self.pipeline_parallel
            tp = self.tensor_parallel
            if not (tp % ep == 0 or (ep % tp == 0 and gpus_per_stage % ep == 0)):
                raise PlanningError(
                    f"expert_parallel={ep} must divide tensor_parallel={tp}, or be a multiple of it that divides the "
                    f"{gpus_per_stage} GPUs of a pipeline stage across replicas"
                )
        return self

    @property
    def replicas(self) -> int:
        return self.num_gpus // (self.tensor_parallel * self.pipeline_parallel)

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


def _scenario_union():
    from planner.training.scenario import TrainingScenario

    return Annotated[Union[InferenceScenario, TrainingScenario], Field(discriminator="kind")]


def scenario_adapter() -> TypeAdapter:
    """Validates either kind of scenario from a dict (the `kind` key picks the schema)."""
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = TypeAdapter(_scenario_union())
    return _ADAPTER


_ADAPTER: TypeAdapter | None = None


def parse_scenario(data: Any):
    """A Scenario from a dict; missing `kind` means inference. Raises ValidationError/PlanningError."""
    if isinstance(data, dict) and "kind" not in data:
        data = {**data, "kind": "inference"}
    return scenario_adapter().validate_python(data)
