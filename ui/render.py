"""Rendering a plan: verdict, metrics with their equations, binding resource, charts, assumptions (the training
page's own parts: ui.training_view).

Every number shown comes from the Plan object; formatting goes through planner.units (via ui.text).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from planner import units
from planner.export import plans_to_csv, plans_to_summary_csv
from planner.results import STREAM_WARNING_CODES, coded_warnings
from planner.search.roofline_points import plan_roofline
from planner.share import scenario_to_query_params
from planner.verdict import Verdict, memory_verdict
from ui import bands, calibration_view, charts, deploy_view, energy_view, speculative_view, state
from ui.text import component_label, equation_help, fmt, gpu_short_name, md_escape, resource_label

# --------------------------------------------------------------------------------------- helpers


def chart(spec: dict, **kwargs) -> None:
    """Draw a compiled chart from ui.charts (Vega-Lite built with Altair; data attached per run)."""
    st.vega_lite_chart(spec=spec, **kwargs)


def plan_title(plan) -> str:
    scenario = plan.scenario
    if scenario.label:
        return scenario.label
    return f"{plan.model.name} · {scenario.num_gpus}× {gpu_short_name(plan.hardware.name)}"


def link_warnings(warnings: Sequence[str]) -> None:
    if warnings:
        st.warning(
            "**This link had problems; the plan below uses defaults for them.**\n\n"
            + "\n".join(f"- {md_escape(w)}" for w in warnings),
            icon=":material/link_off:",
        )


def calibration_caption(calibration, scenario=None, scenarios: Sequence = ()) -> None:
    """This session's calibration as a loud banner (label, device, and per plan whether it applies: its GPU, and a
    benchmark calibration's serving stack); `scenarios` are the plans' scenarios when there is no single one
    (Review)."""
    calibration_view.calibration_banner(calibration, [scenario] if scenario is not None else scenarios, md_escape)


def metric_with_band(
    where, label: str, value: str, help: str | None, band_text: str | None, band_help: str = ""
) -> None:
    """st.metric with its likely range (plan.uncertainty) in the metric's grey pill; how the range is made in
    the help tooltip, after the equation."""
    if band_text and band_help:
        help = (help + "\n\n---\n\n" if help else "") + md_escape(band_help)
    where.metric(label, value, delta=band_text, delta_color="off", delta_arrow="off", help=help)


def plan_warnings(plan) -> None:
    # The verdict above already says that (and by how much) the plan does not fit; the stream's own warnings stand in
    # its Serve traffic section.
    shown = [w.message for w in coded_warnings(plan) if w.code != "does_not_fit" and w.code not in STREAM_WARNING_CODES]
    if shown:
        st.warning("\n".join(f"- {md_escape(w)}" for w in shown), icon=":material/warning:")


def assumptions(plan, expanded: bool = False) -> None:
    with st.expander(f"Assumptions this estimate rests on ({len(plan.assumptions)})", expanded=expanded):
        st.markdown("\n".join(f"- {md_escape(a)}" for a in plan.assumptions))
        if plan.calibration:
            st.caption(f"Calibration: {plan.calibration}")
        else:
            st.caption("No calibration: documented default efficiencies (see the Calibrate page).")


def equations(plan, expanded: bool = False) -> None:
    with st.expander(f"How each number is computed ({len(plan.equations)} equations)", expanded=expanded):
        for eq in plan.equations:
            st.markdown(f"**{md_escape(eq.name)} = {md_escape(fmt(eq.value, eq.unit))}**")
            st.code(f"{eq.formula}\n= {eq.substituted}", language=None, wrap_lines=True)
            if eq.source:
                st.caption(f"Source: {eq.source}")


# ------------------------------------------------------------------------------------- share bar


def share_link(page: str, params: dict[str, Any]) -> str:
    base = st.context.url or f"http://localhost:8501/{page}"
    base = base.split("?", 1)[0].rstrip("/")
    if not base.endswith("/" + page):
        base = re.sub(r"/[^/]*$", "", base) if base.count("/") > 2 else base
        base = f"{base}/{page}"
    query = urlencode({**params, **calibration_view.link_params()}, doseq=True)  # this session's calibration
    return base + (f"?{query}" if query else "")


def share_bar(
    page: str, params: dict[str, Any], plans: Sequence, file_stem: str, scenario=None, key: str | None = None
) -> None:
    """Copy share link · Download CSV · Pin for Compare (when a scenario is given)."""
    key = key or page
    cols = st.columns([1, 1, 1, 1, 1] if scenario is not None else [1, 1, 1, 2])
    with cols[0].popover("Copy share link", icon=":material/link:", width="stretch"):
        st.caption("Anyone who opens this link sees exactly this plan. Click the copy icon of the box.")
        st.code(share_link(page, params), language=None, wrap_lines=True)
    if plans:
        cols[1].download_button(
            "Download CSV",
            data=plans_to_csv(plans),
            file_name=f"{file_stem}.csv",
            mime="text/csv",
            key=f"{key}_action_csv",
            on_click="ignore",
            icon=":material/download:",
            width="stretch",
            help="One row per plan: every input, every output (raw values, units in the column names) and the "
            "decision text. Import it on Compare to restore the plans exactly.",
        )
        cols[2].download_button(
            "Summary CSV",
            data=plans_to_summary_csv(plans),
            file_name=f"{file_stem}-summary.csv",
            mime="text/csv",
            key=f"{key}_action_summary_csv",
            on_click="ignore",
            icon=":material/table_view:",
            width="stretch",
            help="The headline answers for people: one row per plan, GiB, ms, $ and tokens/s rounded to 4 "
            "significant digits, plain column names. For re-import use the full CSV.",
        )
    if scenario is not None:
        if cols[3].button(
            "Pin for Compare",
            key=f"{key}_action_pin",
            icon=":material/push_pin:",
            width="stretch",
            help="Keep this plan to compare it with others and review it later.",
        ):
            added, _ = state.add_pins([scenario], "session")
            st.toast(
                "Pinned for Compare." if added else "This exact plan is already pinned.", icon=":material/push_pin:"
            )


def scenario_of(plan):
    return state.scenario_class(plan.kind).model_validate(plan.scenario)


def scenario_params(scenario) -> dict[str, str]:
    return scenario_to_query_params(scenario, f"{scenario.kind}_")


# ------------------------------------------------------------------------------------- inference


VERDICT_BOX = {"met": st.success, "at_risk": st.warning, "missed": st.error}
VERDICT_ICON = {"met": ":material/check_circle:", "at_risk": ":material/error:", "missed": ":material/cancel:"}


def verdict_markdown(v: Verdict) -> str:
    """The engine's sentence with its headline in bold: '**Fits in GPU memory:** each GPU needs …'."""
    head, _, rest = v.sentence.partition(": ")
    return f"**{md_escape(head)}:** {md_escape(rest)}" if rest else md_escape(v.sentence)


def memory_detail(plan) -> str:
    """Headroom when the plan fits, the shortfall when it does not (at the point estimate)."""
    mem = plan.memory
    if mem.fits:
        return f" Headroom at the estimate: **{units.percent(mem.headroom_fraction)}** ({units.gib(mem.headroom_bytes)} free per GPU)."
    return f" **{units.gib(-mem.headroom_bytes)} short per GPU** at the estimate."


def verdict_box(v: Verdict, text: str) -> None:
    VERDICT_BOX[v.status](text, icon=VERDICT_ICON[v.status])


def verdict(plan) -> None:
    """Fits / may not fit / does not fit: the engine's memory verdict over the whole likely range."""
    v = memory_verdict(plan)
    verdict_box(v, verdict_markdown(v) + memory_detail(plan))


IF_IT_FIT_CSS = """
<style>
[class*="st-key-if_it_fit_"] [data-testid="stMetricValue"] { opacity: 0.45; }
[class*="st-key-if_it_fit_"] [data-testid="stMetricDelta"] { opacity: 0.6; }
</style>
"""


def if_it_fit(plan, key: str):
    """A container for the speed and cost metrics. When the plan does not fit they are hypothetical: the
    container says so above them and greys their values (CSS on its key)."""
    box = st.container(key=f"if_it_fit_{key}" if not plan.memory.fits else f"speed_{key}")
    if not plan.memory.fits:
        st.html(IF_IT_FIT_CSS)
        box.markdown(
            f"#### :gray[If it fit]\n:gray[It does not: each GPU is {units.gib(-plan.memory.headroom_bytes)} short. "
            "The speed and cost below are what this layout would give with enough memory; they are not on offer.]"
        )
    return box


FIX_KIND_WORDS = {
    "layout": "another layout",
    "more_gpus": "more GPUs",
    "next_gpu": "the next GPU up",
    "precision": "number format",
    "fewer_users": "fewer users",
    "shorter_context": "shorter context",
    "technique": "technique",
    "smaller_model": "smaller model",
}


def suggestion_link(scenario_data: dict, kind: str) -> str:
    """This dashboard's share link for a suggested scenario (this session's calibration travels with it)."""
    return share_link(kind, scenario_params(state.scenario_class(kind).model_validate(scenario_data)))


def fixes_section(scenario, calibration, key: str) -> None:
    """The engine's suggestions that fix a plan that does not fit (planner.search.fixes), ranked by cost: one row
    each (label, what changes, headline) with an 'Open' link button; `key`: the page prefix of the widget keys."""
    found = state.cached_suggestions(scenario, calibration)
    if not found.items:
        st.markdown(
            "**Suggestions that fix the plan:** no single change the searches try fits; the Trade-offs page "
            "combines techniques and searches layouts."
        )
        return
    st.markdown("**Suggestions that fix the plan** (each opens as its own plan)")
    st.caption(md_escape(found.ranked_by))
    for s in found.items:
        url = suggestion_link(s.scenario, scenario.kind)
        digest = hashlib.sha1(url.encode()).hexdigest()[:10]  # keys from the answer, never from its place
        text, button = st.columns([6, 1.2], vertical_alignment="center")
        text.markdown(
            f"**{md_escape(s.label)}** · {FIX_KIND_WORDS[s.kind]}  \n{md_escape(s.summary)}  \n"
            f":gray[{md_escape(s.headline)}]"
        )
        button.link_button(
            "Open",
            url,
            key=f"{key}_fix_{s.kind}_{digest}",
            icon=":material/open_in_new:",
            width="stretch",
            help=f"Open '{s.label}' as its own plan (new tab).",
        )
    if found.not_found:
        st.caption(md_escape(" ".join(found.not_found) + f" The next GPU up: {found.next_gpu_rule}."))


def binding(plan) -> None:
    st.info(
        f"**Binding resource: {resource_label(plan.bottleneck)}.** {md_escape(plan.bottleneck_reason)}",
        icon=":material/speed:",
    )


def inference_header(plan) -> None:
    s = plan.scenario
    layout = f"TP {s.tensor_parallel}"
    if s.pipeline_parallel > 1:
        layout += f" · PP {s.pipeline_parallel}"
    if s.expert_parallel > 1:
        layout += f" · EP {s.expert_parallel}"
    replicas = s.num_gpus // (s.tensor_parallel * s.pipeline_parallel)
    st.caption(
        f"**{md_escape(plan.model.name)}** ({units.count(plan.model.params_total)} parameters"
        + (
            f", {units.count(plan.model.params_active)} active"
            if plan.model.params_active != plan.model.params_total
            else ""
        )
        + f") on **{s.num_gpus} × {md_escape(plan.hardware.name)}** · {layout} · {replicas} "
        f"replica{'s' if replicas != 1 else ''} · weights {s.weight_dtype}, KV cache {s.kv_cache_dtype} · "
        f"{s.prompt_tokens:,} prompt + {s.output_tokens:,} output tokens × {s.concurrency:,} in flight"
        + (" · serving a simulated stream (below)" if s.traffic else "")
    )


def inference_metrics(plan) -> None:
    perf, cost, mem = plan.performance, plan.cost, plan.memory
    s = plan.scenario
    likely = bands.inference_texts(plan)
    # Max concurrency and context are memory facts: above the greyed "if it fit" group when it does not fit.
    facts = st.columns(3) if not mem.fits else None
    group = if_it_fit(plan, "inference")
    row1 = group.columns(3)
    metric_with_band(
        row1[0],
        "Time to first token",
        units.seconds(perf.ttft_seconds),
        equation_help(plan, "TTFT", note="An idle replica: queueing is not modelled."),
        likely["Time to first token"],
        bands.basis(plan, "performance.ttft_seconds"),
    )
    metric_with_band(
        row1[1],
        "Time per output token",
        units.seconds(perf.tpot_seconds),
        equation_help(plan, "TPOT", "Decode step", "Decode time per token (speculative)"),
        likely["Time per output token"],
        bands.basis(plan, "performance.tpot_seconds"),
    )
    metric_with_band(
        row1[2],
        "Output tokens/s",
        f"{units.count(perf.output_tokens_per_second)}",
        equation_help(
            plan,
            "Output tokens/s",
            note=f"{units.count(perf.output_tokens_per_second_per_gpu)} per GPU, "
            f"{perf.requests_per_second:,.2f} requests/s.",
        ),
        likely["Output tokens/s"],
        bands.basis(plan, "performance.output_tokens_per_second"),
    )
    row2 = group.columns(3)
    metric_with_band(
        row2[0],
        "$ per 1M output tokens",
        units.usd(cost.usd_per_million_output_tokens),
        equation_help(
            plan,
            "$ per 1M output tokens",
            note=f"{units.usd(cost.usd_per_hour)}/hour, {units.usd(cost.usd_per_month)}"
            f"/month at {units.usd(cost.usd_per_gpu_hour)} per GPU-hour"
            + (" (catalog reference price)." if plan.hardware.usd_per_gpu_hour_is_reference else " (your price)."),
        ),
        likely["$ per 1M output tokens"],
        "At a fixed price per GPU-hour the cost per token moves inversely with throughput. "
        + bands.basis(plan, "performance.output_tokens_per_second"),
    )
    context = s.context_tokens
    memory_cols = facts if facts is not None else row2[1:]
    memory_cols[0].metric(
        "Max concurrency",
        f"{mem.max_concurrency:,}" if mem.max_concurrency is not None else "n/a",
        help=f"Most sequences of {context:,} tokens whose KV cache fits in the memory left per GPU after "
        f"weights, activations and overhead, over all replicas ({mem.kv_blocks or 0:,} KV blocks "
        f"of {s.kv_block_tokens} tokens per GPU).",
    )
    memory_cols[1].metric(
        "Max context",
        units.count(mem.max_context_tokens) + " tokens" if mem.max_context_tokens is not None else "n/a",
        help=f"Longest context each of the {s.concurrency:,} sequences could hold with the same memory "
        f"(capped at the model's {plan.model.max_context_tokens:,} tokens).",
    )
    if plan.cost.gpus_needed is not None:
        group.caption(
            f"To serve {s.target_requests_per_second:g} requests/s: **{plan.cost.gpus_needed} GPUs** "
            f"({plan.cost.replicas_needed} replicas of {s.tensor_parallel * s.pipeline_parallel})."
        )
    energy_view.inference_energy(group, plan)


def memory_chart(plan, budget_label: str = "engine budget") -> None:
    mem = plan.memory
    st.markdown("**Memory per GPU**")
    eq_names = [e.name for e in plan.equations if e.unit == "bytes" and "per GPU" in e.name]
    parts = " · ".join(f"{component_label(k)} {units.gib(v)}" for k, v in mem.components.items() if v > 0)
    limits = f"solid line: capacity {units.gib(mem.capacity_bytes)}"
    if abs(mem.budget_bytes - mem.capacity_bytes) > 1:
        limits = f"dashed line: {budget_label} {units.gib(mem.budget_bytes)}; " + limits
    st.caption(
        f"{parts} · total {units.gib(mem.total_bytes)} ({limits})",
        help=equation_help(plan, *eq_names) if eq_names else None,
    )
    chart(charts.memory_bar(mem.components, mem.budget_bytes, mem.capacity_bytes, budget_label), width="stretch")


def roofline_chart(plan) -> None:
    perf, hw = plan.performance, plan.hardware
    phases = "prefill, decode and the verify step" if perf.speculative else "prefill and decode"
    st.markdown(f"**Roofline: where {phases} sit on this GPU**")
    st.caption(
        f"{hw.compute_dtype} peak {units.rate(hw.peak_flops_per_second, 'FLOP/s')}, HBM "
        f"{units.rate(hw.memory_bandwidth_bytes_per_second, 'B/s')}; points at their achieved rate per GPU "
        "(below the roof by the efficiency factors and communication)."
    )
    chart(charts.roofline(plan_roofline(plan)), width="stretch")


EXPLORE_CURVE = "Latency vs throughput"
EXPLORE_GRID = "Concurrency × context"


@st.fragment
def explore(scenario, plan, calibration=None) -> None:
    """The sweeps: each view is many plans, so it only runs when chosen, and reruns alone."""
    st.markdown("#### Explore this scenario")
    view = st.segmented_control(
        "Sweep",
        [EXPLORE_CURVE, EXPLORE_GRID],
        default=EXPLORE_CURVE,
        key="inference_view_explore",
        label_visibility="collapsed",
        help="Each view re-plans this scenario many times; pick one at a time. Hover for numbers.",
    )
    if view == EXPLORE_CURVE:
        frame = state.concurrency_sweep(scenario, plan.memory.max_concurrency, calibration)
        if frame.empty:
            st.info("No concurrency level gives a valid plan.")
            return
        st.caption(
            "Each point is the full plan at that concurrency: more sequences in flight raise throughput "
            "and time per token until memory runs out (✕)."
        )
        chart(charts.latency_curve(frame, scenario.concurrency), width="stretch")
    elif view == EXPLORE_GRID:
        frame = state.context_grid(scenario, plan.memory.max_concurrency, plan.model.max_context_tokens, calibration)
        if frame.empty:
            st.info("No (concurrency, context) pair gives a valid plan.")
            return
        st.caption(
            "Colour: output tokens/s where the plan fits in memory; grey ✕: does not fit. The outlined cell "
            f"is this plan. Output stays {scenario.output_tokens:,} tokens; the prompt takes the rest."
        )
        chart(
            charts.heatmap(frame, (scenario.concurrency, scenario.prompt_tokens + scenario.output_tokens)),
            width="stretch",
        )
    else:
        st.caption("Pick a view above.")


def inference_summary(scenario, plan, calibration=None) -> None:
    """The plan at a glance: header, verdict, share bar, metrics, binding resource, memory and roofline."""
    inference_header(plan)
    calibration_caption(calibration, scenario)
    verdict(plan)
    if not plan.memory.fits:
        fixes_section(scenario, calibration, "inference")
    share_bar("inference", scenario_params(scenario), [plan], "headroom-inference-plan", scenario=scenario)
    inference_metrics(plan)
    speculative_view.speculative_summary(plan)
    binding(plan)
    plan_warnings(plan)
    left, right = st.columns(2, gap="large")
    with left:
        memory_chart(plan)
    with right:
        roofline_chart(plan)


def inference_details(scenario, plan, calibration=None) -> None:
    """The sweeps, the deploy commands, every equation and the assumptions."""
    explore(scenario, plan, calibration)
    deploy_view.deploy_section(plan, "inference")
    equations(plan)
    assumptions(plan)


def inference_page(scenario, plan, calibration=None) -> None:
    inference_summary(scenario, plan, calibration)
    inference_details(scenario, plan, calibration)
