"""Storage sizes of the number formats Headroom plans with.

Weights quantized below 8 bits carry per-group metadata: GPTQ/AWQ checkpoints store, for every
`group_size` input elements of a linear layer, one fp16 scale and one packed 4-bit zero point
(AutoGPTQ `QuantLinear`: qweight int32-packed, qzeros int32-packed 4-bit, scales fp16). fp8 and int8
weights use per-channel or 128x128 block scales whose size is below 0.01 % of the tensor and are
treated as free.
"""

from __future__ import annotations

from typing import Literal, get_args

DType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
DTYPES: tuple[str, ...] = get_args(DType)

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

# fp16 scale (2 B) + packed 4-bit zero point (0.5 B) per group.
INT4_GROUP_METADATA_BYTES = 2.5
# KV caches quantized to 4 bits (KIVI-style) keep an fp16 scale and fp16 zero per group of 64.
KV_INT4_GROUP_TOKENS = 64
KV_INT4_GROUP_METADATA_BYTES = 4.0


def weight_bytes_per_element(dtype: str, group_size=128):
    """Bytes one quantized linear-layer weight element occupies, group metadata included."""
    base = BYTES_PER_ELEMENT[dtype]
    if dtype == "int4":
        return base + INT4_GROUP_METADATA_BYTES / group_size
    return base


def kv_bytes_per_element(dtype: str) -> float:
    """Bytes one cached K or V element occupies, quantization metadata included."""
    base = BYTES_PER_ELEMENT[dtype]
    if dtype == "int4":
        return base + KV_INT4_GROUP_METADATA_BYTES / KV_INT4_GROUP_TOKENS
    return base


def high_precision_dtype(weight_dtype: str) -> str:
    """Format kept for tensors that are not quantized (norms, biases, routers, kept embeddings)."""
    return "fp32" if weight_dtype == "fp32" else "bf16"


def compute_dtype(weight_dtype: str) -> str:
    """Tensor-core format the matmuls run in.

    fp8 and int8 checkpoints (W8A8) run their GEMMs in that format; int4 weight-only kernels
    (Marlin, AWQ) dequantize to 16 bits and run bf16 GEMMs.
    """
    if weight_dtype in ("fp8", "int8"):
        return weight_dtype
    if weight_dtype == "fp32":
        return "fp32"
    return "bf16" if weight_dtype != "fp16" else "fp16"
