"""A continuous-batching server, simulated step by step (not token by token).

One replica runs the scheduler of vLLM V1 (`vllm/v1/core/sched/scheduler.py`): every step first gives
each running sequence one decode token, then spends what is left of `max_num_batched_tokens` on prompt
chunks — the unfinished prompts first, then new requests in arrival order while fewer than
`max_num_seqs` run and their KV blocks fit. Without chunked prefill a step is either a whole-prompt
prefill (new requests first, decodes wait) or a decode step. When a growing sequence needs a KV block
and none is free, the most recently admitted sequence is preempted and later recomputed (vLLM's
recompute preemption). A step's duration comes from a `StepCost` — the roofline terms `plan()` uses —
so the simulation adds queueing and batching dynamics, not a second physics.

Runs of pure decode steps between events (an arrival that can be admitted, a completion, a KV block
running out) are advanced at once, so the loop count grows with requests, not with tokens. The speed
target (10,000 requests on one configuration in a second on one core, `benchmarks/traffic_speed.py`) sets
how a run is costed: only up to the step in which the next request arrives, with the vectorised cost for
a long run and step by step in Python floats for a short one (numpy's per-call overhead outweighs a few
steps of arithmetic); both give the same numbers bit for bit, and the tests hold the whole loop to a
plain one-step-at-a-time scheduler.

Under speculative decoding (`Speculation`, `_SpeculativeReplica`) every step with decoding sequences is a
draft-and-verify round in which each sequence gains its own random 1 + A tokens, so decode runs cannot be
advanced by a formula: the decoders plan their per-round totals a draws buffer at a time (`_SpeculativeDecoders`),
so a round costs O(1) in Python floats, and a long stretch of rounds in which no sequence finishes is costed
vectorised (`LONG_RUN_ROUNDS`); the same scheduler otherwise, and the same numbers bit for bit as rounds advanced
one at a time over slot arrays (the tests hold them to it).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

# A decode run of at most this many steps is costed step by step: a vectorised run costs ~10 us of numpy
# calls whatever its length, one step in Python floats ~1.5 us.
SHORT_RUN_STEPS = 8
# Under speculative decoding, a stretch of at least this many rounds in which no sequence finishes is costed at
# once (~40 us of numpy calls whatever its length, one round in Python floats ~5 us).
LONG_RUN_ROUNDS = 16


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


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """What the serving engine may hold and do per replica."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_blocks: int
    block_tokens: int


@dataclass(frozen=True, slots=True)
class ReplicaTimeline:
    """Per-request times of one replica (seconds from the start), and the step log."""

    index: np.ndarray  # request index in the whole stream
    sent_seconds: np.ndarray  # when the client sent it (arrival, or later under a client concurrency cap)
    scheduled_seconds: np.ndarray  # start of the step that first worked on it
    first_token_seconds: np.ndarray
    finish_seconds: np.ndarray
    output_tokens: np.ndarray
    preemptions: int
    step_seconds: np.ndarray  # duration of every step (runs expanded)
    step_batch: np.ndarray  # sequences that produced a token in that step
    step_running: np.ndarray  # sequences holding KV in that step
    step_kv_blocks: np.ndarray  # KV blocks in use in that step
    # Under speculative decoding, ITL by token: each burst of g tokens a sequence gains after a gap of d seconds
    # counts g tokens of d / g (the gaps and their token weights); None without speculation (ITL = steps).
    itl_seconds: np.ndarray | None = None
    itl_tokens: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Speculation:
    """Speculative decoding in the simulation: every step with decoding sequences is a draft-and-verify round.

    Each decoding sequence gains 1 + A tokens per round, A the accepted drafts with P(A >= j) = a^j for
    j <= k (independent positions, the static plan's Eq. 1: E[1 + A] = (1 - a^(k+1)) / (1 - a)), drawn per
    sequence and round from `seed`, capped by the tokens it still has to generate. A sequence holds KV slots
    for its context plus `reserved_tokens` while it verifies: vLLM V1 allocates the k + 1 positions it verifies
    and, for EAGLE/MTP heads and draft models, k lookahead slots for the next proposals
    (`vllm/v1/core/sched/scheduler.py`: `allocate_slots(request, num_new_tokens,
    num_lookahead_tokens=self.num_lookahead_tokens)`, `num_lookahead_tokens = num_spec_tokens`); rejected
    positions are overwritten next round, so the context grows by the tokens gained only.
    """

    drafted_tokens: int  # k
    acceptance: float  # a
    seed: int

    @property
    def reserved_tokens(self) -> int:
        return 2 * self.drafted_tokens + 1


def _blocks(tokens: int, block: int) -> int:
    """Paged KV blocks for `tokens` tokens."""
    return -(-tokens // block)


class _Decoders:
    """The sequences in their decode phase, kept so that one decode step over all of them costs O(1).

    Every decoder gains one token of context and one generated token per decode tick `tick`, so each is
    stored by offsets from the tick (context = a + tick, generated = g + tick); the sums, a heap of the
    ticks at which each finishes, and a histogram of (a + block - 1) mod block (which gives the exact
    number of paged KV blocks they hold at any tick) are updated on join and leave only.
    """

    def __init__(self, block: int) -> None:
        self.block = block
        self.tick = 0
        self.offset: dict[int, int] = {}  # request -> a (context - tick)
        self.sum_offset = 0
        self.residues = [0] * block  # histogram of (a + block - 1) mod block
        self.residue_sum = 0  # sum over decoders of (a + block - 1) mod block
        self.finish_heap: list[tuple[int, int]] = []  # (tick at which generated == output, request)

    def __len__(self) -> int:
        return len(self.offset)

    def join(self, request: int, context: int, generated: int, output: int) -> None:
        a = context - self.tick
        self.offset[request] = a
        self.sum_offset += a
        residue = (a + self.block - 1) % self.block
        self.residues[residue] += 1
        self.residue_sum += residue
        heapq.heappush(self.finish_heap, (self.tick + output - generated, request))

    def leave(self, request: int) -> int:
        """Remove a decoder; returns its context."""
        a = self.offset.pop(request)
        self.sum_offset -= a
        residue = (a + self.block - 1) % self.block
        self.residues[residue] -= 1
        self.residue_sum -= residue
        return a + self.tick

    def context_tokens(self) -> int:
        """Sum of the decoders' contexts now."""
        return self.sum_offset + len(self.offset) * self.tick

    def context_tokens_ahead(self, ticks: int) -> np.ndarray:
        """Sum of the decoders' contexts at 0, 1, ..., `ticks` - 1 ticks from now (int64, exact)."""
        n = len(self.offset)
        now = self.sum_offset + n * self.tick
        return np.arange(now, now + n * ticks, n, dtype=np.int64) if n else np.zeros(ticks, dtype=np.int64)

    def blocks(self, ticks_ahead: int = 0) -> int:
        """Exact paged KV blocks the decoders hold `ticks_ahead` ticks from now."""
        # sum ceil((a + T) / B) = (sum (a + B - 1) + n T - sum ((a + B - 1 + T) mod B)) / B, and with
        # r = T mod B, (c + T) mod B = c + r, less B for the residues c >= B - r.
        t = self.tick + ticks_ahead
        n = len(self.offset)
        block = self.block
        r = t % block
        remainders = self.residue_sum + n * r - block * sum(self.residues[block - r :]) if r else self.residue_sum
        return (self.sum_offset + n * (block - 1) + n * t - remainders) // block

    def ticks_to_next_finish(self) -> int:
        return self.finish_heap[0][0] - self.tick

    def generated(self, request: int, output: int) -> int:
        return output - self._finish_tick(request) + self.tick

    def _finish_tick(self, request: int) -> int:
        return next(f for f, r in self.finish_heap if r == request)

    def pop_finished(self) -> list[int]:
        done = []
        while self.finish_heap and self.finish_heap[0][0] <= self.tick:
            done.append(heapq.heappop(self.finish_heap)[1])
        return done


class _SpeculativeDecoders:
    """The decoding sequences under speculative decoding, in slots: every round each gains its own 1 + A tokens
    (`Speculation`), drawn per slot and round (free slots too) from one generator, consumed in order.

    A round must cost O(1) in Python (a stream runs ~10 rounds per request), so the rounds are planned a window
    at a time: the draws buffer holds the next W rounds' draws, and their cumulative sums per slot (`cum`, W + 1
    rows) fix every sequence's context at every round start and the round in which it finishes. Per-round totals
    over the sequences (tokens gained, their counts by gain for ITL, KV blocks held at each round start) are kept
    as arrays, updated with a few numpy operations when a sequence joins or is taken out; finishing needs no
    update (a sequence contributes up to its finishing round only). A slot's context at window row j is
    min(base + cum[j], final): `base` its context less the draws before it joined, `final` its context once done.
    """

    DRAWS = 1 << 14  # 1 + A drawn this many at a time (deterministic: one generator, consumed in order)

    def __init__(self, block: int, spec: Speculation, index: int) -> None:
        self.block = block
        self.k = spec.drafted_tokens
        self.acceptance = spec.acceptance
        self.pad = spec.reserved_tokens + block - 1  # a context c holds (c + pad) // block KV blocks
        self.empty_context = -self.pad  # a free slot's: no block, and min(base + cum, final) stays there
        self.rng = np.random.default_rng([spec.seed, index])
        self.draws = np.zeros(0, dtype=np.int64)
        self.drawn = 0
        self.slot: dict[int, int] = {}  # request -> slot
        self.request: list[int] = []  # slot -> request (-1: free)
        self.free: list[int] = []
        self.output: list[int] = []
        self.base: list[int] = []  # slot -> context less cum[its row when placed]
        self.final: list[int] = []  # slot -> context when it has generated all its tokens
        self.sum_context = 0
        self.finished: list[int] = []
        self.finished_blocks = 0  # KV blocks of the finished sequences not yet taken out
        self._window(0)

    def __len__(self) -> int:
        return len(self.slot)

    # ---------------------------------------------------------------------------------- the window

    def _window(self, rounds: int) -> None:
        """Plan the next `rounds` rounds (draws already in the buffer) from every slot's current context."""
        slots = len(self.request)
        cum = np.zeros((rounds + 1, slots), dtype=np.int64)
        if rounds:
            np.cumsum(self.draws[self.drawn : self.drawn + rounds * slots].reshape(rounds, slots), axis=0, out=cum[1:])
        now = self.contexts_now() if slots else np.zeros(0, dtype=np.int64)
        final = np.asarray(self.final, dtype=np.int64)
        self.base = now.tolist()
        self.cum, self.row, self.rounds = cum, 0, rounds
        contexts = np.minimum(now + cum, final)  # at each round start, by slot
        live = contexts < final  # still generating at that round's start (free slots never)
        self.held = np.where(live, (contexts + self.pad) // self.block, 0).sum(axis=1)
        gains = np.diff(contexts, axis=0)
        self.gained = gains.sum(axis=1)
        width = self.k + 2
        self.row_buckets = width * np.arange(rounds)  # where row r's gains are counted in gain_counts, flat
        self.gain_counts = np.bincount((gains + self.row_buckets[:, None]).ravel(), minlength=rounds * width).reshape(
            rounds, width
        )
        self.finishing: dict[int, list[int]] = {}  # window round -> slots whose last tokens it yields
        for s, lived in enumerate(live.sum(axis=0).tolist()):
            if 0 < lived <= rounds:
                self.finishing.setdefault(lived - 1, []).append(s)

    def contexts_now(self) -> np.ndarray:
        """Every slot's context at the current round start (int64)."""
        return np.minimum(np.asarray(self.base, dtype=np.int64) + self.cum[self.row], self.final)

    def _place(self, s: int, context: int, final: int, sign: int) -> None:
        """Add (sign 1) or take back (sign -1) slot s's share of the per-round totals from the current round
        on, at `context` now; it is generating, so context < final."""
        j, rounds = self.row, self.rounds
        column = self.cum[j:, s]
        start = self.cum.item(j, s)
        # it generates at the round starts j .. j + lived - 1 (cum is increasing: every round gains >= 1)
        lived = int(column.searchsorted(final - context + start))
        contexts = np.minimum(column[: lived + 1] + (context - start), final)
        blocks = (contexts[:lived] + self.pad) // self.block
        n = min(lived, rounds - j)  # its rounds in this window
        gains = contexts[1 : n + 1] - contexts[:n]
        buckets = self.gain_counts.reshape(-1)  # a view: row r, gain g at r * width + g
        where = self.row_buckets[j : j + n] + gains
        if sign > 0:
            self.held[j : j + lived] += blocks
            self.gained[j : j + n] += gains
            buckets[where] += 1
        else:
            self.held[j : j + lived] -= blocks
            self.gained[j : j + n] -= gains
            buckets[where] -= 1
        last = j + lived - 1
        if last < rounds:
            if sign > 0:
                self.finishing.setdefault(last, []).append(s)
            else:
                self.finishing[last].remove(s)

    def _refill(self) -> None:
        """The next round's draws of 1 + A, P(A >= j) = a^j for j <= k: A = min(k, floor(log u / log a)),
        u uniform in (0, 1], drawn DRAWS at a time (or a round's worth if larger)."""
        n = len(self.request)
        if self.drawn + n > len(self.draws):
            u = 1.0 - self.rng.random(max(self.DRAWS, n))
            if self.acceptance > 0:
                accepted = np.minimum(np.floor(np.log(u) / np.log(self.acceptance)), self.k).astype(np.int64)
            else:
                accepted = np.zeros(len(u), dtype=np.int64)
            self.draws = np.concatenate([self.draws[self.drawn :], accepted + 1])
            self.drawn = 0

    def _grow(self) -> None:
        old = len(self.request)
        size = max(2 * old, 8)
        if old:
            self.base = self.contexts_now().tolist()
        self.base.extend([self.empty_context] * (size - old))
        self.final.extend([self.empty_context] * (size - old))
        self.output.extend([0] * (size - old))
        self.request.extend([-1] * (size - old))
        self.free = list(range(size - 1, old - 1, -1)) + self.free
        self.cum = np.zeros((1, size), dtype=np.int64)  # the old window is void: its rows had the old width
        self.row = 0
        self._window(0 if self.drawn + size > len(self.draws) else (len(self.draws) - self.drawn) // size)

    # -------------------------------------------------------------------------------- the sequences

    def join(self, request: int, context: int, generated: int, output: int) -> None:
        if not self.free:
            self._grow()
        s = self.free.pop()
        self.slot[request] = s
        self.request[s] = request
        self.output[s] = output
        self.base[s] = context - self.cum.item(self.row, s)
        self.final[s] = context + output - generated
        self.sum_context += context
        self._place(s, context, self.final[s], 1)

    def remove(self, request: int) -> tuple[int, int]:
        """Take a decoder out; returns its context and the tokens it has generated."""
        s = self.slot.pop(request)
        self.request[s] = -1
        self.free.append(s)
        final = self.final[s]
        context = min(self.base[s] + self.cum.item(self.row, s), final)
        if context < final:
            self._place(s, context, final, -1)
        else:
            self.finished_blocks -= (final + self.pad) // self.block
        generated = self.output[s] - (final - context)
        self.base[s] = self.final[s] = self.empty_context
        self.sum_context -= context
        return context, generated

    def leave(self, request: int) -> int:
        return self.remove(request)[0]

    def context_tokens(self) -> int:
        return self.sum_context

    def blocks(self) -> int:
        """KV blocks the decoders hold while they verify: context + reserved positions each."""
        return self.held.item(self.row) + self.finished_blocks

    def advance(self) -> list[int]:
        """One round: every decoder gains 1 + A tokens (at most what it has left); returns how many gained g
        tokens, by g (index 0: free slots and those done), and the finished requests wait in `finished`."""
        if not self.request:
            return []  # no slot yet: nothing drawn
        if self.row == self.rounds:
            self._next_window()
        j = self.row
        self.row += 1
        self.drawn += len(self.request)
        self.sum_context += self.gained.item(j)
        if j in self.finishing:
            self._finish(j)
        return self.gain_counts[j].tolist()

    def quiet_rounds(self) -> int:
        """Rounds from the next one through the next in which a sequence finishes, or to the window's end. Call
        it only when a round follows: a used-up window is replaced first (its draws are taken now)."""
        if self.row == self.rounds:
            self._next_window()
        last = min(self.finishing, default=self.rounds - 1)
        return min(last, self.rounds - 1) - self.row + 1

    def advance_quietly(self, rounds: int) -> None:
        """`advance` for `rounds` rounds in which no sequence finishes but maybe the last (at most
        `quiet_rounds`); the caller reads their totals from the window's rows first."""
        j = self.row
        self.row += rounds
        self.drawn += rounds * len(self.request)
        self.sum_context += int(self.gained[j : j + rounds].sum())
        if j + rounds - 1 in self.finishing:
            self._finish(j + rounds - 1)

    def _next_window(self) -> None:
        self._refill()
        self._window((len(self.draws) - self.drawn) // len(self.request))

    def _finish(self, row: int) -> None:
        """The sequences whose last tokens came in that round wait in `finished` (in slot order)."""
        done = sorted(self.finishing.pop(row))
        self.finished.extend(self.request[s] for s in done)
        self.finished_blocks += sum((self.final[s] + self.pad) // self.block for s in done)

    def pop_finished(self) -> list[int]:
        done, self.finished = self.finished, []
        return done


def simulate_replica(
    arrival_seconds: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_tokens: np.ndarray,
    indices: np.ndarray,
    limits: EngineLimits,
    cost: StepCost | RoundCost,
    client_max_concurrency: int | None = None,
    ready_delay_seconds: np.ndarray | None = None,
    speculation: Speculation | None = None,
    replica_index: int = 0,
) -> ReplicaTimeline:
    """Serve the given requests (sorted by arrival) on one replica; returns their timeline.

    `speculation` (with a `RoundCost` as `cost`): every step with decoding sequences is a draft-and-verify
    round (`Speculation`), its random acceptances drawn from the speculation's seed and `replica_index`.

    `ready_delay_seconds` (optional, per request): how long a request waits, once the scheduler first sees it,
    before it can be scheduled — its cached prefix being read from a prefix pool into GPU memory. The wait
    overlaps the steps of the other requests (the load is asynchronous, as vLLM's KV connectors load remote
    KV while the engine keeps stepping); the request then joins the queue's tail.
    """
    args = (arrival_seconds, prompt_tokens, output_tokens, cached_tokens, limits, cost, client_max_concurrency)
    replica = (
        _Replica(*args)
        if speculation is None
        else _SpeculativeReplica(*args, speculation=speculation, index=replica_index)
    )
    if ready_delay_seconds is not None and bool(np.any(ready_delay_seconds > 0)):
        replica.delay = ready_delay_seconds.tolist()
    replica.run()
    r = replica
    timeline = _timeline(indices, r.sent, r.scheduled, r.first, r.finish, output_tokens, r.preemptions, r.log)
    if speculation is not None:
        timeline = replace(
            timeline,
            itl_seconds=np.asarray(r.log.itl_seconds, dtype=float),
            itl_tokens=np.asarray(r.log.itl_tokens, dtype=float),
        )
    return timeline


class _Replica:
    """One replica's scheduler state while it serves its requests (the loop of `simulate_replica`).

    Requests move waiting -> prefilling (prompt chunks) -> decoding (`_Decoders`) -> finished; a preempted
    one goes back to the head of the queue with everything it had to recompute.
    """

    def __init__(self, arrival_seconds, prompt_tokens, output_tokens, cached_tokens, limits, cost, client_cap):
        n = len(arrival_seconds)
        self.n = n
        self.limits = limits
        self.cost = cost
        self.block = limits.block_tokens
        self.arrivals: list[float] = arrival_seconds.tolist()
        self.prompts: list[int] = prompt_tokens.tolist()
        self.outputs: list[int] = output_tokens.tolist()
        self.cached: list[int] = cached_tokens.tolist()
        self.sent = list(self.arrivals)
        self.scheduled = [np.nan] * n
        self.first = [np.nan] * n
        self.finish = [np.nan] * n
        self.log = _StepLog()
        self.waiting: deque[tuple[int, int, int, int]] = deque()  # (request, context in KV, to prefill, generated)
        self._plain = _Decoders(self.block)  # the plain path's decoders (`_SpeculativeReplica` has its own)
        self.decoders: _Decoders | _SpeculativeDecoders = self._plain
        self.prefilling: list[list[int]] = []  # [request, context, left to prefill, generated], admission order
        self.admitted_order: dict[int, int] = {}
        self.preemptions = 0
        self.next_arrival = 0
        self.cap = client_cap or n + 1
        self.completions: list[float] = []  # in order: the client sends request i once the (i - cap)-th finished
        self.now = 0.0
        self.done = 0
        self.delay: list[float] | None = None  # per request: a prefix load before it may be scheduled
        self.loading: list[tuple[float, int, int, int]] = []  # heap of (ready at, request, context, to prefill)
        self.query_tokens = 1  # budget tokens a decoding sequence takes per step

    # ------------------------------------------------------------------------------------- the loop

    def run(self) -> None:
        while self.done < self.n:
            self._take_arrivals()
            running = len(self.decoders) + len(self.prefilling)
            if not running and not self.waiting:
                wake = self._send_time(self.next_arrival)
                if self.loading:
                    wake = min(wake, self.loading[0][0])
                self.now = max(self.now, wake)  # idle until the next request (or prefix load)
                continue
            # Only a queued or unfinished prompt can put prompt chunks in the step.
            chunks, running = self._schedule(running) if self.waiting or self.prefilling else ([], running)
            if chunks:
                self._mixed_step(chunks)
            elif not running:
                self._admit_oversized()
                continue
            elif not self._decode_steps(running):
                self._preempt_newest()
                continue
            for request in self.decoders.pop_finished():
                self.decoders.leave(request)
                self._complete(request)

    def _take_arrivals(self) -> None:
        n = self.n
        loading = self.loading
        while loading and loading[0][0] <= self.now + 1e-12:  # prefixes loaded: the requests queue now
            _, i, context, prefill = heapq.heappop(loading)
            self.waiting.append((i, context, prefill, 0))
        if self.next_arrival < n and self.arrivals[self.next_arrival] > self.now + 1e-12:
            return  # the next request has not arrived, so it cannot have been sent either
        delay = self.delay
        while self.next_arrival < n and (sent := self._send_time(self.next_arrival)) <= self.now + 1e-12:
            i = self.next_arrival
            self.sent[i] = sent
            prefill = max(self.prompts[i] - self.cached[i], 1)  # the last prompt token always runs: it yields a token
            if delay is not None and delay[i] > 0:
                heapq.heappush(loading, (self.now + delay[i], i, self.prompts[i] - prefill, prefill))
            else:
                self.waiting.append((i, self.prompts[i] - prefill, prefill, 0))
            self.next_arrival += 1

    def _schedule(self, running: int) -> tuple[list[tuple[list[int], int]], int]:
        """One step's prompt chunks (vLLM V1): decodes first, then the unfinished prompts, then new requests
        in arrival order while fewer than max_num_seqs run, their KV blocks fit and tokens remain."""
        limits, chunked = self.limits, self.limits.chunked_prefill
        # a verifying sequence's k + 1 positions count against the budget, as in vLLM V1
        budget = limits.max_num_batched_tokens - (len(self.decoders) * self.query_tokens if chunked else 0)
        chunks: list[tuple[list[int], int]] = []
        if chunked:
            for entry in self.prefilling:
                if budget <= 0:
                    break
                chunk = min(entry[2], budget)
                chunks.append((entry, chunk))
                budget -= chunk
        used = -1
        while self.waiting and running < limits.max_num_seqs and (budget > 0 or not chunked):
            i, context, prefill, generated = self.waiting[0]
            need = _blocks(context + prefill, self.block)
            if running:
                # Cheap upper bound first (each sequence wastes less than one block), exact count if needed.
                bound = (self.decoders.context_tokens() + sum(p[1] for p in self.prefilling)) // self.block + running
                if bound + need > limits.kv_blocks:
                    used = self._blocks_used() if used < 0 else used
                    if used + need > limits.kv_blocks:
                        break  # wait for KV memory
            if not chunked and chunks and prefill > budget:
                break
            entry = self._admit()
            chunk = min(prefill, budget) if chunked else prefill
            chunks.append((entry, chunk))
            budget -= chunk
            running += 1
            if used >= 0:
                used += need
        return chunks, running

    def _admit(self) -> list[int]:
        """The head of the queue starts (or restarts) its prompt."""
        i, context, prefill, generated = self.waiting.popleft()
        entry = [i, context, prefill, generated]
        self.prefilling.append(entry)
        self.admitted_order[i] = len(self.admitted_order) + self.preemptions + self.done
        if self.scheduled[i] != self.scheduled[i]:  # NaN: first time scheduled
            self.scheduled[i] = self.now
        return entry

    def _admit_oversized(self) -> None:
        """Nothing runs and the head of the queue needs more KV blocks than exist: serve it anyway."""
        self._admit()

    def _mixed_step(self, chunks: list[tuple[list[int], int]]) -> None:
        """One step that runs prompt chunks (and, with chunked prefill, every decode)."""
        decoders = self._plain
        spans = [(e[1], e[1] + c) for e, c in chunks]
        if self.limits.chunked_prefill:
            batch, context = len(decoders), decoders.context_tokens()
        else:
            batch, context = 0, 0  # a whole-prompt prefill step: decodes wait for it
        duration = self.cost.mixed_seconds(batch, context, spans)
        self.now += duration
        if batch:
            decoders.tick += 1
        sampled = batch + self._advance_chunks(chunks)
        self.log.step(duration, sampled, len(decoders) + len(self.prefilling), self._blocks_used())

    def _advance_chunks(self, chunks: list[tuple[list[int], int]]) -> int:
        """The step's prompt chunks are done: prompts that finished sample a token and start decoding (how many)."""
        sampled = 0
        for entry, chunk in chunks:
            entry[1] += chunk
            entry[2] -= chunk
            if not entry[2]:
                # The step that finishes a prompt samples a token (a recomputed sequence: its next one).
                entry[3] += 1
                sampled += 1
                if self.first[entry[0]] != self.first[entry[0]]:
                    self.first[entry[0]] = self.now
        finished_prompts = [e for e, _ in chunks if not e[2]]
        if finished_prompts:
            self.prefilling = [e for e in self.prefilling if e[2]]
            for entry in finished_prompts:
                self._start_decoding(entry)
        return sampled

    def _decode_steps(self, running: int) -> bool:
        """A run of pure decode steps until the next event; False when the first needs a KV block none has."""
        joinable = running < self.limits.max_num_seqs and not self.waiting
        horizon = self._send_time(self.next_arrival) if joinable else np.inf
        if joinable and self.loading:
            horizon = min(horizon, self.loading[0][0])
        held = self._blocks_used()
        end = _decode_run(self._plain, self.now, horizon, self.limits.kv_blocks - held, self.cost, self.log, held)
        if end is None:
            return False
        self.now = end
        return True

    def _preempt_newest(self) -> None:
        """vLLM's recompute preemption: the newest sequence gives its KV blocks back; its prompt and the
        tokens generated so far are prefilled again when it is scheduled next."""
        victim = max(self.admitted_order, key=self.admitted_order.__getitem__)
        self.admitted_order.pop(victim)
        for entry in self.prefilling:
            if entry[0] == victim:
                self.prefilling.remove(entry)
                # what it had cached and what it had left: the whole prompt is prefilled again
                context, generated = entry[1] + entry[2], entry[3]
                break
        else:
            context, generated = self._evict_decoder(victim)
        self.waiting.appendleft((victim, 0, context, generated))
        self.preemptions += 1

    def _evict_decoder(self, victim: int) -> tuple[int, int]:
        """Take a decoding sequence out; its context and the tokens it has generated."""
        decoders = self._plain
        generated = decoders.generated(victim, self.outputs[victim])
        decoders.finish_heap = [(f, r) for f, r in decoders.finish_heap if r != victim]
        heapq.heapify(decoders.finish_heap)
        return decoders.leave(victim), generated

    # ----------------------------------------------------------------------------------- bookkeeping

    def _send_time(self, i: int) -> float:
        """When the client sends request i: its arrival, or later when the client's cap holds it back."""
        if i >= self.n:
            return np.inf
        if i < self.cap:
            return self.arrivals[i]
        if len(self.completions) <= i - self.cap:
            return np.inf
        return max(self.arrivals[i], self.completions[i - self.cap])

    def _blocks_used(self) -> int:
        return self.decoders.blocks() + sum(_blocks(p[1], self.block) for p in self.prefilling)

    def _complete(self, request: int) -> None:
        self.finish[request] = self.now
        self.completions.append(self.now)
        self.admitted_order.pop(request, None)
        self.done += 1

    def _start_decoding(self, entry: list[int]) -> None:
        i, context, _, generated = entry
        if generated >= self.outputs[i]:
            self._complete(i)
        else:
            self.decoders.join(i, context, generated, self.outputs[i])


class _SpeculativeReplica(_Replica):
    """`_Replica` under speculative decoding (`Speculation`): every step with decoding sequences is a
    draft-and-verify round, costed by a `RoundCost`; the decoders gain their own 1 + A tokens per round, so
    pure decode steps run one round at a time (no vectorised runs), and the log keeps each round's token bursts
    for ITL."""

    def __init__(self, *args, speculation: Speculation, index: int) -> None:
        super().__init__(*args)
        self.spec = self.decoders = _SpeculativeDecoders(self.block, speculation, index)
        self.query_tokens = speculation.drafted_tokens + 1
        self.round_cost: RoundCost = self.cost

    def _mixed_step(self, chunks: list[tuple[list[int], int]]) -> None:
        spec = self.spec
        spans = [(e[1], e[1] + c) for e, c in chunks]
        if self.limits.chunked_prefill:
            batch, context = len(spec), spec.context_tokens()
        else:
            batch, context = 0, 0  # a whole-prompt prefill step: decodes wait for it
        duration = self.round_cost.round_seconds(batch, context, spans)
        self.now += duration
        gain_counts = spec.advance() if batch else None
        first_tokens = self._advance_chunks(chunks)
        self.log.step(duration, batch + first_tokens, len(spec) + len(self.prefilling), self._blocks_used())
        self.log.bursts(duration, gain_counts, first_tokens)

    def _decode_steps(self, running: int) -> bool:
        """Draft-and-verify rounds of the decoding sequences until the scheduler has something to do: a
        sequence finished, a request or a prefix load is due, their KV slots no longer fit (a lone sequence
        runs regardless), or requests wait or prompts are unfinished (it looks after every round). False when
        the first round does not fit. A long stretch of rounds in which no sequence finishes is costed at once
        (`_quiet_run`), the rest one round at a time."""
        spec, log, kv_blocks = self.spec, self.log, self.limits.kv_blocks
        held = self._blocks_used()
        if held > kv_blocks and running > 1:
            return False
        batch = len(spec)
        look_every_round = bool(self.waiting or self.prefilling)
        # what `_take_arrivals` would act on next: the next request sent, the next prefix loaded
        due = self._send_time(self.next_arrival)
        if self.loading:
            due = min(due, self.loading[0][0])
        round_seconds, advance = self.round_cost.decode_round_seconds, spec.advance
        quiet = 0  # rounds known to pass before the next finish or the window's end
        while True:
            if not look_every_round and quiet <= 0:
                quiet = spec.quiet_rounds()
            duration = round_seconds(batch, spec.sum_context)
            # the rounds until `due`, were none longer than this one (contexts only grow): a guess that only
            # chooses how to cost them
            ahead = min(quiet, int((due - self.now) / duration) + 2) if due - self.now < 1e9 else quiet
            if ahead >= LONG_RUN_ROUNDS:
                quiet -= self._quiet_run(ahead, batch, due)
            else:
                self.now += duration
                gain_counts = advance()
                log.step(duration, batch, batch, held)
                log.bursts(duration, gain_counts, 0)
                quiet -= 1
            if look_every_round or spec.finished or due <= self.now + 1e-12:
                return True
            held = spec.blocks()  # no prompt holds blocks here
            if held > kv_blocks and running > 1:
                return True  # the scheduler preempts next turn

    def _quiet_run(self, rounds: int, batch: int, due: float) -> int:
        """Up to `rounds` rounds (at most `quiet_rounds`) at once, through the first after which `_decode_steps`
        would stop (a request due, KV slots that no longer fit); how many. Their context sums come from the
        window's rows, their durations vectorised, the clock accumulated round by round as `now += duration`
        (a cumulative sum is that addition in order)."""
        spec, j = self.spec, self.spec.row
        contexts = np.empty(rounds, dtype=np.int64)
        contexts[0] = 0
        spec.gained[j : j + rounds - 1].cumsum(out=contexts[1:])
        contexts += spec.sum_context
        durations = self.round_cost.decode_rounds_seconds(batch, contexts)
        times = np.empty(rounds + 1)
        times[0] = self.now
        times[1:] = durations
        times = times.cumsum()[1:]
        n = rounds
        due_after = due <= times + 1e-12  # false, then true (the clock only moves on)
        if due_after[-1]:
            n = int(due_after.argmax()) + 1
        if batch > 1:  # the KV slots held before each later round (a lone sequence runs regardless)
            over = spec.held[j + 1 : j + n] > self.limits.kv_blocks
            if over.any():
                n = int(over.argmax()) + 1
        self.now = times.item(n - 1)
        self.log.rounds(durations[:n], batch, spec.held[j : j + n], spec.gain_counts[j : j + n])
        spec.advance_quietly(n)
        return n

    def _evict_decoder(self, victim: int) -> tuple[int, int]:
        return self.spec.remove(victim)


def _decode_run(
    decoders: _Decoders,
    now: float,
    next_arrival: float,
    free_blocks: int,
    cost: StepCost,
    log: _StepLog,
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


def _short_run(decoders: _Decoders, cost: StepCost, k_max: int, gap_seconds: float) -> tuple[list[float], float]:
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
    decoders: _Decoders, cost: StepCost, k_max: int, steps: int, gap_seconds: float
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


class _StepLog:
    """Every step's duration, sequences sampled, sequences held and KV blocks held (runs stored as one entry)."""

    def __init__(self) -> None:
        self.seconds: list[np.ndarray] = []
        self.single: list[float] = []  # durations of single steps and short runs, flushed into `seconds` in order
        self.counts: list[int] = []
        self.batch: list[int] = []
        self.running: list[int] = []
        self.kv_blocks: list[int] = []
        self.itl_seconds: list[float] = []  # speculative decoding: gap per token of each burst
        self.itl_tokens: list[int] = []  # and the tokens it stands for

    def bursts(self, seconds: float, gain_counts: list[int] | None, first_tokens: int) -> None:
        """A speculative step's token bursts: each decoding sequence's g tokens count g gaps of seconds / g
        (`gain_counts[g]` sequences gained g); each prompt finished in it, one token after the whole step."""
        if first_tokens:
            self.itl_seconds.append(seconds)
            self.itl_tokens.append(first_tokens)
        if gain_counts is not None:
            counts = gain_counts
            for g in range(1, len(counts)):  # gains of 0 are free slots
                if counts[g]:
                    self.itl_seconds.append(seconds / g)
                    self.itl_tokens.append(g * counts[g])

    def rounds(self, seconds: np.ndarray, batch: int, kv_blocks: np.ndarray, gain_counts: np.ndarray) -> None:
        """Speculative rounds of one batch of decoding sequences, each a `step` with its `bursts` (rows of
        gain counts by g), in order."""
        n = len(seconds)
        self.single.extend(seconds.tolist())
        self.counts.extend([1] * n)
        self.batch.extend([batch] * n)
        self.running.extend([batch] * n)
        self.kv_blocks.extend(kv_blocks.tolist())
        rows, gains = np.nonzero(gain_counts[:, 1:])  # row by row, g ascending, as `bursts` appends them
        gains += 1
        self.itl_seconds.extend((seconds[rows] / gains).tolist())
        self.itl_tokens.extend((gains * gain_counts[rows, gains]).tolist())

    def step(self, seconds: float, batch: int, running: int, kv_blocks: int) -> None:
        self.single.append(seconds)
        self.counts.append(1)
        self.batch.append(batch)
        self.running.append(running)
        self.kv_blocks.append(kv_blocks)

    def run(self, seconds: np.ndarray | list[float], batch: int, running: int, kv_blocks: int) -> None:
        if isinstance(seconds, list):
            self.single.extend(seconds)  # a short run's steps join the single ones (in order all the same)
        else:
            if self.single:
                self.seconds.append(np.asarray(self.single))
                self.single = []
            self.seconds.append(seconds)
        self.counts.append(len(seconds))
        self.batch.append(batch)
        self.running.append(running)
        self.kv_blocks.append(kv_blocks)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self.single:
            self.seconds.append(np.asarray(self.single))
            self.single = []
        counts = np.asarray(self.counts, dtype=np.int64)
        seconds = np.concatenate(self.seconds) if self.seconds else np.zeros(0)
        return (
            seconds,
            np.repeat(np.asarray(self.batch, dtype=float), counts),
            np.repeat(np.asarray(self.running, dtype=float), counts),
            np.repeat(np.asarray(self.kv_blocks, dtype=float), counts),
        )


def _timeline(indices, sent, scheduled, first, finish, output_tokens, preemptions, log: _StepLog) -> ReplicaTimeline:
    seconds, batch, running, kv_blocks = log.arrays()
    return ReplicaTimeline(
        index=indices,
        sent_seconds=np.asarray(sent, dtype=float),
        scheduled_seconds=np.asarray(scheduled, dtype=float),
        first_token_seconds=np.asarray(first, dtype=float),
        finish_seconds=np.asarray(finish, dtype=float),
        output_tokens=output_tokens,
        preemptions=preemptions,
        step_seconds=seconds,
        step_batch=batch,
        step_running=running,
        step_kv_blocks=kv_blocks,
    )
