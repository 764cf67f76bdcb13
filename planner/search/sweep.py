"""The engine's formulas over numpy arrays of scenarios (DESIGN rule 4).

`inference_grid` builds the cartesian product of the knobs a capacity search turns (GPU type, GPU
count, TP/PP/EP, weight/KV precision, concurrency) for one model and workload; `evaluate_inference`
runs `planner.inference.metrics.inference_metrics` — the same function `plan()` uses — once over all rows.
Rows that `InferenceScenario`'s own validator rejects (run once per distinct layout) are flagged
(`valid` False, `invalid_reason`), never planned.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
from pydantic import ValidationError

from planner.arrays import Number
from planner.calibration_record import CalibrationRecord
from planner.dtypes import DTYPES, KV_DTYPES
from planner.errors import PlanningError, explain
from planner.hardware.catalog import DEFAULT_GPUS_PER_NODE, resolve_accelerator
from planner.inference.inputs import engine_concurrency
from planner.inference.metrics import SWEEP_COLUMNS, inference_metrics, sweep_values
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import frame_hardware, frame_inputs
from planner.inference.speculative import draft_for
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import DEFAULT_EFFICIENCY, DEFAULT_EFFICIENCY_VALUES, EfficiencyValues
from planner.plan import calibration_for_gpu, stack_mismatch
from planner.training.inputs import RECOMPUTE_LEVEL, TrainingHardware, training_hardware, training_inputs
from planner.training.metrics import training_metrics

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

# The sweep frame's outputs: the declared columns of `planner.inference.metrics.INFERENCE_COLUMNS` a sweep carries.
OUTPUT_COLUMNS = SWEEP_COLUMNS


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


# The columns the scenario's validator judges: each distinct combination is validated once.
LAYOUT_COLUMNS = ("gpu", "num_gpus", "tensor_parallel", "pipeline_parallel", "expert_parallel")


def _layout_verdicts(base: InferenceScenario, frame: pd.DataFrame) -> np.ndarray:
    """Per row, the sentence `InferenceScenario` rejects its layout with ('' when valid).

    The scenario's own validator runs once per distinct LAYOUT_COLUMNS combination (the base scenario
    fills in everything else), so the sweep cannot disagree with plan() about what is possible.
    """
    layouts, row_layout = _distinct(*(frame[column] for column in LAYOUT_COLUMNS))
    data = base.model_dump()
    verdicts = np.empty(len(layouts), dtype=object)
    for index, layout in enumerate(layouts):
        row = {c: v.item() if hasattr(v, "item") else v for c, v in zip(LAYOUT_COLUMNS, layout)}
        if row["gpu"] == "custom":  # the base's inline spec
            row["gpu"] = data["gpu"]
        try:
            InferenceScenario.model_validate({**data, **row})
            verdicts[index] = ""
        except (ValidationError, PlanningError) as exc:
            verdicts[index] = explain(exc)
    return verdicts[row_layout]


def evaluate_inference(
    base: InferenceScenario, grid: pd.DataFrame, calibration: CalibrationRecord | None = None
) -> pd.DataFrame:
    """Plan every row of `grid` (columns as GRID_COLUMNS; missing ones come from `base`) in one pass.

    Returns the grid plus `valid`, `invalid_reason` and the OUTPUT_COLUMNS (NaN for invalid rows).
    """
    arch = base.architecture()
    frame = grid.copy()
    for column in GRID_COLUMNS:
        if column not in frame:
            frame[column] = getattr(base, column) if column != "gpu" else base.gpu_id()
    efficiency, correction = calibration_per_row(frame["gpu"], calibration, base)
    layout = {c: frame[c].to_numpy(np.int64) for c in LAYOUT_COLUMNS[1:] + ("concurrency",)}
    if any((values < 1).any() for values in layout.values()):
        raise ValueError("grid values must be positive integers")
    weight_dtype, kv_dtype = frame["weight_dtype"], frame["kv_cache_dtype"]
    unknown = (set(weight_dtype.unique()) - set(DTYPES)) | (set(kv_dtype.unique()) - set(KV_DTYPES))
    if unknown:
        raise ValueError(
            f"unknown dtype(s) {sorted(unknown)} (weights: {', '.join(DTYPES)}; KV: {', '.join(KV_DTYPES)})"
        )

    reasons = _layout_verdicts(base, frame)
    valid = reasons == ""
    # Invalid rows get a harmless layout so the arithmetic stays finite; their outputs are blanked below.
    formats, format_rows = _distinct(weight_dtype, kv_dtype)
    inputs = frame_inputs(
        base,
        {
            **{c: np.where(valid, layout[c], 1) for c in ("tensor_parallel", "pipeline_parallel", "expert_parallel")},
            "num_gpus": np.where(valid, layout["num_gpus"], 1),
            "concurrency": np.asarray(
                engine_concurrency(
                    layout["concurrency"],
                    np.where(valid, layout["num_gpus"], 1),
                    np.where(valid, layout["tensor_parallel"] * layout["pipeline_parallel"], 1),
                    base.traffic.max_num_seqs if base.traffic is not None else None,
                )
            ),
        },
        formats,
        format_rows,
        correction,
        _host_links(base, frame["gpu"]) if base.lora is not None else None,
    )
    devices, device_rows = _distinct(frame["gpu"], weight_dtype, kv_dtype)
    hardware = frame_hardware(
        base, arch, [(_accelerator(base, g), w, kv) for g, w, kv in devices], device_rows, calibration
    )
    metrics = inference_metrics(
        arch, parameter_counts(arch), hardware, efficiency, inputs, draft_for(arch, base.speculative)
    )
    frame["valid"] = valid
    frame["invalid_reason"] = reasons
    return _fill_outputs(frame, sweep_values(metrics), OUTPUT_COLUMNS, valid)


def _host_links(base: InferenceScenario, gpus: pd.Series) -> np.ndarray:
    """Each row's GPU host link (bytes/s): what filling a LoRA slot from host memory crosses."""
    kinds, rows = _distinct(gpus)
    return np.array([_accelerator(base, g).host_link_bandwidth_bytes_per_second for (g,) in kinds])[rows]


def calibration_per_row(
    gpu_ids: pd.Series, calibration: CalibrationRecord | None, base=None
) -> tuple[EfficiencyValues, Number]:
    """Efficiencies and runtime-memory correction per row: the calibration's on rows of the GPUs `planner.plan`
    lets it price (`calibration_for_gpu`: the GPU it measured, every GPU once mapped), the documented defaults
    elsewhere, so a search over several GPU types never prices one GPU with another's profile. A benchmark
    calibration of another serving stack than `base`'s (runtime, model family: every row shares them) prices no
    row unless mapped (`planner.plan.stack_mismatch`, as `plan` refuses it)."""
    if calibration is not None and base is not None and not calibration.mapped_to_any_gpu:
        if stack_mismatch(base, calibration) is not None:
            calibration = None
    if calibration is None:
        return DEFAULT_EFFICIENCY_VALUES, 0.0
    distinct, rows = _distinct(gpu_ids)
    applies = np.array([calibration_for_gpu(g, calibration) is not None for (g,) in distinct], dtype=bool)[rows]
    if applies.all():
        return EfficiencyValues.of(calibration.efficiency), calibration.runtime_overhead_correction_bytes
    measured = calibration.efficiency
    efficiency = EfficiencyValues.per_row(
        applies, measured, DEFAULT_EFFICIENCY, f"{measured.source} on its GPU, defaults elsewhere"
    )
    return efficiency, np.where(applies, calibration.runtime_overhead_correction_bytes, 0.0)


def _distinct(*columns: pd.Series) -> tuple[list[tuple], np.ndarray]:
    """The distinct combinations of the columns' values (in order of first appearance) and, per row, the
    index of its combination: lets per-combination work (validation, catalog look-ups) run once each."""
    factorized = [pd.factorize(column) for column in columns]
    codes = np.zeros(len(columns[0]), dtype=np.int64)
    for column_codes, uniques in factorized:
        # Re-factorizing keeps the combined code below the row count (no overflow for any grid).
        codes = pd.factorize(codes * len(uniques) + column_codes)[0]
    _, first_rows = np.unique(codes, return_index=True)
    combinations = [tuple(uniques[column_codes[row]] for column_codes, uniques in factorized) for row in first_rows]
    return combinations, codes


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
# Layout columns a training grid may carry beyond TRAINING_GRID_COLUMNS (absent: the base scenario's value).
OPTIONAL_TRAINING_COLUMNS = ("context_parallel", "expert_parallel", "virtual_pipeline_stages")
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
    """The full, validated training scenario behind one grid row (data parallelism follows the GPU count; the
    OPTIONAL_TRAINING_COLUMNS the row carries replace the base's)."""
    columns = TRAINING_GRID_COLUMNS + tuple(c for c in OPTIONAL_TRAINING_COLUMNS if c in row)
    return _row_scenario(base, row, columns, data_parallel=None)


def evaluate_training(base, grid: pd.DataFrame, calibration=None) -> pd.DataFrame:
    """Plan every row of a training grid in one pass of `training_metrics` (the function plan() uses). The grid
    may also carry OPTIONAL_TRAINING_COLUMNS (context and expert parallelism, interleaved stages).

    Validity comes from the scenario's own validation, run once per distinct layout (recompute level
    never changes validity), so the sweep cannot disagree with plan() about what is possible.
    """

    frame = grid.copy()
    for column in TRAINING_GRID_COLUMNS:
        if column not in frame:
            frame[column] = getattr(base, column) if column != "gpu" else base.gpu_id()
    layout_columns = [c for c in TRAINING_GRID_COLUMNS if c != "activation_checkpointing"]
    layout_columns += [c for c in OPTIONAL_TRAINING_COLUMNS if c in frame]
    reasons: dict[tuple, str] = {}
    dp_of: dict[tuple, int] = {}
    for key in frame[layout_columns].drop_duplicates().itertuples(index=False, name=None):
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
    efficiency, correction = calibration_per_row(frame["gpu"], calibration, base)
    inputs = training_inputs(base, correction)
    tp = np.where(valid, frame["tensor_parallel"].to_numpy(np.int64), 1)
    pp = np.where(valid, frame["pipeline_parallel"].to_numpy(np.int64), 1)
    zero = np.where(valid, frame["zero_stage"].to_numpy(np.int64), 0)
    optional = {
        c: np.where(valid, frame[c].to_numpy(np.int64), 1) if c in frame else getattr(base, c)
        for c in OPTIONAL_TRAINING_COLUMNS
    }
    inputs = replace(
        inputs,
        layout=replace(
            inputs.layout,
            tensor_parallel=tp,
            pipeline_parallel=pp,
            data_parallel=frame["data_parallel"].to_numpy(np.int64),
            context_parallel=optional["context_parallel"],
            expert_parallel=optional["expert_parallel"],
            virtual_stages=optional["virtual_pipeline_stages"],
            sequence_parallel=base.sequence_parallel & (tp > 1),
            num_gpus=np.where(valid, frame["num_gpus"].to_numpy(np.int64), tp * pp),
        ),
        recipe=replace(
            inputs.recipe,
            zero_stage=np.maximum(zero, 1) if base.distributed_optimizer else zero,
            recompute=np.array([RECOMPUTE_LEVEL[c] for c in frame["activation_checkpointing"]]),
        ),
        batch=replace(inputs.batch, micro_batch_size=np.where(valid, frame["micro_batch_size"].to_numpy(np.int64), 1)),
    )
    hardware = _training_hardware_arrays(frame["gpu"].to_numpy(object), base, calibration)
    m = training_metrics(arch, counts, hardware, efficiency, inputs)
    outputs = dict(
        total_bytes=m.memory.total_bytes,
        capacity_bytes=m.memory.capacity_bytes,
        fits=m.memory.fits,
        step_seconds=m.step_seconds,
        tokens_per_second=m.throughput.tokens_per_second,
        mfu=m.throughput.mfu,
        time_to_train_seconds=m.throughput.time_to_train_seconds,
        usd_per_hour=m.spend.usd_per_hour,
        usd_total=m.spend.usd_total,
    )
    return _fill_outputs(frame, outputs, TRAINING_OUTPUT_COLUMNS, valid)


def _training_hardware_arrays(gpu_ids: np.ndarray, base, calibration=None) -> TrainingHardware:
    return _per_row(
        TrainingHardware,
        [(g,) for g in gpu_ids],
        lambda gpu_id: training_hardware(base, _accelerator(base, gpu_id), calibration),
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


def tensor_parallel_limit(base, gpu_ids: Sequence[str] | None, floor: int = DEFAULT_GPUS_PER_NODE) -> int:
    """The largest tensor-parallel degree a search tries: the widest NVLink (scale-up) domain among the GPU
    types searched (8 on HGX, 72 in an NVL72 rack), and at least `floor` (TP over PCIe stays searchable)."""
    domains = [floor]
    for gpu_id in gpu_ids or [base.gpu_id()]:
        try:
            domains.append(_accelerator(base, gpu_id).gpus_per_node)
        except PlanningError:  # an unknown GPU: the sweep marks its rows invalid with the reason
            continue
    return max(domains)


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
