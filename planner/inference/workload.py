"""The request stream a traffic plan serves: arrivals, prompt/output lengths, shared prefixes, SLO targets.

A `Traffic` record is an optional part of an inference scenario (absent: the static plan only). It
turns into concrete `Requests` (numpy arrays, one entry per request) with a seeded generator, so the
same scenario always gives the same stream. Conventions follow the serving benchmarks users compare
against: `vllm bench serve` (`--request-rate`, `--burstiness`, `--max-concurrency`,
`--random-range-ratio`) and SGLang `bench_serving`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import PlanningError

MAX_REQUESTS = 100_000
MAX_TRACE_BYTES = 8 * 1024 * 1024
MAX_LENGTH_TOKENS = 10_000_000
Percentile = Literal[50, 90, 95, 99]
TRACE_COLUMNS = ("arrival_seconds", "prompt_tokens", "output_tokens")


class TraceRow(BaseModel):
    """One recorded request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arrival_seconds: float = Field(ge=0, le=1e7, allow_inf_nan=False)
    prompt_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS)
    output_tokens: int = Field(ge=1, le=MAX_LENGTH_TOKENS)
    prefix_id: str | None = Field(default=None, max_length=200)


SLO_METRICS = (
    "ttft",
    "tpot",
    "e2e_latency",
)  # each target's field is <metric>_seconds, its percentile <metric>_percentile


class Slo(BaseModel):
    """Latency targets, each met when its percentile of requests is at or below it: the target's own
    (`ttft_percentile`, ...) or the shared `percentile` ("p99 TTFT <= 2 s and p95 TPOT <= 50 ms"). The nested form
    `{"ttft": {"seconds": 2, "percentile": 99}, "tpot": {"seconds": 0.05, "percentile": 95}}` reads the same."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_seconds: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    tpot_seconds: float | None = Field(default=None, gt=0, le=60, allow_inf_nan=False)
    e2e_latency_seconds: float | None = Field(default=None, gt=0, le=86_400, allow_inf_nan=False)
    percentile: Percentile = 99
    ttft_percentile: Percentile | None = None  # empty: `percentile`
    tpot_percentile: Percentile | None = None
    e2e_latency_percentile: Percentile | None = None

    @model_validator(mode="before")
    @classmethod
    def _nested_targets(cls, data: Any) -> Any:
        """`{"ttft": {"seconds": 2, "percentile": 99}}` -> ttft_seconds=2, ttft_percentile=99."""
        if not isinstance(data, dict) or not any(isinstance(data.get(m), dict) for m in SLO_METRICS):
            return data
        flat = {k: v for k, v in data.items() if k not in SLO_METRICS}
        for metric in SLO_METRICS:
            target = data.get(metric)
            if target is None:
                continue
            if not isinstance(target, dict) or set(target) - {"seconds", "percentile"}:
                raise PlanningError(f"slo.{metric} takes {{seconds, percentile}}; got {target!r}")
            if "seconds" in target:
                flat[f"{metric}_seconds"] = target["seconds"]
            if "percentile" in target:
                flat[f"{metric}_percentile"] = target["percentile"]
        return flat

    def percentile_of(self, metric: str) -> int:
        """The percentile `metric`'s target is met at (`ttft_seconds` -> `ttft_percentile`, else `percentile`)."""
        own = getattr(self, metric.removesuffix("_seconds") + "_percentile")
        return self.percentile if own is None else own

    @property
    def targets(self) -> dict[str, float]:
        """Metric name -> target seconds, for the targets that are set."""
        named = {
            "ttft_seconds": self.ttft_seconds,
            "tpot_seconds": self.tpot_seconds,
            "e2e_latency_seconds": self.e2e_latency_seconds,
        }
        return {name: value for name, value in named.items() if value is not None}


# Per-tier defaults of a prefix pool (per replica). DRAM: a Mooncake Store pool in the cluster's spare DRAM,
# read over RDMA at what Mooncake's Transfer Engine measured on 4 x 200 Gbps RoCE (87 GB/s; 190 GB/s on
# 8 x 400 Gbps; kvcache-ai/Mooncake README, "Performance", and Qin et al., "Mooncake: Trading More Storage for
# Less Computation", FAST'25), capacity 1 TB of host memory. SSD: one PCIe 4.0 x4 NVMe drive (its link carries
# 7.9 GB/s; data-centre drives read ~6.5-7 GB/s sequentially), 3.84 TB. Stated defaults, not measurements.
POOL_TIER_DEFAULTS: dict[str, tuple[float, float]] = {
    "dram": (1e12, 87e9),  # (capacity bytes, bandwidth bytes/s)
    "ssd": (3.84e12, 6.5e9),
}


class PrefixPool(BaseModel):
    """A Mooncake-style KV-cache pool outside GPU memory (DRAM or SSD) holding prompt prefixes.

    A repeated prefix no longer resident in the GPU prefix cache is read back from the pool (if the pool,
    an LRU of `capacity_bytes`, still holds it) at `bandwidth_bytes_per_second`, instead of being prefilled
    again. Empty capacity or bandwidth: the tier's default (`POOL_TIER_DEFAULTS`). Per replica.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tier: Literal["dram", "ssd"] = "dram"
    capacity_bytes: float | None = Field(default=None, gt=0, le=1e15, description="pool size per replica")
    bandwidth_bytes_per_second: float | None = Field(
        default=None, gt=0, le=1e13, description="read bandwidth from the pool into one replica's GPUs"
    )

    @property
    def capacity(self) -> float:
        return self.capacity_bytes if self.capacity_bytes is not None else POOL_TIER_DEFAULTS[self.tier][0]

    @property
    def bandwidth(self) -> float:
        if self.bandwidth_bytes_per_second is not None:
            return self.bandwidth_bytes_per_second
        return POOL_TIER_DEFAULTS[self.tier][1]


class Traffic(BaseModel):
    """A stream of requests against the deployment.

    `requests_per_second` None sends every request at time 0 (`--request-rate inf`). Arrivals are a
    Poisson process (exponential gaps), evenly spaced (`uniform`), or gamma-distributed gaps with
    shape `burstiness` (vLLM's `--burstiness`: 1 is Poisson, below 1 burstier, above 1 more regular).
    Lengths are the scenario's prompt/output tokens (`fixed`), uniform within ±`range_ratio` of them
    (vLLM's random dataset), lognormal with the scenario's value as the mean and the given p90, or a
    recorded trace.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_second: float | None = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    arrival: Literal["poisson", "uniform", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0.01, le=100, description="gamma shape of the inter-arrival gaps")
    num_requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS)
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_REQUESTS, description="client-side cap")
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REQUESTS,
        description="the engine's batch cap per replica (vLLM --max-num-seqs, SGLang --max-running-requests): more "
        "replicas keep each one's; empty: the scenario's concurrency over its replicas",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    lengths: Literal["fixed", "uniform", "lognormal", "trace"] = "fixed"
    range_ratio: float = Field(default=0.0, ge=0.0, lt=1.0, description="uniform lengths: ± share of the mean")
    prompt_tokens_p90: int | None = Field(default=None, ge=1, le=MAX_LENGTH_TOKENS)
    output_tokens_p90: int | None = Field(default=None, ge=1, le=MAX_LENGTH_TOKENS)
    trace: tuple[TraceRow, ...] | None = Field(default=None, max_length=MAX_REQUESTS)
    shared_prefix_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of each prompt that is a prefix common to all requests"
    )
    num_prefixes: int = Field(
        default=1, ge=1, le=MAX_REQUESTS, description="distinct shared prefixes, each request picks one at random"
    )
    gpu_prefix_cache_share: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="share of a replica's KV blocks that keeps prefixes for reuse (LRU); empty: unbounded, "
        "every repeat hits",
    )
    prefix_pool: PrefixPool | None = Field(
        default=None, description="a DRAM/SSD pool of prefixes behind the GPU prefix cache (Mooncake)"
    )
    chunked_prefill: bool = Field(
        default=True, description="prompt chunks share steps with decodes (vLLM V1 default); off: whole-prompt steps"
    )
    slo: Slo | None = None

    @property
    def stream_rate(self) -> float | None:
        """Requests per second the stream sends to the whole deployment: its rate, or a trace's over its arrivals
        (first to last); None when every request is sent at once."""
        if self.lengths == "trace" and self.trace:
            arrivals = [row.arrival_seconds for row in self.trace]
            span = max(arrivals) - min(arrivals)
            return len(arrivals) / span if span > 0 else None
        return self.requests_per_second

    @property
    def request_count(self) -> int:
        """Requests the stream sends: a trace's rows, else `num_requests`."""
        return len(self.trace) if self.lengths == "trace" and self.trace else self.num_requests

    @property
    def prefix_cache_bounded(self) -> bool:
        """A bounded GPU prefix cache or a prefix pool is set: each replica keeps its own residency, instead of
        the default cache in which every repeat of a prefix hits."""
        return self.prefix_pool is not None or self.gpu_prefix_cache_share is not None

    @model_validator(mode="after")
    def _consistent(self) -> Traffic:
        if self.lengths == "trace" and not self.trace:
            raise PlanningError("lengths='trace' needs a trace (arrival_seconds, prompt_tokens, output_tokens rows)")
        if self.lengths == "lognormal" and (self.prompt_tokens_p90 is None or self.output_tokens_p90 is None):
            raise PlanningError("lognormal lengths need prompt_tokens_p90 and output_tokens_p90")
        return self


@dataclass(frozen=True, slots=True)
class Requests:
    """A concrete request stream, sorted by arrival. Arrays of equal length."""

    arrival_seconds: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_prompt_tokens: np.ndarray  # prompt tokens a prefix cache can serve (0 for the first of each prefix)
    prefix_key: np.ndarray | None = None  # which shared prefix each request starts with (-1: none)
    prefix_tokens: np.ndarray | None = None  # its length: the tokens a hit saves
    adapter: np.ndarray | None = None  # each request's LoRA adapter (`with_adapters`); None without adapters

    def __len__(self) -> int:
        return len(self.arrival_seconds)


def _arrivals(traffic: Traffic, n: int, rng: np.random.Generator) -> np.ndarray:
    if traffic.requests_per_second is None:
        return np.zeros(n)
    rate = traffic.requests_per_second
    if traffic.arrival == "uniform":
        gaps = np.full(n, 1.0 / rate)
    elif traffic.arrival == "gamma":
        shape = traffic.burstiness
        gaps = rng.gamma(shape, 1.0 / (rate * shape), n)
    else:
        gaps = rng.exponential(1.0 / rate, n)
    # The first request arrives at time 0, as a benchmark client starts.
    return np.concatenate(([0.0], np.cumsum(gaps[1:])))


def _lognormal(mean: float, p90: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Lognormal lengths with the given mean and 90th percentile (p90 > mean solves for sigma)."""
    # mean = exp(mu + s^2/2), p90 = exp(mu + 1.2816 s)  =>  s^2/2 - 1.2816 s + ln(p90/mean) = 0
    z90 = 1.2815515655446004
    ratio = math.log(max(p90, 1.0) / max(mean, 1.0))
    disc = z90 * z90 - 2 * ratio
    sigma = z90 - math.sqrt(disc) if disc > 0 else z90
    sigma = max(sigma, 1e-6) if ratio > 0 else 1e-6
    mu = math.log(max(mean, 1.0)) - sigma * sigma / 2
    return rng.lognormal(mu, sigma, n)


def _lengths(kind: str, mean: int, ratio: float, p90: int | None, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform" and ratio > 0:
        low, high = max(1, math.floor(mean * (1 - ratio))), max(1, math.ceil(mean * (1 + ratio)))
        return rng.integers(low, high + 1, n)
    if kind == "lognormal" and p90 is not None:
        return np.clip(np.rint(_lognormal(mean, p90, n, rng)), 1, MAX_LENGTH_TOKENS).astype(np.int64)
    return np.full(n, mean, dtype=np.int64)


def generate_requests(traffic: Traffic, prompt_tokens: int, output_tokens: int) -> Requests:
    """The request stream `traffic` describes, with the scenario's lengths as defaults. Deterministic per seed."""
    rng = np.random.default_rng(traffic.seed)
    if traffic.lengths == "trace" and traffic.trace:
        rows = sorted(traffic.trace, key=lambda r: r.arrival_seconds)
        arrival = np.array([r.arrival_seconds for r in rows], dtype=float)
        prompt = np.array([r.prompt_tokens for r in rows], dtype=np.int64)
        output = np.array([r.output_tokens for r in rows], dtype=np.int64)
        cached = _trace_prefix_hits(rows, prompt, traffic.shared_prefix_fraction)
        names: dict[str, int] = {}
        key = np.array([-1 if r.prefix_id is None else names.setdefault(r.prefix_id, len(names)) for r in rows])
        shared = np.minimum(np.floor(prompt * traffic.shared_prefix_fraction).astype(np.int64), prompt - 1)
        key = np.where(shared > 0, key, -1).astype(np.int64)
        return Requests(arrival - arrival[0], prompt, output, cached, key, np.maximum(shared, 0))
    n = traffic.num_requests
    arrival = _arrivals(traffic, n, rng)
    prompt = _lengths(traffic.lengths, prompt_tokens, traffic.range_ratio, traffic.prompt_tokens_p90, n, rng)
    output = _lengths(traffic.lengths, output_tokens, traffic.range_ratio, traffic.output_tokens_p90, n, rng)
    shared = np.minimum(np.floor(prompt * traffic.shared_prefix_fraction).astype(np.int64), prompt - 1)
    # Shared prefixes (one by default, or one of `num_prefixes` at random, drawn after everything else so the
    # default stream is unchanged): every repeat after the first finds its prefix cached in an unbounded cache.
    if traffic.num_prefixes > 1:
        key = rng.integers(0, traffic.num_prefixes, n).astype(np.int64)
    else:
        key = np.zeros(n, dtype=np.int64)
    key[shared <= 0] = -1
    if traffic.num_prefixes > 1:
        cached = np.where(_repeats(key), shared, 0)
    else:  # one common prefix: every request after the first (as before there were several)
        cached = shared.copy()
        cached[:1] = 0
    return Requests(arrival, prompt.astype(np.int64), output.astype(np.int64), cached, key, np.maximum(shared, 0))


def with_adapters(requests: Requests, adapter_ids: np.ndarray, adapters: int) -> Requests:
    """The stream with each request's LoRA adapter, its shared prefixes told apart by adapter: vLLM V1 hashes a
    request's adapter into every prefix block (`vllm/v1/core/kv_cache_utils.py` `_gen_lora_extra_hash_keys`), so
    a prefix cached under one adapter is no hit for another. Each (prefix, adapter) is its own prefix; its first
    request misses."""
    if requests.prefix_key is None or requests.prefix_tokens is None:
        return replace(requests, adapter=adapter_ids)
    key = np.where(requests.prefix_key >= 0, requests.prefix_key * adapters + adapter_ids, -1)
    cached = np.where(_repeats(key), requests.prefix_tokens, 0).astype(np.int64)
    return replace(requests, prefix_key=key, cached_prompt_tokens=cached, adapter=adapter_ids)


def _repeats(key: np.ndarray) -> np.ndarray:
    """True for each request whose prefix (key >= 0) an earlier request already used."""
    seen = np.zeros(len(key), dtype=bool)
    if len(key):
        _, first = np.unique(key, return_index=True)
        seen[:] = key >= 0
        seen[first] = False
    return seen


def replayed_trace(rows: tuple[TraceRow, ...], rate: float | None, num_requests: int) -> tuple[TraceRow, ...]:
    """The trace replayed at `rate` requests per second with `num_requests` requests: its own lengths, prefixes and
    arrival pattern (gaps and bursts), time-scaled so that its mean gap is 1 / `rate`, as a Poisson stream's at
    `rate` (a trace replayer's speed-up). Longer than the trace, it is replayed again after
    one mean gap, each pass's prefixes its own (the first request of a prefix misses again, as in the trace); `rate`
    None sends every request at once. A trace sent at once (no span) gets evenly spaced arrivals at `rate`."""
    ordered = sorted(rows, key=lambda r: r.arrival_seconds)
    base = np.array([r.arrival_seconds for r in ordered], dtype=float)
    base -= base[0]
    span = float(base[-1])
    gap = span / (len(base) - 1) if len(base) > 1 and span > 0 else 1.0
    if span <= 0:
        base = np.arange(len(base), dtype=float)
        span = float(base[-1])
    passes = -(-num_requests // len(ordered))
    arrival = np.concatenate([base + k * (span + gap) for k in range(passes)])[:num_requests]
    if rate is None:
        arrival = np.zeros(num_requests)
    elif num_requests > 1 and arrival[-1] > 0:
        arrival = arrival * ((num_requests - 1) / arrival[-1] / rate)
    out = []
    for i in range(num_requests):
        row, k = ordered[i % len(ordered)], i // len(ordered)
        prefix = row.prefix_id if k == 0 or row.prefix_id is None else f"{row.prefix_id}#{k}"
        # the values come from validated rows; only the arrival is new, and it stays within the trace's bounds
        out.append(
            TraceRow.model_construct(
                arrival_seconds=float(arrival[i]),
                prompt_tokens=row.prompt_tokens,
                output_tokens=row.output_tokens,
                prefix_id=prefix,
            )
        )
    return tuple(out)


def _trace_prefix_hits(rows: list[TraceRow], prompt: np.ndarray, fraction: float) -> np.ndarray:
    """Requests that share a `prefix_id` with an earlier request reuse `fraction` of the prompt from cache."""
    seen: set[str] = set()
    cached = np.zeros(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        if row.prefix_id is None:
            continue
        if row.prefix_id in seen:
            cached[i] = min(int(prompt[i] * fraction), int(prompt[i]) - 1)
        seen.add(row.prefix_id)
    return cached


def parse_trace_csv(text: str) -> tuple[TraceRow, ...]:
    """Rows of a trace CSV (`arrival_seconds,prompt_tokens,output_tokens[,prefix_id]`), validated.

    Raises PlanningError with one sentence naming the first bad row; never a traceback.
    """
    if len(text.encode("utf-8", "replace")) > MAX_TRACE_BYTES:
        raise PlanningError(f"the trace is larger than {MAX_TRACE_BYTES // (1024 * 1024)} MiB; sample it first")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise PlanningError("the trace is empty; expected a header row and one row per request") from None
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise PlanningError(
            f"the trace has no column {', '.join(missing)}; expected {','.join(TRACE_COLUMNS)}[,prefix_id]"
        )
    index = {name: header.index(name) for name in (*TRACE_COLUMNS, "prefix_id") if name in header}
    rows: list[TraceRow] = []
    for line_number, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(rows) >= MAX_REQUESTS:
            raise PlanningError(f"the trace has more than {MAX_REQUESTS:,} requests; sample it first")
        try:
            rows.append(
                TraceRow(
                    arrival_seconds=float(cells[index["arrival_seconds"]]),
                    prompt_tokens=int(cells[index["prompt_tokens"]]),
                    output_tokens=int(cells[index["output_tokens"]]),
                    prefix_id=(cells[index["prefix_id"]].strip() or None) if "prefix_id" in index else None,
                )
            )
        except (ValueError, IndexError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "missing cells"
            if hasattr(exc, "errors"):
                first = exc.errors()[0]  # type: ignore[attr-defined]
                reason = f"{first['loc'][0]} {first['msg'].lower()}"
            raise PlanningError(f"trace row {line_number} is not a valid request ({reason})") from None
    if not rows:
        raise PlanningError("the trace has a header but no requests")
    return tuple(rows)


def trace_to_csv(rows: tuple[TraceRow, ...]) -> str:
    """The inverse of `parse_trace_csv` (round trip)."""
    out = io.StringIO()
    with_prefix = any(r.prefix_id is not None for r in rows)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((*TRACE_COLUMNS, "prefix_id") if with_prefix else TRACE_COLUMNS)
    for r in rows:
        cells: list[object] = [repr(r.arrival_seconds), r.prompt_tokens, r.output_tokens]
        if with_prefix:
            cells.append(r.prefix_id or "")
        writer.writerow(cells)
    return out.getvalue()


# ------------------------------------------------------------------------------------- prefix residency

NO_PREFIX, GPU_HIT, POOL_HIT, MISS = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class PrefixHits:
    """Where each request of one replica found its shared prefix (`source`: NO_PREFIX, GPU_HIT, POOL_HIT,
    MISS), the prompt tokens it need not prefill, and the seconds its prefix takes to come from the pool."""

    source: np.ndarray
    cached_tokens: np.ndarray
    transfer_seconds: np.ndarray
    bytes_transferred: float


class _Lru:
    """Prefixes by key, least recently used first, within a capacity in tokens."""

    def __init__(self, capacity_tokens: float) -> None:
        self.capacity = capacity_tokens
        self.sizes: dict[int, int] = {}  # insertion order = recency (a touched key is re-inserted)
        self.used = 0

    def __contains__(self, key: int) -> bool:
        return key in self.sizes

    def put(self, key: int, tokens: int) -> None:
        """Insert or touch `key` (now `tokens` long), evicting the least recently used; a prefix larger than
        the whole cache is not kept."""
        self.used -= self.sizes.pop(key, 0)
        if tokens > self.capacity:
            return
        while self.sizes and self.used + tokens > self.capacity:
            oldest = next(iter(self.sizes))
            self.used -= self.sizes.pop(oldest)
        self.sizes[key] = tokens
        self.used += tokens


def prefix_residency(
    prefix_key: np.ndarray,
    prefix_tokens: np.ndarray,
    gpu_capacity_tokens: float,
    pool_capacity_tokens: float,
    kv_bytes_per_token: float,
    pool_bytes_per_second: float,
) -> PrefixHits:
    """One replica's requests, in arrival order, through a GPU prefix cache and a prefix pool behind it.

    Both are LRU caches of whole prefixes (token-exact, like the unbounded cache: vLLM's block granularity is
    not modelled). A request whose prefix is in GPU memory reuses it (GPU hit); else one the pool holds is read
    back, `prefix_tokens x kv_bytes_per_token / pool_bytes_per_second` seconds (pool hit; the prefix enters the
    GPU cache); else it is prefilled again (miss; the first use of a prefix is one) and written to both caches
    (write-through, as Mooncake Store and vLLM's offloading connectors store what a prefill computed).
    Residency follows arrival order, not simulated time: the GPU cache is a stated share of the KV blocks that
    running sequences do not compete for.
    """
    n = len(prefix_key)
    source = np.zeros(n, dtype=np.int8)
    cached = np.zeros(n, dtype=np.int64)
    transfer = np.zeros(n, dtype=float)
    gpu, pool = _Lru(gpu_capacity_tokens), _Lru(pool_capacity_tokens)
    moved = 0.0
    for i, (key, tokens) in enumerate(zip(prefix_key.tolist(), prefix_tokens.tolist(), strict=True)):
        if key < 0 or tokens <= 0:
            continue
        if key in gpu:
            source[i], cached[i] = GPU_HIT, tokens
            gpu.put(key, tokens)
        elif key in pool:
            source[i], cached[i] = POOL_HIT, tokens
            size = tokens * kv_bytes_per_token
            transfer[i] = size / pool_bytes_per_second
            moved += size
            pool.put(key, tokens)
            gpu.put(key, tokens)
        else:
            source[i] = MISS
            gpu.put(key, tokens)
            pool.put(key, tokens)
    return PrefixHits(source, cached, transfer, moved)
