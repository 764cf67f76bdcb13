"""The committed accuracy report is current: re-planning every mapped reference row reproduces it.

If the engine changes a number, this fails until `benchmarks/accuracy.py --sensitivity` is re-run and
its output (report.csv/.md, planner/accuracy.json) is committed with the change.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.reference_data import require_reference

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def accuracy():
    spec = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(accuracy):
    cases, unmapped = accuracy.collect(require_reference())
    return accuracy.evaluate(cases), unmapped


def test_every_family_is_measured_and_unmapped_rows_have_reasons(results):
    evaluated, unmapped = results
    families = {r.case.family for r in evaluated}
    assert families == {"memory", "decode_speed", "ttft", "max_throughput", "training_step", "serving"}
    assert all(u.reason for u in unmapped)
    mapped = {r.case.source for r in evaluated}
    assert not mapped & {u.row_id for u in unmapped}


def test_committed_report_matches_the_engine(results):
    evaluated, _ = results
    with (ROOT / "benchmarks" / "accuracy" / "report.csv").open(newline="") as handle:
        committed = {row["case"]: float(row["predicted"]) for row in csv.DictReader(handle)}
    assert set(committed) == {r.case.case_id for r in evaluated}
    for r in evaluated:
        assert r.predicted == pytest.approx(committed[r.case.case_id], rel=1e-5), r.case.case_id


def test_committed_summary_matches_the_report(accuracy, results):
    evaluated, _ = results
    summary = json.loads((ROOT / "planner" / "accuracy.json").read_text())["families"]
    fresh = accuracy.summarize(evaluated)
    for family, stats in fresh.items():
        assert summary[family]["cases"] == stats["cases"]
        assert summary[family]["p90_abs_error"] == pytest.approx(stats["p90_abs_error"], rel=1e-6)
