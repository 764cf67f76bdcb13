"""Plans <-> CSV: one row per plan, every input and output, units in the column names.

Columns: `kind`, `decision`, then `scenario.<field>` for every input (an inline model config or
custom GPU as JSON), then every numeric or text output of the plan flattened with dots
(`memory.total_bytes`, `performance.ttft_seconds`, `cost.usd_per_hour`, `memory.components.kv_cache_bytes`).
Reading the file back restores the scenarios exactly (outputs are recomputed, not trusted).
Text cells starting with = + - @ (or tab/CR) get a leading apostrophe so spreadsheets never run them
as formulas; the reader removes it again.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.safe_json import load_json
from planner.scenario import parse_scenario

MAX_ROWS = 1000
MAX_CELL_CHARS = 300_000
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
SKIPPED_OUTPUTS = ("scenario", "equations")


class CsvImportError(PlanningError):
    """A CSV that cannot be read back into scenarios, with the row and column that failed."""


def neutralize(text: str) -> str:
    """Stop a spreadsheet from executing a cell as a formula (OWASP CSV injection)."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def unneutralize(text: str) -> str:
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_PREFIXES) else text


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif isinstance(value, list):
        out[prefix] = " | ".join(str(v) for v in value)
    else:
        out[prefix] = value


def plan_row(plan) -> dict[str, Any]:
    """One CSV row (ordered dict of column -> value) for a plan."""
    data = plan.model_dump(mode="json")
    scenario = data["scenario"]
    row: dict[str, Any] = {"kind": data["kind"], "decision": scenario.get("decision", "")}
    for name, value in scenario.items():
        if name in ("kind", "decision"):
            continue
        row[f"scenario.{name}"] = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
    outputs: dict[str, Any] = {}
    for key, value in data.items():
        if key in SKIPPED_OUTPUTS or key == "kind":
            continue
        _flatten(key, value, outputs)
    row.update(outputs)
    return row


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return neutralize(str(value)) if isinstance(value, str) else str(value)


def plans_to_csv(plans: Iterable) -> str:
    rows = [plan_row(p) for p in plans]
    columns: list[str] = []
    for row in rows:
        for column in row:
            if column not in columns:
                columns.append(column)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


def _parse_cell(name: str, text: str) -> Any:
    """Structured inputs (inline configs, lists) were written as JSON; everything else is text that
    pydantic converts to the field's type."""
    text = unneutralize(text)
    if text.startswith(("{", "[")):
        try:
            return load_json(text, f"'{name}'")
        except PlanningError as exc:
            if name in ("model", "gpu", "lora"):
                raise ValueError(str(exc)) from None
    return text


def scenarios_from_csv(text: str) -> list:
    """Scenarios from a CSV written by `plans_to_csv` (or by hand with the same columns).

    Raises CsvImportError naming the row and the problem; output columns are ignored.
    """
    if not text.strip():
        raise CsvImportError("the CSV file is empty")
    if "\x00" in text:
        raise CsvImportError("the file is binary, not a CSV")
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise CsvImportError(f"not a readable CSV: {exc}") from None
    if "kind" not in header or not any(h.startswith("scenario.") for h in header):
        raise CsvImportError(
            "the CSV has no 'kind' and 'scenario.*' columns; export a plan from Headroom to see the format"
        )
    scenarios = []
    try:
        for index, row in enumerate(reader, start=2):
            if index - 1 > MAX_ROWS:
                raise CsvImportError(f"the CSV has more than {MAX_ROWS} plans")
            if None in row:
                raise CsvImportError(f"row {index}: more cells than columns")
            fields: dict[str, Any] = {"kind": unneutralize(row.get("kind") or "inference")}
            if row.get("decision"):
                fields["decision"] = unneutralize(row["decision"])
            for column, cell in row.items():
                if not column.startswith("scenario.") or cell is None or cell == "":
                    continue
                if len(cell) > MAX_CELL_CHARS:
                    raise CsvImportError(f"row {index}: column '{column}' is too long")
                name = column.removeprefix("scenario.")
                try:
                    fields[name] = _parse_cell(name, cell)
                except ValueError as exc:
                    raise CsvImportError(f"row {index}: {exc}") from None
            try:
                scenarios.append(parse_scenario(fields))
            except (ValidationError, PlanningError) as exc:
                raise CsvImportError(f"row {index}: {explain(exc)}") from None
    except csv.Error as exc:
        raise CsvImportError(f"not a readable CSV: {exc}") from None
    if not scenarios:
        raise CsvImportError("the CSV has a header but no plans")
    return scenarios
