"""How accurate is this? The Accuracy page renders benchmarks/accuracy/report.csv and the bands' summary."""

from __future__ import annotations

import pandas as pd
from conftest import assert_clean, open_page

from planner import units
from planner.uncertainty import family_errors, serving_errors
from ui import accuracy_view


def test_accuracy_page_shows_the_summary_the_bands_use():
    at = open_page("accuracy")
    assert_clean(at)
    summary = at.table[0].value
    stats = {**family_errors(), "serving": serving_errors()}
    assert len(summary) == len(stats)
    for family, (name, row) in zip(stats, summary.iterrows()):
        assert name == accuracy_view.family_name(family)
        assert int(row["Cases"]) == stats[family]["cases"]
        assert row["Median |error|"] == units.percent(stats[family]["median_abs_error"], 1)
        assert row["p90 |error|"] == units.percent(stats[family]["p90_abs_error"], 1)
    assert "wide" in summary.loc["Serving (simulated)", "Band on a prediction"]
    assert len(at.get("vega_lite_chart")) == 1  # the error distribution


def test_accuracy_page_shows_promised_and_achieved_coverage():
    at = open_page("accuracy")
    summary = at.table[0].value
    text = "\n".join(m.value for m in at.markdown)
    for family, stats in {**family_errors(), "serving": serving_errors()}.items():
        band = stats["band"]
        row = summary.loc[accuracy_view.family_name(family)]
        assert row["Promised"] == "80%"
        held = f"{band['loo_held']} of {band['loo_cases']} ({band['loo_coverage']:.0%})"
        assert row["Held when left out"] == held
        by = band.get("loo_by", "case")
        each = "each run" if family == "serving" else (f"each {by}" if by != "case" else "each")
        assert (
            f"80% band; held {band['loo_coverage']:.0%} of {band['loo_cases']} cases when {each} was left out" in text
        )
    corpus = sum(s["cases"] for f, s in family_errors().items() if f.startswith("training_") and f != "training_step")
    assert f"and against **{corpus} published training runs** of other publishers in 2 more" in text
    training = family_errors()["training_step"]["band"]
    share, cases = f"{training['loo_coverage']:.0%}", training["loo_cases"]
    assert f"- **Training step**: 80% band; held {share} of {cases} cases when each was left out." in text
    assert "too few cases to test the promise" in summary.loc["Decode speed", "Note"]


def test_worst_cases_have_causes_and_the_page_says_how_to_regenerate():
    at = open_page("accuracy")
    report = pd.read_csv(accuracy_view.REPORT_CSV)
    worst = report.loc[report["error_percent"].abs().idxmax()]
    text = "\n".join(m.value for m in at.markdown)
    assert f"**{worst['case']}**" in text
    assert "Likely cause:" in text
    assert any(c.value == accuracy_view.REGENERATE for c in at.code)
    assert accuracy_view.REGENERATE == ".venv/bin/python benchmarks/accuracy.py --sensitivity"
    assert any(e.label.startswith("Sensitivity") for e in at.expander)
    # every shown cause is a sentence of its own, never a pointer with nothing in it
    assert "Likely: see report.md" not in text
    assert any(e.label.startswith("What each accuracy mechanism buys") for e in at.expander)
    assert "without kernel groups one after another" in text


def test_accuracy_page_checks_decisions_against_measurements():
    at = open_page("accuracy")
    assert_clean(at)
    decisions = serving_errors()["decisions"]
    tables = [t.value for t in at.table if "Headroom decision" in t.value.columns]
    assert len(tables) == len(decisions["sources"])  # one table per source with a sweep
    shown = pd.concat(tables)
    committed = [d for sweep in decisions["sweeps"] for d in sweep["decisions"]]
    assert len(shown) == len(committed) == decisions["pooled"]["decisions"]
    for (_, row), d in zip(shown.iterrows(), committed):
        assert row["Measured decision"] == d["measured_load"]
        assert row["Headroom decision"] == d["headroom_load"]
        assert row["Match"].split(" (")[0] == d["category"]
        assert row["Replica error"] == ("n/a" if d["replica_error"] is None else f"{100 * d['replica_error']:+.0f}%")
    summary = next(t.value for t in at.table if "One step off" in t.value.columns)
    pooled = summary.loc["Pooled"]
    assert (int(pooled["Exact"]), int(pooled["One step off"]), int(pooled["Further"])) == (
        decisions["pooled"]["exact"],
        decisions["pooled"]["one_step_off"],
        decisions["pooled"]["further"],
    )
    text = "\n".join(m.value for m in at.markdown)
    assert f"Over **{decisions['pooled']['decisions']} decisions**" in text
    assert "With each source left out" in text
    assert accuracy_view.decisions_headline() in text
