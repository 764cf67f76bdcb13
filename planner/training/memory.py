"""Training memory terms, one function each.

Scope of every term: one GPU on one pipeline stage (the caller evaluates the first and the last stage
and keeps the larger total: the first holds the most in-flight micro-batches, the last the output
head and the logits). Scenario numbers (tensor_parallel, micro-batch, bytes per element, flags, ...)
may be Python numbers or numpy arrays of one shape; the model (`ModelArchitecture`,
`ParameterCounts`) is fixed. Flags are 0/1 (or bools); `recompute` is a `Recompute` level (or
an array of them). Memory is bytes; counts are elements.

Sources: ZeRO (Rajbhandari et al. 2020, Sec. 3 and Fig. 1) for model states; Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", Sec. 4, Table 2, Eq. 5) for
activations; Dettmers et al. 2023 (QLoRA, Sec. 3) for NF4 storage; bitsandbytes for 8-bit Adam.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from planner.arrays import Flag, Number, maximum, minimum, where
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as base_memory
from planner.training.recompute import Recompute

# ---------------------------------------------------------------------------------------------
# number formats


@dataclass(frozen=True)
class PrecisionBytes:
    """Bytes per element of each model-state tensor under one precision recipe."""

    param: float  # working parameters the forward pass reads
    grad: float  # gradients autograd writes
    master: float  # fp32 master copy the optimizer updates (0 when the parameters are the master)
    state: float  # optimizer moments
    activation: float  # saved activations (16-bit tensors; fp32 statistics are counted separately)
    compute_dtype: str  # tensor-core format of the matmuls (FP8 recipes: of everything but the layers' GEMMs)
    description: str
    gemm_dtype: str | None = None  # format of the transformer layers' GEMMs; None: compute_dtype
    gemm_weight_copy: float = 0.0  # extra bytes per layer GEMM weight element (TE's FP8 copy and its transpose)
    gemm_input_activation: float | None = None  # bytes of a saved GEMM input (TE keeps it in FP8); None: activation


PRECISIONS: dict[str, PrecisionBytes] = {
    "mixed_bf16": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "bf16",
        "bf16 parameters and gradients, fp32 master weights and "
        "optimizer state (Megatron, DeepSpeed bf16; ZeRO's K = 12 for Adam)",
    ),
    "mixed_fp16": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "fp16",
        "fp16 parameters and gradients with loss scaling, fp32 "
        "master weights and optimizer state (ZeRO paper, Megatron-LM 2021)",
    ),
    "amp_bf16": PrecisionBytes(
        4,
        4,
        0,
        4,
        2,
        "bf16",
        "fp32 parameters, gradients and optimizer state, matmuls autocast to bf16 (PyTorch AMP, HF Trainer bf16=True)",
    ),
    "bf16": PrecisionBytes(
        2, 2, 0, 2, 2, "bf16", "pure bf16: parameters, gradients and optimizer state in bf16, no master copy"
    ),
    "fp32": PrecisionBytes(4, 4, 0, 4, 4, "fp32", "everything in fp32"),
    # Transformer Engine FP8 (Micikevicius et al. 2022; TE recipes DelayedScaling / Float8CurrentScaling with
    # Format.HYBRID: E4M3 forward, E5M2 gradients): model states as mixed_bf16; every layer GEMM runs in FP8
    # from an FP8 copy of its weight (row-wise for the forward, column-wise/transposed for the data gradient on
    # Hopper), cached across the micro-batches of a step (TE `is_first_microbatch`); the inputs TE's Linear /
    # LayerNormLinear save for the weight gradient are kept in FP8.
    "fp8": PrecisionBytes(
        2,
        2,
        4,
        4,
        2,
        "bf16",
        "Transformer Engine FP8 (hybrid E4M3/E5M2): bf16 parameters and gradients, fp32 master weights and optimizer "
        "state as mixed_bf16; layer GEMMs in FP8 from a cached FP8 weight copy and its transpose (2 B per GEMM "
        "weight); GEMM inputs saved for backward in FP8; attention, norms, embedding and output head in bf16",
        gemm_dtype="fp8",
        gemm_weight_copy=2.0,
        gemm_input_activation=1.0,
    ),
}

# bitsandbytes 8-bit optimizers: uint8 states quantized block-wise (256 values) with one fp32 absmax per block.
ADAM8BIT_BLOCK = 256
# QLoRA NF4: 64-weight blocks; double quantization stores the block scales in 8 bits with one fp32 scale
# per 256 blocks (Dettmers et al. 2023, Sec. 3: 0.127 bits/parameter of scales instead of 0.5).
NF4_BLOCK = 64
NF4_DOUBLE_QUANT_BLOCK = 256


def nf4_bytes_per_element(double_quantization=True):
    """Storage of one NF4 weight: 4 bits plus its block scale (fp32 per 64, or 8-bit per 64 plus fp32 per
    64 x 256 with double quantization). QLoRA Sec. 3."""
    scales = where(double_quantization, 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DOUBLE_QUANT_BLOCK), 4 / NF4_BLOCK)
    return 0.5 + scales


def optimizer_state_bytes_per_element(optimizer: str, state_bytes):
    """Optimizer moments per trainable element, master copy excluded (None: factored, see Adafactor).

    AdamW: m and v (Loshchilov & Hutter); 8-bit Adam: two uint8 states + an fp32 absmax per 256-value
    block (bitsandbytes blockwise); SGD with momentum: one buffer; plain SGD: none (torch.optim.SGD
    keeps no state without momentum).
    """
    per_element = {
        "adamw": 2 * state_bytes,
        "adam8bit": 2 * (1 + 4 / ADAM8BIT_BLOCK) + 0 * state_bytes,
        "sgd": 0 * state_bytes,
        "sgd_momentum": 1 * state_bytes,
    }
    return per_element.get(optimizer)


# ---------------------------------------------------------------------------------------------
# parameter geometry on one GPU


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

    def mlp(width: int, expert: bool, count: int = 1) -> None:
        if arch.mlp_gated or expert:
            out.append(Matrix("gate", h, width, "column", expert, count))
        out.append(Matrix("up", h, width, "column", expert, count))
        out.append(Matrix("down", width, h, "row", expert, count))

    if moe_layer:
        mlp(arch.expert_intermediate_size, True, arch.num_experts)
        if arch.shared_expert_intermediate_size:
            # Shared experts are gated SwiGLU MLPs in every supported MoE family.
            width = arch.shared_expert_intermediate_size
            out += [
                Matrix("gate", h, width, "column"),
                Matrix("up", h, width, "column"),
                Matrix("down", width, h, "row"),
            ]
        out.append(Matrix("router", h, arch.num_experts, "none"))
    else:
        mlp(arch.intermediate_size, False)
    return out


def _local_shape(m: Matrix, arch: ModelArchitecture, tensor_parallel, expert_parallel):
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


_last_layers_only: tuple[ParameterCounts | None, ParameterCounts | None] = (None, None)


def _layers_only(counts: ParameterCounts) -> ParameterCounts:
    """The counts without embedding, head, final norm and vision tower. One plan asks a dozen times for the
    same counts object, and `replace` re-runs `__init__` over every field, so the last answer is kept (by
    identity: the counts are frozen; one tuple, read and written whole, so threads never see a mixed pair)."""
    global _last_layers_only
    seen, layers = _last_layers_only
    if seen is counts and layers is not None:
        return layers
    layers = dataclasses.replace(counts, embedding=0, position_embedding=0, lm_head=0, final_norms=0, vision_encoder=0)
    _last_layers_only = (counts, layers)
    return layers


def uneven_stage_layers(num_layers, pipeline_parallel, first_stage_layers, last_stage_layers):
    """(first, middle, last) stage layers with uneven stages (Megatron `--decoder-first-pipeline-num-layers` /
    `--decoder-last-pipeline-num-layers`: the stages not named split the rest evenly); None for the even split."""
    first, last = first_stage_layers, last_stage_layers
    if first is None and last is None:
        return None
    given = (first is not None) + (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    middle = rest / maximum(pipeline_parallel - given, 1)
    return (middle if first is None else first), middle, (middle if last is None else last)


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


def stage_layer_parameter_bytes(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    linear_bytes_per_element: Number,
    other_bytes_per_element: Number,
    layers=None,
):
    """Bytes of the transformer layers' parameters on one GPU of the most loaded stage, the linear layers at
    `linear_bytes_per_element` and norms and biases at `other_bytes_per_element`. Reuses
    `planner.memory.weight_bytes` with the embedding and head removed; routed experts are split over TP x EP
    (Megatron-core expert-TP = TP). `layers`: a stage of that many layers (uneven stages), priced per layer kind."""

    def weights(stages):
        return base_memory.weight_bytes(
            _layers_only(counts),
            arch,
            tensor_parallel,
            stages,
            tensor_parallel * expert_parallel,
            linear_bytes_per_element,
            other_bytes_per_element,
            other_bytes_per_element,
        )

    if layers is None:
        return weights(pipeline_parallel)
    one = weights(arch.num_layers)  # one layer: a MoE layer when the model has any
    dense_layers, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    if not arch.is_moe:
        return layers * one
    dense_one = (weights(1) - arch.num_moe_layers * one) / arch.num_dense_layers if arch.num_dense_layers else 0.0
    return moe_layers * one + dense_layers * dense_one


def stage_layer_parameter_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Parameters (elements) of the transformer layers on one GPU of the most loaded stage: `stage_layer_parameter_bytes`
    at one byte per element."""
    return stage_layer_parameter_bytes(
        counts, arch, tensor_parallel, pipeline_parallel, expert_parallel, 1.0, 1.0, layers
    )


def stage_expert_parameter_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Routed-expert parameters on one GPU of the stage with the most MoE layers (they shard over the
    expert-data-parallel group, DP / EP, instead of DP)."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    _, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    return moe_layers * routed / (tensor_parallel * expert_parallel)


def stage_gemm_weight_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Elements of the layers' GEMM weights (attention projections, MLP and expert matrices; not norms, biases or
    routers) on one GPU of the stage: what Transformer Engine keeps FP8 copies of."""

    def per_layer(moe_layer: bool):
        total = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module == "router":
                continue
            d_in, d_out, copies = _local_shape(m, arch, tensor_parallel, expert_parallel)
            total = total + copies * d_in * d_out
        return total

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


def edge_parameter_elements(counts: ParameterCounts, tensor_parallel, pipeline_parallel, first_stage: bool):
    """Embedding (first stage) or output head and final norm (last stage) on one GPU; vocabulary-parallel
    over TP. With one stage both live together and a tied head is the embedding itself; with PP > 1 the
    last stage keeps its own copy of a tied head (Megatron). A multimodal checkpoint's vision tower sits
    with the embedding, split across TP (as `physics.memory.weight_bytes` places it)."""
    embedding = (counts.embedding + counts.vision_encoder) / tensor_parallel + counts.position_embedding
    head_matrix = (counts.lm_head if counts.lm_head else counts.embedding) / tensor_parallel
    head = head_matrix + counts.final_norms
    tied_copy = head_matrix if counts.lm_head == 0 else 0.0
    single = embedding + head - tied_copy
    own = embedding if first_stage else head
    return where(pipeline_parallel > 1, own, single)


def lora_adapter_elements(
    arch: ModelArchitecture,
    rank,
    target_modules,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    experts_only=False,
    layers=None,
):
    """LoRA adapter parameters (A: r x d_in, B: d_out x r per targeted projection) on one GPU of the most
    loaded stage. Column-parallel projections keep A whole and split B; row-parallel ones split A and keep
    B whole (PEFT/Megatron LoRA layout). MLP targets apply to every expert. `experts_only` counts only the
    routed-expert adapters (they shard over DP / EP)."""
    targets = set(target_modules)

    def per_layer(moe_layer: bool):
        total = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module not in targets or (experts_only and not m.expert):
                continue
            d_in, d_out, copies = _local_shape(m, arch, tensor_parallel, expert_parallel)
            total = total + copies * rank * (d_in + d_out)
        return total

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


def adafactor_state_elements(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    first_stage: bool,
    layers=None,
    edges: bool = True,
):
    """Adafactor's factored second moment on one GPU (Shazeer & Stern 2018; torch.optim.Adafactor):
    a row and a column vector (d_out + d_in) per matrix, a full vector per bias/norm; no first moment. With LoRA:
    `lora_adafactor_state_elements`."""
    t, ep = tensor_parallel, expert_parallel

    def per_layer(moe_layer: bool):
        matrices = 0.0
        for m in layer_matrices(arch, moe_layer):
            d_in, d_out, copies = _local_shape(m, arch, t, ep)
            matrices = matrices + copies * (d_in + d_out)
        layer = counts.moe_layer if moe_layer and counts.moe_layer is not None else counts.dense_layer
        vectors = (
            layer.norms + (layer.attention_bias + layer.mlp_bias) / t + layer.attention_out_bias + layer.mlp_out_bias
        )
        return matrices + vectors

    total = stage_layers_total(arch, pipeline_parallel, layers, per_layer)
    if edges:
        h = arch.hidden_size
        embedding = (arch.vocab_size / t + h) + (
            arch.learned_position_embeddings + h if counts.position_embedding else 0
        )
        head = (arch.vocab_size / t + h) + counts.final_norms
        tied = counts.lm_head == 0
        single = embedding + head - where(tied, arch.vocab_size / t + h, 0)
        total = total + where(pipeline_parallel > 1, embedding if first_stage else head, single)
    return total


def lora_adafactor_state_elements(
    arch: ModelArchitecture, rank, target_modules, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Adafactor's factored states of the LoRA adapters on one GPU: A (r + d_in) and B (d_out + r) of every
    targeted projection (`adafactor_state_elements` for the full model)."""
    t, ep = tensor_parallel, expert_parallel

    def per_layer(moe_layer: bool):
        matrices = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module in target_modules:
                d_in, d_out, copies = _local_shape(m, arch, t, ep)
                matrices = matrices + copies * (d_in + d_out + 2 * rank)
        return matrices

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


# ---------------------------------------------------------------------------------------------
# model states (ZeRO Sec. 3: parameters, gradients, optimizer states)


def zero_shards(zero_stage, group, from_stage):
    """Ways a model state is split by ZeRO: over the data-parallel `group` once `zero_stage` reaches
    `from_stage` (optimizer states: 1, gradients: 2, parameters: 3), else not at all."""
    return where(zero_stage >= from_stage, group, 1)


def weights_bytes(dense_bytes, expert_bytes, zero_stage, dense_group, expert_group, offload_parameters: Flag = False):
    """Parameters resident on one GPU: this GPU's TP/PP/EP shard (`dense_bytes`, `expert_bytes`, already in
    the parameter dtype), further split over the data-parallel group by ZeRO-3 / FSDP full-shard.
    Offloaded parameters live in host RAM (ZeRO-Infinity). ZeRO Fig. 1: 2 Psi (DDP) -> 2 Psi / Nd (P_os+g+p)."""
    resident = dense_bytes / zero_shards(zero_stage, dense_group, 3) + expert_bytes / zero_shards(
        zero_stage, expert_group, 3
    )
    return where(offload_parameters, 0.0, resident)


def gradients_bytes(dense_bytes, expert_bytes, zero_stage, dense_group, expert_group):
    """Gradients of the trainable parameters on one GPU, split by ZeRO-2/3 (FSDP shard-grad-op/full-shard).
    ZeRO Fig. 1: 2 Psi (DDP, ZeRO-1) -> 2 Psi / Nd (P_os+g)."""
    return dense_bytes / zero_shards(zero_stage, dense_group, 2) + expert_bytes / zero_shards(
        zero_stage, expert_group, 2
    )


def gradient_accumulation_bytes(
    dense_elements, expert_elements, zero_stage, dense_group, expert_group, enabled, grad_bytes
):
    """An fp32 buffer that accumulates micro-batch gradients next to 16-bit gradients (DeepSpeed's bf16
    optimizer, `grad_accumulation_fp32`), sharded like the gradients. Zero when off or when the gradients
    are fp32 already (accumulating in `.grad` itself needs no extra memory)."""
    needed = where(enabled, where(grad_bytes < 4, 1.0, 0.0), 0.0)
    return (
        needed
        * 4
        * (
            dense_elements / zero_shards(zero_stage, dense_group, 2)
            + expert_elements / zero_shards(zero_stage, expert_group, 2)
        )
    )


def optimizer_states_bytes(
    dense_state_bytes, expert_state_bytes, zero_stage, dense_group, expert_group, offload_optimizer: Flag = False
):
    """Optimizer state on one GPU, fp32 master weights included (ZeRO's K: 12 bytes per parameter for
    mixed-precision Adam), split by ZeRO-1 and up (Megatron's distributed optimizer is ZeRO-1). Offloaded
    state lives in host RAM (ZeRO-Offload). ZeRO Fig. 1: K Psi -> K Psi / Nd."""
    resident = dense_state_bytes / zero_shards(zero_stage, dense_group, 1) + expert_state_bytes / zero_shards(
        zero_stage, expert_group, 1
    )
    return where(offload_optimizer, 0.0, resident)


def sharding_buffer_bytes(zero_stage, dense_group, unit_param_bytes, layer_param_bytes, unit_grad_bytes):
    """Transient buffers of sharded data parallelism on one GPU. ZeRO-3 / FSDP full-shard: the gathered
    parameters of the unit being computed (`unit_param_bytes`: the largest unit, a transformer layer or the
    embedding/head matrix) plus the next layer being prefetched (`layer_param_bytes`), and the unsharded
    gradients of one unit before its reduce-scatter; ZeRO-2: that gradient unit only. Nothing is gathered
    when the group is a single GPU. DDP's 25 MB buckets and NCCL staging are left to the runtime overhead."""
    sharded = where(dense_group > 1, 1.0, 0.0)
    zero3 = unit_param_bytes + layer_param_bytes + unit_grad_bytes
    return sharded * where(zero_stage >= 3, zero3, where(zero_stage == 2, unit_grad_bytes, 0.0))


# ---------------------------------------------------------------------------------------------
# activations (Korthikanti et al. 2022)


@dataclass(frozen=True)
class LayerActivationTerms:
    """Per-token bytes one layer saves for backward under each recomputation level, on one GPU. `none` is
    everything (score matrix included); `selective` what Megatron-core's modules leave; `op` what torchtitan's
    op-level policy saves; `full` the layer input only. See `layer_activation_terms`."""

    none: Number
    selective: Number
    op: Number
    full: Number

    def stored(self, recompute):
        """The bytes kept at the `recompute` level."""
        return where(
            recompute == Recompute.FULL,
            self.full,
            where(
                recompute == Recompute.OP, self.op, where(recompute == Recompute.SELECTIVE, self.selective, self.none)
            ),
        )

    def rebuilt(self, recompute):
        """What recomputation rebuilds while this layer's backward runs: everything less what `recompute` keeps
        (zero without recomputation). Korthikanti et al. leave this transient out of Table 2; the plan adds one
        layer of it (for one micro-batch) to the peak."""
        return self.none - self.stored(recompute)


def _op_matmul_order(arch: ModelArchitecture, moe_layer: bool) -> list[Matrix]:
    """The layer's matmuls in forward order as torchtitan's op-level policy sees them: q, k, v, o, then the dense
    MLP's projections; a MoE layer's expert block is kept whole, so only its attention matmuls."""
    return [m for m in layer_matrices(arch, moe_layer) if not moe_layer or m.module in ("q", "k", "v", "o")]


def _op_saved_matrices(arch: ModelArchitecture, moe_layer: bool) -> list[Matrix]:
    """The projections whose outputs torchtitan's op-level policy saves: the layer's matmuls in forward order
    (q, k, v, o, then the dense MLP's gate, up, down), saving the 1st, 3rd, 5th... and recomputing every second
    one (`_custom_policy`: "saves output of all compute ops, except every second mm"). A MoE layer's expert block
    is kept whole (grouped GEMMs and all-to-alls are saved), so only its attention matmuls are counted."""
    return _op_matmul_order(arch, moe_layer)[0::2]


def op_recomputed_matrices(arch: ModelArchitecture, moe_layer: bool) -> list[Matrix]:
    """The projections torchtitan's op-level policy recomputes: every second matmul of the layer (k, o, and the
    dense MLP's up projection when gated, its down projection otherwise)."""
    return _op_matmul_order(arch, moe_layer)[1::2]


@dataclass(frozen=True, slots=True)
class ActivationInputs:
    """What one layer's saved activations depend on beside the model, on one GPU: the tensor-parallel split, the
    kernels and masks, the sequence, the bytes per element, LoRA adapters and the recomputation policy. Fields
    may be numpy arrays of one shape (the sweep broadcasts them); the tuples and the method stay scalars."""

    tensor_parallel: Number
    sequence_parallel: Flag
    flash_attention: Flag
    dropout: Flag
    sequence_length: Number
    bytes_per_element: Number = 2.0  # 16-bit saved tensors (fp32 statistics are counted separately)
    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ()
    recompute: Recompute | Number = Recompute.NONE
    recompute_modules: tuple[str, ...] = ("core_attn",)
    # Bytes of a saved GEMM input (Transformer Engine keeps it in FP8); None: `bytes_per_element`.
    gemm_input_bytes_per_element: Number | None = None
    recompute_method: str = "uniform"  # full recomputation: uniform groups or a block of layers per stage
    recompute_num_layers: int = 1


@dataclass(frozen=True, slots=True)
class _AttentionActivations:
    """Per-token saved attention tensors of one layer on one GPU (`layer_activation_terms`)."""

    saved_bytes: Number  # q, k, v, the output, qk-norm inputs or MLA latents, and the log-sum-exp
    log_sum_exp_bytes: Number  # FlashAttention's fp32 statistics
    output_elements: Number  # the output o_proj reads (a GEMM input)
    up_projection_bytes: Number  # MLA's q, k and kv up-projection outputs (what mla_up_proj frees)
    score_bytes: Number  # unfused attention's softmax (and dropout) of every score


@dataclass(frozen=True, slots=True)
class _MlpActivations:
    """Per-token saved MLP (or MoE) tensors of one layer on one GPU (`layer_activation_terms`)."""

    saved_bytes: Number
    gemm_input_elements: Number  # inputs the MLP's GEMMs save for the weight gradient
    expert_activation_elements: Number = 0.0  # the experts' activation outputs feeding their down projections
    shared_bytes: Number = 0.0  # the shared experts' tensors
    shared_gemm_input_elements: Number = 0.0


def _attention_activations(arch: ModelArchitecture, a: ActivationInputs) -> _AttentionActivations:
    """q, k (nope + rope) and the kv up-projection output v is a view of, replicated latents (MLA); or q, k and v
    at the KV-head width (expanded to the query heads without FlashAttention), qk-norm inputs; the output, the
    log-sum-exp, and the unfused score matrix (the layers' mean share of it in a hybrid stack)."""
    t, b16, heads = a.tensor_parallel, a.bytes_per_element, arch.num_attention_heads
    if arch.uses_mla:
        qk = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        # Latent paths are replicated on every TP rank: q and kv down-projection outputs and their norms.
        latent = (2 * arch.q_lora_rank + 2 * arch.kv_lora_rank + 2 * arch.qk_rope_head_dim) * b16
        # q, k (nope + rope concatenated), the kv up-projection output that v is a view of, the output.
        sharded = heads / t * (qk + qk + arch.qk_nope_head_dim + arch.v_head_dim + arch.v_head_dim) * b16
        attention = latent + sharded
        attention_out = heads / t * arch.v_head_dim
        up_projection_outputs = heads / t * (qk + qk + arch.qk_nope_head_dim + arch.v_head_dim) * b16
    else:
        d = arch.head_dim
        q = heads * d / t
        kv_heads = maximum(arch.num_kv_heads / t, 1)
        kv = where(a.flash_attention, kv_heads * d, heads * d / t)
        attention = (q + 2 * kv + q) * b16
        if arch.qk_norm:
            attention = attention + (q + kv_heads * d) * b16 + (heads / t + kv_heads) * 4
        attention_out = q
        up_projection_outputs = 0.0
    lse = where(a.flash_attention, 4 * (heads / t), 0)
    scores = where(a.flash_attention, 0.0, heads / t * a.sequence_length * (b16 + where(a.dropout, 1 + b16, 0)))
    if arch.is_hybrid:  # only softmax-attention layers have a score matrix: the layers' mean share of it
        scores = scores * arch.num_attention_layers / arch.num_layers
    return _AttentionActivations(attention + lse, lse, attention_out, up_projection_outputs, scores)


def _mlp_activations(arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs, sp_split) -> _MlpActivations:
    """Dense MLP: GeLU's input and output (2 f B) or SwiGLU's gate, up, silu(gate) and product (4 f B), over TP.
    MoE: fp32 router probabilities, per routed copy the dispatched input and weighted output and the expert's
    SwiGLU tensors, and the shared experts like a dense SwiGLU MLP."""
    t, b16, h = a.tensor_parallel, a.bytes_per_element, arch.hidden_size
    if not moe_layer:
        mlp = (4 if arch.mlp_gated else 2) * arch.intermediate_size * b16 / t
        return _MlpActivations(mlp, arch.intermediate_size / t)
    k = arch.experts_per_token
    mlp = (
        4 * arch.num_experts / sp_split
        + k * (2 * h * b16 + 4 * arch.expert_intermediate_size * b16 / t)
        + 4 * arch.shared_expert_intermediate_size * b16 / t
    )
    expert_act_out = k * arch.expert_intermediate_size / t  # elements feeding the experts' down projections
    shared = 4 * arch.shared_expert_intermediate_size * b16 / t
    shared_gemm_inputs = arch.shared_expert_intermediate_size / t
    return _MlpActivations(mlp, k * h + expert_act_out + shared_gemm_inputs, expert_act_out, shared, shared_gemm_inputs)


def _lora_activation_bytes(arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs):
    """The rank-r product x A of every targeted projection (r B; k copies for expert projections)."""
    lora = 0.0
    if a.lora_rank:
        for m in layer_matrices(arch, moe_layer):
            if m.module in a.lora_targets:
                lora = lora + (arch.experts_per_token if m.expert else 1) * a.lora_rank * a.bytes_per_element
    return lora


def _selective_freed_bytes(
    arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs, att: _AttentionActivations, mlp: _MlpActivations
):
    """What Megatron-core's selective modules free per token (at the bytes FP8 leaves them)."""
    modules = set(a.recompute_modules)
    b16 = a.bytes_per_element
    bg = b16 if a.gemm_input_bytes_per_element is None else a.gemm_input_bytes_per_element
    fp8_saving = b16 - bg
    sp_split = where(a.sequence_parallel, a.tensor_parallel, 1)
    freed = 0.0
    if "core_attn" in modules:
        freed = freed + att.log_sum_exp_bytes
    if "layernorm" in modules:
        freed = freed + 2 * arch.hidden_size * bg / sp_split
    if "mlp" in modules and not moe_layer:
        freed = freed + mlp.saved_bytes - fp8_saving * mlp.gemm_input_elements
    if "moe" in modules and moe_layer:
        freed = freed + mlp.saved_bytes - fp8_saving * mlp.gemm_input_elements
    else:
        if "moe_act" in modules and moe_layer:
            freed = freed + mlp.expert_activation_elements * bg
        if "shared_experts" in modules and moe_layer:
            freed = freed + mlp.shared_bytes - fp8_saving * mlp.shared_gemm_input_elements
    if "mla_up_proj" in modules:
        freed = freed + att.up_projection_bytes
    return freed


def _op_saved_bytes(
    arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs, att: _AttentionActivations, mlp: _MlpActivations
):
    """torchtitan op-level SAC per token: the layer input, the bf16 outputs of the saved matmuls, fused attention's
    output and log-sum-exp; a MoE layer's expert block kept whole, with its normalized input."""
    t, b16, h = a.tensor_parallel, a.bytes_per_element, arch.hidden_size
    bg = b16 if a.gemm_input_bytes_per_element is None else a.gemm_input_bytes_per_element
    sp_split = where(a.sequence_parallel, t, 1)
    saved_outputs = 0.0
    for m in _op_saved_matrices(arch, moe_layer):
        _, d_out, _ = _local_shape(m, arch, t, 1)  # a row-parallel output is the full width before its reduction
        saved_outputs = saved_outputs + d_out * b16
    op = h * b16 / sp_split + saved_outputs + att.output_elements * b16 + att.log_sum_exp_bytes
    if moe_layer:  # the expert block kept whole, with its normalized input
        op = op + mlp.saved_bytes - (b16 - bg) * mlp.gemm_input_elements + h * b16 / sp_split
    return op


def layer_activation_terms(arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs) -> LayerActivationTerms:
    """Bytes one token of a micro-batch leaves saved for backward in one layer, on one GPU, at every
    recomputation level (the accounting: this module's docstring, "Activations").

    Residual stream (split by TP only with sequence parallelism): each norm's input and fp32 statistics, the
    normalized inputs of the attention and MLP projections, dropout masks; attention (`_attention_activations`),
    the MLP (`_mlp_activations`), LoRA's x A (`_lora_activation_bytes`); with FP8 the GEMM inputs at 1 B.
    Selective frees what its modules name (`_selective_freed_bytes`), op keeps `_op_saved_bytes`, full the layer
    input. Small tensors (int64 token and routing indices, RoPE tables) are not counted."""
    t, b16, h = a.tensor_parallel, a.bytes_per_element, arch.hidden_size
    bg = b16 if a.gemm_input_bytes_per_element is None else a.gemm_input_bytes_per_element
    fp8_saving = b16 - bg  # bytes saved per GEMM-input element kept in FP8 (0 without FP8)
    sp_split = where(a.sequence_parallel, t, 1)
    norm_stats = 8 if arch.norm_has_bias else 4
    residual = (arch.norms_per_layer * (h * b16 + norm_stats) + 2 * h * b16 + where(a.dropout, 2 * h, 0)) / sp_split
    att = _attention_activations(arch, a)
    mlp = _mlp_activations(arch, moe_layer, a, sp_split)
    # elements: the normalized inputs of the attention and MLP projections, the attention output, the MLP's inputs
    gemm_inputs = 2 * h / sp_split + att.output_elements + mlp.gemm_input_elements
    lora = _lora_activation_bytes(arch, moe_layer, a)
    everything = residual + att.saved_bytes + mlp.saved_bytes + lora - fp8_saving * gemm_inputs
    freed = _selective_freed_bytes(arch, moe_layer, a, att, mlp)
    selective = everything + where("core_attn" in a.recompute_modules, 0.0, att.score_bytes) - freed
    return LayerActivationTerms(
        none=everything + att.score_bytes,
        selective=selective,
        op=_op_saved_bytes(arch, moe_layer, a, att, mlp),
        full=h * b16 / sp_split,
    )


def layer_activation_bytes_per_token(arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs):
    """Bytes one token of a micro-batch leaves saved for backward in one layer, on one GPU, at `a.recompute`
    (selective with `a.recompute_modules`). The terms: `layer_activation_terms`."""
    return layer_activation_terms(arch, moe_layer, a).stored(a.recompute)


def in_flight_microbatches(pipeline_parallel, microbatches, virtual_stages=1):
    """Micro-batches whose activations the first pipeline stage holds at its peak, in units of its own layers.

    1F1B (PipeDream-Flush, Narayanan et al. 2021): p warm-up micro-batches, so p x L/p = L layers' worth
    (Korthikanti Eq. 5). Interleaved with v chunks per device: p + (p - 1)/v, i.e. L (1 + (p - 1)/(p v)).
    Fewer micro-batches than warm-up slots cap it. One stage: one micro-batch at a time.
    """
    warmup = where(virtual_stages > 1, pipeline_parallel + (pipeline_parallel - 1) / virtual_stages, pipeline_parallel)
    return where(pipeline_parallel > 1, minimum(warmup, maximum(microbatches, 1)), 1)


def second_stage_in_flight_microbatches(pipeline_parallel, microbatches):
    """Micro-batches the second stage of a 1F1B pipeline holds at its peak: p - 1 warm-up slots (stage i holds
    p - i; Narayanan et al. 2021), capped by the micro-batches there are."""
    return minimum(maximum(pipeline_parallel - 1, 1), maximum(microbatches, 1))


def edge_activation_bytes_per_token(
    arch: ModelArchitecture,
    tensor_parallel,
    sequence_parallel,
    dropout,
    pipeline_parallel,
    first_stage: bool,
    activation_bytes=2.0,
    frozen_head=False,
):
    """Per-token activations outside the layers, saved until backward. First stage: the embedding-dropout
    mask (1 B x h). Last stage: the final norm's input and statistics and the output projection's input
    (2 h B; a frozen head, as in LoRA, needs no weight gradient and saves no input). With one stage both.
    Split by TP with sequence parallelism (Korthikanti Sec. 4.3). The fp32 logits are `logits_bytes`."""
    sp_split = where(sequence_parallel, tensor_parallel, 1)
    h = arch.hidden_size
    norm_stats = 8 if arch.norm_has_bias else 4
    embedding = where(dropout, h, 0) / sp_split
    output = (h * activation_bytes + norm_stats + where(frozen_head, 0, h * activation_bytes)) / sp_split
    single = embedding + output
    return where(pipeline_parallel > 1, embedding if first_stage else output, single)


def logits_saved_bytes_per_token(arch: ModelArchitecture, tensor_parallel):
    """fp32 log-probabilities the cross-entropy saves for backward (4 B x vocabulary / TP, vocab-parallel):
    Korthikanti's 4 sbv/t."""
    return 4 * arch.vocab_size / tensor_parallel


def logits_bytes(arch: ModelArchitecture, tensor_parallel, tokens, is_last_stage):
    """Peak of the fp32 logits and loss on the last stage, for `tokens` tokens of one micro-batch:
    the saved fp32 log-probabilities (4 B) plus, at the start of backward, the gradient of the
    log-probabilities and of the fp32 logits (4 B each): 12 B x vocabulary / TP per token, as the unfused
    PyTorch cross-entropy (HF Trainer, torchtitan) holds it. Fused vocab-parallel kernels (Megatron) need
    about half, fused linear-cross-entropy (Liger) almost nothing."""
    return where(is_last_stage, 3 * logits_saved_bytes_per_token(arch, tensor_parallel) * tokens, 0.0)


def full_recompute_fraction(
    stage_layers, recompute_method: str = "uniform", recompute_num_layers: Number = 1, virtual_stages: Number = 1
):
    """Share of a stage's layers that full recomputation recomputes: all of them (uniform), or the first
    `recompute_num_layers` of each model chunk (block; Megatron-core `--recompute-method block`)."""
    if recompute_method != "block":
        return 1.0
    per_chunk = stage_layers / virtual_stages
    return minimum(recompute_num_layers, per_chunk) / per_chunk


@dataclass(frozen=True, slots=True)
class StageSchedule:
    """Which pipeline stage, and how the schedule fills it: what a stage's saved activations depend on beside
    the layer (`stage_activation_bytes`). Numbers may be numpy arrays of one shape."""

    pipeline_parallel: Number
    microbatches: Number  # per data-parallel replica per step
    virtual_stages: Number = 1
    first_stage: bool = True
    layers: Number | None = None  # the stage's layers when stages are uneven; None: the even split's most loaded
    in_flight: Number | None = None  # micro-batches held at the peak; None: `in_flight_microbatches` (first stage)
    edges: bool = True  # False for a middle stage (no embedding, no head)


def _full_recompute_groups(
    a: ActivationInputs, stage_layers, dense_full, none_per_token, largest_layer, virtual_stages
):
    """(stored, working) bytes per token of full recomputation by groups or a block (Megatron-core
    `--recompute-method` / `--recompute-num-layers`): uniform with groups of k layers keeps one input per group,
    ceil(L_s / k), and rebuilds a whole group while its backward runs; block with n layers recomputes the first n
    layers of each chunk and keeps everything of the rest."""
    if a.recompute_method == "block":
        recomputed = stage_layers * full_recompute_fraction(
            stage_layers, a.recompute_method, a.recompute_num_layers, virtual_stages
        )
        kept = none_per_token * (1 - recomputed / stage_layers)
        return recomputed * dense_full + kept, largest_layer - dense_full
    groups = -(-stage_layers // a.recompute_num_layers)
    return groups * dense_full, minimum(a.recompute_num_layers, stage_layers) * largest_layer - dense_full


def stage_activation_bytes(arch: ModelArchitecture, a: ActivationInputs, stage: StageSchedule, tokens):
    """Saved activations of one stage on one GPU at its peak, for `tokens` tokens of one micro-batch on the GPU
    (micro-batch x sequence / CP: context parallelism splits every sequence; Megatron-core CP): the layers of every
    in-flight micro-batch (`in_flight_microbatches` on the first stage, one on the last, or `stage.in_flight`), the
    stage's edge activations, and one layer's recomputation working set (a group's with grouped full
    recomputation, `_full_recompute_groups`)."""
    recompute = a.recompute
    dense_layers, moe_layers = stage_layer_split(arch, stage.pipeline_parallel, stage.layers)
    dense = layer_activation_terms(arch, False, a)
    per_token = dense_layers * dense.stored(recompute)
    working = dense.rebuilt(recompute) * where(dense_layers > 0, 1, 0)
    none_per_token = dense_layers * dense.none
    largest_layer = dense.none * where(dense_layers > 0, 1, 0)
    if arch.is_moe:
        moe = layer_activation_terms(arch, True, a)
        per_token = per_token + moe_layers * moe.stored(recompute)
        working = maximum(working, moe.rebuilt(recompute))
        none_per_token = none_per_token + moe_layers * moe.none
        largest_layer = maximum(largest_layer, moe.none)
    if a.recompute_method != "uniform" or a.recompute_num_layers != 1:
        full_stored, full_working = _full_recompute_groups(
            a, dense_layers + moe_layers, dense.full, none_per_token, largest_layer, stage.virtual_stages
        )
        per_token = where(recompute == Recompute.FULL, full_stored, per_token)
        working = where(recompute == Recompute.FULL, full_working, working)
    in_flight = stage.in_flight
    if in_flight is None:
        first = stage.first_stage
        in_flight = (
            in_flight_microbatches(stage.pipeline_parallel, stage.microbatches, stage.virtual_stages) if first else 1
        )
    edge = 0.0
    if stage.edges:
        edge = edge_activation_bytes_per_token(
            arch,
            a.tensor_parallel,
            a.sequence_parallel,
            a.dropout,
            stage.pipeline_parallel,
            stage.first_stage,
            a.bytes_per_element,
            frozen_head=a.lora_rank > 0,
        )
    return tokens * (per_token * in_flight + edge + working)


__all__ = [
    "PRECISIONS",
    "ActivationInputs",
    "LayerActivationTerms",
    "Matrix",
    "PrecisionBytes",
    "adafactor_state_elements",
    "edge_activation_bytes_per_token",
    "edge_parameter_elements",
    "gradient_accumulation_bytes",
    "gradients_bytes",
    "full_recompute_fraction",
    "in_flight_microbatches",
    "layer_activation_bytes_per_token",
    "layer_activation_terms",
    "layer_matrices",
    "logits_bytes",
    "logits_saved_bytes_per_token",
    "lora_adafactor_state_elements",
    "lora_adapter_elements",
    "nf4_bytes_per_element",
    "op_recomputed_matrices",
    "over_layers",
    "second_stage_in_flight_microbatches",
    "optimizer_state_bytes_per_element",
    "optimizer_states_bytes",
    "sharding_buffer_bytes",
    "stage_activation_bytes",
    "stage_expert_parameter_elements",
    "stage_gemm_weight_elements",
    "stage_layer_parameter_bytes",
    "stage_layer_parameter_elements",
    "StageSchedule",
    "stage_layer_split",
    "stage_layers_total",
    "uneven_stage_layers",
    "weights_bytes",
    "zero_shards",
]
