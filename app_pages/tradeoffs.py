"""Trade-offs: the technique explorer (filled by its own issue); for now, where the current plan is constrained."""

import streamlit as st

from ui import controls, render, state

st.title("Trade-offs", anchor=False)
kind = "inference"
if state.training_available() and state.remembered("training") is not None:
    kind = st.segmented_control("Plan", ["inference", "training"], default="inference", key="tradeoffs_view_kind",
                                format_func=str.capitalize, required=True)
scenario = controls.current_scenario(kind)
render.link_warnings(controls.pending_link_warnings(kind, scenario))
render.tradeoffs_preview(kind, state.cached_plan(scenario))
