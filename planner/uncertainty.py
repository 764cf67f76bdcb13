"""Error bands: how far to trust each headline number, from Headroom's own measured error.

`benchmarks/accuracy.py` plans every usable published measurement and writes, per family, its signed
errors' summary and its band to `planner/accuracy.json`. A band's edges are two signed errors e_lo <= e_hi
(`band_edges`): the measured value behind a prediction P lies in [P / (1 + e_hi), P / (1 + e_lo)] exactly
when that case's error e = (P - measured) / measured lies in [e_lo, e_hi]. The band promises to hold the
measured value for 80 % of cases (PROMISED), and the promise is checked by leaving each case out
(`loo_coverage`): build the band from the others, see whether the left-out case falls inside. Edges use
split-conformal ranks, so the left-out check holds >= 80 % wherever the family has enough cases; with few
cases the band is symmetric or, with three or fewer, at least the +-50 % of an unmeasured family. The band
always contains P. A calibration on the user's own device replaces the published spread with its own
residual error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

SUMMARY_FILE = Path(__file__).with_name("accuracy.json")
# The training corpus's families (benchmarks/training_accuracy.py: published runs of 8+ publishers, dense and MoE):
# what a training plan's step-time range reads, where present.
TRAINING_SUMMARY_FILE = Path(__file__).with_name("training_accuracy.json")
PROMISED = 0.8  # the share of a family's cases its band promises to hold
# With no measurement for a family, say so with a wide, symmetric +-50 %; with too few, never claim less.
UNMEASURED_SPREAD = 0.5
UNMEASURED = {"p10_signed_error": -UNMEASURED_SPREAD, "p90_signed_error": UNMEASURED_SPREAD, "cases": 0}
# Memory terms are computed from exact byte counts; below this spread we do not claim better.
FLOOR = 0.02
# An error below this would put the measured value beyond 20 x the prediction: the band stops there.
LOWEST_ERROR = -0.95
# With fewer cases, leaving one out leaves three or fewer: the check then tests the +-50 % fallback, not the
# band in use, so the promise is reported as untested.
MIN_TESTED_CASES = 5
_EPS = 1e-9  # (1 - 0.8) / 2 * 10 is 0.9999999999999998 in floating point


def _floored(low: float, high: float) -> tuple[float, float]:
    return max(min(low, -FLOOR), LOWEST_ERROR), max(high, FLOOR)


def band_edges(errors: Sequence[float], promised: float = PROMISED) -> tuple[float, float]:
    """The band's edges (e_lo, e_hi), signed errors, from a family's n signed errors.

    - Enough cases for both edges (n >= 9 at 80 %): the k_lo-th and k_hi-th smallest error, with
      k_lo = floor(0.1 (n + 1)) and k_hi = ceil(0.9 (n + 1)) (split-conformal ranks: a new case exchangeable
      with these lands inside with probability >= 80 %; Vovk et al., *Algorithmic Learning in a Random World*,
      2005; Lei et al., JASA 2018). E.g. 22 cases: the 2nd smallest and the 2nd largest.
    - Enough for one symmetric edge (4 <= n <= 8): +-q, q the ceil(0.8 (n + 1))-th smallest |error|.
    - Fewer: +-max(50 %, the largest |error|), never narrower than an unmeasured family's band.
    Then the FLOOR (+-2 %) and LOWEST_ERROR apply.
    """
    ordered = sorted(errors)
    n = len(ordered)
    tail = (1 - promised) / 2
    k_lo, k_hi = math.floor(tail * (n + 1) + _EPS), math.ceil((1 - tail) * (n + 1) - _EPS)
    if k_lo >= 1 and k_hi <= n:
        return _floored(ordered[k_lo - 1], ordered[k_hi - 1])
    absolute = sorted(abs(e) for e in ordered)
    k = math.ceil(promised * (n + 1) - _EPS)
    q = absolute[k - 1] if 1 <= k <= n else max([UNMEASURED_SPREAD, *absolute])
    return _floored(-q, q)


def band_rule(cases: int, promised: float = PROMISED) -> str:
    """In words, which of `band_edges`'s rules a family of `cases` cases gets."""
    tail = (1 - promised) / 2
    k_lo, k_hi = math.floor(tail * (cases + 1) + _EPS), math.ceil((1 - tail) * (cases + 1) - _EPS)
    if k_lo >= 1 and k_hi <= cases:
        return f"signed errors ranked {k_lo} and {k_hi} of {cases}"
    k = math.ceil(promised * (cases + 1) - _EPS)
    if 1 <= k <= cases:
        return f"+- the absolute error ranked {k} of {cases} (too few cases for two one-sided edges)"
    return f"+- max({UNMEASURED_SPREAD:.0%}, the largest absolute error): too few cases to place an edge"


def loo_coverage(
    errors: Sequence[float], groups: Sequence[Hashable] | None = None, promised: float = PROMISED
) -> tuple[int, int]:
    """(held, cases): for each case, the band built from the other cases (`band_edges`) and whether the case's
    error falls inside it (inclusive). With `groups`, every case of the left-out case's group is left out too
    (e.g. the metrics of one benchmark run, which share its setup and move together)."""
    held = 0
    for i, error in enumerate(errors):
        others = [e for j, e in enumerate(errors) if (groups[j] != groups[i] if groups is not None else j != i)]
        low, high = band_edges(others, promised)
        held += low <= error <= high
    return held, len(errors)


def band_summary(
    errors: Sequence[float],
    groups: Sequence[Hashable] | None = None,
    promised: float = PROMISED,
    group_name: str = "run",
) -> dict:
    """What accuracy.json stores as a family's "band": its edges from all cases and the left-out check.

    Where the left-out check falls short of the promise (cases that move together, e.g. one run's metrics
    left out as a group), the band is widened: its edges are taken at the lowest level (the promise, then up
    in steps of 1 %) whose left-out check holds the promise. That level is chosen on the same cases, so the
    reported coverage is a little optimistic there; `level` says when it happened.
    """
    level = promised
    held, cases = loo_coverage(errors, groups, level)
    while cases >= MIN_TESTED_CASES and held < promised * cases - _EPS and level < 0.99 - _EPS:
        level = round(level + 0.01, 2)
        held, cases = loo_coverage(errors, groups, level)
    low, high = band_edges(errors, level)
    return {
        "promised_coverage": promised,
        "level": level,
        "low_error": low,
        "high_error": high,
        "rule": band_rule(len(errors), level),
        "loo_held": held,
        "loo_cases": cases,
        "loo_coverage": held / cases if cases else 0.0,
        "loo_by": group_name if groups is not None else "case",
        "tested": cases >= MIN_TESTED_CASES,
    }


def coverage_notes(band_stats: dict) -> list[str]:
    """Why a band's left-out check says less than it seems: too few cases, short of the promise, or widened."""
    notes = []
    if not band_stats["tested"]:
        notes.append(f"too few cases to test the promise (fewer than {MIN_TESTED_CASES})")
    elif band_stats["loo_coverage"] < band_stats["promised_coverage"] - _EPS:
        notes.append("short of the promise")
    if band_stats.get("level", band_stats["promised_coverage"]) > band_stats["promised_coverage"] + _EPS:
        notes.append(f"edges widened to the {band_stats['level']:.0%} level to keep it")
    return notes


def coverage_text(stats: dict) -> str:
    """'80% band; held 82% of 22 cases when each was left out' (+ why, when untested, short or widened)."""
    b = stats.get("band")
    if not b:
        return f"{PROMISED:.0%} band; not checked on left-out cases"
    each = f"each {b['loo_by']}" if b.get("loo_by", "case") != "case" else "each"
    text = (
        f"{b['promised_coverage']:.0%} band; held {b['loo_coverage']:.0%} of {b['loo_cases']} cases "
        f"when {each} was left out"
    )
    return "; ".join([text, *coverage_notes(b)])


class Band(BaseModel):
    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    family: str
    basis: str  # where the spread comes from

    def proportional(self, point: float, value: float, inverse: bool = False) -> Band:
        """The band of a quantity exactly proportional to this band's quantity (`inverse`: to its reciprocal),
        whose value is `value` where this band's quantity is `point`: the same relative spread.

        E.g. at a fixed price, GPU count and token count, time and cost to train move with step time, and
        tokens/s with 1 / step time.
        """
        if not point or not math.isfinite(value):
            return Band(low=value, high=value, family=self.family, basis=self.basis)
        low, high = value * self.low / point, value * self.high / point
        if inverse:
            low, high = value * point / self.high, value * point / self.low
        return Band(low=min(low, high), high=max(low, high), family=self.family, basis=self.basis)


@lru_cache(maxsize=1)
def family_errors() -> dict[str, dict]:
    """Every family's error summary: the in-house families (accuracy.json) and the training corpus's
    (training_accuracy.json), each read on its own so that one missing file leaves the other."""
    families: dict[str, dict] = {}
    for path in (SUMMARY_FILE, TRAINING_SUMMARY_FILE):
        try:
            families.update(json.loads(path.read_text())["families"])
        except (OSError, ValueError, KeyError):
            pass
    return families


@lru_cache(maxsize=1)
def serving_errors() -> dict:
    """The serving family's summary (the traffic simulator against published runs): reported, on no plan number."""
    try:
        return json.loads(SUMMARY_FILE.read_text()).get("serving", {})
    except (OSError, ValueError):
        return {}


def band(point: float, family: str, calibration=None) -> Band:
    stats = family_errors().get(family, UNMEASURED)
    basis = (
        f"{stats['cases']} published measurements ({stats.get('generated_by', 'benchmarks/accuracy.py')}); "
        f"{coverage_text(stats)}"
        if stats["cases"]
        else "no published measurement yet: +-50 %"
    )
    edges = stats.get("band")  # schema 2; a summary without it falls back to the 10th-90th percentile
    e10, e90 = (
        (edges["low_error"], edges["high_error"]) if edges else (stats["p10_signed_error"], stats["p90_signed_error"])
    )
    residual = getattr(calibration, "residual_error", None)
    if residual is not None:
        e10, e90 = -abs(residual), abs(residual)
        basis = f"calibration '{getattr(calibration, 'label', '')}' residual error"
    e10, e90 = min(e10, -FLOOR), max(e90, FLOOR)
    low, high = point / (1 + e90), point / (1 + max(e10, LOWEST_ERROR))
    return Band(low=min(low, point), high=max(high, point), family=family, basis=basis)


def inference_bands(
    total_bytes: float,
    ttft: float,
    tpot: float,
    tokens_per_second: float,
    calibration=None,
    sequences_per_replica: float = 2.0,
) -> dict[str, Band]:
    """The plan's bands. Output tokens/s is sequences / TPOT, so the two read one family and carry the same
    relative error, reciprocally: the batch-1 decode family for one sequence per replica, the loaded (max
    throughput) family otherwise, whose cases run tens to thousands of sequences."""
    family = "decode_speed" if sequences_per_replica <= 1 else "max_throughput"
    rate = band(tokens_per_second, family, calibration)
    return {
        "memory.total_bytes": band(total_bytes, "memory", calibration),
        "performance.ttft_seconds": band(ttft, "ttft", calibration),
        "performance.tpot_seconds": rate.proportional(tokens_per_second, tpot, inverse=True),
        "performance.output_tokens_per_second": rate,
    }


def training_family(is_moe: bool) -> str:
    """The family a training plan's step-time range reads: the training corpus's dense or MoE family (published
    runs of other publishers, benchmarks/training_accuracy.py) where it is summarised, else the in-house Megatron
    family."""
    corpus = "training_moe" if is_moe else "training_dense"
    return corpus if corpus in family_errors() else "training_step"


def training_bands(total_bytes: float, step_seconds: float, calibration=None, is_moe: bool = False) -> dict[str, Band]:
    # Training accuracy is measured as achieved throughput (FLOP/s, tokens/s), the reciprocal of step time.
    family = training_family(is_moe)
    rate = band(1 / step_seconds, family, calibration)
    return {
        "memory.total_bytes": band(total_bytes, "memory", calibration),
        "performance.step_seconds": Band(low=1 / rate.high, high=1 / rate.low, family=family, basis=rate.basis),
    }


# ------------------------------------------------------------------------------------ traffic ranges

REGIME_RULE = (
    "A regime is the run's model kind (dense / MoE), GPUs per replica (one GPU / several), GPU vendor (the catalog "
    "accelerator's) and engine."
)
VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple"}
# The serving metric kinds a traffic range reads (accuracy.json "serving" -> "ranges"), and which published
# statistics each pools: a kind's spread holds for its mean and every percentile alike (too few published
# percentiles to give each its own).
TRAFFIC_RANGE_KINDS = {"ttft": ("ttft",), "tpot": ("tpot", "itl"), "throughput": ("throughput",)}
# A regime gets its own range only with runs from at least this many sources (so that leaving one out still
# leaves a range to test) and enough cases for two one-sided edges at 80 % (band_edges); otherwise the pooled one.
REGIME_MIN_SOURCES = 2
REGIME_MIN_CASES = 9


def serving_regime(is_moe: bool, gpus_per_replica: int, vendor: str, engine: str) -> str:
    """dense/MoE x one GPU/several x vendor x engine: the label a published run and a plan share (REGIME_RULE)."""
    kind = "MoE" if is_moe else "dense"
    gpus = "1 GPU" if gpus_per_replica == 1 else "multi-GPU"
    return f"{kind}, {gpus}, {VENDOR_NAMES.get(vendor, vendor)}, {engine}"


def engine_of_runtime(runtime: str) -> str:
    """The engine a runtime key serves with: 'vllm@0.6' -> 'vllm', 'tensorrt-llm-engine' -> 'tensorrt-llm'."""
    return runtime.split("@", 1)[0].removesuffix("-engine")


class TrafficRange(BaseModel):
    """How far a traffic metric kind's simulated value is from measured ones: the signed-error edges of its band
    (`band_edges`, the measured value within [P / (1 + high_error), P / (1 + low_error)]), where they come from,
    and how often they held a source's runs when that source was left out."""

    model_config = ConfigDict(frozen=True)

    kind: str
    low_error: float
    high_error: float
    regime: str | None  # the regime whose runs set the edges; None: every regime pooled
    basis: str
    loo_coverage: float | None  # share of cases inside the band built without their source; None: not tested

    def interval(self, point: float) -> tuple[float, float]:
        """The likely measured value of a simulated `point` (an interval that contains it)."""
        if not math.isfinite(point):
            return (point, point)
        low = point / (1 + self.high_error)
        high = point / (1 + max(self.low_error, LOWEST_ERROR))
        return (min(low, point), max(high, point))


def _range_of(kind: str, stats: dict | None, regime: str | None, scope: str) -> TrafficRange | None:
    if not stats or "band" not in stats:
        return None
    b = stats["band"]
    coverage = b["loo_coverage"] if b.get("tested") else None
    held = f"{b['loo_coverage']:.0%} held with their source left out" if b.get("tested") else "too few to test"
    widened = [note for note in coverage_notes(b) if "widened" in note]
    basis = f"{scope}, {b['loo_cases']} statistics from {stats.get('sources', '?')} sources, {held}" + "".join(
        f" ({note})" for note in widened
    )
    low, high = _floored(b["low_error"], b["high_error"])
    return TrafficRange(kind=kind, low_error=low, high_error=high, regime=regime, basis=basis, loo_coverage=coverage)


def regime_range_usable(stats: dict) -> bool:
    """Whether a regime's own range (accuracy.json serving.ranges.<kind>.regimes.<regime>) is the one its plans read:
    runs from at least REGIME_MIN_SOURCES sources and REGIME_MIN_CASES statistics."""
    return stats.get("sources", 0) >= REGIME_MIN_SOURCES and stats["band"]["loo_cases"] >= REGIME_MIN_CASES


def traffic_range(kind: str, regime: str, ranges: dict | None = None) -> TrafficRange:
    """The range a simulated `kind` ('ttft', 'tpot' or 'throughput') gets in `regime`: the regime's own band
    where enough sources measured it (REGIME_MIN_SOURCES, REGIME_MIN_CASES), else every regime's pooled, else
    the +-50 % of an unmeasured family. `ranges`: the summary's "ranges" to read (default: the committed
    accuracy.json's; the decisions check passes ranges rebuilt without a source)."""
    entry: dict = (serving_errors().get("ranges", {}) if ranges is None else ranges).get(kind, {})
    own = entry.get("regimes", {}).get(regime)
    if own and regime_range_usable(own):
        found = _range_of(kind, own, regime, "this regime's runs")
    else:
        found = _range_of(kind, entry.get("all"), None, "every regime's runs")
    if found is not None:
        return found
    return TrafficRange(
        kind=kind,
        low_error=-UNMEASURED_SPREAD,
        high_error=UNMEASURED_SPREAD,
        regime=None,
        basis="no published measurement yet: +-50 %",
        loo_coverage=None,
    )
