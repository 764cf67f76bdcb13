"""Where the published reference tables live: `../shared/reference/` beside the checkout.

CI clones the repository next to a copy of shared/, so the sibling path is the contract. Set
HEADROOM_REFERENCE to point elsewhere. Tests that need the tables fail (never silently skip) under CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def reference_dir() -> Path | None:
    candidates = [
        os.environ.get("HEADROOM_REFERENCE"),
        REPO.parent / "shared" / "reference",
        REPO / "shared" / "reference",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "models.csv").exists():
            return Path(candidate)
    return None


REFERENCE = reference_dir()


def require_reference() -> Path:
    """The reference directory, or a skip locally / a failure under CI when it is missing."""
    if REFERENCE is None:
        if os.environ.get("CI"):
            pytest.fail("shared/reference/ is missing beside the checkout (set HEADROOM_REFERENCE)")
        pytest.skip("shared/reference/ not present beside the checkout", allow_module_level=True)
    return REFERENCE
