"""Independent torch builders: a model's layers rebuilt as `torch.nn` modules on the `meta` device.

Each builder follows the layer layout of the Hugging Face modeling file named in its docstring, reads
the raw `config.json` keys with that config class's defaults, and never calls the engine, so
`sum(p.numel())` is a count the engine's arithmetic can be checked against. `model.parameters()`
de-duplicates tied tensors, so a tied head counts once, as in a checkpoint. Buffers that checkpoints
store (DeepSeek-style `e_score_correction_bias`) are built as parameters here, so they are counted.

The base pieces (RMSNorm, GatedMLP, FusedExperts, Attention, CausalLM) serve the classic families in
tests/validation/test_param_counts_torch.py too; the builders below cover the 2025-26 families.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn


def key(cfg: dict, *names, default=None):
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))


def layer_norm(dim: int, affine: bool = True) -> nn.Module:
    return nn.LayerNorm(dim, elementwise_affine=affine)


class GatedMLP(nn.Module):
    """LlamaMLP / MistralMLP / Qwen2MLP / Gemma2MLP / DeepseekV2MLP: gate, up, down."""

    def __init__(self, hidden: int, width: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=bias)
        self.up_proj = nn.Linear(hidden, width, bias=bias)
        self.down_proj = nn.Linear(width, hidden, bias=bias)


class UpDownMLP(nn.Module):
    """NemotronHMLP: up, down (relu^2, no gate)."""

    def __init__(self, hidden: int, width: int, bias: bool = False):
        super().__init__()
        self.up_proj = nn.Linear(hidden, width, bias=bias)
        self.down_proj = nn.Linear(width, hidden, bias=bias)


class FusedExperts(nn.Module):
    """All routed experts of one layer as 3-D tensors (SwiGLU: gate+up fused, down; `gated=False`: up,
    down; `bias`: gpt-oss's per-expert gate_up and down biases)."""

    def __init__(self, experts: int, hidden: int, width: int, bias: bool = False, gated: bool = True):
        super().__init__()
        up = (2 if gated else 1) * width
        self.gate_up_proj = nn.Parameter(torch.empty(experts, up, hidden))
        self.down_proj = nn.Parameter(torch.empty(experts, hidden, width))
        if bias:
            self.gate_up_proj_bias = nn.Parameter(torch.empty(experts, up))
            self.down_proj_bias = nn.Parameter(torch.empty(experts, hidden))


class Attention(nn.Module):
    """Separate q/k/v/o projections (Llama, Mistral, Qwen2/3, Gemma2/3, Mixtral, ...).

    `qk_norm`: RMSNorm over each head (Qwen3, Gemma 3, GLM-4.5); `qk_norm_full`: over the whole q and k
    projections (Olmo2Attention, MiniMaxM2Attention); `q_gate`: q_proj also emits the output gate
    (Qwen3NextAttention); `sinks`: one logit per head (GptOssAttention)."""

    def __init__(
        self,
        hidden,
        heads,
        kv_heads,
        head_dim,
        qkv_bias=False,
        o_bias=False,
        qk_norm=False,
        qk_norm_full=False,
        q_gate=False,
        sinks=False,
    ):
        super().__init__()
        self.q_proj = nn.Linear(hidden, heads * head_dim * (2 if q_gate else 1), bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=o_bias)
        if qk_norm:
            self.q_norm = RMSNorm(head_dim)
            self.k_norm = RMSNorm(head_dim)
        if qk_norm_full:
            self.q_norm = RMSNorm(heads * head_dim)
            self.k_norm = RMSNorm(kv_heads * head_dim)
        if sinks:
            self.sinks = nn.Parameter(torch.empty(heads))


class CausalLM(nn.Module):
    """embedding + layers + final norm(s) + lm_head (tied: the same Parameter object)."""

    def __init__(self, vocab, hidden, layers, final_norms, tied, positions=0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        if positions:
            self.embed_positions = nn.Embedding(positions, hidden)
        self.layers = nn.ModuleList(layers)
        self.final_norms = nn.ModuleList(final_norms)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight


def llama_heads(cfg):
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv = key(cfg, "num_key_value_heads", default=heads)
    head_dim = key(cfg, "head_dim", default=hidden // heads)
    return hidden, heads, kv, head_dim


def _layer(**modules) -> nn.Module:
    layer = nn.Module()
    for name, module in modules.items():
        setattr(layer, name, module)
    return layer


def _router(experts: int, hidden: int, bias: bool = False, correction: bool = False) -> nn.Module:
    gate = nn.Linear(hidden, experts, bias=bias)
    if correction:  # e_score_correction_bias (a stored buffer in transformers, a tensor in the checkpoint)
        gate.e_score_correction_bias = nn.Parameter(torch.empty(experts))
    return gate


def _text(cfg: dict) -> dict:
    """The language model's config of a multimodal wrapper (text_config), else the config itself."""
    return cfg["text_config"] if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg else cfg


# ---------------------------------------------------------------------------------------------
# 2025-26 families


def build_gpt_oss(cfg: dict) -> nn.Module:
    """GptOssForCausalLM (modeling_gpt_oss.py): q/k/v/o with attention_bias (default true) and sinks;
    every layer a MoE block of router (with bias) and experts with biases; 2 RMSNorms per layer."""
    hidden, heads, kv, head_dim = llama_heads(cfg)
    bias = key(cfg, "attention_bias", default=True)
    experts = cfg["num_local_experts"]
    layers = [
        _layer(
            self_attn=Attention(hidden, heads, kv, head_dim, bias, bias, sinks=True),
            router=_router(experts, hidden, bias=True),
            experts=FusedExperts(experts, hidden, cfg["intermediate_size"], bias=True),
            norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)]),
        )
        for _ in range(cfg["num_hidden_layers"])
    ]
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_llama4(cfg: dict) -> nn.Module:
    """Llama4ForCausalLM's language model (modeling_llama4.py; the vision tower is not built): MoE at
    `moe_layers` (default indices step-1, 2*step-1, ... for interleave_moe_layer_step) with a bias-free
    router, experts of `intermediate_size` and one shared expert of the same width; other layers a dense
    MLP of `intermediate_size_mlp`. The L2 qk-norm has no weights."""
    cfg = _text(cfg)
    hidden, heads, kv, head_dim = llama_heads(cfg)
    n = cfg["num_hidden_layers"]
    step = key(cfg, "interleave_moe_layer_step", default=1)
    moe = set(key(cfg, "moe_layers", default=list(range(step - 1, n, step))))
    experts, width = cfg["num_local_experts"], cfg["intermediate_size"]
    bias = bool(key(cfg, "attention_bias", default=False))
    layers = []
    for idx in range(n):
        if idx in moe:
            ff = _layer(router=_router(experts, hidden), experts=FusedExperts(experts, hidden, width))
            ff.shared_expert = GatedMLP(hidden, width)
        else:
            ff = GatedMLP(hidden, key(cfg, "intermediate_size_mlp", default=16384))
        layers.append(
            _layer(
                self_attn=Attention(hidden, heads, kv, head_dim, bias, bias),
                feed_forward=ff,
                norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)]),
            )
        )
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_gemma3(cfg: dict) -> nn.Module:
    """Gemma3ForCausalLM's language model (modeling_gemma3.py): per-head q/k norms, gated MLP, 4 norms
    per layer, tied head by default; vocab_size defaults to 262,208 (Gemma3TextConfig)."""
    cfg = _text(cfg)
    hidden, heads, kv, head_dim = llama_heads(cfg)
    bias = bool(key(cfg, "attention_bias", default=False))
    layers = [
        _layer(
            self_attn=Attention(hidden, heads, kv, head_dim, bias, bias, qk_norm=True),
            mlp=GatedMLP(hidden, cfg["intermediate_size"]),
            norms=nn.ModuleList(RMSNorm(hidden) for _ in range(4)),
        )
        for _ in range(cfg["num_hidden_layers"])
    ]
    vocab = key(cfg, "vocab_size", default=262_208)
    return CausalLM(vocab, hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=True))


class GatedDeltaNet(nn.Module):
    """Qwen3NextGatedDeltaNet (modeling_qwen3_next.py)."""

    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden_size"]
        nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        kernel = cfg["linear_conv_kernel_dim"]
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, kernel, groups=conv_dim, bias=False, padding=kernel - 1)
        self.in_proj_qkvz = nn.Linear(hidden, 2 * key_dim + 2 * value_dim, bias=False)
        self.in_proj_ba = nn.Linear(hidden, 2 * nv, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(nv))
        self.A_log = nn.Parameter(torch.empty(nv))
        self.norm = RMSNorm(dv)
        self.out_proj = nn.Linear(value_dim, hidden, bias=False)


def build_qwen3_next(cfg: dict) -> nn.Module:
    """Qwen3NextForCausalLM: layer i is full attention when (i + 1) % full_attention_interval == 0, else
    Gated DeltaNet (layer_types when given); attention with an output gate in q_proj and per-head q/k
    norms; MoE (unless in mlp_only_layers) with router, experts, a shared expert and its sigmoid gate."""
    hidden, heads, kv, head_dim = llama_heads(cfg)
    n = cfg["num_hidden_layers"]
    interval = key(cfg, "full_attention_interval", default=4)
    types = key(
        cfg, "layer_types", default=["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    )
    experts = key(cfg, "num_experts", default=0)
    step = key(cfg, "decoder_sparse_step", default=1)
    dense_only = set(key(cfg, "mlp_only_layers", default=[]))
    layers = []
    for idx in range(n):
        if types[idx] == "linear_attention":
            mixer = GatedDeltaNet(cfg)
        else:
            bias = bool(key(cfg, "attention_bias", default=False))
            mixer = Attention(hidden, heads, kv, head_dim, bias, bias, qk_norm=True, q_gate=True)
        if experts and idx not in dense_only and (idx + 1) % step == 0:
            ff = _layer(
                gate=_router(experts, hidden), experts=FusedExperts(experts, hidden, cfg["moe_intermediate_size"])
            )
            ff.shared_expert = GatedMLP(hidden, cfg["shared_expert_intermediate_size"])
            ff.shared_expert_gate = nn.Linear(hidden, 1, bias=False)
        else:
            ff = GatedMLP(hidden, cfg["intermediate_size"])
        layers.append(_layer(mixer=mixer, mlp=ff, norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)])))
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_glm4_moe(cfg: dict) -> nn.Module:
    """Glm4MoeForCausalLM (modeling_glm4_moe.py): q/k/v bias = attention_bias, o without bias, per-head
    q/k norms when use_qk_norm; the first `first_k_dense_replace` layers dense, then MoE with a router
    (+ correction bias), experts and n_shared_experts x moe width shared expert."""
    hidden, heads, kv, head_dim = llama_heads(cfg)
    experts = key(cfg, "n_routed_experts", default=128)
    width = key(cfg, "moe_intermediate_size", default=1408)
    first_dense = key(cfg, "first_k_dense_replace", default=1)
    bias = bool(key(cfg, "attention_bias", default=False))
    qk_norm = bool(key(cfg, "use_qk_norm", default=False))
    layers = []
    for idx in range(cfg["num_hidden_layers"]):
        if idx >= first_dense:
            ff = _layer(gate=_router(experts, hidden, correction=True), experts=FusedExperts(experts, hidden, width))
            ff.shared_experts = GatedMLP(hidden, width * key(cfg, "n_shared_experts", default=1))
        else:
            ff = GatedMLP(hidden, cfg["intermediate_size"])
        layers.append(
            _layer(
                self_attn=Attention(hidden, heads, kv, head_dim, bias, False, qk_norm=qk_norm),
                mlp=ff,
                norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)]),
            )
        )
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_olmo2(cfg: dict) -> nn.Module:
    """Olmo2ForCausalLM (modeling_olmo2.py): q_norm over heads*head_dim, k_norm over kv*head_dim,
    post-attention and post-feedforward RMSNorms."""
    hidden, heads, kv, head_dim = llama_heads(cfg)
    bias = bool(key(cfg, "attention_bias", default=False))
    layers = [
        _layer(
            self_attn=Attention(hidden, heads, kv, head_dim, bias, bias, qk_norm_full=True),
            mlp=GatedMLP(hidden, cfg["intermediate_size"]),
            norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)]),
        )
        for _ in range(cfg["num_hidden_layers"])
    ]
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_minimax_m2(cfg: dict) -> nn.Module:
    """MiniMaxM2ForCausalLM (modeling_minimax_m2.py): bias-free attention with q/k norms over the whole
    projections; every layer MoE: a bias-free router, a correction bias, experts of intermediate_size."""
    hidden, heads, kv, head_dim = llama_heads(cfg)
    experts = cfg["num_local_experts"]
    layers = [
        _layer(
            self_attn=Attention(hidden, heads, kv, head_dim, qk_norm_full=True),
            gate=_router(experts, hidden, correction=True),
            experts=FusedExperts(experts, hidden, cfg["intermediate_size"]),
            norms=nn.ModuleList([RMSNorm(hidden), RMSNorm(hidden)]),
        )
        for _ in range(cfg["num_hidden_layers"])
    ]
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


class Mamba2Mixer(nn.Module):
    """NemotronHMamba2Mixer (modeling_nemotron_h.py)."""

    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden_size"]
        heads, head_dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
        inner = heads * head_dim
        conv_dim = inner + 2 * cfg["n_groups"] * cfg["ssm_state_size"]
        bias = bool(key(cfg, "use_bias", default=False))
        kernel = key(cfg, "conv_kernel", default=4)
        self.conv1d = nn.Conv1d(
            conv_dim,
            conv_dim,
            kernel,
            groups=conv_dim,
            bias=key(cfg, "use_conv_bias", default=True),
            padding=kernel - 1,
        )
        self.in_proj = nn.Linear(hidden, inner + conv_dim + heads, bias=bias)
        self.dt_bias = nn.Parameter(torch.empty(heads))
        self.A_log = nn.Parameter(torch.empty(heads))
        self.norm = RMSNorm(inner)
        self.D = nn.Parameter(torch.empty(heads))
        self.out_proj = nn.Linear(inner, hidden, bias=bias)


def build_nemotron_h(cfg: dict) -> nn.Module:
    """NemotronHForCausalLM: one mixer and one RMSNorm per block, by hybrid_override_pattern: M Mamba-2,
    * bias-free attention, - up/down MLP, E MoE (router + correction bias, up/down experts, one up/down
    shared expert of moe_shared_expert_intermediate_size)."""
    hidden, heads, kv, _ = llama_heads(cfg)
    head_dim = key(cfg, "head_dim", "attention_head_dim", default=hidden // heads)
    blocks = []
    for kind in cfg["hybrid_override_pattern"]:
        if kind == "M":
            mixer = Mamba2Mixer(cfg)
        elif kind == "*":
            mixer = Attention(hidden, heads, kv, head_dim)
        elif kind == "-":
            mixer = UpDownMLP(hidden, cfg["intermediate_size"], bool(key(cfg, "mlp_bias", default=False)))
        else:
            experts = cfg["n_routed_experts"]
            mixer = _layer(
                gate=_router(experts, hidden, correction=True),
                experts=FusedExperts(experts, hidden, cfg["moe_intermediate_size"], gated=False),
                shared_experts=UpDownMLP(hidden, cfg["moe_shared_expert_intermediate_size"]),
            )
        blocks.append(_layer(norm=RMSNorm(hidden), mixer=mixer))
    return CausalLM(
        cfg["vocab_size"], hidden, blocks, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_nemotron_nas(cfg: dict) -> nn.Module:
    """DeciLMForCausalLM (NVIDIA's modeling_decilm.py layout, as in NeMo AutoModel's DeciLM Block):
    per block_configs entry, attention is GQA with heads / n_heads_in_group KV heads, absent (no_op) or a
    bias-free hidden x hidden linear; the FFN a SwiGLU of int(2 x ffn_mult x hidden / 3) rounded up to a
    multiple of 256, absent or a linear; each present sublayer has its RMSNorm."""
    hidden, heads, _, head_dim = llama_heads(cfg)
    layers = []
    for block in cfg["block_configs"]:
        layer = nn.Module()
        attention, ffn = block["attention"], block["ffn"]
        if not attention["no_op"]:
            layer.input_layernorm = RMSNorm(hidden)
            if attention["replace_with_linear"]:
                layer.self_attn = nn.Linear(hidden, hidden, bias=False)
            else:
                layer.self_attn = Attention(hidden, heads, heads // attention["n_heads_in_group"], head_dim)
        if not ffn["no_op"]:
            layer.post_attention_layernorm = RMSNorm(hidden)
            if ffn["replace_with_linear"]:
                layer.mlp = nn.Linear(hidden, hidden, bias=False)
            else:
                width = int(2 * ffn["ffn_mult"] * hidden / 3)
                width += (256 - width % 256) % 256
                layer.mlp = GatedMLP(hidden, width)
        layers.append(layer)
    return CausalLM(
        cfg["vocab_size"], hidden, layers, [RMSNorm(hidden)], key(cfg, "tie_word_embeddings", default=False)
    )


def build_deepseek_v32_indexer(cfg: dict) -> nn.Module:
    """DeepseekV32Indexer (modeling_deepseek_v32.py): wq_b, wk, k_norm (LayerNorm), weights_proj."""
    heads, dim = key(cfg, "index_n_heads", default=64), key(cfg, "index_head_dim", default=128)
    return _layer(
        wq_b=nn.Linear(cfg["q_lora_rank"], heads * dim, bias=False),
        wk=nn.Linear(cfg["hidden_size"], dim, bias=False),
        k_norm=nn.LayerNorm(dim),
        weights_proj=nn.Linear(cfg["hidden_size"], heads, bias=False),
    )


# ---------------------------------------------------------------------------------------------
# transformers' own classes (when installed)

# model_type as transformers registers it, where a config says otherwise
TRANSFORMERS_TYPE = {"kimi_k2": "deepseek_v3", "ministral3": "mistral3"}


def transformers_meta_count(cfg: dict) -> int:
    """Parameters (tied ones once) plus persistent buffers (e.g. e_score_correction_bias) of the
    transformers class `cfg` names, built on the meta device; multimodal wrappers whole (vision tower and
    projector included). Skips the calling test when transformers is not installed."""
    transformers = pytest.importorskip("transformers")
    model_type = TRANSFORMERS_TYPE.get(cfg["model_type"], cfg["model_type"])
    keys = {
        k: v
        for k, v in cfg.items()
        if k not in ("model_type", "auto_map", "architectures", "quantization_config", "_headroom")
    }
    hf_config = transformers.AutoConfig.for_model(model_type, **keys)
    auto = transformers.AutoModelForImageTextToText if "text_config" in cfg else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(hf_config)
    persistent = model.state_dict().keys()
    buffers = sum(b.numel() for n, b in model.named_buffers() if n in persistent)
    return sum(p.numel() for p in model.parameters()) + buffers
