"""Built-in models (Hugging Face style config.json files) and accelerators (one JSON file)."""

from planner.catalog.hardware import (
    Accelerator,
    catalog_problems,
    get_accelerator,
    list_accelerators,
    resolve_accelerator,
)
from planner.catalog.model_catalog import (
    catalog_model_ids,
    load_catalog_config,
    model_metadata,
    resolve_model,
)

__all__ = [
    "Accelerator",
    "catalog_problems",
    "get_accelerator",
    "list_accelerators",
    "resolve_accelerator",
    "catalog_model_ids",
    "load_catalog_config",
    "model_metadata",
    "resolve_model",
]
