"""The model picker's Hugging Face id box imports from the Hub (ui/pickers.py): a plan from the imported config,
the checkpoint check beside it, one error sentence (and no stale plan) when the import fails, the install
command without huggingface_hub, and the import travelling in the link. A fake fetcher answers; every test
uses its own revision because the picker caches imports per id for the whole server (st.cache_data).

The fake answers with the recorded configs in ../shared/reference/hf_configs/. A test whose fake returns a config
asks for them through the `reference` fixture, before the AppTest script runs: inside the script a missing
folder's skip would be caught by Streamlit and turn into a page exception instead of a skip."""

from __future__ import annotations

import pytest
from conftest import assert_clean, open_page, warnings_text
from streamlit.testing.v1 import AppTest

import planner.model.hub as hub
from planner.share import encode_inline
from tests.hub_fakes import COMMIT, OLMO, FakeFetcher
from tests.reference_data import require_reference


@pytest.fixture
def reference():
    """The recorded configs the fake answers with: skip (fail under CI) here, outside the AppTest run."""
    return require_reference()


@pytest.fixture
def fetcher(reference, monkeypatch):
    fake = FakeFetcher()
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", fake)
    return fake


def own_model_page() -> AppTest:
    at = open_page()
    at.radio(key="inference_pick_model_source").set_value("Upload").run()
    return at


def type_id(at: AppTest, text: str) -> AppTest:
    at.text_input(key="inference_pick_hub_id").set_value(text).run()
    return at


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_a_hub_id_imports_the_model_and_shows_the_check(fetcher):
    at = type_id(own_model_page(), f"{OLMO}@app-found")
    assert_clean(at)
    model = at.session_state["current_inference"].model
    assert isinstance(model, dict) and model["_headroom"]["hub_id"] == OLMO
    assert model["_headroom"]["revision"] == "app-found"
    assert f"Using **{OLMO}@app-found** from the Hugging Face Hub (commit {COMMIT[:12]})." in captions(at)
    assert "exactly Headroom's count from config.json" in captions(at)
    assert at.metric  # a plan of the imported model
    assert fetcher.calls == [f"{OLMO}@app-found"]
    at.run()  # a rerun neither fetches again nor loses the model
    assert fetcher.calls == [f"{OLMO}@app-found"] and at.session_state["current_inference"].model == model


def test_a_count_that_differs_is_a_warning(reference, monkeypatch):
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(stored={"F32": 7_398_617_344}))
    at = type_id(own_model_page(), f"{OLMO}@app-differs")
    assert not at.exception and not at.error
    assert "Checkpoint check: the Hub's safetensors headers store F32 7,398,617,344" in warnings_text(at)
    assert "weight memory uses Headroom's count" in warnings_text(at)


def test_a_failed_import_after_a_good_one_clears_the_plan(fetcher, monkeypatch):
    at = type_id(own_model_page(), f"{OLMO}@app-first")
    assert at.metric
    gated = hub.gated_message(hub.parse_hub_ref("meta-llama/Llama-3.1-8B"))
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error=gated))
    type_id(at, "meta-llama/Llama-3.1-8B@app-gated")
    assert not at.exception
    assert gated in [e.value for e in at.error]  # the picker says it (the page repeats it as why there is no plan)
    assert "HF_TOKEN" in gated and "https://huggingface.co/meta-llama/Llama-3.1-8B" in gated
    assert not at.metric  # no stale plan of the previous model under the error


def test_offline_without_the_cache_is_one_sentence(monkeypatch):
    offline = hub.offline_message(hub.parse_hub_ref(f"{OLMO}@app-offline"), "The Hub cannot be reached")
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error=offline))
    at = type_id(own_model_page(), f"{OLMO}@app-offline")
    assert offline in [e.value for e in at.error]
    assert not at.metric


def test_offline_from_the_cache_plans_and_says_the_check_was_skipped(reference, monkeypatch):
    skipped = "Offline, the parameter check against the checkpoint is skipped"
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(counts_error=skipped, from_cache_only=True))
    at = type_id(own_model_page(), f"{OLMO}@app-cached")
    assert_clean(at)
    assert "read offline from the local cache" in captions(at)
    assert skipped + "." in captions(at)
    assert at.metric


def test_without_huggingface_hub_the_box_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(hub, "_hf", None)
    monkeypatch.setattr(hub, "_hf_errors", None)
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", hub.HuggingFaceHubFetcher())
    at = type_id(own_model_page(), f"{OLMO}@app-no-hub")
    assert not at.exception
    assert hub.INSTALL_SENTENCE in [e.value for e in at.error]
    assert 'pip install "headroom[hub]"' in at.text_input(key="inference_pick_hub_id").help
    # Catalog ids still resolve without it.
    type_id(at, "meta-llama/Llama-3.1-8B")
    assert_clean(at)
    assert at.session_state["current_inference"].model == "llama-3.1-8b"


def test_a_link_with_an_imported_model_opens_without_the_network(reference, monkeypatch):
    imported = hub.import_from_hub(f"{OLMO}@main", FakeFetcher())
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error="no network in this test"))
    at = open_page(params={"inference_model": encode_inline(imported.config)})
    assert_clean(at)
    assert at.session_state["current_inference"].model == imported.config
    assert "the config.json in the link (imported from the Hugging Face Hub)" in captions(at)
    assert "exactly Headroom's count from config.json" in captions(at)
