"""Properties of `plan()` over valid inference scenarios (hypothesis).

Scenarios are drawn from catalog models, accelerators and layouts the scenario validation accepts;
a draw it rejects is discarded (`assume(False)`), never counted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner import InferenceScenario, PlanningError, plan
from planner.dtypes import (
    BYTES_PER_ELEMENT,
    DTYPES,
    KV_DTYPES,
    kv_bytes_per_element,
    weight_bytes_per_element,
)
from planner.hardware.catalog import list_accelerators
from planner.inference.inputs import activation_bytes_per_element
from planner.model.architecture import parameter_counts
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.physics import memory as mem

MODELS = catalog_model_ids() + ("dense-70b", "moe-400b")
GPUS = tuple(a.id for a in list_accelerators())
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Signed by definition: what is left of the budget (negative when the plan does not fit).
SIGNED = {"headroom_bytes", "headroom_fraction"}


def _tp_candidates(arch):
    return [t for t in (1, 2, 4, 8, 16) if arch.num_attention_heads % t == 0]


def _valid(**fields) -> InferenceScenario | None:
    try:
        return InferenceScenario(**fields)
    except (PlanningError, ValidationError):
        return None


@st.composite
def layouts(draw, model=None):
    """Model, GPU and a layout; everything else left for the caller."""
    model = model or draw(st.sampled_from(MODELS))
    arch = resolve_model(model)
    tp = draw(st.sampled_from(_tp_candidates(arch)))
    pp = draw(st.sampled_from([p for p in (1, 2, 3, 4) if p <= arch.num_layers]))
    replicas = draw(st.integers(1, 3))
    ep = 1
    if arch.is_moe:
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8, 16) if arch.num_experts % e == 0]))
    return dict(
        model=model,
        gpu=draw(st.sampled_from(GPUS)),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        num_gpus=tp * pp * replicas,
        expert_parallel=ep,
    )


@st.composite
def workloads(draw):
    return dict(
        weight_dtype=draw(st.sampled_from(DTYPES)),
        kv_cache_dtype=draw(st.sampled_from(KV_DTYPES)),
        prompt_tokens=draw(st.integers(1, 200_000)),
        output_tokens=draw(st.integers(1, 20_000)),
        concurrency=draw(st.integers(1, 4096)),
        kv_block_tokens=draw(st.sampled_from([1, 16, 32, 128])),
        gpu_memory_utilization=draw(st.floats(0.5, 1.0)),
        prefill_chunk_tokens=draw(st.sampled_from([512, 2048, 8192, 65536])),
        prefix_cache_hit_rate=draw(st.sampled_from([0.0, 0.3, 0.9, 1.0])),
        honor_sliding_window=draw(st.booleans()),
        quantize_embeddings=draw(st.booleans()),
    )


@st.composite
def scenarios(draw):
    scenario = _valid(**draw(layouts()), **draw(workloads()))
    assume(scenario is not None)
    return scenario


def _numeric_leaves(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numeric_leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _numeric_leaves(value, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(scenarios())
def test_no_nan_inf_or_negative_numbers(scenario):
    dumped = plan(scenario).model_dump()
    bad = [
        (path, value)
        for path, value in _numeric_leaves(dumped)
        if not math.isfinite(value) or (value < 0 and path.rsplit(".", 1)[-1] not in SIGNED)
    ]
    assert not bad, bad


def _weight_bytes_bounds(scenario) -> tuple[float, float]:
    """Per-GPU weight bytes bounded from the checkpoint's parameter count alone (itself checked against
    torch meta builds in tests/validation): no layout can hold less than an even share of every
    parameter at its cheapest dtype, nor more than all of them at the dearest."""
    params = parameter_counts(scenario.architecture()).total_with_vision
    quantized = weight_bytes_per_element(scenario.weight_dtype, scenario.weight_group_size)
    unquantized = activation_bytes_per_element(scenario.weight_dtype)  # embeddings, norms, vision tower
    shards = scenario.tensor_parallel * scenario.pipeline_parallel * scenario.expert_parallel
    return params * min(quantized, unquantized) / shards, params * max(quantized, unquantized)


@SETTINGS
@given(scenarios())
def test_weights_per_gpu_lie_between_an_even_share_and_the_whole_checkpoint(scenario):
    weights = plan(scenario).memory.components["weights_bytes"]
    low, high = _weight_bytes_bounds(scenario)
    assert low * (1 - 1e-9) <= weights <= high * (1 + 1e-9)


@pytest.mark.parametrize(
    "model", ["llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v2-lite", "gemma-3-27b"]
)
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_one_unsharded_gpu_holds_exactly_the_checkpoint(model, dtype):
    """TP1/PP1 at a 16- or 32-bit dtype: every parameter once at its element size (the torch meta
    builds in tests/validation pin the parameter counts)."""
    scenario = InferenceScenario(model=model, gpu="h200", num_gpus=1, tensor_parallel=1, weight_dtype=dtype)
    params = parameter_counts(scenario.architecture()).total_with_vision
    assert plan(scenario).memory.components["weights_bytes"] == params * BYTES_PER_ELEMENT[dtype]


@SETTINGS
@given(scenarios(), st.floats(0.01, 0.3))
def test_a_larger_memory_budget_never_turns_a_fit_into_a_misfit(scenario, more):
    """Whatever the plan's components are, the verdict must be monotone in the budget: raising
    gpu_memory_utilization keeps a fitting plan fitting, lowering it keeps a misfit a misfit."""
    u = scenario.gpu_memory_utilization
    base = plan(scenario).memory
    higher = _valid(**{**scenario.model_dump(), "gpu_memory_utilization": min(u + more, 1.0)})
    lower = _valid(**{**scenario.model_dump(), "gpu_memory_utilization": u - more})
    if base.fits and higher is not None:
        assert plan(higher).memory.fits
    if not base.fits and lower is not None:
        assert not plan(lower).memory.fits


@SETTINGS
@given(scenarios())
def test_the_budget_is_the_engine_share_of_the_device_memory(scenario):
    m = plan(scenario).memory
    device = next(a for a in list_accelerators() if a.id == scenario.gpu)
    assert m.capacity_bytes == device.memory_bytes
    assert m.budget_bytes == pytest.approx(device.memory_bytes * scenario.gpu_memory_utilization)
    assert plan(scenario).performance.output_tokens_per_second > 0


@SETTINGS
@given(layouts(), workloads())
def test_per_gpu_memory_never_rises_with_tensor_parallel(layout, workload):
    """One replica (num_gpus = TP x PP), same model and workload, every TP the validation accepts.

    The runtime's non-torch reserve steps up with TP (vLLM V1: NCCL / custom all-reduce buffers, 0.25 GiB at
    TP 1, 2.1 GiB from TP 2, 5.7 GiB from TP 8), so every comparison leaves it out, and between layouts with
    the same reserve the whole per-GPU total must not rise."""
    layout = {**layout, "expert_parallel": 1}
    arch = resolve_model(layout["model"])
    plans = []
    for tp in _tp_candidates(arch):
        s = _valid(**{**layout, "tensor_parallel": tp, "num_gpus": tp * layout["pipeline_parallel"]}, **workload)
        if s is not None:
            plans.append((tp, plan(s).memory))
    assume(len(plans) >= 2)
    for (tp_a, a), (tp_b, b) in zip(plans, plans[1:]):
        for name in ("weights_bytes", "kv_cache_bytes", "activations_bytes"):
            assert b.components[name] <= a.components[name] * (1 + 1e-12), (name, tp_a, tp_b)
        # The profiling run's torch peak, max(forward, sampler), never rises; its sampler part (the excess over
        # the forward) may, as the forward shrinks with TP while every rank samples the whole vocabulary.
        peak = lambda m: m.components["activations_bytes"] + m.components["logits_bytes"]  # noqa: E731
        assert peak(b) <= peak(a) * (1 + 1e-12), (tp_a, tp_b)
        without_runtime = lambda m: m.total_bytes - m.components["runtime_overhead_bytes"]  # noqa: E731
        assert without_runtime(b) <= without_runtime(a) * (1 + 1e-12)
        assert b.components["runtime_overhead_bytes"] >= a.components["runtime_overhead_bytes"]
        if b.components["runtime_overhead_bytes"] == a.components["runtime_overhead_bytes"]:
            assert b.total_bytes <= a.total_bytes * (1 + 1e-12)


@SETTINGS
@given(layouts(), workloads())
def test_more_pipeline_stages_never_raise_per_gpu_weights_and_kv(layout, workload):
    arch = resolve_model(layout["model"])
    layout = {**layout, "expert_parallel": 1}
    mems = []
    for pp in (1, 2, 4):
        if pp <= arch.num_layers:
            s = _valid(**{**layout, "pipeline_parallel": pp, "num_gpus": layout["tensor_parallel"] * pp}, **workload)
            if s is not None:
                mems.append(plan(s).memory)
    assume(len(mems) >= 2)
    for a, b in zip(mems, mems[1:]):
        assert b.components["weights_bytes"] <= a.components["weights_bytes"] * (1 + 1e-12)
        assert b.components["kv_cache_bytes"] <= a.components["kv_cache_bytes"] * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------
# KV linearity


@SETTINGS
@given(
    st.sampled_from(MODELS),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 4),
    st.integers(1, 64),
    st.integers(1, 64),
    st.integers(1, 50_000),
    st.integers(1, 50_000),
    st.sampled_from(KV_DTYPES),
)
def test_kv_bytes_linear_in_sequences_and_tokens(model, tp, pp, s1, s2, t1, t2, dtype):
    arch = resolve_model(model)
    assume(arch.num_attention_heads % tp == 0 and pp <= arch.num_layers)
    b = kv_bytes_per_element(dtype)

    def kv(seqs, tokens, block=1, sliding=False):
        return mem.kv_cache_bytes(arch, tp, pp, seqs, tokens, b, block, honor_sliding_window=sliding)

    # sequences: exactly linear, with any block size and the sliding window honoured
    for block, sliding in ((1, False), (16, True)):
        assert kv(s1 + s2, t1, block, sliding) == pytest.approx(
            kv(s1, t1, block, sliding) + kv(s2, t1, block, sliding), rel=1e-12
        )
    # tokens: affine without the sliding window and without block rounding: the KV grows linearly on top of
    # the constant recurrent state of linear-attention / Mamba layers (0 for attention-only models)
    state = kv(s1, 0)
    assert kv(s1, t1 + t2) - state == pytest.approx(kv(s1, t1) + kv(s1, t2) - 2 * state, rel=1e-12)
    assert kv(s1, t1) == pytest.approx(s1 * (t1 * (kv(1, 1) - kv(1, 0)) + kv(1, 0)), rel=1e-12)
    assert arch.is_hybrid or state == 0
    # paged: whole blocks
    assert kv(s1, t1, 16) == pytest.approx(kv(s1, 16 * math.ceil(t1 / 16)), rel=1e-12)
    # sliding window never adds bytes
    assert kv(s1, t1, 1, True) <= kv(s1, t1) * (1 + 1e-12)


@SETTINGS
@given(scenarios())
def test_plan_kv_doubles_with_concurrency(scenario):
    assume(scenario.concurrency <= 1000)
    doubled = _valid(**{**scenario.model_dump(), "concurrency": 2 * scenario.concurrency * scenario.replicas})
    base = _valid(**{**scenario.model_dump(), "concurrency": scenario.concurrency * scenario.replicas})
    assume(doubled is not None and base is not None)
    assert plan(doubled).memory.components["kv_cache_bytes"] == pytest.approx(
        2 * plan(base).memory.components["kv_cache_bytes"], rel=1e-12
    )


# ---------------------------------------------------------------------------------------------
# decode roofline


@SETTINGS
@given(scenarios())
def test_decode_never_faster_than_its_rooflines(scenario):
    p = plan(scenario)
    arch = scenario.architecture()
    accel = scenario.accelerator()
    step = p.performance.decode_step_seconds
    bandwidth = accel.memory_bandwidth_bytes_per_second
    weights = p.memory.components["weights_bytes"]
    if arch.is_moe:
        # at least k experts are read; at most all of this GPU's routed expert bytes are skipped otherwise
        counts = parameter_counts(arch)
        routed_per_gpu = (
            mem.stage_moe_layers(arch, scenario.pipeline_parallel)
            * counts.moe_layer.experts_routed
            / max(scenario.tensor_parallel, scenario.expert_parallel)
            * weight_bytes_per_element(scenario.weight_dtype, scenario.weight_group_size)
        )
        weights -= routed_per_gpu * (1 - arch.experts_per_token / arch.num_experts)
    assert weights > 0
    assert step >= weights / bandwidth
    decode = p.performance.decode
    assert step >= scenario.pipeline_parallel * decode.bytes / bandwidth * (1 - 1e-12)
    peak = max(accel.peak_flops_per_second.values())
    assert step >= decode.flops / peak
    assert p.performance.tpot_seconds >= step * (1 - 1e-12)
    assert p.performance.ttft_seconds > 0


# ---------------------------------------------------------------------------------------------
# capacity answers agree with each other


@SETTINGS
@given(scenarios())
def test_max_concurrency_consistent_with_fits(scenario):
    p = plan(scenario)
    replicas = scenario.replicas
    in_flight = math.ceil(scenario.concurrency / replicas) * replicas  # the busiest replica is planned
    assert p.memory.max_concurrency % replicas == 0
    assert p.memory.fits == (p.memory.max_concurrency >= in_flight)


@SETTINGS
@given(scenarios())
def test_max_context_fits_its_budget(scenario):
    p = plan(scenario)
    arch = scenario.architecture()
    m = p.memory
    sequences = math.ceil(scenario.concurrency / scenario.replicas)
    room = max(m.budget_bytes - (m.total_bytes - m.components["kv_cache_bytes"]), 0.0) / sequences
    kv_b = kv_bytes_per_element(scenario.kv_cache_dtype)
    block = scenario.kv_block_tokens

    def per_sequence(tokens):
        return mem.kv_cache_bytes_per_sequence(
            arch,
            scenario.tensor_parallel,
            scenario.pipeline_parallel,
            tokens,
            kv_b,
            block,
            scenario.honor_sliding_window,
            activation_bytes_per_element(scenario.weight_dtype),  # a recurrent state's dtype
        )

    best = m.max_context_tokens
    assert 0 <= best <= arch.max_context_tokens
    assert best % block == 0
    if best > 0:
        assert per_sequence(best) <= room * (1 + 1e-9)
    if best + block <= arch.max_context_tokens:
        assert per_sequence(best + block) > room * (1 - 1e-9)


@SETTINGS
@given(scenarios())
def test_kv_blocks_cover_the_planned_sequences_when_it_fits(scenario):
    p = plan(scenario)
    assume(p.memory.fits)
    arch = scenario.architecture()
    block = scenario.kv_block_tokens
    per_block = mem.kv_block_bytes(
        arch, scenario.tensor_parallel, scenario.pipeline_parallel, kv_bytes_per_element(scenario.kv_cache_dtype), block
    )
    assert p.memory.kv_blocks * per_block >= p.memory.components["kv_cache_bytes"] * (1 - 1e-9)


def test_bytes_per_element_table_is_positive():
    assert all(BYTES_PER_ELEMENT[d] > 0 for d in DTYPES)
    assert np.isclose(weight_bytes_per_element("int4", 128), 0.5 + 2.5 / 128)


# ---------------------------------------------------------------------------------------------
# numerical hygiene


def _plan_strict(model):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return plan(
            InferenceScenario(
                model=model, num_gpus=1, tensor_parallel=1, concurrency=1, prompt_tokens=100, output_tokens=10
            )
        )


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-2-9b", "deepseek-v2-lite", "qwen3-30b-a3b"])
def test_plan_emits_no_numpy_warnings(model):
    assert _plan_strict(model).memory.max_context_tokens > 0


@pytest.mark.parametrize("model", ["mistral-7b-v0.1", "phi-3-mini-4k"])
def test_all_sliding_models_plan_without_numpy_warnings(model):
    p = _plan_strict(model)
    assert p.memory.max_context_tokens == resolve_model(model).max_context_tokens
