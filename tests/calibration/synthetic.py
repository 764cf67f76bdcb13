"""Measurements of imaginary devices with known "true" efficiencies. One follows the engine's roofline
exactly (fitting must invert it: a round trip); the other does not (compute and memory overlap only
partly), and its held-out points test what a fit predicts for shapes it never saw. No torch."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from planner.calibration.comparison import comparison_rows
from planner.calibration.fit import fit_efficiency
from planner.calibration.predict import GemmShape, ProxyGeometry, optimizer_seconds, predicted_seconds
from planner.calibration.proxy import probe_architecture, proxy_architecture
from planner.calibration.reference import Reference
from planner.calibration_record import (
    AllReduceMeasurement,
    BandwidthMeasurement,
    CalibrationRecord,
    Ceilings,
    DeviceInfo,
    MatmulMeasurement,
    PhaseMeasurement,
    ProfileSettings,
    ProxySpec,
    make_record_id,
)
from planner.model.catalog import resolve_model
from planner.physics import collectives
from planner.physics.efficiency import Efficiency
from planner.physics.gemm_efficiency import GEMMS_PER_LAYER

TRUE = Efficiency(
    prefill_compute=0.55,
    decode_compute=0.30,
    memory_bandwidth=0.70,
    communication=0.65,
    training_compute=0.45,
    layer_overhead_seconds=30e-6,
)
GPU = "h100-sxm"
DTYPE = "bf16"
LAYERS = 4


def _phase(name, phase, layers, batch, tokens, context, flops, moved, seconds, breakdown=None):
    return PhaseMeasurement(
        name=name,
        phase=phase,
        layers=layers,
        batch=batch,
        tokens=tokens,
        context_tokens=context,
        seconds=seconds,
        seconds_per_layer=[seconds / layers] * layers,
        median_seconds=seconds,
        reps=5,
        flops=flops,
        bytes=moved,
        tensor_bytes={},
        breakdown_seconds=breakdown or {},
    )


def engine_seconds(phase, flops, bytes_moved, peak, bandwidth, efficiency, layers=0):
    """The engine's own prediction on the reference GPU, with its GEMM ceiling ratio and kernel tail
    (`planner.physics.gemm_efficiency`), as `plan()` applies them there."""
    return predicted_seconds(
        phase,
        flops,
        bytes_moved,
        peak,
        bandwidth,
        efficiency,
        GemmShape.of(Reference.from_catalog(GPU), DTYPE, phase),
        layers,
    )


def partially_overlapping_seconds(phase, flops, bytes_moved, peak, bandwidth, efficiency, layers=0):
    """A device that is *not* the engine's roofline: compute and memory traffic overlap only partly
    (30% of the shorter one stays exposed), as on real kernels that neither stream nor compute at full
    rate while the other runs. Its held-out points are what an honest fit is tested on."""
    compute = flops / (peak * (efficiency.training_compute if phase == "train" else efficiency.prefill_compute))
    if phase == "decode":
        compute = flops / (peak * efficiency.decode_compute)
    # a GPU's GEMM kernels each pay their fixed tail (planner.physics.gemm_efficiency); training runs each 3 times
    compute += layers * GEMMS_PER_LAYER * (3 if phase == "train" else 1) * Reference.from_catalog(GPU).gemm_tail_seconds
    memory = bytes_moved / (bandwidth * efficiency.memory_bandwidth)
    overhead = layers * efficiency.layer_overhead_seconds if phase != "train" else 0.0
    return max(compute, memory) + 0.3 * min(compute, memory) + overhead


def measurements(true: Efficiency = TRUE, world_size: int = 2, device_seconds=engine_seconds):
    """`device_seconds(phase, flops, bytes, peak, bandwidth, efficiency, layers)` is the imaginary
    device's timing; the default is the engine's own roofline (a round trip, not a test of prediction)."""
    ref = Reference.from_catalog(GPU)
    peak, bw = ref.peak_flops(DTYPE), ref.bandwidth_bytes_per_second
    arch = proxy_architecture(resolve_model("llama-3.1-8b"), LAYERS)
    g = ProxyGeometry(arch, DTYPE)
    phases = []
    probe_g = ProxyGeometry(probe_architecture(resolve_model("llama-3.1-8b"), LAYERS), DTYPE)
    f, b = probe_g.decode_work(1, 16)
    phases.append(
        _phase(
            "overhead_probe",
            "decode",
            LAYERS,
            1,
            1,
            16,
            f,
            b,
            device_seconds("decode", f, b, peak, bw, true, LAYERS),
        )
    )
    for name, tokens in (("prefill", 2048), ("prefill_holdout", 512)):
        f, b = g.prefill_work(tokens)
        phases.append(
            _phase(name, "prefill", LAYERS, 1, tokens, 0, f, b, device_seconds("prefill", f, b, peak, bw, true, LAYERS))
        )
    for name, batch, context in (("decode", 16, 2048), ("decode_holdout", 64, 512)):
        f, b = g.decode_work(batch, context)
        phases.append(
            _phase(
                name,
                "decode",
                LAYERS,
                batch,
                batch,
                context,
                f,
                b,
                device_seconds("decode", f, b, peak, bw, true, LAYERS),
            )
        )
    work = g.train_work(1, 2048)
    # its norms, residual adds and activations run apart at the memory roofline (training.elementwise_kernels)
    fb = device_seconds("train", work["flops"], work["bytes"], peak, bw, true, LAYERS) + work["elementwise_bytes"] / (
        bw * true.memory_bandwidth
    )
    opt = optimizer_seconds(work["optimizer_bytes"], bw, true)
    phases.append(
        _phase(
            "train",
            "train",
            LAYERS,
            1,
            2048,
            2048,
            work["flops"],
            work["bytes"],
            fb + opt,
            {"forward": fb / 3, "backward": 2 * fb / 3, "optimizer": opt},
        )
    )
    # Ceilings a little above what the phases reach, as on a real device.
    ceilings = Ceilings(
        matmul=[
            MatmulMeasurement(
                dtype=DTYPE, shape="square", m=8192, n=8192, k=8192, seconds=2 * 8192**3 / (peak * 0.7), reps=5
            ),
            MatmulMeasurement(
                dtype=DTYPE, shape="skinny", m=16, n=8192, k=8192, seconds=2 * 16 * 8192**2 / (peak * 0.35), reps=5
            ),
        ],
        bandwidth=[BandwidthMeasurement(buffer_bytes=1 << 30, seconds=2 * (1 << 30) / (bw * 0.85), reps=5)],
        allreduce=[
            AllReduceMeasurement(
                backend="nccl",
                world_size=world_size,
                message_bytes=m,
                seconds=float(
                    collectives.allreduce_seconds(
                        m, world_size, ref.link_bytes_per_second, ref.link_latency_seconds, true.communication
                    )
                ),
                reps=5,
            )
            for m in (16 << 20, 256 << 20)
        ]
        if world_size > 1
        else [],
    )
    return ref, g, ceilings, phases


def synthetic_record(
    label: str = "synthetic H100", created: datetime | None = None, correction: float = 0.0
) -> CalibrationRecord:
    ref, g, ceilings, phases = measurements()
    fit = fit_efficiency(ceilings, phases, ref, DTYPE, g, label)
    rows = comparison_rows(ceilings, phases, ref, DTYPE, g, fit.efficiency)
    created = created or datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    arch = g.arch
    spec = ProxySpec(
        model_id="llama-3.1-8b",
        model_name="Llama 3.1 8B",
        architecture=arch,
        source_num_layers=32,
        source_hidden_size=arch.hidden_size,
        dtype=DTYPE,
        prefill_tokens=2048,
        holdout_prefill_tokens=512,
        decode_batch=16,
        decode_context_tokens=2048,
        holdout_decode_batch=64,
        holdout_decode_context_tokens=512,
        train_micro_batch=1,
        train_tokens=2048,
    )
    return CalibrationRecord(
        id=make_record_id("NVIDIA H100 80GB HBM3", created),
        label=label,
        created_at=created,
        device=DeviceInfo(
            kind="cuda",
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=85520809984,
            free_memory_bytes=80 << 30,
            device_count=2,
            torch_version="2.13.0",
            cuda_version="12.8",
        ),
        reference_gpu=GPU,
        reference_peak_flops_per_second=ref.peak_flops(DTYPE),
        reference_bandwidth_bytes_per_second=ref.bandwidth_bytes_per_second,
        reference_link_bytes_per_second=ref.link_bytes_per_second,
        settings=ProfileSettings(device="cuda"),
        dtype=DTYPE,
        ceilings=ceilings,
        proxy=spec,
        phases=phases,
        efficiency=fit.efficiency,
        efficiency_notes=fit.notes,
        runtime_overhead_correction_bytes=correction,
        predicted_vs_measured=rows,
    )


def fitted_record(
    base: CalibrationRecord | None = None,
    alpha: float = 10e-6,
    ceiling: float = 0.70,
    tail_seconds: float = 8e-6,
) -> CalibrationRecord:
    """`base` (the synthetic H100 record) with fitted device terms: the link's per-step latency alpha and a bf16
    GEMM curve (ceiling x peak, t0 per kernel), as a two-GPU profile with several matmul sizes stores them."""
    data = json.loads((base or synthetic_record()).model_dump_json(exclude={"mapped_to_any_gpu"}))
    data["link_latency_seconds"] = alpha
    data["gemm_shapes"] = [{"dtype": DTYPE, "ceiling": ceiling, "tail_seconds": tail_seconds, "sizes": [2048, 8192]}]
    return CalibrationRecord.from_json_data(data)
