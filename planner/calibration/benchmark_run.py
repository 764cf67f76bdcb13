"""One benchmark run, as every client's result file describes it: the traffic it sent and what it measured.

The readers (`planner.calibration.benchmark_readers`) turn the result files of `vllm bench serve`, SGLang's
`bench_serving`, genai-perf, guidellm and inference-perf into this one validated record; the fit
(`planner.calibration.from_benchmark`) replays its traffic through the simulator. Times are seconds and rates per
second here, whatever the client wrote (vLLM and SGLang write milliseconds: converted at the edge, in the reader).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import PlanningError

Client = Literal["vllm", "sglang", "genai-perf", "guidellm", "inference-perf", "published"]
Arrival = Literal["poisson", "uniform", "gamma"]
MAX_RUN_REQUESTS = 1_000_000  # a run's prompts; the simulation replays at most `from_benchmark.MAX_REPLAYED`


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LatencySummary(_Frozen):
    """Mean, median and 99th percentile of one per-request latency, seconds (None: the client did not report it)."""

    mean_seconds: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    median_seconds: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    p99_seconds: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)

    @property
    def central_seconds(self) -> float | None:
        """The mean, else the median: the statistic the fit compares."""
        return self.mean_seconds if self.mean_seconds is not None else self.median_seconds

    @property
    def central_statistic(self) -> str:
        return "mean" if self.mean_seconds is not None else "median"


class BenchmarkRun(_Frozen):
    """One run of a benchmark client against a server: its traffic and its aggregate measurements.

    `request_rate_per_second` None is a burst (`--request-rate inf`: every request sent at once, or as fast as
    the client's concurrency cap lets it). Lengths are tokens per request, measured (the mean of what the run
    sent and received) where the client reports it, else what it asked for; min/max when known."""

    source: str = Field(min_length=1, max_length=300, description="the file (and line or benchmark) it came from")
    client: Client
    model: str | None = Field(default=None, max_length=300, description="the model the client named, if any")
    prompt_tokens_mean: float = Field(gt=0, le=10_000_000, allow_inf_nan=False)
    prompt_tokens_min: int | None = Field(default=None, ge=0)
    prompt_tokens_max: int | None = Field(default=None, ge=0)
    output_tokens_mean: float = Field(gt=0, le=10_000_000, allow_inf_nan=False)
    output_tokens_min: int | None = Field(default=None, ge=0)
    output_tokens_max: int | None = Field(default=None, ge=0)
    range_ratio: float | None = Field(
        default=None, ge=0, lt=1, description="uniform lengths: ± share of the mean (vLLM's random dataset)"
    )
    request_rate_per_second: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0.01, le=100)
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_RUN_REQUESTS)
    num_prompts: int = Field(ge=1, le=MAX_RUN_REQUESTS)
    completed: int | None = Field(default=None, ge=0, le=MAX_RUN_REQUESTS)
    failed: int = Field(default=0, ge=0, le=MAX_RUN_REQUESTS)
    ttft: LatencySummary = LatencySummary()
    tpot: LatencySummary = LatencySummary()
    itl: LatencySummary = LatencySummary()
    e2e: LatencySummary = LatencySummary()
    request_throughput_per_second: float | None = Field(default=None, gt=0, le=1e7, allow_inf_nan=False)
    output_tokens_per_second: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    per_request_arrays: bool = Field(default=False, description="latencies and lengths computed from per-request data")

    @model_validator(mode="after")
    def _measured_something(self) -> BenchmarkRun:
        if self.completed == 0:
            raise PlanningError("no request completed")
        if self.ttft.central_seconds is None and self.tpot.central_seconds is None and self.throughput is None:
            raise PlanningError("it reports no TTFT, TPOT or throughput")
        return self

    @property
    def request_rate(self) -> float:
        """Requests per second sent, inf for a burst (the clients' own spelling)."""
        return math.inf if self.request_rate_per_second is None else self.request_rate_per_second

    @property
    def throughput(self) -> float | None:
        """Output tokens per second, else requests per second x the mean output: what the fit compares."""
        if self.output_tokens_per_second is not None:
            return self.output_tokens_per_second
        if self.request_throughput_per_second is not None:
            return self.request_throughput_per_second * self.output_tokens_mean
        return None

    @property
    def load(self) -> float:
        """How hard the run pushed, for ordering a sweep: its concurrency cap, else its rate, else its prompts."""
        if self.max_concurrency is not None:
            return float(self.max_concurrency)
        return self.request_rate_per_second if self.request_rate_per_second is not None else float(self.num_prompts)

    def describe(self) -> str:
        """'c=16, 3200/800 tokens' / 'rate 4/s, ...' / 'burst of 500, ...'."""
        if self.max_concurrency is not None:
            load = f"c={self.max_concurrency}"
            if self.request_rate_per_second is not None:
                load += f" at {self.request_rate_per_second:g}/s"
        elif self.request_rate_per_second is not None:
            load = f"rate {self.request_rate_per_second:g}/s"
        else:
            load = f"burst of {self.num_prompts}"
        return f"{load}, {self.prompt_tokens_mean:.0f}/{self.output_tokens_mean:.0f} tokens"


__all__ = ["Arrival", "BenchmarkRun", "Client", "LatencySummary"]
