"""Streamlit-side helpers for the Headroom dashboard.

`app_pages/` scripts read widgets into a Scenario (``ui.controls``), call the cached ``plan()``
(``ui.state``, with the active calibration from ``ui.calibration_view``) and render it (``ui.render``,
``ui.charts``; the Trade-offs page through ``ui.tradeoffs_view``, ``ui.tradeoff_data``, ``ui.tradeoff_charts``;
the Accuracy page through ``ui.accuracy_view``; error bands in words through ``ui.bands``). Nothing in here
computes physics: sweeps (``ui.sweeps``) only call ``planner.plan`` on variants of a scenario, and the
trade-offs come from ``planner.search``.
"""
