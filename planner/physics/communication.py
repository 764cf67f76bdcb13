"""Communication of one step as collectives per layer: the one model inference, training, the traffic
simulation and the calibration all call, each with its own counts and message sizes.

A parallel scheme sends the same message a fixed number of times per layer; this module holds that rule once
and leaves the algorithms (alpha-beta per algorithm, the fastest one per message) to
`planner.physics.collectives`:

- tensor parallelism: all-reduces of the hidden states (Megatron-LM, Shoeybi et al. 2019, Sec. 3: two per
  layer in a forward pass; with sequence parallelism an all-gather + reduce-scatter of the same volume,
  Korthikanti et al. 2022 Sec. 4.2.2);
- expert parallelism: all-to-alls of each token's hidden state to its k experts and back (GShard, Lepikhin et
  al. 2020), (EP - 1)/EP of it leaving the GPU;
- pipeline parallelism: point-to-point sends of the activations between consecutive stages;
- context parallelism: ring attention's K/V exchange (Megatron-core CP);
- data parallelism and sharding: an all-reduce, reduce-scatter or all-gather of a GPU's gradients or
  parameter shards.

Every function broadcasts over numpy arrays (DESIGN rule 4). `efficiency` is the share of the link's bandwidth
a collective reaches (`Efficiency.communication`); times are seconds, messages bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Flag, Number, maximum, minimum, where
from planner.physics import collectives

# Compute slows down while a collective runs beside it: NCCL's kernels hold SMs and share HBM and the L2, so the
# GEMMs they overlap lose blocks to them (partial waves). Measured over GPT and LLaMA training workloads on A100,
# H100, MI250 and MI210 ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
# Learning: Performance and Power Implications", arXiv:2507.03114, 2025-07, abstract): overlapped compute is on
# average 18.9 % slower than alone (at most 40.0 %); sequential execution is on average 10.2 % slower than
# overlapped. Not a figure from any run Headroom replays.
OVERLAP_COMPUTE_SLOWDOWN = 0.189


@dataclass(frozen=True, slots=True)
class Link:
    """The link a group of GPUs communicates over: bandwidth per GPU and per-message latency."""

    bytes_per_second: Number
    latency_seconds: Number
    # All-reduces over this link may use custom peer-memory kernels (one-shot / two-shot): the runtime has them
    # and the group sits inside an NVLink-class domain. NCCL alone (training) has ring and tree only.
    peer_access: Flag = False
    nodes: Number = 1  # nodes the group spans (a tree all-reduce's shape)

    @classmethod
    def spanning(
        cls,
        group_span_gpus,
        gpus_per_node,
        intra_node_bytes_per_second,
        inter_node_bytes_per_second,
        intra_node_latency_seconds,
        peer_link: Flag = False,
        participants: Number = 1,
        all_to_all: Flag = False,
    ) -> Link:
        """A group of `participants` GPUs over `group_span_gpus` consecutive ranks: the interconnect while it
        stays inside a node, the network once it spans nodes, over as many NICs in parallel as the group has
        members in each node (`collectives.link_bandwidth`; `all_to_all` for expert dispatch and combine, whose
        cross-node share cannot borrow another GPU's NIC). `participants` 1 (the default): one GPU's NIC, the
        link of a point-to-point send or of a single ring of sends (pipeline hand-offs, ring attention). Peer
        access where `peer_link` (an NVLink-class interconnect whose runtime has the custom kernels) and the
        group stays inside its domain."""
        return cls(
            collectives.link_bandwidth(
                group_span_gpus,
                gpus_per_node,
                intra_node_bytes_per_second,
                inter_node_bytes_per_second,
                participants,
                all_to_all,
            ),
            collectives.link_latency(group_span_gpus, gpus_per_node, intra_node_latency_seconds),
            collectives.link_peer_access(group_span_gpus, gpus_per_node, peer_link),
            collectives.group_nodes(group_span_gpus, gpus_per_node),
        )


def hidden_state_message_bytes(tokens, hidden_size, bytes_per_element):
    """The hidden states of `tokens` tokens: what an all-reduce, an expert dispatch or a pipeline hand-off
    carries."""
    return tokens * hidden_size * bytes_per_element


def tensor_parallel_seconds(layers, collectives_per_layer, message_bytes, tensor_parallel, link: Link, efficiency):
    """`collectives_per_layer` all-reduces of `message_bytes` over the tensor group in each of `layers` layers, each
    by the fastest algorithm for its size on this link (`collectives.allreduce_seconds`); 0 at TP 1."""
    return (
        layers
        * collectives_per_layer
        * collectives.allreduce_seconds(
            message_bytes,
            tensor_parallel,
            link.bytes_per_second,
            link.latency_seconds,
            efficiency,
            link.peer_access,
            link.nodes,
        )
    )


def expert_all_to_all_seconds(
    moe_layers, all_to_alls_per_layer, message_bytes, expert_parallel, link: Link, efficiency
):
    """`all_to_alls_per_layer` all-to-alls of `message_bytes` (tokens x k x hidden) over the expert group in each
    of `moe_layers` MoE layers: (EP - 1)/EP of it leaves each GPU, NCCL's ring (`collectives.allgather_seconds`)."""
    return (
        moe_layers
        * all_to_alls_per_layer
        * collectives.allgather_seconds(
            message_bytes, expert_parallel, link.bytes_per_second, link.latency_seconds, efficiency
        )
    )


def context_parallel_seconds(layers, exchanges_per_layer, message_bytes, context_parallel, link: Link, efficiency):
    """Ring attention: `exchanges_per_layer` passes of every rank's K and V (`message_bytes` gathered per pass)
    around the context-parallel group in each of `layers` layers."""
    return (
        layers
        * exchanges_per_layer
        * collectives.allgather_seconds(
            message_bytes, context_parallel, link.bytes_per_second, link.latency_seconds, efficiency
        )
    )


def point_to_point_seconds(message_bytes, link: Link, efficiency):
    """One send of `message_bytes` over the link, one step (a KV cache handed from a prefill to a decode replica)."""
    return collectives.p2p_seconds(message_bytes, link.bytes_per_second, link.latency_seconds, efficiency)


def pipeline_p2p_seconds(sends, message_bytes, link: Link, efficiency):
    """`sends` point-to-point sends of `message_bytes` between consecutive pipeline stages, one step each."""
    return sends * point_to_point_seconds(message_bytes, link, efficiency)


def allreduce_seconds(message_bytes, group, link: Link, efficiency):
    """One all-reduce of `message_bytes` over `group` GPUs spanning `link.nodes` nodes: the fastest algorithm the
    link allows (ring or tree; one-shot / two-shot with peer access). Data-parallel gradients, and the calibration's
    measured all-reduces, are such single collectives."""
    return collectives.allreduce_seconds(
        message_bytes, group, link.bytes_per_second, link.latency_seconds, efficiency, link.peer_access, link.nodes
    )


def reduce_scatter_seconds(message_bytes, group, link: Link, efficiency):
    """A reduce-scatter (or all-gather) of a `message_bytes` buffer over `group` GPUs: (n - 1)/n crosses each link."""
    return collectives.allgather_seconds(message_bytes, group, link.bytes_per_second, link.latency_seconds, efficiency)


allgather_seconds = reduce_scatter_seconds  # the same ring, the other direction


def overlapped_exposed_seconds(compute_seconds, communication_seconds, slowdown=OVERLAP_COMPUTE_SLOWDOWN):
    """What `communication_seconds` of collectives launched beside `compute_seconds` of compute add to it: the
    compute that runs while they do (at most all of it) is `slowdown` slower (`OVERLAP_COMPUTE_SLOWDOWN`), and
    whatever communication outlasts the slowed compute waits on the critical path. 0 when there is nothing to
    overlap; never less than the communication's excess over the compute."""
    stretched = compute_seconds + slowdown * minimum(communication_seconds, compute_seconds)
    return maximum(stretched, communication_seconds) - compute_seconds


def node_deduplicated_dispatch_share(experts_per_token, nodes):
    """DeepEP's cross-node bytes as a share of an all-to-all's for one token's dispatch (or combine) over an expert
    group spanning `nodes` nodes: DeepEP sends a token to each remote node holding one of its k experts once over
    RDMA and forwards it to those experts over NVLink (github.com/deepseek-ai/DeepEP README, "normal kernels ...
    forwarding from NVLink to RDMA"; DeepSeek-V3 technical report Sec. 3.2.2). With the experts spread evenly and
    routing uniform, a token reaches (nodes - 1)(1 - (1 - 1/nodes)^k) remote nodes on average, where an all-to-all
    sends k (nodes - 1)/nodes copies across; 1 inside one node. DeepSeek-V3's node-limited routing (at most 4 nodes
    per token) can only lower it further: not counted."""
    nodes = maximum(nodes, 1)
    remote = (nodes - 1) * (1 - (1 - 1 / nodes) ** experts_per_token)
    copies = experts_per_token * (nodes - 1) / nodes
    return where(nodes > 1, remote / maximum(copies, 1e-30), 1.0)
