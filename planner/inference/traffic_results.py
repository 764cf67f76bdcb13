"""What a traffic simulation answers: latency percentiles, throughput, SLO attainment, goodput.

The key names of `TrafficResult` are a contract (the CLI's JSON is used for automation):
`ttft_seconds`, `tpot_seconds`, `itl_seconds`, `e2e_latency_seconds`, `queue_seconds` (each a
`{mean, p50, p90, p95, p99}`), `request_throughput_per_second`, `output_tokens_per_second`,
`duration_seconds`, `slo_attainment`, `goodput_requests_per_second`.

Definitions follow `vllm bench serve`: TTFT from the moment the client sends a request to its first
token; TPOT = (end-to-end latency - TTFT) / (output tokens - 1) per request; ITL = the gap between
consecutive tokens of a request, pooled over all tokens. Under speculative decoding a sequence's tokens come
in bursts (one per draft-and-verify round): a burst of g tokens after a gap of d seconds counts as g gaps of
d / g (by token, so mean ITL and TPOT agree; `vllm bench serve` instead records one ITL per streamed chunk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.inference.serving.step_log import ReplicaTimeline
from planner.inference.workload import Slo


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Distribution(Frozen):
    """Mean and percentiles of one latency, in seconds."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    # the likely measured value of each statistic, [low, high] seconds, from the serving family's published error
    # (`planner.inference.traffic_ranges`); None where the answer carries no range
    likely: dict[str, tuple[float, float]] | None = None

    def at(self, percentile: int) -> float:
        return float(getattr(self, f"p{percentile}"))

    def likely_at(self, percentile: int) -> tuple[float, float] | None:
        return None if self.likely is None else self.likely[f"p{percentile}"]

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray | None = None) -> Distribution:
        """Sample (or weighted-sample) statistics; zeros for an empty sample."""
        values = np.asarray(values, dtype=float)
        if values.size == 0:
            return cls(mean=0.0, p50=0.0, p90=0.0, p95=0.0, p99=0.0)
        if weights is None:
            p50, p90, p95, p99 = np.percentile(values, [50, 90, 95, 99])
            return cls(mean=float(values.mean()), p50=p50, p90=p90, p95=p95, p99=p99)
        order = np.argsort(values)
        return cls._of_sorted(values[order], np.asarray(weights, dtype=float)[order])

    @classmethod
    def _of_sorted(cls, sorted_values: np.ndarray, sorted_weights: np.ndarray) -> Distribution:
        values = sorted_values
        cumulative = np.cumsum(sorted_weights)
        total = cumulative[-1]
        # Inverse of the weighted empirical distribution (the "lower" percentile definition).
        quantiles = [
            float(sorted_values[min(np.searchsorted(cumulative, q * total), len(values) - 1)])
            for q in (0.5, 0.9, 0.95, 0.99)
        ]
        mean = float(np.dot(sorted_values, sorted_weights) / total)
        return cls(mean=mean, p50=quantiles[0], p90=quantiles[1], p95=quantiles[2], p99=quantiles[3])


# The latency CDF's grid: percentiles every 5 from 5 to 95 and denser in both tails (0 = the fastest request,
# 100 = the slowest). It holds 50, 90, 95 and 99, so the table agrees with each `Distribution`.
QUANTILE_GRID: tuple[float, ...] = (
    0, 1, 2.5, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 92.5, 95, 96, 97, 98, 99,
    99.5, 99.9, 100,
)  # fmt: skip


class LatencyQuantiles(Frozen):
    """Each latency at every percentile of `QUANTILE_GRID` (seconds): its empirical CDF, as a table.

    Computed from the simulated requests, as the `Distribution`s are: numpy's default (linear) percentile
    of the per-request TTFT, TPOT (requests with more than one output token), end-to-end latency and queue
    time; ITL by tokens — each step's duration weighted by the tokens it sampled, the inverse of the
    weighted empirical distribution (steps that sampled no token are left out).
    """

    percentiles: list[float]
    ttft_seconds: list[float]
    tpot_seconds: list[float]
    itl_seconds: list[float]
    e2e_latency_seconds: list[float]
    queue_seconds: list[float]

    def at(self, metric: str, percentile: float) -> float:
        return getattr(self, metric)[self.percentiles.index(percentile)]


def _percentile_table(values: np.ndarray) -> list[float]:
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return [0.0] * len(QUANTILE_GRID)
    return [float(v) for v in np.percentile(values, QUANTILE_GRID)]


def _weighted_table(sorted_values: np.ndarray, sorted_weights: np.ndarray) -> list[float]:
    """Inverse of the weighted empirical distribution at each grid percentile (the `Distribution`'s rule)."""
    keep = sorted_weights > 0
    values, cumulative = sorted_values[keep], np.cumsum(sorted_weights[keep])
    if values.size == 0:
        return [0.0] * len(QUANTILE_GRID)
    picks = np.minimum(np.searchsorted(cumulative, np.asarray(QUANTILE_GRID) / 100 * cumulative[-1]), len(values) - 1)
    return [float(v) for v in values[picks]]


class PrefixCacheStats(Frozen):
    """Where the stream's shared prefixes came from (whole deployment; each replica has its own caches)."""

    mode: str  # "unbounded" (every repeat hits) or "bounded" (per-replica LRU caches)
    requests_with_prefix: int
    gpu_hits: int
    pool_hits: int
    misses: int  # prefilled again (a prefix's first use included)
    pool_bytes_transferred: float
    pool_transfer_seconds_mean: float  # per pool hit
    prompt_tokens_reused: int
    gpu_cache_tokens_per_replica: float | None  # None: unbounded
    pool_tier: str | None = None
    pool_capacity_tokens_per_replica: float | None = None
    pool_bytes_per_second: float | None = None


class AdapterStats(Frozen):
    """Multi-LoRA serving over the run (whole deployment; each replica keeps its own slots)."""

    adapters: int
    gpu_slots_per_replica: int
    loads: int  # GPU slots filled (each adapter's first use on a replica included)
    storage_reads: int  # of those, adapters the host cache no longer held
    stall_seconds: float  # steps' waits for the loads, all replicas together
    stall_share: float  # of the replicas' busy time


class SloCheck(Frozen):
    """One SLO target against the simulated percentile."""

    metric: str
    percentile: int
    target_seconds: float
    simulated_seconds: float
    met: bool  # the simulated percentile is within the target
    # the percentile's likely measured value and what it says of the target: "meets" (all of it within), "misses"
    # (all of it past), "at risk" (the target inside it); None without a range
    likely_seconds: tuple[float, float] | None = None
    verdict: Literal["meets", "at risk", "misses"] | None = None


class LoadPoint(Frozen):
    """One point of the load-latency curve: one replica offered `requests_per_second`."""

    requests_per_second: float
    achieved_requests_per_second: float
    ttft_p50_seconds: float
    ttft_p99_seconds: float
    tpot_p50_seconds: float
    tpot_p99_seconds: float
    output_tokens_per_second: float
    slo_attainment: float | None = None

    @classmethod
    def of(cls, offered_requests_per_second: float, result: TrafficResult) -> LoadPoint:
        return cls(
            requests_per_second=offered_requests_per_second,
            achieved_requests_per_second=result.request_throughput_per_second,
            ttft_p50_seconds=result.ttft_seconds.p50,
            ttft_p99_seconds=result.ttft_seconds.p99,
            tpot_p50_seconds=result.tpot_seconds.p50,
            tpot_p99_seconds=result.tpot_seconds.p99,
            output_tokens_per_second=result.output_tokens_per_second,
            slo_attainment=result.slo_attainment,
        )


class LoadCurve(Frozen):
    """Latency against offered load on one replica, with the knee where queueing takes over."""

    points: list[LoadPoint]
    knee_requests_per_second: float | None  # None: no knee within the curve's range
    knee_rule: str


class CapacityAnswer(Frozen):
    """The largest rate one replica serves within the SLO, and what a target rate needs."""

    slo: Slo | None
    max_requests_per_second_per_replica: float  # 0: even light load misses the SLO
    target_requests_per_second: float | None
    replicas_needed: int | None
    gpus_needed: int | None
    usd_per_month: float | None
    usd_per_replica_month: float
    # the engine's batch cap on every replica the answer holds for (set Traffic.max_num_seqs to it when applying)
    max_num_seqs_per_replica: int | None = None
    # True: the stream at the target rate was simulated on `replicas_needed` replicas and met every target;
    # False: no count up to the search's end met it (replicas_needed None); None: no target to check
    verified: bool | None = None
    # the likely replicas, GPUs and $/month: `replicas_needed` with the per-replica rate's published error
    # (`planner.inference.traffic_ranges.capacity_with_ranges`); None without a verified count
    replicas_likely: tuple[int, int] | None = None
    gpus_likely: tuple[int, int] | None = None
    usd_per_month_likely: tuple[float, float] | None = None
    likely_basis: str | None = None


class TrafficResult(Frozen):
    """A simulated request stream on the whole deployment."""

    num_requests: int
    replicas: int
    routing: str
    ttft_seconds: Distribution
    tpot_seconds: Distribution
    itl_seconds: Distribution
    e2e_latency_seconds: Distribution
    queue_seconds: Distribution
    # Rates over the run (first send to last finish, the final drain included: vllm bench serve's request
    # throughput), so goodput <= completed (request_throughput) <= offered
    request_throughput_per_second: float  # requests completed per second of the run
    output_tokens_per_second: float
    duration_seconds: float
    # requests sent per second, over the sending window (first to last send): the stream's own rate as it reached
    # the deployment (a trace's, or a client-capped stream's); None when every request is sent at once
    offered_requests_per_second: float | None = None
    peak_batch: int
    mean_batch: float
    mean_requests_in_system: float
    preemptions: int
    kv_utilization_mean: float
    kv_utilization_peak: float
    kv_utilization_over_time: list[tuple[float, float]]  # (seconds, share of KV blocks in use), downsampled
    slo: list[SloCheck] = []
    slo_attainment: float | None = None  # share of requests meeting every target
    goodput_requests_per_second: float | None = None
    simulated_steps: int
    latency_quantiles: LatencyQuantiles | None = None  # the CDF (QUANTILE_GRID), for charts and the CSV
    prefix_cache: PrefixCacheStats | None = None  # absent when no request shares a prefix
    adapters: AdapterStats | None = None  # absent without LoRA adapters
    # likely measured rates, [low, high] per second (`planner.inference.traffic_ranges`): completed requests,
    # output tokens and goodput; the SLO attainment if every latency sat at its range's slow and fast edge
    request_throughput_likely: tuple[float, float] | None = None
    output_tokens_likely: tuple[float, float] | None = None
    goodput_likely: tuple[float, float] | None = None
    slo_attainment_likely: tuple[float, float] | None = None
    likely_basis: dict[str, str] | None = None  # per metric kind: which published runs set its range
    likely_regime: str | None = None  # the deployment's regime (planner.uncertainty.serving_regime)


def _per_request_metrics(timelines: list[ReplicaTimeline]) -> dict[str, np.ndarray]:
    sent = np.concatenate([t.sent_seconds for t in timelines])
    first = np.concatenate([t.first_token_seconds for t in timelines])
    finish = np.concatenate([t.finish_seconds for t in timelines])
    scheduled = np.concatenate([t.scheduled_seconds for t in timelines])
    outputs = np.concatenate([t.output_tokens for t in timelines]).astype(float)
    ttft = first - sent
    e2e = finish - sent
    tpot = np.where(outputs > 1, (e2e - ttft) / np.maximum(outputs - 1, 1), 0.0)
    return {
        "sent": sent,
        "finish": finish,
        "ttft": ttft,
        "e2e": e2e,
        "tpot": tpot,
        "queue": scheduled - sent,
        "outputs": outputs,
    }


def _kv_series(timelines: list[ReplicaTimeline], kv_blocks: int, points: int = 200) -> list[tuple[float, float]]:
    """KV blocks in use over time (replica 0, the one every other replica mirrors), downsampled."""
    t = timelines[0]
    if t.step_seconds.size == 0 or kv_blocks <= 0:
        return []
    ends = np.cumsum(t.step_seconds)
    picks = np.unique(np.linspace(0, len(ends) - 1, min(points, len(ends))).astype(int))
    return [(float(ends[i]), float(t.step_kv_blocks[i] / kv_blocks)) for i in picks]


def _itl(
    timelines: list[ReplicaTimeline], step_seconds: np.ndarray, step_batch: np.ndarray
) -> tuple[Distribution, list[float]]:
    """ITL and its `QUANTILE_GRID` table: every step's duration is the gap each token sampled in it waited
    (pooled over tokens); under speculative decoding a burst of g tokens after a gap d counts g tokens of d / g
    (`ReplicaTimeline`)."""
    gaps, gap_tokens = step_seconds, step_batch
    if timelines and all(t.itl_seconds is not None and t.itl_tokens is not None for t in timelines):
        gaps = np.concatenate([t.itl_seconds for t in timelines])  # type: ignore[misc]
        gap_tokens = np.concatenate([t.itl_tokens for t in timelines])  # type: ignore[misc]
    if not gaps.size:
        return Distribution.of(np.zeros(0)), _percentile_table(np.zeros(0))
    order = np.argsort(gaps)
    sorted_steps, sorted_batch = gaps[order], gap_tokens[order]
    return Distribution._of_sorted(sorted_steps, sorted_batch), _weighted_table(sorted_steps, sorted_batch)


def _slo_checks(
    m: dict[str, np.ndarray], slo: Slo | None, duration: float
) -> tuple[list[SloCheck], float | None, float | None]:
    """Each SLO target against its simulated percentile, the share of requests meeting every target and the
    goodput (None, None without targets)."""
    if slo is None or not slo.targets:
        return [], None, None
    n = len(m["sent"])
    checks: list[SloCheck] = []
    per_request_ok = np.ones(n, dtype=bool)
    names = {"ttft_seconds": "ttft", "tpot_seconds": "tpot", "e2e_latency_seconds": "e2e"}
    for metric, target in slo.targets.items():
        values = m[names[metric]]
        percentile = slo.percentile_of(metric)
        simulated = Distribution.of(values).at(percentile)
        checks.append(
            SloCheck(
                metric=metric,
                percentile=percentile,
                target_seconds=target,
                simulated_seconds=simulated,
                met=bool(simulated <= target),
            )
        )
        per_request_ok &= values <= target
    attainment = float(per_request_ok.mean()) if n else 0.0
    goodput = float(per_request_ok.sum() / duration) if n else 0.0
    return checks, attainment, goodput


def summarize(
    timelines: list[ReplicaTimeline],
    slo: Slo | None,
    kv_blocks: int,
    routing: str,
    prefix_cache: PrefixCacheStats | None = None,
    with_likely: Callable[[TrafficResult, dict[str, np.ndarray], Slo | None], TrafficResult] | None = None,
    adapters: tuple[int, int] | None = None,
) -> TrafficResult:
    """Aggregate the replicas' timelines into the contract's percentiles and rates; `with_likely` (the result, the
    per-request latencies and the SLO -> the result with its likely ranges) adds the ranges
    (`planner.inference.traffic_ranges.TrafficRanges.apply`); `adapters` (the LoRA adapters, GPU slots per
    replica) adds their loads."""
    m = _per_request_metrics(timelines)
    n = len(m["sent"])
    start = float(np.nanmin(m["sent"])) if n else 0.0
    duration = max(float(np.nanmax(m["finish"])) - start, 1e-12) if n else 0.0
    step_seconds = np.concatenate([t.step_seconds for t in timelines])
    step_batch = np.concatenate([t.step_batch for t in timelines])
    itl, itl_table = _itl(timelines, step_seconds, step_batch)
    tpot_values = m["tpot"][m["outputs"] > 1]
    busy_time = float(step_seconds.sum())
    batch_time = float(np.dot(step_batch, step_seconds))
    checks, attainment, goodput = _slo_checks(m, slo, duration)
    kv = np.concatenate([t.step_kv_blocks for t in timelines]) / max(kv_blocks, 1)
    kv_time = float(np.dot(kv, step_seconds) / busy_time) if busy_time else 0.0
    in_system = float(np.nansum(m["e2e"]) / duration) if n else 0.0  # Little's law over the run
    sending = float(np.nanmax(m["sent"])) - start if n else 0.0
    result = TrafficResult(
        num_requests=n,
        replicas=len(timelines),
        routing=routing,
        ttft_seconds=Distribution.of(m["ttft"]),
        tpot_seconds=Distribution.of(tpot_values),
        itl_seconds=itl,
        e2e_latency_seconds=Distribution.of(m["e2e"]),
        queue_seconds=Distribution.of(m["queue"]),
        request_throughput_per_second=n / duration if n else 0.0,
        output_tokens_per_second=float(m["outputs"].sum()) / duration if n else 0.0,
        duration_seconds=duration,
        offered_requests_per_second=n / sending if sending > 0 else None,
        peak_batch=int(step_batch.max()) if step_batch.size else 0,
        mean_batch=batch_time / busy_time if busy_time else 0.0,
        mean_requests_in_system=in_system,
        preemptions=sum(t.preemptions for t in timelines),
        kv_utilization_mean=kv_time,
        kv_utilization_peak=float(kv.max()) if kv.size else 0.0,
        kv_utilization_over_time=_kv_series(timelines, kv_blocks),
        slo=checks,
        slo_attainment=attainment,
        goodput_requests_per_second=goodput,
        simulated_steps=int(step_seconds.size),
        latency_quantiles=LatencyQuantiles(
            percentiles=list(QUANTILE_GRID),
            ttft_seconds=_percentile_table(m["ttft"]),
            tpot_seconds=_percentile_table(tpot_values),
            itl_seconds=itl_table,
            e2e_latency_seconds=_percentile_table(m["e2e"]),
            queue_seconds=_percentile_table(m["queue"]),
        ),
        prefix_cache=prefix_cache,
        adapters=None if adapters is None else adapter_stats(timelines, adapters),
    )
    return with_likely(result, m, slo) if with_likely is not None and n else result


def adapter_stats(timelines: list[ReplicaTimeline], adapters: tuple[int, int]) -> AdapterStats:
    """The adapters' loads over `timelines` (`adapters`: the LoRA adapters, GPU slots per replica)."""
    stall = sum(t.adapter_stall_seconds for t in timelines)
    busy_seconds = sum(float(t.step_seconds.sum()) for t in timelines)
    return AdapterStats(
        adapters=adapters[0],
        gpu_slots_per_replica=adapters[1],
        loads=sum(t.adapter_loads for t in timelines),
        storage_reads=sum(t.adapter_storage_reads for t in timelines),
        stall_seconds=stall,
        stall_share=stall / busy_seconds if busy_seconds > 0 else 0.0,
    )
