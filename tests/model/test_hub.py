"""Hugging Face Hub import (planner/model/hub.py, planner/model/checkpoint_check.py), never on the network.

Configs come from ../shared/reference/hf_configs/ (read there, never copied); the safetensors counts from the
hand-written tests/fixtures/hub_safetensors.json. The pure core is tested directly and through a fake fetcher;
the huggingface_hub fetch layer with `hf_hub_download` and `HfApi.get_safetensors_metadata` replaced by fakes
that return files or raise huggingface_hub's own exceptions (those tests skip when it is not installed).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import planner.model.hub as hub
from planner import InferenceScenario, PlanningError, plan
from planner.model.architecture import parameter_counts
from planner.model.catalog import resolve_model
from planner.model.checkpoint_check import AGREE_FRACTION, parameter_check
from planner.model.hf_config import architecture_from_config
from planner.model.hub import HubImportError, build_import, import_from_hub, parse_hub_ref
from tests.hub_fakes import COMMIT, OLMO, FakeFetcher, counts, reference_text

# ------------------------------------------------------------------------------------- repo ids


@pytest.mark.parametrize(
    ("text", "repo_id", "revision"),
    [
        ("allenai/OLMo-2-1124-7B", OLMO, None),
        ("  allenai/OLMo-2-1124-7B  ", OLMO, None),
        ("allenai/OLMo-2-1124-7B@main", OLMO, "main"),
        ("hf:allenai/OLMo-2-1124-7B@v1.0", OLMO, "v1.0"),
        (f"Qwen/Qwen3-8B@{COMMIT}", "Qwen/Qwen3-8B", COMMIT),
        ("Qwen/Qwen3-8B@refs/pr/12", "Qwen/Qwen3-8B", "refs/pr/12"),
        ("https://huggingface.co/Qwen/Qwen3-8B", "Qwen/Qwen3-8B", None),
        ("huggingface.co/Qwen/Qwen3-8B/", "Qwen/Qwen3-8B", None),
        ("https://huggingface.co/Qwen/Qwen3-8B/tree/dev", "Qwen/Qwen3-8B", "dev"),
        ("https://huggingface.co/Qwen/Qwen3-8B/blob/abc123/config.json", "Qwen/Qwen3-8B", "abc123"),
        ("openai-community/gpt2", "openai-community/gpt2", None),
    ],
)
def test_repo_ids_and_revisions_are_read(text, repo_id, revision):
    ref = parse_hub_ref(text)
    assert (ref.repo_id, ref.revision) == (repo_id, revision)
    assert ref.text == (f"{repo_id}@{revision}" if revision else repo_id)


@pytest.mark.parametrize(
    "text",
    [
        "gpt2",
        "",
        "org/",
        "/name",
        "a/b/c",
        "org--x/name",
        "org/na..me",
        "org/-name",
        "org/name-",
        "org/na me",
        "o/" + "n" * 97,
    ],
)
def test_what_is_not_a_repo_id_is_one_sentence(text):
    with pytest.raises(HubImportError, match="is not a Hugging Face model id: give owner/name"):
        parse_hub_ref(text)


@pytest.mark.parametrize("revision", ["", "../main", "-x", "a b", "x" * 201])
def test_a_bad_revision_is_named(revision):
    with pytest.raises(HubImportError, match="is not a revision of org/name"):
        parse_hub_ref(f"org/name@{revision}")


def test_catalog_models_are_found_by_hub_id_without_a_revision():
    assert hub.catalog_model_for(parse_hub_ref("meta-llama/Llama-3.1-8B")) == "llama-3.1-8b"
    assert hub.catalog_model_for(parse_hub_ref("META-LLAMA/llama-3.1-8b")) == "llama-3.1-8b"  # ids ignore case
    assert hub.catalog_model_for(parse_hub_ref("meta-llama/Llama-3.1-8B@main")) is None  # a revision imports
    assert hub.catalog_model_for(parse_hub_ref(OLMO)) is None


def test_is_hub_reference():
    assert hub.is_hub_reference("hf:org/name") and hub.is_hub_reference(" hf:org/name@main")
    assert not hub.is_hub_reference("llama-3.1-8b") and not hub.is_hub_reference({"model_type": "llama"})


# ------------------------------------------------------------------------------------- the pure core


def test_an_import_is_the_config_json_with_its_source_and_counts():
    imported = build_import(parse_hub_ref(f"{OLMO}@main"), reference_text(OLMO), counts(OLMO), COMMIT)
    original = json.loads(reference_text(OLMO))
    config = imported.config
    assert {k: v for k, v in config.items() if k != "_headroom"} == original  # the config.json, verbatim
    assert config["_headroom"] == {
        "display_name": f"{OLMO}@main",
        "source": f"{OLMO} config.json from the Hugging Face Hub at revision main (commit {COMMIT[:12]})",
        "hub_id": OLMO,
        "revision": "main",
        "commit": COMMIT,
        "safetensors_parameters": {"F32": 7_298_617_344},
    }
    assert imported.architecture.name == f"{OLMO}@main"
    assert imported.commit == COMMIT and not imported.from_cache_only
    # It plans exactly like the same config.json uploaded: the import changes nothing but the name and a check.
    plain = architecture_from_config(original)
    assert parameter_counts(imported.architecture).as_dict() == parameter_counts(plain).as_dict()
    assert resolve_model(config) == imported.architecture


def test_an_exact_count_is_reported_as_exact():
    imported = build_import(parse_hub_ref(OLMO), reference_text(OLMO), counts(OLMO))
    check = imported.check
    assert check is not None and check.difference == 0 and check.agrees
    # 7,298,617,344 (the fixture's hand arithmetic) = Headroom's count from config.json
    assert check.checkpoint_parameters == check.headroom_parameters == 7_298_617_344
    sentence = imported.architecture.assumptions[-1]
    assert sentence == (
        "checkpoint check: the Hub's safetensors headers store F32 7,298,617,344 elements, i.e. 7,298,617,344 "
        "parameters, exactly Headroom's count from config.json"
    )
    assert imported.notes[-1] == sentence[0].upper() + sentence[1:]


def test_a_difference_is_reported_and_weight_memory_keeps_headrooms_count():
    """No hook takes a checkpoint's count for weight memory: the difference is an assumption of the plan."""
    more = {"F32": 7_298_617_344 + 100_000_000}
    imported = build_import(parse_hub_ref(OLMO), reference_text(OLMO), more)
    check = imported.check
    assert check is not None and check.difference == 100_000_000 and check.agrees is False
    assert check.relative_difference == pytest.approx(100_000_000 / 7_398_617_344)
    sentence = check.sentence()
    assert "Headroom counts 7,298,617,344 from config.json (100,000,000 fewer, 1.35%" in sentence
    assert "MTP layers" in sentence and sentence.endswith("weight memory uses Headroom's count")

    scenario = dict(gpu="h100-sxm", num_gpus=1, tensor_parallel=1)
    checked = plan(InferenceScenario(model=imported.config, **scenario))
    unchecked = plan(InferenceScenario(model=json.loads(reference_text(OLMO)), **scenario))
    assert f"Config of {OLMO}: {sentence}." in checked.assumptions
    assert checked.memory.components == unchecked.memory.components
    assert checked.model.params_total == unchecked.model.params_total == 7_298_617_344


def test_a_difference_inside_the_tolerance_agrees():
    within = {"F32": 7_298_617_344 + int(7_298_617_344 * AGREE_FRACTION / 2)}
    check = build_import(parse_hub_ref(OLMO), reference_text(OLMO), within).check
    assert check is not None and check.agrees and "within rounding" in check.sentence()


def test_fewer_stored_parameters_than_headroom_counts():
    check = build_import(parse_hub_ref(OLMO), reference_text(OLMO), {"F32": 6_000_000_000}).check
    assert check is not None and check.difference == 6_000_000_000 - 7_298_617_344
    assert "1,298,617,344 more" in check.sentence() and "does not store" in check.sentence()


def test_mxfp4_experts_are_unpacked_from_their_u8_blocks_and_scales():
    """gpt-oss keeps its experts as U8: 16 bytes of 4-bit pairs + 1 e8m0 scale per 32 weights = 17 bytes."""
    imported = build_import(
        parse_hub_ref("openai/gpt-oss-20b"), reference_text("openai/gpt-oss-20b"), counts("openai/gpt-oss-20b")
    )
    check = imported.check
    assert check is not None
    # 10,152,345,600 U8 x 32/17 = 19,110,297,600 expert weights; + 1,804,459,584 BF16 = 20,914,757,184
    assert check.checkpoint_parameters == 19_110_297_600 + 1_804_459_584 == 20_914_757_184
    assert check.difference == 0 and "MXFP4 U8 elements x 32/17" in check.sentence()


def test_block_scaled_fp8_counts_include_their_scales_and_an_mtp_layer_shows():
    imported = build_import(
        parse_hub_ref("deepseek-ai/DeepSeek-R1"),
        reference_text("deepseek-ai/DeepSeek-R1"),
        counts("deepseek-ai/DeepSeek-R1"),
    )
    check = imported.check
    assert check is not None and check.checkpoint_parameters == 3_900_000_000 + 680_000_000_000 + 41_000_000
    assert check.agrees is False and "scales included" in check.sentence()
    assert check.headroom_parameters == parameter_counts(imported.architecture).total_with_vision


def test_packed_integer_weights_of_other_methods_are_not_guessed():
    config = json.loads(reference_text(OLMO))
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128}
    arch = architecture_from_config(config)
    check = parameter_check(arch, {"I32": 900_000_000, "F16": 1_200_000_000})
    assert check.checkpoint_parameters is None and check.difference is None and check.agrees is None
    assert "pack awq weights into I32 elements" in check.sentence()
    assert check.sentence().endswith("weight memory uses Headroom's count from config.json")


def test_integer_buffers_of_an_unquantized_checkpoint_are_left_out():
    check = parameter_check(
        architecture_from_config(json.loads(reference_text(OLMO))), {"F32": 7_298_617_344, "I64": 4096}
    )
    assert check.difference == 0 and "I64 buffers not counted" in check.sentence()


@pytest.mark.parametrize(
    "bad",
    [[1, 2], {"F32": -1}, {"F32": 1.5}, {"F32": True}, {"bf16": 3}, {"F32": "7"}, {f"F{i}": 1 for i in range(40)}],
)
def test_malformed_counts_in_an_inline_config_are_refused(bad):
    config = json.loads(reference_text(OLMO))
    config["_headroom"] = {"safetensors_parameters": bad}
    with pytest.raises(PlanningError, match="_headroom.safetensors_parameters must map safetensors dtypes"):
        resolve_model(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", f"{OLMO} config.json is not valid JSON"),
        ("[1, 2]", f"{OLMO} config.json must hold a JSON object"),
        (json.dumps({"model_type": "bert", "hidden_size": 768}), f"{OLMO}: model_type 'bert' is not supported"),
        (json.dumps({"model_type": "llama", "hidden_size": 4096}), f"{OLMO}: config.json is missing"),
        (b"\xff\xfe\x00", f"{OLMO} config.json is not UTF-8 text"),
    ],
)
def test_a_malformed_or_unsupported_config_keeps_the_parsers_sentence(text, message):
    with pytest.raises(HubImportError) as caught:
        build_import(parse_hub_ref(OLMO), text, None)
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_engine_refuses_an_unimported_hub_id_with_a_sentence():
    with pytest.raises(PlanningError, match="is a Hugging Face Hub model, which the engine does not fetch"):
        resolve_model("hf:allenai/OLMo-2-1124-7B")


# ----------------------------------------------------------------------------- through a fake fetcher


def test_import_through_an_injected_fetcher():
    fetcher = FakeFetcher()
    imported = import_from_hub(f"hf:{OLMO}", fetcher)
    assert fetcher.calls == [OLMO]
    assert imported.check is not None and imported.check.agrees
    assert imported.notes[0] == f"Imported {OLMO} config.json from the Hugging Face Hub (commit {COMMIT[:12]})"


def test_counts_that_cannot_be_read_only_skip_the_check():
    fetcher = FakeFetcher(
        counts_error="Offline, the parameter check against the checkpoint is skipped", from_cache_only=True
    )
    imported = import_from_hub(OLMO, fetcher)
    assert imported.check is None and imported.from_cache_only
    assert imported.check_skipped.startswith("Offline")
    assert imported.notes == (
        f"Imported {OLMO} config.json from the Hugging Face Hub (commit {COMMIT[:12]}), read offline from the local cache",
        "Offline, the parameter check against the checkpoint is skipped",
    )
    assert "_headroom" in imported.config and "safetensors_parameters" not in imported.config["_headroom"]
    assert not any("checkpoint check" in a for a in imported.architecture.assumptions)


def test_a_fetch_failure_is_the_fetchers_sentence():
    with pytest.raises(HubImportError, match="is gated"):
        import_from_hub(OLMO, FakeFetcher(config_error=hub.gated_message(parse_hub_ref(OLMO))))


def test_not_found_suggests_a_catalog_hub_id():
    message = hub.not_found_message(parse_hub_ref("meta-llama/Llama-3.1-8X"))
    assert message.startswith(
        "meta-llama/Llama-3.1-8X was not found on the Hugging Face Hub (did you mean 'meta-llama/Llama-3.1-8"
    )
    assert "HF_TOKEN" in message
    assert "did you mean" not in hub.not_found_message(parse_hub_ref("zzzz/qqqq"))


# ------------------------------------------------------------------ without huggingface_hub installed


def test_without_huggingface_hub_the_fetch_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(hub, "_hf", None)
    monkeypatch.setattr(hub, "_hf_constants", None)
    monkeypatch.setattr(hub, "_hf_errors", None)
    assert not hub.hub_available()
    with pytest.raises(HubImportError) as caught:
        import_from_hub(OLMO, hub.HuggingFaceHubFetcher())
    assert str(caught.value) == hub.INSTALL_SENTENCE
    assert 'pip install "headroom[hub]"' in str(caught.value)
    # The pure core needs nothing from it.
    assert build_import(parse_hub_ref(OLMO), reference_text(OLMO), counts(OLMO)).check is not None


# ---------------------------------------------------------------- the huggingface_hub layer, faked


@pytest.fixture
def hf(monkeypatch, tmp_path):
    """huggingface_hub with its two network calls replaced: each test installs what they answer. Any call a
    test did not expect fails loudly instead of reaching the network."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_NeverShowThisToken")
    state = SimpleNamespace(downloads=[], metadata_calls=[], download=None, metadata=None, tmp=tmp_path)

    def hf_hub_download(repo_id, filename, *, revision=None, local_files_only=False, **kwargs):
        state.downloads.append((repo_id, filename, revision, local_files_only))
        if state.download is None:
            raise AssertionError("unexpected hf_hub_download")
        return state.download(repo_id, revision, local_files_only)

    def get_safetensors_metadata(self, repo_id, *, revision=None, **kwargs):
        state.metadata_calls.append((repo_id, revision))
        if state.metadata is None:
            raise AssertionError("unexpected get_safetensors_metadata")
        return state.metadata(repo_id, revision)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(huggingface_hub.HfApi, "get_safetensors_metadata", get_safetensors_metadata)
    return state


def cached_file(tmp: Path, repo_id: str) -> str:
    """config.json where huggingface_hub's cache keeps it: .../snapshots/<commit>/config.json."""
    folder = tmp / "hub" / ("models--" + repo_id.replace("/", "--")) / "snapshots" / COMMIT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(reference_text(repo_id))
    return str(folder / "config.json")


def hub_error(name: str, status: int = 404) -> Exception:
    errors = pytest.importorskip("huggingface_hub.errors")
    cls = getattr(errors, name, None) or errors.EntryNotFoundError  # RemoteEntryNotFoundError is 1.x+
    if issubclass(cls, errors.HfHubHTTPError):
        return cls(f"{name} (server text)", response=SimpleNamespace(headers={}, request=None, status_code=status))
    return cls(f"{name} (server text)")


def raising(exc: Exception):
    def fail(*args):
        raise exc

    return fail


def test_found_online_reads_the_config_and_the_safetensors_counts(hf):
    hf.download = lambda repo, revision, local: cached_file(hf.tmp, repo)
    hf.metadata = lambda repo, revision: SimpleNamespace(parameter_count=counts(OLMO))
    imported = import_from_hub(f"{OLMO}@main")
    assert hf.downloads == [(OLMO, "config.json", "main", False)]
    assert hf.metadata_calls == [(OLMO, COMMIT)]  # the headers of the very commit whose config was read
    assert imported.commit == COMMIT and not imported.from_cache_only
    assert imported.check is not None and imported.check.difference == 0
    everything = json.dumps(imported.config) + " ".join(imported.notes)
    assert "hf_NeverShowThisToken" not in everything  # the token is huggingface_hub's business only


def test_offline_mode_reads_the_cache_only_and_skips_the_check(hf, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf.download = lambda repo, revision, local: cached_file(hf.tmp, repo) if local else pytest.fail("went online")
    imported = import_from_hub(OLMO)
    assert hf.downloads == [(OLMO, "config.json", None, True)] and hf.metadata_calls == []
    assert imported.from_cache_only and imported.check is None
    assert "huggingface_hub caches config.json but not the safetensors headers" in imported.check_skipped
    assert imported.architecture.name == OLMO


def test_offline_mode_without_the_cache(hf, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf.download = raising(hub_error("LocalEntryNotFoundError"))
    with pytest.raises(HubImportError) as caught:
        import_from_hub(OLMO)
    assert str(caught.value) == (
        f"Hugging Face Hub offline mode is on (HF_HUB_OFFLINE), and {OLMO} is not in the local Hugging Face cache: "
        "fetch it once while online, or upload its config.json instead"
    )


def test_a_failed_connection_falls_back_to_the_cache(hf):
    def download(repo, revision, local):
        if not local:
            raise ConnectionError("Name or service not known")
        return cached_file(hf.tmp, repo)

    hf.download = download
    imported = import_from_hub(OLMO)
    assert [d[3] for d in hf.downloads] == [False, True] and hf.metadata_calls == []
    assert imported.from_cache_only and imported.check_skipped.startswith("Offline")
    assert "read offline from the local cache" in imported.notes[0]


def test_a_failed_connection_without_the_cache(hf):
    def download(repo, revision, local):
        if not local:
            raise ConnectionError("Name or service not known")
        raise hub_error("LocalEntryNotFoundError")

    hf.download = download
    with pytest.raises(HubImportError, match=r"^The Hugging Face Hub cannot be reached \(ConnectionError\), and "):
        import_from_hub(OLMO)


def test_hub_downloads_own_cache_fallback_that_misses_is_the_offline_sentence(hf):
    """hf_hub_download itself tries the cache after a failed connection and raises LocalEntryNotFoundError."""
    hf.download = raising(hub_error("LocalEntryNotFoundError"))
    with pytest.raises(
        HubImportError, match="The Hub cannot be reached, and .* is not in the local Hugging Face cache"
    ):
        import_from_hub(OLMO)
    assert len(hf.downloads) == 1


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (
            "GatedRepoError",
            403,
            "meta-llama/Llama-3.1-8B is gated: accept its licence at https://huggingface.co/meta-llama/Llama-3.1-8B with "
            "your Hugging Face account, then set HF_TOKEN to a token of that account (or run `hf auth login`) and try again",
        ),
        ("GatedRepoError", 401, "meta-llama/Llama-3.1-8B is gated: accept its licence"),
        ("RepositoryNotFoundError", 404, "meta-llama/Llama-3.1-8B was not found on the Hugging Face Hub"),
        ("RepositoryNotFoundError", 401, "meta-llama/Llama-3.1-8B was not found on the Hugging Face Hub"),
        ("RevisionNotFoundError", 404, "meta-llama/Llama-3.1-8B has no revision 'nope' (a branch, tag or commit hash)"),
        ("RemoteEntryNotFoundError", 404, "meta-llama/Llama-3.1-8B has no config.json at revision nope, so it is not"),
        ("HfHubHTTPError", 503, "The Hugging Face Hub answered HTTP 503 for meta-llama/Llama-3.1-8B@nope; try again"),
    ],
)
def test_the_hubs_answers_are_one_sentence_each(hf, error, status, message):
    hf.download = raising(hub_error(error, status))
    with pytest.raises(HubImportError) as caught:
        import_from_hub("meta-llama/Llama-3.1-8B@nope")
    assert str(caught.value).startswith(message), str(caught.value)
    assert "server text" not in str(caught.value)
    assert len(hf.downloads) == 1  # the Hub answered: no second try from the cache


def test_a_repo_without_safetensors_plans_without_the_check(hf):
    hf.download = lambda repo, revision, local: cached_file(hf.tmp, repo)
    hf.metadata = raising(hub_error("NotASafetensorsRepoError"))
    imported = import_from_hub(OLMO)
    assert imported.check is None
    assert imported.check_skipped == (
        f"{OLMO} has no safetensors weights (model.safetensors or its index), so the parameter check against the "
        "checkpoint is skipped"
    )


def test_unreadable_headers_skip_the_check_with_the_reason(hf):
    hf.download = lambda repo, revision, local: cached_file(hf.tmp, repo)
    hf.metadata = raising(hub_error("GatedRepoError", 403))
    imported = import_from_hub(OLMO)
    assert imported.check is None
    assert imported.check_skipped == (
        f"The safetensors headers of gated {OLMO} cannot be read with this token, so the parameter check against "
        "the checkpoint is skipped"
    )
    hf.metadata = raising(ConnectionError("reset by peer"))
    assert import_from_hub(OLMO).check_skipped.startswith(
        "The Hugging Face Hub cannot be reached (ConnectionError) for the safetensors headers, so"
    )
    hf.metadata = raising(hub_error("HfHubHTTPError", 502))
    assert import_from_hub(OLMO).check_skipped.startswith("The Hugging Face Hub answered HTTP 502 for the safetensors")


def test_a_malformed_config_in_the_cache(hf):
    def download(repo, revision, local):
        path = Path(cached_file(hf.tmp, repo))
        path.write_text('{"model_type": "llama",')
        return str(path)

    hf.download = download
    hf.metadata = lambda repo, revision: SimpleNamespace(parameter_count={"F32": 1})
    with pytest.raises(HubImportError, match=f"^{OLMO} config.json is not valid JSON"):
        import_from_hub(OLMO)
