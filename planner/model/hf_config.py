"""Read a Hugging Face `config.json` (a catalog entry or a user's upload) into a ModelArchitecture.

One parser for both, so a catalog model and the same model uploaded by a user plan identically.
Each supported `model_type` maps its own key names onto the normalized fields; anything missing
or malformed becomes a PlanningError that names the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.model.architecture import ModelArchitecture

LLAMA_LIKE_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "max_position_embeddings",
)


def _get(config: dict, key: str, *alternatives: str, default: Any = ..., kind=int) -> Any:
    for name in (key, *alternatives):
        if name in config and config[name] is not None:
            value = config[name]
            break
    else:
        if default is ...:
            raise PlanningError(f"config.json is missing '{key}' (needed for model_type '{config.get('model_type')}')")
        return default
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise PlanningError(f"config.json field '{key}' must be a whole number, got {value!r}")
        return int(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise PlanningError(f"config.json field '{key}' must be true or false, got {value!r}")
        return value
    return value


def _heads(config: dict) -> tuple[int, int, int]:
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    kv = _get(config, "num_key_value_heads", default=heads)
    if heads <= 0 or hidden <= 0:
        raise PlanningError("config.json: hidden_size and num_attention_heads must be positive")
    head_dim = _get(config, "head_dim", default=None)
    if head_dim is None:
        if hidden % heads:
            raise PlanningError(
                f"config.json: hidden_size {hidden} is not divisible by num_attention_heads {heads}; give head_dim"
            )
        head_dim = hidden // heads
    return heads, kv, head_dim


def _llama_like(config: dict, **overrides) -> dict:
    heads, kv, head_dim = _heads(config)
    fields = dict(
        model_type=config["model_type"],
        num_layers=_get(config, "num_hidden_layers"),
        hidden_size=_get(config, "hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        intermediate_size=_get(config, "intermediate_size"),
        vocab_size=_get(config, "vocab_size"),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=False, kind=bool),
        max_context_tokens=_get(config, "max_position_embeddings", default=4096),
        qkv_bias=_get(config, "attention_bias", default=False, kind=bool),
        attn_out_bias=_get(config, "attention_bias", default=False, kind=bool),
        mlp_bias=_get(config, "mlp_bias", default=False, kind=bool),
    )
    fields.update(overrides)
    return fields


def _all_layers_sliding(config: dict) -> dict:
    window = _get(config, "sliding_window", default=None)
    if window is None or config.get("use_sliding_window") is False:
        return {}
    return {"sliding_window": window, "sliding_window_layers": _get(config, "num_hidden_layers")}


def _parse_llama(config: dict) -> dict:
    return _llama_like(config)


def _parse_mistral(config: dict) -> dict:
    return _llama_like(config, **_all_layers_sliding(config))


def _parse_qwen2(config: dict) -> dict:
    # Qwen2 attention always has q/k/v biases and no output bias; its sliding window is off unless
    # use_sliding_window is true.
    fields = _llama_like(config, qkv_bias=True, attn_out_bias=False)
    if config.get("use_sliding_window"):
        fields.update(_all_layers_sliding(config))
    return fields


def _parse_qwen3(config: dict) -> dict:
    return _llama_like(config, qk_norm=True)


def _parse_mixtral(config: dict) -> dict:
    experts = _get(config, "num_local_experts")
    return _llama_like(
        config,
        num_experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok"),
        expert_intermediate_size=_get(config, "intermediate_size"),
        **_all_layers_sliding(config),
    )


def _parse_qwen_moe(config: dict) -> dict:
    experts = _get(config, "num_experts")
    # Qwen3-MoE has no shared expert (HF ignores the key if a config carries it).
    shared_width = (
        _get(config, "shared_expert_intermediate_size", default=0) if config["model_type"] == "qwen2_moe" else 0
    )
    layers = _get(config, "num_hidden_layers")
    if config.get("mlp_only_layers"):
        raise PlanningError("config.json: mlp_only_layers (dense layers at arbitrary positions) is not supported")
    fields = _llama_like(
        config,
        num_experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok"),
        expert_intermediate_size=_get(config, "moe_intermediate_size"),
        shared_expert_intermediate_size=shared_width,
        shared_expert_gate=shared_width > 0,
        moe_layer_interval=_get(config, "decoder_sparse_step", default=1),
        moe_layer_phase=1,  # HF Qwen-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0
    )
    if config["model_type"] == "qwen2_moe":
        fields.update(qkv_bias=True, attn_out_bias=False)
    else:
        fields.update(qk_norm=True)
    del layers
    return fields


def _parse_gemma(config: dict) -> dict:
    return _llama_like(config, tie_word_embeddings=_get(config, "tie_word_embeddings", default=True, kind=bool))


def _parse_gemma2(config: dict) -> dict:
    layers = _get(config, "num_hidden_layers")
    fields = _parse_gemma(config)
    fields["norms_per_layer"] = 4  # input, post-attention, pre-feedforward, post-feedforward
    window = _get(config, "sliding_window", default=None)
    if window:
        # HF Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2) -> even layers slide.
        fields.update(sliding_window=window, sliding_window_layers=(layers + 1) // 2)
    return fields


def _parse_phi3(config: dict) -> dict:
    return _llama_like(config, **_all_layers_sliding(config))


def _parse_deepseek(config: dict) -> dict:
    layers = _get(config, "num_hidden_layers")
    heads = _get(config, "num_attention_heads")
    experts = _get(config, "n_routed_experts", default=0)
    moe_width = _get(config, "moe_intermediate_size", default=0)
    shared = _get(config, "n_shared_experts", default=0)
    q_lora = _get(config, "q_lora_rank", default=0)
    return dict(
        model_type=config["model_type"],
        num_layers=layers,
        hidden_size=_get(config, "hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=_get(config, "num_key_value_heads", default=heads),
        head_dim=_get(config, "qk_nope_head_dim") + _get(config, "qk_rope_head_dim"),
        intermediate_size=_get(config, "intermediate_size"),
        vocab_size=_get(config, "vocab_size"),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=False, kind=bool),
        max_context_tokens=_get(config, "max_position_embeddings", default=4096),
        num_experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok", default=0) if experts else 0,
        expert_intermediate_size=moe_width,
        shared_expert_intermediate_size=shared * moe_width,
        first_k_dense_layers=_get(config, "first_k_dense_replace", default=0),
        moe_layer_interval=_get(config, "moe_layer_freq", default=1),
        router_bias=config.get("topk_method") == "noaux_tc",
        q_lora_rank=q_lora,
        kv_lora_rank=_get(config, "kv_lora_rank"),
        qk_nope_head_dim=_get(config, "qk_nope_head_dim"),
        qk_rope_head_dim=_get(config, "qk_rope_head_dim"),
        v_head_dim=_get(config, "v_head_dim"),
    )


def _classic_mha(
    config: dict,
    model_type: str,
    hidden_keys=("hidden_size",),
    head_keys=("num_attention_heads",),
    layer_keys=("num_hidden_layers",),
    tied_default=True,
    **fields,
) -> dict:
    """Fields shared by the GPT-style families: full multi-head attention, LayerNorm with bias, a plain
    (non-gated) GeLU MLP. `fields` adds or overrides what a family does differently."""
    hidden = _get(config, *hidden_keys)
    heads = _get(config, *head_keys)
    if hidden % heads:
        raise PlanningError(f"config.json: {hidden_keys[0]} {hidden} is not divisible by {head_keys[0]} {heads}")
    common = dict(
        model_type=model_type,
        num_layers=_get(config, *layer_keys),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=4 * hidden,
        vocab_size=_get(config, "vocab_size"),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=tied_default, kind=bool),
        mlp_gated=False,
        norm_has_bias=True,
        qkv_bias=True,
        attn_out_bias=True,
        mlp_bias=True,
    )
    common.update(fields)
    return common


def _parse_gpt2(config: dict) -> dict:
    positions = _get(config, "n_positions", "max_position_embeddings")
    fields = _classic_mha(
        config,
        "gpt2",
        ("n_embd", "hidden_size"),
        ("n_head", "num_attention_heads"),
        ("n_layer", "num_hidden_layers"),
        max_context_tokens=positions,
        learned_position_embeddings=positions,
    )
    fields["intermediate_size"] = _get(config, "n_inner", default=fields["intermediate_size"])
    return fields


def _parse_gpt_neox(config: dict) -> dict:
    heads, _, head_dim = _heads(config)
    bias = _get(config, "attention_bias", default=True, kind=bool)
    return _classic_mha(
        config,
        "gpt_neox",
        tied_default=False,
        head_dim=head_dim,
        intermediate_size=_get(config, "intermediate_size"),
        max_context_tokens=_get(config, "max_position_embeddings", default=2048),
        qkv_bias=bias,
        attn_out_bias=bias,
    )


def _parse_gptj(config: dict) -> dict:
    # GPT-J: attention and MLP in parallel from one LayerNorm; q/k/v/out without bias, MLP with bias,
    # untied lm_head with a bias.
    fields = _classic_mha(
        config,
        "gptj",
        ("n_embd", "hidden_size"),
        ("n_head", "num_attention_heads"),
        ("n_layer", "num_hidden_layers"),
        tied_default=False,
        lm_head_bias=True,
        max_context_tokens=_get(config, "n_positions", "max_position_embeddings", default=2048),
        norms_per_layer=1,
        qkv_bias=False,
        attn_out_bias=False,
    )
    fields["intermediate_size"] = _get(config, "n_inner", default=fields["intermediate_size"])
    return fields


def _parse_opt(config: dict) -> dict:
    hidden = _get(config, "hidden_size")
    projection = _get(config, "word_embed_proj_dim", default=hidden)
    if projection != hidden:
        raise PlanningError(
            f"config.json: OPT with word_embed_proj_dim {projection} != hidden_size {hidden} (project_in/out) is not supported"
        )
    bias = _get(config, "enable_bias", default=True, kind=bool)
    positions = _get(config, "max_position_embeddings")
    return _classic_mha(
        config,
        "opt",
        intermediate_size=_get(config, "ffn_dim"),
        max_context_tokens=positions,
        norm_has_bias=_get(config, "layer_norm_elementwise_affine", default=True, kind=bool),
        extra_norms=1 if _get(config, "do_layer_norm_before", default=True, kind=bool) else 0,
        qkv_bias=bias,
        attn_out_bias=bias,
        mlp_bias=bias,
        # OPTLearnedPositionalEmbedding keeps an offset of 2 rows.
        learned_position_embeddings=positions + 2,
    )


def _parse_bloom(config: dict) -> dict:
    return _classic_mha(
        config,
        "bloom",
        ("hidden_size", "n_embed"),
        ("n_head", "num_attention_heads"),
        ("n_layer", "num_hidden_layers"),
        max_context_tokens=_get(config, "seq_length", "max_position_embeddings", default=2048),
        extra_norms=2,
    )  # word_embeddings_layernorm + ln_f


PARSERS: dict[str, Callable[[dict], dict]] = {
    "llama": _parse_llama,
    "mistral": _parse_mistral,
    "qwen2": _parse_qwen2,
    "qwen3": _parse_qwen3,
    "mixtral": _parse_mixtral,
    "qwen2_moe": _parse_qwen_moe,
    "qwen3_moe": _parse_qwen_moe,
    "gemma": _parse_gemma,
    "gemma2": _parse_gemma2,
    "phi3": _parse_phi3,
    "deepseek_v2": _parse_deepseek,
    "deepseek_v3": _parse_deepseek,
    "gpt2": _parse_gpt2,
    "gpt_neox": _parse_gpt_neox,
    "gptj": _parse_gptj,
    "opt": _parse_opt,
    "bloom": _parse_bloom,
}

SUPPORTED_MODEL_TYPES = tuple(sorted(PARSERS))


def architecture_from_config(config: Any, name: str | None = None) -> ModelArchitecture:
    """Parse a Hugging Face config dict. Raises PlanningError with a sentence on any problem."""
    if not isinstance(config, dict):
        raise PlanningError("config.json must be a JSON object")
    model_type = config.get("model_type")
    if model_type not in PARSERS and isinstance(config.get("text_config"), dict):
        # Multimodal wrappers keep the language model under text_config.
        return architecture_from_config(config["text_config"], name)
    if not isinstance(model_type, str) or model_type not in PARSERS:
        raise PlanningError(
            f"model_type {model_type!r} is not supported. Supported: {', '.join(SUPPORTED_MODEL_TYPES)}. "
            "A Llama-style decoder can be described with model_type 'llama' and the fields "
            + ", ".join(LLAMA_LIKE_FIELDS)
            + " (plus head_dim if it is not hidden_size / num_attention_heads)."
        )
    fields = PARSERS[model_type](config)
    meta = config.get("_headroom") if isinstance(config.get("_headroom"), dict) else {}
    fields["name"] = name or meta.get("display_name") or config.get("_name_or_path") or model_type
    try:
        return ModelArchitecture(**fields)
    except ValidationError as exc:
        raise PlanningError(f"config.json is not a plannable model: {explain(exc)}") from None
