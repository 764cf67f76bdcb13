"""A fleet answer as CSV (one row per hour and deployment, units in the column names) and as plain text."""

from __future__ import annotations

import csv
import io

from planner.fleet.answer import FleetAnswer, manager_summary

CSV_COLUMNS = (
    "hour",
    "deployment",
    "pool",
    "requests_per_second",
    "replicas",
    "gpus",
    "requests_per_second_per_replica",
    "slo_met",
    "slo_attainment",
    "busy_share",
    "energy_kwh",
    "fleet_gpus",
    "fleet_spare_gpus",
    "reserved_gpus",
    "on_demand_gpus",
    "spot_gpus",
)


def fleet_csv(answer: FleetAnswer) -> str:
    """Every hour of every planned deployment, with the fleet's GPUs of that hour beside it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for hour in answer.hours:
        fleet = [
            hour.gpus,
            hour.spare_gpus,
            *(round(hour.gpus_by_pricing[k], 6) for k in ("reserved", "on_demand", "spot")),
        ]
        for d in hour.deployments:
            writer.writerow(
                [
                    hour.hour,
                    d.deployment,
                    d.pool,
                    repr(d.requests_per_second),
                    d.replicas,
                    d.gpus,
                    repr(d.requests_per_second_per_replica),
                    d.slo_met,
                    repr(d.slo_attainment),
                    repr(d.busy_share),
                    repr(d.energy_kwh),
                    *fleet,
                ]
            )
    return out.getvalue()


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def fleet_text(answer: FleetAnswer) -> str:
    """The answer for a reader: the summary sentence, deployments, pools, the bill, spares, comparisons, what was left
    out and why, warnings and assumptions."""
    lines = [manager_summary(answer), ""]
    c = answer.cost
    lines += [
        f"Bill: {_usd(answer.usd_per_day)}/day, {_usd(answer.usd_per_month)}/month ({answer.days_per_month:.2f} days): "
        f"reserved {_usd(c.reserved_usd_per_day)}, on demand {_usd(c.on_demand_usd_per_day)}, spot "
        f"{_usd(c.spot_usd_per_day)}, spot re-served {_usd(c.spot_reserve_usd_per_day)}, scale-up "
        f"{_usd(c.scale_up_usd_per_day)} a day",
        f"GPU-hours {answer.gpu_hours_per_day:,.0f}/day; energy {answer.energy_kwh_per_day:,.0f} kWh/day "
        f"({answer.co2e_kg_per_day:,.0f} kg CO2e, electricity {_usd(answer.electricity_usd_per_day)} at "
        f"${answer.electricity_usd_per_kwh:g}/kWh, not in the bill); spares {answer.spare_gpus} GPUs",
        "",
        "Deployments:",
    ]
    for d in answer.deployments:
        if not d.feasible:
            lines.append(f"  {d.name}: NOT PLANNED — {d.why}")
            continue
        spares = d.spares.why if d.spares is not None else ""
        lines += [
            f"  {d.name} ({d.model}) on '{d.pool}' ({d.gpu}, {d.layout}): {d.trough_replicas}-{d.peak_replicas} replicas, "
            f"peak {d.peak_requests_per_second:.3g} requests/s at {d.peak_hour:02d}:00, capacity "
            f"{d.capacity_requests_per_second_per_replica:.3g} requests/s per replica; {_usd(d.usd_per_day)}/day, "
            f"{_usd(d.usd_per_million_output_tokens)} and {d.kwh_per_million_output_tokens or 0:.3g} kWh per 1M output "
            f"tokens; SLO attainment {d.slo_attainment or 0:.1%}, met in {d.hours_slo_met}/24 hours",
            *([f"    adapters: {d.adapters}"] if d.adapters else []),
            f"    peak check: {d.verification}",
            f"    spares: {spares}",
            f"    scale-up delay {d.scale_up_delay_seconds:.0f} s: {d.scale_up_delay_source}",
        ]
    lines += ["", "Pools:"]
    for p in answer.pools:
        lines.append(
            f"  {p.name} ({p.gpu}): peak {p.peak_gpus} GPUs at {p.peak_hour:02d}:00, trough {p.trough_gpus}, "
            f"{p.reserved_gpus} reserved, {p.spare_gpus} spare; {_usd(p.cost.usd_per_day)}/day; "
            f"{p.energy_kwh_per_day:,.0f} kWh/day at {p.board_watts:.0f} W board / {p.idle_watts:.0f} W idle, PUE {p.pue:g}"
        )
    if answer.comparisons:
        lines += ["", "Comparisons (per month, against this plan):"]
        for cmp in answer.comparisons:
            gap = "" if cmp.feasible else f" [not all planned: {', '.join(cmp.infeasible) or cmp.note}]"
            lines.append(
                f"  {cmp.label}: {_usd(cmp.usd_per_month)} ({cmp.delta_usd_per_month:+,.0f}){gap} — {cmp.note}"
            )
    if answer.rejected:
        lines += ["", "Left out:"] + [f"  {r.what} '{r.name}': {r.why}" for r in answer.rejected]
    if answer.warnings:
        lines += ["", "Warnings:"] + [f"  {w}" for w in answer.warnings]
    lines += ["", "Assumptions:"] + [f"  {a}" for a in answer.assumptions]
    return "\n".join(lines) + "\n"
