"""Block-scaled FP8 weights (128 x 128 scale blocks: DeepSeek-V3-style checkpoints) on Hopper: their dense GEMMs
run at a published share of the BF16 rate (`gemm_efficiency.BLOCK_SCALED_FP8_OF_BF16`), by hand."""

from __future__ import annotations

import pytest

from planner import InferenceScenario, plan
from planner.hardware.catalog import get_accelerator
from planner.model.catalog import resolve_model
from planner.model.checkpoint_precision import fp8_block_scaled
from planner.physics import gemm_efficiency
from planner.share import query_params_to_scenario, scenario_to_query_params

from .test_steps import metrics_of


def test_the_published_share_by_hand():
    # vLLM PR #23280, H100, DeepSeek-V3's N=2112 K=7168: CUTLASS block FP8 / torch BF16 TFLOP/s at batch 2048, 4096,
    # 8192 = 426.6 / 648.2, 456.9 / 715.8, 489.7 / 666.4 = 0.6581, 0.6383, 0.7348 -> mean 0.6771
    share = gemm_efficiency.BLOCK_SCALED_FP8_OF_BF16["h100-sxm"]
    assert share == pytest.approx(0.6771, abs=1e-4)
    h100 = get_accelerator("h100-sxm")
    # as a share of the FP8 peak: 0.6771 x BF16 MAMF 794.5/989 x 989.4 / 1978.9 TFLOP/s = 0.2720
    ceiling = gemm_efficiency.block_scaled_fp8_ceiling(
        "h100-sxm", 794.5 / 989.0, h100.peak_flops("bf16"), h100.peak_flops("fp8")
    )
    assert ceiling == pytest.approx(0.6771 * 794.5 / 989.0 * 989.4 / 1978.9, rel=1e-4)
    assert ceiling == pytest.approx(0.2720, abs=1e-4)
    # Blackwell applies block scales in its tensor cores; no figure for AMD: no penalty
    assert gemm_efficiency.block_scaled_fp8_ceiling("b200", 0.78, 2250e12, 4500e12) is None
    assert gemm_efficiency.block_scaled_fp8_ceiling("mi300x", 0.51, 1300e12, 2600e12) is None


def test_which_weights_are_block_scaled():
    r1, llama = resolve_model("deepseek-r1"), resolve_model("llama-3.1-8b")
    assert r1.quantization is not None and r1.quantization.weight_block_size == (128, 128)
    assert fp8_block_scaled(r1, "fp8", None)  # the checkpoint says so
    assert not fp8_block_scaled(r1, "fp8", "tensor")  # the scenario overrides it
    assert not fp8_block_scaled(r1, "bf16", None)  # served in another format
    assert not fp8_block_scaled(llama, "fp8", None)  # a BF16 checkpoint quantized on load: per tensor
    assert fp8_block_scaled(llama, "fp8", "block")


def _r1(gpu: str, scaling: str | None) -> InferenceScenario:
    return InferenceScenario(
        model="deepseek-r1", gpu=gpu, num_gpus=8, tensor_parallel=8, prompt_tokens=4096, fp8_scaling=scaling
    )


def test_deepseek_r1_on_h200_pays_for_its_blocks_in_the_dense_gemms_only():
    block, tensor = metrics_of(_r1("h200", None)), metrics_of(_r1("h200", "tensor"))
    h200 = get_accelerator("h200")
    per_tensor_ceiling = 1453.4 / 1979.0
    block_ceiling = gemm_efficiency.BLOCK_SCALED_FP8_OF_BF16["h200"] * 794.5 / 989.0 * 989.4 / 1978.9
    assert h200.peak_flops("fp8") == pytest.approx(1978.9e12)
    layers, kernels = 61, 4  # DeepSeek-R1: 61 layers, 4 GEMM kernels each, 6.6 us tail, prefill in 1 chunk
    tails = layers * kernels * 6.6e-6
    assert tensor.prefill.kernels.gemm_tail == pytest.approx(tails)
    # a prefill's block-FP8 GEMMs run above their small-M floor (test_deepseek_r1_decode_pays_the_small_m_...)
    assert block.prefill.kernels.gemm_tail == pytest.approx(tails)
    # compare the FLOP-time parts
    ratio = (block.prefill.kernels.gemm_compute - block.prefill.kernels.gemm_tail) / (
        tensor.prefill.kernels.gemm_compute - tails
    )
    assert ratio == pytest.approx(per_tensor_ceiling / block_ceiling, rel=1e-9)  # 2.70x
    assert ratio == pytest.approx(2.70, abs=0.01)
    # the fused-MoE calls keep their published (per-tensor) rate; attention runs in the BF16 cache's format
    assert block.prefill.kernels.expert_compute == pytest.approx(tensor.prefill.kernels.expert_compute)
    assert block.prefill.kernels.mixing_compute == pytest.approx(tensor.prefill.kernels.mixing_compute)
    slower = plan(_r1("h200", None)).performance.ttft_seconds / plan(_r1("h200", "tensor")).performance.ttft_seconds
    assert 1.05 < slower < 2.7


def test_blackwell_reads_its_blocks_at_full_rate():
    block, tensor = metrics_of(_r1("b200", None)), metrics_of(_r1("b200", "tensor"))
    assert block.prefill.seconds == pytest.approx(tensor.prefill.seconds, rel=1e-12)


def test_the_choice_travels_in_a_share_link():
    scenario = _r1("h200", "tensor")
    params = scenario_to_query_params(scenario)
    opened, warnings = query_params_to_scenario(params)
    assert opened.fp8_scaling == "tensor" and not warnings
    reopened, warnings = query_params_to_scenario(scenario_to_query_params(_r1("h200", None)))
    assert reopened.fp8_scaling is None and not warnings


def test_no_block_scale_sentence_where_fp8_weights_are_dequantized():
    """Review regression: A100 has no FP8 tensor cores; its GEMMs run in BF16, so no FP8-rate sentence."""
    a100 = plan(_r1("a100-80gb", None))
    assert not any("block scales" in a and "FP8 rate" in a for a in a100.assumptions)
    h200 = plan(_r1("h200", None))
    assert any("0.68 x the BF16 GEMM rate" in a for a in h200.assumptions)


def test_small_m_block_fp8_kernel_time_by_hand():
    # vLLM PR #23280, N=2112 K=7168 on H100: 2 M N K / (TFLOP/s) at batch 1 and 16
    triton = (2 * 2112 * 7168 / 1.298436e12 + 16 * 2 * 2112 * 7168 / 20.755163e12) / 2
    cutlass = (2 * 2112 * 7168 / 0.893065e12 + 16 * 2 * 2112 * 7168 / 13.940020e12) / 2
    assert triton == pytest.approx(23.33e-6, abs=0.01e-6) and cutlass == pytest.approx(34.33e-6, abs=0.01e-6)
    # DeepGEMM README @55ab91f: M=64 N=2112 K=7168 at 206 TFLOPS
    deepgemm = 2 * 64 * 2112 * 7168 / 206e12
    assert deepgemm == pytest.approx(9.41e-6, abs=0.01e-6)
    assert gemm_efficiency.BLOCK_FP8_SMALL_M_GEMM_SECONDS == {
        "triton": triton,
        "cutlass": cutlass,
        "deepgemm": deepgemm,
    }
    # DeepSeek-R1: MoE layers carry shared experts, so every layer has four block-FP8 GEMMs; Qwen3 MoE has two
    assert gemm_efficiency.block_fp8_gemms_per_layer(61, 3, 58) == 4
    assert gemm_efficiency.block_fp8_gemms_per_layer(48, 0, 0) == 2


def test_deepseek_r1_decode_pays_the_small_m_block_fp8_kernels():
    from planner.inference.scenario_inputs import scenario_inputs
    from planner.inference.step_overheads import block_fp8_floor_seconds_per_layer
    from planner.physics.runtimes import runtime_profile

    base = dict(model="deepseek-r1", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8", concurrency=4)
    kernel = gemm_efficiency.BLOCK_FP8_SMALL_M_GEMM_SECONDS

    def floor(runtime="vllm", **kw):
        i = scenario_inputs(InferenceScenario(**{**base, **kw}))
        return block_fp8_floor_seconds_per_layer(i.arch, 1, 61, i.hw, runtime_profile(runtime))

    # four block-FP8 GEMMs per layer, each at least the release's small-M kernel time, and the routed experts' two
    # plain tails in the 58 MoE layers (the fused-MoE call's fixed time is counted net of them)
    routed = 2 * 58 / 61 * 6.6e-6
    assert floor() == pytest.approx(4 * kernel["deepgemm"] + routed)
    assert floor("vllm@0.6") == pytest.approx(4 * kernel["triton"] + routed)
    assert floor("tensorrt-llm") == 0.0  # no published small-M figure for its own block-FP8 kernels
    assert floor(fp8_scaling="tensor") == 0.0  # per-tensor scales: cuBLAS-class kernels
    assert floor(gpu="b200") == 0.0  # Blackwell's tensor cores apply the block scales
    # a decode step of four sequences reaches the floor; a 3,200-token prefill does not (its GEMMs run at the
    # block-FP8 ceiling, which already holds the kernels' fixed time)
    v0 = metrics_of(InferenceScenario(**base, runtime="vllm@0.7.3", prompt_tokens=3200))
    assert v0.decode.kernels.gemm_compute == pytest.approx(61 * floor("vllm@0.6"))
    assert v0.prefill.kernels.gemm_compute > 61 * floor("vllm@0.6")
    assert v0.prefill.kernels.gemm_tail == pytest.approx(61 * 4 * 6.6e-6)
