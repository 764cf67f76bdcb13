"""From measurements to a calibration: efficiency factors fitted to the proxy's phases. The engine's predictions
they invert are `planner.calibration.predict`, the reference accelerator and the device terms (GEMM curve, link
alpha and beta) `planner.calibration.reference`, the predicted-vs-measured table `planner.calibration.comparison`.
No torch.

Fitting, in order (each step uses what the previous ones fixed):

0. per-layer overhead (`layer_overhead_seconds`, the fixed launch/synchronisation cost per layer per
   forward step): a decode step of one token through a very narrow copy of the proxy layers, where FLOPs
   and bytes are negligible, minus its (tiny) roofline time;
1. memory bandwidth and decode compute from the decode step minus its overhead: one resource absorbs the
   measured time, the other keeps its microbenchmark ceiling (never so low that it would bind instead);
   which one binds is chosen by the second decode point (another batch and context: the explanation that
   predicts it better wins), or from the ceilings (skinny-GEMM FLOP/s vs copy bandwidth) without it;
2. prefill compute from the prefill step minus its overhead, when the fitted bandwidth leaves it
   compute-bound (else the square-GEMM ceiling);
3. training compute from the training step's forward + backward, the same way (the training plan has
   no per-layer overhead term);
4. communication (beta) from the slope of the all-reduce time between its two largest messages, and the link's
   per-step latency (alpha) from its smallest (`reference.fit_allreduce`; default without 2 GPUs);
5. host link: not measured (default).

Before all of these, the device's GEMM curve (`reference.fit_gemm_shape`): its ceiling (MAMF / peak) and fixed time per
GEMM kernel t0 from the square matmuls timed at two or more sizes, the two numbers
`planner.physics.gemm_efficiency` otherwise reads from published tables. On a GPU that the catalog knows, the
profile fits them (`device_reference`) and the phase efficiencies are fitted through them, as plans on that GPU
then apply them (`CalibrationRecord.device_terms_apply`); alpha is carried into those plans the same way.

Each efficiency is achieved / the reference accelerator's catalog peak, clamped to (0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.calibration.predict import GemmShape, ProxyGeometry
from planner.calibration.reference import Reference, clamp, fit_allreduce, gemm_note
from planner.calibration_record import Ceilings, PhaseMeasurement
from planner.physics.efficiency import DEFAULT_EFFICIENCY, ENGINE_COST_FIELDS, Efficiency


@dataclass
class FitResult:
    efficiency: Efficiency
    notes: dict[str, str]


@dataclass(frozen=True)
class FitBasis:
    """What every fitting step starts from: the reference accelerator's peak and bandwidth in the proxy's dtype,
    the microbenchmark ceilings (None: not measured) and their efficiencies (the defaults where not measured),
    and how `plan()` shapes inference and training compute on this device (`GemmShape`)."""

    peak: float
    bw: float
    dtype: str
    copy: float | None
    square: float | None
    skinny: float | None
    e_copy: float
    e_square: float
    e_skinny: float
    shape: GemmShape
    train_shape: GemmShape

    @classmethod
    def of(cls, ceilings: Ceilings, ref: Reference, dtype: str) -> FitBasis:
        peak = ref.peak_flops(dtype)
        bw = ref.bandwidth_bytes_per_second
        d = DEFAULT_EFFICIENCY
        copy = ceilings.bandwidth_bytes_per_second()
        square = ceilings.best_matmul_flops_per_second(dtype, "square")
        skinny = ceilings.best_matmul_flops_per_second(dtype, "skinny")
        return cls(
            peak=peak,
            bw=bw,
            dtype=dtype,
            copy=copy,
            square=square,
            skinny=skinny,
            e_copy=clamp(copy / bw) if copy else d.memory_bandwidth,
            e_square=clamp(square / peak) if square else d.prefill_compute,
            e_skinny=clamp(skinny / peak) if skinny else d.decode_compute,
            shape=GemmShape.of(ref, dtype, "decode"),
            train_shape=GemmShape.of(ref, dtype, "train"),
        )


def fit_efficiency(
    ceilings: Ceilings,
    phases: list[PhaseMeasurement],
    ref: Reference,
    dtype: str,
    geometry: ProxyGeometry | None,
    label: str,
) -> FitResult:
    d = DEFAULT_EFFICIENCY
    basis = FitBasis.of(ceilings, ref, dtype)
    by_name = {p.name: p for p in phases}
    probe = by_name.get("overhead_probe")
    overhead, fitted = _fit_overhead(basis, by_name, geometry)
    notes = dict(fitted.pop("notes"))
    notes["layer_overhead_seconds"] = (
        f"one-token decode through {probe.layers} very narrow layers (FLOPs and bytes negligible) minus its roofline"
        if probe is not None
        else "default (not measured)"
    )
    e_comm = d.communication
    notes["communication"] = "default (fewer than 2 GPUs: all-reduce not measured)"
    if ceilings.allreduce:
        allreduce_fit = fit_allreduce(ceilings.allreduce, ref, d.communication)
        e_comm = allreduce_fit.efficiency
        notes["communication"] = allreduce_fit.note
    notes["host_link"] = "default (not measured)"
    for gemm in ref.gemm_shapes:
        notes[f"gemm_shape_{gemm.dtype}"] = gemm_note(gemm, ref)
    # The probe times bare torch forwards: no scheduler, no sampler, no API server, so these engine costs
    # keep their published defaults (planner.physics.efficiency); a serving benchmark could fit them.
    for name in ENGINE_COST_FIELDS:
        notes[name] = "default (published vLLM measurement; the torch probe runs no serving engine)"

    efficiency = Efficiency(
        prefill_compute=fitted["prefill_compute"],
        decode_compute=fitted["decode_compute"],
        memory_bandwidth=fitted["memory_bandwidth"],
        communication=e_comm,
        training_compute=fitted["training_compute"],
        host_link=d.host_link,
        layer_overhead_seconds=overhead,
        **{name: getattr(d, name) for name in ENGINE_COST_FIELDS},
        source=f"calibration '{label}'",
    )
    return FitResult(efficiency, notes)


def _fit_overhead(basis: FitBasis, by_name: dict, geometry: ProxyGeometry | None) -> tuple[float, dict]:
    """Step 0 with steps 1-3 inside it: (per-layer overhead, the rooflines fitted at it). Without the probe the
    overhead keeps its default."""
    probe = by_name.get("overhead_probe")
    overhead = DEFAULT_EFFICIENCY.layer_overhead_seconds
    fitted = _fit_rooflines(overhead, by_name, geometry, basis)
    if probe is None:
        return overhead, fitted
    # Fixed point: the overhead is the probe's time minus its roofline at the fitted efficiencies, and
    # the efficiencies are fitted to the phase times minus the overhead. Converges in a few rounds
    # because the probe's roofline is a small share of its time.
    peak, bw, shape = basis.peak, basis.bw, basis.shape
    e_mem, e_decode = basis.e_copy, basis.e_skinny
    for _ in range(12):
        roofline = max(shape.compute_seconds(probe.flops, peak, e_decode, probe.layers), probe.bytes / (bw * e_mem))
        overhead = min(max(probe.seconds - roofline, 0.0) / probe.layers, 1e-2)
        fitted = _fit_rooflines(overhead, by_name, geometry, basis)
        e_mem, e_decode = fitted["memory_bandwidth"], fitted["decode_compute"]
    return overhead, fitted


def _fit_rooflines(overhead: float, by_name: dict, geometry: ProxyGeometry | None, basis: FitBasis) -> dict:
    """Steps 1-3 for a given per-layer overhead: memory bandwidth, decode, prefill and training compute.

    Inference compute efficiencies are fitted as `plan()` applies them (`GemmShape`): the kernels' fixed time
    is taken off the busy time and the device's GEMM ceiling ratio divided out, so the fitted efficiency
    reproduces the measured step."""
    notes: dict[str, str] = {}

    def busy(phase: PhaseMeasurement | None) -> float | None:
        """The phase's time minus its per-layer overhead; None when the overhead is most of it (or no phase)."""
        if phase is None:
            return None
        t = phase.seconds - phase.layers * overhead
        return t if t > 0.2 * phase.seconds else None

    e_mem, e_decode = _fit_decode(basis, by_name, busy, notes)
    e_prefill = _fit_prefill(basis, by_name.get("prefill"), busy, e_mem, notes)
    e_train = _fit_training(basis, by_name.get("train"), geometry, e_mem, notes)
    return dict(
        memory_bandwidth=e_mem,
        decode_compute=e_decode,
        prefill_compute=e_prefill,
        training_compute=e_train,
        notes=notes,
    )


def _fit_decode(basis: FitBasis, by_name: dict, busy, notes: dict[str, str]) -> tuple[float, float]:
    """Step 1: (memory bandwidth, decode compute) from the decode step's busy time; the second decode point
    (or the ceilings) decides which of the two resources the time is charged to."""
    e_mem, e_decode = basis.e_copy, basis.e_skinny
    notes["memory_bandwidth"] = "copy benchmark" if basis.copy else "default (not measured)"
    notes["decode_compute"] = f"skinny {basis.dtype} GEMM ceiling" if basis.skinny else "default (not measured)"
    decode, holdout = by_name.get("decode"), by_name.get("decode_holdout")
    if decode is None or (t := busy(decode)) is None:
        return e_mem, e_decode
    peak, bw, shape = basis.peak, basis.bw, basis.shape
    f, b = decode.flops, decode.bytes
    # Two explanations of the decode time; each keeps the other resource at its ceiling (or just fast
    # enough not to bind).
    bandwidth_bound = (clamp(b / (bw * t)), clamp(max(basis.e_skinny, shape.efficiency_for(f, peak, t, decode.layers))))
    compute_bound = (clamp(max(basis.e_copy, b / (bw * t))), clamp(shape.efficiency_for(f, peak, t, decode.layers)))
    if holdout is not None and (holdout_busy := busy(holdout)) is not None:
        # The second decode point (other batch and context) picks the explanation that predicts it.
        def miss(candidate: tuple[float, float]) -> float:
            em, ec = candidate
            predicted = max(shape.compute_seconds(holdout.flops, peak, ec, holdout.layers), holdout.bytes / (bw * em))
            return abs(math.log(predicted / holdout_busy))

        use_compute = miss(compute_bound) < miss(bandwidth_bound)
        how = "chosen by which explanation predicts the second decode point"
    else:
        d = DEFAULT_EFFICIENCY
        use_compute = (f / (basis.skinny or peak * d.decode_compute * shape.ratio)) > (
            b / (basis.copy or bw * d.memory_bandwidth)
        )
        how = "chosen from the skinny-GEMM and copy ceilings"
    if use_compute:
        notes["decode_compute"] = f"fitted to the decode step: compute-bound on this device ({how}; {basis.dtype})"
        return compute_bound
    notes["memory_bandwidth"] = f"fitted to the decode step: bandwidth-bound, weights + KV read per step ({how})"
    return bandwidth_bound


def _fit_prefill(basis: FitBasis, prefill, busy, e_mem: float, notes: dict[str, str]) -> float:
    """Step 2: prefill compute from the prefill step's busy time, when the fitted bandwidth leaves it
    compute-bound (else the square-GEMM ceiling)."""
    e_prefill = basis.e_square
    notes["prefill_compute"] = f"square {basis.dtype} GEMM ceiling" if basis.square else "default (not measured)"
    if prefill is not None and (prefill_busy := busy(prefill)) is not None:
        memory_time = prefill.bytes / (basis.bw * e_mem)
        if memory_time < prefill_busy:
            e_prefill = clamp(basis.shape.efficiency_for(prefill.flops, basis.peak, prefill_busy, prefill.layers))
            notes["prefill_compute"] = f"fitted to the prefill step ({prefill.tokens} tokens, {basis.dtype})"
        else:
            notes["prefill_compute"] += " (the prefill step was bandwidth-bound at the fitted bandwidth)"
    return e_prefill


def _fit_training(basis: FitBasis, train, geometry: ProxyGeometry | None, e_mem: float, notes: dict[str, str]) -> float:
    """Step 3: training compute from the training step's forward + backward, when it was compute-bound."""
    e_train = basis.e_square if basis.square else DEFAULT_EFFICIENCY.training_compute
    notes["training_compute"] = f"square {basis.dtype} GEMM ceiling" if basis.square else "default (not measured)"
    if train is not None and geometry is not None:
        fb = train.breakdown_seconds.get("forward", 0.0) + train.breakdown_seconds.get("backward", 0.0)
        work = geometry.train_work(train.batch, train.context_tokens)
        # the elementwise kernels run apart at the memory roofline (training.elementwise_kernels): off first
        elementwise = work["elementwise_bytes"] / (basis.bw * e_mem)
        if fb > elementwise and work["bytes"] / (basis.bw * e_mem) < fb:
            gemm_seconds = fb - elementwise
            e_train = clamp(basis.train_shape.efficiency_for(work["flops"], basis.peak, gemm_seconds, train.layers))
            notes["training_compute"] = "fitted to the training step's forward + backward"
    return e_train


__all__ = ["FitBasis", "FitResult", "fit_efficiency"]
