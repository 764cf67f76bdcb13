"""Hub import on the command line: `hub ID`, and "model": "hf:ID" in scenario JSON (plan, share, lists);
the imported config travels in the share link, which then plans without the network. A fake fetcher answers
(tests/model/test_hub.py covers the huggingface_hub layer); nothing here touches the network."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest

import planner.model.hub as hub
from planner.cli.main import main
from planner.plan import plan
from planner.share import query_params_to_scenario, share_url
from tests.hub_fakes import COMMIT, OLMO, FakeFetcher

SCENARIO = {"model": f"hf:{OLMO}@main", "gpu": "h100-sxm", "num_gpus": 1, "tensor_parallel": 1}


@pytest.fixture
def fetcher(monkeypatch):
    fake = FakeFetcher()
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", fake)
    return fake


def write(tmp_path, data) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_hub_prints_the_imported_config_and_notes_on_stderr(fetcher, capsys):
    assert main(["hub", f"{OLMO}@main"]) == 0
    captured = capsys.readouterr()
    config = json.loads(captured.out)
    assert config["_headroom"]["hub_id"] == OLMO and config["_headroom"]["commit"] == COMMIT
    assert config["_headroom"]["safetensors_parameters"] == {"F32": 7_298_617_344}
    assert captured.err.splitlines() == [
        f"note: Imported {OLMO} config.json from the Hugging Face Hub at revision main (commit {COMMIT[:12]}).",
        "note: Checkpoint check: the Hub's safetensors headers store F32 7,298,617,344 elements, i.e. "
        "7,298,617,344 parameters, exactly Headroom's count from config.json.",
    ]


def test_a_scenario_may_name_a_hub_model(fetcher, tmp_path, capsys):
    assert main(["plan", write(tmp_path, SCENARIO)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["name"] == f"{OLMO}@main"
    assert out["model"]["params_total"] == 7_298_617_344
    assert out["scenario"]["model"]["_headroom"]["hub_id"] == OLMO  # the plan holds the config, not the id
    assert any("exactly Headroom's count from config.json" in a for a in out["assumptions"])


def test_a_list_fetches_each_hub_model_once(fetcher, tmp_path, capsys):
    assert main(["plan", write(tmp_path, [SCENARIO, {**SCENARIO, "concurrency": 8}]), "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert fetcher.calls == [f"{OLMO}@main"]


def test_the_share_link_carries_the_imported_config_and_needs_no_network(fetcher, tmp_path, capsys, monkeypatch):
    assert main(["share", write(tmp_path, SCENARIO)]) == 0
    link = capsys.readouterr().out.strip()
    params = dict(parse_qsl(urlsplit(link).query))
    assert params["inference_model"].startswith("cfg:")  # inline, compressed, like an uploaded config.json

    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error="no network in this test"))
    scenario, warnings = query_params_to_scenario(params, "inference", "inference_")
    assert warnings == []
    assert scenario.model["_headroom"]["hub_id"] == OLMO
    assert plan(scenario).model.params_total == 7_298_617_344
    assert share_url(scenario) == link  # the round trip is exact


def test_a_gated_model_is_one_error_line(monkeypatch, tmp_path, capsys):
    gated = hub.gated_message(hub.parse_hub_ref(OLMO))
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error=gated))
    assert main(["plan", write(tmp_path, [{**SCENARIO, "model": "llama-3.1-8b"}, SCENARIO])]) == 2
    err = capsys.readouterr().err
    assert err == f"error: scenario 1: {gated}\n"


def test_a_bad_hub_id_is_one_error_line(fetcher, tmp_path, capsys):
    assert main(["plan", write(tmp_path, {**SCENARIO, "model": "hf:not-an-id"})]) == 2
    assert capsys.readouterr().err.startswith("error: 'hf:not-an-id' is not a Hugging Face model id")
    assert main(["hub", "org/name@../x"]) == 2
    assert "is not a revision of org/name" in capsys.readouterr().err
    assert fetcher.calls == []


def test_without_huggingface_hub_the_cli_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(hub, "_hf", None)
    monkeypatch.setattr(hub, "_hf_errors", None)
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", hub.HuggingFaceHubFetcher())
    assert main(["plan", write(tmp_path, SCENARIO)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {hub.INSTALL_SENTENCE}\n"
    assert 'pip install "headroom[hub]"' in err


def test_catalog_scenarios_never_reach_the_fetcher(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error="must not be called"))
    assert main(["plan", write(tmp_path, {**SCENARIO, "model": "llama-3.1-8b"})]) == 0
    assert capsys.readouterr().err == ""
