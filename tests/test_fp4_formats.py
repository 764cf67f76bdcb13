"""FP4 storage: exact bytes of nvfp4 and mxfp4 tensors from the block-scale arithmetic, worked by hand, and
the one dtype table the scenario, the sweep and the widgets read."""

from __future__ import annotations

import pytest

from planner.dtypes import (
    BYTES_PER_ELEMENT,
    DTYPES,
    FORMATS,
    KV_DTYPES,
    QUANTIZED_DTYPES,
    QUANTIZED_KV_DTYPES,
    kv_bytes_per_element,
    matrix_bytes,
    weight_bytes_per_element,
)
from planner.hardware.catalog import PEAK_DTYPES
from planner.inference.scenario import InferenceScenario

ROWS = COLS = 4096  # a Llama-3 8B attention projection
VALUES = ROWS * COLS  # 16,777,216


def test_nvfp4_4096_square_matrix_by_hand():
    # 16,777,216 values x 4 bits                     =  8,388,608 B of packed E2M1 (two per byte)
    # 16,777,216 / 16 = 1,048,576 blocks x 1 B E4M3  =  1,048,576 B of block scales
    # one FP32 per-tensor scale                      =          4 B
    assert matrix_bytes("nvfp4", ROWS, COLS) == 8_388_608 + 1_048_576 + 4 == 9_437_188
    # per value 4 + 8/16 = 4.5 bits = 0.5625 B; the 4-byte tensor scale is the only difference
    assert weight_bytes_per_element("nvfp4") == 0.5625
    assert matrix_bytes("nvfp4", ROWS, COLS) == VALUES * 0.5625 + 4


def test_mxfp4_4096_square_matrix_by_hand():
    # 8,388,608 B packed + 16,777,216 / 32 = 524,288 E8M0 scales x 1 B; no tensor scale
    assert matrix_bytes("mxfp4", ROWS, COLS) == 8_388_608 + 524_288 == 8_912_896
    # 4 + 8/32 = 4.25 bits = 0.53125 B: 17 bytes per 32 values (one OCP MX block)
    assert weight_bytes_per_element("mxfp4") == 0.53125 == 17 / 32
    assert matrix_bytes("mxfp4", 1, 32) == 17


def test_int4_keeps_its_gptq_group_metadata():
    # group 128: 4096 / 128 = 32 groups per row x 4096 rows x (2 B fp16 scale + 0.5 B packed zero) = 327,680 B
    assert matrix_bytes("int4", ROWS, COLS, group_size=128) == 8_388_608 + 327_680
    assert weight_bytes_per_element("int4", 128) == 0.5 + 2.5 / 128


def test_a_partial_last_block_still_carries_its_scale():
    # 20 values per row: 10 bytes packed and 2 blocks (16 + 4) -> 2 E4M3 scales per row, plus the tensor scale
    assert matrix_bytes("nvfp4", 3, 20) == 3 * (10 + 2) + 4
    assert matrix_bytes("mxfp4", 3, 20) == 3 * (10 + 1)


def test_kv_cache_bytes_per_value():
    assert kv_bytes_per_element("nvfp4") == 0.5625  # TensorRT-LLM's NVFP4 KV: same 16-value E4M3 blocks
    assert kv_bytes_per_element("fp8") == 1.0
    assert kv_bytes_per_element("int4") == 0.5 + 4 / 64  # fp16 scale + fp16 zero per 64 values


def test_the_table_is_the_one_home_of_the_formats():
    assert DTYPES == tuple(FORMATS) == ("fp32", "bf16", "fp16", "fp8", "int8", "nvfp4", "mxfp4", "int4")
    # KV formats are those some serving engine caches K/V in: no engine caches MXFP4 KV
    assert KV_DTYPES == tuple(d for d in DTYPES if FORMATS[d].kv_engines) and "mxfp4" not in KV_DTYPES
    assert QUANTIZED_DTYPES == ("fp8", "int8", "nvfp4", "mxfp4", "int4")
    assert QUANTIZED_KV_DTYPES == ("fp8", "int8", "nvfp4", "int4")
    # every tensor-core format a number format computes in is a peak the catalog can hold
    assert {f.tensor_core for f in FORMATS.values()} - {None} <= set(PEAK_DTYPES)
    assert BYTES_PER_ELEMENT["nvfp4"] == BYTES_PER_ELEMENT["mxfp4"] == 0.5


def test_the_scenario_offers_fp4_weights_and_nvfp4_kv_only():
    fields = InferenceScenario.model_fields
    assert fields["weight_dtype"].annotation.__args__ == DTYPES
    assert fields["kv_cache_dtype"].annotation.__args__ == KV_DTYPES
    InferenceScenario(weight_dtype="mxfp4", kv_cache_dtype="nvfp4")
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        InferenceScenario(kv_cache_dtype="mxfp4")
