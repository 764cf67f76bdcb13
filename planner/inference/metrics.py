"""Every number of an inference plan: memory, the prefill and decode steps, the steady-state serving
cycle with continuous batching, and its price.

`inference_metrics` is the whole computation over plain numbers; it broadcasts, so `planner.search.sweep`
runs the very same code over numpy arrays of scenarios (DESIGN rule 4). `plan_inference` feeds it one
scenario and wraps the numbers into a frozen `InferencePlan`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from planner.arrays import Number, floor, maximum, minimum, where
from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.inference.memory import Headroom, InferenceMemory, headroom, inference_memory
from planner.inference.speculative import Draft, SpeculativeRound, speculative_round
from planner.inference.steps import (
    PhaseStep,
    StepContext,
    decode_step,
    prefill_step,
    request_overhead_seconds,
    uncached_prompt_tokens,
)
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as mem
from planner.physics.cost import HOURS_PER_MONTH, usd_per_hour, usd_per_million_tokens
from planner.physics.efficiency import EfficiencyValues
from planner.physics.energy import busy_share, deployment_watts, gpu_power_watts, kwh_per_million_tokens


@dataclass(frozen=True, slots=True)
class ServingCycle:
    """Steady state with continuous batching on one replica: each request costs its share of a batched
    prefill once and a decode slot for `output_tokens` steps; a replica produces `sequences` tokens per
    decode step. Queueing is not modelled."""

    prefill_seconds_per_request: Number  # a chunk's time shared by the prompts in it
    cycle_seconds: Number  # sequences x prefill per request + output tokens x decode step
    tpot_seconds: Number  # mean time per output token: the other sequences' prefills interfere, its own does not
    burst_ttft_seconds: Number  # the last request's TTFT when a replica's whole concurrency arrives at once
    e2e_latency_seconds: Number
    output_tokens_per_second_per_replica: Number
    output_tokens_per_second: Number  # whole deployment
    output_tokens_per_second_per_gpu: Number
    requests_per_second: Number
    prefill_share_of_time: Number


@dataclass(frozen=True, slots=True)
class InferenceSpend:
    usd_per_hour: Number  # every GPU billed, busy or not
    usd_per_million_output_tokens: Number


@dataclass(frozen=True, slots=True)
class ServingEnergy:
    """What the serving cycle draws (`planner.physics.energy`): per GPU, the deployment, and per 1M output tokens."""

    busy_share: Number  # per GPU: roofline time, memory-bound time weighted (energy), over the cycle's wall time
    watts_per_gpu: Number  # idle + busy share x (board - idle)
    deployment_watts: Number  # every GPU, times the PUE
    kwh_per_million_output_tokens: Number
    electricity_usd_per_million_output_tokens: Number
    co2e_kg_per_million_output_tokens: Number


@dataclass(frozen=True, slots=True)
class InferenceMetrics:
    """The plan as numbers, per GPU unless named otherwise (arrays of them in a sweep)."""

    shape: ReplicaShape
    memory: InferenceMemory
    headroom: Headroom
    prefill: PhaseStep  # one request's uncached prompt at an idle replica
    request_overhead_seconds: Number  # the API server's per-request work before the prefill (TTFT only)
    decode: PhaseStep  # plain decoding (the verify step is `speculation.verify`)
    serving: ServingCycle
    spend: InferenceSpend
    energy: ServingEnergy
    speculation: SpeculativeRound | None = None  # with speculative decoding: the draft-and-verify round
    # multi-LoRA serving: the mean wait for the request's adapter (`AdapterInputs.expected_load_seconds`), which
    # stalls the whole step that admits it
    adapter_load_seconds: Number = 0.0

    @property
    def draft_prefill_seconds(self) -> Number:
        return self.speculation.draft_prefill_seconds if self.speculation is not None else 0.0

    @property
    def ttft_seconds(self) -> Number:
        """Request overhead + its adapter's load (multi-LoRA serving) + the prefill step (which samples the first
        token) + a draft's pass over the prompt."""
        return (
            self.request_overhead_seconds
            + self.adapter_load_seconds
            + self.prefill.seconds
            + self.draft_prefill_seconds
        )

    @property
    def decode_seconds_per_token(self) -> Number:
        """Per sequence and output token: a decode step, or a speculative round over the tokens it yields."""
        return self.speculation.seconds_per_token if self.speculation is not None else self.decode.seconds


def inference_metrics(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: EfficiencyValues,
    inputs: InferenceInputs,
    draft: Draft | None = None,
) -> InferenceMetrics:
    """Memory, then the steps sized by it, then the serving cycle they make and its price. With a
    speculative `draft`, decode advances by draft-and-verify rounds (`planner.inference.speculative`)."""
    shape = ReplicaShape.of(arch, inputs, hw)
    memory = inference_memory(arch, counts, hw, inputs, shape, draft)
    weights = memory.read_weight_bytes
    new_tokens = uncached_prompt_tokens(inputs.prompt_tokens, inputs.prefix_cache_hit_rate)
    ctx = StepContext(arch, counts, hw, efficiency, inputs, shape)
    prefill = prefill_step(ctx, weights, new_tokens, 1)
    request_overhead = request_overhead_seconds(efficiency)
    decode = decode_step(ctx, decode_read_weight_bytes(counts, inputs, weights))
    speculation = None
    if draft is not None:
        speculation = speculative_round(
            draft, ctx, decode_read_weight_bytes(counts, inputs, weights), decode, new_tokens
        )
    draft_prefill = speculation.draft_prefill_seconds if speculation is not None else 0.0
    adapter_load = inputs.adapters.expected_load_seconds() if inputs.adapters is not None else 0.0
    batched, prompts = batched_prefill(ctx, weights, new_tokens)
    prefill_per_request = batched.seconds / prompts + draft_prefill + adapter_load
    per_token = speculation.seconds_per_token if speculation is not None else decode.seconds
    serving = serving_cycle(
        inputs, shape, request_overhead + adapter_load + prefill.seconds + draft_prefill, prefill_per_request, per_token
    )
    cluster_usd_per_hour = usd_per_hour(inputs.num_gpus, hw.usd_per_gpu_hour)
    # The cycle's busy time, as `serving_cycle` adds its wall time up: each prompt's share of a batched prefill
    # (a draft's pass over the prompt at that prefill's busy share) and the decode time of every output token,
    # each weighted by what is busy (`PhaseStep.active_seconds`: memory-bound time at energy.MEMORY_BOUND_ACTIVITY).
    prefill_busy = busy_share(batched.active_seconds, batched.seconds) * prefill_per_request
    decode_busy = decode.active_seconds if speculation is None else speculative_busy_seconds_per_token(speculation)
    cycle_busy = shape.sequences * prefill_busy + inputs.output_tokens * decode_busy
    return InferenceMetrics(
        shape=shape,
        memory=memory,
        headroom=headroom(arch, memory, inputs, shape, draft),
        prefill=prefill,
        request_overhead_seconds=request_overhead,
        adapter_load_seconds=adapter_load,
        decode=decode,
        speculation=speculation,
        serving=serving,
        spend=InferenceSpend(
            usd_per_hour=cluster_usd_per_hour,
            usd_per_million_output_tokens=usd_per_million_tokens(
                cluster_usd_per_hour, serving.output_tokens_per_second
            ),
        ),
        energy=inference_energy(hw, inputs, busy_share(cycle_busy, serving.cycle_seconds), serving),
    )


def speculative_busy_seconds_per_token(round_: SpeculativeRound) -> Number:
    """Busy time per sequence and generated token of a draft-and-verify round: the verify step's and the k
    draft steps' roofline time (weighted by what is busy, `PhaseStep.active_seconds`), over the tokens the round
    yields (as `SpeculativeRound.seconds_per_token`)."""
    busy = round_.verify.active_seconds + round_.drafted_tokens * round_.draft_step.active_seconds
    return busy / round_.tokens_per_sequence


def inference_energy(
    hw: HardwareInputs, inputs: InferenceInputs, share: Number, serving: ServingCycle
) -> ServingEnergy:
    """Power and energy of the steady serving cycle (`planner.physics.energy`): each GPU at idle + busy share x
    (board - idle), every GPU of the deployment and the PUE; per 1M output tokens at the cycle's rate."""
    watts = gpu_power_watts(hw.board_watts, hw.idle_watts, share)
    kwh = kwh_per_million_tokens(inputs.num_gpus, watts, inputs.pue, serving.output_tokens_per_second)
    return ServingEnergy(
        busy_share=share,
        watts_per_gpu=watts,
        deployment_watts=deployment_watts(inputs.num_gpus, watts, inputs.pue),
        kwh_per_million_output_tokens=kwh,
        electricity_usd_per_million_output_tokens=kwh * inputs.electricity_usd_per_kwh,
        co2e_kg_per_million_output_tokens=kwh * inputs.carbon_kg_per_kwh,
    )


def decode_read_weight_bytes(counts: ParameterCounts, inputs: InferenceInputs, stage_weight_bytes: Number) -> Number:
    """Weights a decode step reads: the stage's, less a vision tower that decoding never runs (with one
    stage; with several the most loaded stage may be the last, which holds none, so nothing is taken off)."""
    if not counts.vision_encoder:
        return stage_weight_bytes
    vision = mem.vision_weight_bytes(counts, inputs.tensor_parallel, inputs.high_precision_bytes_per_element)
    return where(inputs.pipeline_parallel == 1, stage_weight_bytes - vision, stage_weight_bytes)


def batched_prefill(ctx: StepContext, stage_weight_bytes: Number, new_tokens: Number) -> tuple[PhaseStep, Number]:
    """The prefill step under load and the prompts in it: prompts are prefilled in full chunks (as many whole
    prompts as a chunk holds, at most the replica's sequences), and a chunk reads the weights once for all of
    them, so each pays the chunk's time divided by the prompts in it."""
    prompts_per_chunk = maximum(floor(ctx.inputs.prefill_chunk_tokens / new_tokens), 1)
    prompts = minimum(prompts_per_chunk, ctx.shape.sequences)
    return prefill_step(ctx, stage_weight_bytes, new_tokens, prompts), prompts


def serving_cycle(
    inputs: InferenceInputs,
    shape: ReplicaShape,
    ttft_seconds: Number,
    prefill_seconds_per_request: Number,
    decode_step_seconds: Number,
) -> ServingCycle:
    """The steady-state cycle of one replica and the rates it sustains (see `ServingCycle`)."""
    sequences, output = shape.sequences, inputs.output_tokens
    prefill_seconds = sequences * prefill_seconds_per_request
    cycle = prefill_seconds + output * decode_step_seconds
    # A request's own prefill is over before its first token (TTFT's), so its decode window holds the other
    # sequences' prefills and its decode steps: at one sequence TPOT is the decode step, as the engine measures it.
    tpot = (cycle - prefill_seconds_per_request) / output
    per_replica = sequences * output / cycle
    tokens_per_second = per_replica * shape.replicas
    return ServingCycle(
        prefill_seconds_per_request=prefill_seconds_per_request,
        cycle_seconds=cycle,
        tpot_seconds=tpot,
        burst_ttft_seconds=maximum(prefill_seconds, ttft_seconds),
        e2e_latency_seconds=ttft_seconds + (output - 1) * tpot,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_second=tokens_per_second,
        output_tokens_per_second_per_gpu=tokens_per_second / inputs.num_gpus,
        requests_per_second=tokens_per_second / output,
        prefill_share_of_time=prefill_seconds / cycle,
    )


# ---------------------------------------------------------------------------------------------
# the metrics as flat records: declared once, read by the plan, the sweep, the CLI and the CSV


@dataclass(frozen=True, slots=True)
class Column:
    """One number of an inference plan as a flat record field.

    `name` carries the unit (`ttft_seconds`): the sweep frame's and the CLI's column. `path` is where the plan
    JSON holds it, which is also its CSV column (`performance.ttft_seconds`; `planner.export` flattens the JSON
    with dots). `read` takes it from the typed metrics, a number for one plan or an array for a sweep.
    `kind` is the plan's type for it; `stored` False: the plan record computes it (a pydantic computed field,
    e.g. `memory.total_bytes`), so only the sweep takes it from here; `sweep` False: not a sweep column."""

    name: str
    path: str
    read: Callable[[Any], Number]
    kind: type = float
    stored: bool = True
    sweep: bool = True

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def field(self) -> str:
        return self.path.rpartition(".")[2]


def _component(name: str, attribute: str) -> Column:
    return Column(name, f"memory.components.{name}", lambda m: getattr(m.memory, attribute), stored=False)


INFERENCE_COLUMNS: tuple[Column, ...] = (
    # memory per GPU (components: the always-present ones; a plan's `memory.components` may add a reserve and
    # the draft's, `InferenceMemory.components`)
    _component("weights_bytes", "weights_bytes"),
    _component("kv_cache_bytes", "kv_cache_bytes"),
    _component("activations_bytes", "activations_bytes"),
    _component("logits_bytes", "logits_bytes"),
    _component("runtime_overhead_bytes", "runtime_overhead_bytes"),
    Column("total_bytes", "memory.total_bytes", lambda m: m.memory.total_bytes, stored=False),
    Column("budget_bytes", "memory.budget_bytes", lambda m: m.memory.budget_bytes),
    Column("fits", "memory.fits", lambda m: m.memory.fits, kind=bool, stored=False),
    Column("max_concurrency", "memory.max_concurrency", lambda m: m.headroom.max_concurrency, kind=int),
    Column(
        "max_context_tokens", "memory.max_context_tokens", lambda m: m.headroom.max_context_tokens, int, sweep=False
    ),
    Column("kv_blocks", "memory.kv_blocks", lambda m: m.headroom.kv_blocks, kind=int, sweep=False),
    # latency and throughput
    Column("ttft_seconds", "performance.ttft_seconds", lambda m: m.ttft_seconds),
    Column("burst_ttft_seconds", "performance.burst_ttft_seconds", lambda m: m.serving.burst_ttft_seconds, sweep=False),
    Column("tpot_seconds", "performance.tpot_seconds", lambda m: m.serving.tpot_seconds),
    Column("decode_step_seconds", "performance.decode_step_seconds", lambda m: m.decode.seconds),
    Column("e2e_latency_seconds", "performance.e2e_latency_seconds", lambda m: m.serving.e2e_latency_seconds),
    Column(
        "output_tokens_per_second", "performance.output_tokens_per_second", lambda m: m.serving.output_tokens_per_second
    ),
    Column(
        "output_tokens_per_second_per_gpu",
        "performance.output_tokens_per_second_per_gpu",
        lambda m: m.serving.output_tokens_per_second_per_gpu,
    ),
    Column(
        "output_tokens_per_second_per_replica",
        "performance.output_tokens_per_second_per_replica",
        lambda m: m.serving.output_tokens_per_second_per_replica,
        sweep=False,
    ),
    Column("requests_per_second", "performance.requests_per_second", lambda m: m.serving.requests_per_second),
    Column(
        "prefill_share_of_time",
        "performance.prefill_share_of_time",
        lambda m: m.serving.prefill_share_of_time,
        sweep=False,
    ),
    # price
    Column("usd_per_hour", "cost.usd_per_hour", lambda m: m.spend.usd_per_hour),
    Column("usd_per_month", "cost.usd_per_month", lambda m: m.spend.usd_per_hour * HOURS_PER_MONTH, sweep=False),
    Column(
        "usd_per_million_output_tokens",
        "cost.usd_per_million_output_tokens",
        lambda m: m.spend.usd_per_million_output_tokens,
    ),
    # energy (planner.physics.energy: idle + busy share x (board - idle) per GPU, x PUE)
    Column("busy_share", "energy.busy_share", lambda m: m.energy.busy_share, sweep=False),
    Column("watts_per_gpu", "energy.watts_per_gpu", lambda m: m.energy.watts_per_gpu),
    Column("deployment_watts", "energy.deployment_watts", lambda m: m.energy.deployment_watts),
    Column(
        "kwh_per_million_output_tokens",
        "energy.kwh_per_million_output_tokens",
        lambda m: m.energy.kwh_per_million_output_tokens,
    ),
    Column(
        "electricity_usd_per_million_output_tokens",
        "energy.electricity_usd_per_million_output_tokens",
        lambda m: m.energy.electricity_usd_per_million_output_tokens,
        sweep=False,
    ),
    Column(
        "co2e_kg_per_million_output_tokens",
        "energy.co2e_kg_per_million_output_tokens",
        lambda m: m.energy.co2e_kg_per_million_output_tokens,
        sweep=False,
    ),
)

# One step of a phase (`PhaseStep`) as the plan's `PhaseRoofline` (path: the field under each phase's record,
# `performance.prefill`, `performance.decode`, `performance.speculative.verify`).
PHASE_COLUMNS: tuple[Column, ...] = (
    Column("tokens", "tokens", lambda step: step.tokens),
    Column("flops", "flops", lambda step: step.flops),
    Column("bytes", "bytes", lambda step: step.bytes),
    Column("compute_seconds", "compute_seconds", lambda step: step.compute_seconds),
    Column("memory_seconds", "memory_seconds", lambda step: step.memory_seconds),
    Column("compute_bound_seconds", "compute_bound_seconds", lambda step: step.kernels.compute_bound_seconds),
    Column("memory_bound_seconds", "memory_bound_seconds", lambda step: step.kernels.memory_bound_seconds),
    Column("communication_seconds", "communication_seconds", lambda step: step.communication_seconds),
    Column("seconds", "seconds", lambda step: step.seconds),
)

COLUMNS_BY_NAME = {column.name: column for column in INFERENCE_COLUMNS}
SWEEP_COLUMNS = tuple(column.name for column in INFERENCE_COLUMNS if column.sweep)


def columns_named(*names: str) -> tuple[Column, ...]:
    """The declared columns of these names, in this order (KeyError for a name that is not declared)."""
    return tuple(COLUMNS_BY_NAME[name] for name in names)


# What a search prints beside each layout, in this order (`python -m planner search`).
HEADLINE_COLUMNS = columns_named(
    "ttft_seconds",
    "tpot_seconds",
    "output_tokens_per_second",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "total_bytes",
)


# Per plan record, its stored fields as (field, type, getter), worked out once: a plan builds three records and
# three phases from them.
_STORED: dict[str, tuple[tuple[str, type, Callable[[Any], Number]], ...]] = {
    section: tuple((c.field, c.kind, c.read) for c in INFERENCE_COLUMNS if c.stored and c.section == section)
    for section in dict.fromkeys(c.section for c in INFERENCE_COLUMNS)
}
_PHASE = tuple((c.field, c.read) for c in PHASE_COLUMNS)


def record_fields(m: InferenceMetrics, section: str) -> dict[str, Any]:
    """The stored fields of one plan record (`memory`, `performance`, `cost`) from the metrics, as plain Python
    numbers of the record's types."""
    return {field: kind(read(m)) for field, kind, read in _STORED[section]}


def phase_fields(step: PhaseStep) -> dict[str, float]:
    """A `PhaseRoofline`'s numbers from one phase step."""
    return {field: float(read(step)) for field, read in _PHASE}


def sweep_values(m: InferenceMetrics) -> dict[str, Number]:
    """The sweep frame's output columns from metrics over arrays of scenarios (unconverted: arrays stay arrays)."""
    return {c.name: c.read(m) for c in INFERENCE_COLUMNS if c.sweep}
