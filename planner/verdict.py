"""Verdicts that respect the error band: a target is met only when the whole likely range meets it.

Every headline number P of a plan comes with a likely range [low, high] (`plan.uncertainty`, see
planner.uncertainty: where the measured value fell for 80 % of the known cases). Against a target T:

    at most T (latency, memory, cost, time):  met if high <= T,  missed if low > T,  at risk otherwise
    at least T (throughput):                  met if low >= T,   missed if high < T, at risk otherwise

so "at risk" means the range straddles the target, whichever side the point estimate is on. A number
with no band of its own either moves exactly with a banded one (training cost and time with the step
time: `Band.proportional`) or is exact (GPU count x price x hours: low = high = P).

`verdicts(plan, targets)` gives the memory verdict (the budget each GPU may use) and one verdict per
target that is set and applies to the plan's kind, each with one plain sentence. Plans are read
duck-typed (an InferencePlan or TrainingPlan), so this module sits beside planner.uncertainty, below
both plan kinds, and the search can use `judge` on whole arrays of candidates later.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner import units
from planner.arrays import where
from planner.uncertainty import Band

Status = Literal["met", "at_risk", "missed"]
Direction = Literal["at_most", "at_least"]

_NUMBER_THEN_UNIT = re.compile(r"^(\$?[-0-9.,]+)(\s*)([^0-9]*)$")
EXACT_BASIS = "exact: the number of GPUs x the price per GPU-hour x the hours"


def judge(low, high, target, direction: Direction = "at_most") -> Any:
    """Met when the whole range [low, high] meets the target, missed when none of it does, else at risk.

    Broadcasts (DESIGN rule 4): floats give one Status, numpy arrays (a sweep's candidates) an array of them.
    """
    if direction == "at_most":
        whole, none = high <= target, low > target
    else:
        whole, none = low >= target, high < target
    return where(whole, "met", where(none, "missed", "at_risk"))


def span(low: float, high: float, formatter: Callable[[float], str]) -> str:
    """'38.2–44.1 GiB' when both ends share a unit, else '950 ms–1.20 s'; one value when both read the same."""
    a, b = formatter(low), formatter(high)
    if a == b:
        return a
    ma, mb = _NUMBER_THEN_UNIT.match(a), _NUMBER_THEN_UNIT.match(b)
    if ma and mb and ma.group(2, 3) == mb.group(2, 3):
        dollar = "$" if a.startswith("$") else ""
        lo, hi = ma.group(1).lstrip("$"), mb.group(1).lstrip("$")
        return f"{dollar}{lo}–{hi}{ma.group(2)}{ma.group(3)}"
    return f"{a}–{b}"


class Targets(BaseModel):
    """What a reviewer asks of a plan; None = no target. Units in the names, raw (seconds, dollars)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_ttft_seconds: float | None = Field(default=None, gt=0)
    max_tpot_seconds: float | None = Field(default=None, gt=0)
    max_usd_per_month: float | None = Field(default=None, gt=0)
    max_training_usd: float | None = Field(default=None, gt=0)
    max_training_seconds: float | None = Field(default=None, gt=0)


class Verdict(BaseModel):
    """One number against one target, with the range it likely falls in and a sentence saying so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str  # plain name: "time per output token"
    path: str  # the plan's dotted field: "performance.tpot_seconds"
    status: Status
    value: float
    low: float
    high: float
    target: float
    direction: Direction
    unit: Literal["seconds", "bytes", "usd"]
    basis: str  # where the likely range comes from
    headline: str  # "Misses the latency target"
    sentence: str  # headline, the number, its range, the target and what the range says, in one sentence

    @property
    def point_meets(self) -> bool:
        """Whether the point estimate alone meets the target (an at-risk verdict can go either way)."""
        return self.value <= self.target if self.direction == "at_most" else self.value >= self.target


@dataclass(frozen=True)
class _Wording:
    """How one kind of target is said: the headline per status, the number, the target, the verb."""

    met: str
    at_risk: str
    missed: str
    what: str  # "each output token takes {value}"
    against: str  # "against a target of at most {target}"
    meets: str = "meets it"
    fails: str = "does not"


_FORMAT: dict[str, Callable[[float], str]] = {"seconds": units.seconds, "bytes": units.gib, "usd": units.usd}

_LATENCY = ("Meets the latency target", "At risk on the latency target", "Misses the latency target")
_WORDING = {
    "memory": _Wording(
        "Fits in GPU memory",
        "May not fit in GPU memory",
        "Does not fit in GPU memory",
        "each GPU needs {value}",
        "of the {target} it may use",
        meets="fits",
        fails="does not",
    ),
    "ttft": _Wording(*_LATENCY, "the first token takes {value}", "against a target of at most {target}"),
    "tpot": _Wording(*_LATENCY, "each output token takes {value}", "against a target of at most {target}"),
    "usd_per_month": _Wording(
        "Within budget",
        "At risk of going over budget",
        "Over budget",
        "{value} per month",
        "against a budget of {target} per month",
    ),
    "training_usd": _Wording(
        "Within budget",
        "At risk of going over budget",
        "Over budget",
        "{value} to train",
        "against a budget of {target}",
    ),
    "training_seconds": _Wording(
        "Meets the deadline",
        "At risk of missing the deadline",
        "Misses the deadline",
        "training takes {value}",
        "against a deadline of {target}",
    ),
}


def _sentence(wording: _Wording, status: Status, point_meets: bool, value: str, likely: str, target: str) -> str:
    number = wording.what.format(value=value) + (f" (likely {likely})" if likely else "")
    head = {"met": wording.met, "at_risk": wording.at_risk, "missed": wording.missed}[status]
    text = f"{head}: {number} {wording.against.format(target=target)}"
    if not likely:  # an exact number: the comparison says it all
        return text + "."
    if status == "met":
        tail = f"the whole likely range {wording.meets}"
    elif status == "missed":
        tail = f"not even the best end of the likely range {wording.meets}"
    elif point_meets:
        tail = f"the estimate {wording.meets}, but the worst end of the likely range {wording.fails}"
    else:
        tail = f"the estimate {wording.fails}, but the best end of the likely range {wording.meets}"
    return f"{text}; {tail}."


def verdict(
    kind: str,
    metric: str,
    path: str,
    value: float,
    band: Band | None,
    target: float,
    unit: Literal["seconds", "bytes", "usd"],
    direction: Direction = "at_most",
) -> Verdict:
    """The verdict on one number: `band` None means the number is exact. `kind` picks the wording
    ('memory', 'ttft', 'tpot', 'usd_per_month', 'training_usd', 'training_seconds')."""
    low, high = (band.low, band.high) if band is not None else (value, value)
    status: Status = judge(low, high, target, direction)
    fmt = _FORMAT[unit]
    likely = span(low, high, fmt) if band is not None else ""
    point_meets = value <= target if direction == "at_most" else value >= target
    wording = _WORDING[kind]
    return Verdict(
        metric=metric,
        path=path,
        status=status,
        value=value,
        low=low,
        high=high,
        target=target,
        direction=direction,
        unit=unit,
        basis=band.basis if band is not None else EXACT_BASIS,
        headline={"met": wording.met, "at_risk": wording.at_risk, "missed": wording.missed}[status],
        sentence=_sentence(wording, status, point_meets, fmt(value), likely, fmt(target)),
    )


def _band(plan: Any, path: str) -> Band | None:
    return (getattr(plan, "uncertainty", None) or {}).get(path)


def _step_scaled(plan: Any, value: float) -> Band | None:
    """Training time and cost: the number of steps, GPUs and the price are fixed, so they move with step time."""
    step = _band(plan, "performance.step_seconds")
    return step.proportional(plan.performance.step_seconds, value) if step is not None else None


def memory_verdict(plan: Any) -> Verdict:
    """Does each GPU's memory (most loaded stage) fit in what it may use, across the likely range?"""
    mem = plan.memory
    return verdict(
        "memory",
        "memory per GPU",
        "memory.total_bytes",
        mem.total_bytes,
        _band(plan, "memory.total_bytes"),
        mem.budget_bytes,
        "bytes",
    )


def target_verdicts(plan: Any, targets: Targets) -> list[Verdict]:
    """One verdict per target that is set and applies to this plan's kind, in the order of `Targets`."""
    out = []
    if plan.kind == "inference":
        perf = plan.performance
        if targets.max_ttft_seconds is not None:
            path = "performance.ttft_seconds"
            out.append(
                verdict(
                    "ttft",
                    "time to first token",
                    path,
                    perf.ttft_seconds,
                    _band(plan, path),
                    targets.max_ttft_seconds,
                    "seconds",
                )
            )
        if targets.max_tpot_seconds is not None:
            path = "performance.tpot_seconds"
            out.append(
                verdict(
                    "tpot",
                    "time per output token",
                    path,
                    perf.tpot_seconds,
                    _band(plan, path),
                    targets.max_tpot_seconds,
                    "seconds",
                )
            )
        if targets.max_usd_per_month is not None:
            # Renting the GPUs costs the same however fast they run: the monthly cost is exact.
            out.append(
                verdict(
                    "usd_per_month",
                    "cost per month",
                    "cost.usd_per_month",
                    plan.cost.usd_per_month,
                    None,
                    targets.max_usd_per_month,
                    "usd",
                )
            )
        return out
    if targets.max_training_usd is not None:
        total = plan.cost.usd_total
        out.append(
            verdict(
                "training_usd",
                "cost to train",
                "cost.usd_total",
                total,
                _step_scaled(plan, total),
                targets.max_training_usd,
                "usd",
            )
        )
    if targets.max_training_seconds is not None:
        seconds = plan.performance.time_to_train_seconds
        out.append(
            verdict(
                "training_seconds",
                "time to train",
                "performance.time_to_train_seconds",
                seconds,
                _step_scaled(plan, seconds),
                targets.max_training_seconds,
                "seconds",
            )
        )
    return out


def verdicts(plan: Any, targets: Targets | None = None) -> list[Verdict]:
    """The memory verdict first, then one per target that is set and applies to this plan."""
    return [memory_verdict(plan), *target_verdicts(plan, targets or Targets())]


def overall(statuses: list[Status]) -> Status:
    """The worst status: one missed target misses the plan; one at risk puts it at risk."""
    return "missed" if "missed" in statuses else "at_risk" if "at_risk" in statuses else "met"
