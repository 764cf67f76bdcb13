"""Saved activations of a training step, one function per term (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", Sec. 4, Table 2, Eq. 5), per GPU on one pipeline stage.

Korthikanti et al.'s accounting (Table 2: every tensor a backward kernel reads is counted once), applied to the
real architecture (`layer_activation_terms`). With B = bytes per 16-bit element, per token:

* residual stream (split by TP only with sequence parallelism): each norm's input (h B) and its fp32
  statistics (RMSNorm 4 B, LayerNorm 8 B, as fused Apex/TE kernels save them); the normalized inputs
  of the attention and MLP projections (2 h B); 1-byte dropout masks after attention and MLP (2 h).
  GPT: 4 + 4 + 2 = 10 sbh, Korthikanti's replicated term.
* attention (split by TP): q (heads x head_dim), k and v at the KV-head width (GQA; FlashAttention reads
  them unexpanded, while unfused attention expands them to the query heads first), the output that
  feeds o_proj, FlashAttention's fp32 log-sum-exp (4 B per head). Without FlashAttention: the softmax
  output (B per score) and, with dropout, its 1-byte mask and the dropped copy: 5 a s bytes in GPT,
  2 a s without dropout. GPT: 4 + 2 + 2 = 8 sbh.
  In a hybrid stack only the softmax-attention layers keep scores (averaged over the layers); the
  mixers of linear-attention and Mamba layers are counted with the attention layer's tensors.
* dense MLP (split by TP): GeLU: the activation input and output (2 f B; GPT: 16 sbh);
  SwiGLU: gate and up outputs, silu(gate) and the product feeding down_proj (4 f B).
* MoE MLP: fp32 router probabilities (4 E bytes), per routed copy (k per token) the dispatched input and
  the expert output kept for the probability weighting (2 h B) and the expert's MLP tensors (4 f_e B / TP);
  shared experts like a dense SwiGLU MLP.
* LoRA: the rank-r product x A of every targeted projection (r B; k copies for expert projections).
* FP8 (`gemm_input_bytes_per_element` = 1): the inputs Transformer Engine's GEMMs save for the weight gradient
  (the two normalized inputs, the attention output, the MLP's and experts' down-projection inputs, the
  dispatched tokens) are kept in FP8 instead of B.

Recomputation levels:

* selective (Megatron-core `--recompute-modules`, TransformerConfig.recompute_modules): core_attn drops the
  score matrix and, with FlashAttention, only its log-sum-exp (its q, k, v inputs and the output o_proj
  reads stay); layernorm discards the two normalized inputs (output-discarding checkpoint); mlp drops a
  dense layer's MLP tensors; moe a MoE layer's router, dispatch and expert tensors; moe_act the expert
  activation output feeding the down projection; shared_experts the shared experts' tensors; mla_up_proj
  MLA's q, k and kv up-projection outputs.
* op (torchtitan op-level SAC, needs fused attention): the layer input, the outputs of every other matmul
  (`_op_saved_matrices`), and the fused attention's output and log-sum-exp; norms, RoPE, activations and
  the other matmuls are recomputed. A MoE layer keeps its expert block whole.
* full keeps only the layer input (h B, split with sequence parallelism).

Small tensors (int64 token and routing indices, RoPE tables) are not counted. Scope, as in
`planner.training.memory`: one GPU on one pipeline stage; numbers may be numpy arrays of one shape; `recompute`
is a `Recompute` level (or an array of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Flag, Number, maximum, minimum, where
from planner.model.architecture import ModelArchitecture
from planner.physics.projections import Matrix, layer_matrices, local_shape, stage_layer_split
from planner.training.recompute import Recompute, full_recompute_fraction


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
        _, d_out, _ = local_shape(m, arch, t, 1)  # a row-parallel output is the full width before its reduction
        saved_outputs = saved_outputs + d_out * b16
    op = h * b16 / sp_split + saved_outputs + att.output_elements * b16 + att.log_sum_exp_bytes
    if moe_layer:  # the expert block kept whole, with its normalized input
        op = op + mlp.saved_bytes - (b16 - bg) * mlp.gemm_input_elements + h * b16 / sp_split
    return op


def layer_activation_terms(arch: ModelArchitecture, moe_layer: bool, a: ActivationInputs) -> LayerActivationTerms:
    """Bytes one token of a micro-batch leaves saved for backward in one layer, on one GPU, at every
    recomputation level (the accounting: this module's docstring).

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


def in_flight_microbatches(pipeline_parallel, microbatches, virtual_stages: Number = 1):
    """Micro-batches whose activations the first pipeline stage holds at its peak, in units of its own layers.

    1F1B (PipeDream-Flush, Narayanan et al. 2021): p warm-up micro-batches, so p x L/p = L layers' worth
    (Korthikanti Eq. 5). Interleaved with v chunks per device: p + (p - 1)/v, i.e. L (1 + (p - 1)/(p v)).
    Fewer micro-batches than warm-up slots cap it. One stage: one micro-batch at a time.
    """
    warmup = where(virtual_stages > 1, pipeline_parallel + (pipeline_parallel - 1) / virtual_stages, pipeline_parallel)
    return where(pipeline_parallel > 1, minimum(warmup, maximum(microbatches, 1)), 1)


def second_stage_in_flight_microbatches(pipeline_parallel, microbatches, virtual_stages: Number = 1):
    """Micro-batches the second stage holds at its peak, in units of its own layers, capped by the micro-batches
    there are. 1F1B: p - 1 warm-up slots (stage i holds p - i; Narayanan et al. 2021). Interleaved with v chunks:
    Megatron-core's warm-up for rank r is 2 (p - r - 1) + (v - 1) p chunk-micro-batches, one more at the peak, each
    1/v of the stage's layers (`forward_backward_pipelining_with_interleaving`): p + (p - 3)/v for rank 1 (and
    p + (p - 1)/v for rank 0, `in_flight_microbatches`)."""
    warmup = where(
        virtual_stages > 1,
        pipeline_parallel + (pipeline_parallel - 3) / virtual_stages,
        maximum(pipeline_parallel - 1, 1),
    )
    return minimum(warmup, maximum(microbatches, 1))


def edge_activation_bytes_per_token(
    arch: ModelArchitecture,
    tensor_parallel,
    sequence_parallel,
    dropout,
    pipeline_parallel,
    first_stage: bool,
    bytes_per_element: Number = 2.0,
    frozen_head: Flag = False,
):
    """Per-token activations outside the layers, saved until backward. First stage: the embedding-dropout
    mask (1 B x h). Last stage: the final norm's input and statistics and the output projection's input
    (2 h B; a frozen head, as in LoRA, needs no weight gradient and saves no input). With one stage both.
    Split by TP with sequence parallelism (Korthikanti Sec. 4.3). The fp32 logits are `logits_bytes`."""
    sp_split = where(sequence_parallel, tensor_parallel, 1)
    h = arch.hidden_size
    norm_stats = 8 if arch.norm_has_bias else 4
    embedding = where(dropout, h, 0) / sp_split
    output = (h * bytes_per_element + norm_stats + where(frozen_head, 0, h * bytes_per_element)) / sp_split
    single = embedding + output
    return where(pipeline_parallel > 1, embedding if first_stage else output, single)


def logits_saved_bytes_per_token(arch: ModelArchitecture, tensor_parallel):
    """fp32 log-probabilities the cross-entropy saves for backward (4 B x vocabulary / TP, vocab-parallel):
    Korthikanti's 4 sbv/t."""
    return 4 * arch.vocab_size / tensor_parallel


def logits_bytes(arch: ModelArchitecture, tensor_parallel, tokens, is_last_stage, bytes_per_logit: Number = 12.0):
    """Peak of the logits and loss on the last stage, for `tokens` tokens of one micro-batch, at `bytes_per_logit`
    per vocabulary entry / TP (`loss_bytes_per_logit`)."""
    return where(is_last_stage, bytes_per_logit * arch.vocab_size / tensor_parallel * tokens, 0.0)


def loss_bytes_per_logit(loss_kernel: str, activation_bytes: float) -> float:
    """Bytes per logit the cross-entropy holds at its peak. unfused (PyTorch on fp32 logits: HF Trainer,
    torchtitan): the saved fp32 log-probabilities plus, at the start of backward, their gradient and that of the
    fp32 logits, 4 B each (Korthikanti's 4 sbv/t is the first of them). te: Transformer Engine's
    parallel_cross_entropy saves the 16-bit input and per-row fp32 statistics and computes the gradient into the
    input's storage (transformer_engine/pytorch/cross_entropy.py, CrossEntropyFunction), one 16-bit copy; the
    statistics (three fp32 per token) are not counted."""
    return activation_bytes if loss_kernel == "te" else 3 * 4.0


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
