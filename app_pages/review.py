"""Review: what a manager opens from a share link: one printable section per plan, plain words first."""

import streamlit as st

from ui import review_view

st.title("Deployment review", anchor=False)
review_view.review_page()
