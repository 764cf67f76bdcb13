"""`python -m planner traffic`: a request stream on the scenario's deployment, simulated, headless.

    python -m planner traffic SCENARIO.json [--rate 12 | --rate inf] [--requests 2000] [--trace FILE.csv]
        [--slo 'p99_ttft_seconds<=2' --slo 'p99_tpot_seconds<=0.05'] [--curve] [--capacity TARGET_RPS]
        [--shared-prefix 0.5 --prefixes 40 --gpu-prefix-share 0.1 --prefix-pool dram|ssd
         --pool-capacity-gb 200 --pool-bandwidth-gbs 25]
        [--calibration FILE [--calibration-any-gpu]] [--format json|text]

The scenario may hold a `traffic` object already; the options override its fields. JSON output is an object
with `traffic` (the contract: `ttft_seconds`, `tpot_seconds`, `itl_seconds`, `e2e_latency_seconds`,
`queue_seconds` as {mean, p50, p90, p95, p99}, `request_throughput_per_second`,
`output_tokens_per_second`, `duration_seconds`, `slo_attainment`, `goodput_requests_per_second`, ...;
`latency_quantiles`: each latency at the percentiles of `QUANTILE_GRID`, the CDF; `prefix_cache`: GPU hits,
pool hits, misses and bytes read from a prefix pool when requests share prefixes),
and, when asked, `load_curve` and `capacity`; plus the `assumptions` the simulation rests on.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys

from pydantic import ValidationError

from planner.cli.main import CliError, _load_calibration, _read_json, _scenarios, read_text
from planner.errors import PlanningError, explain
from planner.inference.disaggregation import DisaggregatedLayout, best_split, simulate_disaggregated
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import MAX_TRACE_BYTES, Slo, Traffic, parse_trace_csv
from planner.plan import check_calibration
from planner.units import count, seconds, usd

SLO_PATTERN = re.compile(r"^\s*p(50|90|95|99)_(ttft|tpot|e2e_latency)_seconds\s*<=\s*([0-9.eE+-]+)\s*$")


def register(subparsers) -> None:
    p = subparsers.add_parser("traffic", help="simulate a request stream: latency percentiles, SLO, GPUs for a rate")
    p.add_argument("scenario", help="inference scenario JSON file ('-' for stdin)")
    p.add_argument("--rate", help="requests per second for the whole deployment, or 'inf' (all at time 0)")
    p.add_argument("--requests", type=int, help="number of requests to simulate (default 1000)")
    p.add_argument("--arrival", choices=("poisson", "uniform", "gamma"))
    p.add_argument("--burstiness", type=float, help="gamma arrivals: shape of the gaps (1 = Poisson)")
    p.add_argument("--max-concurrency", type=int, help="client-side cap on requests in flight")
    p.add_argument("--seed", type=int)
    p.add_argument("--trace", help="CSV of arrival_seconds,prompt_tokens,output_tokens[,prefix_id]")
    p.add_argument("--slo", action="append", default=[], help="e.g. 'p99_ttft_seconds<=2' (repeatable)")
    p.add_argument("--shared-prefix", type=float, help="share of each prompt that is a shared prefix (0-1)")
    p.add_argument("--prefixes", type=int, help="distinct shared prefixes (each request picks one; default 1)")
    p.add_argument(
        "--gpu-prefix-share", type=float, help="bound the GPU prefix cache to this share of the KV blocks (LRU)"
    )
    p.add_argument("--prefix-pool", choices=("dram", "ssd", "none"), help="a Mooncake-style prefix pool tier")
    p.add_argument("--pool-capacity-gb", type=float, help="prefix pool capacity per replica, GB (10^9 bytes)")
    p.add_argument("--pool-bandwidth-gbs", type=float, help="prefix pool read bandwidth per replica, GB/s")
    p.add_argument("--curve", action="store_true", help="also the load-latency curve per replica, with the knee")
    p.add_argument("--capacity", type=float, metavar="TARGET_RPS", help="replicas, GPUs and $/month for this rate")
    p.add_argument(
        "--disaggregate",
        metavar="PREFILL_GPUS|best",
        help="separate prefill and decode pools: this many of the GPUs prefill (the rest decode), or 'best' to "
        "try every split against the colocated deployment",
    )
    p.add_argument("--prefill-tp", type=int, help="tensor parallelism of a prefill replica (default: the scenario's)")
    p.add_argument("--calibration", help="calibration record JSON to apply")
    p.add_argument("--calibration-any-gpu", action="store_true", help="apply a calibration measured on another GPU")
    p.add_argument("--format", choices=("json", "text"), default="json")
    p.set_defaults(func=run)


def parse_slo(specs: list[str]) -> Slo | None:
    """`p99_ttft_seconds<=2`-style targets into one Slo, each target at its own percentile."""
    if not specs:
        return None
    targets: dict[str, float] = {}
    percentiles: dict[str, int] = {}
    for spec in specs:
        match = SLO_PATTERN.match(spec)
        if match is None:
            raise CliError(
                f"--slo '{spec}' is not a target; write p<50|90|95|99>_<ttft|tpot|e2e_latency>_seconds<=VALUE, "
                "e.g. 'p99_ttft_seconds<=2'"
            )
        percentile, metric, value = match.groups()
        if f"{metric}_seconds" in targets:
            raise CliError(f"--slo sets two targets for {metric}; give each metric one")
        percentiles[f"{metric}_percentile"] = int(percentile)
        try:
            targets[f"{metric}_seconds"] = float(value)
        except ValueError:
            raise CliError(f"--slo '{spec}': '{value}' is not a number") from None
    shared = set(percentiles.values())
    # one percentile for every target: the shared field, as before; else each target's own
    fields: dict[str, float | int] = {**targets, **({"percentile": shared.pop()} if len(shared) == 1 else percentiles)}
    try:
        return Slo.model_validate(fields)
    except ValidationError as exc:
        raise CliError(f"--slo: {explain(exc)}") from None


def _traffic(args: argparse.Namespace, scenario: InferenceScenario) -> Traffic:
    base = scenario.traffic.model_dump() if scenario.traffic is not None else {}
    update: dict = {}
    if args.rate is not None:
        if args.rate.strip().lower() in ("inf", "infinity"):
            update["requests_per_second"] = None
        else:
            try:
                update["requests_per_second"] = float(args.rate)
            except ValueError:
                raise CliError(f"--rate '{args.rate}' is not a number of requests per second or 'inf'") from None
    for option, field in (
        ("requests", "num_requests"),
        ("arrival", "arrival"),
        ("burstiness", "burstiness"),
        ("max_concurrency", "max_concurrency"),
        ("seed", "seed"),
    ):
        if getattr(args, option) is not None:
            update[field] = getattr(args, option)
    if args.trace:
        text = read_text(args.trace, MAX_TRACE_BYTES, hint=" (a trace CSV is expected; sample a larger one first)")
        try:
            update.update(lengths="trace", trace=parse_trace_csv(text))
        except PlanningError as exc:
            raise CliError(f"{args.trace}: {exc}") from None
    for option, field in (
        ("shared_prefix", "shared_prefix_fraction"),
        ("prefixes", "num_prefixes"),
        ("gpu_prefix_share", "gpu_prefix_cache_share"),
    ):
        if getattr(args, option) is not None:
            update[field] = getattr(args, option)
    pool = _prefix_pool(args, base.get("prefix_pool"))
    if pool is not False:
        update["prefix_pool"] = pool
    slo = parse_slo(args.slo)
    if slo is not None:
        update["slo"] = slo
    try:
        return Traffic.model_validate({**base, **update})
    except (ValidationError, PlanningError) as exc:
        raise CliError(f"traffic: {explain(exc)}") from None


def _prefix_pool(args: argparse.Namespace, base: dict | None):
    """The pool the options describe (None: no pool), or False when they say nothing about one."""
    sizes = (args.pool_capacity_gb, args.pool_bandwidth_gbs)
    if args.prefix_pool is None and all(v is None for v in sizes):
        return False
    if args.prefix_pool == "none":
        return None
    pool = dict(base or {})
    if args.prefix_pool is not None:
        pool["tier"] = args.prefix_pool
    for value, field, option in (
        (args.pool_capacity_gb, "capacity_bytes", "--pool-capacity-gb"),
        (args.pool_bandwidth_gbs, "bandwidth_bytes_per_second", "--pool-bandwidth-gbs"),
    ):
        if value is not None:
            if not (math.isfinite(value) and value > 0):
                raise CliError(f"{option} must be a positive number of GB (10^9 bytes)")
            pool[field] = value * 1e9
    return pool


def run(args: argparse.Namespace) -> int:
    scenarios, many = _scenarios(_read_json(args.scenario))
    if many:
        raise CliError(f"traffic simulates one scenario; {args.scenario} holds {len(scenarios)}")
    scenario = scenarios[0]
    if not isinstance(scenario, InferenceScenario):
        raise CliError("traffic needs an inference scenario (a training run serves no requests)")
    if args.capacity is not None and not (0 < args.capacity <= 1e7 and math.isfinite(args.capacity)):
        raise CliError("--capacity must be a request rate between 0 and 10,000,000 requests per second")
    traffic = _traffic(args, scenario)
    calibration = _load_calibration(args.calibration)
    if args.calibration_any_gpu and calibration is None:
        raise CliError("--calibration-any-gpu needs a calibration: add --calibration FILE")
    if calibration is not None and args.calibration_any_gpu:
        calibration = calibration.for_any_gpu()
    try:
        warning = check_calibration(scenario.gpu_id(), calibration, scenario)
        engine = TrafficEngine.of(scenario, calibration, traffic)
        out: dict = {"traffic": engine.simulate().model_dump(mode="json")}
        if args.curve:
            out["load_curve"] = engine.load_curve().model_dump(mode="json")
        if args.capacity is not None:
            out["capacity"] = engine.capacity(args.capacity).model_dump(mode="json")
        if args.disaggregate is not None:
            out["disaggregated"] = _disaggregated(args, scenario, calibration, traffic)
    except PlanningError as exc:
        raise CliError(explain(exc)) from None
    out["assumptions"] = engine.assumptions()
    out["warnings"] = ([warning] if warning else []) + [w.message for w in engine.warnings()]
    if args.format == "text":
        sys.stdout.write(report_text(out) + "\n")
    else:
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    return 0


def _disaggregated(args: argparse.Namespace, scenario: InferenceScenario, calibration, traffic: Traffic) -> dict:
    if args.disaggregate.strip().lower() == "best":
        return best_split(scenario, calibration, traffic).model_dump(mode="json")
    try:
        prefill_gpus = int(args.disaggregate)
        layout = DisaggregatedLayout(
            prefill_gpus=prefill_gpus, prefill_tensor_parallel=args.prefill_tp or scenario.tensor_parallel
        )
    except (ValueError, ValidationError):
        raise CliError(
            f"--disaggregate '{args.disaggregate}' must be a number of prefill GPUs (>= 1) or 'best'"
        ) from None
    return simulate_disaggregated(scenario, layout, calibration, traffic).model_dump(mode="json")


def report_text(out: dict) -> str:
    """The `traffic --format text` report: the run, its latency table, the cache and batch, the SLO checks,
    then the load curve, the capacity and the disaggregated splits when asked for."""
    t = out["traffic"]
    lines = [*_run_lines(t), *_latency_lines(t), "", *_cache_and_slo_lines(t)]
    if "load_curve" in out:
        lines += ["", *_load_curve_lines(out["load_curve"])]
    if "capacity" in out:
        lines.append(_capacity_line(out["capacity"]))
    if "disaggregated" in out:
        lines += ["", *_disaggregated_lines(out["disaggregated"])]
    lines += ["", "assumptions:", *(f"- {a}" for a in out["assumptions"])]
    lines += [f"warning: {w}" for w in out["warnings"]]
    return "\n".join(lines)


def _run_lines(t: dict) -> list[str]:
    return [
        f"{t['num_requests']:,} requests on {t['replicas']} replica{'s' if t['replicas'] != 1 else ''}, "
        f"routed {t['routing']}",
        f"throughput: {t['request_throughput_per_second']:.3g} requests/s completed"
        + (f" of {t['offered_requests_per_second']:.3g} sent" if t.get("offered_requests_per_second") else "")
        + f", {count(t['output_tokens_per_second'])} output tokens/s over {seconds(t['duration_seconds'])}"
        + " (first send to last answer)",
        "",
    ]


def _latency_lines(t: dict) -> list[str]:
    lines = [f"{'':<14}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}   p99 likely measured"]
    for key, name in (
        ("ttft_seconds", "TTFT"),
        ("tpot_seconds", "TPOT"),
        ("itl_seconds", "ITL"),
        ("e2e_latency_seconds", "end-to-end"),
        ("queue_seconds", "queue"),
    ):
        d = t[key]
        likely = d.get("likely")
        span = f"   {seconds(likely['p99'][0])} – {seconds(likely['p99'][1])}" if likely else ""
        lines.append(f"{name:<14}" + "".join(f"{seconds(d[q]):>10}" for q in ("mean", "p50", "p90", "p99")) + span)
    q = t.get("latency_quantiles")
    if q:
        lines.append(
            f"{'tail':<14}"
            + "".join(f"{'p' + format(p, 'g'):>10}" for p in (99.5, 99.9, 100))
            + "   (TTFT; the full CDF is latency_quantiles in the JSON)"
        )
        lines.append(
            f"{'TTFT':<14}"
            + "".join(f"{seconds(q['ttft_seconds'][q['percentiles'].index(p)]):>10}" for p in (99.5, 99.9, 100))
        )
    return lines


def _cache_and_slo_lines(t: dict) -> list[str]:
    lines = []
    pc = t.get("prefix_cache")
    if pc:
        line = (
            f"shared prefixes ({pc['mode']} GPU cache): {pc['requests_with_prefix']:,} requests, "
            f"{pc['gpu_hits']:,} GPU hits, {pc['pool_hits']:,} pool hits, {pc['misses']:,} misses (prefilled again)"
        )
        if pc["pool_tier"] is not None:
            line += (
                f"; {pc['pool_tier'].upper()} pool read {pc['pool_bytes_transferred'] / 1e9:,.1f} GB, "
                f"{seconds(pc['pool_transfer_seconds_mean'])} per pool hit"
            )
        lines.append(line)
    ad = t.get("adapters")
    if ad:
        lines.append(
            f"LoRA adapters: {ad['adapters']:,} on {ad['gpu_slots_per_replica']:,} GPU slots per replica; "
            f"{ad['loads']:,} slot loads ({ad['storage_reads']:,} from storage), steps waited "
            f"{seconds(ad['stall_seconds'])} ({ad['stall_share']:.1%} of the busy time)"
        )
    lines.append(
        f"batch: mean {t['mean_batch']:.3g}, peak {t['peak_batch']}; KV blocks in use: mean "
        f"{100 * t['kv_utilization_mean']:.0f}%, peak {100 * t['kv_utilization_peak']:.0f}%; "
        f"preemptions: {t['preemptions']}"
    )
    for check in t["slo"]:
        verdict = check.get("verdict") or ("meets" if check["met"] else "misses")
        likely = check.get("likely_seconds")
        span = f", likely {seconds(likely[0])} – {seconds(likely[1])} measured" if likely else ""
        lines.append(
            f"SLO p{check['percentile']} {check['metric'].removesuffix('_seconds')} <= "
            f"{seconds(check['target_seconds'])}: {seconds(check['simulated_seconds'])} simulated{span} "
            f"({verdict.upper() if verdict != 'meets' else verdict})"
        )
    if t["slo_attainment"] is not None:
        attain = t.get("slo_attainment_likely")
        good = t.get("goodput_likely")
        lines.append(
            f"{100 * t['slo_attainment']:.1f}% of requests meet every target; goodput "
            f"{t['goodput_requests_per_second']:.3g} requests/s"
            + (
                f" (likely {100 * attain[0]:.0f}–{100 * attain[1]:.0f}%, {good[0]:.3g}–{good[1]:.3g} requests/s)"
                if attain and good
                else ""
            )
        )
    return lines


def _load_curve_lines(curve: dict) -> list[str]:
    lines = ["load per replica (requests/s)  p50 TTFT   p99 TTFT   p50 TPOT   p99 TPOT"]
    for p in curve["points"]:
        lines.append(
            f"{p['requests_per_second']:>29.3g}  {seconds(p['ttft_p50_seconds']):>9}  "
            f"{seconds(p['ttft_p99_seconds']):>9}  {seconds(p['tpot_p50_seconds']):>9}  "
            f"{seconds(p['tpot_p99_seconds']):>9}"
        )
    knee = curve["knee_requests_per_second"]
    lines.append(
        f"knee: {knee:.3g} requests/s per replica ({curve['knee_rule']})"
        if knee is not None
        else f"no knee within the curve ({curve['knee_rule']})"
    )
    return lines


def _capacity_line(c: dict) -> str:
    rate = c["max_requests_per_second_per_replica"]
    if rate <= 0:
        return "capacity: even light load misses the SLO on one replica of this layout"
    if c.get("verified") is False:
        return (
            f"capacity: {rate:.3g} requests/s per replica within the SLO, but no number of replicas the search tried "
            f"met it when the stream was simulated at {c['target_requests_per_second']:g} requests/s"
        )
    return (
        f"capacity: {rate:.3g} requests/s per replica within the SLO; {c['target_requests_per_second']:g} "
        f"requests/s need {c['replicas_needed']} replicas ({c['gpus_needed']} GPUs, max_num_seqs "
        f"{c['max_num_seqs_per_replica']} each: set traffic.max_num_seqs to apply it), "
        f"{usd(c['usd_per_month'])}/month"
        + (" — simulated at that rate: met" if c.get("verified") else "")
        + (
            f"; likely {c['replicas_likely'][0]}–{c['replicas_likely'][1]} replicas "
            f"({usd(c['usd_per_month_likely'][0])}–{usd(c['usd_per_month_likely'][1])}/month) given the simulator's "
            "published error"
            if c.get("replicas_likely")
            else ""
        )
    )


def _disaggregated_lines(d: dict) -> list[str]:
    def one(split: dict) -> str:
        t = split["traffic"]
        good = t["goodput_requests_per_second"]
        return (
            f"{split['layout']['prefill_gpus']:>4} prefill GPUs ({split['prefill_replicas']} replicas) / "
            f"{split['decode_replicas']} decode replicas: p90 TTFT {seconds(t['ttft_seconds']['p90'])}, p90 TPOT "
            f"{seconds(t['tpot_seconds']['p90'])}, KV transfer {seconds(split['kv_transfer_seconds_mean'])}"
            + (f", goodput {good:.3g} requests/s" if good is not None else "")
        )

    if "splits" not in d:
        return ["disaggregated:", one(d)]
    lines = ["disaggregated splits:", *(one(s) for s in d["splits"])]
    lines.append(
        ("disaggregation wins: " if d["disaggregation_wins"] else "colocated is as good or better: ") + d["reason"]
    )
    return lines
