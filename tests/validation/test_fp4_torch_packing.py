"""FP4 weight bytes against real packed tensors built in torch: a weight matrix quantized to NVFP4 (E2M1 codes
packed two per byte as torch.float4_e2m1fn_x2, float8_e4m3fn block scales, an fp32 tensor scale) and to MXFP4
(float8_e8m0fnu block scales) occupies exactly `matrix_bytes`, and dequantizes back close to the original."""

from __future__ import annotations

import pytest

from planner.dtypes import FORMATS, matrix_bytes

torch = pytest.importorskip("torch")
if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, "float8_e8m0fnu"):
    pytest.skip("this torch has no float4_e2m1fn_x2 / float8_e8m0fnu dtypes", allow_module_level=True)

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # code 0..7; bit 3 is the sign
E2M1_MAX = 6.0
E4M3_MAX = 448.0


def _pack_e2m1(scaled):
    """Nearest E2M1 code of each value, two codes per byte (even column in the low nibble), as float4 x2."""
    grid = torch.tensor(E2M1_VALUES)
    codes = (scaled.abs().clamp(max=E2M1_MAX).unsqueeze(-1) - grid).abs().argmin(-1).to(torch.uint8)
    codes |= (scaled < 0).to(torch.uint8) << 3
    flat = codes.reshape(codes.shape[0], -1)
    return (flat[:, 0::2] | (flat[:, 1::2] << 4)).contiguous().view(torch.float4_e2m1fn_x2)


def _unpack_e2m1(packed):
    raw = packed.view(torch.uint8)
    codes = torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(raw.shape[0], -1).long()
    magnitude = torch.tensor(E2M1_VALUES)[codes & 7]
    return torch.where(codes >= 8, -magnitude, magnitude)


def quantize(weight, dtype: str):
    """(packed values, block scales, tensor scale or None) the way NVFP4 / OCP MX checkpoints store them."""
    rows, cols = weight.shape
    block = FORMATS[dtype].weight_blocks.elements
    blocks = weight.reshape(rows, cols // block, block)
    block_max = blocks.abs().amax(-1, keepdim=True).clamp(min=1e-12)
    if dtype == "nvfp4":
        tensor_scale = (block_max.max() / (E2M1_MAX * E4M3_MAX)).reshape(()).float()
        scales = (block_max / E2M1_MAX / tensor_scale).to(torch.float8_e4m3fn)
        divisor = scales.float() * tensor_scale
    else:
        tensor_scale = None
        scales = torch.exp2(torch.ceil(torch.log2(block_max / E2M1_MAX))).to(torch.float8_e8m0fnu)
        divisor = scales.float()
    packed = _pack_e2m1(blocks / divisor)
    return packed, scales.reshape(rows, cols // block), tensor_scale


def dequantize(packed, scales, tensor_scale, dtype: str):
    rows = packed.shape[0]
    block = FORMATS[dtype].weight_blocks.elements
    values = _unpack_e2m1(packed).reshape(rows, -1, block)
    scale = scales.float().unsqueeze(-1) * (tensor_scale if tensor_scale is not None else 1.0)
    return (values * scale).reshape(rows, -1)


@pytest.mark.parametrize("dtype", ["nvfp4", "mxfp4"])
def test_packed_torch_tensors_occupy_exactly_matrix_bytes(dtype):
    torch.manual_seed(0)
    rows, cols = 256, 512
    weight = torch.randn(rows, cols) * 0.02
    packed, scales, tensor_scale = quantize(weight, dtype)
    stored = packed.nbytes + scales.nbytes + (tensor_scale.nbytes if tensor_scale is not None else 0)
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.nbytes == rows * cols // 2
    assert scales.dtype == (torch.float8_e4m3fn if dtype == "nvfp4" else torch.float8_e8m0fnu)
    assert stored == matrix_bytes(dtype, rows, cols)
    # a 4-bit float with a per-block scale keeps Gaussian weights to within ~10 % RMS
    error = (dequantize(packed, scales, tensor_scale, dtype) - weight).pow(2).mean().sqrt() / weight.std()
    assert error < 0.15
