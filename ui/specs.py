"""Widget specs: one bound scenario field each (its widget, range, help and section)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.scenario_base import MAX_GPUS


@dataclass(frozen=True)
class Spec:
    """One bound scenario field: its widget, the range the widget can show, and where it sits."""

    name: str
    label: str
    widget: str  # int | float | optional_float | slider_int | slider_float | select | toggle | text | textarea
    lo: float | None = None
    hi: float | None = None
    step: float | None = None
    options: tuple = ()
    fmt: str | None = None
    help: str | None = None
    max_chars: int | None = None
    section: str = "workload"
    column: int | None = None  # 0/1: shares a row with the next spec of the same section
    scale: float = 1.0  # scenario value = widget value x scale (only for unbound specs)
    bound: bool = True  # False: the widget shows scaled units, so this module writes its URL parameter

    def to_widget(self, value: Any) -> Any:
        return value if value is None or self.scale == 1.0 else value / self.scale

    def from_widget(self, value: Any) -> Any:
        return value if value is None or self.scale == 1.0 else value * self.scale

    def accepts(self, value: Any) -> bool:
        if self.widget in ("optional_float", "optional_int") and value is None:
            return True
        value = self.to_widget(value)
        if self.widget in ("int", "slider_int", "optional_int"):
            return isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi
        if self.widget in ("float", "optional_float", "slider_float"):
            return isinstance(value, (int, float)) and math.isfinite(value) and self.lo <= value <= self.hi
        if self.widget == "select":
            return value in self.options
        if self.widget == "toggle":
            return isinstance(value, bool)
        if self.widget in ("text", "textarea"):
            return isinstance(value, str) and (self.max_chars is None or len(value) <= self.max_chars)
        return True

    def describe(self) -> str:
        if self.widget == "select":
            return "one of " + ", ".join(map(str, self.options))
        if self.lo is not None:
            return f"{self.lo * self.scale:,g} to {self.hi * self.scale:,g}"
        return "a valid value"

    def same(self, a: Any, b: Any) -> bool:
        if self.widget in ("float", "optional_float", "slider_float") and a is not None and b is not None:
            return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
        return a == b


_TP_HELP = (
    "Tensor parallelism: every layer is split over this many GPUs (all-reduces twice per layer). "
    "Must divide the attention heads."
)
_PP_HELP = "Pipeline parallelism: layers are split into this many stages (one GPU group each)."

COMMON_LAYOUT = (
    Spec(
        "num_gpus",
        "GPUs",
        "int",
        1,
        MAX_GPUS,
        1,
        section="hardware",
        help="GPUs in the deployment. A multiple of TP × PP; every extra group is another replica.",
    ),
    Spec("tensor_parallel", "TP (tensor)", "int", 1, 1024, 1, section="layout", column=0, help=_TP_HELP),
    Spec("pipeline_parallel", "PP (pipeline)", "int", 1, 1024, 1, section="layout", column=1, help=_PP_HELP),
)
