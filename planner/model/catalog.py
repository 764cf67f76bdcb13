"""The built-in model catalog (one config.json per model) and resolving a scenario's model reference."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from planner.errors import PlanningError, did_you_mean
from planner.model.architecture import ModelArchitecture
from planner.model.hf_config import architecture_from_config
from planner.model.synthetic import parse_size_id, synthetic_architecture

MODELS_DIR = Path(__file__).with_name("configs")


@lru_cache(maxsize=1)
def catalog_model_ids() -> tuple[str, ...]:
    return tuple(sorted(path.stem for path in MODELS_DIR.glob("*.json")))


@cache
def _read(model_id: str) -> str:
    path = MODELS_DIR / f"{model_id}.json"
    try:
        return path.read_text()
    except OSError as exc:
        raise PlanningError(f"catalog file {path} cannot be read: {exc.strerror}") from None


def load_catalog_config(model_id: str) -> dict[str, Any]:
    """The catalog's config.json for `model_id` (a fresh dict each call)."""
    if model_id not in catalog_model_ids():
        raise PlanningError(
            f"unknown model '{model_id}'{did_you_mean(model_id, catalog_model_ids())}; use a catalog id "
            f"({', '.join(catalog_model_ids())}), a size such as 'dense-70b' or 'moe-400b', or the model's "
            'config.json itself as a JSON object ("model": {"model_type": ..., "hidden_size": ..., ...})'
        )
    try:
        return json.loads(_read(model_id))
    except RecursionError:
        raise PlanningError(f"catalog file {MODELS_DIR / (model_id + '.json')} is corrupt: nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise PlanningError(
            f"catalog file {MODELS_DIR / (model_id + '.json')} is corrupt: {exc.msg} (line {exc.lineno})"
        ) from None


def model_metadata(model_id: str) -> dict[str, Any]:
    """Display name, published sizes and source of a catalog model (the `_headroom` block)."""
    meta = load_catalog_config(model_id).get("_headroom") or {}
    return {"display_name": model_id, **meta}


@lru_cache(maxsize=256)
def _catalog_architecture(model_id: str) -> ModelArchitecture:
    config = load_catalog_config(model_id)
    return architecture_from_config(config, name=config.get("_headroom", {}).get("display_name", model_id))


def resolve_model(reference: str | dict[str, Any] | ModelArchitecture) -> ModelArchitecture:
    """A catalog id, a size id ('dense-70b', 'moe-1t'), an inline config.json dict, or an architecture."""
    if isinstance(reference, ModelArchitecture):
        return reference
    if isinstance(reference, str):
        size = parse_size_id(reference)
        if size is not None:
            moe, params = size
            return _synthetic(params, moe)
        if reference.startswith("hf:"):  # fetched by the CLI and the dashboard, never here (planner.model.hub)
            raise PlanningError(
                f"'{reference[:120]}' is a Hugging Face Hub model, which the engine does not fetch: the CLI imports it "
                "(python -m planner hub ...) and the dashboard's Hub id box does, and a scenario or link then holds "
                "its config.json"
            )
        return _catalog_architecture(reference)
    if isinstance(reference, dict):
        return architecture_from_config(reference)
    raise PlanningError("model must be a catalog id, a size such as 'dense-70b', or a config.json object")


@lru_cache(maxsize=64)
def _synthetic(params: float, moe: bool) -> ModelArchitecture:
    return synthetic_architecture(params, moe)
