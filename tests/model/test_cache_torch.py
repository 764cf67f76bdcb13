"""Ground truth for the per-layer cache terms: the caches transformers' own models fill on the CPU.

A toy model of each family runs one forward pass with `use_cache=True`; the tensors left in its cache
are compared with `layer_kv_elements_per_token`, `layer_cached_tokens`, `linear_attention_state_elements`
and `mamba_state_elements`. Needs transformers (skipped without it).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from planner.model.cache import (
    layer_cached_tokens,
    layer_kv_elements_per_token,
    linear_attention_state_elements,
    mamba_state_elements,
)
from planner.model.hf_config import architecture_from_config
from tests.model.test_layer_kinds import GPT_OSS, NEMOTRON_H, QWEN3_NEXT

transformers = pytest.importorskip("transformers")


def cache_after_prompt(cfg: dict, prompt_tokens: int):
    keys = {k: v for k, v in cfg.items() if k != "model_type"}
    hf_config = transformers.AutoConfig.for_model(cfg["model_type"], **keys)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(hf_config, experts_implementation="eager").eval()
        with torch.no_grad():
            out = model(torch.arange(1, prompt_tokens + 1)[None], use_cache=True)
    return out.past_key_values.layers


def test_gpt_oss_kv_per_layer_matches_the_hf_cache():
    arch = architecture_from_config(GPT_OSS)
    sliding, full = cache_after_prompt(GPT_OSS, 9)
    for spec, layer in zip(arch.layers, (sliding, full)):
        _, kv_heads, _, head_dim = layer.keys.shape
        assert layer_kv_elements_per_token(arch, spec) == 2 * kv_heads * head_dim
    assert full.keys.shape[2] == layer_cached_tokens(arch.layers[1], 9) == 9
    # HF keeps window - 1 = 3 keys between steps; the next step attends 4 (the new token's too), which is
    # what the engine budgets: min(context, window)
    assert sliding.keys.shape[2] == 3 and layer_cached_tokens(arch.layers[0], 9) == 4


def test_gated_deltanet_state_matches_the_hf_cache():
    cfg = {**QWEN3_NEXT, "num_experts": 0}  # dense MLPs: the state does not depend on them
    arch = architecture_from_config(cfg)
    layers = cache_after_prompt(cfg, 5)
    recurrent, conv = linear_attention_state_elements(arch)
    kernel = cfg["linear_conv_kernel_dim"]
    for spec, layer in zip(arch.layers, layers):
        if spec.mixer == "linear_attention":
            assert layer.recurrent_states[0].numel() == recurrent  # (1, v_heads, k_dim, v_dim)
            # HF keeps `kernel` conv columns, vLLM (and the engine) kernel - 1
            assert layer.conv_states[0].numel() == conv / (kernel - 1) * kernel
        else:
            assert (
                layer.keys.shape[2] == 5 and layer_kv_elements_per_token(arch, spec) == 2 * layer.keys[0, :, 0].numel()
            )


def test_mamba2_state_matches_the_hf_cache():
    cfg = {**NEMOTRON_H, "hybrid_override_pattern": "M*-"}
    arch = architecture_from_config(cfg)
    mamba, attention, _ = cache_after_prompt(cfg, 5)
    ssm, conv = mamba_state_elements(arch)
    assert mamba.recurrent_states[0].numel() == ssm  # (1, heads, head_dim, d_state)
    assert mamba.conv_states[0].numel() == conv / (cfg["conv_kernel"] - 1) * cfg["conv_kernel"]
    assert attention.keys.shape[2] == 5
