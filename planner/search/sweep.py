"""The engine's formulas over numpy arrays of scenarios (DESIGN rule 4).

`inference_grid` builds the cartesian product of the knobs a capacity search turns (GPU type, GPU
count, TP/PP/EP, weight/KV precision, concurrency) for one model and workload; `evaluate_inference`
runs `planner.inference.inference_metrics` — the same function `plan()` uses — once over all rows.
Rows that `InferenceScenario` would reject are flagged (`valid` False, `invalid_reason`), never planned.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from pydantic import ValidationError

from planner.dtypes import (
    BYTES_PER_ELEMENT,
    DTYPES,
    high_precision_dtype,
    kv_bytes_per_element,
    weight_bytes_per_element,
)
from planner.errors import PlanningError, explain
from planner.hardware.catalog import resolve_accelerator
from planner.inference.plan import HardwareInputs, inference_metrics
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.training.metrics import TrainingHardware, training_metrics
from planner.training.plan import hardware_inputs, scenario_inputs

GRID_COLUMNS = (
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "pipeline_parallel",
    "expert_parallel",
    "weight_dtype",
    "kv_cache_dtype",
    "concurrency",
)
MAX_GRID_ROWS = 2_000_000

OUTPUT_COLUMNS = (
    "weights_bytes",
    "kv_cache_bytes",
    "activations_bytes",
    "logits_bytes",
    "runtime_overhead_bytes",
    "total_bytes",
    "budget_bytes",
    "fits",
    "max_concurrency",
    "ttft_seconds",
    "tpot_seconds",
    "decode_step_seconds",
    "e2e_latency_seconds",
    "output_tokens_per_second",
    "output_tokens_per_second_per_gpu",
    "requests_per_second",
    "usd_per_hour",
    "usd_per_million_output_tokens",
)


def inference_grid(
    base: InferenceScenario,
    *,
    gpus: Sequence[str] | None = None,
    num_gpus: Sequence[int] | None = None,
    tensor_parallel: Sequence[int] | None = None,
    pipeline_parallel: Sequence[int] | None = None,
    expert_parallel: Sequence[int] | None = None,
    weight_dtypes: Sequence[str] | None = None,
    kv_cache_dtypes: Sequence[str] | None = None,
    concurrency: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Cartesian product of the given values; a knob left as None keeps the base scenario's value."""
    axes = {
        "gpu": gpus or [base.gpu_id()],
        "num_gpus": num_gpus or [base.num_gpus],
        "tensor_parallel": tensor_parallel or [base.tensor_parallel],
        "pipeline_parallel": pipeline_parallel or [base.pipeline_parallel],
        "expert_parallel": expert_parallel or [base.expert_parallel],
        "weight_dtype": weight_dtypes or [base.weight_dtype],
        "kv_cache_dtype": kv_cache_dtypes or [base.kv_cache_dtype],
        "concurrency": concurrency or [base.concurrency],
    }
    return _product(axes)


def _invalid_reasons(arch, tp, pp, ep, num_gpus) -> np.ndarray:
    """The first rule each row breaks (empty string when valid); mirrors InferenceScenario's validation."""
    reasons = np.full(tp.shape, "", dtype=object)

    def mark(condition, text):
        fresh = condition & (reasons == "")
        reasons[fresh] = text

    mark(arch.num_attention_heads % tp != 0, "tensor_parallel does not divide the attention heads")
    if not arch.uses_mla:
        kv = arch.num_kv_heads
        mark((tp > kv) & (tp % kv != 0), "tensor_parallel exceeds the KV heads and is not a multiple of them")
        mark((tp < kv) & (kv % tp != 0), "tensor_parallel does not divide the KV heads")
    mark(pp > arch.num_layers, "more pipeline stages than layers")
    mark(num_gpus % (tp * pp) != 0, "num_gpus is not a multiple of tensor_parallel x pipeline_parallel")
    if arch.is_moe:
        mark((ep > 1) & (arch.num_experts % ep != 0), "expert_parallel does not divide the experts")
        per_stage = num_gpus // pp
        ok = (tp % ep == 0) | ((ep % tp == 0) & (per_stage % ep == 0))
        mark((ep > 1) & ~ok, "expert_parallel does not fit the tensor-parallel group or the stage's GPUs")
    else:
        mark(ep > 1, "expert_parallel needs a mixture-of-experts model")
    return reasons


def evaluate_inference(base: InferenceScenario, grid: pd.DataFrame, calibration=None) -> pd.DataFrame:
    """Plan every row of `grid` (columns as GRID_COLUMNS; missing ones come from `base`) in one pass.

    Returns the grid plus `valid`, `invalid_reason` and the OUTPUT_COLUMNS (NaN for invalid rows).
    """
    arch = base.architecture()
    counts = parameter_counts(arch)
    efficiency = calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    frame = grid.copy()
    for column in GRID_COLUMNS:
        if column not in frame:
            frame[column] = getattr(base, column) if column != "gpu" else base.gpu_id()
    tp = frame["tensor_parallel"].to_numpy(np.int64)
    pp = frame["pipeline_parallel"].to_numpy(np.int64)
    ep = frame["expert_parallel"].to_numpy(np.int64)
    gpus = frame["num_gpus"].to_numpy(np.int64)
    concurrency = frame["concurrency"].to_numpy(np.int64)
    if (tp < 1).any() or (pp < 1).any() or (ep < 1).any() or (gpus < 1).any() or (concurrency < 1).any():
        raise ValueError("grid values must be positive integers")
    weight_dtype = frame["weight_dtype"].to_numpy(object)
    kv_dtype = frame["kv_cache_dtype"].to_numpy(object)
    unknown = (set(weight_dtype) | set(kv_dtype)) - set(DTYPES)
    if unknown:
        raise ValueError(f"unknown dtype(s) {sorted(unknown)}")

    reasons = _invalid_reasons(arch, tp, pp, ep, gpus)
    valid = reasons == ""
    # Invalid rows get a harmless layout so the arithmetic stays finite; their outputs are blanked below.
    safe_tp, safe_pp, safe_ep = (np.where(valid, x, 1) for x in (tp, pp, ep))
    safe_gpus = np.where(valid, gpus, 1)

    hardware = _hardware_arrays(frame["gpu"].to_numpy(object), weight_dtype, base)
    linear_b = np.array([weight_bytes_per_element(d, base.weight_group_size) for d in weight_dtype])
    hp_b = np.array([BYTES_PER_ELEMENT[high_precision_dtype(d)] for d in weight_dtype])
    emb_b = linear_b if base.quantize_embeddings else hp_b
    kv_b = np.array([kv_bytes_per_element(d) for d in kv_dtype])
    act_b = np.where(weight_dtype == "fp32", 4.0, 2.0)

    metrics = inference_metrics(
        arch,
        counts,
        hardware,
        efficiency,
        tensor_parallel=safe_tp,
        pipeline_parallel=safe_pp,
        expert_parallel=safe_ep,
        num_gpus=safe_gpus,
        linear_bytes=linear_b,
        high_precision_bytes=hp_b,
        embedding_bytes=emb_b,
        kv_bytes=kv_b,
        activation_bytes=act_b,
        prompt_tokens=base.prompt_tokens,
        output_tokens=base.output_tokens,
        concurrency=concurrency,
        block_tokens=base.kv_block_tokens,
        memory_utilization=base.gpu_memory_utilization,
        prefill_chunk_tokens=base.prefill_chunk_tokens,
        prefix_cache_hit_rate=base.prefix_cache_hit_rate,
        honor_sliding_window=base.honor_sliding_window,
        runtime_overhead_correction_bytes=correction,
    )
    frame["valid"] = valid
    frame["invalid_reason"] = reasons
    return _fill_outputs(frame, metrics, OUTPUT_COLUMNS, valid)


def _hardware_arrays(gpu_ids: np.ndarray, weight_dtype: np.ndarray, base: InferenceScenario) -> HardwareInputs:
    """Per-row accelerator numbers, looked up once per distinct (GPU, dtype) pair."""

    def inputs(gpu_id, dtype):
        accel = _accelerator(base, gpu_id)
        price = base.usd_per_gpu_hour if base.usd_per_gpu_hour is not None else accel.reference_usd_per_hour
        return HardwareInputs.from_accelerator(accel, dtype, price)

    return _per_row(HardwareInputs, list(zip(gpu_ids, weight_dtype)), inputs)


def scenario_for_row(base: InferenceScenario, row: pd.Series | dict) -> InferenceScenario:
    """The full scenario behind one sweep row (validated), e.g. to open a frontier point as a plan."""
    return _row_scenario(base, row, GRID_COLUMNS)


def divisors(n: int, limit: int | None = None) -> list[int]:
    values = [d for d in range(1, n + 1) if n % d == 0]
    return [d for d in values if limit is None or d <= limit]


def powers_of_two(upto: int, start: int = 1) -> list[int]:
    values, v = [], start
    while v <= upto:
        values.append(v)
        v *= 2
    return values


def unique(values: Iterable) -> list:
    return list(dict.fromkeys(values))


# ---------------------------------------------------------------------------------------------
# training

TRAINING_GRID_COLUMNS = (
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "pipeline_parallel",
    "zero_stage",
    "activation_checkpointing",
    "micro_batch_size",
)
TRAINING_OUTPUT_COLUMNS = (
    "total_bytes",
    "capacity_bytes",
    "fits",
    "step_seconds",
    "tokens_per_second",
    "mfu",
    "time_to_train_seconds",
    "usd_per_hour",
    "usd_total",
)
_RECOMPUTE = {"none": 0, "selective": 1, "full": 2}


def training_grid(
    base,
    *,
    gpus: Sequence[str] | None = None,
    num_gpus: Sequence[int] | None = None,
    tensor_parallel: Sequence[int] | None = None,
    pipeline_parallel: Sequence[int] | None = None,
    zero_stages: Sequence[int] | None = None,
    checkpointing: Sequence[str] | None = None,
    micro_batch_sizes: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Cartesian product of training knobs (layout x ZeRO x recompute x micro-batch); None keeps the base."""
    axes = {
        "gpu": gpus or [base.gpu_id()],
        "num_gpus": num_gpus or [base.num_gpus],
        "tensor_parallel": tensor_parallel or [base.tensor_parallel],
        "pipeline_parallel": pipeline_parallel or [base.pipeline_parallel],
        "zero_stage": zero_stages if zero_stages is not None else [base.zero_stage],
        "activation_checkpointing": checkpointing or [base.activation_checkpointing],
        "micro_batch_size": micro_batch_sizes or [base.micro_batch_size],
    }
    return _product(axes)


def training_scenario_for_row(base, row: pd.Series | dict):
    """The full, validated training scenario behind one grid row (data parallelism follows the GPU count)."""
    return _row_scenario(base, row, TRAINING_GRID_COLUMNS, data_parallel=None)


def evaluate_training(base, grid: pd.DataFrame, calibration=None) -> pd.DataFrame:
    """Plan every row of a training grid in one pass of `training_metrics` (the function plan() uses).

    Validity comes from the scenario's own validation, run once per distinct layout (recompute level
    never changes validity), so the sweep cannot disagree with plan() about what is possible.
    """

    frame = grid.copy()
    for column in TRAINING_GRID_COLUMNS:
        if column not in frame:
            frame[column] = getattr(base, column) if column != "gpu" else base.gpu_id()
    layout_columns = [c for c in TRAINING_GRID_COLUMNS if c != "activation_checkpointing"]
    reasons: dict[tuple, str] = {}
    dp_of: dict[tuple, int] = {}
    for key, _rows in frame.groupby(layout_columns, sort=False):
        row = dict(zip(layout_columns, key), activation_checkpointing=base.activation_checkpointing)
        try:
            scenario = training_scenario_for_row(base, row)
            reasons[key], dp_of[key] = "", scenario.dp
        except (ValidationError, PlanningError) as exc:
            reasons[key], dp_of[key] = explain(exc), 1
    keys = list(frame[layout_columns].itertuples(index=False, name=None))
    frame["invalid_reason"] = [reasons[k] for k in keys]
    valid = (frame["invalid_reason"] == "").to_numpy()
    frame["valid"] = valid
    frame["data_parallel"] = [dp_of[k] for k in keys]

    arch = base.architecture()
    counts = parameter_counts(arch)
    efficiency = calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    inputs = scenario_inputs(base, correction)
    tp = np.where(valid, frame["tensor_parallel"].to_numpy(np.int64), 1)
    pp = np.where(valid, frame["pipeline_parallel"].to_numpy(np.int64), 1)
    inputs.update(
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=frame["data_parallel"].to_numpy(np.int64),
        zero_stage=np.where(valid, frame["zero_stage"].to_numpy(np.int64), 0),
        recompute=np.array([_RECOMPUTE[c] for c in frame["activation_checkpointing"]]),
        micro_batch_size=np.where(valid, frame["micro_batch_size"].to_numpy(np.int64), 1),
        sequence_parallel=base.sequence_parallel & (tp > 1),
        num_gpus=np.where(valid, frame["num_gpus"].to_numpy(np.int64), tp * pp),
    )
    if base.distributed_optimizer:
        inputs["zero_stage"] = np.maximum(inputs["zero_stage"], 1)
    hardware = _training_hardware_arrays(frame["gpu"].to_numpy(object), base)
    metrics = training_metrics(arch, counts, hardware, efficiency, training_tokens=base.training_tokens, **inputs)
    return _fill_outputs(frame, {**metrics["memory"], **metrics}, TRAINING_OUTPUT_COLUMNS, valid)


def _training_hardware_arrays(gpu_ids: np.ndarray, base):

    return _per_row(
        TrainingHardware, [(g,) for g in gpu_ids], lambda gpu_id: hardware_inputs(base, _accelerator(base, gpu_id))
    )


# ---------------------------------------------------------------------------------------------
# shared by both kinds


def _product(axes: dict[str, list]) -> pd.DataFrame:
    size = int(np.prod([len(v) for v in axes.values()]))
    if size > MAX_GRID_ROWS:
        raise ValueError(f"the grid has {size:,} configurations; the limit is {MAX_GRID_ROWS:,}")
    return pd.DataFrame(list(itertools.product(*axes.values())), columns=list(axes))


def _accelerator(base, gpu_id: str):
    return resolve_accelerator(base.gpu if gpu_id == "custom" else gpu_id)


def _per_row(cls, keys: list[tuple], make):
    """A hardware-inputs dataclass of per-row arrays, building `make(*key)` once per distinct key."""
    distinct = list(dict.fromkeys(keys))
    position = {key: i for i, key in enumerate(distinct)}
    index = np.fromiter((position[key] for key in keys), dtype=np.int64, count=len(keys))
    built = [make(*key) for key in distinct]
    fields = {name: np.array([float(getattr(b, name)) for b in built])[index] for name in cls.__dataclass_fields__}
    fields["is_accelerator"] = fields["is_accelerator"].astype(bool)
    return cls(**fields)


def _row_scenario(base, row, columns, **overrides):
    """The validated scenario behind one grid row (a 'custom' GPU keeps the base's inline spec)."""
    data = base.model_dump()
    for column in columns:
        value = row[column]
        if column == "gpu" and value == "custom":
            continue
        data[column] = value.item() if hasattr(value, "item") else value
    data.update(overrides)
    return type(base).model_validate(data)


def _fill_outputs(frame: pd.DataFrame, metrics: dict, columns, valid: np.ndarray) -> pd.DataFrame:
    """Output columns from the metrics; invalid rows get NaN (and never 'fits')."""
    n = len(frame)
    for column in columns:
        values = np.broadcast_to(np.asarray(metrics[column]), (n,))
        frame[column] = values & valid if column == "fits" else np.where(valid, values.astype(float), np.nan)
    return frame
