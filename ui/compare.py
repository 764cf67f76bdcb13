"""The Compare page's pieces: adding pins (session, share links, CSV), the side-by-side table and charts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planner import units
from ui import charts, controls, links, render, state
from ui.calibration_view import active_calibration
from ui.review import title as plan_title
from ui.text import gpu_short_name


def plan_name(number: int, plan) -> str:
    s = plan.scenario
    name = s.label or f"{plan.model.name} · {s.num_gpus}× {gpu_short_name(plan.hardware.name)}"
    return f"{number} · {name}"


def add_plans_panel() -> None:
    """Three ways in: this session's plans, a share link, a CSV exported by Headroom."""
    has_pins = bool(state.pins())
    with st.expander("Add plans", expanded=not has_pins, icon=":material/add:"):
        left, middle, right = st.columns(3, gap="medium")
        with left:
            st.markdown("**From this session**")
            for kind in ("inference", "training"):
                current = state.remembered(kind)
                label = f"Pin the current {kind} plan"
                if st.button(
                    label,
                    key=f"compare_action_pin_{kind}",
                    disabled=current is None,
                    width="stretch",
                    help=None if current is not None else f"Open the {kind.capitalize()} page first.",
                ):
                    added, _ = state.add_pins([current], "session")
                    st.toast("Pinned." if added else "That plan is already pinned.", icon=":material/push_pin:")
        with middle:
            st.markdown("**From a share link**")
            with st.form("compare_link_form", border=False, clear_on_submit=True):
                url = st.text_input(
                    "Share link",
                    key="compare_link_text",
                    label_visibility="collapsed",
                    placeholder="Paste a Headroom link…",
                )
                submitted = st.form_submit_button("Add from link", icon=":material/link:", width="stretch")
            if submitted:
                scenarios, warnings = links.scenarios_from_link(url)
                added, skipped = state.add_pins(scenarios, "link")
                st.session_state["compare_link_feedback"] = (added, skipped, warnings)
            feedback = st.session_state.get("compare_link_feedback")
            if feedback:
                added, skipped, warnings = feedback
                if added or skipped:
                    st.caption(
                        f"Added {added} plan{'s' if added != 1 else ''}"
                        + (f"; {skipped} already pinned" if skipped else "")
                        + "."
                    )
                for warning in warnings:
                    st.warning(warning)
        with right:
            st.markdown("**From a CSV exported by Headroom**")
            upload = st.file_uploader(
                "Plans CSV",
                type=["csv"],
                key="compare_csv_upload",
                label_visibility="collapsed",
                help="A CSV from any 'Download CSV' button; the plans are restored exactly.",
            )
            if upload is not None and st.session_state.get("compare_csv_done") != upload.file_id:
                st.session_state["compare_csv_done"] = upload.file_id
                scenarios, error = links.scenarios_from_csv_bytes(upload.getvalue())
                if error:
                    st.session_state["compare_csv_feedback"] = ("error", f"{upload.name}: {error}")
                else:
                    added, skipped = state.add_pins(scenarios, "csv")
                    st.session_state["compare_csv_feedback"] = (
                        "ok",
                        f"Imported {added} plan{'s' if added != 1 else ''} from {upload.name}"
                        + (f" ({skipped} already pinned)" if skipped else "")
                        + ".",
                    )
            feedback = st.session_state.get("compare_csv_feedback")
            if feedback:
                (st.error if feedback[0] == "error" else st.success)(feedback[1])


def pinned_list(plans) -> None:
    for number, (pin, plan) in enumerate(plans, start=1):
        with st.container(border=True):
            cols = st.columns([6, 1.4, 1.4, 1.2], vertical_alignment="center")
            decision = plan.scenario.decision or ""
            cols[0].markdown(
                f"**{render.md_escape(plan_name(number, plan))}** · {plan.kind} · from {pin.source}"
                + (
                    f"  \n*Decision:* {render.md_escape(decision[:160])}" + ("…" if len(decision) > 160 else "")
                    if decision
                    else ""
                )
            )
            page = plan.kind
            cols[1].link_button(
                "Open",
                render.share_link(page, render.scenario_params(pin.scenario)),
                icon=":material/open_in_new:",
                width="stretch",
                help=f"Open this plan on the {page.capitalize()} page (new tab).",
            )
            with cols[2].popover("Notes", icon=":material/edit_note:", width="stretch"):
                label = st.text_input("Label", value=pin.scenario.label, max_chars=200, key=f"compare_label_{pin.id}")
                text = st.text_area(
                    "Decision", value=pin.scenario.decision, max_chars=2000, key=f"compare_decision_{pin.id}"
                )
                if st.button("Save", key=f"compare_save_{pin.id}", type="primary"):
                    updated, error = state.build_scenario(
                        pin.scenario.kind, {**controls._fields(pin.scenario), "label": label, "decision": text}
                    )
                    if updated is not None:
                        state.replace_pin(pin.id, updated)
                        st.rerun()
                    st.error(error)
            if cols[3].button("Remove", key=f"compare_remove_{pin.id}", icon=":material/close:", width="stretch"):
                state.remove_pin(pin.id)
                st.rerun()


def if_it_fit(text):
    """A speed or cost cell: for a plan that does not fit, what it would give if it fit, and marked so."""

    def cell(p) -> str:
        return text(p) if p.memory.fits else f"{text(p)} (if it fit)"

    return cell


INFERENCE_ROWS = [
    ("Fits", lambda p: "yes" if p.memory.fits else "no"),
    ("Headroom", lambda p: units.percent(p.memory.headroom_fraction)),
    ("Memory per GPU", lambda p: units.gib(p.memory.total_bytes)),
    ("GPUs", lambda p: f"{p.scenario.num_gpus} × {gpu_short_name(p.hardware.name)}"),
    (
        "Layout",
        lambda p: (
            f"TP {p.scenario.tensor_parallel} · PP {p.scenario.pipeline_parallel} · EP {p.scenario.expert_parallel}"
        ),
    ),
    ("Precision (weights / KV)", lambda p: f"{p.scenario.weight_dtype} / {p.scenario.kv_cache_dtype}"),
    ("Prompt + output tokens", lambda p: f"{p.scenario.prompt_tokens:,} + {p.scenario.output_tokens:,}"),
    ("Concurrency", lambda p: f"{p.scenario.concurrency:,}"),
    ("Time to first token", if_it_fit(lambda p: units.seconds(p.performance.ttft_seconds))),
    ("Time per output token", if_it_fit(lambda p: units.seconds(p.performance.tpot_seconds))),
    ("Output tokens/s", if_it_fit(lambda p: units.count(p.performance.output_tokens_per_second))),
    ("Max concurrency", lambda p: f"{p.memory.max_concurrency:,}"),
    ("$ per 1M output tokens", if_it_fit(lambda p: units.usd(p.cost.usd_per_million_output_tokens))),
    ("$ per month", lambda p: units.usd(p.cost.usd_per_month)),
    ("Binding resource", lambda p: p.bottleneck.replace("_", " ")),
    ("Decision", lambda p: p.scenario.decision or ""),
]

TRAINING_ROWS = [
    ("Fits", lambda p: "yes" if p.memory.fits else "no"),
    ("Headroom", lambda p: units.percent(p.memory.headroom_fraction)),
    ("Memory per GPU", lambda p: units.gib(p.memory.total_bytes)),
    ("GPUs", lambda p: f"{p.scenario.num_gpus} × {gpu_short_name(p.hardware.name)}"),
    (
        "Layout",
        lambda p: (
            f"TP {p.layout.tensor_parallel} · PP {p.layout.pipeline_parallel} · DP "
            f"{p.layout.data_parallel} · ZeRO {p.layout.zero_stage}"
        ),
    ),
    (
        "Batch",
        lambda p: f"{p.layout.global_batch_size:,} × {p.layout.sequence_length:,} (micro {p.layout.micro_batch_size})",
    ),
    ("Largest micro-batch that fits", lambda p: str(p.memory.max_micro_batch_size or 0)),
    ("Step time", if_it_fit(lambda p: units.seconds(p.performance.step_seconds))),
    ("Tokens/s", if_it_fit(lambda p: units.count(p.performance.tokens_per_second))),
    ("MFU", if_it_fit(lambda p: units.percent(p.performance.mfu, 1))),
    ("Time to train", if_it_fit(lambda p: units.seconds(p.performance.time_to_train_seconds))),
    ("Cost to train", if_it_fit(lambda p: units.usd(p.cost.usd_total))),
    ("Binding resource", lambda p: p.bottleneck.replace("_", " ")),
    ("Decision", lambda p: p.scenario.decision or ""),
]

INFERENCE_CHARTS = [
    (
        "Time to first token (ms)",
        lambda p: p.performance.ttft_seconds * 1e3,
        lambda p: units.seconds(p.performance.ttft_seconds),
        ",.0f",
    ),
    (
        "Time per output token (ms)",
        lambda p: p.performance.tpot_seconds * 1e3,
        lambda p: units.seconds(p.performance.tpot_seconds),
        ",.0f",
    ),
    (
        "Output tokens/s",
        lambda p: p.performance.output_tokens_per_second,
        lambda p: units.count(p.performance.output_tokens_per_second),
        "~s",
    ),
    (
        "$ per 1M output tokens",
        lambda p: p.cost.usd_per_million_output_tokens,
        lambda p: units.usd(p.cost.usd_per_million_output_tokens),
        "$,.2~f",
    ),
    ("$ per month", lambda p: p.cost.usd_per_month, lambda p: units.usd(p.cost.usd_per_month), "$~s"),
    ("Max concurrency", lambda p: p.memory.max_concurrency, lambda p: f"{p.memory.max_concurrency:,}", "~s"),
]

TRAINING_CHARTS = [
    (
        "Step time (s)",
        lambda p: p.performance.step_seconds,
        lambda p: units.seconds(p.performance.step_seconds),
        ",.2~f",
    ),
    (
        "Tokens/s",
        lambda p: p.performance.tokens_per_second,
        lambda p: units.count(p.performance.tokens_per_second),
        "~s",
    ),
    ("MFU", lambda p: p.performance.mfu, lambda p: units.percent(p.performance.mfu, 1), ".0%"),
    (
        "Time to train (hours)",
        lambda p: p.performance.time_to_train_seconds / 3600,
        lambda p: units.seconds(p.performance.time_to_train_seconds),
        ",.3~f",
    ),
    ("Cost to train ($)", lambda p: p.cost.usd_total, lambda p: units.usd(p.cost.usd_total), "$~s"),
    (
        "Memory per GPU (GiB)",
        lambda p: p.memory.total_bytes / units.GIB,
        lambda p: units.gib(p.memory.total_bytes),
        ",.0f",
    ),
]


MEMORY_FACTS = ("Max concurrency", "Memory per GPU (GiB)")  # charts that hold for a plan that does not fit


def comparison(kind: str, numbered) -> None:
    """numbered: [(number, plan)] of one kind."""
    rows = INFERENCE_ROWS if kind == "inference" else TRAINING_ROWS
    names = [plan_name(n, p) for n, p in numbered]
    table = pd.DataFrame(
        {name: [fn(p) for _, fn in rows] for name, (_, p) in zip(names, numbered)}, index=[label for label, _ in rows]
    )
    st.markdown(f"#### {kind.capitalize()} plans side by side")
    st.dataframe(table, width="stretch", height=min(38 + 35 * len(rows), 640))
    st.markdown("**Memory per GPU** (black tick: what may be used)")
    render.chart(
        charts.memory_compare(
            [(name, p.memory.components, p.memory.budget_bytes) for name, (_, p) in zip(names, numbered)]
        ),
        width="stretch",
    )
    specs = INFERENCE_CHARTS if kind == "inference" else TRAINING_CHARTS
    for start in range(0, len(specs), 3):
        cols = st.columns(3, gap="medium")
        for col, (title, value, text, axis_format) in zip(cols, specs[start : start + 3]):
            with col:
                render.chart(
                    charts.metric_bars(
                        names,
                        [value(p) for _, p in numbered],
                        [
                            text(p) if p.memory.fits or title in MEMORY_FACTS else f"{text(p)} (if it fit)"
                            for _, p in numbered
                        ],
                        title,
                        axis_format,
                    ),
                    width="stretch",
                )


def compare_page() -> None:
    warnings = links.load_pins_from_url()
    if warnings:
        render.link_warnings(warnings)
    add_plans_panel()
    pins = state.pins()
    links.write_pins_url()
    if not pins:
        st.info(
            "No plans pinned yet. Use **Pin for Compare** on the Inference or Training page, paste a share link, "
            "or import a CSV exported by Headroom.",
            icon=":material/push_pin:",
        )
        return
    calibration = active_calibration()
    plans = [(pin, state.cached_plan(pin.scenario, calibration)) for pin in pins]
    render.share_bar("compare", links.pin_params(), [p for _, p in plans], "headroom-plans", key="compare")
    st.caption(
        f"{len(plans)} pinned plan{'s' if len(plans) != 1 else ''}. The link above restores all of them; the "
        "CSV holds every input and output of each plan and imports back here."
    )
    render.calibration_caption(calibration)
    pinned_list(plans)
    for kind in ("inference", "training"):
        numbered = [(n, p) for n, (_, p) in enumerate(plans, start=1) if p.kind == kind]
        if numbered:
            comparison(kind, numbered)


__all__ = ["compare_page", "plan_name", "plan_title"]
