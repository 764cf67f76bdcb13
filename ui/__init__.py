"""Streamlit-side helpers for the Headroom dashboard.

`app_pages/` scripts read widgets into a Scenario (``ui.controls``, drawn from ``ui.form_specs``), call the cached
``plan()`` (``ui.state``, with the active calibration from ``ui.calibration_view``) and render it (``ui.render``,
``ui.training_view``, ``ui.charts``; the Trade-offs page through ``ui.tradeoffs_view``, ``ui.tradeoff_data``, ``ui.tradeoff_charts``;
the Accuracy page through ``ui.accuracy_view``; error bands in words through ``ui.bands``). Nothing in here
computes or plans: the sweeps, the nearest plans that fit, the roofline points and the trade-offs are
``planner.search`` answers (``ui.sweeps`` only formats the sweeps), and warnings are chosen by their code.
"""
