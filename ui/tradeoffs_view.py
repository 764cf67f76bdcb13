"""The Trade-offs page: diagnosis, the checklist in words, the technique map, where each technique moves the
plan, a constrained search with its Pareto frontier, and (ui.slo_search_view) the layouts that serve the plan's
request stream within its SLO.

Every answer is an engine output (planner.search: techniques, diagnose, checklist, alternatives, grid_search,
and plan()), through ui.state's caches; ui.tradeoff_data turns them into tables and chart data,
ui.tradeoff_charts into charts. Widget keys are ``tradeoffs_``-prefixed and bound to the URL.
"""

from __future__ import annotations

import streamlit as st

from planner import plan as make_plan
from planner import units
from planner.dtypes import DTYPES, KV_DTYPES
from planner.export import plans_to_csv
from planner.hardware.catalog import list_accelerators
from planner.results import warning_of
from planner.search import grid_search
from planner.search.checklist import checklist
from planner.search.sweep import scenario_for_row, training_scenario_for_row
from planner.search.words import ranked_shares
from planner.units import GIB
from ui import render, slo_search_view, state, tradeoff_charts
from ui import tradeoff_data as data
from ui.text import component_label, resource_label

KIND_KEY = "tradeoffs_kind"
TEXT_ROW_HEIGHT_PX = 84  # four lines of wrapped text
VIEW_KEY = "tradeoffs_view_position"
VIEW_MEMORY, VIEW_ROOFLINE = "Memory vs time", "Roofline (decode)"
SPEC_KEY = "tradeoffs_search_spec"
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
TRAINING_GPU_COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024)
CONCURRENCY_STOPS = tuple(data.powers_of_two(1, 8192))


# ------------------------------------------------------------------------------------------- links


def scenario_link(kind: str, scenario_dict: dict | None) -> str | None:
    """The share link that opens a full alternative scenario (an effect's `scenario`) as its own plan."""
    if not scenario_dict:
        return None
    scenario = state.scenario_class(kind).model_validate(scenario_dict)
    return render.share_link(kind, render.scenario_params(scenario))


def _row_link(base):

    def link(row) -> str:
        scenario = scenario_for_row(base, row)
        return render.share_link("inference", render.scenario_params(scenario))

    return link


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
                mem.total_bytes,
                base_time * factor,
                units.seconds(base_time),
                mem.budget_bytes,
                mem.capacity_bytes,
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


# ------------------------------------------------------------------------------ constrained search


def _gpu_names() -> dict[str, str]:

    return {a.id: a.name for a in list_accelerators()}


def _seed(key: str, value) -> None:
    """A bound widget's first value: the link's (Streamlit reads it) or this default."""
    if key not in st.session_state and key not in st.query_params:
        st.session_state[key] = value


def search_form(scenario) -> grid_search.InferenceSearchSpec | None:
    names = _gpu_names()
    gpu_options = list(names) + (["custom"] if scenario.gpu_id() not in names else [])
    _seed("tradeoffs_gpus", [scenario.gpu_id()])
    _seed("tradeoffs_max_gpus", next((n for n in GPU_COUNTS if n >= max(8, scenario.num_gpus)), GPU_COUNTS[-1]))
    _seed("tradeoffs_weight_dtypes", list(dict.fromkeys([scenario.weight_dtype, "fp8", "int4"])))
    _seed("tradeoffs_kv_dtypes", list(dict.fromkeys([scenario.kv_cache_dtype, "fp8"])))
    low = max(1, min(16, scenario.concurrency))
    high = max(256, min(8192, scenario.concurrency))
    # A range slider's mode comes from its value, so the default is passed (not seeded): the link's wins.
    concurrency_default = (
        min(CONCURRENCY_STOPS, key=lambda v: abs(v - low)),
        min(CONCURRENCY_STOPS, key=lambda v: abs(v - high)),
    )
    with st.form("tradeoffs_search_form", border=True, enter_to_submit=False):
        st.markdown("**Search space**")
        c = st.columns([3, 1, 2, 2])
        gpus = c[0].multiselect(
            "GPU types",
            gpu_options,
            key="tradeoffs_gpus",
            bind="query-params",
            format_func=lambda g: names.get(g, "this plan's custom GPU"),
        )
        max_gpus = c[1].selectbox(
            "Max GPUs",
            GPU_COUNTS,
            key="tradeoffs_max_gpus",
            bind="query-params",
            help="Counts tried: powers of two up to this (and this plan's count).",
        )
        weights = c[2].multiselect("Weight formats", list(DTYPES), key="tradeoffs_weight_dtypes", bind="query-params")
        kv = c[3].multiselect("KV cache formats", list(KV_DTYPES), key="tradeoffs_kv_dtypes", bind="query-params")
        concurrency = st.select_slider(
            "Concurrency range (sequences in flight)",
            CONCURRENCY_STOPS,
            value=concurrency_default,
            key="tradeoffs_concurrency",
            bind="query-params",
            help="Powers of two in this range (and this plan's concurrency).",
        )
        st.markdown("**Constraints** (empty: none) **and objective**")
        c = st.columns(6)
        ttft = c[0].number_input(
            "TTFT ≤ (s)",
            min_value=0.0,
            value=None,
            step=0.1,
            format="%g",
            key="tradeoffs_max_ttft_s",
            bind="query-params",
            placeholder="any",
        )
        tpot = c[1].number_input(
            "TPOT ≤ (ms)",
            min_value=0.0,
            value=None,
            step=5.0,
            format="%g",
            key="tradeoffs_max_tpot_ms",
            bind="query-params",
            placeholder="any",
        )
        memory = c[2].number_input(
            "Memory per GPU ≤ (GiB)",
            min_value=0.0,
            value=None,
            step=8.0,
            format="%g",
            key="tradeoffs_max_memory_gib",
            bind="query-params",
            placeholder="any",
            help="On top of each GPU's own budget (every result fits its GPU).",
        )
        usd = c[3].number_input(
            "$ per hour ≤",
            min_value=0.0,
            value=None,
            step=10.0,
            format="%g",
            key="tradeoffs_max_usd_per_hour",
            bind="query-params",
            placeholder="any",
        )
        objective = c[4].selectbox(
            "Objective", list(data.OBJECTIVES.values()), key="tradeoffs_objective", bind="query-params"
        )
        top = c[5].number_input(
            "Show the top", min_value=1, max_value=100, value=10, step=5, key="tradeoffs_top", bind="query-params"
        )
        submitted = st.form_submit_button(
            "Search", icon=":material/search:", type="primary", key="tradeoffs_search_run"
        )
    if not submitted:
        return None
    return grid_search.InferenceSearchSpec(
        gpus=tuple(gpus),
        max_gpus=int(max_gpus),
        weight_dtypes=tuple(weights),
        kv_cache_dtypes=tuple(kv),
        concurrency=(int(concurrency[0]), int(concurrency[1])),
        max_ttft_seconds=ttft,
        max_tpot_seconds=None if tpot is None else tpot / 1e3,
        max_memory_bytes=None if memory is None else memory * GIB,
        max_usd_per_hour=usd,
        objective={label: column for column, label in data.OBJECTIVES.items()}[objective],
        top=int(top),
    )


def search_summary(result, constraints: str, objective: str, loosen: str) -> bool:
    """What a search found, in one line (or why nothing); True when there are rows to show."""
    if result is None:
        st.caption("Choose the search space and constraints, then press **Search**.")
        return False
    if result.error:
        st.warning(result.error, icon=":material/warning:")
        return False
    st.markdown(
        f"**{len(result.feasible):,} of {result.rows:,} configurations** fit and meet the constraints"
        f"{constraints}; {result.valid:,} were valid layouts, {result.fitting:,} fit. Ranked by {objective}."
    )
    if result.feasible.empty:
        st.info(
            f"Nothing meets every constraint: loosen one, or allow more GPUs or {loosen}.", icon=":material/search_off:"
        )
        return False
    return True


@st.fragment
def search_section(scenario, plan, calibration) -> None:
    """Runs only when Search is pressed (a form in a fragment): other widgets never wait for it."""
    st.subheader("Constrained search", anchor=False)
    st.caption(
        f"Every combination of the GPU types, GPU counts, TP/PP layouts, weight and KV formats and "
        f"concurrencies below, for {plan.model.name} with {scenario.prompt_tokens:,} prompt + "
        f"{scenario.output_tokens:,} output tokens, planned in one vectorized pass. Only "
        "configurations that fit in memory and meet every constraint are kept."
    )
    spec = search_form(scenario)
    if spec is not None:
        st.session_state[SPEC_KEY] = spec
    spec = st.session_state.get(SPEC_KEY)
    result = None if spec is None else state.cached_search(scenario, spec, calibration)
    if not search_summary(
        result,
        f" ({render.md_escape(spec.describe())})" if spec else "",
        data.OBJECTIVES[spec.objective] if spec else "",
        "lower-precision formats",
    ):
        return
    link = _row_link(scenario)
    table_config = {
        "Memory per GPU (GiB)": st.column_config.NumberColumn(format="%.1f"),
        "TTFT (ms)": st.column_config.NumberColumn(format="%.1f"),
        "TPOT (ms)": st.column_config.NumberColumn(format="%.2f"),
        "Output tokens/s": st.column_config.NumberColumn(format="%.4g"),
        "$ per hour": st.column_config.NumberColumn(format="$%.2f"),
        "$ per 1M output tokens": st.column_config.NumberColumn(format="$%.3f"),
        "Open as plan": st.column_config.LinkColumn(display_text="open ↗"),
    }
    st.markdown(f"**Top {len(result.top)}**")
    st.dataframe(
        data.result_table(result.top, link),
        hide_index=True,
        width="stretch",
        column_config=table_config,
        key="tradeoffs_search_top",
    )
    frontier_section(scenario, plan, result, spec, link, table_config, calibration)


def frontier_section(scenario, plan, result, spec, link, table_config, calibration) -> None:
    st.markdown("**Pareto frontier: $ per 1M output tokens vs time per output token**")
    c = st.columns([2.2, 1, 3], vertical_alignment="bottom")
    chosen = c[0].segmented_control(
        "Best plan at a",
        list(data.FIXED.values()),
        default=data.FIXED["latency"],
        required=True,
        key="tradeoffs_fixed",
        bind="query-params",
    )
    fixed = {label: name for name, label in data.FIXED.items()}.get(chosen, "latency")
    current = {
        "latency": plan.performance.tpot_seconds * 1e3,
        "cost": plan.cost.usd_per_million_output_tokens,
        "memory": plan.memory.total_bytes / GIB,
    }[fixed]
    value = c[1].number_input(
        data.FIXED_BOUND[fixed],
        min_value=0.0,
        value=None,
        format="%g",
        key=f"tradeoffs_fixed_{fixed}",
        bind="query-params",
        placeholder=f"{current:.3g} (this plan)",
    )
    value = current if value is None else value
    best = grid_search.best_at(result, fixed, value * data.FIXED_TO_ENGINE[fixed], spec.objective)
    with c[2]:
        if best is None:
            st.caption("No configuration meets that value; the frontier below shows what is possible.")
        else:
            url = link(best)
            bound = data.FIXED_BOUND[fixed].replace(" (ms)", "").replace("$", "\\$")
            unit = {"latency": " ms", "cost": "", "memory": " GiB"}[fixed]
            st.markdown(
                f":red[**Best**] at {bound} {value:.3g}{unit}: **{render.md_escape(data.row_label(best))}** — "
                f"{units.seconds(best['tpot_seconds'])} per token, "
                f"{render.md_escape(units.usd(best['usd_per_million_output_tokens']))} per 1M tokens, "
                f"{units.gib(best['total_bytes'])} per GPU · [open as plan]({url})"
            )
    render.chart(tradeoff_charts.pareto(data.frontier_points(result, best)), width="stretch")
    st.caption(
        f"{len(result.frontier)} frontier configurations: none of the others is both cheaper and faster. "
        "Grey: every other configuration that fits and meets the constraints."
    )
    st.dataframe(
        data.result_table(result.frontier, link),
        hide_index=True,
        width="stretch",
        column_config=table_config,
        key="tradeoffs_frontier_table",
    )
    st.download_button(
        "Download the frontier (CSV)",
        data=lambda: frontier_csv(scenario, result, calibration),
        file_name="headroom-frontier.csv",
        mime="text/csv",
        on_click="ignore",
        key="tradeoffs_frontier_csv",
        icon=":material/download:",
        help="One full plan per frontier point: every input and output with units in the column "
        "names, uncertainty bands included. Import it on Compare to see them side by side.",
    )


def frontier_csv(scenario, result, calibration) -> str:
    """The frontier as planner.export CSV: each point planned in full (importable on Compare)."""

    return plans_to_csv(
        [make_plan(scenario_for_row(scenario, row), calibration) for _, row in result.frontier.iterrows()]
    )


def _training_row_link(base):

    def link(row) -> str:
        return render.share_link("training", render.scenario_params(training_scenario_for_row(base, row)))

    return link


@st.fragment
def training_search_section(scenario, plan, calibration) -> None:
    """Layout x ZeRO x recompute x micro-batch for this training job; runs only when Search is pressed."""
    st.subheader("Constrained search", anchor=False)
    st.caption(
        f"Every combination of GPU type, GPU count (powers of two), TP ≤ 8, PP, ZeRO stage, activation "
        f"recomputation and micro-batch for {plan.model.name}, {scenario.global_batch_size} × "
        f"{scenario.sequence_length:,} tokens per step and {units.count(scenario.training_tokens)} tokens to "
        "train, planned in one vectorized pass. Only configurations that fit and meet every "
        "constraint are kept."
    )
    gpu_ids = [a.id for a in list_accelerators() if a.vendor != "cpu"]
    _seed("tradeoffs_tsearch_gpus", [scenario.gpu_id()] if scenario.gpu_id() in gpu_ids else gpu_ids[:1])
    _seed("tradeoffs_tsearch_max_gpus", min(1024, max(8, 1 << (scenario.num_gpus - 1).bit_length())))
    _seed("tradeoffs_tsearch_zero", [0, 1, 2, 3])
    _seed("tradeoffs_tsearch_recompute", ["none", "selective", "full"])
    _seed("tradeoffs_tsearch_micro", [1, 2, 4])
    with st.form("tradeoffs_training_search_form", border=True, enter_to_submit=False):
        c = st.columns([3, 1])
        gpus = c[0].multiselect("GPU types", gpu_ids, key="tradeoffs_tsearch_gpus", bind="query-params")
        max_gpus = c[1].selectbox(
            "Max GPUs", TRAINING_GPU_COUNTS, key="tradeoffs_tsearch_max_gpus", bind="query-params"
        )
        c = st.columns(3)
        zero = c[0].multiselect("ZeRO stages", [0, 1, 2, 3], key="tradeoffs_tsearch_zero", bind="query-params")
        recompute = c[1].multiselect(
            "Recompute", ["none", "selective", "full"], key="tradeoffs_tsearch_recompute", bind="query-params"
        )
        micro = c[2].multiselect("Micro-batch", [1, 2, 4, 8, 16], key="tradeoffs_tsearch_micro", bind="query-params")
        c = st.columns(4)
        days = c[0].number_input(
            "Time to train ≤ (days)",
            min_value=0.0,
            value=None,
            format="%g",
            key="tradeoffs_tsearch_days",
            bind="query-params",
            placeholder="any",
        )
        memory = c[1].number_input(
            "Memory per GPU ≤ (GiB)",
            min_value=0.0,
            value=None,
            format="%g",
            key="tradeoffs_tsearch_memory",
            bind="query-params",
            placeholder="any",
        )
        budget = c[2].number_input(
            "Cost to train ≤ ($)",
            min_value=0.0,
            value=None,
            format="%g",
            key="tradeoffs_tsearch_budget",
            bind="query-params",
            placeholder="any",
        )
        objective = c[3].selectbox(
            "Objective",
            list(data.TRAINING_OBJECTIVES.values()),
            key="tradeoffs_tsearch_objective",
            bind="query-params",
        )
        submitted = st.form_submit_button(
            "Search", icon=":material/search:", type="primary", key="tradeoffs_tsearch_run"
        )
    if submitted:
        st.session_state["tradeoffs_tsearch_spec"] = grid_search.TrainingSearchSpec(
            gpus=tuple(gpus),
            max_gpus=int(max_gpus),
            zero_stages=tuple(int(z) for z in zero),
            checkpointing=tuple(recompute),
            micro_batch_sizes=tuple(int(m) for m in micro),
            max_time_to_train_seconds=None if days is None else days * 86400,
            max_memory_bytes=None if memory is None else memory * GIB,
            max_usd_total=budget,
            objective={v: k for k, v in data.TRAINING_OBJECTIVES.items()}[objective],
        )
    spec = st.session_state.get("tradeoffs_tsearch_spec")
    result = None if spec is None else state.cached_training_search(scenario, spec, calibration)
    if not search_summary(
        result,
        f" ({render.md_escape(spec.describe())})" if spec else "",
        data.TRAINING_OBJECTIVES[spec.objective] if spec else "",
        "more memory savers",
    ):
        return
    link = _training_row_link(scenario)
    config = {
        "Memory per GPU (GiB)": st.column_config.NumberColumn(format="%.1f"),
        "Step (s)": st.column_config.NumberColumn(format="%.3g"),
        "MFU (%)": st.column_config.NumberColumn(format="%.1f"),
        "Time to train (days)": st.column_config.NumberColumn(format="%.3g"),
        "Cost to train ($)": None,  # shown as money text ('$1.62M') in "Cost to train"
        "Open as plan": st.column_config.LinkColumn(display_text="open ↗"),
    }
    st.markdown(f"**Top {len(result.top)}**")
    st.dataframe(
        data.training_result_table(result.top, link),
        hide_index=True,
        width="stretch",
        column_config=config,
        key="tradeoffs_tsearch_top",
    )
    st.markdown("**Pareto frontier: cost to train vs time to train**")
    render.chart(tradeoff_charts.training_pareto(result.feasible, result.frontier), width="stretch")
    st.dataframe(
        data.training_result_table(result.frontier, link),
        hide_index=True,
        width="stretch",
        column_config=config,
        key="tradeoffs_tsearch_frontier",
    )
    st.download_button(
        "Download the frontier (CSV)",
        data=result.frontier.to_csv(index=False),
        file_name="headroom-training-frontier.csv",
        mime="text/csv",
        on_click="ignore",
        key="tradeoffs_tsearch_csv",
        icon=":material/download:",
    )


# --------------------------------------------------------------------------------------------- page


def tradeoffs_page(kind: str, scenario, plan, calibration) -> None:
    effects = state.cached_techniques(scenario, calibration)
    diagnosis = state.cached_diagnosis(scenario, calibration)
    st.markdown(f"##### Current {kind} plan: {render.md_escape(render.plan_title(plan))}")
    (render.inference_header if kind == "inference" else render.training_header)(plan)
    render.calibration_caption(calibration, scenario)
    kv_warning(plan)
    if not plan.memory.fits:
        render.verdict(plan) if kind == "inference" else render.training_verdict(plan)
    diagnosis_section(plan, diagnosis, effects, kind)
    alternatives = state.cached_simpler(scenario, calibration)
    answers = checklist(
        scenario, calibration, base=plan, effects=effects, diagnosis=diagnosis, alternatives=alternatives
    )
    checklist_section(kind, answers, alternatives)
    technique_section(kind, plan, effects)
    position_section(kind, plan, effects, calibration)
    if kind == "inference":
        search_section(scenario, plan, calibration)
        slo_search_view.slo_search_section(scenario, calibration)
    else:
        training_search_section(scenario, plan, calibration)
    params = render.scenario_params(scenario)
    if kind != "inference":
        params[KIND_KEY] = kind.capitalize()
    render.share_bar("tradeoffs", params, [plan], f"headroom-{kind}-plan", key="tradeoffs")
    render.assumptions(plan)
