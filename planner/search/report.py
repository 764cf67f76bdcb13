"""Everything the trade-off analysis says about one scenario, in one typed result: the diagnosis, each
technique's effect, the checklist and the simpler alternatives (what `python -m planner diagnose` prints
and the Trade-offs page shows)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan as make_plan
from planner.search.alternatives import Alternative, alternatives
from planner.search.checklist import Checklist, checklist
from planner.search.diagnosis import Diagnosis, diagnose, techniques
from planner.search.techniques import TechniqueEffect


class TradeoffReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    diagnosis: Diagnosis
    techniques: list[TechniqueEffect]
    checklist: Checklist
    alternatives: list[Alternative]


def tradeoff_report(scenario, calibration=None) -> TradeoffReport:
    """Each part computed once and shared: one plan, one full plan per technique, a few per alternative."""
    base = make_plan(scenario, calibration)
    effects = techniques(scenario, calibration)
    diagnosis = diagnose(scenario, calibration, effects=effects)
    options = alternatives(scenario, calibration, base)
    answers = checklist(scenario, calibration, base=base, effects=effects, diagnosis=diagnosis, alternatives=options)
    return TradeoffReport(
        kind=scenario.kind, diagnosis=diagnosis, techniques=effects, checklist=answers, alternatives=options
    )
