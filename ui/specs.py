"""Widget specs: what a scenario field's widget needs that pydantic cannot know.

A spec names the field and says how to show it (label, section, column, widget kind, unit scale, step and
format). Everything the field itself knows (type, bounds, default, choices, length limit, help text) is
read from the pydantic field by ``field_facts``, so a widget's range can never drift from the validation.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any

import annotated_types

# Widget kinds: "number" (number_input; empty allowed when the field is optional), "slider" (float slider),
# "concurrency" (log-scale select_slider plus a number box for exact values), "select", "toggle", "text",
# "textarea", "multiselect" (a comma-separated text field offered as its choices: the field's "choices" in
# json_schema_extra, the names its own validator accepts).
WIDGETS = ("number", "slider", "concurrency", "select", "toggle", "text", "textarea", "multiselect")


@dataclass(frozen=True)
class Spec:
    """How one scenario field is shown. `scale`: scenario value = widget value x scale (e.g. 1e9 for billions)."""

    name: str
    label: str
    widget: str
    section: str = "workload"
    column: int | None = None  # 0/1: shares a row with the next spec of the same section
    scale: float = 1.0
    step: float | None = None
    fmt: str | None = None

    def __post_init__(self) -> None:
        if self.widget not in WIDGETS:
            raise ValueError(f"unknown widget kind {self.widget!r} for {self.name}")

    @property
    def bound(self) -> bool:
        """Bound to the URL by Streamlit: the widget holds the scenario's own units, so the URL text is the
        same as ``planner.share`` writes. A scaled widget (billions, GB/s) is not, nor a multiselect (a list,
        where the field and its URL parameter are one comma-separated text); ui.controls writes their
        parameters."""
        return self.scale == 1.0 and self.widget != "multiselect"

    def to_widget(self, value: Any) -> Any:
        if self.widget == "multiselect":
            return [name for name in value.split(",") if name]
        return value if value is None or self.scale == 1.0 else value / self.scale

    def from_widget(self, value: Any) -> Any:
        if self.widget == "multiselect":
            return ",".join(value)
        return value if value is None or self.scale == 1.0 else value * self.scale

    def same(self, a: Any, b: Any) -> bool:
        if isinstance(a, float) or isinstance(b, float):
            if a is None or b is None:
                return a is b
            return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
        return a == b


@dataclass(frozen=True)
class FieldFacts:
    """What the pydantic field says: value type, bounds (and whether they are exclusive), default, help."""

    kind: type  # int, float, bool or str
    optional: bool  # None is allowed
    default: Any
    lo: float | None = None
    lo_open: bool = False  # gt rather than ge
    hi: float | None = None
    hi_open: bool = False  # lt rather than le
    choices: tuple = ()  # Literal arguments, or a text field's names (json_schema_extra "choices")
    max_chars: int | None = None
    description: str | None = None

    def options(self) -> tuple:
        """The values a select can offer: the Literal's, or every int between inclusive bounds."""
        if self.choices:
            return self.choices
        if self.kind is int and self.lo is not None and self.hi is not None:
            first = int(self.lo) + (1 if self.lo_open else 0)
            last = int(self.hi) - (1 if self.hi_open else 0)
            if last - first <= 64:
                return tuple(range(first, last + 1))
        raise ValueError("this field has no finite set of choices")

    def widget_range(self, scale: float = 1.0) -> tuple[float | None, float | None]:
        """The smallest and largest value a widget may offer, in widget units (scenario / scale).

        Widgets only have inclusive limits: an exclusive bound becomes the next representable value inside
        it (the next int, or the next float after scaling).
        """
        lo = hi = None
        if self.lo is not None:
            lo = self.lo / scale
            if self.lo_open:
                lo = lo + 1 if self.kind is int else math.nextafter(lo, math.inf)
        if self.hi is not None:
            hi = self.hi / scale
            if self.hi_open:
                hi = hi - 1 if self.kind is int else math.nextafter(hi, -math.inf)
        if self.kind is int and scale == 1.0:
            lo = None if lo is None else int(lo)
            hi = None if hi is None else int(hi)
        return lo, hi

    def help(self) -> str | None:
        if not self.description:
            return None
        return self.description[0].upper() + self.description[1:]


def field_facts(cls: type, name: str) -> FieldFacts:
    """Read a scenario field's type, bounds, default, choices, length limit and description."""
    info = cls.model_fields[name]
    annotation = info.annotation
    args = typing.get_args(annotation)
    optional = type(None) in args
    if optional:
        (annotation,) = [a for a in args if a is not type(None)]
    extra = info.json_schema_extra
    choices: tuple = tuple(extra.get("choices", ())) if isinstance(extra, dict) else ()  # type: ignore[arg-type]
    if typing.get_origin(annotation) is typing.Literal:
        choices = typing.get_args(annotation)
        kind = type(choices[0])
    elif annotation in (int, float, bool, str):
        kind = annotation
    else:
        raise TypeError(f"{cls.__name__}.{name} ({annotation}) has no plain widget")
    facts: dict[str, Any] = {}
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            facts.update(lo=item.ge, lo_open=False)
        elif isinstance(item, annotated_types.Gt):
            facts.update(lo=item.gt, lo_open=True)
        elif isinstance(item, annotated_types.Le):
            facts.update(hi=item.le, hi_open=False)
        elif isinstance(item, annotated_types.Lt):
            facts.update(hi=item.lt, hi_open=True)
        elif isinstance(item, annotated_types.MaxLen):
            facts.update(max_chars=item.max_length)
    return FieldFacts(
        kind=kind,
        optional=optional,
        default=info.get_default(call_default_factory=True),
        choices=choices,
        description=info.description,
        **facts,
    )


COMMON_LAYOUT = (
    Spec("num_gpus", "GPUs", "number", section="hardware"),
    Spec("tensor_parallel", "TP (tensor)", "number", section="layout", column=0),
    Spec("pipeline_parallel", "PP (pipeline)", "number", section="layout", column=1),
)

# The site's energy figures (planner.physics.energy), both kinds: the plan's power, kWh, $ and CO2e read them.
ENERGY = (
    Spec("pue", "PUE (site power / IT power)", "number", section="more", step=0.05, fmt="%.2f"),
    Spec("electricity_usd_per_kwh", "Electricity ($ per kWh)", "number", section="more", step=0.01, fmt="%.3f"),
    Spec("carbon_kg_per_kwh", "Grid carbon (kg CO2e per kWh)", "number", section="more", step=0.01, fmt="%.3f"),
)

NOTES = (
    Spec("label", "Plan label", "text", section="notes"),
    Spec("decision", "Decision", "textarea", section="notes"),
)

# The serving engine and release: its memory accounting, scheduler and kernels (planner.physics.runtimes); inference only.
ENGINE = (Spec("runtime", "Serving engine and release (memory, scheduler, kernels)", "select", section="more"),)
