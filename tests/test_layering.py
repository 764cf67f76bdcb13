"""The engine's layering, enforced: lower layers never import higher ones, no import cycles, and
no function-level imports except torch (an optional dependency, imported where a profile runs).

Layers, lowest first (README "Layout"). A module belongs to the layer of its longest listed prefix.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: list[tuple[str, ...]] = [
    ("planner.errors", "planner.units", "planner.arrays", "planner.safe_json", "planner.dtypes"),
    ("planner.model", "planner.hardware"),
    ("planner.physics",),
    # What a plan may take as input: the scenario types, the calibration record, the result types.
    (
        "planner.scenario_base",
        "planner.calibration_record",
        "planner.calibration.errors",
        "planner.uncertainty",
        "planner.verdict",
        "planner.results",
    ),
    ("planner.inference", "planner.training"),
    ("planner.scenario",),
    ("planner.plan",),
    ("planner.search", "planner.calibration", "planner.share", "planner.export", "planner.deploy", "planner.fleet"),
    ("planner.cli",),
    ("planner",),  # the public API re-exports
    ("ui",),
    ("app_pages", "app"),
]
SIBLINGS_THAT_MUST_NOT_MEET = [("planner.inference", "planner.training")]
LAZY_ALLOWED = ("torch", "ray")  # optional extras (profile, cluster), imported where they run


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _sources() -> list[Path]:
    files = [*ROOT.glob("planner/**/*.py"), *ROOT.glob("ui/*.py"), *ROOT.glob("app_pages/*.py"), ROOT / "app.py"]
    return sorted(files)


def _imports(path: Path) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module, node, is function-level) for every project import in `path`."""
    tree = ast.parse(path.read_text())
    found = []
    nested = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for sub in ast.walk(node)
    }
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node, id(node) in nested))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                # `from planner import plan` imports planner.plan when it is a module, else a name of planner
                candidate = f"{base}.{alias.name}"
                module = candidate if _is_module(candidate) else base
                found.append((module, node, id(node) in nested))
    return found


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _project(module: str) -> bool:
    return module.split(".")[0] in ("planner", "ui", "app_pages", "app")


def test_every_module_has_a_layer():
    assert [str(p) for p in _sources() if _layer_of(_module_name(p)) < 0] == []


def test_lower_layers_never_import_higher_ones():
    violations = []
    for path in _sources():
        me = _module_name(path)
        for module, node, _ in _imports(path):
            if _project(module) and _layer_of(module) > _layer_of(me):
                violations.append(f"{path.relative_to(ROOT)}:{node.lineno} {me} imports {module}")
    assert violations == []


def test_inference_and_training_are_siblings_that_never_import_each_other():
    violations = []
    for path in _sources():
        me = _module_name(path)
        for a, b in SIBLINGS_THAT_MUST_NOT_MEET:
            for mine, other in ((a, b), (b, a)):
                if me.startswith(mine):
                    violations += [f"{me} imports {m}" for m, _, _ in _imports(path) if m.startswith(other)]
    assert violations == []


def test_no_function_level_imports_except_torch():
    lazy = [
        f"{path.relative_to(ROOT)}:{node.lineno} {module}"
        for path in _sources()
        for module, node, nested in _imports(path)
        if nested and module.split(".")[0] not in LAZY_ALLOWED
    ]
    assert lazy == []


def test_no_import_cycles_between_modules():
    graph: dict[str, set[str]] = {}
    for path in _sources():
        me = _module_name(path)
        graph[me] = {m for m, _, nested in _imports(path) if _project(m) and not nested and m != me}
    # A package's __init__ imported by its own submodules is not a cycle of work; still, report real SCCs.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("module", ["planner.physics.memory", "planner.model.architecture"])
def test_the_checker_sees_imports(module):
    """Guard against a checker that passes because it parses nothing."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert any(m.startswith("planner.") for m, _, _ in _imports(path))
    assert _layer_of(module) >= 0
