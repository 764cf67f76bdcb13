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


# ---------------------------------------------------------------------------------- speculative decoding

DEEPSEEK = dict(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8)


@pytest.mark.parametrize(
    "speculative, extra, expected",
    [
        ({"method": "mtp"}, DEEPSEEK, {"inference_speculative": "mtp"}),
        ({}, {}, {"inference_speculative": "eagle"}),
        (
            {
                "method": "draft_model",
                "draft_model": "llama-3.2-1b",
                "num_speculative_tokens": 5,
                "acceptance_rate": 0.75,
            },
            {},
            {
                "inference_speculative": "draft_model",
                "inference_speculative_num_speculative_tokens": "5",
                "inference_speculative_acceptance_rate": "0.75",
                "inference_speculative_draft_model": "llama-3.2-1b",
            },
        ),
    ],
)
def test_speculative_decoding_travels_as_readable_parameters_and_round_trips(speculative, extra, expected):
    scenario = InferenceScenario(speculative=speculative, **extra)
    params = scenario_to_query_params(scenario, "inference_")
    assert {k: v for k, v in params.items() if "speculative" in k} == expected
    back, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert back == scenario and warnings == []


def test_speculative_marker_true_and_the_blob_form_are_read():
    back, warnings = query_params_to_scenario({"speculative": "true", "speculative_num_speculative_tokens": "2"})
    assert back.speculative.method == "eagle" and back.speculative.num_speculative_tokens == 2 and not warnings
    blob = encode_inline({"method": "eagle", "num_speculative_tokens": 4})
    back, warnings = query_params_to_scenario({"speculative": blob})
    assert back.speculative.num_speculative_tokens == 4 and not warnings
    assert query_params_to_scenario({"speculative": "off"})[0].speculative is None


@pytest.mark.parametrize(
    "params, expected_words",
    [
        ({"speculative": "bogus"}, ["'speculative' = 'bogus' is invalid", "draft_model, eagle or mtp"]),
        ({"speculative": "mtp"}, ["ships no multi-token-prediction modules", "shown without it"]),
        ({"speculative": "draft_model"}, ["needs draft_model"]),
        (
            {"speculative": "draft_model", "speculative_draft_model": "qwen3-0.6b"},
            ["vocabulary of 151,936 tokens", "shown without it"],
        ),
        ({"speculative": "eagle", "pipeline_parallel": "2", "tensor_parallel": "2"}, ["pipeline_parallel=1"]),
    ],
)
def test_a_speculative_link_that_cannot_work_is_planned_without_it_and_says_why(params, expected_words):
    scenario, warnings = query_params_to_scenario(params)
    assert scenario.speculative is None
    text = " ".join(warnings)
    for words in expected_words:
        assert words in text, text
    if "pipeline_parallel" in params:
        assert scenario.pipeline_parallel == 2  # the rest of the link is kept


def test_bad_speculative_inner_values_are_named_and_defaulted():
    scenario, warnings = query_params_to_scenario(
        {"speculative": "eagle", "speculative_num_speculative_tokens": "99", "speculative_acceptance_rate": "1.5"}
    )
    assert scenario.speculative.num_speculative_tokens == 3 and scenario.speculative.acceptance_rate is None
    assert any("speculative_num_speculative_tokens' = '99'" in w for w in warnings)
    assert any("speculative_acceptance_rate' = '1.5'" in w for w in warnings)
