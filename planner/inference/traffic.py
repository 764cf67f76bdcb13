"""Serving a request stream: the scenario's deployment under its `traffic`, simulated step by step.

`TrafficEngine.of(scenario)` builds once what every simulation of that deployment shares — the memory
plan's KV blocks, the engine limits and the step-cost tables — so a load curve or an SLO search runs
many simulations for the price of one set-up. Answers:

- `simulate`: one stream on the whole deployment (`TrafficResult`, the contract's percentiles);
- `load_curve`: p50/p99 TTFT and TPOT per replica rate, up to past saturation, with the knee;
- `capacity`: the largest per-replica rate that meets the SLO, and the replicas, GPUs and $/month a
  target rate needs.

Stated assumptions (they are in `TrafficEngine.assumptions`): the engine is vLLM V1-like (see
`serving_sim`); replicas are identical and the stream is split round robin (request i to replica
i mod R, what a plain Kubernetes Service or vLLM's router without load awareness does); in traffic mode
the scenario's `concurrency` is the deployment's batch cap (`max_num_seqs` x replicas) and
`prefill_chunk_tokens` is `max_num_batched_tokens`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration.record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.metrics import InferenceMetrics, inference_metrics
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import ScenarioInputs, scenario_inputs
from planner.inference.serving_sim import EngineLimits, ReplicaTimeline, simulate_replica
from planner.inference.step_cost import RooflineStepCost
from planner.inference.traffic_results import CapacityAnswer, LoadCurve, LoadPoint, TrafficResult, summarize
from planner.inference.workload import Requests, Slo, Traffic, generate_requests
from planner.physics.cost import HOURS_PER_MONTH
from planner.physics.runtimes import kv_block_tokens, runtime_profile

ROUTING = "round robin (request i to replica i mod replicas)"
KNEE_TTFT_GROWTH = 3.0  # the knee: the first rate whose p99 TTFT is this many times the light-load p99 TTFT
CURVE_LOAD_FRACTIONS = (0.1, 0.3, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25)
CURVE_REQUESTS = 600  # per curve point and per capacity probe: enough for a stable p99 (6 requests above it)
CAPACITY_PROBES = 10
CAPACITY_MAX_REQUESTS = 2000


@dataclass(frozen=True)
class TrafficEngine:
    """One deployment, ready to serve any request stream of the scenario's shape."""

    scenario: InferenceScenario
    traffic: Traffic
    inputs: ScenarioInputs
    limits: EngineLimits
    replicas: int
    static_requests_per_second_per_replica: float  # the static plan's saturated rate (the curve's scale)
    static_ttft_seconds: float
    _costs: dict

    @classmethod
    def of(
        cls,
        scenario: InferenceScenario,
        calibration: CalibrationRecord | None = None,
        traffic: Traffic | None = None,
    ) -> TrafficEngine:
        i = scenario_inputs(scenario, calibration)
        return cls.from_metrics(scenario, i, inference_metrics(i.arch, i.counts, i.hw, i.efficiency, i.x), traffic)

    @classmethod
    def from_metrics(
        cls, scenario: InferenceScenario, i: ScenarioInputs, m: InferenceMetrics, traffic: Traffic | None = None
    ) -> TrafficEngine:
        """From the static plan's own numbers (its memory gives the KV blocks; its saturated rate the curve's
        scale)."""
        traffic = traffic if traffic is not None else scenario.traffic if scenario.traffic is not None else Traffic()
        kv_blocks = int(m.headroom.kv_blocks)
        if kv_blocks <= 0:
            raise PlanningError(
                "the model does not leave room for any KV cache on this layout, so it cannot serve traffic; "
                "use more GPUs per replica, a smaller weight format or a smaller model"
            )
        limits = EngineLimits(
            max_num_seqs=int(m.shape.sequences),
            max_num_batched_tokens=scenario.prefill_chunk_tokens,
            chunked_prefill=traffic.chunked_prefill,
            kv_blocks=kv_blocks,
            block_tokens=int(kv_block_tokens(runtime_profile(scenario.runtime), scenario.kv_block_tokens)),
        )
        replicas = int(m.shape.replicas)
        return cls(
            scenario=scenario,
            traffic=traffic,
            inputs=i,
            limits=limits,
            replicas=replicas,
            static_requests_per_second_per_replica=float(m.serving.requests_per_second) / replicas,
            static_ttft_seconds=float(m.ttft_seconds),
            _costs={"shape": m.shape, "weights": float(m.memory.weights_bytes)},
        )

    # ---------------------------------------------------------------------------------------- pieces

    def step_cost(self, requests: Requests) -> RooflineStepCost:
        """Step-cost tables large enough for this stream (built once per size and reused)."""
        longest = int((requests.prompt_tokens + requests.output_tokens).max())
        longest_prompt = int(requests.prompt_tokens.max())
        limits = self.limits
        step_tokens = limits.max_num_seqs + limits.max_num_batched_tokens + (0 if limits.chunked_prefill else longest)
        key = (_round_up(step_tokens), _round_up(max(longest, longest_prompt)))
        cost = self._costs.get(key)
        if cost is None:
            i = self.inputs
            cost = RooflineStepCost(
                i.arch,
                i.counts,
                i.hw,
                i.efficiency,
                i.x,
                self._costs["shape"],
                self._costs["weights"],
                max_step_tokens=key[0],
                max_position_tokens=key[1],
            )
            self._costs[key] = cost
        return cost

    def requests(self, traffic: Traffic | None = None) -> Requests:
        return generate_requests(traffic or self.traffic, self.scenario.prompt_tokens, self.scenario.output_tokens)

    # --------------------------------------------------------------------------------------- answers

    def simulate(self, traffic: Traffic | None = None, replicas: int | None = None) -> TrafficResult:
        """The stream on `replicas` replicas (default: the scenario's), routed round robin."""
        traffic = traffic or self.traffic
        reqs = self.requests(traffic)
        replicas = replicas or self.replicas
        cost = self.step_cost(reqs)
        timelines: list[ReplicaTimeline] = []
        for r in range(min(replicas, len(reqs))):
            mine = np.arange(r, len(reqs), replicas)
            timelines.append(
                simulate_after_request_overhead(
                    reqs.arrival_seconds[mine],
                    reqs.prompt_tokens[mine],
                    reqs.output_tokens[mine],
                    reqs.cached_prompt_tokens[mine],
                    mine,
                    self.limits,
                    cost,
                    client_max_concurrency=None
                    if traffic.max_concurrency is None
                    else max(1, -(-traffic.max_concurrency // replicas)),
                )
            )
        return summarize(timelines, traffic.slo, self.limits.kv_blocks, ROUTING)

    def _one_replica(self, rate: float, num_requests: int) -> TrafficResult:
        """A Poisson-like stream of the scenario's shape at `rate` on one replica."""
        probe = self.traffic.model_copy(
            update={"requests_per_second": rate, "num_requests": min(num_requests, self.traffic.num_requests)}
        )
        if probe.lengths == "trace":
            probe = probe.model_copy(update={"lengths": "fixed", "trace": None})
        return self.simulate(probe, replicas=1)

    def load_curve(self, num_requests: int = CURVE_REQUESTS) -> LoadCurve:
        """Latency against per-replica rate, from light load to 25% past the static plan's saturation."""
        top = self.static_requests_per_second_per_replica
        points = []
        for fraction in CURVE_LOAD_FRACTIONS:
            result = self._one_replica(fraction * top, num_requests)
            points.append(LoadPoint.of(fraction * top, result))
        light = points[0].ttft_p99_seconds
        knee = next((p.requests_per_second for p in points if p.ttft_p99_seconds > KNEE_TTFT_GROWTH * light), None)
        return LoadCurve(
            points=points,
            knee_requests_per_second=knee,
            knee_rule=f"first rate whose p99 TTFT exceeds {KNEE_TTFT_GROWTH:g}x its light-load value",
        )

    def capacity(self, target_requests_per_second: float | None = None, num_requests: int | None = None):
        """The largest per-replica rate meeting every SLO target (bisection over simulated rates), and what
        a target rate then needs. Each probe simulates as many requests as the traffic (at most
        CAPACITY_MAX_REQUESTS): near saturation the tail grows with the length of the run, so the answer
        holds for runs of that length."""
        num_requests = num_requests or min(self.traffic.num_requests, CAPACITY_MAX_REQUESTS)
        slo = self.traffic.slo
        if slo is None or not slo.targets:
            raise PlanningError("set at least one SLO target (TTFT, TPOT or end-to-end latency) to size for it")
        # Past the saturated rate a replica cannot keep up however short the run that hides its growing
        # queue (the simulation saturates within a few % of the static plan's rate): the search stops there.
        top = self.static_requests_per_second_per_replica
        low, high = 0.0, top
        if not _meets(self._one_replica(0.02 * top, num_requests), slo):
            best = 0.0
        else:
            low = 0.02 * top
            if _meets(self._one_replica(high, num_requests), slo):
                low = high
            for _ in range(CAPACITY_PROBES):
                if high - low <= 0.01 * top:
                    break
                mid = (low + high) / 2
                if _meets(self._one_replica(mid, num_requests), slo):
                    low = mid
                else:
                    high = mid
            best = low
        return capacity_answer(self, best, target_requests_per_second)

    def assumptions(self) -> list[str]:
        s = self.scenario
        return [
            "Engine: vLLM V1-like continuous batching (decodes first, then prompt chunks within "
            f"max_num_batched_tokens = {s.prefill_chunk_tokens:,}; recompute preemption when KV blocks run out).",
            f"Batch cap per replica (max_num_seqs): {self.limits.max_num_seqs:,} — the scenario's concurrency "
            f"{s.concurrency:,} over {self.replicas} replica(s).",
            f"KV cache: {self.limits.kv_blocks:,} blocks of {self.limits.block_tokens} tokens per replica, "
            "from the memory plan.",
            f"Routing: {ROUTING}; every replica identical.",
            "Step times: the static plan's roofline terms per step (no second physics); per-request costs "
            "outside the engine (tokenisation, network, HTTP) are not modelled.",
        ]


def _meets(result: TrafficResult, slo: Slo) -> bool:
    return all(check.met for check in result.slo) and len(result.slo) == len(slo.targets)


def _round_up(n: int) -> int:
    """Table sizes rounded up to a power of two, so streams of similar size share one table."""
    return 1 << max(int(n) - 1, 1).bit_length()


def capacity_answer(engine: TrafficEngine, rate_per_replica: float, target: float | None) -> CapacityAnswer:
    s = engine.scenario
    gpus_per_replica = s.tensor_parallel * s.pipeline_parallel
    usd_per_replica_month = engine.inputs.usd_per_gpu_hour * gpus_per_replica * HOURS_PER_MONTH
    replicas = gpus = usd = None
    if target is not None and rate_per_replica > 0:
        replicas = math.ceil(target / rate_per_replica - 1e-9)
        gpus = replicas * gpus_per_replica
        usd = replicas * usd_per_replica_month
    return CapacityAnswer(
        slo=engine.traffic.slo,
        max_requests_per_second_per_replica=rate_per_replica,
        target_requests_per_second=target,
        replicas_needed=replicas,
        gpus_needed=gpus,
        usd_per_month=usd,
        usd_per_replica_month=usd_per_replica_month,
    )


def simulate_after_request_overhead(
    arrival_seconds: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_tokens: np.ndarray,
    indices: np.ndarray,
    limits: EngineLimits,
    cost: RooflineStepCost,
    client_max_concurrency: int | None = None,
) -> ReplicaTimeline:
    """`simulate_replica` with each request reaching the scheduler `cost.request_overhead_seconds` after
    the client sent it (the API server's chat template, tokenisation and set-up,
    `steps.request_overhead_seconds`): the replica sees the stream that late, and TTFT still counts from the
    send. Exact for an open stream; under a client concurrency cap a follow-up request is sent when an
    earlier one finishes and here reaches the scheduler at once (the overhead shows in its TTFT, not in the
    replica's idle time)."""
    delay = cost.request_overhead_seconds
    timeline = simulate_replica(
        arrival_seconds + delay,
        prompt_tokens,
        output_tokens,
        cached_tokens,
        indices,
        limits,
        cost,
        client_max_concurrency=client_max_concurrency,
    )
    return replace(timeline, sent_seconds=timeline.sent_seconds - delay)
