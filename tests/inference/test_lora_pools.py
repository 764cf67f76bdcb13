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


def test_an_arrival_whose_adapter_runs_joins_the_batch_past_a_skipped_request():
    """vLLM V1 skips a waiting request whose adapter would exceed max_loras and admits the next: a later arrival on
    a running adapter starts at the next step, not when a running request finishes."""
    from planner.inference.adapters import adapter_limits
    from planner.inference.serving.scheduler import ReplicaContext, simulate_replica
    from planner.inference.workload import Traffic

    scenario = InferenceScenario(
        model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, lora={"adapters": 3, "max_loras": 2}
    )
    eng = TrafficEngine.of(scenario, traffic=Traffic(num_requests=4))
    context = ReplicaContext(
        eng.limits, eng.step_cost(eng.requests()), adapters=adapter_limits(eng.inputs.inputs.adapters)
    )
    # requests 0 and 1 (adapters 0, 1) decode 2,000 tokens from t = 0; request 2 (adapter 2) arrives at 0.1 s and is
    # skipped; request 3 (adapter 0, running) arrives at 0.2 s
    timeline = simulate_replica(
        np.array([0.0, 0.0, 0.1, 0.2]),
        np.full(4, 100),
        np.array([2000, 2000, 10, 10]),
        np.zeros(4, dtype=np.int64),
        np.arange(4),
        context,
        adapter_ids=np.array([0, 1, 2, 0]),
    )
    scheduled = timeline.scheduled_seconds
    assert scheduled[3] < 0.25  # the next step after its arrival
    assert scheduled[2] > 10.0  # skipped until adapter 1's request finishes


def test_shares_near_the_float_limit_an_unusable_drive_and_a_host_cache_below_the_slots():
    from planner.inference.adapters import LoraAdapters

    huge = LoraAdapters(adapters=2, traffic_shares=(1e308, 1e308))
    assert list(huge.shares()) == [0.5, 0.5]  # normalised by the largest first: no overflow to inf
    with pytest.raises(ValueError, match="greater than or equal to 1000000"):
        LoraAdapters(storage_bytes_per_second=1e-300)
    with pytest.raises(ValueError, match="max_cpu_loras=3 is below the 4 GPU adapter slots"):
        InferenceScenario(lora={"adapters": 100, "max_loras": 4, "max_cpu_loras": 3})


def test_an_mla_layer_wraps_four_lora_layers_in_attention():
    """vLLM's DeepSeek-V2/V3 LoRA wraps fused_qkv_a (q_a with kv_a: one input), q_b, kv_b and o_proj; a dense or
    shared-expert MLP gate_up and down: 2 kernels each."""
    from planner.inference.scenario_inputs import scenario_inputs

    deepseek = InferenceScenario(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8, lora={"adapters": 2})
    assert scenario_inputs(deepseek).inputs.adapters.kernels_per_layer == 2 * (4 + 2)
    llama = scenario_inputs(InferenceScenario(lora={"adapters": 2})).inputs.adapters
    assert llama.kernels_per_layer == 2 * 4


def test_prefix_cache_hits_count_within_one_adapter():
    """vLLM V1 hashes the adapter into every prefix block: 4 shared prefixes over 2 adapters are 8 cached prefixes
    (8 first uses miss), over 1,000 adapters almost every request misses."""
    stream = {"requests_per_second": 2.0, "num_requests": 400, "shared_prefix_fraction": 0.8, "num_prefixes": 4}

    def gpu_hits(lora) -> int:
        scenario = InferenceScenario(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, lora=lora, traffic=stream)
        return TrafficEngine.of(scenario).simulate().prefix_cache.gpu_hits

    base = gpu_hits(None)
    assert base == 400 - 4
    assert gpu_hits({"adapters": 2, "max_loras": 2}) == 400 - 8
    assert gpu_hits({"adapters": 1000, "max_loras": 8}) < 0.1 * base
