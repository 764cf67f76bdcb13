"""CSV export: one row per plan, units in column names, exact round trip, formula injection neutralised."""

from __future__ import annotations

import csv
import io

import pytest

from planner import plan
from planner.export import (
    CsvImportError,
    neutralize,
    plans_to_csv,
    scenarios_from_csv,
    unneutralize,
)
from planner.inference.scenario import InferenceScenario

SCENARIOS = [
    InferenceScenario(),
    InferenceScenario(
        model="llama-3.1-8b",
        gpu="l4",
        num_gpus=2,
        tensor_parallel=1,
        weight_dtype="int4",
        kv_cache_dtype="fp8",
        concurrency=7,
        gpu_memory_utilization=0.8123456789,
        decision='=HYPERLINK("http://evil")',
    ),
    InferenceScenario(
        model="dense-13b",
        gpu={
            "name": "My card",
            "memory_bytes": 48 * 2**30,
            "memory_bandwidth_bytes_per_second": 1e12,
            "peak_flops_per_second": {"bf16": 2e14},
        },
        num_gpus=1,
        tensor_parallel=1,
        label="+cmd|' /C calc'!A0",
    ),
]


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_one_row_per_plan_with_units_in_column_names():
    text = plans_to_csv([plan(s) for s in SCENARIOS])
    rows = _rows(text)
    assert len(rows) == 3
    header = rows[0].keys()
    for column in (
        "kind",
        "decision",
        "scenario.model",
        "scenario.concurrency",
        "memory.total_bytes",
        "memory.components.kv_cache_bytes",
        "performance.ttft_seconds",
        "performance.tpot_seconds",
        "performance.output_tokens_per_second",
        "cost.usd_per_hour",
        "cost.usd_per_million_output_tokens",
        "bottleneck",
    ):
        assert column in header
    assert float(rows[0]["memory.total_bytes"]) == plan(SCENARIOS[0]).memory.total_bytes


def test_round_trip_restores_scenarios_exactly():
    text = plans_to_csv([plan(s) for s in SCENARIOS])
    assert scenarios_from_csv(text) == SCENARIOS


def test_formula_cells_are_neutralised():
    text = plans_to_csv([plan(s) for s in SCENARIOS])
    rows = _rows(text)
    assert rows[1]["decision"].startswith("'=")
    assert rows[2]["scenario.label"].startswith("'+")
    assert neutralize("-1+1") == "'-1+1" and unneutralize("'-1+1") == "-1+1"
    assert unneutralize("'quoted") == "'quoted"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("a,b\n1,2\n", "no 'kind'"),
        ("kind,scenario.concurrency\ninference,many\n", "row 2"),
        ("kind,scenario.model\ninference,{broken\n", "row 2"),
        ("kind,scenario.tensor_parallel,scenario.num_gpus\ninference,3,3\n", "does not divide"),
        ("kind,scenario.concurrency\n", "no plans"),
        ("kind,scenario.concurrency\ninference,4,extra\n", "more cells"),
        ("kind,scenario.x\x00\n", "binary"),
    ],
)
def test_broken_csv_gets_a_clear_message(text, fragment):
    with pytest.raises(CsvImportError) as info:
        scenarios_from_csv(text)
    assert fragment in str(info.value)


def test_output_columns_are_ignored_on_import():
    text = plans_to_csv([plan(SCENARIOS[0])]).replace("\n", "\n", 1)
    rows = _rows(text)
    rows[0]["memory.total_bytes"] = "1"
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerow(rows[0])
    assert scenarios_from_csv(buffer.getvalue()) == [SCENARIOS[0]]
