"""Printing the Review page: one plan on one or two A4 pages (Chromium's own PDF of the print layout).

Uses the live server and the system Chromium of test_browser.py; the PDFs are kept in test-artifacts/.
Run alone with `pytest -m browser -k print`.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from test_browser import ARTIFACTS, browser, new_page, server, settle  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

A4_PAGES_PER_PLAN = 2
# A page object of the PDF: "/Type /Page" but not the "/Type /Pages" tree node above the pages.
PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def printed_pages(page, name: str) -> int:
    pdf = page.pdf(format="A4", print_background=True)
    (ARTIFACTS / f"{name}.pdf").write_bytes(pdf)
    return len(PAGE_OBJECT.findall(pdf))


def test_review_of_the_default_plan_prints_on_one_or_two_a4_pages(browser, server):  # noqa: F811
    context, page = new_page(browser)
    try:
        page.goto(f"{server}/review")
        settle(page)
        page.get_by_text("Fits in GPU memory").first.wait_for()
        pages = printed_pages(page, "review-print")
        assert 1 <= pages <= A4_PAGES_PER_PLAN, f"{pages} A4 pages for one plan"
    finally:
        context.close()


def test_review_of_two_plans_prints_each_on_its_own_pages(browser, server):  # noqa: F811
    from planner import InferenceScenario
    from ui.links import encode_pin

    pins = [
        InferenceScenario(label="fits", decision="Serve 64 chats on 4 GPUs."),
        InferenceScenario(concurrency=512, label="does not fit", decision="Too many chats for 4 GPUs."),
    ]
    context, page = new_page(browser)
    try:
        page.goto(f"{server}/review?" + urlencode({"pin": [encode_pin(p) for p in pins]}, doseq=True))
        settle(page)
        page.get_by_text("Does not fit in GPU memory").first.wait_for()
        pages = printed_pages(page, "review-print-two-plans")
        assert 2 <= pages <= 2 * A4_PAGES_PER_PLAN, f"{pages} A4 pages for two plans"
    finally:
        context.close()
