"""Casting a training GEMM's 16-bit operands to FP8: the memory-bound kernels an FP8 recipe runs beside every
GEMM, which the GEMM's own rate does not contain.

Why a term of its own: an FP8 GEMM runs at up to twice the 16-bit rate, but its inputs arrive in bf16 and must be
quantized first, in every pass: the layer input in the forward (and again where recomputation repeats it), the
output gradient in the backward, each written twice (row-wise for its own GEMM, column-wise/transposed for the
weight gradient), and the weight once per optimizer step. Those kernels move bytes and do no FLOPs, so they do not
shrink with the FP8 peak: the smaller the GEMMs' K and N, the larger their share, which is why a 1B-8B model gains
far less than 2x from FP8 while a 405B one approaches it.

Bytes per cast element, by recipe (Transformer Engine, NVIDIA/TransformerEngine @d0067d0,
transformer_engine/pytorch/csrc/quantizer.cpp and module/linear.py):

- **delayed** (DelayedScaling): one quantize kernel reads the bf16 tensor (2 B) and writes its row-wise and
  column-wise FP8 copies (1 + 1 B); the scale comes from the amax history and the kernel records the new amax on the
  way, so no extra pass: 4 B.
- **current** (Float8CurrentScaling; torchao's tensorwise dynamic scaling alike): `Float8CurrentScalingQuantizer::
  quantize_impl` runs `nvte_compute_amax` (one more read, 2 B) before the same quantize: 6 B. torchao's roofline
  model of its float8 training counts the same kernels for an activation or gradient (torchao
  torchao/testing/training/roofline_utils.py @36027d8, `get_tensor_memory_traffic_ovhd_s`, tensorwise: max_abs read,
  then one cast writing both layouts).
- **mxfp8** (MXFP8BlockScaling): the block scale is found inside the cast kernel (TE `cast_mxfp8_2D_kernel`, row-
  and column-wise scaling in one pass): 4 B plus one E8M0 scale per 32 elements in each layout.

Weights are cast once per step: TE quantizes a weight only when `is_first_microbatch` (or None), so gradient
accumulation reuses the FP8 copy (the same copy `planner.training.precision` keeps in memory).

Assumed, and said in the plan: every GEMM input is cast by its own kernel (a fusion into the preceding norm or
activation, torch.compile's or TE's LayerNormLinear, is not credited); under sequence parallelism the gathered
input is counted (TE casts the local shard and gathers FP8, then transposes the gathered copy for the weight
gradient, which moves about as many bytes); the kernels run at the planner's memory-bandwidth efficiency with no
fixed time of their own. Everything broadcasts over numpy arrays (DESIGN rule 4).
"""

from __future__ import annotations

from planner.arrays import Number

BF16_BYTES = 2.0
FP8_BYTES = 1.0
MXFP8_BLOCK = 32

# Read the 16-bit tensor once, write the row-wise and the column-wise FP8 copy.
QUANTIZE_BYTES_PER_ELEMENT = BF16_BYTES + 2 * FP8_BYTES
# Current scaling's amax pass reads the tensor once more before the quantize.
AMAX_BYTES_PER_ELEMENT = BF16_BYTES

CAST_BYTES_PER_ELEMENT: dict[str, float] = {
    "delayed": QUANTIZE_BYTES_PER_ELEMENT,
    "current": QUANTIZE_BYTES_PER_ELEMENT + AMAX_BYTES_PER_ELEMENT,
    "mxfp8": QUANTIZE_BYTES_PER_ELEMENT + 2.0 / MXFP8_BLOCK,
}


def cast_bytes_per_element(recipe: str) -> float:
    """HBM bytes one FP8 recipe moves per element of a GEMM operand it quantizes (table above)."""
    return CAST_BYTES_PER_ELEMENT[recipe]


def cast_seconds(
    activation_elements: Number,
    weight_elements: Number,
    microbatches: Number,
    bytes_per_element: Number,
    bandwidth_bytes_per_second: Number,
    memory_efficiency: float,
) -> Number:
    """Seconds of one micro-batch's FP8 casts on one GPU: its activations and gradients, and its share of the
    weights cast once per step over `microbatches` micro-batches, at the memory roofline."""
    elements = activation_elements + weight_elements / microbatches
    return elements * bytes_per_element / (bandwidth_bytes_per_second * memory_efficiency)


__all__ = [
    "AMAX_BYTES_PER_ELEMENT",
    "CAST_BYTES_PER_ELEMENT",
    "QUANTIZE_BYTES_PER_ELEMENT",
    "cast_bytes_per_element",
    "cast_seconds",
]
