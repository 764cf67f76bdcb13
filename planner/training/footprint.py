"""Memory per GPU of a training job: the terms of `planner.training.memory` (model states) and
`planner.training.activations` assembled per pipeline stage.

Scope: one GPU of the first and of the last pipeline stage (the first holds the most in-flight
micro-batches, the last the output head and the logits); `training_memory` keeps the heavier one.
Broadcasts over numpy arrays of the numeric inputs (DESIGN rule 4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from planner.arrays import Flag, Number, maximum, where
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as base_memory
from planner.physics.lora import lora_adapter_elements
from planner.training import activations as tact
from planner.training import memory as tmem
from planner.training import precision as tprec
from planner.training.inputs import TrainingHardware, TrainingInputs


@dataclass(frozen=True, slots=True)
class ModelStateShard:
    """Model states on one GPU of one stage after TP/PP/EP, before ZeRO sharding: the dense part (ZeRO
    shards it over DP x CP) and the routed-expert part (over DP x CP / EP). Plus the unsharded units
    FSDP/ZeRO-3 gathers: the largest unit (a layer or the embedding/head matrix), one layer, one
    gradient unit."""

    param_dense_bytes: Number
    param_expert_bytes: Number
    trainable_dense_elements: Number
    trainable_expert_elements: Number
    state_dense_bytes: Number  # optimizer moments and fp32 master weights
    state_expert_bytes: Number
    unit_param_bytes: Number
    layer_param_bytes: Number
    unit_grad_bytes: Number

    @property
    def param_bytes(self) -> Number:
        return self.param_dense_bytes + self.param_expert_bytes

    @property
    def trainable_elements(self) -> Number:
        return self.trainable_dense_elements + self.trainable_expert_elements


@dataclass(frozen=True, slots=True)
class MemoryComponents:
    """Bytes on one GPU of one stage, by component; the plan's `memory.components`."""

    weights_bytes: Number
    gradients_bytes: Number
    gradient_accumulation_bytes: Number
    optimizer_states_bytes: Number
    sharding_buffers_bytes: Number
    activations_bytes: Number
    logits_bytes: Number
    runtime_overhead_bytes: Number
    total_bytes: Number = field(init=False)  # the sum, computed on construction

    def __post_init__(self) -> None:
        total = (
            self.weights_bytes
            + self.gradients_bytes
            + self.gradient_accumulation_bytes
            + self.optimizer_states_bytes
            + self.sharding_buffers_bytes
            + self.activations_bytes
            + self.logits_bytes
            + self.runtime_overhead_bytes
        )
        object.__setattr__(self, "total_bytes", total)

    def as_dict(self) -> dict[str, Number]:
        """The components by name (the total left out)."""
        return {name: getattr(self, name) for name in _COMPONENT_NAMES}


_COMPONENT_NAMES = tuple(f.name for f in fields(MemoryComponents) if f.init)


@dataclass(frozen=True, slots=True)
class StageMemory:
    components: MemoryComponents
    host_bytes: Number  # offloaded optimizer states and parameters, in host RAM
    states: ModelStateShard


@dataclass(frozen=True, slots=True)
class TrainingMemory:
    """The heavier stage's memory, and the stages' totals."""

    components: MemoryComponents
    host_bytes: Number
    capacity_bytes: Number
    first_stage_total_bytes: Number
    last_stage: StageMemory  # the step time runs on the last stage (its layers plus the head)
    middle_stage_total_bytes: Number = 0.0  # the second stage, evaluated only when stages are uneven

    @property
    def total_bytes(self) -> Number:
        return self.components.total_bytes

    @property
    def first_stage_is_heaviest(self) -> Flag:
        return self.first_stage_total_bytes >= self.last_stage.components.total_bytes

    @property
    def middle_stage_is_heaviest(self) -> Flag:
        return (self.middle_stage_total_bytes > self.first_stage_total_bytes) & (
            self.middle_stage_total_bytes > self.last_stage.components.total_bytes
        )

    @property
    def fits(self) -> Flag:
        return self.total_bytes <= self.capacity_bytes


def _optimizer_states(
    inputs: TrainingInputs, trainable_dense, trainable_expert, factored_elements: Callable[[], Number]
) -> tuple[Number, Number]:
    """(dense, expert) optimizer-state bytes: master copy plus moments per trainable element, or, for
    Adafactor, the master copy plus the factored second moment (`factored_elements()`, counted with the
    dense part)."""
    p = inputs.precision
    moments = tprec.optimizer_state_bytes_per_element(inputs.recipe.optimizer, p.state)
    if moments is None:
        return trainable_dense * p.master + factored_elements() * p.state, trainable_expert * p.master
    per_element = p.master + moments
    return trainable_dense * per_element, trainable_expert * per_element


def _full_model_shard(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    inputs: TrainingInputs,
    first_stage: bool,
    layers=None,
    edges: bool = True,
) -> ModelStateShard:
    """Full training: every parameter is trainable."""
    lay, p = inputs.layout, inputs.precision
    tp, pp, ep = lay.tensor_parallel, lay.pipeline_parallel, lay.expert_parallel
    layer_elements = tmem.stage_layer_parameter_elements(counts, arch, tp, pp, ep, layers=layers)
    expert_elements = tmem.stage_expert_parameter_elements(counts, arch, tp, pp, ep, layers=layers)
    edge_elements = tmem.edge_parameter_elements(counts, tp, pp, first_stage) if edges else 0.0
    # One FSDP unit: the largest layer (a MoE layer when there is one) or the embedding/head matrix.
    unit_layer_elements = tmem.stage_layer_parameter_elements(counts, arch, tp, arch.num_layers, ep)
    unit_elements = maximum(unit_layer_elements, arch.vocab_size * arch.hidden_size / tp)
    trainable_dense = layer_elements - expert_elements + edge_elements
    state_dense, state_expert = _optimizer_states(
        inputs,
        trainable_dense,
        expert_elements,
        lambda: tmem.adafactor_state_elements(counts, arch, tp, pp, ep, first_stage, layers, edges),
    )
    return ModelStateShard(
        param_dense_bytes=trainable_dense * p.param,
        param_expert_bytes=expert_elements * p.param,
        trainable_dense_elements=trainable_dense,
        trainable_expert_elements=expert_elements,
        state_dense_bytes=state_dense,
        state_expert_bytes=state_expert,
        unit_param_bytes=unit_elements * p.param,
        layer_param_bytes=unit_layer_elements * p.param,
        unit_grad_bytes=unit_elements * p.grad,
    )


def _lora_model_shard(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    inputs: TrainingInputs,
    first_stage: bool,
    layers=None,
    edges: bool = True,
) -> ModelStateShard:
    """LoRA/QLoRA: a frozen base in the activation dtype (bf16; fp32 only for fp32 recipes), its linear
    layers in NF4 for QLoRA; only the adapters are trainable (in the recipe's parameter dtype)."""
    lay, p, lora = inputs.layout, inputs.precision, inputs.lora
    assert lora is not None
    tp, pp, ep = lay.tensor_parallel, lay.pipeline_parallel, lay.expert_parallel
    other_bytes_per_element = p.activation
    linear_bytes_per_element = (
        tprec.nf4_bytes_per_element(lora.double_quantization) if lora.quantize_base else other_bytes_per_element
    )
    base_layers = tmem.stage_layer_parameter_bytes(
        counts, arch, tp, pp, ep, linear_bytes_per_element, other_bytes_per_element, layers
    )
    base_expert = (
        tmem.stage_expert_parameter_elements(counts, arch, tp, pp, ep, layers=layers) * linear_bytes_per_element
    )
    edge_elements = tmem.edge_parameter_elements(counts, tp, pp, first_stage) if edges else 0.0
    adapters = lora_adapter_elements(arch, lora.rank, lora.target_modules, tp, pp, ep, layers=layers)
    trainable_expert = lora_adapter_elements(
        arch, lora.rank, lora.target_modules, tp, pp, ep, experts="only", layers=layers
    )
    trainable_dense = adapters - trainable_expert
    unit_adapters = lora_adapter_elements(arch, lora.rank, lora.target_modules, tp, arch.num_layers, ep)
    unit_base = tmem.stage_layer_parameter_bytes(
        counts, arch, tp, arch.num_layers, ep, linear_bytes_per_element, other_bytes_per_element
    )
    layer_param = unit_base + unit_adapters * p.param
    state_dense, state_expert = _optimizer_states(
        inputs,
        trainable_dense,
        trainable_expert,
        lambda: tmem.lora_adafactor_state_elements(arch, lora.rank, lora.target_modules, tp, pp, ep, layers),
    )
    return ModelStateShard(
        param_dense_bytes=base_layers
        - base_expert
        + edge_elements * other_bytes_per_element
        + trainable_dense * p.param,
        param_expert_bytes=base_expert + trainable_expert * p.param,
        trainable_dense_elements=trainable_dense,
        trainable_expert_elements=trainable_expert,
        state_dense_bytes=state_dense,
        state_expert_bytes=state_expert,
        unit_param_bytes=maximum(layer_param, arch.vocab_size * arch.hidden_size / tp * other_bytes_per_element),
        layer_param_bytes=layer_param,
        unit_grad_bytes=unit_adapters * p.grad,
    )


def model_state_shard(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    inputs: TrainingInputs,
    first_stage: bool,
    layers=None,
    edges: bool = True,
) -> ModelStateShard:
    if inputs.lora is None:
        return _full_model_shard(arch, counts, inputs, first_stage, layers, edges)
    return _lora_model_shard(arch, counts, inputs, first_stage, layers, edges)


def activation_inputs(inputs: TrainingInputs) -> tact.ActivationInputs:
    """What the saved activations read of a plan's inputs (`activations.layer_activation_terms`)."""
    lay, recipe, p = inputs.layout, inputs.recipe, inputs.precision
    return tact.ActivationInputs(
        tensor_parallel=lay.tensor_parallel,
        sequence_parallel=lay.sequence_parallel,
        flash_attention=recipe.flash_attention,
        dropout=recipe.dropout,
        sequence_length=inputs.batch.sequence_length,
        bytes_per_element=p.activation,
        lora_rank=inputs.lora_rank,
        lora_targets=inputs.lora_targets,
        recompute=recipe.recompute,
        recompute_modules=recipe.recompute_modules,
        gemm_input_bytes_per_element=p.gemm_input_activation,
        recompute_method=recipe.recompute_method,
        recompute_num_layers=recipe.recompute_num_layers,
    )


def stage_layer_counts(arch: ModelArchitecture, inputs: TrainingInputs):
    """(first, middle, last) stage layers of this layout with uneven stages; None for the even split."""
    lay = inputs.layout
    return tmem.uneven_stage_layers(
        arch.num_layers, lay.pipeline_parallel, lay.first_stage_layers, lay.last_stage_layers
    )


def fp8_weight_copy_bytes(
    arch: ModelArchitecture, counts: ParameterCounts, inputs: TrainingInputs, layers=None
) -> Number:
    """Transformer Engine's cached FP8 weights on one GPU: `gemm_weight_copy` bytes (an FP8 copy and its
    transpose) per element of the stage's layer GEMM weights; zero without FP8. With ZeRO-3 only the gathered
    unit is cast, so the copies shrink with the parameter shards."""
    p, lay = inputs.precision, inputs.layout
    if not p.gemm_weight_copy:
        return 0.0
    elements = tmem.stage_gemm_weight_elements(
        counts, arch, lay.tensor_parallel, lay.pipeline_parallel, lay.expert_parallel, layers
    )
    return p.gemm_weight_copy * elements / tmem.zero_shards(inputs.recipe.zero_stage, lay.dense_group, 3)


def stage_memory(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    inputs: TrainingInputs,
    first_stage: bool,
    layers=None,
    middle: bool = False,
) -> StageMemory:
    """Every memory component on one GPU of the first or the last stage (with one stage: both are it), or of
    the second stage (`middle`: no embedding or head, one warm-up slot fewer in flight than the first,
    `second_stage_in_flight_microbatches`) when stages are uneven.
    `layers`: the stage's layers when stages are uneven."""
    lay, recipe, p = inputs.layout, inputs.recipe, inputs.precision
    tp, pp, zero = lay.tensor_parallel, lay.pipeline_parallel, recipe.zero_stage
    dense_group, expert_group = lay.dense_group, lay.expert_group
    s = model_state_shard(arch, counts, inputs, first_stage, layers, edges=not middle)
    in_flight = (
        tact.second_stage_in_flight_microbatches(pp, inputs.microbatches, lay.virtual_stages) if middle else None
    )
    is_last = False if middle else where(pp == 1, True, not first_stage)
    grad_bytes = tmem.gradient_bytes_per_element(p.grad, recipe.grad_accumulation_fp32, recipe.megatron_gradient_buffer)
    components = MemoryComponents(
        weights_bytes=tmem.weights_bytes(
            s.param_dense_bytes, s.param_expert_bytes, zero, dense_group, expert_group, recipe.offload_parameters
        )
        + fp8_weight_copy_bytes(arch, counts, inputs, layers),
        gradients_bytes=tmem.gradients_bytes(
            s.trainable_dense_elements * grad_bytes,
            s.trainable_expert_elements * grad_bytes,
            zero,
            dense_group,
            expert_group,
        ),
        gradient_accumulation_bytes=tmem.gradient_accumulation_bytes(
            s.trainable_dense_elements,
            s.trainable_expert_elements,
            zero,
            dense_group,
            expert_group,
            recipe.grad_accumulation_fp32,
            grad_bytes,
        ),
        optimizer_states_bytes=tmem.optimizer_states_bytes(
            s.state_dense_bytes, s.state_expert_bytes, zero, dense_group, expert_group, recipe.offload_optimizer
        ),
        sharding_buffers_bytes=tmem.sharding_buffer_bytes(
            zero, dense_group, s.unit_param_bytes, s.layer_param_bytes, s.unit_grad_bytes
        ),
        activations_bytes=tact.stage_activation_bytes(
            arch,
            activation_inputs(inputs),
            tact.StageSchedule(pp, inputs.microbatches, lay.virtual_stages, first_stage, layers, in_flight, not middle),
            inputs.tokens_per_microbatch,
        ),
        logits_bytes=tact.logits_bytes(arch, tp, inputs.tokens_per_microbatch, is_last, recipe.loss_bytes_per_logit),
        runtime_overhead_bytes=base_memory.runtime_overhead_bytes(hw.is_accelerator, lay.num_gpus)
        + inputs.runtime_overhead_correction_bytes,
    )
    host = where(
        recipe.offload_optimizer,
        tmem.optimizer_states_bytes(s.state_dense_bytes, s.state_expert_bytes, zero, dense_group, expert_group),
        0.0,
    ) + where(
        recipe.offload_parameters,
        tmem.weights_bytes(s.param_dense_bytes, s.param_expert_bytes, zero, dense_group, expert_group),
        0.0,
    )
    return StageMemory(components=components, host_bytes=host, states=s)


def training_memory(
    arch: ModelArchitecture, counts: ParameterCounts, hw: TrainingHardware, inputs: TrainingInputs
) -> TrainingMemory:
    """Memory per GPU on the most loaded pipeline stage: the first or the last, and with uneven stages also
    the second (more layers than the first, one micro-batch fewer in flight)."""
    uneven = stage_layer_counts(arch, inputs)
    first_layers, middle_layers, last_layers = uneven if uneven is not None else (None, None, None)
    first = stage_memory(arch, counts, hw, inputs, first_stage=True, layers=first_layers)
    last = stage_memory(arch, counts, hw, inputs, first_stage=False, layers=last_layers)
    first_total = first.components.total_bytes
    first_heavier = first_total >= last.components.total_bytes
    heavier = _pick(first_heavier, first.components, last.components)
    host = where(first_heavier, first.host_bytes, last.host_bytes)
    middle_total: Number = 0.0
    if uneven is not None and np.any(np.asarray(inputs.layout.pipeline_parallel) > 2):
        middle = stage_memory(arch, counts, hw, inputs, first_stage=False, layers=middle_layers, middle=True)
        middle_total = where(inputs.layout.pipeline_parallel > 2, middle.components.total_bytes, 0.0)
        middle_heavier = middle_total > heavier.total_bytes
        heavier = _pick(middle_heavier, middle.components, heavier)
        host = where(middle_heavier, middle.host_bytes, host)
    return TrainingMemory(
        components=heavier,
        host_bytes=host,
        capacity_bytes=hw.memory_capacity_bytes,
        first_stage_total_bytes=first_total,
        last_stage=last,
        middle_stage_total_bytes=middle_total,
    )


def _pick(condition, when_true: MemoryComponents, when_false: MemoryComponents) -> MemoryComponents:
    if isinstance(condition, np.ndarray):
        return MemoryComponents(
            *(np.where(condition, getattr(when_true, n), getattr(when_false, n)) for n in _COMPONENT_NAMES)
        )
    return when_true if condition else when_false
