"""Human-readable views of a calibration record: the predicted-vs-measured table as rows of strings,
a plain-text table for the terminal and a Markdown report (benchmarks/calibration_cpu.md). No torch."""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration_record import CalibrationRecord, ComparisonRow
from planner.hardware.catalog import get_accelerator
from planner.physics import gemm_efficiency
from planner.physics.efficiency import ENGINE_COST_FIELDS
from planner.units import gib, percent, rate, seconds

ROLE_WORDS = {
    "ceiling": "ceiling",
    "fit": "fitted",
    "holdout": "held out",
    "memory": "memory",
}
EFFICIENCY_FIELDS = (
    "prefill_compute",
    "decode_compute",
    "training_compute",
    "memory_bandwidth",
    "communication",
    "host_link",
    "layer_overhead_seconds",
    *ENGINE_COST_FIELDS,
)


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return seconds(value)
    if unit == "B":
        return gib(value)
    if unit == "B/s":
        return rate(value, "B/s")
    if unit == "FLOP/s":
        return rate(value, "FLOP/s")
    return f"{value:.4g} {unit}"


def format_error(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    if abs(fraction) < 5e-5:
        return "0.0%"
    sign = "+" if fraction > 0 else ""
    digits = 1 if abs(fraction) < 10 else 0
    return f"{sign}{fraction * 100:,.{digits}f}%"


def table_rows(record: CalibrationRecord) -> list[dict[str, str]]:
    """One dict of display strings per comparison row."""
    out = []
    points = {p.key: p for p in record.benchmark.points} if record.benchmark is not None else {}
    for row in record.predicted_vs_measured:
        point = points.get(row.phase)
        out.append(
            {
                "quantity": row.quantity if point is None else f"{row.phase} {point.load}: {row.quantity}",
                "kind": ROLE_WORDS[row.role],
                "measured": format_value(row.measured, row.unit),
                "predicted (defaults)": format_value(row.predicted, row.unit),
                "error": format_error(row.error_fraction),
                "predicted (calibrated)": format_value(row.predicted_calibrated, row.unit),
                "calibrated error": format_error(row.calibrated_error_fraction),
            }
        )
    return out


def text_table(record: CalibrationRecord) -> str:
    rows = table_rows(record)
    if not rows:
        return "(nothing measured)\n"
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(r[h]) for r in rows)) for h in headers}
    line = "  ".join(h.ljust(widths[h]) for h in headers)
    out = [line, "  ".join("-" * widths[h] for h in headers)]
    for r in rows:
        out.append("  ".join(r[h].ljust(widths[h]) for h in headers))
    return "\n".join(out) + "\n"


def _markdown_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(nothing measured)\n"
    headers = list(rows[0])
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r[h].replace("|", "/") for h in headers) + " |")
    return "\n".join(out) + "\n"


def efficiency_lines(record: CalibrationRecord) -> list[str]:
    e = record.efficiency
    out = []
    for name in EFFICIENCY_FIELDS:
        value = getattr(e, name)
        if name.endswith("_seconds"):
            shown = seconds(value)
        elif name.endswith("_per_logit"):
            shown = f"{value:.3g} s"
        else:
            shown = f"{value:.4g} ({percent(value, 2)})"
        out.append(f"{name} = {shown}: {record.efficiency_notes.get(name, '')}")
    for term in device_terms(record):
        fitted, published = (
            (seconds(term.fitted), seconds(term.published))
            if term.unit == "s"
            else (percent(term.fitted, 2), percent(term.published, 2))
        )
        out.append(f"{term.name} = {fitted} (published {published}): {term.how}")
    return out


@dataclass(frozen=True)
class DeviceTerm:
    """One fitted device term next to the published value it replaces in plans on the record's GPU."""

    name: str
    unit: str  # "s" or "fraction"
    fitted: float
    published: float
    how: str


def device_terms(record: CalibrationRecord) -> list[DeviceTerm]:
    """The link latency alpha and each dtype's GEMM ceiling and t0 this record fitted (none on older records, a CPU,
    one GPU or one matmul size); plans on `record.reference_gpu` use them (`CalibrationRecord.device_terms_apply`)."""
    applies = f"used by plans on '{record.reference_gpu}' only"
    terms = []
    try:
        catalog_alpha = get_accelerator(record.reference_gpu).interconnect_latency_seconds
    except Exception:  # a 'custom' reference has no catalog entry
        catalog_alpha = float("nan")
    if record.link_latency_seconds is not None:
        terms.append(
            DeviceTerm(
                "link_latency_seconds (alpha)",
                "s",
                record.link_latency_seconds,
                catalog_alpha,
                f"per-step latency fitted to the smallest all-reduce (catalog value beside it); {applies}",
            )
        )
    tail = gemm_efficiency.gemm_tail_seconds(record.device.kind == "cuda")
    for g in record.gemm_shapes:
        fitted_on = f"fitted to the square {g.dtype} matmuls ({', '.join(str(n) for n in g.sizes)}); {applies}"
        table = gemm_efficiency.gemm_ceiling(record.reference_gpu, g.dtype)
        terms.append(DeviceTerm(f"gemm_ceiling {g.dtype} (MAMF / peak)", "fraction", g.ceiling, table, fitted_on))
        terms.append(DeviceTerm(f"gemm_tail_seconds {g.dtype} (t0)", "s", g.tail_seconds, tail, fitted_on))
    return terms


def summary_errors(rows: list[ComparisonRow]) -> dict[str, float]:
    """Largest |calibrated error| among held-out time rows, and among memory rows."""
    held = [
        abs(r.calibrated_error_fraction)
        for r in rows
        if r.role == "holdout" and r.calibrated_error_fraction is not None
    ]
    memory = [abs(r.error_fraction) for r in rows if r.role == "memory"]
    return {"holdout_max": max(held, default=0.0), "memory_max": max(memory, default=0.0)}


def markdown_report(record: CalibrationRecord, command: str | None = None) -> str:
    d = record.device
    lines = [f"# Calibration: {record.label}", ""]
    if command:
        lines += ["Produced by:", "", "```", command, "```", ""]
    state = "complete" if record.complete else f"partial ({record.stopped_reason})"
    lines += [
        f"- record `{record.id}` (format version {record.version}), {record.created_at:%Y-%m-%d %H:%M} UTC, {state}, "
        f"{record.elapsed_seconds:.1f} s",
        f"- device: {d.name} ({d.kind}), {gib(d.memory_bytes)} total, {gib(d.free_memory_bytes)} free at start"
        + (f", {d.cpu_threads} torch threads" if d.cpu_threads else "")
        + (f", compute capability {d.compute_capability}" if d.compute_capability else ""),
        f"- torch {d.torch_version}"
        + (f", CUDA {d.cuda_version}" if d.cuda_version else "")
        + (f", NCCL {d.nccl_version}" if d.nccl_version else ""),
        f"- efficiencies are relative to catalog accelerator `{record.reference_gpu}` "
        f"({rate(record.reference_peak_flops_per_second, 'FLOP/s')} at {record.dtype}, "
        f"{rate(record.reference_bandwidth_bytes_per_second, 'B/s')})",
    ]
    if record.proxy is not None:
        p = record.proxy
        a = p.architecture
        lines.append(
            f"- proxy: {a.num_layers} of {p.source_num_layers} layers of {p.model_name} (`{p.model_id}`), "
            f"hidden {a.hidden_size}, {a.num_attention_heads} heads, {a.num_kv_heads} KV heads, head_dim "
            f"{a.head_dim}, MLP {a.intermediate_size}, {p.dtype}; prefill {p.prefill_tokens} (held out "
            f"{p.holdout_prefill_tokens}) tokens; decode batch {p.decode_batch} at context "
            f"{p.decode_context_tokens} (held out: batch {p.holdout_decode_batch} at "
            f"{p.holdout_decode_context_tokens}); training micro-batch {p.train_micro_batch} x "
            f"{p.train_tokens} tokens"
        )
        for cap in p.caps:
            lines.append(f"  - {cap}")
    lines += ["", "## Fitted efficiencies", ""]
    if record.benchmark is not None:
        lines += [
            f"- factor {f.name} x{f.multiplier:.4g} ({', '.join(f.fields)}): {f.note}" for f in record.benchmark.factors
        ]
    lines += [f"- {line}" for line in efficiency_lines(record)]
    lines += [
        "",
        f"Memory correction: {record.runtime_overhead_correction_bytes:,.0f} bytes. {record.memory_correction_note}",
        "",
    ]
    lines += [
        "## Predicted vs measured",
        "",
        "`predicted (defaults)` is what an uncalibrated plan assumes (catalog peaks x documented "
        "efficiencies); `predicted (calibrated)` uses this record. Error = (predicted - measured) / measured. "
        "`fitted` rows were used to fit an efficiency (calibrated error ~0 by construction); `held out` rows "
        "were not; `memory` rows compare exact tensor bytes with the engine's memory terms.",
        "",
    ]
    lines.append(_markdown_table(table_rows(record)))
    if record.phases:
        lines += [
            "## Proxy phases",
            "",
            "| phase | layers | batch | tokens | context | best | median | reps | per layer |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for ph in record.phases:
            per_layer = ", ".join(seconds(t) for t in ph.seconds_per_layer)
            lines.append(
                f"| {ph.name} | {ph.layers} | {ph.batch} | {ph.tokens} | {ph.context_tokens} | "
                f"{seconds(ph.seconds)} | {seconds(ph.median_seconds) if ph.median_seconds else '-'} | "
                f"{ph.reps} | {per_layer} |"
            )
        lines.append("")
    if record.ceilings.skipped or record.notes:
        lines += ["## Notes", ""]
        lines += [f"- skipped {k}: {v}" for k, v in record.ceilings.skipped.items()]
        lines += [f"- {n}" for n in record.notes]
        lines.append("")
    return "\n".join(lines)


__all__ = [
    "DeviceTerm",
    "device_terms",
    "efficiency_lines",
    "format_error",
    "format_value",
    "markdown_report",
    "summary_errors",
    "table_rows",
    "text_table",
]
