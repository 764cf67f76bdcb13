"""Inference: will this model serve this workload on these GPUs, how fast, at what cost, under what traffic?

The request stream's inputs sit in the main area beside their results (ui.traffic_controls), but they are
part of the scenario, so the form draws them first: the plan above them, its share link and its CSV carry
the stream. Containers keep the order on screen: the plan, then the Traffic section, then the sweeps.
"""

import streamlit as st

from ui import controls, render, traffic_view
from ui.calibration_view import active_calibration

st.title("Inference", anchor=False)
summary, traffic, details = st.container(), st.container(key="traffic_section"), st.container()
form = controls.scenario_form("inference", places={"traffic": traffic})
with summary:
    render.link_warnings(form.link_warnings)
    if form.scenario is None:
        st.error(f"This scenario cannot be planned: {form.error}", icon=":material/block:")
        st.stop()
calibration = active_calibration()
with traffic:
    plan = traffic_view.planned(form.scenario, calibration)
with summary:
    render.inference_summary(form.scenario, plan, calibration)
with traffic:
    traffic_view.traffic_results(form.scenario, plan, calibration)
with details:
    render.inference_details(form.scenario, plan, calibration)
