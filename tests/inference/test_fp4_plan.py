"""Llama-3.1-70B in NVFP4 on a B200 (native FP4 tensor cores) and on an H100 (dequantized to bf16): the same
bytes, different compute, and each plan says which."""

from __future__ import annotations

import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.search.inference_tradeoffs import inference_techniques

from .test_steps import metrics_of


def _scenario(gpu: str, weight_dtype: str = "nvfp4") -> InferenceScenario:
    return InferenceScenario(
        model="llama-3.1-70b",
        gpu=gpu,
        num_gpus=1,
        tensor_parallel=1,
        weight_dtype=weight_dtype,
        kv_cache_dtype="fp8",
        concurrency=32,
    )


@pytest.fixture(scope="module")
def b200():
    return plan(_scenario("b200"))


@pytest.fixture(scope="module")
def h100():
    return plan(_scenario("h100-sxm"))


def test_nvfp4_weight_bytes_of_llama_70b_by_hand(b200, h100):
    # Llama 3.1 70B: 80 layers x (q 8192^2 + k, v 8192 x 1024 + o 8192^2 + MLP 3 x 8192 x 28672)
    # = 80 x 855,638,016 = 68,451,041,280 linear weights x 0.5625 B (4.5 bits) = 38,503,710,720 B
    # norms (80 x 2 + 1) x 8192 = 1,318,912 x 2 B                                =      2,637,824 B
    # embedding + untied lm_head 2 x 128,256 x 8192 = 2,101,346,304 x 2 B (bf16) =  4,202,692,608 B
    expected = 38_503_710_720 + 2_637_824 + 4_202_692_608
    assert b200.memory.components["weights_bytes"] == h100.memory.components["weights_bytes"] == expected
    assert expected / 2**30 == pytest.approx(39.776, abs=1e-3)


def test_b200_computes_in_fp4_and_h100_dequantizes_to_bf16(b200, h100):
    assert (b200.hardware.compute_dtype, b200.hardware.peak_flops_per_second) == ("fp4", 9.0e15)
    assert (h100.hardware.compute_dtype, h100.hardware.peak_flops_per_second) == ("bf16", 989.4e12)
    # same FLOPs and efficiency, so the prefill GEMMs' compute time, less their kernels' fixed time (80 layers x 4
    # kernels x 6.6 us on both), scales with the peak x the GEMM ceiling (planner.physics.gemm_efficiency: B200
    # NVFP4 MAMF 6624 / 9000 = 73.6 % against the H100's BF16 794.5 / 989 = 80.3 %):
    # 9000 / 989.4 x 0.7360 / 0.8033 = 9.096 x 0.9162 = 8.33x. (The attention runs in its FP8 cache's format on
    # both: `HardwareInputs.attention_peak_flops_per_second`.)
    tail = 80 * 4 * 6.6e-6
    gemm = {gpu: metrics_of(_scenario(gpu)).prefill.kernels.gemm_compute - tail for gpu in ("h100-sxm", "b200")}
    ratio = gemm["h100-sxm"] / gemm["b200"]
    assert ratio == pytest.approx(9.0e15 / 989.4e12 * (6624.0 / 9000.0) / (794.5 / 989.0))
    # same bytes, so decode memory time scales with HBM bandwidth: 8 / 3.35 TB/s
    ratio = h100.performance.decode.memory_seconds / b200.performance.decode.memory_seconds
    assert ratio == pytest.approx(8.0 / 3.35)
    assert b200.performance.tpot_seconds < h100.performance.tpot_seconds


def test_each_plan_says_where_the_fp4_gemms_run(b200, h100):
    assert any("fp4 tensor cores" in a and "nvfp4 GEMMs run on" in a for a in b200.assumptions)
    assert not any("no native fp4" in w for w in b200.warnings)
    assert any("nvfp4 weights are dequantized to bf16" in a for a in h100.assumptions)
    assert any("has no native fp4 tensor cores" in w for w in h100.warnings)
    assert any("4.5 bits per weight" in a for a in b200.assumptions + h100.assumptions)


def test_on_hopper_fp4_buys_bandwidth_not_compute():
    bf16 = plan(_scenario("h100-sxm", "bf16"))
    nvfp4 = plan(_scenario("h100-sxm"))
    # prefill GEMMs run at the bf16 peak either way; decode reads 3.6x fewer weight bytes
    assert nvfp4.performance.prefill.compute_seconds == pytest.approx(bf16.performance.prefill.compute_seconds)
    assert nvfp4.performance.decode.memory_seconds < bf16.performance.decode.memory_seconds / 1.5


def test_trade_offs_follow_the_same_rule():
    on_h100 = {e.variant: e for e in inference_techniques(_scenario("h100-sxm", "bf16"))}
    on_b200 = {e.variant: e for e in inference_techniques(_scenario("b200", "bf16"))}
    assert "compute" not in on_h100["weights bf16 → nvfp4"].relieves
    assert "no native nvfp4" in on_h100["weights bf16 → nvfp4"].costs
    assert "compute" in on_b200["weights bf16 → nvfp4"].relieves
    assert "KV fp8 → nvfp4" in on_b200 and "KV fp8 → mxfp4" not in on_b200  # no engine caches MXFP4 KV
