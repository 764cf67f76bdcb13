"""The Trade-offs page's SLO search: the cheapest layouts that serve the plan's request stream within its SLO.

The engine answers (planner.search.slo_search.run_slo_search, cached in ui.state): the search space is swept
statically, the two exact bounds prune, and the best candidates by the objective are simulated under the
stream until enough meet every target. This module only draws the form, the summary and the table.

Keys (bound to the URL, ``tradeoffs_slo_``-prefixed): the SLO boxes (empty: the stream's own target), the search
space and the budget; ``tradeoffs_slo_request`` (session state, not a widget): the last submitted form.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from planner import PlanningError, explain
from planner.dtypes import DTYPES
from planner.hardware.catalog import list_accelerators
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Slo
from planner.search import grid_search
from planner.search.slo_search import ASSUMPTIONS, DEFAULT_MAX_SIMULATIONS
from planner.search.sweep import scenario_for_row
from ui import render, state
from ui import traffic_text as words
from ui.specs import field_facts
from ui.tradeoff_data import OBJECTIVES, slo_result_table

REQUEST_KEY = "tradeoffs_slo_request"
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_SIMULATIONS = 12
MS_PER_SECOND = 1000


@dataclass(frozen=True)
class SloRequest:
    """The submitted form: targets typed on the page (None: the stream's own) and the search space."""

    percentile: int | None
    ttft_seconds: float | None
    tpot_seconds: float | None
    e2e_latency_seconds: float | None
    gpus: tuple[str, ...]
    max_gpus: int
    weight_dtypes: tuple[str, ...]
    objective: str
    top: int
    max_simulations: int

    def slo(self, scenario) -> Slo:
        """The page's targets over the stream's own SLO (a target typed here replaces the stream's)."""
        own = scenario.traffic.slo if scenario.traffic is not None and scenario.traffic.slo else Slo()
        return Slo(
            ttft_seconds=self.ttft_seconds if self.ttft_seconds is not None else own.ttft_seconds,
            tpot_seconds=self.tpot_seconds if self.tpot_seconds is not None else own.tpot_seconds,
            e2e_latency_seconds=self.e2e_latency_seconds
            if self.e2e_latency_seconds is not None
            else own.e2e_latency_seconds,
            # a percentile picked here applies to every target; else each keeps the stream's own
            percentile=self.percentile if self.percentile is not None else own.percentile,
            ttft_percentile=None if self.percentile is not None else own.ttft_percentile,
            tpot_percentile=None if self.percentile is not None else own.tpot_percentile,
            e2e_latency_percentile=None if self.percentile is not None else own.e2e_latency_percentile,
        )

    def spec(self, scenario) -> grid_search.InferenceSearchSpec:
        """The search space: the scenario's KV format and concurrency, the form's GPUs and weight formats."""
        return grid_search.InferenceSearchSpec(
            gpus=self.gpus,
            max_gpus=self.max_gpus,
            weight_dtypes=self.weight_dtypes,
            kv_cache_dtypes=(scenario.kv_cache_dtype,),
            concurrency=(scenario.concurrency, scenario.concurrency),
            objective=self.objective,
            top=self.top,
        )


def _seed(key: str, value) -> None:
    if key not in st.session_state and key not in st.query_params:
        st.session_state[key] = value


def _own(slo: Slo | None, name: str, scale: float = 1.0) -> str:
    value = None if slo is None else getattr(slo, name)
    return "no target" if value is None else f"{value * scale:g} (the stream's)"


def _target_box(where, label: str, name: str, key: str, own: Slo | None, scale: float = 1.0):
    facts = field_facts(Slo, name)
    lo, hi = facts.widget_range(1 / scale)
    return where.number_input(
        label,
        min_value=lo,
        max_value=hi,
        value=None,
        step=0.5 if scale == 1 else 5.0,
        format="%g",
        key=key,
        bind="query-params",
        placeholder=_own(own, name, scale),
        help=f"{words.PLAIN[name].capitalize()} at the SLO percentile. Empty: the stream's own target "
        "(Inference page, Serve traffic).",
    )


def slo_form(scenario) -> SloRequest | None:
    names = {a.id: a.name for a in list_accelerators() if a.vendor != "cpu"}
    gpu_options = list(names) + ([scenario.gpu_id()] if scenario.gpu_id() not in names else [])
    _seed("tradeoffs_slo_gpus", [scenario.gpu_id()])
    _seed("tradeoffs_slo_max_gpus", next((n for n in GPU_COUNTS if n >= max(8, scenario.num_gpus)), GPU_COUNTS[-1]))
    _seed("tradeoffs_slo_weight_dtypes", [scenario.weight_dtype])
    own = scenario.traffic.slo
    percentile_facts = field_facts(Slo, "percentile")
    with st.form("tradeoffs_slo_form", border=True, enter_to_submit=False):
        st.markdown("**SLO** (empty: the stream's own target)")
        c = st.columns(4)
        percentile = c[0].selectbox(
            "Percentile",
            percentile_facts.options(),
            index=None,
            format_func=lambda p: f"p{p}",
            key="tradeoffs_slo_percentile",
            bind="query-params",
            placeholder=f"p{(own or Slo()).percentile} (the stream's)",
            help="Each target is met when this percentile of the requests is at or below it.",
        )
        ttft = _target_box(c[1], "TTFT ≤ (s)", "ttft_seconds", "tradeoffs_slo_ttft_s", own)
        tpot = _target_box(c[2], "TPOT ≤ (ms)", "tpot_seconds", "tradeoffs_slo_tpot_ms", own, MS_PER_SECOND)
        e2e = _target_box(c[3], "End-to-end ≤ (s)", "e2e_latency_seconds", "tradeoffs_slo_e2e_s", own)
        st.markdown("**Search space and budget**")
        c = st.columns([3, 1, 2, 2, 1, 1])
        gpus = c[0].multiselect(
            "GPU types",
            gpu_options,
            key="tradeoffs_slo_gpus",
            bind="query-params",
            format_func=lambda g: names.get(g, "this plan's custom GPU"),
        )
        max_gpus = c[1].selectbox(
            "Max GPUs", GPU_COUNTS, key="tradeoffs_slo_max_gpus", bind="query-params", help="Powers of two up to this."
        )
        weights = c[2].multiselect(
            "Weight formats", list(DTYPES), key="tradeoffs_slo_weight_dtypes", bind="query-params"
        )
        objective = c[3].selectbox(
            "Objective",
            list(OBJECTIVES.values()),
            index=list(OBJECTIVES).index("usd_per_hour"),
            key="tradeoffs_slo_objective",
            bind="query-params",
            help="Serving a fixed rate, a deployment costs its hourly price: $ per hour is the default.",
        )
        top = c[4].number_input(
            "Show", min_value=1, max_value=10, value=3, step=1, key="tradeoffs_slo_top", bind="query-params"
        )
        budget = c[5].number_input(
            "Simulations",
            min_value=1,
            max_value=DEFAULT_MAX_SIMULATIONS,
            value=DEFAULT_SIMULATIONS,
            step=4,
            key="tradeoffs_slo_max_simulations",
            bind="query-params",
            help=f"At most this many candidates are simulated (each a few tenths of a second), up to "
            f"{DEFAULT_MAX_SIMULATIONS}.",
        )
        submitted = st.form_submit_button(
            "Find layouts meeting the SLO", icon=":material/speed:", type="primary", key="tradeoffs_slo_run"
        )
    if not submitted:
        return None
    return SloRequest(
        percentile=None if percentile is None else int(percentile),
        ttft_seconds=ttft,
        tpot_seconds=None if tpot is None else tpot / MS_PER_SECOND,
        e2e_latency_seconds=e2e,
        gpus=tuple(gpus),
        max_gpus=int(max_gpus),
        weight_dtypes=tuple(weights),
        objective={label: column for column, label in OBJECTIVES.items()}[objective],
        top=int(top),
        max_simulations=int(budget),
    )


def _row_link(base, traffic):
    """A share link per answer: the layout with the stream it was simulated under (the SLO searched for)."""

    def link(row) -> str:
        fields = scenario_for_row(base, row).model_dump()
        scenario = InferenceScenario.model_validate({**fields, "traffic": traffic.model_dump()})
        return render.share_link("inference", render.scenario_params(scenario))

    return link


def _assumptions(scenario, traffic, calibration) -> list[str]:
    lines = list(ASSUMPTIONS)
    try:
        probe = InferenceScenario.model_validate({**scenario.model_dump(), "traffic": traffic.model_dump()})
        lines += TrafficEngine.of(probe, state.applicable(probe, calibration)).assumptions()
    except PlanningError:
        pass  # this plan's own layout cannot serve the stream; the search's own assumptions still hold
    return lines


@st.fragment
def slo_search_section(scenario, calibration) -> None:
    """Runs only when its button is pressed (a form in a fragment); the answer is cached per scenario."""
    st.subheader("Layouts that meet a traffic SLO", anchor=False)
    traffic = scenario.traffic
    if traffic is None:
        st.info(
            "**This plan serves no request stream.** Switch on *Serve traffic* on the Inference page (a rate, "
            "lengths, SLO targets) to search the cheapest layouts that keep this stream within its SLO.",
            icon=":material/info:",
        )
        return
    st.caption(
        f"This plan's request stream ({render.md_escape(words.stream_text(traffic))}) simulated on each candidate "
        f"layout of {render.md_escape(scenario.model)}: every GPU count, TP/PP layout and weight format below, at "
        f"this plan's KV format ({scenario.kv_cache_dtype}) and concurrency ({scenario.concurrency:,}). The "
        "candidates are ranked statically and simulated best first."
    )
    request = slo_form(scenario)
    if request is not None:
        st.session_state[REQUEST_KEY] = request
    request = st.session_state.get(REQUEST_KEY)
    if request is None:
        st.caption("Set the targets (or keep the stream's), then press **Find layouts meeting the SLO**.")
        return
    try:
        slo = request.slo(scenario)
        result = state.cached_slo_search(scenario, request.spec(scenario), slo, request.max_simulations, calibration)
    except (PlanningError, ValueError) as exc:
        st.warning(f"The SLO search cannot run: {render.md_escape(explain(exc))}.", icon=":material/warning:")
        return
    if result.error:
        st.warning(render.md_escape(result.error), icon=":material/warning:")
        return
    target = render.md_escape(words.slo_text(slo))
    rate = words.rate(result.traffic.stream_rate)
    counts = (
        f"{result.configurations:,} configurations swept, {result.candidates:,} pass the static bounds, "
        f"{result.simulations:,} simulated, ranked by {OBJECTIVES[request.objective]}"
    )
    if result.rows.empty:
        hint = (
            "no configuration can keep up with the rate within the TTFT target even idle: allow more GPUs or "
            "faster GPU types"
            if result.candidates == 0
            else "loosen a target, allow more GPUs or GPU types, or raise the simulation budget"
        )
        st.info(
            f"**No candidate meets {target} at {rate}.** {counts}; {hint}.",
            icon=":material/search_off:",
        )
    else:
        st.markdown(f"**{len(result.rows)} layout(s) meet {target} at {rate}** ({counts}).")
        frame = slo_result_table(result.rows, slo, _row_link(scenario, result.traffic))
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_config={
                "Layout": st.column_config.TextColumn(width="large"),
                "$ per hour": st.column_config.NumberColumn(format="$%.2f"),
                "SLO attainment (%)": st.column_config.NumberColumn(format="%.1f"),
                "Goodput (req/s)": st.column_config.NumberColumn(format="%.3g"),
                "Open as plan": st.column_config.LinkColumn(display_text="open ↗"),
                **{c: st.column_config.NumberColumn(format="%.1f") for c in frame.columns if c.endswith("(ms)")},
            },
            key="tradeoffs_slo_table",
        )
    with st.expander("Assumptions of the SLO search"):
        st.markdown("\n".join(f"- {render.md_escape(a)}" for a in _assumptions(scenario, result.traffic, calibration)))
