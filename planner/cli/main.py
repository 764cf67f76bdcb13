"""Headless Headroom: `python -m planner <command>`, or `headroom <command>` once installed.

  plan SCENARIO.json [--format json|jsonl|csv|summary] [--calibration FILE [--calibration-any-gpu]]
                                                     plan one scenario or a JSON list of them
  schema [--kind inference|training|fleet]           print the scenario JSON schema
  share SCENARIO.json [--base-url URL]               print the dashboard link for a scenario
  search SCENARIO.json --constraint ...              best configurations under constraints (cli/search.py)
  diagnose SCENARIO.json [--format json|text]       what binds, what each technique buys, checklist (cli/diagnose.py)
  traffic SCENARIO.json [--rate R] [--slo ...]       a request stream simulated: percentiles, SLO, GPUs (cli/traffic.py)
  calibrate [...]                                    profile this machine (cli/calibrate.py)
  deploy SCENARIO.json [--engine E] [--format text|json|k8s]  serve + benchmark commands, k8s (cli/deploy.py)
  fleet FLEET.json [--format json|text|csv] [--workers N] [--ray ADDRESS]  deployments over a day (cli/fleet.py)
  models | gpus                                      list the catalogs
  hub MODEL_ID[@REVISION]                            import a Hugging Face Hub model (cli/hub.py); scenario
                                                     JSON may also say "model": "hf:org/name[@revision]"
  app [STREAMLIT OPTIONS]                            start the dashboard (`streamlit run` on the installed app.py)

Invalid input of any command exits with status 2 and one sentence on stderr (`error: ...`), never a
traceback. A reader that stops early (`| head`) ends the output quietly with status 141, as `cat` or `git`
do when SIGPIPE ends them.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from planner.calibration.store import load_calibration_file
from planner.cli.hub import with_hub_model
from planner.errors import PlanningError, explain
from planner.export import plans_to_csv, plans_to_summary_csv
from planner.fleet.scenario import FleetScenario
from planner.hardware.catalog import list_accelerators
from planner.inference.results import InferencePlan
from planner.model.architecture import parameter_counts
from planner.model.catalog import catalog_model_ids, resolve_model
from planner.plan import plan
from planner.safe_json import load_json
from planner.scenario import parse_scenario, scenario_adapter
from planner.share import scenario_classes, share_url
from planner.training.results import TrainingPlan

MAX_INPUT_BYTES = 16 * 1024 * 1024
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `cat big | head`
# The repository (or site-packages, when installed) holding planner/; see dashboard_script().
SOURCE_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_PACKAGE = "headroom_dashboard"  # where the wheel puts app.py and app_pages/ (pyproject.toml)

# pydantic's serializer writes the JSON in Rust, ~4x faster than model_dump() + json.dump for a plan
# (benchmarks/cli_speed.py); it writes a non-finite float as null, so the output is always strict JSON.
# A list is written plan by plan (`_json_list`): TypeAdapter(list[InferencePlan | TrainingPlan]) writes the same
# bytes but spends ~15 % more choosing each item's member of the union.


def _json_list(plans: Sequence[InferencePlan | TrainingPlan]) -> str:
    """The plans as one JSON list indented by 2, byte for byte what pydantic writes for the list: each plan's own
    JSON, its lines indented one level (JSON text never holds a raw newline inside a string)."""
    items = ("  " + p.model_dump_json(indent=2).replace("\n", "\n  ") for p in plans)
    return "[\n" + ",\n".join(items) + "\n]" if plans else "[]"


class CliError(Exception):
    """A user-facing failure of any command: main() prints it as one `error:` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are CliErrors, so they read like every other error (one line, status 2)
    instead of a usage block; sub-command parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (`{self.prog} --help` lists the options)")


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (a Python type name would confuse a JSON author)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def read_text(path: str, max_bytes: int = MAX_INPUT_BYTES, hint: str = "") -> str:
    """The UTF-8 text at `path` ('-' for stdin), at most `max_bytes`, or CliError naming the file and the
    problem (`hint` is added to the size and encoding sentences)."""
    try:
        if path == "-":
            text = sys.stdin.read(max_bytes + 1)
            if len(text) > max_bytes:
                raise CliError(f"stdin is larger than {max_bytes // (1 << 20)} MiB{hint}")
            return text
        file = Path(path)
        if file.stat().st_size > max_bytes:
            raise CliError(f"{path} is larger than {max_bytes // (1 << 20)} MiB{hint}")
        return file.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path} is not UTF-8 text{hint}") from None


def _read_json(path: str) -> Any:
    """The JSON document at `path` ('-' for stdin), or CliError naming the file and the problem."""
    text = read_text(path)
    try:
        return load_json(text, path, MAX_INPUT_BYTES)
    except PlanningError as exc:
        raise CliError(str(exc)) from None


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field's annotation (`LoraConfig | None` -> LoraConfig), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _nested_model(argument)
        if found is not None:
            return found
    return None


def _key_suggestions(error: ValidationError) -> list[str]:
    """ "'concurrency' for 'concurency'" for each unknown key with a close field name (pydantic's
    extra_forbidden errors; loc is (kind, [nested field, ...] key))."""
    suggestions = []
    for item in error.errors(include_url=False):
        location = item.get("loc", ())
        if item.get("type") != "extra_forbidden" or len(location) < 2:
            continue
        model: type[BaseModel] | None = scenario_classes().get(str(location[0]))
        for part in location[1:-1]:
            field = model.model_fields.get(str(part)) if model is not None else None
            model = _nested_model(field.annotation) if field is not None else None
        if model is None:
            continue
        key = str(location[-1])
        match = difflib.get_close_matches(key, list(model.model_fields), n=1)
        if match:
            suggestions.append(f"'{match[0]}' for '{key}'")
    return suggestions


def _explain_scenario(error: ValidationError | PlanningError) -> str:
    """explain(), plus "did you mean ...?" when the problem is a misspelt key."""
    message = explain(error)
    suggestions = _key_suggestions(error) if isinstance(error, ValidationError) else []
    if suggestions:
        message += f" (did you mean {' and '.join(suggestions)}?)"
    return message


def _scenarios(data: Any) -> tuple[list, bool]:
    """Validated scenarios from a JSON object or list of objects, and whether it was a list.
    A message about a list item names its index."""
    many = isinstance(data, list)
    items = data if many else [data]
    if not items:
        raise CliError("the scenario list is empty")
    scenarios = []
    imported: dict = {}  # "hf:org/name" models fetched in this run
    for index, item in enumerate(items):
        where = f"scenario {index}: " if many else ""
        if not isinstance(item, dict):
            raise CliError(f"{where}expected a JSON object (a scenario's settings), got {_json_kind(item)}")
        try:
            scenarios.append(parse_scenario(with_hub_model(item, imported)))
        except (ValidationError, PlanningError) as exc:
            raise CliError(f"{where}{_explain_scenario(exc)}") from None
    return scenarios, many


def _load_calibration(path: str | None):
    if not path:
        return None

    try:
        return load_calibration_file(Path(path))
    except (ValidationError, PlanningError, OSError, ValueError) as exc:
        raise CliError(f"calibration {path}: {explain(exc)}") from None


def _write_plans(plans: list[InferencePlan | TrainingPlan], many: bool, output_format: str) -> None:
    """The plans on stdout: CSV, JSON (one object, or a list for a list of scenarios), or JSON Lines."""
    if output_format == "csv":
        sys.stdout.write(plans_to_csv(plans))
    elif output_format == "summary":
        sys.stdout.write(plans_to_summary_csv(plans))
    elif output_format == "jsonl":
        sys.stdout.writelines(p.model_dump_json() + "\n" for p in plans)
    elif many:
        sys.stdout.write(_json_list(plans) + "\n")
    else:
        sys.stdout.write(plans[0].model_dump_json(indent=2) + "\n")


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Reference counting alone while a batch of plans is built and written: a plan leaves next to no reference
    cycles (under a thousand unreachable objects after 2,000 plans), so the cycle collector's passes over the
    growing list of plans are pure cost, about a sixth of `plan` on 2,000 scenarios
    (benchmarks/cli_plan_speed.py). The collector is switched back on (and runs as usual) afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def cmd_plan(args: argparse.Namespace) -> int:

    if args.calibration_any_gpu and not args.calibration:
        raise CliError("--calibration-any-gpu needs a calibration: add --calibration FILE")
    scenarios, many = _scenarios(_read_json(args.scenario))
    calibration = _load_calibration(args.calibration)
    with _without_cycle_collection():
        plans = []
        for index, scenario in enumerate(scenarios):
            try:
                plans.append(plan(scenario, calibration, calibration_any_gpu=args.calibration_any_gpu))
            except PlanningError as exc:
                raise CliError(f"scenario {index}: {explain(exc)}" if many else explain(exc)) from None
        _write_plans(plans, many, args.format)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:

    if args.kind == "fleet":
        schema = FleetScenario.model_json_schema()
    elif args.kind:
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
            f"{accel.id:15s} {accel.memory_bytes / 2**30:7.1f} GiB  {accel.memory_bandwidth_bytes_per_second / 1e12:5.2f} TB/s"
            f"  bf16 {accel.peak_flops('bf16') / 1e12:7.1f} TFLOP/s  ${accel.reference_usd_per_hour:.2f}/h (reference)"
            f"  {accel.name}"
        )
    return 0


def dashboard_script() -> Path:
    """The dashboard's entry script: app.py beside planner/ in a source checkout (or an editable install),
    else the wheel's copy in site-packages/headroom_dashboard/ (pyproject.toml ships app.py, app_pages/ and
    .streamlit/config.toml there, so Streamlit finds its config next to the script)."""
    for folder in (SOURCE_ROOT, SOURCE_ROOT / DASHBOARD_PACKAGE):
        if (folder / "app.py").is_file() and (folder / "app_pages").is_dir():
            return folder / "app.py"
    raise CliError(
        f"the dashboard files (app.py, app_pages/) are not beside {SOURCE_ROOT / 'planner'}; "
        "reinstall Headroom (pip install headroom) or run from a source checkout"
    )


def cmd_app(args: argparse.Namespace) -> int:

    script = dashboard_script()
    if importlib.util.find_spec("streamlit") is None:
        raise CliError("the dashboard needs Streamlit, which is not installed: pip install headroom")
    command = [sys.executable, "-m", "streamlit", "run", str(script), *args.streamlit_options]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        # Streamlit takes over this process: Ctrl-C, kill and the exit status reach it directly, and no
        # parent is left waiting (or orphaned) in between.
        os.execv(sys.executable, command)
    return subprocess.call(command)


def build_parser() -> argparse.ArgumentParser:
    # Messages name the command as it was typed: the installed script, or the module.
    prog = "headroom" if Path(sys.argv[0]).stem == "headroom" else "python -m planner"
    parser = _Parser(prog=prog, description="Headroom LLM capacity planner")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="plan scenario(s) from a JSON file ('-' for stdin)")
    p.add_argument("scenario")
    p.add_argument(
        "--format",
        choices=("json", "jsonl", "csv", "summary"),
        default="json",
        help="json: one plan, or a list for a list of scenarios; jsonl: one plan per line (for streams); csv: every "
        "number, machine columns; summary: the headline answers, verdicts and likely ranges, rounded (a spreadsheet)",
    )
    p.add_argument("--calibration", help="calibration record JSON to apply (to plans for the GPU it measured)")
    p.add_argument(
        "--calibration-any-gpu",
        action="store_true",
        help="apply the calibration to plans for other GPUs too (each such plan warns, naming both devices)",
    )
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("schema", help="print the scenario JSON schema")
    p.add_argument("--kind", choices=("inference", "training", "fleet"))
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("share", help="print the dashboard link for scenario(s)")
    p.add_argument("scenario")
    p.add_argument("--base-url", default="http://localhost:8501")
    p.set_defaults(func=cmd_share)

    sub.add_parser("models", help="list catalog models").set_defaults(func=cmd_models)
    sub.add_parser("gpus", help="list catalog accelerators").set_defaults(func=cmd_gpus)
    sub.add_parser(
        "app",
        help="start the dashboard; other options go to `streamlit run` (e.g. --server.port 8600)",
        description="Start the Headroom dashboard: `streamlit run` on the installed app.py. Options after "
        "`app` go to Streamlit, e.g. `headroom app --server.port 8600 --server.headless true`.",
    ).set_defaults(func=cmd_app, streamlit_options=[])

    for register in _extra_commands():
        register(sub)
    return parser


def _extra_commands():
    """Commands that live with their feature (search, diagnose, calibrate) register themselves here."""

    registrars = []
    for module_name in (
        "planner.cli.search",
        "planner.cli.diagnose",
        "planner.cli.traffic",
        "planner.cli.calibrate",
        "planner.cli.hub",
        "planner.cli.deploy",
        "planner.cli.fleet",
    ):
        if importlib.util.find_spec(module_name) is not None:
            registrars.append(importlib.import_module(module_name).register)
    return registrars


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line; unknown options are an error except after `app`, where they are Streamlit's."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "app":
        args.streamlit_options = unknown
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null once the reader has gone, so the interpreter's final flush of
    what is still buffered does not print a BrokenPipeError (the Python docs' recipe, "Note on SIGPIPE")."""
    if sys.stdout is not sys.__stdout__:
        return  # captured or redirected in-process (tests): nothing of ours to silence
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 2 invalid input; see the module docstring)."""
    try:
        args = _parse(argv)
        status = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that left is noticed here, not at interpreter exit
        return status
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (ValidationError, PlanningError) as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:  # e.g. a full disk under stdout, an unwritable --out file
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
    return EXIT_INVALID
