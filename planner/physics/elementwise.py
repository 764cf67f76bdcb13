"""Memory-bound elementwise kernels of a transformer layer (normalisations, residual adds, rotary embedding, the
MLP's activation, dropout masks): their HBM bytes per layer, forward and backward, for a token shape on one GPU.

They do almost no arithmetic, so their time is their bytes over the memory bandwidth while a GEMM's is its FLOPs
over the tensor-core rate; per token a layer's GEMMs grow with hidden^2, these with hidden, and a GPU's dense peak
per byte of HBM differs by generation (H100 295 FLOP/B, A100 153). Training prices them per micro-batch with the
forwards recomputation repeats (`planner.training.elementwise_kernels`, whose docstring gives the counting rules);
a calibration proxy's forward + backward reads `forward_backward_bytes`.

Counted per layer, each tensor read or written once per kernel (fused kernels, as Transformer Engine's, Megatron's
or torch.compile's), in the 16-bit activation dtype; every layer by its own spec (`LayerSpec`: mixer, MLP, rope).
Broadcasts over numpy arrays.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

from planner.arrays import Number, where
from planner.model.architecture import ATTENTION_MIXERS, LayerSpec, ModelArchitecture, sublayer_norm_count, sublayers

# Accesses per element, (forward, backward), of each kernel family (module docstring).
NORM_ACCESSES = (2, 3)
RESIDUAL_ADD_ACCESSES = (3, 3)
ROTARY_ACCESSES = (2, 2)
GATED_ACTIVATION_ACCESSES = (3, 5)
ACTIVATION_ACCESSES = (2, 3)
DROPOUT_MASK_BYTES_PER_ELEMENT = 1.0


@dataclass(frozen=True, slots=True)
class TokenShape:
    """What the kernels' sizes depend on, per micro-batch on one GPU."""

    tokens: Number  # the micro-batch's tokens on this GPU (context parallelism already split)
    tensor_parallel: Number = 1
    sequence_parallel: bool | Number = False
    activation_bytes: float = 2.0
    dropout: bool | Number = False
    load_imbalance: Number = 1.0  # the busiest expert-parallel rank's routed rows over the mean


@dataclass(frozen=True, slots=True)
class LayerBytes:
    """One layer's elementwise HBM bytes in a micro-batch, (forward, backward) per family, so recomputation can
    repeat each on its own: the residual stream's (norms, adds, rotary, dropout masks), its pre-norms', and the
    dense, routed-expert and shared-expert activations'."""

    stream: tuple = (0.0, 0.0)
    pre_norms: tuple = (0.0, 0.0)
    dense_activation: tuple = (0.0, 0.0)
    routed_activation: tuple = (0.0, 0.0)
    shared_activation: tuple = (0.0, 0.0)

    @staticmethod
    def mean(weighted: list[tuple[LayerBytes, int]]) -> LayerBytes:
        """The family-by-family mean of layers given as (bytes, how many such layers); zeros for none."""
        count = sum(n for _, n in weighted)
        if not count:
            return LayerBytes()
        return LayerBytes(
            *(
                tuple(sum(getattr(x, f.name)[i] * n for x, n in weighted) / count for i in (0, 1))
                for f in fields(LayerBytes)
            )
        )


def activation_bytes(rows, width, gated: bool, element_bytes) -> tuple:
    """(forward, backward) bytes of one MLP activation over `rows` x `width`."""
    forward, backward = GATED_ACTIVATION_ACCESSES if gated else ACTIVATION_ACCESSES
    return forward * rows * width * element_bytes, backward * rows * width * element_bytes


def rotary_width(arch: ModelArchitecture, layer: LayerSpec, tensor_parallel):
    """Per token, the q and k elements rotary embedding rewrites on one GPU in `layer`; 0 where it has none."""
    if arch.learned_position_embeddings or not layer.rope or layer.mixer not in ATTENTION_MIXERS:
        return 0.0
    if arch.uses_mla:  # only the decoupled rope dimensions: every q head's and the one shared k
        return arch.num_attention_heads * arch.qk_rope_head_dim / tensor_parallel + arch.qk_rope_head_dim
    heads = arch.num_attention_heads + (layer.num_kv_heads or arch.num_kv_heads)
    return heads * arch.head_dim / tensor_parallel


def layer_bytes(arch: ModelArchitecture, layer: LayerSpec, shape: TokenShape) -> LayerBytes:
    """One layer's elementwise bytes on one GPU (module docstring)."""
    tp, tokens, a = shape.tensor_parallel, shape.tokens, shape.activation_bytes
    hidden = where(shape.sequence_parallel, tokens / tp, tokens) * arch.hidden_size
    branches = sublayers(layer)
    norms = sublayer_norm_count(arch, layer)
    mask = where(shape.dropout, branches * hidden * DROPOUT_MASK_BYTES_PER_ELEMENT, 0.0)
    rope = tokens * rotary_width(arch, layer, tp)
    stream = tuple(
        (n * norms * hidden + r * branches * hidden + q * rope) * a + mask
        for n, r, q in zip(NORM_ACCESSES, RESIDUAL_ADD_ACCESSES, ROTARY_ACCESSES, strict=True)
    )
    pre_norms = tuple(n * min(norms, branches) * hidden * a for n in NORM_ACCESSES)
    if layer.mlp == "dense":
        width = (layer.intermediate_size or arch.intermediate_size) / tp
        return LayerBytes(stream, pre_norms, dense_activation=activation_bytes(tokens, width, arch.mlp_gated, a))
    if layer.mlp == "moe":
        routed_rows = tokens * arch.experts_per_token * shape.load_imbalance
        return LayerBytes(
            stream,
            pre_norms,
            routed_activation=activation_bytes(routed_rows, arch.expert_intermediate_size / tp, arch.experts_gated, a),
            shared_activation=activation_bytes(
                tokens, arch.shared_expert_intermediate_size / tp, arch.experts_gated, a
            ),
        )
    return LayerBytes(stream, pre_norms)


def mean_layer_bytes(arch: ModelArchitecture, shape: TokenShape, moe_layer: bool) -> LayerBytes:
    """`layer_bytes` averaged over the model's MoE layers (`moe_layer`) or its other layers; zeros if none."""
    kinds = Counter(x for x in arch.layers if (x.mlp == "moe") == moe_layer)
    return LayerBytes.mean([(layer_bytes(arch, x, shape), n) for x, n in kinds.items()])


def forward_backward_bytes(arch: ModelArchitecture, shape: TokenShape):
    """Every layer's elementwise bytes, forward and backward, without recomputation or loss: a calibration
    proxy's (`planner.calibration.predict.ProxyGeometry.train_work`)."""
    total = 0.0
    for x, n in Counter(arch.layers).items():
        b = layer_bytes(arch, x, shape)
        families = (b.stream, b.dense_activation, b.routed_activation, b.shared_activation)
        total = total + n * sum(sum(pair) for pair in families)
    return total


__all__ = [
    "LayerBytes",
    "TokenShape",
    "activation_bytes",
    "forward_backward_bytes",
    "layer_bytes",
    "mean_layer_bytes",
    "rotary_width",
]
