"""Accuracy: how far Headroom's predictions were from published measurements, per family, and why."""

import streamlit as st

from ui import accuracy_view
from ui.calibration_view import active_calibration

st.title("How accurate is this?", anchor=False)
accuracy_view.accuracy_section(active_calibration())
