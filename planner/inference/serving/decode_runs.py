"""Runs of decode steps between scheduler events, costed at once; and the step pricing the simulator reads.

The speed target (10,000 requests on one configuration in a second on one core, `benchmarks/traffic_speed.py`)
sets how a run is costed: only up to the step in which the next request arrives, with the vectorised cost for a
long run and step by step in Python floats for a short one (numpy's per-call overhead outweighs a few steps of
arithmetic); both give the same numbers bit for bit. Under speculative decoding a stretch of rounds in which no
sequence finishes (`quiet_run`) is costed vectorised from the decoders' planned window, the clock accumulated
round by round as one round at a time would.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from planner.inference.serving.decoders import Decoders, SpeculativeDecoders
from planner.inference.serving.step_log import StepLog

# A decode run of at most this many steps is costed step by step: a vectorised run costs ~10 us of numpy
# calls whatever its length, one step in Python floats ~1.5 us.
SHORT_RUN_STEPS = 8


class StepCost(Protocol):
    """How long one engine step takes on a replica (seconds), from the same roofline terms as `plan()`
    (`step_cost.RooflineStepCost`).

    `decode_context_tokens` is the sum over the decoding sequences of their context (their KV read);
    `prefill_spans` the step's prompt pieces as [start, end) positions in their prompts.
    """

    def mixed_seconds(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans: list[tuple[int, int]]
    ) -> float: ...

    def decode_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray: ...

    def decode_step_seconds(self, decode_batch: int, decode_context_tokens: int) -> float: ...

    def shortest_decode_seconds(self, decode_batch: int) -> float: ...

    # what a request costs before it reaches the scheduler (the API server), `steps.request_overhead_seconds`
    request_overhead_seconds: float


class RoundCost(Protocol):
    """How long one speculative engine step (a draft-and-verify round plus prompt chunks) takes
    (`step_cost.SpeculativeStepCost`)."""

    def round_seconds(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans: list[tuple[int, int]]
    ) -> float: ...

    def decode_round_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """`round_seconds` without prompt chunks (and decode_batch >= 1), bit for bit."""
        ...

    def decode_rounds_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """`decode_round_seconds` at each of the given context sums, bit for bit (a run, vectorised)."""
        ...

    request_overhead_seconds: float  # as `StepCost`'s


def decode_run(
    decoders: Decoders,
    now: float,
    next_arrival: float,
    free_blocks: int,
    cost: StepCost,
    log: StepLog,
    blocks_in_use: int,
) -> float | None:
    """Run as many pure decode steps as pass before the next event: a completion, the step in which the
    next admissible request arrives, or the last free KV block. Returns the time after them, or None when
    the very first step needs a KV block that is not free.
    """
    b = len(decoders)
    k_max = decoders.ticks_to_next_finish()
    # Each decoder needs at most ceil(k / block) + 1 new blocks in k steps: count exactly only when tight.
    tight = b * (k_max // decoders.block + 1) > free_blocks
    held = decoders.blocks() if tight else 0
    if tight and decoders.blocks(k_max) - held > free_blocks:
        if decoders.blocks(1) - held > free_blocks:
            return None
        lo, hi = 1, k_max  # the longest run whose new blocks still fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if decoders.blocks(mid) - held <= free_blocks:
                lo = mid
            else:
                hi = mid - 1
        k_max = lo
    gap_seconds = next_arrival - now
    # Only the steps up to the arrival are needed: every step lasts at least the batch's shortest step.
    steps = min(k_max, _steps_within(gap_seconds, cost.shortest_decode_seconds(b)))
    if steps <= SHORT_RUN_STEPS:
        durations, run_seconds = _short_run(decoders, cost, k_max, gap_seconds)
    else:
        durations, run_seconds = _long_run(decoders, cost, k_max, steps, gap_seconds)
    decoders.tick += len(durations)
    log.run(durations, b, b, blocks_in_use)
    return now + run_seconds


def _short_run(decoders: Decoders, cost: StepCost, k_max: int, gap_seconds: float) -> tuple[list[float], float]:
    """Up to `k_max` decode steps, one at a time, through the step during which `gap_seconds` pass; their
    durations and their sum (accumulated in order, as `np.cumsum` does, so both paths give the same times)."""
    b = len(decoders)
    context = decoders.context_tokens()
    durations: list[float] = []
    elapsed = 0.0
    for k in range(k_max):
        step = cost.decode_step_seconds(b, context + b * k)
        durations.append(step)
        elapsed += step
        if elapsed >= gap_seconds:
            break
    return durations, elapsed


def _long_run(
    decoders: Decoders, cost: StepCost, k_max: int, steps: int, gap_seconds: float
) -> tuple[np.ndarray, float]:
    """`_short_run` vectorised: cost `steps` steps, a prefix that surely holds the arrival (a prefix of a
    cumulative sum is the same numbers), and all `k_max` only if it does not."""
    b = len(decoders)
    durations = cost.decode_seconds(b, decoders.context_tokens_ahead(steps))
    ends = durations.cumsum()
    if steps < k_max and ends[-1] < gap_seconds:
        durations = cost.decode_seconds(b, decoders.context_tokens_ahead(k_max))
        ends = durations.cumsum()
    # Stop after the step during which the next request arrives: the scheduler admits it next step.
    k = min(int(ends.searchsorted(gap_seconds, side="left")) + 1, k_max)
    return durations[:k], float(ends[k - 1])


def _steps_within(gap_seconds: float, shortest_step_seconds: float) -> int:
    """An upper bound on the steps that pass until `gap_seconds` when none is shorter than the shortest (one
    spare step for rounding in the cumulative sum; any size when the gap is unbounded)."""
    if gap_seconds == np.inf:
        return 1 << 62
    return int(gap_seconds / shortest_step_seconds) + 2


def quiet_run(
    decoders: SpeculativeDecoders,
    cost: RoundCost,
    log: StepLog,
    now: float,
    rounds: int,
    batch: int,
    due: float,
    kv_blocks: int,
) -> tuple[int, float]:
    """Up to `rounds` speculative rounds (at most `decoders.quiet_rounds()`) at once, through the first after
    which the scheduler would stop (a request `due`, KV slots that no longer fit in `kv_blocks`); how many, and
    the time after them. Their context sums come from the window's rows, their durations vectorised, the clock
    accumulated round by round as `now += duration` (a cumulative sum is that addition in order)."""
    j = decoders.row
    contexts = np.empty(rounds, dtype=np.int64)
    contexts[0] = 0
    decoders.gained[j : j + rounds - 1].cumsum(out=contexts[1:])
    contexts += decoders.sum_context
    durations = cost.decode_rounds_seconds(batch, contexts)
    times = np.empty(rounds + 1)
    times[0] = now
    times[1:] = durations
    times = times.cumsum()[1:]
    n = rounds
    due_after = due <= times + 1e-12  # false, then true (the clock only moves on)
    if due_after[-1]:
        n = int(due_after.argmax()) + 1
    if batch > 1:  # the KV slots held before each later round (a lone sequence runs regardless)
        over = decoders.held[j + 1 : j + n] > kv_blocks
        if over.any():
            n = int(over.argmax()) + 1
    log.rounds(durations[:n], batch, decoders.held[j : j + n], decoders.gain_counts[j : j + n])
    decoders.advance_quietly(n)
    return n, times.item(n - 1)
