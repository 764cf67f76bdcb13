"""The project's one validation error, and turning pydantic's errors into sentences."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

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


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean 'x'?)" for the choice a misspelt `word` most likely meant, or "" when none is close;
    appended to "unknown ..." messages. The shortest choice that extends the word wins ('h100' -> 'h100-sxm',
    not the one-letter-off 'h200'; 'qwen2.5-7' -> 'qwen2.5-7b', not 'qwen2.5-72b'), else the closest by
    difflib's ratio (at least 0.6)."""
    options = list(choices)
    extensions = [c for c in options if word and c.startswith(word)]
    close = [min(extensions, key=len)] if extensions else difflib.get_close_matches(word, options, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
