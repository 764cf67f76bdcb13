"""What an inference plan says about the per-sequence cache: which layers keep KV, which a constant state,
windows and V3.2's sparse attention, and the KV equations' words (read by `planner.inference.explain`).

Sentences only; the numbers are the model layer's (`planner.model.cache`, `architecture`).
"""

from __future__ import annotations

from planner.dtypes import kv_bytes_per_element
from planner.inference.inputs import activation_bytes_per_element
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import (
    ModelArchitecture,
    attention_layer_groups,
    kv_cache_bytes_per_token,
    kv_elements_per_token_per_layer,
)
from planner.model.cache import (
    INDEXER_BYTES_PER_ELEMENT,
    recurrent_state_bytes_per_sequence,
    ssm_state_bytes_per_element,
)
from planner.units import gib


def cache_assumptions(s: InferenceScenario, arch: ModelArchitecture) -> list[str]:
    """Which layers keep what per sequence: windows, a recurrent state instead of KV, V3.2's indexer."""
    out = []
    if arch.sliding_window:
        chunked = any(layer.mixer == "chunked_attention" for layer in arch.layers)
        share = f"{'Chunked local-attention' if chunked else 'Sliding-window'} layers ({arch.sliding_window_layers} "
        share += f"of {arch.num_layers})"
        if s.honor_sliding_window:
            out.append(f"{share} cache at most {arch.sliding_window:,} tokens, as engines that support them do.")
        else:
            out.append(f"{share} cache the whole context: the engine is assumed not to honour the window.")
    if arch.is_hybrid:
        activation_b = activation_bytes_per_element(s.weight_dtype)
        state = recurrent_state_bytes_per_sequence(arch, ssm_state_bytes_per_element(arch, activation_b), activation_b)
        kv_per_token = kv_cache_bytes_per_token(arch, kv_bytes_per_element(s.kv_cache_dtype))
        sentence = (
            f"KV cache only on the {arch.num_attention_layers} softmax-attention layers of {arch.num_layers} "
            f"({kv_per_token:,.0f} B per token, whole model)"
        )
        if state:
            sentence += (
                f"; the linear-attention / Mamba layers keep a constant recurrent and conv state of {gib(state)} "
                "per sequence instead (whole model, split across TP with the heads), read and written back every "
                "decode step, in the model's dtype whatever the KV cache dtype"
            )
        out.append(sentence + "; layers without a token mixer keep nothing.")
    if arch.indexer_topk:
        indexer_b = arch.indexer_head_dim * INDEXER_BYTES_PER_ELEMENT
        out.append(
            f"DeepSeek Sparse Attention: each query attends only the {arch.indexer_topk:,} keys its indexer selects "
            f"(decode reads those); the indexer keeps {indexer_b:g} B per token in each of the "
            f"{arch.num_attention_layers} layers (fp8 keys + fp32 scales, on every TP rank) and scores every "
            "cached key."
        )
    return out


def kv_per_token_equation(arch: ModelArchitecture, kv_b: float) -> tuple[str, str]:
    """(formula, substituted) of the whole-model KV bytes per token: one term per group of attention layers
    (their count, KV heads or MLA latent); layers without softmax attention add nothing."""
    groups = attention_layer_groups(arch)
    if arch.uses_mla:
        layers = sum(group.layers for group in groups)
        return (
            "attention layers x (kv_lora_rank + rope_dim) x bytes",
            f"{layers} x ({arch.kv_lora_rank} + {arch.qk_rope_head_dim}) x {kv_b:g}",
        )
    terms = [f"2 x {group.layers} x {group.kv_heads} x {arch.head_dim}" for group in groups]
    substituted = f"({' + '.join(terms)}) x {kv_b:g}" if len(terms) > 1 else f"{terms[0]} x {kv_b:g}"
    return "2 x attention layers x kv_heads x head_dim x bytes", substituted


def kv_per_gpu_substitution(
    s: InferenceScenario, arch: ModelArchitecture, sequences: int, stage_layers: int, kv_b: float
) -> str:
    """The numbers of the 'KV cache per GPU' equation: sequences x context x the stage's attention layers x
    KV elements per layer and rank (their mean over a mixed stack's attention layers) x bytes."""
    groups = attention_layer_groups(arch)
    attention = arch.num_attention_layers
    elements = (
        sum(g.layers * kv_elements_per_token_per_layer(arch, s.tensor_parallel, g.kv_heads) for g in groups) / attention
        if attention
        else 0
    )
    layers = stage_layers * attention / arch.num_layers
    text = f"{sequences} x {s.context_tokens:,} tokens x {layers:g} layers x {elements:g} x {kv_b:g} B"
    if arch.is_hybrid or arch.sliding_window or arch.indexer_topk:
        text += " (attention layers only, windows capped; plus each sequence's constant state and indexer keys)"
    return text


__all__ = ["cache_assumptions", "kv_per_gpu_substitution", "kv_per_token_equation"]
