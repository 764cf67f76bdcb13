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

- each of the layer's hidden-size norms (`norms_per_layer`, half of them in a block with only a mixer or only an
  MLP, as Nemotron-H's): forward reads its input, writes its output (2 x hidden); backward reads the input and the
  output gradient, writes the input gradient (3 x hidden);
- one residual add per branch (mixer, MLP): forward reads both operands, writes the sum (3 x hidden each);
  backward, the residual stream's gradient accumulates the branch's (the same 3 x hidden each);
- rotary embedding of q and k in softmax-attention layers that use it (not NoPE layers, not models with learned
  position tables): read and write each, forward and backward; partial rotary counted whole;
- the MLP activation (dense, shared and routed experts; none in a block without an MLP): gated (SwiGLU) reads gate
  and up, writes their product (3 x width); backward reads gate, up and the output gradient, writes both
  gradients (5 x width); an ungated one (GeLU, squared ReLU) 2 x width forward, 3 x width backward;
- dropout (where the recipe keeps it): a one-byte mask per residual-add output, written forward, read backward;
- the loss on the last stage: the 16-bit logits read, their gradient written, and the loss kernel's own copies
  (`RecipeInputs.loss_bytes_per_logit`) written and read once, over vocabulary / TP.

Widths follow Megatron's split: the norms and residual adds run over tokens / TP under sequence parallelism and over
all tokens otherwise; q, k and the MLP width are column-split over TP; routed experts see the busiest rank's
tokens x k x `load_imbalance` rows. Recomputation repeats forwards: full recomputation every forward kernel of the
share of layers it recomputes, torchtitan's op-level checkpointing every one but the routed experts' (it saves
matmul, attention and expert outputs), Megatron's selective `layernorm` each branch's pre-norm, `mlp` the dense
activation, `moe_act` the routed experts', `shared_experts` the shared experts', `moe` both. Not counted: the
router's softmax and top-k, q/k norms, the embedding lookup and its gradient, Mamba / linear-attention mixers'
scans and convolutions (only their norms and residuals are), the fp32 gradient-accumulation buffers (a
weight-gradient GEMM epilogue). Layers are averaged by kind (the stage's dense and MoE layers, as the rest of the
step counts them). Broadcasts over numpy arrays (the sweep).
"""

from __future__ import annotations

from planner.arrays import where
from planner.model.architecture import ModelArchitecture
from planner.physics import roofline
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.elementwise import LayerBytes, TokenShape, mean_layer_bytes
from planner.training.inputs import TrainingHardware, TrainingInputs
from planner.training.recompute import Recompute, recomputed_forwards


def token_shape(inputs: TrainingInputs, load_imbalance) -> TokenShape:
    """The micro-batch's token shape on one GPU (`physics.elementwise.TokenShape`)."""
    lay = inputs.layout
    return TokenShape(
        inputs.tokens_per_microbatch,
        lay.tensor_parallel,
        lay.sequence_parallel,
        inputs.precision.activation,
        inputs.recipe.dropout,
        load_imbalance,
    )


def _again(recipe, every_forward_again, *modules: str, op_repeats: bool = True):
    """How many more times recomputation runs a kernel family's forward: once where a named selective module
    covers it, else the full / op-level share (op-level only where `op_repeats`)."""
    selective = recipe.recompute == Recompute.SELECTIVE
    named = bool(set(modules) & set(recipe.recompute_modules))
    base = every_forward_again if op_repeats else where(recipe.recompute == Recompute.OP, 0.0, every_forward_again)
    return where(selective, 1.0 if named else 0.0, base)


def stage_elementwise_bytes(arch: ModelArchitecture, inputs: TrainingInputs, flops, vocab_size=None):
    """HBM bytes of a micro-batch's elementwise kernels on one GPU of the last stage (`flops`: the step's
    `TrainingFlops`): its dense and MoE layers with the forwards recomputation repeats, and the loss."""
    recipe = inputs.recipe
    full = recomputed_forwards(recipe.recompute, flops.recompute_fraction)
    every_forward_again = where(recipe.recompute == Recompute.OP, 1.0, full)
    shape = token_shape(inputs, flops.expert_load_imbalance)
    total = 0.0
    for moe_layer, layers in ((False, flops.stage_layers - flops.stage_moe_layers), (True, flops.stage_moe_layers)):
        if moe_layer and not arch.num_moe_layers:
            continue
        b = mean_layer_bytes(arch, shape, moe_layer)
        activations = (
            (b.dense_activation, _again(recipe, every_forward_again, "mlp")),
            (b.routed_activation, _again(recipe, every_forward_again, "moe_act", "moe", op_repeats=False)),
            (b.shared_activation, _again(recipe, every_forward_again, "shared_experts", "moe")),
        )
        layer = b.stream[0] * (1.0 + every_forward_again) + b.stream[1]
        layer = layer + b.pre_norms[0] * _again(recipe, 0.0, "layernorm")
        for (forward, backward), again in activations:
            layer = layer + forward * (1.0 + again) + backward
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


__all__ = ["LayerBytes", "elementwise_seconds", "stage_elementwise_bytes", "token_shape"]
