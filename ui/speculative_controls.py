"""The Speculative decoding section's inputs (``scenario.speculative``), drawn in the sidebar by ui.controls.

Off, or a draft that proposes tokens the model verifies in one step: a separate draft model sharing the
tokenizer, an EAGLE-style head, or the checkpoint's own multi-token-prediction (MTP) modules. MTP is offered
only for a model whose config ships them, and the draft-model picker lists only smaller catalog models with the
target's vocabulary; where either is absent the section says why. Ranges, defaults and help come from the
pydantic fields of ``SpeculativeDecoding``; an invalid combination gets the engine's sentence.

Keys (``<page>`` = inference)
-----------------------------
Pickers in ui.controls' sense: driven by session state only (seeded from the scenario the form starts from,
never given a default) and not bound to the URL; ui.controls writes the link's parameters
(``planner.share``: ``<page>_speculative=<method>``, ``<page>_speculative_<field>``).

* ``<page>_pick_speculative``: the method (off, draft_model, eagle, mtp).
* ``<page>_pick_speculative_k``: drafted tokens per round.
* ``<page>_pick_speculative_acceptance``: the acceptance rate; empty = the method's default (marked assumed).
* ``<page>_pick_speculative_draft``: the draft model's catalog id.
* ``<page>_memo_speculative``: the note about a choice the section had to undo (a model change removed it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import streamlit as st
from pydantic import ValidationError

from planner import PlanningError, explain, units
from planner.inference.draft import ACCEPTANCE_SOURCE_LABELS, DEFAULT_ACCEPTANCE, SpeculativeDecoding
from planner.model.architecture import ModelArchitecture, parameter_counts
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from ui.specs import FieldFacts, field_facts

OFF = "off"
METHODS = (OFF, "draft_model", "eagle", "mtp")
LABELS = {OFF: "Off", "draft_model": "Draft model", "eagle": "EAGLE head", "mtp": "MTP"}
# Where each default acceptance comes from, in a few words (the plan's assumptions give the full source).
METHOD_HELP = (
    "Off: plain decoding. Draft model: a small model with the same tokenizer proposes tokens. EAGLE head: a "
    "one-layer head on the model's hidden states (trained separately). MTP: the checkpoint's own "
    "multi-token-prediction modules (DeepSeek-V3/R1, GLM-4.5, MiniMax-M2). The model checks all drafted tokens in "
    "one verify step; output is unchanged."
)


def keys(prefix: str) -> dict[str, str]:
    return {
        "method": prefix + "pick_speculative",
        "k": prefix + "pick_speculative_k",
        "acceptance": prefix + "pick_speculative_acceptance",
        "draft": prefix + "pick_speculative_draft",
    }


def facts(name: str) -> FieldFacts:
    return field_facts(SpeculativeDecoding, name)


def default_acceptance_text(method: str) -> str:
    """What an empty acceptance box means for `method`: '0.85 (assumed: DeepSeek-V3 report)'."""
    return f"{DEFAULT_ACCEPTANCE[method]:g} (assumed: {ACCEPTANCE_SOURCE_LABELS[method]})"


# ------------------------------------------------------------------------------------------ choices


def _architecture(model: Any) -> ModelArchitecture | None:
    if model is None:
        return None
    try:
        return resolve_model(model)
    except (PlanningError, ValidationError, ValueError):
        return None


@lru_cache(maxsize=1)
def _catalog() -> tuple[tuple[str, str, int, int], ...]:
    """(id, display name, vocabulary, parameters) of every catalog model, smallest first."""
    rows = []
    for mid in catalog_model_ids():
        arch = resolve_model(mid)
        rows.append((mid, model_metadata(mid).get("display_name", mid), arch.vocab_size, parameter_counts(arch).total))
    return tuple(sorted(rows, key=lambda row: (row[3], row[0])))


def draft_candidates(target: ModelArchitecture | None) -> dict[str, str]:
    """Catalog models that can draft for `target`: its vocabulary, fewer parameters. id -> label."""
    if target is None:
        return {}
    size = parameter_counts(target).total
    return {
        mid: f"{name} ({units.count(params)} parameters)"
        for mid, name, vocab, params in _catalog()
        if vocab == target.vocab_size and params < size
    }


def offered_methods(target: ModelArchitecture | None) -> tuple[tuple[str, ...], list[str]]:
    """The methods this model can use, and a sentence for each one left out."""
    if target is None:
        return (OFF, "eagle"), []
    methods, absent = [OFF], []
    if draft_candidates(target):
        methods.append("draft_model")
    else:
        absent.append(
            f"**Draft model** is not offered: no smaller catalog model shares {target.name}'s vocabulary of "
            f"{target.vocab_size:,} tokens."
        )
    methods.append("eagle")
    if target.mtp_layers > 0:
        methods.append("mtp")
    else:
        absent.append(
            f"**MTP** is not offered: {target.name}'s config ships no multi-token-prediction modules "
            "(num_nextn_predict_layers); DeepSeek-V3/R1, GLM-4.5 and MiniMax-M2 do."
        )
    return tuple(methods), absent


# ------------------------------------------------------------------------------------------ seeding


def seed_widgets(prefix: str, seed) -> bool:
    """Give the section's widgets that do not exist yet the seed's values (session state only: no rerun)."""
    ss = st.session_state
    k = keys(prefix)
    spec = getattr(seed, "speculative", None)
    values = {
        "method": OFF if spec is None else spec.method,
        "k": facts("num_speculative_tokens").default if spec is None else spec.num_speculative_tokens,
        "acceptance": None if spec is None else spec.acceptance_rate,
        "draft": None if spec is None else spec.draft_model,
    }
    for name, key in k.items():
        if key not in ss:
            ss[key] = values[name]
    return False


# ------------------------------------------------------------------------------------------ the section


def speculative_section(prefix: str, seed, where, model: Any = None) -> tuple[dict[str, Any], str | None]:
    """The method and, when on, k, the acceptance rate and (for a draft model) the draft; (fields, error)."""
    ss = st.session_state
    k = keys(prefix)
    seed_widgets(prefix, seed)
    target = _architecture(model)
    methods, absent = offered_methods(target)
    memo_key = prefix + "memo_speculative"
    if ss[k["method"]] not in methods:
        gone = ss[k["method"]]
        ss[k["method"]] = OFF
        name = target.name if target is not None else "this model"
        ss[memo_key] = f"{LABELS.get(gone, gone)} is not available for {name}: speculative decoding was switched off."
    method = where.radio(
        "Speculative decoding",
        methods,
        key=k["method"],
        horizontal=True,
        persist_state="session",
        format_func=lambda m: LABELS[m],
        label_visibility="collapsed",
        help=METHOD_HELP,
    )
    note = ss.pop(memo_key, None)
    if note:
        where.info(note, icon=":material/info:")
    if method == OFF:
        where.caption(
            "Plain decoding. A draft proposes tokens the model verifies in one step: it pays while decode is "
            "memory-bound (small batches) and costs memory for the draft."
        )
        if absent:
            where.caption(" ".join(absent))
        return {"speculative": None}, None

    values: dict[str, Any] = {"method": method}
    if method == "draft_model":
        candidates = draft_candidates(target)
        if ss.get(k["draft"]) not in candidates:
            ss[k["draft"]] = next(iter(candidates))
        values["draft_model"] = where.selectbox(
            "Draft model",
            list(candidates),
            key=k["draft"],
            persist_state="session",
            format_func=lambda mid: candidates.get(mid, mid),
            help=f"{facts('draft_model').help()}. Smaller catalog models with the same vocabulary as the model.",
        )
    kf = facts("num_speculative_tokens")
    lo, hi = kf.widget_range()
    values["num_speculative_tokens"] = where.slider(
        "Drafted tokens per round (k)",
        min_value=lo,
        max_value=hi,
        step=1,
        key=k["k"],
        persist_state="session",
        help=kf.help(),
    )
    af = facts("acceptance_rate")
    lo, hi = af.widget_range()
    values["acceptance_rate"] = where.number_input(
        "Acceptance rate per drafted token",
        min_value=lo,
        max_value=hi,
        value=None,
        step=0.05,
        format="%.2f",
        key=k["acceptance"],
        persist_state="session",
        placeholder=default_acceptance_text(method),
        help=f"{af.help()}. Empty: the method's default, marked assumed in the results.",
    )
    if absent:
        where.caption(" ".join(absent))
    try:
        return {"speculative": SpeculativeDecoding(**values)}, None
    except (ValidationError, PlanningError) as exc:
        return {"speculative": None}, f"speculative decoding is not valid ({explain(exc)})"
