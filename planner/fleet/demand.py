"""A deployment's load over the day: 24 hourly request rates from a list, a diurnal wave or a rate trace.

Each hour is planned at its mean rate (requests per second): swings inside an hour are not modelled (the autoscaling
headroom is what absorbs them). A diurnal wave is a raised cosine, `trough + (peak - trough) x (1 + cos(2 pi (h -
peak_hour) / 24)) / 2`, evaluated at the start of each hour
(so the peak hour holds the peak). A rate trace is CSV rows `seconds,requests_per_second`
(seconds since a midnight; a trace of several days is folded onto one); each hour of day is the mean of its samples.
"""

from __future__ import annotations

import csv
import io
import math
from functools import lru_cache

from planner.errors import PlanningError

HOURS = 24
SECONDS_PER_DAY = 86_400.0
MAX_RATE_REQUESTS_PER_SECOND = 1e7
MAX_RATE_TRACE_ROWS = 100_000  # one sample a second for a whole day fits; a longer trace is resampled first
MAX_RATE_TRACE_BYTES = 8 * 1024 * 1024
TRACE_COLUMNS = ("seconds", "requests_per_second")


def diurnal_rates(peak: float, trough: float, peak_hour: float) -> tuple[float, ...]:
    """The raised cosine at the start of each hour (module docstring)."""
    return tuple(
        trough + (peak - trough) * (1 + math.cos(2 * math.pi * (h - peak_hour) / HOURS)) / 2 for h in range(HOURS)
    )


def check_rate_trace(text: str, where: str) -> None:
    """Raise PlanningError (one sentence naming `where` and the first problem) unless `text` is a usable trace."""
    try:
        trace_rates(text)
    except PlanningError as exc:
        raise PlanningError(f"{where}: {exc}") from None


@lru_cache(maxsize=8)
def trace_rates(text: str) -> tuple[float, ...]:
    """Each hour of day's mean rate over the trace's samples (module docstring); a sentence for a bad trace."""
    if len(text) > MAX_RATE_TRACE_BYTES:
        raise PlanningError(f"the rate trace is larger than {MAX_RATE_TRACE_BYTES >> 20} MiB; resample it first")
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader, [])]
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise PlanningError(f"the rate trace has no column {', '.join(missing)}; expected {','.join(TRACE_COLUMNS)}")
    at, rate_at = header.index("seconds"), header.index("requests_per_second")
    sums, counts = [0.0] * HOURS, [0] * HOURS
    rows = 0
    for line, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        rows += 1
        if rows > MAX_RATE_TRACE_ROWS:
            raise PlanningError(
                f"the rate trace has more than {MAX_RATE_TRACE_ROWS:,} rows; resample it (e.g. to one row a minute)"
            )
        seconds, rate = _row(cells, at, rate_at, line)
        hour = int((seconds % SECONDS_PER_DAY) // 3600)
        sums[hour] += rate
        counts[hour] += 1
    if not rows:
        raise PlanningError("the rate trace has a header but no rows")
    empty = [h for h in range(HOURS) if not counts[h]]
    if empty:
        raise PlanningError(
            f"the rate trace has no sample in hour(s) {', '.join(f'{h:02d}:00' for h in empty)}; "
            "every hour of the day needs one"
        )
    return tuple(s / c for s, c in zip(sums, counts))


def _row(cells: list[str], at: int, rate_at: int, line: int) -> tuple[float, float]:
    try:
        seconds, rate = float(cells[at]), float(cells[rate_at])
    except (ValueError, IndexError):
        raise PlanningError(f"rate trace row {line} is not two numbers (seconds, requests_per_second)") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise PlanningError(f"rate trace row {line}: seconds must be a finite number >= 0, got {cells[at].strip()}")
    if not (math.isfinite(rate) and 0 <= rate <= MAX_RATE_REQUESTS_PER_SECOND):
        raise PlanningError(
            f"rate trace row {line}: requests_per_second must be a finite number from 0 to "
            f"{MAX_RATE_REQUESTS_PER_SECOND:g}, got {cells[rate_at].strip()}"
        )
    return seconds, rate
