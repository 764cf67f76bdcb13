"""What every phase of the profile shares: the device backend, the clock and budget, cancellation,
progress reporting and the memory cap. No torch import here."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.calibration.device import Backend
from planner.calibration.errors import ProfileCancelled

ProgressFn = Callable[[float, str], None]


@dataclass
class Timing:
    seconds: float  # median seconds per call
    reps: int  # calls timed (warm-up excluded unless it was the only one)
    first_seconds: float  # the warm-up call (lazy initialisation included)
    best_seconds: float = 0.0  # fastest sample: the ceiling, least disturbed by other processes


@dataclass
class ProfileContext:
    backend: Backend
    budget_seconds: float
    memory_cap_bytes: int
    cancel: Callable[[], bool] | threading.Event | None = None
    progress_fn: ProgressFn | None = None
    started: float = field(default_factory=time.perf_counter)
    notes: list[str] = field(default_factory=list)

    # ---- clock
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        return max(self.budget_seconds - self.elapsed(), 0.0)

    # ---- control
    def cancelled(self) -> bool:
        if self.cancel is None:
            return False
        if isinstance(self.cancel, threading.Event):
            return self.cancel.is_set()
        return bool(self.cancel())

    def check_cancel(self) -> None:
        if self.cancelled():
            raise ProfileCancelled("calibration cancelled")

    def progress(self, fraction: float, message: str) -> None:
        self.check_cancel()
        if self.progress_fn is not None:
            self.progress_fn(min(max(fraction, 0.0), 1.0), message)

    # ---- timing
    def measure(
        self,
        fn: Callable[[], object],
        budget_seconds: float,
        *,
        min_reps: int = 3,
        max_reps: int = 200,
        min_sample_seconds: float = 2e-3,
    ) -> Timing:
        """Median seconds per call of `fn` within about `budget_seconds`.

        One warm-up call first (kernel selection, lazy allocation). Calls shorter than
        `min_sample_seconds` are timed in groups so a timer's resolution and launch latency do not
        dominate. Stops at `max_reps`, or once the budget is spent and `min_reps` samples exist; a call
        slower than the whole budget is measured once (its warm-up is the measurement).
        """
        backend = self.backend
        self.check_cancel()
        first = backend.time_call(fn)
        if first >= budget_seconds:
            return Timing(first, 1, first, first)
        inner = 1 if first >= min_sample_seconds else min(1000, math.ceil(min_sample_seconds / max(first, 1e-7)))
        samples: list[float] = []
        spent = first
        while len(samples) < max_reps:
            self.check_cancel()
            per_call = backend.time_call(fn, inner)
            samples.append(per_call)
            spent += per_call * inner
            if spent >= budget_seconds and len(samples) >= min_reps:
                break
            if spent + per_call * inner > budget_seconds * 1.5:
                break
        return Timing(statistics.median(samples), len(samples) * inner, first, min(samples))


__all__ = ["ProfileContext", "ProgressFn", "Timing"]
