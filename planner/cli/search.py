"""`python -m planner search`: the best configurations under constraints, headless.

    python -m planner search SCENARIO.json --constraint ttft_seconds<=0.5 --constraint tpot_seconds<=0.05 \\
        --minimize usd_per_million_output_tokens --top 10 [--gpus h100-sxm,h200] [--max-gpus 16] [--format csv]

SCENARIO.json fixes the model and workload. For inference the search varies GPU type, GPU count (powers
of two up to --max-gpus), TP, PP, EP (MoE), weight/KV precision and concurrency (default objective
usd_per_million_output_tokens). For training it varies GPU type and count, TP, PP, ZeRO stage,
activation checkpointing and micro-batch (default objective usd_total; e.g. --constraint
time_to_train_seconds<=864000). `--pareto COL,COL` prints the non-dominated set over those objectives
(minimized) instead.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from planner.cli.main import CliError, _read_json, _scenarios
from planner.dtypes import QUANTIZED_DTYPES
from planner.errors import PlanningError, did_you_mean
from planner.inference.metrics import HEADLINE_COLUMNS
from planner.search.constraints import apply_constraints, pareto_front, search
from planner.search.slo_search import slo_search, split_constraints
from planner.search.sweep import (
    GRID_COLUMNS,
    TRAINING_GRID_COLUMNS,
    evaluate_inference,
    evaluate_training,
    inference_grid,
    powers_of_two,
    tensor_parallel_limit,
    training_grid,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("search", help="best configurations under constraints")
    p.add_argument("scenario")
    p.add_argument(
        "--constraint",
        action="append",
        default=[],
        help="e.g. ttft_seconds<=0.5, or a traffic percentile p99_ttft_seconds<=2 (needs the scenario's traffic; "
        "repeatable)",
    )
    p.add_argument(
        "--minimize", default=None, help="default: usd_per_million_output_tokens (inference), usd_total (training)"
    )
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--gpus", default="", help="comma-separated catalog ids (default: the scenario's GPU)")
    p.add_argument("--max-gpus", type=int, default=16)
    p.add_argument("--pareto", default="", help="comma-separated objectives to minimize jointly")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def _check_columns(sample: pd.DataFrame, constraint_columns: list[str], objectives: list[str]) -> None:
    """CliError naming the first unknown constraint column or objective, with the closest real one."""
    # The columns apply_constraints accepts: numeric ones (`fits` included), not the internal `valid` flag.
    numeric = [c for c in sample.columns if pd.api.types.is_numeric_dtype(sample[c]) and c != "valid"]
    for what, names in (("constraint column", constraint_columns), ("objective", objectives)):
        for name in names:
            if name not in numeric:
                raise CliError(
                    f"unknown {what} '{name}'{did_you_mean(name, numeric)}; choose from {', '.join(numeric)}"
                )


def _check_slo_search(base, args: argparse.Namespace) -> None:
    """Percentile constraints need an inference scenario with a request rate, and no Pareto mode."""
    if base.kind != "inference":
        raise CliError("percentile constraints (p99_ttft_seconds<=...) apply to inference scenarios")
    if base.traffic is None or base.traffic.requests_per_second is None:
        raise CliError(
            'percentile constraints need the traffic to serve: add "traffic": {"requests_per_second": R} '
            "to the scenario"
        )
    if args.pareto:
        raise CliError("--pareto does not combine with percentile constraints; use --minimize")


def run(args: argparse.Namespace) -> int:
    """`search`: the base scenario's grid (GPU x layout x precision x load), evaluated, constrained and ranked."""
    if not 1 <= args.max_gpus <= 4096:
        raise CliError("--max-gpus must be between 1 and 4096")
    if not 1 <= args.top <= 10_000:
        raise CliError("--top must be between 1 and 10000")
    scenarios, _ = _scenarios(_read_json(args.scenario))
    if len(scenarios) > 1:
        raise CliError(f"search starts from one scenario; {args.scenario} holds {len(scenarios)}")
    base = scenarios[0]
    grid, evaluate, objective, columns = _grid_of(base, args)
    try:
        constraints, slo_constraints = split_constraints(args.constraint)
        objectives = [c for c in args.pareto.split(",") if c] or [objective]
        # One row tells which columns exist, so a misspelt name fails now rather than after the whole grid.
        _check_columns(evaluate(base, grid.head(1)), [c for c, _, _ in constraints], objectives)
        if slo_constraints:
            _check_slo_search(base, args)
            # Serving a fixed rate, a deployment costs its hourly price; $ per token at saturation misleads.
            objective = args.minimize or "usd_per_hour"
        frame = evaluate(base, grid)
        if slo_constraints:
            result, simulations = slo_search(
                base, frame, constraints, slo_constraints, objective, args.top, base.traffic
            )
            columns = [*columns, *(c for c, _, _ in slo_constraints)]
            print(
                f"# {simulations} traffic simulations of {base.traffic.num_requests:,} requests at "
                f"{base.traffic.requests_per_second:g} requests/s, best candidates first",
                file=sys.stderr,
            )
        elif args.pareto:
            result = pareto_front(apply_constraints(frame, constraints), minimize=objectives)
            result = result.sort_values(objectives[0]).head(args.top)
        else:
            result = search(frame, constraints, objective, args.top)
    except (PlanningError, ValueError, KeyError) as exc:
        raise CliError(str(exc)) from None
    print(
        f"# {len(grid):,} configurations, {int(frame.valid.sum()):,} valid layouts, "
        f"{len(apply_constraints(frame, constraints)):,} fit and meet the constraints",
        file=sys.stderr,
    )
    _write(result[columns], args.format)
    return 0


def _grid_of(base, args: argparse.Namespace):
    """The grid a search sweeps around `base`, how its rows are evaluated, the default objective and the columns
    printed: training over GPU x layout x ZeRO x recompute x micro-batch, inference over GPU x layout x weight and
    KV formats x concurrency."""
    arch = base.architecture()
    gpus = [g for g in args.gpus.split(",") if g] or None
    layout = powers_of_two(min(args.max_gpus, 64))
    if base.kind == "training":
        grid = training_grid(
            base,
            gpus=gpus,
            num_gpus=powers_of_two(args.max_gpus),
            tensor_parallel=[t for t in layout if t <= tensor_parallel_limit(base, gpus)],
            pipeline_parallel=[p for p in layout if p <= min(arch.num_layers, 16)],
            zero_stages=[0, 1, 2, 3],
            checkpointing=["none", "selective", "full"],
            micro_batch_sizes=[1, 2, 4, 8],
        )
        columns = [*TRAINING_GRID_COLUMNS, *TRAINING_HEADLINE_COLUMNS]
        return grid, evaluate_training, args.minimize or "usd_total", columns
    grid = inference_grid(
        base,
        gpus=gpus,
        num_gpus=powers_of_two(args.max_gpus),
        tensor_parallel=layout,
        pipeline_parallel=[p for p in layout if p <= arch.num_layers],
        expert_parallel=layout if arch.is_moe else [1],
        weight_dtypes=["bf16", *QUANTIZED_DTYPES],
        kv_cache_dtypes=["bf16", "fp8"],
        concurrency=sorted({base.concurrency, *powers_of_two(4096)}),
    )
    columns = [*GRID_COLUMNS, *(column.name for column in HEADLINE_COLUMNS)]
    return grid, evaluate_inference, args.minimize or "usd_per_million_output_tokens", columns


# What a training search prints beside its grid columns.
TRAINING_HEADLINE_COLUMNS = (
    "data_parallel",
    "step_seconds",
    "tokens_per_second",
    "mfu",
    "time_to_train_seconds",
    "usd_total",
    "total_bytes",
)


def _write(result, output_format: str) -> None:
    if output_format == "csv":
        sys.stdout.write(result.to_csv(index=False))
    elif output_format == "json":
        sys.stdout.write(result.to_json(orient="records", indent=2) + "\n")
    else:
        sys.stdout.write(
            (result.to_string(index=False) if len(result) else "no configuration meets the constraints") + "\n"
        )
