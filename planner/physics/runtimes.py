"""Serving runtimes as data: how each engine sizes its KV pool and what it reserves before it.

A `RuntimeProfile` records one engine version's budget rule, read from the engine's own code (file and
commit in `sources`). The terms below size its reserves per GPU; `planner.inference.memory` adds them to the
weights, and whatever the budget leaves is the KV pool. Every term broadcasts over numpy arrays (the sweep
calls the same functions).

Only engines whose accounting was read from their code are listed; SGLang (`mem_fraction_static`),
TensorRT-LLM (`free_gpu_memory_fraction` of the memory left after the engine loads), HF `generate()` (no
paging) and llama.cpp (a fixed `n_ctx`) budget differently and are not modelled yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planner.arrays import Number, maximum, minimum, where
from planner.model.architecture import ModelArchitecture
from planner.physics import memory as mem

GIB = 1 << 30

RuntimeName = Literal["vllm", "vllm-v0"]
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
    "vllm-v0": RuntimeProfile(
        name="vllm-v0",
        title="vLLM v0.1-0.2 (the PagedAttention paper's engine)",
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
    ),
}


def runtime_profile(name: str) -> RuntimeProfile:
    return RUNTIMES[name]


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
