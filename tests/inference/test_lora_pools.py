"""LoRA adapters in the traffic answer: the run's loads and stalls, colocated and in both disaggregated pools."""

from __future__ import annotations

import numpy as np
import pytest

from planner import InferenceScenario
from planner.inference.adapters import draw_adapter_ids
from planner.inference.disaggregation import DisaggregatedLayout, simulate_disaggregated
from planner.inference.traffic import TrafficEngine

STREAM = {"requests_per_second": 2.0, "num_requests": 240, "seed": 3}
SPLIT = DisaggregatedLayout(prefill_gpus=4, prefill_tensor_parallel=4)


def engine(**lora) -> TrafficEngine:
    return TrafficEngine.of(InferenceScenario(lora=lora or None, traffic=STREAM))


def test_without_adapters_the_answer_has_no_adapter_stats():
    assert engine().simulate().adapters is None


def test_slots_for_every_adapter_load_each_once_per_replica_and_stall_for_exactly_those_loads():
    eng = engine(adapters=6, max_loras=6)
    result = eng.simulate(replicas=2)
    ids = draw_adapter_ids(STREAM["num_requests"], eng.inputs.inputs.adapters.shares, STREAM["seed"])
    # Round robin: replica r gets requests r, r + 2, ...; each loads every adapter it sees once (cold host too).
    first_uses = sum(len(set(ids[r::2].tolist())) for r in range(2))
    stats = result.adapters
    assert (stats.adapters, stats.gpu_slots_per_replica) == (6, 6)
    assert stats.loads == stats.storage_reads == first_uses
    a = eng.inputs.inputs.adapters
    assert stats.stall_seconds == pytest.approx(first_uses * (a.host_copy_seconds + a.storage_read_seconds))
    assert 0 < stats.stall_share < 0.05


def test_fewer_slots_than_adapters_reload_from_host_not_storage():
    stats = engine(adapters=10, max_loras=4).simulate().adapters
    assert stats.loads > stats.storage_reads == 10  # the host keeps every adapter by default
    tight_host = engine(adapters=10, max_loras=4, max_cpu_loras=4).simulate().adapters
    assert tight_host.storage_reads > 10


def test_disaggregated_pools_both_load_adapters_and_keep_the_likely_ranges():
    scenario = InferenceScenario(num_gpus=8, lora={"adapters": 10, "max_loras": 10}, traffic=STREAM)
    with_lora = simulate_disaggregated(scenario, SPLIT).traffic
    without = simulate_disaggregated(scenario.model_copy(update={"lora": None}), SPLIT).traffic
    assert without.adapters is None
    # Each pool's single replica loads every adapter it meets: prefill and decode alike.
    ids = draw_adapter_ids(STREAM["num_requests"], np.full(10, 0.1), STREAM["seed"])
    assert with_lora.adapters.loads == 2 * len(set(ids.tolist()))
    assert with_lora.ttft_seconds.p50 > without.ttft_seconds.p50
    assert with_lora.tpot_seconds.p50 > without.tpot_seconds.p50  # the decode pool runs the adapters' kernels
    assert (with_lora.output_tokens_likely is None) == (without.output_tokens_likely is None)


def test_the_published_v0_case_is_where_the_assumptions_say_and_below_the_measured_loss():
    """vLLM PR #11267 (A100, Llama-2-7B, one rank-8 adapter, ShareGPT offline, 1000 prompts: 2693.62 -> 1787.78
    output tokens/s, -33.6 %). The assumptions quote this model's figure for it (-6 %) as a lower bound: keep the
    sentence true, and the gap's sign on record (the roofline does not see V0's LoRA overheads)."""

    def output_rate(lora) -> float:
        scenario = InferenceScenario(
            model="llama-2-7b",
            gpu="a100-80gb",
            num_gpus=1,
            tensor_parallel=1,
            prompt_tokens=246,  # ShareGPT's means in that run: 5509.93 total - 2693.62 output tok/s over 11.45 req/s
            output_tokens=235,
            concurrency=256,
            lora=lora,
            traffic={"requests_per_second": None, "num_requests": 1000, "lengths": "uniform", "range_ratio": 0.9},
        )
        return TrafficEngine.of(scenario).simulate().output_tokens_per_second

    change = output_rate({"adapters": 1, "adapter_rank": 8, "max_loras": 1}) / output_rate(None) - 1
    assert -0.065 < change < -0.055  # "-6 %" in adapter_assumptions
    assert change > 1787.78 / 2693.62 - 1  # optimistic against the measurement, as the sentence says
