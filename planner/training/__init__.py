"""Training half of the engine: memory per GPU, step time, and cost of training or fine-tuning.

Read top-down from `plan.plan_training`: `scenario` (validated inputs) -> `inputs` (the scenario's and
the cluster's numbers as typed records) -> `metrics.training_metrics`, which assembles `footprint`
(memory per GPU of the heavier pipeline stage, from the terms in `memory`) and `step` (one optimizer
step, from the FLOPs, communication and schedule terms in `step_time`) and adds throughput and cost.
Everything up to there broadcasts over numpy arrays, so the sweep runs the same code. `explain` turns
the results into the bottleneck, warnings, assumptions and equations; `results` holds the frozen plan.
"""
