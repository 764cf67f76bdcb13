"""Suggestions that fix a plan (planner.search.fixes, issue 23 item 7): the three cases the issue found, every
suggestion valid and fitting (those cases and a fuzz of random non-fitting scenarios), the ranking, the next GPU
up rule, and `diagnose` printing them with their links."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from pydantic import ValidationError

from planner import InferenceScenario, PlanningError
from planner.cli.main import main
from planner.dtypes import BYTES_PER_ELEMENT, kv_format_served
from planner.hardware.catalog import get_accelerator, list_accelerators
from planner.inference.workload import Traffic
from planner.plan import static_plan
from planner.scenario import parse_scenario
from planner.search import fix_search
from planner.search.fixes import CHANGES_WORKLOAD, Suggestions, suggest_fixes
from planner.search.nearest import nearest_fitting
from planner.share import query_params_to_scenario
from planner.training.scenario import TrainingScenario

# The three cases. 70B pre-training on 256 H100 with no model parallelism: 374 GiB per GPU.
PRETRAIN = TrainingScenario(model="llama-3.1-70b", num_gpus=256, global_batch_size=256)
# Qwen3-235B-A22B in bf16 on 4 x H100 (TP4): 119 GiB per GPU; fp8 weights fit.
QWEN_BF16 = InferenceScenario(model="qwen3-235b-a22b", weight_dtype="bf16")
# Llama-3.1-70B fp8 at a 32k context (prompt + output) x 64 users on 4 x H100: the bf16 KV cache alone is 160 GiB.
LONG_CONTEXT = InferenceScenario(model="llama-3.1-70b", weight_dtype="fp8", prompt_tokens=32_768 - 512, concurrency=64)
CASES = {"pretrain": PRETRAIN, "qwen_bf16": QWEN_BF16, "long_context": LONG_CONTEXT}


@pytest.fixture(scope="module")
def found() -> dict[str, Suggestions]:
    return {name: suggest_fixes(s) for name, s in CASES.items()}


def of_kind(fixes: Suggestions, kind: str) -> list:
    return [s for s in fixes.items if s.kind == kind]


def assert_valid_and_fitting(scenario, fixes: Suggestions) -> None:
    """Every suggestion: a scenario that validates and whose full plan fits, the headline figures of that plan,
    a link that opens exactly that scenario, and a change from the original."""
    assert fixes.items, scenario
    for s in fixes.items:
        changed = parse_scenario(s.scenario)
        result = static_plan(changed)
        assert result.memory.fits, s.label
        assert s.cost == pytest.approx(fix_search.plan_cost(changed, result)) and s.changes, s.label
        assert s.headroom_bytes == pytest.approx(result.memory.headroom_bytes)
        assert s.headline.startswith("fits: ")
        link = urlsplit(s.link)
        assert link.path == f"/{scenario.kind}"
        opened, warnings = query_params_to_scenario(parse_qs(link.query), scenario.kind, f"{scenario.kind}_")
        assert warnings == [] and opened == changed, s.label


def assert_ranked(fixes: Suggestions) -> None:
    """Two tiers by cost; number formats milder first among their own places; no scenario twice."""
    tiers = [s.kind in CHANGES_WORKLOAD for s in fixes.items]
    assert tiers == sorted(tiers)
    for tier in (False, True):
        items = [s for s in fixes.items if (s.kind in CHANGES_WORKLOAD) == tier]
        others = [s.cost for s in items if s.kind != "precision"]
        assert others == sorted(others)
        formats = [s for s in items if s.kind == "precision" and s.scenario["kind"] == "inference"]
        losses = [
            fix_search.format_rank(s.scenario["weight_dtype"]) + fix_search.format_rank(s.scenario["kv_cache_dtype"])
            for s in formats
        ]
        assert losses == sorted(losses)
    scenarios = [json.dumps(s.scenario, sort_keys=True) for s in fixes.items]
    assert len(set(scenarios)) == len(scenarios)


# ------------------------------------------------------------------------------------- the cases


def test_pretraining_on_256_h100_suggests_a_layout_on_the_same_gpus(found):
    assert not static_plan(PRETRAIN).memory.fits
    assert [n.kind for n in nearest_fitting(PRETRAIN)] == ["smaller_model"]  # what the issue saw: a smaller model only
    fixes = found["pretrain"]
    assert_valid_and_fitting(PRETRAIN, fixes)
    assert_ranked(fixes)
    (layout,) = of_kind(fixes, "layout")
    changed = TrainingScenario.model_validate(layout.scenario)
    assert (changed.num_gpus, changed.gpu) == (256, "h100-sxm") and changed.model == PRETRAIN.model
    assert changed.tensor_parallel * changed.pipeline_parallel * changed.context_parallel > 1
    # TP8/PP4 fits (the layout): the suggested layout is the cheapest that fits, so it costs no more.
    tp8_pp4 = static_plan(
        TrainingScenario.model_validate({**PRETRAIN.model_dump(), "tensor_parallel": 8, "pipeline_parallel": 4})
    )
    assert tp8_pp4.memory.fits and layout.cost <= tp8_pp4.cost.usd_total
    assert fixes.items[0].kind != "smaller_model"  # a change that keeps the model ranks first
    assert fixes.cost_basis == "usd_total" and "cost of the whole run" in fixes.ranked_by


def test_qwen3_235b_bf16_on_4_h100_suggests_fp8_before_any_4_bit_format(found):
    fixes = found["qwen_bf16"]
    assert_valid_and_fitting(QWEN_BF16, fixes)
    assert_ranked(fixes)
    weights = [s.scenario["weight_dtype"] for s in fixes.items if s.kind == "precision"]
    assert "fp8" in weights
    four_bit = [w for w in weights if BYTES_PER_ELEMENT[w] < 1]
    assert all(weights.index("fp8") < weights.index(w) for w in four_bit)
    first_format = next(s for s in fixes.items if s.kind == "precision")
    assert first_format.label == "weights bf16 → fp8" and first_format.changes == {"weight_dtype": ("bf16", "fp8")}
    assert (
        "$ per 1M output tokens" in fixes.ranked_by
        and first_format.tpot_seconds
        and first_format.output_tokens_per_second
    )


def test_70b_fp8_at_32k_x_64_users_suggests_more_gpus_the_next_gpu_up_and_fewer_users(found):
    fixes = found["long_context"]
    assert_valid_and_fitting(LONG_CONTEXT, fixes)
    assert_ranked(fixes)
    (more,) = of_kind(fixes, "more_gpus")
    more_gpus = InferenceScenario.model_validate(more.scenario)
    assert more_gpus.gpu == "h100-sxm" and more_gpus.num_gpus > LONG_CONTEXT.num_gpus
    assert more_gpus.concurrency == 64 and more_gpus.context_tokens == LONG_CONTEXT.context_tokens
    (bigger,) = of_kind(fixes, "next_gpu")
    assert bigger.scenario["gpu"] == "h200" == fixes.next_gpu
    (fewer,) = of_kind(fixes, "fewer_users")
    users = fewer.scenario["concurrency"]
    assert 1 <= users < 64 and fewer.label == f"{users} users instead of 64"
    # The most that fit: one more user does not.
    one_more = InferenceScenario.model_validate({**fewer.scenario, "concurrency": users + 1})
    assert not static_plan(one_more).memory.fits
    # Changing what is served ranks after every change that keeps it.
    kinds = [s.kind for s in fixes.items]
    assert kinds.index("fewer_users") > max(kinds.index("more_gpus"), kinds.index("next_gpu"))


def test_a_plan_that_fits_gets_no_suggestions_and_a_stream_is_kept_in_each_answer():
    assert suggest_fixes(InferenceScenario()).items == []
    streamed = InferenceScenario.model_validate({**LONG_CONTEXT.model_dump(), "traffic": Traffic()})
    fixes = suggest_fixes(streamed)
    assert fixes.items and all(s.scenario["traffic"] is not None for s in fixes.items)
    assert [s.label for s in fixes.items] == [s.label for s in suggest_fixes(LONG_CONTEXT).items]


# ------------------------------------------------------------------------------------- fuzz


def random_scenarios(seed: int, wanted: int):
    """Valid scenarios that do not fit, drawn at random (catalog models and GPUs, layouts, lengths, users)."""
    rng = np.random.default_rng(seed)
    models = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "mixtral-8x7b", "qwen3-32b", "qwen3-235b-a22b"]
    gpus = ["h100-sxm", "a100-40gb", "l40s", "mi300x", "h200", "rtx-4090"]
    out = []
    while len(out) < wanted:
        tp = int(rng.choice([1, 2, 4]))
        common = dict(model=str(rng.choice(models)), gpu=str(rng.choice(gpus)), tensor_parallel=tp)
        if rng.random() < 0.6:
            data = dict(
                kind="inference",
                **common,
                num_gpus=tp * int(rng.choice([1, 2])),
                weight_dtype=str(rng.choice(["bf16", "fp8"])),
                prompt_tokens=int(rng.choice([1024, 8192, 30000])),
                concurrency=int(rng.choice([16, 128, 512])),
            )
        else:
            data = dict(
                kind="training",
                **common,
                num_gpus=tp * int(rng.choice([1, 4, 8])),
                global_batch_size=64,
                sequence_length=int(rng.choice([2048, 8192])),
            )
        try:
            scenario = parse_scenario(data)
            if static_plan(scenario).memory.fits:
                continue
        except (ValidationError, PlanningError):
            continue
        out.append(scenario)
    return out


@pytest.mark.parametrize("scenario", random_scenarios(seed=23, wanted=6), ids=lambda s: f"{s.kind}-{s.model}-{s.gpu}")
def test_every_suggestion_for_a_random_scenario_validates_and_fits(scenario):
    fixes = suggest_fixes(scenario)
    if fixes.items:
        assert_valid_and_fitting(scenario, fixes)
        assert_ranked(fixes)
    else:
        assert fixes.not_found


# ------------------------------------------------------------------------------------- the next GPU up


def test_the_next_gpu_up_follows_its_rule_over_the_whole_catalog():
    expected = {
        "h100-sxm": "h200",
        "h200": "b200",
        "b200": "b300",  # B300 and GB300 NVL72 tie on memory; B300 is cheaper
        "a100-40gb": "a100-80gb",  # H100 SXM (79.6 GiB) and A100 80GB (80 GiB) tie; the A100 is cheaper
        "a100-80gb": "h200",
        "mi300x": "mi325x",
        "h100-pcie": "h100-nvl",
        "rtx-4090": "rtx-5090",
    }
    for gpu, up in expected.items():
        assert fix_search.next_gpu_up(get_accelerator(gpu)).id == up, gpu
    assert fix_search.next_gpu_up(get_accelerator("cpu")) is None
    assert fix_search.next_gpu_up(get_accelerator("mi355x")) is None  # the largest of its vendor
    catalog = list_accelerators()
    for accel in catalog:
        up = fix_search.next_gpu_up(accel)
        qualifies = [
            a
            for a in catalog
            if a.vendor == accel.vendor
            and a.memory_bytes >= 1.1 * accel.memory_bytes
            and a.peak_flops("bf16") >= accel.peak_flops("bf16")
            and a.memory_bandwidth_bytes_per_second >= accel.memory_bandwidth_bytes_per_second
            and a.interconnect_bandwidth_bytes_per_second >= accel.interconnect_bandwidth_bytes_per_second
            and a.gpus_per_node >= accel.gpus_per_node
        ]
        if not qualifies:
            assert up is None, accel.id
            continue
        least = min(a.memory_bytes for a in qualifies)
        tier = [a for a in qualifies if a.memory_bytes <= 1.1 * least]
        assert up in tier and up.reference_usd_per_hour == min(a.reference_usd_per_hour for a in tier), accel.id


def test_a_price_override_is_not_carried_to_the_next_gpu():
    priced = InferenceScenario.model_validate({**LONG_CONTEXT.model_dump(), "usd_per_gpu_hour": 1.0})
    (bigger,) = of_kind(suggest_fixes(priced), "next_gpu")
    assert bigger.scenario["usd_per_gpu_hour"] is None and bigger.changes["usd_per_gpu_hour"] == (1.0, None)


# ------------------------------------------------------------------------------------- the CLI


def test_diagnose_prints_the_ranked_suggestions_with_their_links(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(QWEN_BF16.model_dump_json())
    assert main(["diagnose", str(path), "--app-url", "https://headroom.example"]) == 0
    out = json.loads(capsys.readouterr().out)
    items = out["suggestions"]["items"]
    assert [s["label"] for s in items] == [s.label for s in suggest_fixes(QWEN_BF16).items]
    assert all(s["link"].startswith("https://headroom.example/inference?") for s in items)
    assert main(["diagnose", str(path), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "Suggestions that fix the plan:\n  Ranked by $ per 1M output tokens" in text
    assert "  1. [precision] weights bf16 → fp8\n     changes: weights bf16 → fp8\n     fits: " in text
    assert "     http://localhost:8501/inference?" in text
    assert "Next GPU up (here: h200): the catalog accelerator of the same vendor" in text


def test_kv_formats_are_offered_only_where_the_engine_caches_k_v_in_them():
    """int4 and int8 KV are LMDeploy's / TensorRT-LLM's / llama.cpp's, not vLLM's (planner.dtypes.kv_runtimes)."""
    assert kv_format_served("fp8", "vllm@0.6") and kv_format_served("bf16", "llama.cpp")
    assert not kv_format_served("int4", "vllm") and not kv_format_served("int8", "sglang")
    assert kv_format_served("int8", "tensorrt-llm-engine") and kv_format_served("int4", "llama.cpp")
    crowded = InferenceScenario(model="llama-3.1-70b", weight_dtype="fp8", prompt_tokens=32000, concurrency=64)
    for s in suggest_fixes(crowded).items:
        assert s.scenario.get("kv_cache_dtype", "bf16") in ("bf16", "fp16", "fp8"), s.label
