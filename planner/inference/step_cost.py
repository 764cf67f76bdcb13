"""What one engine step of any mix costs on a replica: decode tokens for the running sequences plus prompt
chunks, as the traffic simulation (`planner.inference.serving`) schedules them.

No second physics and no second composition: every step is `steps.compose_step` over a `steps.StepWork` and a
`steps.StepLoad`, and every work term is the static plan's own (`steps.decode_work`, `steps.decode_load`,
`planner.inference.step_work`), evaluated once over the values a simulation can ask for and looked up per step,
because a simulation asks for tens of thousands of steps and each must cost microseconds:

- terms of the step's token count T (weights streamed, tensor-parallel all-reduces, MoE all-to-alls,
  pipeline hand-offs): exact, tabulated for every integer T up to the engine's token budget;
- the decode part, linear in the decoding sequences: per-sequence FLOPs and KV read over a grid of
  contexts that holds every sliding-window kink, so linear interpolation is exact;
- the prompt part: per-position cumulative FLOPs and KV written, exact for every integer position, so a
  chunk's [start, end) piece costs F(end) - F(start), as `physics.flops.prefill_flops` counts it;
- a pure decode step of a given batch: `compose_step` over the whole context grid at once (`PhaseStep`'s rows),
  cached per batch, then interpolated.

A step with no prompt chunk equals `steps.decode_step` at the same micro-batch and mean context, and a
step with one whole prompt and no decodes equals `steps.prefill_step` (tests/inference/test_step_composition.py
holds both, over a random grid of scenarios, to 1e-9). Under speculative decoding, `SpeculativeStepCost` prices a
step as a draft-and-verify round from the same tables (the target over k + 1 query tokens per decoding
sequence) and the draft network's own, composed inside the round; a pure decode round equals
`speculative.speculative_round(...).round_seconds`.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from planner.inference.inputs import micro_batch
from planner.inference.speculative import round_seconds
from planner.inference.step_work import (
    adapter_activation_bytes,
    adapter_step_bytes,
    adapter_step_flops,
    prefill_step_flops,
    prefill_step_mixing_flops,
)
from planner.inference.steps import (
    PhaseStep,
    StepContext,
    StepLoad,
    StepWork,
    compose_step,
    decode_load,
    decode_work,
    image_encoder_step_flops,
    request_overhead_seconds,
    step_expert_flops_per_token,
    step_seconds,
)
from planner.model.architecture import ModelArchitecture
from planner.physics import memory as mem

CONTEXT_GRID_POINTS = 96  # log-spaced decode contexts; kinks (windows) are added exactly


@dataclass(frozen=True, slots=True)
class _ScalarTables:
    """`RooflineStepCost`'s tables as Python lists, for the one-step path (same numbers)."""

    context_grid: list[float]
    decode_mixing_flops_per_sequence: list[float]
    kv_read_bytes_per_sequence: list[float]
    prefill_flops_to: list[float]
    prefill_mixing_flops_to: list[float]
    kv_written_to: list[float]
    gemm_bytes: list[float]
    expert_bytes: list[float]
    collective_seconds: list[float]
    handoff_seconds: list[float]
    adapter_bytes: list[float]  # by the step's sequences (multi-LoRA serving; zeros without adapters)


class RooflineStepCost:
    """`serving.StepCost` from the plan's term functions for one replica (see the module docstring).

    `max_step_tokens` bounds T (micro-batch plus prompt tokens in one step); `max_position_tokens` bounds a
    prompt position (a recomputed sequence prefills its prompt and what it had generated). `in_round`: the
    steps are a speculative draft's inside a draft-and-verify round (the round pays the scheduling once).
    """

    def __init__(
        self,
        ctx: StepContext,
        stage_weight_bytes: float,
        max_step_tokens: int,
        max_position_tokens: int,
        in_round: bool = False,
    ) -> None:
        self.ctx = ctx
        self.stage_weight_bytes = float(stage_weight_bytes)
        self.in_round = in_round
        self.pipeline_parallel = int(ctx.inputs.pipeline_parallel)
        self.request_overhead_seconds = float(request_overhead_seconds(ctx.efficiency))
        self._rows: dict[tuple[int, int], _DecodeRows] = {}
        adapters = ctx.inputs.adapters
        self._adapter_kernels = 0.0 if adapters is None else ctx.shape.stage_layers * adapters.kernels_per_layer
        self._expert_flops_per_token = float(
            step_expert_flops_per_token(ctx.counts, ctx.arch, ctx.inputs.tensor_parallel, ctx.inputs.pipeline_parallel)
        )
        tokens_work, tokens_load = self._token_tables(max_step_tokens)
        self._context_grid = context_grid(ctx.arch, max_position_tokens)
        # one sequence, one position over the context grid: the mixing terms per sequence; the GEMMs' per token
        sequence = decode_work(ctx, self.stage_weight_bytes, 1, self._context_grid)
        self._decode_gemm_flops_per_token = float(sequence.decode_gemm_flops)
        prompt = self._prompt_tables(max_position_tokens)
        self._tables = _ScalarTables(
            context_grid=self._context_grid.tolist(),
            decode_mixing_flops_per_sequence=_row(sequence.decode_mixing_flops, self._context_grid),
            kv_read_bytes_per_sequence=_row(sequence.mixing_bytes, self._context_grid),
            prefill_flops_to=prompt[0],
            prefill_mixing_flops_to=prompt[1],
            kv_written_to=prompt[2],
            gemm_bytes=tokens_work[0],
            expert_bytes=tokens_work[1],
            collective_seconds=tokens_load[0],
            handoff_seconds=tokens_load[1],
            adapter_bytes=_row(
                adapter_step_bytes(ctx.inputs.adapters, np.arange(max_step_tokens + 1, dtype=float)),
                np.arange(max_step_tokens + 1),
            ),
        )

    def _token_tables(self, max_step_tokens: int):
        """Every term of the step's token count T, for T = 0 .. max_step_tokens: `decode_work` / `decode_load` of
        T single-position sequences (the weights, experts, collectives and hand-offs depend on T alone)."""
        tokens = np.arange(max_step_tokens + 1, dtype=float)
        work = decode_work(self.ctx, self.stage_weight_bytes, tokens, 0.0)
        load = decode_load(self.ctx, tokens)
        return (
            (_row(work.gemm_bytes, tokens), _row(work.expert_bytes, tokens)),
            (_row(load.collective_seconds, tokens), _row(load.handoff_seconds, tokens)),
        )

    def _prompt_tables(self, max_position_tokens: int):
        """Per position L = 0 .. max_position_tokens of one prompt: the cumulative FLOPs F(L) of its first L tokens
        (`prefill_step_flops(L, L, 1)`; a piece [s, e) is F(e) - F(s) + F(0), the lm_head of its last position,
        which the difference cancels), their mixing part M(L) (M(0) = 0) and the KV written K(L)."""
        inputs, arch, counts = self.ctx.inputs, self.ctx.arch, self.ctx.counts
        tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
        positions = np.arange(max_position_tokens + 1, dtype=float)
        flops_to = np.asarray(prefill_step_flops(counts, arch, positions, positions, 1, tp, pp), dtype=float)
        # A prompt's images are encoded with its first piece: every position from 1 on carries the encoder's
        # FLOPs, so only a piece that starts at 0 pays them (F(e) - F(0) + F(0)).
        flops_to[1:] += image_encoder_step_flops(inputs.image_encoder_flops, 1, tp, pp)
        mixing_to = prefill_step_mixing_flops(arch, positions, positions, 1, tp, pp)
        # written token by token (block_tokens 1): a write fills the slots it uses, whole blocks are allocation
        kv_to = mem.kv_cache_bytes(
            arch,
            tp,
            pp,
            1,
            positions,
            inputs.kv_bytes_per_element,
            1,
            inputs.honor_sliding_window,
            inputs.activation_bytes_per_element,
        )
        return flops_to.tolist(), _row(mixing_to, positions), _row(kv_to, positions)

    @property
    def max_step_tokens(self) -> int:
        return len(self._tables.gemm_bytes) - 1

    @property
    def max_position_tokens(self) -> int:
        return len(self._tables.prefill_flops_to) - 1

    def for_draft(self, draft_ctx: StepContext, draft_weight_bytes: float) -> RooflineStepCost:
        """The same tables' bounds for a speculative draft's steps inside the round."""
        return RooflineStepCost(
            draft_ctx, draft_weight_bytes, self.max_step_tokens, self.max_position_tokens, in_round=True
        )

    # ------------------------------------------------------------------------------------------ a step

    def step(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans=(), query_tokens: int = 1
    ) -> PhaseStep:
        """One engine step, composed (`steps.compose_step`): `decode_batch` sequences with `decode_context_tokens`
        tokens of context in all, and prompt pieces [start, end) (positions in their prompts). `query_tokens` > 1:
        each decoding sequence runs that many positions (a speculative verify step, as
        `steps.decode_step(query_tokens=...)`: compute, expert reads, messages and sampling scale with it, the KV
        read does not). The tables are read as Python lists: a simulation asks for one such step per
        prompt-carrying step, and numpy scalars cost more than the arithmetic."""
        t = self._tables
        prefill_tokens = 0
        prefill_flops = prefill_mixing = kv_written = 0.0
        flops_to, mixing_to, kv_to = t.prefill_flops_to, t.prefill_mixing_flops_to, t.kv_written_to
        for start, end in prefill_spans:
            prefill_tokens += end - start
            prefill_flops += flops_to[end] - flops_to[start] + flops_to[0]
            prefill_mixing += mixing_to[end] - mixing_to[start]
            kv_written += kv_to[end] - kv_to[start]
        micro = int(micro_batch(decode_batch, self.pipeline_parallel))
        decode_tokens = micro * query_tokens if decode_batch else 0
        step_tokens = decode_tokens + prefill_tokens
        if step_tokens > len(t.gemm_bytes) - 1:
            raise ValueError(f"a step of {step_tokens} tokens exceeds the table's {self.max_step_tokens}")
        decode_mixing = decode_kv_bytes = 0.0
        if decode_batch:
            mean_context = decode_context_tokens / decode_batch
            mixing, kv = interp_two(
                mean_context, t.context_grid, t.decode_mixing_flops_per_sequence, t.kv_read_bytes_per_sequence
            )
            decode_mixing, decode_kv_bytes = decode_tokens * mixing, micro * kv
        prefill_expert = prefill_tokens * self._expert_flops_per_token
        sequences = micro + len(prefill_spans)
        work = StepWork(
            prefill_gemm_flops=prefill_flops - prefill_expert - prefill_mixing,
            decode_gemm_flops=decode_tokens * self._decode_gemm_flops_per_token,
            expert_flops=prefill_expert + decode_tokens * self._expert_flops_per_token,
            prefill_mixing_flops=prefill_mixing,
            decode_mixing_flops=decode_mixing,
            gemm_bytes=t.gemm_bytes[step_tokens],
            expert_bytes=t.expert_bytes[step_tokens],
            mixing_bytes=decode_kv_bytes + kv_written,
            layer_passes=self.ctx.shape.stage_layers,
            adapter_flops=adapter_step_flops(self.ctx.inputs.adapters, step_tokens),
            adapter_bytes=t.adapter_bytes[sequences] + adapter_activation_bytes(self.ctx.inputs.adapters, step_tokens),
            adapter_kernels=self._adapter_kernels,
        )
        load = StepLoad(
            tokens=step_tokens,
            scheduled_sequences=sequences,  # every scheduled sequence (partial prefills too)
            sampled_positions=decode_tokens + len(prefill_spans),  # a verify step samples every query position
            collective_seconds=t.collective_seconds[step_tokens],
            handoff_seconds=t.handoff_seconds[step_tokens],
            in_round=self.in_round,
        )
        return compose_step(self.ctx, work, load)

    # ------------------------------------------------------------------------------ StepCost protocol

    def mixed_seconds(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans, query_tokens: int = 1
    ) -> float:
        return float(self.step(decode_batch, decode_context_tokens, prefill_spans, query_tokens).seconds)

    def decode_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """Pure decode steps of the same batch at each of the given context sums (a run, vectorised)."""
        rows = self.decode_rows(decode_batch)
        mean_context = np.asarray(decode_context_tokens) / decode_batch  # float64, as float(sum) / batch
        step = np.interp(mean_context, self._context_grid, rows.compute)
        # steps.step_seconds (pp x max(compute, memory) + fixed), in place: a run is short, so allocations cost
        # more than the math.
        np.maximum(step, np.interp(mean_context, self._context_grid, rows.memory), out=step)
        if self.pipeline_parallel != 1:
            step *= self.pipeline_parallel
        step += rows.fixed_seconds
        return step

    def decode_step_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """One pure decode step: `decode_seconds` of a single context sum, bit for bit, in Python floats
        (cheaper than a numpy call for the few steps of a short run)."""
        return self.verify_step_seconds(decode_batch, decode_context_tokens, 1)

    def shortest_decode_seconds(self, decode_batch: int) -> float:
        """No pure decode step of this batch is shorter, at any context."""
        return self.decode_rows(decode_batch).shortest_seconds

    def verify_step_seconds(self, decode_batch: int, decode_context_tokens: float, query_tokens: int) -> float:
        """A pure decode step of `query_tokens` positions per sequence (a speculative verify step when > 1):
        `mixed_seconds(decode_batch, decode_context_tokens, [], query_tokens)` through rows cached per batch."""
        rows = self.decode_rows(decode_batch, query_tokens)
        compute, memory = interp_two(
            decode_context_tokens / decode_batch, self._tables.context_grid, rows.compute_list, rows.memory_list
        )
        return max(compute, memory) * self.pipeline_parallel + rows.fixed_seconds

    def decode_rows(self, decode_batch: int, query_tokens: int = 1) -> _DecodeRows:
        """A pure decode step of this batch over the whole context grid at once: `steps.decode_work` and
        `steps.decode_load` on the micro-batch, composed (`steps.compose_step`), whose rows (the token-mixing group
        with the other groups' offsets) a run interpolates and whose fixed part it adds; cached per batch."""
        key = (decode_batch, query_tokens)
        rows = self._rows.get(key)
        if rows is None:
            micro = int(micro_batch(decode_batch, self.pipeline_parallel))
            work = decode_work(self.ctx, self.stage_weight_bytes, micro, self._context_grid, query_tokens)
            step = compose_step(self.ctx, work, decode_load(self.ctx, micro, query_tokens, self.in_round))
            rows = self._rows[key] = _DecodeRows.of(step, self._context_grid)
        return rows


def _row(values, grid: np.ndarray) -> list[float]:
    """A term over a grid as a list of floats (a term that does not vary over it is repeated)."""
    return np.broadcast_to(np.asarray(values, dtype=float), grid.shape).tolist()


class SpeculativeStepCost:
    """An engine step under speculative decoding: a draft-and-verify round for the decoding sequences plus the
    step's prompt chunks (the simulation runs one per step). No new terms: the target's part is `RooflineStepCost`
    with k + 1 query tokens per decoding sequence (`steps.decode_step(query_tokens=k + 1)`), the draft's part k
    of the draft network's own decode steps inside the round (`draft`, composed `in_round`: the round pays the
    scheduler once) and, for a step's prompt chunks, the draft's pass over them (the static plan's
    `draft_prefill_seconds`). A round with no prompt chunk equals `speculative.speculative_round(...).round_seconds`
    at the same micro-batch and context."""

    DRAFT_PREFILL_CACHE = 1 << 16  # at most this many steps' draft prefill times are kept

    def __init__(self, target: RooflineStepCost, draft: RooflineStepCost, drafted_tokens: int) -> None:
        if not draft.in_round:
            raise ValueError("a speculative round's draft steps are composed in the round (RooflineStepCost.for_draft)")
        self.target = target
        self.draft = draft
        self.drafted_tokens = int(drafted_tokens)
        self.query_tokens = self.drafted_tokens + 1
        self.request_overhead_seconds = target.request_overhead_seconds
        self._round_rows: dict[int, _RoundRows] = {}
        self._draft_prefill: dict[tuple[tuple[int, int], ...], float] = {}

    @property
    def max_step_tokens(self) -> int:
        return self.target.max_step_tokens

    def round_seconds(self, decode_batch: int, decode_context_tokens: float, prefill_spans) -> float:
        """One step: the verify pass (and prompt chunks) of the target, k draft steps for the decoding batch,
        the draft's pass over the prompt chunks."""
        if not prefill_spans and decode_batch:
            return self.decode_round_seconds(decode_batch, decode_context_tokens)
        if prefill_spans:
            seconds = self.target.mixed_seconds(decode_batch, decode_context_tokens, prefill_spans, self.query_tokens)
        else:
            seconds = self.target.verify_step_seconds(decode_batch, decode_context_tokens, self.query_tokens)
        if decode_batch:
            seconds = round_seconds(
                seconds, self.draft_step_seconds(decode_batch, decode_context_tokens), self.drafted_tokens
            )
        if prefill_spans:
            seconds += self.draft_prefill_seconds(prefill_spans)
        return seconds

    def decode_round_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """A round with no prompt chunk (the simulation's most frequent step): the target's
        `verify_step_seconds` plus k `draft_step_seconds`, the same arithmetic in the same order (bit for bit),
        through rows cached per batch, so a round costs two interpolations and no method calls."""
        rows = self._rows_for(decode_batch)
        mean_context = decode_context_tokens / decode_batch
        compute, memory = interp_two(mean_context, rows.verify_grid, rows.verify_compute, rows.verify_memory)
        seconds = max(compute, memory) * rows.verify_pipeline + rows.verify_fixed
        compute, memory = interp_two(
            mean_context * rows.micro / rows.micro, rows.draft_grid, rows.draft_compute, rows.draft_memory
        )
        draft = max(compute, memory) * rows.draft_pipeline + rows.draft_fixed
        return round_seconds(seconds, draft, self.drafted_tokens)

    def decode_rounds_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """`decode_round_seconds` at each of the given context sums (a run of rounds of the same batch,
        vectorised): np.interp is `interp_two` bit for bit, and the arithmetic after it the same."""
        rows = self._rows_for(decode_batch)
        mean_context = decode_context_tokens / decode_batch  # float64, as int / int
        seconds = np.maximum(
            np.interp(mean_context, rows.verify_grid_array, rows.verify_compute_array),
            np.interp(mean_context, rows.verify_grid_array, rows.verify_memory_array),
        )
        seconds *= rows.verify_pipeline
        seconds += rows.verify_fixed
        draft_context = mean_context * rows.micro / rows.micro
        draft = np.maximum(
            np.interp(draft_context, rows.draft_grid_array, rows.draft_compute_array),
            np.interp(draft_context, rows.draft_grid_array, rows.draft_memory_array),
        )
        draft *= rows.draft_pipeline
        draft += rows.draft_fixed
        return round_seconds(seconds, draft, self.drafted_tokens)

    def _rows_for(self, decode_batch: int) -> _RoundRows:
        rows = self._round_rows.get(decode_batch)
        if rows is None:
            target, draft = self.target, self.draft
            verify = target.decode_rows(decode_batch, self.query_tokens)  # what verify_step_seconds caches
            micro = int(micro_batch(decode_batch, target.pipeline_parallel))
            drafting = draft.decode_rows(micro)
            rows = self._round_rows[decode_batch] = _RoundRows(
                verify_grid=target._tables.context_grid,
                verify_compute=verify.compute_list,
                verify_memory=verify.memory_list,
                verify_pipeline=target.pipeline_parallel,
                verify_fixed=verify.fixed_seconds,
                micro=micro,
                draft_grid=draft._tables.context_grid,
                draft_compute=drafting.compute_list,
                draft_memory=drafting.memory_list,
                draft_pipeline=draft.pipeline_parallel,
                draft_fixed=drafting.fixed_seconds,
                verify_grid_array=target._context_grid,
                verify_compute_array=verify.compute,
                verify_memory_array=verify.memory,
                draft_grid_array=draft._context_grid,
                draft_compute_array=drafting.compute,
                draft_memory_array=drafting.memory,
            )
        return rows

    def draft_step_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """One draft step inside the round over the target's micro-batch at the same mean context. The draft runs
        unpipelined (`speculative.draft_inputs`) on the micro-batch, as `speculative_round` prices it."""
        micro = int(micro_batch(decode_batch, self.target.pipeline_parallel))
        return self.draft.decode_step_seconds(micro, decode_context_tokens / decode_batch * micro)

    def draft_prefill_seconds(self, prefill_spans) -> float:
        """The draft's pass over the step's prompt pieces inside the round. Cached by the pieces: a stream's chunk
        boundaries repeat (same prompt lengths, budgets that depend on the batch only)."""
        key = tuple(prefill_spans)
        seconds = self._draft_prefill.get(key)
        if seconds is None:
            if len(self._draft_prefill) >= self.DRAFT_PREFILL_CACHE:
                self._draft_prefill.clear()  # a bound on the memory of a long-lived engine
            seconds = self._draft_prefill[key] = self.draft.mixed_seconds(0, 0, prefill_spans)
        return seconds


@dataclass(frozen=True, slots=True)
class _RoundRows:
    """`SpeculativeStepCost.decode_round_seconds`' rows for one batch: the target's verify rows and the draft's
    decode rows over their context grids (Python lists, and arrays for runs), their fixed parts and the draft's
    micro-batch."""

    verify_grid: list[float]
    verify_compute: list[float]
    verify_memory: list[float]
    verify_pipeline: int
    verify_fixed: float
    micro: int
    draft_grid: list[float]
    draft_compute: list[float]
    draft_memory: list[float]
    draft_pipeline: int
    draft_fixed: float
    verify_grid_array: np.ndarray
    verify_compute_array: np.ndarray
    verify_memory_array: np.ndarray
    draft_grid_array: np.ndarray
    draft_compute_array: np.ndarray
    draft_memory_array: np.ndarray


@dataclass(frozen=True, slots=True)
class _DecodeRows:
    """A decode batch's composed step over the context grid (`PhaseStep`'s rows: arrays for runs, lists for
    single steps), its fixed part, and the shortest such step at any context."""

    compute: np.ndarray
    memory: np.ndarray
    compute_list: list[float]
    memory_list: list[float]
    fixed_seconds: float
    shortest_seconds: float

    @classmethod
    def of(cls, step: PhaseStep, grid: np.ndarray) -> _DecodeRows:
        compute = np.broadcast_to(np.asarray(step.compute_row, dtype=float), grid.shape).copy()
        memory = np.broadcast_to(np.asarray(step.memory_row, dtype=float), grid.shape).copy()
        fixed = float(step.fixed_seconds)
        # The rows' minima bound every interpolated value from below, and the arithmetic after the
        # interpolation is monotone, so no step of this batch is shorter.
        shortest = float(step_seconds(compute.min(), memory.min(), fixed, step.pipeline_parallel))
        return cls(compute, memory, compute.tolist(), memory.tolist(), fixed, shortest)


def interp_one(x: float, xs: list[float], ys: list[float]) -> float:
    """`np.interp(x, xs, ys)` for one point, bit for bit: the same bracket (xs[j] <= x < xs[j + 1]), the same
    end values and the same slope * (x - xs[j]) + ys[j], without a numpy call's overhead."""
    j = bisect_right(xs, x) - 1
    if j < 0:
        return ys[0]
    if j >= len(xs) - 1:
        return ys[-1]
    if xs[j] == x:
        return ys[j]
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return slope * (x - xs[j]) + ys[j]


def interp_two(x: float, xs: list[float], ys: list[float], zs: list[float]) -> tuple[float, float]:
    """`interp_one` of two rows over the same grid, sharing the bracket search."""
    j = bisect_right(xs, x) - 1
    if j < 0:
        return ys[0], zs[0]
    if j >= len(xs) - 1:
        return ys[-1], zs[-1]
    if xs[j] == x:
        return ys[j], zs[j]
    width, offset = xs[j + 1] - xs[j], x - xs[j]
    return (ys[j + 1] - ys[j]) / width * offset + ys[j], (zs[j + 1] - zs[j]) / width * offset + zs[j]


def context_grid(arch: ModelArchitecture, max_tokens: int) -> np.ndarray:
    """Decode contexts to tabulate: log-spaced from 1 to `max_tokens`, plus every span edge of the model —
    its windows and DeepSeek-V3.2's top-k (per-sequence FLOPs and KV are piecewise linear in context with
    kinks only there)."""
    # Whole tokens: the KV terms round a context up to whole tokens, so they are linear between integers.
    grid = np.round(np.geomspace(1, max(max_tokens, 2), CONTEXT_GRID_POINTS))
    spans = {arch.sliding_window, arch.indexer_topk, *(layer.window_tokens for layer in arch.layer_pattern)}
    kinks = [float(span) for span in spans if span and 1 < span < max_tokens]
    return np.unique(np.concatenate([[0.0], grid, kinks]))
