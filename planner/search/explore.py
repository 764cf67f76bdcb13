"""The scenario with one or two inputs varied: concurrency from 1 past the most that fits, and every
(concurrency, context) cell up to the model's maximum context. Each point is a full static plan
(`planner.plan.static_plan` of a variant built with `model_validate`); a variant that is not a valid scenario,
or cannot be planned, is left out. What the Inference page's "Explore this scenario" charts and
`python -m planner diagnose` print.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.errors import PlanningError
from planner.inference.results import InferencePlan
from planner.plan import static_plan
from planner.search.techniques import variant_of

MAX_SWEEP_CONCURRENCY = 1 << 15
SHORTEST_SWEEP_CONTEXT_TOKENS = 512


class SweepPoint(BaseModel):
    """One variant's plan: its concurrency and context (prompt + output tokens) and the headline answers."""

    model_config = ConfigDict(frozen=True)

    concurrency: int
    context_tokens: int
    fits: bool
    output_tokens_per_second: float
    tpot_seconds: float
    ttft_seconds: float
    e2e_latency_seconds: float
    total_bytes: float  # memory per GPU
    headroom_fraction: float
    usd_per_million_output_tokens: float


class Sweep(BaseModel):
    """The points of one sweep, in axis order (context outer, concurrency inner for a grid)."""

    model_config = ConfigDict(frozen=True)

    varied: tuple[str, ...]  # ("concurrency",) or ("context_tokens", "concurrency")
    concurrencies: list[int]
    contexts: list[int]  # the context axis (only the scenario's own context for a concurrency sweep)
    points: list[SweepPoint]


def _powers_of_two(limit: int) -> list[int]:
    values, v = [], 1
    while v <= limit:
        values.append(v)
        v *= 2
    return values


def concurrency_axis(scenario, max_concurrency: int | None) -> list[int]:
    """1, 2, 4, ... past both the current concurrency and the largest that fits (`max_concurrency`, from the
    scenario's plan), plus both of them; at most MAX_SWEEP_CONCURRENCY."""
    reach = max(256, 2 * scenario.concurrency, 2 * (max_concurrency or 0))
    values = set(_powers_of_two(min(reach, MAX_SWEEP_CONCURRENCY)))
    values.add(scenario.concurrency)
    if max_concurrency:
        values.add(min(max_concurrency, MAX_SWEEP_CONCURRENCY))
    return sorted(v for v in values if v >= 1)


def context_axis(scenario, model_max_context: int) -> list[int]:
    """Context lengths (prompt + output) in powers of two from 512 up to the model's maximum, plus the
    current one; only those longer than the output (the prompt takes the rest)."""
    values = {v for v in _powers_of_two(model_max_context) if v >= SHORTEST_SWEEP_CONTEXT_TOKENS}
    values.add(scenario.prompt_tokens + scenario.output_tokens)
    return sorted(v for v in values if v > scenario.output_tokens)


def _plan(scenario, calibration) -> InferencePlan:
    p = static_plan(scenario, calibration)
    if not isinstance(p, InferencePlan):
        raise TypeError("the sweeps vary an inference scenario's concurrency and context")
    return p


def _point(scenario, calibration, concurrency: int, prompt_tokens: int) -> SweepPoint | None:
    try:
        p = _plan(variant_of(scenario, concurrency=concurrency, prompt_tokens=prompt_tokens), calibration)
    except (ValidationError, PlanningError):
        return None
    perf, mem = p.performance, p.memory
    return SweepPoint(
        concurrency=concurrency,
        context_tokens=prompt_tokens + scenario.output_tokens,
        fits=bool(mem.fits),
        output_tokens_per_second=perf.output_tokens_per_second,
        tpot_seconds=perf.tpot_seconds,
        ttft_seconds=perf.ttft_seconds,
        e2e_latency_seconds=perf.e2e_latency_seconds,
        total_bytes=mem.total_bytes,
        headroom_fraction=mem.headroom_fraction,
        usd_per_million_output_tokens=p.cost.usd_per_million_output_tokens,
    )


def concurrency_sweep(scenario, calibration=None, concurrencies: list[int] | None = None) -> Sweep:
    """An inference scenario's plan at each concurrency (default: `concurrency_axis` of its plan)."""
    if concurrencies is None:
        concurrencies = concurrency_axis(scenario, _plan(scenario, calibration).memory.max_concurrency)
    points = [_point(scenario, calibration, c, scenario.prompt_tokens) for c in concurrencies]
    return Sweep(
        varied=("concurrency",),
        concurrencies=list(concurrencies),
        contexts=[scenario.prompt_tokens + scenario.output_tokens],
        points=[p for p in points if p is not None],
    )


def context_concurrency_grid(
    scenario, calibration=None, concurrencies: list[int] | None = None, contexts: list[int] | None = None
) -> Sweep:
    """Every (concurrency, context) cell; the output length stays, the prompt takes the rest of the context
    (defaults: `concurrency_axis` and `context_axis` of the scenario's plan)."""
    if concurrencies is None or contexts is None:
        base = _plan(scenario, calibration)
        if concurrencies is None:
            concurrencies = concurrency_axis(scenario, base.memory.max_concurrency)
        if contexts is None:
            contexts = context_axis(scenario, base.model.max_context_tokens)
    points = [
        _point(scenario, calibration, c, ctx - scenario.output_tokens)
        for ctx in contexts
        if ctx - scenario.output_tokens >= 1
        for c in concurrencies
    ]
    return Sweep(
        varied=("context_tokens", "concurrency"),
        concurrencies=list(concurrencies),
        contexts=list(contexts),
        points=[p for p in points if p is not None],
    )
