"""Training half of the engine: memory per GPU, step time, and cost of training or fine-tuning.

Public API: `TrainingScenario`, `LoraConfig`, `plan_training(scenario, calibration=None) -> TrainingPlan`.
Submodules: `scenario` (validated inputs), `memory` (one function per memory term), `step_time`
(FLOPs, communication, pipeline schedule), `metrics` (the whole computation over plain numbers,
broadcasting over numpy arrays), `plan` (wrapping into a frozen `TrainingPlan`), `results`.
"""

from planner.training.scenario import LoraConfig, TrainingScenario


def plan_training(scenario, calibration=None):
    from planner.training.plan import plan_training as _plan

    return _plan(scenario, calibration)


__all__ = ["TrainingScenario", "LoraConfig", "plan_training"]
