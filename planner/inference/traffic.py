"""Serving a request stream: the scenario's deployment under its `traffic`, simulated step by step.

`TrafficEngine.of(scenario)` builds once what every simulation of that deployment shares — the memory
plan's KV blocks, the engine limits and the step-cost tables — so a load curve or an SLO search runs
many simulations for the price of one set-up. Answers:

- `simulate`: one stream on the whole deployment (`TrafficResult`, the contract's percentiles);
- `load_curve`: p50/p99 TTFT and TPOT per replica rate, up to past saturation, with the knee;
- `capacity`: the largest per-replica rate that meets the SLO, and the replicas, GPUs and $/month a
  target rate needs.

Stated assumptions (they are in `TrafficEngine.assumptions`): the engine is vLLM V1-like (see
`serving`); replicas are identical and the stream is split round robin (request i to replica
i mod R, what a plain Kubernetes Service or vLLM's router without load awareness does); in traffic mode
each replica's batch cap is the stream's `max_num_seqs` (or, when empty, the scenario's `concurrency` over the
replicas: `inputs.engine_concurrency`) and `prefill_chunk_tokens` is `max_num_batched_tokens`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.adapters import adapter_limits, draw_adapter_ids
from planner.inference.metrics import InferenceMetrics, decode_read_weight_bytes, inference_metrics
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import ScenarioInputs, scenario_inputs
from planner.inference.serving.adapter_slots import AdapterLimits
from planner.inference.serving.decoders import Speculation
from planner.inference.serving.scheduler import EngineLimits, ReplicaContext, simulate_replica
from planner.inference.serving.step_log import ReplicaTimeline
from planner.inference.speculative import draft_context, draft_read_bytes
from planner.inference.step_cost import RooflineStepCost, SpeculativeStepCost
from planner.inference.steps import StepContext
from planner.inference.traffic_ranges import TrafficRanges
from planner.inference.traffic_results import (
    CapacityAnswer,
    LoadCurve,
    LoadPoint,
    PrefixCacheStats,
    TrafficResult,
    summarize,
)
from planner.inference.workload import (
    GPU_HIT,
    MISS,
    POOL_HIT,
    PrefixHits,
    Requests,
    Slo,
    Traffic,
    generate_requests,
    prefix_residency,
    replayed_trace,
    with_adapters,
)
from planner.model.architecture import kv_cache_bytes_per_token
from planner.physics.cost import HOURS_PER_MONTH
from planner.physics.runtimes import kv_block_tokens, runtime_profile
from planner.results import PlanWarning
from planner.scenario_base import revised
from planner.units import per_second

ROUTING = "round robin (request i to replica i mod replicas)"
KNEE_TTFT_GROWTH = 3.0  # the knee: the first rate whose p99 TTFT is this many times the light-load p99 TTFT
CURVE_LOAD_FRACTIONS = (0.1, 0.3, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25)
CURVE_REQUESTS = 600  # per curve point and per capacity probe: enough for a stable p99 (6 requests above it)
CAPACITY_PROBES = 10
CAPACITY_MAX_REQUESTS = 2000
# How far past the static saturated rate a stream must be to be called overloaded (an assumed planning margin, not a
# published figure): the simulation saturates within a few % of the static plan's rate (TrafficEngine.capacity), so
# 10 % is past any rounding of that rule.
OVERLOAD_MARGIN = 1.1
VERIFY_STEPS = 8  # a capacity answer's replicas are simulated at the target rate, growing at most this many times
VERIFY_MAX_REQUESTS = 20_000  # the largest stream a verification simulates


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
    ranges: TrafficRanges | None = None  # the likely ranges every answer carries (None: answers without them)

    @classmethod
    def of(
        cls,
        scenario: InferenceScenario,
        calibration: CalibrationRecord | None = None,
        traffic: Traffic | None = None,
    ) -> TrafficEngine:
        i = scenario_inputs(scenario, calibration)
        return cls.from_metrics(
            scenario, i, inference_metrics(i.arch, i.counts, i.hw, i.efficiency, i.inputs, i.draft), traffic
        )

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
        runtime = runtime_profile(scenario.runtime)
        policy = runtime.scheduler
        limits = EngineLimits(
            max_num_seqs=int(m.shape.sequences),
            max_num_batched_tokens=scenario.prefill_chunk_tokens,
            chunked_prefill=policy.chunked_prefill(traffic.chunked_prefill, i.arch.uses_mla),
            kv_blocks=kv_blocks,
            block_tokens=int(kv_block_tokens(runtime, scenario.kv_block_tokens)),
            admission_watermark_blocks=int(policy.admission_watermark * kv_blocks),
            mixes_prefill_with_decode=policy.mixes_prefill_with_decode,
            reserves_whole_request=policy.preemption == "none",
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
            ranges=TrafficRanges.of(
                i.arch.is_moe,
                scenario.tensor_parallel * scenario.pipeline_parallel,
                scenario.accelerator().vendor,
                scenario.runtime,
            ),
            # the weights a step streams: a multimodal model's resident vision tower is not among them (its
            # images' encoding is charged as FLOPs to each prompt's first chunk, as in the static plan)
            _costs={
                "shape": m.shape,
                "weights": float(decode_read_weight_bytes(i.counts, i.inputs, m.memory.read_weight_bytes)),
            },
        )

    # ---------------------------------------------------------------------------------------- pieces

    def speculation(self, traffic: Traffic | None = None) -> Speculation | None:
        """The scenario's speculative decoding as the simulation runs it, its acceptances drawn from the
        stream's seed (None: plain decoding)."""
        draft = self.inputs.draft
        if draft is None:
            return None
        return Speculation(draft.drafted_tokens, draft.acceptance, (traffic or self.traffic).seed)

    def step_cost(self, requests: Requests) -> RooflineStepCost:
        """Step-cost tables large enough for this stream (built once per size and reused); with speculative
        decoding, the target's (sized for its verify steps: k + 1 tokens per sequence)."""
        longest = int((requests.prompt_tokens + requests.output_tokens).max())
        longest_prompt = int(requests.prompt_tokens.max())
        limits = self.limits
        draft = self.inputs.draft
        query_tokens = 1 if draft is None else draft.drafted_tokens + 1
        step_tokens = (
            limits.max_num_seqs * query_tokens
            + limits.max_num_batched_tokens
            + (0 if limits.chunked_prefill else longest)
        )
        key = (_round_up(step_tokens), _round_up(max(longest, longest_prompt)))
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = self._target_cost(*key)
        return cost

    def stream_cost(self, requests: Requests) -> RooflineStepCost | SpeculativeStepCost:
        """What the simulation prices this stream's steps with: draft-and-verify rounds under speculative decoding
        (`speculative_cost`), else plain steps (`step_cost`)."""
        return self.step_cost(requests) if self.inputs.draft is None else self.speculative_cost(requests)

    def speculative_cost(self, requests: Requests) -> SpeculativeStepCost:
        """The round's cost for this stream: the target's tables (`step_cost`) and the draft's."""
        draft = self.inputs.draft
        if draft is None:
            raise PlanningError("the scenario has no speculative decoding to cost")
        target = self.step_cost(requests)
        key = ("speculative", target.max_step_tokens, target.max_position_tokens)
        cost = self._costs.get(key)
        if cost is None:
            i = self.inputs
            drafting = draft_context(draft, self._step_context())
            cost = self._costs[key] = SpeculativeStepCost(
                target, target.for_draft(drafting, float(draft_read_bytes(draft, i.inputs))), draft.drafted_tokens
            )
        return cost

    def _step_context(self) -> StepContext:
        """What this replica's steps are priced with (`steps.StepContext`)."""
        i = self.inputs
        return StepContext(i.arch, i.counts, i.hw, i.efficiency, i.inputs, self._costs["shape"])

    def _target_cost(self, max_step_tokens: int, max_position_tokens: int) -> RooflineStepCost:
        return RooflineStepCost(self._step_context(), self._costs["weights"], max_step_tokens, max_position_tokens)

    def requests(self, traffic: Traffic | None = None) -> Requests:
        """The stream's requests; each prompt carries the scenario's image tokens beside its text (a trace's
        prompt lengths are text tokens too)."""
        traffic = traffic or self.traffic
        requests = generate_requests(traffic, self.scenario.prompt_tokens, self.scenario.output_tokens)
        images = self.scenario.image_tokens_per_request
        requests = replace(requests, prompt_tokens=requests.prompt_tokens + images) if images else requests
        adapters = self.inputs.inputs.adapters
        if adapters is None:
            return requests
        return with_adapters(
            requests, draw_adapter_ids(len(requests), adapters.shares, traffic.seed), adapters.adapters
        )

    # --------------------------------------------------------------------------------------- answers

    def simulate(self, traffic: Traffic | None = None, replicas: int | None = None) -> TrafficResult:
        """The stream on `replicas` replicas (default: the scenario's), routed round robin."""
        traffic = traffic or self.traffic
        reqs = self.requests(traffic)
        replicas = replicas or self.replicas
        speculation = self.speculation(traffic)
        cost = self.stream_cost(reqs)
        client_cap = None if traffic.max_concurrency is None else max(1, -(-traffic.max_concurrency // replicas))
        timelines: list[ReplicaTimeline] = []
        hits: list[PrefixHits] = []
        limits = self.adapter_slot_limits
        for r in range(min(replicas, len(reqs))):
            mine = np.arange(r, len(reqs), replicas)
            cached, delay = self.replica_prefix_cache(traffic, reqs, mine, hits)
            context = ReplicaContext(self.limits, cost, client_cap, speculation, replica_index=r, adapters=limits)
            timelines.append(
                simulate_after_request_overhead(
                    reqs.arrival_seconds[mine],
                    reqs.prompt_tokens[mine],
                    reqs.output_tokens[mine],
                    cached,
                    mine,
                    context,
                    ready_delay_seconds=delay,
                    adapter_ids=None if reqs.adapter is None else reqs.adapter[mine],
                )
            )
        return summarize(
            timelines,
            traffic.slo,
            self.limits.kv_blocks,
            ROUTING,
            self.prefix_stats(traffic, reqs, hits),
            self._with_likely(traffic, reqs, replicas),
            adapters=self.adapter_counts,
        )

    @property
    def adapter_slot_limits(self) -> AdapterLimits | None:
        """One replica's LoRA adapter slots (each request's adapter is `Requests.adapter`); None without."""
        adapters = self.inputs.inputs.adapters
        return None if adapters is None else adapter_limits(adapters)

    @property
    def adapter_counts(self) -> tuple[int, int] | None:
        """(LoRA adapters, GPU slots per replica), for the result's adapter stats; None without adapters."""
        adapters = self.inputs.inputs.adapters
        return None if adapters is None else (adapters.adapters, adapters.slots)

    def _with_likely(self, traffic: Traffic, reqs: Requests, replicas: int):
        """`summarize`'s hook that adds the likely ranges (None without ranges); an open stream's completed rate
        is read against what the replicas sustain at the stream's mean lengths."""
        if self.ranges is None:
            return None
        open_stream = traffic.stream_rate is not None and traffic.max_concurrency is None and len(reqs)
        sustained = self._sustained_requests_per_second_per_replica(reqs) * replicas if open_stream else None
        return partial(self.ranges.apply, sustained_requests_per_second=sustained)

    # ------------------------------------------------------------------------------- prefix caching

    def replica_prefix_cache(
        self, traffic: Traffic, reqs: Requests, mine: np.ndarray, hits: list[PrefixHits]
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One replica's cached prompt tokens and prefix-pool waits for its requests `mine`: the stream's
        unbounded cache (no waits), or, with a bounded GPU cache or a pool, the replica's own residency
        (`prefix_hits`, appended to `hits` for `prefix_stats`)."""
        if not traffic.prefix_cache_bounded or reqs.prefix_key is None or reqs.prefix_tokens is None:
            return reqs.cached_prompt_tokens[mine], None
        found = self.prefix_hits(traffic, reqs.prefix_key[mine], reqs.prefix_tokens[mine])
        hits.append(found)
        return found.cached_tokens, found.transfer_seconds

    def prefix_stats(self, traffic: Traffic, reqs: Requests, hits: list[PrefixHits]) -> PrefixCacheStats | None:
        """The stream's prefix-cache answer: per replica residency where bounded, else the unbounded cache's."""
        return self._prefix_stats(traffic, reqs, hits) if traffic.prefix_cache_bounded else _unbounded_stats(reqs)

    @property
    def kv_bytes_per_token(self) -> float:
        """Whole-model KV bytes of one token (all the replica's GPUs together): what a prefix pool moves."""
        return float(kv_cache_bytes_per_token(self.inputs.arch, float(self.inputs.inputs.kv_bytes_per_element)))

    def gpu_prefix_cache_tokens(self, traffic: Traffic) -> float:
        """A replica's GPU prefix cache in tokens: the stated share of its KV blocks (all of them when only a
        pool is set: an upper bound, since running sequences' blocks are not subtracted)."""
        share = traffic.gpu_prefix_cache_share if traffic.gpu_prefix_cache_share is not None else 1.0
        return share * self.limits.kv_blocks * self.limits.block_tokens

    def prefix_hits(self, traffic: Traffic, prefix_key: np.ndarray, prefix_tokens: np.ndarray) -> PrefixHits:
        """One replica's requests through its bounded GPU prefix cache and the pool behind it (if any)."""
        pool = traffic.prefix_pool
        per_token = self.kv_bytes_per_token
        return prefix_residency(
            prefix_key,
            prefix_tokens,
            self.gpu_prefix_cache_tokens(traffic),
            pool.capacity / per_token if pool is not None and per_token > 0 else 0.0,
            per_token,
            pool.bandwidth if pool is not None else np.inf,
        )

    def _prefix_stats(self, traffic: Traffic, reqs: Requests, hits: list[PrefixHits]) -> PrefixCacheStats | None:
        if not hits:
            return None
        source = np.concatenate([h.source for h in hits])
        if not (source > 0).any():
            return None
        transfer = np.concatenate([h.transfer_seconds for h in hits])
        pool_hits = int((source == POOL_HIT).sum())
        pool = traffic.prefix_pool
        per_token = self.kv_bytes_per_token
        return PrefixCacheStats(
            mode="bounded",
            requests_with_prefix=int((source > 0).sum()),
            gpu_hits=int((source == GPU_HIT).sum()),
            pool_hits=pool_hits,
            misses=int((source == MISS).sum()),
            pool_bytes_transferred=float(sum(h.bytes_transferred for h in hits)),
            pool_transfer_seconds_mean=float(transfer[source == POOL_HIT].mean()) if pool_hits else 0.0,
            prompt_tokens_reused=int(sum(int(h.cached_tokens.sum()) for h in hits)),
            gpu_cache_tokens_per_replica=self.gpu_prefix_cache_tokens(traffic),
            pool_tier=pool.tier if pool is not None else None,
            pool_capacity_tokens_per_replica=pool.capacity / per_token if pool is not None and per_token else None,
            pool_bytes_per_second=pool.bandwidth if pool is not None else None,
        )

    def _one_replica(self, rate: float, num_requests: int) -> TrafficResult:
        """A Poisson-like stream of the scenario's shape at `rate` on one replica."""
        return self.simulate(probe_traffic(self.traffic, rate, num_requests), replicas=1)

    def probe_scale_requests_per_second_per_replica(self) -> float:
        """The rate the load curve and the capacity search are scaled to: the static plan's saturated rate per
        replica at the stream's own mean lengths — a trace's, or the scenario's lengths, which every length
        distribution has as its mean."""
        if self.traffic.lengths == "trace" and self.traffic.trace:
            return self._sustained_requests_per_second_per_replica(self.requests())
        return self.static_requests_per_second_per_replica

    def load_curve(self, num_requests: int = CURVE_REQUESTS) -> LoadCurve:
        """Latency against per-replica rate, from light load to 25% past the static plan's saturation at the
        stream's mean lengths."""
        top = self.probe_scale_requests_per_second_per_replica()
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
        num_requests = num_requests or min(self.traffic.request_count, CAPACITY_MAX_REQUESTS)
        slo = self.traffic.slo
        if slo is None or not slo.targets:
            raise PlanningError("set at least one SLO target (TTFT, TPOT or end-to-end latency) to size for it")
        best = self._largest_rate(lambda result: _meets(result, slo), num_requests)
        return self.verified(capacity_answer(self, best, target_requests_per_second), num_requests)

    def _largest_rate(self, meets: Callable[[TrafficResult], bool], num_requests: int) -> float:
        """The largest per-replica rate whose simulated run `meets` (bisection over one replica's probes)."""
        # Past the saturated rate a replica cannot keep up however short the run that hides its growing
        # queue (the simulation saturates within a few % of the static plan's rate): the search stops there.
        top = self.probe_scale_requests_per_second_per_replica()
        low, high = 0.0, top
        if not meets(self._one_replica(0.02 * top, num_requests)):
            return 0.0
        low = 0.02 * top
        if meets(self._one_replica(high, num_requests)):
            low = high
        for _ in range(CAPACITY_PROBES):
            if high - low <= 0.01 * top:
                break
            mid = (low + high) / 2
            if meets(self._one_replica(mid, num_requests)):
                low = mid
            else:
                high = mid
        return low

    def _edge_replicas(self, target: float, num_requests: int) -> tuple[int | None, int | None]:
        """The replicas `target` needs at the latency ranges' fast and slow edge: the largest rate no target's
        likely range 'misses', and the largest every target's likely range 'meets' (`SloCheck.verdict`), each
        searched as the capacity is. None: no rate does (at the slow edge even light load may miss)."""
        slo_count = len(self.traffic.slo.targets) if self.traffic.slo is not None else 0
        fast = self._largest_rate(lambda r: not any(c.verdict == "misses" for c in r.slo), num_requests)
        slow = self._largest_rate(
            lambda r: len(r.slo) == slo_count and all(c.verdict == "meets" for c in r.slo), num_requests
        )

        def needed(rate: float) -> int | None:
            return math.ceil(target / rate - 1e-9) if rate > 0 else None

        return needed(fast), needed(slow)

    def verified(self, answer: CapacityAnswer, num_requests: int | None = None, likely: bool = True) -> CapacityAnswer:
        """The replicas a target rate needs, checked before they are shown: the stream at `target` on that many
        replicas, each with this engine (its per-replica batch cap, KV pool and step times), routed as the
        simulation routes; one more replica (10 % more) at a time until every SLO target holds, at most
        VERIFY_STEPS times. Each replica sees about as many requests as a capacity probe. With `likely`, the
        answer's likely replicas also take the capacity at the latency ranges' edges (`_edge_replicas`: two more
        searches)."""
        slo, target = self.traffic.slo, answer.target_requests_per_second
        if answer.replicas_needed is None or target is None or slo is None or not slo.targets:
            return answer
        num_requests = num_requests or min(self.traffic.request_count, CAPACITY_MAX_REQUESTS)
        replicas = answer.replicas_needed
        for _ in range(VERIFY_STEPS):
            requests = min(num_requests * replicas, VERIFY_MAX_REQUESTS)
            stream = probe_traffic(self.traffic, target, requests, grow=True)
            if _meets(self.simulate(stream, replicas), slo):
                found = capacity_answer(self, answer.max_requests_per_second_per_replica, target, replicas, True)
                if self.ranges is None:
                    return found
                edges = self._edge_replicas(target, num_requests) if likely else (None, None)
                gpus = self.scenario.tensor_parallel * self.scenario.pipeline_parallel
                return self.ranges.capacity(found, gpus, *edges)
            replicas += max(1, math.ceil(0.1 * replicas))
        return capacity_answer(self, answer.max_requests_per_second_per_replica, target, None, False)

    def warnings(self) -> list[PlanWarning]:
        """What is wrong with the stream itself, said beside its numbers: requests the engine refuses (longer than
        the model's context), requests no replica's KV cache can hold whole, and a stream faster than the deployment
        serves at its full batch (its queue then grows for the whole run)."""
        reqs = self.requests()
        if not len(reqs):
            return []
        total = reqs.prompt_tokens + reqs.output_tokens
        arch, limits = self.inputs.arch, self.limits
        found: list[PlanWarning] = []
        over = int((total > arch.max_context_tokens).sum())
        if over:
            found.append(
                PlanWarning(
                    "stream_over_context",
                    f"{over:,} of {len(reqs):,} requests (the longest {int(total.max()):,} tokens) exceed "
                    f"{arch.name}'s maximum context of {arch.max_context_tokens:,} tokens: a real engine refuses "
                    "them (vLLM answers 400), while the simulation serves them, so its numbers include them.",
                )
            )
        pool_tokens = limits.kv_blocks * limits.block_tokens
        whole = int((total > pool_tokens).sum())
        if whole:
            found.append(
                PlanWarning(
                    "stream_over_kv_pool",
                    f"{whole:,} of {len(reqs):,} requests need more KV cache than one replica holds "
                    f"({pool_tokens:,} tokens): they never fit whole, and the engine preempts and recomputes them "
                    "(vLLM refuses a prompt longer than the pool).",
                )
            )
        overload = self._overload_warning(reqs)
        return found + ([overload] if overload is not None else [])

    def _overload_warning(self, reqs: Requests) -> PlanWarning | None:
        """A stream sent faster than the replicas sustain at their full batch, the static serving cycle at the
        stream's own mean lengths; past it by more than OVERLOAD_MARGIN (the simulation saturates within a few %
        of that rate), every later request queues longer than the one before."""
        offered = self.traffic.stream_rate
        if offered is None:
            return None  # sent at once: a burst, not a rate
        sustained = self._sustained_requests_per_second_per_replica(reqs) * self.replicas
        if offered <= OVERLOAD_MARGIN * sustained:
            return None
        return PlanWarning(
            "stream_overloaded",
            f"The stream sends {per_second(offered)} but this deployment serves at most about "
            f"{per_second(sustained)} ({self.replicas} replica{'s' if self.replicas != 1 else ''} at full batch, "
            "at the requests' mean lengths): its queue grows for the whole run, so the latencies grow with the "
            "run's length, not only with the load.",
        )

    def _sustained_requests_per_second_per_replica(self, reqs: Requests) -> float:
        """The static plan's saturated rate per replica, at the stream's mean prompt and output lengths."""
        i = self.inputs
        prompt = max(int(round(float(reqs.prompt_tokens.mean()))), 1)
        output = max(int(round(float(reqs.output_tokens.mean()))), 1)
        if (prompt, output) == (int(i.inputs.prompt_tokens), int(i.inputs.output_tokens)):
            return self.static_requests_per_second_per_replica
        # every probe of a trace's capacity searches asks for the same lengths: priced once per engine
        key = ("sustained", prompt, output)
        if key not in self._costs:
            stream = replace(i.inputs, prompt_tokens=prompt, output_tokens=output)
            m = inference_metrics(i.arch, i.counts, i.hw, i.efficiency, stream, i.draft)
            self._costs[key] = float(m.serving.requests_per_second) / self.replicas
        return self._costs[key]

    def assumptions(self) -> list[str]:
        s = self.scenario
        return [
            "Engine: vLLM V1-like continuous batching (decodes first, then prompt chunks within "
            f"max_num_batched_tokens = {s.prefill_chunk_tokens:,}; recompute preemption when KV blocks run out).",
            f"Batch cap per replica (max_num_seqs): {self.limits.max_num_seqs:,} — "
            + (
                "the stream's, on every replica (the static plan serves that many per replica)."
                if self.traffic.max_num_seqs is not None
                else f"the scenario's concurrency {s.concurrency:,} over {self.replicas} replica(s)."
            ),
            f"KV cache: {self.limits.kv_blocks:,} blocks of {self.limits.block_tokens} tokens per replica, "
            "from the memory plan.",
            f"Routing: {ROUTING}; every replica identical.",
            "Step times: the static plan's roofline terms per step (no second physics); per-request costs "
            "outside the engine (tokenisation, network, HTTP) are not modelled.",
            *self._speculative_assumptions(),
            *self._prefix_assumptions(),
        ]

    def _speculative_assumptions(self) -> list[str]:
        draft = self.inputs.draft
        if draft is None:
            return []
        k = draft.drafted_tokens
        return [
            f"Speculative decoding: every step with decoding sequences is a draft-and-verify round (the target over "
            f"{k + 1} tokens per sequence, {k} draft steps); each sequence gains 1 + A tokens, A accepted drafts "
            f"with P(A >= j) = {draft.acceptance:g}^j for j <= {k} (independent positions), drawn per sequence and "
            f"round from the stream's seed; a verifying sequence holds KV slots for {2 * k + 1} positions beyond "
            "its context (vLLM V1's verify positions and lookahead); ITL counts a burst of g tokens as g gaps of "
            "the round / g."
        ]

    def _prefix_assumptions(self) -> list[str]:
        t = self.traffic
        if t.shared_prefix_fraction <= 0:
            return []
        if not t.prefix_cache_bounded:
            return ["Prefix cache: unbounded and stream-wide — every repeat of a shared prefix finds it cached."]
        lines = [
            f"Prefix cache: per replica, LRU over whole prefixes in {self.gpu_prefix_cache_tokens(t):,.0f} tokens "
            + (
                f"({t.gpu_prefix_cache_share:.0%} of the KV blocks)"
                if t.gpu_prefix_cache_share is not None
                else "(all the KV blocks: an upper bound, running sequences' blocks not subtracted)"
            )
            + "; residency follows arrival order."
        ]
        pool = t.prefix_pool
        if pool is not None:
            lines.append(
                f"Prefix pool ({pool.tier.upper()}, Mooncake-style): {pool.capacity / 1e9:,.0f} GB per replica, read at "
                f"{pool.bandwidth / 1e9:,.1f} GB/s; a pool hit waits prefix tokens x "
                f"{self.kv_bytes_per_token / 1e3:,.0f} kB per token / bandwidth before its prefill is scheduled, "
                "while the replica keeps stepping other requests; misses are prefilled and written back to both."
            )
        return lines


def _unbounded_stats(reqs: Requests) -> PrefixCacheStats | None:
    """The default cache's answer: every repeat of a prefix hits, stream-wide (it never leaves a warm cache)."""
    if reqs.prefix_key is None or not (reqs.prefix_key >= 0).any():
        return None
    with_prefix = reqs.prefix_key >= 0
    hits = int((with_prefix & (reqs.cached_prompt_tokens > 0)).sum())
    return PrefixCacheStats(
        mode="unbounded",
        requests_with_prefix=int(with_prefix.sum()),
        gpu_hits=hits,
        pool_hits=0,
        misses=int(with_prefix.sum()) - hits,
        pool_bytes_transferred=0.0,
        pool_transfer_seconds_mean=0.0,
        prompt_tokens_reused=int(reqs.cached_prompt_tokens.sum()),
        gpu_cache_tokens_per_replica=None,
    )


def _meets(result: TrafficResult, slo: Slo) -> bool:
    return all(check.met for check in result.slo) and len(result.slo) == len(slo.targets)


def _round_up(n: int) -> int:
    """Table sizes rounded up to a power of two, so streams of similar size share one table."""
    return 1 << max(int(n) - 1, 1).bit_length()


def probe_traffic(traffic: Traffic, rate: float | None, num_requests: int, *, grow: bool = False) -> Traffic:
    """The stream a probe simulates (each load-curve point, each step of the capacity search, each verification):
    the stream at `rate` with at most `num_requests` of its requests (exactly that many with `grow`) — its own
    lengths, drawn from its distribution, or a trace's requests replayed at `rate` (`replayed_trace`: the trace's
    lengths, prefixes and arrival pattern, time-scaled, repeated when a verification needs more requests)."""
    n = num_requests if grow else min(num_requests, traffic.request_count)
    if traffic.lengths == "trace" and traffic.trace:
        return revised(traffic, trace=replayed_trace(traffic.trace, rate, n))
    return revised(traffic, requests_per_second=rate, num_requests=n)


def probe_scenario(scenario: InferenceScenario, keep_slo: bool, max_requests: int | None = None) -> InferenceScenario:
    """The scenario as the probes of `TrafficEngine.load_curve` and `.capacity` see it (`probe_traffic`, at the
    stream's default rate: each probe sets its own), without the SLO unless `keep_slo` (the curve's latencies do
    not depend on it), with at most `max_requests` requests (the engine's own cap: CURVE_REQUESTS,
    CAPACITY_MAX_REQUESTS). Scenarios with the same probe have the same load curve and SLO capacity, so a cache
    keyed by the probe serves every rate."""
    traffic = scenario.traffic
    if traffic is None:
        raise PlanningError("the scenario has no request stream to probe")
    probe = probe_traffic(
        traffic, Traffic.model_fields["requests_per_second"].default, max_requests or traffic.request_count
    )
    return revised(scenario, traffic=probe if keep_slo else revised(probe, slo=None))


def capacity_answer(
    engine: TrafficEngine,
    rate_per_replica: float,
    target: float | None,
    replicas: int | None = None,
    verified: bool | None = None,
) -> CapacityAnswer:
    """What a target rate needs: `replicas` (default: the target over one replica's rate under the SLO, rounded
    up), their GPUs and price, each replica with this engine's batch cap."""
    s = engine.scenario
    gpus_per_replica = s.tensor_parallel * s.pipeline_parallel
    usd_per_replica_month = engine.inputs.usd_per_gpu_hour * gpus_per_replica * HOURS_PER_MONTH
    gpus = usd = None
    if replicas is None and verified is None and target is not None and rate_per_replica > 0:
        replicas = math.ceil(target / rate_per_replica - 1e-9)
    if replicas is not None:
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
        max_num_seqs_per_replica=engine.limits.max_num_seqs,
        verified=verified,
    )


def simulate_after_request_overhead(
    arrival_seconds: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_tokens: np.ndarray,
    indices: np.ndarray,
    context: ReplicaContext,
    ready_delay_seconds: np.ndarray | None = None,
    adapter_ids: np.ndarray | None = None,
) -> ReplicaTimeline:
    """`simulate_replica` with each request reaching the scheduler `context.cost.request_overhead_seconds` after
    the client sent it (the API server's chat template, tokenisation and set-up,
    `steps.request_overhead_seconds`): the replica sees the stream that late, and TTFT still counts from the
    send. Exact for an open stream; under a client concurrency cap a follow-up request is sent when an
    earlier one finishes and here reaches the scheduler at once (the overhead shows in its TTFT, not in the
    replica's idle time)."""
    delay = context.cost.request_overhead_seconds
    timeline = simulate_replica(
        arrival_seconds + delay,
        prompt_tokens,
        output_tokens,
        cached_tokens,
        indices,
        context,
        ready_delay_seconds,
        adapter_ids,
    )
    return replace(timeline, sent_seconds=timeline.sent_seconds - delay)
