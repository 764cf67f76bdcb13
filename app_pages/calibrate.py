"""Calibrate: run a profile, choose the active calibration, predicted vs measured, import/export records."""

import streamlit as st

from ui import controls, render
from ui.calibration_view import active_calibration, render_calibrate_page

st.title("Calibrate", anchor=False)
scenario = controls.current_scenario("inference")
render.link_warnings(controls.pending_link_warnings("inference", scenario))
render.calibration_caption(active_calibration(), scenario)
st.page_link("app_pages/accuracy.py", label="How accurate is Headroom without a calibration?", icon=":material/target:")
render_calibrate_page(scenario)
