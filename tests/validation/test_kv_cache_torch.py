"""Ground truth for KV-cache and weight bytes: real torch modules on the CPU, byte for byte.

A small Llama-style decoder (GQA attention, RMSNorm, SwiGLU) runs a real prefill and real decode
steps in bf16 and keeps its own KV cache (plain k and v tensors per layer, or a paged pool of
fixed-size blocks). The bytes those tensors occupy (numel x element_size) must equal what
`planner.memory` says for the same shape. Tensor-parallel shards are made by literally splitting the
torch weights with `torch.chunk` (column parallel: output rows; row parallel: input columns), running
each rank, and checking that the ranks together reproduce the unsharded output.

RoPE is left out: it changes the values in the cache, not its size.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from planner.model.architecture import parameter_counts
from planner.model.hf_config import architecture_from_config
from planner.physics import memory as mem

torch.manual_seed(0)
BF16 = torch.bfloat16

TOY = {  # Llama-style GQA: 4 query heads share 2 KV heads of 16
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "num_hidden_layers": 1,
    "vocab_size": 128,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def engine_arch(**overrides):
    return architecture_from_config({**TOY, **overrides})


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# ---------------------------------------------------------------------------------------------
# a real decoder with a real cache


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight


class ContiguousCache:
    """Per layer: k and v of shape (batch, kv_heads, tokens, head_dim); sliding layers keep the last `window`."""

    def __init__(self, windows=None):
        self.k, self.v, self.windows = {}, {}, windows or {}

    def update(self, layer, k, v):
        if layer in self.k:
            k = torch.cat([self.k[layer], k], dim=2)
            v = torch.cat([self.v[layer], v], dim=2)
        full_k, full_v = k, v
        window = self.windows.get(layer)
        if window:  # rolling buffer: older tokens are dropped (attention below still sees this step's keys)
            k, v = k[:, :, -window:].contiguous(), v[:, :, -window:].contiguous()
        self.k[layer], self.v[layer] = k, v
        return full_k, full_v

    def tensors(self):
        return list(self.k.values()) + list(self.v.values())


class PagedCache:
    """vLLM-style: each sequence owns whole blocks of `block` token slots (k and v) in every layer."""

    def __init__(self, block, kv_heads, head_dim, dtype=BF16):
        self.block, self.kv_heads, self.head_dim, self.dtype = block, kv_heads, head_dim, dtype
        self.blocks = {}  # (layer, seq) -> list of (k_block, v_block)
        self.length = {}  # (layer, seq) -> tokens written

    def update(self, layer, k, v):
        batch, _, tokens, _ = k.shape
        outs_k, outs_v = [], []
        for s in range(batch):
            key = (layer, s)
            blocks = self.blocks.setdefault(key, [])
            n = self.length.get(key, 0)
            for t in range(tokens):
                slot = n + t
                if slot // self.block >= len(blocks):
                    shape = (self.block, self.kv_heads, self.head_dim)
                    blocks.append((torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype)))
                kb, vb = blocks[slot // self.block]
                kb[slot % self.block] = k[s, :, t]
                vb[slot % self.block] = v[s, :, t]
            self.length[key] = n + tokens
            total = self.length[key]
            gathered_k = torch.cat([b[0] for b in blocks])[:total].transpose(0, 1)
            gathered_v = torch.cat([b[1] for b in blocks])[:total].transpose(0, 1)
            outs_k.append(gathered_k)
            outs_v.append(gathered_v)
        return torch.stack(outs_k), torch.stack(outs_v)

    def tensors(self):
        return [t for blocks in self.blocks.values() for pair in blocks for t in pair]


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def forward(self, x, cache, layer, window=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        k_all, v_all = cache.update(layer, k, v)
        group = self.heads // self.kv_heads
        k_all, v_all = k_all.repeat_interleave(group, 1), v_all.repeat_interleave(group, 1)
        past = k_all.shape[2] - t
        positions_q = torch.arange(t) + past
        positions_k = torch.arange(k_all.shape[2])
        allowed = positions_k[None, :] <= positions_q[:, None]
        if window:
            allowed &= positions_k[None, :] > positions_q[:, None] - window
        out = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, hidden, width):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=False)
        self.up_proj = nn.Linear(hidden, width, bias=False)
        self.down_proj = nn.Linear(width, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg, window=None):
        super().__init__()
        h = cfg["hidden_size"]
        self.window = window
        self.input_layernorm = RMSNorm(h)
        self.self_attn = Attention(h, cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"])
        self.post_attention_layernorm = RMSNorm(h)
        self.mlp = SwiGLU(h, cfg["intermediate_size"])

    def forward(self, x, cache, idx):
        x = x + self.self_attn(self.input_layernorm(x), cache, idx, self.window)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, cfg, sliding_layers=(), window=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(
            Layer(cfg, window if i in sliding_layers else None) for i in range(cfg["num_hidden_layers"])
        )
        self.norm = RMSNorm(cfg["hidden_size"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    @torch.no_grad()
    def forward(self, ids, cache):
        x = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cache, i)
        return self.lm_head(self.norm(x[:, -1:]))


def run(model, cache, batch, prompt, decode_steps, vocab=128):
    """Prefill `prompt` tokens for `batch` sequences, then greedy-decode `decode_steps` tokens."""
    ids = torch.randint(0, vocab, (batch, prompt))
    logits = model(ids, cache)
    for _ in range(decode_steps):
        logits = model(logits.argmax(-1), cache)
    return logits


def toy_model(layers=1, **overrides):
    cfg = {**TOY, "num_hidden_layers": layers, **overrides}
    return cfg, Decoder(cfg).to(BF16).eval()


# ---------------------------------------------------------------------------------------------
# contiguous cache == kv_cache_bytes


def test_single_gqa_layer_prefill():
    cfg, model = toy_model(layers=1)
    cache = ContiguousCache()
    run(model, cache, batch=1, prompt=13, decode_steps=0)
    assert cache.k[0].shape == (1, 2, 13, 16) and cache.k[0].dtype == BF16
    # 2 (k, v) x 13 tokens x 2 KV heads x 16 x 2 bytes = 1,664
    assert nbytes(cache.tensors()) == 2 * 13 * 2 * 16 * 2
    assert mem.kv_cache_bytes(engine_arch(), 1, 1, 1, 13, 2) == 1_664


@pytest.mark.parametrize("layers,batch,prompt,decode", [(1, 1, 1, 0), (2, 3, 17, 4), (4, 2, 31, 6), (3, 5, 8, 0)])
def test_multi_layer_batches_match_engine(layers, batch, prompt, decode):
    cfg, model = toy_model(layers=layers)
    cache = ContiguousCache()
    run(model, cache, batch, prompt, decode)
    arch = engine_arch(num_hidden_layers=layers)
    context = prompt + decode
    assert nbytes(cache.tensors()) == mem.kv_cache_bytes(arch, 1, 1, batch, context, 2)
    assert nbytes(cache.tensors()) == batch * context * layers * 2 * 2 * 16 * 2


def test_mha_and_mqa_layers():
    for kv in (4, 1):
        cfg, model = toy_model(layers=2, num_key_value_heads=kv)
        cache = ContiguousCache()
        run(model, cache, batch=2, prompt=9, decode_steps=2)
        assert nbytes(cache.tensors()) == mem.kv_cache_bytes(
            engine_arch(num_hidden_layers=2, num_key_value_heads=kv), 1, 1, 2, 11, 2
        )


def test_fp32_cache_uses_four_bytes():
    cfg, model = toy_model(layers=2)
    model = model.float()
    cache = ContiguousCache()
    run(model, cache, batch=2, prompt=5, decode_steps=1)
    assert nbytes(cache.tensors()) == mem.kv_cache_bytes(engine_arch(num_hidden_layers=2), 1, 1, 2, 6, 4)


# ---------------------------------------------------------------------------------------------
# paged cache == kv_cache_bytes with block rounding


@pytest.mark.parametrize("block,prompt,decode", [(16, 13, 0), (16, 16, 1), (4, 13, 3), (8, 1, 0), (1, 7, 2)])
def test_paged_cache_rounds_to_blocks(block, prompt, decode):
    layers, batch = 2, 3
    cfg, model = toy_model(layers=layers)
    paged = PagedCache(block, kv_heads=2, head_dim=16)
    contiguous = ContiguousCache()
    ids = torch.randint(0, 128, (batch, prompt))
    # the paged model computes the same logits as the contiguous one (it is a real cache)
    out_paged, out_contig = model(ids, paged), model(ids, contiguous)
    for _ in range(decode):
        nxt = out_contig.argmax(-1)
        out_paged, out_contig = model(nxt, paged), model(nxt, contiguous)
    torch.testing.assert_close(out_paged, out_contig)
    context = prompt + decode
    blocks_per_sequence = math.ceil(context / block)
    assert nbytes(paged.tensors()) == layers * batch * blocks_per_sequence * block * 2 * 2 * 16 * 2
    arch = engine_arch(num_hidden_layers=layers)
    assert nbytes(paged.tensors()) == mem.kv_cache_bytes(arch, 1, 1, batch, context, 2, block_tokens=block)
    # one block across every layer of the stage
    one_block = nbytes([t for (layer, seq), blocks in paged.blocks.items() if seq == 0 for t in blocks[0]])
    assert one_block == mem.kv_block_bytes(arch, 1, 1, 2, block)


# ---------------------------------------------------------------------------------------------
# sliding window: rolling buffers on alternating layers (Gemma-2 layout: even layers slide)


@pytest.mark.parametrize("context", [5, 8, 23])
def test_sliding_window_layers(context):
    window, layers = 8, 3
    cfg = {**TOY, "num_hidden_layers": layers}
    sliding = tuple(i for i in range(layers) if i % 2 == 0)  # layers 0 and 2
    model = Decoder(cfg, sliding_layers=sliding, window=window).to(BF16).eval()
    cache = ContiguousCache(windows={i: window for i in sliding})
    run(model, cache, batch=2, prompt=context - 2, decode_steps=2)
    gemma_like = architecture_from_config(
        {
            **TOY,
            "model_type": "gemma2",
            "num_hidden_layers": layers,
            "sliding_window": window,
            "tie_word_embeddings": False,
        }
    )
    assert gemma_like.sliding_window_layers == len(sliding)
    expected = mem.kv_cache_bytes(gemma_like, 1, 1, 2, context, 2)
    assert nbytes(cache.tensors()) == pytest.approx(expected, rel=1e-12)
    without = mem.kv_cache_bytes(gemma_like, 1, 1, 2, context, 2, honor_sliding_window=False)
    assert without == 2 * context * layers * 2 * 2 * 16 * 2


# ---------------------------------------------------------------------------------------------
# pipeline stages hold their own layers' caches


def test_pipeline_stage_caches():
    layers, pp = 4, 2
    cfg, model = toy_model(layers=layers)
    cache = ContiguousCache()
    run(model, cache, batch=2, prompt=10, decode_steps=1)
    stage = [nbytes([cache.k[i], cache.v[i]]) for i in range(layers)]
    per_stage = [sum(stage[s * 2 : (s + 1) * 2]) for s in range(pp)]
    assert max(per_stage) == mem.kv_cache_bytes(engine_arch(num_hidden_layers=layers), 1, pp, 2, 11, 2)


# ---------------------------------------------------------------------------------------------
# tensor parallelism: split the k/v projections by heads, run each rank, compare cache bytes


def _rank_attention(full: Attention, tp: int, rank: int) -> Attention:
    """Megatron/vLLM attention shard: q, k, v column-parallel by heads; o row-parallel. When TP exceeds
    the KV heads, each rank keeps a copy of the one KV head its query heads use."""
    heads, kv = full.heads // tp, max(full.kv_heads // tp, 1)
    shard = Attention(full.q_proj.in_features, heads, kv, full.head_dim).to(BF16)
    with torch.no_grad():
        shard.q_proj.weight.copy_(torch.chunk(full.q_proj.weight, tp, dim=0)[rank])
        shard.o_proj.weight.copy_(torch.chunk(full.o_proj.weight, tp, dim=1)[rank])
        if tp <= full.kv_heads:
            k_w, v_w = torch.chunk(full.k_proj.weight, tp, 0)[rank], torch.chunk(full.v_proj.weight, tp, 0)[rank]
        else:
            head = rank // (tp // full.kv_heads)
            k_w = torch.chunk(full.k_proj.weight, full.kv_heads, 0)[head]
            v_w = torch.chunk(full.v_proj.weight, full.kv_heads, 0)[head]
        shard.k_proj.weight.copy_(k_w)
        shard.v_proj.weight.copy_(v_w)
    return shard


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tensor_parallel_kv_shards(tp):
    full = Attention(64, 4, 2, 16).to(BF16)
    x = torch.randn(3, 11, 64, dtype=BF16)
    with torch.no_grad():
        reference = full(x, ContiguousCache(), 0)
        caches, partial = [], []
        for rank in range(tp):
            cache = ContiguousCache()
            partial.append(_rank_attention(full, tp, rank)(x.clone(), cache, 0).float())
            caches.append(cache)
    # row-parallel o_proj: the all-reduce (sum of partial outputs) reproduces the unsharded layer
    torch.testing.assert_close(sum(partial), reference.float(), atol=0.05, rtol=0.05)
    per_rank = [nbytes(c.tensors()) for c in caches]
    assert len(set(per_rank)) == 1
    assert per_rank[0] == mem.kv_cache_bytes(engine_arch(), tp, 1, 3, 11, 2)
    if tp == 4:  # 2 KV heads on 4 ranks: one replicated head each, same as TP 2
        assert per_rank[0] == mem.kv_cache_bytes(engine_arch(), 2, 1, 3, 11, 2)


# ---------------------------------------------------------------------------------------------
# MLA: the cache holds the compressed latent and the decoupled RoPE key


class MLA(nn.Module):
    def __init__(self, hidden, heads, kv_lora, nope, rope, v_dim):
        super().__init__()
        self.heads, self.kv_lora, self.nope, self.rope, self.v_dim = heads, kv_lora, nope, rope, v_dim
        self.q_proj = nn.Linear(hidden, heads * (nope + rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, kv_lora + rope, bias=False)
        self.kv_a_layernorm = RMSNorm(kv_lora)
        self.kv_b_proj = nn.Linear(kv_lora, heads * (nope + v_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_dim, hidden, bias=False)

    @torch.no_grad()
    def forward(self, x, cache: list):
        b, t, _ = x.shape
        compressed = self.kv_a_proj_with_mqa(x)
        latent, k_pe = compressed.split([self.kv_lora, self.rope], dim=-1)
        latent = self.kv_a_layernorm(latent)
        cache.append(torch.cat([latent, k_pe], -1))  # what vLLM/FlashMLA cache: (b, t, kv_lora + rope)
        cached = torch.cat(cache, dim=1)
        lat, pe = cached.split([self.kv_lora, self.rope], -1)
        kv = self.kv_b_proj(lat).view(b, -1, self.heads, self.nope + self.v_dim)
        k_nope, v = kv.split([self.nope, self.v_dim], -1)
        k = torch.cat([k_nope, pe[:, :, None].expand(-1, -1, self.heads, -1)], -1).transpose(1, 2)
        q = self.q_proj(x).view(b, t, self.heads, self.nope + self.rope).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=t > 1)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def test_mla_cache_bytes():
    cfg = {
        "model_type": "deepseek_v2",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "q_lora_rank": None,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "intermediate_size": 96,
        "num_hidden_layers": 1,
        "vocab_size": 50,
        "max_position_embeddings": 128,
    }
    layer = MLA(64, 4, 16, 8, 4, 8).to(BF16)
    cache = []
    layer(torch.randn(2, 9, 64, dtype=BF16), cache)
    for _ in range(3):
        layer(torch.randn(2, 1, 64, dtype=BF16), cache)
    # 2 sequences x 12 tokens x (16 + 4) x 2 bytes = 960, whatever the tensor-parallel degree
    assert nbytes(cache) == 2 * 12 * 20 * 2
    arch = architecture_from_config(cfg)
    for tp in (1, 2, 4):
        assert nbytes(cache) == mem.kv_cache_bytes(arch, tp, 1, 2, 12, 2)


# ---------------------------------------------------------------------------------------------
# weights: a real MoE decoder, its parameter bytes, and its tensor/expert-parallel shards

MOE = {
    "model_type": "mixtral",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "intermediate_size": 48,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "vocab_size": 64,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}


class MoEBlock(nn.Module):
    """Router + SwiGLU experts (Mixtral): top-k softmax routing."""

    def __init__(self, hidden, width, experts, k):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.ModuleDict(
                {
                    "w1": nn.Linear(hidden, width, bias=False),
                    "w3": nn.Linear(hidden, width, bias=False),
                    "w2": nn.Linear(width, hidden, bias=False),
                }
            )
            for _ in range(experts)
        )

    @torch.no_grad()
    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = torch.topk(self.gate(flat).float().softmax(-1), self.k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if len(rows):
                y = expert["w2"](F.silu(expert["w1"](flat[rows])) * expert["w3"](flat[rows]))
                out.index_add_(0, rows, y * weights[rows, slot, None])
        return out.view_as(x)


class MoEDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], h)
        self.layers = nn.ModuleList()
        for _ in range(cfg["num_hidden_layers"]):
            layer = nn.Module()
            layer.input_layernorm = RMSNorm(h)
            layer.self_attn = Attention(h, cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"])
            layer.post_attention_layernorm = RMSNorm(h)
            layer.block_sparse_moe = MoEBlock(
                h, cfg["intermediate_size"], cfg["num_local_experts"], cfg["num_experts_per_tok"]
            )
            self.layers.append(layer)
        self.norm = RMSNorm(h)
        self.lm_head = nn.Linear(h, cfg["vocab_size"], bias=False)

    @torch.no_grad()
    def forward(self, ids, cache):
        x = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            x = x + layer.self_attn(layer.input_layernorm(x), cache, i)
            x = x + layer.block_sparse_moe(layer.post_attention_layernorm(x))
        return self.lm_head(self.norm(x))


# How each parameter shards across tensor-parallel ranks (vLLM / Megatron): dim to chunk, or None = replicated.
def tp_split_dim(name: str):
    if name.endswith(
        (
            "q_proj.weight",
            "k_proj.weight",
            "v_proj.weight",
            "w1.weight",
            "w3.weight",
            "gate_proj.weight",
            "up_proj.weight",
            "lm_head.weight",
            "embed_tokens.weight",
        )
    ):
        return 0  # column parallel (output rows) / vocab parallel
    if name.endswith(("o_proj.weight", "w2.weight", "down_proj.weight")):
        return 1  # row parallel (input columns)
    return None  # norms, router


def tp_shard_bytes(model: nn.Module, tp: int, rank: int, kv_heads: int) -> int:
    total = 0
    for name, p in model.named_parameters():
        dim = tp_split_dim(name)
        if dim is None:
            shard = p
        elif name.endswith(("k_proj.weight", "v_proj.weight")) and tp > kv_heads:
            shard = torch.chunk(p, kv_heads, 0)[rank // (tp // kv_heads)]
        else:
            chunks = torch.chunk(p, tp, dim=dim)
            assert len(chunks) == tp and all(c.shape == chunks[0].shape for c in chunks), name
            shard = chunks[rank]
        total += shard.numel() * shard.element_size()
    return total


def _weight_bytes(cfg, tp=1, pp=1, ep=1, nbytes_=2):
    arch = architecture_from_config(cfg)
    return mem.weight_bytes(parameter_counts(arch), arch, tp, pp, ep, nbytes_, nbytes_, nbytes_)


def test_moe_block_is_real_and_its_bytes_match():
    model = MoEDecoder(MOE).to(BF16).eval()
    logits = model(torch.randint(0, 64, (2, 7)), ContiguousCache())
    assert logits.shape == (2, 7, 64) and torch.isfinite(logits.float()).all()
    # one MoE block: router 4 x 32 + 4 experts x 3 x 32 x 48 = 128 + 18,432 elements, x 2 bytes
    block = model.layers[0].block_sparse_moe
    assert nbytes(block.parameters()) == (4 * 32 + 4 * 3 * 32 * 48) * 2
    counts = parameter_counts(architecture_from_config(MOE))
    assert (counts.moe_layer.router + counts.moe_layer.experts_routed) * 2 == nbytes(block.parameters())
    # whole model, one GPU
    assert nbytes(model.parameters()) == _weight_bytes(MOE)
    # the per-layer share: two layers minus one layer
    one_layer = nbytes(model.layers[0].parameters())
    assert _weight_bytes(MOE) - _weight_bytes({**MOE, "num_hidden_layers": 1}) == one_layer


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_moe_model_tensor_parallel_shards(tp):
    model = MoEDecoder(MOE).to(BF16)
    shards = [tp_shard_bytes(model, tp, r, MOE["num_key_value_heads"]) for r in range(tp)]
    assert len(set(shards)) == 1
    assert shards[0] == _weight_bytes(MOE, tp=tp)


def test_dense_mlp_row_column_split_is_exact():
    """The column/row split used above is a real tensor-parallel layout: partial outputs sum to the full one."""
    mlp = SwiGLU(32, 48).double()
    x = torch.randn(5, 32, dtype=torch.float64)
    tp = 4
    parts = []
    for r in range(tp):
        g = torch.chunk(mlp.gate_proj.weight, tp, 0)[r]
        u = torch.chunk(mlp.up_proj.weight, tp, 0)[r]
        d = torch.chunk(mlp.down_proj.weight, tp, 1)[r]
        parts.append((F.silu(x @ g.T) * (x @ u.T)) @ d.T)
    torch.testing.assert_close(sum(parts), mlp(x).detach())


@pytest.mark.parametrize("ep", [2, 4])
def test_moe_expert_parallel_shards(ep):
    """EP without TP: each rank keeps whole attention and 1/ep of the experts (list of experts chunked)."""
    model = MoEDecoder(MOE).to(BF16)
    for rank in range(ep):
        total = 0
        for name, p in model.named_parameters():
            if ".experts." in name:
                expert = int(name.split(".experts.")[1].split(".")[0])
                owned = torch.chunk(torch.arange(MOE["num_local_experts"]), ep)[rank]
                if expert not in owned:
                    continue
            total += p.numel() * p.element_size()
        assert total == _weight_bytes(MOE, tp=1, ep=ep)


def test_dense_toy_tensor_parallel_shards():
    cfg, model = toy_model(layers=3)
    for tp in (1, 2, 4):
        assert tp_shard_bytes(model, tp, 0, 2) == _weight_bytes({**cfg}, tp=tp)


@pytest.mark.parametrize("layers", [4, 3])
def test_pipeline_stage_weights(layers):
    """Stage 0 holds the embedding, the last stage the final norm and lm_head; the engine charges the
    heaviest stage ceil(L/p) layers plus the larger edge, exact when the layers split evenly."""
    cfg, model = toy_model(layers=layers)
    pp = 2
    per_stage = math.ceil(layers / pp)
    stages = [model.layers[:per_stage], model.layers[per_stage:]]
    first = nbytes(stages[0].parameters()) + nbytes(model.embed_tokens.parameters())
    last = nbytes(stages[1].parameters()) + nbytes(model.norm.parameters()) + nbytes(model.lm_head.parameters())
    engine = _weight_bytes(cfg, pp=pp)
    if layers % pp == 0:
        assert engine == max(first, last)
    else:
        assert engine >= max(first, last)
        # ... and no more than one layer above it
        assert engine - max(first, last) <= nbytes(model.layers[0].parameters())


# ---------------------------------------------------------------------------------------------
# biased layers: row-parallel biases are not split

GPT_STYLE = {
    "model_type": "opt",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_hidden_layers": 1,
    "ffn_dim": 64,
    "vocab_size": 64,
    "max_position_embeddings": 16,
    "word_embed_proj_dim": 32,
    "tie_word_embeddings": False,
}


def _opt_shard_bytes(tp: int) -> int:
    """One OPT layer + embeddings, sharded the Megatron/vLLM way. ColumnParallelLinear splits its bias with its
    output rows; RowParallelLinear (out_proj, fc2) keeps the FULL bias on every rank (it is added once, after
    the all-reduce); position embeddings and LayerNorms are replicated."""
    h, f, v, pos = 32, 64, 64, 18
    with torch.device("meta"):
        layer = {
            "q_proj": nn.Linear(h, h),
            "k_proj": nn.Linear(h, h),
            "v_proj": nn.Linear(h, h),
            "out_proj": nn.Linear(h, h),
            "fc1": nn.Linear(h, f),
            "fc2": nn.Linear(f, h),
        }
        norms = [nn.LayerNorm(h), nn.LayerNorm(h), nn.LayerNorm(h)]  # 2 per layer + final
        embed, positions, head = nn.Embedding(v, h), nn.Embedding(pos, h), nn.Linear(h, v, bias=False)
    total = 0
    for name, lin in layer.items():
        if name in ("out_proj", "fc2"):
            total += torch.chunk(lin.weight, tp, 1)[0].numel() + lin.bias.numel()
        else:
            total += torch.chunk(lin.weight, tp, 0)[0].numel() + torch.chunk(lin.bias, tp, 0)[0].numel()
    total += sum(p.numel() for n in norms for p in n.parameters())
    total += torch.chunk(embed.weight, tp, 0)[0].numel() + positions.weight.numel()
    total += torch.chunk(head.weight, tp, 0)[0].numel()
    return total * 2


def test_biased_layer_unsharded_matches():
    assert _opt_shard_bytes(1) == _weight_bytes(GPT_STYLE, tp=1)


def test_biased_layer_tensor_parallel_shards():
    for tp in (2, 4):
        assert _opt_shard_bytes(tp) == _weight_bytes(GPT_STYLE, tp=tp)


# ---------------------------------------------------------------------------------------------
# DeepSeek-V3-style MLA + MoE layer: which tensors replicate and which split (vLLM DeepseekV2 modules)

DSV3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 24,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
    "intermediate_size": 96,
    "moe_intermediate_size": 16,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 3,
    "vocab_size": 64,
    "max_position_embeddings": 128,
    "topk_method": "noaux_tc",
    "tie_word_embeddings": False,
}

# suffix -> dim to chunk across TP ranks (None: every rank holds the whole tensor)
DSV3_SPLIT = {
    "q_a_proj.weight": None,
    "q_a_layernorm.weight": None,  # ReplicatedLinear + its norm
    "kv_a_proj_with_mqa.weight": None,
    "kv_a_layernorm.weight": None,
    "q_b_proj.weight": 0,
    "kv_b_proj.weight": 0,  # ColumnParallelLinear (heads)
    "o_proj.weight": 1,  # RowParallelLinear
    "gate.weight": None,
    "gate.e_score_correction_bias": None,  # ReplicatedLinear router
    "gate_proj.weight": 0,
    "up_proj.weight": 0,
    "down_proj.weight": 1,  # dense, shared and routed experts
    "input_layernorm.weight": None,
    "post_attention_layernorm.weight": None,
    "norm.weight": None,
    "embed_tokens.weight": 0,
    "lm_head.weight": 0,  # vocab parallel
}


def _dsv3_model(cfg):
    def mlp(width):
        return nn.ModuleDict(
            {
                "gate_proj": nn.Linear(64, width, bias=False),
                "up_proj": nn.Linear(64, width, bias=False),
                "down_proj": nn.Linear(width, 64, bias=False),
            }
        )

    model = nn.Module()
    model.embed_tokens = nn.Embedding(64, 64)
    model.layers = nn.ModuleList()
    for i in range(cfg["num_hidden_layers"]):
        layer = nn.Module()
        attn = nn.Module()
        attn.q_a_proj = nn.Linear(64, 24, bias=False)
        attn.q_a_layernorm = RMSNorm(24)
        attn.q_b_proj = nn.Linear(24, 4 * (8 + 4), bias=False)
        attn.kv_a_proj_with_mqa = nn.Linear(64, 16 + 4, bias=False)
        attn.kv_a_layernorm = RMSNorm(16)
        attn.kv_b_proj = nn.Linear(16, 4 * (8 + 8), bias=False)
        attn.o_proj = nn.Linear(4 * 8, 64, bias=False)
        layer.self_attn = attn
        if i < cfg["first_k_dense_replace"]:
            layer.mlp = mlp(96)
        else:
            moe = nn.Module()
            moe.gate = nn.Linear(64, 8, bias=False)
            moe.gate.e_score_correction_bias = nn.Parameter(torch.zeros(8))
            moe.experts = nn.ModuleList(mlp(16) for _ in range(8))
            moe.shared_experts = mlp(32)
            layer.mlp = moe
        layer.input_layernorm = RMSNorm(64)
        layer.post_attention_layernorm = RMSNorm(64)
        model.layers.append(layer)
    model.norm = RMSNorm(64)
    model.lm_head = nn.Linear(64, 64, bias=False)
    return model.to(BF16)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mla_moe_tensor_parallel_shards(tp):
    model = _dsv3_model(DSV3)
    total = 0
    for name, p in model.named_parameters():
        rule = [dim for suffix, dim in DSV3_SPLIT.items() if name.endswith(suffix)]
        assert len(rule) == 1 or name.endswith("norm.weight"), name
        dim = rule[-1] if rule else None
        shard = p if dim is None else torch.chunk(p, tp, dim=dim)[0]
        total += shard.numel() * shard.element_size()
    assert nbytes(model.parameters()) == _weight_bytes(DSV3)
    # tests/test_architecture.py's DeepSeek toy (109,000 elements at vocab 50) with vocab 64: + 2 x 14 x 64
    assert nbytes(model.parameters()) == (109_000 + 2 * 14 * 64) * 2
    assert total == _weight_bytes(DSV3, tp=tp)
