"""Micro-batch compute priced by named kernels at their published rates instead of the flat training efficiency
(`Efficiency.training_compute`): a named fused-attention kernel (`planner.physics.attention_efficiency`) and the
routed experts' grouped GEMMs, MXFP8 or 16-bit (`planner.physics.grouped_gemm_training`). Each returns (FLOPs taken
out of the flat-efficiency compute, their seconds), zeros where no figure applies; `fp8_equivalent_flops` states what
stays in the flat compute in units of the 16-bit peak. Beside them, memory-bound kernels at the HBM roofline: the MoE
token-permutation copies a dense layer does not have (`routed_token_copy_seconds`) and an FP8 recipe's casts
(`fp8_cast_seconds`). Broadcasts over numpy arrays."""

from __future__ import annotations

from planner.arrays import maximum, where
from planner.model.architecture import ModelArchitecture
from planner.physics import fp8_casts, grouped_gemm_training, roofline
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.projections import layer_matrices, local_shape
from planner.training.inputs import TrainingHardware, TrainingInputs
from planner.training.recompute import recomputed_forwards


def routed_expert_grouped_gemms(
    arch: ModelArchitecture,
    hw: TrainingHardware,
    inputs: TrainingInputs,
    stage_moe_layers,
    forward_passes,
    load_imbalance,
):
    """(FLOPs taken out of the flat-efficiency compute, their seconds) for a micro-batch's routed-expert grouped GEMMs
    at a published grouped-GEMM rate (`physics.grouped_gemm_training`): per MoE layer of the stage the fused gate/up
    GEMM (K = hidden, N = the column-split experts' outputs / TP) and the down GEMM (K = its input / TP, N = hidden),
    over tokens x k x `load_imbalance` (the busiest rank's) rows and the rank's experts / EP, in `forward_passes`
    forwards (recomputation included) and both gradients. Under an MXFP8 recipe on Blackwell
    (`hw.mxfp8_grouped_gemm_flops_per_second` > 0) at the MXFP8 kernels' rates with their quantization and
    scale-layout kernels; under a 16-bit recipe (`hw.bf16_grouped_gemm_flops_per_second` > 0) at the BF16 grouped
    rate; (0, 0) otherwise (FP8 with delayed or current scaling), the experts then staying in the flat compute."""
    if not arch.num_moe_layers:
        return 0.0, 0.0
    lay = inputs.layout
    tp = lay.tensor_parallel
    experts = [m for m in layer_matrices(arch, True) if m.expert]
    column = [m for m in experts if m.split == "column"]
    row = [m for m in experts if m.split == "row"]
    shapes = [(sum(m.d_out for m in column) / tp, arch.hidden_size)] + [(m.d_out, m.d_in / tp) for m in row]
    rows = inputs.tokens_per_microbatch * arch.experts_per_token * load_imbalance
    groups = arch.num_experts / lay.expert_parallel
    mxfp8_rate, bf16_rate = hw.mxfp8_grouped_gemm_flops_per_second, hw.bf16_grouped_gemm_flops_per_second
    mxfp8, bf16, expert_flops = 0.0, 0.0, 0.0
    for n, k in shapes:
        mxfp8 = (
            mxfp8
            + grouped_gemm_training.mxfp8_grouped_gemm_time(
                rows, n, k, groups, forward_passes, maximum(mxfp8_rate, 1.0), hw.bandwidth_bytes_per_second
            ).total_seconds
        )
        bf16 = bf16 + grouped_gemm_training.bf16_grouped_gemm_seconds(
            rows, n, k, forward_passes, maximum(bf16_rate, 1.0)
        )
        expert_flops = expert_flops + 2.0 * rows * n * k * (forward_passes + 2)
    seconds = where(mxfp8_rate > 0, mxfp8, where(bf16_rate > 0, bf16, 0.0))
    applies = (mxfp8_rate > 0) | (bf16_rate > 0)
    return where(applies, stage_moe_layers * expert_flops, 0.0), stage_moe_layers * seconds


def routed_token_copy_bytes(arch: ModelArchitecture, inputs: TrainingInputs, forward_passes, load_imbalance):
    """HBM bytes one MoE layer's token permutation moves on one GPU in a micro-batch. Megatron-core's all-to-all
    dispatcher (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher; kernels in
    moe_utils.py, fused by Transformer Engine with moe_permute_fusion) copies every token into its k expert slots
    before the all-to-all (permute: read 1, write k rows), re-sorts the received rows by local expert when the rank
    holds more than one (sort_chunks_by_idxs: read and write k rows), and after the experts undoes both (unsort; then
    unpermute: read k, write 1, weighted by the router's probabilities). Each backward pass moves the same rows in
    reverse. Rows are hidden-wide in the 16-bit activation dtype; the received side carries the busiest rank's
    `load_imbalance`; permute and unpermute see this rank's tokens / TP (sequence parallel)."""
    lay = inputs.layout
    k, row_bytes = arch.experts_per_token, arch.hidden_size * inputs.precision.activation
    local_tokens = inputs.tokens_per_microbatch / lay.tensor_parallel
    permute_and_unpermute = 2 * (1 + k) * local_tokens
    sort_and_unsort = where(arch.num_experts / lay.expert_parallel > 1, 4 * k * inputs.tokens_per_microbatch, 0.0)
    rows = permute_and_unpermute + sort_and_unsort * load_imbalance
    return rows * row_bytes * (forward_passes + 1)


def routed_token_copy_seconds(
    arch: ModelArchitecture,
    hw: TrainingHardware,
    efficiency: EfficiencyFigures,
    inputs: TrainingInputs,
    stage_moe_layers,
    forward_passes,
    load_imbalance,
):
    """Seconds of a micro-batch's MoE token permutation (`routed_token_copy_bytes` over the stage's MoE layers) at
    the HBM roofline: copies with no FLOPs, which the flat training efficiency, measured on dense models, does not
    contain. 0 for a dense model."""
    if not arch.num_moe_layers:
        return 0.0
    copied = stage_moe_layers * routed_token_copy_bytes(arch, inputs, forward_passes, load_imbalance)
    return roofline.memory_seconds(copied, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth)


def fp8_cast_elements(arch: ModelArchitecture, inputs: TrainingInputs, moe_layer: bool, routed: bool, load_imbalance):
    """(input elements cast per forward, output-gradient elements per backward, weight elements) of one layer's FP8
    GEMMs on one GPU (`physics.fp8_casts`): its routed experts' (`routed`) or the rest's. Megatron's fused modules
    cast each input once: q/k/v read one input (linear_qkv), gate/up another (linear_fc1); each GEMM's output
    gradient is cast in the backward. Routed experts see tokens x k x `load_imbalance` rows over the rank's experts;
    the router stays in 16 bits."""
    lay = inputs.layout
    tokens = inputs.tokens_per_microbatch
    inputs_seen: set[tuple] = set()
    forward, backward, weights = 0.0, 0.0, 0.0
    for m in layer_matrices(arch, moe_layer):
        if m.module == "router" or m.expert != routed:
            continue
        d_in, d_out, copies = local_shape(m, arch, lay.tensor_parallel, lay.expert_parallel)
        rows = tokens * arch.experts_per_token * load_imbalance if m.expert else tokens * m.count
        key = (m.module in ("q", "k", "v", "o"), m.d_in, m.module in ("o", "down"))
        if key not in inputs_seen:
            inputs_seen.add(key)
            forward = forward + rows * d_in
        backward = backward + rows * d_out
        weights = weights + d_in * d_out * copies
    return forward, backward, weights


def fp8_cast_seconds(arch: ModelArchitecture, hw: TrainingHardware, efficiency: EfficiencyFigures, inputs, flops):
    """Seconds of a micro-batch's FP8 casts on the stage (`physics.fp8_casts`): each layer's inputs once per forward
    (recomputation repeats them), its output gradients once, its weights once per step; the routed experts' only
    where no MXFP8 grouped-GEMM term prices them (`routed_expert_grouped_gemms`); 0 without an FP8 recipe or FP8
    GEMMs. `flops` is the step's `TrainingFlops` (the stage's layers, the experts' forward passes, load imbalance)."""
    per_element = inputs.recipe.fp8_cast_bytes_per_element
    dense_passes = 1.0 + recomputed_forwards(inputs.recipe.recompute, flops.recompute_fraction)
    moe_layers = flops.stage_moe_layers
    experts_here = where(hw.mxfp8_grouped_gemm_flops_per_second > 0, 0.0, 1.0)
    parts = [(False, False, flops.stage_layers - moe_layers, dense_passes, 1.0)]
    if arch.num_moe_layers:
        parts += [
            (True, False, moe_layers, dense_passes, 1.0),
            (True, True, moe_layers, flops.routed_expert_forward_passes, experts_here),
        ]
    activations, weights = 0.0, 0.0
    for moe_layer, routed, layers, passes, share in parts:
        forward, backward, layer_weights = fp8_cast_elements(
            arch, inputs, moe_layer, routed, flops.expert_load_imbalance
        )
        activations = activations + share * layers * (forward * passes + backward)
        weights = weights + share * layers * layer_weights
    seconds = fp8_casts.cast_seconds(
        activations,
        weights,
        inputs.microbatches,
        per_element,
        hw.bandwidth_bytes_per_second,
        efficiency.memory_bandwidth,
    )
    fp8_gemms = hw.gemm_peak_flops_per_second > hw.peak_flops_per_second  # not on a GPU without FP8 tensor cores
    return where((per_element > 0) & fp8_gemms, seconds, 0.0)


def named_kernel_attention(hw: TrainingHardware, attention_flops):
    """(FLOPs taken out of the flat-efficiency compute, their seconds) for a micro-batch's softmax attention: at the
    named fused kernel's published rate on this GPU (`hw.attention_efficiency`, `physics.attention_efficiency`)
    where there is one; (0, 0) otherwise, the attention then staying in the flat-efficiency compute as before."""
    named = hw.attention_efficiency > 0
    seconds = attention_flops / (hw.peak_flops_per_second * maximum(hw.attention_efficiency, 1e-9))
    return where(named, attention_flops, 0.0), where(named, seconds, 0.0)


def fp8_equivalent_flops(stage_flops, gemm_flops, hw: TrainingHardware):
    """The stage's FLOPs in units of the 16-bit peak: the layer GEMMs run at `gemm_peak_flops_per_second` (the FP8
    peak with an FP8 recipe) x their format's MAMF share over the 16-bit one's (`gemm_format_ceiling_ratio`,
    planner.physics.gemm_efficiency), so they count peak / (gemm_peak x that ratio) of their FLOPs; everything else
    (attention, head) counts whole. Equal to `stage_flops` when the GEMM peak is the peak (every recipe but FP8, or
    a GPU without FP8 tensor cores)."""
    gemm_rate = hw.gemm_peak_flops_per_second * hw.gemm_format_ceiling_ratio
    return stage_flops - gemm_flops * (1 - hw.peak_flops_per_second / gemm_rate)
