"""Session state shared by the pages: the cached ``plan()``, each page's current scenario, pinned plans.

Every cached function takes the active calibration (``ui.calibration_view.active_calibration()``, or None)
as an ordinary, hashed argument: it changes the result. A calibration record hashes by its JSON, a
scenario by its JSON, so two sessions with the same inputs share cache entries.

Keys written here (not widgets):
- ``current_inference`` / ``current_training``: the last scenario each input page built.
- ``pins``: list of ``Pin`` (plans pinned for Compare and Review), in the order they were pinned.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from planner import PlanningError, explain, plan
from planner.inference.scenario import InferenceScenario
from planner.search import diagnosis
from planner.training.scenario import TrainingScenario
from ui import sweeps, tradeoff_data

KINDS = ("inference", "training")
TRAINING_SCENARIO_FQN = "planner.training.scenario.TrainingScenario"


CALIBRATION_FQN = "planner.calibration.record.CalibrationRecord"


def _scenario_hash(scenario) -> str:
    """Frozen scenarios hash by their JSON: every field, nothing else (decision text included)."""
    return f"{type(scenario).__name__}:{scenario.model_dump_json()}"


def _calibration_hash(record) -> str:
    """A calibration record hashes by its JSON: an edited or re-run record with the same id is a new key."""
    return f"calibration:{record.model_dump_json()}"


HASH_FUNCS = {
    InferenceScenario: _scenario_hash,
    TRAINING_SCENARIO_FQN: _scenario_hash,
    CALIBRATION_FQN: _calibration_hash,
}
_HASH_FUNCS = HASH_FUNCS  # old name


@st.cache_data(max_entries=256, show_spinner=False, hash_funcs=HASH_FUNCS)
def cached_plan(scenario, calibration=None):
    """plan(scenario, calibration), cached per (scenario, calibration) for every session of this server."""
    return plan(scenario, calibration)


@st.cache_data(max_entries=32, show_spinner="Sweeping concurrency…", hash_funcs=HASH_FUNCS)
def concurrency_sweep(scenario, max_concurrency: int | None, calibration=None) -> pd.DataFrame:
    return sweeps.concurrency_sweep(scenario, sweeps.concurrency_axis(scenario, max_concurrency), calibration)


@st.cache_data(max_entries=32, show_spinner="Sweeping concurrency × context…", hash_funcs=HASH_FUNCS)
def context_grid(scenario, max_concurrency: int | None, model_max_context: int, calibration=None) -> pd.DataFrame:
    return sweeps.context_concurrency_grid(
        scenario,
        sweeps.concurrency_axis(scenario, max_concurrency),
        sweeps.context_axis(scenario, model_max_context),
        calibration,
    )


# ---------------------------------------------------------------------------------------- trade-offs


@st.cache_data(max_entries=64, show_spinner="Applying each technique…", hash_funcs=HASH_FUNCS)
def cached_techniques(scenario, calibration=None) -> list:
    """planner.search.diagnosis.techniques: one full plan per technique (training: ~10 ms each)."""

    return diagnosis.techniques(scenario, calibration)


@st.cache_data(max_entries=64, show_spinner=False, hash_funcs=HASH_FUNCS)
def cached_diagnosis(scenario, calibration=None):

    return diagnosis.diagnose(scenario, calibration, effects=cached_techniques(scenario, calibration))


@st.cache_data(max_entries=64, show_spinner="Trying smaller models and contexts…", hash_funcs=HASH_FUNCS)
def cached_simpler(scenario, calibration=None):

    return tradeoff_data.simpler_alternatives(scenario, calibration, base=cached_plan(scenario, calibration))


def _spec_hash(spec) -> str:
    return repr(spec)


@st.cache_data(
    max_entries=16,
    show_spinner="Searching configurations…",
    hash_funcs={**HASH_FUNCS, "ui.tradeoff_data.SearchSpec": _spec_hash},
)
def cached_search(scenario, spec, calibration=None):
    """planner.sweep over the search grid, filtered, ranked and reduced to its Pareto frontier."""

    return tradeoff_data.run_search(scenario, spec, calibration)


@st.cache_data(
    max_entries=16,
    show_spinner="Searching training configurations…",
    hash_funcs={**HASH_FUNCS, "ui.tradeoff_data.TrainingSearchSpec": _spec_hash},
)
def cached_training_search(scenario, spec, calibration=None):
    """planner.search.sweep's training grid for this search, filtered, ranked, with its Pareto frontier."""

    return tradeoff_data.run_training_search(scenario, spec, calibration)


def scenario_class(kind: str) -> type:
    if kind == "inference":
        return InferenceScenario

    return TrainingScenario


def training_available() -> bool:
    try:
        scenario_class("training")
    except ImportError:
        return False
    return True


def build_scenario(kind: str, fields: dict[str, Any]):
    """(scenario, None) or (None, error sentence)."""
    try:
        return scenario_class(kind)(**fields), None
    except (ValidationError, PlanningError) as exc:
        return None, explain(exc)


def remember(kind: str, scenario) -> None:
    st.session_state[f"current_{kind}"] = scenario


def remembered(kind: str):
    return st.session_state.get(f"current_{kind}")


# ------------------------------------------------------------------------------------------- pins


@dataclass(frozen=True)
class Pin:
    id: str
    scenario: Any
    source: str  # "session", "link" or "csv"


def pins() -> list[Pin]:
    return list(st.session_state.get("pins", []))


def set_pins(items: list[Pin]) -> None:
    st.session_state["pins"] = list(items)


def add_pins(scenarios, source: str) -> tuple[int, int]:
    """Pin scenarios not pinned yet; returns (added, already there)."""
    current = pins()
    known = {_scenario_hash(p.scenario) for p in current}
    added = skipped = 0
    for scenario in scenarios:
        key = _scenario_hash(scenario)
        if key in known:
            skipped += 1
            continue
        known.add(key)
        current.append(Pin(id=uuid.uuid4().hex[:8], scenario=scenario, source=source))
        added += 1
    set_pins(current)
    return added, skipped


def remove_pin(pin_id: str) -> None:
    set_pins([p for p in pins() if p.id != pin_id])


def replace_pin(pin_id: str, scenario) -> None:
    set_pins([Pin(p.id, scenario, p.source) if p.id == pin_id else p for p in pins()])
