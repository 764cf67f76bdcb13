"""Serving-runtime memory accounting (planner.physics.runtimes): the vLLM V1 and v0.1 KV-pool rules worked by
hand, the choice carried by share links and CSV rows, and an unknown runtime answered with a sentence."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from planner import plan
from planner.errors import explain
from planner.export import plans_to_csv, scenarios_from_csv
from planner.inference.scenario import InferenceScenario
from planner.model.catalog import resolve_model
from planner.physics import memory as mem
from planner.physics.runtimes import RUNTIMES, non_torch_bytes, runtime_profile, sampler_peak_bytes
from planner.search.sweep import evaluate_inference
from planner.share import query_params_to_scenario, share_url

GIB = 2**30


def _kv_pool_bytes(p) -> float:
    return p.memory.budget_bytes - (p.memory.total_bytes - p.memory.components["kv_cache_bytes"])


def test_vllm_v1_log_line_is_the_formula():
    # A vLLM V1 serve log (Aug 2025, ~v0.10; meta-llama/Llama-3.2-1B, gpu_worker.py lines 265-279):
    #   "Requested memory: 0.90 (util), 39.88 GiB"
    #   "Total non KV cache memory: 2.78GiB; torch peak memory increase: 0.45GiB;
    #    non-torch forward increase memory: 0.02GiB; weights memory: 2.32GiB."
    #   "Available KV cache memory: 37.10 GiB"
    # vllm/utils/mem_utils.py: non_kv = weights + torch peak increase + non-torch increase, and
    # gpu_worker.py: available = requested - non_kv. The log rounds each figure to 0.01 GiB.
    requested, weights, torch_peak, non_torch = 39.88, 2.32, 0.45, 0.02
    assert requested - (weights + torch_peak + non_torch) == pytest.approx(37.10, abs=0.015)


def test_vllm_v1_budget_worked_by_hand():
    # Llama-3.1-8B, bf16, one H100 (80 GiB visible = 85,899,345,920 B), gpu_memory_utilization 0.9, 64 sequences,
    # max_num_batched_tokens 8192.
    s = InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, concurrency=64)
    p = plan(s)
    arch = resolve_model("llama-3.1-8b")
    c = p.memory.components
    budget = 0.9 * p.memory.capacity_bytes
    # profiling step: 8192 tokens x (2h + max(attention, MLP)) x 2 bytes; h = 4096, MLP = 3 x 14336 = 43,008
    # (wider than attention: (2 x 32 + 2 x 8) x 128 = 10,240) -> 8192 x (8192 + 43,008) x 2 = 838,860,800 B
    assert c["activations_bytes"] == pytest.approx(8192 * (2 * 4096 + 3 * 14336) * 2)
    assert c["activations_bytes"] == pytest.approx(838_860_800)
    # sampler: 4 fp32 copies x min(64 seqs, 8192) rows x 128,256 vocab x 4 B = 131,334,144 B, under the forward's
    # peak: the run's torch peak is max(forward, sampler) (intermediates are freed before sampling), no excess
    assert c["logits_bytes"] == 0.0
    # non-torch growth at TP1: 0.25 GiB
    assert c["runtime_overhead_bytes"] == pytest.approx(0.25 * GIB)
    # KV pool = 0.9 x total - weights - torch peak max(838,860,800, 131,334,144) - non-torch
    expected = budget - c["weights_bytes"] - 838_860_800 - 0.25 * GIB
    assert _kv_pool_bytes(p) == pytest.approx(expected)
    # and the plan's max concurrency is that pool over one sequence's blocks (2560 tokens, 16-token blocks)
    per_sequence = mem.kv_cache_bytes_per_sequence(arch, 1, 1, 2560, 2.0, 16)
    assert p.memory.max_concurrency == int(np.floor(expected / per_sequence))
    # max_num_seqs 1024: the sampler, 4 x 1024 x 128,256 x 4 = 2,101,346,304 B, now sets the peak; the breakdown
    # charges its excess over the forward, 2,101,346,304 - 838,860,800 = 1,262,485,504 B
    wide = plan(InferenceScenario.model_validate({**s.model_dump(), "concurrency": 1024}))
    assert wide.memory.components["logits_bytes"] == pytest.approx(1_262_485_504)
    assert _kv_pool_bytes(wide) == pytest.approx(budget - c["weights_bytes"] - 2_101_346_304 - 0.25 * GIB)


def test_vllm_v0_counts_only_the_torch_peak():
    # OPT-13B on one A100-40GB (42,949,672,960 B) as the PagedAttention paper ran it: utilization 0.9, 2560-token
    # profiling step, 256 sequences. No non-torch term.
    s = InferenceScenario(
        model="opt-13b",
        gpu="a100-40gb",
        num_gpus=1,
        tensor_parallel=1,
        prompt_tokens=1024,
        output_tokens=1024,
        concurrency=256,
        prefill_chunk_tokens=2560,
        runtime="vllm-v0",
    )
    p = plan(s)
    c = p.memory.components
    assert c["runtime_overhead_bytes"] == 0.0
    # activations: 2560 x (2 x 5120 + 2 x 20480) x 2 B (OPT's GeLU MLP: up and activation)
    assert c["activations_bytes"] == pytest.approx(2560 * (2 * 5120 + 2 * 20480) * 2)
    # sampler: 3 fp32 copies x 256 rows x 50,272 vocab x 4 B = 154,435,584 B < 524,288,000 B: no excess
    assert c["logits_bytes"] == 0.0
    expected = 0.9 * 42_949_672_960 - c["weights_bytes"] - 2560 * (2 * 5120 + 2 * 20480) * 2
    assert _kv_pool_bytes(p) == pytest.approx(expected)
    # The paper's Table 1: 12 GB for KV (15.7K slots x 800 KB = 12.0 GiB); within 5 %.
    assert _kv_pool_bytes(p) / GIB == pytest.approx(12.0, rel=0.05)


def test_non_torch_memory_grows_with_tensor_parallel_and_broadcasts():
    v1 = runtime_profile("vllm")
    tp = np.array([1, 2, 4, 8, 16])
    assert list(non_torch_bytes(v1, True, tp) / GIB) == pytest.approx([0.25, 2.1, 2.1, 5.7, 5.7])
    assert non_torch_bytes(v1, False, 8) == 0.0  # a CPU device has no NCCL or CUDA buffers
    assert non_torch_bytes(runtime_profile("vllm-v0"), True, 8) == 0.0


def test_sampler_reserve_scales_with_vocabulary_not_model_size():
    v1 = runtime_profile("vllm")
    small, big = resolve_model("llama-3.2-1b"), resolve_model("llama-3.1-70b")
    assert small.vocab_size == big.vocab_size
    assert sampler_peak_bytes(v1, small, 256) == sampler_peak_bytes(v1, big, 256)


def test_every_runtime_cites_its_source_and_version():
    for profile in RUNTIMES.values():
        assert profile.sources and profile.version and profile.budget_rule
        # the first source is the engine's own code: repository and file
        first = profile.sources[0]
        assert "/" in first and (".py" in first or ".cpp" in first)


def test_plan_assumptions_name_the_runtime():
    v1 = plan(InferenceScenario())
    v0 = plan(InferenceScenario(runtime="vllm-v0"))
    assert any(a.startswith("Runtime: vLLM V1") for a in v1.assumptions)
    assert any(a.startswith("Runtime: vLLM v0.1") for a in v0.assumptions)
    # V1 charges NCCL / all-reduce growth and four sampler copies, so its pool is smaller than v0.1's
    assert _kv_pool_bytes(v1) < _kv_pool_bytes(v0)


def test_runtime_round_trips_through_share_link_and_csv():
    scenario = InferenceScenario(runtime="vllm-v0", concurrency=3)  # the old name reads as its profile's key
    url = share_url(scenario, "https://headroom.example")
    assert "runtime=vllm%400.1" in url
    query = dict(parse_qs(urlparse(url).query).items())
    restored, warnings = query_params_to_scenario(query, "inference", "inference_")
    assert warnings == []
    assert restored == scenario
    assert scenarios_from_csv(plans_to_csv([plan(scenario)])) == [scenario]


def test_unknown_runtime_gets_a_sentence():
    with pytest.raises(ValidationError) as info:
        InferenceScenario(runtime="tgi")  # type: ignore[arg-type]
    message = explain(info.value)
    assert "runtime" in message and "vllm" in message and "Traceback" not in message
    scenario, warnings = query_params_to_scenario({"inference_runtime": "tgi"}, "inference", "inference_")
    assert scenario.runtime == "vllm"
    assert any("runtime" in w for w in warnings), warnings


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_sweep_uses_the_same_runtime_terms(runtime):
    base = InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=8, tensor_parallel=1, runtime=runtime)
    grid = pd.DataFrame({"tensor_parallel": [1, 2, 4, 8], "num_gpus": [8, 8, 8, 8]})
    frame = evaluate_inference(base, grid)
    for tp, row in zip(grid["tensor_parallel"], frame.itertuples()):
        single = plan(InferenceScenario.model_validate({**base.model_dump(), "tensor_parallel": tp}))
        assert row.runtime_overhead_bytes == pytest.approx(single.memory.components["runtime_overhead_bytes"])
        assert row.logits_bytes == pytest.approx(single.memory.components["logits_bytes"])
        assert row.max_concurrency == single.memory.max_concurrency


# Llama-3.1-8B in bf16 on one H100 (85,520,809,984 B in the catalog): weights 8,030,261,248 x 2 B = 16,060,522,496 B;
# KV per token 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B; the widest layer moment per token
# (2 x 4096 + 3 x 14,336) x 2 B = 102,400 B; vocabulary 128,256.
H100_BYTES = 85_520_809_984
LLAMA_8B_WEIGHTS = 16_060_522_496
LLAMA_8B_KV_PER_TOKEN = 131_072
LLAMA_8B_ACTIVATION_PER_TOKEN = 102_400


def _llama_8b(**fields) -> InferenceScenario:
    return InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, **fields)


def test_sglang_static_pool_worked_by_hand():
    # mem_fraction_static 0.88 (read from gpu_memory_utilization). Start-up (CUDA context) takes 0.5 GiB =
    # 536,870,912 B before the pool is sized; the pool is 0.88 x (85,520,809,984 - 536,870,912) = 0.88 x
    # 84,983,939,072 = 74,785,866,383.36 B of weights and KV; the other 0.12 = 10,198,072,688.64 B is the reserve.
    p = plan(_llama_8b(runtime="sglang", gpu_memory_utilization=0.88, concurrency=64))
    c = p.memory.components
    assert p.memory.capacity_bytes == H100_BYTES and p.memory.budget_bytes == H100_BYTES
    assert c["weights_bytes"] == LLAMA_8B_WEIGHTS
    assert c["runtime_overhead_bytes"] == 536_870_912
    assert c["static_pool_reserve_bytes"] == pytest.approx(10_198_072_688.64)
    assert c["activations_bytes"] == 0.0 and c["logits_bytes"] == 0.0  # outside the pool, in the reserve
    # KV pool = 74,785,866,383.36 - 16,060,522,496 = 58,725,343,887.36 B = 448,038 tokens of 131,072 B (page 1)
    assert _kv_pool_bytes(p) == pytest.approx(58_725_343_887.36)
    assert p.memory.max_concurrency == 448_038 // 2560  # 2560-token sequences: 175
    assert any(a.startswith("Runtime: SGLang") and "mem_fraction_static" in a for a in p.assumptions)


def test_tensorrt_llm_free_fraction_worked_by_hand():
    # free_gpu_memory_fraction 0.9; profiling run of 8192 tokens: 8192 x 102,400 = 838,860,800 B of activations;
    # its sampler (one fp32 copy of 64 x 128,256 logits = 32,833,536 B) stays under them; non-torch at TP1 0.75 GiB
    # (CUDA context 0.5 + 0.25 growth) = 805,306,368 B. Peak = 16,060,522,496 + 838,860,800 + 805,306,368 =
    # 17,704,689,664 B; free = 67,816,120,320 B; KV = 0.9 x free = 61,034,508,288 B; reserve = 6,781,612,032 B.
    p = plan(_llama_8b(runtime="tensorrt-llm", gpu_memory_utilization=0.9, concurrency=64))
    c = p.memory.components
    assert c["activations_bytes"] == 838_860_800 and c["logits_bytes"] == 0.0
    assert c["runtime_overhead_bytes"] == 805_306_368
    assert c["free_memory_reserve_bytes"] == pytest.approx(6_781_612_032)
    assert _kv_pool_bytes(p) == pytest.approx(61_034_508_288)
    # 2560-token sequences in 32-token blocks: 80 blocks x 32 x 131,072 = 335,544,320 B each -> 181 sequences
    assert p.memory.max_concurrency == 181
    # vLLM V1 at the same share keeps less: 0.9 x capacity - weights - activations - 0.25 GiB non-torch
    vllm = plan(_llama_8b(gpu_memory_utilization=0.9, concurrency=64))
    assert _kv_pool_bytes(vllm) == pytest.approx(0.9 * H100_BYTES - LLAMA_8B_WEIGHTS - 838_860_800 - 0.25 * GIB)
    assert _kv_pool_bytes(vllm) < _kv_pool_bytes(p)


def test_hf_transformers_holds_the_whole_prompt_and_contiguous_caches():
    # 8 sequences of 2048 + 128 tokens: prefill runs 8 x 2048 = 16,384 tokens at once: 16,384 x 102,400 =
    # 1,677,721,600 B; KV is contiguous at full length, no blocks: 8 x 2176 x 131,072 = 2,281,701,376 B; sampler
    # 2 fp32 copies x 8 x 128,256 x 4 B = 8,208,384 B < the forward: no excess. No budget fraction.
    p = plan(_llama_8b(runtime="hf-transformers", prompt_tokens=2048, output_tokens=128, concurrency=8))
    c = p.memory.components
    assert c["activations_bytes"] == 1_677_721_600
    assert c["kv_cache_bytes"] == 8 * 2176 * LLAMA_8B_KV_PER_TOKEN == 2_281_701_376
    assert c["logits_bytes"] == 0.0 and c["runtime_overhead_bytes"] == 536_870_912
    assert p.memory.budget_bytes == H100_BYTES
    assert set(c) == {"weights_bytes", "kv_cache_bytes", "activations_bytes", "logits_bytes", "runtime_overhead_bytes"}
    # It fits when everything fits the device: 16,060,522,496 + 2,281,701,376 + 1,677,721,600 + 536,870,912
    assert p.memory.total_bytes == pytest.approx(20_556_816_384)


def test_llama_cpp_preallocates_the_context_and_compute_buffers():
    # 4 slots x 4096 tokens: n_ctx 16,384 cells x 131,072 B = 2,147,483,648 B of f16 KV. Compute buffers: one
    # 512-token micro-batch, 512 x 102,400 = 52,428,800 B, its fp32 logits 512 x 128,256 x 4 = 262,668,288 B,
    # and the output buffer 4 x 128,256 x 4 = 2,052,096 B: 317,149,184 B (302.5 MiB).
    p = plan(_llama_8b(runtime="llama.cpp", prompt_tokens=3968, output_tokens=128, concurrency=4))
    c = p.memory.components
    assert c["kv_cache_bytes"] == 16_384 * LLAMA_8B_KV_PER_TOKEN
    assert c["compute_buffers_bytes"] == 317_149_184
    assert c["activations_bytes"] == 0.0 and c["logits_bytes"] == 0.0
    assert p.memory.budget_bytes == H100_BYTES


def test_default_vllm_plan_keeps_its_components():
    p = plan(InferenceScenario())
    assert list(p.memory.components) == [
        "weights_bytes",
        "kv_cache_bytes",
        "activations_bytes",
        "logits_bytes",
        "runtime_overhead_bytes",
    ]


def test_only_engines_with_custom_all_reduce_use_peer_memory():
    assert runtime_profile("vllm").custom_allreduce and runtime_profile("sglang").custom_allreduce
    assert runtime_profile("tensorrt-llm").custom_allreduce
    assert not runtime_profile("hf-transformers").custom_allreduce and not runtime_profile("llama.cpp").custom_allreduce


@pytest.mark.parametrize("runtime", ["sglang", "tensorrt-llm"])
def test_an_overlap_scheduler_hides_the_per_step_cpu_work(runtime):
    """SGLang's zero-overhead scheduler and TensorRT-LLM's overlap scheduler prepare step n + 1 while the GPU runs
    step n: the decode step loses exactly vLLM's per-step CPU time, 0.4 ms + 8 x 1.1 us = 408.8 us at batch 8; the
    sampler (GPU work) stays."""
    overlapped, vllm = plan(_llama_8b(runtime=runtime, concurrency=8)), plan(_llama_8b(concurrency=8))
    gap = vllm.performance.decode_step_seconds - overlapped.performance.decode_step_seconds
    assert gap == pytest.approx(0.4e-3 + 8 * 1.1e-6, rel=1e-9)
    assert any("overlaps scheduling" in a for a in overlapped.assumptions)
    assert any("PR #42131" in a for a in vllm.assumptions)


def test_tensorrt_llm_engine_releases_budget_alike_but_pay_the_cpu_time():
    engine, pytorch = runtime_profile("tensorrt-llm-engine"), runtime_profile("tensorrt-llm")
    assert engine.budget_kind == pytorch.budget_kind and engine.non_torch_bytes_by_tensor_parallel == (
        pytorch.non_torch_bytes_by_tensor_parallel
    )
    assert pytorch.host_work_overlapped and not engine.host_work_overlapped
    a = plan(_llama_8b(runtime="tensorrt-llm-engine", concurrency=8))
    b = plan(_llama_8b(runtime="tensorrt-llm", concurrency=8))
    assert a.memory.components == b.memory.components
    assert a.performance.decode_step_seconds - b.performance.decode_step_seconds == pytest.approx(408.8e-6, rel=1e-9)
    assert any("assumed" in x and "overlap scheduler" in x for x in a.assumptions)


def test_a_simulated_step_under_an_overlap_scheduler_pays_no_cpu_time():
    from planner.inference.traffic import TrafficEngine
    from planner.inference.workload import Traffic

    engine = TrafficEngine.of(_llama_8b(runtime="sglang", concurrency=8), traffic=Traffic(num_requests=4, seed=0))
    terms = engine.step_cost(engine.requests()).step(4, 4 * 3000.0, [(0, 512)])
    assert terms.scheduler_seconds == 0.0 and terms.sampler_seconds > 0
