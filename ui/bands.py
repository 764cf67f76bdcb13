"""Error bands in words: "likely 41.2–48.0 GiB", from ``plan.uncertainty`` (planner.uncertainty).

A band promises to hold the measured value behind a prediction for 80 % of the published cases of its family
(benchmarks/accuracy.py), a promise checked by leaving each case out (its basis says how often it held), or
is a calibration's residual error. The engine gives bands for memory,
TTFT, TPOT and output tokens/s (inference) and memory and step time (training). Headline numbers that are
exactly proportional to one of those (at a fixed $/GPU-hour, GPU count and token count) take the same
relative band: $ per 1M tokens ∝ 1 / tokens/s; tokens/s, MFU ∝ 1 / step time; time and cost to train ∝
step time. Formatting goes through planner.units.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner import units
from planner.verdict import span


def band_of(plan, path: str):
    """The Band for a dotted path of the plan ('performance.ttft_seconds'), or None."""
    return (getattr(plan, "uncertainty", None) or {}).get(path)


def likely(plan, path: str, formatter: Callable[[float], str]) -> str | None:
    band = band_of(plan, path)
    if band is None:
        return None
    return f"likely {span(band.low, band.high, formatter)}"


def scaled(
    plan,
    path: str,
    point_of_band_quantity: float,
    value: float,
    formatter: Callable[[float], str],
    inverse: bool = False,
) -> str | None:
    """The band of a number exactly proportional (or inversely proportional) to the banded quantity."""
    band = band_of(plan, path)
    if band is None or not point_of_band_quantity or not math.isfinite(value):
        return None
    moved = band.proportional(point_of_band_quantity, value, inverse)
    return f"likely {span(moved.low, moved.high, formatter)}"


def basis(plan, path: str) -> str:
    band = band_of(plan, path)
    if band is None:
        return ""
    return f"Likely range ('{band.family}' family: {band.basis}). See the Accuracy page."


def memory(plan) -> str | None:
    return likely(plan, "memory.total_bytes", units.gib)


def inference_texts(plan) -> dict[str, str | None]:
    """Metric label -> 'likely …' for the Inference page's headline metrics."""
    perf, cost = plan.performance, plan.cost
    tps = perf.output_tokens_per_second
    return {
        "Time to first token": likely(plan, "performance.ttft_seconds", units.seconds),
        "Time per output token": likely(plan, "performance.tpot_seconds", units.seconds),
        "Output tokens/s": likely(plan, "performance.output_tokens_per_second", units.count),
        "$ per 1M output tokens": scaled(
            plan,
            "performance.output_tokens_per_second",
            tps,
            cost.usd_per_million_output_tokens,
            units.usd,
            inverse=True,
        ),
        "Memory per GPU": memory(plan),
    }


def training_texts(plan) -> dict[str, str | None]:
    """Metric label -> 'likely …' for the Training page's headline metrics."""
    perf, cost = plan.performance, plan.cost
    step = perf.step_seconds
    path = "performance.step_seconds"
    return {
        "Step time": likely(plan, path, units.seconds),
        "Tokens/s": scaled(plan, path, step, perf.tokens_per_second, units.count, inverse=True),
        "MFU": scaled(plan, path, step, perf.mfu, lambda v: units.percent(v, 1), inverse=True),
        "Time to train": scaled(plan, path, step, perf.time_to_train_seconds, units.seconds),
        "Cost to train": scaled(plan, path, step, cost.usd_total, units.usd),
        "Memory per GPU": memory(plan),
    }


def texts(plan) -> dict[str, str | None]:
    return inference_texts(plan) if plan.kind == "inference" else training_texts(plan)
