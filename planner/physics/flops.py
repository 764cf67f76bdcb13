"""FLOPs of the inference phases (whole model, one replica). FLOPs count 2 per multiply-add.

All functions broadcast over numpy arrays of tokens and batch sizes.
"""

from __future__ import annotations

from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    attention_score_flops_per_token,
    mean_attended_tokens,
    prefill_attention_flops,
)


def _layer_matmul_params_per_token(counts: ParameterCounts) -> float:
    """Linear-layer parameters one token multiplies through across all layers (active experts only)."""
    return counts.active - counts.embedding - counts.lm_head - counts.position_embedding - counts.final_norms


def head_flops_per_row(counts: ParameterCounts) -> float:
    head = counts.lm_head if counts.lm_head else counts.embedding
    return 2 * head


def prefill_flops(counts: ParameterCounts, arch: ModelArchitecture, prompt_tokens, sequences=1, new_tokens=None):
    """Prefill FLOPs for `sequences` prompts of `prompt_tokens` each, of which the last `new_tokens`
    are computed (the rest come from a prefix cache; default: all).

    2 x active layer parameters per computed token; causal attention of the computed tokens over
    the whole prefix (sum of 4*heads*head_dim*i over their positions); the lm_head for the last
    position of each sequence only (engines sample one token per sequence).
    """
    new_tokens = prompt_tokens if new_tokens is None else new_tokens
    cached = prompt_tokens - new_tokens
    attention = prefill_attention_flops(arch, prompt_tokens) - prefill_attention_flops(arch, cached)
    per_sequence = 2 * _layer_matmul_params_per_token(counts) * new_tokens + attention + head_flops_per_row(counts)
    return sequences * per_sequence


def decode_flops(counts: ParameterCounts, arch: ModelArchitecture, batch, context_tokens):
    """One decode step for `batch` sequences at `context_tokens` each: 2 x active parameters per new
    token (lm_head included) + attention over the cached context of every layer."""
    attended = mean_attended_tokens(arch, context_tokens)
    attention = arch.num_layers * attention_score_flops_per_token(arch, attended, "decode")
    return batch * (2 * _layer_matmul_params_per_token(counts) + head_flops_per_row(counts) + attention)
