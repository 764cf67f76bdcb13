"""Pinned plans in links and files: the ``pin`` URL parameter, pasted share links, CSV import.

A pin travels as ``pin=cfg:<base64url(zlib(JSON))>`` (planner.share's inline encoding) of the scenario's
non-default fields plus its kind, one parameter per plan, so a Compare or Review link restores every pin. An
uploaded trace stays out of the link (as in planner.share): the pin it opens has fixed lengths, and says so.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import streamlit as st
from pydantic import ValidationError

from planner import PlanningError, explain
from planner.export import CsvImportError, scenarios_from_csv
from planner.scenario import parse_scenario
from planner.share import INLINE_PREFIX, TRACE_NOT_IN_LINK, decode_inline, encode_inline
from ui import controls, state

PIN_PARAM = "pin"
MAX_PINS = 50


def encode_pin(scenario) -> str:
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data.get("traffic", {}).pop("trace", None)  # up to 10^5 rows: no link carries a trace
    data["kind"] = scenario.kind
    return encode_inline(data)


def decode_pin(text: str, notes: list[str] | None = None):
    """The pinned scenario; a stream whose trace stayed out of the link gets fixed lengths (a note in `notes`)."""
    if not text.startswith(INLINE_PREFIX):
        raise ValueError("not a Headroom plan (expected 'cfg:…')")
    data = decode_inline(text)
    traffic = data.get("traffic")
    if isinstance(traffic, dict) and traffic.get("lengths") == "trace" and not traffic.get("trace"):
        data["traffic"] = {**traffic, "lengths": "fixed"}
        if notes is not None:
            notes.append(TRACE_NOT_IN_LINK)
    return parse_scenario(data)


def pins_from_texts(texts: list[str], where: str = "Link parameter 'pin'") -> tuple[list, list[str]]:
    scenarios, warnings = [], []
    for index, text in enumerate(texts[:MAX_PINS], start=1):
        try:
            notes: list[str] = []
            scenarios.append(decode_pin(text, notes))
            warnings += [f"{where} #{index}: {note}" for note in notes]
        except (ValueError, ValidationError, PlanningError) as exc:
            message = explain(exc) if isinstance(exc, (ValidationError, PlanningError)) else str(exc)
            warnings.append(f"{where} #{index} is not a valid plan ({message}); it was skipped.")
    if len(texts) > MAX_PINS:
        warnings.append(f"Only the first {MAX_PINS} pinned plans of the link were read.")
    return scenarios, warnings


def load_pins_from_url() -> list[str]:
    """Once per session: the pins a Compare/Review link carries become this session's pins."""
    if st.session_state.get("pins_url_loaded"):
        return []
    st.session_state["pins_url_loaded"] = True
    texts = st.query_params.get_all(PIN_PARAM)
    if not texts:
        return []
    scenarios, warnings = pins_from_texts(texts)
    state.add_pins(scenarios, "link")
    return warnings


def write_pins_url() -> None:
    wanted = [encode_pin(p.scenario) for p in state.pins()]
    if wanted:
        if st.query_params.get_all(PIN_PARAM) != wanted:
            st.query_params[PIN_PARAM] = wanted
    elif PIN_PARAM in st.query_params:
        del st.query_params[PIN_PARAM]


def pin_params() -> dict[str, Any]:
    return {PIN_PARAM: [encode_pin(p.scenario) for p in state.pins()]}


def scenarios_from_link(url: str) -> tuple[list, list[str]]:
    """Every plan a pasted Headroom share link describes: its page's scenario and/or its pins."""
    url = url.strip()
    if not url:
        return [], ["Paste a share link first."]
    parts = urlsplit(url if "://" in url or url.startswith(("/", "?")) else "http://x/" + url)
    params = parse_qs(parts.query, keep_blank_values=True)
    page = parts.path.rstrip("/").rsplit("/", 1)[-1]
    scenarios, warnings = pins_from_texts(params.get(PIN_PARAM, []), "The link's 'pin'")
    kinds = [k for k in ("inference", "training") if any(p.startswith(f"{k}_") for p in params)]
    if page in ("inference", "training") and page not in kinds:
        kinds.insert(0, page)
    if not kinds and not scenarios and page in ("", "inference"):
        kinds = ["inference"]  # the app's root with no parameters: the default inference plan
    for kind in kinds:
        if kind == "training" and not state.training_available():
            continue
        prefix = f"{kind}_"
        scenario, link_warnings = controls.read_link(kind, {k: v for k, v in params.items() if k.startswith(prefix)})
        scenarios.append(scenario)
        warnings += link_warnings
    if not scenarios:
        warnings.append("That link describes no Headroom plan (no inference_…, training_… or pin parameters).")
    return scenarios, warnings


def scenarios_from_csv_bytes(data: bytes) -> tuple[list, str | None]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], "the file is not UTF-8 text; export the CSV from Headroom"
    try:
        return scenarios_from_csv(text), None
    except CsvImportError as exc:
        return [], explain(exc)
