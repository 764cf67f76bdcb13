"""Server-side rerun time of the dashboard after a widget change, measured with Streamlit's AppTest.

Each timed rerun changes an input to a value not seen before, so plan() and the sweeps really run
(nothing is served from st.cache_data). AppTest runs the script in-process: the time includes the
script, plan(), chart specs and AppTest's own bookkeeping, but no network or browser rendering.

    .venv/bin/python benchmarks/rerun_timing.py            # 15 reruns per case
    .venv/bin/python benchmarks/rerun_timing.py --reruns 30

Target (issue): well under 200 ms for the Inference and Training pages. The Trade-offs cases are for
information: its search runs only when Search is pressed (timed here with a new constraint each time, so
the grid is really evaluated), and a calibrated case shows what an active calibration adds.

Calibration records are read from a temporary data directory ($HEADROOM_DATA_DIR), never the user's.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["HEADROOM_DATA_DIR"] = tempfile.mkdtemp(prefix="headroom-rerun-timing-")
atexit.register(shutil.rmtree, os.environ["HEADROOM_DATA_DIR"], ignore_errors=True)

from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
sys.path.insert(0, str(ROOT))


def calibration_query(path: Path) -> dict[str, str]:
    """The checked-in CPU calibration as a share-link parameter: calibrations are per session now."""
    from planner.calibration import store
    from planner.share import CALIBRATION_PARAM, encode_calibration

    return {CALIBRATION_PARAM: encode_calibration(store.load_calibration_file(path))}


def _open(page: str, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    if page != "inference":
        at.switch_page(f"app_pages/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _time_case(name: str, page: str, change, values, setup=None, query=None) -> dict:
    at = _open(page, query)
    if setup is not None:
        setup(at)
        at.run()
    for value in values[:2]:  # warm-up: imports, chart templates, first cache entries
        change(at, value)
        at.run()
    times = []
    for value in values[2:]:
        change(at, value)
        start = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - start) * 1e3)
        assert not at.exception, [e.value for e in at.exception]
    times.sort()
    return {
        "case": name,
        "reruns": len(times),
        "median_ms": statistics.median(times),
        "p90_ms": times[int(0.9 * (len(times) - 1))],
        "max_ms": times[-1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reruns", type=int, default=15)
    args = parser.parse_args(argv)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    n = args.reruns + 2

    def slider(at, value):
        at.number_input(key="inference_concurrency").set_value(value)

    def heatmap(at):
        at.button_group(key="inference_view_explore").set_value("Concurrency × context")

    def batch(at, value):
        at.number_input(key="training_global_batch_size").set_value(value)

    def sequence(at, value):
        at.number_input(key="training_sequence_length").set_value(value)

    def tpot_limit(at, value):
        at.number_input(key="tradeoffs_max_tpot_ms").set_value(value)
        at.button(key="tradeoffs_search_run").click()

    def view(at, value):
        at.button_group(key="tradeoffs_view_position").set_value("Roofline (decode)" if value % 2 else "Memory vs time")

    results = [
        _time_case(
            "inference: concurrency slider (latency curve shown)", "inference", slider, [40 + i for i in range(n)]
        ),
        _time_case(
            "inference: concurrency slider (heatmap shown)",
            "inference",
            slider,
            [40 + i for i in range(n)],
            setup=heatmap,
        ),
        _time_case("training: global batch size", "training", batch, [64 + 8 * i for i in range(n)]),
        _time_case("training: sequence length", "training", sequence, [4096 + 256 * i for i in range(n)]),
    ]
    results.append(
        _time_case(
            "inference: concurrency slider, calibration active",
            "inference",
            slider,
            [140 + i for i in range(n)],
            query=calibration_query(ROOT / "benchmarks" / "calibration_cpu.json"),
        )
    )
    results += [
        _time_case("trade-offs: switch memory/roofline view (cached plans)", "tradeoffs", view, list(range(n))),
        _time_case(
            "trade-offs: Search with a new TPOT limit (grid evaluated)",
            "tradeoffs",
            tpot_limit,
            [60.0 + i for i in range(n)],
        ),
    ]
    width = max(len(r["case"]) for r in results)
    print(f"{'case':<{width}}  reruns  median    p90     max")
    for r in results:
        print(
            f"{r['case']:<{width}}  {r['reruns']:>6}  {r['median_ms']:>6.1f}  {r['p90_ms']:>6.1f}  {r['max_ms']:>6.1f}  ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
