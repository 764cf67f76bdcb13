"""Fleet: several deployments over a day on GPU pools — the manager's sentence, the day's GPUs by deployment and by
pricing, the bill and its split, energy, spares, per-deployment answers, comparisons and the CSV per hour."""

import streamlit as st

from ui import fleet_controls, fleet_edit, fleet_view

st.title("Fleet", anchor=False)
fleet_controls.fleet_document()  # from the link, once per session
fleet_controls.sources_panel()  # an upload or a reset replaces it
fleet_controls.notice()
edited = fleet_controls.editor(fleet_controls.fleet_document())
if edited is not None:
    link = fleet_controls.link_for(edited)
    answer = fleet_view.planned_fleet(fleet_edit.canonical_json(edited))
    if isinstance(answer, str):
        st.error(f"This fleet cannot be planned: {answer}", icon=":material/error:")
    else:
        fleet_view.answer_view(answer, link)
