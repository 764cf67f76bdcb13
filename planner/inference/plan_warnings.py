"""What an inference plan warns about: possible but risky, each a sentence saying what and why with its stable
code (planner.results.PlanWarning; DESIGN rule 5). Speculative decoding's warning is `explain.speculative_notes`'s,
a stream that could not be simulated is `plan._traffic_engine`'s."""

from __future__ import annotations

from planner.dtypes import (
    BYTES_PER_ELEMENT,
    FORMATS,
    high_precision_dtype,
    uses_weight_group_size,
    weight_bytes_per_element,
)
from planner.hardware.catalog import Accelerator
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import ModelArchitecture
from planner.model.notes import architecture_warnings
from planner.results import LOW_HEADROOM_FRACTION, MemoryBreakdown, PlanWarning
from planner.units import gib, percent, rate


def warnings_for(
    s: InferenceScenario, arch: ModelArchitecture, accel: Accelerator, memory: MemoryBreakdown
) -> list[PlanWarning]:
    """Possible but risky: each a sentence saying what and why, with its stable code."""
    return [
        *(PlanWarning("generic_architecture", w) for w in architecture_warnings(arch)),
        *_context_and_memory_warnings(s, arch, memory),
        *_precision_warnings(s, accel),
        *_layout_warnings(s, accel),
        *_workload_warnings(s),
    ]


def _context_and_memory_warnings(
    s: InferenceScenario, arch: ModelArchitecture, memory: MemoryBreakdown
) -> list[PlanWarning]:
    out = []
    if s.context_tokens > arch.max_context_tokens:
        out.append(
            PlanWarning(
                "context_over_max",
                f"prompt + output = {s.context_tokens:,} tokens exceeds {arch.name}'s maximum context of "
                f"{arch.max_context_tokens:,} tokens; the engine will refuse such requests.",
            )
        )
    if not memory.fits:
        out.append(
            PlanWarning(
                "does_not_fit",
                f"Does not fit: {gib(memory.total_bytes)} needed per GPU, {gib(memory.budget_bytes)} available "
                f"({percent(s.gpu_memory_utilization)} of {gib(memory.capacity_bytes)}).",
            )
        )
    elif memory.headroom_fraction < LOW_HEADROOM_FRACTION:
        out.append(
            PlanWarning(
                "low_headroom",
                f"Headroom is only {percent(memory.headroom_fraction)} of the memory budget: "
                "a longer prompt or a traffic burst will preempt sequences.",
            )
        )
    kv, weights = memory.components["kv_cache_bytes"], memory.components["weights_bytes"]
    if kv > weights:
        out.append(
            PlanWarning(
                "kv_exceeds_weights",
                f"KV cache ({gib(kv)}) is larger than the weights ({gib(weights)}) at this concurrency and context: "
                "a cluster sized for the weights alone runs out of memory long before it runs out of compute.",
            )
        )
    return out


def _precision_warnings(s: InferenceScenario, accel: Accelerator) -> list[PlanWarning]:
    """One rule for every format (Accelerator.dequantizes): a format with tensor cores elsewhere but not here."""
    out = []
    for label, dtype in (("weights", s.weight_dtype), ("KV cache", s.kv_cache_dtype)):
        if accel.dequantizes(dtype):
            core = FORMATS[dtype].tensor_core
            engines = f" Engines that cache K/V in {dtype}: {FORMATS[dtype].kv_engines}." if label == "KV cache" else ""
            out.append(
                PlanWarning(
                    "dequantized_format",
                    f"{accel.name} has no native {core} tensor cores: {label} in {dtype} only save memory and bandwidth; "
                    f"kernels dequantize to {high_precision_dtype(dtype)} and compute at that rate (less tested on this "
                    f"GPU).{engines}",
                )
            )
    return out


def _layout_warnings(s: InferenceScenario, accel: Accelerator) -> list[PlanWarning]:
    out = []
    link = accel.interconnect.name if accel.interconnect else "PCIe"
    if s.tensor_parallel > 1 and "PCIe" in link:
        out.append(
            PlanWarning(
                "tensor_parallel_over_pcie",
                f"{accel.name} has no NVLink-class interconnect: tensor-parallel all-reduces run over {link}.",
            )
        )
    if s.tensor_parallel > accel.gpus_per_node:
        out.append(
            PlanWarning(
                "tensor_parallel_across_nodes",
                f"tensor_parallel={s.tensor_parallel} spans more than the {accel.gpus_per_node} GPUs of a node: "
                "its all-reduces cross the network "
                f"({rate(accel.scale_out_bandwidth_bytes_per_second, 'B/s')} per GPU), every layer, every step.",
            )
        )
    if s.concurrency % s.replicas:
        out.append(
            PlanWarning(
                "uneven_replicas",
                f"concurrency {s.concurrency} does not split evenly over {s.replicas} replicas; "
                "the busiest replica is planned.",
            )
        )
    return out


def _workload_warnings(s: InferenceScenario) -> list[PlanWarning]:
    out = []
    if s.prefix_cache_hit_rate > 0:
        out.append(
            PlanWarning(
                "prefix_cache_assumed",
                f"A {percent(s.prefix_cache_hit_rate)} prefix-cache hit rate is assumed; TTFT and prefill "
                "throughput depend on it holding in production.",
            )
        )
    if uses_weight_group_size(s.weight_dtype) and s.weight_group_size < 64:
        packed = BYTES_PER_ELEMENT[s.weight_dtype]
        metadata = weight_bytes_per_element(s.weight_dtype, s.weight_group_size) - packed
        out.append(
            PlanWarning(
                "small_weight_group",
                f"{s.weight_dtype} group size {s.weight_group_size} adds {percent(metadata / packed)} metadata over the "
                "packed weights.",
            )
        )
    return out
