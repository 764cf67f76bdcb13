"""Serving runtimes as data: how each engine sizes its KV pool and what it reserves before it.

A `RuntimeProfile` records one engine version's budget rule, read from the engine's own code (file and
commit in `sources`). The terms below size its reserves per GPU; `planner.inference.memory` adds them to the
weights, and whatever the budget leaves is the KV pool. Every term broadcasts over numpy arrays (the sweep
calls the same functions).

Five budget rules (`RuntimeProfile.budget_kind`), one per engine family, each read from the engine's code:

- "profiled" (vLLM V1, vLLM v0): budget = gpu_memory_utilization x capacity, holding weights, the profiling
  run's torch peak and (V1) the non-torch memory that grows during it; the KV pool is what is left.
- "static_pool" (SGLang): mem_fraction_static x the memory free after start-up is a static pool of weights and
  KV; activations, CUDA graphs and the custom all-reduce buffers live in the other (1 - fraction)
  (`static_pool_reserve_bytes`).
- "free_fraction" (TensorRT-LLM): after a profiling run, KV = free_gpu_memory_fraction x (capacity - the run's
  peak of weights, activations and non-torch memory); the rest stays free (`free_fraction_reserve_bytes`).
- "device" (HF transformers `generate()`): no pool and no fraction: every sequence's cache is a contiguous tensor
  of its full length, and the whole prompt's activations are held during prefill; it fits if all fits the GPU.
- "preallocated" (llama.cpp): the KV cache of n_ctx cells is allocated at start-up for the whole context, plus
  compute buffers reserved for the worst-case graph (`compute_buffer_bytes`).

A runtime that keeps memory outside its pool names it (`reserve_component`): the memory bar shows it by name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from planner.arrays import Flag, Number, maximum, minimum, where
from planner.model.architecture import ModelArchitecture
from planner.physics import memory as mem
from planner.physics.schedulers import (
    SGLANG,
    SINGLE_BATCH,
    TENSORRT_LLM,
    VLLM_PAPER,
    VLLM_V0,
    VLLM_V1,
    SchedulerPolicy,
    resolve_runtime,
)

GIB = 1 << 30

RuntimeName = Literal[
    "vllm", "vllm@0.6", "vllm@0.1", "sglang", "tensorrt-llm", "tensorrt-llm-engine", "hf-transformers", "llama.cpp"
]
BudgetKind = Literal["profiled", "static_pool", "free_fraction", "device", "preallocated"]
DEFAULT_RUNTIME: RuntimeName = "vllm"


@dataclass(frozen=True, slots=True)
class RuntimeProfile:
    """One serving engine's memory accounting, per GPU.

    KV pool = gpu_memory_utilization x device memory - weights - the torch peak of the engine's profiling
    run (the larger of the activations of one step of max_num_batched_tokens tokens and the sampler's fp32
    copies of the logits of max_num_seqs rows) - the non-torch memory the budget counts
    (`non_torch_bytes_by_tensor_parallel`).
    """

    name: str
    title: str
    version: str
    sources: tuple[str, ...]  # repository@commit path: the code the rule was read from
    budget_rule: str  # one sentence: what the budget covers and what it leaves outside
    # fp32 [rows, vocab] tensors alive at once in the sampler of the profiling run (logits, scaled logits,
    # probabilities, sampling noise / log-probabilities): the reserve grows with the vocabulary, not the model.
    sampler_fp32_copies: int
    # (smallest tensor_parallel, bytes per GPU) steps: non-torch memory that grows during the profiling run and
    # so is charged to the budget (NCCL channel buffers connect lazily on the first collective, custom
    # all-reduce buffers). Empty: the engine does not count non-torch memory at all.
    non_torch_bytes_by_tensor_parallel: tuple[tuple[int, float], ...]
    budget_kind: BudgetKind = "profiled"
    # The engine setting the scenario's gpu_memory_utilization stands for (None: the engine has no such share).
    fraction_setting: str | None = "gpu_memory_utilization"
    # The component (a `*_bytes` key) that holds the memory the runtime keeps outside its KV budget, if any.
    reserve_component: str | None = None
    # KV tokens per block: None = the scenario's kv_block_tokens (paged engines whose block size is a setting).
    kv_block_tokens: int | None = None
    # Whether tensor-parallel all-reduces can use custom peer-memory kernels (one-shot / two-shot) inside an
    # NVLink-class domain (planner.physics.collectives); NCCL alone otherwise.
    custom_allreduce: bool = True
    # Tokens of the step whose activations the engine reserves (None: the scenario's prefill chunk).
    reserved_step_tokens: int | None = None
    # The engine's per-step CPU work (scheduling, input preparation, per-sequence bookkeeping) runs while the GPU
    # executes the previous step, so none of it lengthens a step (`inference.steps.scheduler_seconds`).
    host_work_overlapped: bool = False
    # Where the per-step, per-sequence, sampler and per-request costs (`efficiency.Efficiency`) come from for this
    # engine: said next to the plan's numbers.
    host_costs_source: str = "vLLM V1 measurements (Efficiency: step_host_seconds, sequence_host_seconds, sampler)"
    # How the release batches, admits and evicts (`planner.physics.schedulers`): what the traffic simulation runs.
    scheduler: SchedulerPolicy = VLLM_V1
    # The release's fused-MoE kernels: "current" (the published rates of `physics.moe_efficiency`) or "early-2025"
    # (before tuned block-FP8 configs and DeepGEMM: block-scaled FP8 experts stream at vLLM PR #13932's rate).
    fused_moe_kernels: Literal["current", "early-2025"] = "current"
    # Whether the release's MLA backend keeps absorbed decode weights beside the checkpoint's projections
    # (`memory.mla_absorbed_weight_bytes`; vLLM v0.7.1-v0.7.x, removed in v0.8.0).
    mla_absorbed_weights: bool = False
    # The block-scaled FP8 linear kernel the release runs on Hopper (`gemm_efficiency.BLOCK_FP8_SMALL_M_GEMM_SECONDS`):
    # vLLM V1 DeepGEMM (vllm/envs.py VLLM_USE_DEEP_GEMM defaults to "1"), the V0 releases vLLM's Triton
    # w8a8_block_fp8_matmul, SGLang DeepGEMM (assumed: its JIT DeepGEMM for DeepSeek-style checkpoints on Hopper),
    # transformers its Triton port of vLLM's kernel (assumed). None: no published small-M figure for the engine's
    # own kernels (TensorRT-LLM, llama.cpp), so no floor.
    block_fp8_linear_kernel: Literal["triton", "cutlass", "deepgemm"] | None = "deepgemm"


RUNTIMES: dict[str, RuntimeProfile] = {
    "vllm": RuntimeProfile(
        name="vllm",
        title="vLLM V1",
        version="as read at commit 35d5cda (v0.12-era V1 engine); v0.21 and later also reserve CUDA graphs (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), not modelled",
        sources=(
            "vllm-project/vllm@35d5cda123ec vllm/v1/worker/gpu_worker.py Worker.init_device / "
            "determine_available_memory: requested = total x gpu_memory_utilization, snapshot taken after NCCL "
            "init; available KV = requested - non_kv_cache_memory",
            "vllm-project/vllm@a6d5c39009eb vllm/utils/mem_utils.py memory_profiling: non_kv_cache_memory = "
            "weights + torch_peak_increase + non_torch_increase",
            "vllm/v1/sample/sampler.py + ops/topk_topp_sampler.py random_sample: fp32 logits, temperature-scaled "
            "logits, softmax probs and the exponential noise q = torch.empty_like(probs)",
            "non-torch growth per GPU from vLLM logs quoted in issue 13 (~0.25 GiB at TP1, ~2.1 GiB at TP2-4, "
            "~5.7 GiB at TP8 on H200); not re-measured here",
        ),
        budget_rule="the budget covers weights, the profiling run's torch peak and the non-torch memory that "
        "grows during it; the CUDA context, NCCL's start-up buffers and CUDA graphs sit outside it, in the "
        "1 - gpu_memory_utilization share",
        sampler_fp32_copies=4,
        non_torch_bytes_by_tensor_parallel=((1, 0.25 * GIB), (2, 2.1 * GIB), (8, 5.7 * GIB)),
    ),
    "vllm@0.1": RuntimeProfile(
        name="vllm@0.1",
        title="vLLM v0.1-0.5 (the PagedAttention paper's engine; 'vllm-v0' in links before 2026-12)",
        version="vLLM v0.1.x-v0.2.x (SOSP'23 paper era)",
        sources=(
            "vllm-project/vllm v0.1.x vllm/worker/worker.py Worker.profile_num_available_blocks: peak = "
            "torch.cuda.max_memory_allocated() after a profiling run of max_num_batched_tokens over max_num_seqs; "
            "num_gpu_blocks = (total_gpu_memory x gpu_memory_utilization - peak) // block bytes (the same code "
            "survives in forks, e.g. sarathi-serve's worker)",
            "vllm v0.1.x vllm/model_executor/layers/sampler.py: logits, softmax(dtype=float) probs, log(probs)",
        ),
        budget_rule="the budget covers the torch peak of the profiling run (weights, activations, sampler) and "
        "nothing else: the CUDA context, NCCL buffers and CUDA graphs are never counted",
        sampler_fp32_copies=3,
        non_torch_bytes_by_tensor_parallel=(),
        scheduler=VLLM_PAPER,
        fused_moe_kernels="early-2025",
        block_fp8_linear_kernel="triton",
    ),
    "sglang": RuntimeProfile(
        name="sglang",
        title="SGLang",
        version="as read at commit 001ccef (2025, v0.5-era SRT runtime)",
        sources=(
            "sgl-project/sglang@001ccef0072a python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py "
            "profile_max_num_token: rest_memory = available_gpu_memory (after the weights load) - "
            "total_gpu_memory x (1 - mem_fraction_static); max tokens = rest_memory // cell_size (the same rule in "
            "model_runner.py profile_max_num_token of earlier releases)",
            "total_gpu_memory is the free memory measured after torch.distributed / NCCL start-up (min over ranks), "
            "so the CUDA context sits outside both shares",
            "CUDA context and NCCL start-up bytes: planner/physics/memory.py CUDA_CONTEXT_BYTES and "
            "COMMUNICATION_BUFFER_BYTES (documented defaults, not re-measured for SGLang)",
        ),
        budget_rule="mem_fraction_static x the memory free after start-up is a static pool of weights and KV "
        "cache; activations, CUDA graphs and the custom all-reduce buffers use the other (1 - fraction), shown as "
        "'static pool reserve'",
        sampler_fp32_copies=0,
        non_torch_bytes_by_tensor_parallel=((1, 0.5 * GIB), (2, 0.75 * GIB)),
        budget_kind="static_pool",
        fraction_setting="mem_fraction_static",
        reserve_component="static_pool_reserve_bytes",
        kv_block_tokens=1,  # server_args page_size defaults to 1: a token-granular pool
        host_work_overlapped=True,
        scheduler=SGLANG,
        host_costs_source="SGLang's overlap (zero-overhead) batch scheduler, on by default since v0.4, prepares the "
        "next batch while the GPU runs this one (lmsys.org/blog/2024-12-04-sglang-v0-4, #zero-overhead-batch-"
        "scheduler): no per-step CPU time; sampler and per-request costs are vLLM V1's measurements, assumed",
    ),
    "tensorrt-llm": RuntimeProfile(
        name="tensorrt-llm",
        title="TensorRT-LLM (PyTorch backend)",
        version="v0.20-v1.0-era PyTorch backend (trtllm-serve / trtllm-bench, KvCacheConfig default fraction 0.9)",
        sources=(
            "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py cal_max_tokens: available_kv_mem = "
            "(total_gpu_memory - peak_memory + alloc_kv_tokens x kv_size_per_token) x fraction, peak_memory = the "
            "torch + non-torch peak of a profiling run of max_num_tokens tokens with a small KV cache of "
            "alloc_kv_tokens (added back); get_fraction_from_executor_config: free_gpu_memory_fraction, 0.9 if unset",
            "tensorrt_llm/llmapi/llm_args.py KvCacheConfig.free_gpu_memory_fraction (default 0.9); tokens_per_block "
            "32 (the KV block size of the same releases)",
            "non-torch memory in the peak: the CUDA context (planner/physics/memory.py CUDA_CONTEXT_BYTES, 0.5 GiB; "
            "total - free counts it) plus the NCCL / custom all-reduce growth vLLM logs show for the same libraries "
            "(0.25 GiB at TP1, 2.1 GiB at TP2-4, 5.7 GiB at TP8; issue 13), not re-measured for TensorRT-LLM; the "
            "sampler's fp32 logits of the profiling batch: one copy (assumed)",
        ),
        budget_rule="KV = free_gpu_memory_fraction x (memory - the profiling run's peak of weights, activations, "
        "logits and non-torch memory); the other (1 - fraction) of that free memory stays unallocated, shown as "
        "'free memory reserve'",
        sampler_fp32_copies=1,
        non_torch_bytes_by_tensor_parallel=((1, 0.75 * GIB), (2, 2.6 * GIB), (8, 6.2 * GIB)),
        budget_kind="free_fraction",
        fraction_setting="free_gpu_memory_fraction",
        reserve_component="free_memory_reserve_bytes",
        kv_block_tokens=32,
        host_work_overlapped=True,
        scheduler=TENSORRT_LLM,
        host_costs_source="TensorRT-LLM's overlap scheduler, enabled by default, checks stop criteria, updates "
        "responses and schedules the next batch while the GPU runs (nvidia.github.io/TensorRT-LLM, features/"
        "overlap-scheduler): no per-step CPU time; sampler and per-request costs are vLLM V1's measurements, assumed",
        block_fp8_linear_kernel=None,
    ),
    "hf-transformers": RuntimeProfile(
        name="hf-transformers",
        title="Hugging Face transformers generate()",
        version="transformers 4.45-4.5x (DynamicCache, logits of the last position only)",
        sources=(
            "huggingface/transformers src/transformers/cache_utils.py DynamicCache.update: each layer's keys and "
            "values are one contiguous tensor per batch, grown with torch.cat along the sequence (no paging, no "
            "pool, padded to the longest sequence)",
            "src/transformers/generation/utils.py GenerationMixin._sample: the prompt goes through one forward "
            "(no chunking); next_token_logits = outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32), then "
            "softmax probabilities when sampling (two fp32 copies over batch x vocab)",
            "CUDA context and NCCL bytes: planner/physics/memory.py CUDA_CONTEXT_BYTES and COMMUNICATION_BUFFER_BYTES",
        ),
        budget_rule="no budget fraction and no paging: every sequence holds a contiguous cache of its full "
        "length, the whole prompt's activations are live during prefill, and the plan fits if everything fits in "
        "the GPU's memory",
        sampler_fp32_copies=2,
        non_torch_bytes_by_tensor_parallel=((1, 0.5 * GIB), (2, 0.75 * GIB)),
        budget_kind="device",
        fraction_setting=None,
        kv_block_tokens=1,
        custom_allreduce=False,  # tp_plan="auto" all-reduces through torch.distributed (NCCL)
        scheduler=SINGLE_BATCH,
        host_costs_source="vLLM V1's measurements, assumed: no per-step figure is published for generate()",
        block_fp8_linear_kernel="triton",
    ),
    "llama.cpp": RuntimeProfile(
        name="llama.cpp",
        title="llama.cpp (llama-server, CUDA)",
        version="2025 releases (b5000-era llama_context / llama_kv_cache; n_ubatch 512, f16 KV, flash attention)",
        sources=(
            "ggml-org/llama.cpp src/llama-context.cpp llama_context::llama_context: 'init scheduler and compute "
            "buffers, reserve worst-case graphs' for n_ubatch tokens (default 512) at the full n_ctx; "
            "output_reserve: n_seq_max x n_vocab fp32 logits (as vendored in ollama/ollama "
            "llama/llama.cpp/src/llama-context.cpp)",
            "src/llama-kv-cache.cpp: K and V tensors of n_ctx cells per layer (type_k / type_v f16 by default) "
            "allocated when the context is created; llama-server --parallel splits n_ctx among its slots",
            "CUDA context: planner/physics/memory.py CUDA_CONTEXT_BYTES",
        ),
        budget_rule="the KV cache of the whole context (n_ctx = sequences x context) is allocated up front, with "
        "compute buffers for the worst-case graph of one 512-token micro-batch and its fp32 logits, shown as "
        "'compute buffers'; no budget fraction: it fits if everything fits in the GPU's memory",
        sampler_fp32_copies=0,
        non_torch_bytes_by_tensor_parallel=((1, 0.5 * GIB),),
        budget_kind="preallocated",
        fraction_setting=None,
        reserve_component="compute_buffers_bytes",
        kv_block_tokens=1,
        custom_allreduce=False,
        reserved_step_tokens=512,
        scheduler=SINGLE_BATCH,
        host_costs_source="vLLM V1's measurements, assumed: no per-step figure is published for llama-server",
        block_fp8_linear_kernel=None,
    ),
}


# TensorRT-LLM's earlier TensorRT-engine releases (v0.x C++ batch manager, the H100-vs-A100 blog's v0.5.0): the
# same free-memory-fraction budget, but no overlap scheduler (it came with the PyTorch backend's PyExecutor).
RUNTIMES["tensorrt-llm-engine"] = replace(
    RUNTIMES["tensorrt-llm"],
    name="tensorrt-llm-engine",
    title="TensorRT-LLM (TensorRT engines, v0.x)",
    version="v0.5-v0.x TensorRT-engine releases (C++ GptManager / batch manager, kv_cache_free_gpu_mem_fraction)",
    host_work_overlapped=False,
    host_costs_source="vLLM V1's measurements, assumed: these releases had no overlap scheduler and publish no "
    "per-step figure",
)

# vLLM's V0 engine of v0.6-v0.7 (the default until v0.8 made V1 the default): the memory rule is read as V1's (the
# same memory_profiling of weights, torch peak and non-torch growth; not re-read at a v0.6 commit), the scheduler
# is V0's (block manager watermark; chunked prefill off for MLA models), and per-step CPU work is not overlapped.
RUNTIMES["vllm@0.6"] = replace(
    RUNTIMES["vllm"],
    name="vllm@0.6",
    title="vLLM V0 engine (v0.6-v0.7)",
    version="v0.6.0-v0.7.3 (V0 LLMEngine; V1 was opt-in with VLLM_USE_V1=1 until v0.8.0); MLA models are read as "
    "v0.7.1-v0.7.3, the V0 releases with vLLM's MLA backend (before v0.7.1 DeepSeek ran without it)",
    scheduler=VLLM_V0,
    fused_moe_kernels="early-2025",
    mla_absorbed_weights=True,
    block_fp8_linear_kernel="triton",
    host_costs_source="vLLM V1's measurements, assumed: V0's per-step CPU time was larger (not modelled)",
)


def runtime_profile(name: str) -> RuntimeProfile:
    """The profile of a runtime key (`schedulers.resolve_runtime` turns `engine@version` and old names into one)."""
    profile = RUNTIMES.get(name)  # a scenario's runtime is already a key: resolve only what is written otherwise
    return profile if profile is not None else RUNTIMES[str(resolve_runtime(name))]


def kv_block_tokens(profile: RuntimeProfile, scenario_block_tokens):
    """KV tokens per block under this runtime: its own block size, or the scenario's for engines where it is a
    setting (vLLM's block_size)."""
    return scenario_block_tokens if profile.kv_block_tokens is None else profile.kv_block_tokens


def static_pool_reserve_bytes(fraction, capacity_bytes, before_pool_bytes):
    """SGLang, per GPU: the share outside the static pool, (1 - mem_fraction_static) x the memory free when the
    pool is sized (capacity - what start-up took: CUDA context, NCCL); activations, CUDA graphs and the custom
    all-reduce buffers live there (model_runner_kv_cache_mixin.py profile_max_num_token)."""
    return (1 - fraction) * (capacity_bytes - before_pool_bytes)


def free_fraction_reserve_bytes(fraction, capacity_bytes, peak_bytes):
    """TensorRT-LLM, per GPU: what free_gpu_memory_fraction leaves unallocated, (1 - fraction) x (capacity - the
    profiling run's peak) (_util.py cal_max_tokens). Never negative."""
    return (1 - fraction) * maximum(capacity_bytes - peak_bytes, 0.0)


def compute_buffer_bytes(
    arch: ModelArchitecture, tensor_parallel, ubatch_tokens, sequences, activation_bytes_per_element
) -> Number:
    """llama.cpp, per GPU: the compute buffer reserved for the worst-case graph of one micro-batch of
    `ubatch_tokens` tokens (its widest layer moment, `memory.inference_activation_bytes`, plus the graph's fp32
    logits of every position) and the output buffer of fp32 logits for `sequences` rows (n_seq_max)."""
    graph = mem.inference_activation_bytes(arch, tensor_parallel, ubatch_tokens, activation_bytes_per_element)
    return graph + mem.logits_bytes(arch, ubatch_tokens) + mem.logits_bytes(arch, sequences)


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """What a runtime holds per GPU besides the weights and the KV cache, and the budget both must fit."""

    activations_bytes: Number
    logits_bytes: Number
    runtime_overhead_bytes: Number
    reserve_bytes: Number  # under `RuntimeProfile.reserve_component` (0 for runtimes without one)
    budget_bytes: Number


@dataclass(frozen=True, slots=True)
class RuntimeMemoryInputs:
    """What a runtime sizes its reserves per GPU from: the device's budget and the load one engine step sets.
    Fields broadcast (a sweep passes arrays)."""

    tensor_parallel: Number
    capacity_bytes: Number  # the device's memory
    fraction: Number  # the scenario's gpu_memory_utilization (`RuntimeProfile.fraction_setting`)
    is_accelerator: Flag
    weights_bytes: Number  # per GPU
    prefill_chunk_tokens: Number  # max_num_batched_tokens
    decode_rows: Number  # sequences per decode step on one stage
    sequences: Number  # per replica
    prompt_tokens: Number
    activation_bytes_per_element: Number
    correction_bytes: Number = 0.0  # a calibration's correction to the non-torch memory


def runtime_memory(profile: RuntimeProfile, arch: ModelArchitecture, inputs: RuntimeMemoryInputs) -> RuntimeMemory:
    """The runtime's reserves per GPU under its `budget_kind` (the module docstring gives each rule).

    `inputs.fraction` is the scenario's gpu_memory_utilization, read as the runtime's own share
    (`RuntimeProfile.fraction_setting`); `inputs.correction_bytes` is a calibration's memory correction, added to
    the non-torch memory. Runtimes other than "profiled" budget the whole device: their shares become named
    reserves, so `weights + KV + reserves <= capacity` is the same inequality the engine solves for its KV pool."""
    i = inputs
    tensor_parallel, capacity_bytes, fraction = i.tensor_parallel, i.capacity_bytes, i.fraction
    prefill_chunk_tokens, decode_rows, sequences = i.prefill_chunk_tokens, i.decode_rows, i.sequences
    bytes_per_activation = i.activation_bytes_per_element
    overhead = non_torch_bytes(profile, i.is_accelerator, tensor_parallel) + i.correction_bytes
    kind = profile.budget_kind
    if kind == "static_pool":
        reserve = static_pool_reserve_bytes(fraction, capacity_bytes, overhead)
        return RuntimeMemory(0.0, 0.0, overhead, reserve, capacity_bytes)
    if kind == "preallocated":
        ubatch = profile.reserved_step_tokens or prefill_chunk_tokens
        reserve = compute_buffer_bytes(arch, tensor_parallel, ubatch, sequences, bytes_per_activation)
        return RuntimeMemory(0.0, 0.0, overhead, reserve, capacity_bytes)
    if kind == "device":
        # generate() runs the whole batch's prompts in one forward: sequences x prompt tokens (or the decode rows)
        step_tokens = maximum(sequences * i.prompt_tokens, decode_rows)
    else:
        step_tokens = profiled_step_tokens(prefill_chunk_tokens, decode_rows)
    forward = mem.inference_activation_bytes(arch, tensor_parallel, step_tokens, bytes_per_activation)
    rows = sequences if kind == "device" else sampler_rows(sequences, prefill_chunk_tokens)
    logits = sampler_excess_bytes(forward, sampler_peak_bytes(profile, arch, rows))
    if kind == "free_fraction":
        peak = i.weights_bytes + forward + logits + overhead
        reserve = free_fraction_reserve_bytes(fraction, capacity_bytes, peak)
        return RuntimeMemory(forward, logits, overhead, reserve, capacity_bytes)
    if kind == "device":
        return RuntimeMemory(forward, logits, overhead, 0.0, capacity_bytes)
    return RuntimeMemory(forward, logits, overhead, 0.0, fraction * capacity_bytes)


def profiled_step_tokens(max_num_batched_tokens, decode_rows):
    """Tokens of the profiling run's forward step: max_num_batched_tokens (the engine profiles its largest
    step whatever the workload), or the decode batch if a scenario asks for more rows than that."""
    return where(decode_rows > max_num_batched_tokens, decode_rows, max_num_batched_tokens)


def sampler_rows(max_num_seqs, max_num_batched_tokens):
    """Rows the profiling run samples: min(max_num_seqs, max_num_batched_tokens) (vLLM V1
    compile_or_warm_up_model / profile_run)."""
    return minimum(max_num_seqs, max_num_batched_tokens)


def sampler_peak_bytes(profile: RuntimeProfile, arch: ModelArchitecture, rows) -> Number:
    """The sampler's peak in the profiling run, per GPU: `sampler_fp32_copies` fp32 tensors of rows x vocab
    (logits are gathered to the whole vocabulary on every TP rank)."""
    return profile.sampler_fp32_copies * mem.logits_bytes(arch, rows)


def sampler_excess_bytes(forward_peak_bytes, sampler_bytes):
    """What the sampler adds to the profiling run's torch peak beyond the forward pass: max(sampler - forward, 0).
    The run's peak is max(forward, sampler), not their sum: the forward's per-layer intermediates are freed
    before the logits are sampled (only the last hidden states survive), so a breakdown that charges the
    forward peak as activations charges only this excess to the sampler."""
    return maximum(sampler_bytes - forward_peak_bytes, 0.0)


def non_torch_bytes(profile: RuntimeProfile, is_accelerator, tensor_parallel) -> Number:
    """Non-torch memory the runtime charges to its budget, per GPU: the step of
    `non_torch_bytes_by_tensor_parallel` for this TP (none on a CPU device)."""
    value: Number = 0.0
    for smallest_tp, step_bytes in profile.non_torch_bytes_by_tensor_parallel:
        value = where(tensor_parallel >= smallest_tp, step_bytes, value)
    return where(is_accelerator, value, 0.0)
