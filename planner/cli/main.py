"""Headless Headroom: `python -m planner <command>`.

  plan SCENARIO.json [--format json|csv] [--calibration FILE]   plan one scenario or a JSON list of them
  schema [--kind inference|training]                            print the scenario JSON schema
  share SCENARIO.json [--base-url URL]                          print the dashboard link for a scenario
  models | gpus                                                 list the catalogs

Invalid input exits with status 2 and the validation message on stderr; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.calibration.store import load_calibration_file
from planner.errors import PlanningError, explain
from planner.export import plans_to_csv
from planner.hardware.catalog import list_accelerators
from planner.model.architecture import parameter_counts
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.plan import plan
from planner.safe_json import load_json
from planner.scenario import parse_scenario, scenario_adapter
from planner.share import scenario_classes, share_url

MAX_INPUT_BYTES = 16 * 1024 * 1024
EXIT_INVALID = 2


class CliError(Exception):
    """A user-facing failure: printed as one message, exit status 2."""


def _read_json(path: str) -> Any:
    try:
        if path == "-":
            text = sys.stdin.read(MAX_INPUT_BYTES + 1)
        else:
            file = Path(path)
            if file.stat().st_size > MAX_INPUT_BYTES:
                raise CliError(f"{path} is larger than {MAX_INPUT_BYTES // (1 << 20)} MiB")
            text = file.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path} is not UTF-8 text") from None

    try:
        return load_json(text, path, MAX_INPUT_BYTES)
    except PlanningError as exc:
        raise CliError(str(exc)) from None


def _scenarios(data: Any) -> tuple[list, bool]:

    many = isinstance(data, list)
    items = data if many else [data]
    if not items:
        raise CliError("the scenario list is empty")
    scenarios = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise CliError(f"scenario {index}: expected a JSON object, got {type(item).__name__}")
        try:
            scenarios.append(parse_scenario(item))
        except (ValidationError, PlanningError) as exc:
            where = f"scenario {index}: " if many else ""
            raise CliError(f"{where}{explain(exc)}") from None
    return scenarios, many


def _load_calibration(path: str | None):
    if not path:
        return None

    try:
        return load_calibration_file(Path(path))
    except (ValidationError, PlanningError, OSError, ValueError) as exc:
        raise CliError(f"calibration {path}: {explain(exc)}") from None


def cmd_plan(args: argparse.Namespace) -> int:

    scenarios, many = _scenarios(_read_json(args.scenario))
    calibration = _load_calibration(args.calibration)
    plans = []
    for scenario in scenarios:
        try:
            plans.append(plan(scenario, calibration))
        except PlanningError as exc:
            raise CliError(explain(exc)) from None
    if args.format == "csv":
        sys.stdout.write(plans_to_csv(plans))
        return 0
    payload = [p.model_dump(mode="json") for p in plans]
    json.dump(payload if many else payload[0], sys.stdout, indent=2, allow_nan=True)
    sys.stdout.write("\n")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:

    if args.kind:
        schema = scenario_classes()[args.kind].model_json_schema()
    else:
        schema = scenario_adapter().json_schema()
    json.dump(schema, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_share(args: argparse.Namespace) -> int:

    scenarios, _ = _scenarios(_read_json(args.scenario))
    for scenario in scenarios:
        print(share_url(scenario, args.base_url))
    return 0


def cmd_models(args: argparse.Namespace) -> int:

    for model_id in catalog_model_ids():
        arch = resolve_model(model_id)
        counts = parameter_counts(arch)
        print(f"{model_id:24s} {counts.total / 1e9:9.2f}B total {counts.active / 1e9:8.2f}B active  {arch.name}")
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:

    for accel in list_accelerators():
        print(
            f"{accel.id:12s} {accel.memory_bytes / 2**30:7.1f} GiB  {accel.memory_bandwidth_bytes_per_second / 1e12:5.2f} TB/s"
            f"  bf16 {accel.peak_flops('bf16') / 1e12:7.1f} TFLOP/s  ${accel.reference_usd_per_hour:.2f}/h (reference)"
            f"  {accel.name}"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m planner", description="Headroom LLM capacity planner")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="plan scenario(s) from a JSON file ('-' for stdin)")
    p.add_argument("scenario")
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--calibration", help="calibration record JSON to apply")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("schema", help="print the scenario JSON schema")
    p.add_argument("--kind", choices=("inference", "training"))
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("share", help="print the dashboard link for scenario(s)")
    p.add_argument("scenario")
    p.add_argument("--base-url", default="http://localhost:8501")
    p.set_defaults(func=cmd_share)

    sub.add_parser("models", help="list catalog models").set_defaults(func=cmd_models)
    sub.add_parser("gpus", help="list catalog accelerators").set_defaults(func=cmd_gpus)

    for register in _extra_commands():
        register(sub)
    return parser


def _extra_commands():
    """Commands that live with their feature (search, calibrate) register themselves here."""

    registrars = []
    for module_name in ("planner.cli.search", "planner.cli.calibrate"):
        if importlib.util.find_spec(module_name) is not None:
            registrars.append(importlib.import_module(module_name).register)
    return registrars


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except (ValidationError, PlanningError) as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:
        return 0
