"""LoRA adapters in a real Chromium: open the sidebar's LoRA section, switch the adapters on, see TPOT and the memory
change, the address bar carry them, and the link reopen the same plan. Screenshots go to test-artifacts/screenshots/
(adapters-sidebar-1280.png, adapters-1280.png).

Uses the live server and the system Chromium of test_browser.py. Run alone with `pytest -m browser -k adapters`.
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


def test_switching_adapters_on_replans_and_the_link_reproduces_it(browser, server):  # noqa: F811
    context, page = new_page(browser)
    try:
        page.on("pageerror", lambda error: pytest.fail(f"JavaScript error: {error}"))
        before = open_app(page, f"{server}/inference")
        sidebar = page.locator("[data-testid=stSidebar]")
        section = sidebar.locator("[data-testid=stExpander]").filter(has_text="LoRA adapters")
        section.scroll_into_view_if_needed()
        section.locator("summary").click()
        toggle = section.get_by_text("Serve LoRA adapters on the shared base", exact=True)
        toggle.wait_for()
        toggle.click()
        page.wait_for_url(re.compile(r"inference_lora=cfg"), timeout=STEP_MS)
        section.get_by_text("Popularity skew (Zipf exponent)").wait_for()
        settle(page)
        assert not page.locator("[data-testid=stException]").count()

        expected = plan(InferenceScenario(lora={}))
        after = metric_values(page)
        assert after["Time per output token"] == units.seconds(expected.performance.tpot_seconds)
        assert after["Time per output token"] != before["Time per output token"]
        params = {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}
        assert query_params_to_scenario(params, "inference", "inference_")[0] == InferenceScenario(lora={})
        assert page.get_by_text("LoRA adapter slots").count()  # the memory breakdown names the slots

        section.scroll_into_view_if_needed()
        sidebar.screenshot(path=str(SHOTS / "adapters-sidebar-1280.png"))
        screenshot(page, "adapters-1280")

        # The address bar is the share link: a fresh context opens the same plan with the section on.
        fresh_context, fresh = new_page(browser)
        try:
            reopened = open_app(fresh, page.url)
            assert reopened["Time per output token"] == after["Time per output token"]
        finally:
            fresh_context.close()
    finally:
        context.close()
