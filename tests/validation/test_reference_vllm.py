"""Published memory figures (shared/reference/memory_measured.csv) against the engine.

vLLM paper (Kwon et al., SOSP'23) OPT rows, the Hugging Face Llama 3.1 KV table, and the DeepSeek
MLA cache sizes. Units are stated per row: the vLLM paper's "GB" is decimal (1e9 B) for parameter
memory but its KV sizes follow from slots x 819,200 B and come out in GiB; the HF blog's "GB" is GiB.

KV-slot rows (M007, M009, M011) are reproduced with gpu_memory_utilization = 0.90, the default of the
vLLM release that accompanied the paper (v0.1, June 2023). That release sized the KV pool as
`0.90 x total GPU memory - peak torch-allocated memory of a profiling forward pass` (weights plus the
activations of a max_num_batched_tokens = 2560 batch); the CUDA context, NCCL buffers and CUDA graph
pools live outside the torch allocator and were not subtracted. The engine charges them (0.75 GiB on
one GPU, 1.0 GiB with NCCL), so the comparison is made twice: with the engine's own accounting
(conservative, documented gap) and with a calibration record whose runtime-overhead correction
removes them (vLLM-0.1 accounting). The profiling batch is mirrored with prefill_chunk_tokens = 2560.
"""

from __future__ import annotations

import csv
import re

import pytest

from planner import InferenceScenario, plan
from planner.calibration_record import CalibrationRecord
from planner.hardware.catalog import get_accelerator
from planner.model.architecture import (
    kv_cache_bytes_per_token,
    kv_elements_per_token_per_layer,
    parameter_counts,
)
from planner.model.catalog import resolve_model
from planner.model.hf_config import architecture_from_config
from planner.physics import memory as mem
from planner.physics.efficiency import DEFAULT_EFFICIENCY

GIB = 1 << 30
from tests.calibration.synthetic import synthetic_record  # noqa: E402
from tests.reference_data import require_reference  # noqa: E402

ROWS = {row["id"]: row for row in csv.DictReader((require_reference() / "memory_measured.csv").open(newline=""))}


def row_value(row_id: str) -> float:
    return float(ROWS[row_id]["value"])


def paper_slots(row_id: str) -> float:
    """'Max # KV cache slots (tokens) = 15.7K' in the row's notes."""
    match = re.search(r"=\s*([\d.]+)K", ROWS[row_id]["notes"])
    assert match, ROWS[row_id]["notes"]
    return float(match.group(1)) * 1e3


# ---------------------------------------------------------------------------------------------
# OPT-13B: per-token and per-request KV (M001, M002)


def test_opt13b_kv_per_token_is_819200_bytes():
    arch = resolve_model("opt-13b")
    # 2 (K, V) x 40 layers x 5120 hidden x 2 bytes = 819,200 B; the paper writes "800 KB" (KiB: 819,200 / 1024)
    assert kv_cache_bytes_per_token(arch, 2) == 2 * 40 * 5120 * 2 == 819_200
    assert 819_200 / 1024 == row_value("M001") == 800


def test_opt13b_one_2048_token_request():
    arch = resolve_model("opt-13b")
    one_request = mem.kv_cache_bytes(arch, 1, 1, 1, 2048, 2)
    assert one_request == 2048 * 819_200 == 1_677_721_600  # 1.68e9 B (decimal GB)
    # the paper's "1.6 GB" is 2048 x 800 KB = 1,638,400 KB rounded, i.e. 1.5625 GiB
    assert one_request / GIB == 1.5625
    assert round(one_request / GIB, 1) == row_value("M002")


# ---------------------------------------------------------------------------------------------
# weights (M006, M008, M010): decimal GB


@pytest.mark.parametrize(
    "row_id,model,gpu,tp",
    [
        ("M006", "opt-13b", "a100-40gb", 1),
        ("M008", "opt-66b", "a100-40gb", 4),
        ("M010", "opt-175b", "a100-80gb", 8),
    ],
)
def test_parameter_memory_decimal_gb(row_id, model, gpu, tp):
    p = _plan(model, gpu, tp)
    all_gpus = p.memory.components["weights_bytes"] * tp
    # OPT-13B: 12,853,473,280 params x 2 B = 25.71e9 B -> "26 GB" (GiB would be 23.9 -> "24").
    # Sharded models add the replicated position table and LayerNorms on every rank (+0.1 %).
    # Tolerance 1.5 %: the paper rounds to whole GB (OPT-175B: 349.2e9 B vs "346 GB", -0.9 %).
    assert all_gpus / 1e9 == pytest.approx(row_value(row_id), rel=0.015)
    if row_id == "M006":
        assert p.memory.components["weights_bytes"] == 12_853_473_280 * 2
        assert round(all_gpus / 1e9) == 26


# ---------------------------------------------------------------------------------------------
# KV slots (M007, M009, M011)

SLOT_ROWS = [
    # row, model, gpu, TP, tolerance under vLLM-0.1 accounting
    ("M007", "opt-13b", "a100-40gb", 1, 0.04),
    ("M009", "opt-66b", "a100-40gb", 4, 0.04),
    ("M011", "opt-175b", "a100-80gb", 8, 0.07),
]


def _scenario(model, gpu, tp, **overrides):
    fields = dict(
        model=model,
        gpu=gpu,
        num_gpus=tp,
        tensor_parallel=tp,
        weight_dtype="fp16",
        kv_cache_dtype="fp16",
        prompt_tokens=1536,
        output_tokens=512,
        concurrency=2,
        kv_block_tokens=16,
        gpu_memory_utilization=0.90,
        prefill_chunk_tokens=2560,
    )
    fields.update(overrides)
    return InferenceScenario(**fields)


def _plan(model, gpu, tp, vllm01_accounting=False, **overrides):
    scenario = _scenario(model, gpu, tp, **overrides)
    p = plan(scenario)
    if not vllm01_accounting:
        return p
    # A real calibration record for this GPU: default efficiencies, a correction that removes the runtime reserve.
    record = synthetic_record(
        label="vLLM 0.1 accounting (CUDA context / NCCL / graphs outside the budget)",
        correction=-p.memory.components["runtime_overhead_bytes"],
    )
    calibration = CalibrationRecord.from_json_data(
        {
            **record.model_dump(mode="json"),
            "reference_gpu": scenario.gpu_id(),
            "efficiency": DEFAULT_EFFICIENCY.model_dump(),
        }
    )
    return plan(scenario, calibration)


def _slots(p) -> int:
    return p.memory.kv_blocks * 16


def _kv_per_token_per_gpu(model, tp):
    arch = resolve_model(model)
    return arch.num_layers * kv_elements_per_token_per_layer(arch, tp) * 2


@pytest.mark.parametrize("row_id,model,gpu,tp,tolerance", SLOT_ROWS)
def test_kv_slots_vllm01_accounting(row_id, model, gpu, tp, tolerance):
    """Measured: 13B 15,344 (-2.3 %), 66B 9,360 (-3.5 %), 175B 56,592 (-5.8 %). The remaining gap of the
    first two is the engine's activation reserve for a 2560-token prefill (13B: 0.367e9 B = 448 slots),
    which vLLM 0.1 barely saw; 175B is looser because the paper's row itself needs more than 0.90 of
    memory (see test_opt175b_row_needs_more_than_090_utilization)."""
    slots = _slots(_plan(model, gpu, tp, vllm01_accounting=True))
    assert slots == pytest.approx(paper_slots(row_id), rel=tolerance)
    assert slots <= paper_slots(row_id)  # the engine never promises more than the paper measured


@pytest.mark.parametrize("row_id,model,gpu,tp", [r[:4] for r in SLOT_ROWS])
def test_kv_slots_default_accounting_gap_is_the_runtime_reserve(row_id, model, gpu, tp):
    """The default runtime is vLLM V1, whose non-torch reserve (0.25 GiB at TP1, 2.1 GiB per GPU from TP2,
    5.7 GiB from TP8) the paper's 2023 engine did not have, so it holds fewer slots than the paper measured
    (66B at TP4 most of all: 2.1 GiB per GPU of a small KV remainder). The gap to the vLLM-0.1 accounting
    is exactly that reserve divided by the KV bytes per token per GPU, to within one block."""
    default, vllm01 = _plan(model, gpu, tp), _plan(model, gpu, tp, vllm01_accounting=True)
    reserve = default.memory.components["runtime_overhead_bytes"]
    expected_gap = reserve / _kv_per_token_per_gpu(model, tp)  # 13B: 805,306,368 / 819,200 = 983 slots
    assert _slots(vllm01) - _slots(default) == pytest.approx(expected_gap, abs=16)
    assert 0.5 * paper_slots(row_id) <= _slots(default) < paper_slots(row_id)


@pytest.mark.parametrize("row_id,model,gpu,tp", [r[:4] for r in SLOT_ROWS[:2]])
def test_kv_slots_weights_only_budget_reproduces_paper(row_id, model, gpu, tp):
    """0.90 x capacity - weights, divided by KV bytes per token per GPU: within 1 % of the paper for
    OPT-13B (15,792 vs 15.7K) and OPT-66B (9,757 vs 9.7K). This is the engine's weight and KV arithmetic
    alone, and it shows vLLM 0.1's budget was essentially capacity x 0.90 - weights."""
    p = _plan(model, gpu, tp)
    capacity = get_accelerator(gpu).memory_bytes
    room = 0.90 * capacity - p.memory.components["weights_bytes"]
    assert room / _kv_per_token_per_gpu(model, tp) == pytest.approx(paper_slots(row_id), rel=0.01)


def test_kv_slots_via_max_concurrency():
    """max_concurrency x context is the same budget counted in whole sequences (2048-token OPT context)."""
    p = _plan("opt-13b", "a100-40gb", 1, vllm01_accounting=True)
    assert p.memory.max_concurrency == 7  # floor(15,344 / 2,048)
    assert p.memory.max_concurrency * 2048 <= _slots(p) < (p.memory.max_concurrency + 1) * 2048


def test_opt175b_row_needs_more_than_090_utilization():
    """The paper's OPT-175B row is not reachable at 0.90: 60.1K slots x 589,824 B/token/GPU = 35.4e9 B plus
    43.65e9 B of fp16 weights per GPU is 92.1 % of an 80 GiB A100 (the 13B and 66B rows come out at 89.8 %)."""
    capacity = get_accelerator("a100-80gb").memory_bytes
    weights = parameter_counts(resolve_model("opt-175b")).total * 2 / 8
    needed = paper_slots("M011") * _kv_per_token_per_gpu("opt-175b", 8) + weights
    assert needed / capacity == pytest.approx(0.921, abs=0.002)
    for row_id, model, gpu, tp in [("M007", "opt-13b", "a100-40gb", 1), ("M009", "opt-66b", "a100-40gb", 4)]:
        w = parameter_counts(resolve_model(model)).total * 2 / tp
        share = (paper_slots(row_id) * _kv_per_token_per_gpu(model, tp) + w) / get_accelerator(gpu).memory_bytes
        assert share == pytest.approx(0.898, abs=0.002)


def test_kv_memory_gb_rows_are_gib():
    """M007/M009/M011 'memory for KV cache' = slots x KV bytes per token, in GiB (12 / 21 / 264)."""
    for row_id, model in (("M007", "opt-13b"), ("M009", "opt-66b"), ("M011", "opt-175b")):
        per_token = kv_cache_bytes_per_token(resolve_model(model), 2)
        assert paper_slots(row_id) * per_token / GIB == pytest.approx(row_value(row_id), rel=0.02)


def test_memory_shares_fig1():
    """Fig. 1: ~65 % weights and ~30 % KV on an A100-40GB serving OPT-13B. The 65 % is 26 GB / 40 GB in the
    paper's mixed units (decimal weights over the card's nominal 40); in bytes it is 25.7e9 / 42.9e9 = 59.9 %."""
    p = _plan("opt-13b", "a100-40gb", 1, vllm01_accounting=True)
    capacity = p.memory.capacity_bytes
    assert round(p.memory.components["weights_bytes"] / 1e9) / 40 == pytest.approx(row_value("M003") / 100)
    kv_room = _slots(p) * 819_200
    assert kv_room / capacity == pytest.approx(row_value("M004") / 100, abs=0.02)  # 29.3 %


# ---------------------------------------------------------------------------------------------
# Llama 3.1 KV (M070-M072), Hugging Face blog, GiB


def _blog(row_id):
    return [float(v) for v in ROWS[row_id]["value"].split("/")]


# The blog's rows reproduce with 1k = 1,024 tokens, 16k = 16,000 and 128k = 128,000 tokens, in GiB.
BLOG_TOKENS = (1024, 16_000, 128_000)


@pytest.mark.parametrize(
    "row_id,model,per_token",
    [
        ("M070", "llama-3.1-8b", 2 * 32 * 8 * 128 * 2),  # 131,072 B
        ("M071", "llama-3.1-70b", 2 * 80 * 8 * 128 * 2),  # 327,680 B
    ],
)
def test_llama31_kv_blog_figures(row_id, model, per_token):
    arch = resolve_model(model)
    assert kv_cache_bytes_per_token(arch, 2) == per_token
    for tokens, published in zip(BLOG_TOKENS, _blog(row_id)):
        gib = mem.kv_cache_bytes(arch, 1, 1, 1, tokens, 2) / GIB
        assert gib == pytest.approx(published, rel=0.005, abs=0.0005)


def test_llama31_405b_kv_derivation():
    arch = resolve_model("llama-3.1-405b")
    # 2 x 126 layers x 8 KV heads x 128 x 2 B = 516,096 B per token
    assert kv_cache_bytes_per_token(arch, 2) == 2 * 126 * 8 * 128 * 2 == 516_096
    # the blog's 405B row is exactly twice this (as if 16 KV heads): see the xfail below
    for tokens, published in zip(BLOG_TOKENS, _blog("M072")):
        assert published == pytest.approx(2 * tokens * 516_096 / GIB, rel=0.005)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "PUBLISHED FIGURE DISAGREES, not an engine bug: the HF Llama 3.1 blog lists 0.984 / 15.38 / 123.05 GB for "
        "405B, exactly 2x the derivation from Meta's config (126 layers, n_kv_heads 8, head_dim 128: 516,096 B/token "
        "-> 0.492 / 7.69 / 61.5 GiB). The 8B and 70B rows of the same table match the same formula exactly."
    ),
)
def test_llama31_405b_kv_matches_blog():
    arch = resolve_model("llama-3.1-405b")
    for tokens, published in zip(BLOG_TOKENS, _blog("M072")):
        assert mem.kv_cache_bytes(arch, 1, 1, 1, tokens, 2) / GIB == pytest.approx(published, rel=0.005)


# ---------------------------------------------------------------------------------------------
# DeepSeek MLA (models.csv note, M028, M029)


def test_deepseek_v3_kv_bytes_per_token():
    arch = resolve_model("deepseek-v3")
    # (kv_lora_rank 512 + rope 64) x 61 layers = 35,136 elements; x 2 B = 70,272 B (models.csv note)
    assert kv_cache_bytes_per_token(arch, 2) == 70_272
    # every TP rank holds the whole latent
    assert mem.kv_cache_bytes(arch, 8, 1, 1, 1, 2) == 70_272


def test_deepseek_v2_mla_elements_formula():
    """M028: (d_c + d_h^R) x l ~= 4.5 d_h l, with d_c = 4 d_h = 512 and d_h^R = d_h / 2 = 64."""
    arch = resolve_model("deepseek-v2")
    per_token = kv_cache_bytes_per_token(arch, 1)  # elements at 1 byte each
    assert per_token == (512 + 64) * 60 == 34_560
    assert per_token == 4.5 * 128 * 60
    # M030 (large MoE ablation, MLA 34.6K elements) is the same 34,560
    assert per_token / 1e3 == pytest.approx(34.6, abs=0.05)
    # equal to GQA with 2.25 groups: 2 x 2.25 x 128 x 60
    assert per_token == 2 * 2.25 * 128 * 60


def test_deepseek_v2_lite_mla_vs_mha_elements():
    """M029 small-MoE ablation: MHA 110.6K vs MLA 15.6K elements per token (27 layers, 16 heads of 128)."""
    lite = resolve_model("deepseek-v2-lite")
    assert kv_cache_bytes_per_token(lite, 1) == 576 * 27 == 15_552  # "15.6K"
    mha = architecture_from_config(
        {
            "model_type": "llama",
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "head_dim": 128,
            "intermediate_size": 10944,
            "num_hidden_layers": 27,
            "vocab_size": 102400,
        }
    )
    assert kv_cache_bytes_per_token(mha, 1) == 2 * 16 * 128 * 27 == 110_592  # "110.6K"
    assert ROWS["M029"]["value"] == "MHA 110.6K / MLA 15.6K"
