"""The decoding sequences of one replica, kept so that a decode step over all of them costs O(1) in Python.

`Decoders` (plain decoding: every sequence gains one token per step) stores each sequence by its offset from a
shared tick; `SpeculativeDecoders` (`Speculation`: every sequence gains its own random 1 + A tokens per
draft-and-verify round) plans the per-round totals a draws buffer at a time. Both answer the scheduler's
questions (how many, their context sum, the KV blocks they hold, who finished) without a loop over sequences.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


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


def blocks_for(tokens: int, block: int) -> int:
    """Paged KV blocks for `tokens` tokens."""
    return -(-tokens // block)


class Decoders:
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

    def remove(self, request: int, output: int) -> tuple[int, int]:
        """Take a decoder out before it finishes (preempted); returns its context and the tokens it has generated."""
        generated = self.generated(request, output)
        self.finish_heap = [(f, r) for f, r in self.finish_heap if r != request]
        heapq.heapify(self.finish_heap)
        return self.leave(request), generated

    def advance(self) -> None:
        """One decode step: every decoder gains one token (of context and of output)."""
        self.tick += 1

    def pop_finished(self) -> list[int]:
        done = []
        while self.finish_heap and self.finish_heap[0][0] <= self.tick:
            done.append(heapq.heappop(self.finish_heap)[1])
        return done


class SpeculativeDecoders:
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
