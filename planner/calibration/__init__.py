"""Calibration: measure a device with torch, fit the engine's efficiency factors, store the result.

A calibration is a small versioned record (`CalibrationRecord`) that `planner.plan(scenario,
calibration=record)` takes as an argument; nothing else in the engine changes with or without one.
torch is imported lazily, only when a profile runs, so this package imports without it.

    from planner.calibration import run_profile, ProfileSettings, save_calibration
    record = run_profile(ProfileSettings(device="cpu", seconds=10, model="qwen2.5-0.5b"))
    save_calibration(record)                      # JSON in the user's data directory
    plan(scenario, calibration=record)
"""

from planner.calibration.errors import (
    CalibrationError,
    CalibrationFileError,
    ProfileAborted,
    ProfileCancelled,
    ProfileUnavailable,
)
from planner.calibration.record import (
    CALIBRATION_VERSION,
    CalibrationRecord,
    ComparisonRow,
    ProfileSettings,
)


def run_profile(settings=None, **kwargs):
    """Profile a device (imports torch). See planner.calibration.profile.run_profile."""

    return _run(settings, **kwargs)


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""

    return importlib.util.find_spec("torch") is not None


import importlib.util

from planner.calibration.profile import run_profile as _run
from planner.calibration.store import (  # noqa: E402 - after the lazy helpers on purpose
    calibrations_dir,
    delete_calibration,
    export_calibration,
    get_active_id,
    import_calibration,
    list_calibrations,
    load_calibration,
    load_calibration_file,
    save_calibration,
    set_active_id,
)

__all__ = [
    "CALIBRATION_VERSION",
    "CalibrationRecord",
    "ComparisonRow",
    "ProfileSettings",
    "CalibrationError",
    "CalibrationFileError",
    "ProfileAborted",
    "ProfileCancelled",
    "ProfileUnavailable",
    "run_profile",
    "torch_available",
    "calibrations_dir",
    "save_calibration",
    "load_calibration",
    "load_calibration_file",
    "list_calibrations",
    "delete_calibration",
    "export_calibration",
    "import_calibration",
    "get_active_id",
    "set_active_id",
]
