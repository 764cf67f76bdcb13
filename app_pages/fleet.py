"""Fleet: several deployments over a day on GPU pools — the manager's sentence, the day's GPUs by deployment and by
pricing, the bill and its split at the top; the fleet's tables below them; then energy, spares, per-deployment
answers, comparisons and assumptions."""

import streamlit as st

from ui import fleet_controls, fleet_edit, fleet_view

st.title("Fleet", anchor=False)
fleet_controls.fleet_document()  # from the link, once per session
top = st.container()  # filled once the tables below are read
st.subheader("The fleet", anchor=False)
fleet_controls.sources_panel()  # an upload or a reset replaces the fleet
edited, cell_error = fleet_controls.editor(fleet_controls.fleet_document())
answer = None
with top:
    fleet_controls.notice()
    if edited is None:
        st.error(cell_error, icon=":material/error:")
    else:
        link = fleet_controls.link_for(edited)
        answer = fleet_view.planned_fleet(fleet_edit.canonical_json(edited))
        if isinstance(answer, str):
            st.error(f"This fleet cannot be planned: {answer}", icon=":material/error:")
        else:
            fleet_view.headline(answer, link)
if answer is not None and not isinstance(answer, str):
    fleet_view.details(answer)
