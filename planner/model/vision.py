"""Parameters of a multimodal checkpoint's vision tower and projector, from its `config.json`.

Counted apart from the language model (`ModelArchitecture.vision_encoder_parameters`): a served
multimodal checkpoint loads them too, but they run once per image, not per token. Each tower follows
its transformers modeling file; missing keys take that config class's defaults (transformers 5.x).
A tower of an unknown type counts 0 and says so in the returned assumptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner.errors import PlanningError


def _int(config: dict, key: str, default: int) -> int:
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise PlanningError(f"config.json vision_config field '{key}' must be a whole number, got {value!r}")
    return int(value)


def _linear(d_in: int, d_out: int, bias: bool) -> int:
    return d_in * d_out + (d_out if bias else 0)


def siglip_vision_parameters(vision: dict[str, Any]) -> int:
    """SiglipVisionModel (transformers modeling_siglip.py): Conv2d patch embedding (with bias), a learned
    position table of (image/patch)^2 rows, L encoder layers (q/k/v/out with bias, two LayerNorms, fc1/fc2
    with bias), post_layernorm, and the attention-pooling head when `vision_use_head` (default true)."""
    h = _int(vision, "hidden_size", 768)
    width = _int(vision, "intermediate_size", 3072)
    patch = _int(vision, "patch_size", 16)
    patches = (_int(vision, "image_size", 224) // patch) ** 2
    embeddings = _int(vision, "num_channels", 3) * patch * patch * h + h + patches * h
    layer = 4 * _linear(h, h, True) + 2 * 2 * h + _linear(h, width, True) + _linear(width, h, True)
    total = embeddings + _int(vision, "num_hidden_layers", 12) * layer + 2 * h
    if vision.get("vision_use_head", True):
        # SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention (in_proj 3h x h + 3h, out_proj),
        # LayerNorm, SiglipMLP
        total += h + 3 * h * h + 3 * h + _linear(h, h, True) + 2 * h + _linear(h, width, True) + _linear(width, h, True)
    return total


def llama4_vision_parameters(vision: dict[str, Any]) -> int:
    """Llama4VisionModel (transformers modeling_llama4.py): an unfold-convolution patch embedding (bias-free
    linear of channels x patch^2 -> hidden), class embedding, positional embedding of (image/patch)^2 + 1
    rows, pre/post LayerNorms, L encoder layers (q/k/v/o with bias, two LayerNorms, fc1/fc2 with bias) and
    the pixel-shuffle adapter (fc1 intermediate -> projector_input_dim, fc2 projector_output_dim square,
    both bias-free)."""
    h = _int(vision, "hidden_size", 768)
    width = _int(vision, "intermediate_size", 5632)
    patch = _int(vision, "patch_size", 14)
    positions = (_int(vision, "image_size", 448) // patch) ** 2 + 1
    embeddings = _int(vision, "num_channels", 3) * patch * patch * h + h + positions * h + 2 * 2 * h
    layer = 4 * _linear(h, h, True) + 2 * 2 * h + _linear(h, width, True) + _linear(width, h, True)
    out_dim = _int(vision, "projector_output_dim", 4096)
    adapter = width * _int(vision, "projector_input_dim", 4096) + out_dim * out_dim
    return embeddings + _int(vision, "num_hidden_layers", 34) * layer + adapter


def pixtral_vision_parameters(vision: dict[str, Any]) -> int:
    """PixtralVisionModel (transformers modeling_pixtral.py): a bias-free Conv2d patch embedding, ln_pre
    (RMSNorm), L layers of attention_norm, bias-free q/k/v/o (hidden x hidden), ffn_norm and a gated
    bias-free MLP (gate, up, down)."""
    h = _int(vision, "hidden_size", 1024)
    width = _int(vision, "intermediate_size", 4096)
    patch = _int(vision, "patch_size", 16)
    layer = h + 4 * h * h + h + 3 * h * width
    return _int(vision, "num_channels", 3) * patch * patch * h + h + _int(vision, "num_hidden_layers", 24) * layer


VISION_TOWERS: dict[str, Callable[[dict[str, Any]], int]] = {
    "siglip_vision_model": siglip_vision_parameters,
    "llama4_vision_model": llama4_vision_parameters,
    "pixtral": pixtral_vision_parameters,
}


def projector_parameters(config: dict[str, Any], text_hidden: int) -> int:
    """The multimodal projector of the wrapper `config` (by its model_type), text side `text_hidden`.

    gemma3: Gemma3MultiModalProjector, a vision_hidden x text_hidden matrix and an RMSNorm (vision_hidden).
    llama4: Llama4MultiModalProjector, a bias-free vision_output_dim x text_hidden linear.
    mistral3 / ministral3: Mistral3MultiModalProjector, RMSNorm (vision_hidden), the patch merger
    (vision_hidden x merge^2 -> vision_hidden, bias-free), linear_1 (vision_hidden x feature layers ->
    text_hidden) and linear_2 (text_hidden square), with biases when multimodal_projector_bias.
    """
    vision = config.get("vision_config") or {}
    kind = config.get("model_type")
    vision_hidden = _int(vision, "hidden_size", 0)
    if kind == "gemma3":
        return vision_hidden * text_hidden + vision_hidden
    if kind == "llama4":
        return _int(vision, "vision_output_dim", 7680) * text_hidden
    if kind in ("mistral3", "ministral3"):
        layers = config.get("vision_feature_layer", -1)
        feature_layers = len(layers) if isinstance(layers, list) else 1
        merge = _int(config, "spatial_merge_size", 2)
        bias = bool(config.get("multimodal_projector_bias", False))
        return (
            vision_hidden
            + vision_hidden * merge * merge * vision_hidden
            + _linear(vision_hidden * feature_layers, text_hidden, bias)
            + _linear(text_hidden, text_hidden, bias)
        )
    return 0


# The tower each wrapper builds when its vision_config names no model_type (transformers' sub-config defaults).
DEFAULT_TOWER = {
    "gemma3": "siglip_vision_model",
    "llama4": "llama4_vision_model",
    "mistral3": "pixtral",
    "ministral3": "pixtral",
}


def vision_encoder_parameters(config: dict[str, Any], text_hidden: int) -> tuple[int, str | None, tuple[str, ...]]:
    """(parameters, vision model_type, assumptions) of the vision tower + projector of a wrapper config.

    A known wrapper with an empty or absent `vision_config` gets what transformers builds from it: the
    tower's config defaults (said in the assumptions: a published checkpoint's tower usually differs)."""
    vision = config.get("vision_config")
    wrapper = config.get("model_type")
    if vision is None and wrapper in DEFAULT_TOWER:
        vision = {}
    if not isinstance(vision, dict) or (not vision and wrapper not in DEFAULT_TOWER):
        return 0, None, ()
    kind = vision.get("model_type") or DEFAULT_TOWER.get(str(wrapper))
    tower = VISION_TOWERS.get(kind) if isinstance(kind, str) else None
    if tower is None:
        return (
            0,
            kind if isinstance(kind, str) else None,
            (f"vision tower {kind!r} is not counted (known: {', '.join(sorted(VISION_TOWERS))})",),
        )
    notes: tuple[str, ...] = ()
    if not vision:
        notes = (f"vision_config is empty or absent: the {kind} tower is counted with its transformers defaults",)
    if wrapper not in DEFAULT_TOWER:
        notes += (f"multimodal projector of {wrapper!r} is not counted",)
    return tower(vision) + projector_parameters(config, text_hidden), kind, notes


def vision_geometry(config: dict[str, Any]) -> dict[str, int]:
    """What one image costs a multimodal wrapper `config`: the encoder's patches (its sequence length), the
    language-model tokens it becomes, and the tower's width and depth (for its FLOPs). Empty for a tower the
    planner does not count.

    gemma3: SigLIP over (image/patch)^2 patches, pooled to `mm_tokens_per_image` tokens (default 256).
    llama4: one 336-px tile is (image/patch)^2 patches + a class token; pixel shuffle (ratio 0.5) keeps
    ratio^2 of the patches as tokens (144 per tile). mistral3/ministral3 (Pixtral): patches of the largest
    image (`image_size`), merged spatial_merge_size^2 to one token (a smaller image has fewer; set
    tokens_per_image in the scenario)."""
    vision = config.get("vision_config")
    wrapper = config.get("model_type")
    vision = vision if isinstance(vision, dict) else {}
    kind = vision.get("model_type") or DEFAULT_TOWER.get(str(wrapper))
    if kind not in VISION_TOWERS:
        return {}
    defaults = {
        "siglip_vision_model": (224, 16, 768, 12),
        "llama4_vision_model": (448, 14, 768, 34),
        "pixtral": (1024, 16, 1024, 24),
    }
    size, patch_default, hidden_default, layers_default = defaults[kind]
    grid = (_int(vision, "image_size", size) // _int(vision, "patch_size", patch_default)) ** 2
    if kind == "llama4_vision_model":
        ratio = vision.get("pixel_shuffle_ratio", 0.5)
        ratio = ratio if isinstance(ratio, (int, float)) and 0 < ratio <= 1 else 0.5
        patches, tokens = grid + 1, int(grid * ratio * ratio)
    elif kind == "pixtral":
        patches, tokens = grid, grid // _int(config, "spatial_merge_size", 2) ** 2
    else:
        patches, tokens = grid, _int(config, "mm_tokens_per_image", 256)
    return {
        "vision_patches_per_image": patches,
        "vision_tokens_per_image": max(tokens, 1),
        "vision_hidden_size": _int(vision, "hidden_size", hidden_default),
        "vision_num_layers": _int(vision, "num_hidden_layers", layers_default),
    }
