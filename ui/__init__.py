"""Streamlit-side helpers for the Headroom dashboard.

`app_pages/` scripts read widgets into a Scenario (``ui.controls``), call the cached ``plan()``
(``ui.state``) and render it (``ui.render``, ``ui.charts``). Nothing in here computes physics: sweeps
(``ui.sweeps``) only call ``planner.plan`` on variants of a scenario.
"""
