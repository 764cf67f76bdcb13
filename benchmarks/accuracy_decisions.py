"""Decisions checked against measurements: the load a deployment sustains under an SLO, and the replicas a target
rate needs, as Headroom decides them and as the published measurements imply.

`benchmarks/accuracy.py` replays every published serving run through the traffic simulator. Where one source ran
the same deployment (model, GPUs, layout, engine and its settings, lengths) at several request rates or client
concurrencies, that sweep is a decision the source measured: which of its loads still meets a stated SLO. This
module groups the replayed runs into sweeps (`sweeps`), applies each SLO rule (RULES, fixed before any decision was
computed and the same for every sweep) to the measured statistics and to the simulated ones (`largest_meeting`),
and counts how often Headroom's decision is the measured one, one sweep point off, or further. From each decision
it sizes a target rate (TARGET_RULE) and reports the replica error. The likely ranges every traffic answer carries
(planner/inference/traffic_ranges.py) are rebuilt with the sweep's own source left out (the planner's committed
ranges contain that source's runs) and turned into the decisions they imply: the largest load the simulation says
'meets' and the largest it does not say 'misses'.

`summary` returns what accuracy.json stores under serving -> decisions; `report_lines` the report's section.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from planner.inference.traffic_ranges import TrafficRanges, overall_verdict, target_verdict
from planner.inference.traffic_results import CapacityAnswer
from planner.uncertainty import TrafficRange, traffic_range

# The statistic a sweep's targets read: the first of these the source published at every load of the sweep.
STATISTICS = ("p99", "mean", "median")
TTFT_METRICS = {"p99": "p99_ttft_ms", "mean": "mean_ttft_ms", "median": "median_ttft_ms"}
TPOT_METRICS = {"p99": "p99_tpot_ms", "mean": "mean_tpot_ms", "median": "median_itl_ms"}
METRIC_NAMES = {
    "p99_ttft_ms": "p99 TTFT",
    "mean_ttft_ms": "mean TTFT",
    "median_ttft_ms": "median TTFT",
    "p99_tpot_ms": "p99 TPOT",
    "mean_tpot_ms": "mean TPOT",
    "median_itl_ms": "median ITL",
}
NONE = -1  # the decision "no load of the sweep meets the SLO" (one step below its lightest load)
TARGET_MULTIPLE = 4
TARGET_RULE = (
    f"the target rate is {TARGET_MULTIPLE} x the sweep's highest measured request rate per replica (its request "
    "throughput; for a run that publishes output throughput only, output tokens/s / output tokens per request: "
    "every replayed run has fixed lengths); the replicas a decision implies are ceil(target / the request rate "
    "per replica at the decided load), measured at the measured decision, simulated at Headroom's"
)
STEP_RULE = (
    "A sweep's loads are ordered (request rate, a burst of every request at once last; or client concurrency). "
    "A decision is the largest load that meets every target with every lighter load of the sweep meeting them too "
    "(what a capacity search that stops at the first miss finds), or 'none' where the lightest misses: one step "
    "below it. 'One step off' is one sweep point (or 'none' against the lightest load)."
)


@dataclass(frozen=True)
class Rule:
    """An SLO rule: targets on TTFT and TPOT, as multiples of the sweep's lightest load's measured statistic or as
    absolute milliseconds (one of the two per metric)."""

    name: str
    text: str
    ttft_multiple: float | None = None
    tpot_multiple: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None

    def targets(self, lightest_ttft_ms: float, lightest_tpot_ms: float) -> tuple[float, float]:
        ttft = self.ttft_ms if self.ttft_ms is not None else self.ttft_multiple * lightest_ttft_ms
        tpot = self.tpot_ms if self.tpot_ms is not None else self.tpot_multiple * lightest_tpot_ms
        return ttft, tpot


# Fixed before any decision was computed, never moved after: the relative pair as a deployment review states
# "no worse than 3x / 1.5x what the idle deployment gives", the absolute pair the issue's own SLO (p99 TTFT <= 2 s,
# TPOT <= 50 ms), read on the statistic the source publishes.
RULES = (
    Rule(
        "relative",
        "TTFT <= 3 x and TPOT <= 1.5 x the sweep's lightest load's measured value",
        ttft_multiple=3.0,
        tpot_multiple=1.5,
    ),
    Rule("absolute", "TTFT <= 2 s and TPOT <= 50 ms", ttft_ms=2000.0, tpot_ms=50.0),
)


@dataclass(frozen=True)
class Point:
    """One load of a sweep: the run's published statistics and Headroom's simulated ones (metric -> value)."""

    load: float  # the ordering key: request rate (inf for a burst) or client concurrency
    label: str
    measured: dict
    simulated: dict


@dataclass(frozen=True)
class Sweep:
    source: str
    deployment: str
    kind: str  # "rate" or "concurrency"
    regime: str
    replicas: int  # replicas in each run (every run of a sweep has the same deployment)
    output_tokens: int
    points: tuple[Point, ...]  # lightest load first


# ---------------------------------------------------------------------------------------------- grouping


def _deployment(run) -> str:
    s = run.scenario
    return (
        f"{s.model} {s.num_gpus}x{s.gpu} TP{s.tensor_parallel} {s.weight_dtype} {run.engine} "
        f"{s.prompt_tokens}/{s.output_tokens}"
    )


def _rate(traffic) -> float:
    return math.inf if traffic.requests_per_second is None else traffic.requests_per_second


def _rate_label(rate: float) -> str:
    return "burst" if math.isinf(rate) else f"{rate:g} req/s"


def sweeps(results: Iterable) -> tuple[list[Sweep], list[tuple[str, str]]]:
    """The sweeps among these serving results: runs of one source with the same scenario, engine and stream
    settings that differ only in their request rate (a rate sweep: same client concurrency) or only in their client
    concurrency (a concurrency sweep: same rate); the request count may differ. Returns the sweeps of two or more
    loads and, for groups that cannot be checked, (group, why)."""
    runs: dict = {}  # (source, run) -> (regime, {metric: (measured, simulated)}); two sources may publish one run
    for r in results:
        _, metrics = runs.setdefault((r.case.publisher, r.case.run), (r.case.regime, {}))
        metrics[r.case.metric] = (r.case.reference, r.predicted)
    groups: dict = {}
    for (source, run), (regime, metrics) in runs.items():
        stream = run.traffic.model_dump(exclude={"requests_per_second", "max_concurrency", "num_requests"})
        base = (source, run.scenario, run.engine, repr(sorted(stream.items())))
        member = (run, regime, metrics)
        groups.setdefault(("rate", *base, run.traffic.max_concurrency), []).append(member)
        groups.setdefault(("concurrency", *base, _rate(run.traffic)), []).append(member)
    found, skipped = [], []
    for (kind, source, *_), members in groups.items():
        load = (lambda t: _rate(t)) if kind == "rate" else (lambda t: t.max_concurrency or math.inf)
        loads = [load(run.traffic) for run, _, _ in members]
        if len(set(loads)) < 2:
            continue
        run0, regime, _ = members[0]
        name = f"{source}: {_deployment(run0)}, {kind} sweep"
        if len(set(loads)) < len(loads):
            skipped.append((name, "two runs at the same load: the sweep has no single order"))
            continue
        points = []
        for (_, _, metrics), x in sorted(zip(members, loads), key=lambda m: m[1]):
            label = _rate_label(x) if kind == "rate" else (f"c={x:g}" if math.isfinite(x) else "no client cap")
            points.append(Point(x, label, {m: v[0] for m, v in metrics.items()}, {m: v[1] for m, v in metrics.items()}))
        found.append(
            Sweep(
                source,
                _deployment(run0),
                kind,
                regime,
                run0.scenario.replicas,
                run0.scenario.output_tokens,
                tuple(points),
            )
        )
    return found, skipped


def statistic(points: Sequence[Point], metrics: dict[str, str]) -> str | None:
    """The metric the sweep's target reads: the first of STATISTICS published (and simulated finitely) at every
    load, or None."""
    for name in STATISTICS:
        metric = metrics[name]
        if all(
            metric in p.measured and math.isfinite(p.measured[metric]) and math.isfinite(p.simulated[metric])
            for p in points
        ):
            return metric
    return None


def request_rate(values: dict, output_tokens: int) -> float | None:
    """Requests per second of a run (all replicas): its request throughput, else output tokens/s over the output
    tokens of a request (fixed lengths), else None."""
    if "request_throughput" in values:
        return values["request_throughput"]
    if "output_throughput" in values:
        return values["output_throughput"] / output_tokens
    return None


# ---------------------------------------------------------------------------------------------- decisions


def largest_meeting(meets: Sequence[bool]) -> int:
    """The index of the largest load that meets with every lighter load meeting too; NONE if the lightest misses."""
    decision = NONE
    for i, ok in enumerate(meets):
        if not ok:
            break
        decision = i
    return decision


def meets(ttft_ms: float, tpot_ms: float, targets: tuple[float, float]) -> bool:
    return ttft_ms <= targets[0] and tpot_ms <= targets[1]


def verdict(ttft_likely: tuple[float, float], tpot_likely: tuple[float, float], targets: tuple[float, float]) -> str:
    """A load's verdict from its statistics' likely ranges (planner.inference.traffic_ranges: a target 'meets' when
    its whole range is within it, 'misses' when all of it is past): 'meets' when every target meets, 'misses' when
    any misses, else 'at risk'."""
    return str(
        overall_verdict(target_verdict(likely, target) for likely, target in zip((ttft_likely, tpot_likely), targets))
    )


def replicas_for(target: float, rate_per_replica: float | None) -> int | None:
    """ceil(target / rate): the replicas a target rate needs at a per-replica rate; None without a rate."""
    if rate_per_replica is None or not rate_per_replica > 0 or not math.isfinite(rate_per_replica):
        return None
    return max(1, math.ceil(target / rate_per_replica - 1e-9))


def category(steps: int) -> str:
    return "exact" if steps == 0 else "one step off" if abs(steps) == 1 else "further"


def pick_range(ranges: dict, kind: str, regime: str) -> TrafficRange:
    """The range a plan in `regime` gets from these ranges (accuracy.traffic_ranges' output): the choice
    planner.uncertainty.traffic_range makes from the committed summary, made on any ranges."""
    return traffic_range(kind, regime, ranges)


def _load_text(sweep: Sweep, index: int) -> str:
    return f"none (below {sweep.points[0].label})" if index == NONE else sweep.points[index].label


def decide(sweep: Sweep, rule: Rule, ttft_metric: str, tpot_metric: str, ranges: TrafficRanges) -> dict:
    """One rule on one sweep: the measured and the simulated decision, the range-implied ones, and the replicas."""
    points = sweep.points
    targets = rule.targets(points[0].measured[ttft_metric], points[0].measured[tpot_metric])
    measured = largest_meeting([meets(p.measured[ttft_metric], p.measured[tpot_metric], targets) for p in points])
    simulated = largest_meeting([meets(p.simulated[ttft_metric], p.simulated[tpot_metric], targets) for p in points])
    verdicts = [
        verdict(ranges.ttft.interval(p.simulated[ttft_metric]), ranges.tpot.interval(p.simulated[tpot_metric]), targets)
        for p in points
    ]
    likely = (largest_meeting([v == "meets" for v in verdicts]), largest_meeting([v != "misses" for v in verdicts]))
    rates = [
        (request_rate(p.measured, sweep.output_tokens), request_rate(p.simulated, sweep.output_tokens)) for p in points
    ]
    per_replica = [tuple(None if r is None else r / sweep.replicas for r in pair) for pair in rates]
    target = TARGET_MULTIPLE * max(m for m, _ in per_replica if m is not None)
    measured_replicas = replicas_for(target, per_replica[measured][0]) if measured != NONE else None
    headroom_replicas = replicas_for(target, per_replica[simulated][1]) if simulated != NONE else None
    at_measured_load = replicas_for(target, per_replica[measured][1]) if measured != NONE else None
    replicas_likely = None
    if headroom_replicas is not None:
        answer = CapacityAnswer(
            slo=None,
            max_requests_per_second_per_replica=per_replica[simulated][1],
            target_requests_per_second=target,
            replicas_needed=headroom_replicas,
            gpus_needed=None,
            usd_per_month=None,
            usd_per_replica_month=0.0,
            verified=True,
        )
        # the latency ranges' edges as the planner reads them (TrafficEngine._edge_replicas): the heaviest load no
        # target 'misses' (fast) and the heaviest every target 'meets' (slow), at their simulated rates
        fast = replicas_for(target, per_replica[likely[1]][1]) if likely[1] != NONE else None
        slow = replicas_for(target, per_replica[likely[0]][1]) if likely[0] != NONE else None
        replicas_likely = list(ranges.capacity(answer, 1, fast, slow).replicas_likely)

    def error(replicas: int | None) -> float | None:
        return (
            None
            if replicas is None or measured_replicas is None
            else (replicas - measured_replicas) / measured_replicas
        )

    steps = simulated - measured
    return {
        "rule": rule.name,
        "targets_ms": {"ttft": targets[0], "tpot": targets[1]},
        "measured": measured,
        "headroom": simulated,
        "measured_load": _load_text(sweep, measured),
        "headroom_load": _load_text(sweep, simulated),
        "steps": steps,
        "category": category(steps),
        "verdicts": verdicts,
        "likely": list(likely),
        "likely_loads": [_load_text(sweep, likely[0]), _load_text(sweep, likely[1])],
        "measured_within_likely": likely[0] <= measured <= likely[1],
        "likely_share_of_decisions": (likely[1] - likely[0] + 1) / (len(points) + 1),
        "target_requests_per_second": target,
        "replicas_measured": measured_replicas,
        "replicas_headroom": headroom_replicas,
        "replicas_likely": replicas_likely,
        "measured_replicas_within_likely": (
            None
            if replicas_likely is None or measured_replicas is None
            else replicas_likely[0] <= measured_replicas <= replicas_likely[1]
        ),
        "replica_error": error(headroom_replicas),
        "replicas_headroom_at_measured_load": at_measured_load,
        "replica_error_at_measured_load": error(at_measured_load),
        "chance_exact": 1 / (len(points) + 1),
        "chance_within_one": sum(abs(j - measured) <= 1 for j in range(NONE, len(points))) / (len(points) + 1),
    }


# ---------------------------------------------------------------------------------------------- pooling


def pooled(decisions: Sequence[dict]) -> dict:
    """Counts and shares of exact / one step off / further, the replica error's median |.| and signed median
    (over decisions where both sides size a count), and how often the measured decision and replicas lie within
    the likely ones."""
    n = len(decisions)
    if not n:
        return {"decisions": 0}
    count = {c: sum(d["category"] == c for d in decisions) for c in ("exact", "one step off", "further")}
    errors = [d["replica_error"] for d in decisions if d["replica_error"] is not None]
    within = [
        d["measured_replicas_within_likely"] for d in decisions if d["measured_replicas_within_likely"] is not None
    ]
    return {
        "decisions": n,
        "exact": count["exact"],
        "one_step_off": count["one step off"],
        "further": count["further"],
        "share_exact": count["exact"] / n,
        "share_within_one_step": (count["exact"] + count["one step off"]) / n,
        "chance_exact": statistics.mean(d["chance_exact"] for d in decisions),
        "chance_within_one_step": statistics.mean(d["chance_within_one"] for d in decisions),
        "sized": len(errors),
        "median_abs_replica_error": statistics.median(abs(e) for e in errors) if errors else math.nan,
        "median_signed_replica_error": statistics.median(errors) if errors else math.nan,
        "measured_within_likely": sum(d["measured_within_likely"] for d in decisions),
        "share_measured_within_likely": sum(d["measured_within_likely"] for d in decisions) / n,
        "likely_share_of_decisions": statistics.mean(d["likely_share_of_decisions"] for d in decisions),
        "replicas_checked": len(within),
        "measured_replicas_within_likely": sum(within),
        "share_replicas_within_likely": sum(within) / len(within) if within else math.nan,
    }


def left_out(decisions: Sequence[dict], sources: Sequence[str]) -> dict:
    """The pooled shares and replica error with each source's decisions left out in turn: min and max over sources
    (a pooled figure one source carries shows a wide range)."""
    figures = (
        "share_exact",
        "share_within_one_step",
        "median_abs_replica_error",
        "median_signed_replica_error",
        "share_measured_within_likely",
        "share_replicas_within_likely",
    )
    runs = {s: pooled([d for d, src in zip(decisions, sources) if src != s]) for s in dict.fromkeys(sources)}
    out = {}
    for figure in figures:
        values = {s: p[figure] for s, p in runs.items() if p["decisions"] and math.isfinite(p[figure])}
        out[figure] = {
            "min": min(values.values()) if values else math.nan,
            "max": max(values.values()) if values else math.nan,
            "by_source": values,
        }
    return out


# ---------------------------------------------------------------------------------------------- the summary


def unreplayed_sweeps(rows: Sequence[dict], mapped: set[str], reasons: dict[str, str], source_of: Callable) -> list:
    """Sweeps in the published rows (same source, model, GPUs, layout, engine and version, settings and lengths;
    several rates or concurrencies) none of whose rows is replayed: (group, why)."""
    groups: dict = {}
    for row in rows:
        base = tuple(
            row[k]
            for k in ("model", "gpu", "num_gpus", "tp", "engine", "engine_version", "dtype", "input_len", "output_len")
        )
        key = (source_of(row), *base, row["engine_args"])
        groups.setdefault(key, {}).setdefault((row["request_rate"], row["max_concurrency"]), []).append(row["id"])
    out = []
    for key, loads in groups.items():
        ids = [i for group in loads.values() for i in group]
        if len(loads) < 2 or any(i in mapped for i in ids):
            continue
        source, model, gpu, gpus, tp, engine, version = key[:7]
        name = f"{source}: {model} {gpus}x{gpu} TP{tp} {engine} {version}, {len(loads)} loads"
        out.append((name, reasons.get(ids[0], "not replayed")))
    return out


def summary(
    results: Iterable,
    ranges_of: Callable[[list], dict],
    rows: Sequence[dict] = (),
    unmapped: Sequence = (),
    source_of: Callable | None = None,
) -> dict:
    """What accuracy.json stores under serving -> decisions. `results`: the serving family's results (finite
    errors); `ranges_of`: accuracy.traffic_ranges (the likely ranges from a list of results, rebuilt here with
    each sweep's source left out); `rows`, `unmapped`, `source_of`: the published rows, the ones not replayed and
    the source rule, to name the sweeps that cannot be checked."""
    results = list(results)
    found, skipped = sweeps(results)
    entries, flat, flat_sources = [], [], []
    loso: dict[str, dict] = {}
    for sweep in found:
        ttft_metric, tpot_metric = statistic(sweep.points, TTFT_METRICS), statistic(sweep.points, TPOT_METRICS)
        name = f"{sweep.source}: {sweep.deployment}, {sweep.kind} sweep"
        if ttft_metric is None or tpot_metric is None:
            skipped.append((name, "no TTFT or TPOT statistic published at every load"))
            continue
        if any(request_rate(p.measured, sweep.output_tokens) is None for p in sweep.points):
            skipped.append((name, "no request or output throughput published at every load"))
            continue
        if sweep.source not in loso:
            loso[sweep.source] = ranges_of([r for r in results if r.case.publisher != sweep.source])
        kinds = {kind: pick_range(loso[sweep.source], kind, sweep.regime) for kind in ("ttft", "tpot", "throughput")}
        ranges = TrafficRanges(sweep.regime, kinds["ttft"], kinds["tpot"], kinds["throughput"])
        decided = [decide(sweep, rule, ttft_metric, tpot_metric, ranges) for rule in RULES]
        flat += decided
        flat_sources += [sweep.source] * len(decided)
        entries.append(
            {
                "source": sweep.source,
                "deployment": sweep.deployment,
                "kind": sweep.kind,
                "regime": sweep.regime,
                "replicas_per_run": sweep.replicas,
                "loads": [p.label for p in sweep.points],
                "ttft_statistic": ttft_metric,
                "tpot_statistic": tpot_metric,
                "points": [
                    {
                        "load": p.label,
                        "measured": {m: p.measured[m] for m in (ttft_metric, tpot_metric)},
                        "simulated": {m: p.simulated[m] for m in (ttft_metric, tpot_metric)},
                        "requests_per_second_per_replica": {
                            "measured": request_rate(p.measured, sweep.output_tokens) / sweep.replicas,
                            "simulated": request_rate(p.simulated, sweep.output_tokens) / sweep.replicas,
                        },
                    }
                    for p in sweep.points
                ],
                "ranges": {
                    k: {"low_error": r.low_error, "high_error": r.high_error, "regime": r.regime}
                    for k, r in kinds.items()
                },
                "decisions": decided,
            }
        )
    if rows and source_of is not None:
        mapped = {r.case.case_id for r in results}
        skipped += unreplayed_sweeps(rows, mapped, {u.row_id: u.reason for u in unmapped}, source_of)
    by_source = {s: pooled([d for d, src in zip(flat, flat_sources) if src == s]) for s in dict.fromkeys(flat_sources)}
    return {
        "rules": {rule.name: rule.text for rule in RULES},
        "statistic_rule": "the first of p99, mean, median the source published at every load of the sweep, for TTFT "
        "and for TPOT (median: median ITL) separately",
        "step_rule": STEP_RULE,
        "target_rule": TARGET_RULE,
        "ranges_rule": "the likely ranges of planner.inference.traffic_ranges, rebuilt without any run of the "
        "sweep's source (the regime's own where the rest still has enough sources and statistics, else every "
        "regime's pooled)",
        "sweeps": entries,
        "sources": by_source,
        "rules_pooled": {rule.name: pooled([d for d in flat if d["rule"] == rule.name]) for rule in RULES},
        "rules_pooled_source_left_out": {
            rule.name: left_out(*zip(*[(d, src) for d, src in zip(flat, flat_sources) if d["rule"] == rule.name]))
            for rule in RULES
        },
        "pooled": pooled(flat),
        "pooled_source_left_out": left_out(flat, flat_sources),
        "not_checked": [{"group": g, "reason": why} for g, why in skipped],
    }


# ---------------------------------------------------------------------------------------------- the report


def _share(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:.0f}%"


def _signed(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:+.0f}%"


def _ms(value: float) -> str:
    return f"{value / 1e3:.3g} s" if value >= 1e3 else f"{value:.3g} ms"


def _replicas(d: dict) -> str:
    likely = d["replicas_likely"]
    headroom = "none" if d["replicas_headroom"] is None else str(d["replicas_headroom"])
    measured = "none" if d["replicas_measured"] is None else str(d["replicas_measured"])
    return f"{measured} / {headroom}" + (f" ({likely[0]}–{likely[1]})" if likely else "")


def slo_text(sweep: dict, d: dict) -> str:
    """'p99 TTFT <= 194 ms, p99 TPOT <= 4.35 ms (relative)'."""
    return (
        f"{METRIC_NAMES[sweep['ttft_statistic']]} ≤ {_ms(d['targets_ms']['ttft'])}, "
        f"{METRIC_NAMES[sweep['tpot_statistic']]} ≤ {_ms(d['targets_ms']['tpot'])} ({d['rule']})"
    )


def _pooled_row(name: str, p: dict) -> str:
    return (
        f"| {name} | {p['decisions']} | {p['exact']} | {p['one_step_off']} | {p['further']} "
        f"| {_share(p['share_exact'])} / {_share(p['share_within_one_step'])} "
        f"| {_share(p['chance_exact'])} / {_share(p['chance_within_one_step'])} "
        f"| {_share(p['median_abs_replica_error'])} | {_signed(p['median_signed_replica_error'])} "
        f"| {p['measured_within_likely']} of {p['decisions']} ({_share(p['likely_share_of_decisions'])} of the "
        f"options) | {p['measured_replicas_within_likely']} of {p['replicas_checked']} |"
    )


def _range_text(entry: dict, figure: str, signed: bool = False) -> str:
    r = entry[figure]
    fmt = _signed if signed else _share
    return f"{fmt(r['min'])} … {fmt(r['max'])}"


def report_lines(decisions: dict | None) -> list[str]:
    """The report's section 'Decisions checked against measurements' from `summary`'s output."""
    if not decisions or not decisions.get("sweeps"):
        return []
    rules = "; ".join(f"*{name}*: {text}" for name, text in decisions["rules"].items())
    lines = [
        "",
        "## Decisions checked against measurements",
        "",
        "Where one source ran the same deployment (model, GPUs, layout, engine and its settings, lengths) at several "
        "request rates or client concurrencies, the sweep measured a decision: the largest of its loads that meets an "
        "SLO, and so the replicas a target rate needs. The same decision is made from Headroom's simulated statistics "
        "at the same loads (the replays above, no other run) and compared. `benchmarks/accuracy_decisions.py`.",
        "",
        f"- **SLO rules**, fixed before any decision was computed and applied to every sweep alike: {rules}.",
        f"- **Statistic**: {decisions['statistic_rule']}.",
        f"- **Decision**: {decisions['step_rule']}",
        f"- **Replicas**: {decisions['target_rule']}. Replica error = (Headroom - measured) / measured: negative "
        "means Headroom sizes fewer replicas than the measurements need.",
        f"- **Likely decisions**: each load's verdict from its statistics' likely ranges (meets / at risk / misses), "
        f"with {decisions['ranges_rule']}; the likely decisions run from the largest load that 'meets' to the largest "
        "not said to 'miss'. The likely replicas are the planner's `replicas_likely` (the latency ranges' edge decisions and the throughput range on "
        "Headroom's count).",
        "- **Chance**: the share a decision picked uniformly among the sweep's options (none, or one of its loads) "
        "would score, for scale: a two-load sweep is always within one step.",
        "",
        "| source | deployment, sweep | SLO | measured | Headroom | match | likely ('meets' … not 'misses') "
        "| replicas for the target: measured / Headroom (likely) | replica error | Headroom's at the measured load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sweep in decisions["sweeps"]:
        for d in sweep["decisions"]:
            within = "holds the measured" if d["measured_within_likely"] else "misses the measured"
            steps = f"{d['category']}" + (f" ({d['steps']:+d})" if d["steps"] else "")
            lines.append(
                f"| {sweep['source']} | {sweep['deployment']}, {sweep['kind']} sweep ({', '.join(sweep['loads'])}) "
                f"| {slo_text(sweep, d)} | {d['measured_load']} | {d['headroom_load']} | {steps} "
                f"| {d['likely_loads'][0]} … {d['likely_loads'][1]} ({within}) | {_replicas(d)} "
                f"for {d['target_requests_per_second']:.3g} req/s | {_signed(d['replica_error'])} "
                f"| {d['replicas_headroom_at_measured_load'] or 'none'} ({_signed(d['replica_error_at_measured_load'])}) |"
            )
    pooled_ = decisions["pooled"]
    loso = decisions["pooled_source_left_out"]
    lines += [
        "",
        "Per source and pooled (the share exact / within one step; chance for scale; the replica error over decisions "
        "where both sides size a count; 'options': the share of the sweep's decisions the likely ones span):",
        "",
        "| | decisions | exact | one step off | further | exact / within one | chance | median abs replica error "
        "| median signed replica error | measured decision in the likely ones | measured replicas in the likely |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_pooled_row(source, p) for source, p in decisions["sources"].items()]
    lines += [_pooled_row(f"rule *{rule}*, every source", p) for rule, p in decisions["rules_pooled"].items()]
    lines.append(_pooled_row("**pooled**", pooled_))
    lines += [
        "",
        f"Pooled with each source left out in turn (min … max over the {len(decisions['sources'])} sources): exact "
        f"{_range_text(loso, 'share_exact')}, within one step {_range_text(loso, 'share_within_one_step')}, median "
        f"|replica error| {_range_text(loso, 'median_abs_replica_error')}, median signed replica error "
        f"{_range_text(loso, 'median_signed_replica_error', signed=True)}, measured decision in the likely ones "
        f"{_range_text(loso, 'share_measured_within_likely')}, measured replicas in the likely "
        f"{_range_text(loso, 'share_replicas_within_likely')}.",
        "",
    ]
    for rule, entry in decisions["rules_pooled_source_left_out"].items():
        lines.append(
            f"- Rule *{rule}* alone, each source left out: exact {_range_text(entry, 'share_exact')}, within one step "
            f"{_range_text(entry, 'share_within_one_step')}, median |replica error| "
            f"{_range_text(entry, 'median_abs_replica_error')}."
        )
    sized = [d for s in decisions["sweeps"] for d in s["decisions"] if d["replica_error"] is not None]
    fewer = sum(d["replica_error"] < 0 for d in sized)
    more = sum(d["replica_error"] > 0 for d in sized)
    lines += [
        "",
        f"Headroom sizes fewer replicas than the measurements need in {fewer} of {len(sized)} sized decisions and "
        f"more in {more}; its decision is a lighter load than the measured one in "
        f"{sum(d['steps'] < 0 for s in decisions['sweeps'] for d in s['decisions'])} and a heavier one in "
        f"{sum(d['steps'] > 0 for s in decisions['sweeps'] for d in s['decisions'])} of {pooled_['decisions']}. "
        "The two rules read the same sweeps, so their decisions are not independent; "
        f"{len(decisions['sweeps'])} sweeps from {len(decisions['sources'])} sources is a small sample.",
        "",
        "Each load: measured / simulated statistics and request rate per replica, and whether it meets each rule "
        "(measured, Headroom, likely verdict):",
        "",
        "| sweep | load | TTFT measured / simulated | TPOT measured / simulated | req/s per replica measured / "
        "simulated | " + " | ".join(f"{name}: measured, Headroom, likely" for name in decisions["rules"]) + " |",
        "|---|---|---|---|---|" + "---|" * len(decisions["rules"]),
    ]
    for sweep in decisions["sweeps"]:
        ttft, tpot = sweep["ttft_statistic"], sweep["tpot_statistic"]
        for i, p in enumerate(sweep["points"]):
            cells = []
            for d in sweep["decisions"]:
                targets = (d["targets_ms"]["ttft"], d["targets_ms"]["tpot"])
                m = meets(p["measured"][ttft], p["measured"][tpot], targets)
                h = meets(p["simulated"][ttft], p["simulated"][tpot], targets)
                cells.append(f"{'meets' if m else 'misses'}, {'meets' if h else 'misses'}, {d['verdicts'][i]}")
            rate = p["requests_per_second_per_replica"]
            lines.append(
                f"| {sweep['source']}: {sweep['deployment']} | {p['load']} "
                f"| {METRIC_NAMES[ttft]} {_ms(p['measured'][ttft])} / {_ms(p['simulated'][ttft])} "
                f"| {METRIC_NAMES[tpot]} {_ms(p['measured'][tpot])} / {_ms(p['simulated'][tpot])} "
                f"| {rate['measured']:.3g} / {rate['simulated']:.3g} | " + " | ".join(cells) + " |"
            )
    if decisions["not_checked"]:
        lines += ["", "Sweeps in the corpus not checked:", ""]
        lines += [f"- {item['group']}: {item['reason']}" for item in decisions["not_checked"]]
    return lines
