"""Any input at all: plan() returns finite, non-negative numbers or raises the project's validation error.

Draws every scenario field from wide ranges (extreme but type-correct values, impossible layouts,
catalog and size-only models, every dtype/optimizer/precision) for both kinds of scenario.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner import PlanningError, plan
from planner.dtypes import DTYPES, KV_DTYPES
from planner.model.catalog import catalog_model_ids
from planner.scenario import parse_scenario

MODELS = st.sampled_from(list(catalog_model_ids()) + ["dense-0.5b", "dense-70b", "moe-1t", "moe-2b", "dense-9t"])
GPUS = st.sampled_from(
    [
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
        "a100-40gb",
        "a100-80gb",
        "l40s",
        "l4",
        "a10g",
        "rtx-4090",
        "mi300x",
        "cpu",
    ]
)
SMALL = st.integers(min_value=1, max_value=16)
COUNT = st.sampled_from([1, 2, 3, 4, 6, 8, 16, 64, 512, 4096, 100_000])
TOKENS = st.sampled_from([1, 7, 128, 2048, 32_768, 131_072, 1_000_000, 10_000_000])

# Fields that may legitimately be negative (headroom when a plan does not fit) or unbounded.
SIGNED = ("headroom_bytes", "headroom_fraction", "delta")

inference = st.fixed_dictionaries(
    {
        "kind": st.just("inference"),
        "model": MODELS,
        "gpu": GPUS,
        "num_gpus": COUNT,
        "tensor_parallel": st.sampled_from([1, 2, 3, 4, 8, 16, 64]),
        "pipeline_parallel": SMALL,
        "expert_parallel": st.sampled_from([1, 2, 4, 8, 16]),
        "weight_dtype": st.sampled_from(DTYPES),
        "kv_cache_dtype": st.sampled_from(KV_DTYPES),
        "weight_group_size": st.sampled_from([16, 32, 128, 4096]),
        "quantize_embeddings": st.booleans(),
        "prompt_tokens": TOKENS,
        "output_tokens": TOKENS,
        "concurrency": COUNT,
        "kv_block_tokens": st.sampled_from([1, 16, 4096]),
        "gpu_memory_utilization": st.floats(0.06, 1.0),
        "prefill_chunk_tokens": st.sampled_from([16, 512, 8192, 10_000_000]),
        "honor_sliding_window": st.booleans(),
        "prefix_cache_hit_rate": st.floats(0.0, 1.0),
        "usd_per_gpu_hour": st.none() | st.floats(0, 10_000),
        "target_requests_per_second": st.none() | st.floats(1e-3, 1e6),
    }
)

training = st.fixed_dictionaries(
    {
        "kind": st.just("training"),
        "model": MODELS,
        "gpu": GPUS,
        "num_gpus": COUNT,
        "tensor_parallel": st.sampled_from([1, 2, 4, 8]),
        "pipeline_parallel": st.sampled_from([1, 2, 4, 8]),
        "context_parallel": st.sampled_from([1, 2]),
        "expert_parallel": st.sampled_from([1, 2, 8]),
        "zero_stage": st.integers(0, 3),
        "optimizer": st.sampled_from(["adamw", "adam8bit", "sgd", "sgd_momentum", "adafactor"]),
        "precision": st.sampled_from(["mixed_bf16", "mixed_fp16", "amp_bf16", "bf16", "fp32"]),
        "micro_batch_size": st.sampled_from([1, 2, 8, 64]),
        "global_batch_size": st.sampled_from([1, 64, 1024, 65536]),
        "sequence_length": TOKENS,
        "activation_checkpointing": st.sampled_from(["none", "selective", "full"]),
        "flash_attention": st.booleans(),
        "offload_optimizer": st.booleans(),
        "offload_parameters": st.booleans(),
        "training_tokens": st.floats(1, 1e16),
        "lora": st.none()
        | st.fixed_dictionaries({"rank": st.sampled_from([1, 16, 4096]), "quantize_base": st.booleans()}),
    }
)


@st.composite
def coherent(draw, base):
    """Half the draws keep the layout consistent (GPUs = TP x PP x replicas) so most of them plan."""
    data = dict(draw(base))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2]))
    data.update(
        tensor_parallel=tp,
        pipeline_parallel=pp,
        expert_parallel=1,
        context_parallel=1,
        num_gpus=tp * pp * draw(st.sampled_from([1, 2, 3])),
    )
    if data["kind"] == "training":
        data.update(
            global_batch_size=data["num_gpus"] // (tp * pp) * data["micro_batch_size"] * draw(SMALL),
            offload_parameters=data["offload_parameters"] and data["zero_stage"] == 3,
        )
        data.pop("context_parallel", None)
        data["context_parallel"] = 1
    else:
        data.pop("context_parallel", None)
    return data


inference_inputs = st.one_of(inference, coherent(inference))
training_inputs = st.one_of(training, coherent(training))


def _numbers(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _numbers(value, f"{path}[{index}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, float(node)


def _check(data):
    try:
        scenario = parse_scenario(data)
        result = plan(scenario)
    except (ValidationError, PlanningError):
        return
    for path, value in _numbers(result.model_dump(mode="python", exclude={"scenario"})):
        if path.startswith("equations"):
            continue
        assert not math.isnan(value), path
        if path.endswith("usd_per_million_output_tokens") or path.endswith("usd_per_million_tokens"):
            assert value >= 0, path  # inf only when nothing flows; 0 when the GPUs are free
            continue
        assert math.isfinite(value), (path, value)
        if not any(part in path for part in SIGNED):
            assert value >= 0, (path, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inference_inputs)
def test_any_inference_input_plans_or_is_rejected_with_a_sentence(data):
    _check(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_inputs)
def test_any_training_input_plans_or_is_rejected_with_a_sentence(data):
    _check(data)
