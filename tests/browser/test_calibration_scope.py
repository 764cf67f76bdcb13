"""A calibration belongs to one browser session and one device, in a real headless Chromium.

Browser A imports the committed CPU record (benchmarks/calibration_cpu.json, no 60 s profile) on the
Calibrate page. Browser B, opened at the same time on the same server, never sees it; a link sent before
keeps its numbers; A's default H100 plan stays uncalibrated (the record measured the CPU) until A maps it,
loudly; A's share link carries the record, and a fresh browser applies it to a plan for the CPU only.
Run alone: pytest -m browser -k calibration_scope. Reuses test_browser's server (its own empty data dir).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser import (  # noqa: F401  (browser, server: fixtures)
    browser,
    metric_values,
    new_page,
    open_app,
    rerun,
    runs_finished,
    server,
    settle,
)

from planner import InferenceScenario, plan, units
from planner.calibration import store
from planner.share import CALIBRATION_PARAM, encode_calibration

pytestmark = pytest.mark.browser

RECORD_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration_cpu.json"
# Any single wait. Generous: the server's first script run imports the whole app, and on a loaded 2-core
# machine one script run can take tens of seconds; on an idle one every step takes a second or two.
WAIT_MS = 120_000
LABELS = ("Time to first token", "Time per output token", "$ per 1M output tokens")


def session(chromium):
    context, page = new_page(chromium)
    context.set_default_timeout(WAIT_MS)
    return context, page


def numbers(values: dict[str, str]) -> tuple[str, ...]:
    return tuple(values[label] for label in LABELS)


def expected(scenario: InferenceScenario, calibration=None, any_gpu: bool = False) -> tuple[str, ...]:
    result = plan(scenario, calibration, calibration_any_gpu=any_gpu)
    perf = result.performance
    return (
        units.seconds(perf.ttft_seconds),
        units.seconds(perf.tpot_seconds),
        units.usd(result.cost.usd_per_million_output_tokens),
    )


def banner(page) -> str:
    """The text of every warning box on the page ('' when there is none)."""
    return "\n".join(page.locator("[data-testid=stAlertContentWarning]").all_inner_texts())


def go_to(page, title: str) -> None:
    """Another page of the same session (a click, not a reload: a reload is a new session)."""
    rerun(page, page.get_by_role("link", name=title, exact=True).first.click)


def current(page) -> tuple[str, ...]:
    page.get_by_text("Output tokens/s").first.wait_for()
    return numbers(metric_values(page))


def reopen(page) -> tuple[str, ...]:
    """The same URL again: a new session of the same browser."""
    page.reload()
    settle(page)
    return current(page)


def test_a_calibration_stays_in_its_browser_and_on_its_device(browser, server):  # noqa: F811
    record = store.load_calibration_file(RECORD_FILE)
    h100, on_cpu = InferenceScenario(), InferenceScenario(gpu="cpu")
    assert h100.gpu_id() == "h100-sxm" and record.reference_gpu == "cpu"
    baseline = expected(h100)
    headline = f"Plans use calibration '{record.label}' measured on AMD EPYC (cpu)"

    a_context, a = session(browser)
    b_context, b = session(browser)
    try:
        assert numbers(open_app(a, server + "/")) == baseline
        sent_before = a.url  # a link A sent before calibrating (the Review link of the issue)
        assert numbers(open_app(b, server + "/")) == baseline

        # A imports the CPU calibration: it becomes A's, and only A's.
        go_to(a, "Calibrate")
        # The import runs the page twice (the run that imports ends in st.rerun, to redraw the banner above
        # it); the headline shows during the second, so wait for that run to end before leaving the page.
        before_import = runs_finished(a)
        # the import uploader, not the benchmark-result one below it (both on the Calibrate page)
        a.locator(".st-key-calibrate_import input[type=file]").set_input_files(str(RECORD_FILE))
        a.get_by_text(headline).first.wait_for()
        settle(a, before_import)
        go_to(a, "Inference")
        assert headline in banner(a)
        assert "GPU 'h100-sxm': not applied (it measured 'cpu', not 'h100-sxm')" in banner(a)
        assert current(a) == baseline  # the CPU record does not reach the H100 plan
        assert reopen(b) == baseline and "Plans use calibration" not in banner(b)

        # A maps it on purpose: A's H100 numbers change, with both devices named; B's still do not.
        go_to(a, "Calibrate")
        rerun(a, a.get_by_text("Apply to other GPUs too").first.click)
        go_to(a, "Inference")
        mapped = expected(h100, record, any_gpu=True)
        assert current(a) == mapped != baseline
        assert "GPU 'h100-sxm': mapped" in banner(a) and "measured on 'AMD EPYC (cpu)'" in banner(a)
        assert reopen(b) == baseline and "Plans use calibration" not in banner(b)

        # A's share link carries the record (never the mapping) ...
        a.get_by_role("button", name=re.compile("Copy share link")).first.click()
        shared = a.locator("[data-testid=stPopoverBody] [data-testid=stCode]").first.inner_text().strip()
        a.keyboard.press("Escape")
        assert parse_qs(urlsplit(shared).query)[CALIBRATION_PARAM] == [encode_calibration(record)]
    finally:
        a_context.close()
        b_context.close()

    c_context, c = session(browser)
    try:
        # ... a fresh browser names it and leaves the H100 plan uncalibrated ...
        assert numbers(open_app(c, shared)) == baseline
        assert headline in banner(c) and "from the link you opened" in banner(c) and "not applied" in banner(c)
        # ... applies it to the same plan on the CPU it measured ...
        assert numbers(open_app(c, shared + "&inference_gpu=cpu")) == expected(on_cpu, record) != expected(on_cpu)
        assert "GPU 'cpu': calibrated" in banner(c)
        # ... and a link sent before any of this still shows the original numbers.
        assert numbers(open_app(c, sent_before)) == baseline and "Plans use calibration" not in banner(c)
    finally:
        c_context.close()


BENCHMARK_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark_results" / "vllm_serve.json"


def test_a_benchmark_result_for_another_model_is_refused_in_one_sentence(browser, server):  # noqa: F811
    """A real upload into the Calibrate page's 'From a benchmark result' section: the fixture is a Llama-3.1-8B
    run and the session's deployment is the default scenario's model, so the fit names the mismatch in one warning
    and shows no fit and no traceback."""
    assert InferenceScenario().model != "llama-3.1-8b"
    context, page = session(browser)
    try:
        open_app(page, server + "/")
        go_to(page, "Calibrate")
        settle(page)
        before = runs_finished(page)
        page.locator(".st-key-calibrate_benchmark_upload input[type=file]").set_input_files(str(BENCHMARK_FILE))
        settle(page, before)
        rerun(page, page.locator(".st-key-calibrate_benchmark_fit button").click)
        warning = page.locator("[data-testid=stAlertContentWarning]", has_text="vllm_serve.json")
        warning.first.wait_for()
        assert "Llama-3.1-8B" in warning.first.inner_text() or "llama-3.1-8b" in warning.first.inner_text().lower()
        assert not page.locator("[data-testid=stException]").count()
        assert not page.get_by_text("Apply to this session's plans").count()
    finally:
        context.close()
