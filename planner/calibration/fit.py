"""From measurements to a calibration: the engine's own predictions for every measured quantity,
efficiency factors fitted to the proxy's phases, and the predicted-vs-measured table.

Every prediction here calls the engine's term functions (planner.physics.memory, planner.inference.steps,
planner.training.memory / step_time) on the proxy's architecture with the embedding and output head
removed (the proxy has neither), so the table tests the very formulas `plan()` uses. No torch.

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
   per-step latency (alpha) from its smallest (`fit_allreduce`; default without 2 GPUs);
5. host link: not measured (default).

Before all of these, the device's GEMM curve (`fit_gemm_shape`): its ceiling (MAMF / peak) and fixed time per
GEMM kernel t0 from the square matmuls timed at two or more sizes, the two numbers
`planner.physics.gemm_efficiency` otherwise reads from published tables. On a GPU that the catalog knows, the
profile fits them (`device_reference`) and the phase efficiencies are fitted through them, as plans on that GPU
then apply them (`CalibrationRecord.device_terms_apply`); alpha is carried into those plans the same way.

Each efficiency is achieved / the reference accelerator's catalog peak, clamped to (0, 1].
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from planner.calibration_record import Ceilings, ComparisonRow, GemmShapeFit, MatmulMeasurement, PhaseMeasurement
from planner.hardware.catalog import Accelerator, get_accelerator
from planner.inference import steps
from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    parameter_counts,
)
from planner.physics import collectives, gemm_efficiency
from planner.physics import memory as base_memory
from planner.physics.efficiency import DEFAULT_EFFICIENCY, ENGINE_COST_FIELDS, Efficiency
from planner.physics.roofline import (
    decode_weight_read_bytes,
    memory_seconds,
    pipeline_step_seconds,
    shaped_compute_seconds,
)
from planner.training import memory as tmem
from planner.training import step_time

ELEMENT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
TRAINING_PRECISION = {"fp32": "fp32", "bf16": "mixed_bf16", "fp16": "mixed_fp16"}
MIN_EFFICIENCY = 1e-6


def clamp(value: float) -> float:
    return float(min(max(value, MIN_EFFICIENCY), 1.0))


# ---------------------------------------------------------------------------------------------
# the reference accelerator


@dataclass(frozen=True)
class Reference:
    """The catalog accelerator (or, for an unknown device, the measured ceilings) efficiencies refer to."""

    gpu_id: str
    peaks: dict  # dtype -> dense peak FLOP/s
    bandwidth_bytes_per_second: float
    link_bytes_per_second: float
    link_latency_seconds: float
    is_accelerator: bool
    accelerator: Accelerator | None = None
    # This device's fitted GEMM curves (`device_reference`): they replace the published ceiling and t0, as in
    # plans on this GPU. Empty: the tables' (a CPU, an unknown device, one matmul size).
    gemm_shapes: tuple[GemmShapeFit, ...] = ()

    def fitted_gemm(self, dtype: str) -> GemmShapeFit | None:
        return next((g for g in self.gemm_shapes if g.dtype == dtype), None)

    def gemm_ceiling_ratio(self, dtype: str) -> float:
        """The device's GEMM ceiling relative to the reference GPU (`physics.gemm_efficiency.ceiling_ratio`),
        as `plan()` applies it (the fitted one when there is one); 1.0 for a device the catalog does not know
        (its own ceilings are its peaks)."""
        if self.accelerator is None:
            return 1.0
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.ceiling_ratio(
            self.gpu_id, self.accelerator.gemm_dtype(dtype), fitted.ceiling if fitted else None
        )

    def training_ceiling_ratio(self, dtype: str) -> float:
        """The device's GEMM ceiling relative to the training reference (`gemm_efficiency.training_ceiling_ratio`),
        as the training plan applies it; 1.0 for a device the catalog does not know."""
        if self.accelerator is None:
            return 1.0
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.training_ceiling_ratio(
            self.gpu_id, self.accelerator.gemm_dtype(dtype), fitted.ceiling if fitted else None
        )

    @property
    def gemm_tail_seconds(self) -> float:
        """The fixed time per GEMM kernel `plan()` adds on this device by default (`physics.gemm_efficiency`)."""
        return gemm_efficiency.gemm_tail_seconds(self.is_accelerator)

    def tail_seconds(self, dtype: str) -> float:
        """The fixed time per GEMM kernel in `dtype` as `plan()` applies it: the fitted one when there is one."""
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.gemm_tail_seconds(self.is_accelerator, fitted.tail_seconds if fitted else None)

    def peak_flops(self, dtype: str) -> float:
        """Catalog dense peak for `dtype` (with the catalog's fallbacks), or the measured ceiling."""
        if self.accelerator is not None:
            return self.accelerator.peak_flops(dtype)
        return self.peaks.get(dtype) or max(self.peaks.values())

    @classmethod
    def from_catalog(cls, gpu_id: str) -> Reference:
        accel = get_accelerator(gpu_id)
        return cls(
            gpu_id=gpu_id,
            peaks=dict(accel.peak_flops_per_second),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            link_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            link_latency_seconds=accel.interconnect_latency_seconds,
            is_accelerator=accel.vendor != "cpu",
            accelerator=accel,
        )

    @classmethod
    def from_ceilings(cls, ceilings: Ceilings, is_accelerator: bool) -> Reference:
        """For a device the catalog does not know: its own measured ceilings are the peaks."""
        peaks = {}
        for m in ceilings.matmul:
            peaks[m.dtype] = max(peaks.get(m.dtype, 0.0), m.flops_per_second)
        bandwidth = ceilings.bandwidth_bytes_per_second() or 1e11
        return cls(
            gpu_id="custom",
            peaks=peaks or {"fp32": 1e12},
            bandwidth_bytes_per_second=bandwidth,
            link_bytes_per_second=ceilings.bus_bytes_per_second() or 16e9,
            link_latency_seconds=10e-6,
            is_accelerator=is_accelerator,
        )


# ---------------------------------------------------------------------------------------------
# the GEMM curve: ceiling and t0


# Smallest square GEMM the curve is fitted to. The microbenchmark times calls back to back from Python, so a
# GEMM shorter than torch's launch cost (~5-10 us per torch.matmul on the CPU side) measures the launch, not the
# kernel; at 2048^3 a GPU kernel takes >= 20 us (the published t0 comes from 2048^3 and 4096^3 too).
MIN_CURVE_SIZE = 2048


def fit_gemm_shape(matmuls: list[MatmulMeasurement], dtype: str, peak: float) -> GemmShapeFit | None:
    """The ceiling and fixed time per kernel of `planner.physics.gemm_efficiency.gemm_fraction` from the square
    `dtype` matmuls of at least `MIN_CURVE_SIZE` (the fastest timing per size), None with fewer than two sizes:

        t_i = W_i / (ceiling x peak) + t0,  W_i = 2 M N K,

    linear in (1 / (ceiling x peak), t0), solved by least squares on the relative error (each size counts alike,
    the smallest pins t0, the largest the ceiling; two sizes solve it exactly). A t0 that comes out negative
    (noise on a device whose small GEMMs carry no fixed cost) is 0 and the ceiling refitted alone. Skinny
    matmuls are left out: at 16 rows they stream weights, a memory roofline rather than this curve."""
    fastest: dict[int, float] = {}
    for m in matmuls:
        if m.dtype == dtype and m.shape == "square" and m.m >= MIN_CURVE_SIZE:
            fastest[m.m] = min(fastest.get(m.m, math.inf), m.seconds)
    if len(fastest) < 2:
        return None
    sizes = sorted(fastest)
    # Scaled rows of the weighted problem: (W_i / t_i) a + (1 / t_i) t0 = 1.
    xs = [2.0 * n**3 / fastest[n] for n in sizes]
    ys = [1.0 / fastest[n] for n in sizes]
    sxx, sxy, syy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys)), sum(y * y for y in ys)
    sx, sy = sum(xs), sum(ys)
    det = sxx * syy - sxy * sxy
    a, t0 = ((sx * syy - sy * sxy) / det, (sxx * sy - sxy * sx) / det) if det > 0 else (0.0, -1.0)
    if t0 < 0:
        a, t0 = sx / sxx, 0.0
    if a <= 0:
        return None
    return GemmShapeFit(dtype=dtype, ceiling=1.0 / (a * peak), tail_seconds=t0, sizes=sizes)


def device_reference(ref: Reference, ceilings: Ceilings) -> Reference:
    """`ref` with this device's GEMM curves fitted (`fit_gemm_shape`) for every dtype timed at two or more square
    sizes: the reference a GPU profile fits through, since plans on that GPU apply the same curves. Only for a
    catalog GPU (a device the catalog does not know has no plans of its own) and a dtype the GPU runs in its own
    format (`Accelerator.gemm_dtype`), the key plans look the curve up by."""
    if ref.accelerator is None or not ref.is_accelerator:
        return ref
    accel = ref.accelerator
    fits = []
    for dtype in sorted({m.dtype for m in ceilings.matmul}):
        if accel.gemm_dtype(dtype) != dtype:
            continue
        fitted = fit_gemm_shape(ceilings.matmul, dtype, ref.peak_flops(dtype))
        if fitted is not None:
            fits.append(fitted)
    return dataclasses.replace(ref, gemm_shapes=tuple(fits))


def gemm_note(fit: GemmShapeFit, ref: Reference) -> str:
    """The fitted curve next to the published one it replaces, in words."""
    table = gemm_efficiency.gemm_ceiling(ref.gpu_id, fit.dtype)
    sizes = ", ".join(str(n) for n in fit.sizes)
    return (
        f"{fit.dtype} GEMM ceiling {fit.ceiling:.1%} of the catalog peak and t0 {fit.tail_seconds * 1e6:.2f} us per "
        f"kernel, fitted to the square matmuls ({sizes}); the published table says {table:.1%} and "
        f"{ref.gemm_tail_seconds * 1e6:.2f} us"
    )


# ---------------------------------------------------------------------------------------------
# the all-reduce: alpha and beta


@dataclass(frozen=True)
class AllReduceFit:
    """The link's alpha-beta parameters fitted to the all-reduce microbenchmark (NCCL: ring and tree only)."""

    efficiency: float  # beta: achieved / catalog link bandwidth
    latency_seconds: float  # alpha: per-step latency of the link
    note: str
    latency_fitted: bool = False  # False: one message size, alpha is the catalog's


def fit_allreduce(measurements, ref: Reference, default_efficiency: float) -> AllReduceFit:
    """alpha and beta of `planner.physics.collectives` from the all-reduce timings of one group size.

    beta (the bandwidth efficiency) from the slope between the two largest messages, where NCCL's ring is
    bandwidth-bound: dt / dM = 2(n-1)/n / (link x eff). alpha from the smallest message: the per-step latency
    at which the engine's fastest NCCL algorithm (ring or tree, each with its fixed kernel cost) takes the
    measured time, found by bisection (0 when the message ran faster than the fixed costs alone). With one
    message size only beta is fitted, with the catalog's alpha subtracted."""
    ordered = sorted(measurements, key=lambda a: a.message_bytes)
    largest, n = ordered[-1], ordered[-1].world_size
    crossing = 2 * (n - 1) / n
    alpha = ref.link_latency_seconds
    efficiency = None
    if len(ordered) >= 2 and ordered[-2].message_bytes < largest.message_bytes:
        slope = (largest.seconds - ordered[-2].seconds) / (largest.message_bytes - ordered[-2].message_bytes)
        if slope > 0:
            efficiency = clamp(crossing / (ref.link_bytes_per_second * slope))
    if efficiency is None:
        fixed = collectives.RING_BASE_SECONDS + 2 * (n - 1) * alpha
        bandwidth_time = largest.seconds - fixed if largest.seconds > fixed else largest.seconds
        efficiency = clamp(crossing * largest.message_bytes / (ref.link_bytes_per_second * bandwidth_time))
    how = f"beta from the {len(ordered)} message sizes' slope"
    if len(ordered) >= 2:
        smallest = ordered[0]

        def predicted(latency: float) -> float:
            return float(
                collectives.allreduce_seconds(smallest.message_bytes, n, ref.link_bytes_per_second, latency, efficiency)
            )

        lo, hi = 0.0, max(smallest.seconds, 1e-9)
        if predicted(lo) >= smallest.seconds:
            alpha = 0.0
        else:
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if predicted(mid) < smallest.seconds else (lo, mid)
            alpha = (lo + hi) / 2
        how += f"; alpha {alpha * 1e6:.2f} us per step from the {_size(smallest.message_bytes)} message"
    else:
        how = f"beta from one message size, the catalog's alpha {alpha * 1e6:.2f} us subtracted"
    note = (
        f"all-reduce over {n} GPUs ({largest.backend}, {_size(ordered[0].message_bytes)} to "
        f"{_size(largest.message_bytes)}; bus bandwidth {largest.bus_bytes_per_second / 1e9:.1f} GB/s at the largest): "
        f"{how} (catalog alpha {ref.link_latency_seconds * 1e6:.2f} us)"
    )
    return AllReduceFit(efficiency, alpha, note, latency_fitted=len(ordered) >= 2)


def _size(message_bytes: int) -> str:
    return f"{message_bytes >> 20} MiB" if message_bytes >= 1 << 20 else f"{message_bytes >> 10} KiB"


# ---------------------------------------------------------------------------------------------
# the engine's counts for the proxy


def layers_only(counts: ParameterCounts) -> ParameterCounts:
    """The proxy has no embedding, output head or final norm."""
    return dataclasses.replace(counts, embedding=0, position_embedding=0, lm_head=0, final_norms=0)


@dataclass(frozen=True)
class ProxyGeometry:
    arch: ModelArchitecture
    dtype: str

    @property
    def counts(self) -> ParameterCounts:
        return layers_only(parameter_counts(self.arch))

    @property
    def element_bytes(self) -> float:
        return ELEMENT_BYTES[self.dtype]

    @property
    def precision(self) -> tmem.PrecisionBytes:
        return tmem.PRECISIONS[TRAINING_PRECISION[self.dtype]]

    # ---- inference memory
    def weight_bytes(self) -> float:
        """planner.physics.memory.weight_bytes: every proxy tensor (norms included) is stored in the proxy dtype."""
        b = self.element_bytes
        return float(base_memory.weight_bytes(self.counts, self.arch, 1, 1, 1, b, b, b))

    def kv_bytes(self, sequences: int, tokens: int) -> float:
        return float(base_memory.kv_cache_bytes(self.arch, 1, 1, sequences, tokens, self.element_bytes, 1, False))

    def inference_activation_bytes(self, tokens: int) -> float:
        return float(base_memory.inference_activation_bytes(self.arch, 1, tokens, self.element_bytes))

    # ---- inference work
    def prefill_work(self, tokens: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one prompt of `tokens` tokens, by the terms of `inference.steps.prefill_step`
        on one GPU: one chunk (the weights read once) plus the KV it writes (no blocks, no window)."""
        flops = steps.prefill_step_flops(self.counts, self.arch, tokens, tokens, 1, 1, 1)
        kv_written = steps.prefill_kv_write_bytes(self.arch, 1, 1, 1, tokens, self.element_bytes, 1, False)
        return float(flops), float(steps.prefill_step_bytes(self.weight_bytes(), kv_written))

    def decode_work(self, batch: int, context: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one decode step over `context` cached tokens (each new token attends
        context + 1 keys), by the terms of `inference.steps.decode_step` on one GPU: weights + the KV read."""
        attended = context + 1
        flops = steps.decode_step_flops(self.counts, self.arch, batch, attended, 1, 1)
        weights = decode_weight_read_bytes(self.weight_bytes(), 0.0, 0, 0, batch)
        kv_read = steps.decode_kv_read_bytes(self.arch, 1, 1, batch, attended, self.element_bytes, False)
        return float(flops), float(weights + kv_read)

    # ---- training
    def trainable_elements(self) -> float:
        return float(tmem.stage_layer_parameter_elements(self.counts, self.arch, 1, 1, 1))

    def saved_activation_bytes(self, micro_batch: int, tokens: int) -> float:
        """training.memory.layer_activation_bytes_per_token (FlashAttention, no dropout, no recomputation,
        no parallelism) x layers x tokens; the embedding/head edge terms are left out with the head."""
        per_token = tmem.layer_activation_bytes_per_token(
            self.arch, False, 1, False, True, 0, False, tokens, self.precision.activation
        )
        return float(per_token * self.arch.num_layers * micro_batch * tokens)

    def training_memory(self, micro_batch: int, tokens: int) -> dict[str, float]:
        p = self.precision
        n = self.trainable_elements()
        moments = tmem.optimizer_state_bytes_per_element("adamw", p.state)
        assert moments is not None  # only a factored optimizer (Adafactor) has no per-element figure
        return {
            "weights": float(tmem.weights_bytes(n * p.param, 0.0, 0, 1, 1)),
            "gradients": float(tmem.gradients_bytes(n * p.grad, 0.0, 0, 1, 1)),
            "optimizer_states": float(tmem.optimizer_states_bytes(n * (p.master + moments), 0.0, 0, 1, 1)),
            "saved_activations": self.saved_activation_bytes(micro_batch, tokens),
        }

    def train_work(self, micro_batch: int, tokens: int) -> dict[str, float]:
        """FLOPs and bytes of one micro-batch (training.step_time: hardware FLOPs with FlashAttention,
        microbatch_memory_bytes) and of the AdamW step (optimizer_step_bytes)."""
        p = self.precision
        n = self.trainable_elements()
        _, hw_per_token = step_time.layer_training_flops_per_token(self.counts, self.arch, False, tokens, True, 0)
        flops = micro_batch * tokens * self.arch.num_layers * hw_per_token
        mem = self.training_memory(micro_batch, tokens)
        bytes_mb = step_time.microbatch_memory_bytes(mem["weights"], mem["saved_activations"], n * p.grad, 0)
        opt = step_time.optimizer_step_bytes(mem["optimizer_states"], n, p.grad, p.param, p.master)
        return {"flops": float(flops), "bytes": float(bytes_mb), "optimizer_bytes": float(opt)}


# ---------------------------------------------------------------------------------------------
# predicted times


def _compute_efficiency(efficiency: Efficiency, phase: str) -> float:
    return {
        "prefill": efficiency.prefill_compute,
        "decode": efficiency.decode_compute,
        "train": efficiency.training_compute,
    }[phase]


def predicted_seconds(
    phase: str,
    flops: float,
    bytes_moved: float,
    peak: float,
    bandwidth: float,
    efficiency: Efficiency,
    layers: int = 0,
    ceiling_ratio: float = 1.0,
    tail_seconds: float = 0.0,
) -> float:
    """What the engine plans for one step on one GPU without communication: for inference steps
    `roofline.pipeline_step_seconds` with one stage and one kernel group, max(compute, memory) + `layers` x the per-layer
    overhead (`inference.steps.launch_overhead_seconds`), compute by GEMM ceiling and kernel tail as
    `inference.steps.step_compute_seconds` (one pass through `layers`); for training max(compute, memory) with
    compute as `training.step.microbatch_time` (three GEMM passes per layer, no recomputation; `ceiling_ratio`
    is then the training one) and no per-layer overhead."""
    memory = memory_seconds(bytes_moved, bandwidth, efficiency.memory_bandwidth)
    if phase in ("prefill", "decode"):
        compute = shaped_compute_seconds(
            flops,
            peak,
            _compute_efficiency(efficiency, phase),
            ceiling_ratio,
            layers * gemm_efficiency.GEMMS_PER_LAYER,
            tail_seconds,
        )
        overhead = steps.launch_overhead_seconds(layers, efficiency)
        # one roofline for the probe's whole step: its decode steps are small batches, where every kernel group
        # is bandwidth-bound and the groups' sum (`roofline.kernel_groups_seconds`) is this max
        return float(pipeline_step_seconds(max(compute, memory), 0.0, overhead, 0.0, 1))
    kernels = layers * gemm_efficiency.GEMMS_PER_LAYER * gemm_efficiency.TRAINING_GEMMS_PER_FORWARD_GEMM
    compute = shaped_compute_seconds(
        flops, peak, _compute_efficiency(efficiency, phase), ceiling_ratio, kernels, tail_seconds
    )
    return float(max(compute, memory))


def optimizer_seconds(bytes_moved: float, bandwidth: float, efficiency: Efficiency) -> float:
    """The AdamW step as training_metrics plans it: a memory-bound elementwise kernel."""
    return float(memory_seconds(bytes_moved, bandwidth, efficiency.memory_bandwidth))


# ---------------------------------------------------------------------------------------------
# fitting


@dataclass(frozen=True)
class GemmShape:
    """How `plan()` turns an inference compute efficiency into time on this device
    (`inference.steps.step_compute_seconds`): x the GEMM ceiling ratio, + a fixed time per GEMM kernel."""

    ratio: float
    tail_seconds: float
    passes: int = 1  # GEMM passes per layer: 1 for an inference forward, 3 for training (forward + 2 backward)

    def compute_seconds(self, flops: float, peak: float, efficiency: float, layers: int) -> float:
        kernels = layers * gemm_efficiency.GEMMS_PER_LAYER * self.passes
        return float(shaped_compute_seconds(flops, peak, efficiency, self.ratio, kernels, self.tail_seconds))

    def efficiency_for(self, flops: float, peak: float, seconds: float, layers: int) -> float:
        """The phase efficiency at which `compute_seconds` equals `seconds` (the kernels' fixed time off first,
        at most half of it taken so a tiny step still yields a finite efficiency)."""
        kernels = layers * gemm_efficiency.GEMMS_PER_LAYER * self.passes
        busy = max(seconds - kernels * self.tail_seconds, 0.5 * seconds)
        return flops / (peak * busy * self.ratio)


@dataclass
class FitResult:
    efficiency: Efficiency
    notes: dict[str, str]


def fit_efficiency(
    ceilings: Ceilings,
    phases: list[PhaseMeasurement],
    ref: Reference,
    dtype: str,
    geometry: ProxyGeometry | None,
    label: str,
) -> FitResult:
    peak = ref.peak_flops(dtype)
    bw = ref.bandwidth_bytes_per_second
    d = DEFAULT_EFFICIENCY
    by_name = {p.name: p for p in phases}

    copy = ceilings.bandwidth_bytes_per_second()
    square = ceilings.best_matmul_flops_per_second(dtype, "square")
    skinny = ceilings.best_matmul_flops_per_second(dtype, "skinny")
    e_copy = clamp(copy / bw) if copy else d.memory_bandwidth
    e_square = clamp(square / peak) if square else d.prefill_compute
    e_skinny = clamp(skinny / peak) if skinny else d.decode_compute

    probe = by_name.get("overhead_probe")
    overhead = d.layer_overhead_seconds
    shape = GemmShape(ref.gemm_ceiling_ratio(dtype), ref.tail_seconds(dtype))
    train_shape = GemmShape(
        ref.training_ceiling_ratio(dtype), ref.tail_seconds(dtype), gemm_efficiency.TRAINING_GEMMS_PER_FORWARD_GEMM
    )

    def fit_with(overhead: float) -> dict:
        return _fit_rooflines(
            overhead,
            by_name,
            geometry,
            peak,
            bw,
            dtype,
            e_copy,
            e_square,
            e_skinny,
            copy,
            square,
            skinny,
            shape,
            train_shape,
        )

    fitted = fit_with(overhead)
    if probe is not None:
        # Fixed point: the overhead is the probe's time minus its roofline at the fitted efficiencies, and
        # the efficiencies are fitted to the phase times minus the overhead. Converges in a few rounds
        # because the probe's roofline is a small share of its time.
        e_mem, e_decode = e_copy, e_skinny
        for _ in range(12):
            roofline = max(shape.compute_seconds(probe.flops, peak, e_decode, probe.layers), probe.bytes / (bw * e_mem))
            overhead = min(max(probe.seconds - roofline, 0.0) / probe.layers, 1e-2)
            fitted = fit_with(overhead)
            e_mem, e_decode = fitted["memory_bandwidth"], fitted["decode_compute"]
    notes = dict(fitted.pop("notes"))
    notes["layer_overhead_seconds"] = (
        f"one-token decode through {probe.layers} very narrow layers (FLOPs and bytes negligible) minus its roofline"
        if probe is not None
        else "default (not measured)"
    )
    e_mem, e_decode, e_prefill, e_train = (
        fitted["memory_bandwidth"],
        fitted["decode_compute"],
        fitted["prefill_compute"],
        fitted["training_compute"],
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
        prefill_compute=e_prefill,
        decode_compute=e_decode,
        memory_bandwidth=e_mem,
        communication=e_comm,
        training_compute=e_train,
        host_link=d.host_link,
        layer_overhead_seconds=overhead,
        **{name: getattr(d, name) for name in ENGINE_COST_FIELDS},
        source=f"calibration '{label}'",
    )
    return FitResult(efficiency, notes)


def _fit_rooflines(
    overhead: float,
    by_name: dict,
    geometry: ProxyGeometry | None,
    peak: float,
    bw: float,
    dtype: str,
    e_copy: float,
    e_square: float,
    e_skinny: float,
    copy,
    square,
    skinny,
    shape: GemmShape,
    train_shape: GemmShape,
) -> dict:
    """Steps 1-3 for a given per-layer overhead: memory bandwidth, decode, prefill and training compute.

    Inference compute efficiencies are fitted as `plan()` applies them (`GemmShape`): the kernels' fixed time
    is taken off the busy time and the device's GEMM ceiling ratio divided out, so the fitted efficiency
    reproduces the measured step."""
    d = DEFAULT_EFFICIENCY
    notes: dict[str, str] = {}

    def busy(phase: PhaseMeasurement) -> float | None:
        """The phase's time minus its per-layer overhead; None when the overhead is most of it."""
        t = phase.seconds - phase.layers * overhead
        return t if t > 0.2 * phase.seconds else None

    e_mem, e_decode = e_copy, e_skinny
    notes["memory_bandwidth"] = "copy benchmark" if copy else "default (not measured)"
    notes["decode_compute"] = f"skinny {dtype} GEMM ceiling" if skinny else "default (not measured)"
    decode, holdout = by_name.get("decode"), by_name.get("decode_holdout")
    if decode is not None and (t := busy(decode)) is not None:
        f, b = decode.flops, decode.bytes
        # Two explanations of the decode time; each keeps the other resource at its ceiling (or just fast
        # enough not to bind).
        bandwidth_bound = (clamp(b / (bw * t)), clamp(max(e_skinny, shape.efficiency_for(f, peak, t, decode.layers))))
        compute_bound = (clamp(max(e_copy, b / (bw * t))), clamp(shape.efficiency_for(f, peak, t, decode.layers)))
        if holdout is not None and (holdout_busy := busy(holdout)) is not None:
            # The second decode point (other batch and context) picks the explanation that predicts it.
            def miss(candidate: tuple[float, float]) -> float:
                em, ec = candidate
                predicted = max(
                    shape.compute_seconds(holdout.flops, peak, ec, holdout.layers), holdout.bytes / (bw * em)
                )
                return abs(math.log(predicted / holdout_busy))

            use_compute = miss(compute_bound) < miss(bandwidth_bound)
            how = "chosen by which explanation predicts the second decode point"
        else:
            use_compute = (f / (skinny or peak * d.decode_compute * shape.ratio)) > (
                b / (copy or bw * d.memory_bandwidth)
            )
            how = "chosen from the skinny-GEMM and copy ceilings"
        if use_compute:
            e_mem, e_decode = compute_bound
            notes["decode_compute"] = f"fitted to the decode step: compute-bound on this device ({how}; {dtype})"
        else:
            e_mem, e_decode = bandwidth_bound
            notes["memory_bandwidth"] = (
                f"fitted to the decode step: bandwidth-bound, weights + KV read per step ({how})"
            )

    e_prefill = e_square
    notes["prefill_compute"] = f"square {dtype} GEMM ceiling" if square else "default (not measured)"
    prefill = by_name.get("prefill")
    if prefill is not None and (prefill_busy := busy(prefill)) is not None:
        memory_time = prefill.bytes / (bw * e_mem)
        if memory_time < prefill_busy:
            e_prefill = clamp(shape.efficiency_for(prefill.flops, peak, prefill_busy, prefill.layers))
            notes["prefill_compute"] = f"fitted to the prefill step ({prefill.tokens} tokens, {dtype})"
        else:
            notes["prefill_compute"] += " (the prefill step was bandwidth-bound at the fitted bandwidth)"

    e_train = e_square if square else d.training_compute
    notes["training_compute"] = f"square {dtype} GEMM ceiling" if square else "default (not measured)"
    train = by_name.get("train")
    if train is not None and geometry is not None:
        fb = train.breakdown_seconds.get("forward", 0.0) + train.breakdown_seconds.get("backward", 0.0)
        work = geometry.train_work(train.batch, train.context_tokens)
        if fb > 0 and work["bytes"] / (bw * e_mem) < fb:
            e_train = clamp(train_shape.efficiency_for(work["flops"], peak, fb, train.layers))
            notes["training_compute"] = "fitted to the training step's forward + backward"

    return dict(
        memory_bandwidth=e_mem,
        decode_compute=e_decode,
        prefill_compute=e_prefill,
        training_compute=e_train,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------
# the predicted-vs-measured table


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
    d = DEFAULT_EFFICIENCY
    rows: list[ComparisonRow] = []
    bw = ref.bandwidth_bytes_per_second

    # ---- ceilings
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
    copy = ceilings.bandwidth_bytes_per_second()
    if copy:
        size = next(b.buffer_bytes for b in ceilings.bandwidth if b.bytes_per_second == copy)
        rows.append(
            ComparisonRow(
                quantity=f"copy bandwidth ({size >> 20} MiB buffer)",
                phase="bandwidth",
                unit="B/s",
                role="ceiling",
                measured=copy,
                predicted=bw * d.memory_bandwidth,
                predicted_calibrated=bw * efficiency.memory_bandwidth,
                note="catalog bandwidth x memory-bandwidth efficiency",
            )
        )
    if ceilings.allreduce:
        fitted_alpha = fit_allreduce(ceilings.allreduce, ref, d.communication).latency_seconds
        sizes = sorted({a.message_bytes for a in ceilings.allreduce})
        fit_sizes = {sizes[0], *sizes[-2:]}  # fit_allreduce: beta from the two largest, alpha from the smallest
        for a in sorted(ceilings.allreduce, key=lambda a: a.message_bytes):

            def allreduce(eff, latency=ref.link_latency_seconds, a=a):
                return float(
                    collectives.allreduce_seconds(
                        a.message_bytes, a.world_size, ref.link_bytes_per_second, latency, eff
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
                    note="collectives.allreduce_seconds (NCCL: the faster of ring and tree; calibrated with the "
                    "fitted alpha and beta)",
                )
            )

    if geometry is None:
        return rows
    peak = ref.peak_flops(dtype)
    ratio, tail = ref.gemm_ceiling_ratio(dtype), ref.tail_seconds(dtype)
    train_ratio = ref.training_ceiling_ratio(dtype)

    # ---- phase times
    for ph in phases:
        layers = ph.layers
        if ph.phase in ("prefill", "decode"):
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
            rows.append(
                ComparisonRow(
                    quantity=f"{what} ({layers} layers)",
                    phase=ph.phase,
                    unit="s",
                    role=role,
                    measured=ph.seconds,
                    predicted=predicted_seconds(ph.phase, ph.flops, ph.bytes, peak, bw, d, layers, ratio, tail),
                    predicted_calibrated=predicted_seconds(
                        ph.phase, ph.flops, ph.bytes, peak, bw, efficiency, layers, ratio, tail
                    ),
                    note=note,
                )
            )
        else:
            work = geometry.train_work(ph.batch, ph.context_tokens)
            fb = ph.breakdown_seconds.get("forward", 0.0) + ph.breakdown_seconds.get("backward", 0.0)
            opt = ph.breakdown_seconds.get("optimizer", 0.0)
            if fb > 0:
                rows.append(
                    ComparisonRow(
                        quantity=f"train forward+backward, {ph.batch} x {ph.context_tokens} tokens ({layers} layers)",
                        phase="train",
                        unit="s",
                        role="fit",
                        measured=fb,
                        predicted=predicted_seconds(
                            "train", work["flops"], work["bytes"], peak, bw, d, layers, train_ratio, tail
                        ),
                        predicted_calibrated=predicted_seconds(
                            "train", work["flops"], work["bytes"], peak, bw, efficiency, layers, train_ratio, tail
                        ),
                        note="training.step_time hardware FLOPs; microbatch_memory_bytes",
                    )
                )
            if opt > 0:
                rows.append(
                    ComparisonRow(
                        quantity=f"AdamW step ({layers} layers)",
                        phase="train",
                        unit="s",
                        role="holdout",
                        measured=opt,
                        predicted=optimizer_seconds(work["optimizer_bytes"], bw, d),
                        predicted_calibrated=optimizer_seconds(work["optimizer_bytes"], bw, efficiency),
                        note="training.step_time.optimizer_step_bytes at the memory-bandwidth efficiency",
                    )
                )

    # ---- memory
    for ph in phases:
        if ph.phase == "prefill" and ph.name == "prefill":
            predicted = {"weights": geometry.weight_bytes(), "kv_cache": geometry.kv_bytes(1, ph.tokens)}
            rows += _memory_rows(ph, predicted, f"prefill {ph.tokens} tokens")
            if ph.peak_memory_bytes is not None:
                total = sum(predicted.values()) + geometry.inference_activation_bytes(ph.tokens)
                rows.append(_peak_row(ph, ph.peak_memory_bytes, total, "weights + KV + inference_activation_bytes"))
        elif ph.phase == "decode" and ph.name == "decode":
            predicted = {"kv_cache": geometry.kv_bytes(ph.batch, ph.context_tokens + 1)}
            rows += _memory_rows(ph, predicted, f"decode batch {ph.batch}, {ph.context_tokens + 1} tokens")
            if ph.peak_memory_bytes is not None:
                total = geometry.weight_bytes() + predicted["kv_cache"] + geometry.inference_activation_bytes(ph.batch)
                rows.append(_peak_row(ph, ph.peak_memory_bytes, total, "weights + KV + inference_activation_bytes"))
        elif ph.phase == "train":
            predicted = geometry.training_memory(ph.batch, ph.context_tokens)
            rows += _memory_rows(
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
    if runtime is not None:
        measured, correction = runtime
        rows.append(
            ComparisonRow(
                quantity="runtime overhead outside tensors (CUDA context, libraries)",
                phase="runtime",
                unit="B",
                role="memory",
                measured=measured,
                predicted=base_memory.CUDA_CONTEXT_BYTES,
                predicted_calibrated=base_memory.CUDA_CONTEXT_BYTES + correction,
                note="device used - allocator reserved; the correction replaces the documented 0.5 GiB",
            )
        )
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


__all__ = [
    "FitResult",
    "ProxyGeometry",
    "Reference",
    "clamp",
    "comparison_rows",
    "device_reference",
    "fit_allreduce",
    "fit_gemm_shape",
    "fit_efficiency",
    "layers_only",
    "optimizer_seconds",
    "predicted_seconds",
]
