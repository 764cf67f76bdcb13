"""The Trade-offs page's constrained searches: the inference search (GPU types and counts, TP/PP, weight and KV
formats, concurrency) with its Pareto frontier and best plan at a fixed latency, cost or memory, and the training
search (layout, ZeRO, recomputation, micro-batch). Each is a form in a fragment: it runs only when Search is
pressed. The searches are planner.search.grid_search's, through ui.state's caches; widget keys are
``tradeoffs_``-prefixed and bound to the URL.
"""

from __future__ import annotations

import streamlit as st

from planner import plan as make_plan
from planner import units
from planner.dtypes import DTYPES, KV_DTYPES
from planner.export import plans_to_csv
from planner.hardware.catalog import list_accelerators
from planner.search import grid_search
from planner.search.sweep import scenario_for_row, training_scenario_for_row
from planner.units import GIB
from ui import render, state, tradeoff_charts
from ui import tradeoff_data as data

SPEC_KEY = "tradeoffs_search_spec"
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
TRAINING_GPU_COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024)
CONCURRENCY_STOPS = tuple(data.powers_of_two(1, 8192))


def _row_link(base):

    def link(row) -> str:
        scenario = scenario_for_row(base, row)
        return render.share_link("inference", render.scenario_params(scenario))

    return link


def _gpu_names() -> dict[str, str]:

    return {a.id: a.name for a in list_accelerators()}


def _seed(key: str, value) -> None:
    """A bound widget's first value: the link's (Streamlit reads it) or this default."""
    if key not in st.session_state and key not in st.query_params:
        st.session_state[key] = value


def _search_space(scenario) -> dict:
    """The search space's widgets (seeded from this plan): GPU types and count, weight and KV formats, concurrency."""
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
    return dict(
        gpus=tuple(gpus),
        max_gpus=int(max_gpus),
        weight_dtypes=tuple(weights),
        kv_cache_dtypes=tuple(kv),
        concurrency=(int(concurrency[0]), int(concurrency[1])),
    )


def _search_bounds() -> dict:
    """The constraints (empty: none) and the objective."""
    st.markdown("**Constraints** (empty: none) **and objective**")
    c = st.columns(6)
    ttft = _limit_box(c[0], "TTFT ≤ (s)", "tradeoffs_max_ttft_s", step=0.1)
    tpot = _limit_box(c[1], "TPOT ≤ (ms)", "tradeoffs_max_tpot_ms", step=5.0)
    memory = _limit_box(
        c[2],
        "Memory per GPU ≤ (GiB)",
        "tradeoffs_max_memory_gib",
        step=8.0,
        help="On top of each GPU's own budget (every result fits its GPU).",
    )
    usd = _limit_box(c[3], "$ per hour ≤", "tradeoffs_max_usd_per_hour", step=10.0)
    objective = c[4].selectbox(
        "Objective", list(data.OBJECTIVES.values()), key="tradeoffs_objective", bind="query-params"
    )
    top = c[5].number_input(
        "Show the top", min_value=1, max_value=100, value=10, step=5, key="tradeoffs_top", bind="query-params"
    )
    return dict(
        max_ttft_seconds=ttft,
        max_tpot_seconds=None if tpot is None else tpot / 1e3,
        max_memory_bytes=None if memory is None else memory * GIB,
        max_usd_per_hour=usd,
        objective={label: column for column, label in data.OBJECTIVES.items()}[objective],
        top=int(top),
    )


def search_form(scenario) -> grid_search.InferenceSearchSpec | None:
    with st.form("tradeoffs_search_form", border=True, enter_to_submit=False):
        space = _search_space(scenario)
        bounds = _search_bounds()
        submitted = st.form_submit_button(
            "Search", icon=":material/search:", type="primary", key="tradeoffs_search_run"
        )
    if not submitted:
        return None
    return grid_search.InferenceSearchSpec(**space, **bounds)


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
    _training_search_form(scenario)
    spec = st.session_state.get("tradeoffs_tsearch_spec")
    result = None if spec is None else state.cached_training_search(scenario, spec, calibration)
    if not search_summary(
        result,
        f" ({render.md_escape(spec.describe())})" if spec else "",
        data.TRAINING_OBJECTIVES[spec.objective] if spec else "",
        "more memory savers",
    ):
        return
    _training_results(scenario, result)


def _training_search_form(scenario) -> None:
    """The training search form (seeded from this plan); a submitted form leaves its spec in the session."""
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
        days = _limit_box(c[0], "Time to train ≤ (days)", "tradeoffs_tsearch_days")
        memory = _limit_box(c[1], "Memory per GPU ≤ (GiB)", "tradeoffs_tsearch_memory")
        budget = _limit_box(c[2], "Cost to train ≤ ($)", "tradeoffs_tsearch_budget")
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


def _training_results(scenario, result) -> None:
    """The top configurations, the cost-vs-time frontier (chart and table) and its CSV."""
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


def _limit_box(where, label: str, key: str, step: float | None = None, help: str | None = None):
    """An optional upper limit of a search (empty: none), bound to the link."""
    options = {"step": step} if step is not None else {}
    return where.number_input(
        label,
        min_value=0.0,
        value=None,
        format="%g",
        key=key,
        bind="query-params",
        placeholder="any",
        help=help,
        **options,
    )
