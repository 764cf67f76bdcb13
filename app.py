"""Headroom dashboard: page config and navigation over pages/ (see shared/DESIGN.md)."""

import streamlit as st

st.set_page_config(page_title="Headroom — LLM capacity planner", page_icon="📐", layout="wide")

pages = [
    st.Page("pages/inference.py", title="Inference", icon=":material/bolt:", url_path="inference", default=True),
    st.Page("pages/training.py", title="Training", icon=":material/model_training:", url_path="training"),
    st.Page("pages/tradeoffs.py", title="Trade-offs", icon=":material/tune:", url_path="tradeoffs"),
    st.Page("pages/calibrate.py", title="Calibrate", icon=":material/straighten:", url_path="calibrate"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/review.py", title="Review", icon=":material/fact_check:", url_path="review"),
]
st.navigation(pages, position="top").run()
