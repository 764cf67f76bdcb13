"""The engine's and UI's shape against issue 21's targets: files over 600 lines, functions over 80 lines,
functions with more than 8 parameters (constructors and pydantic/dataclass bodies aside), import cycles between
packages, and `model_copy(update=...)` in planner/.

    python benchmarks/code_shape.py            # summary and the offenders
    python benchmarks/code_shape.py --json     # the same as JSON (tests/test_code_shape.py reads `measure()`)
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPES = ("planner", "ui")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8


def _python_files():
    for scope in SCOPES:
        yield from sorted((ROOT / scope).rglob("*.py"))


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")])


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str) -> str:
    """planner.inference.steps -> planner.inference; planner.plan -> planner (top-level modules)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def measure() -> dict:
    long_files, long_functions, wide_functions, model_copies = [], [], [], []
    imports: dict[str, set[str]] = defaultdict(set)
    for path in _python_files():
        text = path.read_text()
        rel = str(path.relative_to(ROOT))
        lines = text.count("\n") + 1
        if lines > MAX_FILE_LINES:
            long_files.append((rel, lines))
        tree = ast.parse(text)
        module = _module_name(path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append((f"{rel}:{node.name}", length))
                if node.name != "__init__" and _parameters(node) > MAX_PARAMETERS:
                    wide_functions.append((f"{rel}:{node.name}", _parameters(node)))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imports[module].add(node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imports[module].add(alias.name)
            elif (
                rel.startswith("planner")
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "model_copy"
                and any(k.arg == "update" for k in node.keywords)
            ):
                model_copies.append(f"{rel}:{node.lineno}")
    package_edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports.items():
        for target in targets:
            if target.split(".")[0] not in SCOPES:
                continue
            a, b = _package_of(module), _package_of(target)
            # a top-level module (planner.plan) is its own node; a package never depends on itself
            a = module if a == "planner" else a
            b = target if b == "planner" else b
            if a != b:
                package_edges[a].add(b)
    two_way = sorted(
        {
            tuple(sorted((a, b)))
            for a, targets in package_edges.items()
            for b in targets
            if a in package_edges.get(b, ())
        }
    )
    return {
        "files_over_600_lines": sorted(long_files, key=lambda r: -r[1]),
        "functions_over_80_lines": sorted(long_functions, key=lambda r: -r[1]),
        "functions_over_8_parameters": sorted(wide_functions, key=lambda r: -r[1]),
        "two_way_package_dependencies": [list(p) for p in two_way],
        "model_copy_update_in_planner": model_copies,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shape = measure()
    if args.json:
        print(json.dumps(shape, indent=2))
        return 0
    for key, rows in shape.items():
        print(f"{key}: {len(rows)}")
        for row in rows:
            print("   ", *row) if isinstance(row, (list, tuple)) else print("   ", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
