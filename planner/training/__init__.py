"""Training half of the engine: memory per GPU, step time, and cost of training or fine-tuning.

Submodules: `scenario` (validated inputs), `memory` (one function per memory term), `step_time`
(FLOPs, communication, pipeline schedule), `metrics` (the whole computation over plain numbers,
broadcasting over numpy arrays), `plan` (wrapping into a frozen `TrainingPlan`), `results`.
"""
