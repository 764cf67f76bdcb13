"""Speculative decoding in a real Chromium: switch it on in the sidebar, see TPOT change to the engine's value and
the speculative box appear, the address bar carry it, and the link reopen the same plan. Screenshots go to
test-artifacts/screenshots/ (speculative-1280.png, speculative-1280-full.png, speculative-sidebar-1280.png).

Uses the live server and the system Chromium of test_browser.py. Run alone with `pytest -m browser -k speculative`.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser import (  # noqa: F401  (fixtures)
    SHOTS,
    STEP_MS,
    browser,
    metric_values,
    new_page,
    open_app,
    screenshot,
    server,
    settle,
    sync_api,
)

from planner import InferenceScenario, plan, units
from planner.share import query_params_to_scenario

pytestmark = pytest.mark.browser


def test_switching_speculative_decoding_on_replans_and_the_link_reproduces_it(browser, server):  # noqa: F811
    context, page = new_page(browser)
    try:
        page.on("pageerror", lambda error: pytest.fail(f"JavaScript error: {error}"))
        before = open_app(page, f"{server}/inference")
        assert "Speedup vs plain decode" not in before
        sidebar = page.locator("[data-testid=stSidebar]")
        group = sidebar.locator("[data-testid=stRadio]").filter(has_text="EAGLE head")
        group.scroll_into_view_if_needed()
        group.get_by_text("EAGLE head", exact=True).click()
        page.wait_for_url(re.compile(r"inference_speculative=eagle"), timeout=STEP_MS)
        page.get_by_text("Speedup vs plain decode").first.wait_for()
        settle(page)
        assert not page.locator("[data-testid=stException]").count()

        expected = plan(InferenceScenario(speculative={"method": "eagle"}))
        after = metric_values(page)
        assert after["Time per output token"] == units.seconds(expected.performance.tpot_seconds)
        assert after["Speedup vs plain decode"] == f"{expected.performance.speculative.speedup:.2f}×"
        params = {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}
        assert query_params_to_scenario(params, "inference", "inference_")[0] == InferenceScenario(
            speculative={"method": "eagle"}
        )

        page.locator(".st-key-inference_speculative_summary").scroll_into_view_if_needed()
        screenshot(page, "speculative-1280")
        group.scroll_into_view_if_needed()
        sidebar.screenshot(path=str(SHOTS / "speculative-sidebar-1280.png"))

        # The address bar is the share link: a fresh context opens the same plan.
        link = page.url
        fresh_context, fresh = new_page(browser)
        try:
            reopened = open_app(fresh, link)
            assert reopened["Time per output token"] == after["Time per output token"]
            assert reopened["Speedup vs plain decode"] == after["Speedup vs plain decode"]
        finally:
            fresh_context.close()
    finally:
        context.close()
