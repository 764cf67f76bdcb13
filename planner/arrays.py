"""Arithmetic that works on Python numbers and numpy arrays alike (DESIGN rule 4).

The engine's terms call these instead of `max`/`min`/`if`, so `sweep.py` can pass arrays of
scenarios through the very same functions `plan()` uses for one scenario.
"""

from __future__ import annotations

import math

import numpy as np

# A Python number (one plan) or a numpy array of them (one value per sweep row). Typed records of the
# engine hold these, so the same record type serves `plan()` and the sweep.
Number = float | np.ndarray
Flag = bool | np.ndarray

_SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)
# The exact types seen on the scalar path, checked first: plan() calls these helpers hundreds of times.
_FAST = frozenset({int, float, bool, np.float64, np.int64, np.bool_})


def _is_scalar(value) -> bool:
    return type(value) in _FAST or isinstance(value, _SCALARS)


def maximum(a, b):
    if type(a) in _FAST and type(b) in _FAST:  # the scalar path without a call per operand
        return max(a, b)
    return max(a, b) if _is_scalar(a) and _is_scalar(b) else np.maximum(a, b)


def minimum(a, b):
    if type(a) in _FAST and type(b) in _FAST:
        return min(a, b)
    return min(a, b) if _is_scalar(a) and _is_scalar(b) else np.minimum(a, b)


def where(condition, a, b):
    if type(condition) in _FAST or _is_scalar(condition):
        return a if condition else b
    return np.where(condition, a, b)


def floor(value):
    """Floor of a number (a Python float: a numpy scalar would make every operation after it several times
    slower on plan()'s path) or elementwise of an array; a non-finite number stays as it is, as np.floor leaves it."""
    if _is_scalar(value):
        return float(math.floor(value)) if math.isfinite(value) else float(value)
    return np.floor(value)


def ceil(value):
    """Ceiling of a number (a Python float, as `floor`) or elementwise of an array."""
    if _is_scalar(value):
        return float(math.ceil(value)) if math.isfinite(value) else float(value)
    return np.ceil(value)


def ceil_div(a, b):
    """Ceiling of the true quotient a/b, for numbers or arrays of them (b > 0).

    Floor division of the negation, on both paths: integers stay exact integers, and a non-integer
    numerator rounds up (ceil_div(2048.5, 1) = 2049) whether it arrives as a number or in an array.
    """
    if _is_scalar(a) and _is_scalar(b):
        return -(-a // b)
    return -(-np.asarray(a) // np.asarray(b))


def ceil_to_multiple(value, multiple):
    return ceil_div(value, multiple) * multiple
