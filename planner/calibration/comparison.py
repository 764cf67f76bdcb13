"""The predicted-vs-measured table: every quantity a profile measured, with the engine's uncalibrated prediction
(documented default efficiencies, the reference accelerator's catalog peaks) and its calibrated one (the fitted
efficiencies and device terms). Rows are grouped by what was measured: the ceilings (matmuls, the GEMM curve, copy
bandwidth, all-reduces), the proxy's phase times, its memory, and the runtime's memory outside tensors. No torch.
"""

from __future__ import annotations

from planner.calibration.predict import (
    GemmShape,
    ProxyGeometry,
    optimizer_seconds,
    predicted_seconds,
    predicted_train_seconds,
)
from planner.calibration.reference import Reference, fit_allreduce
from planner.calibration_record import Ceilings, ComparisonRow, GemmShapeFit, PhaseMeasurement
from planner.physics import communication, gemm_efficiency
from planner.physics import memory as base_memory
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency


def comparison_rows(
    ceilings: Ceilings,
    phases: list[PhaseMeasurement],
    ref: Reference,
    dtype: str,
    geometry: ProxyGeometry | None,
    efficiency: Efficiency,
    runtime: tuple[float, float] | None = None,
) -> list[ComparisonRow]:
    """Every measured quantity with the engine's uncalibrated and calibrated prediction.

    `runtime` = (measured non-tensor device memory, correction) on a GPU."""
    rows = [
        *_matmul_rows(ceilings, ref),
        *_copy_rows(ceilings, ref, efficiency),
        *_allreduce_rows(ceilings, ref, efficiency),
    ]
    if geometry is None:
        return rows
    for ph in phases:
        if ph.phase in ("prefill", "decode"):
            rows.append(_step_row(ph, ref, dtype, efficiency))
        else:
            rows += _train_rows(ph, ref, dtype, geometry, efficiency)
    for ph in phases:
        rows += _phase_memory_rows(ph, geometry)
    if runtime is not None:
        rows.append(_runtime_row(*runtime))
    return rows


# ---------------------------------------------------------------------------------------------
# ceilings


def _matmul_rows(ceilings: Ceilings, ref: Reference) -> list[ComparisonRow]:
    """The fastest matmul per dtype and shape against the catalog peak x the default efficiency, then each size
    the GEMM curve was fitted to."""
    d = DEFAULT_EFFICIENCY
    rows = []
    for dt in sorted({m.dtype for m in ceilings.matmul}):
        for shape, default in (("square", d.prefill_compute), ("skinny", d.decode_compute)):
            best = [m for m in ceilings.matmul if m.dtype == dt and m.shape == shape]
            if not best:
                continue
            top = max(best, key=lambda m: m.flops_per_second)
            rows.append(
                ComparisonRow(
                    quantity=f"matmul {dt} {shape} {top.m}x{top.n}x{top.k}",
                    phase="matmul",
                    unit="FLOP/s",
                    role="ceiling",
                    measured=top.flops_per_second,
                    predicted=ref.peak_flops(dt) * default,
                    note=f"catalog peak x default {'prefill' if shape == 'square' else 'decode'} efficiency",
                )
            )
    for gemm in ref.gemm_shapes:
        rows += _gemm_rows(ceilings, gemm, ref)
    return rows


def _gemm_rows(ceilings: Ceilings, gemm: GemmShapeFit, ref: Reference) -> list[ComparisonRow]:
    """Each square matmul the GEMM curve was fitted to: its time by the published ceiling and t0, and by the fitted."""
    peak = ref.peak_flops(gemm.dtype)
    table_ceiling = gemm_efficiency.gemm_ceiling(ref.gpu_id, gemm.dtype)
    rows = []
    for n in gemm.sizes:
        seconds = min(m.seconds for m in ceilings.matmul if m.dtype == gemm.dtype and m.shape == "square" and m.m == n)
        work = 2.0 * n**3
        rows.append(
            ComparisonRow(
                quantity=f"matmul {gemm.dtype} {n}x{n}x{n} time",
                phase="matmul",
                unit="s",
                role="fit",
                measured=seconds,
                predicted=work / (table_ceiling * peak) + ref.gemm_tail_seconds,
                predicted_calibrated=work / (gemm.ceiling * peak) + gemm.tail_seconds,
                note=f"2MNK / (ceiling x peak) + t0: published {table_ceiling:.1%} and "
                f"{ref.gemm_tail_seconds * 1e6:.2f} us; fitted {gemm.ceiling:.1%} and {gemm.tail_seconds * 1e6:.2f} us",
            )
        )
    return rows


def _copy_rows(ceilings: Ceilings, ref: Reference, efficiency: Efficiency) -> list[ComparisonRow]:
    copy = ceilings.bandwidth_bytes_per_second()
    if not copy:
        return []
    bw = ref.bandwidth_bytes_per_second
    size = next(b.buffer_bytes for b in ceilings.bandwidth if b.bytes_per_second == copy)
    return [
        ComparisonRow(
            quantity=f"copy bandwidth ({size >> 20} MiB buffer)",
            phase="bandwidth",
            unit="B/s",
            role="ceiling",
            measured=copy,
            predicted=bw * DEFAULT_EFFICIENCY.memory_bandwidth,
            predicted_calibrated=bw * efficiency.memory_bandwidth,
            note="catalog bandwidth x memory-bandwidth efficiency",
        )
    ]


def _allreduce_rows(ceilings: Ceilings, ref: Reference, efficiency: Efficiency) -> list[ComparisonRow]:
    if not ceilings.allreduce:
        return []
    d = DEFAULT_EFFICIENCY
    fitted_alpha = fit_allreduce(ceilings.allreduce, ref, d.communication).latency_seconds
    sizes = sorted({a.message_bytes for a in ceilings.allreduce})
    fit_sizes = {sizes[0], *sizes[-2:]}  # fit_allreduce: beta from the two largest, alpha from the smallest
    rows = []
    for a in sorted(ceilings.allreduce, key=lambda a: a.message_bytes):

        def allreduce(eff, latency=ref.link_latency_seconds, a=a):
            return float(
                communication.allreduce_seconds(
                    a.message_bytes, a.world_size, communication.Link(ref.link_bytes_per_second, latency), eff
                )
            )

        rows.append(
            ComparisonRow(
                quantity=f"all-reduce {a.message_bytes >> 20} MiB over {a.world_size} ranks",
                phase="allreduce",
                unit="s",
                role="fit" if a.message_bytes in fit_sizes else "holdout",
                measured=a.seconds,
                predicted=allreduce(d.communication),
                predicted_calibrated=allreduce(efficiency.communication, fitted_alpha),
                note="communication.allreduce_seconds (NCCL: the faster of ring and tree; calibrated with the "
                "fitted alpha and beta)",
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------
# phase times


def _step_row(ph: PhaseMeasurement, ref: Reference, dtype: str, efficiency: Efficiency) -> ComparisonRow:
    """A prefill or decode step (the overhead probe included) against `predicted_seconds`."""
    role = "fit" if ph.name in ("prefill", "decode", "overhead_probe") else "holdout"
    note = "max(FLOPs / (peak x eff), bytes / (bandwidth x eff)) + layers x overhead"
    if ph.name == "decode_holdout":
        note += "; this point chose decode's binding resource, its value was not fitted"
    what = (
        f"prefill {ph.tokens} tokens"
        if ph.phase == "prefill"
        else f"decode step, batch {ph.batch}, context {ph.context_tokens}"
    )
    if ph.name == "overhead_probe":
        what = f"per-layer overhead probe: {what}, narrow layers"
    peak, bw, shape = ref.peak_flops(dtype), ref.bandwidth_bytes_per_second, GemmShape.of(ref, dtype, ph.phase)
    return ComparisonRow(
        quantity=f"{what} ({ph.layers} layers)",
        phase=ph.phase,
        unit="s",
        role=role,
        measured=ph.seconds,
        predicted=predicted_seconds(ph.phase, ph.flops, ph.bytes, peak, bw, DEFAULT_EFFICIENCY, shape, ph.layers),
        predicted_calibrated=predicted_seconds(ph.phase, ph.flops, ph.bytes, peak, bw, efficiency, shape, ph.layers),
        note=note,
    )


def _train_rows(
    ph: PhaseMeasurement, ref: Reference, dtype: str, geometry: ProxyGeometry, efficiency: Efficiency
) -> list[ComparisonRow]:
    """The training step's forward + backward (fitted) and its AdamW step (held out)."""
    d = DEFAULT_EFFICIENCY
    peak, bw, shape = ref.peak_flops(dtype), ref.bandwidth_bytes_per_second, GemmShape.of(ref, dtype, "train")
    work = geometry.train_work(ph.batch, ph.context_tokens)
    fb = ph.breakdown_seconds.get("forward", 0.0) + ph.breakdown_seconds.get("backward", 0.0)
    opt = ph.breakdown_seconds.get("optimizer", 0.0)
    rows = []
    if fb > 0:
        rows.append(
            ComparisonRow(
                quantity=f"train forward+backward, {ph.batch} x {ph.context_tokens} tokens ({ph.layers} layers)",
                phase="train",
                unit="s",
                role="fit",
                measured=fb,
                predicted=predicted_train_seconds(work, peak, bw, d, shape, ph.layers),
                predicted_calibrated=predicted_train_seconds(work, peak, bw, efficiency, shape, ph.layers),
                note="training.step_time hardware FLOPs; elementwise_kernels bytes; microbatch_memory_bytes",
            )
        )
    if opt > 0:
        rows.append(
            ComparisonRow(
                quantity=f"AdamW step ({ph.layers} layers)",
                phase="train",
                unit="s",
                role="holdout",
                measured=opt,
                predicted=optimizer_seconds(work["optimizer_bytes"], bw, d),
                predicted_calibrated=optimizer_seconds(work["optimizer_bytes"], bw, efficiency),
                note="training.step_time.optimizer_step_bytes at the memory-bandwidth efficiency",
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------
# memory


def _phase_memory_rows(ph: PhaseMeasurement, geometry: ProxyGeometry) -> list[ComparisonRow]:
    """The fitted prefill, decode and training points' tensors by component, and their allocator peaks."""
    if ph.phase == "prefill" and ph.name == "prefill":
        predicted = {"weights": geometry.weight_bytes(), "kv_cache": geometry.kv_bytes(1, ph.tokens)}
        rows = _memory_rows(ph, predicted, f"prefill {ph.tokens} tokens")
        if ph.peak_memory_bytes is not None:
            total = sum(predicted.values()) + geometry.inference_activation_bytes(ph.tokens)
            rows.append(_peak_row(ph, ph.peak_memory_bytes, total, "weights + KV + inference_activation_bytes"))
        return rows
    if ph.phase == "decode" and ph.name == "decode":
        predicted = {"kv_cache": geometry.kv_bytes(ph.batch, ph.context_tokens + 1)}
        rows = _memory_rows(ph, predicted, f"decode batch {ph.batch}, {ph.context_tokens + 1} tokens")
        if ph.peak_memory_bytes is not None:
            total = geometry.weight_bytes() + predicted["kv_cache"] + geometry.inference_activation_bytes(ph.batch)
            rows.append(_peak_row(ph, ph.peak_memory_bytes, total, "weights + KV + inference_activation_bytes"))
        return rows
    if ph.phase == "train":
        predicted = geometry.training_memory(ph.batch, ph.context_tokens)
        rows = _memory_rows(
            ph,
            {k: v for k, v in predicted.items() if k != "weights"},
            f"train {ph.batch} x {ph.context_tokens} tokens",
        )
        if ph.peak_memory_bytes is not None:
            rows.append(
                _peak_row(
                    ph,
                    ph.peak_memory_bytes,
                    sum(predicted.values()),
                    "weights + gradients + optimizer states + saved activations",
                )
            )
        return rows
    return []


MEMORY_WORDS = {
    "weights": "weights",
    "kv_cache": "KV cache",
    "gradients": "gradients",
    "optimizer_states": "optimizer states (AdamW)",
    "saved_activations": "saved activations",
}


def _memory_rows(ph: PhaseMeasurement, predicted: dict[str, float], where: str) -> list[ComparisonRow]:
    rows = []
    for key, value in predicted.items():
        if key not in ph.tensor_bytes:
            continue
        rows.append(
            ComparisonRow(
                quantity=f"{MEMORY_WORDS[key]}, {where}",
                phase=ph.phase,
                unit="B",
                role="memory",
                measured=ph.tensor_bytes[key],
                predicted=value,
                predicted_calibrated=value,
                note="exact tensor bytes vs the engine's memory term",
            )
        )
    return rows


def _peak_row(ph: PhaseMeasurement, peak_bytes: float, predicted: float, formula: str) -> ComparisonRow:
    """`peak_bytes` is the phase's measured peak (`ph.peak_memory_bytes`, which callers have checked is known)."""
    return ComparisonRow(
        quantity=f"{ph.phase} peak allocated",
        phase=ph.phase,
        unit="B",
        role="memory",
        measured=float(peak_bytes),
        predicted=predicted,
        predicted_calibrated=predicted,
        note=f"torch max_memory_allocated vs {formula}",
    )


def _runtime_row(measured: float, correction: float) -> ComparisonRow:
    return ComparisonRow(
        quantity="runtime overhead outside tensors (CUDA context, libraries)",
        phase="runtime",
        unit="B",
        role="memory",
        measured=measured,
        predicted=base_memory.CUDA_CONTEXT_BYTES,
        predicted_calibrated=base_memory.CUDA_CONTEXT_BYTES + correction,
        note="device used - allocator reserved; the correction replaces the documented 0.5 GiB",
    )


__all__ = ["MEMORY_WORDS", "comparison_rows"]
