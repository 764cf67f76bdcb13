"""Disaggregated serving: a prefill pool and a decode pool (DistServe, Splitwise, Mooncake, Dynamo).

The scenario's `num_gpus` is split: `prefill_gpus` GPUs form prefill replicas of `prefill_tensor_parallel`
GPUs each; the rest form decode replicas with the scenario's own TP x PP. A request is prefilled on a
prefill replica (which samples its first token: TTFT ends there), its KV cache then crosses to a decode
replica — every prefill GPU sends its tensor-parallel shard at once over the link that spans both
replicas (`inputs.hardware_link`; the network once they do not share a node), priced by
`physics.communication.point_to_point_seconds` — and the decode replica generates the remaining tokens without ever
stopping for another prompt. Both pools are the same simulated engine (`serving`) with the same
step costs as `plan()`; requests are routed round robin in each pool.

`best_split` tries every split of the GPUs (whole replicas on both sides) and keeps the one with the
largest goodput under the SLO, next to the colocated deployment on the same GPUs, so the answer says
when disaggregation wins and when it does not (short prompts, small models: the transfer and the idle
halves cost more than the interference they remove).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.inputs import hardware_link
from planner.inference.scenario import InferenceScenario
from planner.inference.serving.scheduler import ReplicaContext, simulate_replica
from planner.inference.serving.step_log import ReplicaTimeline
from planner.inference.traffic import ROUTING, TrafficEngine, simulate_after_request_overhead
from planner.inference.traffic_results import TrafficResult, adapter_stats, summarize
from planner.inference.workload import PrefixHits, Requests, Traffic
from planner.model.architecture import kv_cache_bytes_per_token
from planner.physics import communication
from planner.scenario_base import revised

ASSUMPTIONS = (
    "The scenario's GPUs split into a prefill pool (replicas of prefill_tensor_parallel GPUs, PP 1) and a decode "
    "pool (replicas with the scenario's TP x PP); GPUs that make no whole decode replica stay idle.",
    "Both pools are the same simulated engine with the same step costs as the static plan; each keeps the "
    "scenario's batch cap per replica; requests are routed round robin in each pool.",
    "TTFT ends on the prefill replica (it samples the first token); the decode replica generates the rest and never "
    "stops for another prompt.",
    "Each prompt's KV cache crosses once, after its first token: every prefill GPU sends its tensor-parallel shard "
    "at once over the link spanning both replicas (NVLink within a node, the network across), priced as one "
    "point-to-point transfer; transfers delay the decode start but are not contended and take no GPU time.",
    "Prefix caching happens where prompts are prefilled: a bounded GPU prefix cache and a prefix pool are per "
    "prefill replica. Speculative decoding runs in both pools (the draft's prompt pass where the prompt is "
    "prefilled, draft-and-verify rounds where it decodes); a draft's own KV cache is not in the transfer.",
)


class DisaggregatedLayout(BaseModel):
    """How the scenario's GPUs split into a prefill pool and a decode pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_gpus: int = Field(ge=1, le=65_536, description="GPUs of the prefill pool (the rest decode)")
    prefill_tensor_parallel: int = Field(default=1, ge=1, le=512, description="tensor parallelism of a prefill replica")


class DisaggregatedResult(BaseModel):
    """One split, simulated: the whole stream's answer and what the split costs in transfers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: DisaggregatedLayout
    prefill_replicas: int
    decode_replicas: int
    kv_transfer_seconds_mean: float  # per request, prompt's KV from its prefill to its decode replica
    traffic: TrafficResult


class SplitComparison(BaseModel):
    """Every split tried, the best by goodput under the SLO, and the colocated deployment beside it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    splits: list[DisaggregatedResult]
    best: DisaggregatedResult | None
    colocated: TrafficResult
    disaggregation_wins: bool
    reason: str


def simulate_disaggregated(
    scenario: InferenceScenario,
    layout: DisaggregatedLayout,
    calibration: CalibrationRecord | None = None,
    traffic: Traffic | None = None,
) -> DisaggregatedResult:
    """The scenario's traffic on a prefill pool and a decode pool (see the module docstring)."""
    prefill_engine, decode_engine = _pools(scenario, layout, calibration, traffic)
    traffic = prefill_engine.traffic
    reqs = prefill_engine.requests(traffic)
    n = len(reqs)
    hits: list[PrefixHits] = []
    prefill_timelines: list[ReplicaTimeline] = []
    first, sent, scheduled = _prefill_pool(prefill_engine, traffic, reqs, hits, prefill_timelines)
    transfer = kv_transfer_seconds(prefill_engine, decode_engine, reqs.prompt_tokens)
    # Decode pool: the request arrives with its prompt's KV (cached) and one token generated; speculative
    # decoding runs in both pools (the draft's pass over each prompt where it is prefilled, the draft-and-verify
    # rounds where it decodes).
    ready = first + transfer
    order = np.argsort(ready, kind="stable")
    decode_cost, decode_speculation = decode_engine.stream_cost(reqs), decode_engine.speculation(traffic)
    # Every pool serves every adapter: a request runs its adapter where it is prefilled and where it decodes.
    slots = decode_engine.adapter_slot_limits
    timelines: list[ReplicaTimeline] = []
    for r in range(min(decode_engine.replicas, n)):
        mine = order[r :: decode_engine.replicas]
        t = simulate_replica(
            ready[mine],
            reqs.prompt_tokens[mine] + 1,
            np.maximum(reqs.output_tokens[mine] - 1, 0),
            reqs.prompt_tokens[mine],
            mine,
            ReplicaContext(
                decode_engine.limits, decode_cost, speculation=decode_speculation, replica_index=r, adapters=slots
            ),
            adapter_ids=None if reqs.adapter is None else reqs.adapter[mine],
        )
        timelines.append(
            replace(
                t,
                sent_seconds=sent[mine],
                scheduled_seconds=scheduled[mine],
                first_token_seconds=first[mine],
                output_tokens=reqs.output_tokens[mine],
            )
        )
    result = summarize(
        timelines,
        traffic.slo,
        decode_engine.limits.kv_blocks,
        f"{ROUTING}, in each pool",
        prefill_engine.prefix_stats(traffic, reqs, hits),
        decode_engine.ranges.apply if decode_engine.ranges is not None else None,
    )
    counts = decode_engine.adapter_counts
    if counts is not None:  # both pools' loads (TTFT waits for the prefill pool's)
        result = revised(result, adapters=adapter_stats(prefill_timelines + timelines, counts))
    return DisaggregatedResult(
        layout=layout,
        prefill_replicas=prefill_engine.replicas,
        decode_replicas=decode_engine.replicas,
        kv_transfer_seconds_mean=float(np.mean(transfer)) if n else 0.0,
        traffic=result,
    )


def _prefill_pool(
    engine: TrafficEngine, traffic: Traffic, reqs: Requests, hits: list[PrefixHits], timelines: list[ReplicaTimeline]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The prefill pool's part of the stream: each request needs its prompt and one sampled token; a bounded
    prefix cache (and a pool behind it) is per prefill replica, as in the colocated simulation (its hits go to
    `hits`, its replicas' timelines to `timelines`). Each request's first token, send and schedule times."""
    n = len(reqs)
    cost, speculation = engine.stream_cost(reqs), engine.speculation(traffic)
    slots = engine.adapter_slot_limits
    first = np.full(n, np.nan)
    sent = np.full(n, np.nan)
    scheduled = np.full(n, np.nan)
    for r in range(min(engine.replicas, n)):
        mine = np.arange(r, n, engine.replicas)
        cached, delay = engine.replica_prefix_cache(traffic, reqs, mine, hits)
        t = simulate_after_request_overhead(
            reqs.arrival_seconds[mine],
            reqs.prompt_tokens[mine],
            np.ones(len(mine), dtype=np.int64),
            cached,
            mine,
            ReplicaContext(engine.limits, cost, speculation=speculation, replica_index=r, adapters=slots),
            ready_delay_seconds=delay,
            adapter_ids=None if reqs.adapter is None else reqs.adapter[mine],
        )
        timelines.append(t)
        first[mine], sent[mine], scheduled[mine] = t.first_token_seconds, t.sent_seconds, t.scheduled_seconds
    return first, sent, scheduled


def kv_transfer_seconds(prefill: TrafficEngine, decode: TrafficEngine, prompt_tokens: np.ndarray) -> np.ndarray:
    """Seconds to move each prompt's KV cache from a prefill replica to a decode replica: every prefill GPU
    sends its shard in parallel over the link spanning both replicas."""
    p, d = prefill.inputs, decode.inputs
    prompt_kv_bytes = kv_cache_bytes_per_token(p.arch, float(p.inputs.kv_bytes_per_element)) * prompt_tokens
    senders = int(p.inputs.tensor_parallel)
    span = senders * int(p.inputs.pipeline_parallel) + int(d.inputs.tensor_parallel) * int(d.inputs.pipeline_parallel)
    link = hardware_link(span, p.hw)
    return np.asarray(
        communication.point_to_point_seconds(prompt_kv_bytes / senders, link, p.efficiency.communication), dtype=float
    )


def best_split(
    scenario: InferenceScenario, calibration: CalibrationRecord | None = None, traffic: Traffic | None = None
) -> SplitComparison:
    """Every split of the scenario's GPUs into whole prefill and decode replicas (prefill replicas with
    the scenario's TP), the one with the most goodput under the SLO (throughput without one), and the
    colocated deployment on the same GPUs."""
    colocated_engine = TrafficEngine.of(scenario, calibration, traffic)
    colocated = colocated_engine.simulate()
    per_replica = scenario.tensor_parallel * scenario.pipeline_parallel
    splits = []
    for prefill_gpus in range(per_replica, scenario.num_gpus, per_replica):
        layout = DisaggregatedLayout(prefill_gpus=prefill_gpus, prefill_tensor_parallel=scenario.tensor_parallel)
        try:
            splits.append(simulate_disaggregated(scenario, layout, calibration, traffic))
        except PlanningError:
            continue  # a pool that cannot hold the model on its GPUs: not a split
    best = max(splits, key=lambda s: _score(s.traffic), default=None)
    wins = best is not None and _score(best.traffic) > _score(colocated)
    if best is None and scenario.num_gpus < 2 * per_replica:
        reason = (
            f"{scenario.num_gpus} GPU(s) hold one replica of {per_replica} (TP {scenario.tensor_parallel} x PP "
            f"{scenario.pipeline_parallel}) only: a split needs a prefill and a decode replica, at least "
            f"{2 * per_replica} GPUs"
        )
    elif best is None:
        reason = "no split of these GPUs holds the model in both pools: nothing to compare"
    else:
        measure = "goodput under the SLO" if colocated.goodput_requests_per_second is not None else "throughput"
        reason = (
            f"best split {best.layout.prefill_gpus} prefill / {scenario.num_gpus - best.layout.prefill_gpus} decode "
            f"GPUs: {measure} {_score(best.traffic):.3g} vs {_score(colocated):.3g} requests/s colocated"
        )
    return SplitComparison(splits=splits, best=best, colocated=colocated, disaggregation_wins=wins, reason=reason)


def _score(result: TrafficResult) -> float:
    goodput = result.goodput_requests_per_second
    return goodput if goodput is not None else result.request_throughput_per_second


def _pools(
    scenario: InferenceScenario,
    layout: DisaggregatedLayout,
    calibration: CalibrationRecord | None,
    traffic: Traffic | None,
) -> tuple[TrafficEngine, TrafficEngine]:
    decode_gpus = scenario.num_gpus - layout.prefill_gpus
    per_decode_replica = scenario.tensor_parallel * scenario.pipeline_parallel
    if decode_gpus <= 0:
        raise PlanningError(
            f"prefill_gpus={layout.prefill_gpus} must be less than the scenario's {scenario.num_gpus} GPUs "
            "(the rest decode), so that at least one decode replica remains"
        )
    if decode_gpus < per_decode_replica:
        raise PlanningError(
            f"{layout.prefill_gpus} prefill GPUs leave {decode_gpus} of {scenario.num_gpus} for decoding, less than "
            f"one decode replica ({per_decode_replica} GPUs)"
        )
    decode_replicas = decode_gpus // per_decode_replica
    prefill_replicas = layout.prefill_gpus // layout.prefill_tensor_parallel
    if prefill_replicas < 1 or layout.prefill_gpus % layout.prefill_tensor_parallel:
        raise PlanningError(
            f"prefill_gpus={layout.prefill_gpus} is not a whole number of prefill replicas of "
            f"{layout.prefill_tensor_parallel} GPUs"
        )
    # The batch cap per replica stays the scenario's (concurrency over its replicas) in both pools.
    cap = max(1, scenario.concurrency // scenario.replicas)
    try:
        fields = scenario.model_dump()
        prefill_scenario = InferenceScenario.model_validate(
            {
                **fields,
                "num_gpus": layout.prefill_gpus,
                "tensor_parallel": layout.prefill_tensor_parallel,
                "pipeline_parallel": 1,
                "expert_parallel": 1,
                "concurrency": cap * prefill_replicas,
            }
        )
        decode_scenario = InferenceScenario.model_validate(
            {**fields, "num_gpus": decode_replicas * per_decode_replica, "concurrency": cap * decode_replicas}
        )
    except ValueError as exc:  # pydantic's ValidationError and PlanningError
        raise PlanningError(f"this split is not a valid layout: {exc}") from None
    return (
        TrafficEngine.of(prefill_scenario, calibration, traffic),
        TrafficEngine.of(decode_scenario, calibration, traffic),
    )
