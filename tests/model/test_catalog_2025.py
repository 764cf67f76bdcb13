"""The 2025-26 catalog entries equal transformers' own model classes built on the meta device, the
vision tower and projector of the multimodal ones included (skipped without transformers)."""

from __future__ import annotations

import pytest

from planner.model.architecture import parameter_counts
from planner.model.catalog import load_catalog_config, resolve_model
from tests.model.builders import transformers_meta_count

NEW = [
    "gpt-oss-20b",
    "gpt-oss-120b",
    "llama-4-scout",
    "llama-4-maverick",
    "gemma-3-27b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "qwen3-next-80b-a3b",
    "deepseek-r1",
    "kimi-k2",
    "glm-4.5-air",
    "olmo-2-32b",
    "phi-4",
    "minimax-m2.5",
]


@pytest.mark.parametrize("model_id", NEW)
def test_catalog_entry_equals_the_transformers_class(model_id):
    counts = parameter_counts(resolve_model(model_id))
    assert counts.total_with_vision == transformers_meta_count(load_catalog_config(model_id))


@pytest.mark.parametrize("model_id", NEW)
def test_catalog_entry_names_its_hugging_face_source(model_id):
    meta = load_catalog_config(model_id)["_headroom"]
    owner_repo = meta["source"].split(" ")[0]
    assert "/" in owner_repo and meta["source"].startswith(f"{owner_repo} config.json"), meta["source"]
    assert meta["published_params_note"] and meta["published_params_total"] > 1e9
