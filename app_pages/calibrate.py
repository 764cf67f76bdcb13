"""Calibrate: measured vs predicted (filled by its own issue); for now, how to enable profiling and the defaults."""

import streamlit as st

from ui import controls, render

st.title("Calibrate", anchor=False)
scenario = controls.current_scenario("inference")
render.link_warnings(controls.pending_link_warnings("inference", scenario))
render.calibrate_page(scenario)
