"""Kernel groups: a step's dense GEMMs, fused-MoE calls and attention are separate kernels that run one after
another, each its own roofline (`roofline.kernel_groups_seconds`), by hand."""

from __future__ import annotations

import pytest

from planner import InferenceScenario, plan
from planner.hardware.catalog import get_accelerator
from planner.model.catalog import resolve_model
from planner.physics import roofline

from .test_steps import metrics_of


def test_groups_add_their_own_rooflines():
    # GEMMs need 3 ms of compute and 1 ms of bytes, attention 1 ms of compute and 4 ms of bytes: 3 + 4 = 7 ms,
    # where one roofline over the step would say max(3 + 1, 1 + 4) = 5 ms.
    assert roofline.kernel_groups_seconds(3e-3, 1e-3, 0.0, 0.0, 1e-3, 4e-3) == pytest.approx(7e-3)
    # The fused-MoE calls are a third group: + max(2, 0.5) ms.
    assert roofline.kernel_groups_seconds(3e-3, 1e-3, 2e-3, 0.5e-3, 1e-3, 4e-3) == pytest.approx(9e-3)
    # When every group is bound by the same resource, the groups' sum is the one roofline.
    assert roofline.kernel_groups_seconds(1e-3, 3e-3, 0.2e-3, 0.5e-3, 1e-3, 4e-3) == pytest.approx(7.5e-3)
    assert roofline.context_free_groups(3e-3, 1e-3, 2e-3, 0.5e-3) == (0.0, 0.0, pytest.approx(5e-3))


def _llama_8b_fp8(gpu: str, concurrency: int) -> InferenceScenario:
    return InferenceScenario(
        model="llama-3.1-8b",
        gpu=gpu,
        num_gpus=1,
        tensor_parallel=1,
        weight_dtype="fp8",
        kv_cache_dtype="fp8",
        prompt_tokens=128,
        output_tokens=2048,
        concurrency=concurrency,
        gpu_memory_utilization=0.95,
    )


def test_a_large_decode_batch_pays_its_gemms_and_its_kv_read():
    """Llama-3.1-8B in FP8 on one H200, 900 sequences at a mean context of 128 + 2048 / 2 = 1,152 tokens (NVIDIA's
    128/2048 max-throughput row runs this shape): the GEMMs are compute-bound, the attention reads
    900 x 1,152 x 64 KiB = 68.0 GB of KV at 0.8 x 4.8 TB/s = 17.7 ms, and the step pays both."""
    m = metrics_of(_llama_8b_fp8("h200", 900))
    k = m.decode.kernels
    h200 = get_accelerator("h200")
    kv_bytes = 900 * 1152 * (32 * 8 * 128 * 2 * 1)  # layers x KV heads x head dim x (K, V) x 1 B
    assert kv_bytes == 67_947_724_800
    assert k.mixing_memory == pytest.approx(kv_bytes / (h200.memory_bandwidth_bytes_per_second * 0.8), rel=1e-9)
    assert k.gemm_compute > k.gemm_memory  # 900 tokens through 8 B parameters: compute-bound GEMMs
    assert k.mixing_memory > k.mixing_compute  # GQA attention over an FP8 cache: bandwidth-bound
    assert k.seconds == pytest.approx(k.gemm_compute + k.mixing_memory)
    assert k.seconds > max(k.compute_seconds, k.memory_seconds) * 1.3  # one roofline would hide a third of it
    # Which resource binds is per group: time in compute-bound kernels and in bandwidth-bound ones.
    assert k.compute_bound_seconds == pytest.approx(k.gemm_compute)
    assert k.memory_bound_seconds == pytest.approx(k.mixing_memory)
    assert m.decode.terms()["PP x kernel groups"] == pytest.approx(k.seconds)


def test_batch_one_decode_and_a_long_prefill_are_one_roofline():
    """Where every group is bound by the same resource (batch-1 decode: bandwidth; a 2,048-token prefill:
    compute) the groups' sum is the single roofline, so those cases do not move."""
    m = metrics_of(InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, concurrency=1))
    decode, prefill = m.decode.kernels, m.prefill.kernels
    assert decode.seconds == pytest.approx(max(decode.compute_seconds, decode.memory_seconds), rel=1e-12)
    assert prefill.seconds == pytest.approx(max(prefill.compute_seconds, prefill.memory_seconds), rel=1e-12)


def test_h200_gains_over_h100_what_its_bandwidth_buys_the_attention_only():
    """NVIDIA's TensorRT-LLM table (reference rows T015/T016: Llama-3.1-8B FP8, 128/2048, max throughput) measures
    26,221 tokens/s on H200 and 22,714 on H100: 1.15x, for 1.43x the bandwidth and the same FLOPs. With the GEMMs
    compute-bound at these batches, only the attention's share of the step speeds up; a single roofline over the
    step gave 1.50x (36,646 / 24,351)."""
    h200 = plan(_llama_8b_fp8("h200", 2048))
    h100 = plan(_llama_8b_fp8("h100-sxm", 2048))
    ratio = h200.performance.output_tokens_per_second / h100.performance.output_tokens_per_second
    assert 1.1 < ratio < 1.35
    assert h200.performance.decode.binding == "memory_bandwidth"  # the KV read is still the larger group
    assert h200.performance.decode.compute_bound_seconds > 0.3 * h200.performance.decode.seconds


@pytest.mark.parametrize(
    ("gpu", "weight_dtype", "kv_cache_dtype", "gemm_peak", "attention_peak"),
    [
        # DeepSeek-R1's FP8 checkpoint served with vLLM's default BF16 cache: FP8 GEMMs, BF16 attention
        ("h200", "fp8", "bf16", 1979e12, 989e12),
        # an FP8 cache: attention's QK and PV in FP8 too (vLLM blog 2026-04-22)
        ("h200", "fp8", "fp8", 1979e12, 1979e12),
        # A100 has no FP8 tensor cores: an FP8 cache is dequantized, attention runs in BF16
        ("a100-80gb", "bf16", "fp8", 312e12, 312e12),
    ],
)
def test_attention_runs_in_the_kv_caches_format(gpu, weight_dtype, kv_cache_dtype, gemm_peak, attention_peak):
    from planner.inference.inputs import HardwareInputs

    accel = get_accelerator(gpu)
    hw = HardwareInputs.from_accelerator(accel, weight_dtype, 1.0, None, kv_cache_dtype)
    assert hw.peak_flops_per_second == pytest.approx(gemm_peak, rel=0.01)
    assert hw.attention_peak_flops_per_second == pytest.approx(attention_peak, rel=0.01)


def test_a_long_fp8_prefill_with_a_bf16_cache_attends_at_the_bf16_peak():
    """Qwen3-32B-sized attention over a 32k prompt in FP8 weights: the attention group's compute time is its FLOPs
    at the BF16 peak x the prefill efficiency x H200's BF16 ceiling ratio; an FP8 cache halves it (FP8 peak, FP8
    ceiling)."""
    from planner.physics.flops import prefill_mixing_flops
    from planner.physics.gemm_efficiency import ceiling_ratio

    def scenario(kv):
        return InferenceScenario(
            model="llama-3.1-8b",
            gpu="h200",
            num_gpus=1,
            tensor_parallel=1,
            weight_dtype="fp8",
            kv_cache_dtype=kv,
            prompt_tokens=32_000,
            output_tokens=16,
            concurrency=1,
        )

    bf16_cache, fp8_cache = metrics_of(scenario("bf16")), metrics_of(scenario("fp8"))
    arch = scenario("bf16").architecture()
    flops = prefill_mixing_flops(arch, 32_000)
    h200 = get_accelerator("h200")
    expected = flops / (h200.peak_flops("bf16") * 0.60 * ceiling_ratio("h200", "bf16"))
    assert bf16_cache.prefill.kernels.mixing_compute == pytest.approx(expected, rel=1e-9)
    expected_fp8 = flops / (h200.peak_flops("fp8") * 0.60 * ceiling_ratio("h200", "fp8"))
    assert fp8_cache.prefill.kernels.mixing_compute == pytest.approx(expected_fp8, rel=1e-9)
    assert bf16_cache.prefill.kernels.gemm_compute == pytest.approx(fp8_cache.prefill.kernels.gemm_compute)


def test_small_gemms_whose_time_is_their_fixed_cost_are_not_compute_bound():
    """Review regression: DeepSeek-R1 at batch 1 on 8 x H200. Its GEMM group's compute time is mostly the kernels'
    fixed time (61 layers x 4 x 6.6 us = 1.61 ms); its FLOPs take far less than its bytes, so decode is
    bandwidth-bound, and the sentence names the time per bound group."""
    p = plan(
        InferenceScenario(
            model="deepseek-r1",
            gpu="h200",
            num_gpus=8,
            tensor_parallel=8,
            concurrency=1,
            prompt_tokens=2048,
            output_tokens=512,
        )
    )
    assert p.bottleneck == "memory_bandwidth" and p.performance.decode.binding == "memory_bandwidth"
    assert "in bandwidth-bound kernels" in p.bottleneck_reason
    d = p.performance.decode
    assert d.memory_bound_seconds > d.compute_bound_seconds


def test_a_short_last_prefill_chunk_pays_for_its_own_tokens():
    """Review regression: 8,200 tokens in 8,192-token chunks are a full chunk and an 8-token one. The short chunk
    streams only the experts its 8 tokens reach (Qwen3-30B-A3B: 128 experts, top-8, uniform routing:
    1 - (120/128)^8 = 40.3 % of them), not the average chunk's; and each chunk pays its own launches and
    collectives, as the traffic simulation steps them."""
    from planner.inference.steps import prefill_weight_read_bytes
    from planner.inference.traffic import TrafficEngine
    from planner.inference.workload import Traffic

    arch = resolve_model("qwen3-30b-a3b")
    assert (arch.num_experts, arch.experts_per_token) == (128, 8)
    weights, routed = 1000.0, 600.0
    reads, experts = prefill_weight_read_bytes(weights, routed, arch, 8200, 2, 8192)
    touched = 1 - (120 / 128) ** 8
    assert touched == pytest.approx(0.4033, abs=1e-4)
    assert experts == pytest.approx(routed * (1 - (1 - 8 / 128) ** 8192) + routed * touched)
    assert reads == pytest.approx(2 * weights - routed * (1 - touched) - routed * (1 - 8 / 128) ** 8192)

    scenario = InferenceScenario(
        model="qwen3-30b-a3b",
        num_gpus=2,
        tensor_parallel=2,
        concurrency=1,
        prompt_tokens=8200,
        prefill_chunk_tokens=8192,
    )
    m = metrics_of(scenario)
    engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=1))
    cost = engine.step_cost(engine.requests())
    first, last = cost.step(0, 0, [(0, 8192)]), cost.step(0, 0, [(8192, 8200)])
    assert m.prefill.collective_seconds == pytest.approx(first.collective_seconds + last.collective_seconds)
    assert m.prefill.overhead_seconds == pytest.approx(first.overhead_seconds + last.overhead_seconds)
