"""What an inference plan returns: frozen records whose JSON is the CLI/CSV contract."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Literal

from pydantic import PrivateAttr, computed_field

from planner.inference.scenario import InferenceScenario
from planner.inference.traffic_results import TrafficResult
from planner.results import (
    Bottleneck,
    Equation,
    Frozen,
    HardwareSummary,
    MemoryBreakdown,
    ModelSummary,
    PhaseRoofline,
    WarningCode,
)
from planner.uncertainty import Band


class SpeculativeSummary(Frozen):
    """Speculative decoding in the plan: the round, what it yields, and whether it pays here."""

    method: str  # draft_model, eagle or mtp
    draft: str  # the draft network's name
    drafted_tokens: int  # k per sequence and round
    acceptance_rate: float
    acceptance_is_assumed: bool  # True: the method's default (a published figure or a guess), not the user's
    acceptance_source: str
    tokens_per_round: float  # per sequence: (1 - a^(k+1)) / (1 - a)
    verify_step_seconds: float  # the target over k + 1 tokens per sequence
    draft_step_seconds: float  # one of the k draft steps
    round_seconds: float
    plain_decode_step_seconds: float  # the same batch without speculation
    speedup: float  # plain decode step / seconds per token with speculation (< 1: it slows decode)
    draft_prefill_seconds: float  # the draft's pass over a prompt (part of TTFT)
    verify: PhaseRoofline


class InferencePerformance(Frozen):
    ttft_seconds: float  # a request arriving at an idle replica
    burst_ttft_seconds: float  # the last request's TTFT when a replica's whole concurrency arrives at once
    tpot_seconds: float  # mean time per output token: other sequences' prefills interfere, its own is TTFT's
    decode_step_seconds: float  # one decode step alone
    e2e_latency_seconds: float
    output_tokens_per_second: float  # whole scenario (all GPUs)
    output_tokens_per_second_per_gpu: float
    output_tokens_per_second_per_replica: float
    requests_per_second: float
    prefill_share_of_time: float
    prefill: PhaseRoofline
    decode: PhaseRoofline
    ridge_point_flops_per_byte: float
    speculative: SpeculativeSummary | None = None  # with speculative decoding (decode_step_seconds: plain)


class InferenceCost(Frozen):
    num_gpus: int
    usd_per_gpu_hour: float
    usd_per_hour: float
    usd_per_month: float
    usd_per_million_output_tokens: float
    replicas_needed: int | None = None
    gpus_needed: int | None = None


class InferenceEnergy(Frozen):
    """Power and energy of the serving cycle (planner.physics.energy): per GPU, idle + busy share x (board - idle);
    the deployment, every GPU x PUE; per 1M output tokens at the plan's throughput. GPUs only, not their hosts."""

    board_watts: float  # per GPU, the datasheet's board power (or a stated assumption)
    idle_watts: float  # per GPU, a published idle reading (or a stated assumption)
    power_assumed: bool  # True: a figure above is a guess (power_source says which)
    power_source: str
    busy_share: float  # per GPU: roofline time (kernels, collectives, hand-offs; memory-bound time weighted) over the serving cycle
    watts_per_gpu: float
    pue: float
    deployment_watts: float  # all GPUs x watts_per_gpu x PUE
    kwh_per_million_output_tokens: float
    electricity_usd_per_kwh: float
    electricity_usd_per_million_output_tokens: float
    carbon_kg_per_kwh: float
    co2e_kg_per_million_output_tokens: float


class InferencePlan(Frozen):
    kind: Literal["inference"] = "inference"
    scenario: InferenceScenario
    model: ModelSummary
    hardware: HardwareSummary
    memory: MemoryBreakdown
    performance: InferencePerformance
    cost: InferenceCost
    energy: InferenceEnergy
    bottleneck: Bottleneck
    bottleneck_reason: str
    warnings: list[str]
    warning_codes: list[WarningCode]  # warning_codes[i]: the stable code of warnings[i] (results.PlanWarning)
    assumptions: list[str]
    uncertainty: dict[str, Band] = {}  # headline field (dotted path) -> range the measured value likely falls in
    calibration: str | None = None
    traffic: TrafficResult | None = None  # the scenario's request stream, simulated (absent without `traffic`)
    # Builds `equations` from the plan's own inputs on first use: most plans (search, trade-off variants,
    # capacity bisection) are compared and never shown, so they never format their equations.
    _explain: Callable[[], list[Equation]] | None = PrivateAttr(default=None)

    @computed_field
    @cached_property
    def equations(self) -> list[Equation]:
        """The headline numbers, each with its formula and this scenario's numbers substituted."""
        return self._explain() if self._explain is not None else []
