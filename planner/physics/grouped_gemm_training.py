"""Routed-expert grouped GEMMs in training, from published kernel times: MXFP8 on Blackwell (the scaled grouped
GEMMs' own rate and the quantization and scale-layout kernels each of them needs) and 16-bit on any GPU.

Why a term of its own: a MoE layer's routed experts run as grouped GEMMs whose inputs are quantized to MXFP8 (1 x 32
blocks, E8M0 scales) just before each GEMM, in every pass and in both directions for the weight gradient. Those
kernels are memory-bound and scale with the rows (tokens x k) times the GEMM's N + K, while the GEMM scales with
N x K, so the smaller the experts the larger their share; the flat training efficiency, an end-to-end figure of
dense Megatron runs, knows none of it.

Source: torchao, `torchao/prototype/moe_training/README.md` at 0b1bb117 (github.com/pytorch/ao), "MXFP8 Kernel
Breakdown by Pass": NVIDIA B200, torch 2.11.0.dev20251216+cu128, torchao 0.15.0+gitd1305bc78, DeepSeek-V3 671B
expert shapes, M = 131,072 token rows over G = 8 local experts, K = 7168 (dim), N = 2048 (hidden), block 32, one
grouped GEMM (rows x K) @ (G, K, N) forward and backward. Times in microseconds:

| pass | kernel | shape | us |
|---|---|---|---|
| forward | quantize A rowwise | (131072, 7168) | 580.6 |
| forward | quantize B (weights) | (8, 2048, 7168) | 76.8 |
| forward | A scales to blocked layout (M groups) | (131072, 224) | 198.7 |
| forward | B scales to blocked layout | (8, 2048, 224) | 11.4 |
| forward | 2D-3D scaled grouped GEMM | (131072, 7168) @ (8, 7168, 2048) | 1838.1 |
| input gradient | quantize grad_out rowwise | (131072, 2048) | 166.0 |
| input gradient | quantize B along N | (8, 2048, 7168) | 76.8 |
| input gradient | grad_out scales (M groups) | (131072, 64) | 192.5 |
| input gradient | B scales | (8, 7168, 64) | 11.0 |
| input gradient | 2D-3D scaled grouped GEMM | (131072, 2048) @ (8, 2048, 7168) | 1838.1 |
| weight gradient | quantize grad_out colwise | (131072, 2048) | 191.7 |
| weight gradient | quantize A colwise | (131072, 7168) | 670.7 |
| weight gradient | grad_out_t scales (K groups) | (2048, 4096) | 17.4 |
| weight gradient | A_t scales (K groups) | (7168, 4096) | 31.6 |
| weight gradient | 2D-2D scaled grouped GEMM | (2048, 131072) @ (131072, 7168) | 2412.4 |

Read as rates (2 FLOPs per multiply-add; a quantized element moves 2 B of bf16 in, 1 B of FP8 and 1/32 B of
scale out; B200 HBM 8.0 TB/s, FP8 MAMF 3432.5 TFLOP/s, `planner.physics.gemm_efficiency`):

- 2D-3D GEMM (output, input gradient): 2 x 131072 x 2048 x 7168 / 1838.1 us = 2094 TFLOP/s = 0.610 of the MAMF;
  2D-2D GEMM (weight gradient): / 2412.4 us = 1595 TFLOP/s = 0.465 of it;
- rowwise quantization: 939.5 M elements x 3.03 B / 580.6 us = 4.90 TB/s, and 268.4 M / 166.0 us the same:
  0.613 of HBM; colwise: / 670.7 us and / 191.7 us = 4.25 TB/s = 0.531; the weights: 117.4 M / 76.8 us =
  4.64 TB/s = 0.579;
- the scale-layout kernels are neither bandwidth- nor compute-bound (the README reports their time only); the
  M-group ones, 391 of their 463 us, do not grow with K (198.7 us at 224 scale columns, 192.5 at 64), so all are
  charged per row: 210.1 us (forward), 203.5 (input gradient) and 49.0 (weight gradient) per 131,072 rows.

At the source's own shape these add up to 8,314 us, 2,225 of them outside the GEMMs (+36.5 %). Assumed, and said in
the plan: B300 and GB200 run the same kernels at the same share of their own FP8 MAMF and HBM; Megatron's
Transformer Engine path (the published MXFP8 training runs) performs the same quantizations (TE quantizes every
FP8 GEMM input, rowwise and columnwise for the weight gradient) at the same rates, and no figure of its own is
published; rows per expert in the thousands, as in the source (16,384), so the GEMM runs at its large-shape rate.
Not here: the permutation and combine copies around the experts (priced beside this term,
`planner.training.named_kernels.routed_token_copy_seconds`) and the expert activation
(`planner.training.elementwise_kernels`).

**16-bit routed experts** (every recipe but FP8) run the same grouped GEMMs in BF16, and the same README publishes
their forward + backward time (`torch._grouped_mm`, "Autograd function" tables, at 36027d8 and since ff16308; B200,
torch 2.10.0a0+gitf6de195, torchao 0.14.0+gitc7b8e13da), M = 128,000 token rows over G local experts, in us:

| shapes | N | K | G = 1 | G = 2 | G = 4 | G = 8 |
|---|---|---|---|---|---|---|
| Llama4 Scout | 8192 | 5120 | 43140.2 | 39487.6 | 39189.2 | 37700.7 |
| DeepSeek-V3 671B | 2048 | 7168 | 13064.8 | 14900.2 | 15823.6 | 14966.8 |

Read as 3 x 2MNK FLOPs over the time: 747-863 TFLOP/s, 0.33-0.38 of B200's 2250 TFLOP/s BF16 peak, well below a
dense GEMM's (`gemm_efficiency`: B200 BF16 MAMF 1745 TFLOP/s = 0.776 of it). Their mean share of the BF16 MAMF
(`BF16_GROUPED_GEMM_OF_MAMF`, 0.453; 0.41-0.49 by cell) prices 16-bit routed experts on every GPU at that share of its own BF16 MAMF.
Assumed, and said in the plan: Megatron's grouped GEMM (Transformer Engine GroupedLinear / cuBLAS) runs at the same
share as PyTorch's, and other generations at the same share of their MAMF (no figure of their own is published);
rows per expert as in the source (16,000-128,000). FP8 experts under delayed or current scaling have no published
grouped figure and stay in the flat-efficiency compute.

Everything broadcasts over numpy arrays (DESIGN rule 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Number

# Accelerators whose tensor cores take MXFP8's block scales (SM100 family); the published figures are B200's.
MXFP8_ACCELERATORS = ("b200", "b300", "gb200-nvl72")

_ROWS, _N, _K, _GROUPS = 131072, 2048, 7168, 8
_B200_FP8_MAMF_FLOPS = 3432.5e12
_B200_HBM_BYTES_PER_SECOND = 8.0e12
_GEMM_FLOPS = 2.0 * _ROWS * _N * _K

# bf16 in, FP8 out, one E8M0 scale per 32 elements
BYTES_PER_QUANTIZED_ELEMENT = 2.0 + 1.0 + 1.0 / 32.0

# The scaled grouped GEMMs' rates as shares of the device's FP8 MAMF (table above).
FORWARD_GEMM_OF_MAMF = _GEMM_FLOPS / 1838.1e-6 / _B200_FP8_MAMF_FLOPS
WEIGHT_GRADIENT_GEMM_OF_MAMF = _GEMM_FLOPS / 2412.4e-6 / _B200_FP8_MAMF_FLOPS


def _bandwidth_share(elements: float, microseconds: float) -> float:
    return elements * BYTES_PER_QUANTIZED_ELEMENT / (microseconds * 1e-6) / _B200_HBM_BYTES_PER_SECOND


# The quantization kernels' bandwidth as shares of HBM: the mean of the two rowwise and of the two colwise kernels.
ROWWISE_QUANTIZE_OF_HBM = (_bandwidth_share(_ROWS * _K, 580.6) + _bandwidth_share(_ROWS * _N, 166.0)) / 2
COLWISE_QUANTIZE_OF_HBM = (_bandwidth_share(_ROWS * _K, 670.7) + _bandwidth_share(_ROWS * _N, 191.7)) / 2
WEIGHT_QUANTIZE_OF_HBM = _bandwidth_share(_GROUPS * _N * _K, 76.8)

# The scale-layout kernels of each pass, seconds per token row.
FORWARD_REARRANGE_SECONDS_PER_ROW = (198.7 + 11.4) * 1e-6 / _ROWS
INPUT_GRADIENT_REARRANGE_SECONDS_PER_ROW = (192.5 + 11.0) * 1e-6 / _ROWS
WEIGHT_GRADIENT_REARRANGE_SECONDS_PER_ROW = (17.4 + 31.6) * 1e-6 / _ROWS


# BF16 grouped GEMMs forward + backward on B200 (table above): {(N, K): [us at G = 1, 2, 4, 8]}, M = 128,000 rows.
_BF16_ROWS = 128_000
_BF16_FWD_BWD_US = {
    (8192, 5120): (43140.2, 39487.6, 39189.2, 37700.7),
    (2048, 7168): (13064.8, 14900.2, 15823.6, 14966.8),
}
_B200_BF16_MAMF_FLOPS = 1745.0e12
_bf16_shares = [
    3 * 2.0 * _BF16_ROWS * n * k / (us * 1e-6) / _B200_BF16_MAMF_FLOPS
    for (n, k), times in _BF16_FWD_BWD_US.items()
    for us in times
]
# Their mean rate as a share of the BF16 MAMF: what 16-bit routed experts run at, forward and backward.
BF16_GROUPED_GEMM_OF_MAMF = sum(_bf16_shares) / len(_bf16_shares)


def bf16_grouped_gemm_seconds(rows, n, k, forward_passes, bf16_grouped_flops_per_second):
    """Forward and backward of one 16-bit grouped GEMM (rows x k) @ (groups, k, n) on one GPU: `forward_passes`
    forwards and both gradients at `bf16_grouped_flops_per_second` (`BF16_GROUPED_GEMM_OF_MAMF` x the BF16 MAMF)."""
    return 2.0 * rows * n * k * (forward_passes + 2) / bf16_grouped_flops_per_second


@dataclass(frozen=True, slots=True)
class Mxfp8GroupedGemmTime:
    """One grouped GEMM's forward and backward on one GPU, seconds: the scaled GEMMs, the quantization kernels
    and the scale-layout kernels."""

    gemm_seconds: Number
    quantize_seconds: Number
    rearrange_seconds: Number

    @property
    def total_seconds(self) -> Number:
        return self.gemm_seconds + self.quantize_seconds + self.rearrange_seconds


def mxfp8_grouped_gemm_time(
    rows, n, k, groups, forward_passes, fp8_mamf_flops_per_second, bandwidth_bytes_per_second
) -> Mxfp8GroupedGemmTime:
    """Forward and backward of one MXFP8 grouped GEMM (rows x k) @ (groups, k, n) on one GPU: `forward_passes`
    forwards (1, plus what recomputation repeats) and one input and one weight gradient, each with its kernels of
    the table above at their published rates on this device's FP8 MAMF and HBM bandwidth."""
    flops = 2.0 * rows * n * k
    mamf = fp8_mamf_flops_per_second
    gemm = flops * (forward_passes + 1) / (FORWARD_GEMM_OF_MAMF * mamf) + flops / (WEIGHT_GRADIENT_GEMM_OF_MAMF * mamf)
    element_bytes = BYTES_PER_QUANTIZED_ELEMENT / bandwidth_bytes_per_second
    rowwise = (rows * k * forward_passes + rows * n) * element_bytes / ROWWISE_QUANTIZE_OF_HBM
    colwise = rows * (n + k) * element_bytes / COLWISE_QUANTIZE_OF_HBM
    weights = groups * n * k * (forward_passes + 1) * element_bytes / WEIGHT_QUANTIZE_OF_HBM
    rearrange = rows * (
        FORWARD_REARRANGE_SECONDS_PER_ROW * forward_passes
        + INPUT_GRADIENT_REARRANGE_SECONDS_PER_ROW
        + WEIGHT_GRADIENT_REARRANGE_SECONDS_PER_ROW
    )
    return Mxfp8GroupedGemmTime(gemm, rowwise + colwise + weights, rearrange)


__all__ = [
    "BF16_GROUPED_GEMM_OF_MAMF",
    "BYTES_PER_QUANTIZED_ELEMENT",
    "COLWISE_QUANTIZE_OF_HBM",
    "FORWARD_GEMM_OF_MAMF",
    "MXFP8_ACCELERATORS",
    "ROWWISE_QUANTIZE_OF_HBM",
    "WEIGHT_GRADIENT_GEMM_OF_MAMF",
    "WEIGHT_QUANTIZE_OF_HBM",
    "Mxfp8GroupedGemmTime",
    "bf16_grouped_gemm_seconds",
    "mxfp8_grouped_gemm_time",
]
