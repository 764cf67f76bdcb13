"""The project's one validation error, and turning pydantic's errors into sentences."""

from __future__ import annotations

from pydantic import ValidationError


class PlanningError(ValueError):
    """Input Headroom cannot plan, with a sentence a user understands."""


def explain(error: Exception) -> str:
    """A human message for a PlanningError or pydantic ValidationError (no traceback, no URLs)."""
    if isinstance(error, ValidationError):
        lines = []
        for item in error.errors(include_url=False):
            where = ".".join(str(p) for p in item.get("loc", ()) if p not in ("function-after",))
            msg = item.get("msg", "invalid value")
            msg = msg.removeprefix("Value error, ")
            lines.append(f"{where}: {msg}" if where else msg)
        return "; ".join(lines)
    return str(error)
