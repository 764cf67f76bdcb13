"""Inference: will this model serve this workload on these GPUs, how fast, at what cost?"""

import streamlit as st

from ui import controls, render, state
from ui.calibration_view import active_calibration

st.title("Inference", anchor=False)
form = controls.scenario_form("inference")
render.link_warnings(form.link_warnings)
if form.scenario is None:
    st.error(f"This scenario cannot be planned: {form.error}", icon=":material/block:")
    st.stop()
calibration = active_calibration()
render.inference_page(form.scenario, state.cached_plan(form.scenario, calibration), calibration)
