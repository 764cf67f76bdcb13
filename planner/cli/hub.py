"""Hugging Face Hub models on the command line (planner.model.hub does the work).

  hub MODEL_ID[@REVISION]      print the imported config.json (with its `_headroom` block) on stdout

and in any scenario JSON (plan, share, search, diagnose, traffic): `"model": "hf:org/name[@revision]"` is
imported before the scenario is read, so the scenario holds the config.json itself, as an upload would:
the plan, the CSV and the share link carry it and need no network afterwards. What the import found
(where from, the safetensors parameter check) goes to stderr as `note:` lines; failures are one sentence
(status 2). huggingface_hub is optional: without it the sentence says how to install it.

This module does not import planner.cli.main (main imports it): errors are PlanningErrors, which main
turns into its one-line `error:` output.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from planner.model.hub import HubImport, import_from_hub, is_hub_reference


def _note(imported: HubImport) -> None:
    for note in imported.notes:
        print(f"note: {note}.", file=sys.stderr)


def with_hub_model(item: dict[str, Any], imported: dict[str, HubImport]) -> dict[str, Any]:
    """`item` with an `hf:` model replaced by the imported config.json; `imported` remembers this run's
    imports (a list of scenarios fetches each model once). HubImportError (a PlanningError) on failure."""
    model = item.get("model")
    if not is_hub_reference(model):
        return item
    key = str(model).strip()
    if key not in imported:
        imported[key] = import_from_hub(key)
        _note(imported[key])
    return {**item, "model": imported[key].config}


def cmd_hub(args: argparse.Namespace) -> int:
    imported = import_from_hub(args.model)
    _note(imported)
    json.dump(imported.config, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "hub",
        help='import a Hugging Face Hub model: print its config.json for a scenario\'s "model"',
        description="Fetch a model's config.json and safetensors parameter counts from the Hugging Face Hub "
        "(through huggingface_hub: its cache, HF_TOKEN or `hf auth login`; offline, HF_HUB_OFFLINE=1, from the "
        'cache) and print the config.json Headroom plans, with a "_headroom" block naming the source and the '
        'counts. Scenario JSON may also say "model": "hf:org/name@revision" directly.',
    )
    p.add_argument("model", help="owner/name, optionally @revision (branch, tag or commit), e.g. Qwen/Qwen3-8B@main")
    p.set_defaults(func=cmd_hub)
