"""`python -m planner fleet`: several deployments over a day on GPU pools, headless.

    python -m planner fleet FLEET.json [--format json|text|csv] [--workers N] [--ray ADDRESS]

FLEET.json is a fleet scenario (`python -m planner schema --kind fleet`). A deployment may name its rate trace as a
file, `"rate_trace_file": "rates.csv"` (read relative to FLEET.json), instead of inlining it as `rate_trace_csv`.
JSON output is the whole `FleetAnswer` (hours, deployments, pools, cost split, energy, spares, comparisons, what was
left out and why); csv is one row per hour and deployment; text is for a reader. The simulations run on `--workers`
local processes (default: every core this process may use); with `--ray ADDRESS` (or the RAY_ADDRESS environment
variable) and ray installed (`pip install "headroom[cluster]"`), as Ray tasks — the answer is the same.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.cli.main import CliError, _read_json, read_text
from planner.errors import PlanningError, explain
from planner.fleet import fleet_csv, fleet_text, plan_fleet
from planner.fleet.demand import MAX_RATE_TRACE_BYTES
from planner.fleet.runner import RAY_INSTALL, default_workers, ray_available


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fleet",
        help="plan several deployments over a day on GPU pools: replicas per hour, spares, the bill, energy",
        description="Size every hour of a fleet's day from each deployment's simulated SLO capacity, with spares, "
        "reserved/on-demand/spot pricing, energy and comparisons (one GPU kind vs the mix, packed vs dedicated).",
    )
    p.add_argument("fleet", help="fleet scenario JSON file ('-' for stdin)")
    p.add_argument("--format", choices=("json", "text", "csv"), default="json")
    p.add_argument("--workers", type=int, help="local processes for the simulations (default: the usable cores)")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the simulations as Ray tasks: 'auto', 'ray://HOST:10001' or 'local' (default: $RAY_ADDRESS if set "
        "and ray is installed)",
    )
    p.set_defaults(func=run)


def _inline_traces(data: Any, base: Path) -> Any:
    """Each deployment's `rate_trace_file` read into `rate_trace_csv` (relative to the fleet file's folder)."""
    if not isinstance(data, dict) or not isinstance(data.get("deployments"), list):
        return data
    deployments = []
    for entry in data["deployments"]:
        if isinstance(entry, dict) and "rate_trace_file" in entry:
            entry = dict(entry)
            name = entry.pop("rate_trace_file")
            if not isinstance(name, str) or not name:
                raise CliError(f"deployment {entry.get('name', '?')!r}: rate_trace_file must be a file name")
            path = base / name
            entry["rate_trace_csv"] = read_text(str(path), MAX_RATE_TRACE_BYTES, hint="; resample the trace first")
        deployments.append(entry)
    return {**data, "deployments": deployments}


def _backend(args: argparse.Namespace) -> tuple[int, str | None]:
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be at least 1, got {args.workers}")
    workers = args.workers or default_workers()
    if args.ray is not None:
        if not ray_available():
            raise CliError(f"--ray needs the ray package, which is not installed: {RAY_INSTALL}")
        return workers, args.ray
    address = os.environ.get("RAY_ADDRESS")
    return workers, (address if address and ray_available() else None)


def run(args: argparse.Namespace) -> int:
    base = Path(args.fleet).resolve().parent if args.fleet != "-" else Path.cwd()
    data = _inline_traces(_read_json(args.fleet), base)
    workers, ray_address = _backend(args)
    try:
        answer = plan_fleet(data, workers=workers, ray_address=ray_address)
    except (PlanningError, ValidationError) as exc:
        raise CliError(explain(exc)) from None
    if args.format == "csv":
        sys.stdout.write(fleet_csv(answer))
    elif args.format == "text":
        sys.stdout.write(fleet_text(answer))
    else:
        sys.stdout.write(answer.model_dump_json(indent=2) + "\n")
    return 0
