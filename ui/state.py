"""Session state shared by the pages: the cached ``plan()``, each page's current scenario, pinned plans.

Every cached function takes this session's calibration (``ui.calibration_view.active_calibration()``, or None)
as an ordinary, hashed argument: it changes the result. A calibration record hashes by its JSON (its mapping
to other GPUs included), a scenario by its JSON, so two sessions with the same inputs share cache entries.
Each one first keeps the calibration only for plans it may apply to (``planner.plan.calibration_for_gpu``):
a CPU calibration leaves an H100 plan on the documented defaults unless the session mapped it.

A scenario with a request stream (``traffic``) is simulated by ``cached_plan`` itself; the sweeps and the static
searches (techniques, diagnosis, simpler alternatives) answer for its static plan (``static``): one simulation per
variant would turn their milliseconds into seconds. The Traffic view's load curve and SLO capacity are cached
without the stream's rate (``planner.inference.traffic.probe_scenario``): the engine sets the rate of every probe
itself, so moving the rate slider re-simulates only the stream. A disaggregated split of the stream (``disaggregated``, ``split_comparison``)
and the Trade-offs page's SLO search (``cached_slo_search``) are cached per scenario like the plan.

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
from streamlit.errors import StreamlitAPIException

from planner import PlanningError, explain, plan
from planner.inference.disaggregation import (
    DisaggregatedLayout,
    DisaggregatedResult,
    SplitComparison,
    best_split,
    simulate_disaggregated,
)
from planner.inference.plan import TRAFFIC_NOT_SIMULATED
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import (
    CAPACITY_MAX_REQUESTS,
    CURVE_REQUESTS,
    TrafficEngine,
    capacity_answer,
    probe_scenario,
)
from planner.inference.traffic_results import CapacityAnswer, LoadCurve
from planner.inference.workload import Slo
from planner.plan import calibration_for_scenario, without_traffic
from planner.results import warning_of
from planner.search import alternatives, diagnosis, explore, fixes, grid_search, slo_search
from planner.training.scenario import TrainingScenario
from ui import sweeps

KINDS = ("inference", "training")
TRAINING_SCENARIO_FQN = "planner.training.scenario.TrainingScenario"


CALIBRATION_FQN = "planner.calibration_record.CalibrationRecord"


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


def applicable(scenario, calibration):
    """The session's calibration as `scenario`'s plans may use it: None when it measured another GPU (or, for a
    benchmark calibration, another runtime or model family) and the session did not map it (plan() would refuse
    it)."""
    return calibration_for_scenario(scenario, calibration)


@st.cache_data(max_entries=256, show_spinner=False, hash_funcs=HASH_FUNCS)
def _plan(scenario, calibration=None):
    return plan(scenario, applicable(scenario, calibration))


def cached_plan(scenario, calibration=None):
    """plan(scenario, calibration), cached per (scenario, calibration) for every session of this server. A
    request stream the layout cannot serve (no room for a KV cache) leaves the static plan with the reason
    as a warning (`traffic_failure`)."""
    return _plan(scenario, calibration)


def traffic_failure(plan_) -> str | None:
    """Why a scenario's request stream was not simulated (its `traffic_not_simulated` warning), or None."""
    warning = warning_of(plan_, "traffic_not_simulated")
    return warning.message.removeprefix(TRAFFIC_NOT_SIMULATED).rstrip(".") if warning is not None else None


def static(scenario):
    """The scenario without its request stream (itself when it has none)."""
    return without_traffic(scenario)


@st.cache_data(max_entries=32, show_spinner="Sweeping concurrency…", hash_funcs=HASH_FUNCS)
def concurrency_sweep(scenario, max_concurrency: int | None, calibration=None) -> pd.DataFrame:
    scenario = static(scenario)
    axis = explore.concurrency_axis(scenario, max_concurrency)
    return sweeps.frame(explore.concurrency_sweep(scenario, applicable(scenario, calibration), axis))


@st.cache_data(max_entries=32, show_spinner="Sweeping concurrency × context…", hash_funcs=HASH_FUNCS)
def context_grid(scenario, max_concurrency: int | None, model_max_context: int, calibration=None) -> pd.DataFrame:
    scenario = static(scenario)
    grid = explore.context_concurrency_grid(
        scenario,
        applicable(scenario, calibration),
        explore.concurrency_axis(scenario, max_concurrency),
        explore.context_axis(scenario, model_max_context),
    )
    return sweeps.frame(grid)


# ------------------------------------------------------------------------------------------ traffic


@st.cache_data(max_entries=64, show_spinner="Simulating the load–latency curve…", hash_funcs=HASH_FUNCS)
def _load_curve(probe, calibration=None) -> LoadCurve:
    return TrafficEngine.of(probe, applicable(probe, calibration)).load_curve()


def load_curve(scenario, calibration=None) -> LoadCurve:
    """planner's load–latency curve of the scenario's stream (one replica, light load to past saturation)."""
    return _load_curve(probe_scenario(scenario, keep_slo=False, max_requests=CURVE_REQUESTS), calibration)


@st.cache_data(max_entries=64, show_spinner="Searching the largest rate that meets the SLO…", hash_funcs=HASH_FUNCS)
def _slo_rate(probe, calibration=None) -> float:
    return TrafficEngine.of(probe, applicable(probe, calibration)).capacity().max_requests_per_second_per_replica


def slo_capacity(scenario, target_requests_per_second: float | None, calibration=None) -> CapacityAnswer:
    """The largest per-replica rate meeting the scenario's SLO, and the replicas, GPUs and $/month for the target."""
    probe = probe_scenario(scenario, keep_slo=True, max_requests=CAPACITY_MAX_REQUESTS)
    return _verified_capacity(probe, _slo_rate(probe, calibration), target_requests_per_second, calibration)


@st.cache_data(max_entries=64, show_spinner="Simulating the replicas the target rate needs…", hash_funcs=HASH_FUNCS)
def _verified_capacity(probe, rate_per_replica: float, target_requests_per_second: float | None, calibration=None):
    """The engine's capacity answer at the target, checked by simulating its replicas at that rate
    (`TrafficEngine.verified`)."""
    engine = TrafficEngine.of(probe, applicable(probe, calibration))
    return engine.verified(capacity_answer(engine, rate_per_replica, target_requests_per_second))


def _model_hash(record) -> str:
    return f"{type(record).__name__}:{record.model_dump_json()}"


@st.cache_data(
    max_entries=32,
    show_spinner="Simulating the stream on a prefill pool and a decode pool…",
    hash_funcs={**HASH_FUNCS, DisaggregatedLayout: _model_hash},
)
def disaggregated(scenario, layout, calibration=None) -> DisaggregatedResult:
    """planner.inference.disaggregation.simulate_disaggregated: the scenario's stream on `layout`'s two pools."""
    return simulate_disaggregated(scenario, layout, applicable(scenario, calibration))


@st.cache_data(max_entries=16, show_spinner="Simulating every prefill/decode split…", hash_funcs=HASH_FUNCS)
def split_comparison(scenario, calibration=None) -> SplitComparison:
    """planner.inference.disaggregation.best_split: every split of the GPUs and the colocated deployment."""
    return best_split(scenario, applicable(scenario, calibration))


# ---------------------------------------------------------------------------------------- trade-offs


@st.cache_data(max_entries=64, show_spinner="Applying each technique…", hash_funcs=HASH_FUNCS)
def cached_techniques(scenario, calibration=None) -> list:
    """planner.search.diagnosis.techniques: one full plan per technique (training: ~10 ms each), static."""
    scenario = static(scenario)
    return diagnosis.techniques(scenario, applicable(scenario, calibration))


@st.cache_data(max_entries=64, show_spinner=False, hash_funcs=HASH_FUNCS)
def cached_diagnosis(scenario, calibration=None):
    scenario = static(scenario)
    calibration = applicable(scenario, calibration)
    return diagnosis.diagnose(scenario, calibration, effects=cached_techniques(scenario, calibration))


@st.cache_data(max_entries=64, show_spinner="Trying smaller models and contexts…", hash_funcs=HASH_FUNCS)
def cached_simpler(scenario, calibration=None) -> list:
    """planner.search.alternatives: a smaller catalog model and the longest context that fit (a few plans)."""
    scenario = static(scenario)
    calibration = applicable(scenario, calibration)
    return alternatives.alternatives(scenario, calibration, base=cached_plan(scenario, calibration))


@st.cache_data(max_entries=64, show_spinner="Searching layouts, GPUs and formats that fit…", hash_funcs=HASH_FUNCS)
def cached_suggestions(scenario, calibration=None):
    """planner.search.fixes.suggest_fixes for the static plan (each answer keeps the scenario's request stream),
    from the cached techniques and alternatives."""
    stream = scenario
    scenario = static(scenario)
    calibration = applicable(scenario, calibration)
    return fixes.suggest_fixes(
        stream,
        calibration,
        base=cached_plan(scenario, calibration),
        effects=cached_techniques(scenario, calibration),
        simpler=cached_simpler(scenario, calibration),
    )


def _spec_hash(spec) -> str:
    return f"{type(spec).__name__}:{spec.model_dump_json()}"


@st.cache_data(
    max_entries=16,
    show_spinner="Searching configurations…",
    hash_funcs={**HASH_FUNCS, grid_search.InferenceSearchSpec: _spec_hash},
)
def cached_search(scenario, spec, calibration=None):
    """planner.search.grid_search over the spec's grid: feasible set, top rows, Pareto frontier."""
    return grid_search.run_inference_search(scenario, spec, applicable(scenario, calibration))


@st.cache_data(
    max_entries=16,
    show_spinner="Searching training configurations…",
    hash_funcs={**HASH_FUNCS, grid_search.TrainingSearchSpec: _spec_hash},
)
def cached_training_search(scenario, spec, calibration=None):
    """planner.search.grid_search's training search: feasible set, top rows, cost-vs-time frontier."""
    return grid_search.run_training_search(scenario, spec, applicable(scenario, calibration))


@st.cache_data(
    max_entries=16,
    show_spinner="Simulating the best candidates under the SLO, best first…",
    hash_funcs={**HASH_FUNCS, grid_search.InferenceSearchSpec: _spec_hash, Slo: _spec_hash},
)
def cached_slo_search(scenario, spec, slo, max_simulations: int, calibration=None) -> slo_search.SloSearchResult:
    """planner.search.slo_search.run_slo_search: the spec's search space under the scenario's stream and `slo`."""
    return slo_search.run_slo_search(scenario, spec, slo, applicable(scenario, calibration), max_simulations)


def set_url_param(key: str, value: str | None) -> bool:
    """Set (None: delete) one URL parameter, unless a widget still owns it; True if written.

    Streamlit unbinds the input page's widgets from their parameters at the end of the first run of another
    page (and at its start only for parameters the browser sent), and refuses writes to a bound parameter
    until then; the next run writes it.
    """
    try:
        if value is None:
            del st.query_params[key]
        else:
            st.query_params[key] = value
    except StreamlitAPIException as exc:
        if not str(exc.error_id or "").startswith("query-param-bound-cannot"):
            raise
        return False
    return True


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
