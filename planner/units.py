"""Human-readable numbers, the single formatting module (the UI imports these too).

Memory is shown in GiB (2^30 bytes); rates in SI (TB/s = 1e12 B/s, TFLOP/s = 1e12 FLOP/s).
Precision is deliberately limited: the estimates are not better than ~5-10 %.
"""

from __future__ import annotations

import math

GIB = float(1 << 30)
MIB = float(1 << 20)


def _sig(value: float, digits: int = 3) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def gib(num_bytes: float, digits: int = 3) -> str:
    if num_bytes is None or not math.isfinite(num_bytes):
        return "n/a"
    if abs(num_bytes) < 0.1 * GIB:
        return f"{_sig(num_bytes / MIB, digits)} MiB"
    return f"{_sig(num_bytes / GIB, digits)} GiB"


def seconds(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    if value < 1e-3:
        return f"{_sig(value * 1e6, 2)} µs"
    if value < 1:
        return f"{_sig(value * 1e3, 3)} ms"
    if value < 120:
        return f"{_sig(value, 3)} s"
    if value < 7200:
        return f"{_sig(value / 60, 3)} min"
    if value < 3 * 86400:
        return f"{_sig(value / 3600, 3)} h"
    return f"{_sig(value / 86400, 3)} days"


def rate(value: float | None, unit: str) -> str:
    """SI-prefixed rate: rate(3.35e12, 'B/s') -> '3.35 TB/s'; None (not measured) -> 'n/a'."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{_sig(value / factor)} {prefix}{unit}"
    return f"{_sig(value)} {unit}"


def count(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{_sig(value / factor)}{suffix}"
    return _sig(value)


def usd(value: float) -> str:
    """'$0.78', '$12.50', '$715', '$48,200', '$1.62M', '$3.10B': three significant figures from a million up."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(value) >= factor:
            return f"${_sig(value / factor)}{suffix}"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${_sig(value, 2)}"


def percent(fraction: float, digits: int = 0) -> str:
    if fraction is None or not math.isfinite(fraction):
        return "n/a"
    return f"{fraction * 100:.{digits}f}%"


def per_second(value: float | None, unit: str = "req/s", digits: int = 2) -> str:
    """'14 req/s', '3.0 req/s', '0.52 req/s', '1,400 req/s': two significant figures by default (a simulated
    rate from a bisection over a few hundred requests is not better); None or not finite -> 'n/a'."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if abs(value) >= 10**digits:
        value = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{_sig(value, digits)} {unit}"


# ------------------------------------------------------------------------------ energy (two significant figures:
# a linear power model between datasheet figures is not better than that)


def _two_figures(value: float) -> str:
    """Rounded to two significant figures, whatever the magnitude: 666 -> '670', 0.0613 -> '0.061'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = round(value, 1 - math.floor(math.log10(abs(value))))
    magnitude = math.floor(math.log10(abs(rounded)))  # 9.96 rounds up to 10: two figures are then '10'
    return f"{rounded:,.{max(0, 1 - magnitude)}f}"


def _prefixed(value: float | None, unit: str, prefixes: tuple[tuple[float, str], ...]) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, prefix in prefixes:
        if abs(value) >= factor:
            return f"{_two_figures(value / factor)} {prefix}{unit}"
    return f"{_two_figures(value)} {unit}"


def watts(value: float | None) -> str:
    """'670 W', '2.7 kW', '1.2 MW' (two significant figures)."""
    return _prefixed(value, "W", ((1e9, "G"), (1e6, "M"), (1e3, "k")))


def kwh(value: float | None) -> str:
    """Energy given in kWh: '0.48 kWh', '19 kWh', '1.9 MWh', '3.4 GWh' (two significant figures)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, unit in ((1e6, "GWh"), (1e3, "MWh")):
        if abs(value) >= factor:
            return f"{_two_figures(value / factor)} {unit}"
    return f"{_two_figures(value)} kWh"


def kg(value: float | None) -> str:
    """Mass given in kg: '0.19 kg', '7.4 kg', '1.2 t', '3.4 kt' (two significant figures; t = 1,000 kg)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, unit in ((1e6, "kt"), (1e3, "t")):
        if abs(value) >= factor:
            return f"{_two_figures(value / factor)} {unit}"
    return f"{_two_figures(value)} kg"


def usd_compact(value: float | None) -> str:
    """A bill to two or three significant figures: '$970', '$3.7k', '$29k', '$212k', '$1.2M'."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if abs(value) >= 1e6 or abs(value) < 1e3:
        return usd_approx(value)
    return f"${value / 1e3:,.0f}k" if abs(value) >= 1e4 else f"${value / 1e3:,.1f}k"


def usd_approx(value: float | None) -> str:
    """Dollars to two significant figures: '$0.061', '$2.4', '$1,200', '$1.2M'."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(value) >= factor:
            return f"${_two_figures(value / factor)}{suffix}"
    return f"${_two_figures(value)}"
