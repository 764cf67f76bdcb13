"""Errors of the calibration profile and of stored calibration records (all are PlanningErrors, so the
CLI and the dashboard print them as one sentence, never a traceback)."""

from __future__ import annotations

from planner.errors import PlanningError


class CalibrationError(PlanningError):
    """Something about calibration a user must act on."""


class ProfileUnavailable(CalibrationError):
    """The profile cannot start: torch missing, CUDA requested but absent, unsupported model."""


class ProfileAborted(CalibrationError):
    """The profile stopped part-way (out of memory, a backend error). `partial` is the record built
    from what was measured before it stopped (complete=False), or None if nothing was measured."""

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial


class ProfileCancelled(ProfileAborted):
    """The user cancelled the profile (cancel button, Ctrl-C)."""


class CalibrationFileError(CalibrationError):
    """A calibration file that cannot be used; the message names the file."""
