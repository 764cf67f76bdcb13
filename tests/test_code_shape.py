"""The engine's and UI's shape holds issue 21's targets (benchmarks/code_shape.py measures them): a change that
brings back a long module, a long or wide function beyond the allowance, a two-way package dependency or an
unvalidated `model_copy(update=...)` fails here, with the offenders named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _shape() -> dict:
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.measure()


SHAPE = _shape()


def test_at_most_four_files_over_600_lines():
    assert len(SHAPE["files_over_600_lines"]) <= 4, SHAPE["files_over_600_lines"]


def test_at_most_six_functions_over_80_lines():
    assert len(SHAPE["functions_over_80_lines"]) <= 6, SHAPE["functions_over_80_lines"]


def test_at_most_five_functions_over_8_parameters():
    assert len(SHAPE["functions_over_8_parameters"]) <= 5, SHAPE["functions_over_8_parameters"]


def test_no_two_packages_import_each_other():
    assert SHAPE["two_way_package_dependencies"] == []


def test_what_ifs_are_validated():
    assert SHAPE["model_copy_update_in_planner"] == []
