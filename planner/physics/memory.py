"""Memory terms, one function each, per GPU.

Scope of every term: one GPU on the most loaded pipeline stage. Arguments that describe the
scenario (tensor_parallel, bytes per element, sequences, tokens, ...) may be Python numbers or numpy
arrays of equal shape; the model description (`ModelArchitecture`, `ParameterCounts`) is fixed.
"""

from __future__ import annotations

from planner.arrays import Number, ceil_div, ceil_to_multiple, maximum, minimum, where
from planner.model.architecture import LayerParameters, ModelArchitecture, ParameterCounts
from planner.model.cache import kv_bytes_per_cached_token, sequence_cache_bytes

GIB = 1 << 30


# ---------------------------------------------------------------------------------------------
# pipeline stage geometry


def stage_layers(arch: ModelArchitecture, pipeline_parallel):
    """Layers on the most loaded stage: ceil(L / p) (80 layers on 3 stages -> 27, 27, 26)."""
    return ceil_div(arch.num_layers, pipeline_parallel)


def stage_moe_layers(arch: ModelArchitecture, pipeline_parallel):
    """MoE layers on the most loaded stage, taking the stage with the most of them (dense-first layers
    sit on the first stage, so a later stage can be all MoE)."""
    return minimum(stage_layers(arch, pipeline_parallel), arch.num_moe_layers)


def stage_share(arch: ModelArchitecture, pipeline_parallel, whole_model):
    """A whole-model quantity taken in proportion to the most loaded stage's layers: `whole_model` x
    ceil(L / p) / L (exact with one stage; for a hybrid stack the stage is charged the model's mix of layer
    kinds). Multiplies before dividing, so whole-number bytes stay exact when the stage is the model."""
    return whole_model * stage_layers(arch, pipeline_parallel) / arch.num_layers


# ---------------------------------------------------------------------------------------------
# weights


def _layer_weight_bytes(
    layer: LayerParameters,
    arch: ModelArchitecture,
    tensor_parallel,
    expert_shards,
    linear_bytes_per_element,
    high_precision_bytes_per_element,
    attention_bytes,
):
    # K/V projections replicate once TP exceeds the KV heads: each rank keeps max(kv/tp, 1) heads.
    kv_share = maximum(1 / tensor_parallel, 1 / arch.num_kv_heads)
    # Attention sinks split with their heads; the routed experts' biases (gpt-oss) with the experts. Both
    # stay in the high-precision dtype, as the checkpoints keep them.
    attention = layer.attention_sharded / tensor_parallel + layer.attention_kv * kv_share + layer.attention_replicated
    mlp = (
        layer.mlp_dense / tensor_parallel
        + layer.experts_routed / expert_shards
        + layer.experts_shared / tensor_parallel
    )
    # Column-parallel biases split with their matrices; row-parallel (output) biases are added after the
    # all-reduce, so every rank holds them whole (Megatron RowParallelLinear, vLLM).
    small = (
        (layer.attention_bias + layer.mlp_bias + layer.attention_sinks) / tensor_parallel
        + layer.experts_bias / expert_shards
        + layer.attention_out_bias
        + layer.mlp_out_bias
        + layer.router
        + layer.norms
    )
    if attention_bytes is linear_bytes_per_element:  # one format for every matrix: a single product, as exact as before
        return (attention + mlp) * linear_bytes_per_element + small * high_precision_bytes_per_element
    return attention * attention_bytes + mlp * linear_bytes_per_element + small * high_precision_bytes_per_element


def _per_layer_weight_bytes(
    mean: LayerParameters,
    exact_sum: LayerParameters | None,
    layers: int,
    arch: ModelArchitecture,
    tensor_parallel,
    expert_shards,
    linear_bytes_per_element,
    high_precision_bytes_per_element,
    attention_bytes,
):
    """One layer's bytes averaged over the `layers` layers of its kind: from their exact sum when the
    layers differ (a mean rounded down per field would miss a few elements), else from the mean."""
    args = (
        arch,
        tensor_parallel,
        expert_shards,
        linear_bytes_per_element,
        high_precision_bytes_per_element,
        attention_bytes,
    )
    if exact_sum is None or layers == 0:
        return _layer_weight_bytes(mean, *args)
    return _layer_weight_bytes(exact_sum, *args) / layers


def weight_bytes(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    linear_bytes_per_element,
    high_precision_bytes_per_element,
    embedding_bytes_per_element,
    attention_bytes=None,
):
    """Parameter bytes resident on one GPU of the most loaded pipeline stage.

    `linear_bytes_per_element`: the MLP and expert matrices; `attention_bytes`: per element of the attention projections
    (None: the same; FP8 checkpoints that keep attention in BF16, gpt-oss's MXFP4 experts beside BF16
    attention).

    Linear layers are split across tensor-parallel ranks (Megatron column/row parallel), the vocabulary
    of embedding and lm_head too (vocab-parallel); routed experts are split across max(TP, EP) ranks;
    norms, routers and MLA's latent down-projections are replicated. With PP > 1 the first stage holds
    the embedding and the last the output head (a tied head needs its own copy there); the heaviest
    stage is charged the larger of the two. A multimodal checkpoint's vision tower and projector sit with
    the embedding on the first stage, split across TP ranks (vLLM's vision encoders use tensor-parallel
    linears) and kept in the 16-bit dtype (quantized checkpoints leave them unquantized). With one stage
    and TP = 1 the bytes are exactly the checkpoint's parameters at their dtypes.
    """
    expert_shards = maximum(tensor_parallel, expert_parallel)
    moe_layers = stage_moe_layers(arch, pipeline_parallel)
    dense_layers = stage_layers(arch, pipeline_parallel) - moe_layers
    attention_bytes = linear_bytes_per_element if attention_bytes is None else attention_bytes
    common = (
        arch,
        tensor_parallel,
        expert_shards,
        linear_bytes_per_element,
        high_precision_bytes_per_element,
        attention_bytes,
    )
    layers = dense_layers * _per_layer_weight_bytes(
        counts.dense_layer, counts.dense_layers_sum, counts.num_dense_layers, *common
    )
    if counts.moe_layer is not None:
        layers = layers + moe_layers * _per_layer_weight_bytes(
            counts.moe_layer, counts.moe_layers_sum, counts.num_moe_layers, *common
        )
    embedding = (counts.embedding / tensor_parallel + counts.position_embedding) * embedding_bytes_per_element
    embedding = embedding + counts.vision_encoder / tensor_parallel * high_precision_bytes_per_element
    final_norms = counts.final_norms * high_precision_bytes_per_element
    # On one stage a tied head *is* the embedding matrix; the last of several stages needs its own copy.
    untied_head = counts.lm_head / tensor_parallel * embedding_bytes_per_element
    last_stage_head = (counts.lm_head or counts.embedding) / tensor_parallel * embedding_bytes_per_element
    edges = where(
        pipeline_parallel > 1, maximum(embedding, last_stage_head + final_norms), embedding + untied_head + final_norms
    )
    return layers + edges


def mla_absorbed_weight_bytes(
    arch: ModelArchitecture, tensor_parallel, pipeline_parallel, fp8_checkpoint, activation_bytes_per_element
):
    """The decode-path copies vLLM's MLA backend of v0.7.1-v0.7.x built at load time beside the checkpoint's
    projections, on one GPU of the most loaded stage (vllm/attention/backends/mla/utils.py @04644e3,
    MLACommonImpl.process_weights_after_loading): W_Q_UK (q input x heads x kv_lora) and W_UV_O (heads x kv_lora x
    hidden), requantized to FP8 (1 B) when the checkpoint is FP8 and in the activation dtype otherwise; W_QR (q
    input x heads x rope, a contiguous copy in the activation dtype); and, for an FP8 checkpoint only, the
    dequantized kv_b_proj kept as W_UK / W_UV (kv_lora x heads x (nope + v); an unquantized kv_b_proj is viewed,
    not copied). vLLM PR #14770 (v0.8.0, "MLA get rid of materialization") removed them because "the weight
    materialization eats up too much of the GPU memory". Zero for a model without MLA."""
    if not arch.uses_mla:
        return 0.0
    heads = arch.num_attention_heads / tensor_parallel
    q_input = arch.q_lora_rank or arch.hidden_size
    absorbed_bytes = where(fp8_checkpoint, 1.0, activation_bytes_per_element)
    absorbed = heads * arch.kv_lora_rank * (q_input + arch.hidden_size) * absorbed_bytes
    dequantized_kv_b = heads * arch.kv_lora_rank * (arch.qk_nope_head_dim + arch.v_head_dim)
    kept = heads * q_input * arch.qk_rope_head_dim + where(fp8_checkpoint, dequantized_kv_b, 0.0)
    return stage_layers(arch, pipeline_parallel) * (absorbed + kept * activation_bytes_per_element)


def vision_weight_bytes(counts: ParameterCounts, tensor_parallel, high_precision_bytes_per_element):
    """The vision tower and projector on one GPU of the first stage (in `weight_bytes`): resident, but read
    only when an image is encoded, never by a decode step."""
    return counts.vision_encoder / tensor_parallel * high_precision_bytes_per_element


def vision_encoder_profile_bytes(
    arch: ModelArchitecture, images, tokens_per_image, tensor_parallel, activation_bytes_per_element: Number = 2.0
):
    """What encoding `images` images at once holds on one GPU beyond the language model: (the tower's peak
    activations, the encoder outputs kept for the language model). The tower frees each layer's intermediates,
    so its peak is one layer's widest moment over all the images' patches: the residual and its normalized copy
    (2 x width) plus the MLP's up projection and activation (2 x 4 x width / TP; the towers' MLPs are ~4x their
    width: SigLIP 4304/1152, Llama 4 5632/1408, Pixtral 4096/1024). The outputs are the images' tokens at the
    language model's width."""
    if not arch.vision_tokens_per_image:
        return 0.0, 0.0
    patches = images * tokens_per_image * arch.vision_patches_per_image / arch.vision_tokens_per_image
    width = arch.vision_hidden_size
    peak = patches * (2 * width + 8 * width / tensor_parallel) * activation_bytes_per_element
    outputs = images * tokens_per_image * arch.hidden_size * activation_bytes_per_element
    return peak, outputs


# ---------------------------------------------------------------------------------------------
# KV cache


def kv_cache_bytes_per_sequence(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    context_tokens,
    kv_bytes_per_element,
    block_tokens: Number = 1,
    honor_sliding_window: bool = True,
    state_bytes_per_element: Number = 2.0,
):
    """Cache bytes one sequence of `context_tokens` holds on one GPU (its stage's share of the layers, its
    TP shard): `planner.model.cache.sequence_cache_bytes`, i.e. the KV of the attention layers only
    (`2 * kv_heads_per_rank * head_dim` per token and layer, MLA `kv_lora_rank + rope_dim`), the constant
    state of linear-attention and Mamba layers (in `state_bytes_per_element`, the activation dtype) and
    V3.2's indexer keys. Paged engines allocate whole blocks, so the context is rounded up to
    `block_tokens`; sliding-window and chunked layers keep at most their window when the engine honours it
    (vLLM, Gemma-2's alternating layers, gpt-oss).
    """
    tokens = ceil_to_multiple(context_tokens, block_tokens)
    whole_model = sequence_cache_bytes(
        arch, tokens, kv_bytes_per_element, state_bytes_per_element, tensor_parallel, honor_sliding_window
    )
    return stage_share(arch, pipeline_parallel, whole_model)


def kv_cache_bytes(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    sequences,
    context_tokens,
    kv_bytes_per_element,
    block_tokens: Number = 1,
    honor_sliding_window: bool = True,
    state_bytes_per_element: Number = 2.0,
):
    """KV cache (and recurrent state) on one GPU: sequences on its replica x bytes per sequence (linear in
    both)."""
    return sequences * kv_cache_bytes_per_sequence(
        arch,
        tensor_parallel,
        pipeline_parallel,
        context_tokens,
        kv_bytes_per_element,
        block_tokens,
        honor_sliding_window,
        state_bytes_per_element,
    )


def kv_block_bytes(arch: ModelArchitecture, tensor_parallel, pipeline_parallel, kv_bytes_per_element, block_tokens):
    """One paged block (block_tokens token slots in every attention layer of the stage) on one GPU."""
    per_token = kv_bytes_per_cached_token(arch, kv_bytes_per_element, tensor_parallel)
    return stage_share(arch, pipeline_parallel, block_tokens * per_token)


# ---------------------------------------------------------------------------------------------
# activations and workspace (inference)


# vLLM's fused-MoE kernel runs the tokens of a step in chunks of VLLM_FUSED_MOE_CHUNK_SIZE (vllm/envs.py:
# int(os.getenv("VLLM_FUSED_MOE_CHUNK_SIZE", "32768")) through 2025; 16 * 1024 in 2026 copies), and sizes its
# intermediate caches for one chunk.
FUSED_MOE_CHUNK_TOKENS = 32768


def mla_prefill_activation_elements(arch: ModelArchitecture, tensor_parallel):
    """Elements per token live during an MLA layer's prefill attention on one GPU, besides the residual stream:
    vLLM's compute-friendly prefill path (vllm/attention/backends/mla/utils.py @04644e3, MLACommonImpl.forward /
    _forward_prefill) holds the latents q_c, kv_c and k_pe, the up-projected q (heads x (nope + rope)), kv_b_proj's
    output (heads x (nope + v)), k = cat(k_nope, k_pe) and v zero-padded to the q/k head size for FlashAttention
    (heads x (nope + rope) each), the attention output (the same width) and the layer's preallocated output
    (hidden) at once."""
    heads = arch.num_attention_heads / tensor_parallel
    qk = arch.qk_nope_head_dim + arch.qk_rope_head_dim
    latents = arch.q_lora_rank + arch.kv_lora_rank + arch.qk_rope_head_dim
    return heads * (4 * qk + arch.qk_nope_head_dim + arch.v_head_dim) + latents + arch.hidden_size


def fused_moe_workspace_elements(arch: ModelArchitecture, tensor_parallel):
    """Elements per token of a fused-MoE chunk's intermediate caches on one GPU (vLLM fused_moe.py
    fused_experts_impl @000d145): cache1 (the w13 output, N = 2 x expert width / TP gated, 1 x ungated) and
    cache3 (the k un-summed expert outputs of `hidden` each, the latent width with Nemotron-H's latent MoE) share one
    buffer of max(N, hidden) per routed copy,
    cache2 (the activation's output, expert width / TP) its own; k routed copies per token."""
    width = arch.expert_intermediate_size / tensor_parallel
    n = (2 if arch.experts_gated else 1) * width
    return arch.experts_per_token * (maximum(n, arch.moe_latent_size or arch.hidden_size) + width)


def inference_activation_bytes(
    arch: ModelArchitecture, tensor_parallel, tokens, activation_bytes_per_element: Number = 2
):
    """Peak transient activations of one forward step over `tokens` tokens (a prefill chunk or a decode
    batch) on one GPU. Inference frees each layer's intermediates, so the peak is one layer's widest
    moment, each over the residual stream and its normalized copy (2h):
    - attention: q, k, v and output split across TP; MLA's prefill working set,
      `mla_prefill_activation_elements`;
    - a dense MLP: gate, up and activation (3 x width / TP for SwiGLU, up and activation 2 x width for GeLU);
    - a MoE layer: the shared experts' output (h, computed before the routed ones, DeepseekV2MoE /
      Qwen2MoE), the fp32 router logits, and the fused-MoE caches of one chunk of at most
      `FUSED_MOE_CHUNK_TOKENS` tokens (`fused_moe_workspace_elements`): the k un-summed expert outputs of
      `hidden` each are what make a MoE step wide.
    """
    h = arch.hidden_size
    b = activation_bytes_per_element
    if arch.uses_mla:
        attention = mla_prefill_activation_elements(arch, tensor_parallel)
    else:
        kv_heads = maximum(arch.num_kv_heads / tensor_parallel, 1)
        attention = (2 * arch.num_attention_heads / tensor_parallel + 2 * kv_heads) * arch.head_dim
    dense_width = arch.intermediate_size * (3 if arch.mlp_gated else 2) if arch.num_dense_layers else 0
    peak = tokens * (2 * h + maximum(attention, dense_width / tensor_parallel)) * b
    if arch.num_experts:
        shared = h if arch.shared_expert_intermediate_size else 0
        outside = tokens * ((2 * h + shared) * b + 4 * arch.num_experts)
        chunk = minimum(tokens, FUSED_MOE_CHUNK_TOKENS) * fused_moe_workspace_elements(arch, tensor_parallel) * b
        peak = maximum(peak, outside + chunk)
    return peak


def logits_bytes(arch: ModelArchitecture, rows, logits_bytes_per_element: Number = 4):
    """fp32 logits over the whole vocabulary for `rows` sampled positions (gathered on every TP rank).

    Engines compute logits only for the last position of each sequence in a step.
    """
    return rows * arch.vocab_size * logits_bytes_per_element


# ---------------------------------------------------------------------------------------------
# runtime


CUDA_CONTEXT_BYTES = 0.5 * GIB
COMMUNICATION_BUFFER_BYTES = 0.25 * GIB
CUDA_GRAPH_BYTES = 0.25 * GIB


def runtime_overhead_bytes(is_accelerator, world_size):
    """Memory the framework holds outside tensors: CUDA context and cuBLAS workspaces (~0.5 GiB on
    Hopper with lazy module loading), CUDA graph pools (~0.25 GiB), and NCCL buffers (~0.25 GiB) when
    GPUs communicate. Documented defaults; a calibration replaces them with the measured value."""
    gpu = where(is_accelerator, 1.0, 0.0)
    communicating = where(world_size > 1, 1.0, 0.0)
    return gpu * (CUDA_CONTEXT_BYTES + CUDA_GRAPH_BYTES + communicating * COMMUNICATION_BUFFER_BYTES)


# PyTorch's caching allocator reserves more than the tensors it holds: blocks split for one size cannot serve
# another (fragmentation). GMLake (Guo et al., ASPLOS 2024, arXiv:2401.08156, Sec. 6) measured it on eight LLM
# training and fine-tuning workloads on A100-80GB with recomputation, ZeRO offload and LoRA: 15 % of reserved memory
# on average, up to 33 %. A training log's `torch.cuda.max_memory_reserved` (torchtitan's "max_reserved") reads
# the allocated peak over (1 - that share).
ALLOCATOR_FRAGMENTATION_SHARE = 0.15
ALLOCATOR_FRAGMENTATION_SHARE_HIGH = 0.33


def reserved_bytes(allocated_bytes, fragmentation_share=ALLOCATOR_FRAGMENTATION_SHARE):
    """What the caching allocator reserves to hold `allocated_bytes` of tensors at its peak."""
    return allocated_bytes / (1 - fragmentation_share)
