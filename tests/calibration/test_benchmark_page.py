"""The Calibrate page's "From a benchmark result" section (ui/calibration_benchmark.py): uploads fitted on the
session's deployment, bad files listed without being kept, the chart, and applying the record to this session."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from planner.calibration.from_benchmark import calibrate_from_benchmark
from planner.physics.efficiency import Efficiency
from ui import calibration_benchmark as section
from ui import calibration_view as view

from .test_benchmark_calibration import DEPLOYMENT, _synthetic_run


def _vllm_bytes(run) -> bytes:
    return json.dumps(
        {
            "backend": "openai",
            "model_id": "meta-llama/Llama-3.1-8B-Instruct",
            "num_prompts": run.num_prompts,
            "request_rate": "inf",
            "max_concurrency": run.max_concurrency,
            "completed": run.num_prompts,
            "total_input_tokens": 1024 * run.num_prompts,
            "total_output_tokens": 256 * run.num_prompts,
            "output_throughput": run.output_tokens_per_second,
            "mean_ttft_ms": run.ttft.mean_seconds * 1e3,
            "mean_tpot_ms": run.tpot.mean_seconds * 1e3,
        }
    ).encode()


@pytest.fixture(scope="module")
def runs():
    return [_synthetic_run(c, Efficiency(memory_bandwidth=0.6)) for c in (1, 8, 64)]


def test_uploads_are_fitted_and_a_bad_file_is_listed_not_kept(runs):
    files = [(f"c{r.max_concurrency}.json", _vllm_bytes(r)) for r in runs] + [("notes.json", b'{"hello": 1}')]
    record, problems = section.fit_uploads(files, DEPLOYMENT)
    assert record is not None and [p.source for p in record.benchmark.points] == ["c1.json", "c8.json", "c64.json"]
    assert problems == [problems[0]] and problems[0].startswith("notes.json is not a benchmark result")
    assert record.efficiency.memory_bandwidth == pytest.approx(0.6, rel=0.05)
    none, why = section.fit_uploads([("bad.json", b"{")], DEPLOYMENT)
    assert none is None and why[0].startswith("bad.json")


def test_the_point_chart_compiles(runs):
    record = calibrate_from_benchmark(DEPLOYMENT, runs)
    frame = section.point_frame(record)
    assert set(frame["series"]) == set(section.SERIES.values()) and set(frame["role"]) == {"fitted", "held out"}
    assert section.point_chart(frame).to_dict()["facet"]["column"]["field"] == "metric"


def _page():
    from planner.inference.scenario import InferenceScenario
    from ui.calibration_view import render_calibrate_page

    render_calibrate_page(
        InferenceScenario(
            model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, concurrency=256, prompt_tokens=1024
        )
    )


def test_the_section_shows_a_fit_and_applies_it_to_this_session(runs):
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    assert any(s.value == "From a benchmark result" for s in at.subheader)
    assert at.button(key=section.FIT_KEY).disabled  # nothing uploaded yet
    record = calibrate_from_benchmark(DEPLOYMENT, runs)
    at.session_state[section.RESULT_KEY] = (DEPLOYMENT, record, ["extra.json is not a benchmark result"])
    at.run()
    assert not at.exception
    assert any("extra.json" in w.value for w in at.warning)
    at.button(key=section.APPLY_KEY).click().run()
    assert not at.exception
    assert at.session_state[view.RECORD_KEY] == record
    assert at.selectbox(key="calibrate_active").value == record.id
