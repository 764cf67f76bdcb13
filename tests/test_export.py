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
    plans_to_summary_csv,
    rounded,
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


# ------------------------------------------------------------------------------------------- summary


@pytest.mark.parametrize(
    "value, text",
    [
        (58396.2, "58400"),  # 4 significant digits, no thousands separator, no exponent
        (0.0341234, "0.03412"),
        (87.52349, "87.52"),
        (9999.6, "10000"),
        (-87.8765, "-87.88"),
        (0.0, "0"),
        (float("nan"), ""),
    ],
)
def test_summary_numbers_have_four_significant_digits(value, text):
    assert rounded(value) == text


def test_summary_csv_leads_with_headline_answers_in_human_units():
    plans = [plan(SCENARIOS[0]), plan(InferenceScenario(concurrency=512))]
    rows = _rows(plans_to_summary_csv(plans))
    header = list(rows[0])
    assert header[:3] == ["Plan", "Kind", "Fits in memory"]
    assert all("." not in name.split(" (")[0] for name in header)  # plain names, not dotted paths
    assert header.index("TTFT (ms)") < header.index("Model") < header.index("Decision")
    fits, short = rows
    p = plans[0]
    # 4 significant digits of the engine's raw values, converted by hand: bytes / 2^30, seconds x 1000
    assert fits["Memory per GPU (GiB)"] == rounded(p.memory.total_bytes / 2**30)
    assert float(fits["TPOT (ms)"]) == pytest.approx(p.performance.tpot_seconds * 1000, rel=5e-4)
    assert float(fits["TTFT (ms)"]) == pytest.approx(p.performance.ttft_seconds * 1000, rel=5e-4)
    assert float(fits["$ per month"]) == pytest.approx(4 * 3.0 * 730)  # 4 GPUs x $3/h x 730 h
    assert float(fits["TPOT likely high (ms)"]) == pytest.approx(
        p.uncertainty["performance.tpot_seconds"].high * 1000, rel=5e-4
    )
    assert fits["Sequences in flight"] == "64" and fits["Prompt tokens"] == "2048"
    assert (fits["Fits in memory"], fits["Note"]) == ("yes", "")
    assert (short["Fits in memory"], short["Memory verdict (likely range)"]) == ("no", "does not fit")
    assert "if it fit" in short["Note"]
    assert "Step time (s)" not in header  # no training plan: no training columns


def test_summary_csv_mixes_kinds_and_neutralises_text():
    from planner.training.scenario import TrainingScenario

    rows = _rows(plans_to_summary_csv([plan(SCENARIOS[1]), plan(TrainingScenario())]))
    inference, training = rows
    assert inference["Decision"].startswith("'=")
    assert inference["Step time (s)"] == "" and training["TTFT (ms)"] == ""
    expected = plan(TrainingScenario())
    assert float(training["Cost to train ($)"]) == pytest.approx(expected.cost.usd_total, rel=5e-4)
    assert float(training["Time to train (h)"]) == pytest.approx(
        expected.performance.time_to_train_seconds / 3600, rel=5e-4
    )


def test_a_speculative_plan_exports_its_draft_and_round_and_reads_back():
    import csv as csv_module
    import io as io_module

    from planner import plan
    from planner.export import plans_to_csv, plans_to_summary_csv, scenarios_from_csv
    from planner.inference.scenario import InferenceScenario

    scenario = InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-1b"})
    expected = plan(scenario)
    text = plans_to_csv([expected])
    row = next(csv_module.DictReader(io_module.StringIO(text)))
    assert float(row["memory.components.draft_weights_bytes"]) == expected.memory.components["draft_weights_bytes"]
    assert float(row["memory.components.draft_kv_cache_bytes"]) > 0
    assert float(row["performance.speculative.speedup"]) == expected.performance.speculative.speedup
    assert float(row["performance.speculative.tokens_per_round"]) == expected.performance.speculative.tokens_per_round
    assert scenarios_from_csv(text) == [scenario]

    summary = list(
        csv_module.DictReader(io_module.StringIO(plans_to_summary_csv([expected, plan(InferenceScenario())])))
    )
    assert summary[0]["Speculative: method"] == "draft_model"
    assert summary[0]["Speculative: acceptance assumed"] == "yes"
    assert float(summary[0]["Speculative: speedup vs plain decode (x)"]) > 0
    assert summary[1]["Speculative: speedup vs plain decode (x)"] == ""  # the plain plan: blank
    # A plan without speculative decoding keeps the summary's columns as they were.
    plain_header = plans_to_summary_csv([plan(InferenceScenario())]).splitlines()[0]
    assert "Speculative" not in plain_header
