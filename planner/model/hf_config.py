"""Read a Hugging Face `config.json` (a catalog entry or a user's upload) into a ModelArchitecture.

One parser for both, so a catalog model and the same model uploaded by a user plan identically.
Each supported `model_type` maps its own key names onto the normalized fields, with the defaults of
its transformers config class where a key is absent; anything malformed becomes a PlanningError that
names the field. A `model_type` without a parser still plans when the config has the standard decoder
fields (the generic fallback), and the architecture lists what was assumed (`assumptions`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.model.architecture import (
    MODULE_GROUPS,
    CheckpointQuantization,
    LayerSpec,
    ModelArchitecture,
    ModuleGroup,
)
from planner.model.checkpoint_check import stored_counts, with_parameter_check
from planner.model.vision import vision_encoder_parameters, vision_geometry

LLAMA_LIKE_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "max_position_embeddings",
)


def _get(
    config: dict, key: str, *alternatives: str, default: Any = ..., kind=int, note: list[str] | None = None
) -> Any:
    """`config[key]` (or the first alternative present), checked to be `kind`; `default` when absent
    (recorded in `note`, when given, as an assumption), a PlanningError when absent without a default."""
    for name in (key, *alternatives):
        if name in config and config[name] is not None:
            value = config[name]
            break
    else:
        if default is ...:
            raise PlanningError(f"config.json is missing '{key}' (needed for model_type '{config.get('model_type')}')")
        if note is not None:
            note.append(f"'{key}' is not in config.json: assumed {default!r} (the {config.get('model_type')} default)")
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
    """The fields every Llama-style family shares; `overrides` replace (and skip reading) any of them."""
    heads, kv, head_dim = _heads(config)
    readers: dict[str, Callable[[], Any]] = dict(
        model_type=lambda: config["model_type"],
        num_layers=lambda: _get(config, "num_hidden_layers"),
        hidden_size=lambda: _get(config, "hidden_size"),
        num_attention_heads=lambda: heads,
        num_kv_heads=lambda: kv,
        head_dim=lambda: head_dim,
        intermediate_size=lambda: _get(config, "intermediate_size"),
        vocab_size=lambda: _get(config, "vocab_size"),
        tie_word_embeddings=lambda: _get(config, "tie_word_embeddings", default=False, kind=bool),
        max_context_tokens=lambda: _get(config, "max_position_embeddings", default=4096),
        qkv_bias=lambda: _get(config, "attention_bias", default=False, kind=bool),
        attn_out_bias=lambda: _get(config, "attention_bias", default=False, kind=bool),
        mlp_bias=lambda: _get(config, "mlp_bias", default=False, kind=bool),
    )
    fields = {key: overrides[key] if key in overrides else read() for key, read in readers.items()}
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
        fields.update(
            _windowed(["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)], window)
        )
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
    notes: list[str] = []
    _mtp_note(config, notes, "num_nextn_predict_layers")
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
        assumptions=tuple(notes),
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


# ---------------------------------------------------------------------------------------------
# per-layer patterns


def _layer_types(config: dict, layers: int, default: list[str], allowed: tuple[str, ...]) -> list[str]:
    """`layer_types` from the config when given, else the family's default pattern; checked."""
    types = config.get("layer_types")
    if types is None:
        return default
    if not isinstance(types, list) or len(types) != layers:
        raise PlanningError(f"config.json field 'layer_types' must list one type for each of the {layers} layers")
    unknown = sorted({str(t) for t in types} - set(allowed))
    if unknown:
        raise PlanningError(
            f"config.json layer_types {', '.join(unknown)} not understood (expected {', '.join(allowed)})"
        )
    return types


def _windowed(mixers: list[str], window: int | None, mlp: list[str] | None = None) -> dict:
    """layer_pattern + the summary sliding-window fields (the window and how many layers use it; the
    physics reads each layer's own)."""
    mlp = mlp or ["dense"] * len(mixers)
    pattern = tuple(
        LayerSpec.model_validate(
            {"mixer": m, "window_tokens": window if m in ("sliding_attention", "chunked_attention") else None, "mlp": f}
        )
        for m, f in zip(mixers, mlp)
    )
    windowed = sum(layer.window_tokens is not None for layer in pattern)
    return {
        "layer_pattern": pattern,
        "sliding_window": window if windowed else None,
        "sliding_window_layers": windowed,
    }


def _index_list(config: dict, key: str, layers: int) -> list[int] | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(i, int) and 0 <= i < layers for i in value):
        raise PlanningError(f"config.json field '{key}' must be a list of layer indices below {layers}")
    return value


def _mtp_note(config: dict, notes: list[str], *keys: str) -> None:
    for key in keys:
        count = config.get(key)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            notes.append(
                f"{key}={count}: the checkpoint's multi-token-prediction weights are not counted "
                "(transformers does not build them; speculative decoding with them needs their memory too)"
            )
            return


# ---------------------------------------------------------------------------------------------
# 2025-26 families


def _parse_gpt_oss(config: dict) -> dict:
    """GptOssForCausalLM: all layers MoE (SwiGLU experts with biases, router with bias), q/k/v/o biases,
    attention sinks, sliding (128) and full attention alternating by `layer_types`."""
    notes: list[str] = []
    layers = _get(config, "num_hidden_layers")
    window = _get(config, "sliding_window", default=128, note=notes)
    default = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    types = _layer_types(config, layers, default, ("sliding_attention", "full_attention"))
    bias = _get(config, "attention_bias", default=True, kind=bool, note=notes)
    return _llama_like(
        config,
        qkv_bias=bias,
        attn_out_bias=bias,
        num_experts=_get(config, "num_local_experts"),
        experts_per_token=_get(config, "num_experts_per_tok", "experts_per_token"),
        expert_intermediate_size=_get(config, "intermediate_size"),
        router_bias=True,
        expert_bias=True,
        attention_sinks=True,
        assumptions=tuple(notes),
        **_windowed(types, window, ["moe"] * layers),
    )


def _parse_llama4_text(config: dict) -> dict:
    """Llama4TextModel: MoE layers at `moe_layers` (default every `interleave_moe_layer_step`-th: indices
    step-1, 2*step-1, ...) with one shared expert of the expert width, dense layers of
    `intermediate_size_mlp`; RoPE layers use chunked local attention (`attention_chunk_size`), every
    `no_rope_layer_interval`-th layer is a NoPE global layer (Llama4TextConfig). The L2 qk-norm has no
    weights."""
    notes: list[str] = []
    layers = _get(config, "num_hidden_layers")
    step = _get(config, "interleave_moe_layer_step", default=1)
    moe_layers = _index_list(config, "moe_layers", layers)
    moe = set(moe_layers if moe_layers is not None else range(step - 1, layers, step))
    interval = _get(config, "no_rope_layer_interval", default=4)
    rope = config.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    if not isinstance(rope, list) or len(rope) != layers:
        raise PlanningError(f"config.json field 'no_rope_layers' must have one entry for each of the {layers} layers")
    chunk = config.get("attention_chunk_size", 8192)
    if chunk is not None:
        chunk = _get(config, "attention_chunk_size")
    default = ["chunked_attention" if r and chunk else "full_attention" for r in rope]
    types = _layer_types(config, layers, default, ("chunked_attention", "full_attention"))
    width = _get(config, "intermediate_size")
    pattern = tuple(
        LayerSpec.model_validate(
            {
                "mixer": t,
                "window_tokens": chunk if t == "chunked_attention" else None,
                "rope": bool(r),
                "mlp": "moe" if i in moe else "dense",
            }
        )
        for i, (t, r) in enumerate(zip(types, rope))
    )
    chunked = sum(t == "chunked_attention" for t in types)
    return _llama_like(
        config,
        intermediate_size=_get(config, "intermediate_size_mlp", default=16384, note=notes if step > 1 else None),
        num_experts=_get(config, "num_local_experts", default=16, note=notes),
        experts_per_token=_get(config, "num_experts_per_tok", default=1, note=notes),
        expert_intermediate_size=width,
        shared_expert_intermediate_size=width,
        moe_layer_interval=step,
        moe_layer_phase=1,
        layer_pattern=pattern,
        sliding_window=chunk if chunked else None,
        sliding_window_layers=chunked,
        assumptions=tuple(notes),
    )


def _parse_gemma3_text(config: dict) -> dict:
    """Gemma3TextModel: Gemma 2's four norms per layer plus per-head q/k norms; every
    `sliding_window_pattern`-th layer (default 6) is global, the others slide (Gemma3TextConfig);
    embeddings tied by default; vocab_size defaults to 262,208."""
    notes: list[str] = []
    layers = _get(config, "num_hidden_layers")
    period = _get(config, "sliding_window_pattern", "_sliding_window_pattern", default=6)
    window = _get(config, "sliding_window", default=4096, note=notes)
    default = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(layers)]
    types = _layer_types(config, layers, default, ("sliding_attention", "full_attention"))
    return _llama_like(
        config,
        vocab_size=_get(config, "vocab_size", default=262_208, note=notes),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=True, kind=bool),
        max_context_tokens=_get(config, "max_position_embeddings", default=131_072),
        norms_per_layer=4,
        qk_norm=True,
        assumptions=tuple(notes),
        **_windowed(types, window),
    )


def _parse_qwen3_next(config: dict) -> dict:
    """Qwen3NextModel: Gated DeltaNet layers with a gated full-attention layer every
    `full_attention_interval`-th (default 4; Qwen3NextConfig `layer_types`); attention with per-head q/k
    norms and an output gate (q_proj twice as wide); MoE with a sigmoid-gated shared expert."""
    notes: list[str] = []
    layers = _get(config, "num_hidden_layers")
    interval = _get(config, "full_attention_interval", default=4)
    default = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    types = _layer_types(config, layers, default, ("linear_attention", "full_attention"))
    experts = _get(config, "num_experts", default=0)
    step = _get(config, "decoder_sparse_step", default=1)
    dense_only = set(_index_list(config, "mlp_only_layers", layers) or [])
    mlp = ["moe" if experts and i not in dense_only and (i + 1) % step == 0 else "dense" for i in range(layers)]
    return _llama_like(
        config,
        qk_norm=True,
        attention_output_gate=True,
        num_experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok", default=0) if experts else 0,
        expert_intermediate_size=_get(config, "moe_intermediate_size", default=0) if experts else 0,
        shared_expert_intermediate_size=_get(config, "shared_expert_intermediate_size", default=0),
        shared_expert_gate=bool(experts),  # Qwen3NextSparseMoeBlock always builds shared_expert_gate
        moe_layer_interval=step,
        moe_layer_phase=1,
        linear_num_key_heads=_get(config, "linear_num_key_heads", default=16, note=notes),
        linear_num_value_heads=_get(config, "linear_num_value_heads", default=32, note=notes),
        linear_key_head_dim=_get(config, "linear_key_head_dim", default=128, note=notes),
        linear_value_head_dim=_get(config, "linear_value_head_dim", default=128, note=notes),
        linear_conv_kernel=_get(config, "linear_conv_kernel_dim", default=4, note=notes),
        assumptions=tuple(notes),
        **_windowed(types, None, mlp),
    )


def _parse_glm4_moe(config: dict) -> dict:
    """Glm4MoeModel: q/k/v biases (`attention_bias`, no output bias), optional per-head q/k norms
    (`use_qk_norm`), `first_k_dense_replace` dense layers, then MoE with shared experts and a router
    correction bias (Glm4MoeTopkRouter e_score_correction_bias)."""
    notes: list[str] = []
    experts = _get(config, "n_routed_experts", default=128, note=notes)
    width = _get(config, "moe_intermediate_size", default=1408, note=notes)
    bias = _get(config, "attention_bias", default=False, kind=bool, note=notes)
    _mtp_note(config, notes, "num_nextn_predict_layers", "num_mtp_layers")
    return _llama_like(
        config,
        qkv_bias=bias,
        attn_out_bias=False,
        qk_norm=_get(config, "use_qk_norm", default=False, kind=bool, note=notes),
        num_experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok", default=8, note=notes),
        expert_intermediate_size=width,
        shared_expert_intermediate_size=_get(config, "n_shared_experts", default=1, note=notes) * width,
        first_k_dense_layers=_get(config, "first_k_dense_replace", default=1, note=notes),
        router_bias=True,
        assumptions=tuple(notes),
    )


def _parse_olmo2(config: dict) -> dict:
    """Olmo2Model: post-norms (after attention and after the MLP: still two per layer) and RMSNorm over
    the whole q and k projections (q_norm heads x head_dim, k_norm kv_heads x head_dim)."""
    return _llama_like(
        config, qk_norm_full_width=True, max_context_tokens=_get(config, "max_position_embeddings", default=2048)
    )


def _parse_minimax_m2(config: dict) -> dict:
    """MiniMaxM2Model: every layer MoE (experts of `intermediate_size`, top-k with a routing correction
    bias), bias-free attention with RMSNorm over the whole q and k projections (always built)."""
    notes: list[str] = []
    if _get(config, "shared_intermediate_size", default=0):
        notes.append("shared_intermediate_size is not counted: transformers' MiniMaxM2 builds no shared expert")
    if config.get("use_mtp"):
        _mtp_note(config, notes, "num_mtp_modules")
    return _llama_like(
        config,
        qkv_bias=False,
        attn_out_bias=False,
        qk_norm_full_width=True,
        num_experts=_get(config, "num_local_experts"),
        experts_per_token=_get(config, "num_experts_per_tok"),
        expert_intermediate_size=_get(config, "intermediate_size"),
        router_bias=True,
        assumptions=tuple(notes),
    )


_NEMOTRON_H_BLOCKS = {
    "M": ("mamba", "none"),
    "*": ("full_attention", "none"),
    "-": ("none", "dense"),
    "E": ("none", "moe"),
}
_NEMOTRON_H_TYPES = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}


# `mamba_ssm_cache_dtype` -> bytes per element; absent or "auto": the activation dtype (0).
_STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _parse_nemotron_h(config: dict) -> dict:
    """NemotronHModel: one mixer per block, `hybrid_override_pattern` M (Mamba-2), * (attention), - (relu^2
    MLP, up/down) or E (MoE of up/down experts + a shared up/down expert, router correction bias); one
    RMSNorm per block. Mamba projections use `use_bias`, the conv `use_conv_bias` (NemotronHConfig)."""
    notes: list[str] = []
    pattern = config.get("hybrid_override_pattern")
    if pattern is None:
        types = config.get("layers_block_type") or config.get("layer_types")
        if not isinstance(types, list) or not all(t in _NEMOTRON_H_TYPES for t in types):
            raise PlanningError(
                "config.json: nemotron_h needs hybrid_override_pattern (e.g. 'M-M*') or layers_block_type"
            )
        pattern = "".join(_NEMOTRON_H_TYPES[t] for t in types)
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_H_BLOCKS):
        raise PlanningError("config.json field 'hybrid_override_pattern' must be a string of M, *, - and E")
    layers = config.get("num_hidden_layers")
    if layers is not None and layers != len(pattern):
        raise PlanningError(
            f"config.json: hybrid_override_pattern has {len(pattern)} blocks but num_hidden_layers is {layers}"
        )
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    specs = tuple(
        LayerSpec.model_validate({"mixer": _NEMOTRON_H_BLOCKS[c][0], "mlp": _NEMOTRON_H_BLOCKS[c][1]}) for c in pattern
    )
    moe = "E" in pattern
    width = _get(config, "moe_intermediate_size", default=0) if moe else 0
    return dict(
        model_type=config["model_type"],
        num_layers=len(pattern),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=_get(config, "num_key_value_heads", default=heads),
        head_dim=_get(config, "head_dim", "attention_head_dim", default=hidden // heads, note=notes),
        intermediate_size=_get(config, "intermediate_size", default=width),
        vocab_size=_get(config, "vocab_size"),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=False, kind=bool),
        max_context_tokens=_get(config, "max_position_embeddings", default=4096),
        mlp_gated=False,
        mlp_bias=_get(config, "mlp_bias", default=False, kind=bool),
        layer_pattern=specs,
        num_experts=_get(config, "n_routed_experts", "num_local_experts") if moe else 0,
        experts_per_token=_get(config, "num_experts_per_tok") if moe else 0,
        expert_intermediate_size=width,
        shared_expert_intermediate_size=_get(config, "moe_shared_expert_intermediate_size", default=0) if moe else 0,
        experts_gated=False,
        router_bias=moe,
        moe_latent_size=_get(config, "moe_latent_size", default=0) if moe else 0,
        mamba_num_heads=_get(config, "mamba_num_heads", default=128, note=notes),
        mamba_head_dim=_get(config, "mamba_head_dim", default=64, note=notes),
        mamba_state_size=_get(config, "ssm_state_size", default=128, note=notes),
        mamba_groups=_get(config, "n_groups", "mamba_n_groups", default=8, note=notes),
        mamba_conv_kernel=_get(config, "conv_kernel", "mamba_d_conv", default=4, note=notes),
        mamba_conv_bias=_get(config, "use_conv_bias", "mamba_conv_bias", default=True, kind=bool),
        mamba_proj_bias=_get(config, "use_bias", default=False, kind=bool),
        ssm_state_bytes_per_element=_STATE_DTYPE_BYTES.get(str(config.get("mamba_ssm_cache_dtype")), 0),
        assumptions=tuple(notes),
    )


def _nas_ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM `_ffn_mult_to_intermediate_size`: int(2 x ffn_mult x hidden / 3) rounded up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def _parse_nemotron_nas(config: dict) -> dict:
    """DeciLMForCausalLM (Llama-3.x Nemotron Super/Ultra, `block_configs`): per layer, attention is GQA
    with num_heads / n_heads_in_group KV heads, a no-op, or one hidden x hidden linear
    (`replace_with_linear`); the FFN is a SwiGLU of `_ffn_mult_to_intermediate_size(ffn_mult)`, a no-op or
    a linear. A no-op sublayer has no norm (NeMo/HF DeciLM Block)."""
    blocks = config.get("block_configs")
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    layers = _get(config, "num_hidden_layers")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise PlanningError(
            f"config.json: nemotron-nas needs block_configs with one entry for each of the {layers} layers"
        )
    specs = []
    for index, block in enumerate(blocks):
        attention = block.get("attention") if isinstance(block, dict) else None
        ffn = block.get("ffn") if isinstance(block, dict) else None
        if not isinstance(attention, dict) or not isinstance(ffn, dict):
            raise PlanningError(f"config.json block_configs[{index}] needs 'attention' and 'ffn' objects")
        window = attention.get("window_length")
        if attention.get("no_op"):
            mixer, kv = "none", None
        elif attention.get("replace_with_linear"):
            mixer, kv = "linear", None
        else:
            group = _get(attention, "n_heads_in_group")
            if group <= 0 or heads % group:
                raise PlanningError(
                    f"config.json block_configs[{index}]: n_heads_in_group {group} does not divide {heads} heads"
                )
            mixer, kv = ("sliding_attention" if window else "full_attention"), heads // group
        if ffn.get("no_op"):
            mlp, width = "none", None
        elif ffn.get("replace_with_linear"):
            mlp, width = "linear", None
        elif ffn.get("intermediate_size") is not None:
            mlp, width = "dense", _get(ffn, "intermediate_size")
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or mult <= 0:
                raise PlanningError(f"config.json block_configs[{index}].ffn needs a positive ffn_mult")
            mlp, width = "dense", _nas_ffn_width(mult, hidden)
        specs.append(
            LayerSpec(
                mixer=mixer,
                window_tokens=window if mixer == "sliding_attention" else None,
                num_kv_heads=kv,
                mlp=mlp,
                intermediate_size=width,
            )
        )
    windows = {spec.window_tokens for spec in specs if spec.window_tokens}
    if len(windows) > 1:
        raise PlanningError("config.json: block_configs with different attention windows are not supported")
    kv_heads = Counter(spec.num_kv_heads for spec in specs if spec.num_kv_heads)
    widths = [spec.intermediate_size for spec in specs if spec.intermediate_size]
    return dict(
        model_type=config["model_type"],
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        # Summary values for the uniform fields (the physics reads each layer's own): the commonest KV
        # head count, the widest MLP.
        num_kv_heads=kv_heads.most_common(1)[0][0] if kv_heads else heads,
        head_dim=_get(config, "head_dim", default=hidden // heads),
        intermediate_size=max(widths, default=0),
        vocab_size=_get(config, "vocab_size"),
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=False, kind=bool),
        max_context_tokens=_get(config, "max_position_embeddings", default=4096),
        qkv_bias=_get(config, "attention_bias", default=False, kind=bool),
        attn_out_bias=_get(config, "attention_bias", default=False, kind=bool),
        mlp_bias=_get(config, "mlp_bias", default=False, kind=bool),
        layer_pattern=tuple(specs),
        sliding_window=windows.pop() if windows else None,
        sliding_window_layers=sum(spec.window_tokens is not None for spec in specs),
    )


def _parse_ministral3(config: dict) -> dict:
    return _llama_like(config, **_all_layers_sliding(config))


def _parse_deepseek_v32(config: dict) -> dict:
    """DeepSeek-V3 layout plus the lightning indexer of DeepSeek Sparse Attention on every layer
    (DeepseekV32Indexer: index_n_heads heads of index_head_dim; each query attends the index_topk keys
    it selects)."""
    notes: list[str] = []
    fields = _parse_deepseek(config)
    fields.update(
        indexer_num_heads=_get(config, "index_n_heads", default=64, note=notes),
        indexer_head_dim=_get(config, "index_head_dim", default=128, note=notes),
        indexer_topk=_get(config, "index_topk", default=2048, note=notes),
        assumptions=fields.get("assumptions", ()) + tuple(notes),
    )
    return fields


# ---------------------------------------------------------------------------------------------
# the generic fallback

GENERIC_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


def _parse_generic(config: dict) -> dict:
    """Any decoder with the standard fields, read as a Llama-style model; every guess is an assumption."""
    model_type = config["model_type"]
    notes = [
        f"model_type '{model_type}' has no dedicated parser: read as a Llama-style decoder (RMSNorm, gated "
        "MLP, rotary attention); tensors specific to this family are not counted"
    ]
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    kv = _get(config, "num_key_value_heads", default=heads, note=notes)
    if "head_dim" not in config or config["head_dim"] is None:
        if hidden % heads:
            raise PlanningError(
                f"config.json: hidden_size {hidden} is not divisible by num_attention_heads {heads}; give head_dim"
            )
        notes.append(f"'head_dim' is not in config.json: assumed hidden_size / num_attention_heads = {hidden // heads}")
    experts = _get(config, "num_experts", "num_local_experts", "n_routed_experts", default=0)
    fields = _llama_like(
        config,
        num_kv_heads=kv,
        tie_word_embeddings=_get(config, "tie_word_embeddings", default=False, kind=bool, note=notes),
        max_context_tokens=_get(config, "max_position_embeddings", default=4096, note=notes),
        assumptions=(),
    )
    if experts:
        width = _get(config, "moe_intermediate_size", default=fields["intermediate_size"], note=notes)
        shared = _get(config, "n_shared_experts", default=0) * width + _get(
            config, "shared_expert_intermediate_size", default=0
        )
        first_dense = _get(config, "first_k_dense_replace", default=0)
        notes.append(
            f"{experts} experts: layers from {first_dense} on assumed MoE (gated experts of width {width}"
            + (f", shared width {shared}" if shared else ", no shared expert")
            + ", a bias-free router)"
        )
        fields.update(
            num_experts=experts,
            experts_per_token=_get(config, "num_experts_per_tok", "experts_per_token", "moe_topk"),
            expert_intermediate_size=width,
            shared_expert_intermediate_size=shared,
            first_k_dense_layers=first_dense,
        )
    types = config.get("layer_types")
    window = _get(config, "sliding_window", default=None)
    if isinstance(types, list) and window:
        layers = fields["num_layers"]
        mixers = _layer_types(config, layers, [], ("sliding_attention", "full_attention"))
        mlp = ["moe" if experts and i >= fields.get("first_k_dense_layers", 0) else "dense" for i in range(layers)]
        fields.update(_windowed(mixers, window, mlp))
    elif window and config.get("use_sliding_window") is not False:
        notes.append(f"sliding_window {window} without layer_types: assumed on every layer")
        fields.update(_all_layers_sliding(config))
    fields["assumptions"] = tuple(notes)
    return fields


# ---------------------------------------------------------------------------------------------
# checkpoint quantization

_FORMATS = {"e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _not_converted_groups(pattern: str) -> set[ModuleGroup]:
    """Module groups a `modules_to_not_convert` entry names ('model.layers.*.self_attn' -> attention)."""
    parts = [p for p in pattern.replace("*", "").split(".") if p]
    last = parts[-1] if parts else ""
    if "lm_head" in parts:
        return {"lm_head"}
    if any("embed" in p for p in parts):
        return {"embedding"}
    if last in ("gate", "router", "e_score_correction_bias") or "router" in parts:
        return {"router"}
    if any(p in ("self_attn", "attn", "attention", "linear_attn", "mixer") for p in parts):
        return {"attention"}
    if any("shared_expert" in p for p in parts):
        return {"shared_experts"}
    if "experts" in parts:
        return {"routed_experts"}
    if last in ("mlp", "feed_forward"):
        return {"mlp", "routed_experts", "shared_experts"}
    return set()


def _quantization(config: dict, arch: ModelArchitecture) -> CheckpointQuantization | None:
    """The `quantization_config` facts as data: the format, the block size, and which of the model's
    module groups are stored quantized (its linear layers unless `modules_to_not_convert` names them;
    routers, embeddings, output head and norms stay in the checkpoint dtype, as in DeepSeek's and
    gpt-oss's checkpoints)."""
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method", "unknown"))
    fmt = q.get("fmt")
    weight_format = _FORMATS.get(str(fmt), str(fmt)) if fmt else ("float8_e4m3fn" if method == "fp8" else method)
    excluded = [
        str(m) for m in (q.get("modules_to_not_convert") or q.get("ignored_layers") or []) if isinstance(m, str)
    ]
    skipped: set[ModuleGroup] = set().union(*(_not_converted_groups(m) for m in excluded)) if excluded else set()
    present: set[ModuleGroup] = {"attention"}
    if any(layer.mlp in ("dense", "linear") for layer in arch.layers):
        present.add("mlp")
    if arch.is_moe:
        present.add("routed_experts")
        if arch.shared_expert_intermediate_size or arch.moe_latent_size:
            present.add("shared_experts")
    block = q.get("weight_block_size")
    return CheckpointQuantization(
        method=method,
        weight_format=weight_format,
        weight_block_size=tuple(int(b) for b in block) if isinstance(block, list) else (),
        scale_format=q.get("scale_fmt") if isinstance(q.get("scale_fmt"), str) else None,
        activation_scheme=q.get("activation_scheme") if isinstance(q.get("activation_scheme"), str) else None,
        quantized_groups=tuple(g for g in MODULE_GROUPS if g in present and g not in skipped),
        modules_to_not_convert=tuple(excluded),
        unquantized_dtype=_checkpoint_dtype(config) or "bfloat16",
    )


def _mtp_layers(config: dict) -> int:
    """Multi-token-prediction modules the checkpoint ships (usable as a speculative draft)."""
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        if isinstance(config.get(key), int) and config[key] > 0:
            return config[key]
    if config.get("use_mtp") is True and isinstance(config.get("num_mtp_modules"), int):
        return config["num_mtp_modules"]
    return 0


def _checkpoint_dtype(config: dict) -> str | None:
    dtype = config.get("torch_dtype") or config.get("dtype")
    return dtype if isinstance(dtype, str) else None


PARSERS: dict[str, Callable[[dict], dict]] = {
    "llama": _parse_llama,
    "mistral": _parse_mistral,
    "ministral3": _parse_ministral3,
    "qwen2": _parse_qwen2,
    "qwen3": _parse_qwen3,
    "mixtral": _parse_mixtral,
    "qwen2_moe": _parse_qwen_moe,
    "qwen3_moe": _parse_qwen_moe,
    "qwen3_next": _parse_qwen3_next,
    "gemma": _parse_gemma,
    "gemma2": _parse_gemma2,
    "gemma3_text": _parse_gemma3_text,
    "phi3": _parse_phi3,
    "deepseek_v2": _parse_deepseek,
    "deepseek_v3": _parse_deepseek,
    "kimi_k2": _parse_deepseek,
    "deepseek_v32": _parse_deepseek_v32,
    "gpt_oss": _parse_gpt_oss,
    "llama4_text": _parse_llama4_text,
    "glm4_moe": _parse_glm4_moe,
    "olmo2": _parse_olmo2,
    "minimax_m2": _parse_minimax_m2,
    "nemotron_h": _parse_nemotron_h,
    "nemotron-nas": _parse_nemotron_nas,
    "gpt2": _parse_gpt2,
    "gpt_neox": _parse_gpt_neox,
    "gptj": _parse_gptj,
    "opt": _parse_opt,
    "bloom": _parse_bloom,
}

SUPPORTED_MODEL_TYPES = tuple(sorted(PARSERS))


def _unsupported(model_type: Any, config: dict) -> PlanningError:
    missing = [key for key in GENERIC_REQUIRED if config.get(key) is None]
    return PlanningError(
        f"model_type {model_type!r} is not supported. Supported: {', '.join(SUPPORTED_MODEL_TYPES)}. "
        "Any other decoder plans (with its assumptions listed) when config.json has "
        + ", ".join(GENERIC_REQUIRED)
        + (f" (missing: {', '.join(missing)})" if missing and isinstance(model_type, str) else "")
        + "; a Llama-style decoder can also be described with model_type 'llama' and the fields "
        + ", ".join(LLAMA_LIKE_FIELDS)
        + " (plus head_dim if it is not hidden_size / num_attention_heads)."
    )


def _fields(config: dict) -> dict:
    """Normalized fields of a config dict (a text model, or a multimodal wrapper around one)."""
    model_type = config.get("model_type")
    text = config.get("text_config")
    if isinstance(text, dict) and (model_type not in PARSERS or "hidden_size" not in config):
        # Multimodal wrappers keep the language model under text_config, the vision tower beside it.
        fields = _fields(text)
        vision, vision_type, notes = vision_encoder_parameters(config, fields["hidden_size"])
        fields.update(
            vision_encoder_parameters=vision,
            vision_model_type=vision_type,
            **(vision_geometry(config) if vision else {}),
            assumptions=tuple(fields.get("assumptions", ())) + notes,
        )
        if isinstance(config.get("quantization_config"), dict):
            fields["_quantized_by"] = config
        fields["checkpoint_dtype"] = _checkpoint_dtype(config) or fields.get("checkpoint_dtype")
        return fields
    if not isinstance(model_type, str):
        raise _unsupported(model_type, config)
    if model_type in PARSERS:
        fields = PARSERS[model_type](config)
    elif all(config.get(key) is not None for key in GENERIC_REQUIRED):
        fields = _parse_generic(config)
    else:
        raise _unsupported(model_type, config)
    fields["_quantized_by"] = config
    fields["checkpoint_dtype"] = _checkpoint_dtype(config)
    fields["mtp_layers"] = _mtp_layers(config)
    return fields


def architecture_from_config(config: Any, name: str | None = None) -> ModelArchitecture:
    """Parse a Hugging Face config dict. Raises PlanningError with a sentence on any problem."""
    if not isinstance(config, dict):
        raise PlanningError("config.json must be a JSON object")
    fields = _fields(config)
    meta = config.get("_headroom")
    meta = meta if isinstance(meta, dict) else {}
    fields["name"] = name or meta.get("display_name") or config.get("_name_or_path") or fields["model_type"]
    quantized_by = fields.pop("_quantized_by", None)  # the config dict holding quantization_config
    counts = stored_counts(meta)  # a Hub import's safetensors counts: checked, never used (checkpoint_check)
    try:
        arch = ModelArchitecture(**fields)
        quantization = _quantization(quantized_by, arch) if quantized_by is not None else None
        arch = ModelArchitecture(**fields, quantization=quantization) if quantization else arch
    except ValidationError as exc:
        raise PlanningError(f"config.json is not a plannable model: {explain(exc)}") from None
    return with_parameter_check(arch, counts)
