"""The weight formats a checkpoint is stored in, as the planner's dtypes: what a scenario that names no
format serves (an engine loads a quantized checkpoint as stored: vLLM reads `quantization_config`).

The planner has two weight formats per scenario: `weight_dtype` for the MLP and expert matrices (the bulk
of every model's parameters) and `attention_weight_dtype` for the attention projections when they differ.
Embeddings, output head, norms and routers stay 16-bit (`quantize_embeddings` aside), as the quantized
checkpoints keep them.
"""

from __future__ import annotations

from planner.model.architecture import CheckpointQuantization, ModelArchitecture

# quantization_config formats -> planner dtypes (planner.dtypes.FORMATS); anything else is not mapped.
_PLANNER_DTYPE = {
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "nvfp4",
}
_UNQUANTIZED = {"bfloat16": "bf16", "float16": "fp16", "float32": "bf16"}  # vLLM serves fp32 checkpoints in 16 bits
_BULK_GROUPS = ("mlp", "routed_experts", "shared_experts")


def planner_dtype(quantization: CheckpointQuantization) -> str | None:
    return _PLANNER_DTYPE.get(quantization.weight_format)


def checkpoint_weight_dtypes(arch: ModelArchitecture) -> tuple[str, str | None] | None:
    """(weight_dtype, attention_weight_dtype or None when the same) the checkpoint stores; None for an
    unquantized checkpoint or a format the planner does not know (the scenario's default then applies)."""
    q = arch.quantization
    if q is None:
        return None
    quantized = planner_dtype(q)
    if quantized is None:
        return None
    unquantized = _UNQUANTIZED.get(q.unquantized_dtype, "bf16")
    bulk = quantized if any(g in q.quantized_groups for g in _BULK_GROUPS) else unquantized
    attention = quantized if "attention" in q.quantized_groups else unquantized
    return bulk, (attention if attention != bulk else None)


def fp8_block_scaled(arch: ModelArchitecture, weight_dtype: str, fp8_scaling: str | None) -> bool:
    """Whether `weight_dtype` weights are FP8 scaled in blocks (128 x 128: DeepSeek-V3-style checkpoints) rather
    than per tensor or channel: as the scenario says (`fp8_scaling`), else as the checkpoint's
    quantization_config does (`weight_block_size` on an FP8 checkpoint served as FP8)."""
    if weight_dtype != "fp8":
        return False
    if fp8_scaling is not None:
        return fp8_scaling == "block"
    q = arch.quantization
    return q is not None and planner_dtype(q) == "fp8" and bool(q.weight_block_size)
