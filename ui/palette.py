"""Colour-blind safe colours (Okabe & Ito 2008) and the fixed colour of each plan element."""

from __future__ import annotations

BLUE = "#0072B2"
ORANGE = "#E69F00"
GREEN = "#009E73"
PURPLE = "#CC79A7"
SKY = "#56B4E9"
VERMILLION = "#D55E00"
YELLOW = "#F0E442"
BLACK = "#000000"
GREY = "#8C8C8C"
LIGHT_GREY = "#D9D9D9"

CATEGORICAL = [BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILLION, YELLOW, BLACK]

# Memory and time components keep one colour everywhere (inference, training, compare).
COMPONENT_COLOURS = {
    "weights": BLUE,
    "kv_cache": ORANGE,
    "activations": GREEN,
    "logits": PURPLE,
    "runtime_overhead": GREY,
    "gradients": SKY,
    "gradient_accumulation": YELLOW,
    "sharding_buffers": BLACK,
    "optimizer_states": VERMILLION,
    "optimizer": VERMILLION,
    "master_weights": YELLOW,
    "lora": PURPLE,
    "forward_backward": BLUE,
    "tensor_parallel": ORANGE,
    "expert_parallel": PURPLE,
    "pipeline_p2p": SKY,
    "overlapped_communication_exposed": YELLOW,
    "data_parallel": VERMILLION,
    "optimizer_step": GREEN,
    "offload_transfer": BLACK,
    "compute": BLUE,
    "communication": ORANGE,
    "memory": GREEN,
    "memory_bandwidth": GREEN,
    "pipeline_bubble": GREY,
    "bubble": GREY,
    "recompute": PURPLE,
    "offload": SKY,
}

PHASE_COLOURS = {"prefill": VERMILLION, "decode": BLUE}


def component_colour(name: str, index: int = 0) -> str:
    key = name.removesuffix("_bytes").removesuffix("_seconds")
    return COMPONENT_COLOURS.get(key, CATEGORICAL[index % len(CATEGORICAL)])
