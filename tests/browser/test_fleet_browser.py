"""The Fleet page in a real Chromium: /fleet shows the example fleet's sentence and its two area charts; a share link
carrying a small fleet opens that fleet in a fresh context, and its CSV downloads with one row per hour.
Screenshots go to test-artifacts/screenshots/.

Uses the live server and the system Chromium of test_browser.py. Run alone with `pytest -m browser -k fleet`.
"""

from __future__ import annotations

import csv
import io
from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser import (  # noqa: F401  (fixtures)
    NARROW,
    SHOTS,
    browser,
    new_page,
    screenshot,
    server,
    settle,
    sync_api,
)

from planner.fleet import manager_summary, plan_fleet
from ui import fleet_edit

pytestmark = pytest.mark.browser

SMALL = {
    "kind": "fleet",
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
SUMMARY = ".st-key-fleet_summary [data-testid=stAlert] [data-testid=stMarkdownContainer]"
CHART_WAIT_MS = 90_000  # the example fleet's first plan simulates every load curve (~10 s on one core)


def sentence(page) -> str:
    box = page.locator(SUMMARY).first
    box.wait_for(timeout=CHART_WAIT_MS)
    return box.inner_text().strip()


def test_the_example_fleet_shows_its_sentence_and_the_day(browser, server):  # noqa: F811
    context, page = new_page(browser)
    try:
        page.on("pageerror", lambda error: pytest.fail(f"JavaScript error: {error}"))
        page.goto(f"{server}/fleet")
        text = sentence(page)
        settle(page)
        assert text.startswith("3 models in 3 deployments, peak ") and "/month of which" in text
        charts = page.locator("[data-testid=stVegaLiteChart]")
        assert charts.count() == 2
        for chart in charts.all():
            chart.locator("canvas, svg").first.wait_for()
        assert not page.locator("[data-testid=stException]").count()
        assert page.get_by_text("GPUs by deployment").count() and page.get_by_text("GPUs by pricing").count()
        screenshot(page, "fleet-1280")
    finally:
        context.close()


def test_a_share_link_opens_its_fleet_and_downloads_its_hours(browser, server):  # noqa: F811
    url = f"{server}/fleet?fleet={fleet_edit.encode_link(SMALL)}"
    context, page = new_page(browser, NARROW, downloads=True)
    try:
        page.goto(url)
        assert sentence(page) == manager_summary(plan_fleet(SMALL))
        settle(page)
        screenshot(page, "fleet-link-narrow")
        with page.expect_download() as download:
            page.get_by_role("button", name="Download CSV (per hour)").click()
        path = download.value.path()
        rows = list(csv.DictReader(io.StringIO(open(path).read())))
        assert len(rows) == 24 and {r["deployment"] for r in rows} == {"chat-8b"}

        # Twice the load: the address bar carries the changed fleet, and a fresh context opens the same answer.
        before = sentence(page)
        box = page.locator("[data-testid=stNumberInput]").filter(has_text="Rate scale").locator("input")
        box.fill("2")
        box.press("Enter")
        page.wait_for_function(
            "([selector, before]) => document.querySelector(selector)?.innerText.trim() !== before",
            arg=[SUMMARY, before],
        )
        settle(page)
        doubled = sentence(page)
        bigger = {**SMALL, "rate_scale": 2.0, "autoscaling": {"headroom_share": 0.1}}
        assert doubled == manager_summary(plan_fleet(bigger))
        shared = fleet_edit.fleet_from_link(parse_qs(urlsplit(page.url).query)["fleet"][0])
        assert shared["rate_scale"] == 2 and shared["deployments"][0]["diurnal"] == SMALL["deployments"][0]["diurnal"]
        other_context, other = new_page(browser)
        try:
            other.goto(page.url)
            assert sentence(other) == doubled
        finally:
            other_context.close()
    finally:
        context.close()
    assert (SHOTS / "fleet-link-narrow.png").exists()
