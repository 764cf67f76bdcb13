"""The Trade-offs page: diagnosis, the checklist in words, the technique map, where each technique moves the
plan, a constrained search with its Pareto frontier (ui.search_view), and (ui.slo_search_view) the layouts that
serve the plan's request stream within its SLO.

Every answer is an engine output (planner.search: techniques, diagnose, checklist, alternatives, grid_search,
and plan()), through ui.state's caches; ui.tradeoff_data turns them into tables and chart data,
ui.tradeoff_charts into charts. Widget keys are ``tradeoffs_``-prefixed and bound to the URL.
"""

from __future__ import annotations

import streamlit as st

from planner import units
from planner.results import warning_of
from planner.search.checklist import checklist
from planner.search.words import ranked_shares
from ui import render, search_view, slo_search_view, state, tradeoff_charts, training_view
from ui import tradeoff_data as data
from ui.text import component_label, resource_label

KIND_KEY = "tradeoffs_kind"
TEXT_ROW_HEIGHT_PX = 84  # four lines of wrapped text
VIEW_KEY = "tradeoffs_view_position"
VIEW_MEMORY, VIEW_ROOFLINE = "Memory vs time", "Roofline (decode)"


# ------------------------------------------------------------------------------------------- links


def scenario_link(kind: str, scenario_dict: dict | None) -> str | None:
    """The share link that opens a full alternative scenario (an effect's `scenario`) as its own plan."""
    if not scenario_dict:
        return None
    scenario = state.scenario_class(kind).model_validate(scenario_dict)
    return render.share_link(kind, render.scenario_params(scenario))


# ------------------------------------------------------------------------------------------ header


def kind_picker() -> str:
    """Which scenario the page works on: the Inference page's or the Training page's."""
    if not state.training_available():
        return "inference"
    kind = st.segmented_control(
        "Scenario",
        ["Inference", "Training"],
        default="Inference",
        key=KIND_KEY,
        required=True,
        bind="query-params",
        help="The trade-offs of the current Inference plan or the current Training plan "
        "(the same scenario those pages show).",
    )
    return (kind or "Inference").lower()


def kv_warning(plan) -> None:
    if warning_of(plan, "kv_exceeds_weights") is not None:  # the engine's warning, by its code
        kv, weights = plan.memory.components["kv_cache_bytes"], plan.memory.components["weights_bytes"]
        st.warning(
            f"**The KV cache ({units.gib(kv)} per GPU) is larger than the weights ({units.gib(weights)}) at "
            f"{plan.scenario.concurrency:,} sequences in flight.** Memory now grows with concurrency and "
            "context, not with the model: KV-cache quantization, a shorter context, fewer sequences per "
            "replica or more replicas buy more than shrinking the weights.",
            icon=":material/warning:",
        )


# --------------------------------------------------------------------------------------- diagnosis


def diagnosis_section(plan, diagnosis, effects, kind: str) -> None:
    st.subheader("Diagnosis", anchor=False)
    mem = plan.memory
    cols = st.columns(4)
    cols[0].metric(
        "Binding resource",
        resource_label(diagnosis.binding).capitalize(),
        help=render.md_escape(plan.bottleneck_reason),
    )
    if kind == "inference":
        ai, ridge = diagnosis.arithmetic_intensity_flops_per_byte, diagnosis.ridge_point_flops_per_byte
        where = f"{ridge / ai:.1f}× below the ridge" if ai < ridge else f"{ai / ridge:.1f}× above the ridge"
        cols[1].metric(
            "Arithmetic intensity",
            f"{ai:,.0f} FLOP/B",
            where,
            delta_color="off",
            delta_arrow="off",
            help="FLOPs per byte moved in one step of the dominant phase, per GPU.",
        )
        cols[2].metric(
            "Ridge point",
            f"{ridge:,.0f} FLOP/B",
            help="Peak FLOP/s ÷ HBM bandwidth of this GPU: a step below it is bandwidth-bound, above it compute-bound.",
        )
    else:
        cols[1].metric("MFU", units.percent(plan.performance.mfu, 1))
        cols[2].metric(
            "Headroom",
            units.percent(mem.headroom_fraction),
            f"{units.gib(mem.headroom_bytes)} per GPU",
            delta_color="off",
            delta_arrow="off",
        )
    dominant = mem.dominant_component
    cols[3].metric(
        "Largest memory component",
        component_label(dominant),
        f"{units.percent(mem.components[dominant] / mem.total_bytes)} of {units.gib(mem.total_bytes)}",
        delta_color="off",
        delta_arrow="off",
    )
    st.markdown("\n".join(f"- {render.md_escape(e)}" for e in diagnosis.evidence))
    left, right = st.columns(2, gap="large")
    with left:
        if kind == "inference":
            phase = "decode" if plan.performance.prefill_share_of_time <= 0.5 else "prefill"
            rows = [(k, v, units.percent(v)) for k, v in ranked_shares(diagnosis.time_shares)]
            title = f"Share of a {phase} step's resource time"
        else:
            breakdown = plan.performance.step_breakdown_seconds
            rows = [
                (k, v, units.seconds(breakdown.get(k + "_seconds", 0.0)))
                for k, v in ranked_shares(diagnosis.time_shares)
            ]
            title = "Share of an optimizer step"
        st.markdown(f"**Where the time goes** ({title.lower()})")
        render.chart(tradeoff_charts.shares(rows, title), width="stretch")
    with right:
        rows = [
            (k, v, units.gib(mem.components.get(k + "_bytes", 0.0))) for k, v in ranked_shares(diagnosis.memory_shares)
        ]
        st.markdown(f"**Where the memory goes** (share of {units.gib(mem.total_bytes)} per GPU)")
        render.chart(tradeoff_charts.shares(rows, "Share of the memory per GPU"), width="stretch")
    relief_list(plan, diagnosis, kind)


def relief_list(plan, diagnosis, kind: str) -> None:
    st.markdown(f"**What relieves {resource_label(diagnosis.binding)}, best first**")
    if not diagnosis.relief:
        st.caption("No proposed technique relieves it without breaking the memory budget.")
        return
    lines = []
    for rank, e in enumerate(diagnosis.relief, start=1):
        link = scenario_link(kind, e.scenario)
        parts = data.relief_parts(kind, e)
        fits = "" if e.fits_after is None else (" · fits after" if e.fits_after else " · :red[still does not fit]")
        tags = (
            fits + (" · :orange[changes numerics]" if e.changes_numerics else "") + (" · derived" if e.derived else "")
        )
        open_link = f" · [open as plan]({link})" if link else ""
        lines.append(
            f"{rank}. **{render.md_escape(e.technique)}**: {render.md_escape(e.variant)} — "
            f"{render.md_escape(', '.join(parts))}{tags}{open_link}"
        )
    st.markdown("\n".join(lines))


# --------------------------------------------------------------------------------------- checklist


DECISION_HINT = {
    "inference": "Write it in **Decision** (sidebar, *Notes for the review*) on the Inference page.",
    "training": "Write it in **Decision** (sidebar, *Notes for the review*) on the Training page.",
}


def checklist_section(kind: str, answers, alternatives) -> None:
    """The engine's checklist (bold headline, then its numbers) and links to the simpler alternatives."""
    st.subheader("The checklist", anchor=False)
    with st.container(border=True):
        for item in answers.items:
            st.markdown(f"**{item.question}**")
            body = f"**{render.md_escape(item.headline)}** {render.md_escape(item.detail)}".strip()
            if item.level == "warning":
                hint = f" {DECISION_HINT[kind]}" if item.topic == "decision" else ""
                st.warning(body + hint, icon=":material/edit_note:")
            else:
                st.markdown(body)
            if item.topic == "simpler" and alternatives:
                st.markdown(
                    "\n".join(
                        f"- {render.md_escape(a.model_name)}, {a.context_tokens:,} tokens of context "
                        f"({'fits' if a.fits else 'does not fit'}, {units.percent(a.headroom_fraction)} headroom)"
                        f" · [open as plan]({scenario_link(kind, a.scenario)})"
                        for a in alternatives
                    )
                )


# ---------------------------------------------------------------------------------- technique map


def technique_section(kind: str, plan, effects) -> None:
    st.subheader("Technique map", anchor=False)
    time_label, _ = data.time_unit(kind)
    st.caption(
        f"Each row is this plan with one technique applied, minus this plan: memory per GPU, {time_label}"
        + (", TTFT" if kind == "inference" else "")
        + ", throughput and cost. Negative memory and time are "
        "better. *Full plan* rows are a second complete plan (open it with the link); *derived* rows are "
        "estimated from this plan's own terms, because the engine has no switch for them."
    )
    frame = data.technique_frame(kind, effects, lambda s: scenario_link(kind, s))
    names = data.columns(kind)
    config = {
        names["memory"]: st.column_config.NumberColumn(format="%+.2f"),
        names["time"]: st.column_config.NumberColumn(format="%+.3g"),
        names["throughput"]: st.column_config.NumberColumn(format="%+.4g"),
        # Costs read as money ('+$1.62M'), from planner.units; the number stays in the data for sorting.
        names["cost"]: None,
        data.COST_TEXT: st.column_config.TextColumn(names["cost"].removesuffix(" ($)")),
        "Changes numerics?": st.column_config.CheckboxColumn(),
        "Open as plan": st.column_config.LinkColumn(
            display_text="open ↗", help="Opens this alternative as a full plan (new tab)."
        ),
        "Relieves": st.column_config.TextColumn(width="medium"),
        "Costs": st.column_config.TextColumn(width="large"),
        "Watch": st.column_config.TextColumn(width="large"),
    }
    if kind == "inference":
        config[names["ttft"]] = st.column_config.NumberColumn(format="%+.3g")
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config=config,
        key="tradeoffs_table",
        # Rows taller than 4 rem let Streamlit wrap the long text columns instead of cutting them off.
        row_height=TEXT_ROW_HEIGHT_PX,
        height=min(38 + TEXT_ROW_HEIGHT_PX * len(frame), 760),
    )
    skipped = data.inapplicable(effects)
    if skipped:
        st.markdown(
            "**Not applicable here:**\n"
            + "\n".join(
                f"- {render.md_escape(t)} ({render.md_escape(v)}): {render.md_escape(r)}" for t, v, r in skipped
            )
        )
    points = data.technique_points(kind, effects, plan)
    if len(points):
        title = time_label.split(" (")[0]
        st.markdown(f"**Δ memory per GPU vs Δ {title}** (lower-left is better on both; hover for details)")
        render.chart(tradeoff_charts.technique_map(points, title), width="stretch")


# ------------------------------------------------------------------------------- where it sits


def position_section(kind: str, plan, effects, calibration) -> None:
    st.subheader("Compute, bandwidth and memory: where the plan sits", anchor=False)
    views = [VIEW_MEMORY, VIEW_ROOFLINE] if kind == "inference" else [VIEW_MEMORY]
    view = VIEW_MEMORY
    if len(views) > 1:
        view = (
            st.segmented_control(
                "View",
                views,
                default=VIEW_MEMORY,
                key=VIEW_KEY,
                required=True,
                label_visibility="collapsed",
                bind="query-params",
            )
            or VIEW_MEMORY
        )
    time_label, factor = data.time_unit(kind)
    title, unit = time_label.split(" (")[0], ("ms" if kind == "inference" else "s")
    if view == VIEW_MEMORY:
        mem = plan.memory
        base_time = plan.performance.tpot_seconds if kind == "inference" else plan.performance.step_seconds
        st.caption(
            f"Black ring: this plan ({units.gib(mem.total_bytes)} per GPU, {units.seconds(base_time)} per "
            f"{'output token' if kind == 'inference' else 'step'}). Each arrow ends where one technique moves it; "
            "right of the dashed line does not fit the budget, right of the solid one not even the GPU."
        )
        points = data.technique_points(kind, effects, plan)
        if len(points):
            ceiling = tradeoff_charts.position_ceiling(points, base_time * factor)
            over = points[points["time"] > ceiling]
            if len(over):
                st.caption(
                    "↑ Off the top of the chart: "
                    + "; ".join(
                        f"{render.md_escape(v)} ({t} per {'token' if kind == 'inference' else 'step'})"
                        for v, t in zip(over["variant"], over["time_text"])
                    )
                    + "."
                )
        render.chart(
            tradeoff_charts.position(
                points,
                mem,
                base_time * factor,
                units.seconds(base_time),
                title,
                unit,
                "engine budget" if kind == "inference" else "capacity",
            ),
            width="stretch",
        )
    else:
        hw = plan.hardware
        base, moves = data.roofline_moves(effects, plan)
        st.caption(
            f"The decode step on one GPU: {hw.compute_dtype} peak {units.rate(hw.peak_flops_per_second, 'FLOP/s')}, "
            f"HBM {units.rate(hw.memory_bandwidth_bytes_per_second, 'B/s')}. Left of the ridge a step is "
            "bandwidth-bound: techniques that raise the intensity (fewer bytes per FLOP: lower precision, more "
            "sequences per step) move it right and up. Derived techniques have no plan to place."
        )
        render.chart(
            tradeoff_charts.roofline_moves(hw.peak_flops_per_second, hw.memory_bandwidth_bytes_per_second, base, moves),
            width="stretch",
        )


# --------------------------------------------------------------------------------------------- page


def tradeoffs_page(kind: str, scenario, plan, calibration) -> None:
    effects = state.cached_techniques(scenario, calibration)
    diagnosis = state.cached_diagnosis(scenario, calibration)
    st.markdown(f"##### Current {kind} plan: {render.md_escape(render.plan_title(plan))}")
    (render.inference_header if kind == "inference" else training_view.training_header)(plan)
    render.calibration_caption(calibration, scenario)
    kv_warning(plan)
    if not plan.memory.fits:
        render.verdict(plan) if kind == "inference" else training_view.training_verdict(plan)
        render.fixes_section(scenario, calibration, "tradeoffs")
    diagnosis_section(plan, diagnosis, effects, kind)
    alternatives = state.cached_simpler(scenario, calibration)
    answers = checklist(
        scenario, calibration, base=plan, effects=effects, diagnosis=diagnosis, alternatives=alternatives
    )
    checklist_section(kind, answers, alternatives)
    technique_section(kind, plan, effects)
    position_section(kind, plan, effects, calibration)
    if kind == "inference":
        search_view.search_section(scenario, plan, calibration)
        slo_search_view.slo_search_section(scenario, calibration)
    else:
        search_view.training_search_section(scenario, plan, calibration)
    params = render.scenario_params(scenario)
    if kind != "inference":
        params[KIND_KEY] = kind.capitalize()
    render.share_bar("tradeoffs", params, [plan], f"headroom-{kind}-plan", key="tradeoffs")
    render.assumptions(plan)
