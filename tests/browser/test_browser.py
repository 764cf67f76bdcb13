"""The dashboard in a real headless Chromium against a live `streamlit run app.py`.

Moves a slider with the keyboard, reopens the URL in a fresh browser context, downloads the CSV and
imports it on Compare, runs the Trade-offs search, and screenshots every page (1280×800 and narrow) into
test-artifacts/screenshots/. Uses the system Chromium (/usr/bin/chromium); no browser is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SHOTS = ARTIFACTS / "screenshots"
CHROMIUM = Path(os.environ.get("HEADROOM_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = ("inference", "training", "tradeoffs", "calibrate", "accuracy", "compare", "review")
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 420, "height": 900}
STEP_MS = 30_000  # any single wait

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run the browser "
        "test; no browser is downloaded",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(exist_ok=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(ARTIFACTS / "streamlit-server.log", "w")
    # An empty calibration store of its own: the user's active calibration must not change the numbers.
    data_dir = tempfile.mkdtemp(prefix="headroom-browser-")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--server.fileWatcherType",
            "none",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "HEADROOM_DATA_DIR": data_dir},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("streamlit did not become healthy within 60 s")
            time.sleep(0.3)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def browser(server):
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=STEP_MS)
        try:
            yield chromium
        finally:
            chromium.close()


# Streamlit 1.67 writes its script's state on the app root: [data-testid=stApp][data-test-script-state] is
# "initial", then "running" / "rerunRequested" / ... and "notRunning" when a run is over. This script, run in
# every page before Streamlit's own, counts the runs that finished since the page loaded, so a test waits for
# the run its action started (a condition), never for a fixed time.
RUN_COUNTER_SCRIPT = """
window.__headroomRunsFinished = 0;
new MutationObserver((records) => {
  for (const record of records) {
    const state = record.target.getAttribute("data-test-script-state");
    if (state === "notRunning" && record.oldValue !== "notRunning") window.__headroomRunsFinished += 1;
  }
}).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ["data-test-script-state"]});
"""
# Settled: more than `after` runs finished, none is running, the connection is up, the page's title is there
# (every page has one) and no lazily loaded widget still shows its placeholder.
SETTLED = """(after) => {
  const app = document.querySelector("[data-testid=stApp]");
  return window.__headroomRunsFinished > after && app !== null
    && app.getAttribute("data-test-script-state") === "notRunning"
    && app.getAttribute("data-test-connection-state") === "CONNECTED"
    && document.querySelector("[data-testid=stMain] h1") !== null
    && document.querySelector("[data-testid=stStatusWidget]") === null
    && document.querySelector(
      "[data-testid=stSkeleton],[data-testid=stSkeletonElement],[data-testid=stAppSkeleton]") === null;
}"""
SETTLED_STATE = """(after) => {
  const app = document.querySelector("[data-testid=stApp]");
  return {runs_finished: window.__headroomRunsFinished, after: after,
    script_state: app && app.getAttribute("data-test-script-state"),
    connection: app && app.getAttribute("data-test-connection-state"),
    title: document.querySelector("[data-testid=stMain] h1")?.innerText ?? null,
    status_widget: document.querySelector("[data-testid=stStatusWidget]")?.innerText ?? null,
    skeletons: document.querySelectorAll(
      "[data-testid=stSkeleton],[data-testid=stSkeletonElement],[data-testid=stAppSkeleton]").length,
    url: location.href};
}"""
# Every chart on the page has drawn (Vega-Lite renders into a canvas or an svg after the run delivered it),
# and the browser has painted twice since: what a screenshot should show.
CHARTS_DRAWN = """() => [...document.querySelectorAll("[data-testid=stVegaLiteChart]")]
  .every((chart) => chart.querySelector("canvas, svg") !== null)"""
TWO_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def new_page(browser, viewport=WIDE, downloads: bool = False):
    context = browser.new_context(viewport=viewport, accept_downloads=downloads)
    context.set_default_timeout(STEP_MS)
    context.add_init_script(RUN_COUNTER_SCRIPT)
    return context, context.new_page()


def runs_finished(page) -> int:
    """Script runs finished since the page (document) loaded."""
    return int(page.evaluate("() => window.__headroomRunsFinished || 0"))


def settle(page, after: int = 0) -> None:
    """Wait until a script run, the (after + 1)-th since the page loaded or a later one, has finished and
    lazily loaded widgets replaced their placeholders. After an action that reruns the script, pass
    `runs_finished(page)` read before the action (or use `rerun`), so the wait is for that action's run and
    not the one before it."""
    try:
        page.wait_for_function(SETTLED, arg=after)
    except sync_api.TimeoutError:
        # Say which condition never held: a bare timeout on CI cannot be told from a hung server.
        state = page.evaluate(SETTLED_STATE, after)
        raise AssertionError(f"the page never settled (after {after} runs): {state}") from None


def rerun(page, action) -> None:
    """Do `action` (a click, a key press) and wait until the script run it triggers has finished."""
    before = runs_finished(page)
    action()
    settle(page, before)


def metric_values(page) -> dict[str, str]:
    page.wait_for_selector("[data-testid=stMetric]")
    values = {}
    for item in page.locator("[data-testid=stMetric]").all():
        label = item.locator("[data-testid=stMetricLabel]").inner_text().strip()
        values[label] = item.locator("[data-testid=stMetricValue]").inner_text().strip()
    return values


def open_app(page, url: str) -> dict[str, str]:
    page.goto(url)
    settle(page)
    page.get_by_text("Output tokens/s").first.wait_for()
    return metric_values(page)


def concurrency_thumb(page):
    """The log-scale concurrency slider's thumb: a keyboard-focusable element with role=slider."""
    return page.locator("[data-testid=stSlider]").filter(has_text="Concurrency").get_by_role("slider")


def concurrency_box(page):
    """The exact-value number box beside the slider (the bound widget: its value is the URL's)."""
    return page.locator("[data-testid=stNumberInput]").filter(has_text="Exact").locator("input")


def wait_for_new_metric(page, before: dict, name: str = "Output tokens/s") -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => "
        f"m.innerText.includes({name!r}) && !m.innerText.includes({before[name]!r}))",
        timeout=STEP_MS,
    )


def screenshot(page, name: str) -> None:
    """The viewport as a user sees it, and the whole page (Streamlit scrolls inside its main container)."""
    settle(page)
    page.wait_for_function(CHARTS_DRAWN)
    page.evaluate(TWO_FRAMES)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    height = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll("
        "'[data-testid=stMain], [data-testid=stAppViewContainer], section')].map(e => e.scrollHeight))"
    )
    viewport = page.viewport_size
    tall = min(int(height) + 40, 8000)
    page.set_viewport_size({"width": viewport["width"], "height": tall})
    page.wait_for_function("(tall) => window.innerHeight === tall", arg=tall)
    page.wait_for_function(CHARTS_DRAWN)
    page.evaluate(TWO_FRAMES)
    page.screenshot(path=str(SHOTS / f"{name}-full.png"), full_page=True)
    page.set_viewport_size(viewport)


def review_query() -> str:
    """A manager's link: two pinned plans with decisions, and the review's targets."""
    from urllib.parse import urlencode

    from planner import InferenceScenario
    from ui.links import encode_pin

    plans = [
        InferenceScenario(
            concurrency=176,
            label="Max batch on 4× H100",
            decision="Serve 176 concurrent chats on 4 GPUs; accept the thin headroom for launch.",
        ),
        InferenceScenario(
            concurrency=176,
            kv_cache_dtype="fp8",
            label="fp8 KV cache",
            decision="Halve the KV cache with fp8 to keep 20%+ headroom at the same batch.",
        ),
    ]
    return urlencode(
        {
            "pin": [encode_pin(p) for p in plans],
            "review_max_ttft_s": "0.5",
            "review_max_tpot_ms": "30",  # below even the likely range's low end: every pinned plan misses it
            "review_max_usd_per_month": "10000",
        },
        doseq=True,
    )


def navigate(page, title: str) -> None:
    rerun(page, page.get_by_role("link", name=title, exact=True).first.click)


def test_slider_share_link_and_csv_round_trip(browser, server, tmp_path):
    context, page = new_page(browser, downloads=True)
    try:
        before = open_app(page, server + "/")
        assert concurrency_box(page).input_value() == "64"
        # The log slider moves one stop (64 -> 96) and writes it into the exact box and the URL ...
        thumb = concurrency_thumb(page)
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_url(re.compile(r"inference_concurrency=96"))
        wait_for_new_metric(page, before)
        settle(page)
        moved = metric_values(page)
        assert concurrency_box(page).input_value() == "96"
        # ... and the box takes an exact value the slider has no stop for.
        box = concurrency_box(page)
        box.fill("74")
        box.press("Enter")
        wait_for_new_metric(page, moved)
        settle(page)
        after = metric_values(page)
        assert concurrency_box(page).input_value() == "74"
        assert after["Output tokens/s"] != before["Output tokens/s"]
        assert after["Time per output token"] != before["Time per output token"]

        page.wait_for_url(re.compile(r"inference_concurrency=74"))
        url = page.url

        # "Copy share link" shows the same plan's link (what the address bar says, in planner.share's format).
        page.get_by_role("button", name=re.compile("Copy share link")).first.click()
        shown = page.locator("[data-testid=stPopoverBody] [data-testid=stCode]").first.inner_text().strip()
        page.keyboard.press("Escape")
        assert urlsplit(shown).path.rstrip("/").endswith("/inference")
        assert parse_qs(urlsplit(shown).query) == parse_qs(urlsplit(url).query) == {"inference_concurrency": ["74"]}

        # The same URL in a fresh browser context (no shared session, cookies or storage) shows the same plan.
        other_context, other = new_page(browser)
        try:
            reopened = open_app(other, url)
            assert reopened == after
            assert concurrency_box(other).input_value() == "74"
        finally:
            other_context.close()

        # Download the plan as CSV ...
        with page.expect_download(timeout=STEP_MS) as download:
            page.get_by_role("button", name=re.compile("Download CSV")).first.click()
        csv_path = tmp_path / "plan.csv"
        download.value.save_as(csv_path)
        text = csv_path.read_text()
        header, row = text.splitlines()[:2]
        columns = dict(zip(header.split(","), row.split(",")))
        assert columns["scenario.concurrency"] == "74"
        (ARTIFACTS / "downloaded-plan.csv").write_text(text)

        # ... and import it on Compare in a fresh session: the plan comes back exactly.
        import_context, importer = new_page(browser)
        try:
            importer.goto(server + "/compare")
            settle(importer)
            importer.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(str(csv_path))
            importer.get_by_text("Imported 1 plan from plan.csv").wait_for()
            settle(importer)
            importer.get_by_text(re.compile(r"1 · Llama 3\.1 70B")).first.wait_for()
            assert "pin=cfg" in importer.url
            screenshot(importer, "compare-1280")
            navigate(importer, "Review")
            numbers = importer.locator("[data-testid=stTable]").first.inner_text()
            assert after["Time per output token"] in numbers
            assert after["Time to first token"] in numbers
            screenshot(importer, "review-1280")
        finally:
            import_context.close()
    finally:
        context.close()


def test_screenshots_of_every_page(browser, server):
    for viewport, suffix in ((WIDE, "1280"), (NARROW, "narrow")):
        context, page = new_page(browser, viewport)
        try:
            page.on("pageerror", lambda error: pytest.fail(f"JavaScript error: {error}"))
            for name in PAGES:
                if name in ("compare", "review") and suffix == "1280":
                    continue  # taken with pinned plans by the round-trip test
                page.goto(f"{server}/{name}")
                settle(page)
                assert not page.locator("[data-testid=stException]").count(), f"traceback on {name}"
                screenshot(page, f"{name}-{suffix}")
            if suffix == "1280":
                page.goto(f"{server}/review?{review_query()}")
                settle(page)
                page.get_by_text("Misses the latency target").first.wait_for()
                page.get_by_text("Headroom is only").first.wait_for()
                screenshot(page, "review-targets-1280")
                page.goto(f"{server}/inference?inference_concurrency=96")
                settle(page)
                page.locator("[data-testid=stButtonGroup] button").filter(has_text="Concurrency × context").click()
                page.get_by_text("Colour: output tokens/s").wait_for()
                screenshot(page, "inference-heatmap-1280")
                # The trade-offs search: one press, then the Pareto frontier with the best plan.
                page.goto(
                    f"{server}/tradeoffs?tradeoffs_gpus=NVIDIA+H100+SXM5+80GB&tradeoffs_gpus=NVIDIA+H200+SXM+141GB"
                )
                settle(page)
                page.get_by_test_id("stBaseButton-primaryFormSubmit").click()
                page.get_by_text("Pareto frontier: $ per 1M output tokens").wait_for()
                assert not page.locator("[data-testid=stException]").count(), "traceback after the search"
                screenshot(page, "tradeoffs-search-1280")
        finally:
            context.close()
    assert len(list(SHOTS.glob("*.png"))) >= 2 * len(PAGES)
