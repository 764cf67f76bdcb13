"""Error bands: how far to trust each headline number, from Headroom's own measured error.

`benchmarks/accuracy.py` plans every usable published measurement and writes, per family, the spread
of (predicted - measured) / measured to `planner/accuracy.json`. If a family's errors run from e10
(10th percentile, signed) to e90, the measured value behind a prediction P lies in
[P / (1 + e90), P / (1 + e10)] for 80 % of the cases we know of. The band always contains P.
A calibration on the user's own device replaces the published spread with its own residual error.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

SUMMARY_FILE = Path(__file__).with_name("accuracy.json")
# With no measurement for a family, say so with a wide, symmetric +-50 %.
UNMEASURED = {"p10_signed_error": -0.5, "p90_signed_error": 0.5, "cases": 0}
# Memory terms are computed from exact byte counts; below this spread we do not claim better.
FLOOR = 0.02


class Band(BaseModel):
    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    family: str
    basis: str  # where the spread comes from

    def proportional(self, point: float, value: float, inverse: bool = False) -> Band:
        """The band of a quantity exactly proportional to this band's quantity (`inverse`: to its reciprocal),
        whose value is `value` where this band's quantity is `point`: the same relative spread.

        E.g. at a fixed price, GPU count and token count, time and cost to train move with step time, and
        tokens/s with 1 / step time.
        """
        if not point or not math.isfinite(value):
            return Band(low=value, high=value, family=self.family, basis=self.basis)
        low, high = value * self.low / point, value * self.high / point
        if inverse:
            low, high = value * point / self.high, value * point / self.low
        return Band(low=min(low, high), high=max(low, high), family=self.family, basis=self.basis)


@lru_cache(maxsize=1)
def family_errors() -> dict[str, dict]:
    try:
        return json.loads(SUMMARY_FILE.read_text())["families"]
    except (OSError, ValueError, KeyError):
        return {}


def band(point: float, family: str, calibration=None) -> Band:
    stats = family_errors().get(family, UNMEASURED)
    basis = (
        f"{stats['cases']} published measurements (benchmarks/accuracy.py)"
        if stats["cases"]
        else "no published measurement yet: +-50 %"
    )
    e10, e90 = stats["p10_signed_error"], stats["p90_signed_error"]
    residual = getattr(calibration, "residual_error", None)
    if residual is not None:
        e10, e90 = -abs(residual), abs(residual)
        basis = f"calibration '{getattr(calibration, 'label', '')}' residual error"
    e10, e90 = min(e10, -FLOOR), max(e90, FLOOR)
    low, high = point / (1 + e90), point / (1 + max(e10, -0.95))
    return Band(low=min(low, point), high=max(high, point), family=family, basis=basis)


def inference_bands(
    total_bytes: float, ttft: float, tpot: float, tokens_per_second: float, calibration=None
) -> dict[str, Band]:
    # Decode speed is measured as tokens/s; a time per token has the reciprocal error.
    speed = band(1 / tpot, "decode_speed", calibration)
    return {
        "memory.total_bytes": band(total_bytes, "memory", calibration),
        "performance.ttft_seconds": band(ttft, "ttft", calibration),
        "performance.tpot_seconds": Band(
            low=1 / speed.high, high=1 / speed.low, family="decode_speed", basis=speed.basis
        ),
        "performance.output_tokens_per_second": band(tokens_per_second, "max_throughput", calibration),
    }


def training_bands(total_bytes: float, step_seconds: float, calibration=None) -> dict[str, Band]:
    # Training accuracy is measured as achieved FLOP/s, the reciprocal of step time.
    rate = band(1 / step_seconds, "training_step", calibration)
    return {
        "memory.total_bytes": band(total_bytes, "memory", calibration),
        "performance.step_seconds": Band(
            low=1 / rate.high, high=1 / rate.low, family="training_step", basis=rate.basis
        ),
    }
