"""Plans <-> CSV: one row per plan, every input and output, units in the column names; and a summary for people.

The full CSV (`plans_to_csv`) is the machine format. Columns: `kind`, `decision`, then `scenario.<field>` for every input (an inline model config or
custom GPU as JSON), then every numeric or text output of the plan flattened with dots
(`memory.total_bytes`, `performance.ttft_seconds`, `cost.usd_per_hour`, `memory.components.kv_cache_bytes`;
with speculative decoding `memory.components.draft_weights_bytes`, `memory.components.draft_kv_cache_bytes` and
`performance.speculative.*`: speedup, tokens per round, verify and draft steps; with a request stream
`traffic.*`, its latency CDF as `traffic.latency_quantiles.<metric>` cells of " | "-separated seconds at the
percentiles in `traffic.latency_quantiles.percentiles`, and `traffic.prefix_cache.*` hits and pool bytes).
Reading the file back restores the scenarios exactly (outputs are recomputed, not trusted).
Text cells starting with = + - @ (or tab/CR) get a leading apostrophe so spreadsheets never run them
as formulas; the reader removes it again.

The summary CSV (`plans_to_summary_csv`) is for people and is never read back: the headline answers first,
in the units the dashboard shows (GiB = 2^30 bytes, ms, $, tokens/s, %), rounded to 4 significant digits,
under plain column names that carry the unit ("TTFT (ms)"); then the likely ranges (planner.uncertainty),
the workload and the decision. When a plan does not fit, its speed and cost are what it would give if it
fit: the "Note" column says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.safe_json import load_json
from planner.scenario import parse_scenario
from planner.units import GIB
from planner.verdict import memory_verdict

MAX_ROWS = 1000
MAX_CELL_CHARS = 300_000
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# A series of 200 (time, share) points is a chart, not a cell (the dashboard draws it).
SKIPPED_PATHS = {"traffic.kv_utilization_over_time"}
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
    elif prefix in SKIPPED_PATHS:
        return
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


# ------------------------------------------------------------------------------------------- summary

SUMMARY_DIGITS = 4
TRAFFIC_PREFIX = "Traffic: "
SPECULATIVE_PREFIX = "Speculative: "
IF_IT_FIT_NOTE = "does not fit: speed and cost are what it would give if it fit"
MEMORY_VERDICT_WORDS = {"met": "fits", "at_risk": "may not fit", "missed": "does not fit"}


def rounded(value: float | None, digits: int = SUMMARY_DIGITS) -> str:
    """`value` to `digits` significant digits as plain decimal text a spreadsheet reads as a number:
    no exponent, no thousands separator (58396.2 -> '58400', 0.0341234 -> '0.03412')."""
    if value is None or not math.isfinite(value):
        return ""
    if value == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{round(value, decimals):.{max(decimals, 0)}f}"


def _band(plan, path: str, end: str, scale: float) -> float | None:
    band = (plan.uncertainty or {}).get(path)
    return getattr(band, end) * scale if band is not None else None


def _name(plan) -> str:
    s = plan.scenario
    return s.label or f"{plan.model.name} on {s.num_gpus}× {plan.hardware.name}"


_BOTH, _INF, _TRAIN = ("inference", "training"), ("inference",), ("training",)
_MS, _PCT, _H = 1e3, 100.0, 1 / 3600

# (column, plan kinds it applies to, value); numbers are rounded, text is written as it is.
SUMMARY_COLUMNS: list[tuple[str, tuple[str, ...], Callable[[Any], Any]]] = [
    ("Plan", _BOTH, _name),
    ("Kind", _BOTH, lambda p: p.kind),
    ("Fits in memory", _BOTH, lambda p: "yes" if p.memory.fits else "no"),
    ("Memory verdict (likely range)", _BOTH, lambda p: MEMORY_VERDICT_WORDS[memory_verdict(p).status]),
    ("Memory per GPU (GiB)", _BOTH, lambda p: p.memory.total_bytes / GIB),
    ("Memory available per GPU (GiB)", _BOTH, lambda p: p.memory.budget_bytes / GIB),
    ("Headroom (%)", _BOTH, lambda p: p.memory.headroom_fraction * _PCT),
    ("TTFT (ms)", _INF, lambda p: p.performance.ttft_seconds * _MS),
    ("TPOT (ms)", _INF, lambda p: p.performance.tpot_seconds * _MS),
    ("Output tokens/s", _INF, lambda p: p.performance.output_tokens_per_second),
    ("$ per 1M output tokens", _INF, lambda p: p.cost.usd_per_million_output_tokens),
    ("$ per month", _INF, lambda p: p.cost.usd_per_month),
    ("Max sequences in flight", _INF, lambda p: p.memory.max_concurrency),
    (SPECULATIVE_PREFIX + "method", _INF, lambda p: _speculative(p, lambda s: s.method)),
    (SPECULATIVE_PREFIX + "drafted tokens (k)", _INF, lambda p: _speculative(p, lambda s: s.drafted_tokens)),
    (SPECULATIVE_PREFIX + "acceptance", _INF, lambda p: _speculative(p, lambda s: s.acceptance_rate)),
    (SPECULATIVE_PREFIX + "acceptance assumed", _INF, lambda p: _speculative(p, lambda s: s.acceptance_is_assumed)),
    (SPECULATIVE_PREFIX + "tokens per round", _INF, lambda p: _speculative(p, lambda s: s.tokens_per_round)),
    (SPECULATIVE_PREFIX + "speedup vs plain decode (x)", _INF, lambda p: _speculative(p, lambda s: s.speedup)),
    (SPECULATIVE_PREFIX + "verify step (ms)", _INF, lambda p: _speculative(p, lambda s: s.verify_step_seconds * _MS)),
    (SPECULATIVE_PREFIX + "draft step (ms)", _INF, lambda p: _speculative(p, lambda s: s.draft_step_seconds * _MS)),
    (
        SPECULATIVE_PREFIX + "draft memory per GPU (GiB)",
        _INF,
        lambda p: _speculative(p, lambda s: _draft_bytes(p) / GIB),
    ),
    (
        "Traffic: requests/s offered",  # as sent, first to last send: a trace's own rate, blank when all at once
        _INF,
        lambda p: _traffic(p, lambda t: t.offered_requests_per_second),
    ),
    (
        TRAFFIC_PREFIX + "requests/s completed",  # over the run, drain included (goodput <= completed <= offered)
        _INF,
        lambda p: _traffic(p, lambda t: t.request_throughput_per_second),
    ),
    (TRAFFIC_PREFIX + "p50 TTFT (ms)", _INF, lambda p: _traffic(p, lambda t: t.ttft_seconds.p50 * _MS)),
    (TRAFFIC_PREFIX + "p99 TTFT (ms)", _INF, lambda p: _traffic(p, lambda t: t.ttft_seconds.p99 * _MS)),
    (TRAFFIC_PREFIX + "p99 TPOT (ms)", _INF, lambda p: _traffic(p, lambda t: t.tpot_seconds.p99 * _MS)),
    (TRAFFIC_PREFIX + "SLO attainment (%)", _INF, lambda p: _traffic(p, lambda t: _pct(t.slo_attainment))),
    (TRAFFIC_PREFIX + "goodput (requests/s)", _INF, lambda p: _traffic(p, lambda t: t.goodput_requests_per_second)),
    (TRAFFIC_PREFIX + "p99.9 TTFT (ms)", _INF, lambda p: _traffic(p, lambda t: _quantile(t, "ttft_seconds", 99.9))),
    (TRAFFIC_PREFIX + "p99.9 TPOT (ms)", _INF, lambda p: _traffic(p, lambda t: _quantile(t, "tpot_seconds", 99.9))),
    (TRAFFIC_PREFIX + "prefix GPU hits", _INF, lambda p: _traffic(p, lambda t: _prefix(t, "gpu_hits"))),
    (TRAFFIC_PREFIX + "prefix pool hits", _INF, lambda p: _traffic(p, lambda t: _prefix(t, "pool_hits"))),
    (TRAFFIC_PREFIX + "prefix misses", _INF, lambda p: _traffic(p, lambda t: _prefix(t, "misses"))),
    (
        TRAFFIC_PREFIX + "prefix pool read (GB)",
        _INF,
        lambda p: _traffic(p, lambda t: _prefix(t, "pool_bytes_transferred", 1e-9)),
    ),
    ("Step time (s)", _TRAIN, lambda p: p.performance.step_seconds),
    ("Tokens/s", _TRAIN, lambda p: p.performance.tokens_per_second),
    ("MFU (%)", _TRAIN, lambda p: p.performance.mfu * _PCT),
    ("Time to train (h)", _TRAIN, lambda p: p.performance.time_to_train_seconds * _H),
    ("Cost to train ($)", _TRAIN, lambda p: p.cost.usd_total),
    ("Largest micro-batch that fits", _TRAIN, lambda p: p.memory.max_micro_batch_size or 0),
    ("Note", _BOTH, lambda p: "" if p.memory.fits else IF_IT_FIT_NOTE),
    ("Binding resource", _BOTH, lambda p: p.bottleneck.replace("_", " ")),
    ("Memory likely low (GiB)", _BOTH, lambda p: _band(p, "memory.total_bytes", "low", 1 / GIB)),
    ("Memory likely high (GiB)", _BOTH, lambda p: _band(p, "memory.total_bytes", "high", 1 / GIB)),
    ("TTFT likely low (ms)", _INF, lambda p: _band(p, "performance.ttft_seconds", "low", _MS)),
    ("TTFT likely high (ms)", _INF, lambda p: _band(p, "performance.ttft_seconds", "high", _MS)),
    ("TPOT likely low (ms)", _INF, lambda p: _band(p, "performance.tpot_seconds", "low", _MS)),
    ("TPOT likely high (ms)", _INF, lambda p: _band(p, "performance.tpot_seconds", "high", _MS)),
    ("Step time likely low (s)", _TRAIN, lambda p: _band(p, "performance.step_seconds", "low", 1.0)),
    ("Step time likely high (s)", _TRAIN, lambda p: _band(p, "performance.step_seconds", "high", 1.0)),
    ("Model", _BOTH, lambda p: p.model.name),
    ("GPU", _BOTH, lambda p: p.hardware.name),
    ("GPUs", _BOTH, lambda p: p.scenario.num_gpus),
    ("Prompt tokens", _INF, lambda p: p.scenario.prompt_tokens),
    ("Output tokens", _INF, lambda p: p.scenario.output_tokens),
    ("Sequences in flight", _INF, lambda p: p.scenario.concurrency),
    ("Weights dtype", _INF, lambda p: p.scenario.weight_dtype),
    ("KV cache dtype", _INF, lambda p: p.scenario.kv_cache_dtype),
    ("Global batch (sequences)", _TRAIN, lambda p: p.layout.global_batch_size),
    ("Sequence length (tokens)", _TRAIN, lambda p: p.layout.sequence_length),
    ("Training tokens", _TRAIN, lambda p: p.performance.training_tokens),
    ("Decision", _BOTH, lambda p: p.scenario.decision or ""),
]


def _traffic(plan, read: Callable[[Any], Any]) -> Any:
    """A traffic answer, blank for a plan without a simulated request stream."""
    traffic = getattr(plan, "traffic", None)
    return None if traffic is None else read(traffic)


def _quantile(traffic, metric: str, percentile: float) -> float | None:
    """One point of the latency CDF, in ms (blank for a result without the table)."""
    table = traffic.latency_quantiles
    return None if table is None else table.at(metric, percentile) * _MS


def _prefix(traffic, name: str, scale: float = 1.0) -> Any:
    """A prefix-cache count (blank when no request shares a prefix)."""
    stats = traffic.prefix_cache
    if stats is None:
        return None
    value = getattr(stats, name)
    return value * scale if scale != 1.0 else value


def _speculative(plan, read: Callable[[Any], Any]) -> Any:
    """A speculative decoding answer, blank for a plan that decodes plainly."""
    summary = getattr(plan.performance, "speculative", None)
    return None if summary is None else read(summary)


def _draft_bytes(plan) -> float:
    components = plan.memory.components
    return components.get("draft_weights_bytes", 0.0) + components.get("draft_kv_cache_bytes", 0.0)


def _pct(share: float | None) -> float | None:
    return None if share is None else share * _PCT


def _summary_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)  # counts (GPUs, tokens, sequences) are exact
    if isinstance(value, float):
        return rounded(value)
    return neutralize(str(value))


def plans_to_summary_csv(plans: Iterable) -> str:
    """One row per plan for people (see the module docstring); columns that apply to none of the plans'
    kinds are left out, the traffic columns unless a plan simulated a request stream, and the speculative ones
    unless a plan decodes speculatively."""
    plans = list(plans)
    kinds = {p.kind for p in plans}
    any_traffic = any(getattr(p, "traffic", None) is not None for p in plans)
    any_speculative = any(getattr(getattr(p, "performance", None), "speculative", None) is not None for p in plans)
    columns = [
        (name, value)
        for name, applies, value in SUMMARY_COLUMNS
        if kinds & set(applies)
        and (any_traffic or not name.startswith(TRAFFIC_PREFIX))
        and (any_speculative or not name.startswith(SPECULATIVE_PREFIX))
    ]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([name for name, _ in columns])
    for p in plans:
        applies = {name: p.kind in kinds_ for name, kinds_, _ in SUMMARY_COLUMNS}
        writer.writerow([_summary_cell(value(p)) if applies[name] else "" for name, value in columns])
    return buffer.getvalue()


# -------------------------------------------------------------------------------------------- import


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
