"""Accuracy: how far Headroom's predictions were from published measurements, per family, and why."""

import streamlit as st

from ui import accuracy_view, render
from ui.calibration_view import active_calibration

st.title("How accurate is this?", anchor=False)
calibration = active_calibration()
render.calibration_caption(calibration)
accuracy_view.accuracy_section(calibration)
