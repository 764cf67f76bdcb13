"""Collectives and point-to-point transfers between GPUs, and the link each one runs over.

All functions broadcast over numpy arrays (DESIGN rule 4). Times are seconds; bandwidths bytes/s.
"""

from __future__ import annotations

import numpy as np

from planner.arrays import minimum, where


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
    return where(
        group_span_gpus > gpus_per_node,
        minimum(intra_node_bytes_per_second, inter_node_bytes_per_second),
        intra_node_bytes_per_second,
    )


INTER_NODE_LATENCY_SECONDS = 10e-6  # InfiniBand/RoCE message latency, planning constant


def link_latency(group_span_gpus, gpus_per_node, intra_node_latency_seconds):
    return where(group_span_gpus > gpus_per_node, INTER_NODE_LATENCY_SECONDS, intra_node_latency_seconds)
