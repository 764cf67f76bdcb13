"""Activation recomputation levels: which of a layer's saved tensors the backward rebuilds instead of keeping.

An `IntEnum`, so an array of levels (the sweep's frame) compares with the named levels elementwise. Formulas
compare with ==, never >=: op is not "more" than full.
"""

from __future__ import annotations

from enum import IntEnum

from planner.arrays import Number, minimum, where


class Recompute(IntEnum):
    NONE = 0  # every tensor the backward reads is kept
    SELECTIVE = 1  # Megatron-core --recompute-granularity selective with --recompute-modules
    FULL = 2  # whole layers: only each layer's input kept (Megatron-core full, uniform or block)
    OP = 3  # torchtitan op-level selective activation checkpointing (every second matmul recomputed)


# The scenario's `activation_checkpointing` names -> levels.
RECOMPUTE_LEVEL: dict[str, Recompute] = {level.name.lower(): level for level in Recompute}


def full_recompute_fraction(
    stage_layers, recompute_method: str = "uniform", recompute_num_layers: Number = 1, virtual_stages: Number = 1
):
    """Share of a stage's layers that full recomputation recomputes: all of them (uniform), or the first
    `recompute_num_layers` of each model chunk (block; Megatron-core `--recompute-method block`)."""
    if recompute_method != "block":
        return 1.0
    per_chunk = stage_layers / virtual_stages
    return minimum(recompute_num_layers, per_chunk) / per_chunk


def recomputed_forwards(recompute, recompute_fraction: Number = 1.0):
    """Extra forwards per layer that full recomputation runs: the share of layers it recomputes
    (`full_recompute_fraction`), 0 at every other level. What a micro-batch's GEMM passes, weight reads, FP8 casts
    and elementwise kernels repeat."""
    return where(recompute == Recompute.FULL, recompute_fraction, 0.0)
