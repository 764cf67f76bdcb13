"""Calibration: measure a device with torch, fit the engine's efficiency factors, store the result.

A calibration is a small versioned record (`planner.calibration_record.CalibrationRecord`) that
`planner.plan(scenario, calibration=record)` takes as an argument; nothing else in the engine changes with or
without one. torch is imported lazily, only when a profile runs, so every module here imports without it.

    from planner.calibration.profile import run_profile
    from planner.calibration_record import ProfileSettings
    record = run_profile(ProfileSettings(device="cpu", seconds=10, model="qwen2.5-0.5b"))
    plan(scenario, calibration=record)

Modules: `store` (records on disk), `device` (torch backends), `proxy` (the proxy model), `microbench`,
`profile` (the run), `fit` (efficiencies from measurements), `report`. The record itself (the data the
engine reads) is `planner.calibration_record`, below `inference/` and `training/`; this package sits above
them, since fitting plans the proxy with the engine.
"""
