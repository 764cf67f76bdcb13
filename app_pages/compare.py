"""Compare: pinned plans (this session, share links, a CSV) side by side; export them all to CSV."""

import streamlit as st

from ui import compare

st.title("Compare", anchor=False)
compare.compare_page()
