"""Small torch models on the CPU for the saved-activation checks: real torch layers (nn.Linear, nn.Embedding,
`F.scaled_dot_product_attention`, softmax, SiLU/GeLU, cross-entropy, torch.utils.checkpoint), with two
stand-ins for what the CPU's eager kernels do differently from the GPU kernels the engine describes:

* Norms (by default) are autograd Functions that save what fused CUDA kernels (Apex, Transformer Engine,
  Liger) save: the input and fp32 statistics. That is the engine's assumption, not what eager torch does:
  `torch.nn.RMSNorm` on the CPU keeps fp32 copies of the input instead. `eager_norms=True` builds the model
  with the real `torch.nn.RMSNorm`, and a test measures that only the norm terms change. The stand-ins'
  gradients are checked against `F.rms_norm` / `F.layer_norm`.
* Dropout multiplies by a bool mask (1 byte per element, like CUDA's `native_dropout`; the CPU kernel
  stores a 16-bit mask).

Models:
* `LlamaStyle`: RMSNorm, GQA attention with RoPE, SwiGLU MLP (or a top-k MoE block), untied head,
  fp32 cross-entropy. Attention runs through `F.scaled_dot_product_attention` (FlashAttention-style
  kernel: saves q, k, v, output and the log-sum-exp, never the score matrix) or through an unfused
  path (expanded K/V, bf16 softmax, as Megatron's fused-softmax core attention).
  `cfg["recompute_modules"]` puts Megatron-core's selective modules core_attn (the attention kernel) and mlp / moe
  (the MLP block) under torch.utils.checkpoint.
* `GPTLayer`: Korthikanti et al.'s GPT layer (LayerNorm, MHA, GeLU 4h MLP, dropout after attention,
  on the probabilities and after the MLP) to measure the paper's 34 sbh + 5 a s^2 b directly.

`saved_activation_bytes` measures what autograd keeps for backward with
`torch.autograd.graph.saved_tensors_hooks`, once per storage, excluding parameters and buffers.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class FusedRMSNormFunction(torch.autograd.Function):
    """RMSNorm that saves its input and the fp32 reciprocal RMS per token (Apex/TE/Liger fused kernels)."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        x32 = x.float()
        rstd = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (x32 * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        x32, g32 = x.float(), grad.float()
        xhat = x32 * rstd
        gw = (g32 * weight.float()) if weight is not None else g32
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        dweight = (g32 * xhat).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype) if ctx.needs_input_grad[1] else None
        return dx.to(x.dtype), dweight, None


class FusedLayerNormFunction(torch.autograd.Function):
    """LayerNorm that saves its input and fp32 mean and reciprocal std per token (Apex fused kernel)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        rstd = torch.rsqrt(x32.var(-1, unbiased=False, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return ((x32 - mean) * rstd).to(x.dtype) * weight + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensors
        xhat = (x.float() - mean) * rstd
        g = grad.float() * weight.float()
        dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        flat = grad.float().reshape(-1, x.shape[-1])
        dweight = (flat * xhat.reshape(-1, x.shape[-1])).sum(0).to(weight.dtype)
        return dx.to(x.dtype), dweight, flat.sum(0).to(weight.dtype), None


class RMSNorm(nn.Module):
    """Stand-in for a fused RMSNorm kernel (see the module docstring)."""

    def __init__(self, dim, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x):
        return FusedRMSNormFunction.apply(x, self.weight, 1e-5)


class LayerNorm(nn.Module):
    """Stand-in for a fused LayerNorm kernel (see the module docstring)."""

    def __init__(self, dim, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(dim, dtype=dtype))

    def forward(self, x):
        return FusedLayerNormFunction.apply(x, self.weight, self.bias, 1e-5)


def bool_mask_dropout(x, p):
    mask = torch.rand(x.shape) >= p
    return x * mask / (1 - p)


class LoRALinear(nn.Module):
    """Frozen base projection + trainable low-rank adapter B(A x) (Hu et al. 2021; PEFT layout)."""

    def __init__(self, d_in, d_out, rank, dtype, bias=False):
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=bias, dtype=dtype)
        self.base.requires_grad_(False)
        self.lora_a = nn.Linear(d_in, rank, bias=False, dtype=dtype)
        self.lora_b = nn.Linear(rank, d_out, bias=False, dtype=dtype)
        nn.init.normal_(self.lora_b.weight, std=0.02)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x)) * 2.0


def linear(d_in, d_out, dtype, lora_rank=0, bias=False):
    if lora_rank:
        return LoRALinear(d_in, d_out, lora_rank, dtype, bias)
    return nn.Linear(d_in, d_out, bias=bias, dtype=dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg, dtype, lora_rank=0):
        super().__init__()
        h, a, kv, d = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        self.a, self.kv, self.d = a, kv, d
        self.q = linear(h, a * d, dtype, lora_rank)
        self.k = linear(h, kv * d, dtype, lora_rank)
        self.v = linear(h, kv * d, dtype, lora_rank)
        self.o = linear(a * d, h, dtype, lora_rank)
        self.flash = cfg.get("flash", True)
        # Megatron-core's selective module core_attn: the attention kernel under torch.utils.checkpoint.
        self.checkpoint_core = "core_attn" in cfg.get("recompute_modules", ())

    def core(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        # (b, s, heads, d) viewed as (b, heads, s, d): the kernel writes its output in (b, s, heads, d) order, so
        # the o_proj input is a view of the saved output, as with FlashAttention's native layout.
        q = self.q(x).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.flash and self.checkpoint_core:
            out = checkpoint(self.core, q, k, v, use_reentrant=False)
        elif self.flash:
            out = self.core(q, k, v)
        else:
            group = self.a // self.kv
            k = k[:, :, None].expand(b, self.kv, group, s, self.d).reshape(b, self.a, s, self.d)
            v = v[:, :, None].expand(b, self.kv, group, s, self.d).reshape(b, self.a, s, self.d)
            scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(self.d))
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            out = probs @ v
        return self.o(out.transpose(1, 2).reshape(b, s, self.a * self.d))


class SwiGLU(nn.Module):
    def __init__(self, h, f, dtype, lora_rank=0):
        super().__init__()
        self.gate = linear(h, f, dtype, lora_rank)
        self.up = linear(h, f, dtype, lora_rank)
        self.down = linear(f, h, dtype, lora_rank)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Combine(torch.autograd.Function):
    """Scatter-add routed expert outputs back to their tokens, saving only the token indices (Megatron-core's
    unpermute). Out-of-place `index_add` would also keep its source alive for backward."""

    @staticmethod
    def forward(ctx, source, index, rows):
        ctx.save_for_backward(index)
        return source.new_zeros(rows, source.shape[-1]).index_add_(0, index, source)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return grad.index_select(0, index), None, None


class MoE(nn.Module):
    """Mixtral-style block: fp32 softmax router, top-k, renormalised weights, SwiGLU experts."""

    def __init__(self, h, f, experts, k, dtype):
        super().__init__()
        self.router = nn.Linear(h, experts, bias=False, dtype=dtype)
        self.experts = nn.ModuleList(SwiGLU(h, f, dtype) for _ in range(experts))
        self.k = k

    def forward(self, x):
        b, s, h = x.shape
        flat = x.reshape(-1, h)
        probs = torch.softmax(self.router(flat).float(), dim=-1)
        top, index = torch.topk(probs, self.k, dim=-1)
        weights = (top / top.sum(-1, keepdim=True)).to(x.dtype)
        tokens, outputs = [], []
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(index == e)
            tokens.append(token)
            outputs.append(expert(flat[token]) * weights[token, slot, None])
        return Combine.apply(torch.cat(outputs), torch.cat(tokens), flat.shape[0]).view(b, s, h)


def rms_norm(dim, dtype, eager=False) -> nn.Module:
    """The fused-kernel stand-in, or (eager) the real torch.nn.RMSNorm."""
    return nn.RMSNorm(dim, eps=1e-5, dtype=dtype) if eager else RMSNorm(dim, dtype)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, dtype, moe=False, lora_rank=0, eager_norms=False):
        super().__init__()
        h = cfg["hidden"]
        self.norm1 = rms_norm(h, dtype, eager_norms)
        self.attn = Attention(cfg, dtype, lora_rank)
        self.norm2 = rms_norm(h, dtype, eager_norms)
        if moe:
            self.mlp = MoE(h, cfg["expert_ffn"], cfg["experts"], cfg["top_k"], dtype)
        else:
            self.mlp = SwiGLU(h, cfg["ffn"], dtype, lora_rank)
        # Megatron-core's selective modules mlp / moe: the MLP block under torch.utils.checkpoint.
        self.checkpoint_mlp = bool({"mlp", "moe"} & set(cfg.get("recompute_modules", ())))

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.norm1(x), cos, sin, mask)
        if self.checkpoint_mlp:
            return x + checkpoint(self.mlp, self.norm2(x), use_reentrant=False)
        return x + self.mlp(self.norm2(x))


class LlamaStyle(nn.Module):
    def __init__(self, cfg, dtype=torch.bfloat16, moe=False, lora_rank=0, checkpoint_layers=False, eager_norms=False):
        super().__init__()
        h, d = cfg["hidden"], cfg["head_dim"]
        self.embed = nn.Embedding(cfg["vocab"], h, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(cfg, dtype, moe, lora_rank, eager_norms) for _ in range(cfg["layers"]))
        self.norm = rms_norm(h, dtype, eager_norms)
        self.head = nn.Linear(h, cfg["vocab"], bias=False, dtype=dtype)
        self.checkpoint_layers = checkpoint_layers
        seq = cfg["seq"]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)
        if lora_rank:
            for module in (self.embed, self.norm, self.head):
                module.requires_grad_(False)
            for layer in self.layers:
                layer.norm1.requires_grad_(False)
                layer.norm2.requires_grad_(False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for layer in self.layers:
            if self.checkpoint_layers:
                x = checkpoint(layer, x, self.cos, self.sin, self.mask, use_reentrant=False)
            else:
                x = layer(x, self.cos, self.sin, self.mask)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


class GPTLayer(nn.Module):
    """Korthikanti et al.'s transformer layer: pre-LayerNorm, MHA with dropout on the probabilities and after
    the projection, GeLU MLP of width 4h with dropout, 16-bit tensors."""

    def __init__(self, h, a, dtype, p=0.1):
        super().__init__()
        self.h, self.a, self.p = h, a, p
        self.ln1 = LayerNorm(h, dtype)
        self.qkv = nn.Linear(h, 3 * h, dtype=dtype)
        self.proj = nn.Linear(h, h, dtype=dtype)
        self.ln2 = LayerNorm(h, dtype)
        self.fc1 = nn.Linear(h, 4 * h, dtype=dtype)
        self.fc2 = nn.Linear(4 * h, h, dtype=dtype)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.a
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.a, d)
        # Separate contiguous q, k, v (Megatron splits the fused projection's output into three tensors).
        q, k, v = (qkv[:, :, i].transpose(1, 2).contiguous() for i in range(3))
        probs = torch.softmax(((q @ k.transpose(-1, -2)) * (1 / math.sqrt(d))).masked_fill(mask, float("-inf")), -1)
        out = (bool_mask_dropout(probs, self.p) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + bool_mask_dropout(self.proj(out), self.p)
        return x + bool_mask_dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p)


def saved_activation_bytes(fn, exclude: list[torch.Tensor]) -> dict[str, int]:
    """Run `fn()` and return what autograd saved for backward, once per storage, in bytes: floating and bool
    tensors (`activations`) and integer index tensors (`indices`) separately; `exclude` (parameters, buffers)
    are not activations. Also returns fn's result under `result`."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, tuple[int, torch.dtype]] = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        # 0-dim scalars (the loss's total weight) do not scale with the batch and are not activations.
        if t.dim() and key not in skip and key not in seen:
            seen[key] = (t.untyped_storage().nbytes(), t.dtype)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    integer = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)
    return {
        "activations": sum(n for n, dtype in seen.values() if dtype not in integer),
        "indices": sum(n for n, dtype in seen.values() if dtype in integer),
        "result": result,
    }


def model_constants(model: nn.Module) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers()]


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
