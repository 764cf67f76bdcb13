"""`python -m planner diagnose`: what binds a plan, what each technique buys and costs, the checklist, the
simpler alternatives and the nearest plans that fit, and for inference the roofline and the concurrency and
concurrency x context sweeps, headless.

    python -m planner diagnose SCENARIO.json [--format json|text] [--calibration FILE] [--app-url URL]

SCENARIO.json is one scenario (or a JSON list: each is diagnosed in turn), as for `plan`. JSON output is
planner.search.report.TradeoffReport (a list of them for a list of scenarios); `--format text` prints the
same content as readable tables. A plan that does not fit gets the suggestions that fix it, ranked by cost, each
with the dashboard link that opens it (`--app-url`: the dashboard's address, http://localhost:8501 by default).
"""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli.main import CliError, _load_calibration, _read_json, _scenarios
from planner.errors import PlanningError, explain
from planner.search.explore import Sweep
from planner.search.fixes import DEFAULT_APP_URL, Suggestions
from planner.search.report import TradeoffReport, tradeoff_report
from planner.search.roofline_points import PlanRoofline
from planner.search.words import capitalized, resource_words, signed
from planner.units import count, gib, percent, rate, seconds, usd


def register(subparsers) -> None:
    """Register `diagnose` on the `python -m planner` sub-command parser."""
    p = subparsers.add_parser(
        "diagnose", help="diagnosis, technique effects, checklist and simpler alternatives for scenario(s)"
    )
    p.add_argument("scenario", help="scenario JSON file ('-' for stdin)")
    p.add_argument("--format", choices=("json", "text"), default="json")
    p.add_argument("--calibration", help="calibration record JSON to apply")
    p.add_argument("--app-url", default=DEFAULT_APP_URL, help="the dashboard the suggestions' links open")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenarios, many = _scenarios(_read_json(args.scenario))
    calibration = _load_calibration(args.calibration)
    reports = []
    for index, scenario in enumerate(scenarios):
        try:
            reports.append(tradeoff_report(scenario, calibration, args.app_url))
        except PlanningError as exc:
            raise CliError(("" if not many else f"scenario {index}: ") + explain(exc)) from None
    if args.format == "text":
        sys.stdout.write("\n\n".join(report_text(r) for r in reports) + "\n")
        return 0
    if many:
        json.dump([r.model_dump(mode="json") for r in reports], sys.stdout, indent=2, allow_nan=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(reports[0].model_dump_json(indent=2) + "\n")
    return 0


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def report_text(report: TradeoffReport) -> str:
    """The report as plain text: diagnosis, relief, technique table, alternatives, nearest plans that fit,
    checklist, and for inference the roofline and the sweeps."""
    out = _diagnosis_lines(report) + _technique_lines(report)
    if report.alternatives:
        out += ["", "Simpler alternatives:"]
        for a in report.alternatives:
            fits = "fits" if a.fits else "does not fit"
            out.append(
                f"  {a.model_name}, {a.context_tokens:,} tokens ({fits}, {percent(a.headroom_fraction)} headroom)"
            )
    if report.suggestions is not None:
        out += suggestion_lines(report.suggestions)
    out += ["", "Checklist:"]
    for item in report.checklist.items:
        out += [f"  {item.question}", f"    {capitalized(item.headline)} {item.detail}".rstrip()]
    if report.roofline is not None:
        out += _roofline_lines(report.roofline)
    if report.concurrency_sweep is not None:
        out += _sweep_lines(report.concurrency_sweep)
    if report.context_grid is not None:
        out += _grid_lines(report.context_grid)
    return "\n".join(out)


def suggestion_lines(found: Suggestions) -> list[str]:
    """The ranked suggestions: kind and label, what changes, the headline, the link; then what found nothing."""
    out = ["", "Suggestions that fix the plan:", f"  {found.ranked_by}"]
    for rank, s in enumerate(found.items, start=1):
        out += [
            f"  {rank}. [{s.kind}] {s.label}",
            f"     changes: {s.summary}",
            f"     {s.headline}",
            f"     {s.link}",
        ]
    if not found.items:
        out.append("  No single change the searches try makes it fit.")
    out += [f"  Not found: {line}" for line in found.not_found]
    next_gpu = f" (here: {found.next_gpu})" if found.next_gpu else ""
    return [*out, f"  Next GPU up{next_gpu}: {found.next_gpu_rule}."]


def _time_words(report: TradeoffReport) -> tuple[str, str]:
    return ("TPOT", "$ per 1M output tokens") if report.kind == "inference" else ("step time", "cost to train")


def _diagnosis_lines(report: TradeoffReport) -> list[str]:
    time_word, cost_word = _time_words(report)
    d = report.diagnosis
    out = [f"Binding resource: {resource_words(d.binding)}", *(f"  {e}" for e in d.evidence)]
    if d.relief:
        out += ["", f"What relieves {resource_words(d.binding)}, best first:"]
        for rank, e in enumerate(d.relief, start=1):
            fits = "" if e.fits_after is None else ("; fits after" if e.fits_after else "; still does not fit")
            out.append(
                f"  {rank}. {e.technique}: {e.variant} (memory {signed(e.delta_memory_bytes, gib)}, {time_word} "
                f"{signed(e.delta_time_seconds, seconds)}, {cost_word} {signed(e.delta_cost, usd)}{fits})"
            )
    return out


def _technique_lines(report: TradeoffReport) -> list[str]:
    time_word, cost_word = _time_words(report)
    rows = [
        [
            e.technique,
            e.variant,
            signed(e.delta_memory_bytes, gib),
            signed(e.delta_time_seconds, seconds),
            signed(e.delta_throughput, count),
            signed(e.delta_cost, usd),
            "n/a" if e.fits_after is None else ("yes" if e.fits_after else "no"),
            "yes" if e.changes_numerics else "no",
            "derived" if e.derived else "full plan",
        ]
        for e in report.techniques
        if e.applicable
    ]
    header = ["technique", "variant", "Δ memory/GPU", f"Δ {time_word}", "Δ tokens/s", f"Δ {cost_word}"]
    out = ["", "Techniques (each minus this plan):", *_table(header + ["fits", "numerics", "estimate"], rows)]
    skipped = [e for e in report.techniques if not e.applicable]
    if skipped:
        out += ["", "Not applicable:", *(f"  {e.technique} ({e.variant}): {e.reason}" for e in skipped)]
    return out


def _roofline_lines(line: PlanRoofline) -> list[str]:
    roof = line.roof
    rows = [
        [
            p.phase,
            f"{p.arithmetic_intensity_flops_per_byte:,.1f}",
            rate(p.achieved_flops_per_second, "FLOP/s"),
            rate(p.roof_flops_per_second, "FLOP/s"),
            percent(p.fraction_of_roof),
            resource_words(p.binding),
        ]
        for p in line.phases
    ]
    header = ["phase", "FLOP/B", "achieved/GPU", "roof there", "of roof", "binding"]
    return [
        "",
        f"Roofline (one step per GPU; peak {rate(roof.peak_flops_per_second, 'FLOP/s')}, HBM "
        f"{rate(roof.bandwidth_bytes_per_second, 'B/s')}, ridge {roof.ridge_flops_per_byte:,.0f} FLOP/B):",
        *_table(header, rows),
    ]


def _sweep_lines(sweep: Sweep) -> list[str]:
    rows = [
        [
            f"{p.concurrency:,}",
            "yes" if p.fits else "no",
            count(p.output_tokens_per_second),
            seconds(p.tpot_seconds),
            seconds(p.ttft_seconds),
            gib(p.total_bytes),
            usd(p.usd_per_million_output_tokens),
        ]
        for p in sweep.points
    ]
    header = ["concurrency", "fits", "output tokens/s", "TPOT", "TTFT", "memory/GPU", "$ per 1M output"]
    return ["", "Concurrency sweep (each a full plan):", *_table(header, rows)]


def _grid_lines(grid: Sweep) -> list[str]:
    cells = {(p.context_tokens, p.concurrency): p for p in grid.points}

    def cell(context: int, concurrency: int) -> str:
        p = cells.get((context, concurrency))
        return "" if p is None else (count(p.output_tokens_per_second) if p.fits else "x")

    rows = [[f"{ctx:,}", *(cell(ctx, c) for c in grid.concurrencies)] for ctx in grid.contexts]
    header = ["context \\ concurrency", *(f"{c:,}" for c in grid.concurrencies)]
    return [
        "",
        "Output tokens/s by context (prompt + output) and concurrency (x: does not fit; blank: not a valid plan):",
        *_table(header, rows),
    ]
