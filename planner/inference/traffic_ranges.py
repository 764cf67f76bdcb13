"""Likely ranges on a traffic answer: how far the simulated latencies, rates and replica counts are from what a
real deployment measures, from the serving family's published error.

`benchmarks/accuracy.py` replays published serving runs through the traffic simulator and writes, per metric kind
(TTFT; TPOT and ITL; throughput) and per deployment regime (dense / MoE x one GPU / several x vendor x engine),
the band of its signed errors, checked by leaving each source out (`planner/accuracy.json`, "serving" ->
"ranges"; `planner.uncertainty.traffic_range` picks the regime's own where enough sources measured it). A
simulated value P with signed-error edges e_lo <= e_hi is likely measured within [P / (1 + e_hi), P / (1 + e_lo)]:

- TTFT and queue time read the TTFT range; TPOT and ITL the TPOT range (a kind's spread holds for its mean and
  every percentile alike: too few published percentiles to give each its own);
- end-to-end latency per request: its TTFT scaled by the TTFT edge plus its decode time scaled by the TPOT edge,
  slow with slow and fast with fast, then its statistics;
- completed requests and output tokens per second: an open stream completes what it is sent up to what the
  deployment sustains, and the throughput range moves the sustained rate; a burst or a client-capped stream's
  completed rate is the deployment's, and the range moves it directly (never above what was sent);
- SLO attainment and goodput: the share of requests meeting every target with every latency at its slow edge, and
  at its fast edge;
- a capacity answer's replicas: the verified count times (1 + e) over the throughput range's edges (a replica
  that measures x times the simulated rate needs 1 / x times the replicas), never below one.

Each SLO check then reads "meets" (the whole likely range within the target), "misses" (all of it past) or
"at risk". The ranges are the published spread of a simulator on deployments it never saw; a calibration does not
narrow them (its own held-out error is on its record).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.inference.traffic_results import CapacityAnswer, Distribution, SloCheck, TrafficResult
from planner.inference.workload import Slo
from planner.scenario_base import revised
from planner.uncertainty import TrafficRange, engine_of_runtime, serving_regime, traffic_range

STATISTICS = ("mean", "p50", "p90", "p95", "p99")
SLO_METRIC_KINDS = {"ttft_seconds": "ttft", "tpot_seconds": "tpot", "e2e_latency_seconds": "e2e"}


def target_verdict(likely: tuple[float, float], target: float) -> str:
    """One target against a likely range: 'meets' (all of it within), 'misses' (all of it past), else 'at risk'."""
    return "meets" if likely[1] <= target else "misses" if likely[0] > target else "at risk"


def overall_verdict(verdicts) -> str | None:
    """Several targets' verdicts as one: 'misses' if any misses, 'meets' if all meet, else 'at risk' (None: none)."""
    verdicts = list(verdicts)
    if not verdicts:
        return None
    return "misses" if "misses" in verdicts else "meets" if all(v == "meets" for v in verdicts) else "at risk"


def _likely(d: Distribution, r: TrafficRange) -> Distribution:
    return revised(d, likely={k: r.interval(getattr(d, k)) for k in STATISTICS})


def _slow_fast(r: TrafficRange) -> tuple[float, float]:
    """Measured over simulated at the range's slow edge and at its fast edge."""
    lo, hi = r.interval(1.0)
    return hi, lo


@dataclass(frozen=True)
class TrafficRanges:
    """The ranges one deployment's traffic answers carry (one regime)."""

    regime: str
    ttft: TrafficRange
    tpot: TrafficRange
    throughput: TrafficRange

    @classmethod
    def of(cls, is_moe: bool, gpus_per_replica: int, vendor: str, runtime: str) -> TrafficRanges:
        regime = serving_regime(is_moe, gpus_per_replica, vendor, engine_of_runtime(runtime))
        return cls(regime, *(traffic_range(kind, regime) for kind in ("ttft", "tpot", "throughput")))

    @property
    def basis(self) -> dict[str, str]:
        return {"ttft": self.ttft.basis, "tpot": self.tpot.basis, "throughput": self.throughput.basis}

    def _e2e(self, m: dict[str, np.ndarray], edge: int) -> np.ndarray:
        """Each request's end-to-end latency with its TTFT and decode time at the ranges' slow (0) or fast (1)
        edge."""
        ttft, decode = _slow_fast(self.ttft)[edge], _slow_fast(self.tpot)[edge]
        return m["ttft"] * ttft + (m["e2e"] - m["ttft"]) * decode

    def _attainment(self, m: dict[str, np.ndarray], slo: Slo, edge: int) -> float:
        ok = np.ones(len(m["sent"]), dtype=bool)
        for metric, target in slo.targets.items():
            kind = SLO_METRIC_KINDS[metric]
            if kind == "e2e":
                values = self._e2e(m, edge)
            else:
                values = m[kind] * _slow_fast(self.ttft if kind == "ttft" else self.tpot)[edge]
            ok &= values <= target
        return float(ok.mean())

    def check_slo(self, check: SloCheck, m: dict[str, np.ndarray]) -> SloCheck:
        kind = SLO_METRIC_KINDS[check.metric]
        if kind == "e2e":
            slow = Distribution.of(self._e2e(m, 0)).at(check.percentile)
            fast = Distribution.of(self._e2e(m, 1)).at(check.percentile)
            likely = (min(fast, check.simulated_seconds), max(slow, check.simulated_seconds))
        else:
            likely = (self.ttft if kind == "ttft" else self.tpot).interval(check.simulated_seconds)
        return revised(check, likely_seconds=likely, verdict=target_verdict(likely, check.target_seconds))

    def _completed(self, result: TrafficResult, sustained: float | None) -> tuple[float, float]:
        """Completed requests per second, likely. An open stream at a finite rate completes what it is sent up to
        what the deployment sustains: the throughput range moves the sustained rate (`sustained`, the static plan's
        at the stream's mean lengths), and the run's own completed share of min(sent, sustained) carries over.
        Otherwise (a burst, a client-capped stream) the completed rate is the deployment's, and the range moves it
        directly, never above what was sent."""
        simulated, offered = result.request_throughput_per_second, result.offered_requests_per_second
        if sustained and offered:
            share = simulated / min(offered, sustained)
            low, high = self.throughput.interval(sustained)
            likely = (share * min(offered, low), share * min(offered, high))
        else:
            likely = self.throughput.interval(simulated)
            if offered is not None:
                likely = (min(likely[0], offered), min(likely[1], max(offered, simulated)))
        return (min(likely[0], simulated), max(likely[1], simulated))

    def apply(
        self,
        result: TrafficResult,
        m: dict[str, np.ndarray],
        slo: Slo | None,
        sustained_requests_per_second: float | None = None,
    ) -> TrafficResult:
        """`result` with its likely ranges; `m`: its per-request latencies (`summarize`'s), `slo`: the targets it
        was checked against, `sustained_requests_per_second`: what the deployment serves at its full batch, for an
        open stream (`_completed`)."""
        e2e = result.e2e_latency_seconds
        slow, fast = Distribution.of(self._e2e(m, 0)), Distribution.of(self._e2e(m, 1))
        e2e_likely = {
            k: (min(getattr(fast, k), getattr(e2e, k)), max(getattr(slow, k), getattr(e2e, k))) for k in STATISTICS
        }
        completed = self._completed(result, sustained_requests_per_second)
        per_request = (
            result.output_tokens_per_second / result.request_throughput_per_second
            if result.request_throughput_per_second
            else 0.0
        )
        tokens = (completed[0] * per_request, completed[1] * per_request)
        update: dict = {
            "ttft_seconds": _likely(result.ttft_seconds, self.ttft),
            "queue_seconds": _likely(result.queue_seconds, self.ttft),
            "tpot_seconds": _likely(result.tpot_seconds, self.tpot),
            "itl_seconds": _likely(result.itl_seconds, self.tpot),
            "e2e_latency_seconds": revised(e2e, likely=e2e_likely),
            "request_throughput_likely": completed,
            "output_tokens_likely": tokens,
            "likely_basis": self.basis,
            "likely_regime": self.regime,
        }
        if (
            slo is not None
            and slo.targets
            and result.slo_attainment is not None
            and result.goodput_requests_per_second is not None
        ):
            worst, best = self._attainment(m, slo, 0), self._attainment(m, slo, 1)
            attainment = (min(worst, result.slo_attainment), max(best, result.slo_attainment))
            update["slo_attainment_likely"] = attainment
            update["goodput_likely"] = (
                min(attainment[0] * completed[0], result.goodput_requests_per_second),
                max(min(attainment[1] * completed[1], completed[1]), result.goodput_requests_per_second),
            )
            update["slo"] = [self.check_slo(c, m) for c in result.slo]
        return revised(result, **update)

    def capacity(
        self,
        answer: CapacityAnswer,
        gpus_per_replica: int,
        fast_edge_replicas: int | None = None,
        slow_edge_replicas: int | None = None,
    ) -> CapacityAnswer:
        """`answer` with its likely replicas, GPUs and $/month: the verified count with the throughput range on
        the per-replica rate, widened to the counts the capacity at the latency ranges' fast and slow edges needs
        (`TrafficEngine._edge_replicas`) when given."""
        if answer.replicas_needed is None or not answer.verified:
            return answer
        n = answer.replicas_needed
        r = self.throughput
        low = max(1, math.ceil(n * (1 + max(r.low_error, -0.95)) - 1e-9))
        high = max(n, math.ceil(n * (1 + r.high_error) - 1e-9))
        low = min(low, n)
        basis = f"the throughput range on the per-replica rate ({r.basis})"
        if fast_edge_replicas is not None:
            low = max(1, min(low, fast_edge_replicas))
        if slow_edge_replicas is not None:
            high = max(high, slow_edge_replicas)
        if fast_edge_replicas is not None or slow_edge_replicas is not None:
            basis += ", widened to the SLO capacity at the latency ranges' fast and slow edges"
        return revised(
            answer,
            replicas_likely=(low, high),
            gpus_likely=(low * gpus_per_replica, high * gpus_per_replica),
            usd_per_month_likely=(low * answer.usd_per_replica_month, high * answer.usd_per_replica_month),
            likely_basis=basis,
        )
