"""Efficiencies: the achieved / peak ratios every timing term divides by, with their sources.

One place for the documented defaults; a calibration replaces them with measured values.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from planner.model.memo import by_identity

# Megatron-style training's sustained share of the dense peak on A100, communication aside (Narayanan et al. 2021,
# Table 1, GPT 1.7B-1T: 44-52 % of peak with communication): stated for the whole micro-batch compute.
TRAINING_EFFICIENCY_END_TO_END = 0.55
# The memory-bound elementwise kernels' seconds (`planner.training.elementwise_kernels`) over the rest of the compute
# at that figure in the runs it is stated for: the median over the ten GPT configurations of Narayanan et al. 2021
# Table 1 (A100, their TP / PP, sequence 2048, full recomputation, dropout, no sequence parallelism), computed by the
# planner from the configurations alone (5.9 % at 1.7B, 10.2 % at 18.4B on TP8, 2.6 % at 1T; median 6.1 %);
# tests/training/test_elementwise_kernels.py recomputes it. No measured step time enters it.
REFERENCE_ELEMENTWISE_SHARE = 0.061


class Efficiency(BaseModel):
    """Achieved / peak ratios. Defaults are typical of well-tuned serving and training stacks on
    datacenter GPUs (vLLM/TensorRT-LLM GEMMs reach 60-70 % of dense peak on large prefills; decode
    kernels stream weights at 75-85 % of HBM bandwidth; NCCL reaches ~70-80 % of link bandwidth;
    Megatron-style training sustains 40-55 % model FLOPs utilization before communication).

    The compute efficiencies (prefill, decode) are stated for GEMMs on the reference GPU, H100 SXM in BF16.
    `planner.physics.gemm_efficiency` carries them to other generations and shapes with published data: x the
    device's Maximum Achievable Matmul FLOPS / peak relative to H100's (Bekman, ml-engineering MAMF table: A100
    86.9 %, H100/H200 80.3 % BF16, H100 FP8 70.9 %, H200 FP8 73.4 %, B200 77.6 %, ...), plus 6.6 us per GEMM
    kernel (fitted to published B200 cuBLAS timings at 2048^3 and 4096^3), which is what makes small steps reach
    less of the peak than large ones. A calibration fits them on the user's device the same way, so it
    reproduces its measured steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_compute: float = Field(default=0.60, gt=0, le=1)
    # The same GEMMs as a prefill's: what makes a decode step's small GEMMs reach less of the peak is their
    # shape, which the per-kernel fixed time already charges (`planner.physics.gemm_efficiency`). Was 0.50
    # while a decode step took max(compute, memory) over all its kernels, which hid most of its GEMM time
    # behind its attention's KV read; with the kernel groups adding (`roofline.kernel_groups_seconds`) the
    # lower figure charged large decode batches twice for their small shapes. A calibration fits it apart.
    decode_compute: float = Field(default=0.60, gt=0, le=1)
    memory_bandwidth: float = Field(default=0.80, gt=0, le=1)
    communication: float = Field(default=0.75, gt=0, le=1)
    # The GEMMs' and the rest of a micro-batch's compute but its memory-bound elementwise kernels, which the plan
    # charges apart (`planner.training.elementwise_kernels`): the end-to-end figure with the reference runs'
    # elementwise share taken out (`TRAINING_EFFICIENCY_END_TO_END`, `REFERENCE_ELEMENTWISE_SHARE`): 0.586.
    training_compute: float = Field(
        default=TRAINING_EFFICIENCY_END_TO_END / (1 - REFERENCE_ELEMENTWISE_SHARE), gt=0, le=1
    )
    host_link: float = Field(default=0.80, gt=0, le=1)
    # Fixed cost per layer per forward step: kernel launches, synchronisation, small ops that neither
    # FLOPs nor bytes capture. It is what makes batch-1 decode slower than its bandwidth roofline.
    layer_overhead_seconds: float = Field(default=20e-6, ge=0, le=1e-2)
    # Per engine step, whatever the batch: the CPU work that sits between two forward passes and that
    # asynchronous scheduling does not hide (scheduling, input preparation, block tables). vLLM V1,
    # PR #42131 (2026-05, B200): "framework overhead (scheduling + input prep) ~0.4 ms per step",
    # ~30% of TPOT for short-output decode; measured, not fitted here.
    step_host_seconds: float = Field(default=0.4e-3, ge=0, le=0.1)
    # Per scheduled sequence per engine step: the scheduler's post-step bookkeeping (appending the sampled
    # token, stop checks, output objects). vLLM V1 Scheduler.update_from_output, PR #46112 micro-benchmark:
    # 0.142 ms at batch 128, 0.287 ms at batch 256 -> (0.287 - 0.142) / 128 = 1.1 us per sequence. A lower
    # bound: detokenisation and streaming in the API process are not in that loop.
    sequence_host_seconds: float = Field(default=1.1e-6, ge=0, le=1e-3)
    # Sampler (temperature, top-k / top-p over the full vocabulary) per sequence per vocabulary entry:
    # vLLM PR #40376 (FlashInfer top-k/top-p sampler, made the default), vocabulary 131,072, top-k over the
    # whole batch: 0.302 ms at batch 128, 1.124 ms at batch 512 -> (1.124 - 0.302) / (384 x 131,072)
    # = 1.6e-11 s per logit. Benchmarks that send no sampling parameters get the model's
    # generation_config (usually top-p), so every step pays it.
    sampler_seconds_per_logit: float = Field(default=1.6e-11, ge=0, le=1e-8)
    # Per request, once, before its first step: chat template + tokenisation + request set-up in the API
    # server. tt-inference-server issue #2173 (2026-02): a 131-token chat-completions encode took 1.32-1.40
    # ms in steady state (2.8 ms cold) -> 1.4 ms. Latency only: it overlaps other requests' GPU work.
    request_overhead_seconds: float = Field(default=1.4e-3, ge=0, le=1.0)
    # Routed experts (fused-MoE grouped GEMMs), from vLLM's benchmark_moe.py timings on H100 in vLLM PR #24700
    # (Mixtral-8x7B BF16 TP2 and Qwen3-30B-A3B FP8; arithmetic in planner/physics/moe_efficiency.py), the mean
    # of the two shapes: a fused-MoE call costs 29.4 us per MoE layer before its weights stream (routing,
    # alignment, activation, weighted sum and its two GEMMs' fixed time), streams routed-expert weights at
    # 0.60 of HBM peak (0.459 and 0.737) and runs routed-expert FLOPs at 0.22 of the dense peak in reference
    # (H100 BF16) terms (0.315 BF16; FP8 0.106 of its peak = 0.120). A plan scales the 0.22 to the experts' own
    # format where it has a figure (moe_efficiency.expert_compute_format_ratio), so fitting it moves both.
    moe_layer_seconds: float = Field(default=29.4e-6, ge=0, le=1e-2)
    moe_expert_bandwidth: float = Field(default=0.60, gt=0, le=1)
    moe_expert_compute: float = Field(default=0.22, gt=0, le=1)
    source: str = "documented defaults"


DEFAULT_EFFICIENCY = Efficiency()


N = TypeVar("N", float, np.ndarray)  # a plan's numbers, or a sweep's arrays of them


@dataclass(frozen=True, slots=True)
class EfficiencyValues(Generic[N]):
    """What the formulas read: `Efficiency`'s numbers as plain values, Python floats for one plan or numpy arrays
    of one value per row for a sweep (DESIGN rule 4), under the same names, so a formula reads
    `efficiency.prefill_compute` whichever it was given. Built from a validated `Efficiency` (`of`), or per row
    from two of them (`per_row`): never a pydantic model holding arrays. Field meanings and sources: `Efficiency`."""

    prefill_compute: N
    decode_compute: N
    memory_bandwidth: N
    communication: N
    training_compute: N
    host_link: N
    layer_overhead_seconds: N
    step_host_seconds: N
    sequence_host_seconds: N
    sampler_seconds_per_logit: N
    request_overhead_seconds: N
    moe_layer_seconds: N
    moe_expert_bandwidth: N
    moe_expert_compute: N
    source: str

    @staticmethod
    def of(efficiency: Efficiency | EfficiencyValues[float]) -> EfficiencyValues[float]:
        """The values of a validated `Efficiency` (built once per distinct record: it is frozen and hashable)."""
        return efficiency if isinstance(efficiency, EfficiencyValues) else _values_of(efficiency)

    @staticmethod
    def per_row(
        applies: np.ndarray, measured: Efficiency, default: Efficiency, source: str
    ) -> EfficiencyValues[np.ndarray]:
        """`measured`'s value on rows where `applies`, `default`'s elsewhere."""
        values = {
            name: np.where(applies, getattr(measured, name), getattr(default, name))
            for name in NUMERIC_EFFICIENCY_FIELDS
        }
        return EfficiencyValues(**values, source=source)


NUMERIC_EFFICIENCY_FIELDS = tuple(f.name for f in fields(EfficiencyValues) if f.name != "source")
# One list of names: the plain view carries every field of the validated model, no more, no fewer.
assert set(NUMERIC_EFFICIENCY_FIELDS) | {"source"} == set(Efficiency.model_fields), "EfficiencyValues drifted"


@by_identity
def _values_of(efficiency: Efficiency) -> EfficiencyValues[float]:
    return EfficiencyValues(
        **{name: getattr(efficiency, name) for name in NUMERIC_EFFICIENCY_FIELDS}, source=efficiency.source
    )


DEFAULT_EFFICIENCY_VALUES = EfficiencyValues.of(DEFAULT_EFFICIENCY)

# The serving engine's fixed costs (per step, per sequence, per logit, per request) and its fused-MoE kernel
# rates: published measurements, never fitted by the calibration's torch probe (it runs no scheduler, sampler,
# API server or fused-MoE kernel).
ENGINE_COST_FIELDS = (
    "step_host_seconds",
    "sequence_host_seconds",
    "sampler_seconds_per_logit",
    "request_overhead_seconds",
    "moe_layer_seconds",
    "moe_expert_bandwidth",
    "moe_expert_compute",
)


# What a formula may be given: a validated record or its plain values (a plan's floats or a sweep's arrays); both
# expose the same names.
EfficiencyFigures = Efficiency | EfficiencyValues
