"""Held-out check of calibration from benchmark results, on the public sweeps of the serving corpus.

    .venv/bin/python benchmarks/benchmark_calibration.py [--out benchmarks/accuracy/benchmark_calibration.md]

A sweep is four or more runs of one deployment by one source (benchmarks/accuracy/serving_reference.csv rows
grouped by source, model, GPUs, layout, precision, engine and release, engine settings and lengths) that differ
only in their load (client concurrency or request rate), every run replayable (benchmarks/accuracy.py
`_serving_run`, read-only). Each run becomes a `BenchmarkRun` of what the row measured (mean TTFT, mean TPOT, output
throughput; the median where the mean is not published); the deployment is the replayed scenario. The calibration
(`planner.calibration.from_benchmark`, as `calibrate --from-benchmark` runs it) is fitted on the sweep's two end
points (lightest and heaviest load) and predicts the middle ones; the report gives the median |error| of TTFT, TPOT
and throughput on those middle points before (documented defaults) and after, per source and over all. The issue's
target: <= 15 % after. Nothing here is tuned to the corpus: the factors, priors and observation width are
`planner.calibration.benchmark_replay`'s.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy  # noqa: E402  (benchmarks/accuracy.py: read-only helpers)

from planner.calibration.benchmark_replay import METRICS, prepare_points  # noqa: E402
from planner.calibration.benchmark_run import BenchmarkRun  # noqa: E402
from planner.calibration.from_benchmark import fit_points  # noqa: E402
from planner.scenario_base import revised  # noqa: E402

OUT = ROOT / "benchmarks" / "accuracy" / "benchmark_calibration.md"
MIN_POINTS = 4
DEPLOYMENT_KEYS = ("model", "gpu", "num_gpus", "tp", "dtype", "engine", "engine_version", "engine_args")
LENGTH_KEYS = ("input_len", "output_len")
LOAD_KEYS = ("request_rate", "max_concurrency", "num_prompts")
MEASURED = {  # metric -> the row metrics that give it, preferred first, and the scale to seconds / tokens/s
    "ttft": (("mean_ttft_ms", "median_ttft_ms"), 1e-3),
    "tpot": (("mean_tpot_ms", "median_itl_ms"), 1e-3),
    "throughput": (("output_throughput",), 1.0),
}
WORDS = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "throughput"}


def sweeps(path: Path = accuracy.SERVING_FILE) -> list[tuple[str, list[tuple[accuracy.ServingRun, dict, str]]]]:
    """(source, [(replayed run, {metric: value}, row id)] in load order) for every sweep of >= MIN_POINTS runs."""
    groups: dict[tuple, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in accuracy._read(path):
        key = (accuracy.serving_source(row), *(row[k] for k in DEPLOYMENT_KEYS + LENGTH_KEYS))
        groups[key][tuple(row[k] for k in LOAD_KEYS)].append(row)
    out = []
    for key, points in groups.items():
        if len(points) < MIN_POINTS:
            continue
        replayed = []
        for rows in points.values():
            run = accuracy._serving_run(rows[0])
            if isinstance(run, str):
                break
            replayed.append((run, {r["metric"]: float(r["value"]) for r in rows}, rows[0]["id"]))
        else:
            replayed.sort(
                key=lambda item: (item[0].traffic.max_concurrency or 0, item[0].traffic.requests_per_second or 0)
            )
            out.append((key[0], replayed))
    return out


def benchmark_run(run: accuracy.ServingRun, values: dict, row_id: str) -> BenchmarkRun:
    """What the published run measured, as a benchmark client's result would say it."""
    measured = {}
    for metric, (names, scale) in MEASURED.items():
        name = next((n for n in names if n in values), None)
        measured[metric] = None if name is None else (values[name] * scale, name.startswith("median"))
    ttft, tpot = measured["ttft"], measured["tpot"]
    t = run.traffic
    return BenchmarkRun(
        source=f"{row_id}",
        client="published",
        prompt_tokens_mean=run.scenario.prompt_tokens,
        output_tokens_mean=run.scenario.output_tokens,
        request_rate_per_second=t.requests_per_second,
        max_concurrency=t.max_concurrency,
        num_prompts=t.num_requests,
        ttft={} if ttft is None else {("median_seconds" if ttft[1] else "mean_seconds"): ttft[0]},
        tpot={} if tpot is None else {("median_seconds" if tpot[1] else "mean_seconds"): tpot[0]},
        output_tokens_per_second=None if measured["throughput"] is None else measured["throughput"][0],
    )


def evaluate(replayed: list) -> dict:
    """Fit on the end points of one sweep, predict its middle: per metric, the middle points' errors before/after."""
    runs = [benchmark_run(*item) for item in replayed]
    deployment = revised(replayed[0][0].scenario, traffic=replayed[0][0].traffic)
    points = prepare_points(deployment, runs)
    held = list(range(1, len(points) - 1))
    fit = fit_points(deployment, points, held)
    errors: dict[str, dict[str, list[float]]] = {m: {"before": [], "after": []} for m in METRICS}
    for i in held:
        for metric, value in points[i].measured().items():
            errors[metric]["before"].append(fit.before[i].of(metric) / value - 1)
            errors[metric]["after"].append(fit.after[i].of(metric) / value - 1)
    factors = {f.name: float(x) for f, x in zip(fit.factors, fit.log_multipliers, strict=True)}
    measured = [p.measured() for p in points]
    return {"errors": errors, "factors": factors, "seconds": fit.seconds, "fit": fit, "measured": measured}


def _median_abs(values: list[float]) -> float | None:
    return statistics.median(abs(v) for v in values) if values else None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def report(results: list[tuple[str, list, dict]], seconds: float) -> str:
    lines = [
        "# Calibration from benchmark results: held-out check on the corpus's public sweeps",
        "",
        "Produced by `.venv/bin/python benchmarks/benchmark_calibration.py` (see its docstring). Each sweep is fitted on "
        "its two end points (lightest and heaviest load) with `planner.calibration.from_benchmark` and predicts the "
        "middle ones; errors are (predicted - measured) / measured on those middle points, before (documented "
        "defaults) and after calibration. Target (issue 25): median |error| <= 15 % after.",
        "",
        f"{len(results)} sweeps; {seconds:.0f} s in all on one core.",
        "",
        "## Median |error| on the middle points, per source",
        "",
        "| source | sweeps | middle points | TTFT before | TTFT after | TPOT before | TPOT after "
        "| throughput before | throughput after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_source: dict[str, list] = defaultdict(list)
    for source, replayed, result in results:
        by_source[source].append((replayed, result))
    pooled: dict[str, dict[str, list[float]]] = {m: {"before": [], "after": []} for m in METRICS}
    for source, items in sorted(by_source.items()):
        merged: dict[str, dict[str, list[float]]] = {m: {"before": [], "after": []} for m in METRICS}
        for _, result in items:
            for metric in METRICS:
                for when in ("before", "after"):
                    merged[metric][when] += result["errors"][metric][when]
                    pooled[metric][when] += result["errors"][metric][when]
        middle = sum(len(r) - 2 for r, _ in items)
        cells = [_pct(_median_abs(merged[m][w])) for m in METRICS for w in ("before", "after")]
        lines.append(f"| {source} | {len(items)} | {middle} | " + " | ".join(cells) + " |")
    cells = [_pct(_median_abs(pooled[m][w])) for m in METRICS for w in ("before", "after")]
    lines.append(f"| **all** | {len(results)} | {sum(len(r) - 2 for _, r, _ in results)} | " + " | ".join(cells) + " |")
    lines += ["", "## Per sweep", ""]
    for source, replayed, result in results:
        lines += _sweep_lines(source, replayed, result)
    return "\n".join(lines) + "\n"


def _sweep_lines(source: str, replayed: list, result: dict) -> list[str]:
    first = replayed[0][0]
    fit = result["fit"]
    factors = ", ".join(f"{name} x{math.exp(x):.3g}" for name, x in result["factors"].items())
    lines = [
        f"### {source}: {first.describe().split(' rate ')[0]}, {first.engine} {accuracy.ENGINE_VERSIONS.get(replayed[0][2], '')}",
        "",
        f"Fitted on {replayed[0][2]} and {replayed[-1][2]} ({fit.simulations} simulations, {result['seconds']:.1f} s): "
        f"{factors}." + _compensating(result["factors"]),
        "",
        "| run | load | role | TTFT meas. | before | after | TPOT meas. | before | after | throughput meas. | before | after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (run, _, row_id) in enumerate(replayed):
        role = "fit" if i in (0, len(replayed) - 1) else "held out"
        t = run.traffic
        load = f"c={t.max_concurrency}" if t.max_concurrency else f"rate {t.requests_per_second}"
        cells = []
        measured = result["measured"][i]
        for metric in METRICS:
            value = measured.get(metric)
            if value is None:
                cells += ["-", "-", "-"]
                continue
            shown = f"{value * 1e3:.1f} ms" if metric != "throughput" else f"{value:.0f} tok/s"
            cells += [
                shown,
                _signed(fit.before[i].of(metric) / value - 1),
                _signed(fit.after[i].of(metric) / value - 1),
            ]
        lines.append(f"| {row_id} | {load} | {role} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _compensating(factors: dict[str, float]) -> str:
    """A sentence naming factors fitted beyond a factor of e (~2.7) of the profile's value, if any."""
    far = [name for name, x in factors.items() if abs(x) > 1.0]
    if not far:
        return ""
    return (
        f" {', '.join(far)} moved beyond x2.7 (or 1/2.7) of the profile's value: the fit is compensating for "
        "something the simulation of this stack lacks, so it carries less far than its fitted points suggest."
    )


def _signed(value: float) -> str:
    return f"{value * 100:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    for row in accuracy._read(accuracy.SERVING_FILE):
        accuracy.ENGINE_VERSIONS[row["id"]] = row["engine_version"]
    results = []
    for source, replayed in sweeps():
        result = evaluate(replayed)
        results.append((source, replayed, result))
        print(f"{source}: {replayed[0][0].describe()} fitted in {result['seconds']:.1f} s", file=sys.stderr)
    text = report(results, time.perf_counter() - started)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
