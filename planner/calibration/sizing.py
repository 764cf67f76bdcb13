"""Sizing the proxy model: the largest few layers of the chosen model whose phases fit the profile's time budget
and memory cap, estimated from the measured ceilings and the engine's FLOP and byte counts (`size_proxy`).
Every cap applied is written into the record (`ProxySpec.caps`). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration import proxy
from planner.calibration.predict import ProxyGeometry
from planner.calibration_record import Ceilings, ProfileSettings, ProxyComputeDType, ProxySpec
from planner.model.architecture import ModelArchitecture
from planner.units import gib, seconds

# Operating points before any cap: (prefill tokens, holdout prefill tokens, decode batch, decode context,
# holdout decode batch, holdout decode context, train micro-batch, train tokens, layers)
GPU_POINTS = dict(
    prefill=2048,
    prefill_holdout=512,
    decode_batch=16,
    decode_context=2048,
    holdout_batch=64,
    holdout_context=512,
    train_batch=1,
    train_tokens=2048,
    layers=4,
)
CPU_POINTS = dict(
    prefill=256,
    prefill_holdout=64,
    decode_batch=4,
    decode_context=256,
    holdout_batch=16,
    holdout_context=64,
    train_batch=1,
    train_tokens=256,
    layers=2,
)
MIN_TOKENS = 16
# Calls each phase makes at least (warm-up included), for the sizing estimate.
PHASE_CALLS = dict(prefill=3, prefill_holdout=3, decode=4, decode_holdout=4, train=3)
OVERHEAD_FACTOR = 1.5  # non-GEMM kernels (norms, RoPE, attention, residuals) on top of the GEMM estimate
# Operating points a sequence-length cap divides.
TOKEN_KEYS = ("prefill", "prefill_holdout", "decode_context", "holdout_context", "train_tokens")


@dataclass(frozen=True)
class Rates:
    """The measured ceilings the estimate runs at: square and skinny GEMM FLOP/s, copy bandwidth (B/s)."""

    square: float
    skinny: float
    bandwidth: float

    @classmethod
    def of(cls, ceilings: Ceilings, dtype: str) -> Rates:
        """From the ceilings in `dtype`, with stand-ins for what was not measured."""
        square = ceilings.best_matmul_flops_per_second(dtype, "square") or 1e11
        skinny = ceilings.best_matmul_flops_per_second(dtype, "skinny") or square / 4
        bandwidth = ceilings.bandwidth_bytes_per_second() or 1e10
        return cls(square, skinny, bandwidth)


def estimate_proxy(arch: ModelArchitecture, dtype: str, points: dict, rates: Rates) -> tuple[float, float]:
    """(seconds, peak bytes) the proxy phases are expected to take at these operating points, from the
    measured ceilings (GEMM FLOP/s, copy bandwidth) and the engine's FLOP and byte counts."""
    g = ProxyGeometry(arch, dtype)

    def step(flops, moved, flop_rate):
        return max(flops / flop_rate, moved / rates.bandwidth) * OVERHEAD_FACTOR

    t = 0.0
    f, b = g.prefill_work(points["prefill"])
    t += PHASE_CALLS["prefill"] * step(f, b, rates.square)
    f, b = g.prefill_work(points["prefill_holdout"])
    t += PHASE_CALLS["prefill_holdout"] * step(f, b, rates.square)
    f, b = g.decode_work(points["decode_batch"], points["decode_context"])
    t += PHASE_CALLS["decode"] * step(f, b, rates.skinny)
    f, b = g.decode_work(points["holdout_batch"], points["holdout_context"])
    t += PHASE_CALLS["decode_holdout"] * step(f, b, rates.skinny)
    work = g.train_work(points["train_batch"], points["train_tokens"])
    # The AdamW step is ~a dozen elementwise passes over the fp32 states written out per tensor.
    t += PHASE_CALLS["train"] * (
        step(work["flops"], work["bytes"], rates.square) + 3 * work["optimizer_bytes"] / rates.bandwidth
    )
    train_mem = sum(g.training_memory(points["train_batch"], points["train_tokens"]).values())
    kv = max(
        g.kv_bytes(points["decode_batch"], points["decode_context"] + 1),
        g.kv_bytes(points["holdout_batch"], points["holdout_context"] + 1),
        g.kv_bytes(1, points["prefill"]),
    )
    transient = 4 * g.inference_activation_bytes(max(points["prefill"], points["train_batch"] * points["train_tokens"]))
    peak = max(train_mem, g.weight_bytes() + kv) + transient
    return t, peak


@dataclass(frozen=True)
class _Candidate:
    """One proxy size: `layers` layers, width / `divisor`, sequence lengths / `scale` (the operating `points`)."""

    layers: int
    divisor: int
    scale: int
    points: dict


@dataclass(frozen=True)
class _Sized:
    """The chosen candidate, its architecture and its estimated (seconds, peak bytes)."""

    candidate: _Candidate
    arch: ModelArchitecture
    seconds_needed: float
    peak: float


def size_proxy(
    arch: ModelArchitecture,
    settings: ProfileSettings,
    device_kind: str,
    dtype: ProxyComputeDType,
    rates: Rates,
    budget_seconds: float,
    memory_cap_bytes: int,
    model_id: str,
) -> ProxySpec:
    """The largest proxy that fits the time budget and the memory cap: the device's default operating
    points, then shorter sequences (down to 1/4), then a narrower model (width / 2, / 4, ...), then one
    layer. If nothing fits, the smallest candidate runs and the record says the budget was too small."""
    base = dict(GPU_POINTS if device_kind == "cuda" else CPU_POINTS)
    requested_layers = min(settings.layers or base["layers"], arch.num_layers)
    candidates = _candidates(arch, base, settings.layers)
    sized = _first_that_fits(arch, dtype, rates, candidates, budget_seconds, memory_cap_bytes)
    caps: list[str] = []
    if sized is None:
        sized = _sized(arch, dtype, rates, candidates[-1])
        caps.append(
            f"even the smallest proxy is estimated at {seconds(sized.seconds_needed)} and {gib(sized.peak)} against a "
            f"budget of {seconds(budget_seconds)} and {gib(memory_cap_bytes)}: the profile overruns"
        )
    caps += _cap_notes(arch, base, sized, requested_layers, device_kind)
    caps.append(
        f"estimated {seconds(sized.seconds_needed)} and {gib(sized.peak)} for the proxy phases "
        f"(budget {seconds(budget_seconds)}, memory cap {gib(memory_cap_bytes)})"
    )
    points = sized.candidate.points
    return ProxySpec(
        model_id=model_id,
        model_name=arch.name,
        architecture=sized.arch,
        source_num_layers=arch.num_layers,
        source_hidden_size=arch.hidden_size,
        width_divisor=sized.candidate.divisor,
        dtype=dtype,
        prefill_tokens=points["prefill"],
        holdout_prefill_tokens=points["prefill_holdout"],
        decode_batch=points["decode_batch"],
        decode_context_tokens=points["decode_context"],
        holdout_decode_batch=points["holdout_batch"],
        holdout_decode_context_tokens=points["holdout_context"],
        train_micro_batch=points["train_batch"],
        train_tokens=points["train_tokens"],
        caps=caps,
    )


def _candidates(arch: ModelArchitecture, base: dict, layers_setting: int | None) -> list[_Candidate]:
    """Every size to try, largest first: the requested layers (then one layer, unless the user set them) x the
    width divisors x sequence lengths / 1, 2, 4 (never past the model's context, never under MIN_TOKENS)."""
    requested_layers = layers_setting or base["layers"]
    layers_options = [min(requested_layers, arch.num_layers)]
    if layers_options[0] > 1 and layers_setting is None:
        layers_options.append(1)
    candidates = []
    for layers in layers_options:
        for divisor in proxy.width_divisors(arch):
            for scale in (1, 2, 4):
                points = dict(base)
                for key in TOKEN_KEYS:
                    points[key] = max(min(base[key] // scale, arch.max_context_tokens - 1), MIN_TOKENS)
                candidates.append(_Candidate(layers, divisor, scale, points))
    return candidates


def _sized(arch: ModelArchitecture, dtype: str, rates: Rates, candidate: _Candidate) -> _Sized:
    candidate_arch = proxy.proxy_architecture(arch, candidate.layers, candidate.divisor)
    seconds_needed, peak = estimate_proxy(candidate_arch, dtype, candidate.points, rates)
    return _Sized(candidate, candidate_arch, seconds_needed, peak)


def _first_that_fits(
    arch: ModelArchitecture,
    dtype: str,
    rates: Rates,
    candidates: list[_Candidate],
    budget_seconds: float,
    memory_cap_bytes: int,
) -> _Sized | None:
    for candidate in candidates:
        sized = _sized(arch, dtype, rates, candidate)
        if sized.seconds_needed <= budget_seconds and sized.peak <= memory_cap_bytes:
            return sized
    return None


def _cap_notes(
    arch: ModelArchitecture, base: dict, sized: _Sized, requested_layers: int, device_kind: str
) -> list[str]:
    """What the chosen size gave up against the requested one, in words."""
    layers, divisor, scale, points = (
        sized.candidate.layers,
        sized.candidate.divisor,
        sized.candidate.scale,
        sized.candidate.points,
    )
    proxy_arch = sized.arch
    caps = []
    if layers < requested_layers:
        caps.append(f"layers capped {requested_layers} -> {layers} to fit the budget")
    if divisor > 1:
        caps.append(
            f"width capped {arch.hidden_size} -> {proxy_arch.hidden_size} (/{divisor}: heads "
            f"{arch.num_attention_heads} -> {proxy_arch.num_attention_heads}, KV heads {arch.num_kv_heads} -> "
            f"{proxy_arch.num_kv_heads}, MLP {arch.intermediate_size} -> {proxy_arch.intermediate_size}; "
            f"head_dim {arch.head_dim} kept) to fit the {device_kind.upper()} time budget or memory cap"
        )
    if scale > 1:
        caps.append(
            f"sequence lengths divided by {scale} (prefill {base['prefill']} -> {points['prefill']} tokens, "
            f"decode context {base['decode_context']} -> {points['decode_context']}, training sequence "
            f"{base['train_tokens']} -> {points['train_tokens']}) to fit the budget"
        )
    if any(points[k] < base[k] // scale for k in TOKEN_KEYS):
        caps.append(f"sequence lengths capped by the model's {arch.max_context_tokens}-token context")
    return caps


__all__ = ["CPU_POINTS", "GPU_POINTS", "Rates", "estimate_proxy", "size_proxy"]
