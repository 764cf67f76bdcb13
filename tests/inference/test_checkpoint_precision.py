"""Per-module precision read from `quantization_config`: a scenario that names no weight format serves the
checkpoint as stored, overridable per module group; weight bytes against the published checkpoint sizes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import parameter_counts
from planner.model.checkpoint_precision import checkpoint_weight_dtypes
from planner.model.hf_config import architecture_from_config
from planner.search.sweep import evaluate_inference
from planner.share import query_params_to_scenario, scenario_to_query_params
from tests.reference_data import require_reference

GIB = 1 << 30


def _reference(name):
    return architecture_from_config(json.loads((require_reference() / "hf_configs" / f"{name}.json").read_text()))


@pytest.mark.parametrize(
    ("config", "stored"),
    [
        ("deepseek-r1", ("fp8", None)),  # every linear layer fp8 e4m3, 128x128 block scales
        ("kimi-k2-instruct", ("fp8", None)),
        ("minimax-m2.5", ("fp8", None)),
        ("gpt-oss-120b", ("mxfp4", "bf16")),  # experts MXFP4; modules_to_not_convert keeps self_attn in bf16
        ("qwen3-32b", None),  # an unquantized checkpoint: the scenario's default applies
    ],
)
def test_the_checkpoints_formats_as_planner_dtypes(config, stored):
    assert checkpoint_weight_dtypes(_reference(config)) == stored


def test_deepseek_r1_is_planned_in_its_fp8_and_fits_eight_h200s():
    """The issue's first trust breaker: R1 declares FP8 weights and is served on 8 x H200 every day."""
    scenario = InferenceScenario(model="deepseek-r1", gpu="h200", num_gpus=8, tensor_parallel=8)
    assert (scenario.weight_dtype, scenario.attention_weight_dtype) == ("fp8", None)
    p = plan(scenario)
    assert p.memory.fits
    assert any("as stored" in a for a in p.assumptions)
    # Asking for bf16 explicitly is honoured, said to differ from the checkpoint, and does not fit.
    bf16 = plan(scenario.model_copy(update={"weight_dtype": "bf16"}))
    assert not bf16.memory.fits
    assert any("not as stored" in a for a in bf16.assumptions)


@pytest.mark.parametrize(("model", "published_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_weights_match_the_published_checkpoint_size(model, published_gib):
    """gpt-oss model card (OpenAI, arXiv 2508.10925), Table 1: checkpoint sizes 60.8 GiB and 12.8 GiB with
    MXFP4 experts (4.25 bits per weight with the E8M0 scale per 32) and everything else in bf16. One GPU
    holds the whole checkpoint; published to 0.1 GiB."""
    scenario = InferenceScenario(model=model, gpu="h200", num_gpus=1, tensor_parallel=1)
    assert (scenario.weight_dtype, scenario.attention_weight_dtype) == ("mxfp4", "bf16")
    weights = plan(scenario).memory.components["weights_bytes"] / GIB
    assert weights == pytest.approx(published_gib, abs=0.06)


def test_an_attention_override_moves_exactly_the_attention_bytes():
    """Llama 3.1 70B at TP4: the attention projections are 80 x (2 x 8192^2 + 2 x 8192 x 1024) parameters,
    a quarter of them per rank. fp8 MLP with bf16 attention (the FP8 checkpoints' layout) holds one more byte
    for each of those than all-fp8."""
    base = dict(model="llama-3.1-70b", num_gpus=4, tensor_parallel=4, weight_dtype="fp8")
    all_fp8 = plan(InferenceScenario(**base)).memory.components["weights_bytes"]
    mixed = plan(InferenceScenario(**base, attention_weight_dtype="bf16")).memory.components["weights_bytes"]
    attention_per_rank = 80 * (2 * 8192**2 + 2 * 8192 * 1024) / 4
    assert mixed - all_fp8 == attention_per_rank * (2 - 1)
    counts = parameter_counts(InferenceScenario(**base).architecture())
    assert counts.dense_layer.attention_sharded + counts.dense_layer.attention_kv == 2 * 8192**2 + 2 * 8192 * 1024


def test_the_sweep_keeps_the_attention_format_while_it_varies_the_weights():
    scenario = InferenceScenario(model="gpt-oss-120b", num_gpus=1, tensor_parallel=1)
    frame = evaluate_inference(scenario, pd.DataFrame([{"weight_dtype": "mxfp4"}, {"weight_dtype": "bf16"}]))
    assert frame.loc[0, "weights_bytes"] == plan(scenario).memory.components["weights_bytes"]
    bf16 = InferenceScenario(model="gpt-oss-120b", num_gpus=1, tensor_parallel=1, weight_dtype="bf16")
    assert bf16.attention_weight_dtype is None
    explicit = plan(bf16.model_copy(update={"attention_weight_dtype": "bf16"}))
    assert frame.loc[1, "weights_bytes"] == explicit.memory.components["weights_bytes"]


@pytest.mark.parametrize("weight_dtype", ["fp8", "bf16", "int4"])
def test_a_share_link_keeps_the_served_format_of_a_quantized_checkpoint(weight_dtype):
    scenario = InferenceScenario(
        model="deepseek-r1", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype=weight_dtype
    )
    decoded, warnings = query_params_to_scenario(scenario_to_query_params(scenario))
    assert not warnings
    assert decoded == scenario
