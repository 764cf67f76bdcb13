"""planner.arrays: the scalar path (plan()) and the array path (the sweep) must give the same numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.arrays import ceil_div, ceil_to_multiple


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (2048.5, 1, 2049),  # a mean context of prompt + output / 2 with an odd output
        (2304.5, 16, 145),  # 2304.5 / 16 = 144.03
        (7, 2, 4),
        (8, 2, 4),
        (1, 3, 1),
        (0.5, 0.25, 2),
        (1e-9, 1, 1),
        (4096, 4096, 1),
    ],
)
def test_ceil_div_is_the_ceiling_of_the_true_quotient_on_both_paths(a, b, expected):
    assert expected == math.ceil(a / b)  # the hand value is the true ceiling
    assert ceil_div(a, b) == expected
    assert ceil_div(np.array([a]), np.array([b]))[0] == expected
    assert ceil_div(np.array([a, a]), b).tolist() == [expected, expected]


def test_integers_stay_exact_integers():
    # 2^53 + 1 is not a float; integer floor division keeps it.
    big = 2**53 + 1
    assert ceil_div(big, 1) == big and isinstance(ceil_div(big, 1), int)
    assert ceil_div(np.array([big]), 1)[0] == big


def test_ceil_to_multiple_rounds_non_integers_up():
    # A context of 2304.5 tokens in 16-token blocks needs 145 blocks = 2320 tokens.
    assert ceil_to_multiple(2304.5, 16) == 2320
    assert ceil_to_multiple(np.array([2304.5]), 16)[0] == 2320


@given(
    a=st.one_of(st.integers(0, 10**12), st.floats(0, 1e12, allow_nan=False)),
    b=st.one_of(st.integers(1, 10**6), st.floats(1e-3, 1e6)),
)
def test_scalar_and_array_paths_agree(a, b):
    scalar = ceil_div(a, b)
    array = ceil_div(np.array([a]), np.array([b]))[0]
    assert scalar == array
    # The ceiling of the exact quotient (1 / 0.333... is just above 3: 4), within float rounding of a / b.
    assert a / b * (1 - 1e-12) <= scalar <= a / b * (1 + 1e-12) + 1
