"""Training number formats: bytes per element of each model-state tensor under a precision recipe, NF4
storage (QLoRA) and the optimizer moments per trainable element.

Sources: ZeRO (Rajbhandari et al. 2020, Sec. 3 and Fig. 1); Dettmers et al. 2023 (QLoRA, Sec. 3) for NF4
storage; bitsandbytes for 8-bit Adam; Transformer Engine for FP8.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import where


@dataclass(frozen=True)
class PrecisionBytes:
    """Bytes per element of each model-state tensor under one precision recipe."""

    param: float  # working parameters the forward pass reads
    grad: float  # gradients autograd writes
    master: float  # fp32 master copy the optimizer updates (0 when the parameters are the master)
    state: float  # optimizer moments
    activation: float  # saved activations (16-bit tensors; fp32 statistics are counted separately)
    compute_dtype: str  # tensor-core format of the matmuls (FP8 recipes: of everything but the layers' GEMMs)
    description: str
    gemm_dtype: str | None = None  # format of the transformer layers' GEMMs; None: compute_dtype
    gemm_weight_copy: float = 0.0  # extra bytes per layer GEMM weight element (TE's FP8 copy and its transpose)
    gemm_input_activation: float | None = None  # bytes of a saved GEMM input (TE keeps it in FP8); None: activation


PRECISIONS: dict[str, PrecisionBytes] = {
    "mixed_bf16": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "bf16",
        "bf16 parameters and gradients, fp32 master weights and "
        "optimizer state (Megatron, DeepSpeed bf16; ZeRO's K = 12 for Adam)",
    ),
    "mixed_fp16": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "fp16",
        "fp16 parameters and gradients with loss scaling, fp32 "
        "master weights and optimizer state (ZeRO paper, Megatron-LM 2021)",
    ),
    "amp_bf16": PrecisionBytes(
        4,
        4,
        0,
        4,
        2,
        "bf16",
        "fp32 parameters, gradients and optimizer state, matmuls autocast to bf16 (PyTorch AMP, HF Trainer bf16=True)",
    ),
    "bf16": PrecisionBytes(
        2, 2, 0, 2, 2, "bf16", "pure bf16: parameters, gradients and optimizer state in bf16, no master copy"
    ),
    "fp32": PrecisionBytes(4, 4, 0, 4, 4, "fp32", "everything in fp32"),
    # Transformer Engine FP8 (Micikevicius et al. 2022; TE recipes DelayedScaling / Float8CurrentScaling with
    # Format.HYBRID: E4M3 forward, E5M2 gradients): model states as mixed_bf16; every layer GEMM runs in FP8
    # from an FP8 copy of its weight (row-wise for the forward, column-wise/transposed for the data gradient on
    # Hopper), cached across the micro-batches of a step (TE `is_first_microbatch`); the inputs TE's Linear /
    # LayerNormLinear save for the weight gradient are kept in FP8.
    "fp8": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "bf16",
        "Transformer Engine FP8 (hybrid E4M3/E5M2): bf16 parameters and gradients, fp32 master weights and optimizer "
        "state as mixed_bf16; layer GEMMs in FP8 from a cached FP8 weight copy and its transpose (2 B per GEMM "
        "weight); GEMM inputs saved for backward in FP8; attention, norms, embedding and output head in bf16",
        gemm_dtype="fp8",
        gemm_weight_copy=2.0,
        gemm_input_activation=1.0,
    ),
}

# bitsandbytes 8-bit optimizers: uint8 states quantized block-wise (256 values) with one fp32 absmax per block.
ADAM8BIT_BLOCK = 256
# QLoRA NF4: 64-weight blocks; double quantization stores the block scales in 8 bits with one fp32 scale
# per 256 blocks (Dettmers et al. 2023, Sec. 3: 0.127 bits/parameter of scales instead of 0.5).
NF4_BLOCK = 64
NF4_DOUBLE_QUANT_BLOCK = 256


def nf4_bytes_per_element(double_quantization=True):
    """Storage of one NF4 weight: 4 bits plus its block scale (fp32 per 64, or 8-bit per 64 plus fp32 per
    64 x 256 with double quantization). QLoRA Sec. 3."""
    scales = where(double_quantization, 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DOUBLE_QUANT_BLOCK), 4 / NF4_BLOCK)
    return 0.5 + scales


def optimizer_state_bytes_per_element(optimizer: str, state_bytes):
    """Optimizer moments per trainable element, master copy excluded (None: factored, see Adafactor).

    AdamW: m and v (Loshchilov & Hutter); 8-bit Adam: two uint8 states + an fp32 absmax per 256-value
    block (bitsandbytes blockwise); SGD with momentum: one buffer; plain SGD: none (torch.optim.SGD
    keeps no state without momentum).
    """
    per_element = {
        "adamw": 2 * state_bytes,
        "adam8bit": 2 * (1 + 4 / ADAM8BIT_BLOCK) + 0 * state_bytes,
        "sgd": 0 * state_bytes,
        "sgd_momentum": 1 * state_bytes,
    }
    return per_element.get(optimizer)
