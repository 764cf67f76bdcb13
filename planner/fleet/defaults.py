"""The real-world figures a fleet plan uses when its scenario leaves a field empty, each with its source (or
labelled ASSUMED, and then named in the answer's assumptions)."""

from __future__ import annotations

from planner.inference.workload import POOL_TIER_DEFAULTS

# Where a new replica's weights load from: one local PCIe 4.0 x4 NVMe drive, the SSD tier of the prefix pool
# (planner.inference.workload.POOL_TIER_DEFAULTS: 6.5 GB/s sequential read, cited there). Weights fetched over the
# network (object storage, a model registry) load slower; set autoscaling.storage_bytes_per_second.
STORAGE_BYTES_PER_SECOND = POOL_TIER_DEFAULTS["ssd"][1]
STORAGE_SOURCE = "one local PCIe 4.0 NVMe drive at 6.5 GB/s (the SSD tier of planner.inference.workload)"

# The engine's start-up after its weights are read: vLLM V1 with a warm torch.compile cache, a small model on one
# GPU: "init engine (profile, create kv cache, warmup model) took 34.11 seconds" and the first response 59 s after
# the pod started, weights read in 0.9 s (vllm-project/vllm#20264, 2025-06-30 logs). A cold compile of a 70B model
# at TP8 takes minutes (~60 s P2P check + ~85 s torch.compile + ~60 s CUDA graphs: vllm-project/vllm#19824).
ENGINE_STARTUP_SECONDS = 60.0
ENGINE_STARTUP_SOURCE = (
    "60 s: vLLM V1 with a warm torch.compile cache, about 59 s from pod start to first response in "
    "vllm-project/vllm#20264 (a cold compile of a large model takes minutes, vllm-project/vllm#19824)"
)

# GPU failures: Meta's Llama 3 pre-training saw 419 unexpected job interruptions in a 54-day snapshot on 16,384 H100
# GPUs, about 78 % of them confirmed or suspected hardware (Llama Team, "The Llama 3 Herd of Models",
# arXiv:2407.21783, section 3.3.4, Table 5). Every interruption counted against a GPU: 54 x 24 x 16,384 / 419
# = 50,677 GPU-hours between interruptions per GPU.
GPU_MTBF_HOURS = 54 * 24 * 16_384 / 419
GPU_MTBF_SOURCE = (
    "about 50,700 GPU-hours: 419 unexpected interruptions in 54 days on 16,384 H100 (Llama 3 paper, "
    "arXiv:2407.21783, Table 5), each counted as one GPU's failure"
)
# How long a failed group stays down. ASSUMED: a day to swap a node or a board (a cloud's replacement instance
# can take minutes; an on-site RMA days). Named in the answer's assumptions when used.
REPAIR_HOURS = 24.0
REPAIR_SOURCE = "ASSUMED 24 h to bring a failed group back (no published figure used; set spares.repair_hours)"

# Expected time a spot interruption's group is re-served on on-demand GPUs: the rest of the hour it is reclaimed in
# (half an hour on average; the next hour's plan buys spot again) plus the replacement's start-up. A planning rule of
# this model, not a measured figure.
SPOT_RESERVE_HOURS = 0.5
