"""The Review page: one printable section per plan, plain words first, numbers second."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from ui import controls, links, render, review, state
from ui.calibration_view import active_calibration

TARGETS = (  # key (URL parameter), label, Targets field, step, help
    ("review_max_ttft_s", "Time to first token at most (s)", "max_ttft_s", 0.1, "Inference latency target."),
    ("review_max_tpot_ms", "Time per output token at most (ms)", "max_tpot_ms", 5.0, "Inference latency target."),
    ("review_max_usd_per_month", "Budget per month ($)", "max_usd_per_month", 1000.0, "For inference plans."),
    ("review_max_training_usd", "Training budget ($)", "max_training_usd", 1000.0, "For training plans: total cost."),
    ("review_max_training_days", "Training deadline (days)", "max_training_days", 1.0, "For training plans."),
)
TARGET_MAX = 1e12

PRINT_CSS = """
<style>
@media print {
  [data-testid="stSidebar"], [data-testid="stHeader"], [data-testid="stToolbar"],
  [data-testid="stSidebarCollapsedControl"], [data-testid="stDecoration"], .stTopNav,
  [class*="st-key-review_noprint"] { display: none !important; }
  [data-testid="stMain"] { margin-left: 0 !important; }
  [data-testid="stMainBlockContainer"] { padding: 0.5rem 1rem !important; max-width: 100% !important; }
  [class*="st-key-review_plan_"] { break-after: page; break-inside: avoid-page; }
}
</style>
"""


def _check_target_params() -> list[str]:
    """Bound widgets drop bad values silently; say which ones the link had wrong."""
    warnings = []
    for key, *_ in TARGETS:
        if key not in st.query_params:
            continue
        raw = st.query_params.get(key)
        try:
            value = float(raw)
            if not (math.isfinite(value) and 0 < value <= TARGET_MAX):
                raise ValueError
        except (TypeError, ValueError):
            warnings.append(
                f"Link parameter '{key}' = '{raw}' is invalid (a positive number up to "
                f"{TARGET_MAX:,.0f}); no target is used for it."
            )
    return warnings


def targets_form() -> review.Targets:
    values = {}
    side = st.sidebar
    side.markdown("#### Targets of this review")
    side.caption("Leave a target empty to report the number without a verdict. Targets travel in the link.")
    for key, label, field, step, help_text in TARGETS:
        values[field] = side.number_input(
            label,
            min_value=0.0,
            max_value=TARGET_MAX,
            value=None,
            step=step,
            format="%g",
            key=key,
            bind="query-params",
            help=help_text,
            placeholder="no target",
        )
    return review.Targets(**values)


def _plans(calibration=None) -> list[tuple[str, object]]:
    """Pinned plans; with none pinned, the current inference (and training, if opened) plan."""
    pins = state.pins()
    if pins:
        links.write_pins_url()
        return [(pin.id, state.cached_plan(pin.scenario, calibration)) for pin in pins]
    out = [("current_inference", state.cached_plan(controls.current_scenario("inference"), calibration))]
    if state.remembered("training") is not None:
        out.append(("current_training", state.cached_plan(controls.current_scenario("training"), calibration)))
    return out


def plan_section(number: int, key: str, plan, targets: review.Targets) -> None:
    checks = review.checks(plan, targets)
    verdict = review.overall(checks)
    with st.container(border=True, key=f"review_plan_{key}"):
        st.subheader(review.title(plan, number), anchor=False)
        decision = plan.scenario.get("decision") or ""
        if decision:
            st.markdown(f"**Decision.** {render.md_escape(decision)}")
        else:
            st.caption("No decision recorded yet (type it in the plan's Decision box before sharing).")
        box = {"ok": st.success, "fail": st.error}.get(verdict, st.info)
        box("\n".join(f"- {c.icon} {render.md_escape(c.text)}" for c in checks))
        st.markdown(f"**Resources.** {render.md_escape(review.resources_sentence(plan))}")
        st.markdown(f"**What limits it.** {render.md_escape(review.binding_sentence(plan))}")
        risks = review.risks(plan)
        st.markdown("**Risks.**" + ("" if risks else " None flagged."))
        if risks:
            st.markdown("\n".join(f"- :orange[:material/warning:] {render.md_escape(r)}" for r in risks))
        left, right = st.columns([1, 1], gap="large")
        with left:
            st.markdown("**The numbers**")
            st.table(pd.DataFrame(review.key_numbers(plan), columns=["", "Value", "Likely range"]).set_index(""))
            st.caption(
                "Likely range: where the measured value fell for 80 % of the published cases Headroom was "
                "checked against (or within the active calibration's residual error)."
            )
        with right:
            st.markdown("**Assumptions**")
            st.markdown("\n".join(f"- {render.md_escape(a)}" for a in plan.assumptions))


def review_page() -> None:
    st.html(PRINT_CSS)
    warnings = links.load_pins_from_url() + _check_target_params()
    targets = targets_form()
    calibration = active_calibration()
    plans = _plans(calibration)
    warnings += controls.pending_link_warnings("inference", None) if not state.pins() else []
    if warnings:
        render.link_warnings(warnings)
    with st.container(key="review_noprint_bar"):
        params = links.pin_params() if state.pins() else {}
        if not state.pins():
            for kind in ("inference", "training"):
                if state.remembered(kind) is not None and any(k == "current_" + kind for k, _ in plans):
                    params.update(render.scenario_params(state.remembered(kind)))
        params.update(
            {
                key: f"{getattr(targets, field):g}"
                for key, _, field, _, _ in TARGETS
                if getattr(targets, field) is not None
            }
        )
        render.share_bar("review", params, [p for _, p in plans], "headroom-review", key="review")
        st.caption(
            "Print this page (Ctrl/⌘+P) for the review: one plan per page, controls hidden."
            + ("" if state.pins() else " Showing the current plan; pin plans on Compare to review several.")
        )
    render.calibration_caption(calibration)
    overview = []
    for number, (_, plan) in enumerate(plans, start=1):
        status = review.overall(review.checks(plan, targets))
        icon = review.Check(status, "").icon
        overview.append(f"{icon} {render.md_escape(review.title(plan, number))}")
    st.markdown("  \n".join(overview))
    for number, (key, plan) in enumerate(plans, start=1):
        plan_section(number, key, plan, targets)
