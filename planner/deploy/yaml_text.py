"""YAML text for nested dicts, lists and scalars, without a YAML library (the planner needs none): block style,
every string written as a JSON string (a valid YAML double-quoted scalar), so nothing is read back as
another type (`"on"`, `"8"`, `"1e3"` stay strings)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

INDENT = "  "
PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
# Plain words YAML 1.1 readers take for booleans or null: such keys are quoted.
RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def key(name: object) -> str:
    text = str(name)
    return text if PLAIN_KEY.match(text) and text.lower() not in RESERVED else json.dumps(text)


def scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))


def _is_block(value: object) -> bool:
    return isinstance(value, Mapping) and bool(value) or isinstance(value, (list, tuple)) and bool(value)


def _empty(value: object) -> str:
    return "{}" if isinstance(value, Mapping) else "[]"


def lines(value: object, depth: int = 0) -> list[str]:
    """The YAML lines of a mapping or a sequence at `depth` levels of indentation."""
    pad = INDENT * depth
    out: list[str] = []
    if isinstance(value, Mapping):
        for name, item in value.items():
            if _is_block(item):
                out.append(f"{pad}{key(name)}:")
                out += lines(item, depth + 1)
            elif isinstance(item, (Mapping, list, tuple)):
                out.append(f"{pad}{key(name)}: {_empty(item)}")
            else:
                out.append(f"{pad}{key(name)}: {scalar(item)}")
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            if _is_block(item):
                nested = lines(item, depth + 1)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out += nested[1:]
            elif isinstance(item, (Mapping, list, tuple)):
                out.append(f"{pad}- {_empty(item)}")
            else:
                out.append(f"{pad}- {scalar(item)}")
        return out
    return [pad + scalar(value)]


def document(value: object) -> str:
    return "\n".join(lines(value)) + "\n"


def documents(values: Sequence[object], header: Sequence[str] = ()) -> str:
    """Several YAML documents, `---` between them, after comment lines (`# ...`)."""
    comments = "".join(f"# {line}\n" for line in header)
    return comments + "---\n".join(document(v) for v in values)
