"""How much does the CLI add on top of plan()? Per-plan cost of `plan` over 2,000 scenarios.

    .venv/bin/python benchmarks/cli_speed.py [--count 2000] [--cli path/to/other/main.py]

The scenarios are examples/inference-llama70b-h100.json with concurrency 1..COUNT, written to a temporary
file as one JSON list. Each output format is timed through the CLI code path in-process (main() with
stdout sent to a file) and once through a real `python -m planner` subprocess (interpreter start and
imports included). `--cli` loads another copy of planner/cli/main.py (e.g. the previous version, saved
with `git show HEAD:planner/cli/main.py > /tmp/old_main.py`) so before/after run on the same machine.

Times are CPU time (process_time; the subprocess's from getrusage), the best of --repeats runs.
A report, not a timed assertion: numbers depend on the machine (quote them with it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from planner.cli.main import main as installed_main
from planner.plan import plan
from planner.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "inference-llama70b-h100.json"


def load_cli(path: str | None):
    """The CLI's `main` function: the installed one, or the copy at `path` (an older version)."""
    if path is None:
        return installed_main
    spec = importlib.util.spec_from_file_location("cli_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def best_seconds(fn, repeats: int) -> float:
    """CPU seconds of the fastest of `repeats` runs. CPU time, not wall time, and the minimum: on a shared
    machine both are far less disturbed by other work than a wall-clock mean."""
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cli", help="path of another planner/cli/main.py to time instead of the installed one")
    args = parser.parse_args()
    cli_main = load_cli(args.cli)

    base = json.loads(EXAMPLE.read_text())
    scenarios = [dict(base, concurrency=c) for c in range(1, args.count + 1)]
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}; {args.count:,} scenarios"
    )
    print(f"CLI: {args.cli or 'planner.cli.main (working tree)'}")

    engine = best_seconds(lambda: [plan(parse_scenario(s)) for s in scenarios], args.repeats)
    print(f"  parse + plan() alone             {engine / args.count * 1e3:7.3f} ms CPU per plan")

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "scenarios.json"
        source.write_text(json.dumps(scenarios))
        sink = Path(tmp) / "out"
        for fmt in ("json", "jsonl", "csv"):

            def run_in_process(fmt: str = fmt) -> None:
                with sink.open("w") as out, contextlib.redirect_stdout(out):
                    status = cli_main(["plan", str(source), "--format", fmt])
                if status != 0:
                    raise SystemExit(f"plan --format {fmt} exited {status}")

            try:
                seconds = best_seconds(run_in_process, args.repeats)
            except SystemExit as exc:  # argparse rejects a format the older CLI does not have
                print(f"  in-process --format {fmt:5s}        not available ({exc})")
                continue
            print(
                f"  in-process --format {fmt:5s}        {seconds / args.count * 1e3:7.3f} ms CPU per plan "
                f"(output {sink.stat().st_size / 2**20:.1f} MiB)"
            )

        if args.cli is None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            with sink.open("w") as out:
                subprocess.run([sys.executable, "-m", "planner", "plan", str(source)], stdout=out, check=True, cwd=ROOT)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            print(
                f"  subprocess python -m planner plan {cpu / args.count * 1e3:7.3f} ms CPU per plan "
                f"({cpu:.2f} s CPU, {wall:.2f} s wall in all, interpreter start and imports included)"
            )


if __name__ == "__main__":
    main()
