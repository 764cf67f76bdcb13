"""Arithmetic that works on Python numbers and numpy arrays alike (DESIGN rule 4).

The engine's terms call these instead of `max`/`min`/`if`, so `sweep.py` can pass arrays of
scenarios through the very same functions `plan()` uses for one scenario.
"""

from __future__ import annotations

import numpy as np

_SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)
# The exact types seen on the scalar path, checked first: plan() calls these helpers hundreds of times.
_FAST = frozenset({int, float, bool, np.float64, np.int64, np.bool_})


def _is_scalar(value) -> bool:
    return type(value) in _FAST or isinstance(value, _SCALARS)


def maximum(a, b):
    return max(a, b) if _is_scalar(a) and _is_scalar(b) else np.maximum(a, b)


def minimum(a, b):
    return min(a, b) if _is_scalar(a) and _is_scalar(b) else np.minimum(a, b)


def where(condition, a, b):
    if _is_scalar(condition):
        return a if condition else b
    return np.where(condition, a, b)


def ceil_div(a, b):
    """Ceiling of a/b for positive integers (or arrays of them)."""
    if _is_scalar(a) and _is_scalar(b):
        return -(-int(a) // int(b))
    return -(-np.asarray(a) // np.asarray(b))


def ceil_to_multiple(value, multiple):
    return ceil_div(value, multiple) * multiple
