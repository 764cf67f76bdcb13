"""Roofline timings: how long a step takes, and which resource sets that time.

A step on one GPU takes max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) — compute and
memory traffic overlap inside kernels — plus the communication that does not overlap
(`collectives`). Achieved rates are peak x efficiency (`efficiency.Efficiency`).
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

from planner.arrays import maximum, minimum


def compute_seconds(flops, peak_flops_per_second, efficiency):
    """Time to execute `flops` at `efficiency` x the dense peak."""
    return flops / (peak_flops_per_second * efficiency)


def shaped_compute_seconds(flops, peak_flops_per_second, phase_efficiency, ceiling_ratio, gemm_kernels, tail_seconds):
    """Compute time of a step by GEMM shape and GPU generation (`planner.physics.gemm_efficiency`): its FLOPs at
    the phase efficiency (stated for the reference GEMM ceiling) x this device's `ceiling_ratio`, capped at 1,
    plus the fixed `tail_seconds` of each of its `gemm_kernels` GEMM kernels. With ratio 1 and no tail it is
    `compute_seconds`."""
    efficiency = minimum(phase_efficiency * ceiling_ratio, 1.0)
    return flops / (peak_flops_per_second * efficiency) + gemm_kernels * tail_seconds


def memory_seconds(bytes_moved, bandwidth_bytes_per_second, efficiency):
    """Time to stream `bytes_moved` through HBM at `efficiency` x peak bandwidth."""
    return bytes_moved / (bandwidth_bytes_per_second * efficiency)


def expected_distinct_experts(num_experts, experts_per_token, tokens):
    """Expected experts a batch of `tokens` touches with uniform top-k routing: E(1 - (1 - k/E)^T)."""
    return num_experts * (1 - (1 - experts_per_token / num_experts) ** tokens)


# ---------------------------------------------------------------------------------------------


def decode_weight_read_bytes(
    stage_weight_bytes, stage_routed_expert_bytes, num_experts, experts_per_token, tokens_in_step
):
    """Weight bytes a decode step streams from HBM on one GPU: every resident weight once, except
    routed experts, of which only those the step's tokens are routed to are read."""
    if num_experts == 0:
        return stage_weight_bytes
    touched = expected_distinct_experts(num_experts, experts_per_token, tokens_in_step) / num_experts
    return stage_weight_bytes - stage_routed_expert_bytes * (1 - touched)


def ridge_point_flops_per_byte(peak_flops_per_second, bandwidth_bytes_per_second):
    """Arithmetic intensity above which a kernel is compute-bound on this device."""
    return peak_flops_per_second / bandwidth_bytes_per_second


def pipeline_step_seconds(
    compute_seconds, memory_seconds, collective_seconds, overhead_seconds, handoff_seconds, pipeline_parallel
):
    """One forward step through `pipeline_parallel` equally loaded stages, one after the other.

    Per stage: max(compute, memory) (they overlap inside kernels) + the collectives that do not overlap
    + the fixed launch overhead; times the stages, plus the hand-offs between them (all `pp - 1` of
    them, already summed in `handoff_seconds`). With one stage and no communication this is the plain
    roofline plus overhead, the form the calibration fits.
    """
    return (
        pipeline_parallel * (maximum(compute_seconds, memory_seconds) + collective_seconds + overhead_seconds)
        + handoff_seconds
    )
