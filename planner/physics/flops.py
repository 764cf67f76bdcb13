"""FLOPs of the inference phases (whole model, one replica). FLOPs count 2 per multiply-add.

All functions broadcast over numpy arrays of tokens and batch sizes.
"""

from __future__ import annotations

from planner.arrays import Number
from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    attended_tokens_per_layer_sum,
    attention_score_flops_per_token,
    indexer_score_flops_per_key,
    prefill_attention_flops,
    recurrent_mixer_flops_per_token,
)


def layer_matmul_parameters(counts: ParameterCounts, moe_layer: bool) -> float:
    """Matrix parameters one token multiplies through in one layer: attention projections and the dense MLP,
    or the router, the shared experts and k of the E routed experts (uniform top-k routing).

    Matrices only: norms and bias adds are element-wise (O(h) per token, not 2 FLOPs per parameter), so they
    are not counted here; the same convention for inference and training.
    """
    layer = counts.moe_layer if moe_layer and counts.moe_layer is not None else counts.dense_layer
    attention = layer.attention_sharded + layer.attention_kv + layer.attention_replicated
    if not moe_layer:
        return attention + layer.mlp_dense
    return (
        attention
        + layer.router
        + layer.experts_shared
        + layer.experts_routed * counts.experts_per_token / max(counts.num_experts, 1)
    )


def matmul_parameters_per_token(counts: ParameterCounts) -> float:
    """Matrix parameters one token multiplies through across all transformer layers (active experts only;
    embedding lookup and output head excluded: the head is `head_forward_flops_per_token`)."""
    moe = layer_matmul_parameters(counts, True) * counts.num_moe_layers if counts.moe_layer is not None else 0.0
    return layer_matmul_parameters(counts, False) * counts.num_dense_layers + moe


def head_forward_flops_per_token(counts: ParameterCounts) -> float:
    """The output projection for one sampled position: 2 x vocabulary x hidden (a tied head is the embedding
    matrix)."""
    return 2 * (counts.lm_head if counts.lm_head else counts.embedding)


def prefill_mixing_flops(
    arch: ModelArchitecture, prompt_tokens, sequences: Number = 1, new_tokens: Number | None = None
):
    """The token-mixing part of `prefill_flops` (attention and recurrent state updates, run by their own kernels,
    not the GEMMs): causal attention of the computed tokens over the whole prefix (sum of 4*heads*head_dim*i over
    their positions, in the attention layers only, windowed ones capped; `architecture.prefill_attention_flops`)
    and the state updates of linear-attention and Mamba layers per computed token."""
    new_tokens = prompt_tokens if new_tokens is None else new_tokens
    cached = prompt_tokens - new_tokens
    attention = prefill_attention_flops(arch, prompt_tokens) - prefill_attention_flops(arch, cached)
    return sequences * (attention + recurrent_mixer_flops_per_token(arch) * new_tokens)


def prefill_flops(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    prompt_tokens,
    sequences: Number = 1,
    new_tokens: Number | None = None,
):
    """Prefill FLOPs for `sequences` prompts of `prompt_tokens` each, of which the last `new_tokens`
    are computed (the rest come from a prefix cache; default: all).

    2 x active layer parameters per computed token; the token mixing (`prefill_mixing_flops`); the lm_head for
    the last position of each sequence only (engines sample one token per sequence).
    """
    new_tokens = prompt_tokens if new_tokens is None else new_tokens
    linear = 2 * matmul_parameters_per_token(counts) * new_tokens + head_forward_flops_per_token(counts)
    return sequences * linear + prefill_mixing_flops(arch, prompt_tokens, sequences, new_tokens)


def decode_mixing_flops(arch: ModelArchitecture, batch, context_tokens):
    """The token-mixing part of `decode_flops` (its own kernels, not the GEMMs): attention over the keys each
    attention layer attends (windows and V3.2's top-k capped; V3.2's indexer scores every cached key) + the
    state updates of linear-attention and Mamba layers (constant in the context)."""
    attention = attention_score_flops_per_token(arch, attended_tokens_per_layer_sum(arch, context_tokens), "decode")
    return batch * (
        attention + indexer_score_flops_per_key(arch) * context_tokens + recurrent_mixer_flops_per_token(arch)
    )


def decode_flops(counts: ParameterCounts, arch: ModelArchitecture, batch, context_tokens):
    """One decode step for `batch` sequences at `context_tokens` each: 2 x active parameters per new
    token (lm_head included) + the token mixing (`decode_mixing_flops`)."""
    linear = 2 * matmul_parameters_per_token(counts) + head_forward_flops_per_token(counts)
    return batch * linear + decode_mixing_flops(arch, batch, context_tokens)


def vision_encoder_flops(arch: ModelArchitecture, images, tokens_per_image) -> Number:
    """Forward FLOPs of the vision tower over `images` images of `tokens_per_image` language-model tokens each:
    2 x tower parameters per patch (its matmuls; the projector is in the count) + full, non-causal attention
    over the image's patches, 4 x patches^2 x width per layer. Patches scale with the tokens an image becomes
    (the model's patches-per-token ratio: 16 for Gemma 3's SigLIP, 4 for Llama 4 and Pixtral)."""
    if not arch.vision_tokens_per_image:
        return 0.0
    patches = tokens_per_image * arch.vision_patches_per_image / arch.vision_tokens_per_image
    per_image = (
        2 * arch.vision_encoder_parameters * patches + 4 * arch.vision_num_layers * patches**2 * arch.vision_hidden_size
    )
    return images * per_image
