"""Headroom dashboard: page config and st.navigation over the page scripts (see shared/DESIGN.md).

The page scripts live in app_pages/, not pages/: Streamlit 1.67 still auto-detects a folder named
``pages`` next to the entry script, and until some session has run st.navigation it runs a directly
requested page (``/training?...``, i.e. every share link opened on a freshly started server) in the
legacy pages-folder mode, skipping this file (no page config, wrong menu, "Page not found" after a
rerun). AppTest resets that mode before every run, so there it costs a second script run per
interaction and swallows button clicks. With another folder name none of this happens.
"""

import streamlit as st

st.set_page_config(page_title="Headroom — LLM capacity planner", page_icon="📐", layout="wide")

inference = st.Page("app_pages/inference.py", title="Inference", icon=":material/bolt:", url_path="inference")


def landing() -> None:
    """'/' forwards to /inference with the link's parameters: share links name their page (/inference?...),
    and Streamlit only serves the default page at '/', so Inference cannot be the default page itself."""
    st.switch_page(inference, query_params={key: st.query_params.get_all(key) for key in st.query_params})


pages = [
    st.Page(landing, title="Headroom", url_path="start", default=True, visibility="hidden"),
    inference,
    st.Page("app_pages/training.py", title="Training", icon=":material/model_training:", url_path="training"),
    st.Page("app_pages/tradeoffs.py", title="Trade-offs", icon=":material/tune:", url_path="tradeoffs"),
    st.Page("app_pages/calibrate.py", title="Calibrate", icon=":material/straighten:", url_path="calibrate"),
    st.Page("app_pages/accuracy.py", title="Accuracy", icon=":material/target:", url_path="accuracy"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("app_pages/review.py", title="Review", icon=":material/fact_check:", url_path="review"),
    st.Page("app_pages/fleet.py", title="Fleet", icon=":material/dns:", url_path="fleet"),
]
st.navigation(pages, position="top").run()
