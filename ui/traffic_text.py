"""Words for a simulated request stream: the SLO verdict, the capacity sentence, the percentile table.

Pure functions over planner's traffic results (no Streamlit): the Traffic view and the Review page render them,
tests check them. Rates get two significant figures (planner.units.per_second): a capacity found by bisection
over a few hundred simulated requests is not better than that.
"""

from __future__ import annotations

from planner import units
from planner.inference.traffic_ranges import overall_verdict
from planner.inference.traffic_results import (
    AdapterStats,
    CapacityAnswer,
    Distribution,
    PrefixCacheStats,
    SloCheck,
    TrafficResult,
)
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
# A verdict's status in the Review's checks and the colour of its box.
VERDICT_STATUS = {"meets": "ok", "at risk": "risk", "misses": "fail"}
LIKELY_NOTE = (
    "Likely ranges: where a real deployment would measure it, from the simulator's signed error on published "
    "serving runs of deployments it was never fitted on (80 % bands, checked by leaving each source out: the "
    "Accuracy page). A target inside the range is at risk."
)


def seconds_range(interval: tuple[float, float] | None) -> str:
    """'0.34–2.3 s' (each end as planner.units.seconds writes it, the unit once when both share it)."""
    if interval is None:
        return ""
    low, high = units.seconds(interval[0]), units.seconds(interval[1])
    low_number, _, low_unit = low.partition(" ")
    high_number, _, high_unit = high.partition(" ")
    return f"{low_number}–{high}" if low_unit == high_unit else f"{low}–{high}"


def rate_range(interval: tuple[float, float] | None) -> str:
    """'1.0–1.6 req/s'."""
    if interval is None:
        return ""
    return f"{units.per_second(interval[0]).split(' ')[0]}–{rate(interval[1])}"


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
    return (
        f"{head} — {replicas} ({cap.gpus_needed:,} × {gpu_name}{engine}) for {rate(target_requests_per_second)}"
        f"{checked}, {usd}{likely_replicas_text(cap)}."
    )


def likely_replicas_text(cap: CapacityAnswer) -> str:
    """'; likely 6–20 replicas ($52.6k–$175k/month)' (empty without a range)."""
    if cap.replicas_likely is None or cap.usd_per_month_likely is None:
        return ""
    low, high = cap.replicas_likely
    money = f"{money_per_month(cap.usd_per_month_likely[0]).removesuffix('/month')}–{money_per_month(cap.usd_per_month_likely[1])}"
    count = f"{low:,}" if low == high else f"{low:,}–{high:,}"
    return f"; likely {count} replicas ({money})"


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


def verdict_of(check: SloCheck) -> str:
    """'meets', 'at risk' or 'misses': the likely range's verdict, else the simulated value's."""
    return check.verdict or ("meets" if check.met else "misses")


def check_text(check: SloCheck) -> str:
    """'p99 TTFT 0.41 s simulated, likely 0.34–2.3 s (target 2.00 s): at risk'."""
    likely = f", likely {seconds_range(check.likely_seconds)}" if check.likely_seconds else ""
    return (
        f"p{check.percentile} {SHORT[check.metric]} {units.seconds(check.simulated_seconds)} simulated{likely} "
        f"(target {units.seconds(check.target_seconds)}): {verdict_of(check)}"
    )


def results_status(result: TrafficResult) -> str:
    """The worst verdict of the result's SLO checks as a status: 'ok', 'risk' or 'fail' ('unset' without)."""
    verdict = overall_verdict(verdict_of(c) for c in result.slo)
    return "unset" if verdict is None else VERDICT_STATUS[verdict]


def attainment_text(result: TrafficResult) -> str:
    """'83% of the 1,000 requests met every target (goodput 4.1 req/s).'"""
    if result.slo_attainment is None:
        return ""
    likely = ""
    if result.slo_attainment_likely is not None and result.goodput_likely is not None:
        low, high = result.slo_attainment_likely
        likely = (
            f"; likely {units.percent(low)}–{units.percent(high)} and {rate_range(result.goodput_likely)} with every "
            "latency at its range's slow and fast edge"
        )
    return (
        f"{units.percent(result.slo_attainment)} of the {result.num_requests:,} simulated requests met every target "
        f"(goodput {rate(result.goodput_requests_per_second)}{likely})."
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
        if dist.likely is not None:
            row["p99 likely"] = seconds_range(dist.likely["p99"])
        rows.append(row)
    return rows


def review_lines(result: TrafficResult, traffic: Traffic) -> list[tuple[str, str]]:
    """(status, sentence) per SLO target for the Review page, then the attainment: status 'ok' / 'risk' / 'fail'
    from the target's verdict against its likely range, 'unset' for a line without one."""
    stream = f"under a simulated stream of {stream_text(traffic)}"
    if not result.slo:
        return [
            (
                "unset",
                f"No SLO set for the request stream ({stream}: p99 time to first token "
                f"{units.seconds(result.ttft_seconds.p99)}, p99 time per output token "
                f"{units.seconds(result.tpot_seconds.p99)}).",
            )
        ]
    lines: list[tuple[str, str]] = []
    for check in result.slo:
        verdict = verdict_of(check)
        verb = {"meets": "Meets", "at risk": "At risk on", "misses": "Misses"}[verdict]
        likely = f", likely {seconds_range(check.likely_seconds)} measured" if check.likely_seconds else ""
        lines.append(
            (
                VERDICT_STATUS[verdict],
                f"{verb} the p{check.percentile} {PLAIN[check.metric]} target "
                f"({units.seconds(check.target_seconds)}) {stream}: simulated {units.seconds(check.simulated_seconds)}"
                f"{likely}.",
            )
        )
    lines.append(("unset", attainment_text(result)))
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


def adapter_loads_text(stats: AdapterStats) -> str:
    """The run's LoRA adapter loads in one sentence."""
    return (
        f"LoRA adapters: {stats.adapters:,} on {stats.gpu_slots_per_replica:,} GPU slots per replica; "
        f"{stats.loads:,} slot loads over the run ({stats.storage_reads:,} read from storage first, each adapter's "
        f"first use on a replica included); steps waited {units.seconds(stats.stall_seconds)} for them "
        f"({units.percent(stats.stall_share)} of the busy time). A batch holds at most the slots' distinct adapters: "
        "requests of the others wait (vLLM V1's scheduler skips them)."
    )
