"""Compare page: both CSVs (full and summary) are offered, and a plan that does not fit has its speed and cost
marked "if it fit" beside plans that do."""

from __future__ import annotations

import csv
import io

from conftest import assert_clean, open_page

from planner import InferenceScenario, plan, units
from planner.export import plans_to_summary_csv
from ui.links import encode_pin

FITS = InferenceScenario(label="fits")
SHORT = InferenceScenario(concurrency=512, label="short")  # 135 GiB per GPU of 71.7 GiB


def test_compare_offers_both_csvs_and_caveats_the_plan_that_does_not_fit():
    at = open_page("compare", {"pin": [encode_pin(FITS), encode_pin(SHORT)]})
    assert_clean(at)
    buttons = {b.proto.label: b.proto for b in at.get("download_button")}
    assert {"Download CSV", "Summary CSV"} <= set(buttons)
    table = at.dataframe[0].value
    fits, short = plan(FITS), plan(SHORT)
    assert not short.memory.fits
    assert table.loc["Time per output token", "1 · fits"] == units.seconds(fits.performance.tpot_seconds)
    assert table.loc["Time per output token", "2 · short"] == units.seconds(short.performance.tpot_seconds) + (
        " (if it fit)"
    )
    assert table.loc["$ per 1M output tokens", "2 · short"].endswith("(if it fit)")
    assert table.loc["Max concurrency", "2 · short"] == f"{short.memory.max_concurrency:,}"  # a memory fact


def test_summary_csv_of_the_pins_reads_as_numbers():
    rows = list(csv.DictReader(io.StringIO(plans_to_summary_csv([plan(FITS), plan(SHORT)]))))
    assert [r["Plan"] for r in rows] == ["fits", "short"]
    assert [r["Fits in memory"] for r in rows] == ["yes", "no"]
    for row in rows:
        float(row["TPOT (ms)"]), float(row["Memory per GPU (GiB)"]), float(row["$ per month"])
