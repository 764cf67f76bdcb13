"""Benchmark result files -> validated `BenchmarkRun`s, bounded, one sentence per bad file, never a traceback.

    runs = read_benchmark_file("result.json", data)             # one file: all of its runs, or BenchmarkResultError
    runs, problems = read_benchmark_files([(name, data), ...])  # many (the dashboard): bad files listed, not kept
    runs = load_benchmark_paths(["a.json", "b.jsonl"])          # the CLI: sizes checked before reading

A file is one JSON object (vLLM `--save-result`, genai-perf's `*_genai_perf.json`, guidellm's `benchmarks.json`,
inference-perf's `stage_N_lifecycle_metrics.json`) or JSON Lines, one run per line (SGLang `--output-file`, vLLM
`--append-result`). Which client wrote it is told from its keys (`detect_client`); each client's reader
(`planner.calibration.benchmark_readers`) cites the source its keys were read from. A file that is not valid
JSON, too large, not a benchmark result, or whose runs do not validate is rejected whole: none of its runs is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.calibration import benchmark_readers as readers
from planner.calibration.benchmark_run import BenchmarkRun
from planner.calibration.errors import CalibrationFileError
from planner.errors import PlanningError, explain
from planner.safe_json import MAX_JSON_BYTES, load_json

MAX_FILE_BYTES = MAX_JSON_BYTES  # 2 MiB: the dashboard's upload limit too (.streamlit/config.toml)
MAX_FILES = 32
MAX_TOTAL_BYTES = 16 << 20
MAX_RUNS = 64  # runs over all files: a sweep is a handful; each costs a simulation per fitting step
MAX_LINES = 256  # lines of one JSONL file (blank lines included)
CLIENTS_READ = (
    "vllm bench serve --save-result (JSON), SGLang bench_serving --output-file (JSONL), genai-perf's "
    "profile_export_genai_perf.json, guidellm's benchmarks.json or inference-perf's stage_N_lifecycle_metrics.json"
)


class BenchmarkResultError(CalibrationFileError):
    """A benchmark result file that cannot be used; the message names the file and what is wrong."""


def detect_client(data: Any) -> str | None:
    """Which client wrote this JSON object, from its keys (None: not a result Headroom reads)."""
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("benchmarks"), list) and "metadata" in data:
        return "guidellm"
    if isinstance(data.get("load_summary"), Mapping) and isinstance(data.get("successes"), Mapping):
        return "inference-perf"
    if isinstance(data.get("input_config"), Mapping) and isinstance(data.get("time_to_first_token"), Mapping):
        return "genai-perf"
    if "backend" in data and ("mean_ttft_ms" in data or "ttfts" in data):
        if "model_id" in data or "endpoint_type" in data or "mean_e2el_ms" in data:
            return "vllm"
        if "mean_e2e_latency_ms" in data or "random_input_len" in data or "dataset_name" in data:
            return "sglang"
    return None


def _not_a_result(name: str, data: Any) -> BenchmarkResultError:
    if isinstance(data, Mapping) and "experiments" in data and "version" in data:
        return BenchmarkResultError(
            f"{name} is perf_analyzer's raw profile_export.json; give the profile_export_genai_perf.json that "
            "genai-perf writes beside it"
        )
    if isinstance(data, Mapping) and data.get("format") == "headroom-calibration":
        return BenchmarkResultError(f"{name} is a Headroom calibration record, not a benchmark result")
    return BenchmarkResultError(f"{name} is not a benchmark result Headroom reads (expected {CLIENTS_READ})")


def _parse(name: str, text: str) -> list[tuple[str, Any]]:
    """(where, parsed object) for the whole file, or for each non-blank line of a JSON Lines file."""
    try:
        return [(name, load_json(text, name))]
    except PlanningError as whole:
        lines = text.splitlines()
        if len([line for line in lines if line.strip()]) < 2:
            stripped = text.rstrip()
            if stripped and stripped[-1] not in "}]":
                raise BenchmarkResultError(f"{name} ends part-way through its JSON (truncated?): {whole}") from None
            raise BenchmarkResultError(str(whole)) from None
    if len(lines) > MAX_LINES:
        raise BenchmarkResultError(f"{name} has {len(lines):,} lines; at most {MAX_LINES} runs are read from a file")
    out = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            where = f"{name} line {number}"
            try:
                out.append((where, load_json(line, where)))
            except PlanningError as exc:
                raise BenchmarkResultError(str(exc)) from None
    return out


def _fields_of(where: str, data: Any) -> list[tuple[str, dict]]:
    client = detect_client(data)
    if client is None:
        raise _not_a_result(where, data)
    assert isinstance(data, Mapping)
    try:
        if client == "vllm":
            return [(where, readers.read_vllm(data, where))]
        if client == "sglang":
            return [(where, readers.read_sglang(data, where))]
        if client == "genai-perf":
            return [(where, readers.read_genai_perf(data, where))]
        if client == "inference-perf":
            return [(where, readers.read_inference_perf(data, where))]
        benchmarks = data["benchmarks"]
        if not benchmarks:
            raise PlanningError("its report holds no benchmarks")
        out = []
        for index, benchmark in enumerate(benchmarks, start=1):
            each = f"{where} benchmark {index}"
            if not isinstance(benchmark, Mapping):
                raise BenchmarkResultError(f"{each} is not a JSON object")
            out.append((each, readers.read_guidellm_benchmark(benchmark, each)))
        return out
    except BenchmarkResultError:
        raise
    except PlanningError as exc:
        raise BenchmarkResultError(f"{where} ({client}): {exc}") from None


def read_benchmark_file(name: str, data: str | bytes) -> list[BenchmarkRun]:
    """Every run in one result file, or BenchmarkResultError naming the file and what is wrong."""
    if len(data) > MAX_FILE_BYTES:
        raise BenchmarkResultError(f"{name} is {len(data):,} bytes; a benchmark result file may be {MAX_FILE_BYTES:,}")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BenchmarkResultError(f"{name} is not UTF-8 text") from None
    if not data.strip():
        raise BenchmarkResultError(f"{name} is empty")
    runs = []
    for where, parsed in _parse(name, data):
        for each, fields in _fields_of(where, parsed):
            if fields.get("completed") == 0:
                raise BenchmarkResultError(f"{each} ({fields.get('client')}) cannot be used: no request completed")
            try:
                runs.append(BenchmarkRun.model_validate(fields))
            except ValidationError as exc:
                client = fields.get("client", "")
                raise BenchmarkResultError(f"{each} ({client}) cannot be used: {explain(exc)}") from None
            if len(runs) > MAX_RUNS:
                raise BenchmarkResultError(f"{name} holds more than {MAX_RUNS} runs; split the sweep")
    return runs


def _check_count(count: int, total_bytes: int) -> None:
    if count > MAX_FILES:
        raise BenchmarkResultError(f"{count} result files given; at most {MAX_FILES} are read at once")
    if total_bytes > MAX_TOTAL_BYTES:
        raise BenchmarkResultError(f"the result files hold {total_bytes:,} bytes; at most {MAX_TOTAL_BYTES:,} are read")


def read_benchmark_files(files: Sequence[tuple[str, str | bytes]]) -> tuple[list[BenchmarkRun], list[str]]:
    """The runs of every readable file, and one sentence per rejected file (none of whose runs is kept)."""
    _check_count(len(files), sum(len(data) for _, data in files))
    runs: list[BenchmarkRun] = []
    problems: list[str] = []
    for name, data in files:
        try:
            found = read_benchmark_file(name, data)
        except BenchmarkResultError as exc:
            problems.append(str(exc))
            continue
        if len(runs) + len(found) > MAX_RUNS:
            problems.append(f"{name}: more than {MAX_RUNS} runs over all files; it was left out")
            continue
        runs.extend(found)
    return runs, problems


def load_benchmark_paths(paths: Sequence[str | Path]) -> list[BenchmarkRun]:
    """Every run of every file (the CLI): the first unreadable file stops it with its sentence."""
    sizes = []
    for path in map(Path, paths):
        try:
            sizes.append(path.stat().st_size)
        except OSError as exc:
            raise BenchmarkResultError(f"cannot read benchmark result {path}: {exc.strerror or exc}") from None
        if sizes[-1] > MAX_FILE_BYTES:
            raise BenchmarkResultError(
                f"{path} is {sizes[-1]:,} bytes; a benchmark result file may be {MAX_FILE_BYTES:,}"
            )
    _check_count(len(sizes), sum(sizes))
    runs: list[BenchmarkRun] = []
    for path in map(Path, paths):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BenchmarkResultError(f"cannot read benchmark result {path}: {exc.strerror or exc}") from None
        runs.extend(read_benchmark_file(str(path), data))
        if len(runs) > MAX_RUNS:
            raise BenchmarkResultError(f"more than {MAX_RUNS} runs over the result files; calibrate on fewer")
    return runs


__all__ = [
    "CLIENTS_READ",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_RUNS",
    "BenchmarkResultError",
    "detect_client",
    "load_benchmark_paths",
    "read_benchmark_file",
    "read_benchmark_files",
]
