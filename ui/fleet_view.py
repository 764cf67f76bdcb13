"""The Fleet page's answer: the manager's sentence, the day's charts, the bill, energy, spares, the deployments,
the comparisons, the assumptions and the CSV — every number from `planner.fleet` (FleetAnswer), formatted here.

Precision: the bill in $k/month (two or three significant figures), energy and CO2e to two, rates to two or three;
a capacity from a few hundred simulated requests is not better than that.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from planner import units
from planner.errors import PlanningError, explain
from planner.fleet import FleetAnswer, fleet_csv, manager_summary, parse_fleet, plan_fleet
from planner.fleet.answer import Rejected
from ui import fleet_charts

CACHE_ENTRIES = 32


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Simulating the fleet's load curves…")
def planned_fleet(fleet_json: str) -> FleetAnswer | str:
    """The fleet's answer, or the sentence saying why it cannot be planned; keyed by the fleet's canonical JSON
    (each session's fleet is its own key: nothing one session edits changes another's numbers)."""
    try:
        return plan_fleet(json.loads(fleet_json), workers=1)
    except (PlanningError, ValidationError) as exc:
        return explain(exc)


def check_fleet(doc: dict) -> tuple[str | None, list[Rejected]]:
    """Validation alone (fast, no simulation): the sentence when nothing can be planned, and what is left out."""
    try:
        _, rejected = parse_fleet(doc)
    except (PlanningError, ValidationError) as exc:
        return explain(exc), []
    return None, rejected


# ------------------------------------------------------------------------------------------------ formats


def _sig(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    rounded = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{rounded:,.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"


def _share(part: float, whole: float) -> str:
    return units.percent(part / whole) if whole else "–"


def every_slo_met(answer: FleetAnswer) -> bool:
    return all(d.feasible for d in answer.deployments) and answer.hours_every_slo_met == len(answer.hours)


# ------------------------------------------------------------------------------------------------ sections


def summary(answer: FleetAnswer) -> None:
    sentence = manager_summary(answer)
    with st.container(key="fleet_summary"):
        if every_slo_met(answer):
            st.success(sentence, icon=":material/check_circle:")
        else:
            st.warning(sentence, icon=":material/warning:")
    for r in answer.rejected:
        st.warning(f"{r.what.capitalize()} '{r.name}' left out: {r.why}", icon=":material/block:")
    for w in answer.warnings:
        st.warning(w, icon=":material/info:")


def bill(answer: FleetAnswer) -> None:
    c, month = answer.cost, answer.days_per_month
    cols = st.columns(5)
    cols[0].metric(
        "Monthly bill", f"{units.usd_compact(answer.usd_per_month)}/month", help=f"{answer.days_per_month:.2f} days"
    )
    cols[1].metric(
        "Reserved",
        units.usd_compact(c.reserved_usd_per_day * month),
        f"{_share(c.reserved_usd_per_day, c.usd_per_day)} of the bill",
        delta_color="off",
        delta_arrow="off",
        help="Each pool's daily trough (spares included) reserved for 24 h.",
    )
    cols[2].metric(
        "On demand",
        units.usd_compact((c.on_demand_usd_per_day + c.scale_up_usd_per_day + c.spot_reserve_usd_per_day) * month),
        f"{_share(c.on_demand_usd_per_day + c.scale_up_usd_per_day + c.spot_reserve_usd_per_day, c.usd_per_day)}"
        " of the bill",
        delta_color="off",
        delta_arrow="off",
        help=f"Peaks above the reserved base {units.usd_compact(c.on_demand_usd_per_day * month)}, replicas starting before their "
        f"hour {units.usd_compact(c.scale_up_usd_per_day * month)}, reclaimed spot groups re-served "
        f"{units.usd_compact(c.spot_reserve_usd_per_day * month)} (per month).",
    )
    cols[3].metric(
        "Spot",
        units.usd_compact(c.spot_usd_per_day * month),
        f"{_share(c.spot_usd_per_day, c.usd_per_day)} of the bill",
        delta_color="off",
        delta_arrow="off",
    )
    cols[4].metric(
        "GPUs",
        f"{answer.peak_gpus} at {answer.peak_hour:02d}:00",
        f"trough {answer.trough_gpus}; {_sig(answer.gpu_hours_per_day, 2)} GPU-h/day",
        delta_color="off",
        delta_arrow="off",
    )


def charts(answer: FleetAnswer) -> None:
    left, right = st.columns(2)
    with left:
        st.markdown("**GPUs by deployment** (serving, and the spares)")
        st.altair_chart(fleet_charts.gpus_by_deployment(answer), key="fleet_chart_deployments", width="stretch")
    with right:
        st.markdown("**GPUs by pricing**")
        st.altair_chart(fleet_charts.gpus_by_pricing(answer), key="fleet_chart_pricing", width="stretch")


def energy_and_spares(answer: FleetAnswer) -> None:
    month = answer.days_per_month
    cols = st.columns(4)
    cols[0].metric("Energy per day", units.kwh(answer.energy_kwh_per_day))
    cols[1].metric("Energy per month", units.kwh(answer.energy_kwh_per_day * month))
    cols[2].metric(
        "CO2e per month",
        units.kg(answer.co2e_kg_per_day * month),
        f"at {answer.carbon_kg_per_kwh:.2g} kg/kWh",
        delta_color="off",
        delta_arrow="off",
    )
    cols[3].metric(
        "Electricity per month",
        units.usd_compact(answer.electricity_usd_per_day * month),
        "not in the bill",
        delta_color="off",
        delta_arrow="off",
        help=f"At ${answer.electricity_usd_per_kwh:.2g}/kWh; cloud GPU-hour prices include power.",
    )
    st.markdown(f"**Spares: {answer.spare_gpus} GPU{'s' if answer.spare_gpus != 1 else ''}**")
    for d in answer.deployments:
        if d.feasible and d.spares is not None:
            st.caption(f"**{d.name}**: {d.spares.why}")


def deployments_table(answer: FleetAnswer) -> pd.DataFrame:
    rows = []
    for d in answer.deployments:
        if not d.feasible:
            rows.append({"Deployment": d.name, "Model": d.model, "Runs on": f"not planned: {d.why}"})
            continue
        rows.append(
            {
                "Deployment": d.name,
                "Model": d.model,
                "Runs on": f"{d.pool} · {d.gpu} · {d.layout}",
                "Replicas": f"{d.trough_replicas}–{d.peak_replicas}",
                "Peak (req/s)": f"{_sig(d.peak_requests_per_second, 2)} at {d.peak_hour:02d}:00",
                "Capacity per replica (req/s)": _sig(d.capacity_requests_per_second_per_replica, 2),
                "$/month": units.usd_compact(d.usd_per_day * answer.days_per_month),
                "$ per 1M output tokens": units.usd_approx(d.usd_per_million_output_tokens),
                "kWh per 1M output tokens": units.kwh(d.kwh_per_million_output_tokens),
                "SLO attainment": units.percent(d.slo_attainment, 1) if d.slo_attainment is not None else "–",
                "Hours SLO met": f"{d.hours_slo_met}/24",
                "Verified at peak": {True: "yes", False: "no", None: "–"}[d.verified_at_peak],
            }
        )
    return pd.DataFrame(rows)


def deployments(answer: FleetAnswer) -> None:
    st.dataframe(deployments_table(answer), hide_index=True, key="fleet_table_deployments")
    for d in answer.deployments:
        if d.feasible and d.verification:
            st.caption(f"**{d.name}** peak check: {d.verification}")
        if d.feasible and d.adapters:
            st.caption(f"**{d.name}** serves {d.adapters}.")


def comparisons_table(answer: FleetAnswer) -> pd.DataFrame:
    rows = [
        {
            "Plan": "this plan",
            "$/month": units.usd_compact(answer.usd_per_month),
            "Against this plan": "–",
            "Peak GPUs": answer.peak_gpus,
            "Every deployment planned": "yes" if all(d.feasible for d in answer.deployments) else "no",
        }
    ]
    for c in answer.comparisons:
        delta = c.delta_usd_per_month
        rows.append(
            {
                "Plan": c.label,
                "$/month": units.usd_compact(c.usd_per_month),
                "Against this plan": ("+" if delta > 0 else "−" if delta < 0 else "±") + units.usd_compact(abs(delta)),
                "Peak GPUs": c.peak_gpus,
                "Every deployment planned": "yes" if c.feasible else f"no: {', '.join(c.infeasible) or c.note}",
            }
        )
    return pd.DataFrame(rows)


def comparisons(answer: FleetAnswer) -> None:
    if not answer.comparisons:
        st.caption("No comparison applies to this fleet (one pool, nothing to pack).")
        return
    st.dataframe(comparisons_table(answer), hide_index=True, key="fleet_table_comparisons")
    for c in answer.comparisons:
        st.caption(f"**{c.label}**: {c.note}")


def pools(answer: FleetAnswer) -> None:
    rows = [
        {
            "Pool": p.name,
            "GPU": p.gpu,
            "Deployments": ", ".join(p.deployments),
            "Peak GPUs": f"{p.peak_gpus} at {p.peak_hour:02d}:00" + (f" (max {p.max_gpus})" if p.max_gpus else ""),
            "Trough GPUs": p.trough_gpus,
            "Reserved GPUs": p.reserved_gpus,
            "Spare GPUs": p.spare_gpus,
            "$/month": units.usd_compact(p.cost.usd_per_day * answer.days_per_month),
            "Energy per day": units.kwh(p.energy_kwh_per_day),
            "Power": f"{units.watts(p.board_watts)} board / {units.watts(p.idle_watts)} idle, PUE {p.pue:g}",
        }
        for p in answer.pools
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="fleet_table_pools")


def assumptions(answer: FleetAnswer) -> None:
    with st.expander("Assumptions", icon=":material/menu_book:"):
        for line in answer.assumptions:
            st.markdown(f"- {line}")


def export(answer: FleetAnswer, link: str) -> None:
    left, right, _ = st.columns([1, 1, 3])
    with left.popover("Copy share link", icon=":material/link:", width="stretch"):
        st.caption("Anyone who opens this link sees this whole fleet. Click the copy icon of the box.")
        st.code(link, language=None, wrap_lines=True)
    right.download_button(
        "Download CSV (per hour)",
        data=fleet_csv(answer),
        file_name="fleet-hours.csv",
        mime="text/csv",
        key="fleet_action_csv",
        on_click="ignore",
        icon=":material/download:",
        width="stretch",
        help="One row per hour and deployment (the engine's export; units in the column names).",
    )


def headline(answer: FleetAnswer, link: str) -> None:
    """The top of the page: the sentence, the link and the CSV, the bill, the day's charts."""
    summary(answer)
    export(answer, link)
    bill(answer)
    charts(answer)


def details(answer: FleetAnswer) -> None:
    """Below the fleet's tables: energy and spares, deployments, pools, comparisons, assumptions."""
    st.subheader("Energy and spares", anchor=False)
    energy_and_spares(answer)
    st.subheader("Deployments", anchor=False)
    deployments(answer)
    st.subheader("Pools", anchor=False)
    pools(answer)
    st.subheader("Comparisons", anchor=False)
    comparisons(answer)
    assumptions(answer)
