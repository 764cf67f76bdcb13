"""Share links: defaults omitted, exact round trip, every bad parameter named and replaced."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from planner.inference.scenario import InferenceScenario
from planner.share import (
    decode_inline,
    encode_inline,
    query_params_to_scenario,
    scenario_to_query_params,
    share_url,
)


def test_default_scenario_has_no_parameters():
    assert scenario_to_query_params(InferenceScenario(), "inference_") == {}
    assert share_url(InferenceScenario(), "http://x") == "http://x/inference"


def test_round_trip_through_a_url_is_exact():
    scenario = InferenceScenario(
        model="mixtral-8x7b",
        gpu="a100-80gb",
        num_gpus=4,
        tensor_parallel=2,
        expert_parallel=2,
        weight_dtype="int4",
        weight_group_size=64,
        kv_cache_dtype="fp8",
        prompt_tokens=777,
        output_tokens=99,
        concurrency=3,
        gpu_memory_utilization=0.85,
        prefix_cache_hit_rate=0.25,
        usd_per_gpu_hour=1.75,
        decision="chose int4 to fit on 4 GPUs & save $",
    )
    url = share_url(scenario, "https://headroom.example")
    query = {k: v for k, v in parse_qs(urlparse(url).query).items()}
    restored, warnings = query_params_to_scenario(query, "inference", "inference_")
    assert warnings == []
    assert restored == scenario


def test_inline_model_config_survives_a_link():
    config = {
        "model_type": "llama",
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }
    scenario = InferenceScenario(model=config, num_gpus=1, tensor_parallel=1)
    params = scenario_to_query_params(scenario, "p_")
    assert params["p_model"].startswith("cfg:")
    assert decode_inline(params["p_model"]) == config
    restored, warnings = query_params_to_scenario(params, "inference", "p_")
    assert warnings == [] and restored == scenario


@pytest.mark.parametrize(
    "key, value, fragment",
    [
        ("p_concurrency", "lots", "p_concurrency"),
        ("p_concurrency", "-4", "p_concurrency"),
        ("p_concurrency", "1e99", "p_concurrency"),
        ("p_weight_dtype", "fp7", "p_weight_dtype"),
        ("p_model", "no-such-model", "p_model"),
        ("p_model", "cfg:!!!notbase64", "p_model"),
        ("p_gpu", "tpu-v9", "p_gpu"),
        ("p_prompt_tokens", "𝟙𝟚𝟛", "p_prompt_tokens"),
        ("p_label", "x" * 20000, "p_label"),
        ("p_bogus", "1", "Unknown link parameter 'p_bogus'"),
    ],
)
def test_bad_parameter_is_named_and_defaulted(key, value, fragment):
    scenario, warnings = query_params_to_scenario({key: value}, "inference", "p_")
    assert scenario == InferenceScenario()
    assert any(fragment in w for w in warnings), warnings


def test_impossible_layout_falls_back_to_default_layout_with_reason():
    scenario, warnings = query_params_to_scenario(
        {"p_tensor_parallel": "3", "p_num_gpus": "3", "p_concurrency": "5"}, "inference", "p_"
    )
    assert scenario.tensor_parallel == InferenceScenario().tensor_parallel
    assert scenario.concurrency == 5  # the valid, unrelated parameter is kept
    assert any("does not divide" in w and "64 attention heads" in w for w in warnings), warnings


def test_repeated_parameter_uses_last_value_and_says_so():
    scenario, warnings = query_params_to_scenario({"p_concurrency": ["8", "16"]}, "inference", "p_")
    assert scenario.concurrency == 16
    assert any("2 times" in w for w in warnings)


def test_zip_bomb_inline_config_is_rejected():
    import base64
    import zlib

    bomb = "cfg:" + base64.urlsafe_b64encode(zlib.compress(b'{"a":"' + b"x" * 5_000_000 + b'"}', 9)).decode()
    with pytest.raises(ValueError):
        decode_inline(bomb)
    scenario, warnings = query_params_to_scenario({"p_model": bomb}, "inference", "p_")
    assert scenario == InferenceScenario() and warnings


def test_inline_round_trip_helpers():
    value = {"a": [1, 2, {"b": None}], "c": "ü"}
    assert decode_inline(encode_inline(value)) == value
