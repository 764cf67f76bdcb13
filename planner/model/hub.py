"""Import a model from the Hugging Face Hub: its config.json and its safetensors header counts.

Two halves:

- the pure core (no I/O): read a repo id (`org/name`, optional `@revision`, an `hf:` prefix or a
  huggingface.co URL), and turn a fetched config.json plus the checkpoint's element counts per dtype into an
  *imported config*: the config.json itself with a `_headroom` block (display name, source, revision, commit,
  `safetensors_parameters`). It plans exactly like an uploaded config.json, and a share link carries it
  inline, so the link works without network. The counts become a check in the architecture's assumptions
  (`planner.model.checkpoint_check`); weight memory keeps Headroom's own count.
- a thin fetch layer over `huggingface_hub`: `hf_hub_download` for config.json (its cache; its token
  handling: HF_TOKEN or the user's `hf auth login`, never read, logged or stored here) and
  `HfApi().get_safetensors_metadata(...).parameter_count`. Offline (HF_HUB_OFFLINE=1, or the Hub cannot be
  reached) config.json comes from the cache (`local_files_only=True`); the safetensors headers are not cached
  by huggingface_hub, so the check is skipped and the import says so.

Every failure is a `HubImportError` (a PlanningError) with one sentence: offline without cache, gated,
not found (with did-you-mean against the catalog's Hub ids), no such revision, no config.json, or a config
the parser rejects (its own message).

huggingface_hub is optional (`pip install "headroom[hub]"`): without it `hub_available()` is False and the
fetch raises HubImportError with the install command. The fetcher is injectable (`HubFetcher`), so tests and
other front ends never need the network.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from planner.errors import PlanningError, did_you_mean
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import catalog_model_ids, model_metadata
from planner.model.checkpoint_check import COUNTS_KEY, ParameterCheck, parameter_check
from planner.model.hf_config import architecture_from_config
from planner.safe_json import load_json

try:  # the optional `hub` extra; everything else in this module works without it
    import huggingface_hub as _hf
    from huggingface_hub import constants as _hf_constants
    from huggingface_hub import errors as _hf_errors
except ImportError:
    _hf = None
    _hf_constants = None
    _hf_errors = None

HUB_PREFIX = "hf:"
HUB_URL = "https://huggingface.co"
INSTALL_HINT = 'pip install "headroom[hub]"'
INSTALL_SENTENCE = (
    f"Importing from the Hugging Face Hub needs the huggingface_hub package: {INSTALL_HINT} "
    "(or upload the model's config.json instead)"
)
MAX_CONFIG_BYTES = 2 * 1024 * 1024
_NAME = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"^{_NAME}/{_NAME}$")
_REVISION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$")
_SNAPSHOT_COMMIT = re.compile(r"[/\\]snapshots[/\\]([0-9a-f]{40})[/\\]")
# A catalog entry's recorded source: "org/name config.json ..." or "org/name (note) config.json ...".
_SOURCE_REPO = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)\s+(?:\([^)]*\)\s+)?config\.json")


class HubImportError(PlanningError):
    """A model that could not be imported from the Hub, with one sentence saying why and what to do."""


# -------------------------------------------------------------------------------------- the pure core


@dataclass(frozen=True)
class HubRef:
    """A Hub model: `org/name` and an optional revision (branch, tag or commit)."""

    repo_id: str
    revision: str | None = None

    @property
    def text(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id

    @property
    def url(self) -> str:
        return f"{HUB_URL}/{self.repo_id}"


def is_hub_reference(text: Any) -> bool:
    """True for a scenario model written as `hf:org/name[@revision]`."""
    return isinstance(text, str) and text.strip().startswith(HUB_PREFIX)


def parse_hub_ref(text: str) -> HubRef:
    """`org/name`, `org/name@revision`, with an optional `hf:` prefix, or a huggingface.co URL (…/tree/REV)."""
    raw = text.strip()
    body = raw.removeprefix(HUB_PREFIX).strip()
    body = re.sub(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/", "", body).strip("/")
    revision: str | None = None
    if "@" in body:
        body, revision = body.split("@", 1)
    elif (tree := re.match(r"^([^/]+/[^/]+)/(?:tree|blob|resolve)/(.+)$", body)) is not None:
        body, revision = tree.group(1), tree.group(2).removesuffix("/config.json")
    if not _REPO_ID.match(body) or "--" in body or ".." in body:
        raise HubImportError(
            f"'{raw[:120]}' is not a Hugging Face model id: give owner/name, optionally @revision "
            "(e.g. meta-llama/Llama-3.1-8B or Qwen/Qwen3-8B@main)"
        )
    if revision is not None and (not _REVISION.match(revision) or ".." in revision):
        raise HubImportError(
            f"'{revision[:80]}' is not a revision of {body}: give a branch, tag or commit hash after the @ (e.g. @main)"
        )
    return HubRef(body, revision or None)


@lru_cache(maxsize=1)
def catalog_hub_ids() -> dict[str, str]:
    """Hub repo id -> catalog id, from each catalog entry's recorded source."""
    out = {}
    for model_id in catalog_model_ids():
        match = _SOURCE_REPO.match(str(model_metadata(model_id).get("source", "")))
        if match:
            out[match.group(1)] = model_id
    return out


def catalog_model_for(ref: HubRef) -> str | None:
    """The catalog id holding this Hub model's config.json (ids compare case-insensitively, as on the Hub);
    None when the catalog does not hold it, or a revision was asked for (then the Hub's copy is imported)."""
    if ref.revision is not None:
        return None
    by_lower = {hub_id.lower(): model_id for hub_id, model_id in catalog_hub_ids().items()}
    return by_lower.get(ref.repo_id.lower())


@dataclass(frozen=True)
class HubImport:
    """An imported model: `config` is what a scenario's `model` holds (config.json + the `_headroom` block)."""

    ref: HubRef
    config: dict[str, Any]
    architecture: ModelArchitecture
    commit: str | None = None
    from_cache_only: bool = False  # read offline from the local cache
    check: ParameterCheck | None = None
    check_skipped: str = ""  # why there is no check (a sentence), when there is none
    notes: tuple[str, ...] = field(default=())  # sentences for the CLI's stderr and the dashboard


def _source(ref: HubRef, commit: str | None) -> str:
    at = f" at revision {ref.revision}" if ref.revision else ""
    pinned = f" (commit {commit[:12]})" if commit else ""
    return f"{ref.repo_id} config.json from the Hugging Face Hub{at}{pinned}"


def imported_config(
    ref: HubRef, config: dict[str, Any], counts: dict[str, int] | None, commit: str | None = None
) -> dict[str, Any]:
    """The config.json with Headroom's `_headroom` block: what a scenario (and a share link) carries."""
    meta: dict[str, Any] = {"display_name": ref.text, "source": _source(ref, commit), "hub_id": ref.repo_id}
    if ref.revision:
        meta["revision"] = ref.revision
    if commit:
        meta["commit"] = commit
    if counts:
        meta[COUNTS_KEY] = dict(sorted(counts.items()))
    return {**{k: v for k, v in config.items() if k != "_headroom"}, "_headroom": meta}


def build_import(
    ref: HubRef,
    config_text: str | bytes,
    counts: dict[str, int] | None,
    commit: str | None = None,
    from_cache_only: bool = False,
    check_skipped: str = "",
) -> HubImport:
    """Fetched config.json text and safetensors counts -> a HubImport; HubImportError with the parser's
    sentence when the config is malformed or not a model Headroom can plan."""
    try:
        config = load_json(config_text, f"{ref.text} config.json", MAX_CONFIG_BYTES)
        if not isinstance(config, dict):
            raise PlanningError(f"{ref.text} config.json must hold a JSON object")
        clean_counts = {str(k): v for k, v in (counts or {}).items() if type(v) is int and v >= 0}
        full = imported_config(ref, config, clean_counts, commit)
        arch = architecture_from_config(full)  # the parser's own messages
    except HubImportError:
        raise
    except PlanningError as exc:
        message = str(exc)
        raise HubImportError(message if message.startswith(ref.text) else f"{ref.text}: {message}") from None
    check = parameter_check(arch, clean_counts) if clean_counts else None
    notes = [f"Imported {_source(ref, commit)}" + (", read offline from the local cache" if from_cache_only else "")]
    if check is not None:
        sentence = check.sentence()
        notes.append(sentence[0].upper() + sentence[1:])
    elif check_skipped:
        notes.append(check_skipped)
    return HubImport(
        ref=ref,
        config=full,
        architecture=arch,
        commit=commit,
        from_cache_only=from_cache_only,
        check=check,
        check_skipped="" if check is not None else check_skipped,
        notes=tuple(notes),
    )


def not_found_message(ref: HubRef) -> str:
    suggestion = did_you_mean(ref.repo_id, catalog_hub_ids())
    return (
        f"{ref.repo_id} was not found on the Hugging Face Hub{suggestion}; if it is private, log in with "
        "`hf auth login` or set HF_TOKEN to a token that can read it"
    )


def gated_message(ref: HubRef) -> str:
    return (
        f"{ref.repo_id} is gated: accept its licence at {ref.url} with your Hugging Face account, then set "
        "HF_TOKEN to a token of that account (or run `hf auth login`) and try again"
    )


def offline_message(ref: HubRef, why: str) -> str:
    return (
        f"{why}, and {ref.text} is not in the local Hugging Face cache: fetch it once while online, "
        "or upload its config.json instead"
    )


# ------------------------------------------------------------------------------------- the fetch layer


@dataclass(frozen=True)
class FetchedConfig:
    text: str
    commit: str | None = None
    from_cache_only: bool = False


class HubFetcher(Protocol):
    """Where config.json and the safetensors counts come from (the real Hub, or a test's fake)."""

    def config(self, ref: HubRef) -> FetchedConfig:
        """config.json's text; HubImportError with a sentence when it cannot be had."""
        ...

    def safetensors_counts(self, ref: HubRef, commit: str | None, offline: bool) -> dict[str, int]:
        """Elements per safetensors dtype; HubImportError (a sentence why) when they cannot be read."""
        ...


def hub_available() -> bool:
    """Whether huggingface_hub could be imported (the `hub` extra is installed)."""
    return _hf is not None


def _true(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub read it at import, or as it is set now."""
    if _true(os.environ.get("HF_HUB_OFFLINE")):
        return True
    return _hf_constants is not None and bool(getattr(_hf_constants, "HF_HUB_OFFLINE", False))


def _commit_of(path: str) -> str | None:
    match = _SNAPSHOT_COMMIT.search(path)
    return match.group(1) if match else None


def _status(exc: Exception) -> int | None:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def _hub_error(ref: HubRef, exc: Exception, what: str = "config.json") -> HubImportError:
    """The sentence for an exception of a huggingface_hub call (most specific type first)."""
    errors = _hf_errors
    if errors is None:
        return HubImportError(INSTALL_SENTENCE)
    if isinstance(exc, HubImportError):
        return exc
    if isinstance(exc, errors.GatedRepoError):
        return HubImportError(gated_message(ref))
    if isinstance(exc, errors.RepositoryNotFoundError):
        return HubImportError(not_found_message(ref))
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubImportError(f"{ref.repo_id} has no revision '{ref.revision}' (a branch, tag or commit hash)")
    if isinstance(exc, errors.LocalEntryNotFoundError):
        why = "Hugging Face Hub offline mode is on (HF_HUB_OFFLINE)" if hub_offline() else "The Hub cannot be reached"
        return HubImportError(offline_message(ref, why))
    if isinstance(exc, errors.EntryNotFoundError):
        at = f" at revision {ref.revision}" if ref.revision else ""
        return HubImportError(f"{ref.repo_id} has no {what}{at}, so it is not a transformers model Headroom can read")
    if (status := _status(exc)) is not None:
        return HubImportError(
            f"The Hugging Face Hub answered HTTP {status} for {ref.text}; try again later, or upload its config.json"
        )
    return HubImportError(
        f"{ref.text} could not be fetched from the Hugging Face Hub ({type(exc).__name__}); "
        "try again, or upload its config.json"
    )


def _connection_failure(exc: Exception) -> bool:
    """False when the Hub itself answered (a status, a missing repo, revision or file) or the call was
    refused before it went out: only a failed connection makes the local cache worth a try."""
    errors = _hf_errors
    if errors is None or isinstance(exc, (errors.HfHubHTTPError, errors.EntryNotFoundError, ValueError)):
        return False
    return _status(exc) is None


class HuggingFaceHubFetcher:
    """The real Hub through huggingface_hub: its cache, and its token (HF_TOKEN or the user's login), which
    this class never reads."""

    def _download(self, ref: HubRef, cache_only: bool) -> str:
        if _hf is None:
            raise HubImportError(INSTALL_SENTENCE)
        path = _hf.hf_hub_download(ref.repo_id, "config.json", revision=ref.revision, local_files_only=cache_only)
        return str(path)

    def config(self, ref: HubRef) -> FetchedConfig:
        offline = hub_offline()
        try:
            path = self._download(ref, cache_only=offline)
        # Any exception: huggingface_hub raises its own types for the Hub's answers, and its HTTP library's
        # (requests or httpx, by version) for a connection that failed; only those try the cache.
        except Exception as exc:
            if offline or not _connection_failure(exc):
                raise _hub_error(ref, exc) from None
            try:
                path = self._download(ref, cache_only=True)
            except Exception as cached:
                missing = _hf_errors is not None and isinstance(cached, _hf_errors.LocalEntryNotFoundError)
                why = f"The Hugging Face Hub cannot be reached ({type(exc).__name__})"
                raise (HubImportError(offline_message(ref, why)) if missing else _hub_error(ref, exc)) from None
            offline = True
        try:
            file = Path(path)
            if file.stat().st_size > MAX_CONFIG_BYTES:
                raise HubImportError(f"{ref.text} config.json is larger than {MAX_CONFIG_BYTES // (1 << 20)} MiB")
            text = file.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise HubImportError(f"{ref.text} config.json in the cache cannot be read ({type(exc).__name__})") from None
        return FetchedConfig(text=text, commit=_commit_of(path), from_cache_only=offline)

    def safetensors_counts(self, ref: HubRef, commit: str | None, offline: bool) -> dict[str, int]:
        skipped = "the parameter check against the checkpoint is skipped"
        if _hf is None or _hf_errors is None:
            raise HubImportError(f"huggingface_hub is not installed, so {skipped}")
        if offline:
            raise HubImportError(
                f"Offline, {skipped}: huggingface_hub caches config.json but not the safetensors headers"
            )
        try:
            metadata = _hf.HfApi().get_safetensors_metadata(ref.repo_id, revision=commit or ref.revision)
        except _hf_errors.NotASafetensorsRepoError:
            raise HubImportError(
                f"{ref.repo_id} has no safetensors weights (model.safetensors or its index), so {skipped}"
            ) from None
        except Exception as exc:  # the check is optional: any failure only skips it, with the reason
            if isinstance(exc, _hf_errors.GatedRepoError):
                reason = f"The safetensors headers of gated {ref.repo_id} cannot be read with this token"
            elif (status := _status(exc)) is not None:
                reason = f"The Hugging Face Hub answered HTTP {status} for the safetensors headers"
            elif _connection_failure(exc):
                reason = f"The Hugging Face Hub cannot be reached ({type(exc).__name__}) for the safetensors headers"
            else:
                reason = f"The safetensors headers cannot be read ({type(exc).__name__})"
            raise HubImportError(f"{reason}, so {skipped}") from None
        return {str(dtype): int(n) for dtype, n in dict(metadata.parameter_count).items()}


DEFAULT_FETCHER: HubFetcher = HuggingFaceHubFetcher()


def import_from_hub(text: str | HubRef, fetcher: HubFetcher | None = None) -> HubImport:
    """Fetch and read a Hub model (network or cache). HubImportError with one sentence on any failure;
    the safetensors counts are optional: without them the import says why there is no check."""
    ref = text if isinstance(text, HubRef) else parse_hub_ref(text)
    source = fetcher if fetcher is not None else DEFAULT_FETCHER
    fetched = source.config(ref)
    try:
        counts: dict[str, int] | None = source.safetensors_counts(ref, fetched.commit, fetched.from_cache_only)
        skipped = ""
    except HubImportError as exc:
        counts, skipped = None, str(exc)
    return build_import(ref, fetched.text, counts, fetched.commit, fetched.from_cache_only, skipped)


__all__ = [
    "DEFAULT_FETCHER",
    "HUB_PREFIX",
    "INSTALL_HINT",
    "INSTALL_SENTENCE",
    "FetchedConfig",
    "HubFetcher",
    "HubImport",
    "HubImportError",
    "HubRef",
    "HuggingFaceHubFetcher",
    "build_import",
    "catalog_hub_ids",
    "catalog_model_for",
    "hub_available",
    "hub_offline",
    "import_from_hub",
    "imported_config",
    "is_hub_reference",
    "parse_hub_ref",
]
