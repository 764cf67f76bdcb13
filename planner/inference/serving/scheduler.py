"""One replica's scheduler, vLLM V1's (`vllm/v1/core/sched/scheduler.py`), step by step (not token by token).

Every step first gives each running sequence one decode token, then spends what is left of
`max_num_batched_tokens` on prompt chunks — the unfinished prompts first, then new requests in arrival order
while fewer than `max_num_seqs` run and their KV blocks fit. Without chunked prefill a step is either a
whole-prompt prefill (new requests first, decodes wait) or a decode step. When a growing sequence needs a KV
block and none is free, the most recently admitted sequence is preempted and later recomputed (vLLM's recompute
preemption). Runs of pure decode steps between events are advanced at once (`decode_runs`); under speculative
decoding (`SpeculativeReplica`) every step with decoding sequences is a draft-and-verify round.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from planner.inference.serving.adapter_slots import AdapterLimits, AdapterSlots
from planner.inference.serving.decode_runs import RoundCost, StepCost, decode_run, quiet_run
from planner.inference.serving.decoders import Decoders, Speculation, SpeculativeDecoders, blocks_for
from planner.inference.serving.step_log import ReplicaTimeline, StepLog, timeline

# Under speculative decoding, a stretch of at least this many rounds in which no sequence finishes is costed at
# once (~40 us of numpy calls whatever its length, one round in Python floats ~5 us).
LONG_RUN_ROUNDS = 16


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """What the serving engine may hold and do per replica."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_blocks: int
    block_tokens: int
    # Blocks a new request must leave free when it is admitted (vLLM V0's watermark, 1% of the pool): the
    # running sequences' next blocks, so that an admission does not force the next step to preempt.
    admission_watermark_blocks: int = 0
    # False: a step runs either prompt chunks or the decodes, prompts first (SGLang's default)
    mixes_prefill_with_decode: bool = True
    # True: a request is admitted only when blocks for its whole prompt and output are free, and keeps them
    # until it finishes, so nothing is preempted (TensorRT-LLM's GUARANTEED_NO_EVICT)
    reserves_whole_request: bool = False


@dataclass(frozen=True, slots=True)
class ReplicaContext:
    """How one replica serves its requests: what the engine may hold (`limits`), how long a step takes (`cost`:
    a `RoundCost` under speculation), the client's cap on requests in flight to this replica (None: an open
    stream), and speculative decoding, its random acceptances drawn from the speculation's seed and
    `replica_index`."""

    limits: EngineLimits
    cost: StepCost | RoundCost
    client_max_concurrency: int | None = None
    speculation: Speculation | None = None
    replica_index: int = 0
    adapters: AdapterLimits | None = None  # multi-LoRA serving: the replica's adapter slots (`AdapterSlots`)


def simulate_replica(
    arrival_seconds: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_tokens: np.ndarray,
    indices: np.ndarray,
    context: ReplicaContext,
    ready_delay_seconds: np.ndarray | None = None,
    adapter_ids: np.ndarray | None = None,
) -> ReplicaTimeline:
    """Serve the given requests (sorted by arrival; `indices` their places in the whole stream) on one replica;
    returns their timeline.

    `context.speculation` (with a `RoundCost` as `context.cost`): every step with decoding sequences is a
    draft-and-verify round (`Speculation`), its random acceptances drawn from the speculation's seed and
    `context.replica_index`.

    `ready_delay_seconds` (optional, per request): how long a request waits, once the scheduler first sees it,
    before it can be scheduled — its cached prefix being read from a prefix pool into GPU memory. The wait
    overlaps the steps of the other requests (the load is asynchronous, as vLLM's KV connectors load remote
    KV while the engine keeps stepping); the request then joins the queue's tail.

    `adapter_ids` (with `context.adapters`): each request's LoRA adapter; a batch holds at most the slots' distinct
    adapters and a step waits for the adapters it loads (`adapter_slots.AdapterSlots`).
    """
    requests = (arrival_seconds, prompt_tokens, output_tokens, cached_tokens)
    speculation = context.speculation
    replica = (
        Replica(*requests, context) if speculation is None else SpeculativeReplica(*requests, context, speculation)
    )
    if ready_delay_seconds is not None and bool(np.any(ready_delay_seconds > 0)):
        replica.delay = ready_delay_seconds.tolist()
    if context.adapters is not None and adapter_ids is not None:
        replica.adapters = AdapterSlots(context.adapters, adapter_ids.tolist())
    replica.run()
    r = replica
    result = timeline(indices, r.sent, r.scheduled, r.first, r.finish, output_tokens, r.preemptions, r.log)
    if r.adapters is not None:
        slots = r.adapters
        result = replace(
            result,
            adapter_loads=slots.loads,
            adapter_storage_reads=slots.storage_reads,
            adapter_stall_seconds=slots.stall_seconds,
        )
    if speculation is not None:
        result = replace(
            result,
            itl_seconds=np.asarray(r.log.itl_seconds, dtype=float),
            itl_tokens=np.asarray(r.log.itl_tokens, dtype=float),
        )
    return result


class Replica:
    """One replica's scheduler state while it serves its requests (the loop of `simulate_replica`).

    Requests move waiting -> prefilling (prompt chunks) -> decoding (`Decoders`) -> finished; a preempted
    one goes back to the head of the queue with everything it had to recompute.
    """

    def __init__(
        self,
        arrival_seconds: np.ndarray,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        cached_tokens: np.ndarray,
        context: ReplicaContext,
    ) -> None:
        n = len(arrival_seconds)
        self.n = n
        self.limits = limits = context.limits
        # the plain path's step pricing (`SpeculativeReplica` reads the same object as a `RoundCost`)
        self.cost = cast(StepCost, context.cost)
        self.block = limits.block_tokens
        self.arrivals: list[float] = arrival_seconds.tolist()
        self.prompts: list[int] = prompt_tokens.tolist()
        self.outputs: list[int] = output_tokens.tolist()
        self.cached: list[int] = cached_tokens.tolist()
        self.sent = list(self.arrivals)
        self.scheduled = [np.nan] * n
        self.first = [np.nan] * n
        self.finish = [np.nan] * n
        self.log = StepLog()
        self.waiting: deque[tuple[int, int, int, int]] = deque()  # (request, context in KV, to prefill, generated)
        self._plain = Decoders(self.block)  # the plain path's decoders (`SpeculativeReplica` has its own)
        self.decoders: Decoders | SpeculativeDecoders = self._plain
        self.prefilling: list[list[int]] = []  # [request, context, left to prefill, generated], admission order
        self.admitted_order: dict[int, int] = {}
        self.preemptions = 0
        self.next_arrival = 0
        self.cap = context.client_max_concurrency or n + 1
        self.completions: list[float] = []  # in order: the client sends request i once the (i - cap)-th finished
        self.now = 0.0
        self.done = 0
        self.delay: list[float] | None = None  # per request: a prefix load before it may be scheduled
        self.loading: list[tuple[float, int, int, int]] = []  # heap of (ready at, request, context, to prefill)
        self.query_tokens = 1  # budget tokens a decoding sequence takes per step
        # A sequence was preempted for the coming step: vLLM V1 schedules no waiting request in a step that
        # preempted (`vllm/v1/core/sched/scheduler.py` schedule(): the WAITING loop runs `if not preempted_reqs`),
        # so the victim cannot take back the blocks it just gave up before the running sequences use them.
        self.preempted = False
        # under `reserves_whole_request`: the blocks each running request reserved at admission, and their sum
        self.reserved: dict[int, int] = {}
        self.reserved_blocks = 0
        self.adapters: AdapterSlots | None = None  # multi-LoRA serving (`simulate_replica`)

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
            scheduled = self._schedule(running) if self.waiting or self.prefilling else ([], running)
            if scheduled is None:
                self._preempt_newest()
                continue
            chunks, running = scheduled
            if chunks:
                self._mixed_step(chunks)
            elif not running:
                self._admit_oversized()
                continue
            elif not self._decode_steps(running):
                self._preempt_newest()
                continue
            self.preempted = False
            for request in self.decoders.pop_finished():
                self.decoders.leave(request)
                self._complete(request)

    def _enqueue(self, entry: tuple[int, int, int, int]) -> None:
        self.waiting.append(entry)
        if self.adapters is not None:
            self.adapters.enqueue(entry[0])

    def _take_arrivals(self) -> None:
        n = self.n
        loading = self.loading
        while loading and loading[0][0] <= self.now + 1e-12:  # prefixes loaded: the requests queue now
            _, i, context, prefill = heapq.heappop(loading)
            self._enqueue((i, context, prefill, 0))
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
                self._enqueue((i, self.prompts[i] - prefill, prefill, 0))
            self.next_arrival += 1

    def _schedule(self, running: int) -> tuple[list[tuple[list[int], int]], int] | None:
        """One step's prompt chunks (vLLM V1): decodes first, then the unfinished prompts, then new requests
        in arrival order while fewer than max_num_seqs run, their KV blocks fit and tokens remain. None: the
        running sequences' own tokens of this step do not fit the KV pool, so one must be preempted first (V1
        allocates the running requests' slots before it admits any)."""
        limits, chunked = self.limits, self.limits.chunked_prefill
        decodes_in_step = chunked and limits.mixes_prefill_with_decode
        # a verifying sequence's k + 1 positions count against the budget, as in vLLM V1
        budget = limits.max_num_batched_tokens - (len(self.decoders) * self.query_tokens if decodes_in_step else 0)
        chunks: list[tuple[list[int], int]] = []
        block = self.block
        # blocks held once this step's tokens are written: the decodes' (one token more each when they run in the
        # step), the scheduled chunks' and what the prompts left unscheduled hold
        used = self._decoder_blocks_after_step() if decodes_in_step else self.decoders.blocks()
        for entry in self.prefilling:
            chunk = min(entry[2], budget) if chunked and budget > 0 else 0
            if chunk:
                chunks.append((entry, chunk))
                budget -= chunk
            used += blocks_for(entry[1] + chunk, block)
        if used > limits.kv_blocks and running > 1:
            return None
        reserving = limits.reserves_whole_request
        if reserving:
            used = self.reserved_blocks  # every running request holds its whole length's blocks
        free = limits.kv_blocks - limits.admission_watermark_blocks
        while self.waiting and not self.preempted and running < limits.max_num_seqs and (budget > 0 or not chunked):
            position = self._next_admissible()
            if position is None:
                break  # every waiting request's adapter would exceed the batch's distinct adapters
            i, context, prefill, generated = self.waiting[position]
            final = context + prefill + (self.outputs[i] - generated if reserving else 0)
            need = blocks_for(final, block)
            if running and used + need > free:
                break  # wait for KV memory
            if not chunked and chunks and prefill > budget:
                break
            entry = self._admit(position)
            if reserving:
                self.reserved[i] = need
                self.reserved_blocks += need
            chunk = min(prefill, budget) if chunked else prefill
            chunks.append((entry, chunk))
            budget -= chunk
            running += 1
            used += need
        return chunks, running

    def _decoder_blocks_after_step(self) -> int:
        """KV blocks the decoding sequences hold after one more decode step."""
        return self._plain.blocks(1)

    def _next_admissible(self) -> int | None:
        """Where in the queue the next request to admit stands: its head, or under multi-LoRA serving the first
        whose adapter fits the batch (vLLM V1 skips the others and tries the next); None when none does. The queue
        is scanned only when a slot's adapter has a request in it (`AdapterSlots.none_admissible`): a blocked queue
        is answered at once."""
        adapters = self.adapters
        if adapters is None or not self.waiting:
            return 0 if adapters is None else None
        if len(adapters.running) < adapters.limits.slots:
            return 0  # a slot to spare: every request fits, the head first
        if adapters.none_admissible():
            return None
        running, adapter_of = adapters.running, adapters.adapter_of  # the test of `admissible`, inlined
        return next((p for p, waiting in enumerate(self.waiting) if adapter_of[waiting[0]] in running), None)

    def _admit(self, position: int = 0) -> list[int]:
        """The request at `position` in the queue (its head by default) starts (or restarts) its prompt."""
        if position:
            i, context, prefill, generated = self.waiting[position]
            del self.waiting[position]
        else:
            i, context, prefill, generated = self.waiting.popleft()
        if self.adapters is not None:
            self.adapters.admit(i)
        entry = [i, context, prefill, generated]
        self.prefilling.append(entry)
        self.admitted_order[i] = len(self.admitted_order) + self.preemptions + self.done
        if self.scheduled[i] != self.scheduled[i]:  # NaN: first time scheduled
            self.scheduled[i] = self.now
        return entry

    def _admit_oversized(self) -> None:
        """Nothing runs and the head of the queue needs more KV blocks than exist: serve it anyway."""
        self._admit(self._next_admissible() or 0)  # nothing runs, so every adapter fits

    def _mixed_step(self, chunks: list[tuple[list[int], int]]) -> None:
        """One step that runs prompt chunks (and, with chunked prefill, every decode: one decode step, or under
        speculative decoding one draft-and-verify round, in which each decoder gains its own tokens)."""
        decoders = self.decoders
        spans = [(e[1], e[1] + c) for e, c in chunks]
        if self.limits.chunked_prefill and self.limits.mixes_prefill_with_decode:
            batch, context = len(decoders), decoders.context_tokens()
        else:
            batch, context = 0, 0  # a prefill-only step (whole prompts, or chunks without mixing): decodes wait
        duration = self._step_seconds(batch, context, spans)
        if self.adapters is not None:
            duration += self.adapters.take_pending_seconds()  # adapters loaded before the forward pass
        self.now += duration
        gain_counts = decoders.advance() if batch else None
        first_tokens = self._advance_chunks(chunks)
        self.log.step(duration, batch + first_tokens, len(decoders) + len(self.prefilling), self._blocks_used())
        self._log_bursts(duration, gain_counts, first_tokens)

    def _step_seconds(self, decode_batch: int, decode_context_tokens: int, spans: list[tuple[int, int]]) -> float:
        """How long a step with prompt chunks takes (`_mixed_step`)."""
        return self.cost.mixed_seconds(decode_batch, decode_context_tokens, spans)

    def _log_bursts(self, seconds: float, gain_counts: list[int] | None, first_tokens: int) -> None:
        """What a step's tokens count for ITL beyond the step itself: nothing without speculation (ITL = steps)."""

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
        # A new arrival can join unless the queue is blocked ahead of it: by memory, or, under multi-LoRA serving,
        # not when every waiting request is skipped for its adapter (an arrival whose adapter runs is admitted).
        blocked = bool(self.waiting) and (self.adapters is None or self._next_admissible() is not None)
        joinable = running < self.limits.max_num_seqs and not blocked
        horizon = self._send_time(self.next_arrival) if joinable else np.inf
        if joinable and self.loading:
            horizon = min(horizon, self.loading[0][0])
        held = self._blocks_used()
        end = decode_run(self._plain, self.now, horizon, self.limits.kv_blocks - held, self.cost, self.log, held)
        if end is None:
            return False
        self.now = end
        return True

    def _preempt_newest(self) -> None:
        """vLLM's recompute preemption: the newest sequence gives its KV blocks back; its prompt and the
        tokens generated so far are prefilled again when it is scheduled next."""
        victim = max(self.admitted_order, key=self.admitted_order.__getitem__)
        self.admitted_order.pop(victim)
        self.reserved_blocks -= self.reserved.pop(victim, 0)
        for entry in self.prefilling:
            if entry[0] == victim:
                self.prefilling.remove(entry)
                # what it had cached and what it had left: the whole prompt is prefilled again
                context, generated = entry[1] + entry[2], entry[3]
                break
        else:
            context, generated = self._evict_decoder(victim)
        self.waiting.appendleft((victim, 0, context, generated))
        if self.adapters is not None:
            self.adapters.enqueue(victim)
        if self.adapters is not None:
            self.adapters.release(victim)
        self.preemptions += 1
        self.preempted = True

    def _evict_decoder(self, victim: int) -> tuple[int, int]:
        """Take a decoding sequence out; its context and the tokens it has generated."""
        return self._plain.remove(victim, self.outputs[victim])

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
        return self.decoders.blocks() + sum(blocks_for(p[1], self.block) for p in self.prefilling)

    def _complete(self, request: int) -> None:
        if self.adapters is not None:
            self.adapters.release(request)
        self.reserved_blocks -= self.reserved.pop(request, 0)
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


class SpeculativeReplica(Replica):
    """`Replica` under speculative decoding (`Speculation`): every step with decoding sequences is a
    draft-and-verify round, costed by a `RoundCost`; the decoders gain their own 1 + A tokens per round, so
    pure decode steps run one round at a time (no vectorised runs), and the log keeps each round's token bursts
    for ITL."""

    def __init__(
        self,
        arrival_seconds: np.ndarray,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        cached_tokens: np.ndarray,
        context: ReplicaContext,
        speculation: Speculation,
    ) -> None:
        super().__init__(arrival_seconds, prompt_tokens, output_tokens, cached_tokens, context)
        self.spec = self.decoders = SpeculativeDecoders(self.block, speculation, context.replica_index)
        self.query_tokens = speculation.drafted_tokens + 1
        self.round_cost = cast(RoundCost, context.cost)

    def _step_seconds(self, decode_batch: int, decode_context_tokens: int, spans: list[tuple[int, int]]) -> float:
        return self.round_cost.round_seconds(decode_batch, decode_context_tokens, spans)

    def _decoder_blocks_after_step(self) -> int:
        # a verifying sequence already holds blocks for the positions it may gain in a round
        return self.spec.blocks()

    def _log_bursts(self, seconds: float, gain_counts: list[int] | None, first_tokens: int) -> None:
        self.log.bursts(seconds, gain_counts, first_tokens)

    def _decode_steps(self, running: int) -> bool:
        """Draft-and-verify rounds of the decoding sequences until the scheduler has something to do: a
        sequence finished, a request or a prefix load is due, their KV slots no longer fit (a lone sequence
        runs regardless), or requests wait or prompts are unfinished (it looks after every round). False when
        the first round does not fit. A long stretch of rounds in which no sequence finishes is costed at once
        (`decode_runs.quiet_run`), the rest one round at a time."""
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
                rounds, self.now = quiet_run(spec, self.round_cost, log, self.now, ahead, batch, due, kv_blocks)
                quiet -= rounds
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

    def _evict_decoder(self, victim: int) -> tuple[int, int]:
        return self.spec.remove(victim)
