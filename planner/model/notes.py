"""What a plan must say about the model itself: the parser's assumptions, the generic fallback, the layer
mix and the vision tower, as sentences the inference and training plans both list (DESIGN rule 5).

Scenario-independent; the inference plan adds its cache sentences (`planner.inference.explain`).
"""

from __future__ import annotations

from planner.model.architecture import ModelArchitecture, parameter_counts
from planner.model.hf_config import SUPPORTED_MODEL_TYPES
from planner.units import count

# Model types that are not config.json families but still never go through the generic fallback.
_NOT_PARSED = ("synthetic",)


def read_by_generic_fallback(arch: ModelArchitecture) -> bool:
    """True when no dedicated parser read the config: the model planned as a Llama-style decoder."""
    return arch.model_type not in SUPPORTED_MODEL_TYPES and arch.model_type not in _NOT_PARSED


def architecture_warnings(arch: ModelArchitecture) -> list[str]:
    """Risky but possible: a model read by the generic fallback (its estimate rests on guessed tensors)."""
    if not read_by_generic_fallback(arch):
        return []
    return [
        f"{arch.name}: model_type '{arch.model_type}' has no dedicated parser, so it is planned as a Llama-style "
        "decoder from its standard fields; tensors specific to this family are not counted. Check the "
        "assumptions listed and compare the parameter count with the model card."
    ]


def architecture_assumptions(arch: ModelArchitecture) -> list[str]:
    """What the parser assumed (each config default it filled in, weights it left out), the layer mix of a
    stack whose layers differ, and where a multimodal checkpoint's vision tower is counted."""
    out = [f"Config of {arch.name}: {note}." for note in arch.assumptions]
    kinds = arch.layer_kind_counts
    if len(kinds) > 1 or arch.is_hybrid:
        mix = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        out.append(
            f"{arch.name} mixes layer kinds ({mix} of {arch.num_layers} layers): parameters, FLOPs and cache are "
            "counted layer by layer."
        )
    vision = parameter_counts(arch).vision_encoder
    if vision:
        out.append(
            f"Vision tower and projector ({arch.vision_model_type or 'vision encoder'}, {count(vision)} parameters) "
            "are in the weights, on the first pipeline stage, split across tensor-parallel ranks, in 16-bit. "
            "Image tokens count as prompt tokens (include them in prompt_tokens); the encoder's own compute per "
            "image is not modelled."
        )
    return out


__all__ = ["architecture_assumptions", "architecture_warnings", "read_by_generic_fallback"]
