"""The linear projections of a decoder layer and how parallelism places them on one GPU: the geometry that
LoRA adapters (training and serving), Adafactor's factored states and the saved activations of training share.

Scope: one layer's matrices unsharded (`layer_matrices`), one matrix on one GPU (`local_shape`: Megatron's column
and row splits, K/V replicated once tensor parallelism exceeds the KV heads, routed experts over expert
parallelism), and sums over one pipeline stage's dense and MoE layers. Broadcasts over numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.arrays import Number, maximum, minimum
from planner.model.architecture import ModelArchitecture
from planner.physics import memory as base_memory


@dataclass(frozen=True)
class Matrix:
    """One linear projection of a layer: input and output widths, how tensor parallelism splits it."""

    module: str  # q, k, v, o, gate, up, down, router (LoRA target names)
    d_in: int
    d_out: int
    split: str  # column | column_kv | row | none
    expert: bool = False  # one per routed expert (count = experts)
    count: int = 1


def layer_matrices(arch: ModelArchitecture, moe_layer: bool) -> list[Matrix]:
    """The projections of one layer, unsharded. Sums to the layer's matrix parameters
    (`LayerParameters.linear + router`); used for LoRA adapter sizes and Adafactor's factored state."""
    h = arch.hidden_size
    out: list[Matrix] = []
    if arch.uses_mla:
        qk = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        heads = arch.num_attention_heads
        if arch.q_lora_rank:
            out.append(Matrix("q", h, arch.q_lora_rank, "none"))
            out.append(Matrix("q", arch.q_lora_rank, heads * qk, "column"))
        else:
            out.append(Matrix("q", h, heads * qk, "column"))
        out.append(Matrix("k", h, arch.kv_lora_rank + arch.qk_rope_head_dim, "none"))
        out.append(Matrix("v", arch.kv_lora_rank, heads * (arch.qk_nope_head_dim + arch.v_head_dim), "column"))
        out.append(Matrix("o", heads * arch.v_head_dim, h, "row"))
    else:
        out.append(Matrix("q", h, arch.num_attention_heads * arch.head_dim, "column"))
        out.append(Matrix("k", h, arch.num_kv_heads * arch.head_dim, "column_kv"))
        out.append(Matrix("v", h, arch.num_kv_heads * arch.head_dim, "column_kv"))
        out.append(Matrix("o", arch.num_attention_heads * arch.head_dim, h, "row"))

    def mlp(width: int, gated: bool, expert: bool = False, count: int = 1) -> None:
        if gated:
            out.append(Matrix("gate", h, width, "column", expert, count))
        out.append(Matrix("up", h, width, "column", expert, count))
        out.append(Matrix("down", width, h, "row", expert, count))

    if moe_layer:
        # Routed and shared experts share one activation: gated (SwiGLU and kin) or up/down (Nemotron-H's relu^2).
        mlp(arch.expert_intermediate_size, arch.experts_gated, True, arch.num_experts)
        if arch.shared_expert_intermediate_size:
            mlp(arch.shared_expert_intermediate_size, arch.experts_gated)
        out.append(Matrix("router", h, arch.num_experts, "none"))
    else:
        mlp(arch.intermediate_size, arch.mlp_gated)
    return out


def local_shape(m: Matrix, arch: ModelArchitecture, tensor_parallel, expert_parallel):
    """(d_in, d_out, copies) of one matrix on one GPU: Megatron column/row splits, K/V replicated once TP
    exceeds the KV heads, routed experts spread over EP (and split by TP inside, expert-TP = TP)."""
    t = tensor_parallel
    d_in, d_out = m.d_in + 0 * t, m.d_out + 0 * t
    if m.split == "column":
        d_out = m.d_out / t
    elif m.split == "column_kv":
        d_out = m.d_out * maximum(1 / t, 1 / arch.num_kv_heads)
    elif m.split == "row":
        d_in = m.d_in / t
    copies = m.count / expert_parallel if m.expert else m.count + 0 * expert_parallel
    return d_in, d_out, copies


def over_layers(arch: ModelArchitecture, dense_layers, moe_layers, per_layer: Callable[[bool], tuple]) -> tuple:
    """Each of `per_layer(moe_layer)`'s per-layer terms summed over `dense_layers` dense and `moe_layers` MoE
    layers (the MoE layers only in a MoE model): the one sum every whole-model and per-stage count shares."""
    dense = per_layer(False)
    if not arch.is_moe:
        return tuple(dense_layers * term for term in dense)
    moe = per_layer(True)
    return tuple(dense_layers * d + moe_layers * m for d, m in zip(dense, moe, strict=True))


def stage_layers_total(arch: ModelArchitecture, pipeline_parallel, layers, per_layer: Callable[[bool], Number]):
    """`per_layer(moe_layer)` summed over one stage's layers (`stage_layer_split`): the most loaded stage of the
    even split, or a stage of `layers` layers."""
    dense_layers, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    (total,) = over_layers(arch, dense_layers, moe_layers, lambda moe_layer: (per_layer(moe_layer),))
    return total


def stage_layer_split(arch: ModelArchitecture, pipeline_parallel, layers=None):
    """(dense, MoE) layers on one stage: Megatron's even split (the most loaded stage, `physics.memory`) or,
    for uneven stages, `layers` layers of which as many are MoE as the model has (the stage with the most)."""
    if layers is None:
        moe = base_memory.stage_moe_layers(arch, pipeline_parallel)
        return base_memory.stage_layers(arch, pipeline_parallel) - moe, moe
    moe = minimum(layers, arch.num_moe_layers)
    return layers - moe, moe
