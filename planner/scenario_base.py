"""What every scenario shares: the model, the GPUs and the layout checks both kinds run.

Everything that enters Headroom (widgets, share links, CSV rows, CLI JSON) becomes one of these.
Layout rules that make a plan impossible are validation errors with a sentence; things that are
possible but risky become plan warnings later.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import PlanningError
from planner.hardware.catalog import Accelerator, resolve_accelerator
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import resolve_model
from planner.physics.energy import DEFAULT_CARBON_KG_PER_KWH, DEFAULT_ELECTRICITY_USD_PER_KWH, DEFAULT_PUE

# A model is a catalog id, a size id ("dense-70b", "moe-400b") or an inline config.json object.
ModelRef = Annotated[str, Field(min_length=1, max_length=200)] | dict[str, Any]
# A GPU is a catalog id or an inline accelerator spec.
GpuRef = Annotated[str, Field(min_length=1, max_length=64)] | dict[str, Any]

MAX_GPUS = 100_000
MAX_TOKENS = 10_000_000

Model = TypeVar("Model", bound=BaseModel)


def revised(model: Model, /, **changes: Any) -> Model:
    """A what-if: `model` with `changes`, validated as every input is (`model_copy(update=...)` skips validation
    and keeps whatever was cached from the fields it replaces). The other fields pass as they are (nested models
    stay the instances already validated); computed fields are derived again; private state (an inference plan's
    deferred equations) is carried over, as model_copy carries it."""
    cls = type(model)
    unknown = sorted(changes.keys() - cls.model_fields.keys())
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    fields = {name: getattr(model, name) for name in cls.model_fields}
    result = cls.model_validate({**fields, **changes})
    if model.__pydantic_private__:
        object.__setattr__(result, "__pydantic_private__", dict(model.__pydantic_private__))
    return result


class ScenarioBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelRef = "llama-3.1-70b"
    gpu: GpuRef = "h100-sxm"
    num_gpus: int = Field(
        default=4,
        ge=1,
        le=MAX_GPUS,
        description="GPUs in the deployment, a multiple of tensor x pipeline parallel; every extra group is "
        "another replica",
    )
    tensor_parallel: int = Field(
        default=4,
        ge=1,
        le=1024,
        description="tensor parallelism: every layer is split over this many GPUs (two all-reduces per layer); "
        "must divide the attention heads",
    )
    pipeline_parallel: int = Field(
        default=1, ge=1, le=1024, description="pipeline parallelism: the layers are split into this many stages"
    )
    usd_per_gpu_hour: float | None = Field(
        default=None, ge=0, le=10_000, description="overrides the catalog's reference $/GPU-hour"
    )
    pue: float = Field(
        default=DEFAULT_PUE,
        ge=1.0,
        le=3.0,
        description="power usage effectiveness of the site: its total power over the IT power (1.0 counts the "
        "GPUs alone; industry average ~1.56, hyperscale ~1.1)",
    )
    electricity_usd_per_kwh: float = Field(
        default=DEFAULT_ELECTRICITY_USD_PER_KWH,
        ge=0,
        le=10,
        description="price of a kWh; default the 2023 US commercial average (EIA), 0.127",
    )
    carbon_kg_per_kwh: float = Field(
        default=DEFAULT_CARBON_KG_PER_KWH,
        ge=0,
        le=2,
        description="grid carbon intensity, kg CO2e per kWh; default the 2022 US average (EIA), 0.39",
    )
    label: str = Field(default="", max_length=200, description="a short name for this plan in Compare and Review")
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
