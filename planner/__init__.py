"""Headroom's engine: closed-form memory, roofline timing and cost for LLM inference and training.

Public API: `plan(scenario)`, the scenario classes, and `PlanningError`. Never imports streamlit.
"""

from planner.errors import PlanningError, explain
from planner.inference.scenario import InferenceScenario
from planner.plan import plan
from planner.scenario import parse_scenario

__all__ = ["InferenceScenario", "PlanningError", "explain", "parse_scenario", "plan"]
__version__ = "0.1.0"
