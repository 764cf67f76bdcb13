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
running out) are advanced at once with a vectorised cost over the run, so the loop count grows with
requests, not with tokens.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np


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

    def context_tokens_ahead(self, ticks_ahead: np.ndarray) -> np.ndarray:
        """Sum of the decoders' contexts at each of `ticks_ahead` ticks from now."""
        return self.sum_offset + len(self.offset) * (self.tick + ticks_ahead)

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


def simulate_replica(
    arrival_seconds: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_tokens: np.ndarray,
    indices: np.ndarray,
    limits: EngineLimits,
    cost: StepCost,
    client_max_concurrency: int | None = None,
) -> ReplicaTimeline:
    """Serve the given requests (sorted by arrival) on one replica; returns their timeline."""
    n = len(arrival_seconds)
    block = limits.block_tokens
    arrivals = arrival_seconds.tolist()
    prompts = prompt_tokens.tolist()
    outputs = output_tokens.tolist()
    cached = cached_tokens.tolist()
    sent = list(arrivals)
    scheduled = [np.nan] * n
    first = [np.nan] * n
    finish = [np.nan] * n
    log = _StepLog()
    waiting: deque[tuple[int, int, int, int]] = deque()  # (request, context in KV, to prefill, generated)
    decoders = _Decoders(block)
    prefilling: list[list[int]] = []  # [request, context, left to prefill, generated], admission order
    admitted_order: dict[int, int] = {}
    preemptions = 0
    next_arrival = 0
    cap = client_max_concurrency or n + 1
    completions: list[float] = []  # in order: the client sends request i once the (i - cap)-th has finished
    now = 0.0
    done = 0
    chunked = limits.chunked_prefill
    max_seqs = limits.max_num_seqs
    kv_blocks = limits.kv_blocks

    def send_time(i: int) -> float:
        if i >= n:
            return np.inf
        if i < cap:
            return arrivals[i]
        if len(completions) <= i - cap:
            return np.inf
        return max(arrivals[i], completions[i - cap])

    def blocks_used() -> int:
        return decoders.blocks() + sum(_blocks(p[1], block) for p in prefilling)

    def complete(request: int) -> None:
        nonlocal done
        finish[request] = now
        completions.append(now)
        admitted_order.pop(request, None)
        done += 1

    def start_decoding(entry: list[int]) -> None:
        i, context, _, generated = entry
        if generated >= outputs[i]:
            complete(i)
        else:
            decoders.join(i, context, generated, outputs[i])

    while done < n:
        while next_arrival < n and (ts := send_time(next_arrival)) <= now + 1e-12:
            i = next_arrival
            sent[i] = ts
            prefill = max(prompts[i] - cached[i], 1)  # the last prompt token always runs: it yields a token
            waiting.append((i, prompts[i] - prefill, prefill, 0))
            next_arrival += 1
        running = len(decoders) + len(prefilling)
        if not running and not waiting:
            now = max(now, send_time(next_arrival))  # idle until the next request
            continue

        # ---- schedule one step (vLLM V1): decodes first, then prompt chunks within the token budget
        n_decode = len(decoders) if chunked else 0
        budget = limits.max_num_batched_tokens - n_decode
        chunks: list[tuple[list[int], int]] = []
        if chunked:
            for entry in prefilling:
                if budget <= 0:
                    break
                chunk = min(entry[2], budget)
                chunks.append((entry, chunk))
                budget -= chunk
        used = -1
        while waiting and running < max_seqs and (budget > 0 or not chunked):
            i, context, prefill, generated = waiting[0]
            need = _blocks(context + prefill, block)
            if running:
                # Cheap upper bound first (each sequence wastes less than one block), exact count if needed.
                bound = (decoders.context_tokens() + sum(p[1] for p in prefilling)) // block + running
                if bound + need > kv_blocks:
                    used = blocks_used() if used < 0 else used
                    if used + need > kv_blocks:
                        break  # wait for KV memory
            if not chunked and chunks and prefill > budget:
                break
            waiting.popleft()
            entry = [i, context, prefill, generated]
            prefilling.append(entry)
            admitted_order[i] = len(admitted_order) + preemptions + done
            chunk = min(prefill, budget) if chunked else prefill
            chunks.append((entry, chunk))
            budget -= chunk
            running += 1
            if used >= 0:
                used += need
            if scheduled[i] != scheduled[i]:  # NaN: first time scheduled
                scheduled[i] = now

        if not chunks:
            if not running:
                # Nothing runs and the head of the queue needs more KV blocks than exist: serve it anyway.
                i, context, prefill, generated = waiting.popleft()
                prefilling.append([i, context, prefill, generated])
                admitted_order[i] = len(admitted_order) + preemptions + done
                if scheduled[i] != scheduled[i]:
                    scheduled[i] = now
                continue
            # ---- a run of pure decode steps until the next event
            joinable = running < max_seqs and not waiting
            horizon = send_time(next_arrival) if joinable else np.inf
            held = blocks_used()
            k = _decode_run(decoders, now, horizon, kv_blocks - held, cost, log, held)
            if k is None:
                # A sequence needs a KV block and none is free: preempt the newest (vLLM recompute
                # preemption: its prompt and the tokens generated so far are prefilled again later).
                victim = max(admitted_order, key=admitted_order.__getitem__)
                admitted_order.pop(victim)
                for entry in prefilling:
                    if entry[0] == victim:
                        prefilling.remove(entry)
                        context, generated = entry[1], entry[3]
                        break
                else:
                    generated = decoders.generated(victim, outputs[victim])
                    decoders.finish_heap = [(f, r) for f, r in decoders.finish_heap if r != victim]
                    heapq.heapify(decoders.finish_heap)
                    context = decoders.leave(victim)
                waiting.appendleft((victim, 0, context, generated))
                preemptions += 1
                continue
            now = k
        else:
            # ---- one step that runs prompt chunks (and, when chunked, every decode)
            spans = [(e[1], e[1] + c) for e, c in chunks]
            if chunked:
                batch, context = len(decoders), decoders.context_tokens()
            else:
                batch, context = 0, 0  # a whole-prompt prefill step: decodes wait for it
            duration = cost.mixed_seconds(batch, context, spans)
            now += duration
            if batch:
                decoders.tick += 1
            sampled = batch
            for entry, chunk in chunks:
                entry[1] += chunk
                entry[2] -= chunk
                if not entry[2]:
                    # The step that finishes a prompt samples a token (a recomputed sequence: its next one).
                    entry[3] += 1
                    sampled += 1
                    if first[entry[0]] != first[entry[0]]:
                        first[entry[0]] = now
            finished_prompts = [e for e, _ in chunks if not e[2]]
            if finished_prompts:
                prefilling = [e for e in prefilling if e[2]]
                for entry in finished_prompts:
                    start_decoding(entry)
            log.step(duration, sampled, len(decoders) + len(prefilling), blocks_used())
        for request in decoders.pop_finished():
            decoders.leave(request)
            complete(request)

    return _timeline(indices, sent, scheduled, first, finish, output_tokens, preemptions, log)


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
    durations = cost.decode_seconds(b, decoders.context_tokens_ahead(np.arange(k_max)))
    ends = np.cumsum(durations)
    if next_arrival < np.inf:
        # Stop after the step during which the next request arrives: the scheduler admits it next step.
        k = int(np.searchsorted(ends, next_arrival - now, side="left")) + 1
        if k < k_max:
            k_max = max(1, k)
            durations = durations[:k_max]
    decoders.tick += k_max
    log.run(durations, b, b, blocks_in_use)
    return now + float(ends[k_max - 1])


class _StepLog:
    """Every step's duration, sequences sampled, sequences held and KV blocks held (runs stored as one entry)."""

    def __init__(self) -> None:
        self.seconds: list[np.ndarray] = []
        self.single: list[float] = []  # durations of single steps, flushed into `seconds` in order
        self.counts: list[int] = []
        self.batch: list[int] = []
        self.running: list[int] = []
        self.kv_blocks: list[int] = []

    def step(self, seconds: float, batch: int, running: int, kv_blocks: int) -> None:
        self.single.append(seconds)
        self.counts.append(1)
        self.batch.append(batch)
        self.running.append(running)
        self.kv_blocks.append(kv_blocks)

    def run(self, seconds: np.ndarray, batch: int, running: int, kv_blocks: int) -> None:
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
