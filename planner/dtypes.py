"""The number formats Headroom plans with: one table of storage bits, block-scale metadata, the tensor
cores each format computes on, and the serving engines that cache keys and values in it.

Storage layouts (metadata counted exactly, per block of consecutive values along a row):

* int4 weights (GPTQ/AWQ, AutoGPTQ ``QuantLinear``): per ``group_size`` input elements one fp16 scale and
  one packed 4-bit zero point (20 bits per group; the group is the scenario's ``weight_group_size``).
* int4 KV cache (KIVI-style): an fp16 scale and an fp16 zero per group of 64 values.
* nvfp4: E2M1 values, one FP8 E4M3 scale per 16 values, one FP32 scale per tensor
  (Intel Neural Compressor's NVFP4 table, https://intel.github.io/neural-compressor/latest/docs/source/3x/PT_NVFP4Quant.html;
  NVIDIA ModelOpt checkpoints: ``weight_scale`` e4m3 per 16 columns, ``weight_scale_2`` fp32 per tensor,
  https://docs.nvidia.com/nemo/automodel/nemo-automodel/nemo_automodel/components/quantization/nvfp4).
* mxfp4 (OCP Microscaling Formats v1.0): E2M1 values, one E8M0 (power-of-two) scale per 32 values, no
  tensor scale: 17 bytes per 32 values (https://docs.rs/float4/0.1.0/x86_64-pc-windows-msvc/struct.MXFP4Block.html;
  block 32 with E8M0 scales also in https://nvidia.github.io/TransformerEngine/features/low_precision_training/mxfp8/mxfp8.html).
* fp8 and int8 use per-tensor, per-channel or 128x128 block scales below 0.01 % of the tensor: free here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args


@dataclass(frozen=True, slots=True)
class Blocks:
    """Quantization metadata: `metadata_bits` stored for every `elements` consecutive values of a row
    (`elements` None: the scenario's `weight_group_size`)."""

    elements: int | None
    metadata_bits: int


@dataclass(frozen=True, slots=True)
class NumberFormat:
    name: str
    element_bits: int
    # Tensor-core format (a catalog peak key) the format's GEMMs run in where the GPU has it. Elsewhere the
    # kernels dequantize it to 16 bits: a memory and bandwidth saving only. None: weight-only by design.
    tensor_core: str | None
    weight_blocks: Blocks | None = None
    kv_blocks: Blocks | None = None
    tensor_scale_bits: int = 0  # one scale per tensor (nvfp4's fp32 global scale)
    kv_engines: str | None = None  # serving engines that cache K/V in this format; None: not a KV format
    # the planner's runtimes (engine names of planner.physics.runtimes) that cache K/V in it; ("*",): every one
    kv_runtimes: tuple[str, ...] = ()
    layout: str = ""  # the storage in words, for the plan's assumptions

    @property
    def quantized(self) -> bool:
        return self.element_bits < 16


# Ordered from widest to narrowest: the widgets list them in this order.
FORMATS: dict[str, NumberFormat] = {
    f.name: f
    for f in (
        NumberFormat("fp32", 32, "fp32", kv_engines="every engine (unusual)", kv_runtimes=("*",)),
        NumberFormat("bf16", 16, "bf16", kv_engines="every engine", kv_runtimes=("*",)),
        NumberFormat("fp16", 16, "fp16", kv_engines="every engine", kv_runtimes=("*",)),
        NumberFormat(
            "fp8",
            8,
            "fp8",
            # https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/
            kv_engines="vLLM, SGLang, TensorRT-LLM (fp8 e4m3/e5m2, per-tensor scales)",
            # SGLang: --kv-cache-dtype fp8_e5m2 / fp8_e4m3 (server_args.py)
            kv_runtimes=("vllm", "sglang", "tensorrt-llm"),
            layout="fp8 e4m3 with per-tensor, per-channel or 128x128 block scales (below 0.01 % of the tensor)",
        ),
        NumberFormat(
            "int8",
            8,
            "int8",
            # https://nvidia.github.io/TensorRT-LLM/features/quantization.html (INT8 KV cache)
            kv_engines="TensorRT-LLM, LMDeploy (int8 KV cache)",
            # llama.cpp: --cache-type-k/-v q8_0 (tools/server README; block-32 scales, planned with this layout)
            kv_runtimes=("tensorrt-llm", "llama.cpp"),
            layout="int8 with per-channel scales (below 0.01 % of the tensor)",
        ),
        NumberFormat(
            "nvfp4",
            4,
            "fp4",
            weight_blocks=Blocks(16, 8),
            kv_blocks=Blocks(16, 8),
            tensor_scale_bits=32,
            # https://nvidia.github.io/TensorRT-LLM/features/quantization.html (NVFP4 KV Cache);
            # https://developer.nvidia.com/blog/optimizing-inference-for-long-context-and-large-batch-sizes-with-nvfp4-kv-cache
            kv_engines="TensorRT-LLM's NVFP4 KV cache, on Blackwell only (checkpoint calibrated with ModelOpt); "
            "vLLM's --kv-cache-dtype nvfp4 is reported from v0.21 and not checked here",
            kv_runtimes=("tensorrt-llm",),
            layout="E2M1 values with one FP8 E4M3 scale per 16 values and one FP32 scale per tensor "
            "= 4 + 8/16 = 4.5 bits per value",
        ),
        NumberFormat(
            "mxfp4",
            4,
            "fp4",
            weight_blocks=Blocks(32, 8),
            layout="E2M1 values with one E8M0 scale per 32 values (OCP Microscaling) = 4 + 8/32 = 4.25 bits per value",
        ),
        NumberFormat(
            "int4",
            4,
            None,
            weight_blocks=Blocks(None, 20),
            kv_blocks=Blocks(64, 32),
            kv_engines="LMDeploy, KIVI-style research kernels (int4 KV with fp16 scale and zero per 64 values)",
            # llama.cpp --cache-type-k/-v q4_0; transformers' QuantizedCache (quanto, nbits=4)
            kv_runtimes=("llama.cpp", "hf-transformers"),
            layout="group-wise int4 with an fp16 scale and a packed 4-bit zero per group (GPTQ/AWQ)",
        ),
    )
}

# The table's names spelled out for the type checker (a Literal cannot be built from data); the test of the
# formats checks they stay equal: DType = every format (weights), KVDType = those some engine caches K/V in.
DType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "nvfp4", "mxfp4", "int4"]
DTYPES: tuple[str, ...] = get_args(DType)
KVDType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "nvfp4", "int4"]
KV_DTYPES: tuple[str, ...] = get_args(KVDType)
QUANTIZED_DTYPES: tuple[str, ...] = tuple(name for name, f in FORMATS.items() if f.quantized)
QUANTIZED_KV_DTYPES: tuple[str, ...] = tuple(d for d in QUANTIZED_DTYPES if d in KV_DTYPES)

# Storage of the values alone, before block metadata (what "an fp8 model is half a bf16 one" means).
BYTES_PER_ELEMENT: dict[str, float] = {name: f.element_bits / 8 for name, f in FORMATS.items()}


def uses_weight_group_size(dtype: str) -> bool:
    """Whether the scenario's `weight_group_size` sets the format's block (int4 GPTQ/AWQ groups)."""
    blocks = FORMATS[dtype].weight_blocks
    return blocks is not None and blocks.elements is None


def _metadata_bytes_per_element(blocks: Blocks | None, group_size) -> float:
    if blocks is None:
        return 0.0
    return blocks.metadata_bits / 8 / (blocks.elements or group_size)


def weight_bytes_per_element(dtype: str, group_size=128):
    """Bytes one linear-layer weight occupies, its block metadata included.

    Per-tensor scales (nvfp4: 4 bytes per matrix) are left out: below 1e-6 of any real layer's bytes;
    `matrix_bytes` counts them.
    """
    fmt = FORMATS[dtype]
    return fmt.element_bits / 8 + _metadata_bytes_per_element(fmt.weight_blocks, group_size)


def kv_bytes_per_element(dtype: str) -> float:
    """Bytes one cached K or V element occupies, quantization metadata included."""
    fmt = FORMATS[dtype]
    return fmt.element_bits / 8 + _metadata_bytes_per_element(fmt.kv_blocks, None)


def matrix_bytes(dtype: str, rows: int, cols: int, group_size: int = 128) -> int:
    """Exact bytes of one [rows, cols] weight matrix as the checkpoint stores it: packed values, one block
    scale per `block` values of each row (a partial last block still has its scale) and the per-tensor scale.
    Kernels may pad the scale tensor to their tile shape (128 x 4 blocks on Blackwell); that is not counted.
    """
    fmt = FORMATS[dtype]
    bits = rows * cols * fmt.element_bits + fmt.tensor_scale_bits
    if fmt.weight_blocks is not None:
        block = fmt.weight_blocks.elements or group_size
        bits += rows * math.ceil(cols / block) * fmt.weight_blocks.metadata_bits
    return math.ceil(bits / 8)


def high_precision_dtype(weight_dtype: str) -> str:
    """Format kept for tensors that are not quantized (norms, biases, routers, kept embeddings), and the
    16-bit format quantized weights are dequantized to where the GPU cannot compute in them."""
    return "fp32" if weight_dtype == "fp32" else "fp16" if weight_dtype == "fp16" else "bf16"


def kv_format_served(kv_dtype: str, runtime: str) -> bool:
    """Whether `runtime` (a runtime key: 'vllm', 'vllm@0.6', 'tensorrt-llm-engine', ...) caches K/V in `kv_dtype`
    (`NumberFormat.kv_runtimes`): what a suggestion to change the KV format may offer."""
    engine = runtime.split("@", 1)[0].removesuffix("-engine")
    served = FORMATS[kv_dtype].kv_runtimes
    return "*" in served or engine in served
