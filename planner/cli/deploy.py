"""`python -m planner deploy`: the commands that run and measure a plan, headless.

    python -m planner deploy SCENARIO.json [--engine vllm|sglang|tensorrt-llm] [--format text|json|k8s]

The engine defaults to the scenario's `runtime` (its release, e.g. vllm@0.6, decides the flags' spelling). JSON
output is an object with `engine`, `serve_command` (and `serve_argv`), `benchmark_command` (and
`benchmark_argv`), `files` (config files the server reads, name -> text) and `notes` (what the plan assumes that
no flag says); `k8s` writes a Kubernetes manifest (the notes as comments).
"""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli.main import CliError, _read_json, _scenarios
from planner.deploy import ENGINES, DeployError, deploy
from planner.errors import PlanningError, explain
from planner.inference.results import InferencePlan
from planner.inference.scenario import InferenceScenario
from planner.plan import plan


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "deploy",
        help="the engine's launch command, the benchmark command and a Kubernetes manifest for a plan",
        description="Write the serve command (every flag the plan rests on, in the engine's own spelling), the "
        "benchmark client command that sends the plan's traffic, or a Kubernetes manifest that runs it.",
    )
    p.add_argument("scenario", help="inference scenario JSON file ('-' for stdin)")
    p.add_argument("--engine", choices=ENGINES, help="serving engine (default: the scenario's runtime)")
    p.add_argument("--format", choices=("text", "json", "k8s"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenarios, many = _scenarios(_read_json(args.scenario))
    if many:
        raise CliError(f"deploy writes the commands of one scenario; {args.scenario} holds {len(scenarios)}")
    scenario = scenarios[0]
    if not isinstance(scenario, InferenceScenario):
        raise CliError("deploy needs an inference scenario: a training run has no server to launch")
    try:
        result = plan(scenario)
        if not isinstance(result, InferencePlan):  # an inference scenario always plans as one
            raise CliError("deploy needs an inference plan")
        deployment = deploy(result, args.engine)
    except (DeployError, PlanningError) as exc:
        raise CliError(explain(exc)) from None
    if args.format == "json":
        json.dump(deployment.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "k8s":
        sys.stdout.write(deployment.manifest())
    else:
        sys.stdout.write(deployment.text() + "\n")
    return 0
