"""The profile run: ceilings, proxy model, fit, record. One entry point, `run_profile`.

Budget (default 60 s): about a quarter for matmul ceilings, a tenth for bandwidth, a tenth for the
all-reduce when there are 2+ GPUs, the rest for the proxy model, which is sized from the measured
ceilings so its phases fit (tokens first, then width, then layers are reduced on slow devices; every cap
is written into the record). Memory: never more than `memory_share` of the free memory at the start.
Progress goes to `progress(fraction, message)`; `cancel` (a threading.Event or a callable) is checked
between repetitions. Out-of-memory and backend errors end in ProfileAborted with the partial record.
"""

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from planner.calibration import microbench, proxy
from planner.calibration.comparison import comparison_rows
from planner.calibration.context import ProfileContext
from planner.calibration.device import Backend, CudaBackend, make_backend
from planner.calibration.errors import (
    ProfileAborted,
    ProfileCancelled,
    ProfileUnavailable,
)
from planner.calibration.fit import fit_efficiency
from planner.calibration.lock import exclusive_profile
from planner.calibration.predict import ProxyGeometry
from planner.calibration.reference import Reference, device_reference, fit_allreduce
from planner.calibration.sizing import Rates, size_proxy
from planner.calibration_record import (
    CalibrationRecord,
    Ceilings,
    DeviceInfo,
    PhaseMeasurement,
    ProfileSettings,
    ProxyComputeDType,
    ProxyDType,
    ProxySpec,
    make_record_id,
)
from planner.errors import PlanningError, explain
from planner.hardware.catalog import get_accelerator
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import resolve_model
from planner.physics.memory import CUDA_CONTEXT_BYTES
from planner.scenario_base import revised
from planner.units import gib, rate, seconds

# Shares of the proxy budget per phase (train includes its optimizer step).
PHASE_SHARES = dict(
    overhead_probe=0.03, prefill=0.15, prefill_holdout=0.08, decode=0.14, decode_holdout=0.08, train=0.52
)
PROBE_CONTEXT = 16  # cached tokens the overhead probe's one-token decode attends
# How much slower than the ceiling-based estimate the real proxy phases may run, per device kind. On the
# 2-core CI CPU, llama-3.1-8b layers at full width ran 1.3-2.7x (prefill), 4.5x (training step: first-touch
# page faults of gradients and optimizer state, per-tensor AdamW) and 5x (decode: 4-row GEMMs stream weights
# at a fraction of copy bandwidth) slower than estimated, more while other programs were busy; a GPU runs
# its kernels close to the ceilings. The estimate times this margin must fit the proxy budget.
ESTIMATE_MARGIN = {"cpu": 6.0, "cuda": 1.25}


def run_profile(
    settings: ProfileSettings | None = None,
    *,
    progress=None,
    cancel=None,
    backend: Backend | None = None,
    now: datetime | None = None,
) -> CalibrationRecord:
    """Profile the device and return a calibration record (not saved: see planner.calibration.store)."""
    settings = settings or ProfileSettings()
    backend = backend or make_backend(settings.device)
    try:
        arch = resolve_model(settings.model)
    except PlanningError as exc:
        raise ProfileUnavailable(f"--model {settings.model}: {exc}") from None
    proxy.check_supported(arch)
    created = now or datetime.now(UTC)
    info = backend.info()
    free, _total = backend.memory_info()
    ctx = ProfileContext(backend, settings.seconds, int(free * settings.memory_share), cancel, progress)
    reference_id = settings.reference_gpu or backend.catalog_id()
    if reference_id is not None:
        try:
            get_accelerator(reference_id)
        except PlanningError as exc:
            raise ProfileUnavailable(f"--gpu {reference_id}: {exc}") from None
    supported = backend.supported_dtypes()
    if settings.dtype != "auto" and settings.dtype not in supported:
        raise ProfileUnavailable(
            f"dtype {settings.dtype} is not supported on {info.name} (supported: {', '.join(supported)})"
        )

    state = _State(settings=settings, info=info, created=created, arch=arch, reference_id=reference_id)
    with exclusive_profile(info.name):
        return _run(ctx, state, supported, backend, settings)


def _run(ctx, state, supported, backend, settings) -> CalibrationRecord:
    try:
        _profile(ctx, state, supported)
    except ProfileCancelled:
        raise ProfileCancelled(_stopped_message("cancelled", state), partial=_record(ctx, state, "cancelled")) from None
    except KeyboardInterrupt:
        raise ProfileCancelled(_stopped_message("cancelled", state), partial=_record(ctx, state, "cancelled")) from None
    except ProfileUnavailable:
        raise
    except Exception as exc:
        if backend.is_oom(exc):
            why = (
                f"out of memory during {state.phase} (the profile may use {gib(ctx.memory_cap_bytes)}, "
                f"{settings.memory_share:.0%} of the free memory; lower --seconds or close other programs)"
            )
        else:
            detail = explain(exc) if isinstance(exc, ValidationError) else (str(exc).splitlines() or [""])[0]
            why = f"{state.phase} failed: {type(exc).__name__}: {detail}"
        backend.empty_cache()
        raise ProfileAborted(_stopped_message(why, state), partial=_record(ctx, state, why)) from None
    ctx.progress(1.0, "done")
    return _record(ctx, state, "")


@dataclass
class _State:
    settings: ProfileSettings
    info: DeviceInfo
    created: datetime
    arch: ModelArchitecture
    reference_id: str | None
    phase: str = "setup"
    dtype: ProxyComputeDType | None = None
    ceilings: Ceilings | None = None
    spec: ProxySpec | None = None
    phases: list | None = None
    runtime_bytes: int | None = None


def _profile(ctx: ProfileContext, state: _State, supported: tuple[str, ...]) -> None:
    _measure_ceilings(ctx, state, supported)
    proxy_budget = max(ctx.remaining() * 0.95, 0.05 * state.settings.seconds)
    model, geometry = _build_proxy(ctx, state, proxy_budget)
    state.phases = []
    _probe_overhead(ctx, state, proxy_budget)
    _run_phases(ctx, state, model, geometry, proxy_budget)
    del model
    ctx.backend.empty_cache()
    state.phase = "fit"
    ctx.progress(0.96, "fitting efficiencies")
    state.runtime_bytes = ctx.backend.runtime_overhead_bytes()


def _measure_ceilings(ctx: ProfileContext, state: _State, supported: tuple[str, ...]) -> None:
    """The matmul, copy-bandwidth and (with 2+ GPUs) all-reduce ceilings, into `state.ceilings` as they come."""
    backend, settings = ctx.backend, state.settings
    total = settings.seconds
    multi_gpu = backend.kind == "cuda" and backend.device_count() >= 2 and settings.allreduce
    skipped: dict[str, str] = {}
    if isinstance(backend, CudaBackend) and "fp8" not in supported:
        skipped["matmul_fp8"] = backend.fp8_unsupported_reason()
    state.ceilings = Ceilings(skipped=skipped)

    # ---- matmul ceilings
    state.phase = "matmul benchmark"
    ctx.progress(0.0, "matmul ceilings")
    matmuls = microbench.matmul_ceilings(_sub(ctx, 0.0, 0.25), list(supported), 0.25 * total, skipped)
    state.ceilings = Ceilings(matmul=matmuls, skipped=skipped)
    state.dtype = _choose_dtype(settings.dtype, backend, state.ceilings, ctx.notes)

    # ---- bandwidth
    state.phase = "bandwidth benchmark"
    ctx.progress(0.25, "copy bandwidth")
    max_buffer = (4 << 30) if backend.kind == "cuda" else (1 << 30)
    bandwidth = microbench.bandwidth_ceiling(ctx, 0.08 * total, max_buffer)
    state.ceilings = Ceilings(matmul=matmuls, bandwidth=bandwidth, skipped=skipped)

    # ---- all-reduce
    allreduce = []
    if multi_gpu:
        state.phase = "all-reduce benchmark"
        ctx.progress(0.33, f"all-reduce over {backend.device_count()} GPUs (NCCL)")
        sizes = [s for s in microbench.ALLREDUCE_MESSAGES if 2 * s <= ctx.memory_cap_bytes] or [1 << 20]
        try:
            allreduce = microbench.allreduce_bus_bandwidth(
                backend.device_count(), sizes, backend="nccl", device="cuda", seconds_per_size=0.1 * total / len(sizes)
            )
        except RuntimeError as exc:
            skipped["allreduce"] = str(exc)[:300]
    elif backend.kind == "cuda":
        skipped["allreduce"] = "one GPU: no all-reduce to measure (communication efficiency stays at its default)"
    state.ceilings = Ceilings(matmul=matmuls, bandwidth=bandwidth, allreduce=allreduce, skipped=skipped)


def _build_proxy(ctx: ProfileContext, state: _State, proxy_budget: float) -> tuple[proxy.ProxyModel, ProxyGeometry]:
    """The proxy sized to the budget (`sizing.size_proxy`, into `state.spec`), built on the device."""
    backend, settings = ctx.backend, state.settings
    assert state.ceilings is not None and state.dtype is not None  # measured first (`_measure_ceilings`)
    state.phase = "proxy sizing"
    spec = size_proxy(
        state.arch,
        settings,
        backend.kind,
        state.dtype,
        Rates.of(state.ceilings, state.dtype),
        proxy_budget / ESTIMATE_MARGIN[backend.kind],
        ctx.memory_cap_bytes,
        settings.model,
    )
    state.spec = spec
    state.phase = "proxy build"
    ctx.progress(0.4, f"building {spec.architecture.name} in {spec.dtype}")
    positions = max(
        spec.prefill_tokens,
        spec.decode_context_tokens + 1,
        spec.holdout_decode_context_tokens + 1,
        spec.train_tokens,
        spec.holdout_prefill_tokens,
    )
    model = proxy.ProxyModel.build(backend, spec.architecture, spec.dtype, positions)
    return model, ProxyGeometry(spec.architecture, spec.dtype)


def _probe_overhead(ctx: ProfileContext, state: _State, proxy_budget: float) -> None:
    """The per-layer overhead: one token through very narrow copies of the layers."""
    spec, phases = state.spec, state.phases
    assert spec is not None and phases is not None
    layers = spec.architecture.num_layers
    state.phase = "proxy overhead probe"
    ctx.progress(0.4, state.phase)
    probe_arch = proxy.probe_architecture(state.arch, layers)
    probe = proxy.ProxyModel.build(ctx.backend, probe_arch, spec.dtype, PROBE_CONTEXT + 1, seed=1)
    result = proxy.run_decode(ctx, probe, 1, PROBE_CONTEXT, PHASE_SHARES["overhead_probe"] * proxy_budget)
    work = ProxyGeometry(probe_arch, spec.dtype).decode_work(1, PROBE_CONTEXT)
    probe_phase = _phase("overhead_probe", "decode", layers, (1, 1, PROBE_CONTEXT), work, result)
    phases.append(revised(probe_phase, tensor_bytes={}, peak_memory_bytes=None))


def _run_phases(
    ctx: ProfileContext, state: _State, model: proxy.ProxyModel, geometry: ProxyGeometry, proxy_budget: float
) -> None:
    """The fitted points, then the held-out ones while the budget lasts (the fitted points matter more)."""
    spec, phases = state.spec, state.phases
    assert spec is not None and phases is not None
    layers = spec.architecture.num_layers
    plan = [
        ("prefill", "prefill", spec.prefill_tokens, None),
        ("decode", "decode", spec.decode_batch, spec.decode_context_tokens),
        ("train", "train", spec.train_micro_batch, spec.train_tokens),
        ("prefill_holdout", "prefill", spec.holdout_prefill_tokens, None),
        ("decode_holdout", "decode", spec.holdout_decode_batch, spec.holdout_decode_context_tokens),
    ]
    fraction = 0.42
    for name, phase, a, b in plan:
        if name.endswith("holdout") and ctx.remaining() <= 0:
            ctx.notes.append(
                f"{name.replace('_', ' ')} skipped: the time budget was spent (the phases ran slower "
                "than the ceilings predicted, e.g. other programs were busy)"
            )
            continue
        state.phase = f"proxy {name.replace('_', ' ')}"
        ctx.progress(fraction, state.phase)
        budget = PHASE_SHARES[name] * proxy_budget
        if phase == "prefill":
            result = proxy.run_prefill(ctx, model, a, budget)
            phases.append(_phase(name, phase, layers, (1, a, 0), geometry.prefill_work(a), result))
        elif phase == "decode":
            result = proxy.run_decode(ctx, model, a, b, budget)
            phases.append(_phase(name, phase, layers, (a, a, b), geometry.decode_work(a, b), result))
        else:
            result = proxy.run_train(ctx, model, a, b, budget)
            work = geometry.train_work(a, b)
            phases.append(_phase(name, phase, layers, (a, a * b, b), (work["flops"], work["bytes"]), result))
        fraction += PHASE_SHARES[name] * 0.55


def _sub(ctx: ProfileContext, start: float, width: float) -> ProfileContext:
    """`ctx` (same backend, clock, budget, cancellation and notes list) with its progress mapped onto
    [start, start + width] of the whole run."""
    outer = ctx.progress_fn
    if outer is None:
        return ctx

    def progress_fn(fraction: float, message: str) -> None:
        outer(min(max(start + width * fraction, 0.0), 1.0), message)

    return dataclasses.replace(ctx, progress_fn=progress_fn)


def _phase(name, phase, layers, shape: tuple[int, int, int], work: tuple[float, float], result) -> PhaseMeasurement:
    """`shape` is (batch, new tokens, context tokens), `work` the engine's (FLOPs, bytes) for the step."""
    batch, tokens, context = shape
    flops, moved = work
    return PhaseMeasurement(
        name=name,
        phase=phase,
        layers=layers,
        batch=batch,
        tokens=tokens,
        context_tokens=context,
        seconds=result.seconds,
        seconds_per_layer=result.seconds_per_layer,
        median_seconds=result.median_seconds,
        reps=result.reps,
        flops=flops,
        bytes=moved,
        peak_memory_bytes=result.peak_memory_bytes,
        tensor_bytes=result.tensor_bytes,
        breakdown_seconds=result.breakdown_seconds,
    )


def _choose_dtype(requested: ProxyDType, backend: Backend, ceilings: Ceilings, notes: list[str]) -> ProxyComputeDType:
    """The proxy's dtype: as requested, else the device default; on a CPU, bf16 only when its matmuls run
    at least as fast as fp32 at the same shape (AMX/AVX512-BF16 CPUs run them 2-10x faster; CPUs without
    bf16 units emulate them a hundred times slower, so noise cannot flip the choice)."""
    if requested != "auto":
        return requested
    dtype = backend.default_dtype()
    if backend.kind == "cpu":

        def at(dt):
            return {m.n: m.flops_per_second for m in ceilings.matmul if m.dtype == dt and m.shape == "square"}

        fp32, bf16 = at("fp32"), at("bf16")
        common = sorted(set(fp32) & set(bf16))
        if common and bf16[common[-1]] >= fp32[common[-1]]:
            dtype = "bf16"
        fp32 = max(fp32.values(), default=0.0)
        bf16 = max(bf16.values(), default=0.0)
        notes.append(
            f"proxy dtype {dtype}: bf16 matmul ran at {rate(bf16, 'FLOP/s')}, fp32 at {rate(fp32, 'FLOP/s')} "
            "on this CPU; efficiencies measured in this dtype are applied to the plan's dtype peak"
        )
    return dtype


# ---------------------------------------------------------------------------------------------
# the record


def _stopped_message(why: str, state: _State) -> str:
    done = []
    if state.ceilings is not None:
        if state.ceilings.matmul:
            done.append(f"{len(state.ceilings.matmul)} matmul shapes")
        if state.ceilings.bandwidth:
            done.append(f"copy bandwidth {rate(state.ceilings.bandwidth_bytes_per_second(), 'B/s')}")
        if state.ceilings.allreduce:
            done.append(f"{len(state.ceilings.allreduce)} all-reduce sizes")
    for p in state.phases or []:
        done.append(f"{p.name.replace('_', ' ')} {seconds(p.seconds)}")
    measured = "; ".join(done) if done else "nothing"
    return f"calibration stopped: {why}. Measured so far: {measured}."


def _record(ctx: ProfileContext, state: _State, stopped: str) -> CalibrationRecord:
    backend, settings, info = ctx.backend, state.settings, state.info
    ceilings = state.ceilings or Ceilings()
    dtype = state.dtype or (settings.dtype if settings.dtype != "auto" else backend.default_dtype())
    if state.reference_id is not None:
        ref = Reference.from_catalog(state.reference_id)
        if backend.kind == "cuda":
            # The GEMM curve of this GPU, fitted and fitted through: plans on it apply the same curve
            # (CalibrationRecord.device_terms_apply); a CPU keeps the tables (no plans of its own GPU type).
            ref = device_reference(ref, ceilings)
        notes = list(ctx.notes)
    else:
        ref = Reference.from_ceilings(ceilings, backend.kind == "cuda")
        notes = list(ctx.notes) + [
            f"'{info.name}' is not in the hardware catalog: efficiencies are relative to the "
            "measured ceilings; pass --gpu ID to refer them to a catalog accelerator"
        ]
    label = settings.label or f"{info.name} {dtype} {state.created.strftime('%Y-%m-%d %H:%M')}"
    geometry = ProxyGeometry(state.spec.architecture, state.spec.dtype) if state.spec else None
    phases = state.phases or []
    fit = fit_efficiency(ceilings, phases, ref, dtype, geometry, label)

    correction, correction_note, runtime = 0.0, "", None
    if backend.kind == "cuda" and state.runtime_bytes is not None:
        correction = float(state.runtime_bytes - CUDA_CONTEXT_BYTES)
        runtime = (float(state.runtime_bytes), correction)
        correction_note = (
            f"measured {gib(state.runtime_bytes)} of device memory outside torch's allocator "
            f"(CUDA context, libraries) against the documented {gib(CUDA_CONTEXT_BYTES)}: plans "
            f"add {gib(correction)} to the runtime overhead term"
        )
    elif backend.kind == "cpu":
        correction_note = (
            "CPU: tensor bytes are exact and there is no device context, so no memory correction (0 bytes)"
        )
    rows = comparison_rows(ceilings, phases, ref, dtype, geometry, fit.efficiency, runtime)
    alpha = None
    if backend.kind == "cuda" and state.reference_id is not None and ceilings.allreduce:
        allreduce = fit_allreduce(ceilings.allreduce, ref, fit.efficiency.communication)
        alpha = allreduce.latency_seconds if allreduce.latency_fitted else None
    if backend.kind == "cpu":
        notes.append(
            "CPU profile: host RAM stands in for device memory; the catalog's 'cpu' entry is a generic "
            "placeholder, so edit its peaks in planner/hardware/accelerators.json for absolute numbers that match this machine"
        )
    return CalibrationRecord(
        id=make_record_id(info.name, state.created),
        label=label,
        created_at=state.created,
        complete=not stopped,
        stopped_reason=stopped,
        device=info,
        reference_gpu=ref.gpu_id,
        reference_peak_flops_per_second=ref.peak_flops(dtype),
        reference_bandwidth_bytes_per_second=ref.bandwidth_bytes_per_second,
        reference_link_bytes_per_second=ref.link_bytes_per_second,
        settings=settings,
        dtype=dtype,
        ceilings=ceilings,
        proxy=state.spec,
        phases=phases,
        efficiency=fit.efficiency,
        efficiency_notes=fit.notes,
        runtime_overhead_correction_bytes=correction,
        memory_correction_note=correction_note,
        predicted_vs_measured=rows,
        notes=notes,
        elapsed_seconds=round(ctx.elapsed(), 3),
        link_latency_seconds=alpha,
        gemm_shapes=list(ref.gemm_shapes),
    )


__all__ = ["run_profile"]
