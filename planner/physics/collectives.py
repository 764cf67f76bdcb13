"""Collectives and point-to-point transfers between GPUs, and the link each one runs over.

A latency-bandwidth (alpha-beta) model per algorithm: time = a fixed kernel cost + steps x alpha +
bytes crossing each GPU's link / (link bandwidth x efficiency). alpha is the link's per-step latency (the
accelerator catalog's figure for the interconnect inside a node, `INTER_NODE_LATENCY_SECONDS` across nodes);
a calibration with two or more GPUs fits both alpha and the bandwidth efficiency
(`planner.calibration.reference.fit_allreduce`).

The catalog's per-step latencies sit where NCCL's own tuning model puts one step of its Simple protocol:
NVLink 3 us (NCCL 3.4 us), PCIe and the network 10 us (NCCL 5.7 and 9.6 us); NVIDIA/nccl@01afd20
src/graph/tuning.cc `hwLat`, whose `baseLat` (3.6 us ring, 4.4 us tree, LL protocol) gives the fixed kernel
costs below.

All-reduce algorithms (`ALLREDUCE_ALGORITHMS`), the fastest available one per message size:

- ring (NCCL): 2(n-1) steps; 2(n-1)/n of the message crosses each link (Patarasuk & Yuan 2009; the
  bus-bandwidth convention of nccl-tests PERFORMANCE.md);
- tree (NCCL's double binary tree, Sanders et al. 2009): 2 log2(n) steps; the whole message twice per link
  (NCCL tuning.cc converts a tree's bus bandwidth to algorithm bandwidth with a ratio of 0.5);
- one-shot (peer access): each rank reads the n-1 peers' buffers directly and reduces locally: one
  synchronisation step, (n-1) x the message over its link;
- two-shot (peer access): reduce-scatter then all-gather through peer memory: two steps, 2(n-1)/n of the
  message per link.

One-shot and two-shot are vLLM's custom all-reduce (csrc/custom_all_reduce.cuh cross_device_reduce_1stage /
_2stage; TensorRT-LLM and SGLang have the same pair): they need every GPU to map every other's memory, so
only inside an NVLink / NVSwitch / xGMI domain, for at most 8 GPUs and messages up to its 8 MiB buffer
(vllm/distributed/device_communicators/custom_all_reduce.py, max_size = 8192 * 1024). Their kernels move
medium messages at a fraction of what NCCL reaches (`PEER_BANDWIDTH_SHARE`).

All functions broadcast over numpy arrays (DESIGN rule 4). Times are seconds; bandwidths bytes/s.
"""

from __future__ import annotations

import math

import numpy as np

from planner.arrays import Flag, Number, ceil_div, maximum, minimum, where

# Fixed cost of one collective kernel beyond its steps (NCCL tuning.cc baseLat, LL protocol, us -> s).
RING_BASE_SECONDS = 3.6e-6
TREE_BASE_SECONDS = 4.4e-6
# The custom (peer-access) kernels start the same way (a flag handshake polled in device memory).
PEER_BASE_SECONDS = 3.6e-6
# What the one-shot / two-shot kernels reach of the bandwidth NCCL reaches (efficiency.communication, 0.75 of
# the link by default). SGLang PR #2904 measured vLLM's custom all-reduce on 8 x H100 SXM (NVLink 450 GB/s per
# direction), bf16, 0.5 -> 2 MiB: +13.7 us at TP2 (one-shot), +19.6 us at TP4 and +20.9 us at TP8 (two-shot)
# for the extra 1.5 MiB. Bus bandwidth: 1 x 1.5 MiB / 13.7 us = 115 GB/s, 1.5 x 1.5 MiB / 19.6 us = 120 GB/s,
# 1.75 x 1.5 MiB / 20.9 us = 132 GB/s; mean 122 GB/s = 0.27 of 450 GB/s = 0.36 x 0.75.
PEER_BANDWIDTH_SHARE = 0.36
PEER_MAX_MESSAGE_BYTES = 8 << 20  # vLLM CustomAllreduce max_size (8 MiB)
PEER_MAX_PARTICIPANTS = 8  # vLLM CustomAllreduce _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

ALLREDUCE_ALGORITHMS = ("ring", "tree", "one-shot", "two-shot")


def _log2(n):
    return math.log2(max(n, 1)) if isinstance(n, (int, float)) else np.log2(np.maximum(n, 1))


def _bandwidth_seconds(crossing_bytes, link_bytes_per_second, efficiency):
    return crossing_bytes / (link_bytes_per_second * efficiency)


def ring_allreduce_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """Ring all-reduce (reduce-scatter + all-gather around a ring): 2(n-1) steps, 2(n-1)/n of the message
    through each GPU's link."""
    n = participants
    return (
        RING_BASE_SECONDS
        + 2 * (n - 1) * link_latency_seconds
        + _bandwidth_seconds(2 * (n - 1) / n * message_bytes, link_bytes_per_second, efficiency)
    )


def tree_allreduce_seconds(
    message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency, nodes: Number = 1
):
    """Double-binary-tree all-reduce (reduce up, broadcast down): the tree spans the `nodes`, and inside each
    node the ranks form a chain, so a step count of 2 ((n / nodes - 1) + log2(nodes)) (NCCL tuning.cc's tree
    latency, intra-node chain plus inter-node tree); the whole message twice through each GPU's link. Inside
    one node it is a chain of 2 (n - 1) steps, never fewer than a ring's."""
    nodes = maximum(nodes, 1)
    return (
        TREE_BASE_SECONDS
        + 2 * (participants / nodes - 1 + _log2(nodes)) * link_latency_seconds
        + _bandwidth_seconds(2 * message_bytes, link_bytes_per_second, efficiency)
    )


def one_shot_allreduce_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """One-shot all-reduce through peer memory: one synchronisation step, then each GPU reads the n-1 peers'
    whole buffers (at the custom kernels' share of the bandwidth)."""
    n = participants
    return (
        PEER_BASE_SECONDS
        + link_latency_seconds
        + _bandwidth_seconds((n - 1) * message_bytes, link_bytes_per_second, efficiency * PEER_BANDWIDTH_SHARE)
    )


def two_shot_allreduce_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """Two-shot all-reduce through peer memory: reduce-scatter then all-gather, two synchronisation steps,
    2(n-1)/n of the message through each GPU's link (at the custom kernels' share of the bandwidth)."""
    n = participants
    return (
        PEER_BASE_SECONDS
        + 2 * link_latency_seconds
        + _bandwidth_seconds(2 * (n - 1) / n * message_bytes, link_bytes_per_second, efficiency * PEER_BANDWIDTH_SHARE)
    )


def peer_allreduce_available(message_bytes, participants, peer_access):
    """Whether the custom one-shot / two-shot kernels run: peer access (the group inside an NVLink-class
    domain), at most `PEER_MAX_PARTICIPANTS` GPUs and a message within their `PEER_MAX_MESSAGE_BYTES` buffer."""
    fits = (participants <= PEER_MAX_PARTICIPANTS) & (message_bytes <= PEER_MAX_MESSAGE_BYTES)
    return where(peer_access, fits, False)


def allreduce_algorithm_seconds(
    message_bytes,
    participants,
    link_bytes_per_second,
    link_latency_seconds,
    efficiency,
    peer_access: Flag = False,
    nodes: Number = 1,
) -> dict[str, Number]:
    """Each algorithm's time (`ALLREDUCE_ALGORITHMS` order); infinite where it is not available. `nodes`: the
    nodes the group spans (the tree's shape)."""
    args = (message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency)
    peer = peer_allreduce_available(message_bytes, participants, peer_access)
    return {
        "ring": ring_allreduce_seconds(*args),
        "tree": tree_allreduce_seconds(*args, nodes),
        "one-shot": where(peer, one_shot_allreduce_seconds(*args), math.inf),
        "two-shot": where(peer, two_shot_allreduce_seconds(*args), math.inf),
    }


def allreduce_seconds(
    message_bytes,
    participants,
    link_bytes_per_second,
    link_latency_seconds,
    efficiency,
    peer_access: Flag = False,
    nodes: Number = 1,
):
    """One all-reduce of `message_bytes` over `participants` GPUs on `nodes` nodes: the fastest available
    algorithm (`allreduce_algorithm_seconds`). `peer_access`: the group sits inside an NVLink / NVSwitch / xGMI
    domain and the runtime has custom peer-memory kernels (vLLM, SGLang, TensorRT-LLM); NCCL alone (training)
    has ring and tree only. Zero for one participant."""
    times = allreduce_algorithm_seconds(
        message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency, peer_access, nodes
    )
    fastest = times["ring"]
    for name in ALLREDUCE_ALGORITHMS[1:]:
        fastest = minimum(fastest, times[name])
    return where(participants > 1, fastest, 0.0)


def allreduce_algorithm(
    message_bytes,
    participants,
    link_bytes_per_second,
    link_latency_seconds,
    efficiency,
    peer_access: Flag = False,
    nodes: Number = 1,
) -> str:
    """The algorithm `allreduce_seconds` picks for one message (scalars; for the plan's explanation)."""
    times = allreduce_algorithm_seconds(
        message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency, peer_access, nodes
    )
    return min(ALLREDUCE_ALGORITHMS, key=lambda name: float(times[name]))


def allgather_seconds(message_bytes, participants, link_bytes_per_second, link_latency_seconds, efficiency):
    """All-gather (or reduce-scatter) of a `message_bytes` result, NCCL's ring (its only algorithm for these,
    tuning.cc): n-1 steps, (n-1)/n of it crosses each link. Zero for one participant."""
    n = participants
    ring = (
        RING_BASE_SECONDS
        + (n - 1) * link_latency_seconds
        + _bandwidth_seconds((n - 1) / n * message_bytes, link_bytes_per_second, efficiency)
    )
    return where(n > 1, ring, 0.0)


def p2p_seconds(message_bytes, link_bytes_per_second, link_latency_seconds, efficiency):
    """One point-to-point send (pipeline hand-off of activations): one step."""
    return message_bytes / (link_bytes_per_second * efficiency) + link_latency_seconds


def link_bandwidth(
    group_span_gpus,
    gpus_per_node,
    intra_node_bytes_per_second,
    inter_node_bytes_per_second,
    participants: Number = 1,
    all_to_all: Flag = False,
):
    """Bandwidth per member a collective runs at, in the convention of the functions above (the bytes crossing
    each GPU's link over it): the fast interconnect while its group stays inside a node; across nodes it
    depends on how many of the group's `participants` share each node, g = participants / nodes (ranks are
    laid out innermost-first, so a group of stride k and size n spans k x n consecutive ranks), each GPU with
    its own NIC of `inter_node_bytes_per_second` (8 x 400 Gb/s on DGX/HGX H100 and B200).

    - Ring (all-reduce, all-gather, reduce-scatter) and tree: NCCL builds one ring / tree per channel and puts
      the channels on different NICs, so each node's g members move the data across nodes over g NICs in
      parallel. A ring of n ranks on N nodes crosses each node boundary once: each rank sends its 2(n-1)/n x
      message, of which a node's NICs together carry that one share; split over g rings of message/g, each NIC
      carries 1/g of it and NVLink the rest. Bandwidth = min(g x NIC, NVLink) (the tree's intra-node chain
      moves its whole message over NVLink, the ring only (g-1)/g of it: the lower bound for both). g = 1
      (one member per node, e.g. data parallelism with TP 8) is one NIC. Check, bus bandwidth as nccl-tests
      PERFORMANCE.md defines it (2(n-1)/n x message / time, the link bandwidth of this convention): NVIDIA
      measures 192 GB/s multi-node all-reduce busBW on DGX A100 with 8 x 200 Gb/s (8 x 25 = 200 GB/s;
      NVIDIA/nccl#812, AddyLaddy 2023-03-31), and quotes 46-48 GB/s per 400 Gb/s NDR NIC for H100 nodes
      (NVIDIA/nccl-tests#290, 2025-03-03), i.e. ~370-385 GB/s busBW with 8 NICs, against one NIC's 50 GB/s.
    - All-to-all (`all_to_all`, expert dispatch and combine): every GPU sends a share 1/n of its message to
      each other member at once, so no NIC can take another's load: (n - g)/n of it leaves over its own NIC,
      (g - 1)/n goes over NVLink; the convention's (n-1)/n over the bandwidth then gives
      (n - 1) / max((n - g) / NIC, (g - 1) / NVLink).
    """
    nodes = group_nodes(group_span_gpus, gpus_per_node)
    members = maximum(participants / nodes, 1.0)
    ring = minimum(intra_node_bytes_per_second, members * inter_node_bytes_per_second)
    n = maximum(participants, 2)
    spread = maximum(n - 1, 1) / maximum(
        maximum(n - members, 1.0) / inter_node_bytes_per_second, (members - 1) / intra_node_bytes_per_second
    )
    across = minimum(intra_node_bytes_per_second, where(all_to_all, spread, ring))
    return where(group_span_gpus > gpus_per_node, across, intra_node_bytes_per_second)


INTER_NODE_LATENCY_SECONDS = 10e-6  # InfiniBand/RoCE message latency, planning constant


def group_nodes(group_span_gpus, gpus_per_node):
    """Nodes a group of consecutive ranks spans (at least one)."""
    return maximum(ceil_div(group_span_gpus, gpus_per_node), 1)


def link_latency(group_span_gpus, gpus_per_node, intra_node_latency_seconds):
    return where(group_span_gpus > gpus_per_node, INTER_NODE_LATENCY_SECONDS, intra_node_latency_seconds)


def link_peer_access(group_span_gpus, gpus_per_node, has_peer_link):
    """Whether a group's GPUs can map each other's memory: an NVLink-class interconnect (`has_peer_link`)
    and the group inside its domain."""
    return where(group_span_gpus > gpus_per_node, False, has_peer_link)


PEER_LINK_WORDS = ("NVLink", "xGMI", "Infinity Fabric")


def has_peer_link(interconnect_name: str | None) -> bool:
    """Whether an accelerator's interconnect lets GPUs map each other's memory for the custom all-reduce
    kernels: NVLink / NVSwitch (vLLM custom_all_reduce.py requires full NVLink beyond two GPUs) or AMD's
    xGMI / Infinity Fabric (vLLM's ROCm custom all-reduce); not PCIe, Ethernet or Thunderbolt."""
    return interconnect_name is not None and any(word in interconnect_name for word in PEER_LINK_WORDS)
