"""The Traffic section's results: the SLO verdict, percentiles, load–latency curve, latency CDF, KV cache use.

Its inputs are the form's (ui.traffic_controls, drawn above these results by ui.controls). Everything shown is
an engine answer (the prefill/decode split below it too, ui.traffic_disaggregation): the plan's simulated stream (``plan.traffic``), planner's load curve and SLO capacity search
(cached in ui.state without the stream's rate, so moving the rate slider re-simulates the stream only). A
computation that runs longer than half a second shows a spinner (Streamlit shows it after 0.5 s).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planner import units
from planner.inference.traffic import CAPACITY_MAX_REQUESTS, CURVE_REQUESTS, TrafficEngine
from planner.results import STREAM_WARNING_CODES, coded_warnings
from planner.scenario_base import revised
from ui import render, state, traffic_charts, traffic_disaggregation
from ui import traffic_text as words
from ui.text import gpu_short_name


def planned(scenario, calibration=None):
    """The page's plan; with a request stream plan() simulates it too (a spinner after 0.5 s)."""
    if scenario.traffic is None:
        return state.cached_plan(scenario, calibration)
    requests = len(scenario.traffic.trace) if scenario.traffic.trace else scenario.traffic.num_requests
    with st.spinner(f"Simulating {requests:,} requests on this deployment…", show_time=True):
        return state.cached_plan(scenario, calibration)


def sizing_target(scenario) -> float | None:
    """The rate to size for: the sidebar's target requests/s when set, else the stream's own rate."""
    return scenario.target_requests_per_second or scenario.traffic.stream_rate


def applied_sizing(scenario, cap):
    """The scenario with the capacity answer applied (the replicas' GPUs, each replica's batch cap, the stream at
    the rate it was sized for), or None when the answer has no verified count."""
    if cap is None or not cap.verified or cap.gpus_needed is None or cap.max_num_seqs_per_replica is None:
        return None
    traffic = scenario.traffic
    changes = {"max_num_seqs": cap.max_num_seqs_per_replica}
    if traffic.lengths != "trace" and cap.target_requests_per_second is not None:
        changes["requests_per_second"] = cap.target_requests_per_second
    return revised(scenario, num_gpus=cap.gpus_needed, traffic=revised(traffic, **changes))


def _verdict(scenario, plan, cap) -> None:
    """Two boxes: the capacity answer for the SLO (one sentence), then what this stream got on this deployment,
    each coloured by its own verdict."""
    result, traffic = plan.traffic, scenario.traffic
    at_rate = render.md_escape(words.at_rate_sentence(result, traffic))
    if cap is None:
        st.info(
            f"**No SLO target set.** {at_rate} Set a TTFT, TPOT or end-to-end target to see the largest rate a "
            "replica serves within it and the GPUs a target rate needs.",
            icon=":material/info:",
        )
        return
    headline = words.capacity_sentence(cap, gpu_short_name(plan.hardware.name), sizing_target(scenario))
    if cap.max_requests_per_second_per_replica > 0:
        st.success(f"**{render.md_escape(headline)}**", icon=":material/check_circle:")
    else:
        st.error(f"**{render.md_escape(headline)}**", icon=":material/cancel:")
    applied = applied_sizing(scenario, cap)
    if applied is not None and cap.gpus_needed != scenario.num_gpus:
        st.link_button(
            f"Apply: {cap.gpus_needed:,} GPUs, max_num_seqs {cap.max_num_seqs_per_replica:,} per replica",
            render.share_link("inference", render.scenario_params(applied)),
            icon=":material/open_in_new:",
            help="Open this deployment sized as the answer says (new tab): the GPUs it needs, each replica's "
            "engine batch cap, and the stream at the rate it was sized for.",
        )
    status = words.results_status(result)
    if status == "ok":
        st.success(at_rate, icon=":material/check_circle:")
    elif status == "risk":
        st.warning(at_rate, icon=":material/error:")
    else:
        st.error(at_rate, icon=":material/cancel:")
    st.caption(words.LIKELY_NOTE + " " + _likely_basis(result, cap))
    per_replica = plan.performance.requests_per_second / result.replicas
    sustained = words.sustained_sentence(cap, per_replica, min(traffic.num_requests, CAPACITY_MAX_REQUESTS))
    if sustained:
        st.caption(sustained)


def _likely_basis(result, cap) -> str:
    """Which published runs set the ranges: the regime's own, or every regime's when too few sources measured it."""
    basis = result.likely_basis or {}
    if not basis:
        return ""
    own = any(text.startswith("this regime") for text in basis.values())
    regime = result.likely_regime or "this deployment's"
    head = (
        f"Regime {regime}: its own published runs where several sources measured it, else every regime's."
        if own
        else f"Regime {regime}: too few published runs of its own, so every regime's runs set the ranges."
    )
    names = {"ttft": "TTFT", "tpot": "TPOT/ITL", "throughput": "throughput"}
    kinds = "; ".join(f"{names.get(k, k)}: {text.split(', ', 1)[1]}" for k, text in basis.items())
    replicas = (
        " Replicas: the throughput range on the per-replica rate." if cap is not None and cap.likely_basis else ""
    )
    return f"{head} {kinds}.{replicas}"


def _metrics(result) -> None:
    cols = st.columns(4)
    sent = result.offered_requests_per_second
    cols[0].metric(
        "Requests completed",
        units.per_second(result.request_throughput_per_second),
        delta=f"of {units.per_second(sent)} sent" if sent else None,
        delta_color="off",
        help=f"{result.num_requests:,} requests from the first sent to the last answered "
        f"({units.seconds(result.duration_seconds)}), whole deployment, as vllm bench serve counts its request "
        "throughput: below the rate they were sent at (over the first to the last send) by the time the last "
        "requests take to finish, and, past saturation, by the queue. Goodput counts those within every SLO "
        "target over the same run, so goodput ≤ completed ≤ sent."
        + (
            f" Likely measured: {words.rate_range(result.request_throughput_likely)} completed."
            if result.request_throughput_likely
            else ""
        ),
    )
    cols[1].metric("Output tokens/s", units.count(result.output_tokens_per_second), help="Whole deployment.")
    cols[2].metric(
        "Batch (mean · peak)",
        f"{result.mean_batch:,.0f} · {result.peak_batch:,}",
        help="Sequences in a step, per replica: the time-weighted mean and the largest.",
    )
    cols[3].metric(
        "KV cache peak",
        units.percent(result.kv_utilization_peak),
        help=f"Share of the KV-cache blocks in use at the fullest step (mean {units.percent(result.kv_utilization_mean)}"
        f"); {result.preemptions:,} preemptions (sequences evicted and recomputed when blocks ran out).",
    )


def _prefix_cache(result) -> None:
    """Where the shared prefixes came from: GPU cache, prefix pool, or prefilled again."""
    stats = result.prefix_cache
    if stats is None:
        return
    cols = st.columns(4)
    cols[0].metric(
        "Prefix hits in GPU memory",
        f"{stats.gpu_hits:,}",
        help=words.prefix_cache_help(stats),
    )
    cols[1].metric(
        "Prefix hits from the pool",
        f"{stats.pool_hits:,}" if stats.pool_tier is not None else "no pool",
        help="Read back from the prefix pool before the request's prefill; "
        f"{units.seconds(stats.pool_transfer_seconds_mean)} per hit on average."
        if stats.pool_tier is not None
        else "Set a DRAM or SSD prefix pool under More stream settings.",
    )
    cols[2].metric(
        "Prefixes prefilled again",
        f"{stats.misses:,}",
        help="Misses: the prefix's first use, or evicted from every cache; its prompt is prefilled in full.",
    )
    cols[3].metric(
        "Read from the pool",
        f"{stats.pool_bytes_transferred / 1e9:,.1f} GB",
        help="KV bytes moved from the pool into GPU memory over the run (the model's KV bytes per token x the "
        "prefix tokens of each pool hit), whole deployment.",
    )
    st.caption(words.prefix_cache_sentence(stats))


def _curve_charts(scenario, plan, curve, cap) -> None:
    traffic = scenario.traffic
    offered = traffic.stream_rate
    per_replica = offered / plan.traffic.replicas if offered else None
    slo = traffic.slo
    limit = cap.max_requests_per_second_per_replica if cap is not None else None
    knee = curve.knee_requests_per_second
    st.markdown("**Load–latency curve: one replica, light load to past saturation**")
    st.caption(
        f"Each point simulates {min(traffic.request_count, CURVE_REQUESTS):,} requests of this stream's shape on one "
        "replica at that rate"
        + (
            " (the trace replayed at that rate: its lengths and arrival pattern, time-scaled). "
            if traffic.trace
            else ". "
        )
        + (
            f"The knee ({units.per_second(knee)} per replica) is the {curve.knee_rule}. "
            if knee is not None
            else "No knee within the simulated range. "
        )
        + "Red band: latencies that miss the SLO target."
    )
    left, right = st.columns(2, gap="large")
    for where, metric in ((left, "ttft_seconds"), (right, "tpot_seconds")):
        target = slo.targets.get(metric) if slo is not None else None
        label = words.target_text(metric, slo.percentile_of(metric), target) if target else ""
        with where:
            render.chart(
                traffic_charts.load_curve(curve, metric, per_replica, target, f"SLO {label}", limit), width="stretch"
            )


def traffic_results(scenario, plan, calibration=None) -> None:
    """Everything below the section's inputs, when the scenario has a request stream."""
    if scenario.traffic is None:
        return
    failure = state.traffic_failure(plan)
    if failure is not None or plan.traffic is None:
        st.error(f"This layout cannot serve a request stream: {render.md_escape(failure or 'no result')}.")
        return
    result, traffic = plan.traffic, scenario.traffic
    with st.spinner("Simulating the load curve and the SLO capacity…", show_time=True):
        curve = state.load_curve(scenario, calibration)
        cap = None
        if traffic.slo is not None and traffic.slo.targets:
            cap = state.slo_capacity(scenario, sizing_target(scenario), calibration)
    _verdict(scenario, plan, cap)
    for warning in coded_warnings(plan):  # the engine's verdicts on the stream itself (planner.inference.traffic)
        if warning.code in STREAM_WARNING_CODES:
            st.warning(render.md_escape(warning.message), icon=":material/trending_up:")
    if not plan.memory.fits:
        st.caption(
            "The static plan's concurrency does not fit in memory; the simulation caps the batch by the KV blocks "
            "that do fit and preempts sequences when they run out."
        )
    st.caption(words.SIMULATED + f" Stream: {words.stream_text(traffic)}, seed {traffic.seed}.")
    _metrics(result)
    _prefix_cache(result)
    if result.adapters is not None:
        st.caption(words.adapter_loads_text(result.adapters))
    st.markdown("**Latency percentiles** (whole deployment)")
    st.table(pd.DataFrame(words.percentile_rows(result)).set_index(""))
    _curve_charts(scenario, plan, curve, cap)
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown("**Latency distribution (CDF)** (whole deployment)")
        st.caption(
            "Share of requests (tokens, for ITL) at or below each latency, from every simulated request; the y axis "
            "stretches the tail (p90, p99, p99.9 equally spaced). Dashed: the SLO targets; dotted: their percentile "
            "— a target is met where its curve crosses the dotted line left of its dashed one."
        )
        slo = traffic.slo
        render.chart(
            traffic_charts.latency_cdf(
                result, slo.targets if slo else None, {m: slo.percentile_of(m) for m in slo.targets} if slo else 99
            ),
            width="stretch",
        )
    with right:
        st.markdown("**KV cache in use over the run** (replica 0)")
        st.caption(
            f"{result.preemptions:,} preemptions; every replica gets the same share of the stream (round robin)."
        )
        render.chart(traffic_charts.kv_over_time(result.kv_utilization_over_time), width="stretch")
    traffic_disaggregation.disaggregation_section(scenario, plan, calibration)
    engine = TrafficEngine.of(scenario, state.applicable(scenario, calibration))
    with st.expander(f"Assumptions of the simulation ({len(engine.assumptions())})"):
        st.markdown("\n".join(f"- {render.md_escape(a)}" for a in engine.assumptions()))
