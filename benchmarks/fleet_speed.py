"""How long does a fleet take to plan? One worker against several, on the three-model example.

    .venv/bin/python benchmarks/fleet_speed.py [--fleet examples/fleet-three-models.json] [--workers 1 4]
        [--runs 3] [--ray local]

A report, not a timed assertion: the numbers depend on the machine and its load (quote them with both; on a
shared machine pin it, e.g. `taskset -c 0` for the one-core figure). Each figure is the best of `--runs` calls of
`plan_fleet` in this process (a fresh process pool each call, so the pool's start-up is counted; the interpreter's
own start and the imports are not). The target (issue 26): the example in at most 10 s on one core and 3 s with 4
workers. Every run's answer is checked equal to the first one's (the backends must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from planner.fleet import manager_summary, plan_fleet

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default=str(ROOT / "examples" / "fleet-three-models.json"))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray", help="also time Ray tasks at this address ('local' starts one here)")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.fleet).read_text())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"machine: {platform.processor() or platform.machine()}, {cores} usable core(s), Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}"
    )
    reference = None
    backends: list[tuple[str, dict]] = [(f"{w} worker(s)", {"workers": w}) for w in args.workers]
    if args.ray:
        backends.append((f"Ray ({args.ray})", {"ray_address": args.ray}))
    for label, options in backends:
        best = float("inf")
        for _ in range(args.runs):
            start = time.perf_counter()
            answer = plan_fleet(data, **options)
            best = min(best, time.perf_counter() - start)
            text = answer.model_dump_json()
            if reference is None:
                reference = text
                print(manager_summary(answer))
            elif text != reference:
                print(f"  {label}: the answer differs from the first run's")
                return 1
        print(f"{label:>14s}: {best:6.2f} s (best of {args.runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
