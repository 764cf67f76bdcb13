"""The profiling step's activation peak for MoE and MLA models, and the V0-era MLA decode weights, against
hand-worked element counts (vLLM fused_moe.py fused_experts_impl; vllm/attention/backends/mla/utils.py)."""

import pytest

from planner.inference.scenario import InferenceScenario
from planner.physics import memory as mem
from planner.plan import plan


def _arch(model, **kw):
    return InferenceScenario(model=model, gpu="h200", **kw).architecture()


def test_deepseek_r1_prefill_peak_is_the_mla_working_set():
    arch = _arch("deepseek-r1", num_gpus=8, tensor_parallel=8, weight_dtype="fp8")
    # 16 heads per GPU: q, k, padded v and the attention output at 192 wide, kv_b_proj's output at 256,
    # latents 1536 + 512 + 64, the layer's preallocated output 7168
    assert mem.mla_prefill_activation_elements(arch, 8) == 16 * (4 * 192 + 256) + 2112 + 7168 == 25_664
    # routed copies: cache13 = max(2 x 256, 7168) shared by cache1 and cache3, cache2 = 256
    assert mem.fused_moe_workspace_elements(arch, 8) == 8 * (7168 + 256) == 59_392
    tokens = 163_840  # V0's max_num_batched_tokens = max_model_len without chunked prefill
    attention = tokens * (2 * 7168 + 25_664) * 2
    moe = tokens * ((3 * 7168) * 2 + 4 * 256) + 32_768 * 59_392 * 2
    assert attention == 13_107_200_000 and moe == 11_106_516_992
    assert mem.inference_activation_bytes(arch, 8, tokens, 2) == attention


def test_qwen3_moe_step_peak_is_the_un_summed_expert_outputs():
    arch = _arch("qwen3-30b-a3b")
    tokens = 8192
    workspace = 8 * (max(2 * 768, 2048) + 768)
    moe = tokens * (2 * 2048 * 2 + 4 * 128) + tokens * workspace * 2
    attention = tokens * (2 * 2048 + (2 * 32 + 2 * 4) * 128) * 2
    assert moe == 440_401_920 > attention
    assert mem.inference_activation_bytes(arch, 1, tokens, 2) == moe


def test_fused_moe_caches_stop_growing_past_one_chunk():
    arch = _arch("qwen3-30b-a3b")
    chunk = mem.FUSED_MOE_CHUNK_TOKENS
    per_token_outside = (2 * 2048) * 2 + 4 * 128
    grown = mem.inference_activation_bytes(arch, 1, 2 * chunk, 2) - mem.inference_activation_bytes(arch, 1, chunk, 2)
    assert grown == chunk * per_token_outside  # the second chunk reuses the first chunk's caches


def test_dense_models_keep_their_peak():
    arch = _arch("llama-3.1-8b")
    assert mem.inference_activation_bytes(arch, 1, 8192, 2) == 8192 * (2 * 4096 + 3 * 14336) * 2


def test_vllm_v0_mla_keeps_absorbed_decode_weights():
    base = dict(model="deepseek-r1", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8")
    v0 = plan(InferenceScenario(**base, runtime="vllm@0.7.3"))
    v1 = plan(InferenceScenario(**base, runtime="vllm"))
    # per layer and GPU: W_Q_UK 1536 x 16 x 512 and W_UV_O 16 x 512 x 7168 in FP8; W_QR 1536 x 16 x 64 and
    # W_UK / W_UV 512 x 16 x 256 in bf16; 61 layers
    per_layer = 16 * 512 * (1536 + 7168) * 1 + 16 * (1536 * 64 + 512 * 256) * 2
    assert per_layer == 78_643_200
    extra = v0.memory.components["weights_bytes"] - v1.memory.components["weights_bytes"]
    assert extra == pytest.approx(61 * per_layer, rel=1e-12)


def test_absorbed_weights_only_for_mla_models():
    arch = _arch("qwen3-30b-a3b")
    assert mem.mla_absorbed_weight_bytes(arch, 1, 1, 1, 2) == 0.0
    base = dict(model="llama-3.1-8b", gpu="h100-sxm")
    v0 = plan(InferenceScenario(**base, runtime="vllm@0.7.3"))
    v1 = plan(InferenceScenario(**base, runtime="vllm"))
    assert v0.memory.components["weights_bytes"] == v1.memory.components["weights_bytes"]


def test_absorbed_copies_of_a_bf16_checkpoint_are_bf16_and_never_read_by_a_step():
    base = dict(model="deepseek-r1", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="bf16")
    arch = InferenceScenario(**base).architecture()
    # W_Q_UK and W_UV_O in bf16, W_QR copied; kv_b_proj is viewed, not copied, when it is unquantized
    per_layer = 16 * 512 * (1536 + 7168) * 2 + 16 * 1536 * 64 * 2
    assert mem.mla_absorbed_weight_bytes(arch, 8, 1, False, 2) == 61 * per_layer
    from planner.inference.metrics import inference_metrics
    from planner.inference.scenario_inputs import scenario_inputs
    from planner.physics.efficiency import DEFAULT_EFFICIENCY

    def memory(runtime):
        i = scenario_inputs(InferenceScenario(**base, runtime=runtime))
        return inference_metrics(i.arch, i.counts, i.hw, DEFAULT_EFFICIENCY, i.inputs).memory

    v0, v1 = memory("vllm@0.7.3"), memory("vllm")
    assert v0.weight_copies_bytes == pytest.approx(61 * per_layer)
    assert v0.weights_bytes == pytest.approx(v1.weights_bytes + 61 * per_layer)
    assert v0.read_weight_bytes == pytest.approx(v1.read_weight_bytes)  # decode reads them in place of q_b / o_proj
