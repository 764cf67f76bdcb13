"""What one sequence keeps between decode steps, layer by layer: the one home of cache bytes.

Softmax-attention layers (full, sliding, chunked) keep K and V (or MLA's latent) per token, windowed ones
at most their window when the engine honours it; Gated DeltaNet and Mamba-2 layers keep a constant
recurrent state instead; DeepSeek-V3.2 adds its indexer's keys; Nemotron-NAS no-op and linear layers keep
nothing. `sequence_cache_bytes` sums them for one sequence on one tensor-parallel rank; memory, headroom
(max concurrency, max context), the decode step's traffic and the sweep all read it (the sweep with numpy
arrays: every function broadcasts over context, TP and bytes per element, DESIGN rule 4).

Conventions: whole model (a pipeline stage takes its share in `planner.physics.memory`), one TP rank,
bytes unless named `_elements`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from planner.arrays import Number, minimum, where
from planner.model.architecture import (
    ATTENTION_MIXERS,
    WINDOWED_MIXERS,
    LayerSpec,
    ModelArchitecture,
    attention_layer_groups,
    group_cached_tokens,
    kv_elements_per_token_per_layer,
)
from planner.model.memo import by_identity

# vLLM's indexer cache: fp8 keys with one fp32 scale per 128 elements (DeepSeek-V3.2 inference code).
INDEXER_BYTES_PER_ELEMENT = 132 / 128

# ---------------------------------------------------------------------------------------------
# per layer


def layer_kv_elements_per_token(arch: ModelArchitecture, layer: LayerSpec, tensor_parallel=1):
    """KV elements one token adds to `layer` on one tensor-parallel rank; 0 for layers without a KV cache.

    Softmax attention (full, sliding, chunked): `kv_elements_per_token_per_layer` with the layer's own KV
    heads (Nemotron-NAS varies them). V3.2's indexer keys are a separate cache
    (`indexer_key_elements_per_token`). Linear attention, Mamba, linear replacements and no-op layers keep
    no per-token cache (their state is constant: `recurrent_state_bytes_per_sequence`). Broadcasts over
    `tensor_parallel`.
    """
    if layer.mixer not in ATTENTION_MIXERS:
        return 0 * tensor_parallel
    return kv_elements_per_token_per_layer(arch, tensor_parallel, layer.num_kv_heads)


def layer_cached_tokens(layer: LayerSpec, context_tokens):
    """Tokens `layer` keeps cached for one sequence of `context_tokens`.

    Full attention: all of them. Sliding window w: the min(c, w) keys the next step attends (HF keeps
    w - 1 between steps and appends the new token's; vLLM SlidingWindowSpec budgets whole blocks of them).
    Chunked local attention of chunk C (Llama 4 `attention_chunk_size`): a query attends only within its
    own chunk, so at most min(c, C) keys are live (vLLM ChunkedLocalAttentionSpec bounds the allocation by
    the chunk). Layers without a KV cache: 0. Broadcasts over `context_tokens`.
    """
    if layer.mixer == "full_attention":
        return context_tokens
    if layer.mixer in WINDOWED_MIXERS and layer.window_tokens is not None:
        return minimum(context_tokens, layer.window_tokens)
    return 0 * context_tokens


def indexer_key_elements_per_token(arch: ModelArchitecture):
    """DeepSeek-V3.2's lightning-indexer key cache: `index_head_dim` elements per token per MLA layer, one
    key shared by the indexer heads (modeling_deepseek_v32.py `wk`: hidden -> index_head_dim). 0 without an
    indexer."""
    return arch.indexer_head_dim if arch.indexer_num_heads else 0


def linear_attention_state_elements(arch: ModelArchitecture, tensor_parallel=1) -> tuple:
    """(recurrent, conv) state elements of one Gated DeltaNet layer for one sequence on one TP rank.

    Recurrent: `num_v_heads/TP x head_k_dim x head_v_dim` (transformers modeling_qwen3_next.py
    torch_recurrent_gated_delta_rule: recurrent_state_shape = (batch, num_v_heads, k_head_dim, v_head_dim)).
    Conv: `(conv_kernel - 1) x conv_dim/TP` with conv_dim = 2 x num_k_heads x head_k_dim + num_v_heads x
    head_v_dim (vLLM mamba_utils.py gated_delta_net_state_shape; transformers' cache keeps `conv_kernel`
    columns, one more). Constant in the context length. Broadcasts over `tensor_parallel`.
    """
    recurrent = arch.linear_num_value_heads / tensor_parallel * arch.linear_key_head_dim * arch.linear_value_head_dim
    conv_dim = 2 * arch.linear_num_key_heads * arch.linear_key_head_dim + (
        arch.linear_num_value_heads * arch.linear_value_head_dim
    )
    return recurrent, (arch.linear_conv_kernel - 1) * conv_dim / tensor_parallel


def mamba_state_elements(arch: ModelArchitecture, tensor_parallel=1) -> tuple:
    """(ssm, conv) state elements of one Mamba-2 layer for one sequence on one TP rank.

    SSM: `num_heads/TP x head_dim x d_state` (transformers modeling_nemotron_h.py NemotronHMamba2Mixer;
    vLLM mamba_utils.py mamba2_state_shape temporal_state_shape). Conv: `(conv_kernel - 1) x (intermediate
    + 2 x n_groups x d_state)/TP`, intermediate = num_heads x head_dim; when TP does not divide n_groups,
    vLLM replicates groups up to TP (extra_groups_for_head_shards). Constant in the context length.
    """
    ssm = arch.mamba_num_heads / tensor_parallel * arch.mamba_head_dim * arch.mamba_state_size
    groups = where(arch.mamba_groups % tensor_parallel == 0, arch.mamba_groups, tensor_parallel)
    conv_dim = arch.mamba_num_heads * arch.mamba_head_dim + 2 * groups * arch.mamba_state_size
    return ssm, (arch.mamba_conv_kernel - 1) * conv_dim / tensor_parallel


# ---------------------------------------------------------------------------------------------
# whole model, one sequence, one TP rank


@by_identity
def _mixer_counts(arch: ModelArchitecture) -> Counter:
    return Counter(layer.mixer for layer in arch.layers)


def recurrent_state_bytes_per_sequence(
    arch: ModelArchitecture, state_bytes_per_element, conv_bytes_per_element, tensor_parallel=1
):
    """Constant cache bytes of one sequence on one TP rank, all layers: the recurrent/SSM state
    (`state_bytes_per_element`) plus the conv window (`conv_bytes_per_element`) of every linear-attention
    and Mamba layer. 0 for attention-only models. Broadcasts over every numeric argument."""
    counts = _mixer_counts(arch)
    total = 0 * tensor_parallel * state_bytes_per_element
    if counts["linear_attention"]:
        state, conv = linear_attention_state_elements(arch, tensor_parallel)
        total = total + counts["linear_attention"] * (state * state_bytes_per_element + conv * conv_bytes_per_element)
    if counts["mamba"]:
        state, conv = mamba_state_elements(arch, tensor_parallel)
        total = total + counts["mamba"] * (state * state_bytes_per_element + conv * conv_bytes_per_element)
    return total


def ssm_state_bytes_per_element(arch: ModelArchitecture, activation_bytes_per_element):
    """The recurrent state's element size: the config's `mamba_ssm_cache_dtype` when it fixes one (Nemotron 3:
    float32), else the activation dtype. vLLM keeps these states in the model dtype (`mamba_cache_dtype`
    'auto'), not in `kv_cache_dtype`: an fp8 KV cache leaves them as they are."""
    return arch.ssm_state_bytes_per_element or activation_bytes_per_element


def _state_bytes(arch: ModelArchitecture, activation_bytes_per_element, tensor_parallel):
    """`recurrent_state_bytes_per_sequence` at the dtypes the engine keeps the state in."""
    state_b = ssm_state_bytes_per_element(arch, activation_bytes_per_element)
    return recurrent_state_bytes_per_sequence(arch, state_b, activation_bytes_per_element, tensor_parallel)


def _kv_bytes(arch: ModelArchitecture, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window, cap=None):
    """KV bytes over the attention groups, each layer's tokens `group_cached_tokens`, at most `cap`."""
    total = 0 * context_tokens * tensor_parallel * kv_bytes_per_element
    for group in attention_layer_groups(arch):
        tokens = group_cached_tokens(group, context_tokens, honor_window)
        if cap:
            tokens = minimum(tokens, cap)
        per_token = kv_elements_per_token_per_layer(arch, tensor_parallel, group.kv_heads) * kv_bytes_per_element
        total = total + group.layers * tokens * per_token
    return total


def kv_cache_bytes_per_sequence_by_layer(
    arch: ModelArchitecture, context_tokens, kv_bytes_per_element, tensor_parallel=1, honor_window=True
):
    """KV bytes of one sequence on one TP rank, summed layer by layer with each layer's own window and KV
    heads (`layer_kv_elements_per_token` x `layer_cached_tokens`); with `honor_window` False windowed layers
    keep the whole context (an engine without sliding-window support). V3.2's indexer keys are a separate
    cache in their own format: `indexer_cache_bytes_per_sequence`. Broadcasts over `context_tokens`,
    `kv_bytes_per_element` and `tensor_parallel`."""
    return _kv_bytes(arch, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window)


def indexer_cache_bytes_per_sequence(
    arch: ModelArchitecture, context_tokens, bytes_per_element: float = INDEXER_BYTES_PER_ELEMENT
):
    """DeepSeek-V3.2 indexer keys of one sequence, all MLA layers, every TP rank (the indexer is
    replicated): `index_head_dim` elements per token and layer, fp8 plus one fp32 scale per 128 elements
    by default (132 bytes per 128-element key, vLLM's indexer cache). 0 without an indexer."""
    return arch.num_attention_layers * context_tokens * indexer_key_elements_per_token(arch) * bytes_per_element


def sequence_cache_bytes(
    arch: ModelArchitecture,
    context_tokens,
    kv_bytes_per_element,
    activation_bytes_per_element: Number = 2.0,
    tensor_parallel=1,
    honor_window=True,
):
    """Everything one sequence of `context_tokens` keeps between steps on one TP rank, whole model: the KV of
    the attention layers (`kv_cache_bytes_per_sequence_by_layer`), the constant state of the linear-attention
    and Mamba layers (`recurrent_state_bytes_per_sequence`, conv state in the activation dtype, recurrent
    state in `ssm_state_bytes_per_element`) and V3.2's indexer keys. The one home of per-sequence cache
    bytes: memory, headroom, decode traffic and the sweep read it."""
    return (
        _kv_bytes(arch, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window)
        + _state_bytes(arch, activation_bytes_per_element, tensor_parallel)
        + indexer_cache_bytes_per_sequence(arch, context_tokens)
    )


def decode_cache_traffic_bytes(
    arch: ModelArchitecture,
    context_tokens,
    kv_bytes_per_element,
    activation_bytes_per_element: Number = 2.0,
    tensor_parallel=1,
    honor_window=True,
):
    """HBM bytes one decode step of one sequence moves for its cache on one TP rank, whole model.

    Attention reads the keys each layer attends: the cached tokens of `kv_cache_bytes_per_sequence_by_layer`,
    except that V3.2's sparse attention gathers only its `index_topk` (reads count tokens, not whole paged
    blocks). V3.2's indexer reads every cached indexer key. Each linear-attention and Mamba layer reads its
    state and writes it back updated (2 x `recurrent_state_bytes_per_sequence`). The new token's own K/V
    write is one token and not counted.
    """
    attended = _kv_bytes(arch, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window, arch.indexer_topk)
    state = _state_bytes(arch, activation_bytes_per_element, tensor_parallel)
    return attended + 2 * state + indexer_cache_bytes_per_sequence(arch, context_tokens)


def kv_bytes_per_cached_token(arch: ModelArchitecture, kv_bytes_per_element, tensor_parallel=1):
    """Bytes one cached token takes in every attention layer together on one TP rank (no window): what one
    paged block holds per token slot. The constant recurrent state is not paged per token."""
    return _kv_bytes(arch, 1, kv_bytes_per_element, tensor_parallel, False)


def context_tokens_for_cache_bytes(
    arch: ModelArchitecture,
    cache_bytes,
    kv_bytes_per_element,
    activation_bytes_per_element: Number = 2.0,
    tensor_parallel=1,
    honor_window: bool = True,
):
    """The longest context whose `sequence_cache_bytes` fits in `cache_bytes`: 0 when even the constant
    recurrent state does not fit, inf when every layer stops growing at its window.

    Past the constant state, the cache is piecewise linear in the context: every attention layer (and the
    indexer) grows by its per-token bytes until a windowed layer reaches its window, then that layer stops.
    The answer lies on the last segment whose start fits the budget. Broadcasts over `cache_bytes`,
    `kv_bytes_per_element`, `activation_bytes_per_element` and `tensor_parallel`.
    """
    args = (kv_bytes_per_element, tensor_parallel, honor_window)
    room = cache_bytes - _state_bytes(arch, activation_bytes_per_element, tensor_parallel)
    groups = attention_layer_groups(arch)
    windows = sorted({g.window_tokens for g in groups if g.window_tokens is not None}) if honor_window else []
    tokens = 0 * room + 0.0  # + 0.0: a negative room gives 0, not -0
    for start in (0, *windows):
        grown = _growing_bytes(arch, start, *args)
        grows = bool(arch.indexer_num_heads) or any(
            not honor_window or g.window_tokens is None or g.window_tokens > start for g in groups
        )
        if grows:  # windows are whole tokens, so one token past the start gives the segment's slope
            slope = _growing_bytes(arch, start + 1, *args) - grown
            segment = start + (room - grown) / slope
        else:
            segment = np.inf + 0 * room
        tokens = where(room >= grown, segment, tokens)
    return tokens


def _growing_bytes(arch: ModelArchitecture, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window):
    """The part of `sequence_cache_bytes` that grows with the context: attention KV and indexer keys."""
    return _kv_bytes(arch, context_tokens, kv_bytes_per_element, tensor_parallel, honor_window) + (
        indexer_cache_bytes_per_sequence(arch, context_tokens)
    )


__all__ = [
    "INDEXER_BYTES_PER_ELEMENT",
    "context_tokens_for_cache_bytes",
    "decode_cache_traffic_bytes",
    "indexer_cache_bytes_per_sequence",
    "indexer_key_elements_per_token",
    "kv_bytes_per_cached_token",
    "kv_cache_bytes_per_sequence_by_layer",
    "layer_cached_tokens",
    "layer_kv_elements_per_token",
    "linear_attention_state_elements",
    "mamba_state_elements",
    "recurrent_state_bytes_per_sequence",
    "sequence_cache_bytes",
    "ssm_state_bytes_per_element",
]
