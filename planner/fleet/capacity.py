"""One deployment on one layout and one pool, simulated once: its per-replica SLO capacity and its load curve.

These are the fleet's independent pieces of work (tasks): `run_task` runs one, in this process, in a pool of
processes or as a Ray task — the same function, so the answers are the same. Each task builds the deployment's
`TrafficEngine` exactly as `plan()` does (`scenario_inputs` -> `inference_metrics` -> `TrafficEngine.from_metrics`)
and asks it:

- `capacity()`: the largest per-replica rate that meets every SLO target (bisection over simulated rates);
- `load_curve()`: SLO attainment against per-replica rate, read off for each hour's rate per replica;
- `verified()` (a `VerifyTask`, once a plan is chosen): the peak hour's stream on that many replicas, simulated
  directly, growing the replicas until every target holds.

Nothing here is a second simulator: the numbers are the traffic simulation's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError, explain
from planner.fleet.scenario import Deployment, Layout, Pool
from planner.inference.adapters import adapter_summary
from planner.inference.metrics import inference_metrics
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.traffic import CURVE_REQUESTS, TrafficEngine, capacity_answer
from planner.scenario_base import revised


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def candidate_key(deployment: str, layout: Layout, pool: str, memory_share: float = 1.0) -> str:
    share = "" if memory_share == 1.0 else f"|memory {memory_share:.3g}"
    return f"{deployment}|{layout.label}|{pool}{share}"


def candidate_scenario(
    deployment: Deployment, layout: Layout, pool: Pool, memory_share: float = 1.0
) -> InferenceScenario:
    """The deployment's scenario as one scale unit on `pool` (one replica; the expert-parallel group when experts
    span replicas), each replica with the deployment's batch cap, its engine given `memory_share` of the memory the
    scenario gives it (GPUs shared by several engines). Raises PlanningError (a sentence) for a layout the model
    or the pool's GPU cannot take."""
    s = deployment.scenario
    cap = deployment.max_num_seqs_per_replica
    assert s.traffic is not None  # the deployment's validator requires traffic with an SLO
    try:
        return revised(
            s,
            gpu=pool.gpu,
            num_gpus=layout.unit_gpus,
            tensor_parallel=layout.tensor_parallel,
            pipeline_parallel=layout.pipeline_parallel,
            expert_parallel=layout.expert_parallel,
            concurrency=cap * layout.replicas_per_unit,
            usd_per_gpu_hour=pool.on_demand_price,
            gpu_memory_utilization=s.gpu_memory_utilization * memory_share,
            target_requests_per_second=None,
            traffic=revised(s.traffic, max_num_seqs=cap),
        )
    except (ValidationError, PlanningError) as exc:
        raise PlanningError(explain(exc)) from None


def _engine(scenario: InferenceScenario, calibration: CalibrationRecord | None) -> tuple[TrafficEngine, float, float]:
    """The deployment's traffic engine, built as `plan()` builds it, the weights one replica loads (bytes) and the
    static plan's busy share at its full batch (`planner.physics.energy`: memory-bound time weighted)."""
    i = scenario_inputs(scenario, calibration)
    m = inference_metrics(i.arch, i.counts, i.hw, i.efficiency, i.inputs, i.draft)
    engine = TrafficEngine.from_metrics(scenario, i, m)
    gpus = scenario.tensor_parallel * scenario.pipeline_parallel
    return engine, float(m.memory.weights_bytes + m.memory.draft_weights_bytes) * gpus, float(m.energy.busy_share)


class CurveResult(Frozen):
    """What one candidate's simulations answer (per replica of `max_num_seqs_per_replica` sequences)."""

    key: str
    feasible: bool
    why: str | None = None  # why not, one sentence
    capacity_requests_per_second_per_replica: float = 0.0  # largest rate meeting every SLO target
    saturated_requests_per_second_per_replica: float = 0.0  # the static plan's rate at full batch
    saturated_busy_share: float = 1.0  # the static plan's busy share at that batch (the power model's)
    curve: tuple[tuple[float, float], ...] = ()  # (requests/s per replica, share of requests meeting the SLO)
    weights_bytes_per_replica: float = 0.0
    output_tokens_per_request: float = 0.0  # the stream's mean
    max_num_seqs_per_replica: int = 0
    adapters: str | None = None  # the LoRA adapters a replica serves, a clause; None without
    warnings: tuple[str, ...] = ()


class VerifyResult(Frozen):
    """The peak hour simulated directly: whether `planned_replicas` met every target, and how many did."""

    key: str
    requests_per_second: float
    planned_replicas: int
    verified: bool
    replicas: int | None  # None: no count tried met the SLO
    why: str | None = None


@dataclass(frozen=True)
class CurveTask:
    """Capacity and load curve of one candidate (picklable: a process pool or Ray ships it)."""

    key: str
    scenario: InferenceScenario
    calibration: CalibrationRecord | None = None

    def run(self) -> CurveResult:
        try:
            engine, weights, busy = _engine(self.scenario, self.calibration)
            capacity = engine.capacity().max_requests_per_second_per_replica
            curve = engine.load_curve(min(CURVE_REQUESTS, engine.traffic.num_requests))
            requests = engine.requests()
            warnings = tuple(w.message for w in engine.warnings() if w.code != "stream_overloaded")
        except (PlanningError, ValidationError) as exc:
            return CurveResult(key=self.key, feasible=False, why=explain(exc))
        points = tuple((p.requests_per_second, float(p.slo_attainment or 0.0)) for p in curve.points)
        return CurveResult(
            key=self.key,
            feasible=capacity > 0,
            why=None if capacity > 0 else "even a light load misses the SLO on this layout and GPU",
            capacity_requests_per_second_per_replica=capacity,
            saturated_requests_per_second_per_replica=engine.static_requests_per_second_per_replica,
            saturated_busy_share=busy,
            curve=points,
            weights_bytes_per_replica=weights,
            output_tokens_per_request=float(requests.output_tokens.mean()) if len(requests) else 0.0,
            max_num_seqs_per_replica=engine.limits.max_num_seqs,
            adapters=_adapters_clause(self.scenario, engine),
            warnings=warnings,
        )


def _adapters_clause(scenario: InferenceScenario, engine: TrafficEngine) -> str | None:
    adapters = engine.inputs.inputs.adapters
    return None if scenario.lora is None or adapters is None else adapter_summary(scenario.lora, adapters)


@dataclass(frozen=True)
class VerifyTask:
    """The spot check of one chosen candidate: `rate` on `replicas` replicas, simulated directly."""

    key: str
    scenario: InferenceScenario
    capacity_requests_per_second_per_replica: float
    requests_per_second: float
    replicas: int
    calibration: CalibrationRecord | None = None

    def run(self) -> VerifyResult:
        try:
            engine, _, _ = _engine(self.scenario, self.calibration)
            planned = capacity_answer(
                engine, self.capacity_requests_per_second_per_replica, self.requests_per_second, self.replicas
            )
            answer = engine.verified(planned, likely=False)  # the fleet reads the count, not its range
        except (PlanningError, ValidationError) as exc:
            return VerifyResult(
                key=self.key,
                requests_per_second=self.requests_per_second,
                planned_replicas=self.replicas,
                verified=False,
                replicas=None,
                why=explain(exc),
            )
        return VerifyResult(
            key=self.key,
            requests_per_second=self.requests_per_second,
            planned_replicas=self.replicas,
            verified=bool(answer.verified),
            replicas=answer.replicas_needed,
        )


class Task(Protocol):
    """A fleet's unit of work: a picklable record whose `run()` simulates and returns a pydantic result."""

    @property
    def key(self) -> str: ...

    @property
    def scenario(self) -> InferenceScenario: ...

    def run(self) -> BaseModel: ...


def run_task(task: Task) -> BaseModel:
    """Run one task: the function every backend (this process, a process pool, Ray) calls."""
    return task.run()
