"""A plausible modern architecture for a model known only by its size ("dense-70b", "moe-1t").

Dense models follow the Llama-3 recipe: head_dim 128, 8 KV heads (GQA), SwiGLU, 128,256-token
vocabulary, untied embeddings (tied below 4B), about 110 hidden units per layer (Llama-3.1: 8B has
4096/32 = 128, 70B 8192/80 = 102, 405B 16384/126 = 130). MoE models follow Qwen3-MoE /
DeepSeek-V3: 128 fine-grained experts, 8 routed per token, expert width ~0.375 x hidden, about
48 hidden units per layer (Qwen3-235B-A22B: 4096/94 = 44). The MLP (or expert) width is then
solved so the total lands within 2 % of the requested size.
"""

from __future__ import annotations

import re
from typing import Any

from planner.errors import PlanningError
from planner.model.architecture import ModelArchitecture, parameter_counts

SIZE_PATTERN = re.compile(r"^(dense|moe)-(\d+(?:\.\d+)?)([mbt])$", re.IGNORECASE)
_UNITS = {"m": 1e6, "b": 1e9, "t": 1e12}
MIN_PARAMS, MIN_MOE_PARAMS, MAX_PARAMS = 1e8, 2e9, 1e13
VOCAB = 128_256
TOLERANCE = 0.02


def parse_size_id(model_id: str) -> tuple[bool, float] | None:
    """('dense-70b') -> (False, 70e9); None when the id is not a size id."""
    match = SIZE_PATTERN.match(model_id.strip())
    if not match:
        return None
    kind, number, unit = match.groups()
    return kind.lower() == "moe", float(number) * _UNITS[unit.lower()]


def size_id(params: float, moe: bool) -> str:
    """The canonical id for a size, e.g. (70e9, False) -> 'dense-70b'."""
    if params >= 1e12:
        text, unit = f"{params / 1e12:g}", "t"
    elif params >= 1e9:
        text, unit = f"{params / 1e9:g}", "b"
    else:
        text, unit = f"{params / 1e6:g}", "m"
    return f"{'moe' if moe else 'dense'}-{text}{unit}"


def _build(name: str, hidden: int, layers: int, width: int, moe: bool) -> ModelArchitecture:
    heads = hidden // 128
    kv_heads = next(k for k in (8, 4, 2, 1) if heads % k == 0)
    common: dict[str, Any] = dict(
        name=name,
        model_type="synthetic",
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=128,
        vocab_size=VOCAB,
        max_context_tokens=131_072,
    )
    if moe:
        return ModelArchitecture(
            **common,
            intermediate_size=0,
            num_experts=128,
            experts_per_token=8,
            expert_intermediate_size=width,
            tie_word_embeddings=False,
        )
    return ModelArchitecture(**common, intermediate_size=width, tie_word_embeddings=hidden < 3072)


def _solve_width(name: str, hidden: int, layers: int, moe: bool, target: float) -> ModelArchitecture | None:
    # Total parameters are affine in the MLP width: measure two widths, solve, round (fine-grained
    # experts are narrow, so they round to 16 rather than 64).
    grain = 16 if moe else 64
    low, high = _build(name, hidden, layers, 64, moe), _build(name, hidden, layers, 128, moe)
    p_low, p_high = parameter_counts(low).total, parameter_counts(high).total
    slope = (p_high - p_low) / 64
    width = round((64 + (target - p_low) / slope) / grain) * grain
    if width < grain:
        return None
    return _build(name, hidden, layers, width, moe)


def synthetic_architecture(params_total: float, moe: bool) -> ModelArchitecture:
    smallest = MIN_MOE_PARAMS if moe else MIN_PARAMS
    if not smallest <= params_total <= MAX_PARAMS:
        raise PlanningError(
            f"model size {params_total:.3g} parameters is outside the supported "
            f"{smallest / 1e9:g}B-{MAX_PARAMS / 1e12:g}T range for {'MoE' if moe else 'dense'} models"
        )
    name = f"{'MoE' if moe else 'Dense'} model, {params_total / 1e9:g}B parameters (synthetic)"
    aspect = 48 if moe else 110
    ratio = 0.375 * 128 * 3 if moe else 3.5 * 3  # MLP parameters per hidden^2 per layer
    best = None
    # hidden ~ (P * aspect / (2 + ratio))^(1/3) from P ~ layers * (2 + ratio) * hidden^2; try neighbours.
    guess = (params_total * aspect / (2 + ratio)) ** (1 / 3)
    # Large models keep hidden a multiple of 1024 so the head count is a multiple of 8 (TP-friendly).
    step = 1024 if guess > 4096 else 512
    candidates = sorted({max(512, int(round(guess / step + k)) * step) for k in range(-3, 4)})
    for hidden in candidates:
        for layers in range(max(2, round(hidden / aspect) - 4), round(hidden / aspect) + 5):
            arch = _solve_width(name, hidden, layers, moe, params_total)
            if arch is None:
                continue
            width_ratio = (arch.expert_intermediate_size if moe else arch.intermediate_size) / hidden
            plausible = 0.2 <= width_ratio <= 0.6 if moe else 2.0 <= width_ratio <= 5.0
            error = abs(parameter_counts(arch).total / params_total - 1)
            shape = abs(width_ratio - (0.375 if moe else 3.5)) + abs(hidden / layers / aspect - 1)
            score = (not plausible, error > TOLERANCE, shape)
            if best is None or score < best[0]:
                best = (score, arch)
    if best is None or best[0][1]:
        raise PlanningError(f"could not derive an architecture within 2 % of {params_total:.3g} parameters")
    return best[1]
