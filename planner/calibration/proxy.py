"""The proxy model: a few transformer layers of the chosen model at its real width, heads, KV heads and
dtype, run for prefill (a chunk of tokens), decode (one new token per sequence over a real KV cache)
and one training step (forward, backward, AdamW) at a small micro-batch.

The layers are written out with torch.nn.functional so the tensors they keep are the ones the engine's
memory terms count: RMSNorm/LayerNorm as a fused autograd function that saves its input and fp32
statistics (as Apex/Transformer Engine kernels do), q/k/v projections, RoPE, scaled_dot_product_attention
(FlashAttention-style: saves q, k, v, the output and the fp32 log-sum-exp), o_proj, a SwiGLU or GeLU MLP.
Embedding and output head are left out (the vocabulary projection would dominate a few-layer proxy);
every prediction compared with the proxy uses the engine's formulas with the embedding and head removed.

Not supported here (a clear error says so): multi-head latent attention and mixture-of-experts layers.
torch is imported lazily.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.calibration.context import ProfileContext
from planner.calibration.device import Backend
from planner.calibration.errors import ProfileUnavailable
from planner.model.architecture import ModelArchitecture

if TYPE_CHECKING:  # for annotations only; torch is imported where a profile runs
    from torch import Tensor
    from torch.autograd import Function

ROPE_THETA = 10_000.0
NORM_EPS = 1e-6


# ---------------------------------------------------------------------------------------------
# the proxy's architecture


def check_supported(arch: ModelArchitecture) -> None:
    if arch.uses_mla:
        raise ProfileUnavailable(
            f"{arch.name} uses multi-head latent attention, which the calibration proxy does "
            "not implement; calibrate with a GQA/MHA model of similar width (e.g. llama-3.1-8b)"
        )
    if arch.is_moe:
        raise ProfileUnavailable(
            f"{arch.name} is a mixture-of-experts model, which the calibration proxy does not "
            "implement; calibrate with a dense model of similar width (e.g. llama-3.1-8b)"
        )


def width_divisors(arch: ModelArchitecture) -> list[int]:
    """Ways to narrow the model that keep head_dim: divisors d of the attention heads (ascending) that also
    divide the hidden size; KV heads become kv / d, or 1 when there are fewer KV heads than d."""
    heads, kv = arch.num_attention_heads, arch.num_kv_heads
    out = []
    for d in range(1, heads + 1):
        if heads % d or arch.hidden_size % d:
            continue
        if kv % d == 0 or kv < d:
            out.append(d)
    return out


def probe_architecture(arch: ModelArchitecture, layers: int) -> ModelArchitecture:
    """A very narrow copy of the layers (one head of head_dim, one KV head, hidden = head_dim, MLP scaled
    alike) for timing the fixed per-layer cost: its FLOPs and bytes are negligible, its kernels the same."""
    check_supported(arch)
    d = arch.head_dim
    data = arch.model_dump(exclude=set(type(arch).model_computed_fields))
    data.update(
        name=f"{arch.name} overhead probe",
        num_layers=layers,
        hidden_size=d,
        num_attention_heads=1,
        num_kv_heads=1,
        intermediate_size=max(math.ceil(arch.intermediate_size * d / arch.hidden_size), 1),
        sliding_window=None,
        sliding_window_layers=0,
        first_k_dense_layers=0,
        layer_pattern=(),
    )
    return ModelArchitecture.model_validate(data)


def proxy_architecture(arch: ModelArchitecture, layers: int, width_divisor: int = 1) -> ModelArchitecture:
    """`layers` layers of `arch`; with `width_divisor` > 1 (one of `width_divisors`), heads, KV heads (at
    least 1), hidden and MLP widths divided by it (head_dim kept). Sliding windows are dropped (the
    proxy's contexts are short)."""
    check_supported(arch)
    d = width_divisor
    data = arch.model_dump(exclude=set(type(arch).model_computed_fields))
    data.update(
        name=f"{arch.name} proxy ({layers} layer{'s' if layers > 1 else ''}" + (f", width / {d})" if d > 1 else ")"),
        num_layers=layers,
        sliding_window=None,
        sliding_window_layers=0,
        first_k_dense_layers=0,
        layer_pattern=(),
    )
    if d > 1:
        data.update(
            hidden_size=arch.hidden_size // d,
            num_attention_heads=arch.num_attention_heads // d,
            num_kv_heads=max(arch.num_kv_heads // d, 1),
            intermediate_size=max(math.ceil(arch.intermediate_size / d), 1),
        )
    return ModelArchitecture.model_validate(data)


# ---------------------------------------------------------------------------------------------
# torch pieces (built on first use)

_FUNCTIONS: dict[str, type[Function]] = {}


def _norm_functions(torch) -> tuple[type[Function], type[Function]]:
    """Fused-style RMSNorm and LayerNorm: save the input and the fp32 statistics only."""
    if "rms" in _FUNCTIONS:
        return _FUNCTIONS["rms"], _FUNCTIONS["ln"]

    class RMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            xf = x.float()
            rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + NORM_EPS)
            ctx.save_for_backward(x, weight, rstd)
            return (xf * rstd).to(x.dtype) * weight

        @staticmethod
        def backward(ctx, dy):
            x, weight, rstd = ctx.saved_tensors
            n = x.float() * rstd
            g = dy.float() * weight.float()
            dx = rstd * (g - n * (g * n).mean(-1, keepdim=True))
            dw = (dy.float() * n).reshape(-1, n.shape[-1]).sum(0).to(weight.dtype)
            return dx.to(x.dtype), dw

    class LayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias):
            xf = x.float()
            mean = xf.mean(-1, keepdim=True)
            rstd = torch.rsqrt((xf - mean).pow(2).mean(-1, keepdim=True) + NORM_EPS)
            ctx.save_for_backward(x, weight, mean, rstd)
            return ((xf - mean) * rstd).to(x.dtype) * weight + bias

        @staticmethod
        def backward(ctx, dy):
            x, weight, mean, rstd = ctx.saved_tensors
            n = (x.float() - mean) * rstd
            g = dy.float() * weight.float()
            dx = rstd * (g - g.mean(-1, keepdim=True) - n * (g * n).mean(-1, keepdim=True))
            flat = dy.float().reshape(-1, n.shape[-1])
            dw = (flat * n.reshape(-1, n.shape[-1])).sum(0).to(weight.dtype)
            db = flat.sum(0).to(weight.dtype)
            return dx.to(x.dtype), dw, db

    _FUNCTIONS["rms"], _FUNCTIONS["ln"] = RMSNorm, LayerNorm
    return RMSNorm, LayerNorm


@dataclass
class ProxyModel:
    """Parameters of the proxy layers (one dict per layer) plus RoPE tables, on the backend's device."""

    arch: ModelArchitecture
    dtype: str
    backend: Backend
    cos: Tensor  # [positions, head_dim] RoPE tables
    sin: Tensor
    layers: list[dict[str, Tensor]] = field(default_factory=list)

    @classmethod
    def build(
        cls, backend: Backend, arch: ModelArchitecture, dtype: str, max_positions: int, seed: int = 0
    ) -> ProxyModel:
        torch = backend.torch
        dev, dt = backend.tensor_device, backend.dtype(dtype)
        torch.manual_seed(seed)
        h, d = arch.hidden_size, arch.head_dim
        q_out, kv_out = arch.num_attention_heads * d, arch.num_kv_heads * d
        f = arch.intermediate_size

        def matrix(rows, cols):
            return _random(torch, (rows, cols), dev, dt, 0.02)

        def vector(n, value=1.0):
            return torch.full((n,), value, device=dev, dtype=dt)

        layers = []
        for _ in range(arch.num_layers):
            p = {"wq": matrix(q_out, h), "wk": matrix(kv_out, h), "wv": matrix(kv_out, h), "wo": matrix(h, q_out)}
            if arch.qkv_bias:
                p.update(bq=vector(q_out, 0.0), bk=vector(kv_out, 0.0), bv=vector(kv_out, 0.0))
            if arch.attn_out_bias:
                p["bo"] = vector(h, 0.0)
            if arch.mlp_gated:
                p.update(w_gate=matrix(f, h), w_up=matrix(f, h), w_down=matrix(h, f))
            else:
                p.update(w_up=matrix(f, h), w_down=matrix(h, f))
            if arch.mlp_bias:
                if arch.mlp_gated:
                    p["b_gate"] = vector(f, 0.0)
                p.update(b_up=vector(f, 0.0), b_down=vector(h, 0.0))
            for i in range(arch.norms_per_layer):
                p[f"norm{i}"] = vector(h)
                if arch.norm_has_bias:
                    p[f"norm{i}_b"] = vector(h, 0.0)
            if arch.qk_norm:
                p.update(q_norm=vector(d), k_norm=vector(d))
            layers.append(p)
        half = d // 2
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, half, device=dev, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(max_positions, device=dev, dtype=torch.float32), inv)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(dt)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(dt)
        return cls(arch=arch, dtype=dtype, backend=backend, layers=layers, cos=cos, sin=sin)

    # ---- bookkeeping
    def parameters(self) -> list[Tensor]:
        return [t for layer in self.layers for t in layer.values()]

    def parameter_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.parameters())

    def parameter_count(self) -> int:
        return sum(t.numel() for t in self.parameters())

    def buffer_storages(self) -> set[int]:
        return {self.cos.untyped_storage().data_ptr(), self.sin.untyped_storage().data_ptr()}

    def requires_grad_(self, flag: bool) -> None:
        for t in self.parameters():
            t.requires_grad_(flag)

    # ---- the layer
    def _norm(self, p: dict, index: int, x):
        rms, ln = _norm_functions(self.backend.torch)
        if self.arch.norm_has_bias:
            return ln.apply(x, p[f"norm{index}"], p[f"norm{index}_b"])
        return rms.apply(x, p[f"norm{index}"])

    def _rope(self, x, start: int):
        t = x.shape[1]
        cos = self.cos[start : start + t].view(1, t, 1, -1)
        sin = self.sin[start : start + t].view(1, t, 1, -1)
        half = x.shape[-1] // 2
        rotated = self.backend.torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def layer(self, index: int, x, cache=None, start: int = 0):
        """One layer over x [batch, tokens, hidden]. `cache` = (k, v) tensors [batch, kv_heads, capacity,
        head_dim]: the new keys/values are written at positions start.. and attention runs over the cache
        up to them; without a cache (training) attention is causal over x itself."""
        torch = self.backend.torch
        F = torch.nn.functional
        arch, p = self.arch, self.layers[index]
        b, t, _ = x.shape
        heads, kv_heads, d = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
        y = self._norm(p, 0, x)
        q = F.linear(y, p["wq"], p.get("bq")).view(b, t, heads, d)
        k = F.linear(y, p["wk"], p.get("bk")).view(b, t, kv_heads, d)
        v = F.linear(y, p["wv"], p.get("bv")).view(b, t, kv_heads, d)
        if arch.qk_norm:
            rms, _ = _norm_functions(torch)
            q, k = rms.apply(q, p["q_norm"]), rms.apply(k, p["k_norm"])
        q, k = self._rope(q, start), self._rope(k, start)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        gqa = heads != kv_heads
        if cache is not None:
            cache_k, cache_v = cache
            cache_k[:, :, start : start + t].copy_(k)
            cache_v[:, :, start : start + t].copy_(v)
            if t == 1:
                k, v = cache_k[:, :, : start + 1], cache_v[:, :, : start + 1]
        o = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, enable_gqa=gqa)
        o = o.transpose(1, 2).reshape(b, t, heads * d)
        a = F.linear(o, p["wo"], p.get("bo"))
        if arch.norms_per_layer >= 3:
            a = self._norm(p, 2, a)
        x = x + a
        y = self._norm(p, 1, x)
        if arch.mlp_gated:
            m = F.silu(F.linear(y, p["w_gate"], p.get("b_gate"))) * F.linear(y, p["w_up"], p.get("b_up"))
        else:
            m = F.gelu(F.linear(y, p["w_up"], p.get("b_up")), approximate="tanh")
        m = F.linear(m, p["w_down"], p.get("b_down"))
        if arch.norms_per_layer >= 4:
            m = self._norm(p, 3, m)
        return x + m


def kv_cache(model: ProxyModel, batch: int, capacity: int) -> list[tuple]:
    torch = model.backend.torch
    arch = model.arch
    shape = (batch, arch.num_kv_heads, capacity, arch.head_dim)
    dev, dt = model.backend.tensor_device, model.backend.dtype(model.dtype)
    return [(_random(torch, shape, dev, dt, 1.0), _random(torch, shape, dev, dt, 1.0)) for _ in range(arch.num_layers)]


RANDOM_BLOCK = 1 << 20


def _random(torch, shape, device, dtype, std: float):
    """A tensor of N(0, std) values. Large CPU tensors repeat one random block of 2^20 values: a CPU draws
    ~10^8 normal values per second, so a full-width 8B layer would take seconds to fill, while copying is
    bandwidth-bound; the values only have to be realistic (no zeros, no denormals), not independent."""
    t = torch.empty(shape, device=device, dtype=dtype)
    n = t.numel()
    if str(device) != "cpu" or n <= 4 * RANDOM_BLOCK:
        return t.normal_(0.0, std)
    block = torch.empty(RANDOM_BLOCK, device=device, dtype=dtype).normal_(0.0, std)
    flat = t.view(-1)
    for start in range(0, n, RANDOM_BLOCK):
        length = min(RANDOM_BLOCK, n - start)
        flat[start : start + length].copy_(block[:length])
    return t


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# ---------------------------------------------------------------------------------------------
# running the phases


@dataclass
class PhaseResult:
    seconds: float  # fastest repetition
    seconds_per_layer: list[float]  # that repetition, layer by layer
    reps: int
    tensor_bytes: dict[str, float]
    peak_memory_bytes: float | None
    breakdown_seconds: dict[str, float] = field(default_factory=dict)
    median_seconds: float | None = None


def _repeat(ctx: ProfileContext, step, budget_seconds: float, min_reps: int = 2, max_reps: int = 50, warmup=None):
    """Run `warmup` (default: `step`) once, then `step` until the budget is spent. `step` returns the
    seconds of its intervals (one per layer, or per part).

    Returns (best total, that sample's intervals, median total, timed repetitions). The best sample is
    the measurement: other processes and CPU-quota throttling only ever add time, so the fastest
    repetition is the one closest to what the device does; the median is kept to show the spread.
    When the warm-up alone used the budget it is the measurement."""
    ctx.check_cancel()
    started = time.perf_counter()
    first = (warmup or step)()
    samples: list[list[float]] = []
    while len(samples) < max_reps:
        spent = time.perf_counter() - started
        last = sum(samples[-1]) if samples else sum(first)
        if len(samples) >= min_reps and spent >= budget_seconds:
            break
        if spent + last > 1.5 * budget_seconds:
            break
        ctx.check_cancel()
        samples.append(step())
    if not samples:
        samples = [first]
    best = min(samples, key=sum)
    return sum(best), list(best), statistics.median(sum(s) for s in samples), len(samples)


def run_prefill(ctx: ProfileContext, model: ProxyModel, tokens: int, budget_seconds: float) -> PhaseResult:
    """One sequence of `tokens` new tokens through every proxy layer, writing its K/V into a cache."""
    return _run_forward(
        ctx, model, batch=1, new_tokens=tokens, cache_tokens=tokens, position=0, budget_seconds=budget_seconds
    )


def run_decode(ctx: ProfileContext, model: ProxyModel, batch: int, context: int, budget_seconds: float) -> PhaseResult:
    """One decode step: `batch` sequences each add one token at position `context` and attend over the
    `context` cached tokens plus their own (the cache holds context + 1 positions; its first `context`
    are filled with random keys/values, which costs the same as real ones)."""
    return _run_forward(
        ctx,
        model,
        batch=batch,
        new_tokens=1,
        cache_tokens=context + 1,
        position=context,
        budget_seconds=budget_seconds,
        min_reps=3,
        max_reps=200,
    )


def _run_forward(
    ctx: ProfileContext,
    model: ProxyModel,
    *,
    batch: int,
    new_tokens: int,
    cache_tokens: int,
    position: int,
    budget_seconds: float,
    **repeat,
) -> PhaseResult:
    """`batch` sequences add `new_tokens` each at `position` through every proxy layer (inference mode),
    timed per layer; reports the weights, the KV cache and the device's peak memory."""
    backend, torch = ctx.backend, ctx.backend.torch
    arch = model.arch
    backend.empty_cache()
    cache = kv_cache(model, batch, cache_tokens)
    x0 = torch.empty(
        batch, new_tokens, arch.hidden_size, device=backend.tensor_device, dtype=backend.dtype(model.dtype)
    ).normal_(0, 1)
    backend.synchronize()
    backend.reset_peak_memory()

    def step():
        marks = backend.marks()
        with torch.inference_mode():
            x = x0
            marks.mark()
            for i in range(arch.num_layers):
                x = model.layer(i, x, cache[i], position)
                marks.mark()
        return marks.intervals()

    seconds, per_layer, median, reps = _repeat(ctx, step, budget_seconds, **repeat)
    return PhaseResult(
        seconds,
        per_layer,
        reps,
        {"weights": model.parameter_bytes(), "kv_cache": tensor_bytes(t for c in cache for t in c)},
        backend.peak_allocated_bytes(),
        median_seconds=median,
    )


class _AdamW:
    """AdamW (Loshchilov & Hutter 2019) written out per tensor, so its state is exactly what the engine
    counts: fp32 first and second moments, plus an fp32 master copy when the parameters are 16-bit
    (mixed precision, ZeRO's K = 12 bytes per parameter). The update math is torch.optim.AdamW's."""

    def __init__(self, torch, params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
        self.torch, self.params = torch, params
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.step_count = 0
        self.master = [p.detach().float() if p.dtype != torch.float32 else None for p in params]
        self.m = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.v = [torch.zeros_like(p, dtype=torch.float32) for p in params]

    def state_tensors(self) -> list:
        return [t for t in self.master if t is not None] + self.m + self.v

    def step(self) -> None:
        torch = self.torch
        self.step_count += 1
        b1, b2 = self.betas
        bc1, bc2 = 1 - b1**self.step_count, 1 - b2**self.step_count
        with torch.no_grad():
            for p, master, m, v in zip(self.params, self.master, self.m, self.v):
                g = p.grad.float()
                target = master if master is not None else p
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v / bc2).sqrt_().add_(self.eps)
                target.mul_(1 - self.lr * self.wd).addcdiv_(m, denom, value=-self.lr / bc1)
                if master is not None:
                    p.copy_(master)


def run_train(
    ctx: ProfileContext, model: ProxyModel, micro_batch: int, tokens: int, budget_seconds: float
) -> PhaseResult:
    """Forward, backward and an AdamW step over `micro_batch` sequences of `tokens` tokens.

    Measured exactly on the first step: parameter, gradient and optimizer-state bytes (summed tensor
    sizes), and the saved activations: every tensor autograd saves for backward, counted once per
    storage (views share one), parameters and the RoPE tables excluded."""
    backend, torch = ctx.backend, ctx.backend.torch
    arch = model.arch
    backend.empty_cache()
    params = model.parameters()
    model.requires_grad_(True)
    optimizer = _AdamW(torch, params)
    x0 = torch.empty(
        micro_batch, tokens, arch.hidden_size, device=backend.tensor_device, dtype=backend.dtype(model.dtype)
    ).normal_(0, 1)
    excluded = {t.untyped_storage().data_ptr() for t in params} | model.buffer_storages()
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded:
            saved[ptr] = max(saved.get(ptr, 0), storage.nbytes())
        return t

    measured: dict[str, float] = {}
    backend.synchronize()
    backend.reset_peak_memory()

    def step(record: bool = False):
        marks = backend.marks()
        marks.mark()
        if record:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = _forward(model, x0)
        else:
            out = _forward(model, x0)
        marks.mark()
        out.float().sum().backward()
        marks.mark()
        if record:
            measured["gradients"] = tensor_bytes(p.grad for p in params)
        optimizer.step()
        for p in params:
            p.grad = None
        marks.mark()
        return marks.intervals()

    try:
        # The warm-up step does the exact accounting (the hooks cost nothing measurable, but stay out of timing).
        seconds, parts, median, reps = _repeat(
            ctx, step, budget_seconds, min_reps=2, max_reps=20, warmup=lambda: step(record=True)
        )
        measured["saved_activations"] = float(sum(saved.values()))
    finally:
        model.requires_grad_(False)
    peak = backend.peak_allocated_bytes()
    result = PhaseResult(
        seconds,
        [seconds / arch.num_layers] * arch.num_layers,
        reps,
        {
            "weights": model.parameter_bytes(),
            "gradients": measured["gradients"],
            "optimizer_states": tensor_bytes(optimizer.state_tensors()),
            "saved_activations": measured["saved_activations"],
        },
        peak,
        {"forward": parts[0], "backward": parts[1], "optimizer": parts[2]},
        median_seconds=median,
    )
    return result


def _forward(model: ProxyModel, x):
    for i in range(model.arch.num_layers):
        x = model.layer(i, x)
    return x


__all__ = [
    "PhaseResult",
    "ProxyModel",
    "check_supported",
    "probe_architecture",
    "proxy_architecture",
    "run_decode",
    "run_prefill",
    "run_train",
    "width_divisors",
]
