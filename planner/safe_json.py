"""JSON from untrusted places (uploads, links, CSV cells, CLI files), bounded and never a traceback.

`json.loads` raises RecursionError (not ValueError) on deeply nested input and happily builds huge
structures; every entry point goes through `load_json` instead, which turns all of that into a
PlanningError sentence.
"""

from __future__ import annotations

import json
from typing import Any

from planner.errors import PlanningError

MAX_JSON_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 32


def _depth(value: Any, limit: int) -> int:
    stack = [(value, 1)]
    deepest = 0
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return deepest


def load_json(data: str | bytes, what: str = "the JSON", max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Parse `data` or raise PlanningError naming `what` and the problem."""
    if isinstance(data, bytes):
        if len(data) > max_bytes:
            raise PlanningError(f"{what} is {len(data):,} bytes; the limit is {max_bytes:,}")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise PlanningError(f"{what} is not UTF-8 text") from None
    if len(data) > max_bytes:
        raise PlanningError(f"{what} is {len(data):,} characters; the limit is {max_bytes:,}")
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise PlanningError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise PlanningError(f"{what} is nested too deeply") from None
    if _depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise PlanningError(f"{what} is nested more than {MAX_DEPTH} levels deep")
    return value
