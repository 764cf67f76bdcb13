"""The alpha-beta all-reduce model (planner.physics.collectives): each algorithm's time worked by hand, the
choice by message size and link, and broadcasting over arrays."""

from __future__ import annotations

import numpy as np
import pytest

from planner.physics import collectives as c

NVLINK = 450e9  # H100 NVLink 4, bytes/s per direction
NVLINK_ALPHA = 3e-6  # catalog per-step latency
PCIE = 64e9
PCIE_ALPHA = 10e-6
EFF = 0.75


def test_ring_by_hand():
    # n = 8, 16 MiB: 3.6 us + 14 x 3 us = 45.6 us; 2 x 7/8 x 16,777,216 = 29,360,128 B / (450e9 x 0.75 = 337.5e9)
    # = 86.993 us -> 132.593 us
    t = c.ring_allreduce_seconds(16 << 20, 8, NVLINK, NVLINK_ALPHA, EFF)
    assert t == pytest.approx(45.6e-6 + 86.993e-6, rel=1e-4)


def test_tree_by_hand():
    # NCCL's tree (tuning.cc): a chain inside each node, a tree across nodes: 2 ((n / nodes - 1) + log2(nodes)) steps.
    # n = 8 in one node: 4.4 us + 2 x 7 x 10 us = 144.4 us; 2 x 65,536 B / (64e9 x 0.75 = 48e9) = 2.7307 us
    t = c.tree_allreduce_seconds(65536, 8, PCIE, PCIE_ALPHA, EFF)
    assert t == pytest.approx(144.4e-6 + 2.7307e-6, rel=1e-4)
    # n = 64 on 8 nodes: 2 x (7 + 3) = 20 steps: 4.4 + 200 = 204.4 us + the same 2.7307 us
    t = c.tree_allreduce_seconds(65536, 64, PCIE, PCIE_ALPHA, EFF, nodes=8)
    assert t == pytest.approx(204.4e-6 + 2.7307e-6, rel=1e-4)
    # ... where a ring needs 2 x 63 steps: the tree wins across nodes, never inside one
    assert c.allreduce_algorithm(65536, 64, PCIE, PCIE_ALPHA, EFF, nodes=8) == "tree"
    assert c.allreduce_algorithm(65536, 8, PCIE, PCIE_ALPHA, EFF) == "ring"


def test_one_shot_by_hand():
    # n = 8, 8 KiB: 3.6 + 3 = 6.6 us; 7 x 8,192 = 57,344 B / (450e9 x 0.75 x 0.36 = 121.5e9) = 0.47196 us
    t = c.one_shot_allreduce_seconds(8192, 8, NVLINK, NVLINK_ALPHA, EFF)
    assert t == pytest.approx(6.6e-6 + 0.47196e-6, rel=1e-4)


def test_two_shot_by_hand():
    # n = 4, 2 MiB: 3.6 + 2 x 3 = 9.6 us; 2 x 3/4 x 2,097,152 = 3,145,728 B / 121.5e9 = 25.891 us -> 35.491 us
    t = c.two_shot_allreduce_seconds(2 << 20, 4, NVLINK, NVLINK_ALPHA, EFF)
    assert t == pytest.approx(9.6e-6 + 25.891e-6, rel=1e-4)


def test_peer_share_matches_the_published_slopes():
    # SGLang PR #2904, vLLM custom all-reduce on H100: +13.7 / +19.6 / +20.9 us for 1.5 MiB more at TP2/4/8;
    # bus bytes 1 / 1.5 / 1.75 x 1,572,864 -> 114.8, 120.4, 131.7 GB/s; mean 122.3 GB/s / 450 GB/s = 0.272
    bus = [1.0 * 1572864 / 13.7e-6, 1.5 * 1572864 / 19.6e-6, 1.75 * 1572864 / 20.9e-6]
    assert np.mean(bus) / NVLINK == pytest.approx(c.PEER_BANDWIDTH_SHARE * EFF, abs=0.005)


def test_small_messages_on_nvlink_take_one_shot_and_cost_a_few_microseconds():
    # A decode all-reduce of 16 tokens x 8192 x 2 B = 256 KiB... and of one token (16 KiB) at TP8 on NVLink.
    one_token = 8192 * 2
    assert c.allreduce_algorithm(one_token, 8, NVLINK, NVLINK_ALPHA, EFF, peer_access=True) == "one-shot"
    # 6.6 us + 7 x 16,384 / 121.5e9 = 0.944 us -> 7.544 us (ring would be 45.6 us + 0.085 us)
    assert c.allreduce_seconds(one_token, 8, NVLINK, NVLINK_ALPHA, EFF, True) == pytest.approx(7.544e-6, rel=1e-3)
    # Without peer access (NCCL alone: training, PCIe) the ring: 3.6 + 14 x 3 = 45.6 us + 1.75 x 16,384 / 337.5e9
    # (inside one node NCCL's tree is a chain: 4.4 + 42 us + 2 x 16,384 / 337.5e9 = 46.5 us)
    assert c.allreduce_algorithm(one_token, 8, NVLINK, NVLINK_ALPHA, EFF) == "ring"
    assert c.allreduce_seconds(one_token, 8, NVLINK, NVLINK_ALPHA, EFF) == pytest.approx(45.685e-6, rel=1e-3)


def test_choice_moves_to_two_shot_then_to_nccl_as_messages_grow():
    picks = [
        c.allreduce_algorithm(m, 8, NVLINK, NVLINK_ALPHA, EFF, peer_access=True)
        for m in (8 << 10, 256 << 10, 64 << 20, 1 << 30)
    ]
    # 256 KiB: one-shot 6.6 + 7 x 262,144 / 121.5e9 = 21.70 us; two-shot 9.6 + 1.75 x 262,144 / 121.5e9
    # = 13.38 us; tree 22.4 + 1.553 = 23.95 us. 64 MiB is beyond the 8 MiB peer buffer: ring
    # (45.6 + 347.97 us) beats tree (22.4 + 397.7 us).
    assert picks == ["one-shot", "two-shot", "ring", "ring"]
    assert c.allreduce_seconds(256 << 10, 8, NVLINK, NVLINK_ALPHA, EFF, True) == pytest.approx(13.376e-6, rel=1e-3)


def test_two_participants_never_take_two_shot():
    # n = 2: one-shot reads 1 x M and two-shot 2 x 1/2 x M = M too, but two-shot pays a second step; from about
    # 1 MiB NCCL's ring (9.6 us + M / 337.5e9) beats the custom kernel's share (6.6 us + M / 121.5e9): at 1 MiB
    # 9.6 + 3.107 = 12.71 us against 6.6 + 8.630 = 15.23 us.
    picks = [c.allreduce_algorithm(m, 2, NVLINK, NVLINK_ALPHA, EFF, True) for m in (1 << 10, 64 << 10, 1 << 20)]
    assert picks == ["one-shot", "one-shot", "ring"]
    assert c.allreduce_seconds(1 << 20, 2, NVLINK, NVLINK_ALPHA, EFF, True) == pytest.approx(12.707e-6, rel=1e-3)


def test_one_participant_costs_nothing_and_arrays_broadcast():
    assert c.allreduce_seconds(1 << 20, 1, NVLINK, NVLINK_ALPHA, EFF, True) == 0.0
    sizes = np.array([16384.0, 262144.0, 64 << 20, 16384.0])
    n = np.array([8, 8, 8, 1])
    peer = np.array([True, True, True, False])
    got = c.allreduce_seconds(sizes, n, NVLINK, NVLINK_ALPHA, EFF, peer)
    one_by_one = [
        c.allreduce_seconds(float(s), int(k), NVLINK, NVLINK_ALPHA, EFF, bool(p)) for s, k, p in zip(sizes, n, peer)
    ]
    assert got == pytest.approx(one_by_one)


def test_allgather_is_a_ring():
    # n = 4, 4 MiB: 3.6 + 3 x 3 = 12.6 us; 3/4 x 4,194,304 = 3,145,728 B / 337.5e9 = 9.3207 us
    t = c.allgather_seconds(4 << 20, 4, NVLINK, NVLINK_ALPHA, EFF)
    assert t == pytest.approx(12.6e-6 + 9.3207e-6, rel=1e-4)
    assert c.allgather_seconds(4 << 20, 1, NVLINK, NVLINK_ALPHA, EFF) == 0.0


def test_peer_access_needs_the_domain():
    assert c.link_peer_access(8, 8, True) is True
    assert c.link_peer_access(16, 8, True) is False
    assert c.link_peer_access(4, 8, False) is False
    assert list(c.link_peer_access(np.array([4, 16]), 8, True)) == [True, False]


def test_calibration_fits_alpha_and_beta_from_the_all_reduce_sizes():
    from planner.calibration.reference import Reference, fit_allreduce
    from planner.calibration_record import AllReduceMeasurement

    ref = Reference.from_catalog("h100-sxm")  # NVLink 450 GB/s, catalog alpha 3 us
    sizes = (64 << 10, 1 << 20, 16 << 20, 128 << 20, 512 << 20)
    # A device whose link takes 2 us per step and reaches 0.6 of 450 GB/s; NCCL (no peer access) at n = 8.
    # 512 MiB - 128 MiB = 402,653,184 B x 1.75 / 270e9 = 2.6098 ms of slope; 64 KiB by ring (in one node the tree
    # is a chain of 14 steps too, with a larger fixed cost): 3.6 + 14 x 2 = 31.6 us + 1.75 x 65,536 / 270e9 = 0.4248 us.
    measured = [
        AllReduceMeasurement(
            backend="nccl",
            world_size=8,
            message_bytes=m,
            seconds=float(c.allreduce_seconds(m, 8, 450e9, 2e-6, 0.6)),
            reps=5,
        )
        for m in sizes
    ]
    assert measured[0].seconds == pytest.approx(31.6e-6 + 0.4248e-6, rel=1e-3)
    fit = fit_allreduce(measured, ref, 0.75)
    assert fit.efficiency == pytest.approx(0.6, rel=1e-9)
    assert fit.latency_seconds == pytest.approx(2e-6, rel=1e-6)
    assert "alpha 2.00 us" in fit.note


NIC = 50e9  # one 400 Gb/s NIC per GPU (DGX/HGX H100 and B200)


def test_a_group_spanning_nodes_moves_its_data_over_every_members_nic():
    # FSDP over 16 GPUs on 2 nodes of 8: g = 16 / 2 = 8 members per node, 8 rings on 8 NICs, so
    # min(8 x 50 GB/s, 450 GB/s NVLink) = 400 GB/s per member (collectives.link_bandwidth)
    assert c.link_bandwidth(16, 8, NVLINK, NIC, participants=16) == pytest.approx(400e9)
    # all-gather of a 1 GB bf16 parameter buffer at efficiency 1, no latency: (16 - 1)/16 x 1e9 B / 400e9
    # = 2.34375 ms (+ NCCL's 3.6 us); priced at one NIC (the old rule) it read 8 times that, 18.75 ms
    t = c.allgather_seconds(1e9, 16, c.link_bandwidth(16, 8, NVLINK, NIC, participants=16), 0.0, 1.0)
    assert t == pytest.approx(3.6e-6 + 15 / 16 * 1e9 / 400e9)
    # data parallelism with TP 8 (stride 8): one member per node, one NIC
    assert c.link_bandwidth(32, 8, NVLINK, NIC, participants=4) == pytest.approx(NIC)
    # TP 2, DP 16 over 32 GPUs on 4 nodes: 16 / 4 = 4 members per node, 4 NICs = 200 GB/s
    assert c.link_bandwidth(32, 8, NVLINK, NIC, participants=16) == pytest.approx(200e9)
    # NVLink binds where the NICs together outrun it: 8 x 100 GB/s against 450 GB/s
    assert c.link_bandwidth(16, 8, NVLINK, 100e9, participants=16) == pytest.approx(NVLINK)
    # inside a node nothing changes; the default (one participant) is one GPU's NIC, as before
    assert c.link_bandwidth(8, 8, NVLINK, NIC, participants=8) == NVLINK
    assert c.link_bandwidth(16, 8, NVLINK, NIC) == NIC
    spans = c.link_bandwidth(np.array([8, 16, 32]), 8, NVLINK, NIC, participants=np.array([8, 16, 4]))
    assert list(spans) == pytest.approx([NVLINK, 400e9, NIC])


def test_published_multi_node_bus_bandwidth_is_the_nodes_nics_together():
    # NVIDIA measures 192 GB/s all-reduce busBW across DGX A100 nodes with 8 x 200 Gb/s IB (NVIDIA/nccl#812):
    # the model's bandwidth for 16 GPUs on 2 nodes is 8 x 25 GB/s = 200 GB/s (NVLink 3: 300 GB/s), 192 / 200 = 0.96
    # of it, not 192 / 25 = 7.7 times one NIC
    assert c.link_bandwidth(16, 8, 300e9, 25e9, participants=16) == pytest.approx(200e9)


def test_an_all_to_all_across_nodes_cannot_borrow_another_gpus_nic():
    # EP 16 on 2 nodes of 8: each GPU sends 1/16 of its message to each of the 15 others at once; 8/16 leaves over
    # its own NIC, 7/16 over NVLink: time = max(8/16 / 50e9, 7/16 / 450e9) x M = M / 100e9, which the ring
    # convention's 15/16 x M / bandwidth reads as 15 / (8 / 50e9) = 93.75 GB/s (one NIC, the old rule: 50 GB/s)
    bw = c.link_bandwidth(16, 8, NVLINK, NIC, participants=16, all_to_all=True)
    assert bw == pytest.approx(93.75e9)
    assert c.allgather_seconds(1e9, 16, bw, 0.0, 1.0) == pytest.approx(3.6e-6 + 1e9 * 8 / 16 / 50e9)
    # one member per node: every peer is off the node, one NIC; inside a node, NVLink
    assert c.link_bandwidth(64, 8, NVLINK, NIC, participants=8, all_to_all=True) == pytest.approx(NIC)
    assert c.link_bandwidth(8, 8, NVLINK, NIC, participants=8, all_to_all=True) == NVLINK


def test_every_caller_passes_its_group_members():
    # The links inference and training build (inference.inputs.hardware_link, training.step.group_link) on nodes
    # of 8 GPUs with 450 GB/s NVLink and a 50 GB/s NIC per GPU.
    from types import SimpleNamespace

    from planner.inference.inputs import hardware_link
    from planner.training.step import group_link

    serving = SimpleNamespace(
        gpus_per_node=8, link_bytes_per_second=NVLINK, inter_node_bytes_per_second=NIC, link_latency_seconds=3e-6
    )
    serving = hardware_link(16, serving, participants=16, all_to_all=True)  # EP 16 on 2 nodes: 93.75 GB/s
    assert serving.bytes_per_second == pytest.approx(93.75e9)
    training = SimpleNamespace(
        gpus_per_node=8,
        intra_node_bytes_per_second=NVLINK,
        inter_node_bytes_per_second=NIC,
        intra_node_latency_seconds=3e-6,
    )
    assert group_link(training, 16, 16, all_to_all=True).bytes_per_second == pytest.approx(93.75e9)
    assert group_link(training, 16, 16).bytes_per_second == pytest.approx(400e9)  # TP 16: 8 rings on 8 NICs
    assert group_link(training, 32).bytes_per_second == NIC  # a pipeline send, ring attention: one NIC
    assert group_link(training, 16, 16).nodes == 2
