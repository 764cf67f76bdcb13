"""The Calibrate page's background profile: a thread runs planner.calibration.profile with progress and a cancel
event; the script thread keeps serving reruns and reads the job from session state (``calibrate_job``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import streamlit as st

from planner.calibration import profile
from planner.calibration.errors import CalibrationError, ProfileAborted
from planner.calibration_record import CalibrationRecord, ProfileSettings

JOB_KEY = "calibrate_job"


@dataclass
class ProfileJob:
    settings: ProfileSettings
    cancel: threading.Event = field(default_factory=threading.Event)
    fraction: float = 0.0
    message: str = "starting"
    record: CalibrationRecord | None = None
    error: str | None = None
    partial: CalibrationRecord | None = None
    done: bool = False
    started: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def run(self) -> None:

        try:
            self.record = profile.run_profile(self.settings, progress=self.progress, cancel=self.cancel)
        except ProfileAborted as exc:
            self.error, self.partial = str(exc), exc.partial
        except CalibrationError as exc:
            self.error = str(exc)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True

    def start(self) -> ProfileJob:
        self.thread = threading.Thread(target=self.run, name="headroom-calibration", daemon=True)
        self.thread.start()
        return self


def start_profile(settings: ProfileSettings) -> ProfileJob:
    job = ProfileJob(settings).start()
    st.session_state[JOB_KEY] = job
    return job
