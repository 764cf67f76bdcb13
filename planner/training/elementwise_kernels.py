"""The memory-bound kernels of a training micro-batch between its GEMMs and its attention: normalisations, residual
adds, rotary embedding, the MLP's activation and the loss over the vocabulary, at the HBM roofline.

They do almost no arithmetic, so their time is their bytes over the memory bandwidth, while the GEMMs' is their
FLOPs over the tensor-core rate. That ratio is what the flat training efficiency cannot carry from one GPU to
another or from one model width to another: per token a layer's GEMMs grow with hidden^2, these kernels with
hidden, and H100's dense peak per byte of HBM (989 TFLOP/s over 3.35 TB/s, 295 FLOP/B) is 1.9x A100's (312 over
2.04, 153 FLOP/B). A small model on a Hopper or Blackwell GPU spends a larger share of its step here than a large
model on an A100, the setting the training efficiency is stated for (`planner.physics.gemm_efficiency`).

Counted per layer on one GPU, each tensor read or written once per kernel (fused kernels, as Transformer Engine's
and Megatron-core's, or torch.compile's, run them; eager PyTorch moves more, which is not credited here), in the
16-bit activation dtype:

- each of the layer's `norms_per_layer` normalisations: forward reads its input, writes its output (2 x hidden);
  backward reads the input and the output gradient, writes the input gradient (3 x hidden);
- two residual adds: forward reads both operands, writes the sum (3 x hidden each); backward, the residual stream's
  gradient accumulates the branch's (the same 3 x hidden each);
- rotary embedding of q and k (models without learned position tables): read and write each, forward and backward;
- the MLP activation (dense, shared and routed experts): gated (SwiGLU) reads gate and up, writes their product
  (3 x width); backward reads gate, up and the output gradient, writes both gradients (5 x width); an ungated one
  (GeLU, squared ReLU) 2 x width forward, 3 x width backward;
- dropout (where the recipe keeps it): a one-byte mask per residual-add output, written forward, read backward;
- the loss on the last stage: the 16-bit logits read, their gradient written, and the loss kernel's own copies
  (`RecipeInputs.loss_bytes_per_logit`) written and read once, over vocabulary / TP.

Widths follow Megatron's split: the norms and residual adds run over tokens / TP under sequence parallelism and over
all tokens otherwise; q, k and the MLP width are column-split over TP; routed experts see the busiest rank's
tokens x k x `load_imbalance` rows. Recomputation repeats forwards: full recomputation every forward kernel of the
share of layers it recomputes, torchtitan's op-level checkpointing every one (it saves only matmul and attention
outputs), Megatron's selective `layernorm` the norms and `moe_act` / `mlp` / `moe` / `shared_experts` their
activations. Not counted: the router's softmax and top-k over the experts, the embedding lookup and its gradient,
Mamba / linear-attention mixers' scans and convolutions (only their norms and residuals are), the fp32
gradient-accumulation buffers (a weight-gradient GEMM epilogue). Broadcasts over numpy arrays (the sweep).
"""

from __future__ import annotations

from planner.arrays import where
from planner.model.architecture import ModelArchitecture
from planner.physics import roofline
from planner.physics.efficiency import EfficiencyFigures
from planner.training.inputs import TrainingHardware, TrainingInputs
from planner.training.recompute import Recompute

# Accesses per element, (forward, backward), of each kernel family (module docstring).
NORM_ACCESSES = (2, 3)
RESIDUAL_ADD_ACCESSES = (3, 3)
ROTARY_ACCESSES = (2, 2)
GATED_ACTIVATION_ACCESSES = (3, 5)
ACTIVATION_ACCESSES = (2, 3)
RESIDUAL_ADDS_PER_LAYER = 2
DROPOUT_MASK_BYTES_PER_ELEMENT = 1.0


def activation_elements(rows, width, gated: bool) -> tuple:
    """(forward, backward) element accesses of one MLP activation over `rows` x `width`."""
    forward, backward = GATED_ACTIVATION_ACCESSES if gated else ACTIVATION_ACCESSES
    return forward * rows * width, backward * rows * width


def rotary_width(arch: ModelArchitecture, tensor_parallel):
    """Per token, the q and k elements rotary embedding rewrites on one GPU; 0 with learned position tables."""
    if arch.learned_position_embeddings:
        return 0.0
    if arch.uses_mla:  # only the decoupled rope dimensions: every q head's and the one shared k
        return arch.num_attention_heads * arch.qk_rope_head_dim / tensor_parallel + arch.qk_rope_head_dim
    heads = arch.num_attention_heads + arch.num_kv_heads
    return heads * arch.head_dim / tensor_parallel


def layer_elementwise_bytes(arch: ModelArchitecture, inputs: TrainingInputs, moe_layer: bool, load_imbalance):
    """(stream bytes forward, stream bytes backward, activation bytes forward, activation bytes backward, norm bytes
    forward) of one layer's elementwise kernels on one GPU in a micro-batch: the residual stream's (norms, residual
    adds, rotary, dropout masks) apart from the MLP activations', so recomputation can repeat each on its own."""
    lay, a = inputs.layout, inputs.precision.activation
    tp, tokens = lay.tensor_parallel, inputs.tokens_per_microbatch
    stream_tokens = where(lay.sequence_parallel, tokens / tp, tokens)
    hidden = stream_tokens * arch.hidden_size
    norm_f, norm_b = (n * arch.norms_per_layer * hidden for n in NORM_ACCESSES)
    add_f, add_b = (n * RESIDUAL_ADDS_PER_LAYER * hidden for n in RESIDUAL_ADD_ACCESSES)
    rope_f, rope_b = (n * tokens * rotary_width(arch, tp) for n in ROTARY_ACCESSES)
    mask = where(inputs.recipe.dropout, RESIDUAL_ADDS_PER_LAYER * hidden * DROPOUT_MASK_BYTES_PER_ELEMENT, 0.0)
    if moe_layer:
        routed = activation_elements(
            tokens * arch.experts_per_token * load_imbalance, arch.expert_intermediate_size / tp, arch.experts_gated
        )
        shared = activation_elements(tokens, arch.shared_expert_intermediate_size / tp, arch.experts_gated)
        act_f, act_b = routed[0] + shared[0], routed[1] + shared[1]
    else:
        act_f, act_b = activation_elements(tokens, arch.intermediate_size / tp, arch.mlp_gated)
    return (
        (norm_f + add_f + rope_f) * a + mask,
        (norm_b + add_b + rope_b) * a + mask,
        act_f * a,
        act_b * a,
        norm_f * a,
    )


def _activation_recomputed(inputs: TrainingInputs, moe_layer: bool) -> bool:
    """Whether Megatron's selective recomputation repeats this layer's MLP activation."""
    modules = set(inputs.recipe.recompute_modules)
    if moe_layer:
        return bool(modules & {"moe_act", "moe", "shared_experts"})
    return "mlp" in modules


def stage_elementwise_bytes(arch: ModelArchitecture, inputs: TrainingInputs, flops, vocab_size=None):
    """HBM bytes of a micro-batch's elementwise kernels on one GPU of the last stage (`flops`: the step's
    `TrainingFlops`): its dense and MoE layers with the forwards recomputation repeats, and the loss."""
    recipe = inputs.recipe
    full = where(recipe.recompute == Recompute.FULL, flops.recompute_fraction, 0.0)
    every_forward_again = where(recipe.recompute == Recompute.OP, 1.0, full)
    selective = recipe.recompute == Recompute.SELECTIVE
    norms_again = where(selective & ("layernorm" in recipe.recompute_modules), 1.0, 0.0)
    total = 0.0
    parts = [(False, flops.stage_layers - flops.stage_moe_layers)]
    if arch.num_moe_layers:
        parts.append((True, flops.stage_moe_layers))
    for moe_layer, layers in parts:
        stream_f, stream_b, act_f, act_b, norm_f = layer_elementwise_bytes(
            arch, inputs, moe_layer, flops.expert_load_imbalance
        )
        act_again = where(selective & _activation_recomputed(inputs, moe_layer), 1.0, every_forward_again)
        layer = (
            stream_f * (1.0 + every_forward_again) + stream_b + norm_f * norms_again + act_f * (1.0 + act_again) + act_b
        )
        total = total + layers * layer
    vocab = arch.vocab_size if vocab_size is None else vocab_size
    logits = inputs.tokens_per_microbatch * vocab / inputs.layout.tensor_parallel
    loss = logits * 2.0 * (inputs.precision.activation + recipe.loss_bytes_per_logit)
    return total + loss


def elementwise_seconds(
    arch: ModelArchitecture, hw: TrainingHardware, efficiency: EfficiencyFigures, inputs: TrainingInputs, flops
):
    """Seconds of a micro-batch's elementwise kernels on the last stage at the memory roofline
    (`stage_elementwise_bytes`)."""
    return roofline.memory_seconds(
        stage_elementwise_bytes(arch, inputs, flops), hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth
    )


__all__ = ["elementwise_seconds", "layer_elementwise_bytes", "rotary_width", "stage_elementwise_bytes"]
