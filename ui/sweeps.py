"""Sweeps for the heavy charts: the same scenario with one or two inputs varied, each point a real
``planner.plan()`` (nothing is re-derived here). Pure functions; ``ui.state`` caches them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import ValidationError

from planner import PlanningError, plan, units
from planner.search.techniques import _variant_of as variant  # the one what-if builder (model_validate)

MAX_SWEEP_CONCURRENCY = 1 << 15


def _powers_of_two(limit: int) -> list[int]:
    values, v = [], 1
    while v <= limit:
        values.append(v)
        v *= 2
    return values


def concurrency_axis(scenario, max_concurrency: int | None) -> list[int]:
    """1, 2, 4, ... past both the current concurrency and the largest that fits, plus both of them."""
    reach = max(256, 2 * scenario.concurrency, 2 * (max_concurrency or 0))
    values = set(_powers_of_two(min(reach, MAX_SWEEP_CONCURRENCY)))
    values.add(scenario.concurrency)
    if max_concurrency:
        values.add(min(max_concurrency, MAX_SWEEP_CONCURRENCY))
    return sorted(v for v in values if v >= 1)


def context_axis(scenario, model_max_context: int) -> list[int]:
    """Context lengths (prompt + output) from 512 up to the model's maximum, plus the current one."""
    values = {v for v in _powers_of_two(model_max_context) if v >= 512}
    values.add(scenario.prompt_tokens + scenario.output_tokens)
    return sorted(v for v in values if v > scenario.output_tokens)


def _row(result) -> dict[str, Any]:
    perf, mem = result.performance, result.memory
    return {
        "fits": bool(mem.fits),
        "tokens_per_second": perf.output_tokens_per_second,
        "tpot_ms": perf.tpot_seconds * 1e3,
        "ttft_ms": perf.ttft_seconds * 1e3,
        "e2e_s": perf.e2e_latency_seconds,
        "memory": units.gib(mem.total_bytes),
        "headroom": units.percent(mem.headroom_fraction),
        "usd_per_million": result.cost.usd_per_million_output_tokens,
    }


def concurrency_sweep(scenario, concurrencies: list[int], calibration=None) -> pd.DataFrame:
    rows = []
    for c in concurrencies:
        try:
            result = plan(variant(scenario, concurrency=c), calibration)
        except (ValidationError, PlanningError):
            continue
        rows.append({"concurrency": c, **_row(result)})
    return pd.DataFrame(rows)


def context_concurrency_grid(scenario, concurrencies: list[int], contexts: list[int], calibration=None) -> pd.DataFrame:
    """Every (concurrency, context) cell; the output length stays, the prompt takes the rest."""
    rows = []
    for ctx in contexts:
        prompt = ctx - scenario.output_tokens
        if prompt < 1:
            continue
        for c in concurrencies:
            try:
                result = plan(variant(scenario, concurrency=c, prompt_tokens=prompt), calibration)
            except (ValidationError, PlanningError):
                continue
            rows.append({"concurrency": c, "context": ctx, **_row(result)})
    return pd.DataFrame(rows)
