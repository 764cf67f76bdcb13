"""The engine's predictions for the proxy: its FLOP, byte and memory counts (`ProxyGeometry`) and the time `plan()`
gives one of its steps (`predicted_seconds`).

Every prediction here calls the engine's term functions (planner.physics.memory, planner.inference.steps,
planner.training.memory / step_time) on the proxy's architecture with the embedding and output head
removed (the proxy has neither), so the predicted-vs-measured table tests the very formulas `plan()` uses. No torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner.calibration.reference import Reference
from planner.inference import steps
from planner.model.architecture import ModelArchitecture, ParameterCounts, parameter_counts
from planner.physics import elementwise, gemm_efficiency
from planner.physics import memory as base_memory
from planner.physics.efficiency import Efficiency
from planner.physics.roofline import (
    decode_weight_read_bytes,
    memory_seconds,
    pipeline_step_seconds,
    shaped_compute_seconds,
)
from planner.training import activations as tact
from planner.training import memory as tmem
from planner.training import precision as tprec
from planner.training import step_time

ELEMENT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
TRAINING_PRECISION = {"fp32": "fp32", "bf16": "mixed_bf16", "fp16": "mixed_fp16"}


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
    def precision(self) -> tprec.PrecisionBytes:
        return tprec.PRECISIONS[TRAINING_PRECISION[self.dtype]]

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
        kv_written = base_memory.kv_cache_bytes(self.arch, 1, 1, 1, tokens, self.element_bytes, 1, False)
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
        """training.activations.layer_activation_bytes_per_token (FlashAttention, no dropout, no recomputation,
        no parallelism) x layers x tokens; the embedding/head edge terms are left out with the head."""
        per_token = tact.layer_activation_bytes_per_token(
            self.arch, False, tact.ActivationInputs(1, False, True, False, tokens, self.precision.activation)
        )
        return float(per_token * self.arch.num_layers * micro_batch * tokens)

    def training_memory(self, micro_batch: int, tokens: int) -> dict[str, float]:
        p = self.precision
        n = self.trainable_elements()
        moments = tprec.optimizer_state_bytes_per_element("adamw", p.state)
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
        _, hw_per_token = step_time.layer_training_flops_per_token(
            self.counts, self.arch, False, step_time.FlopsInputs(tokens, True)
        )
        flops = micro_batch * tokens * self.arch.num_layers * hw_per_token
        mem = self.training_memory(micro_batch, tokens)
        bytes_mb = step_time.microbatch_memory_bytes(mem["weights"], mem["saved_activations"], n * p.grad, 0)
        opt = step_time.optimizer_step_bytes(mem["optimizer_states"], n, p.grad, p.param, p.master)
        shape = elementwise.TokenShape(micro_batch * tokens, activation_bytes=p.activation)
        elementwise_bytes = elementwise.forward_backward_bytes(self.arch, shape)
        return {
            "flops": float(flops),
            "bytes": float(bytes_mb),
            "optimizer_bytes": float(opt),
            "elementwise_bytes": float(elementwise_bytes),
        }


# ---------------------------------------------------------------------------------------------
# predicted times


@dataclass(frozen=True)
class GemmShape:
    """How `plan()` turns a compute efficiency into time on this device (`inference.steps.step_compute_seconds`,
    `training.step.microbatch_time`): x the GEMM ceiling ratio, + a fixed time per GEMM kernel."""

    ratio: float
    tail_seconds: float
    passes: int = 1  # GEMM passes per layer: 1 for an inference forward, 3 for training (forward + 2 backward)

    @classmethod
    def of(cls, ref: Reference, dtype: str, phase: str) -> GemmShape:
        """The shape plans on `ref` give a `phase` step's GEMMs in `dtype`: the training ceiling ratio and three
        passes for "train", the inference ratio and one pass otherwise."""
        if phase == "train":
            return cls(
                ref.training_ceiling_ratio(dtype),
                ref.tail_seconds(dtype),
                gemm_efficiency.TRAINING_GEMMS_PER_FORWARD_GEMM,
            )
        return cls(ref.gemm_ceiling_ratio(dtype), ref.tail_seconds(dtype))

    def compute_seconds(self, flops: float, peak: float, efficiency: float, layers: int) -> float:
        kernels = layers * gemm_efficiency.GEMMS_PER_LAYER * self.passes
        return float(shaped_compute_seconds(flops, peak, efficiency, self.ratio, kernels, self.tail_seconds))

    def efficiency_for(self, flops: float, peak: float, seconds: float, layers: int) -> float:
        """The phase efficiency at which `compute_seconds` equals `seconds` (the kernels' fixed time off first,
        at most half of it taken so a tiny step still yields a finite efficiency)."""
        kernels = layers * gemm_efficiency.GEMMS_PER_LAYER * self.passes
        busy = max(seconds - kernels * self.tail_seconds, 0.5 * seconds)
        return flops / (peak * busy * self.ratio)


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
    shape: GemmShape,
    layers: int = 0,
) -> float:
    """What the engine plans for one step on one GPU without communication: for inference steps
    `roofline.pipeline_step_seconds` with one stage and one kernel group, max(compute, memory) + `layers` x the per-layer
    overhead (`inference.steps.launch_overhead_seconds`), compute by GEMM ceiling and kernel tail as
    `inference.steps.step_compute_seconds` (one pass through `layers`); for training max(compute, memory) with
    compute as `training.step.microbatch_time` (`shape` is then the training one, `GemmShape.of(ref, dtype,
    "train")`: three GEMM passes per layer, no recomputation) and no per-layer overhead."""
    memory = memory_seconds(bytes_moved, bandwidth, efficiency.memory_bandwidth)
    compute = shape.compute_seconds(flops, peak, _compute_efficiency(efficiency, phase), layers)
    if phase in ("prefill", "decode"):
        overhead = steps.launch_overhead_seconds(layers, efficiency)
        # one roofline for the probe's whole step: its decode steps are small batches, where every kernel group
        # is bandwidth-bound and the groups' sum (`roofline.kernel_groups_seconds`) is this max
        return float(pipeline_step_seconds(max(compute, memory), 0.0, overhead, 0.0, 1))
    return float(max(compute, memory))


def predicted_train_seconds(
    work: dict[str, float], peak: float, bandwidth: float, efficiency: Efficiency, shape: GemmShape, layers: int
) -> float:
    """A training forward + backward as `training.step.microbatch_time` plans it (`work`: `ProxyGeometry.
    train_work`): `predicted_seconds`' compute plus the elementwise kernels at the memory roofline
    (`physics.elementwise`), against the memory roofline."""
    memory = memory_seconds(work["bytes"], bandwidth, efficiency.memory_bandwidth)
    compute = shape.compute_seconds(work["flops"], peak, efficiency.training_compute, layers)
    elementwise = memory_seconds(work["elementwise_bytes"], bandwidth, efficiency.memory_bandwidth)
    return float(max(compute + elementwise, memory))


def optimizer_seconds(bytes_moved: float, bandwidth: float, efficiency: Efficiency) -> float:
    """The AdamW step as training_metrics plans it: a memory-bound elementwise kernel."""
    return float(memory_seconds(bytes_moved, bandwidth, efficiency.memory_bandwidth))


__all__ = [
    "ELEMENT_BYTES",
    "GemmShape",
    "ProxyGeometry",
    "layers_only",
    "optimizer_seconds",
    "predicted_seconds",
    "predicted_train_seconds",
]
