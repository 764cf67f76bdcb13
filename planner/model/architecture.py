"""A model's shape, and what follows from it: parameter counts, FLOPs and cache bytes per token.

`ModelArchitecture` is the normalized form every model becomes (catalog entry, uploaded
`config.json`, or a size-only synthetic model). Everything downstream reads only these fields.

Most models repeat one layer (plus a dense/MoE split); 2025-26 models mix layer kinds: sliding and
chunked attention windows (gpt-oss, Gemma 3, Llama 4), linear-attention and Mamba-2 layers between
attention layers (Qwen3-Next, Nemotron-H), per-layer widths and skipped sublayers (Nemotron-NAS).
`ModelArchitecture.layers` lists every layer as a `LayerSpec`; `parameter_counts` counts each one.

Conventions: counts are elements (not bytes); FLOPs count 2 per multiply-add.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from planner.arrays import maximum as _maximum
from planner.arrays import minimum as _minimum
from planner.arrays import where as _where
from planner.model.memo import by_identity

MixerKind = Literal[
    "full_attention",  # softmax attention over the whole context
    "sliding_attention",  # softmax attention over the last `window_tokens` tokens
    "chunked_attention",  # softmax attention within fixed chunks of `window_tokens` (Llama 4 local layers)
    "linear_attention",  # Gated DeltaNet (Qwen3-Next): a constant-size recurrent state, no KV cache
    "mamba",  # Mamba-2 selective state space mixer (Nemotron-H): a constant-size state, no KV cache
    "linear",  # attention replaced by one hidden x hidden matrix (Nemotron-NAS replace_with_linear)
    "none",  # no token mixer in this layer (Nemotron-NAS no_op, Nemotron-H MLP/MoE blocks)
]
MlpKind = Literal[
    "dense",  # an MLP of `intermediate_size` (the layer's own width when given)
    "moe",  # routed experts (+ shared experts, router)
    "linear",  # the MLP replaced by one hidden x hidden matrix (Nemotron-NAS)
    "none",  # no feed-forward block (Nemotron-NAS no_op, Nemotron-H mixer blocks)
]
ATTENTION_MIXERS: tuple[str, ...] = ("full_attention", "sliding_attention", "chunked_attention")
WINDOWED_MIXERS: tuple[str, ...] = ("sliding_attention", "chunked_attention")
RECURRENT_MIXERS: tuple[str, ...] = ("linear_attention", "mamba")

ModuleGroup = Literal["attention", "mlp", "routed_experts", "shared_experts", "router", "embedding", "lm_head", "norms"]
MODULE_GROUPS: tuple[ModuleGroup, ...] = (
    "attention",
    "mlp",
    "routed_experts",
    "shared_experts",
    "router",
    "embedding",
    "lm_head",
    "norms",
)


class LayerSpec(BaseModel):
    """One decoder layer: its token mixer and its feed-forward block.

    `num_kv_heads` and `intermediate_size` override the model's values for this layer only
    (Nemotron-NAS varies both per layer); None means the model's value.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mixer: MixerKind = "full_attention"
    window_tokens: int | None = Field(default=None, gt=0)  # the window (sliding) or chunk (chunked) size
    rope: bool = True  # False: a NoPE layer (Llama 4's global layers); no parameters depend on it
    num_kv_heads: int | None = Field(default=None, gt=0, le=16_384)
    mlp: MlpKind = "dense"
    intermediate_size: int | None = Field(default=None, ge=0, le=4_000_000)

    @model_validator(mode="after")
    def _window_matches_mixer(self) -> LayerSpec:
        if (self.mixer in WINDOWED_MIXERS) != (self.window_tokens is not None):
            raise ValueError(f"a {self.mixer} layer {'needs' if self.mixer in WINDOWED_MIXERS else 'takes no'} window")
        return self

    @property
    def kind(self) -> str:
        """'full attention', 'sliding window 128', 'chunked local 8192', 'linear attention', 'mamba', ..."""
        if self.mixer == "sliding_attention":
            return f"sliding window {self.window_tokens}"
        if self.mixer == "chunked_attention":
            return f"chunked local {self.window_tokens}"
        return {"none": "no mixer", "linear": "linear replacement"}.get(self.mixer, self.mixer.replace("_", " "))


class CheckpointQuantization(BaseModel):
    """What a checkpoint's `quantization_config` declares: the stored dtype of each module group.

    Data for the engine's weight-bytes terms (not read by them yet). `quantized_groups` are stored in
    `weight_format` (with `weight_block_size` scale blocks where given); every other group in
    `unquantized_dtype` (the config's torch_dtype). E.g. DeepSeek-V3/R1: fp8 e4m3 with 128x128 block
    scales for every linear layer, embedding/lm_head/norms/router in bf16; gpt-oss: MXFP4 routed experts
    only (`modules_to_not_convert` keeps attention, router, embedding and lm_head in bf16).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str  # quant_method as written: "fp8", "mxfp4", ...
    weight_format: str  # "float8_e4m3fn", "mxfp4", ...
    weight_block_size: tuple[int, ...] = ()
    scale_format: str | None = None  # e.g. "ue8m0" (DeepSeek-V3.2's power-of-two scales)
    activation_scheme: str | None = None  # "dynamic" / "static"
    quantized_groups: tuple[ModuleGroup, ...] = ()
    modules_to_not_convert: tuple[str, ...] = ()
    unquantized_dtype: str = "bfloat16"

    def checkpoint_dtype(self, group: ModuleGroup) -> str:
        return self.weight_format if group in self.quantized_groups else self.unquantized_dtype


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
    router_bias: bool = False  # one element per expert: DeepSeek-V3 e_score_correction_bias, gpt-oss router bias

    # Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank 0 = ordinary attention
    q_lora_rank: int = Field(default=0, ge=0)
    kv_lora_rank: int = Field(default=0, ge=0)
    qk_nope_head_dim: int = Field(default=0, ge=0)
    qk_rope_head_dim: int = Field(default=0, ge=0)
    v_head_dim: int = Field(default=0, ge=0)

    # ---- 2025-26 additions (defaults leave every earlier model unchanged) ----
    # Every layer, in order; empty = all layers follow the fields above (see `layers`).
    layer_pattern: tuple[LayerSpec, ...] = ()
    attention_sinks: bool = False  # gpt-oss: one learned logit per head per layer
    attention_output_gate: bool = False  # Qwen3-Next: q_proj also emits a sigmoid output gate (2x its width)
    qk_norm_full_width: bool = False  # OLMo 2, MiniMax-M2: q_norm over heads x head_dim, k_norm over kv x head_dim
    experts_gated: bool = True  # False: routed and shared experts are up/down MLPs (Nemotron-H, relu^2)
    expert_bias: bool = False  # gpt-oss: every expert's gate_up and down projections carry biases
    moe_latent_size: int = Field(default=0, ge=0)  # Nemotron-H latent MoE: experts run in this width
    # DeepSeek-V3.2 sparse attention: the lightning indexer of every MLA layer
    indexer_num_heads: int = Field(default=0, ge=0)
    indexer_head_dim: int = Field(default=0, ge=0)
    indexer_topk: int = Field(default=0, ge=0)  # each query attends only the index_topk keys the indexer picks
    # Gated DeltaNet (Qwen3-Next linear_attention layers)
    linear_num_key_heads: int = Field(default=0, ge=0)
    linear_num_value_heads: int = Field(default=0, ge=0)
    linear_key_head_dim: int = Field(default=0, ge=0)
    linear_value_head_dim: int = Field(default=0, ge=0)
    linear_conv_kernel: int = Field(default=0, ge=0)
    # Mamba-2 mixer (Nemotron-H mamba layers)
    mamba_num_heads: int = Field(default=0, ge=0)
    mamba_head_dim: int = Field(default=0, ge=0)
    mamba_state_size: int = Field(default=0, ge=0)
    mamba_groups: int = Field(default=0, ge=0)
    mamba_conv_kernel: int = Field(default=0, ge=0)
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    # Bytes per element of the SSM state when the config fixes its dtype (Nemotron 3 mamba_ssm_cache_dtype
    # float32: 4); 0 = the activation dtype, like the conv state and the Gated DeltaNet state.
    ssm_state_bytes_per_element: int = Field(default=0, ge=0, le=8)
    # A multimodal checkpoint's vision tower and projector, counted apart from the language model
    vision_encoder_parameters: int = Field(default=0, ge=0)
    vision_model_type: str | None = None
    # One image through the tower: its patches (the encoder's sequence), the language-model tokens it becomes,
    # and the tower's width and depth (planner.model.vision.vision_geometry); 0 without a vision tower.
    vision_patches_per_image: int = Field(default=0, ge=0, le=1_000_000)
    vision_tokens_per_image: int = Field(default=0, ge=0, le=1_000_000)
    vision_hidden_size: int = Field(default=0, ge=0, le=65_536)
    vision_num_layers: int = Field(default=0, ge=0, le=1024)
    checkpoint_dtype: str | None = None  # the config's torch_dtype / dtype
    # Multi-token-prediction modules shipped beside the model (DeepSeek-V3's num_nextn_predict_layers,
    # MiniMax-M2's num_mtp_modules): not part of the language model's parameters; a speculative draft.
    mtp_layers: int = Field(default=0, ge=0, le=64)
    quantization: CheckpointQuantization | None = None
    assumptions: tuple[str, ...] = ()  # what the parser assumed (e.g. a config read by the generic fallback)

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
        if self.first_k_dense_layers >= self.num_layers and self.num_experts and not self.layer_pattern:
            raise ValueError("first_k_dense_replace leaves no MoE layers")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError("more sliding-window layers than layers")
        if self.kv_lora_rank and not (self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("multi-head latent attention needs qk_rope_head_dim and v_head_dim")
        if self.layer_pattern:
            self._check_pattern()
        return self

    def _check_pattern(self) -> None:
        pattern = self.layer_pattern
        if len(pattern) != self.num_layers:
            raise ValueError(f"the layer pattern lists {len(pattern)} layers for num_hidden_layers {self.num_layers}")
        windowed = [layer for layer in pattern if layer.mixer in WINDOWED_MIXERS]
        if len(windowed) != (self.sliding_window_layers if self.sliding_window else 0):
            raise ValueError("sliding_window_layers must count the windowed layers of the layer pattern")
        if any(layer.window_tokens != self.sliding_window for layer in windowed):
            raise ValueError("every windowed layer must use the model's sliding_window")
        mixers = {layer.mixer for layer in pattern}
        if "linear_attention" in mixers and not (
            self.linear_num_key_heads
            and self.linear_num_value_heads
            and self.linear_key_head_dim
            and self.linear_value_head_dim
            and self.linear_conv_kernel
        ):
            raise ValueError("linear-attention layers need linear_num_key/value_heads, head dims and conv kernel")
        if "mamba" in mixers and not (
            self.mamba_num_heads and self.mamba_head_dim and self.mamba_state_size and self.mamba_groups
        ):
            raise ValueError("mamba layers need mamba_num_heads, mamba_head_dim, ssm_state_size and n_groups")
        if self.mamba_groups and self.mamba_num_heads % self.mamba_groups:
            raise ValueError(
                f"mamba_num_heads {self.mamba_num_heads} is not a multiple of n_groups {self.mamba_groups}"
            )
        moe = sum(layer.mlp == "moe" for layer in pattern)
        if moe and not self.num_experts:
            raise ValueError("the layer pattern has MoE layers but the model has no experts")
        if self.num_experts and not moe:
            raise ValueError("the model has experts but no MoE layer")
        for layer in pattern:
            if layer.num_kv_heads and self.num_attention_heads % layer.num_kv_heads:
                raise ValueError(
                    f"num_attention_heads {self.num_attention_heads} is not a multiple of a layer's "
                    f"{layer.num_kv_heads} key/value heads"
                )

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
        if self.layer_pattern:
            return sum(layer.mlp == "moe" for layer in self.layer_pattern)
        return sum(
            1
            for i in range(self.first_k_dense_layers, self.num_layers)
            if (i + self.moe_layer_phase) % self.moe_layer_interval == 0
        )

    @computed_field
    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def layers(self) -> tuple[LayerSpec, ...]:
        """Every layer in order: `layer_pattern` when given, else derived from the uniform fields.

        Derived: MoE layers by the first-k-dense / interval / phase rule above; the
        `sliding_window_layers` windowed layers spread evenly (all of them when every layer slides;
        parsers of alternating models give the exact pattern).
        """
        # Frozen pydantic models hash by value at runtime; pyright cannot see it (hence the cast).
        return self.layer_pattern or _derived_layers(cast(Hashable, self))

    @property
    def layer_kind_counts(self) -> dict[str, int]:
        """How many layers of each kind ('full attention': 12, 'sliding window 128': 12, ...)."""
        return dict(_layer_kind_counts(self))

    @property
    def is_hybrid(self) -> bool:
        """True when some layers have no softmax attention (linear attention, Mamba, no-op, linear)."""
        return any(kind not in ATTENTION_MIXERS for kind in _layer_mixer_counts(self))

    @property
    def num_attention_layers(self) -> int:
        """Layers with softmax attention (full, sliding or chunked): the only ones with a KV cache."""
        return sum(group.layers for group in attention_layer_groups(self))


@lru_cache(maxsize=256)
def _derived_layers(arch: ModelArchitecture) -> tuple[LayerSpec, ...]:
    n = arch.num_layers
    sliding = arch.sliding_window_layers if arch.sliding_window else 0
    out = []
    for i in range(n):
        # Bresenham spread: exactly `sliding` of the n layers, all of them when sliding == n.
        slides = (i + 1) * sliding // n > i * sliding // n
        moe = (
            arch.is_moe and i >= arch.first_k_dense_layers and (i + arch.moe_layer_phase) % arch.moe_layer_interval == 0
        )
        out.append(
            LayerSpec(
                mixer="sliding_attention" if slides else "full_attention",
                window_tokens=arch.sliding_window if slides else None,
                mlp="moe" if moe else "dense",
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class LayerParameters:
    """Parameter elements of one transformer layer, grouped by how they shard and quantize.

    The `attention_*` groups hold the layer's token mixer, whatever it is: softmax attention; for a
    Gated DeltaNet or Mamba-2 layer its projections (`attention_sharded`) and its per-head / per-channel
    vectors (conv1d weights, A_log, D, dt_bias, Mamba's gated norm: `attention_bias`), which tensor
    parallelism splits by heads exactly as it splits q/k/v biases (vLLM MambaMixer2, GatedDeltaNet).
    """

    attention_sharded: int  # q, o (and MLA's up-projections): split across tensor-parallel ranks
    attention_kv: int  # k and v projections: split, but replicated once TP exceeds the KV heads
    attention_replicated: int  # MLA's down-projections (and V3.2's indexer): every TP rank holds them
    attention_bias: int  # q/k/v biases (column parallel: split across TP ranks)
    attention_out_bias: int  # output-projection bias (row parallel: every rank holds it whole)
    mlp_dense: int  # dense MLP matrices (dense layers only)
    mlp_bias: int  # up/gate biases (column parallel)
    mlp_out_bias: int  # down-projection bias (row parallel: replicated)
    experts_routed: int  # all routed experts of the layer (MoE layers only)
    experts_shared: int
    router: int
    norms: int
    attention_sinks: int = 0  # gpt-oss: one logit per query head (split across TP ranks with the heads)
    experts_bias: int = 0  # gpt-oss: the routed experts' biases (sharded like the experts, kept unquantized)

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
    def attention_total(self) -> int:
        return (
            self.attention_sharded
            + self.attention_kv
            + self.attention_replicated
            + self.attention_bias
            + self.attention_out_bias
            + self.attention_sinks
        )

    @cached_property
    def total(self) -> int:
        return (
            self.attention_total
            + self.mlp_dense
            + self.mlp_bias
            + self.mlp_out_bias
            + self.experts_routed
            + self.experts_bias
            + self.experts_shared
            + self.router
            + self.norms
        )


@dataclass(frozen=True)
class _Mixer:
    """A token mixer's elements by sharding class (see LayerParameters)."""

    sharded: int = 0
    kv: int = 0
    replicated: int = 0
    bias: int = 0
    out_bias: int = 0
    norms: int = 0
    sinks: int = 0


def _mla_parameters(arch: ModelArchitecture) -> _Mixer:
    """DeepseekV3Attention (transformers modeling_deepseek_v3.py); plus DeepseekV32Indexer when the
    model has one (modeling_deepseek_v32.py: wq_b q_lora x heads*dim, wk hidden x dim, k_norm LayerNorm
    (weight + bias), weights_proj hidden x heads; vLLM keeps all of them ReplicatedLinear)."""
    h = arch.hidden_size
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
    indexer, indexer_norm = 0, 0
    if arch.indexer_num_heads:
        heads, dim = arch.indexer_num_heads, arch.indexer_head_dim
        indexer = arch.q_lora_rank * heads * dim + h * dim + h * heads
        indexer_norm = 2 * dim
    return _Mixer(
        sharded=q_up + kv_up + o,
        # The latent down-projections are small and every TP rank keeps a full copy (vLLM ReplicatedLinear).
        replicated=q_down + kv_down + indexer,
        norms=q_norm + kv_norm + indexer_norm,
    )


def _softmax_attention_parameters(arch: ModelArchitecture, layer: LayerSpec) -> _Mixer:
    """q/k/v/o projections, their biases, q/k norms and sinks of one softmax-attention layer.

    Qwen3-Next's gated attention doubles q_proj (query and output gate, modeling_qwen3_next.py);
    gpt-oss adds `sinks` (num_attention_heads, modeling_gpt_oss.py); OLMo 2 / MiniMax-M2 normalize the
    whole q and k projections (Olmo2Attention q_norm over heads*head_dim), Qwen3 / Gemma 3 each head.
    """
    if arch.uses_mla:
        return _mla_parameters(arch)
    h, heads, dim = arch.hidden_size, arch.num_attention_heads, arch.head_dim
    kv_heads = layer.num_kv_heads or arch.num_kv_heads
    q_width = heads * dim * (2 if arch.attention_output_gate else 1)
    if arch.qk_norm_full_width:
        qk_norms = (heads + kv_heads) * dim
    else:
        qk_norms = 2 * dim if arch.qk_norm else 0
    return _Mixer(
        sharded=h * q_width + heads * dim * h,
        kv=2 * h * kv_heads * dim,
        bias=q_width + 2 * kv_heads * dim if arch.qkv_bias else 0,
        out_bias=h if arch.attn_out_bias else 0,
        norms=qk_norms,
        sinks=heads if arch.attention_sinks else 0,
    )


def _gated_deltanet_parameters(arch: ModelArchitecture) -> _Mixer:
    """Qwen3NextGatedDeltaNet (transformers modeling_qwen3_next.py): in_proj_qkvz hidden x (2 key_dim +
    2 value_dim), in_proj_ba hidden x 2 v_heads, depthwise conv1d conv_dim x kernel (no bias, conv_dim =
    2 key_dim + value_dim), dt_bias and A_log (v_heads each), a gated RMSNorm of head_v_dim shared by the
    heads, out_proj value_dim x hidden."""
    h = arch.hidden_size
    key_dim = arch.linear_num_key_heads * arch.linear_key_head_dim
    value_dim = arch.linear_num_value_heads * arch.linear_value_head_dim
    conv_dim = 2 * key_dim + value_dim
    projections = h * (2 * key_dim + 2 * value_dim) + h * 2 * arch.linear_num_value_heads + value_dim * h
    return _Mixer(
        sharded=projections,
        bias=conv_dim * arch.linear_conv_kernel + 2 * arch.linear_num_value_heads,
        norms=arch.linear_value_head_dim,
    )


def _mamba2_parameters(arch: ModelArchitecture) -> _Mixer:
    """NemotronHMamba2Mixer (transformers modeling_nemotron_h.py): in_proj hidden x (intermediate +
    conv_dim + heads) with intermediate = heads x head_dim and conv_dim = intermediate + 2 groups x
    state; depthwise conv1d conv_dim x kernel (+ conv_dim bias); dt_bias, A_log, D (heads each); a gated
    RMSNorm over intermediate; out_proj intermediate x hidden (projection biases when use_bias)."""
    h = arch.hidden_size
    inner = arch.mamba_num_heads * arch.mamba_head_dim
    conv_dim = inner + 2 * arch.mamba_groups * arch.mamba_state_size
    in_width = inner + conv_dim + arch.mamba_num_heads
    conv = conv_dim * arch.mamba_conv_kernel + (conv_dim if arch.mamba_conv_bias else 0)
    return _Mixer(
        sharded=h * in_width + inner * h,
        bias=conv + 3 * arch.mamba_num_heads + inner + (in_width if arch.mamba_proj_bias else 0),
        out_bias=h if arch.mamba_proj_bias else 0,
    )


def _mixer_parameters(arch: ModelArchitecture, layer: LayerSpec) -> _Mixer:
    if layer.mixer in ATTENTION_MIXERS:
        return _softmax_attention_parameters(arch, layer)
    if layer.mixer == "linear_attention":
        return _gated_deltanet_parameters(arch)
    if layer.mixer == "mamba":
        return _mamba2_parameters(arch)
    if layer.mixer == "linear":  # DeciLMLinearAttention: one bias-free hidden x hidden matrix
        return _Mixer(sharded=arch.hidden_size * arch.hidden_size)
    return _Mixer()


def _mlp_parameters(hidden: int, width: int, gated: bool, bias: bool) -> tuple[int, int, int]:
    """(matrices, column-parallel biases, row-parallel bias) of one dense MLP."""
    matrices = (3 if gated else 2) * hidden * width
    if not bias:
        return matrices, 0, 0
    return matrices, (2 if gated else 1) * width, hidden


def sublayers(layer: LayerSpec) -> int:
    """Residual branches of one layer: its token mixer and its feed-forward block, each where present."""
    return (layer.mixer != "none") + (layer.mlp != "none")


def sublayer_norm_count(arch: ModelArchitecture, layer: LayerSpec) -> int:
    """Hidden-size norms of one layer: `norms_per_layer` when it has both a mixer and an MLP; half of them
    when one is missing (a Nemotron-H block has one pre-norm; Nemotron-NAS drops the norm of a no-op)."""
    present = sublayers(layer)
    if present == 2:
        return arch.norms_per_layer
    return max(arch.norms_per_layer // 2, 1) if present == 1 else 0


def _sublayer_norms(arch: ModelArchitecture, layer: LayerSpec) -> int:
    """Parameter elements of one layer's hidden-size norms (`sublayer_norm_count`)."""
    return sublayer_norm_count(arch, layer) * arch.hidden_size * (2 if arch.norm_has_bias else 1)


def layer_spec_parameters(arch: ModelArchitecture, layer: LayerSpec) -> LayerParameters:
    """Parameter elements of one layer of `arch` described by `layer`.

    MoE block: E routed experts (gate, up, down; up, down when not `experts_gated`; in the latent width
    with Nemotron-H's `moe_latent_size`, whose two latent projections count with the shared experts as
    always-active matrices), shared experts, the router (E x hidden, + E for a router bias, + hidden for
    Qwen's shared-expert gate) and, for gpt-oss, the experts' biases.
    """
    h = arch.hidden_size
    mixer = _mixer_parameters(arch, layer)
    routed = shared = router = experts_bias = 0
    mlp = mlp_bias = mlp_out_bias = 0
    if layer.mlp == "moe":
        inner = arch.moe_latent_size or h
        per_expert = (3 if arch.experts_gated else 2) * inner * arch.expert_intermediate_size
        routed = arch.num_experts * per_expert
        if arch.expert_bias:
            experts_bias = arch.num_experts * ((2 if arch.experts_gated else 1) * arch.expert_intermediate_size + inner)
        shared = (3 if arch.experts_gated else 2) * h * arch.shared_expert_intermediate_size
        shared += 2 * h * arch.moe_latent_size
        router = arch.num_experts * h + (arch.num_experts if arch.router_bias else 0)
        router += h if arch.shared_expert_gate else 0
    elif layer.mlp == "dense":
        width = arch.intermediate_size if layer.intermediate_size is None else layer.intermediate_size
        mlp, mlp_bias, mlp_out_bias = _mlp_parameters(h, width, arch.mlp_gated, arch.mlp_bias)
    elif layer.mlp == "linear":  # DeciLMLinearMLP: one bias-free hidden x hidden matrix
        mlp = h * h
    return LayerParameters(
        attention_sharded=mixer.sharded,
        attention_kv=mixer.kv,
        attention_replicated=mixer.replicated,
        attention_bias=mixer.bias,
        attention_out_bias=mixer.out_bias,
        mlp_dense=mlp,
        mlp_bias=mlp_bias,
        mlp_out_bias=mlp_out_bias,
        experts_routed=routed,
        experts_shared=shared,
        router=router,
        norms=_sublayer_norms(arch, layer) + mixer.norms,
        attention_sinks=mixer.sinks,
        experts_bias=experts_bias,
    )


def _mean_layer(layers: list[LayerParameters]) -> LayerParameters:
    """Field-wise mean, rounded down (exact when the layers are equal)."""
    n = len(layers)
    return LayerParameters(
        **{f.name: sum(getattr(layer, f.name) for layer in layers) // n for f in fields(LayerParameters)}
    )


def _sum_layers(layers: list[LayerParameters]) -> LayerParameters:
    """Field-wise sum."""
    return LayerParameters(**{f.name: sum(getattr(layer, f.name) for layer in layers) for f in fields(LayerParameters)})


def layer_parameters(arch: ModelArchitecture, moe_layer: bool) -> LayerParameters:
    """Parameter elements of one dense (`moe_layer=False`) or MoE layer: the mean over the model's layers
    of that kind (see `ParameterCounts.dense_layer`)."""
    counts = parameter_counts(arch)
    if moe_layer:
        return counts.moe_layer or layer_spec_parameters(arch, LayerSpec(mlp="moe"))
    return counts.dense_layer


@dataclass(frozen=True)
class ParameterCounts:
    """Whole-model parameter elements by component (not sharded).

    `layers` holds every decoder layer exactly (aligned with `ModelArchitecture.layers`); `total` sums
    them. `dense_layer` / `moe_layer` are the mean non-MoE / MoE layer (each field rounded down), so a
    model of identical layers is described exactly by `num_dense_layers x dense_layer + num_moe_layers x
    moe_layer`; for mixed stacks (Nemotron-H, Nemotron-NAS, Qwen3-Next) that product is within
    `num_layers` elements per field of the exact sum (`dense_layers_sum` / `moe_layers_sum` are exact).
    `vision_encoder` is a multimodal checkpoint's vision tower and projector, not part of `total` (the
    language model).
    """

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
    layers: tuple[LayerParameters, ...] = ()
    layer_mixers: tuple[str, ...] = ()  # each layer's LayerSpec.mixer
    vision_encoder: int = 0
    # Exact field-wise sums over the non-MoE / MoE layers (None: `count x mean layer` is exact), so weight
    # bytes of a mixed stack equal its parameter count (`planner.physics.memory.weight_bytes`).
    dense_layers_sum: LayerParameters | None = None
    moe_layers_sum: LayerParameters | None = None

    @cached_property
    def layers_total(self) -> int:
        if self.layers:
            return sum(layer.total for layer in self.layers)
        moe = self.moe_layer.total * self.num_moe_layers if self.moe_layer else 0
        return self.dense_layer.total * self.num_dense_layers + moe

    @cached_property
    def total(self) -> int:
        """The language model's parameters (vision tower excluded: see `total_with_vision`)."""
        return self.embedding + self.position_embedding + self.lm_head + self.final_norms + self.layers_total

    @cached_property
    def total_with_vision(self) -> int:
        """Every parameter of the checkpoint's model class (language model + vision tower + projector)."""
        return self.total + self.vision_encoder

    @cached_property
    def routed_experts_total(self) -> int:
        if self.layers:
            return sum(layer.experts_routed + layer.experts_bias for layer in self.layers)
        return (
            (self.moe_layer.experts_routed + self.moe_layer.experts_bias) * self.num_moe_layers if self.moe_layer else 0
        )

    @cached_property
    def active(self) -> int:
        """Parameters one token touches: all but the routed experts it is not sent to.

        Includes the embedding and output head (the convention of the DeepSeek-V3 and Mixtral
        model cards: 37B and 12.9B active include them).
        """
        if not self.moe_layer:
            return self.total
        unused = self.routed_experts_total * (1 - self.experts_per_token / self.num_experts)
        return round(self.total - unused)

    @cached_property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.lm_head - self.position_embedding

    def as_dict(self) -> dict[str, int]:
        """Named components summing to `total_with_vision`. Mixers of linear-attention and Mamba layers get
        their own keys ('linear_attention', 'mamba'), and a multimodal checkpoint's vision tower
        'vision_encoder', each present only when the model has it."""
        return dict(self._components)

    @cached_property
    def _components(self) -> dict[str, int]:
        # Computed once per (memoized) counts object: a plan reports it, and it walks every layer.
        layers = self.layers or (self.dense_layer,) * self.num_dense_layers + (
            (self.moe_layer,) * self.num_moe_layers if self.moe_layer else ()
        )
        mixers = self.layer_mixers or ("full_attention",) * len(layers)
        out = {
            "embedding": self.embedding,
            "position_embedding": self.position_embedding,
            "lm_head": self.lm_head,
            "final_norms": self.final_norms,
            "attention": 0,
            "mlp_dense": 0,
            "experts_routed": 0,
            "experts_shared": 0,
            "router": 0,
            "layer_norms": 0,
        }
        for layer, mixer in zip(layers, mixers):
            key = mixer if mixer in RECURRENT_MIXERS else "attention"
            out[key] = out.get(key, 0) + layer.attention_total
            out["mlp_dense"] += layer.mlp_dense + layer.mlp_bias + layer.mlp_out_bias
            out["experts_routed"] += layer.experts_routed + layer.experts_bias
            out["experts_shared"] += layer.experts_shared
            out["router"] += layer.router
            out["layer_norms"] += layer.norms
        if self.vision_encoder:
            out["vision_encoder"] = self.vision_encoder
        return out


@by_identity
def _layer_mixer_counts(arch: ModelArchitecture) -> Counter[str]:
    return Counter(layer.mixer for layer in arch.layers)


@by_identity
def _layer_kind_counts(arch: ModelArchitecture) -> tuple[tuple[str, int], ...]:
    # Memoized: a plan asks for it several times, and Counter over a long layer stack is not free.
    return tuple(Counter(layer.kind for layer in arch.layers).items())


@by_identity
def parameter_counts(arch: ModelArchitecture) -> ParameterCounts:
    """Every parameter element of the language model, layer by layer (see ParameterCounts)."""
    h = arch.hidden_size
    specs = arch.layers
    per_layer = tuple(layer_spec_parameters(arch, spec) for spec in specs)
    dense = [p for p, spec in zip(per_layer, specs) if spec.mlp != "moe"]
    moe = [p for p, spec in zip(per_layer, specs) if spec.mlp == "moe"]
    return ParameterCounts(
        embedding=arch.vocab_size * h,
        position_embedding=arch.learned_position_embeddings * h,
        lm_head=(0 if arch.tie_word_embeddings else arch.vocab_size * h)
        + (arch.vocab_size if arch.lm_head_bias else 0),
        final_norms=arch.extra_norms * h * (2 if arch.norm_has_bias else 1),
        dense_layer=_mean_layer(dense) if dense else layer_spec_parameters(arch, LayerSpec()),
        moe_layer=_mean_layer(moe) if moe else None,
        num_dense_layers=arch.num_dense_layers,
        num_moe_layers=arch.num_moe_layers,
        experts_per_token=arch.experts_per_token,
        num_experts=arch.num_experts,
        layers=per_layer,
        layer_mixers=tuple(spec.mixer for spec in specs),
        vision_encoder=arch.vision_encoder_parameters,
        dense_layers_sum=_sum_layers(dense) if dense else None,
        moe_layers_sum=_sum_layers(moe) if moe else None,
    )


# ---------------------------------------------------------------------------------------------
# Which layers attend, and to how many keys


@dataclass(frozen=True)
class AttentionGroup:
    """Softmax-attention layers that cache and attend alike: how many, their KV heads, their window."""

    layers: int
    kv_heads: int
    window_tokens: int | None  # sliding window or chunk (the most tokens a layer keeps); None: the whole context
    chunked: bool = False  # chunked local attention (Llama 4): a query attends its own chunk only


def group_cached_tokens(group: AttentionGroup, context_tokens, honor_window=True):
    """Tokens one layer of `group` caches for a sequence of `context_tokens`: all of them, or at most the
    window when the engine honours it (see `planner.model.cache.layer_cached_tokens`). Broadcasts."""
    if group.window_tokens is None:
        return context_tokens
    return _where(honor_window, _minimum(context_tokens, group.window_tokens), context_tokens)


@by_identity
def attention_layer_groups(arch: ModelArchitecture) -> tuple[AttentionGroup, ...]:
    """The model's softmax-attention layers grouped by (KV heads, window, chunked); layers without softmax
    attention (linear attention, Mamba, linear replacements, no-ops) are in no group. A handful of groups at
    most, so per-layer sums stay a short loop over numpy arrays in the sweep."""
    kinds = Counter(
        (layer.num_kv_heads or arch.num_kv_heads, layer.window_tokens, layer.mixer == "chunked_attention")
        for layer in arch.layers
        if layer.mixer in ATTENTION_MIXERS
    )
    return tuple(AttentionGroup(n, kv_heads, window, chunked) for (kv_heads, window, chunked), n in kinds.items())


def attention_span_tokens(arch: ModelArchitecture, group: AttentionGroup) -> int | None:
    """Most keys one query of `group` attends: its window, or DeepSeek-V3.2's `index_topk` (sparse attention
    reads only the keys its indexer selects), whichever is smaller; None: every cached key."""
    spans = [span for span in (group.window_tokens, arch.indexer_topk) if span]
    return min(spans) if spans else None


def kv_elements_per_token_per_layer(arch: ModelArchitecture, tensor_parallel=1, kv_heads: int | None = None):
    """Cached elements one token adds to one attention layer on one tensor-parallel rank.

    MHA/GQA/MQA: K and V for the rank's KV heads, `2 * kv_heads_per_rank * head_dim`; when TP
    exceeds the KV heads each rank keeps a full copy of one head (replication, vLLM/Megatron).
    `kv_heads` is a layer's own count (Nemotron-NAS), default the model's.
    MLA: the compressed latent plus the decoupled RoPE key, `kv_lora_rank + qk_rope_head_dim`
    (DeepSeek-V2 paper, Sec. 2.1.2); every TP rank holds the whole latent.
    Broadcasts over `tensor_parallel`.
    """
    if arch.uses_mla:
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) + 0 * tensor_parallel
    kv_heads_per_rank = _maximum((kv_heads or arch.num_kv_heads) / tensor_parallel, 1)
    return 2 * kv_heads_per_rank * arch.head_dim


def cached_tokens_per_layer_sum(arch: ModelArchitecture, context_tokens, layers=None, honor_window=True):
    """Sum over the attention layers of the tokens each caches at this context (layers without softmax
    attention cache none).

    Sliding-window and chunked layers keep at most their window when `honor_window` (min(c, w): the keys
    the next step attends; see `planner.model.cache.layer_cached_tokens`). `layers` (default all) takes a
    pipeline stage's share of that sum in proportion to its layers (exact when the stage is the whole
    model). Broadcasts over `context_tokens`.
    """
    total = 0 * context_tokens
    for group in attention_layer_groups(arch):
        total = total + group.layers * group_cached_tokens(group, context_tokens, honor_window)
    return total if layers is None else total * layers / arch.num_layers


def kv_cache_bytes_per_token(arch: ModelArchitecture, kv_bytes_per_element: float) -> float:
    """Whole-model KV bytes one token adds (no TP split, no window): every attention layer's K and V (or
    MLA latent), each with its own KV heads; linear-attention and Mamba layers add none (their state is
    constant per sequence). The headline number.

    Example: OPT-13B fp16 = 2 x 40 layers x 5120 x 2 B = 819,200 B (vLLM paper, Sec. 3: 800 KB).
    """
    return sum(
        group.layers * kv_elements_per_token_per_layer(arch, 1, group.kv_heads) * kv_bytes_per_element
        for group in attention_layer_groups(arch)
    )


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


def attended_tokens_per_layer_sum(arch: ModelArchitecture, context_tokens):
    """Keys one query at `context_tokens` attends, summed over the attention layers: each layer's
    `attention_span_tokens` caps it (windows, V3.2's top-k); other layers attend none. A chunked layer's
    query attends between 1 and C keys as it moves through its chunk: charged the C it reaches (an upper
    bound, the same as its cache), so the term stays linear in the context up to the chunk."""
    total = 0 * context_tokens
    for group in attention_layer_groups(arch):
        span = attention_span_tokens(arch, group)
        total = total + group.layers * (context_tokens if span is None else _minimum(context_tokens, span))
    return total


def mean_attended_tokens(arch: ModelArchitecture, context_tokens):
    """Keys a token attends to, averaged over all layers (windowed and sparse layers capped, layers
    without softmax attention counting 0)."""
    return attended_tokens_per_layer_sum(arch, context_tokens) / arch.num_layers


def _causal_pairs(prompt_tokens, span: int | None, chunked: bool = False):
    """Query-key pairs of causal attention over a prompt of s tokens when a query attends at most `span`
    keys: s(s+1)/2 uncapped; w(w+1)/2 + (s - w) w once s passes a sliding window (or top-k) w. Chunked
    local attention of chunk C restarts every chunk: k C(C+1)/2 + r(r+1)/2 for s = k C + r."""
    full = prompt_tokens * (prompt_tokens + 1) / 2
    if span is None:
        return full
    if chunked:
        whole_chunks = prompt_tokens // span
        rest = prompt_tokens - whole_chunks * span
        return whole_chunks * span * (span + 1) / 2 + rest * (rest + 1) / 2
    return _where(prompt_tokens <= span, full, span * (span + 1) / 2 + (prompt_tokens - span) * span)


def prefill_attention_flops(arch: ModelArchitecture, prompt_tokens):
    """Causal attention FLOPs for a whole prompt, all attention layers: sum over query positions of the keys
    they attend (s(s+1)/2 exactly; sliding-window, chunked and V3.2's sparse layers capped at their span),
    plus V3.2's indexer scoring every earlier key (`indexer_score_flops_per_key`). Layers without softmax
    attention: `recurrent_mixer_flops_per_token`."""
    per_key = attention_score_flops_per_token(arch, 1, "prefill")
    total = indexer_score_flops_per_key(arch) * _causal_pairs(prompt_tokens, None)
    for group in attention_layer_groups(arch):
        pairs = _causal_pairs(prompt_tokens, attention_span_tokens(arch, group), group.chunked)
        total = total + group.layers * per_key * pairs
    return total


def indexer_score_flops_per_key(arch: ModelArchitecture) -> int:
    """DeepSeek-V3.2's lightning indexer, all its layers, for one query and one cached key: the dot product
    of each of `index_n_heads` query heads with the key (2 x heads x index_head_dim) plus the per-head
    weighting (2 x heads) (DeepSeek-V3.2-Exp report, Eq. 1). It scores every earlier key, so it grows with
    the context even though attention reads only the top-k. 0 without an indexer."""
    if not arch.indexer_num_heads:
        return 0
    layers = sum(group.layers for group in attention_layer_groups(arch))
    return layers * 2 * arch.indexer_num_heads * (arch.indexer_head_dim + 1)


def recurrent_mixer_flops_per_token(arch: ModelArchitecture) -> float:
    """State-update FLOPs of one token through every linear-attention and Mamba layer (their projections are
    matrix parameters, counted with the matmuls), in the recurrent form decode runs; chunked prefill kernels
    do about as much per token.

    Gated DeltaNet, per value head with a dk x dv state S: decay S (dk dv), read S^T k, apply the rank-1
    delta update, read out S^T q (three multiply-adds per element): 7 dk dv (Yang et al. 2024, Gated Delta
    Networks, Eq. 10). Mamba-2, per head with a p x n state: decay, add dt x B^T, read out with C: 5 p n
    (Dao & Gu 2024, SSD recurrence). Both add the depthwise causal conv: 2 x kernel x conv channels.
    """
    counts = _layer_mixer_counts(arch)
    total = 0.0
    if counts["linear_attention"]:
        key_dim = arch.linear_num_key_heads * arch.linear_key_head_dim
        value_dim = arch.linear_num_value_heads * arch.linear_value_head_dim
        state = 7 * value_dim * arch.linear_key_head_dim
        conv = 2 * arch.linear_conv_kernel * (2 * key_dim + value_dim)
        total += counts["linear_attention"] * (state + conv)
    if counts["mamba"]:
        inner = arch.mamba_num_heads * arch.mamba_head_dim
        state = 5 * inner * arch.mamba_state_size
        conv = 2 * arch.mamba_conv_kernel * (inner + 2 * arch.mamba_groups * arch.mamba_state_size)
        total += counts["mamba"] * (state + conv)
    return total


def matmul_flops_per_token(counts: ParameterCounts, include_lm_head: bool = True) -> float:
    """2 x active parameters that take part in a matmul (embeddings are lookups, norms elementwise)."""
    lm = counts.lm_head if counts.lm_head else counts.embedding  # tied: the embedding matrix is the head
    matmul_params = counts.active - counts.embedding - counts.lm_head - counts.position_embedding
    return 2 * (matmul_params + (lm if include_lm_head else 0))


__all__ = [
    "ATTENTION_MIXERS",
    "AttentionGroup",
    "CheckpointQuantization",
    "LayerParameters",
    "LayerSpec",
    "MODULE_GROUPS",
    "MixerKind",
    "MlpKind",
    "ModelArchitecture",
    "ModuleGroup",
    "ParameterCounts",
    "RECURRENT_MIXERS",
    "WINDOWED_MIXERS",
    "attended_tokens_per_layer_sum",
    "attention_layer_groups",
    "attention_score_flops_per_token",
    "attention_span_tokens",
    "cached_tokens_per_layer_sum",
    "group_cached_tokens",
    "indexer_score_flops_per_key",
    "kv_cache_bytes_per_token",
    "kv_elements_per_token_per_layer",
    "layer_parameters",
    "layer_spec_parameters",
    "matmul_flops_per_token",
    "mean_attended_tokens",
    "parameter_counts",
    "prefill_attention_flops",
    "recurrent_mixer_flops_per_token",
]
