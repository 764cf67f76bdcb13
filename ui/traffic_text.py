"""Words for a simulated request stream: the SLO verdict, the capacity sentence, the percentile table.

Pure functions over planner's traffic results (no Streamlit): the Traffic view and the Review page render them,
tests check them. Rates get two significant figures (planner.units.per_second): a capacity found by bisection
over a few hundred simulated requests is not better than that.
"""

from __future__ import annotations

from planner import units
from planner.inference.traffic_results import CapacityAnswer, Distribution, PrefixCacheStats, SloCheck, TrafficResult
from planner.inference.workload import Slo, Traffic

SHORT = {"ttft_seconds": "TTFT", "tpot_seconds": "TPOT", "e2e_latency_seconds": "end-to-end latency"}
PLAIN = {
    "ttft_seconds": "time to first token",
    "tpot_seconds": "time per output token",
    "e2e_latency_seconds": "end-to-end latency",
}
ARRIVAL_WORDS = {"poisson": "Poisson arrivals", "uniform": "evenly spaced arrivals", "gamma": "gamma arrivals"}
# The contract's distributions, in the table's order: (TrafficResult field, row label).
DISTRIBUTIONS = (
    ("ttft_seconds", "Time to first token"),
    ("tpot_seconds", "Time per output token"),
    ("itl_seconds", "Inter-token latency"),
    ("e2e_latency_seconds", "End-to-end latency"),
    ("queue_seconds", "Queue wait"),
)
TABLE_PERCENTILES = ("p50", "p90", "p99")
SIMULATED = (
    "Simulated, not measured: a vLLM-like continuous-batching engine stepping through the stream with the plan's "
    "own step times, under the assumptions listed below."
)


def rate(value: float | None) -> str:
    return units.per_second(value)


def money_per_month(usd: float) -> str:
    """'$61.3k/month': three significant figures, like every cost on the page."""
    return f"${units.count(usd)}/month"


def target_text(metric: str, percentile: int, seconds: float) -> str:
    """'p99 TTFT ≤ 2.00 s'."""
    return f"p{percentile} {SHORT[metric]} ≤ {units.seconds(seconds)}"


def slo_text(slo: Slo | None) -> str:
    """Every target of the SLO: 'p99 TTFT ≤ 2.00 s and p99 TPOT ≤ 50.0 ms'."""
    if slo is None or not slo.targets:
        return "no target"
    parts = [target_text(metric, slo.percentile_of(metric), seconds) for metric, seconds in slo.targets.items()]
    return " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]


def stream_text(traffic: Traffic) -> str:
    """'5.0 req/s (Poisson arrivals), 1,000 requests' / 'a trace of 1,234 requests'."""
    if traffic.lengths == "trace" and traffic.trace:
        return f"a recorded trace of {len(traffic.trace):,} requests"
    if traffic.requests_per_second is None:
        return f"{traffic.num_requests:,} requests sent at once"
    arrival = ARRIVAL_WORDS[traffic.arrival]
    if traffic.arrival == "gamma":
        arrival += f", burstiness {traffic.burstiness:g}"
    return f"{rate(traffic.requests_per_second)} ({arrival}), {traffic.num_requests:,} requests"


def capacity_sentence(cap: CapacityAnswer, gpu_name: str, target_requests_per_second: float | None) -> str:
    """'Meets p99 TTFT ≤ 2.00 s up to 14 req/s per replica — 6 replicas (24 × H100) for 80 req/s, $52.6k/month.'"""
    slo = slo_text(cap.slo)
    best = cap.max_requests_per_second_per_replica
    if best <= 0:
        return (
            f"Misses {slo} even at light load: no number of replicas of this layout meets it. A faster layout (more "
            "GPUs per replica, a smaller weight format) or a looser target does."
        )
    head = f"Meets {slo} up to {rate(best)} per replica"
    if target_requests_per_second is not None and cap.verified is False:
        return (
            f"{head}, but no number of replicas the search tried met it when the stream was simulated at "
            f"{rate(target_requests_per_second)}."
        )
    if cap.replicas_needed is None or target_requests_per_second is None:
        return head + "."
    replicas = f"{cap.replicas_needed:,} replica{'s' if cap.replicas_needed != 1 else ''}"
    usd = money_per_month(cap.usd_per_month) if cap.usd_per_month is not None else "n/a"
    engine = f", max_num_seqs {cap.max_num_seqs_per_replica:,} each" if cap.max_num_seqs_per_replica else ""
    checked = " (simulated at that rate: met)" if cap.verified else ""
    return f"{head} — {replicas} ({cap.gpus_needed:,} × {gpu_name}{engine}) for {rate(target_requests_per_second)}{checked}, {usd}."


def sustained_sentence(cap: CapacityAnswer, saturated_per_replica: float, requests: int) -> str | None:
    """When the SLO's largest rate is above what one replica sustains at its full batch: the queue then grows
    without end, and the SLO holds only because the simulated run ends first."""
    best = cap.max_requests_per_second_per_replica
    if best <= saturated_per_replica:
        return None
    return (
        f"{rate(best)} per replica is above the {rate(saturated_per_replica)} one replica sustains at its full batch: "
        f"a run of {requests:,} requests ends before its queue outgrows the target. For a stream that never stops, "
        f"plan at most {rate(saturated_per_replica)} per replica (or simulate more requests)."
    )


def check_text(check: SloCheck) -> str:
    """'p99 TTFT 4.16 min (target 2.00 s): missed'."""
    verdict = "met" if check.met else "missed"
    return (
        f"p{check.percentile} {SHORT[check.metric]} {units.seconds(check.simulated_seconds)} "
        f"(target {units.seconds(check.target_seconds)}): {verdict}"
    )


def attainment_text(result: TrafficResult) -> str:
    """'83% of the 1,000 requests met every target (goodput 4.1 req/s).'"""
    if result.slo_attainment is None:
        return ""
    return (
        f"{units.percent(result.slo_attainment)} of the {result.num_requests:,} requests met every target "
        f"(goodput {rate(result.goodput_requests_per_second)})."
    )


def at_rate_sentence(result: TrafficResult, traffic: Traffic) -> str:
    """What the simulated stream got on this deployment, target by target."""
    offered = traffic.stream_rate
    where = f"{result.replicas} replica{'s' if result.replicas != 1 else ''}"
    head = f"This deployment ({where}) at {rate(offered)}" if offered else f"This deployment ({where})"
    if result.slo:
        return f"{head}: " + "; ".join(check_text(c) for c in result.slo) + ". " + attainment_text(result)
    return (
        f"{head}: p99 TTFT {units.seconds(result.ttft_seconds.p99)}, p99 TPOT {units.seconds(result.tpot_seconds.p99)}; "
        f"{rate(result.request_throughput_per_second)} and {units.count(result.output_tokens_per_second)} output "
        "tokens/s served."
    )


def percentile_rows(result: TrafficResult) -> list[dict[str, str]]:
    """The contract's latency distributions as table rows: mean, p50, p90, p99 (formatted)."""
    rows = []
    for name, label in DISTRIBUTIONS:
        dist: Distribution = getattr(result, name)
        row = {"": label, "Mean": units.seconds(dist.mean)}
        row.update({p: units.seconds(getattr(dist, p)) for p in TABLE_PERCENTILES})
        rows.append(row)
    return rows


def review_lines(result: TrafficResult, traffic: Traffic) -> list[tuple[bool | None, str]]:
    """(met, sentence) per SLO target for the Review page, then the attainment (met: None = no verdict)."""
    stream = f"under a simulated stream of {stream_text(traffic)}"
    if not result.slo:
        return [
            (
                None,
                f"No SLO set for the request stream ({stream}: p99 time to first token "
                f"{units.seconds(result.ttft_seconds.p99)}, p99 time per output token "
                f"{units.seconds(result.tpot_seconds.p99)}).",
            )
        ]
    lines: list[tuple[bool | None, str]] = []
    for check in result.slo:
        verb = "meets" if check.met else "misses"
        lines.append(
            (
                check.met,
                f"{verb.capitalize()} the p{check.percentile} {PLAIN[check.metric]} target "
                f"({units.seconds(check.target_seconds)}) {stream}: simulated {units.seconds(check.simulated_seconds)}.",
            )
        )
    lines.append((None, attainment_text(result)))
    return lines


# ------------------------------------------------------------------------------------ disaggregation


def split_label(prefill_gpus: int, total_gpus: int) -> str:
    """'4 prefill / 4 decode GPUs'."""
    return f"{prefill_gpus:,} prefill / {total_gpus - prefill_gpus:,} decode GPUs"


def comparison_rows(colocated: TrafficResult, split: TrafficResult, kv_transfer_seconds: float) -> list[dict[str, str]]:
    """Colocated and disaggregated side by side, one row per measure (the same results, formatted)."""

    def attainment(r: TrafficResult) -> str:
        return units.percent(r.slo_attainment, 1) if r.slo_attainment is not None else "no SLO"

    measures = (
        ("TTFT p50", lambda r: units.seconds(r.ttft_seconds.p50)),
        ("TTFT p99", lambda r: units.seconds(r.ttft_seconds.p99)),
        ("TPOT p50", lambda r: units.seconds(r.tpot_seconds.p50)),
        ("TPOT p99", lambda r: units.seconds(r.tpot_seconds.p99)),
        ("Requests completed", lambda r: rate(r.request_throughput_per_second)),
        (
            "Goodput",
            lambda r: rate(r.goodput_requests_per_second) if r.goodput_requests_per_second is not None else "no SLO",
        ),
        ("SLO attainment", attainment),
    )
    rows = [{"": name, "Colocated": show(colocated), "Disaggregated": show(split)} for name, show in measures]
    rows.append(
        {"": "KV transfer per request", "Colocated": "none", "Disaggregated": units.seconds(kv_transfer_seconds)}
    )
    return rows


def split_rows(splits, total_gpus: int) -> list[dict]:
    """best_split's table: one row per split tried, as numbers in display units (units in the column names, short
    enough for the section's width)."""
    return [
        {
            "GPUs (P / D)": f"{s.layout.prefill_gpus:,} / {total_gpus - s.layout.prefill_gpus:,}",
            "Replicas (P / D)": f"{s.prefill_replicas} / {s.decode_replicas}",
            "p99 TTFT (ms)": s.traffic.ttft_seconds.p99 * 1e3,
            "p99 TPOT (ms)": s.traffic.tpot_seconds.p99 * 1e3,
            "Completed (req/s)": s.traffic.request_throughput_per_second,
            "Goodput (req/s)": s.traffic.goodput_requests_per_second,
            "SLO met (%)": None if s.traffic.slo_attainment is None else s.traffic.slo_attainment * 100,
            "KV transfer (ms)": s.kv_transfer_seconds_mean * 1e3,
        }
        for s in splits
    ]


def prefix_cache_help(stats: PrefixCacheStats) -> str:
    if stats.gpu_cache_tokens_per_replica is None:
        return (
            "Unbounded GPU prefix cache: every repeat of a shared prefix finds it cached (set a GPU share to bound it)."
        )
    return (
        f"Per replica, the GPU keeps up to {units.count(stats.gpu_cache_tokens_per_replica)} prefix tokens (LRU); "
        "a request whose prefix is still there skips its prefill."
    )


def prefix_cache_sentence(stats: PrefixCacheStats) -> str:
    """One line: of the requests with a shared prefix, how many hit where, and what the pool moved."""
    share = stats.requests_with_prefix or 1
    text = (
        f"{stats.requests_with_prefix:,} requests start with a shared prefix: {stats.gpu_hits / share:.0%} found it in "
        f"GPU memory"
    )
    if stats.pool_tier is not None:
        text += (
            f", {stats.pool_hits / share:.0%} in the {stats.pool_tier.upper()} pool "
            f"({units.count(stats.pool_capacity_tokens_per_replica or 0)} tokens per replica at "
            f"{(stats.pool_bytes_per_second or 0) / 1e9:,.1f} GB/s)"
        )
    text += f", {stats.misses / share:.0%} prefilled it again"
    if stats.gpu_cache_tokens_per_replica is None:
        text += " (unbounded GPU cache: only each prefix's first use misses)"
    return text + "."
