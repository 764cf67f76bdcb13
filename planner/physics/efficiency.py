"""Efficiencies: the achieved / peak ratios every timing term divides by, with their sources.

One place for the documented defaults; a calibration replaces them with measured values.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Efficiency(BaseModel):
    """Achieved / peak ratios. Defaults are typical of well-tuned serving and training stacks on
    datacenter GPUs (vLLM/TensorRT-LLM GEMMs reach 60-70 % of dense peak on large prefills; decode
    kernels stream weights at 75-85 % of HBM bandwidth; NCCL reaches ~70-80 % of link bandwidth;
    Megatron-style training sustains 40-55 % model FLOPs utilization before communication)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_compute: float = Field(default=0.60, gt=0, le=1)
    decode_compute: float = Field(default=0.50, gt=0, le=1)
    memory_bandwidth: float = Field(default=0.80, gt=0, le=1)
    communication: float = Field(default=0.75, gt=0, le=1)
    training_compute: float = Field(default=0.55, gt=0, le=1)
    host_link: float = Field(default=0.80, gt=0, le=1)
    # Fixed cost per layer per forward step: kernel launches, synchronisation, small ops that neither
    # FLOPs nor bytes capture. It is what makes batch-1 decode slower than its bandwidth roofline.
    layer_overhead_seconds: float = Field(default=20e-6, ge=0, le=1e-2)
    source: str = "documented defaults"


DEFAULT_EFFICIENCY = Efficiency()
