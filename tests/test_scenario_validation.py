"""Impossible layouts and malformed inputs are rejected at the edge with a sentence.

Every rejection is checked through `planner.errors.explain`, the function the UI and CLI use to show it:
the message must name the offending value and what it conflicts with, and carry no traceback or URL.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import InferenceScenario, PlanningError, explain, plan
from planner.hardware.catalog import resolve_accelerator
from planner.model.catalog import resolve_model
from planner.model.hf_config import architecture_from_config

LLAMA_TOY = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "max_position_embeddings": 512,
}


def rejection(**fields) -> str:
    """The explained message of a scenario that must not validate."""
    with pytest.raises((ValidationError, PlanningError)) as info:
        InferenceScenario(**fields)
    message = explain(info.value)
    assert message and "Traceback" not in message and "http" not in message
    return message


def config_rejection(**overrides) -> str:
    return rejection(model={**LLAMA_TOY, **overrides}, num_gpus=1, tensor_parallel=1)


# ---------------------------------------------------------------------------------------------
# layouts


def test_valid_layouts_plan():
    for fields in (
        dict(model="llama-3.1-70b", num_gpus=8, tensor_parallel=8),
        dict(model="llama-3.1-70b", num_gpus=16, tensor_parallel=16),  # 8 KV heads replicated twice
        dict(model="llama-3.1-70b", num_gpus=8, tensor_parallel=4, pipeline_parallel=2),
        dict(model="mixtral-8x7b", num_gpus=8, tensor_parallel=2, expert_parallel=8),  # EP across replicas
        dict(model="deepseek-v3", num_gpus=16, tensor_parallel=16),  # MLA: no KV-head constraint
        dict(model=LLAMA_TOY, num_gpus=2, tensor_parallel=2, gpu="cpu"),
    ):
        p = plan(InferenceScenario(**fields))
        assert p.memory.total_bytes > 0


def test_tp_not_dividing_heads():
    msg = rejection(model="llama-3.1-70b", num_gpus=3, tensor_parallel=3)
    assert msg == "tensor_parallel=3 does not divide the model's 64 attention heads"


def test_tp_not_a_multiple_of_kv_heads():
    # Qwen2.5-7B: 28 query heads (7 divides them), 4 KV heads (7 is neither a divisor nor a multiple)
    msg = rejection(model="qwen2.5-7b", num_gpus=7, tensor_parallel=7)
    assert "tensor_parallel=7" in msg and "4 KV heads" in msg and "replicated" in msg


def test_tp_not_dividing_kv_heads():
    # Phi-3 medium: 40 heads, 10 KV heads; TP 4 divides 40 but not 10
    msg = rejection(model="phi-3-medium-4k", num_gpus=4, tensor_parallel=4)
    assert msg == "tensor_parallel=4 does not divide the model's 10 KV heads"


def test_pp_more_than_layers():
    msg = rejection(model="gpt2", num_gpus=16, tensor_parallel=1, pipeline_parallel=16)
    assert msg == "pipeline_parallel=16 is more stages than the model's 12 layers"


def test_num_gpus_not_multiple_of_replica():
    msg = rejection(model="llama-3.1-8b", num_gpus=6, tensor_parallel=4)
    assert "num_gpus=6 is not a multiple of tensor_parallel x pipeline_parallel = 4" in msg
    assert "use 4 GPUs" in msg  # the suggestion is a valid count


def test_num_gpus_suggestion_when_fewer_than_replica():
    msg = rejection(model="llama-3.1-8b", num_gpus=2, tensor_parallel=4)
    assert "use 4 GPUs" in msg


def test_ep_not_dividing_experts():
    msg = rejection(model="mixtral-8x7b", num_gpus=3, tensor_parallel=1, expert_parallel=3)
    assert msg == "expert_parallel=3 does not divide the model's 8 experts"


def test_ep_on_dense_model():
    msg = rejection(model="llama-3.1-8b", num_gpus=2, tensor_parallel=1, expert_parallel=2)
    assert msg == "expert_parallel=2 needs a mixture-of-experts model; Llama 3.1 8B is dense"


def test_ep_incompatible_with_tp_and_gpus():
    msg = rejection(model="mixtral-8x7b", num_gpus=2, tensor_parallel=2, expert_parallel=4)
    assert "expert_parallel=4 must divide tensor_parallel=2" in msg and "2 GPUs of a pipeline stage" in msg


# ---------------------------------------------------------------------------------------------
# references


def test_unknown_model_id_lists_choices():
    msg = rejection(model="llama-9-1t", num_gpus=1, tensor_parallel=1)
    assert msg.startswith("unknown model 'llama-9-1t'")
    assert "llama-3.1-8b" in msg and "dense-70b" in msg and "config.json" in msg


def test_unknown_gpu_lists_choices():
    msg = rejection(model="llama-3.1-8b", gpu="tpu-v9", num_gpus=1, tensor_parallel=1)
    assert msg.startswith("unknown GPU 'tpu-v9'")
    assert "h100-sxm" in msg and "custom" in msg


def test_custom_gpu_missing_fields():
    msg = rejection(model="llama-3.1-8b", gpu={"memory_bytes": -1}, num_gpus=1, tensor_parallel=1)
    assert msg.startswith("custom GPU:")
    assert "memory_bytes" in msg and "greater than 0" in msg
    assert "memory_bandwidth_bytes_per_second: Field required" in msg
    assert "peak_flops_per_second" in msg


def test_custom_gpu_unknown_dtype():
    with pytest.raises(PlanningError) as info:
        resolve_accelerator(
            {
                "memory_bytes": 1 << 34,
                "memory_bandwidth_bytes_per_second": 1e12,
                "peak_flops_per_second": {"bf16": 1e14, "fp2": 1e15},
            }
        )
    assert "unknown dtype(s) ['fp2']" in explain(info.value)


def test_size_id_out_of_range():
    msg = rejection(model="dense-0.01b", num_gpus=1, tensor_parallel=1)
    assert "outside the supported 0.1B-10T range for dense models" in msg
    msg = rejection(model="moe-1b", num_gpus=1, tensor_parallel=1)
    assert "2B-10T range for MoE models" in msg


def test_model_of_wrong_type():
    msg = rejection(model=[1, 2], num_gpus=1, tensor_parallel=1)
    assert "model" in msg and "valid string" in msg and "valid dictionary" in msg


# ---------------------------------------------------------------------------------------------
# inline config.json


def test_unknown_model_type_names_the_needed_fields():
    msg = rejection(model={"model_type": "mamba", "hidden_size": 4}, num_gpus=1, tensor_parallel=1)
    assert msg.startswith("model_type 'mamba' is not supported")
    assert "llama" in msg and "deepseek_v3" in msg  # the supported list
    for field in (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "max_position_embeddings",
        "head_dim",
    ):
        assert field in msg, field


def test_missing_model_type():
    msg = config_rejection(model_type=None)
    assert "model_type None is not supported" in msg


def test_multimodal_wrapper_uses_text_config():
    arch = resolve_model({"model_type": "llava", "text_config": LLAMA_TOY})
    assert arch.hidden_size == 64


def test_missing_field_is_named():
    config = {k: v for k, v in LLAMA_TOY.items() if k != "intermediate_size"}
    msg = rejection(model=config, num_gpus=1, tensor_parallel=1)
    assert msg == "config.json is missing 'intermediate_size' (needed for model_type 'llama')"


@pytest.mark.parametrize("value", ["big", 2.5, True, [64]])
def test_malformed_number(value):
    msg = config_rejection(num_hidden_layers=value)
    assert msg == f"config.json field 'num_hidden_layers' must be a whole number, got {value!r}"


def test_whole_float_is_accepted():
    assert resolve_model({**LLAMA_TOY, "num_hidden_layers": 2.0}).num_layers == 2


def test_malformed_bool():
    msg = config_rejection(tie_word_embeddings="yes")
    assert msg == "config.json field 'tie_word_embeddings' must be true or false, got 'yes'"


def test_negative_and_zero_values():
    assert config_rejection(num_hidden_layers=-2) == (
        "config.json is not a plannable model: num_layers: Input should be greater than 0"
    )
    assert config_rejection(num_attention_heads=0) == (
        "config.json: hidden_size and num_attention_heads must be positive"
    )
    assert "vocab_size: Input should be greater than 0" in config_rejection(vocab_size=0)


def test_huge_values():
    assert "vocab_size: Input should be less than or equal to 20000000" in config_rejection(vocab_size=10**12)
    assert "hidden_size: Input should be less than or equal to 262144" in config_rejection(
        hidden_size=1 << 20, head_dim=64
    )
    assert "num_layers: Input should be less than or equal to 4096" in config_rejection(num_hidden_layers=10**6)


def test_heads_not_dividing_hidden_needs_head_dim():
    msg = config_rejection(num_attention_heads=5, num_key_value_heads=5)
    assert msg == "config.json: hidden_size 64 is not divisible by num_attention_heads 5; give head_dim"


def test_kv_heads_not_dividing_heads():
    msg = config_rejection(num_key_value_heads=3)
    assert msg == (
        "config.json is not a plannable model: num_attention_heads 4 is not a multiple of num_key_value_heads 3"
    )


def test_moe_config_inconsistencies():
    mixtral = {**LLAMA_TOY, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 5}
    assert "experts per token (5) must be between 1 and the 4 experts" in rejection(
        model=mixtral, num_gpus=1, tensor_parallel=1
    )
    deepseek = {
        "model_type": "deepseek_v3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "intermediate_size": 96,
        "moe_intermediate_size": 16,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 3,
        "num_hidden_layers": 3,
        "vocab_size": 50,
    }
    assert "first_k_dense_replace leaves no MoE layers" in rejection(model=deepseek, num_gpus=1, tensor_parallel=1)
    no_rope = {**deepseek, "first_k_dense_replace": 1, "qk_rope_head_dim": 0}
    assert "multi-head latent attention needs qk_rope_head_dim and v_head_dim" in rejection(
        model=no_rope, num_gpus=1, tensor_parallel=1
    )


def test_opt_projection_not_supported():
    opt = {
        "model_type": "opt",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "ffn_dim": 128,
        "vocab_size": 50,
        "max_position_embeddings": 16,
        "word_embed_proj_dim": 32,
    }
    with pytest.raises(PlanningError) as info:
        architecture_from_config(opt)
    assert "word_embed_proj_dim 32 != hidden_size 64" in explain(info.value)


def test_qwen_moe_dense_layers_at_positions_rejected():
    cfg = {
        **LLAMA_TOY,
        "model_type": "qwen3_moe",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "mlp_only_layers": [0],
    }
    with pytest.raises(PlanningError, match="mlp_only_layers"):
        architecture_from_config(cfg)


def test_config_must_be_an_object():
    with pytest.raises(PlanningError, match="config.json must be a JSON object"):
        architecture_from_config("llama")


# ---------------------------------------------------------------------------------------------
# scenario numbers


@pytest.mark.parametrize(
    "field,value,expected",
    [
        ("num_gpus", 0, "num_gpus: Input should be greater than or equal to 1"),
        ("num_gpus", 10**9, "num_gpus: Input should be less than or equal to 100000"),
        ("concurrency", -5, "concurrency: Input should be greater than or equal to 1"),
        ("prompt_tokens", 10**9, "prompt_tokens: Input should be less than or equal to 10000000"),
        ("output_tokens", 0, "output_tokens: Input should be greater than or equal to 1"),
        ("tensor_parallel", 0, "tensor_parallel: Input should be greater than or equal to 1"),
        ("gpu_memory_utilization", 1.5, "gpu_memory_utilization: Input should be less than or equal to 1"),
        ("gpu_memory_utilization", 0.0, "gpu_memory_utilization: Input should be greater than 0.05"),
        ("prefix_cache_hit_rate", -0.1, "prefix_cache_hit_rate: Input should be greater than or equal to 0"),
        ("kv_block_tokens", 0, "kv_block_tokens: Input should be greater than or equal to 1"),
        (
            "weight_dtype",
            "fp3",
            "weight_dtype: Input should be 'fp32', 'bf16', 'fp16', 'fp8', 'int8', 'nvfp4', 'mxfp4' or 'int4'",
        ),
        (
            "kv_cache_dtype",
            "mxfp4",
            "kv_cache_dtype: Input should be 'fp32', 'bf16', 'fp16', 'fp8', 'int8', 'nvfp4' or",
        ),
        ("usd_per_gpu_hour", -1.0, "usd_per_gpu_hour: Input should be greater than or equal to 0"),
        ("unknown_knob", 1, "unknown_knob: Extra inputs are not permitted"),
    ],
)
def test_scenario_field_limits(field, value, expected):
    base = dict(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1)
    assert expected in rejection(**{**base, field: value})


def test_scenario_is_frozen():
    s = InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1)
    with pytest.raises(ValidationError):
        s.tensor_parallel = 2  # type: ignore[misc]
