"""Compare: pinned plans (this session, share links, a CSV) side by side; export them all to CSV."""

import streamlit as st

from ui import compare, state

state.ensure_app_navigation()
st.title("Compare", anchor=False)
compare.compare_page()
