"""`python -m planner calibrate`: profile this machine and store a calibration record.

    python -m planner calibrate [--device cpu|cuda] [--seconds N] [--model ID] [--out FILE]
                                [--report FILE.md] [--gpu ID] [--layers N] [--dtype fp32|bf16|fp16]
                                [--memory-share F] [--label TEXT] [--no-save] [--activate]
                                [--format table|markdown|json]

    python -m planner calibrate --from-benchmark RESULT [RESULT ...] --scenario DEPLOYMENT.json
                                [--hold-out middle|none|I,J,...] [--any-model] [--out FILE] [--no-save] ...

Progress goes to stderr; the predicted-vs-measured table (or the Markdown report / JSON record) to
stdout. `--from-benchmark` fits the serving factors of the deployment in DEPLOYMENT.json (an inference scenario) to
the result files of vllm bench serve, SGLang bench_serving, genai-perf, guidellm or inference-perf
(`planner.calibration.from_benchmark`); no torch, no GPU. The record is saved in the user's data directory (unless --no-save) and to --out if given.
Exit status: 0 done, 1 the profile stopped part-way (out of memory, cancelled: the message says what
was measured), 2 invalid input or profiling unavailable (no torch, no CUDA).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from pydantic import ValidationError

from planner.calibration import store
from planner.calibration.benchmark_results import load_benchmark_paths
from planner.calibration.errors import ProfileAborted, ProfileUnavailable
from planner.calibration.from_benchmark import calibrate_from_benchmark
from planner.calibration.profile import run_profile
from planner.calibration.report import markdown_report, text_table
from planner.calibration_record import CalibrationRecord, ProfileSettings
from planner.cli.main import CliError, _read_json, _scenarios
from planner.errors import PlanningError, explain
from planner.inference.scenario import InferenceScenario

EXIT_STOPPED = 1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="profile this machine (needs torch) and store a calibration",
        description="Measure matmul/bandwidth ceilings and a few layers of a model, fit the "
        "planner's efficiency factors, and store the calibration record.",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    p.add_argument("--model", default="llama-3.1-8b", help="catalog or size id of the proxy model")
    p.add_argument("--out", help="also write the record (JSON) to this file")
    p.add_argument("--report", help="also write the Markdown report (with this command line) to this file")
    p.add_argument("--gpu", help="catalog accelerator the efficiencies refer to (default: detected from the device)")
    p.add_argument("--layers", type=int, help="proxy layers (default 4 on a GPU, 2 on a CPU)")
    p.add_argument("--dtype", choices=("auto", "fp32", "bf16", "fp16"), default="auto")
    p.add_argument("--memory-share", type=float, default=0.5, help="most of the free memory to use (default 0.5)")
    p.add_argument("--label", help="name shown in plans and on the dashboard")
    p.add_argument("--no-save", action="store_true", help="do not store the record in the data directory")
    p.add_argument(
        "--activate",
        action="store_true",
        help="no longer does anything: the dashboard's calibration is chosen per browser session (Calibrate page)",
    )
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table", help="what stdout gets")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b = p.add_argument_group("from benchmark results (no torch, no GPU)")
    b.add_argument(
        "--from-benchmark",
        nargs="+",
        metavar="RESULT",
        help="result files of vllm bench serve, SGLang bench_serving, genai-perf, guidellm or inference-perf",
    )
    b.add_argument("--scenario", help="the deployment the results measured (an inference scenario JSON)")
    b.add_argument(
        "--hold-out",
        default="middle",
        help="runs to predict, not fit: 'middle' (default: all but the lightest and heaviest load, with 3+ runs), "
        "'none', or 0-based indices 'I,J'",
    )
    b.add_argument("--any-model", action="store_true", help="accept results that name another model")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.from_benchmark or args.scenario:
        return cmd_from_benchmark(args)

    try:
        settings = ProfileSettings(
            device=args.device,
            seconds=args.seconds,
            model=args.model,
            layers=args.layers,
            memory_share=args.memory_share,
            reference_gpu=args.gpu,
            dtype=args.dtype,
            label=args.label,
        )
    except ValidationError as exc:
        raise CliError(_explain_flags(exc)) from None
    # Checked before the profile runs, so a typo does not cost the minute of measuring.
    for flag, target in (("--out", args.out), ("--report", args.report)):
        _check_writable(flag, target)
    last = {"percent": -1}

    def progress(fraction: float, message: str) -> None:
        pct = int(fraction * 100)
        if not args.quiet and (pct != last["percent"] or message):
            print(f"[{pct:3d}%] {message}", file=sys.stderr, flush=True)
            last["percent"] = pct

    try:
        record = run_profile(settings, progress=progress)
    except ProfileUnavailable as exc:
        raise CliError(str(exc)) from None
    except ProfileAborted as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.partial is not None and exc.partial.predicted_vs_measured:
            sys.stdout.write(text_table(exc.partial))
        return EXIT_STOPPED
    except KeyboardInterrupt:
        print("error: calibration cancelled before anything was measured", file=sys.stderr)
        return EXIT_STOPPED

    _write_outputs(args, record, _command(args))
    return 0


def _write_outputs(args: argparse.Namespace, record: CalibrationRecord, command: str) -> None:
    """Store the record, write --out and --report, and print what --format asks for."""
    if not args.no_save:
        path = store.save_calibration(record)
        print(f"saved {record.id} to {path}", file=sys.stderr)
        if args.activate:
            print(
                f"note: --activate no longer exists: choose {record.id} on the dashboard's Calibrate page (it "
                "applies to that browser session only) or pass `plan --calibration FILE`",
                file=sys.stderr,
            )
    if args.out:
        path = store.write_calibration_file(record, args.out)
        print(f"wrote {path}", file=sys.stderr)
    if args.report:
        path = store.atomic_write_text(Path(args.report), markdown_report(record, command))
        print(f"wrote {path}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(store.export_calibration(record))
    elif args.format == "markdown":
        sys.stdout.write(markdown_report(record, command))
    else:
        print(record.summary())
        sys.stdout.write(text_table(record))


def _hold_out(text: str) -> str | list[int]:
    if text in ("middle", "none"):
        return text
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CliError(f"--hold-out {text}: give 'middle', 'none' or 0-based run indices such as 1,2") from None


def cmd_from_benchmark(args: argparse.Namespace) -> int:
    """`calibrate --from-benchmark RESULT... --scenario DEPLOYMENT.json`: fit, store, print (exit 2 on bad input)."""
    if not args.from_benchmark or not args.scenario:
        raise CliError("--from-benchmark RESULT [RESULT ...] and --scenario DEPLOYMENT.json go together")
    for flag, target in (("--out", args.out), ("--report", args.report)):
        _check_writable(flag, target)
    scenarios, many = _scenarios(_read_json(args.scenario))
    if many or not isinstance(scenarios[0], InferenceScenario):
        raise CliError(f"--scenario {args.scenario}: give one inference scenario (the deployment the results measured)")
    try:
        runs = load_benchmark_paths(args.from_benchmark)
        if not args.quiet:
            print(f"read {len(runs)} benchmark runs; fitting", file=sys.stderr, flush=True)
        record = calibrate_from_benchmark(
            scenarios[0], runs, hold_out=_hold_out(args.hold_out), label=args.label, allow_other_model=args.any_model
        )
    except (PlanningError, ValidationError) as exc:
        raise CliError(explain(exc)) from None
    command = "python -m planner calibrate --from-benchmark " + " ".join(map(shlex.quote, args.from_benchmark))
    command += f" --scenario {shlex.quote(args.scenario)} --hold-out {shlex.quote(args.hold_out)}"
    _write_outputs(args, record, command)
    return 0


# ProfileSettings field -> the flag that sets it, so a validation message names what the user typed.
_FLAGS = {"reference_gpu": "--gpu", "memory_share": "--memory-share"}


def _explain_flags(error: ValidationError) -> str:
    """The settings' validation errors with flag names ('--seconds: Input should be greater than 0')."""
    sentences = []
    for item in error.errors(include_url=False):
        field = str(item["loc"][0]) if item.get("loc") else ""
        flag = _FLAGS.get(field, "--" + field.replace("_", "-")) if field else ""
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        sentences.append(f"{flag}: {message}" if flag else message)
    return "; ".join(sentences)


def _check_writable(flag: str, target: str | None) -> None:
    """CliError unless `target` can become a file: not a folder, and its nearest existing folder writable."""
    if not target:
        return
    path = Path(target)
    if path.is_dir():
        raise CliError(f"{flag} {target} is a folder; give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise CliError(f"{flag} {target}: cannot write in {folder}")


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (every option that differs from its default)."""
    parts = [
        "python -m planner calibrate",
        f"--device {args.device}",
        f"--seconds {args.seconds:g}",
        f"--model {shlex.quote(args.model)}",
    ]
    for flag, value, default in (
        ("--gpu", args.gpu, None),
        ("--layers", args.layers, None),
        ("--dtype", args.dtype, "auto"),
        ("--memory-share", args.memory_share, 0.5),
        ("--label", args.label, None),
        ("--out", args.out, None),
        ("--report", args.report, None),
        ("--format", args.format, "table"),
    ):
        if value != default:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    for flag, value in (("--no-save", args.no_save), ("--activate", args.activate)):
        if value:
            parts.append(flag)
    return " ".join(parts)


__all__ = ["cmd_calibrate", "register"]
