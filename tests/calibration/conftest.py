"""Shared fixtures: a private data directory per test, one real CPU profile per session, a fake CUDA."""

from __future__ import annotations

import pytest

from planner.calibration.store import DATA_DIR_ENV
from tests.calibration.profiling import run_profile_privately

# The CPU profile every CPU test reads: 3 s of budget (the profile itself sizes its proxy to fit), a
# 0.5B model whose proxy runs at half or full width on a 2-core CI machine.
CPU_PROFILE_SECONDS = 3.0
CPU_PROFILE_MODEL = "qwen2.5-0.5b"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """Every test stores calibrations in its own temporary data directory, never in the user's."""
    path = tmp_path / "headroom-data"
    monkeypatch.setenv(DATA_DIR_ENV, str(path))
    return path


@pytest.fixture(scope="session")
def cpu_record(tmp_path_factory):
    from planner.calibration_record import ProfileSettings

    progress = []
    record = run_profile_privately(
        tmp_path_factory,
        ProfileSettings(device="cpu", seconds=CPU_PROFILE_SECONDS, model=CPU_PROFILE_MODEL),
        progress=lambda fraction, message: progress.append((fraction, message)),
    )
    return record, progress
