"""What a training plan says about the kernels it prices at published rates beside the flat training efficiency
(`planner.training.named_kernels`): an FP8 recipe's GEMMs and their casts, and the routed experts' grouped GEMMs."""

from __future__ import annotations

from planner.model.architecture import ModelArchitecture
from planner.physics import fp8_casts, grouped_gemm_training
from planner.training.inputs import bf16_grouped_gemm_flops
from planner.training.scenario import TrainingScenario
from planner.units import percent


def named_kernel_assumptions(s: TrainingScenario, arch: ModelArchitecture) -> list[str]:
    """The assumption sentences of the FP8 recipe and of the routed experts' grouped-GEMM rate, where they apply."""
    out: list[str] = []
    if s.precision == "fp8":
        scaling = {
            "delayed": "delayed scaling (DelayedScaling: scale from an amax history of 1024 steps, kept per tensor)",
            "current": "current scaling (Float8CurrentScaling: each tensor's amax read just before its cast)",
        }.get(s.fp8_recipe, "MXFP8 block scaling (MXFP8BlockScaling: an E8M0 scale per 1 x 32 block)")
        out.append(
            f"FP8 training with Transformer Engine, Format.HYBRID (E4M3 forward, E5M2 gradients), {scaling}: the "
            "layer GEMMs (forward, data and weight gradients, recomputed ones) run at the GPU's dense FP8 peak with "
            "the same efficiency as 16-bit GEMMs, plus their casts at the memory roofline "
            f"({fp8_casts.cast_bytes_per_element(s.fp8_recipe):g} B moved per element: inputs every forward, output "
            "gradients every backward, weights once per step; no fusion credited; physics/fp8_casts.py); attention, "
            "norms, embedding and output head stay in bf16 (Megatron-core's output layer is not a TE module). Memory: "
            "bf16 parameters and gradients, fp32 master weights and optimizer state unchanged; an FP8 copy and an FP8 "
            "transpose of every layer GEMM weight (2 B per element, cached across micro-batches, in weights_bytes); "
            "GEMM inputs saved for backward in FP8. MFU and HFU are against the dense bf16 peak. Sources: Transformer "
            "Engine Common API (transformer_engine.common.recipe, release 2.x docs) and Micikevicius et al. 2022."
        )
    g = grouped_gemm_training
    if arch.is_moe and bf16_grouped_gemm_flops(s, s.accelerator()) > 0:
        out.append(
            f"16-bit routed experts: grouped GEMMs at {percent(g.BF16_GROUPED_GEMM_OF_MAMF)} of this GPU's BF16 MAMF "
            "forward and backward, as torch._grouped_mm on B200 (torchao MoE training README, 'Autograd function'). "
            "Assumed: Megatron's grouped GEMM and other GPUs run at the same share; rows per expert in the thousands."
        )
    if s.precision == "fp8" and s.fp8_recipe == "mxfp8" and arch.is_moe:
        out.append(
            f"MXFP8 routed experts: grouped GEMMs at {percent(g.FORWARD_GEMM_OF_MAMF)} of the FP8 MAMF (output, input "
            f"gradient) and {percent(g.WEIGHT_GRADIENT_GEMM_OF_MAMF)} (weight gradient), their inputs quantized in every "
            f"pass at {percent(g.ROWWISE_QUANTIZE_OF_HBM)} of HBM ({percent(g.COLWISE_QUANTIZE_OF_HBM)} colwise) and "
            "their scales laid out, as torchao's MXFP8 kernels on B200 (MoE training README, 'MXFP8 Kernel Breakdown by "
            "Pass'). Assumed: Transformer Engine runs alike, GB200 / B300 at the same shares; the expert activation runs apart at the memory roofline."
        )
    return out
