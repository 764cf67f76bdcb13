"""`python -m planner fleet` and `schema --kind fleet`: formats, the trace file, one-sentence errors."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest

from planner.cli.main import main
from planner.fleet import FleetAnswer, FleetScenario, manager_summary
from planner.fleet.export import CSV_COLUMNS
from tests.fleet.fleets import deployment, small


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def fleet_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    trace = "seconds,requests_per_second\n" + "".join(f"{h * 3600},{2 + h % 5}\n" for h in range(24))
    (folder / "rates.csv").write_text(trace)
    data = small({**deployment("traced", "qwen2.5-7b"), "rate_trace_file": "rates.csv"})
    del data["deployments"][1]["diurnal"]
    path = folder / "fleet.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def as_json(fleet_file):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["fleet", str(fleet_file), "--workers", "1"]) == 0
    return out.getvalue()


def test_json_is_the_whole_answer_and_reads_back(as_json):
    answer = FleetAnswer.model_validate_json(as_json)
    assert len(answer.hours) == 24 and [d.name for d in answer.deployments] == ["chat", "traced"]
    traced = answer.deployments[1]
    assert traced.load.startswith("rate trace")
    # the trace file was read relative to the fleet file: 2 + h mod 5 requests/s at hour h
    assert [h.deployments[1].requests_per_second for h in answer.hours] == [float(2 + h % 5) for h in range(24)]
    data = json.loads(as_json)
    for key in (
        "hours",
        "usd_per_day",
        "usd_per_month",
        "cost",
        "gpu_hours_per_day",
        "energy_kwh_per_day",
        "co2e_kg_per_day",
        "spare_gpus",
        "comparisons",
        "slo_attainment",
    ):
        assert key in data
    assert {"reserved_usd_per_day", "on_demand_usd_per_day", "spot_usd_per_day", "usd_per_day"} <= set(data["cost"])
    hour = data["hours"][0]["deployments"][0]
    assert {"requests_per_second", "replicas", "gpus", "slo_met", "slo_attainment"} <= set(hour)


def test_csv_has_one_row_per_hour_and_deployment(fleet_file, as_json, capsys):
    code, out, _ = _run(["fleet", str(fleet_file), "--format", "csv", "--workers", "1"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 48
    answer = FleetAnswer.model_validate_json(as_json)
    assert [int(r["replicas"]) for r in rows[1::2]] == [h.deployments[1].replicas for h in answer.hours]


def test_text_leads_with_the_managers_sentence(fleet_file, as_json, capsys):
    code, out, _ = _run(["fleet", str(fleet_file), "--format", "text", "--workers", "1"], capsys)
    assert code == 0
    assert out.splitlines()[0] == manager_summary(FleetAnswer.model_validate_json(as_json))
    for heading in ("Bill:", "Deployments:", "Pools:", "Assumptions:"):
        assert heading in out


def test_the_schema_of_a_fleet(capsys):
    code, out, _ = _run(["schema", "--kind", "fleet"], capsys)
    assert code == 0
    schema = json.loads(out)
    assert schema == FleetScenario.model_json_schema()
    assert {"deployments", "pools", "autoscaling", "spares", "rate_scale"} <= set(schema["properties"])
    assert set(schema["required"]) == {"deployments", "pools"}


@pytest.mark.parametrize(
    "data, words",
    [
        ([1, 2], "a fleet is a JSON object with deployments and pools"),
        ({"kind": "inference"}, "expected kind 'fleet'"),
        ({"pools": [{"name": "p", "gpu": "nope"}], "deployments": [deployment("a")]}, "no pool can be planned"),
        ({**small(), "rate_scale": -1}, "rate_scale: Input should be greater than 0"),
    ],
)
def test_bad_fleets_exit_2_with_one_sentence(tmp_path, capsys, data, words):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    code, out, err = _run(["fleet", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and words in err and err.count("\n") == 1


def test_bad_options_and_files_exit_2_with_one_sentence(tmp_path, capsys, monkeypatch):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(small()))
    code, _, err = _run(["fleet", str(path), "--workers", "0"], capsys)
    assert code == 2 and "--workers must be at least 1" in err
    missing = small({**deployment("t"), "rate_trace_file": "absent.csv"})
    path.write_text(json.dumps(missing))
    code, _, err = _run(["fleet", str(path)], capsys)
    assert code == 2 and "cannot read" in err and "absent.csv" in err
    monkeypatch.setattr("planner.cli.fleet.ray_available", lambda: False)
    path.write_text(json.dumps(small()))
    code, _, err = _run(["fleet", str(path), "--ray", "auto"], capsys)
    assert code == 2 and 'pip install "headroom[cluster]"' in err
