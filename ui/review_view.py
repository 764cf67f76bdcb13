"""The Review page: one printable section per plan, plain words first, numbers second."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from planner.verdict import Targets
from ui import controls, deploy_view, links, render, review, state
from ui.calibration_view import active_calibration

# key (URL parameter), label, planner.verdict.Targets field, widget unit -> raw unit, step, help
TARGETS = (
    ("review_max_ttft_s", "Time to first token at most (s)", "max_ttft_seconds", 1.0, 0.1, "Inference latency target."),
    (
        "review_max_tpot_ms",
        "Time per output token at most (ms)",
        "max_tpot_seconds",
        1e-3,
        5.0,
        "Inference latency target.",
    ),
    ("review_max_usd_per_month", "Budget per month ($)", "max_usd_per_month", 1.0, 1000.0, "For inference plans."),
    (
        "review_max_training_usd",
        "Training budget ($)",
        "max_training_usd",
        1.0,
        1000.0,
        "For training plans: total cost.",
    ),
    (
        "review_max_training_days",
        "Training deadline (days)",
        "max_training_seconds",
        86400.0,
        1.0,
        "For training plans.",
    ),
)
TARGET_MAX = 1e12
VERDICT_TEXT = (
    "A target is **met** only when the whole likely range of the number meets it, **at risk** when the range "
    "straddles it, **missed** when not even the best end meets it."
)

# One plan per printed page (one or two A4 pages each): browser chrome, controls and expanders hidden, the
# plan's box without border and padding, every plan after the first starting a new page. No
# `break-inside: avoid` on a whole plan (it pushed plan 1 past the title page) and no `break-after` (it left
# a blank last page).
PRINT_CSS = """
<style>
@page { size: A4; margin: 12mm; }
@media print {
  [data-testid="stSidebar"], [data-testid="stHeader"], [data-testid="stToolbar"],
  [data-testid="stSidebarCollapsedControl"], [data-testid="stDecoration"], .stTopNav,
  [data-testid="stExpander"], [data-testid="stBottom"], [data-testid="stStatusWidget"],
  [class*="st-key-review_noprint"] { display: none !important; }
  html, body, #root, .stApp, [data-testid="stApp"], [data-testid="stAppViewContainer"], [data-testid="stMain"] {
    height: auto !important; min-height: 0 !important; overflow: visible !important; position: static !important;
  }
  [data-testid="stMain"] { margin-left: 0 !important; }
  [data-testid="stMainBlockContainer"] { padding: 0 !important; max-width: 100% !important; }
  [data-testid="stMainBlockContainer"] h1 { font-size: 1.5rem !important; padding: 0 0 0.25rem 0 !important; }
  [data-testid="stMainBlockContainer"] p, [data-testid="stMainBlockContainer"] li { font-size: 0.8rem !important; }
  [data-testid="stTable"] td, [data-testid="stTable"] th { font-size: 0.75rem !important; padding: 0.1rem 0.4rem !important; }
  [data-testid="stVerticalBlock"] { gap: 0.35rem !important; }
  [data-testid="stHorizontalBlock"] { flex-wrap: nowrap !important; }
  [class*="st-key-review_plan_"] { border: none !important; padding: 0 !important; }
  [class*="st-key-review_plan_next_"] { break-before: page; }
  [class*="st-key-review_plan_"] [data-testid="stAlert"],
  [class*="st-key-review_plan_"] [data-testid="stTable"] { break-inside: avoid; }
  /* a heading stays with what follows it; a column (its bold heading and its table) is not split across pages */
  h1, h2, h3, h4, [data-testid="stHeading"] { break-after: avoid; page-break-after: avoid; }
  [class*="st-key-review_plan_"] [data-testid="stColumn"] { break-inside: avoid; }
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


def targets_form() -> Targets:
    values = {}
    side = st.sidebar
    side.markdown("#### Targets of this review")
    side.caption("Leave a target empty to report the number without a verdict. Targets travel in the link.")
    for key, label, field, factor, step, help_text in TARGETS:
        shown = side.number_input(
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
        # 0 is a valid widget value but no valid target: it is reported as "no target", like an empty box.
        values[field] = shown * factor if shown else None
    return Targets(**values)


def target_params(targets: Targets) -> dict[str, str]:
    """The review's targets as link parameters, in the widgets' units."""
    out = {}
    for key, _, field, factor, _, _ in TARGETS:
        value = getattr(targets, field)
        if value is not None:
            out[key] = f"{value / factor:g}"
    return out


def _plans(calibration=None) -> list[tuple[str, Any]]:
    """Pinned plans; with none pinned, the current inference (and training, if opened) plan."""
    pins = state.pins()
    if pins:
        links.write_pins_url()
        return [(pin.id, state.cached_plan(pin.scenario, calibration)) for pin in pins]
    out = [("current_inference", state.cached_plan(controls.current_scenario("inference"), calibration))]
    if state.remembered("training") is not None:
        out.append(("current_training", state.cached_plan(controls.current_scenario("training"), calibration)))
    return out


def plan_section(number: int, key: str, plan, targets: Targets, calibration=None) -> None:
    checks = review.checks(plan, targets)
    verdict = review.overall(checks)
    # Every plan after the first starts a printed page (break-before, so no blank page follows the last).
    with st.container(border=True, key=f"review_plan_{key}" if number == 1 else f"review_plan_next_{key}"):
        st.subheader(review.title(plan, number), anchor=False)
        st.markdown(f"**Workload.** {render.md_escape(review.workload_sentence(plan))}")
        decision = plan.scenario.decision or ""
        if decision:
            st.markdown(f"**Decision.** {render.md_escape(decision)}")
        else:
            st.caption("No decision recorded yet (type it in the plan's Decision box before sharing).")
        box = {"ok": st.success, "risk": st.warning, "fail": st.error}.get(verdict, st.info)
        box("\n".join(f"- {c.icon} {render.md_escape(c.text)}" for c in checks))
        if not plan.memory.fits:
            with st.container(key=f"review_noprint_nearest_{key}"):
                render.fixes_section(render.scenario_of(plan), calibration, f"review_{key}")
        left, right = st.columns([1, 1], gap="large")
        with left:
            st.markdown(f"**Resources.** {render.md_escape(review.resources_sentence(plan))}")
            st.markdown(f"**What limits it.** {render.md_escape(review.binding_sentence(plan))}")
            risks = review.risks(plan)
            st.markdown("**Risks.**" + ("" if risks else " None flagged."))
            if risks:
                st.markdown("\n".join(f"- :orange[:material/warning:] {render.md_escape(r)}" for r in risks))
        with right:
            st.markdown("**The numbers**" + ("" if plan.memory.fits else " (speed and cost: if it fit)"))
            st.table(pd.DataFrame(review.key_numbers(plan), columns=["", "Value", "Likely range"]).set_index(""))
            st.caption(
                "Likely range: where the measured value fell for 80 % of the published cases Headroom was "
                "checked against (or within the active calibration's residual error)."
            )
        with st.expander("Technical details: what binds, and the assumptions"):
            st.markdown(f"**Binding resource.** {render.md_escape(review.binding_details(plan))}")
            st.markdown("**Assumptions**")
            st.markdown("\n".join(f"- {render.md_escape(a)}" for a in plan.assumptions))
        deploy_view.deploy_section(plan, f"review_{key}")


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
        params.update(target_params(targets))
        render.share_bar("review", params, [p for _, p in plans], "headroom-review", key="review")
        st.caption(
            "Print this page (Ctrl/⌘+P) for the review: one plan per page, controls hidden."
            + ("" if state.pins() else " Showing the current plan; pin plans on Compare to review several.")
        )
    render.calibration_caption(calibration, scenarios=[render.scenario_of(p) for _, p in plans])
    overview = []
    for number, (_, plan) in enumerate(plans, start=1):
        status = review.overall(review.checks(plan, targets))
        icon = review.Check(status, "").icon
        overview.append(f"{icon} {render.md_escape(review.title(plan, number))}")
    with st.container(key="review_overview"):
        st.markdown("  \n".join(overview))
        st.caption(VERDICT_TEXT)
    for number, (key, plan) in enumerate(plans, start=1):
        plan_section(number, key, plan, targets, calibration)
