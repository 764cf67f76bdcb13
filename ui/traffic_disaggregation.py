"""The Traffic section's prefill/decode disaggregation: the same stream on a prefill pool and a decode pool.

The engine answers (planner.inference.disaggregation: ``simulate_disaggregated`` for a split chosen here,
``best_split`` for every split), cached in ui.state; this module draws the control, colocated and disaggregated
side by side, best_split's table and the engine's assumptions.

Keys (``inference_view_``-prefixed, session state only): ``inference_view_disaggregate`` (off / a split / the
best split), ``inference_view_prefill_gpus``, ``inference_view_prefill_tp``. Like the page's other views (the
sweeps) they stay out of the share link: the link describes the scenario (``inference_*`` parameters are its
fields, and planner.share reports any other as unknown), and a split is one analysis of that scenario, not a
field of it; opening the link and choosing the split again gives the same numbers (seeded simulation).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planner import PlanningError, explain
from planner.inference.disaggregation import ASSUMPTIONS, DisaggregatedLayout
from ui import render, state
from ui import traffic_text as words
from ui.specs import field_facts

MODE_KEY = "inference_view_disaggregate"
PREFILL_GPUS_KEY = "inference_view_prefill_gpus"
PREFILL_TP_KEY = "inference_view_prefill_tp"
# Short columns, three significant figures: best_split's table fits the section's width at 1280 px.
SPLIT_COLUMNS = {
    "GPUs (P / D)": st.column_config.TextColumn(width="small"),
    "Replicas (P / D)": st.column_config.TextColumn(width="small"),
    **{
        name: st.column_config.NumberColumn(format="%.3g", width="small")
        for name in ("p99 TTFT (ms)", "p99 TPOT (ms)", "Completed (req/s)", "Goodput (req/s)", "KV transfer (ms)")
    },
    "SLO met (%)": st.column_config.NumberColumn(format="%.1f", width="small"),
}
OFF, SPLIT, BEST = "Colocated only", "Split the GPUs", "Best split"


def _help(name: str) -> str | None:
    return field_facts(DisaggregatedLayout, name).help()


def _layout_inputs(scenario) -> DisaggregatedLayout | str:
    """The prefill pool's GPUs and TP (ranges from DisaggregatedLayout's fields, capped by the scenario's GPUs), or
    one sentence saying why those inputs make no layout."""
    per_replica = scenario.tensor_parallel * scenario.pipeline_parallel
    gpus_facts, tp_facts = (
        field_facts(DisaggregatedLayout, "prefill_gpus"),
        field_facts(DisaggregatedLayout, "prefill_tensor_parallel"),
    )
    lo, hi = gpus_facts.widget_range()
    hi = min(hi, max(lo, scenario.num_gpus - 1))
    left, right, _ = st.columns([1, 1, 2])
    prefill_gpus = left.number_input(
        "Prefill GPUs",
        min_value=lo,
        max_value=hi,
        value=min(per_replica, hi),
        step=1,
        key=PREFILL_GPUS_KEY,
        help=f"{_help('prefill_gpus')}, out of this plan's {scenario.num_gpus:,}.",
    )
    tp_lo, tp_hi = tp_facts.widget_range()
    prefill_tp = right.number_input(
        "Prefill TP",
        min_value=tp_lo,
        max_value=min(tp_hi, hi),
        value=min(scenario.tensor_parallel, hi),
        step=1,
        key=PREFILL_TP_KEY,
        help=f"{_help('prefill_tensor_parallel')}; the decode replicas keep this plan's TP {scenario.tensor_parallel}"
        f" × PP {scenario.pipeline_parallel}.",
    )
    try:
        return DisaggregatedLayout(prefill_gpus=int(prefill_gpus), prefill_tensor_parallel=int(prefill_tp))
    except ValueError as exc:
        return explain(exc)


def _side_by_side(colocated, split, kv_transfer_seconds: float, label: str) -> None:
    rows = words.comparison_rows(colocated, split, kv_transfer_seconds)
    frame = pd.DataFrame(rows).set_index("")
    frame.columns = [f"Colocated ({colocated.replicas} replicas)", f"Disaggregated ({label})"]
    st.table(frame)


def _assumptions(result) -> None:
    layout = result.layout
    pools = (
        f"This split: {result.prefill_replicas} prefill replica(s) of {layout.prefill_tensor_parallel} GPU(s) and "
        f"{result.decode_replicas} decode replica(s)."
    )
    with st.expander(f"Assumptions of the disaggregated simulation ({len(ASSUMPTIONS) + 1})"):
        st.markdown("\n".join(f"- {render.md_escape(a)}" for a in (*ASSUMPTIONS, pools)))


@st.fragment
def disaggregation_section(scenario, plan, calibration=None) -> None:
    """Off by default; a split or the best split reruns only this fragment, and each answer is cached."""
    st.markdown("**Disaggregated prefill/decode**")
    mode = st.segmented_control(
        "Prefill/decode",
        [OFF, SPLIT, BEST],
        default=OFF,
        key=MODE_KEY,
        label_visibility="collapsed",
        help="Serve prompts on a prefill pool and generate on a decode pool (DistServe, Splitwise, Dynamo), each "
        "prompt's KV cache sent between them; compared with this deployment serving both on every GPU.",
    )
    if mode in (None, OFF):
        st.caption(
            "Every replica above prefills and decodes (colocated). Split the GPUs into a prefill pool and a decode "
            "pool to see whether removing their interference beats the KV transfer and the idle halves."
        )
        return
    total = scenario.num_gpus
    if mode == SPLIT:
        layout = _layout_inputs(scenario)
        if isinstance(layout, str):
            st.warning(f"That split is not a layout: {render.md_escape(layout)}.", icon=":material/block:")
            return
        try:
            result = state.disaggregated(scenario, layout, calibration)
        except PlanningError as exc:
            st.warning(
                f"This split cannot serve the stream: {render.md_escape(explain(exc))}.", icon=":material/block:"
            )
            return
        st.caption(words.SIMULATED + " Same stream, same seed, on the same GPUs.")
        _side_by_side(
            plan.traffic, result.traffic, result.kv_transfer_seconds_mean, words.split_label(layout.prefill_gpus, total)
        )
        _assumptions(result)
        return
    try:
        comparison = state.split_comparison(scenario, calibration)
    except PlanningError as exc:
        st.warning(f"The splits cannot be simulated: {render.md_escape(explain(exc))}.", icon=":material/block:")
        return
    if comparison.best is None:
        reason = comparison.reason[0].upper() + comparison.reason[1:]
        st.info(f"{render.md_escape(reason)}.", icon=":material/info:")  # the engine's reason names the GPUs needed
        return
    box = st.success if comparison.disaggregation_wins else st.info
    verdict = "Disaggregation wins" if comparison.disaggregation_wins else "Colocated is as good or better"
    box(f"**{verdict}:** {render.md_escape(comparison.reason)}.", icon=":material/call_split:")
    best = comparison.best
    _side_by_side(
        comparison.colocated,
        best.traffic,
        best.kv_transfer_seconds_mean,
        "best, " + words.split_label(best.layout.prefill_gpus, total),
    )
    st.markdown(
        f"**Every split tried** (prefill replicas with this plan's TP {scenario.tensor_parallel}; P / D: prefill and "
        "decode replicas; SLO met: share of requests meeting every target)"
    )
    st.dataframe(
        pd.DataFrame(words.split_rows(comparison.splits, total)),
        hide_index=True,
        width="stretch",
        column_config=SPLIT_COLUMNS,
        key="inference_view_splits",
    )
    _assumptions(best)
