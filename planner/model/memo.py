"""Memoizing facts derived from a frozen architecture, by identity first.

A `ModelArchitecture` hashes by value, and with a long `layer_pattern` (Nemotron-H's 118 `LayerSpec`s) one
hash walks every layer: an `lru_cache` keyed on it costs more than the facts it saves, and a plan asks for
them dozens of times. `by_identity` answers the same object from a dict keyed by `id` (holding the object,
so the id cannot be reused while cached), and falls back to an `lru_cache` by value, so equal
architectures built separately share one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache, wraps
from typing import TypeVar, cast

T = TypeVar("T")
A = TypeVar("A")

MAX_ENTRIES = 256


def by_identity(fn: Callable[[A], T]) -> Callable[[A], T]:
    """`fn(obj)` memoized by identity, then by value (see the module docstring)."""
    by_value = lru_cache(maxsize=MAX_ENTRIES)(fn)
    seen: dict[int, tuple[object, T]] = {}

    @wraps(fn)
    def cached(obj: A) -> T:
        hit = seen.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = by_value(cast(Hashable, obj))  # type: ignore[arg-type]
        if len(seen) >= MAX_ENTRIES:
            seen.clear()
        seen[id(obj)] = (obj, value)
        return value

    return cached


__all__ = ["by_identity"]
