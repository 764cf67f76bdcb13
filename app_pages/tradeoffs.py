"""Trade-offs: what each technique buys and costs for the current plan, what binds, and the best configuration
under constraints (inference)."""

import streamlit as st

from ui import controls, render, state, tradeoffs_view
from ui.calibration_view import active_calibration

st.title("Trade-offs", anchor=False)
kind = tradeoffs_view.kind_picker()
scenario = controls.current_scenario(kind)
render.link_warnings(controls.pending_link_warnings(kind, scenario))
calibration = active_calibration()
tradeoffs_view.tradeoffs_page(kind, scenario, state.cached_plan(scenario, calibration), calibration)
