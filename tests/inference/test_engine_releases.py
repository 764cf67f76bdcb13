"""A runtime is an engine and a release (issue 22, items 1-3): `engine@version` resolves to the nearest dated
profile, old names keep opening, and the traffic simulation runs that release's scheduler and kernels."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from planner import InferenceScenario, plan
from planner.inference.serving.scheduler import EngineLimits, ReplicaContext, simulate_replica
from planner.inference.traffic import Traffic, TrafficEngine
from planner.physics import moe_efficiency
from planner.physics.runtimes import RUNTIMES, runtime_profile
from planner.physics.schedulers import resolve_runtime
from planner.share import query_params_to_scenario, scenario_to_query_params
from tests.inference.flat_cost import FlatCost


@pytest.mark.parametrize(
    ("written", "profile"),
    [
        ("vllm", "vllm"),
        ("vllm@0.11.0", "vllm"),
        ("vllm@0.8.0", "vllm"),
        ("vllm@0.7.3", "vllm@0.6"),
        ("vllm@v0.6.1.post1", "vllm@0.6"),
        ("vllm@0.4.2", "vllm@0.1"),
        ("vllm-v0", "vllm@0.1"),  # the old name: links from before the rename
        ("sglang@0.5.6", "sglang"),
        ("tensorrt-llm@1.0", "tensorrt-llm"),
        ("tensorrt-llm@0.12.0", "tensorrt-llm-engine"),
    ],
)
def test_a_version_selects_the_latest_profile_at_or_before_it(written, profile):
    assert resolve_runtime(written) == profile
    assert InferenceScenario(runtime=written).runtime == profile
    assert runtime_profile(written).name == profile


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("vllm@x", "not a version number"),
        ("ollama@1.0", "no versioned profiles for engine 'ollama'"),
        ("vllm@0.0.9", "older than any profile"),
        ("sglang@0.3", "older than any profile"),
    ],
)
def test_a_version_the_planner_cannot_place_is_refused_with_a_reason(written, message):
    with pytest.raises(ValidationError, match=message):
        InferenceScenario(runtime=written)


def test_every_release_has_a_sourced_scheduler_and_old_links_open():
    for profile in RUNTIMES.values():
        assert profile.scheduler.sources, profile.name
    scenario, warnings = query_params_to_scenario({"runtime": "vllm-v0"})
    assert scenario.runtime == "vllm@0.1" and warnings == []
    assert scenario_to_query_params(InferenceScenario(runtime="vllm@0.7.3")) == {"runtime": "vllm@0.6"}
    assert "formerly 'vllm-v0'" in InferenceScenario.model_fields["runtime"].description


DEEPSEEK = dict(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8")


def test_vllm_v0_turns_chunked_prefill_off_for_mla_only():
    v0_mla = TrafficEngine.of(InferenceScenario(**DEEPSEEK, runtime="vllm@0.7.3"))
    v1_mla = TrafficEngine.of(InferenceScenario(**DEEPSEEK))
    v0_dense = TrafficEngine.of(InferenceScenario(runtime="vllm@0.7.3"))
    assert not v0_mla.limits.chunked_prefill and v1_mla.limits.chunked_prefill and v0_dense.limits.chunked_prefill
    assert v0_mla.limits.admission_watermark_blocks == int(0.01 * v0_mla.limits.kv_blocks) > 0
    notes = " ".join(plan(InferenceScenario(**DEEPSEEK, runtime="vllm@0.7.3")).assumptions)
    assert "Chunked prefill is off for this model" in notes and "PR #12642" in notes


def test_early_2025_kernels_stream_block_fp8_experts_at_the_published_rate():
    ratio = moe_efficiency.EARLY_BLOCK_FP8_EXPERT_BANDWIDTH / moe_efficiency.DOCUMENTED_EXPERT_BANDWIDTH
    assert ratio == pytest.approx(0.255 / 0.60)
    today = plan(InferenceScenario(**DEEPSEEK, concurrency=64)).performance
    early = plan(InferenceScenario(**DEEPSEEK, concurrency=64, runtime="vllm@0.7.3")).performance
    assert early.decode_step_seconds > 1.5 * today.decode_step_seconds  # experts dominate a DeepSeek decode step
    # a dense model, or experts that are not block-scaled FP8, are untouched by the release's MoE kernels
    dense = [plan(InferenceScenario(weight_dtype="fp8", runtime=r)).performance for r in ("vllm", "vllm@0.7.3")]
    assert dense[0].decode_step_seconds == dense[1].decode_step_seconds
    bf16 = [
        plan(InferenceScenario(model="qwen3-30b-a3b", num_gpus=1, tensor_parallel=1, runtime=r))
        for r in ("vllm", "vllm@0.7.3")
    ]
    assert bf16[0].performance.decode_step_seconds == bf16[1].performance.decode_step_seconds


def _serve(kv_blocks=400, cost=None, **policy):
    limits = EngineLimits(
        max_num_seqs=64,
        max_num_batched_tokens=512,
        chunked_prefill=True,
        kv_blocks=kv_blocks,
        block_tokens=16,
        **policy,
    )
    rng = np.random.default_rng(1)
    n = 80
    return simulate_replica(
        np.sort(rng.uniform(0, 2.0, n)),
        rng.integers(200, 700, n),
        rng.integers(100, 300, n),
        np.zeros(n, dtype=int),
        np.arange(n),
        ReplicaContext(limits, cost or FlatCost()),
    )


def test_without_mixing_a_step_runs_prompts_or_decodes_never_both():
    mixing, split = FlatCost(), FlatCost()
    _serve(cost=mixing)
    timeline = _serve(cost=split, mixes_prefill_with_decode=False)
    assert np.isfinite(timeline.finish_seconds).all()
    assert max(mixing.decodes_in_prompt_steps) > 0  # vLLM: chunks ride along with the running decodes
    assert set(split.decodes_in_prompt_steps) == {0}  # SGLang's default: decodes wait for the prefill batch


def test_no_evict_admission_never_preempts_and_keeps_whole_requests_in_the_pool():
    evicting, no_evict = _serve(kv_blocks=200), _serve(kv_blocks=200, reserves_whole_request=True)
    assert evicting.preemptions > 0 and no_evict.preemptions == 0
    assert np.isfinite(no_evict.finish_seconds).all() and no_evict.step_kv_blocks.max() <= 200


def test_each_engine_runs_its_own_scheduler_on_the_same_stream():
    traffic = Traffic(requests_per_second=None, num_requests=200, max_concurrency=120, seed=0)
    results = {
        runtime: TrafficEngine.of(
            InferenceScenario(**DEEPSEEK, prompt_tokens=3000, output_tokens=2600, concurrency=1024, runtime=runtime),
            None,
            traffic,
        ).simulate()
        for runtime in ("vllm", "sglang", "tensorrt-llm")
    }
    assert results["tensorrt-llm"].preemptions == 0 < results["vllm"].preemptions
    assert len({round(r.tpot_seconds.mean, 6) for r in results.values()}) == 3
