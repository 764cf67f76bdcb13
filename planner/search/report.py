"""Everything the trade-off analysis says about one scenario, in one typed result: the diagnosis, each
technique's effect, the checklist, the simpler alternatives, the nearest plans that fit, the suggestions that fix
the plan (`planner.search.fixes`), and (inference) where the steps sit on the roofline and the concurrency and
concurrency x context sweeps (what `python -m planner diagnose` prints and the Inference and Trade-offs pages
show)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan as make_plan
from planner.search.alternatives import Alternative, alternatives
from planner.search.checklist import Checklist, checklist
from planner.search.diagnosis import Diagnosis, diagnose, techniques
from planner.search.explore import Sweep, concurrency_axis, concurrency_sweep, context_axis, context_concurrency_grid
from planner.search.fixes import DEFAULT_APP_URL, Suggestions, suggest_fixes
from planner.search.nearest import NearestPlan, nearest_fitting
from planner.search.roofline_points import PlanRoofline, plan_roofline
from planner.search.techniques import TechniqueEffect


class TradeoffReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    diagnosis: Diagnosis
    techniques: list[TechniqueEffect]
    checklist: Checklist
    alternatives: list[Alternative]
    nearest: list[NearestPlan] = []  # the nearest plans that fit, when this one does not
    suggestions: Suggestions | None = None  # when this one does not fit: the ranked fixes, each with its link
    roofline: PlanRoofline | None = None  # inference: prefill, decode (and verify) on the GPU's roofline
    concurrency_sweep: Sweep | None = None  # inference: this plan at each concurrency
    context_grid: Sweep | None = None  # inference: every (context, concurrency) cell


def tradeoff_report(scenario, calibration=None, app_url: str = DEFAULT_APP_URL) -> TradeoffReport:
    """Each part computed once and shared: one plan, one full plan per technique, a few per alternative.
    `app_url`: the dashboard the suggestions' links open."""
    base = make_plan(scenario, calibration)
    effects = techniques(scenario, calibration)
    diagnosis = diagnose(scenario, calibration, effects=effects)
    options = alternatives(scenario, calibration, base)
    answers = checklist(scenario, calibration, base=base, effects=effects, diagnosis=diagnosis, alternatives=options)
    nearest = (
        [] if base.memory.fits else nearest_fitting(scenario, calibration, base=base, effects=effects, simpler=options)
    )
    fixes = (
        None
        if base.memory.fits
        else suggest_fixes(scenario, calibration, base=base, effects=effects, simpler=options, app_url=app_url)
    )
    roofline = sweep = grid = None
    if scenario.kind == "inference":
        axis = concurrency_axis(scenario, base.memory.max_concurrency)
        contexts = context_axis(scenario, base.model.max_context_tokens)
        roofline = plan_roofline(base)
        sweep = concurrency_sweep(scenario, calibration, axis)
        grid = context_concurrency_grid(scenario, calibration, axis, contexts)
    return TradeoffReport(
        kind=scenario.kind,
        diagnosis=diagnosis,
        techniques=effects,
        checklist=answers,
        alternatives=options,
        nearest=nearest,
        suggestions=fixes,
        roofline=roofline,
        concurrency_sweep=sweep,
        context_grid=grid,
    )
