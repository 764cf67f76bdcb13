"""Readers of benchmark clients' result files: each client's own keys -> the fields of one `BenchmarkRun`.

Every reader takes one parsed JSON object (a line of a JSONL file, or a whole JSON file) and returns the fields
of one run, or for guidellm (one report, several benchmarks) a list of them; units are converted here, at the
edge (ms -> s). The keys were read in each client's own source, cited beside its reader. A value of the wrong
type is treated as absent; a run that then lacks what the fit needs is rejected by `BenchmarkRun`'s validation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from planner.errors import PlanningError

MS = 1e-3
TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}


def number(data: Any, *keys: str) -> float | None:
    """The finite number at data[k1][k2]..., or None (absent, a bool, a string, inf or NaN)."""
    value = data
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _dict(data: Any, key: str) -> Mapping:
    """data[key] when it is a JSON object, else {} (absent, or of another type)."""
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _rate(value: Any) -> float | None:
    """A client's request rate: None for a burst ("inf", inf), else the positive rate."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
        return None
    return int(value)


def _summary(mean: float | None, median: float | None, p99: float | None, scale: float = 1.0) -> dict:
    return {
        "mean_seconds": _scaled(mean, scale),
        "median_seconds": _scaled(median, scale),
        "p99_seconds": _scaled(p99, scale),
    }


def _ms_summary(data: Mapping, name: str) -> dict:
    """vLLM / SGLang: mean_<name>_ms, median_<name>_ms, p99_<name>_ms."""
    return _summary(
        number(data, f"mean_{name}_ms"), number(data, f"median_{name}_ms"), number(data, f"p99_{name}_ms"), MS
    )


def _array_summary(values: np.ndarray) -> dict:
    if values.size == 0:
        return _summary(None, None, None)
    return _summary(float(values.mean()), float(np.median(values)), float(np.percentile(values, 99)))


def _numeric_array(data: Mapping, key: str, count: int | None) -> np.ndarray | None:
    """A flat list of numbers under `key` (of length `count` when given) as an array, or None."""
    values = data.get(key)
    if not isinstance(values, list) or not values or (count is not None and len(values) != count):
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    array = np.asarray(values, dtype=float)
    return array if np.isfinite(array).all() else None


def _lengths(prefix: str, values: np.ndarray) -> dict:
    return {
        f"{prefix}_mean": float(values.mean()),
        f"{prefix}_min": int(values.min()),
        f"{prefix}_max": int(values.max()),
    }


def per_request_fields(data: Mapping) -> dict:
    """vLLM's `--save-detailed` (SGLang's `--output-details`) per-request arrays, when present and consistent:
    `ttfts` (s), `itls` (lists of s), `input_lens`, `output_lens`, `latencies` (s, vLLM only) and `errors` ("" for a
    success). Latencies, TPOT and lengths from the successful requests; {} when the arrays are absent."""
    inputs = _numeric_array(data, "input_lens", None)
    if inputs is None:
        return {}
    count = inputs.size
    outputs, ttfts = _numeric_array(data, "output_lens", count), _numeric_array(data, "ttfts", count)
    if outputs is None or ttfts is None:
        raise PlanningError("its per-request arrays (input_lens, output_lens, ttfts) have different lengths")
    errors = data.get("errors")
    ok = (
        np.asarray([not e for e in errors], dtype=bool)
        if isinstance(errors, list) and len(errors) == count
        else outputs > 0
    )
    if not ok.any():
        raise PlanningError("none of its requests succeeded")
    fields = {"per_request_arrays": True, "completed": int(ok.sum()), "failed": int(count - ok.sum())}
    fields |= _lengths("prompt_tokens", inputs[ok]) | _lengths("output_tokens", outputs[ok])
    fields["ttft"] = _array_summary(ttfts[ok])
    itls = data.get("itls")
    if isinstance(itls, list) and len(itls) == count:
        gaps = [g for i, row in enumerate(itls) if ok[i] and isinstance(row, list) for g in row]
        if gaps and all(isinstance(g, int | float) and not isinstance(g, bool) for g in gaps):
            fields["itl"] = _array_summary(np.asarray(gaps, dtype=float))
    latencies = _numeric_array(data, "latencies", count)
    if latencies is not None:
        fields["e2e"] = _array_summary(latencies[ok])
        many = ok & (outputs > 1)
        if many.any():
            fields["tpot"] = _array_summary((latencies[many] - ttfts[many]) / (outputs[many] - 1))
    return fields


def _measured_lengths(data: Mapping, asked_input: float | None, asked_output: float | None) -> dict:
    """Mean lengths from the run's token totals over its completed requests, else the lengths it asked for."""
    completed = number(data, "completed")
    total_in, total_out = number(data, "total_input_tokens"), number(data, "total_output_tokens")
    fields: dict[str, Any] = {}
    if completed and total_in:
        fields["prompt_tokens_mean"] = total_in / completed
    elif asked_input:
        fields["prompt_tokens_mean"] = asked_input
    if completed and total_out:
        fields["output_tokens_mean"] = total_out / completed
    elif asked_output:
        fields["output_tokens_mean"] = asked_output
    return fields


# vllm-project/vllm@009e6d4a1cd6 vllm/benchmarks/serve.py, main_async and benchmark(): result_json carries "model_id",
# "num_prompts", "request_rate" (a number, or the string "inf"), "burstiness", "max_concurrency", "completed",
# "failed", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput", and from
# process_one_metric mean_/median_/std_/p99_ {ttft, tpot, itl, e2el} _ms (milliseconds); with --save-detailed the
# per-request arrays "input_lens", "output_lens", "ttfts", "itls", "latencies" (seconds), "errors". --append-result
# appends one such object per line.
def read_vllm(data: Mapping, source: str) -> dict:
    rate = _rate(data.get("request_rate"))
    burstiness = number(data, "burstiness") or 1.0
    fields: dict[str, Any] = {
        "source": source,
        "client": "vllm",
        "model": data.get("model_id") if isinstance(data.get("model_id"), str) else None,
        "request_rate_per_second": rate,
        "arrival": "poisson" if burstiness == 1.0 else "gamma",
        "burstiness": burstiness,
        "max_concurrency": _positive_int(data.get("max_concurrency")),
        "num_prompts": _int(number(data, "num_prompts") or number(data, "completed")),
        "completed": _int(number(data, "completed")),
        "failed": _int(number(data, "failed")) or 0,
        "ttft": _ms_summary(data, "ttft"),
        "tpot": _ms_summary(data, "tpot"),
        "itl": _ms_summary(data, "itl"),
        "e2e": _ms_summary(data, "e2el"),
        "request_throughput_per_second": number(data, "request_throughput"),
        "output_tokens_per_second": number(data, "output_throughput"),
    }
    fields |= _measured_lengths(data, None, None)
    return fields | per_request_fields(data)


# sgl-project/sglang@0033168f0f58 python/sglang/bench_serving.py, benchmark(): each run appends one JSON line to
# --output-file with "backend", "dataset_name", "request_rate" (a float; json.dumps writes inf as Infinity),
# "max_concurrency", "random_input_len", "random_output_len", "random_range_ratio", "completed",
# "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput",
# mean_/median_/std_/p99_ {ttft, tpot, itl} _ms, "mean_e2e_latency_ms", "median_e2e_latency_ms",
# "p99_e2e_latency_ms"; --output-details adds "input_lens", "output_lens", "ttfts", "itls". No model name (newer
# releases add "server_info", whose "model_path" names it). Random lengths are uniform in [ratio x L, L].
def read_sglang(data: Mapping, source: str) -> dict:
    server = data.get("server_info")
    model = server.get("model_path") if isinstance(server, Mapping) else None
    asked_in, asked_out = number(data, "random_input_len"), number(data, "random_output_len")
    ratio = number(data, "random_range_ratio")
    fields: dict[str, Any] = {
        "source": source,
        "client": "sglang",
        "model": model if isinstance(model, str) else None,
        "request_rate_per_second": _rate(data.get("request_rate")),
        "max_concurrency": _positive_int(data.get("max_concurrency")),
        "num_prompts": _int(number(data, "completed")),
        "completed": _int(number(data, "completed")),
        "ttft": _ms_summary(data, "ttft"),
        "tpot": _ms_summary(data, "tpot"),
        "itl": _ms_summary(data, "itl"),
        "e2e": _summary(
            number(data, "mean_e2e_latency_ms"),
            number(data, "median_e2e_latency_ms"),
            number(data, "p99_e2e_latency_ms"),
            MS,
        ),
        "request_throughput_per_second": number(data, "request_throughput"),
        "output_tokens_per_second": number(data, "output_throughput"),
    }
    if data.get("dataset_name") == "random" and ratio is not None and 0 <= ratio <= 1:
        fields["range_ratio"] = (1 - ratio) / (1 + ratio)  # [r L, L] is the mean (1 + r) L / 2 ± (1 - r) / (1 + r)
    fields |= _measured_lengths(data, asked_in, asked_out)
    details = per_request_fields(data)
    if details:
        details["num_prompts"] = details["completed"] + details["failed"]
    return fields | details


# triton-inference-server/perf_analyzer@263c5f6e0c7a genai-perf: export_data/json_exporter.py writes
# <profile_export>_genai_perf.json = the statistics dict + {"input_config": the config's to_json_dict()};
# metrics/statistics.py gives each metric {"unit", "avg", "p1".."p99", "min", "max", "std"}, time metrics scaled to
# "ms"; metrics/llm_metrics.py + metrics.py name them time_to_first_token, inter_token_latency (per request
# (latency - TTFT) / (output tokens - 1): profile_data_parser/llm_profile_data_parser.py, vLLM's TPOT),
# request_latency, output_token_throughput, request_throughput, request_count, input_sequence_length,
# output_sequence_length; tests/test_process_export_files.py shows input_config's "model_names",
# "perf_analyzer": {"stimulus": {"concurrency": N} or {"request_rate": R}} (perf_analyzer's constant-interval
# request rate).
def _genai_time(data: Mapping, name: str) -> dict:
    metric = data.get(name)
    if not isinstance(metric, Mapping):
        return _summary(None, None, None)
    scale = TIME_UNITS.get(str(metric.get("unit", "ms")).strip().lower())
    if scale is None:
        raise PlanningError(f"its {name} is in unit '{metric.get('unit')}', not ms, s, us or ns")
    return _summary(number(metric, "avg"), number(metric, "p50"), number(metric, "p99"), scale)


def read_genai_perf(data: Mapping, source: str) -> dict:
    config = _dict(data, "input_config")
    names = config.get("model_names")
    stimulus = _dict(_dict(config, "perf_analyzer"), "stimulus")
    rate = _rate(stimulus.get("request_rate"))
    fields: dict[str, Any] = {
        "source": source,
        "client": "genai-perf",
        "model": names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None,
        "request_rate_per_second": rate,
        "arrival": "uniform",
        "max_concurrency": _positive_int(stimulus.get("concurrency")),
        "num_prompts": _int(number(data, "request_count", "avg")),
        "completed": _int(number(data, "request_count", "avg")),
        "ttft": _genai_time(data, "time_to_first_token"),
        "tpot": _genai_time(data, "inter_token_latency"),
        "e2e": _genai_time(data, "request_latency"),
        "request_throughput_per_second": number(data, "request_throughput", "avg"),
        "output_tokens_per_second": number(data, "output_token_throughput", "avg"),
        "prompt_tokens_mean": number(data, "input_sequence_length", "avg"),
        "prompt_tokens_min": _int(number(data, "input_sequence_length", "min")),
        "prompt_tokens_max": _int(number(data, "input_sequence_length", "max")),
        "output_tokens_mean": number(data, "output_sequence_length", "avg"),
        "output_tokens_min": _int(number(data, "output_sequence_length", "min")),
        "output_tokens_max": _int(number(data, "output_sequence_length", "max")),
    }
    if rate is None and fields["max_concurrency"] is None:
        raise PlanningError("its input_config names neither a concurrency nor a request rate (perf_analyzer stimulus)")
    return fields


# vllm-project/guidellm@ee7a77457ba6: benchmark/schemas/report.py GenerativeBenchmarksReport {"metadata", "config",
# "benchmarks": [GenerativeBenchmark]}; benchmark/schemas/benchmark.py + base.py: each benchmark's "config" holds
# "strategy" (scheduler/strategies.py: "type_" synchronous | concurrent {"streams"} | throughput
# {"max_concurrency"} | constant {"rate"} | poisson {"rate"}) and "backend" (the backend's args: "model"), and
# "metrics" (schemas/metrics.py GenerativeMetrics): time_to_first_token_ms, inter_token_latency_ms (per request
# (last - first token) / (output tokens - 1): schemas/request_stats.py, vLLM's TPOT; its time_per_output_token_ms
# includes the first token and is not used), request_latency (s), requests_per_second, output_tokens_per_second,
# prompt_token_count, output_token_count, each {"successful", "errored", "incomplete", "total"} of
# schemas/statistics.py DistributionSummary {"mean", "median", "min", "max", "count", "percentiles": {"p99", ...}};
# "request_totals" {"successful", "errored", ...}.
def _guide(metrics: Mapping, name: str) -> Mapping:
    metric = metrics.get(name)
    successful = metric.get("successful") if isinstance(metric, Mapping) else None
    return successful if isinstance(successful, Mapping) else {}


def _guide_summary(metrics: Mapping, name: str, scale: float) -> dict:
    d = _guide(metrics, name)
    return _summary(number(d, "mean"), number(d, "median"), number(d, "percentiles", "p99"), scale)


def _guide_strategy(strategy: Any) -> dict:
    kind = strategy.get("type_") if isinstance(strategy, Mapping) else None
    if kind == "synchronous":
        return {"max_concurrency": 1}
    if kind == "concurrent":
        return {"max_concurrency": _positive_int(strategy.get("streams"))}
    if kind == "throughput":
        return {"max_concurrency": _positive_int(strategy.get("max_concurrency"))}
    if kind in ("constant", "poisson"):
        rate = _rate(strategy.get("rate"))
        if rate is None:
            raise PlanningError(f"its {kind} strategy has no rate")
        return {
            "request_rate_per_second": rate,
            "arrival": "uniform" if kind == "constant" else "poisson",
            "max_concurrency": _positive_int(strategy.get("max_concurrency")),
        }
    raise PlanningError(f"its scheduling strategy '{kind}' is not one Headroom can replay")


def read_guidellm_benchmark(benchmark: Mapping, source: str) -> dict:
    metrics = _dict(benchmark, "metrics")
    config = _dict(benchmark, "config")
    backend = _dict(config, "backend")
    totals = _dict(metrics, "request_totals")
    done, errored = number(totals, "successful"), number(totals, "errored") or 0.0
    prompts, outputs = _guide(metrics, "prompt_token_count"), _guide(metrics, "output_token_count")
    fields: dict[str, Any] = {
        "source": source,
        "client": "guidellm",
        "model": backend.get("model") if isinstance(backend.get("model"), str) else None,
        "num_prompts": _int((done or 0) + errored + (number(totals, "incomplete") or 0)),
        "completed": _int(done),
        "failed": _int(errored),
        "ttft": _guide_summary(metrics, "time_to_first_token_ms", MS),
        "tpot": _guide_summary(metrics, "inter_token_latency_ms", MS),
        "e2e": _guide_summary(metrics, "request_latency", 1.0),
        "request_throughput_per_second": number(_guide(metrics, "requests_per_second"), "mean"),
        "output_tokens_per_second": number(_guide(metrics, "output_tokens_per_second"), "mean"),
        "prompt_tokens_mean": number(prompts, "mean"),
        "prompt_tokens_min": _int(number(prompts, "min")),
        "prompt_tokens_max": _int(number(prompts, "max")),
        "output_tokens_mean": number(outputs, "mean"),
        "output_tokens_min": _int(number(outputs, "min")),
        "output_tokens_max": _int(number(outputs, "max")),
    }
    return fields | _guide_strategy(config.get("strategy"))


# kubernetes-sigs/inference-perf@7de5ef2ed6f7 inference_perf/reportgen/base.py summarize_requests: a stage's
# <stage>_lifecycle_metrics.json is {"load_summary": {"count", "send_duration", "requested_rate", "achieved_rate",
# "concurrency" (concurrent load only)}, "successes": {"count", "latency": {"request_latency",
# "time_per_output_token" ((end - first token) / (output tokens - 1)), "time_to_first_token",
# "inter_token_latency", "normalized_time_per_output_token"} each {"mean", "median", "p99", ...} in seconds,
# "throughput": {"requests_per_sec", "output_tokens_per_sec", ...}, "prompt_len", "output_len" {"mean", "min",
# "max", ...}}, "failures": {"count", ...}}. The report names no model. The summary over all stages has no
# requested_rate.
def _perf_summary(latency: Any, name: str) -> dict:
    d = latency.get(name) if isinstance(latency, Mapping) else None
    d = d if isinstance(d, Mapping) else {}
    return _summary(number(d, "mean"), number(d, "median"), number(d, "p99"))


def read_inference_perf(data: Mapping, source: str) -> dict:
    load = _dict(data, "load_summary")
    ok = _dict(data, "successes")
    latency = ok.get("latency")
    rate = _rate(load.get("requested_rate"))
    concurrency = _positive_int(load.get("concurrency"))
    if rate is None and concurrency is None:
        raise PlanningError(
            "it has no requested_rate or concurrency (the summary over all stages?): give a stage's "
            "stage_N_lifecycle_metrics.json"
        )
    done, failed = number(ok, "count"), number(data, "failures", "count") or 0.0
    return {
        "source": source,
        "client": "inference-perf",
        "request_rate_per_second": None if concurrency is not None else rate,
        "max_concurrency": concurrency,
        "num_prompts": _int(number(load, "count") or ((done or 0) + failed)),
        "completed": _int(done),
        "failed": _int(failed),
        "ttft": _perf_summary(latency, "time_to_first_token"),
        "tpot": _perf_summary(latency, "time_per_output_token"),
        "itl": _perf_summary(latency, "inter_token_latency"),
        "e2e": _perf_summary(latency, "request_latency"),
        "request_throughput_per_second": number(ok, "throughput", "requests_per_sec"),
        "output_tokens_per_second": number(ok, "throughput", "output_tokens_per_sec"),
        "prompt_tokens_mean": number(ok, "prompt_len", "mean"),
        "prompt_tokens_min": _int(number(ok, "prompt_len", "min")),
        "prompt_tokens_max": _int(number(ok, "prompt_len", "max")),
        "output_tokens_mean": number(ok, "output_len", "mean"),
        "output_tokens_min": _int(number(ok, "output_len", "min")),
        "output_tokens_max": _int(number(ok, "output_len", "max")),
    }


__all__ = [
    "number",
    "per_request_fields",
    "read_genai_perf",
    "read_guidellm_benchmark",
    "read_inference_perf",
    "read_sglang",
    "read_vllm",
]
