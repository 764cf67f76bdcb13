"""Fleet page: the default fleet renders (sentence, both charts), an edited peak changes the bill, a broken upload
or link is one sentence, the share link carries the whole fleet, the CSV has one row per hour.

Besides the default-fleet test, the fleets here are one small model with 100 simulated requests per load curve
(a fraction of a second to plan)."""

from __future__ import annotations

import copy
import csv
import io
import json

from conftest import assert_clean, metric, open_page
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from planner.fleet import manager_summary, plan_fleet
from ui import fleet_edit

SMALL = {
    "kind": "fleet",
    "label": "one small model",
    "deployments": [
        {
            "name": "chat-8b",
            "scenario": {
                "model": "llama-3.1-8b",
                "tensor_parallel": 1,
                "num_gpus": 1,
                "prompt_tokens": 512,
                "output_tokens": 128,
                "concurrency": 32,
                "traffic": {"num_requests": 100, "slo": {"ttft_seconds": 1, "tpot_seconds": 0.05}},
            },
            "diurnal": {"peak_requests_per_second": 60, "trough_requests_per_second": 6, "peak_hour": 14},
        }
    ],
    "pools": [{"name": "h100", "gpu": "h100-sxm", "on_demand_usd_per_hour": 3.0, "reserved_usd_per_hour": 2.0}],
}
EDITOR = "fleet_deployments_v0"


def small_page(fleet: dict = SMALL):
    return open_page("fleet", {"fleet": fleet_edit.encode_link(fleet)})


def summary_text(at) -> str:
    return "\n".join(s.value for s in at.success) + "\n".join(w.value for w in at.warning)


def test_the_default_fleet_renders_its_sentence_charts_and_tables():
    at = open_page("fleet")
    assert_clean(at)
    sentence = at.success[0].value
    assert sentence.startswith("3 models in 3 deployments, peak ") and "/month of which" in sentence
    assert "every SLO met in 24 of 24 hours" in sentence
    assert len(at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")) == 2
    assert metric(at, "Monthly bill").endswith("k/month")
    deployments = at.dataframe[2].value
    assert list(deployments["Deployment"]) == ["chat-70b", "fast-8b", "coder-7b"]
    comparisons = at.dataframe[4].value
    assert comparisons["Plan"].iloc[0] == "this plan" and len(comparisons) >= 3
    assert "fleet" not in at.query_params  # the example: no parameter
    assert [e.label for e in at.expander][-1] == "Assumptions"


def test_a_small_fleet_from_the_link_matches_the_engine():
    at = small_page()
    assert_clean(at)
    expected = plan_fleet(SMALL)
    assert at.success[0].value == manager_summary(expected)
    assert list(at.data_editor[0].value["name"]) == ["chat-8b"]
    assert list(at.data_editor[1].value["gpu"]) == ["h100-sxm"]


def test_editing_a_deployments_peak_changes_the_bill():
    at = small_page()
    before = metric(at, "Monthly bill")
    at.session_state[EDITOR] = {"edited_rows": {0: {"peak": 240.0}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert_clean(at)
    after = metric(at, "Monthly bill")
    assert after != before
    bigger = copy.deepcopy(SMALL)
    bigger["deployments"][0]["diurnal"]["peak_requests_per_second"] = 240
    assert at.success[0].value == manager_summary(plan_fleet(bigger))
    # The address bar carries the edited fleet.
    assert (
        fleet_edit.fleet_from_link(at.query_params["fleet"])["deployments"][0]["diurnal"]["peak_requests_per_second"]
        == 240
    )


def test_a_bad_cell_is_one_sentence():
    at = small_page()
    at.session_state[EDITOR] = {"edited_rows": {0: {"rate_by_hour": "1, 2, 3"}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "deployment 'chat-8b': rate by hour needs 24 numbers (00:00 to 23:00), got 3."
    ]


def test_an_invalid_fleet_is_the_engines_sentence_not_a_traceback():
    at = small_page()
    at.session_state[EDITOR] = {"edited_rows": {0: {"model": "no-such-model"}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    text = "\n".join(e.value for e in at.error) + "\n".join(w.value for w in at.warning)
    assert "no-such-model" in text and "Traceback" not in text


def test_a_broken_upload_is_one_sentence_and_keeps_the_fleet():
    at = small_page()
    before = at.success[0].value
    at.file_uploader(key="fleet_upload").set_value(
        ("fleet.json", b'{"kind": "fleet", "deployments": [', "application/json")
    )
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("fleet.json") and "not changed" in at.error[0].value
    assert at.success[0].value == before
    at.file_uploader(key="fleet_upload").set_value(
        ("other.json", json.dumps({"kind": "fleet", "deployments": [], "pools": []}).encode(), "application/json")
    )
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "other.json" in at.error[0].value and "non-empty list" in at.error[0].value


def test_an_upload_replaces_the_fleet():
    at = open_page("fleet", {"fleet": "cfg:not-base64!"})  # malformed link: one sentence, then the example
    assert not at.exception
    assert len(at.error) == 1 and "example fleet" in at.error[0].value
    at.file_uploader(key="fleet_upload").set_value(("small.json", json.dumps(SMALL).encode(), "application/json"))
    at.run()
    assert_clean(at)
    assert at.success[0].value == manager_summary(plan_fleet(SMALL))
    assert fleet_edit.fleet_from_link(at.query_params["fleet"])["deployments"][0]["name"] == "chat-8b"


def test_the_share_link_round_trips_the_whole_fleet():
    at = small_page()
    at.session_state[EDITOR] = {
        "edited_rows": {0: {"trough": 12.0, "peak_hour": 9.0}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    link = at.query_params["fleet"]
    shared = fleet_edit.fleet_from_link(link)
    assert shared["deployments"][0]["diurnal"] == {
        "peak_requests_per_second": 60,
        "trough_requests_per_second": 12,
        "peak_hour": 9,
    }
    assert shared["deployments"][0]["scenario"]["prompt_tokens"] == 512  # fields the tables leave out travel too
    other = open_page("fleet", {"fleet": link})
    assert_clean(other)
    assert other.success[0].value == at.success[0].value
    assert metric(other, "Monthly bill") == metric(at, "Monthly bill")
    assert other.query_params["fleet"] == link


def test_the_csv_download_has_one_row_per_hour(monkeypatch):
    stored: list[bytes] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        if mimetype == "text/csv":
            stored.append(path_or_data.encode() if isinstance(path_or_data, str) else bytes(path_or_data))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    at = small_page()
    assert_clean(at)
    assert "Download CSV (per hour)" in [b.proto.label for b in at.get("download_button")]
    rows = list(csv.DictReader(io.StringIO(stored[-1].decode())))
    assert len(rows) == 24
    assert [int(r["hour"]) for r in rows] == list(range(24))
    assert {r["deployment"] for r in rows} == {"chat-8b"}
