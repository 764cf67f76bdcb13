"""Fused-attention kernels in training: what share of the dense 16-bit peak their forward and backward reach, by
kernel and GPU generation, from published measurements.

A training step's attention (QK^T and attention x V, forward and backward) runs in one fused kernel whose rate
differs by kernel far more than a GEMM's does by shape: on H100 the FlashAttention-2 kernel PyTorch's SDPA picks by
default reaches about a third of the peak, FlashAttention-3 and cuDNN's fused attention about twice that. A plan
that names its kernel (`TrainingScenario.attention_kernel`) prices attention at the kernel's figure; one that does
not ("unstated") keeps the flat training efficiency of `Efficiency.training_compute`, as for its GEMMs.

Figures (share of the dense BF16 peak, in the kernels' own FLOP count):

- **fa2 on Hopper: 0.35.** FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608, abstract): "FlashAttention-2
  achieving only 35% utilization on the H100 GPU". Corroborated by pytorch/pytorch#142132 (2024-12-05, torch
  2.6.0.dev20241204, H100, batch 1, 24 heads, sequence 4608, head dim 128): SDPA's default kernel 329.5 TFLOP/s =
  0.33 of 989; there cuDNN's fused attention is opt-in (pytorch/pytorch#138522), which the maintainers confirm
  ("This is expected"), so torch-native training (torchtitan) ran FlashAttention-2 until the bundled cuDNN passed
  9.15 (torch 2.11; the gate `check_prefer_cudnn_attention` in sdp_utils.cpp, quoted in huggingface/transformers
  #48163, 2026-08-31).
- **fa3 / cudnn on Hopper: 0.525.** The same abstract: FlashAttention-3 is "1.5-2.0x" faster than
  FlashAttention-2 on H100, forward up to 740 TFLOP/s (75 %); the low end of the speed-up, 0.35 x 1.5, because the
  backward (2.5 of the 3.5 forward-equivalents a training step runs) gains least. cuDNN's fused attention runs at
  FlashAttention-3's rate in pytorch/pytorch#142132 (631.3 vs 631.8 TFLOP/s forward), so it reads the same figure.
- Ampere, Blackwell and other devices: no figure here for a training kernel's forward plus backward; they keep the
  flat training efficiency ("unstated" behaviour), whatever the kernel named.

FlashAttention's FLOP count charges the backward 2.5 forwards (it recomputes the scores: five matmuls against the
forward's two; flash-attention's benchmarks/benchmark_flash_attention.py `flops`), the planner's 2
(`planner.training.step_time`): `planner_attention_efficiency` converts, so the kernel's time comes out right.
"""

from __future__ import annotations

from typing import Literal

AttentionKernel = Literal["unstated", "fa2", "fa3", "cudnn"]

_HOPPER = ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20")

# Per kernel, per catalog accelerator id: forward + backward rate / dense BF16 peak (FlashAttention's FLOP count).
ATTENTION_KERNEL_FRACTIONS: dict[str, dict[str, float]] = {
    "fa2": {gpu: 0.35 for gpu in _HOPPER},
    "fa3": {gpu: 0.35 * 1.5 for gpu in _HOPPER},
    "cudnn": {gpu: 0.35 * 1.5 for gpu in _HOPPER},
}

# Forward-equivalents of one training step's attention: FlashAttention counts 1 + 2.5, the planner 1 + 2.
FLASH_ATTENTION_TRAINING_PASSES = 3.5
PLANNER_ATTENTION_TRAINING_PASSES = 3.0


def attention_kernel_fraction(gpu_id: str, kernel: str) -> float:
    """The kernel's forward + backward rate on `gpu_id` as a share of the dense 16-bit peak, in its own FLOP
    count; 0.0 where the kernel is "unstated" or no figure is published for this device (the flat training
    efficiency then applies)."""
    return ATTENTION_KERNEL_FRACTIONS.get(kernel, {}).get(gpu_id, 0.0)


def planner_attention_efficiency(gpu_id: str, kernel: str) -> float:
    """`attention_kernel_fraction` in the planner's FLOP count (backward = 2 forwards): the share of the peak the
    attention FLOPs the plan counts run at, so that they take the kernel's measured time; 0.0: none."""
    return (
        attention_kernel_fraction(gpu_id, kernel) * PLANNER_ATTENTION_TRAINING_PASSES / FLASH_ATTENTION_TRAINING_PASSES
    )


__all__ = [
    "ATTENTION_KERNEL_FRACTIONS",
    "AttentionKernel",
    "attention_kernel_fraction",
    "planner_attention_efficiency",
]
