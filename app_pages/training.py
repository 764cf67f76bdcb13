"""Training: memory, step time, largest micro-batch, and the time and cost to train."""

import streamlit as st

from ui import controls, render, state, training_view
from ui.calibration_view import active_calibration

st.title("Training", anchor=False)
form = controls.scenario_form("training")
render.link_warnings(form.link_warnings)
if form.scenario is None:
    st.error(f"This scenario cannot be planned: {form.error}", icon=":material/block:")
    st.stop()
calibration = active_calibration()
training_view.training_page(form.scenario, state.cached_plan(form.scenario, calibration), calibration)
