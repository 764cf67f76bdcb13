"""What the Hub import tests share: the recorded fixtures and a fake Hub (no network anywhere).

Configs are read from ../shared/reference/hf_configs/ (never copied into the repository); the safetensors
counts come from the hand-written tests/fixtures/hub_safetensors.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from planner.model.hub import FetchedConfig, HubImportError, HubRef
from tests.reference_data import require_reference

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hub_safetensors.json"
COUNTS = json.loads(FIXTURES.read_text())
OLMO = "allenai/OLMo-2-1124-7B"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def reference_text(repo_id: str) -> str:
    return (require_reference() / "hf_configs" / COUNTS[repo_id]["config"]).read_text()


def counts(repo_id: str) -> dict[str, int]:
    return dict(COUNTS[repo_id]["parameter_count"])


class FakeFetcher:
    """A Hub that answers from the reference configs and the fixture counts, counting its calls."""

    def __init__(self, config_error=None, counts_error=None, from_cache_only=False, stored=None):
        self.config_error, self.counts_error = config_error, counts_error
        self.from_cache_only, self.stored = from_cache_only, stored
        self.calls: list[str] = []

    def config(self, ref: HubRef) -> FetchedConfig:
        self.calls.append(ref.text)
        if self.config_error:
            raise HubImportError(self.config_error)
        return FetchedConfig(reference_text(ref.repo_id), COMMIT, self.from_cache_only)

    def safetensors_counts(self, ref: HubRef, commit, offline) -> dict[str, int]:
        if self.counts_error:
            raise HubImportError(self.counts_error)
        return self.stored if self.stored is not None else counts(ref.repo_id)
