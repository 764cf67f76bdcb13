"""The engine's sweeps (planner.search.explore: the same scenario with concurrency, or concurrency and
context, varied; each point a full plan) as chart frames in display units. Nothing is planned here.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner import units


def _row(point) -> dict[str, Any]:
    return {
        "fits": point.fits,
        "tokens_per_second": point.output_tokens_per_second,
        "tpot_ms": point.tpot_seconds * 1e3,
        "ttft_ms": point.ttft_seconds * 1e3,
        "e2e_s": point.e2e_latency_seconds,
        "memory": units.gib(point.total_bytes),
        "headroom": units.percent(point.headroom_fraction),
        "usd_per_million": point.usd_per_million_output_tokens,
    }


def frame(sweep) -> pd.DataFrame:
    """One row per point: concurrency (and context, for a grid), then the display columns of the charts."""
    grid = "context_tokens" in sweep.varied
    return pd.DataFrame(
        [
            {"concurrency": p.concurrency, **({"context": p.context_tokens} if grid else {}), **_row(p)}
            for p in sweep.points
        ]
    )
