"""Roofline timings: how long a step takes, and which resource sets that time.

A kernel on one GPU takes max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth): its compute and memory
traffic overlap. A forward step is three groups of kernels that a serving engine launches one after another
on one stream (`kernel_groups_seconds`): the dense GEMMs (weights), the fused-MoE calls (routed experts) and
the token mixing (attention over the KV cache, recurrent state updates). Each group is its own roofline and the
groups add, so a large decode batch pays its compute-bound GEMMs *and* its bandwidth-bound attention, not the
larger of the two totals (the per-operator roofline of LLM-Viewer: Yuan et al. 2024, "LLM Inference Unveiled:
Survey and Roofline Model Insights", arXiv:2402.16363, Sec. 2). Then the communication that does not overlap
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


def context_free_groups(gemm_compute, gemm_memory, expert_compute, expert_memory):
    """The dense-GEMM and fused-MoE groups of a step, which do not depend on the context, folded for
    `kernel_groups_seconds`: (compute offset, memory offset, serial seconds) such that the step's kernels take
    max(mixing compute + compute offset, mixing memory + memory offset) + serial seconds. The groups run one
    after another, so the offsets are 0 and the serial time is each group's own roofline. A traffic simulation
    tabulates the mixing terms over contexts and adds these offsets to its rows, which keeps its interpolation
    exact (`step_cost.RooflineStepCost`)."""
    return 0.0, 0.0, maximum(gemm_compute, gemm_memory) + maximum(expert_compute, expert_memory)


def kernel_groups_seconds(gemm_compute, gemm_memory, expert_compute, expert_memory, mixing_compute, mixing_memory):
    """One stage's kernels of a forward step: each group's roofline (its FLOPs and bytes overlap), the groups
    one after another (see the module docstring)."""
    compute_offset, memory_offset, serial = context_free_groups(
        gemm_compute, gemm_memory, expert_compute, expert_memory
    )
    return maximum(mixing_compute + compute_offset, mixing_memory + memory_offset) + serial


def pipeline_step_seconds(kernel_seconds, collective_seconds, overhead_seconds, handoff_seconds, pipeline_parallel):
    """One forward step through `pipeline_parallel` equally loaded stages, one after the other.

    Per stage: its kernels (`kernel_groups_seconds`; a single kernel's max(compute, memory)) + the collectives
    that do not overlap + the fixed launch overhead; times the stages, plus the hand-offs between them (all
    `pp - 1` of them, already summed in `handoff_seconds`). With one stage, one kernel and no communication this
    is the plain roofline plus overhead, the form the calibration fits.
    """
    return pipeline_parallel * (kernel_seconds + collective_seconds + overhead_seconds) + handoff_seconds
