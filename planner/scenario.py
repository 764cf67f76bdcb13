"""Either kind of scenario from a dict: the `kind` key picks the schema (inference when absent)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from planner.inference.scenario import InferenceScenario
from planner.training.scenario import TrainingScenario

Scenario = Annotated[InferenceScenario | TrainingScenario, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[InferenceScenario | TrainingScenario] = TypeAdapter(Scenario)


def scenario_adapter() -> TypeAdapter[InferenceScenario | TrainingScenario]:
    """Validates either kind of scenario from a dict (the `kind` key picks the schema)."""
    return _ADAPTER


def parse_scenario(data: Any) -> InferenceScenario | TrainingScenario:
    """A Scenario from a dict; missing `kind` means inference. Raises ValidationError/PlanningError."""
    if isinstance(data, dict) and "kind" not in data:
        data = {**data, "kind": "inference"}
    return _ADAPTER.validate_python(data)
