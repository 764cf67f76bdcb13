"""The Fleet page's inputs: where the fleet comes from (the link, an upload, the example), its editable tables and
the fleet-wide settings, and the link written back. Per-session state only (st.session_state and the URL).

Session keys: `fleet_doc` (the fleet JSON the tables start from), `fleet_doc_version` (bumped when another fleet is
loaded, so the tables' editors start afresh), `fleet_doc_source` (said above the tables), `fleet_notice` (a link or
upload that could not be read, one sentence).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui import fleet_edit
from ui.fleet_view import check_fleet
from ui.render import share_link

DOC, VERSION, SOURCE, NOTICE = "fleet_doc", "fleet_doc_version", "fleet_doc_source", "fleet_notice"
EXAMPLE_SOURCE = "the example fleet (examples/fleet-three-models.json)"


def _load(doc: dict[str, Any], source: str) -> None:
    st.session_state[DOC] = doc
    st.session_state[SOURCE] = source
    st.session_state[VERSION] = st.session_state.get(VERSION, -1) + 1


def fleet_document() -> dict[str, Any]:
    """This session's fleet: from the link the first time (a malformed one: one sentence and the example), then
    whatever was uploaded or reset to."""
    if DOC not in st.session_state:
        text = st.query_params.get(fleet_edit.LINK_PARAM)
        if text:
            try:
                doc = fleet_edit.fleet_from_link(text)
                _load(doc, "the share link")
            except fleet_edit.FleetInputError as exc:
                st.session_state[NOTICE] = f"{exc}; showing the example fleet instead."
                _load(fleet_edit.example_fleet(), EXAMPLE_SOURCE)
        else:
            _load(fleet_edit.example_fleet(), EXAMPLE_SOURCE)
    return st.session_state[DOC]


def sources_panel() -> None:
    """Upload a fleet JSON, or go back to the example."""
    with st.expander("Load a fleet", icon=":material/upload_file:", expanded=False):
        left, right = st.columns([3, 1])
        upload = left.file_uploader(
            "Fleet JSON",
            type=["json"],
            key="fleet_upload",
            help="A fleet scenario (`python -m planner schema --kind fleet`), e.g. examples/fleet-three-models.json.",
        )
        if upload is not None and st.session_state.get("fleet_upload_done") != upload.file_id:
            st.session_state["fleet_upload_done"] = upload.file_id
            try:
                doc = fleet_edit.fleet_from_upload(upload.name, upload.getvalue())
                error, _ = check_fleet(doc)
                if error:
                    raise fleet_edit.FleetInputError(f"{upload.name}: {error}")
                _load(doc, upload.name)
                st.session_state.pop(NOTICE, None)
            except fleet_edit.FleetInputError as exc:
                st.session_state[NOTICE] = f"{exc}; the fleet was not changed."
        if right.button("Reset to the example", key="fleet_action_reset", icon=":material/restart_alt:"):
            _load(fleet_edit.example_fleet(), EXAMPLE_SOURCE)
            st.session_state.pop(NOTICE, None)


def _settings(doc: dict[str, Any], version: int) -> dict[str, Any]:
    autoscaling = doc.get("autoscaling") if isinstance(doc.get("autoscaling"), dict) else {}
    cols = st.columns(3)
    rate_scale = cols[0].number_input(
        "Rate scale",
        min_value=0.01,
        max_value=1000.0,
        value=float(doc.get("rate_scale", 1.0) or 1.0),
        step=0.1,
        key=f"fleet_rate_scale_v{version}",
        help="Multiplies every deployment's load (growth what-ifs).",
    )
    headroom = cols[1].number_input(
        "Autoscaling headroom",
        min_value=0.0,
        max_value=0.95,
        value=float(autoscaling.get("headroom_share", 0.1)),
        step=0.05,
        key=f"fleet_headroom_v{version}",
        help="Share of each replica's SLO capacity kept spare at every hour.",
    )
    disaggregation = cols[2].toggle(
        "Compare disaggregated prefill/decode",
        value=bool(doc.get("compare_disaggregation", False)),
        key=f"fleet_disaggregation_v{version}",
        help="Also compare each deployment with prefill/decode pools at its peak (more simulations: slower).",
    )
    return {"rate_scale": rate_scale, "headroom_share": headroom, "compare_disaggregation": disaggregation}


def editor(doc: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The tables and settings; the edited fleet, or the sentence saying which cell cannot be read."""
    version = st.session_state.get(VERSION, 0)
    st.caption(
        f"From {st.session_state.get(SOURCE, EXAMPLE_SOURCE)}. Edit a cell, add a row at the bottom or delete rows; "
        "fields the tables leave out (lengths, runtime, power, spares) stay as the fleet JSON gives them."
    )
    st.markdown("**Deployments**")
    deployments = st.data_editor(
        fleet_edit.deployments_frame(doc),
        key=f"fleet_deployments_v{version}",
        num_rows="dynamic",
        hide_index=True,
        column_config={
            "name": st.column_config.TextColumn(fleet_edit.DEPLOYMENT_COLUMNS["name"], required=True),
            "model": st.column_config.TextColumn("Model", help="Catalog id, e.g. llama-3.1-8b"),
            "pools": st.column_config.TextColumn("Pools", help="Comma-separated pool names; empty: every pool"),
            "tp": st.column_config.NumberColumn("TP", min_value=1, step=1),
            "pp": st.column_config.NumberColumn("PP", min_value=1, step=1),
            "ep": st.column_config.NumberColumn("EP", min_value=1, step=1),
            "layouts": st.column_config.TextColumn(
                "Candidate layouts", help="e.g. 'TP4, TP8' (each sized and priced); empty: TP x PP x EP above"
            ),
            "ttft": st.column_config.NumberColumn("TTFT SLO (s)", min_value=0.0, format="%g"),
            "tpot": st.column_config.NumberColumn("TPOT SLO (s)", min_value=0.0, format="%g"),
            "e2e": st.column_config.NumberColumn("E2E SLO (s)", min_value=0.0, format="%g"),
            "percentile": st.column_config.NumberColumn("Percentile", min_value=50, max_value=100, format="%g"),
            "peak": st.column_config.NumberColumn("Peak (req/s)", min_value=0.0, format="%g"),
            "trough": st.column_config.NumberColumn("Trough (req/s)", min_value=0.0, format="%g"),
            "peak_hour": st.column_config.NumberColumn("Peak hour", min_value=0, max_value=23.99, format="%g"),
            "rate_by_hour": st.column_config.TextColumn(
                "Rate by hour", help="24 numbers (req/s, 00:00 first); when given it replaces peak/trough"
            ),
            "requests": st.column_config.NumberColumn(
                "Simulated requests", min_value=50, step=50, help="Requests per simulated load curve (fewer: faster)"
            ),
        },
    )
    st.markdown("**Pools**")
    pools = st.data_editor(
        fleet_edit.pools_frame(doc),
        key=f"fleet_pools_v{version}",
        num_rows="dynamic",
        hide_index=True,
        column_config={
            "name": st.column_config.TextColumn("Name", required=True),
            "gpu": st.column_config.TextColumn("GPU", help="Catalog id, e.g. h100-sxm"),
            "max_gpus": st.column_config.NumberColumn("Max GPUs", min_value=1, step=1, help="Empty: no limit"),
            "on_demand": st.column_config.NumberColumn(
                "On demand ($/GPU-h)", min_value=0.0, format="%.2f", help="Empty: the catalog's reference price"
            ),
            "reserved": st.column_config.NumberColumn(
                "Reserved ($/GPU-h)", min_value=0.0, format="%.2f", help="Empty: none reserved"
            ),
            "spot": st.column_config.NumberColumn(
                "Spot ($/GPU-h)", min_value=0.0, format="%.2f", help="Empty: no spot"
            ),
            "spot_share": st.column_config.NumberColumn(
                "Spot share", min_value=0.0, max_value=1.0, format="%g", help="Of the GPUs above the reserved base"
            ),
            "interruptions": st.column_config.NumberColumn("Spot interruptions/day", min_value=0.0, format="%g"),
        },
    )
    settings = _settings(doc, version)
    try:
        return fleet_edit.edited_fleet(doc, deployments, pools, settings), None
    except fleet_edit.FleetInputError as exc:
        return None, f"{exc}."


def notice() -> None:
    text = st.session_state.get(NOTICE)
    if text:
        st.error(text, icon=":material/error:")


def link_for(doc: dict[str, Any]) -> str:
    """The share link of this fleet, written into the address bar too (the example: no parameter)."""
    default = fleet_edit.canonical_json(fleet_edit.example_fleet())
    if fleet_edit.canonical_json(doc) == default:
        if fleet_edit.LINK_PARAM in st.query_params:
            del st.query_params[fleet_edit.LINK_PARAM]
        return share_link("fleet", {})
    blob = fleet_edit.encode_link(doc)
    if st.query_params.get(fleet_edit.LINK_PARAM) != blob:
        st.query_params[fleet_edit.LINK_PARAM] = blob
    return share_link("fleet", {fleet_edit.LINK_PARAM: blob})
