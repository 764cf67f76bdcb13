"""The real config.json of 26 models released in 2025-26 (shared/reference/hf_configs/): each plans, and
its parameter count equals an independent count.

Three independent counts, strongest first:
1. transformers' own model class built on the `meta` device (parameters + the buffers a checkpoint
   stores), when transformers is installed (every family except Nemotron-NAS, which is remote code);
2. the torch builders of tests/model/builders.py and tests/validation/test_param_counts_torch.py;
3. the published figure of the model card (or technical report), within the precision it is quoted to.
The configs are read where they lie (never copied into the repository); without shared/ the module
skips locally and fails under CI (tests/reference_data.py).
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from planner.model.architecture import parameter_counts
from planner.model.cache import linear_attention_state_elements, mamba_state_elements
from planner.model.catalog import resolve_model
from planner.model.hf_config import architecture_from_config
from tests.model import builders
from tests.reference_data import require_reference
from tests.validation.test_param_counts_torch import BUILDERS as CLASSIC_BUILDERS
from tests.validation.test_param_counts_torch import build_deepseek, build_llama_family

HF_CONFIGS = require_reference() / "hf_configs"
NAMES = sorted(path.stem for path in HF_CONFIGS.glob("*.json"))


def config(name: str) -> dict:
    return json.loads((HF_CONFIGS / f"{name}.json").read_text())


def test_the_reference_set_is_there():
    assert len(NAMES) == 26, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_reference_config_plans(name):
    arch = architecture_from_config(config(name))
    assert parameter_counts(arch).total > 1e8
    assert len(arch.layers) == arch.num_layers


# ---------------------------------------------------------------------------------------------
# 1. transformers' own classes on the meta device

NOT_IN_TRANSFORMERS = {"nemotron-nas": "DeciLM (Nemotron-NAS) is remote code, not a transformers class"}


@pytest.mark.parametrize("name", NAMES)
def test_equals_the_transformers_class_on_meta(name):
    cfg = config(name)
    if cfg["model_type"] in NOT_IN_TRANSFORMERS:
        pytest.skip(NOT_IN_TRANSFORMERS[cfg["model_type"]])
    counts = parameter_counts(architecture_from_config(cfg))
    assert counts.total_with_vision == builders.transformers_meta_count(cfg)


# ---------------------------------------------------------------------------------------------
# 2. independent torch builders (no transformers needed)


def build_deepseek_v32(cfg: dict) -> torch.nn.Module:
    model = build_deepseek(cfg)
    for layer in model.layers:
        layer.self_attn.indexer = builders.build_deepseek_v32_indexer(cfg)
    return model


def build_ministral3(cfg: dict) -> torch.nn.Module:
    return build_llama_family(cfg["text_config"] if "text_config" in cfg else cfg)


BUILDERS = {
    **CLASSIC_BUILDERS,
    "deepseek_v32": build_deepseek_v32,
    "gemma3_text": builders.build_gemma3,
    "nemotron_h": builders.build_nemotron_h,
    "nemotron-nas": builders.build_nemotron_nas,
    "ministral3": build_ministral3,
}


@pytest.mark.parametrize("name", NAMES)
def test_language_model_equals_an_independent_torch_build(name):
    cfg = config(name)
    with torch.device("meta"):
        model = BUILDERS[cfg["model_type"]](cfg)
    assert parameter_counts(architecture_from_config(cfg)).total == sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------
# 3. published figures (total; active with the card's convention), with their sources

PUBLISHED = {
    # name: (total, active or None, active convention, source)
    "deepseek-r1": ("671B", "37B", "all", "DeepSeek-R1 model card: 671B total, 37B activated (main model)"),
    "deepseek-v3.1": ("671B", "37B", "all", "DeepSeek-V3.1 model card: 671B total, 37B activated"),
    "gemma-3-1b-it": ("1B (nominal)", None, "", "Gemma 3 model card: 1B"),
    "glm-4.5-air": ("106B", "12B", "no_embedding_no_head", "Z.ai GLM-4.5 README: 106B total, 12B active"),
    "gpt-oss-20b": ("20.9B", "3.6B", "no_embedding", "OpenAI gpt-oss model card: 20.9B total, 3.6B active"),
    "gpt-oss-120b": ("116.8B", "5.1B", "no_embedding", "OpenAI gpt-oss model card: 116.8B total, 5.1B active"),
    "kimi-k2-instruct": ("1T (nominal)", "32B", "all", "Moonshot Kimi-K2 model card: 1T total, 32B activated"),
    "llama-3.3-nemotron-super-49b-v1": ("49B (nominal)", None, "", "NVIDIA Llama-3.3-Nemotron-Super-49B model card"),
    "llama-4-maverick-17b-128e-instruct": ("400B", "17B", "all", "Meta Llama 4 model card: 400B total, 17B active"),
    "llama-4-scout-17b-16e-instruct": (
        "109B",
        "17B",
        "all",
        "Meta Llama 4 model card: 109B total (with vision), 17B active",
    ),
    "minimax-m2.5": ("230B", "10B", "no_embedding_no_head", "MiniMax-M2 model card: 230B total, 10B activated"),
    "ministral-3-3b-2512": (
        "3.4B",
        None,
        "",
        "Mistral Ministral 3 3B model card: 3.4B language model + 0.4B vision encoder",
    ),
    "nemotron-3-nano-30b-a3b-bf16": (
        "31.6B",
        "3.6B",
        "all",
        "NVIDIA Nemotron 3 Nano model card: 31.6B total, 3.6B active with embeddings",
    ),
    "nemotron-h-56b-base-8k": ("56B (nominal)", None, "", "NVIDIA Nemotron-H-56B model card"),
    "olmo-2-0325-32b": ("32B", None, "", "Ai2 OLMo-2-0325-32B model card: 32B"),
    "olmo-2-1124-13b": ("13B (nominal)", None, "", "Ai2 OLMo-2-1124-13B model card"),
    "olmo-2-1124-7b": ("7B (nominal)", None, "", "Ai2 OLMo-2-1124-7B model card"),
    "phi-4": ("14B (nominal)", None, "", "Microsoft phi-4 model card: 14B"),
    "phi-4-mini-instruct": ("3.8B", None, "", "Microsoft Phi-4-mini-instruct model card: 3.8B"),
    "qwen3-8b": ("8.2B", None, "", "Qwen3-8B model card: 8.2B (6.95B non-embedding)"),
    "qwen3-32b": ("32.8B", None, "", "Qwen3-32B model card: 32.8B (31.2B non-embedding)"),
    "qwen3-235b-a22b": ("235B", "22B", "all", "Qwen3-235B-A22B model card: 235B total, 22B activated"),
    "qwen3-coder-480b-a35b-instruct": (
        "480B",
        "35B",
        "all",
        "Qwen3-Coder-480B-A35B model card: 480B total, 35B activated",
    ),
    "qwen3-next-80b-a3b-thinking": ("80B", None, "", "Qwen3-Next-80B-A3B model card: 80B in total"),
}
# Not listed: deepseek-v3.2 (checked against R1 + its indexers below) and glm-4.7-fp8 (its source config is
# abridged: no attention_bias / use_qk_norm; the published 358B also counts the MTP layer).


def figure(text: str) -> tuple[float, float]:
    """'20.9B' -> (20.9e9, 1 %); '7B (nominal)' -> (7e9, 10 %); '32B' -> (32e9, 0.5/32): the larger of 1 % and
    half a unit of the last quoted digit, 10 % for nominal sizes (as tests/validation/test_param_counts_torch)."""
    match = re.match(r"(\d+(?:\.\d+)?)([MBT])", text)
    assert match, text
    number, unit = match.groups()
    value = float(number) * {"M": 1e6, "B": 1e9, "T": 1e12}[unit]
    if "nominal" in text:
        return value, 0.10
    decimals = len(number.split(".")[1]) if "." in number else 0
    return value, max(0.01, 0.5 * 10**-decimals / float(number))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_matches_the_published_figure(name):
    total_text, _, _, source = PUBLISHED[name]
    value, tolerance = figure(total_text)
    counts = parameter_counts(architecture_from_config(config(name)))
    total = counts.total_with_vision if "with vision" in source else counts.total
    assert total == pytest.approx(value, rel=tolerance), f"{name}: {total:,} vs {total_text} ({source})"


@pytest.mark.parametrize("name", sorted(n for n in PUBLISHED if PUBLISHED[n][1]))
def test_active_matches_the_published_figure(name):
    _, active_text, convention, source = PUBLISHED[name]
    value, tolerance = figure(active_text)
    counts = parameter_counts(architecture_from_config(config(name)))
    left_out = {"all": 0, "no_embedding": counts.embedding, "no_embedding_no_head": counts.embedding + counts.lm_head}
    active = counts.active - left_out[convention]
    assert active == pytest.approx(value, rel=max(tolerance, 0.03)), f"{name}: {active:,} vs {active_text} ({source})"


def test_gpt_oss_active_is_the_card_figure_without_the_embedding():
    # 116,829,156,672 total; 36 MoE layers x 128 experts, 4 routed per token; embedding 201,088 x 2,880
    counts = parameter_counts(architecture_from_config(config("gpt-oss-120b")))
    assert counts.embedding == 201_088 * 2_880  # 579,133,440
    assert round((counts.active - counts.embedding) / 1e7) == 513  # the card's 5.13B (OpenAI model card table)


def test_gemma_3_1b_matches_the_technical_report_split():
    # Gemma 3 technical report, Table 1: 1B = 302M embedding + 698M non-embedding parameters (no vision)
    counts = parameter_counts(architecture_from_config(config("gemma-3-1b-it")))
    assert round(counts.embedding / 1e6) == 302 and round(counts.non_embedding / 1e6) == 698


def test_gemma_3_27b_catalog_matches_the_technical_report_split():
    # Gemma 3 technical report, Table 1: 27B = 25,600M non-embedding; the shared SigLIP encoder 417M
    counts = parameter_counts(resolve_model("gemma-3-27b"))
    assert round(counts.non_embedding / 1e6) == 25_600
    projector = 1152 * 5376 + 1152  # Gemma3MultiModalProjector: mm_input_projection_weight + its RMSNorm
    assert round((counts.vision_encoder - projector) / 1e6) == 417


def test_ministral_3_vision_encoder_is_the_published_0_4b():
    counts = parameter_counts(architecture_from_config(config("ministral-3-3b-2512")))
    assert counts.vision_encoder == pytest.approx(0.4e9, rel=0.125)  # '0.4B': +-0.05B


def test_deepseek_v32_is_r1_plus_one_indexer_per_layer():
    r1 = parameter_counts(architecture_from_config(config("deepseek-r1")))
    v32 = parameter_counts(architecture_from_config(config("deepseek-v3.2")))
    # DeepseekV32Indexer: wq_b 1536 x 64 x 128, wk 7168 x 128, k_norm 2 x 128, weights_proj 7168 x 64
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert indexer == 13_959_424
    assert v32.total == r1.total + 61 * indexer


# ---------------------------------------------------------------------------------------------
# per-layer structure of the real models


def test_layer_kinds_of_the_real_hybrids():
    assert architecture_from_config(config("gpt-oss-120b")).layer_kind_counts == {
        "sliding window 128": 18,
        "full attention": 18,
    }
    assert architecture_from_config(config("gemma-3-1b-it")).layer_kind_counts == {
        "sliding window 512": 22,  # 26 layers, every 6th global: 5, 11, 17, 23
        "full attention": 4,
    }
    scout = architecture_from_config(config("llama-4-scout-17b-16e-instruct"))
    assert scout.layer_kind_counts == {"chunked local 8192": 36, "full attention": 12}
    assert sum(not layer.rope for layer in scout.layers) == 12  # the global layers are NoPE
    qwen_next = architecture_from_config(config("qwen3-next-80b-a3b-thinking"))
    assert qwen_next.layer_kind_counts == {"linear attention": 36, "full attention": 12}
    pattern = config("nemotron-h-56b-base-8k")["hybrid_override_pattern"]
    nemotron = architecture_from_config(config("nemotron-h-56b-base-8k"))
    assert nemotron.layer_kind_counts == {
        "mamba": pattern.count("M"),
        "full attention": pattern.count("*"),
        "no mixer": pattern.count("-"),
    }
    assert pattern.count("*") == 10 and len(pattern) == 118
    nas = architecture_from_config(config("llama-3.3-nemotron-super-49b-v1"))
    assert nas.layer_kind_counts == {"full attention": 49, "no mixer": 31}


def test_recurrent_state_sizes_of_the_real_hybrids():
    qwen_next = architecture_from_config(config("qwen3-next-80b-a3b-thinking"))
    # 32 value heads x 128 x 128; conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 3 x 8192 (vLLM
    # gated_delta_net_state_shape: 548,864 elements a layer together)
    assert linear_attention_state_elements(qwen_next) == (524_288, 24_576)
    nemotron = architecture_from_config(config("nemotron-h-56b-base-8k"))
    # 256 heads x 64 x state 256; conv (4 - 1) x (256 x 64 + 2 x 8 x 256)
    assert mamba_state_elements(nemotron) == (4_194_304, 3 * 20_480)


def test_parsed_quantization_and_dtype_facts():
    assert architecture_from_config(config("deepseek-v3.2")).quantization.scale_format == "ue8m0"
    assert architecture_from_config(config("kimi-k2-instruct")).quantization.weight_block_size == (128, 128)
    assert architecture_from_config(config("qwen3-32b")).checkpoint_dtype == "bfloat16"
    assert architecture_from_config(config("olmo-2-0325-32b")).checkpoint_dtype == "float32"
