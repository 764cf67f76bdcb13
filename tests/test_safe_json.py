"""Hostile JSON everywhere it enters: clear messages, never RecursionError or a traceback."""

from __future__ import annotations

import pytest

from planner.errors import PlanningError
from planner.export import CsvImportError, scenarios_from_csv
from planner.safe_json import MAX_DEPTH, load_json
from planner.share import query_params_to_scenario

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "data, fragment",
    [
        (DEEP, "nested"),
        ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "nested more than"),
        ('{"a": ', "not valid JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        ("x" * (3 * 1024 * 1024), "limit"),
    ],
)
def test_bad_json_is_a_planning_error(data, fragment):
    with pytest.raises(PlanningError) as info:
        load_json(data, "config.json")
    assert fragment in str(info.value) and "config.json" in str(info.value)


def test_deeply_nested_model_cell_in_csv_is_a_clear_error():
    text = 'kind,scenario.model\ninference,"' + '{""a"":' * 5000 + "1" + "}" * 5000 + '"\n'
    with pytest.raises(CsvImportError) as info:
        scenarios_from_csv(text)
    assert "row 2" in str(info.value)


def test_deeply_nested_inline_model_in_a_link_is_named():
    from planner.share import encode_inline

    nested: dict = {}
    node = nested
    for _ in range(200):
        node["a"] = {}
        node = node["a"]
    scenario, warnings = query_params_to_scenario({"p_model": encode_inline(nested)}, "inference", "p_")
    assert any("p_model" in w for w in warnings)


def test_cli_rejects_deep_json(tmp_path, capsys):
    from planner.cli.main import main

    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    assert main(["plan", str(path)]) == 2
    assert "nested" in capsys.readouterr().err
