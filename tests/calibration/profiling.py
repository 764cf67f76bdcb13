"""Running a real calibration profile inside a test session."""

from __future__ import annotations

import pytest

from planner.calibration.profile import run_profile
from planner.calibration.store import DATA_DIR_ENV


def run_profile_privately(tmp_path_factory, settings, **kwargs):
    """`run_profile` in a data directory of its own: session- and module-scoped profiles (`cpu_record`, the GPU
    path's) run before any test's directory exists, and two pytest workers' profiles must never meet at the user's
    machine-wide profile lock (they did, at random, under `-n 2`: 'a calibration profile is already running')."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DATA_DIR_ENV, str(tmp_path_factory.mktemp("headroom-profile-data")))
        return run_profile(settings, **kwargs)
