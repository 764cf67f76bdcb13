"""Routed-expert (fused-MoE) kernel efficiency: what a serving engine's grouped expert GEMMs reach, from published
kernel timings, as three named terms (defaults in `planner.physics.efficiency.Efficiency`).

Source: vLLM PR #24700 (github.com/vllm-project/vllm/pull/24700, M. Goin, 2025-09-11, "Benchmarks on H100",
H100 80GB HBM3). `benchmarks/kernels/benchmark_moe.py` times one whole `fused_moe` call (top-k routing, block
alignment of the token-expert pairs, the two grouped GEMMs, the activation, the weighted sum), ten calls
replayed in a CUDA graph, with random gating logits, i.e. uniform routing, the same routing the engine assumes
(`roofline.expected_distinct_experts`). Two shapes are published there:

- Mixtral-8x7B BF16, TP2, tuned config: E = 8 experts, top-2, hidden 4096, per-shard intermediate 3584,
  (7168 x 4096 + 4096 x 3584) x 2 B = 88,080,384 B per expert. Batch 1: 144.03 us (2 experts, 176.2 MB);
  batch 32: 487.35 us (8 (1 - 0.75^32) = 7.9992 experts, 704.6 MB); batch 1024: 833.72 us, 1536: 1122.93 us.
- Qwen3-30B-A3B FP8 (w8a8), TP1, main branch: E = 128, top-8, hidden 2048, intermediate 768,
  3 x 2048 x 768 x 1 B = 4,718,592 B per expert. Batch 1: 44.54 us (8 experts, 37.7 MB); batch 128:
  273.72 us (127.97 experts, 603.8 MB); batch 2048: 911.64 us, 4096: 1647.57 us.

A fused-MoE call is modelled as t = t0 + expert bytes / (b x HBM peak) while its weights stream, and its expert
FLOPs at c x the dense peak once tokens per expert are many. Between the two small-batch points of each shape:

    b  = (bytes_2 - bytes_1) / (t_2 - t_1) / 3.35 TB/s:  Mixtral 528.4 MB / 343.32 us = 1.539 TB/s = 0.459;
                                                         Qwen3   566.1 MB / 229.18 us = 2.470 TB/s = 0.737
    t0 = t_1 - bytes_1 / (b x 3.35 TB/s):                Mixtral 144.03 - 114.46 = 29.57 us;
                                                         Qwen3    44.54 -  15.28 = 29.26 us

and from the two largest batches (marginal rate, every expert busy):

    Mixtral BF16: 512 tokens x 2 x 2 x 3 x 4096 x 3584 FLOP / 289.21 us = 311.9 TFLOP/s = 0.315 of 989 (BF16);
    Qwen3 FP8:   2048 tokens x 2 x 8 x 3 x 2048 x  768 FLOP / 735.93 us = 210.1 TFLOP/s = 0.106 of 1979 (FP8),
                 0.106 / (H100 FP8 MAMF 70.9 % / BF16 MAMF 80.3 %) = 0.120 in the reference (H100 BF16) terms
                 the phase efficiencies are stated in (`planner.physics.gemm_efficiency`).

Defaults, the mean of the two shapes (never fitted to a serving run):

- `moe_layer_seconds` = (29.57 + 29.26) / 2 = 29.4 us per MoE layer per forward pass. Two of its kernels are the
  layer's MLP GEMMs, whose fixed time the engine already charges (`GEMM_TAIL_SECONDS` each, `GEMMS_PER_LAYER`),
  so a MoE layer adds `moe_layer_seconds - 2 x GEMM_TAIL_SECONDS` = 16.2 us on a GPU (`moe_layer_extra_seconds`).
- `moe_expert_bandwidth` = (0.459 + 0.737) / 2 = 0.60 of HBM peak while routed-expert weights stream (the dense
  weights keep `memory_bandwidth`).
- `moe_expert_compute` = (0.315 + 0.120) / 2 = 0.22 of the dense peak for routed-expert FLOPs (stated for the
  reference GEMM ceiling, scaled by the device's like the phase efficiencies; the dense FLOPs keep theirs).

The two shapes differ in their experts' format, and the format sets the compute share (the bandwidth shares
do not separate by format: both streaming rates sit within the spread of the two shapes). So the routed-expert
FLOPs run at the figure of their own format where one is published (`EXPERT_COMPUTE_BY_FORMAT`: BF16 / FP16
experts 0.315, FP8 experts computing in FP8 0.120), as `expert_compute_format_ratio` x `moe_expert_compute` (a
ratio to the 0.22 mean, so a calibration that fits `moe_expert_compute` moves both); formats with no figure of
their own (int4, MXFP4 and NVFP4 experts, FP8 weights dequantised on a device without FP8) keep the mean. Both
figures time vLLM's Triton fused-MoE kernel, which BF16 and per-tensor FP8 experts run, and block-scaled FP8
experts under early-2025 releases (the Triton block-FP8 path of PR #13932 below). Later releases run block-scaled
FP8 experts through DeepGEMM's grouped GEMM by default on Hopper, which two public statements place no faster than
Triton at serving shapes: "DeepGEMM is faster for linear layers but slower for the grouped GEMM operations used in
MoE experts" (vllm-project/recipes PR #120, MiniMax-M2 on H100 / H20, vLLM v0.11.0), and vLLM PR #29346
(2025-11-24) switches DeepSeek-V3 at TP 8 back to Triton experts as the faster path. So FP8 experts read the
Triton FP8 figure in every release (an upper bound where DeepGEMM runs).

Block-scaled FP8 experts in early-2025 engines (`fused_moe_kernels` "early-2025": vLLM's V0 releases, before
tuned block-FP8 fused-MoE configs and DeepGEMM): vLLM PR #13932 (github.com/vllm-project/vllm/pull/13932,
2025-02-26) times `benchmark_moe.py --dtype fp8_w8a8 --model deepseek-ai/DeepSeek-V3` on H100 (E = 256, top-8,
hidden 7168, 128 x 128 block scales) with the Triton fused-MoE path of the time. At batch 128 (98.3 % of the
experts touched under uniform routing):

    TP1: 11.08 GB of expert weights in 12,480 us (less t0 = 29.4 us): 0.890 TB/s = 0.266 of 3.35 TB/s
    TP8:  1.39 GB                   in  1,732 us (less t0):            0.816 TB/s = 0.244

so such experts stream at (0.266 + 0.244) / 2 = 0.255 of HBM, `EARLY_BLOCK_FP8_EXPERT_BANDWIDTH`, 0.425 of the
0.60 above (`early_block_fp8_expert_bandwidth_ratio`, applied to whatever `moe_expert_bandwidth` a calibration
gives). Newer releases keep 0.60: vLLM PR #24700's main-branch rows (September 2025) are the current kernels.
Measured on H100 only; other GPUs take the same share of their own bandwidth (assumed).

Everything broadcasts over numpy arrays (DESIGN rule 4).
"""

from __future__ import annotations

from planner.arrays import maximum, where
from planner.physics.roofline import expected_distinct_experts

# Routed-expert FLOP rate per expert weight format, reference (H100 BF16) terms: vLLM PR #24700's marginal rates
# (docstring): Mixtral-8x7B BF16 experts 0.315; Qwen3-30B-A3B FP8 (w8a8) experts 0.106 of the FP8 peak = 0.120.
EXPERT_COMPUTE_BY_FORMAT = {"bf16": 0.315, "fp16": 0.315, "fp8": 0.120}
DOCUMENTED_EXPERT_COMPUTE = 0.22  # `Efficiency.moe_expert_compute`'s default: the mean of the two shapes
EARLY_BLOCK_FP8_EXPERT_BANDWIDTH = 0.255  # of HBM peak: vLLM PR #13932, Triton block-FP8 fused MoE (docstring)
DOCUMENTED_EXPERT_BANDWIDTH = 0.60  # `Efficiency.moe_expert_bandwidth`'s default (vLLM PR #24700)


def early_block_fp8_expert_bandwidth_ratio(block_fp8_experts, early_kernels: bool):
    """What multiplies the fused-MoE bandwidth: 0.255 / 0.60 for block-scaled FP8 experts under a release whose
    fused-MoE kernels predate tuned block-FP8 configs (`RuntimeProfile.fused_moe_kernels` "early-2025"), else 1."""
    ratio = EARLY_BLOCK_FP8_EXPERT_BANDWIDTH / DOCUMENTED_EXPERT_BANDWIDTH
    return where(block_fp8_experts, ratio, 1.0) if early_kernels else 1.0


def expert_compute_format_ratio(weight_dtype: str, gemm_dtype: str) -> float:
    """What multiplies `moe_expert_compute` for experts stored in `weight_dtype` whose GEMMs run in `gemm_dtype`
    on this device (`Accelerator.gemm_dtype`): the published figure of that format over the documented mean,
    where the experts compute in their own format (`EXPERT_COMPUTE_BY_FORMAT`); 1 for every other format."""
    if weight_dtype != gemm_dtype or weight_dtype not in EXPERT_COMPUTE_BY_FORMAT:
        return 1.0
    return EXPERT_COMPUTE_BY_FORMAT[weight_dtype] / DOCUMENTED_EXPERT_COMPUTE


# The MLP GEMMs of a MoE layer that the fused-MoE call replaces (up/gate fused, down): their per-kernel fixed
# time is already in the layer's `GEMMS_PER_LAYER` tails.
MOE_LAYER_GEMMS = 2


def routed_expert_flops_per_token(
    experts_routed_parameters, num_experts, experts_per_token, moe_layers, tensor_parallel, pipeline_parallel
):
    """Routed-expert FLOPs of one token on one GPU (2 per multiply-add): its k experts' weights once in each of the
    model's `moe_layers`, split over tensor x pipeline GPUs as the step's FLOPs are (`steps.decode_step_flops`)."""
    if num_experts == 0:
        return 0.0
    per_expert = experts_routed_parameters / num_experts
    return 2.0 * experts_per_token * per_expert * moe_layers / (tensor_parallel * pipeline_parallel)


def routed_expert_read_bytes(stage_routed_expert_bytes, num_experts, experts_per_token, tokens_in_step):
    """Routed-expert weight bytes a step streams on one GPU: the experts its tokens touch under uniform routing
    (the part of `roofline.decode_weight_read_bytes` that is routed experts)."""
    if num_experts == 0:
        return 0.0
    touched = expected_distinct_experts(num_experts, experts_per_token, tokens_in_step) / num_experts
    return stage_routed_expert_bytes * touched


def moe_layer_extra_seconds(stage_moe_layers, moe_layer_seconds, gemm_tail_seconds, is_accelerator):
    """Fixed time of the fused-MoE calls of one forward pass on one stage beyond what the engine already
    charges: per MoE layer, the published fixed time of the call less its `MOE_LAYER_GEMMS` GEMM kernels' tails.
    GPU kernels only: zero on a CPU device."""
    per_layer = maximum(moe_layer_seconds - MOE_LAYER_GEMMS * gemm_tail_seconds, 0.0)
    return where(is_accelerator, stage_moe_layers * per_layer, 0.0)


__all__ = [
    "DOCUMENTED_EXPERT_BANDWIDTH",
    "DOCUMENTED_EXPERT_COMPUTE",
    "EARLY_BLOCK_FP8_EXPERT_BANDWIDTH",
    "EXPERT_COMPUTE_BY_FORMAT",
    "MOE_LAYER_GEMMS",
    "early_block_fp8_expert_bandwidth_ratio",
    "expert_compute_format_ratio",
    "moe_layer_extra_seconds",
    "routed_expert_flops_per_token",
    "routed_expert_read_bytes",
]
