"""Shared fixtures: a private data directory per test, one real CPU profile per session, a fake CUDA."""

from __future__ import annotations

import pytest

from planner.calibration.store import DATA_DIR_ENV

# The CPU profile every CPU test reads: 3 s of budget (the profile itself sizes its proxy to fit), a
# 0.5B model whose proxy runs at half or full width on a 2-core CI machine.
CPU_PROFILE_SECONDS = 3.0
CPU_PROFILE_MODEL = "qwen2.5-0.5b"


@pytest.fixture(scope="session", autouse=True)
def session_data_dir(tmp_path_factory):
    """Session- and module-scoped profiles (`cpu_record`, the GPU path's records) run before any test's own
    directory exists: each pytest worker gets a private one, so two workers' profiles never meet at the user's
    machine-wide profile lock (they did, at random, under `-n 2`: 'a calibration profile is already running')."""
    patch = pytest.MonkeyPatch()
    patch.setenv(DATA_DIR_ENV, str(tmp_path_factory.mktemp("headroom-session-data")))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """Every test stores calibrations in its own temporary data directory, never in the user's."""
    path = tmp_path / "headroom-data"
    monkeypatch.setenv(DATA_DIR_ENV, str(path))
    return path


@pytest.fixture(scope="session")
def cpu_record():
    from planner.calibration.profile import run_profile
    from planner.calibration_record import ProfileSettings

    progress = []
    record = run_profile(
        ProfileSettings(device="cpu", seconds=CPU_PROFILE_SECONDS, model=CPU_PROFILE_MODEL),
        progress=lambda fraction, message: progress.append((fraction, message)),
    )
    return record, progress
