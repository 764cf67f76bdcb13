"""What one engine step of any mix costs on a replica: decode tokens for the running sequences plus prompt
chunks, as the traffic simulation (`serving_sim`) schedules them.

No second physics: every term is the static plan's own term function (`planner.inference.steps`,
`planner.physics.roofline`), evaluated once over the values a simulation can ask for and looked up per
step, because a simulation asks for tens of thousands of steps and each must cost microseconds:

- terms of the step's token count T (weights streamed, tensor-parallel all-reduces, MoE all-to-alls,
  pipeline hand-offs): exact, tabulated for every integer T up to the engine's token budget;
- the decode part, linear in the decoding sequences: per-sequence FLOPs and KV read over a grid of
  contexts that holds every sliding-window kink, so linear interpolation is exact;
- the prompt part: per-position cumulative FLOPs and KV written, exact for every integer position, so a
  chunk's [start, end) piece costs F(end) - F(start), as `physics.flops.prefill_flops` counts it.

A step with no prompt chunk equals `steps.decode_step` at the same micro-batch and mean context, and a
step with one whole prompt and no decodes equals `steps.prefill_step` (the tests hold both to 1e-9
relative for a lone prompt, 1e-5 for decode: the context grid is interpolated; the plan's prefill reads the weights once per chunk, the simulation once per step — the same).
Under speculative decoding, `SpeculativeStepCost` prices a step as a draft-and-verify round from the same
tables (the target over k + 1 query tokens per decoding sequence) and the draft network's own; a pure decode
round equals `speculative.speculative_round(...).round_seconds`.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.inference.steps import (
    decode_kv_read_bytes,
    decode_step_flops,
    decode_step_mixing_flops,
    host_work_overlapped,
    image_encoder_step_flops,
    launch_overhead_seconds,
    moe_overhead_seconds,
    prefill_kv_write_bytes,
    prefill_step_flops,
    prefill_step_mixing_flops,
    request_overhead_seconds,
    sampler_seconds,
    scheduler_seconds,
    stage_routed_expert_bytes,
    step_collective_seconds,
    step_expert_flops_per_token,
    step_handoff_seconds,
)
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import roofline
from planner.physics.efficiency import Efficiency
from planner.physics.gemm_efficiency import GEMMS_PER_LAYER, phase_compute_efficiency
from planner.physics.moe_efficiency import routed_expert_read_bytes

CONTEXT_GRID_POINTS = 96  # log-spaced decode contexts; kinks (windows) are added exactly


@dataclass(frozen=True, slots=True)
class StepTerms:
    """One step's per-stage terms (seconds) before `roofline.pipeline_step_seconds` combines them, and the
    engine's per-step scheduler and sampler time added after it (as `steps._step` does). `kernel_seconds` is the
    kernel groups one after another (`roofline.kernel_groups_seconds`); `compute_seconds` and `memory_seconds`
    what all the step's FLOPs and bytes need."""

    kernel_seconds: float
    compute_seconds: float
    memory_seconds: float
    collective_seconds: float
    overhead_seconds: float
    handoff_seconds: float
    scheduler_seconds: float
    sampler_seconds: float


@dataclass(frozen=True, slots=True)
class _ScalarTables:
    """`RooflineStepCost`'s tables as Python lists, for the one-step path (same numbers)."""

    context_grid: list[float]
    decode_flops_per_sequence: list[float]
    decode_mixing_flops_per_sequence: list[float]
    kv_read_bytes_per_sequence: list[float]
    prefill_flops_to: list[float]
    prefill_mixing_flops_to: list[float]
    kv_written_to: list[float]
    weight_bytes: list[float]
    expert_bytes: list[float]
    collective_seconds: list[float]
    handoff_seconds: list[float]


class RooflineStepCost:
    """`serving_sim.StepCost` from the plan's term functions for one scenario (see the module docstring).

    `max_step_tokens` bounds T (micro-batch plus prompt tokens in one step); `max_position_tokens` bounds a
    prompt position (a recomputed sequence prefills its prompt and what it had generated).
    """

    def __init__(
        self,
        arch: ModelArchitecture,
        counts: ParameterCounts,
        hw: HardwareInputs,
        efficiency: Efficiency,
        x: InferenceInputs,
        shape: ReplicaShape,
        stage_weight_bytes: float,
        max_step_tokens: int,
        max_position_tokens: int,
    ) -> None:
        tp, pp, ep = int(x.tensor_parallel), int(x.pipeline_parallel), int(x.expert_parallel)
        self.pipeline_parallel = pp
        self._vocab_size = arch.vocab_size
        self.request_overhead_seconds = float(request_overhead_seconds(efficiency))
        self._peak = hw.peak_flops_per_second
        self._bandwidth = hw.bandwidth_bytes_per_second
        self._efficiency = efficiency
        self._host_work_overlapped = host_work_overlapped(x)
        self._rows: dict[int, _DecodeRows] = {}
        self._verify_rows: dict[tuple[int, int], _DecodeRows] = {}

        tokens = np.arange(max_step_tokens + 1, dtype=float)
        routed_bytes = stage_routed_expert_bytes(counts, arch, tp, pp, ep, x.linear_bytes)
        weight_bytes = roofline.decode_weight_read_bytes(
            stage_weight_bytes, routed_bytes, arch.num_experts, arch.experts_per_token, tokens
        )
        self._weight_bytes = np.broadcast_to(np.asarray(weight_bytes, dtype=float), tokens.shape).copy()
        # Routed experts (steps.kernel_groups' expert group): the expert weights a step of T tokens
        # streams at the fused-MoE bandwidth, and the expert FLOPs per token at the fused-MoE rate.
        expert_bytes = routed_expert_read_bytes(routed_bytes, arch.num_experts, arch.experts_per_token, tokens)
        self._expert_bytes = np.broadcast_to(np.asarray(expert_bytes, dtype=float), tokens.shape).copy()
        self._expert_flops_per_token = float(step_expert_flops_per_token(counts, arch, tp, pp))
        self._expert_efficiency = float(
            phase_compute_efficiency(efficiency.moe_expert_compute, hw.expert_ceiling_ratio)
        )
        collectives = step_collective_seconds(arch, x, shape, tokens, efficiency)
        self._collective_seconds = np.broadcast_to(np.asarray(collectives, dtype=float), tokens.shape).copy()
        self._handoff_seconds = np.broadcast_to(
            np.asarray(step_handoff_seconds(arch, x, shape, tokens, efficiency), dtype=float), tokens.shape
        ).copy()
        self._overhead_seconds = float(
            launch_overhead_seconds(shape.stage_layers, efficiency) + moe_overhead_seconds(arch, pp, hw, efficiency)
        )
        # Compute by GEMM ceiling and kernel tail (steps.step_compute_seconds): the ceiling ratio scales the
        # phase efficiencies; one pass through the stage's layers pays every GEMM kernel's fixed time once.
        self._prefill_efficiency = float(phase_compute_efficiency(efficiency.prefill_compute, hw.gemm_ceiling_ratio))
        self._decode_efficiency = float(phase_compute_efficiency(efficiency.decode_compute, hw.gemm_ceiling_ratio))
        # attention's math in the KV cache's format (steps.kernel_groups)
        self._attention_peak = hw.attention_peak_flops_per_second
        self._prefill_attention_efficiency = float(
            phase_compute_efficiency(efficiency.prefill_compute, hw.attention_ceiling_ratio)
        )
        self._decode_attention_efficiency = float(
            phase_compute_efficiency(efficiency.decode_compute, hw.attention_ceiling_ratio)
        )
        self._kernel_tail_seconds = float(shape.stage_layers * GEMMS_PER_LAYER * hw.gemm_tail_seconds)

        self._context_grid = context_grid(arch, max_position_tokens)
        self._decode_flops_per_sequence = np.asarray(
            decode_step_flops(counts, arch, 1, self._context_grid, tp, pp), dtype=float
        )
        # the attention and state-update part (its own kernel group); the rest, the GEMMs', is the same at
        # every context
        self._decode_mixing_flops_per_sequence = np.broadcast_to(
            np.asarray(decode_step_mixing_flops(arch, 1, self._context_grid, tp, pp), dtype=float),
            self._context_grid.shape,
        ).copy()
        self._decode_gemm_flops_per_token = float(
            self._decode_flops_per_sequence[0] - self._decode_mixing_flops_per_sequence[0]
        )
        self._kv_read_bytes_per_sequence = np.asarray(
            decode_kv_read_bytes(
                arch, tp, pp, 1, self._context_grid, x.kv_bytes, x.honor_sliding_window, x.activation_bytes
            ),
            dtype=float,
        )

        positions = np.arange(max_position_tokens + 1, dtype=float)
        # prefill_step_flops(L, L, 1) = whole prompt of L tokens; a piece [s, e) is F(e) - F(s) + F(0)
        # (the lm_head of its last position, which the difference cancels).
        self._prefill_flops_to = np.asarray(prefill_step_flops(counts, arch, positions, positions, 1, tp, pp), float)
        # A prompt's images are encoded with its first piece: every position from 1 on carries the encoder's
        # FLOPs, so only a piece that starts at 0 pays them (F(e) - F(0) + F(0)).
        self._prefill_flops_to[1:] += image_encoder_step_flops(x.image_encoder_flops, 1, tp, pp)
        # the attention and state-update part of F (M(0) = 0): a piece's mixing FLOPs are M(e) - M(s)
        self._prefill_mixing_flops_to = np.broadcast_to(
            np.asarray(prefill_step_mixing_flops(arch, positions, positions, 1, tp, pp), dtype=float), positions.shape
        ).copy()
        self._kv_written_to = np.asarray(
            prefill_kv_write_bytes(
                arch, tp, pp, 1, positions, x.kv_bytes, 1, x.honor_sliding_window, x.activation_bytes
            ),
            dtype=float,
        )
        self._scalar_tables = _ScalarTables(
            context_grid=self._context_grid.tolist(),
            decode_flops_per_sequence=self._decode_flops_per_sequence.tolist(),
            decode_mixing_flops_per_sequence=self._decode_mixing_flops_per_sequence.tolist(),
            kv_read_bytes_per_sequence=self._kv_read_bytes_per_sequence.tolist(),
            prefill_flops_to=self._prefill_flops_to.tolist(),
            prefill_mixing_flops_to=self._prefill_mixing_flops_to.tolist(),
            kv_written_to=self._kv_written_to.tolist(),
            weight_bytes=self._weight_bytes.tolist(),
            expert_bytes=self._expert_bytes.tolist(),
            collective_seconds=self._collective_seconds.tolist(),
            handoff_seconds=self._handoff_seconds.tolist(),
        )

    @property
    def max_step_tokens(self) -> int:
        return len(self._weight_bytes) - 1

    @property
    def max_position_tokens(self) -> int:
        return len(self._prefill_flops_to) - 1

    # ------------------------------------------------------------------------------------------ terms

    def terms(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans=(), query_tokens: int = 1
    ) -> StepTerms:
        """A step's per-stage terms: `decode_batch` sequences with `decode_context_tokens` tokens of context
        in all, and prompt pieces [start, end) (positions in their prompts). `query_tokens` > 1: each decoding
        sequence runs that many positions (a speculative verify step, as `steps.decode_step(query_tokens=...)`:
        compute, expert reads, messages and sampling scale with it, the KV read does not)."""
        return StepTerms(*self._term_values(decode_batch, decode_context_tokens, prefill_spans, query_tokens))

    def _term_values(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans, query_tokens: int = 1
    ) -> tuple[float, ...]:
        """`terms` as plain floats in `StepTerms`' order: a simulation asks for one per prompt-carrying step,
        so the tables are read as Python lists (numpy scalars cost more than the arithmetic)."""
        t = self._scalar_tables
        micro = -(-decode_batch // self.pipeline_parallel)
        decode_tokens = micro * query_tokens
        prefill_tokens = sum(end - start for start, end in prefill_spans)
        step_tokens = decode_tokens + prefill_tokens
        if step_tokens > self.max_step_tokens:
            raise ValueError(f"a step of {step_tokens} tokens exceeds the table's {self.max_step_tokens}")
        decode_flops = decode_mixing = decode_kv_bytes = 0.0
        if decode_batch:
            mean_context = decode_context_tokens / decode_batch
            decode_flops = decode_tokens * interp_one(mean_context, t.context_grid, t.decode_flops_per_sequence)
            decode_mixing = decode_tokens * interp_one(mean_context, t.context_grid, t.decode_mixing_flops_per_sequence)
            decode_kv_bytes = micro * interp_one(mean_context, t.context_grid, t.kv_read_bytes_per_sequence)
        prefill_flops = prefill_mixing = kv_written = 0.0
        flops_to, mixing_to, kv_to = t.prefill_flops_to, t.prefill_mixing_flops_to, t.kv_written_to
        for start, end in prefill_spans:
            prefill_flops += flops_to[end] - flops_to[start] + flops_to[0]
            prefill_mixing += mixing_to[end] - mixing_to[start]
            kv_written += kv_to[end] - kv_to[start]
        e = self._efficiency
        per_token = self._expert_flops_per_token
        decode_expert_flops = decode_tokens * per_token if decode_batch else 0.0
        prefill_expert_flops = prefill_tokens * per_token
        # the kernel groups of steps.kernel_groups, each phase's FLOPs at its efficiency
        gemm_compute = (
            roofline.compute_seconds(
                prefill_flops - prefill_expert_flops - prefill_mixing, self._peak, self._prefill_efficiency
            )
            + roofline.compute_seconds(
                decode_flops - decode_expert_flops - decode_mixing, self._peak, self._decode_efficiency
            )
            + self._kernel_tail_seconds
        )
        expert_compute = roofline.compute_seconds(
            prefill_expert_flops + decode_expert_flops, self._peak, self._expert_efficiency
        )
        mixing_compute = roofline.compute_seconds(
            prefill_mixing, self._attention_peak, self._prefill_attention_efficiency
        ) + roofline.compute_seconds(decode_mixing, self._attention_peak, self._decode_attention_efficiency)
        expert_bytes = t.expert_bytes[step_tokens]
        gemm_memory = roofline.memory_seconds(
            t.weight_bytes[step_tokens] - expert_bytes, self._bandwidth, e.memory_bandwidth
        )
        expert_memory = roofline.memory_seconds(expert_bytes, self._bandwidth, e.moe_expert_bandwidth)
        mixing_memory = roofline.memory_seconds(decode_kv_bytes + kv_written, self._bandwidth, e.memory_bandwidth)
        kernels = roofline.kernel_groups_seconds(
            gemm_compute, gemm_memory, expert_compute, expert_memory, mixing_compute, mixing_memory
        )
        sequences = micro + len(prefill_spans)  # every scheduled sequence is sampled (partial prefills too)
        sampled = decode_tokens + len(prefill_spans)  # a verify step samples every query position
        return (
            float(kernels),
            float(gemm_compute + expert_compute + mixing_compute),
            float(gemm_memory + expert_memory + mixing_memory),
            t.collective_seconds[step_tokens],
            self._overhead_seconds,
            t.handoff_seconds[step_tokens],
            float(scheduler_seconds(sequences, e, self._host_work_overlapped)),
            float(sampler_seconds(sampled, self._vocab_size, e)),
        )

    # ------------------------------------------------------------------------------ StepCost protocol

    def mixed_seconds(
        self, decode_batch: int, decode_context_tokens: float, prefill_spans, query_tokens: int = 1
    ) -> float:
        kernels, _, _, collective, overhead, handoff, scheduler, sampler = self._term_values(
            decode_batch, decode_context_tokens, prefill_spans, query_tokens
        )
        step = roofline.pipeline_step_seconds(kernels, collective, overhead, handoff, self.pipeline_parallel)
        return float(step + scheduler + sampler)

    def decode_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """Pure decode steps of the same batch at each of the given context sums (a run, vectorised)."""
        rows = self._decode_rows(decode_batch)
        mean_context = np.asarray(decode_context_tokens) / decode_batch  # float64, as float(sum) / batch
        step = np.interp(mean_context, self._context_grid, rows.compute)
        # pp x max(mixing compute + offset, mixing memory + offset) + fixed, in place: a run is short, so
        # allocations cost more than the math.
        np.maximum(step, np.interp(mean_context, self._context_grid, rows.memory), out=step)
        if self.pipeline_parallel != 1:
            step *= self.pipeline_parallel
        step += rows.fixed_seconds
        return step

    def decode_step_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """One pure decode step: `decode_seconds` of a single context sum, bit for bit, in Python floats
        (cheaper than a numpy call for the few steps of a short run)."""
        rows = self._decode_rows(decode_batch)
        mean_context = decode_context_tokens / decode_batch
        compute, memory = interp_two(
            mean_context, self._scalar_tables.context_grid, rows.compute_list, rows.memory_list
        )
        return max(compute, memory) * self.pipeline_parallel + rows.fixed_seconds

    def shortest_decode_seconds(self, decode_batch: int) -> float:
        """No pure decode step of this batch is shorter, at any context."""
        return self._decode_rows(decode_batch).shortest_seconds

    def _decode_rows(self, decode_batch: int) -> _DecodeRows:
        """A decode step of this batch over the context grid: the attention group's compute and memory seconds
        with the GEMM and expert groups' offsets added (`roofline.context_free_groups`), and the rest of the step
        (pp x those groups' serial time, pp x (collectives + overhead) + hand-offs, the scheduler and sampler),
        cached per batch: a run then costs two interpolations."""
        rows = self._rows.get(decode_batch)
        if rows is None:
            rows = self._rows[decode_batch] = self._rows_of(decode_batch, 1)
        return rows

    def verify_step_seconds(self, decode_batch: int, decode_context_tokens: float, query_tokens: int) -> float:
        """A pure speculative verify step (`query_tokens` positions per sequence): `mixed_seconds(decode_batch,
        decode_context_tokens, [], query_tokens)` through rows cached per batch, as `decode_step_seconds`."""
        rows = self._verify_rows.get((decode_batch, query_tokens))
        if rows is None:
            rows = self._verify_rows[decode_batch, query_tokens] = self._rows_of(decode_batch, query_tokens)
        compute, memory = interp_two(
            decode_context_tokens / decode_batch, self._scalar_tables.context_grid, rows.compute_list, rows.memory_list
        )
        return max(compute, memory) * self.pipeline_parallel + rows.fixed_seconds

    def _rows_of(self, decode_batch: int, query_tokens: int) -> _DecodeRows:
        """`_decode_rows` for `query_tokens` positions per sequence (compute, expert reads, messages and
        sampling scale with them, the KV read does not: `steps.decode_step(query_tokens=...)`)."""
        pp = self.pipeline_parallel
        micro = -(-decode_batch // pp)
        tokens = micro * query_tokens
        e = self._efficiency
        expert_flops = tokens * self._expert_flops_per_token
        # The kernel groups (steps.kernel_groups): the GEMMs' and the experts' do not depend on the context, so
        # they fold into offsets on the token-mixing rows and a serial time (roofline.context_free_groups);
        # adding constants to the rows keeps their interpolation exact.
        gemm_compute = (
            roofline.compute_seconds(
                tokens * self._decode_gemm_flops_per_token - expert_flops, self._peak, self._decode_efficiency
            )
            + self._kernel_tail_seconds
        )
        expert_bytes = self._expert_bytes[tokens]
        gemm_memory = roofline.memory_seconds(
            self._weight_bytes[tokens] - expert_bytes, self._bandwidth, e.memory_bandwidth
        )
        expert_compute = roofline.compute_seconds(expert_flops, self._peak, self._expert_efficiency)
        expert_memory = roofline.memory_seconds(expert_bytes, self._bandwidth, e.moe_expert_bandwidth)
        compute_offset, memory_offset, serial = roofline.context_free_groups(
            gemm_compute, gemm_memory, expert_compute, expert_memory
        )
        compute_row = (
            roofline.compute_seconds(
                tokens * self._decode_mixing_flops_per_sequence,
                self._attention_peak,
                self._decode_attention_efficiency,
            )
            + compute_offset
        )
        memory_row = (
            roofline.memory_seconds(micro * self._kv_read_bytes_per_sequence, self._bandwidth, e.memory_bandwidth)
            + memory_offset
        )
        # pipeline_step_seconds with no kernels is exactly its terms beyond them.
        fixed = float(
            pp * serial
            + roofline.pipeline_step_seconds(
                0.0,
                self._collective_seconds[tokens],
                self._overhead_seconds,
                self._handoff_seconds[tokens],
                pp,
            )
            + scheduler_seconds(micro, e, self._host_work_overlapped)
            + sampler_seconds(tokens, self._vocab_size, e)
        )
        # The rows' minima bound every interpolated value from below, and the arithmetic after the
        # interpolation is monotone, so no step of this batch is shorter.
        shortest = float(pp * max(compute_row.min(), memory_row.min()) + fixed)
        return _DecodeRows(compute_row, memory_row, compute_row.tolist(), memory_row.tolist(), fixed, shortest)


class SpeculativeStepCost:
    """An engine step under speculative decoding: a draft-and-verify round for the decoding sequences plus the
    step's prompt chunks (`serving_sim` runs one per step). No new terms: the target's part is `RooflineStepCost`
    with k + 1 query tokens per decoding sequence (`steps.decode_step(query_tokens=k + 1)`), the draft's part k
    of the draft network's own decode steps (`speculative.draft_seconds`: the round pays the scheduler once)
    and, for a step's prompt chunks, the draft's pass over them (the static plan's `draft_prefill_seconds`).
    A round with no prompt chunk equals `speculative.speculative_round(...).round_seconds` at the same
    micro-batch and context."""

    DRAFT_PREFILL_CACHE = 1 << 16  # at most this many steps' draft prefill times are kept

    def __init__(self, target: RooflineStepCost, draft: RooflineStepCost, drafted_tokens: int) -> None:
        self.target = target
        self.draft = draft
        self.drafted_tokens = int(drafted_tokens)
        self.query_tokens = self.drafted_tokens + 1
        self.request_overhead_seconds = target.request_overhead_seconds
        self._efficiency = target._efficiency
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
            seconds += self.drafted_tokens * self.draft_step_seconds(decode_batch, decode_context_tokens)
        if prefill_spans:
            seconds += self.draft_prefill_seconds(prefill_spans)
        return seconds

    def decode_round_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """A round with no prompt chunk (the simulation's most frequent step): the target's
        `verify_step_seconds` plus k `draft_step_seconds`, the same arithmetic in the same order (bit for bit),
        through rows cached per batch, so a round costs two interpolations and no method calls."""
        rows = self._round_rows.get(decode_batch)
        if rows is None:
            rows = self._round_rows[decode_batch] = self._round_rows_of(decode_batch)
        mean_context = decode_context_tokens / decode_batch
        compute, memory = interp_two(mean_context, rows.verify_grid, rows.verify_compute, rows.verify_memory)
        seconds = max(compute, memory) * rows.verify_pipeline + rows.verify_fixed
        compute, memory = interp_two(
            mean_context * rows.micro / rows.micro, rows.draft_grid, rows.draft_compute, rows.draft_memory
        )
        draft = max(compute, memory) * rows.draft_pipeline + rows.draft_fixed - rows.draft_scheduler
        return seconds + self.drafted_tokens * draft

    def decode_rounds_seconds(self, decode_batch: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """`decode_round_seconds` at each of the given context sums (a run of rounds of the same batch,
        vectorised): np.interp is `interp_two` bit for bit, and the arithmetic after it the same."""
        rows = self._round_rows.get(decode_batch)
        if rows is None:
            rows = self._round_rows[decode_batch] = self._round_rows_of(decode_batch)
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
        draft -= rows.draft_scheduler
        return seconds + self.drafted_tokens * draft

    def _round_rows_of(self, decode_batch: int) -> _RoundRows:
        target, draft = self.target, self.draft
        verify = target._rows_of(decode_batch, self.query_tokens)  # what verify_step_seconds caches
        micro = -(-decode_batch // target.pipeline_parallel)
        drafting = draft._decode_rows(micro)
        return _RoundRows(
            verify_grid=target._scalar_tables.context_grid,
            verify_compute=verify.compute_list,
            verify_memory=verify.memory_list,
            verify_pipeline=target.pipeline_parallel,
            verify_fixed=verify.fixed_seconds,
            micro=micro,
            draft_grid=draft._scalar_tables.context_grid,
            draft_compute=drafting.compute_list,
            draft_memory=drafting.memory_list,
            draft_pipeline=draft.pipeline_parallel,
            draft_fixed=drafting.fixed_seconds,
            draft_scheduler=float(scheduler_seconds(micro, self._efficiency, target._host_work_overlapped)),
            verify_grid_array=target._context_grid,
            verify_compute_array=verify.compute,
            verify_memory_array=verify.memory,
            draft_grid_array=draft._context_grid,
            draft_compute_array=drafting.compute,
            draft_memory_array=drafting.memory,
        )

    def draft_step_seconds(self, decode_batch: int, decode_context_tokens: float) -> float:
        """One draft step over the target's micro-batch at the same mean context, less the engine's scheduling
        (`speculative.draft_seconds`). The draft runs unpipelined (`speculative.draft_inputs`) on the micro-batch,
        as `speculative_round` prices it."""
        micro = -(-decode_batch // self.target.pipeline_parallel)
        step = self.draft.decode_step_seconds(micro, decode_context_tokens / decode_batch * micro)
        return step - float(scheduler_seconds(micro, self._efficiency, self.target._host_work_overlapped))

    def draft_prefill_seconds(self, prefill_spans) -> float:
        """The draft's pass over the step's prompt pieces, less the engine's scheduling. Cached by the pieces: a
        stream's chunk boundaries repeat (same prompt lengths, budgets that depend on the batch only)."""
        key = tuple(prefill_spans)
        seconds = self._draft_prefill.get(key)
        if seconds is None:
            if len(self._draft_prefill) >= self.DRAFT_PREFILL_CACHE:
                self._draft_prefill.clear()  # a bound on the memory of a long-lived engine
            step = self.draft.mixed_seconds(0, 0, prefill_spans)
            seconds = self._draft_prefill[key] = step - float(
                scheduler_seconds(len(prefill_spans), self._efficiency, self.target._host_work_overlapped)
            )
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
    draft_scheduler: float
    verify_grid_array: np.ndarray
    verify_compute_array: np.ndarray
    verify_memory_array: np.ndarray
    draft_grid_array: np.ndarray
    draft_compute_array: np.ndarray
    draft_memory_array: np.ndarray


@dataclass(frozen=True, slots=True)
class _DecodeRows:
    """A decode batch's step terms over the context grid (arrays for runs, lists for single steps)."""

    compute: np.ndarray
    memory: np.ndarray
    compute_list: list[float]
    memory_list: list[float]
    fixed_seconds: float
    shortest_seconds: float


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
