"""A model's shape, and what follows from it: parameter counts, FLOPs and cache bytes per token.

`ModelArchitecture` is the normalized form every model becomes (catalog entry, uploaded
`config.json`, or a size-only synthetic model). Everything downstream reads only these fields.

Conventions: counts are elements (not bytes); FLOPs count 2 per multiply-add.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from planner.arrays import maximum as _maximum
from planner.arrays import minimum as _minimum
from planner.arrays import where as _where


class ModelArchitecture(BaseModel):
    """Normalized decoder-only transformer description."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    model_type: str
    # Upper limits are far above any real model; they stop absurd uploads from producing absurd plans.
    num_layers: int = Field(gt=0, le=4096)
    hidden_size: int = Field(gt=0, le=262_144)
    num_attention_heads: int = Field(gt=0, le=16_384)
    num_kv_heads: int = Field(gt=0, le=16_384)
    head_dim: int = Field(gt=0, le=4096)
    intermediate_size: int = Field(ge=0, le=4_000_000, description="dense MLP width (dense layers)")
    vocab_size: int = Field(gt=0, le=20_000_000)
    tie_word_embeddings: bool = False
    lm_head_bias: bool = False  # GPT-J's output layer has a bias over the vocabulary
    max_context_tokens: int = Field(gt=0, le=1 << 30)

    mlp_gated: bool = True  # SwiGLU/GeGLU: gate, up, down; False: up, down (GeLU MLP)
    norm_has_bias: bool = False  # LayerNorm (weight + bias) vs RMSNorm (weight)
    norms_per_layer: int = Field(default=2, ge=0, le=8)  # Gemma-2 has 4 (pre/post attention and MLP)
    extra_norms: int = Field(default=1, ge=0, le=4)  # final norm; BLOOM adds an embedding LayerNorm
    qk_norm: bool = False  # Qwen3: RMSNorm over each q and k head (2 x head_dim weights per layer)
    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = False
    learned_position_embeddings: int = Field(default=0, ge=0, le=1 << 24)  # GPT-2, OPT position tables

    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0)  # layers that attend only to the last `sliding_window` tokens

    # Mixture of experts (0 experts = dense model)
    num_experts: int = Field(default=0, ge=0, le=65_536)
    experts_per_token: int = Field(default=0, ge=0)
    expert_intermediate_size: int = Field(default=0, ge=0, le=4_000_000)
    shared_expert_intermediate_size: int = Field(default=0, ge=0, le=4_000_000)  # total width of shared experts
    shared_expert_gate: bool = False  # Qwen-MoE: a sigmoid gate (hidden x 1) on the shared expert
    first_k_dense_layers: int = Field(default=0, ge=0)
    # After the dense-first layers, layer i is MoE when (i + moe_layer_phase) % moe_layer_interval == 0:
    # DeepSeek's moe_layer_freq has phase 0, Qwen-MoE's decoder_sparse_step ((i+1) % step) phase 1.
    moe_layer_interval: int = Field(default=1, ge=1)
    moe_layer_phase: int = Field(default=0, ge=0)
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias

    # Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank 0 = ordinary attention
    q_lora_rank: int = Field(default=0, ge=0)
    kv_lora_rank: int = Field(default=0, ge=0)
    qk_nope_head_dim: int = Field(default=0, ge=0)
    qk_rope_head_dim: int = Field(default=0, ge=0)
    v_head_dim: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> ModelArchitecture:
        if not self.kv_lora_rank and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_kv_heads}"
            )
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"experts per token ({self.experts_per_token}) must be between 1 and the {self.num_experts} experts"
            )
        if self.num_experts and self.expert_intermediate_size == 0:
            raise ValueError("a mixture-of-experts model needs the expert MLP width (moe_intermediate_size)")
        if self.first_k_dense_layers >= self.num_layers and self.num_experts:
            raise ValueError("first_k_dense_replace leaves no MoE layers")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError("more sliding-window layers than layers")
        if self.kv_lora_rank and not (self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("multi-head latent attention needs qk_rope_head_dim and v_head_dim")
        return self

    @computed_field
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @computed_field
    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @computed_field
    @property
    def num_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        return sum(
            1
            for i in range(self.first_k_dense_layers, self.num_layers)
            if (i + self.moe_layer_phase) % self.moe_layer_interval == 0
        )

    @computed_field
    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers


@dataclass(frozen=True)
class LayerParameters:
    """Parameter elements of one transformer layer, grouped by how they shard and quantize."""

    attention_sharded: int  # q, o (and MLA's up-projections): split across tensor-parallel ranks
    attention_kv: int  # k and v projections: split, but replicated once TP exceeds the KV heads
    attention_replicated: int  # MLA's down-projections and their norms: every TP rank holds them
    attention_bias: int  # q/k/v biases (column parallel: split across TP ranks)
    attention_out_bias: int  # output-projection bias (row parallel: every rank holds it whole)
    mlp_dense: int  # dense MLP matrices (dense layers only)
    mlp_bias: int  # up/gate biases (column parallel)
    mlp_out_bias: int  # down-projection bias (row parallel: replicated)
    experts_routed: int  # all routed experts of the layer (MoE layers only)
    experts_shared: int
    router: int
    norms: int

    @property
    def linear(self) -> int:
        """Matrices a weight-quantization scheme quantizes."""
        return (
            self.attention_sharded
            + self.attention_kv
            + self.attention_replicated
            + self.mlp_dense
            + self.experts_routed
            + self.experts_shared
        )

    @property
    def total(self) -> int:
        return (
            self.attention_sharded
            + self.attention_kv
            + self.attention_replicated
            + self.attention_bias
            + self.attention_out_bias
            + self.mlp_dense
            + self.mlp_bias
            + self.mlp_out_bias
            + self.experts_routed
            + self.experts_shared
            + self.router
            + self.norms
        )


def _attention_parameters(arch: ModelArchitecture) -> dict[str, int]:
    h = arch.hidden_size
    if arch.uses_mla:
        qk_head = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        if arch.q_lora_rank:
            q_down = h * arch.q_lora_rank
            q_norm = arch.q_lora_rank
            q_up = arch.q_lora_rank * arch.num_attention_heads * qk_head
        else:
            q_down, q_norm = 0, 0
            q_up = h * arch.num_attention_heads * qk_head
        kv_down = h * (arch.kv_lora_rank + arch.qk_rope_head_dim)
        kv_norm = arch.kv_lora_rank
        kv_up = arch.kv_lora_rank * arch.num_attention_heads * (arch.qk_nope_head_dim + arch.v_head_dim)
        o = arch.num_attention_heads * arch.v_head_dim * h
        return {
            "sharded": q_up + kv_up + o,
            "kv": 0,
            # The latent down-projections are small and every TP rank keeps a full copy (vLLM ReplicatedLinear).
            "replicated": q_down + kv_down,
            "replicated_norms": q_norm + kv_norm,
            "bias": 0,
            "out_bias": 0,
        }
    q = h * arch.num_attention_heads * arch.head_dim
    kv = 2 * h * arch.num_kv_heads * arch.head_dim
    o = arch.num_attention_heads * arch.head_dim * h
    bias = (arch.num_attention_heads + 2 * arch.num_kv_heads) * arch.head_dim if arch.qkv_bias else 0
    out_bias = h if arch.attn_out_bias else 0
    return {"sharded": q + o, "kv": kv, "replicated": 0, "replicated_norms": 0, "bias": bias, "out_bias": out_bias}


def _mlp_parameters(hidden: int, width: int, gated: bool, bias: bool) -> tuple[int, int, int]:
    """(matrices, column-parallel biases, row-parallel bias) of one dense MLP."""
    matrices = (3 if gated else 2) * hidden * width
    if not bias:
        return matrices, 0, 0
    return matrices, (2 if gated else 1) * width, hidden


def layer_parameters(arch: ModelArchitecture, moe_layer: bool) -> LayerParameters:
    """Parameter elements of one dense (`moe_layer=False`) or MoE layer."""
    h = arch.hidden_size
    attn = _attention_parameters(arch)
    norm_elems = arch.norms_per_layer * h * (2 if arch.norm_has_bias else 1) + attn["replicated_norms"]
    if arch.qk_norm:
        norm_elems += 2 * arch.head_dim
    if moe_layer:
        routed = arch.num_experts * 3 * h * arch.expert_intermediate_size
        shared = 3 * h * arch.shared_expert_intermediate_size
        router = arch.num_experts * h + (arch.num_experts if arch.router_bias else 0)
        router += h if arch.shared_expert_gate else 0
        mlp, mlp_bias, mlp_out_bias = 0, 0, 0
    else:
        routed, shared, router = 0, 0, 0
        mlp, mlp_bias, mlp_out_bias = _mlp_parameters(h, arch.intermediate_size, arch.mlp_gated, arch.mlp_bias)
    return LayerParameters(
        attention_sharded=attn["sharded"],
        attention_kv=attn["kv"],
        attention_replicated=attn["replicated"],
        attention_bias=attn["bias"],
        attention_out_bias=attn["out_bias"],
        mlp_dense=mlp,
        mlp_bias=mlp_bias,
        mlp_out_bias=mlp_out_bias,
        experts_routed=routed,
        experts_shared=shared,
        router=router,
        norms=norm_elems,
    )


@dataclass(frozen=True)
class ParameterCounts:
    """Whole-model parameter elements by component (not sharded)."""

    embedding: int
    position_embedding: int
    lm_head: int  # 0 when tied to the embedding
    final_norms: int
    dense_layer: LayerParameters
    moe_layer: LayerParameters | None
    num_dense_layers: int
    num_moe_layers: int
    experts_per_token: int
    num_experts: int

    @property
    def layers_total(self) -> int:
        moe = self.moe_layer.total * self.num_moe_layers if self.moe_layer else 0
        return self.dense_layer.total * self.num_dense_layers + moe

    @property
    def total(self) -> int:
        return self.embedding + self.position_embedding + self.lm_head + self.final_norms + self.layers_total

    @property
    def routed_experts_total(self) -> int:
        return self.moe_layer.experts_routed * self.num_moe_layers if self.moe_layer else 0

    @property
    def active(self) -> int:
        """Parameters one token touches: all but the routed experts it is not sent to.

        Includes the embedding and output head (the convention of the DeepSeek-V3 and Mixtral
        model cards: 37B and 12.9B active include them).
        """
        if not self.moe_layer:
            return self.total
        unused = self.routed_experts_total * (1 - self.experts_per_token / self.num_experts)
        return round(self.total - unused)

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.lm_head - self.position_embedding

    def as_dict(self) -> dict[str, int]:
        moe = self.moe_layer
        return {
            "embedding": self.embedding,
            "position_embedding": self.position_embedding,
            "lm_head": self.lm_head,
            "final_norms": self.final_norms,
            "attention": self.num_dense_layers
            * (
                self.dense_layer.attention_sharded
                + self.dense_layer.attention_kv
                + self.dense_layer.attention_replicated
                + self.dense_layer.attention_bias
                + self.dense_layer.attention_out_bias
            )
            + (
                self.num_moe_layers
                * (
                    moe.attention_sharded
                    + moe.attention_kv
                    + moe.attention_replicated
                    + moe.attention_bias
                    + moe.attention_out_bias
                )
                if moe
                else 0
            ),
            "mlp_dense": self.num_dense_layers
            * (self.dense_layer.mlp_dense + self.dense_layer.mlp_bias + self.dense_layer.mlp_out_bias),
            "experts_routed": self.routed_experts_total,
            "experts_shared": self.num_moe_layers * moe.experts_shared if moe else 0,
            "router": self.num_moe_layers * moe.router if moe else 0,
            "layer_norms": self.num_dense_layers * self.dense_layer.norms
            + (self.num_moe_layers * moe.norms if moe else 0),
        }


def parameter_counts(arch: ModelArchitecture) -> ParameterCounts:
    h = arch.hidden_size
    return ParameterCounts(
        embedding=arch.vocab_size * h,
        position_embedding=arch.learned_position_embeddings * h,
        lm_head=(0 if arch.tie_word_embeddings else arch.vocab_size * h)
        + (arch.vocab_size if arch.lm_head_bias else 0),
        final_norms=arch.extra_norms * h * (2 if arch.norm_has_bias else 1),
        dense_layer=layer_parameters(arch, moe_layer=False),
        moe_layer=layer_parameters(arch, moe_layer=True) if arch.is_moe else None,
        num_dense_layers=arch.num_dense_layers,
        num_moe_layers=arch.num_moe_layers,
        experts_per_token=arch.experts_per_token,
        num_experts=arch.num_experts,
    )


# ---------------------------------------------------------------------------------------------
# KV cache geometry


def kv_elements_per_token_per_layer(arch: ModelArchitecture, tensor_parallel=1):
    """Cached elements one token adds to one layer on one tensor-parallel rank.

    MHA/GQA/MQA: K and V for the rank's KV heads, `2 * kv_heads_per_rank * head_dim`; when TP
    exceeds the KV heads each rank keeps a full copy of one head (replication, vLLM/Megatron).
    MLA: the compressed latent plus the decoupled RoPE key, `kv_lora_rank + qk_rope_head_dim`
    (DeepSeek-V2 paper, Sec. 2.1.2); every TP rank holds the whole latent.
    Broadcasts over `tensor_parallel`.
    """
    if arch.uses_mla:
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) + 0 * tensor_parallel
    kv_heads_per_rank = _maximum(arch.num_kv_heads / tensor_parallel, 1)
    return 2 * kv_heads_per_rank * arch.head_dim


def cached_tokens_per_layer_sum(arch: ModelArchitecture, context_tokens, layers=None):
    """Sum over `layers` (default all) of the tokens each layer caches at this context.

    Sliding-window layers keep only the last `sliding_window` tokens. On a pipeline stage holding a
    subset of layers the sliding share is taken proportionally (exact when the stage is the whole model).
    """
    layers = arch.num_layers if layers is None else layers
    if not arch.sliding_window or arch.sliding_window_layers == 0:
        return layers * context_tokens
    sliding_share = arch.sliding_window_layers / arch.num_layers
    windowed = _minimum(context_tokens, arch.sliding_window)
    return layers * ((1 - sliding_share) * context_tokens + sliding_share * windowed)


def kv_cache_bytes_per_token(arch: ModelArchitecture, kv_bytes_per_element: float) -> float:
    """Whole-model KV bytes per token (no TP split, no sliding window): the headline number.

    Example: OPT-13B fp16 = 2 x 40 layers x 5120 x 2 B = 819,200 B (vLLM paper, Sec. 3: 800 KB).
    """
    return arch.num_layers * kv_elements_per_token_per_layer(arch, 1) * kv_bytes_per_element


# ---------------------------------------------------------------------------------------------
# FLOPs


def attention_score_flops_per_token(arch: ModelArchitecture, context_tokens, phase: str = "prefill"):
    """FLOPs of QK^T and attention x V for one query token attending `context_tokens` keys, one layer.

    Standard: 2*heads*head_dim*c (scores) + 2*heads*head_dim*c (weighted values).
    MLA prefill runs decompressed heads (qk = nope + rope, v = v_head_dim); MLA decode runs the
    weight-absorbed form over the latent (qk = kv_lora_rank + rope, v = kv_lora_rank), as FlashMLA does.
    """
    heads = arch.num_attention_heads
    if arch.uses_mla:
        if phase == "decode":
            qk, v = arch.kv_lora_rank + arch.qk_rope_head_dim, arch.kv_lora_rank
        else:
            qk, v = arch.qk_nope_head_dim + arch.qk_rope_head_dim, arch.v_head_dim
    else:
        qk = v = arch.head_dim
    return 2 * heads * (qk + v) * context_tokens


def mean_attended_tokens(arch: ModelArchitecture, context_tokens):
    """Keys a token attends to, averaged over layers (sliding-window layers are capped)."""
    return cached_tokens_per_layer_sum(arch, context_tokens) / arch.num_layers


def prefill_attention_flops(arch: ModelArchitecture, prompt_tokens):
    """Causal attention FLOPs for a whole prompt, all layers: sum over query positions of their context.

    The i-th token attends i keys, so the sum is ~s^2/2 (s(s+1)/2 exactly); sliding layers cap at the window.
    """
    per_key = attention_score_flops_per_token(arch, 1, "prefill")
    full = prompt_tokens * (prompt_tokens + 1) / 2
    if not arch.sliding_window or arch.sliding_window_layers == 0:
        return arch.num_layers * per_key * full
    w = arch.sliding_window
    capped = _where(prompt_tokens <= w, full, w * (w + 1) / 2 + (prompt_tokens - w) * w)
    sliding = arch.sliding_window_layers
    return per_key * ((arch.num_layers - sliding) * full + sliding * capped)


def matmul_flops_per_token(counts: ParameterCounts, include_lm_head: bool = True) -> float:
    """2 x active parameters that take part in a matmul (embeddings are lookups, norms elementwise)."""
    lm = counts.lm_head if counts.lm_head else counts.embedding  # tied: the embedding matrix is the head
    matmul_params = counts.active - counts.embedding - counts.lm_head - counts.position_embedding
    return 2 * (matmul_params + (lm if include_lm_head else 0))


__all__ = [
    "LayerParameters",
    "ModelArchitecture",
    "ParameterCounts",
    "attention_score_flops_per_token",
    "cached_tokens_per_layer_sum",
    "kv_cache_bytes_per_token",
    "kv_elements_per_token_per_layer",
    "layer_parameters",
    "matmul_flops_per_token",
    "mean_attended_tokens",
    "parameter_counts",
    "prefill_attention_flops",
]
