"""One declared mapping from a plan's metrics to flat records (`planner.inference.metrics.INFERENCE_COLUMNS`):
the plan JSON, its CSV columns, the sweep frame and the CLI's search columns all read it; and the plain
efficiency view the formulas take (`EfficiencyValues`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner import plan
from planner.export import plan_row
from planner.inference.inputs import InferenceInputs
from planner.inference.metrics import (
    HEADLINE_COLUMNS,
    INFERENCE_COLUMNS,
    PHASE_COLUMNS,
    SWEEP_COLUMNS,
    inference_metrics,
)
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import frame_hardware, frame_inputs, hardware_inputs, scenario_inputs
from planner.physics.efficiency import (
    DEFAULT_EFFICIENCY,
    DEFAULT_EFFICIENCY_VALUES,
    NUMERIC_EFFICIENCY_FIELDS,
    Efficiency,
    EfficiencyValues,
)
from planner.results import PhaseRoofline
from planner.search.sweep import OUTPUT_COLUMNS, evaluate_inference, inference_grid

SCENARIOS = [
    InferenceScenario(
        model="llama-3.1-8b", num_gpus=2, tensor_parallel=1, concurrency=24, target_requests_per_second=3
    ),
    InferenceScenario(model="mixtral-8x7b", gpu="h200", num_gpus=4, tensor_parallel=2, expert_parallel=2),
]


def _dig(data: dict, path: str):
    for part in path.split("."):
        data = data[part]
    return data


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.model_id())
def test_every_declared_column_is_the_plan_field_at_its_path_and_its_csv_column(scenario):
    result = plan(scenario)
    i = scenario_inputs(scenario)
    m = inference_metrics(i.arch, i.counts, i.hw, i.efficiency, i.inputs, i.draft)
    data = result.model_dump(mode="json")
    row = plan_row(result)
    for column in INFERENCE_COLUMNS:
        value = _dig(data, column.path)
        assert value == column.kind(column.read(m)), column.name
        assert row[column.path] == value, column.path  # the CSV column is the path
        assert column.name == column.field  # the flat name is the record field name
    for phase, step in (("prefill", m.prefill), ("decode", m.decode)):
        for column in PHASE_COLUMNS:
            assert data["performance"][phase][column.path] == float(column.read(step))


def test_phase_columns_cover_the_phase_record():
    computed = set(PhaseRoofline.model_computed_fields)
    assert {c.path for c in PHASE_COLUMNS} == set(PhaseRoofline.model_fields) - {"phase"} - computed


def test_the_sweep_frame_and_search_columns_come_from_the_declaration():
    assert OUTPUT_COLUMNS == SWEEP_COLUMNS == tuple(c.name for c in INFERENCE_COLUMNS if c.sweep)
    assert all(c.name in SWEEP_COLUMNS for c in HEADLINE_COLUMNS)
    base = SCENARIOS[0]
    frame = evaluate_inference(base, inference_grid(base, concurrency=[8, 24], kv_cache_dtypes=["bf16", "fp8"]))
    for _, row in frame.iterrows():
        scenario = InferenceScenario.model_validate(
            {**base.model_dump(), "concurrency": int(row.concurrency), "kv_cache_dtype": row.kv_cache_dtype}
        )
        data = plan(scenario).model_dump(mode="json")
        for column in INFERENCE_COLUMNS:
            if column.sweep:
                assert row[column.name] == _dig(data, column.path), column.name


def test_efficiency_values_carry_every_field_of_the_validated_model():
    assert set(NUMERIC_EFFICIENCY_FIELDS) | {"source"} == set(Efficiency.model_fields)
    assert dataclasses.asdict(DEFAULT_EFFICIENCY_VALUES) == DEFAULT_EFFICIENCY.model_dump()
    assert EfficiencyValues.of(Efficiency()) is DEFAULT_EFFICIENCY_VALUES  # built once per distinct record
    assert EfficiencyValues.of(DEFAULT_EFFICIENCY_VALUES) is DEFAULT_EFFICIENCY_VALUES
    assert scenario_inputs(SCENARIOS[0]).efficiency is DEFAULT_EFFICIENCY_VALUES


def test_efficiency_values_per_row_take_the_measured_value_where_it_applies():
    measured = Efficiency(prefill_compute=0.5, source="measured")
    values = EfficiencyValues.per_row(np.array([True, False]), measured, DEFAULT_EFFICIENCY, "mixed")
    assert list(values.prefill_compute) == [0.5, DEFAULT_EFFICIENCY.prefill_compute]
    assert list(values.decode_compute) == [DEFAULT_EFFICIENCY.decode_compute] * 2
    assert values.source == "mixed"


def test_frame_inputs_match_each_rows_own_scenario():
    base = InferenceScenario(model="llama-3.1-8b", weight_group_size=64, quantize_embeddings=True)
    formats = [("bf16", "bf16"), ("int4", "fp8"), ("fp32", "bf16"), ("nvfp4", "nvfp4")]
    rows = np.array([0, 1, 2, 3, 1])
    layout = {"tensor_parallel": np.array([1, 2, 1, 1, 2]), "concurrency": np.array([1, 2, 3, 4, 5])}
    x = frame_inputs(base, layout, formats, rows)
    devices = [(base.accelerator(), w, kv) for w, kv in formats]
    hw = frame_hardware(base, base.architecture(), devices, rows)
    for r, f in enumerate(rows):
        weights, kv = formats[f]
        one = InferenceScenario.model_validate(
            {
                **base.model_dump(),
                "weight_dtype": weights,
                "kv_cache_dtype": kv,
                "tensor_parallel": int(layout["tensor_parallel"][r]),
                "concurrency": int(layout["concurrency"][r]),
            }
        )
        expected = InferenceInputs.from_scenario(one)
        for field in dataclasses.fields(InferenceInputs):
            got = getattr(x, field.name)
            got = got[r] if isinstance(got, np.ndarray) else got
            assert got == getattr(expected, field.name), field.name
        hardware = hardware_inputs(one, one.architecture(), one.accelerator(), weights, kv)
        for field in dataclasses.fields(hardware):
            assert getattr(hw, field.name)[r] == getattr(hardware, field.name), field.name
