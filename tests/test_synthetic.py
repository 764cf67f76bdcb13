"""Size-only models ('dense-70b', 'moe-1t'): plausible shapes that land within 2 % of the requested size."""

from __future__ import annotations

import pytest

from planner import InferenceScenario, PlanningError, plan
from planner.model.architecture import parameter_counts
from planner.model.catalog import resolve_model
from planner.model.synthetic import parse_size_id, size_id, synthetic_architecture

DENSE = [
    "dense-0.5b",
    "dense-1b",
    "dense-1.5b",
    "dense-3b",
    "dense-7b",
    "dense-8b",
    "dense-13b",
    "dense-34b",
    "dense-70b",
    "dense-180b",
    "dense-405b",
    "dense-1t",
    "dense-2t",
]
MOE = [
    "moe-2b",
    "moe-7b",
    "moe-16b",
    "moe-30b",
    "moe-57b",
    "moe-100b",
    "moe-235b",
    "moe-400b",
    "moe-671b",
    "moe-1t",
    "moe-2t",
]


@pytest.mark.parametrize("model_id", DENSE + MOE)
def test_size_within_two_percent(model_id):
    moe, requested = parse_size_id(model_id)
    arch = resolve_model(model_id)
    total = parameter_counts(arch).total
    assert total == pytest.approx(requested, rel=0.02), f"{model_id}: {total:,}"
    assert arch.model_type == "synthetic" and arch.is_moe == moe


@pytest.mark.parametrize("model_id", DENSE + MOE)
def test_shape_is_plausible(model_id):
    arch = resolve_model(model_id)
    assert arch.head_dim == 128
    assert arch.num_attention_heads * arch.head_dim == arch.hidden_size
    assert arch.num_attention_heads % arch.num_kv_heads == 0
    assert arch.num_kv_heads in (1, 2, 4, 8)
    if arch.hidden_size > 4096:  # large models: a head count that 8-way tensor parallelism divides
        assert arch.num_attention_heads % 8 == 0
    if arch.is_moe:
        assert (arch.num_experts, arch.experts_per_token) == (128, 8)
        assert 0.2 <= arch.expert_intermediate_size / arch.hidden_size <= 0.6
        assert arch.expert_intermediate_size % 16 == 0
        counts = parameter_counts(arch)
        # 8 of 128 experts per token; small MoE models are embedding-heavy (moe-7b: 1.0B of 6.9B active)
        assert counts.active < counts.total / (8 if counts.total > 100e9 else 2)
    else:
        assert 2.0 <= arch.intermediate_size / arch.hidden_size <= 5.0
        assert arch.intermediate_size % 64 == 0
        assert arch.tie_word_embeddings == (arch.hidden_size < 3072)


def test_sizes_grow_monotonically():
    for ids in (DENSE, MOE):
        totals = [parameter_counts(resolve_model(m)).total for m in ids]
        assert totals == sorted(totals)
        # (layer counts need not be monotonic: dense-7b has 37 layers at hidden 3584, dense-8b 33 at 4096)


def test_plan_states_the_assumption():
    arch = resolve_model("dense-70b")
    p = plan(InferenceScenario(model="dense-70b", num_gpus=8, tensor_parallel=8))
    text = " ".join(p.assumptions)
    assert "derived from size alone" in text
    assert "within 2%" in text
    assert f"{arch.num_layers} layers, hidden {arch.hidden_size}" in text
    assert p.model.model_type == "synthetic"
    assert p.model.params_total == parameter_counts(arch).total


def test_moe_plan_states_the_assumption():
    p = plan(InferenceScenario(model="moe-1t", num_gpus=16, tensor_parallel=8, expert_parallel=16))
    text = " ".join(p.assumptions)
    assert "derived from size alone" in text and "Qwen3-MoE" in text
    assert "MoE: uniform top-k routing" in text


def test_parse_and_format_size_ids():
    assert parse_size_id("dense-70b") == (False, 70e9)
    assert parse_size_id(" MoE-1T ") == (True, 1e12)
    assert parse_size_id("dense-0.5b") == (False, 0.5e9)
    assert parse_size_id("dense-500m") == (False, 500e6)
    assert parse_size_id("llama-3.1-8b") is None
    assert parse_size_id("dense-70") is None
    assert size_id(70e9, False) == "dense-70b"
    assert size_id(1e12, True) == "moe-1t"
    assert size_id(0.5e9, False) == "dense-500m"
    for model_id in ("dense-70b", "moe-1t", "dense-1.5b"):
        moe, params = parse_size_id(model_id)
        assert parse_size_id(size_id(params, moe)) == (moe, params)


@pytest.mark.parametrize(
    "params,moe,match",
    [
        (5e7, False, "outside the supported 0.1B-10T range for dense models"),
        (1e9, True, "outside the supported 2B-10T range for MoE models"),
        (2e13, False, "outside the supported"),
    ],
)
def test_out_of_range(params, moe, match):
    with pytest.raises(PlanningError, match=match):
        synthetic_architecture(params, moe)


def test_same_id_same_architecture():
    assert resolve_model("dense-70b") == resolve_model("dense-70b")
    assert resolve_model("dense-70b") == synthetic_architecture(70e9, False)
