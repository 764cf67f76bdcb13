"""Roofline timings: how long a step takes, and which resource sets that time.

A step on one GPU takes max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) — compute and
memory traffic overlap inside kernels — plus the communication that does not overlap. Achieved rates
are peak x efficiency; `Efficiency` holds the documented defaults a calibration replaces.
All functions broadcast over numpy arrays. FLOPs count 2 per multiply-add.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from planner.architecture import (
    ModelArchitecture,
    ParameterCounts,
    attention_score_flops_per_token,
    mean_attended_tokens,
    prefill_attention_flops,
)
from planner.arrays import maximum, minimum, where


class Efficiency(BaseModel):
    """Achieved / peak ratios. Defaults are typical of well-tuned serving and training stacks on
    datacenter GPUs (vLLM/TensorRT-LLM GEMMs reach 60-70 % of dense peak on large prefills; decode
    kernels stream weights at 75-85 % of HBM bandwidth; NCCL reaches ~70-80 % of link bandwidth;
    Megatron-style training sustains 40-55 % model FLOPs utilization before communication)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_compute: float = Field(default=0.60, gt=0, le=1)
    decode_compute: float = Field(default=0.50, gt=0, le=1)
    memory_bandwidth: float = Field(default=0.80, gt=0, le=1)
    communication: float = Field(default=0.75, gt=0, le=1)
    training_compute: float = Field(default=0.55, gt=0, le=1)
    host_link: float = Field(default=0.80, gt=0, le=1)
    # Fixed cost per layer per forward step: kernel launches, synchronisation, small ops that neither
    # FLOPs nor bytes capture. It is what makes batch-1 decode slower than its bandwidth roofline.
    layer_overhead_seconds: float = Field(default=20e-6, ge=0, le=1e-2)
    source: str = "documented defaults"


DEFAULT_EFFICIENCY = Efficiency()


def compute_seconds(flops, peak_flops_per_second, efficiency):
    """Time to execute `flops` at `efficiency` x the dense peak."""
    return flops / (peak_flops_per_second * efficiency)


def memory_seconds(bytes_moved, bandwidth_bytes_per_second, efficiency):
    """Time to stream `bytes_moved` through HBM at `efficiency` x peak bandwidth."""
    return bytes_moved / (bandwidth_bytes_per_second * efficiency)


def allreduce_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """One ring all-reduce of `message_bytes` over `participants` GPUs.

    Bandwidth term: each GPU sends and receives 2(n-1)/n of the message (Patarasuk & Yuan 2009;
    NCCL's "bus bandwidth" convention). Latency term: log2(n) link latencies, the tree/one-shot
    algorithms NCCL picks for small messages. Zero for one participant.
    """
    n = participants
    bandwidth = 2 * (n - 1) / n * message_bytes / (link_bytes_per_second * efficiency)
    latency = np.log2(np.maximum(n, 1)) * link_latency_seconds
    return where(n > 1, bandwidth + latency, 0.0)


def allgather_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """All-gather (or reduce-scatter) of a `message_bytes` result: (n-1)/n of it crosses each link."""
    n = participants
    bandwidth = (n - 1) / n * message_bytes / (link_bytes_per_second * efficiency)
    latency = np.log2(np.maximum(n, 1)) * link_latency_seconds
    return where(n > 1, bandwidth + latency, 0.0)


def p2p_seconds(message_bytes, link_bytes_per_second, link_latency_seconds, efficiency):
    """One point-to-point send (pipeline hand-off of activations)."""
    return message_bytes / (link_bytes_per_second * efficiency) + link_latency_seconds


def link_bandwidth(group_span_gpus, gpus_per_node, intra_node_bytes_per_second, inter_node_bytes_per_second):
    """Bandwidth a collective runs at: the fast interconnect while its group stays inside a node, the
    per-GPU network once it spans nodes (ranks are laid out innermost-first, so a group of stride k and
    size n spans k x n consecutive ranks)."""
    return where(group_span_gpus > gpus_per_node, minimum(intra_node_bytes_per_second, inter_node_bytes_per_second),
                 intra_node_bytes_per_second)


INTER_NODE_LATENCY_SECONDS = 10e-6  # InfiniBand/RoCE message latency, planning constant


def link_latency(group_span_gpus, gpus_per_node, intra_node_latency_seconds):
    return where(group_span_gpus > gpus_per_node, INTER_NODE_LATENCY_SECONDS, intra_node_latency_seconds)


def expected_distinct_experts(num_experts, experts_per_token, tokens):
    """Expected experts a batch of `tokens` touches with uniform top-k routing: E(1 - (1 - k/E)^T)."""
    return num_experts * (1 - (1 - experts_per_token / num_experts) ** tokens)


# ---------------------------------------------------------------------------------------------
# FLOPs of the inference phases (whole model, one replica)


def _layer_matmul_params_per_token(counts: ParameterCounts) -> float:
    """Linear-layer parameters one token multiplies through across all layers (active experts only)."""
    return counts.active - counts.embedding - counts.lm_head - counts.position_embedding - counts.final_norms


def head_flops_per_row(counts: ParameterCounts) -> float:
    head = counts.lm_head if counts.lm_head else counts.embedding
    return 2 * head


def prefill_flops(counts: ParameterCounts, arch: ModelArchitecture, prompt_tokens, sequences=1, new_tokens=None):
    """Prefill FLOPs for `sequences` prompts of `prompt_tokens` each, of which the last `new_tokens`
    are computed (the rest come from a prefix cache; default: all).

    2 x active layer parameters per computed token; causal attention of the computed tokens over
    the whole prefix (sum of 4*heads*head_dim*i over their positions); the lm_head for the last
    position of each sequence only (engines sample one token per sequence).
    """
    new_tokens = prompt_tokens if new_tokens is None else new_tokens
    cached = prompt_tokens - new_tokens
    attention = prefill_attention_flops(arch, prompt_tokens) - prefill_attention_flops(arch, cached)
    per_sequence = 2 * _layer_matmul_params_per_token(counts) * new_tokens + attention + head_flops_per_row(counts)
    return sequences * per_sequence


def decode_flops(counts: ParameterCounts, arch: ModelArchitecture, batch, context_tokens):
    """One decode step for `batch` sequences at `context_tokens` each: 2 x active parameters per new
    token (lm_head included) + attention over the cached context of every layer."""
    attended = mean_attended_tokens(arch, context_tokens)
    attention = arch.num_layers * attention_score_flops_per_token(arch, attended, "decode")
    return batch * (2 * _layer_matmul_params_per_token(counts) + head_flops_per_row(counts) + attention)


def decode_weight_read_bytes(stage_weight_bytes, stage_routed_expert_bytes, num_experts, experts_per_token,
                             tokens_in_step):
    """Weight bytes a decode step streams from HBM on one GPU: every resident weight once, except
    routed experts, of which only those the step's tokens are routed to are read."""
    if num_experts == 0:
        return stage_weight_bytes
    touched = expected_distinct_experts(num_experts, experts_per_token, tokens_in_step) / num_experts
    return stage_weight_bytes - stage_routed_expert_bytes * (1 - touched)


def ridge_point_flops_per_byte(peak_flops_per_second, bandwidth_bytes_per_second):
    """Arithmetic intensity above which a kernel is compute-bound on this device."""
    return peak_flops_per_second / bandwidth_bytes_per_second


__all__ = [
    "Efficiency",
    "DEFAULT_EFFICIENCY",
    "compute_seconds",
    "memory_seconds",
    "allreduce_seconds",
    "allgather_seconds",
    "p2p_seconds",
    "expected_distinct_experts",
    "prefill_flops",
    "decode_flops",
    "decode_weight_read_bytes",
    "head_flops_per_row",
    "ridge_point_flops_per_byte",
    "maximum",
    "minimum",
]
