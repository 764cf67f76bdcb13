"""A bounded load test on loopback: N browser sessions change concurrency on one running dashboard.

    .venv/bin/python benchmarks/load_test.py [--sessions 6] [--seconds 60]

Starts `streamlit run app.py` on a free 127.0.0.1 port, opens N independent headless Chromium contexts
(Debian's /usr/bin/chromium; nothing is downloaded), and in each one repeatedly types the next concurrency
into its number box and waits until the page shows the new plan. Reports the rerun latency a user sees
(keypress -> new numbers on screen, p50/p95/max), errors (exceptions rendered on a page, timeouts: must
be zero) and the server's resident memory before, after and its growth. Only loopback traffic; stops
by itself after --seconds; always kills the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("HEADROOM_CHROMIUM", "/usr/bin/chromium")
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
WAIT_MS = 30_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident memory of the server process tree (streamlit runs in one process)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_server(port: int) -> subprocess.Popen:
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
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return proc
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    raise RuntimeError("streamlit did not become healthy within 60 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def session(browser, base: str, until: float, latencies: list[float], errors: list[str], index: int) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    try:
        await page.goto(base + "/inference")
        await page.wait_for_selector("[data-testid=stMetric]")
        box = page.locator("[data-testid=stNumberInput]").filter(has_text="Exact").locator("input")
        target = 40 + index  # each session walks its own values so no two ask for the same plan at once
        step = 1
        moves = 0
        while time.monotonic() < until:
            started = time.perf_counter()
            target += step
            await box.fill(str(target))
            await box.press("Enter")
            try:
                # The page's summary line names the concurrency the plan was computed for.
                await page.wait_for_function(
                    "(n) => document.querySelector('[data-testid=stMain]').innerText.includes('× ' + n + ' in flight')",
                    arg=f"{target:,}",
                    timeout=WAIT_MS,
                )
            except Exception as exc:  # a timeout is an error the report counts
                errors.append(f"session {index}: no new plan within {WAIT_MS / 1000:.0f} s ({type(exc).__name__})")
                continue
            latencies.append(time.perf_counter() - started)
            if await page.locator("[data-testid=stException]").count():
                errors.append(f"session {index}: an exception is shown on the page")
            moves += 1
            if moves % 20 == 0:  # sweep back and forth over part of the range
                step = -step
    finally:
        await context.close()


async def run(sessions: int, seconds: float) -> dict:
    from playwright.async_api import async_playwright

    port = free_port()
    proc = start_server(port)
    base = f"http://127.0.0.1:{port}"
    latencies: list[float] = []
    errors: list[str] = []
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                # Warm-up: one visit so imports and caches are loaded before memory is measured.
                warm = await browser.new_context()
                page = await warm.new_page()
                await page.goto(base + "/inference")
                await page.wait_for_selector("[data-testid=stMetric]", timeout=WAIT_MS)
                await warm.close()
                rss_before = rss_bytes(proc.pid)
                until = time.monotonic() + seconds
                await asyncio.gather(*(session(browser, base, until, latencies, errors, i) for i in range(sessions)))
                rss_after = rss_bytes(proc.pid)
            finally:
                await browser.close()
    finally:
        stop_server(proc)
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    return dict(
        sessions=sessions,
        seconds=seconds,
        reruns=len(latencies),
        errors=errors,
        p50=quantile(0.5),
        p95=quantile(0.95),
        max=ordered[-1] if ordered else float("nan"),
        mean=statistics.fmean(ordered) if ordered else float("nan"),
        rss_before=rss_before,
        rss_after=rss_after,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 32 or not 1 <= args.seconds <= 600:
        parser.error("--sessions must be 1-32 and --seconds 1-600 (the test is bounded)")
    result = asyncio.run(run(args.sessions, args.seconds))
    mib = 1 << 20
    print(
        f"sessions {result['sessions']}, {result['seconds']:.0f} s, {result['reruns']} reruns, "
        f"{len(result['errors'])} errors"
    )
    print(
        f"rerun latency (keypress -> new plan on screen): p50 {result['p50'] * 1e3:.0f} ms, "
        f"p95 {result['p95'] * 1e3:.0f} ms, max {result['max'] * 1e3:.0f} ms"
    )
    print(
        f"server RSS: before {result['rss_before'] / mib:.0f} MiB, after {result['rss_after'] / mib:.0f} MiB, "
        f"growth {(result['rss_after'] - result['rss_before']) / mib:+.0f} MiB"
    )
    for error in result["errors"][:20]:
        print("  error:", error)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
